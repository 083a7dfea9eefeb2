"""in-toto Statements (v1) of a keracheck run: built from the run document, and checked.

One per case, predicateType :data:`PREDICATE_TYPE`, subject ``<path>:<function>`` with the
digests ``sha3_256`` (the graph fingerprint) and ``sha256`` of the same ``.keg`` bytes.  One run
summary, predicateType :data:`RUN_PREDICATE_TYPE`, whose subjects are every case's ``.keg`` and
whose predicate lists the SHA-256 of every case payload in file order: the bundle format itself
is not authenticated, the summary binds it (no line can be dropped, reordered or replayed from
another report).  Schema: ``schemas/predicate-v1.json``.

The statements hold the whole run document: :func:`run_from_statements` is the exact inverse
of building them (``keracheck show REPORT`` renders a signed report as ``run --format``
rendered the run).  Case-record fields the predicate does not name (its ``source`` position, say)
travel in the predicate under their own names; reports written before these fields existed
rebuild without them (``missing`` says which).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from keracheck.signing.dsse import JSON, EnvelopeError

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://kera.dev/attestation/determinism/v1"
RUN_PREDICATE_TYPE = "https://kera.dev/attestation/determinism-run/v1"

_RESULT_OF_VERDICT = {
    "agree": "PASSED",
    "diverge": "FAILED",
    "error": "FAILED",
    "skipped": "WARNED",
}


def case_result(case: Mapping[str, Any]) -> str:
    """PASSED | WARNED | FAILED (in-toto Test Result words); all-baselined divergence -> WARNED."""
    divergences = case.get("divergences") or []
    if (
        case["verdict"] == "diverge"
        and divergences
        and all(d.get("baselined") for d in divergences)
    ):
        return "WARNED"
    return _RESULT_OF_VERDICT[case["verdict"]]


def subject_for_case(case: Mapping[str, Any], keg_name: str | None = None) -> JSON:
    """The ResourceDescriptor of a case's ``.keg``: both digests, named ``<path>:<function>``."""
    keg = case["keg"]
    return {
        "name": keg_name or f"{case['path']}:{case['function']}",
        "digest": {"sha3_256": keg["sha3_256"], "sha256": keg["sha256"]},
    }


#: keys of a run document's target entry, in its order (keracheck.document.target_entry); the
#: predicate restates the first, and copies every other key of the entry (seconds, traceback)
_TARGET_RESTATED = ("status", "message", "loadedFingerprint", "outputs", "artifacts")
_TARGET_KEYS = ("status", "message", "traceback", "loadedFingerprint", "seconds", "artifacts")


def _target_record(result: Mapping[str, Any]) -> JSON:
    outputs = [
        {k: o[k] for k in ("index", "dtype", "shape")} | {"digest": {"sha256": o["sha256"]}}
        for o in result.get("outputs") or []
    ]
    artifacts = [
        {"name": name, "digest": {"sha256": digest}}
        for name, digest in (result.get("artifacts") or {}).items()
    ]
    return {
        "status": result["status"],
        "message": result.get("message"),
        "loadedFingerprint": result.get("loadedFingerprint"),
        "outputs": outputs,
        "artifacts": artifacts,
    } | {k: v for k, v in result.items() if k not in _TARGET_RESTATED}


def _toolchains(case: Mapping[str, Any], run: Mapping[str, Any]) -> JSON:
    versions = {t["id"]: t.get("versions") or {} for t in run.get("targets") or []}
    return {target: versions.get(target, {}) for target in sorted(case["targets"])}


def _inputs_record(inputs: Mapping[str, Any]) -> JSON:
    digests = inputs.get("digests") or {}
    return {
        "seed": inputs.get("seed"),
        "n": inputs.get("n"),
        "source": inputs.get("source"),
        **({"profile": inputs["profile"]} if "profile" in inputs else {}),
        "digests": {name: {"sha256": digest} for name, digest in digests.items()},
    }


#: keys of a run document's case record, in its order (keracheck.document.case_document); the
#: predicate restates these, and carries any other key of the case under its own name
_CASE_KEYS = (
    "fingerprint", "path", "function", "source", "verdict", "keg", "inputs", "targets",
    "divergences", "repro",
)  # fmt: skip
_CASE_RESTATED = frozenset(_CASE_KEYS) - {"source"}
#: the predicate's own fields: every other field of a case predicate is a case-record key
_PREDICATE_KEYS = frozenset(
    {"fingerprint", "verdict", "result", "targets", "toolchains", "inputs", "divergences"}
    | {"repro", "tool", "startedOn", "finishedOn", "kegSize"}
)


def statement_for_case(
    case: Mapping[str, Any], run: Mapping[str, Any], keg_name: str | None = None
) -> JSON:
    """The in-toto Statement v1 attesting one case (see schemas/predicate-v1.json)."""
    info = run.get("run") or {}
    predicate = {
        "fingerprint": case["fingerprint"],
        "verdict": case["verdict"],
        "result": case_result(case),
        "targets": {t: _target_record(r) for t, r in sorted(case["targets"].items())},
        "toolchains": _toolchains(case, run),
        "inputs": _inputs_record(case.get("inputs") or {}),
        "divergences": list(case.get("divergences") or []),
        "repro": case.get("repro"),
        "tool": dict(run.get("tool") or {}),
        "startedOn": info.get("startedOn"),
        "finishedOn": info.get("finishedOn"),
    }
    if "size" in (case.get("keg") or {}):
        predicate["kegSize"] = case["keg"]["size"]
    predicate |= {k: v for k, v in case.items() if k not in _CASE_RESTATED}
    return {
        "_type": STATEMENT_TYPE,
        "subject": [subject_for_case(case, keg_name)],
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate,
    }


def run_result(run: Mapping[str, Any]) -> str:
    """The run's PASSED | WARNED | FAILED: the worst of its cases (PASSED when there are none)."""
    order = ("PASSED", "WARNED", "FAILED")
    results = [case_result(c) for c in run.get("cases") or []]
    return max(results, key=order.index, default="PASSED")


def statement_for_run(
    run: Mapping[str, Any], case_payloads: Sequence[bytes], audit: Mapping[str, Any] | None = None
) -> JSON:
    """The run-summary Statement; ``case_payloads`` are the case payload bytes, in file order;
    ``audit``: the run's audit log (``keracheck.security``), carried as ``predicate.audit``."""
    cases = run.get("cases") or []
    if len(case_payloads) != len(cases):
        raise ValueError(f"{len(case_payloads)} case payloads for {len(cases)} cases")
    listed = [
        {
            "name": subject_for_case(case)["name"],
            "fingerprint": case["fingerprint"],
            "verdict": case["verdict"],
            "statement": {"sha256": hashlib.sha256(payload).hexdigest()},
        }
        for case, payload in zip(cases, case_payloads, strict=True)
    ]
    predicate = {
        "result": run_result(run),
        "summary": dict(run.get("summary") or {}),
        "run": dict(run.get("run") or {}),
        "tool": dict(run.get("tool") or {}),
        "targets": [dict(t) for t in run.get("targets") or []],
        "errors": list(run.get("errors") or []),
        "staleBaseline": list(run.get("staleBaseline") or []),
        "cases": listed,
    }
    if "sandbox" in run:  # how the targets ran: mode, mechanisms, violations
        predicate["sandbox"] = dict(run["sandbox"])
    if audit is not None:
        predicate["audit"] = dict(audit)
    return {
        "_type": STATEMENT_TYPE,
        "subject": [subject_for_case(case) for case in cases],
        "predicateType": RUN_PREDICATE_TYPE,
        "predicate": predicate,
    }


def parse_statement(payload: bytes) -> JSON:
    """An authenticated payload as a Statement of ours, or EnvelopeError saying what it lacks."""
    try:
        statement = json.loads(payload)
    except RecursionError:
        raise EnvelopeError("payload is not JSON (nested too deeply)") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise EnvelopeError(f"payload is not JSON ({exc})") from None
    if not isinstance(statement, dict) or statement.get("_type") != STATEMENT_TYPE:
        raise EnvelopeError(f"payload is not an in-toto Statement v1 ({STATEMENT_TYPE})")
    subjects = statement.get("subject")
    if not isinstance(subjects, list) or not all(_is_subject(s) for s in subjects):
        raise EnvelopeError("statement subjects lack a name or sha3_256/sha256 digests")
    if statement.get("predicateType") not in (PREDICATE_TYPE, RUN_PREDICATE_TYPE):
        raise EnvelopeError(f"unknown predicateType {statement.get('predicateType')!r}")
    if not isinstance(statement.get("predicate"), dict):
        raise EnvelopeError("statement has no predicate object")
    return statement


def _is_subject(subject: Any) -> bool:
    if not isinstance(subject, dict) or not isinstance(subject.get("name"), str):
        return False
    digest = subject.get("digest")
    return isinstance(digest, dict) and {"sha3_256", "sha256"} <= set(digest)


# --------------------------------------------------------------------------------- the inverse


def run_from_statements(
    cases: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]], summary: Mapping[str, Any]
) -> tuple[JSON, list[str]]:
    """The run document a report was written from: ``cases`` are (subject, predicate) of each
    case statement in file order, ``summary`` the run predicate.  Exact (the same JSON, key
    order included) for reports of this version; ``missing`` names what an older report did
    not record, which the document then lacks."""
    from keracheck.document import SCHEMA_VERSION

    missing: set[str] = set()
    order = list((summary.get("run") or {}).get("targets") or [])
    docs = [_case_from(subject, predicate, order, missing) for subject, predicate in cases]
    for key, words in (("errors", "input errors"), ("staleBaseline", "stale baseline entries")):
        if key not in summary:
            missing.add(words)
    run = {
        "schemaVersion": SCHEMA_VERSION,
        "tool": dict(summary.get("tool") or {}),
        "run": dict(summary.get("run") or {}),
        "summary": dict(summary.get("summary") or {}),
        "targets": [dict(t) for t in summary.get("targets") or []],
        "errors": list(summary.get("errors") or []),
        "staleBaseline": list(summary.get("staleBaseline") or []),
        "cases": docs,
    }
    if "sandbox" in summary:  # reports written before the sandbox existed have none
        run["sandbox"] = dict(summary["sandbox"])
    return run, sorted(missing)


def _case_from(
    subject: Mapping[str, Any], predicate: Mapping[str, Any], order: list[str], missing: set[str]
) -> JSON:
    path, _, function = str(subject["name"]).rpartition(":")
    keg = {k: subject["digest"][k] for k in ("sha3_256", "sha256")}
    if "kegSize" in predicate:
        keg["size"] = predicate["kegSize"]
    else:
        missing.add(".keg sizes")
    records = predicate.get("targets") or {}
    ranked = sorted(records, key=lambda t: order.index(t) if t in order else len(order))
    fields = {
        "fingerprint": predicate["fingerprint"],
        "path": path,
        "function": function,
        "verdict": predicate["verdict"],
        "keg": keg,
        "inputs": _inputs_from(predicate.get("inputs") or {}, missing),
        "targets": {t: _target_from(records[t], missing) for t in ranked},
        "divergences": list(predicate.get("divergences") or []),
        "repro": predicate.get("repro"),
    } | {k: v for k, v in predicate.items() if k not in _PREDICATE_KEYS}
    return {k: fields[k] for k in _CASE_KEYS if k in fields} | fields


def _inputs_from(record: Mapping[str, Any], missing: set[str]) -> JSON:
    if "profile" not in record:
        missing.add("input profiles")
    digests = record.get("digests") or {}
    return {
        "seed": record.get("seed"),
        "n": record.get("n"),
        "source": record.get("source"),
        "profile": record.get("profile"),
        "digests": {name: d["sha256"] for name, d in digests.items()},
    }


def _target_from(record: Mapping[str, Any], missing: set[str]) -> JSON:
    """A target entry as ``document.target_entry`` writes it: only status and message for a
    target that never ran the case (unavailable, unsupported, no result)."""
    entry = {"status": record["status"], "message": record.get("message")}
    ran = record["status"] == "ok" or "seconds" in record or record.get("loadedFingerprint")
    if not ran:
        return entry
    if "seconds" not in record:
        missing.add("target times")
    fields = {
        **({"traceback": record["traceback"]} if "traceback" in record else {}),
        "loadedFingerprint": record.get("loadedFingerprint"),
        "seconds": record.get("seconds", 0.0),
        "artifacts": {a["name"]: a["digest"]["sha256"] for a in record.get("artifacts") or []},
    }
    if record["status"] == "ok":
        fields["outputs"] = [
            {k: o[k] for k in ("index", "dtype", "shape")} | {"sha256": o["digest"]["sha256"]}
            for o in record.get("outputs") or []
        ]
    extra = {k: v for k, v in record.items() if k not in (*_TARGET_RESTATED, *_TARGET_KEYS)}
    return entry | fields | extra
