"""The run document: one JSON-able record of a run that every output format renders.

Schema: ``keracheck/schemas/run-v1.json`` (:data:`SCHEMA_VERSION`).  Per case it holds the
``.keg`` digests, the inputs' digests, each target's status, outputs' digests and artifacts,
the divergences (bitwise, classified by :mod:`keracheck.compare`; run-to-run ones of one target
are ``nondeterministic``; :mod:`keracheck.mismatch_map` adds where in the output the bits
differ), the verdict and the command that reproduces the case.  Outputs are
compared against ``ref`` (or, without it, the first target that ran).

Exit codes (:func:`exit_code`): 0 all agree (or every divergence is baselined); 1 a new
divergence; 2 a usage or input error (the rest of the run still completes and is reported);
3 a target crashed or failed, or an internal error; 4 a required target is unavailable;
5 nothing to run.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from kera.dtypes import from_numpy
from keracheck import inputs as inputs_mod
from keracheck.collect import Case
from keracheck.compare import decimal, hex_bits
from keracheck.mismatch_map import divergences  # compare's, plus where the bits differ
from keracheck.opt_levels import split_id
from keracheck.options import Options
from keracheck.targets import Target
from keracheck.worker import JobResult

Array = np.ndarray[Any, Any]

EXIT_OK, EXIT_DIVERGE, EXIT_USAGE, EXIT_CRASH, EXIT_REQUIRED, EXIT_EMPTY = 0, 1, 2, 3, 4, 5
SCHEMA_VERSION = 1


def utc_now() -> str:
    """The current time as the document writes it (ISO 8601, UTC, whole seconds)."""
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def case_document(
    case: Case,
    targets: Sequence[Target],
    results: Mapping[str, Mapping[str, JobResult | str]],
    opts: Options,
    extra: Sequence[dict[str, Any]] = (),
    culprits: Mapping[tuple[str, str], str | None] | None = None,
) -> dict[str, Any]:
    """A case's record: each target's status and every divergence -- against ``ref``, between
    repeats of one target, and between a target's optimisation levels (``T`` and ``T@O2``,
    named by the pass in ``culprits``); ``extra``: divergences found outside the targets (the
    in-process ``-O0``/``-O2`` check on ``ref``)."""
    tdocs: dict[str, Any] = {}
    ok: dict[str, list[list[Array]]] = {}
    for t in targets:
        tdocs[t.id] = target_entry(t, results.get(t.id, {}).get(case.key))
        res = results.get(t.id, {}).get(case.key)
        if isinstance(res, JobResult) and res.status == "ok":
            ok[t.id] = res.outputs
    found: list[dict[str, Any]] = []
    for tid, outs in ok.items():  # run-to-run stability of each target
        for r in range(1, len(outs)):
            found += divergences(
                outs[0], outs[r], (f"{tid}#1", f"{tid}#{r + 1}"), (tid, tid), "nondeterministic"
            )
    found += _across_targets(case, ok, culprits or {})
    found += [dict(d) for d in extra]
    for d in found:
        for example in d.get("examples") or []:
            example["inputs"] = input_elements(case, d["output"], example["index"])
    statuses = [d["status"] for d in tdocs.values()]
    if found:
        verdict = "diverge"
    elif "error" in statuses:
        verdict = "error"
    elif len(ok) >= 2:
        verdict = "agree"
    else:
        verdict = "skipped"
    digest = hashlib.sha256(case.keg_bytes).hexdigest()
    return {
        "fingerprint": case.fingerprint,
        "path": case.path,
        "function": case.function,
        "source": source_record(case),
        "verdict": verdict,
        "keg": {
            "sha3_256": hashlib.sha3_256(case.keg_bytes).hexdigest(),
            "sha256": digest,
            "size": len(case.keg_bytes),
        },
        "inputs": {
            "seed": opts.seed,
            "n": int(next(iter(case.inputs.values())).shape[0]) if case.inputs else 1,
            "source": case.input_source,
            "profile": opts.input_profile if case.input_source == "generated" else None,
            "digests": {k: inputs_mod.digest(v) for k, v in case.inputs.items()},
        },
        "targets": tdocs,
        "divergences": found,
        "repro": repro_command(case, [t for t, d in tdocs.items() if d["status"] in RAN], opts),
    }


def _across_targets(
    case: Case,
    ok: Mapping[str, list[list[Array]]],
    culprits: Mapping[tuple[str, str], str | None],
) -> list[dict[str, Any]]:
    """Each target against ``ref`` (the oracle; else the first target), and each level
    variant ``T@OL`` against ``T`` itself (kind ``opt-level``, with the culprit pass)."""
    out: list[dict[str, Any]] = []
    order = list(ok)
    if not order:
        return out
    base = "ref" if "ref" in ok else order[0]
    for tid in order:
        own, level = split_id(tid)
        if tid == base:
            continue
        if level and own in ok:
            found = divergences(ok[own][0], ok[tid][0], (own, tid), (own, tid), "opt-level")
            for d in found:
                d["pass"] = culprits.get((case.key, tid))
            out += found
        else:
            out += divergences(ok[base][0], ok[tid][0], (base, tid), (base, tid), "diverge")
    return out


RAN = ("ok", "error")  # target statuses that mean the target ran the case


def source_record(case: Case) -> dict[str, Any] | None:
    """Where the case's ``export fn`` starts: ``{path, line, column}``; None for a ``.keg``
    case (a graph carries no source positions)."""
    if case.source is None:
        return None
    return {"path": case.path, "line": case.source.line, "column": case.source.column}


def input_elements(case: Case, output: int, index: Sequence[int]) -> dict[str, dict[str, Any]]:
    """Each input's element behind one output element, by parameter: ``index`` (the input's
    own, so a broadcast input says which element it was), ``hex`` and ``value``.  The row is
    the output's; within a row, an input of the output's shape gives the element at the same
    index, one that broadcasts onto it (numpy's trailing-axis rule: a scalar, a size-1 axis)
    the element it broadcasts, and any other (a reduction's or a matmul's operand) none."""
    if output >= len(case.fn.results) or not index:
        return {}
    shape = case.fn.results[output].shape
    row, rest = int(index[0]), [int(i) for i in index[1:]]
    if len(rest) != len(shape):
        return {}
    out: dict[str, dict[str, Any]] = {}
    for name in case.fn.param_names():
        array = case.inputs.get(name)
        at = _broadcast_index(array.shape[1:], shape, rest) if array is not None else None
        if array is None or at is None or row >= array.shape[0]:
            continue
        value = array[(row, *at)]
        out[name] = {"index": [row, *at], "hex": hex_bits(value), "value": decimal(value)}
    return out


def _broadcast_index(
    have: Sequence[int], want: Sequence[int], index: Sequence[int]
) -> list[int] | None:
    """The element of an array of shape ``have`` that broadcasts to ``index`` of ``want``."""
    if len(have) > len(want):
        return None
    skip = len(want) - len(have)
    at = []
    for h, w, i in zip(have, want[skip:], index[skip:], strict=True):
        if h != w and h != 1:
            return None
        at.append(i if h == w else 0)
    return at


def repro_command(case: Case, involved: Sequence[str], opts: Options) -> str:
    """The command that re-runs this case as this run did: every target that ran it (failing
    ones included), the plugins among them, and the seed and input count when the inputs were
    generated (a companion npz is found again by its path)."""
    targets = list(dict.fromkeys(["ref", *involved])) if "ref" in involved else list(involved)
    parts = ["keracheck", "repro", case.fingerprint, case.path]
    bases = list(dict.fromkeys(split_id(t)[0] for t in targets))
    parts += ["--targets", ",".join(bases or ["ref"])]
    for tid in bases:
        if tid in opts.plugins:
            parts += ["--backend-plugin", opts.plugins[tid]]
    if opts.opt_levels != (0,):
        parts += ["--opt-levels", ",".join(map(str, opts.opt_levels))]
    for spec in opts.pass_plugins:
        parts += ["--pass-plugin", spec]
    if case.input_source == "generated":
        parts += ["--seed", str(opts.seed), "--inputs", str(opts.n)]
        if opts.input_profile != "special":
            parts += ["--input-profile", opts.input_profile]
    return shlex.join(parts)


def target_entry(t: Target, res: JobResult | str | None) -> dict[str, Any]:
    if not t.available:
        return {"status": "unavailable", "message": t.reason}
    if isinstance(res, str):
        return {"status": "unsupported", "message": res}
    if res is None:
        return {"status": "error", "message": "no result (internal error)"}
    entry: dict[str, Any] = {
        "status": res.status,
        "message": res.message,
        **({"traceback": res.traceback} if res.traceback else {}),
        "loadedFingerprint": res.loaded,
        "seconds": round(res.seconds, 6),
        "artifacts": res.artifacts,
    }
    if res.status == "ok":
        entry["outputs"] = [
            {
                "index": k,
                "dtype": from_numpy(a.dtype).value,
                "shape": list(a.shape),
                "sha256": inputs_mod.digest(a),
            }
            for k, a in enumerate(res.outputs[0])
        ]
    return entry


def exit_code(doc: Mapping[str, Any]) -> int:
    cases = doc["cases"]
    if any(d for c in cases for d in c["divergences"] if not d["baselined"]):
        return EXIT_DIVERGE
    if doc["errors"]:
        return EXIT_USAGE
    if any(c["verdict"] == "error" for c in cases):
        return EXIT_CRASH
    if not cases:
        return EXIT_EMPTY
    return EXIT_OK


def document(
    case_docs: list[dict[str, Any]],
    targets: Sequence[Target],
    opts: Options,
    started: str,
    errors: list[dict[str, str]],
    stale: list[dict[str, Any]],
    versions: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, Any]:
    verdicts = [c["verdict"] for c in case_docs]
    baselined = sum(1 for c in case_docs for d in c["divergences"] if d["baselined"])
    return {
        "schemaVersion": SCHEMA_VERSION,
        "tool": {"name": "keracheck", "version": keracheck_version()},
        "run": {
            "startedOn": started,
            "finishedOn": utc_now(),
            "seed": opts.seed,
            "inputs": opts.n,
            "targets": [t.id for t in targets],
            "repeat": opts.repeat,
            "command": opts.command,
        },
        "summary": {
            "cases": len(case_docs),
            "agree": verdicts.count("agree"),
            "diverge": verdicts.count("diverge"),
            "error": verdicts.count("error"),
            "skipped": verdicts.count("skipped"),
            "baselined": baselined,
            "inputErrors": len(errors),
            "staleBaseline": len(stale),
            "exitCode": None,
        },
        "targets": [
            {
                "id": t.id,
                "available": t.available,
                "reason": t.reason,
                "fix": fix_hint(t.reason),
                "versions": dict((versions or {}).get(t.id, {})),
            }
            for t in targets
        ],
        "errors": errors,
        "staleBaseline": stale,
        "cases": case_docs,
    }


def fix_hint(reason: str | None) -> str | None:
    """The install command inside an unavailability reason ('...: apt-get install x')."""
    if not reason:
        return None
    for marker in ("apt-get install", "pip install", "scripts/"):
        i = reason.find(marker)
        if i >= 0:
            return reason[i:]
    return None


def keracheck_version() -> str:
    from kera.version import package_version

    return package_version()


def summary_document(
    cases: list[dict[str, Any]], targets: list[str], options: Mapping[str, Any]
) -> dict[str, Any]:
    opts = Options()
    doc = document(cases, [], opts, utc_now(), [], [])
    doc["run"]["targets"] = sorted({t for c in cases for t in c["targets"]})
    doc["summary"]["exitCode"] = exit_code(doc)
    return doc
