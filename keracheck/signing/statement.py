"""in-toto Statements (v1) of a keracheck run: built from the run document, and checked.

One per case, predicateType :data:`PREDICATE_TYPE`, subject ``<path>:<function>`` with the
digests ``sha3_256`` (the graph fingerprint) and ``sha256`` of the same ``.keg`` bytes.  One run
summary, predicateType :data:`RUN_PREDICATE_TYPE`, whose subjects are every case's ``.keg`` and
whose predicate lists the SHA-256 of every case payload in file order: the bundle format itself
is not authenticated, the summary binds it (no line can be dropped, reordered or replayed from
another report).  Schema: ``schemas/predicate-v1.json``.
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


def _target_record(result: Mapping[str, Any]) -> JSON:
    outputs = [
        {k: o[k] for k in ("index", "dtype", "shape")} | {"digest": {"sha256": o["sha256"]}}
        for o in result.get("outputs") or []
    ]
    artifacts = [
        {"name": name, "digest": {"sha256": digest}}
        for name, digest in sorted((result.get("artifacts") or {}).items())
    ]
    return {
        "status": result["status"],
        "message": result.get("message"),
        "loadedFingerprint": result.get("loadedFingerprint"),
        "outputs": outputs,
        "artifacts": artifacts,
    }


def _toolchains(case: Mapping[str, Any], run: Mapping[str, Any]) -> JSON:
    versions = {t["id"]: t.get("versions") or {} for t in run.get("targets") or []}
    return {target: versions.get(target, {}) for target in sorted(case["targets"])}


def _inputs_record(inputs: Mapping[str, Any]) -> JSON:
    digests = inputs.get("digests") or {}
    return {
        "seed": inputs.get("seed"),
        "n": inputs.get("n"),
        "source": inputs.get("source"),
        "digests": {name: {"sha256": digests[name]} for name in sorted(digests)},
    }


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


def statement_for_run(run: Mapping[str, Any], case_payloads: Sequence[bytes]) -> JSON:
    """The run-summary Statement; ``case_payloads`` are the case payload bytes, in file order."""
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
        "cases": listed,
    }
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
