"""``keracheck run``: compile each case once, run it on every target, compare bit for bit.

A *case* is one exported function of a corpus file, keyed by its fingerprint.  Each case is
compiled once to the canonical ``.keg`` bytes of a single-export graph; every target consumes
those bytes (in a worker process, see ``keracheck.worker``) and reports the fingerprint it
loaded.  Outputs are compared bitwise against ``ref`` (or, without it, the first target that
ran), repeats of one target against each other (``nondeterministic``), and every differing
element is classified (``keracheck.compare``).  The result is one JSON-able document (schema:
``keracheck/schemas/run-v1.json``) that every output format renders.

Exit codes: 0 all agree (or every divergence is baselined); 1 a new divergence; 2 a usage or
input error (the rest of the run still completes and is reported); 3 a target crashed or
failed, or an internal error; 4 a required target is unavailable; 5 nothing to run.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import os
import shlex
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from kera import files, keg
from kera.dtypes import from_numpy
from kera.files import LoadError, load_graph
from kera.ir import Function, Graph
from keracheck import inputs as inputs_mod
from keracheck.backend import declines
from keracheck.compare import diff_outputs
from keracheck.progress import Phases
from keracheck.result_cache import ResultCache as ResultCache
from keracheck.result_cache import default_cache_dir as default_cache_dir
from keracheck.result_cache import plugin_digest as plugin_digest
from keracheck.result_cache import source_digest as source_digest
from keracheck.select import node_ids
from keracheck.targets import Target, default_ids, known_specs, resolve_all
from keracheck.worker import Job, JobResult, run_isolated

Array = np.ndarray[Any, Any]

EXIT_OK, EXIT_DIVERGE, EXIT_USAGE, EXIT_CRASH, EXIT_REQUIRED, EXIT_EMPTY = 0, 1, 2, 3, 4, 5
SCHEMA_VERSION = 1


@dataclass
class Options:
    targets: list[str] | None = None
    require: list[str] = field(default_factory=list)
    plugins: dict[str, str] = field(default_factory=dict)  # id -> spec
    n: int = 64
    seed: int = 0
    repeat: int = 1
    jobs: int = 2
    timeout: float = 120.0
    baseline: dict[str, Any] | None = None
    dump_outputs: str | None = None
    cache_dir: str | None = None
    command: str = "keracheck run"
    progress: Callable[[str], None] | None = None
    keyword: Callable[[str], bool] | None = None
    input_profile: str = (
        "special"  # keracheck.inputs.PROFILES  # -k: which node ids (path::function) run
    )
    heartbeat: float = 10.0  # seconds between "still running" lines while targets run


@dataclass
class Case:
    path: str
    function: str
    fn: Function
    keg_bytes: bytes
    inputs: dict[str, Array]
    input_source: str

    @property
    def fingerprint(self) -> str:
        return self.fn.fingerprint

    @property
    def key(self) -> str:
        return f"{self.fingerprint}:{self.path}:{self.function}"


@dataclass
class Collected:
    cases: list[Case]
    errors: list[dict[str, str]]


# ------------------------------------------------------------------------------ collecting


def iter_files(paths: Sequence[str]) -> Iterable[tuple[str, str | None]]:
    """(file, error) for every .kera/.keg file under paths (recursive, sorted)."""
    for p in paths:
        path = Path(p)
        if path.is_dir():
            for f in sorted(path.rglob("*")):
                if f.is_file() and f.suffix in (".kera", ".keg"):
                    yield str(f), None
        elif path.is_file() and path.suffix in (".kera", ".keg"):
            yield str(path), None
        elif path.is_file():
            yield str(path), f"{path}: not a Kera file (expected a .kera source or a .keg graph)"
        elif path.exists():
            yield str(path), f"{path}: not a regular file (a FIFO or device?)"
        else:
            yield str(path), f"{path}: no such file or directory"


#: diagnostics shown per file in a run's report (the rest are counted; kerac check lists all)
MAX_DIAGNOSTICS = 20


def compile_file(path: str) -> Graph:
    """The graph of a .kera or .keg file; raises ValueError with a located message."""
    try:
        return load_graph(path, max_diagnostics=MAX_DIAGNOSTICS)
    except LoadError as e:
        raise ValueError(e.diagnostics.rstrip() or str(e)) from None


def companion_npz(path: str) -> str:
    p = Path(path)
    return str(p.with_name(p.name.removesuffix(p.suffix) + ".inputs.npz"))


def make_case(path: str, fn: Function, opts: Options, npz: str | None = None) -> Case:
    keg_bytes = keg.dumps(Graph([fn]))
    given = inputs_mod.load_npz(npz, fn.name, fn) if npz and os.path.exists(npz) else None
    if given is not None:
        inputs_mod.check_budget(fn, next(iter(given.values())).shape[0] if given else 1, str(npz))
        return Case(path, fn.name, fn, keg_bytes, given, "npz")
    inputs_mod.check_budget(fn, opts.n, path)
    return Case(
        path,
        fn.name,
        fn,
        keg_bytes,
        inputs_mod.generate(fn, opts.n, opts.seed, opts.input_profile),
        "generated",
    )


def collect(paths: Sequence[str], opts: Options) -> Collected:
    """The cases under ``paths`` (files, directories, or ``file::function`` node ids), those
    ``opts.keyword`` selects."""
    cases: list[Case] = []
    errors: list[dict[str, str]] = []
    seen: set[str] = set()
    plain, wanted = node_ids(list(paths))
    for path, err in iter_files(plain):
        if err:
            errors.append({"path": path, "message": err})
            continue
        try:
            graph = compile_file(path)
        except ValueError as e:
            errors.append({"path": path, "message": str(e)})
            continue
        only = wanted.get(path)
        for name in sorted((only or set()) - set(graph.functions)):
            have = ", ".join(graph.functions) or "none"
            errors.append(
                {"path": path, "message": f"{path}: no exported function '{name}' (has: {have})"}
            )
        for fn in graph.functions.values():
            if (only is None or fn.name in only) and _selected(opts, f"{path}::{fn.name}"):
                case = _case_or_error(path, fn, opts, errors)
                if case is not None and case.key not in seen:
                    seen.add(case.key)
                    cases.append(case)
    return Collected(cases, errors)


def _selected(opts: Options, node_id: str) -> bool:
    return opts.keyword is None or opts.keyword(node_id)


def _case_or_error(
    path: str, fn: Function, opts: Options, errors: list[dict[str, str]]
) -> Case | None:
    try:
        return make_case(path, fn, opts, companion_npz(path))
    except inputs_mod.InputFileError as e:
        errors.append({"path": path, "message": str(e)})
    except MemoryError:
        errors.append(
            {"path": path, "message": f"{path}: '{fn.name}': out of memory for its inputs"}
        )
    return None


# ------------------------------------------------------------------------------ targets


def select_targets(opts: Options) -> tuple[list[Target], list[str]]:
    """(targets, unknown ids).  Default: every known target except ISA variants."""
    specs = {**known_specs(), **opts.plugins}
    ids = opts.targets or default_ids(known_specs())
    ids = list(dict.fromkeys([*ids, *opts.plugins, *opts.require]))
    unknown = [t for t in ids if t not in specs]
    return resolve_all([(t, specs[t]) for t in ids if t in specs]), unknown


def unknown_target(tid: str, specs: Iterable[str]) -> str:
    """'unknown target ...' with the closest known id, if one is close."""
    import difflib

    close = difflib.get_close_matches(tid, list(specs), 1)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    return f"unknown target '{tid}'{hint} (see 'keracheck targets')"


def _versions(t: Target) -> dict[str, str]:
    get = getattr(t.backend, "versions", None)
    if get is None:
        return {}
    try:
        return {str(k): str(v) for k, v in get().items()}
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"}


# ------------------------------------------------------------------------------ running


def run_target(
    target: Target, cases: list[Case], opts: Options, versions: Mapping[str, str]
) -> dict[str, JobResult | str]:
    """Results per case key; a plain string means 'unsupported: <ops or the target's reason>'."""
    assert target.backend is not None
    supported = target.backend.supported_ops()
    out: dict[str, JobResult | str] = {}
    todo: list[Case] = []
    cache = ResultCache(opts.cache_dir) if opts.cache_dir and opts.repeat == 1 else None
    keys: dict[str, str] = {}
    for case in cases:
        missing = sorted({n.op.value for n in case.fn.nodes()} - set(supported))
        if missing:
            out[case.key] = "unsupported: " + ", ".join(missing)
            continue
        if cache is not None:
            keys[case.key] = cache.key(
                case.fingerprint, case.inputs, target.id, versions, target.spec
            )
            rows = next(iter(case.inputs.values())).shape[0] if case.inputs else 1
            hit = cache.get(keys[case.key], case.fn, rows)
            if hit is not None:  # a declined case never ran, so it is never cached
                out[case.key] = hit
                continue
        reason = declines(target.backend, case.fn)
        if reason is not None:
            out[case.key] = "unsupported: " + reason
            continue
        todo.append(case)
    if opts.progress:
        cached = len(keys) - len(todo) - sum(1 for v in out.values() if isinstance(v, str))
        opts.progress(
            f"{target.id}: started, {len(todo)} cases to build and run"
            + (f", {cached} from the result cache" if cache is not None else "")
        )
    if todo:
        jobs = [Job(c.key, c.keg_bytes, c.function, c.inputs) for c in todo]
        for key, res in run_isolated(target.spec, jobs, opts.repeat, opts.timeout).items():
            out[key] = res
            if cache is not None:
                cache.put(keys[key], res)
    return out


def run(paths: Sequence[str], opts: Options) -> tuple[dict[str, Any], int]:
    started = _now()
    collected = collect(paths, opts)
    return run_cases(collected, opts, started)


def run_cases(
    collected: Collected, opts: Options, started: str | None = None
) -> tuple[dict[str, Any], int]:
    started = started or _now()
    targets, unknown = select_targets(opts)
    errors = list(collected.errors)
    for tid in unknown:
        errors.append({"path": "", "message": unknown_target(tid, known_specs())})
    by_id = {t.id: t for t in targets}
    for req in opts.require:
        t = by_id.get(req)
        if t is None or not t.available:
            why = t.reason if t is not None else "unknown target"
            doc = document([], targets, opts, started, errors, [])
            doc["summary"]["exitCode"] = EXIT_REQUIRED
            doc["summary"]["message"] = f"required target '{req}' is unavailable: {why}"
            return doc, EXIT_REQUIRED
    runnable = [t for t in targets if t.available]
    versions = {t.id: _versions(t) for t in runnable}
    results: dict[str, dict[str, JobResult | str]] = {}

    phases = Phases(opts.progress, opts.heartbeat)

    def one(t: Target) -> None:
        phases.start(t.id)
        mine = replace(opts, progress=phases.say if opts.progress else None)
        results[t.id] = run_target(t, collected.cases, mine, versions[t.id])
        phases.done(t.id, results[t.id])

    if collected.cases:
        if opts.progress:
            opts.progress(
                f"{len(collected.cases)} cases on {len(runnable)} targets: "
                + ", ".join(t.id for t in runnable)
            )
        with phases, ThreadPoolExecutor(max_workers=max(1, opts.jobs)) as pool:
            list(pool.map(one, runnable))
    case_docs = [case_document(c, targets, results, opts) for c in collected.cases]
    if opts.dump_outputs:
        dump_outputs(opts.dump_outputs, collected.cases, results)
    stale = apply_baseline(case_docs, opts.baseline)
    doc = document(case_docs, targets, opts, started, errors, stale, versions)
    code = exit_code(doc)
    doc["summary"]["exitCode"] = code
    return doc, code


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def case_document(
    case: Case,
    targets: Sequence[Target],
    results: Mapping[str, Mapping[str, JobResult | str]],
    opts: Options,
) -> dict[str, Any]:
    tdocs: dict[str, Any] = {}
    ok: dict[str, list[list[Array]]] = {}
    for t in targets:
        tdocs[t.id] = target_entry(t, results.get(t.id, {}).get(case.key))
        res = results.get(t.id, {}).get(case.key)
        if isinstance(res, JobResult) and res.status == "ok":
            ok[t.id] = res.outputs
    divergences = []
    for tid, outs in ok.items():  # run-to-run stability of each target
        for r in range(1, len(outs)):
            divergences += _diffs(
                outs[0], outs[r], (f"{tid}#1", f"{tid}#{r + 1}"), (tid, tid), "nondeterministic"
            )
    order = list(ok)
    if order:
        base = "ref" if "ref" in ok else order[0]
        for tid in order:
            if tid != base:
                divergences += _diffs(ok[base][0], ok[tid][0], (base, tid), (base, tid), "diverge")
    statuses = [d["status"] for d in tdocs.values()]
    if divergences:
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
        "divergences": divergences,
        "repro": repro_command(case, [t for t, d in tdocs.items() if d["status"] in RAN], opts),
    }


RAN = ("ok", "error")  # target statuses that mean the target ran the case


def repro_command(case: Case, involved: Sequence[str], opts: Options) -> str:
    """The command that re-runs this case as this run did: every target that ran it (failing
    ones included), the plugins among them, and the seed and input count when the inputs were
    generated (a companion npz is found again by its path)."""
    targets = list(dict.fromkeys(["ref", *involved])) if "ref" in involved else list(involved)
    parts = ["keracheck", "repro", case.fingerprint, case.path]
    parts += ["--targets", ",".join(targets or ["ref"])]
    for tid in targets:
        if tid in opts.plugins:
            parts += ["--backend-plugin", opts.plugins[tid]]
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


def _diffs(
    a: list[Array], b: list[Array], names: tuple[str, str], pair: tuple[str, str], kind: str
) -> list[dict[str, Any]]:
    out = []
    for k, (x, y) in enumerate(zip(a, b, strict=True)):
        d = diff_outputs(x, y, names)
        if d is not None:
            out.append(
                {
                    "targets": list(pair),
                    "output": k,
                    "kind": kind,
                    "baselined": False,
                    "reason": None,
                    **d,
                }
            )
    return out


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
            "finishedOn": _now(),
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


# ------------------------------------------------------------------------------ baseline


def baseline_key(fp: str, pair: Sequence[str], output: int) -> str:
    return f"{fp}:{pair[0]}:{pair[1]}:{output}"


def apply_baseline(
    case_docs: list[dict[str, Any]], baseline: Mapping[str, Any] | None
) -> list[dict[str, Any]]:
    """Mark baselined divergences; return the baseline entries that matched nothing (stale)."""
    if not baseline:
        return []
    entries = {
        baseline_key(e["fingerprint"], e["targets"], e["output"]): e for e in baseline["entries"]
    }
    used: set[str] = set()
    for c in case_docs:
        for d in c["divergences"]:
            k = baseline_key(c["fingerprint"], d["targets"], d["output"])
            if k in entries:
                d["baselined"] = True
                d["reason"] = entries[k].get("reason")
                used.add(k)
    return [e for k, e in entries.items() if k not in used]


def baseline_from(doc: Mapping[str, Any], reason: str) -> dict[str, Any]:
    entries = [
        {
            "fingerprint": c["fingerprint"],
            "path": c["path"],
            "function": c["function"],
            "targets": d["targets"],
            "output": d["output"],
            "classes": d["classes"],
            "reason": reason,
        }
        for c in doc["cases"]
        for d in c["divergences"]
    ]
    return {"schemaVersion": 1, "entries": entries}


class BaselineError(ValueError):
    pass


def load_baseline(path: str) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise BaselineError(f"{path}: cannot read baseline: {e.strerror or e}") from None
    except json.JSONDecodeError as e:
        raise BaselineError(f"{path}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from None
    except (RecursionError, UnicodeDecodeError) as e:
        raise BaselineError(f"{path}: invalid JSON ({type(e).__name__})") from None
    if (
        not isinstance(data, dict)
        or data.get("schemaVersion") != 1
        or not isinstance(data.get("entries"), list)
    ):
        raise BaselineError(f"{path}: not a keracheck baseline (schemaVersion 1 with 'entries')")
    for i, entry in enumerate(data["entries"]):
        ok = isinstance(entry, dict) and isinstance(entry.get("fingerprint"), str)
        ok = ok and isinstance(entry.get("targets"), list) and len(entry["targets"]) == 2
        ok = ok and isinstance(entry.get("output"), int) and isinstance(entry.get("reason"), str)
        if not ok:
            raise BaselineError(
                f"{path}: entry {i} needs fingerprint, targets [a, b], output and reason"
            )
    return data


# ------------------------------------------------------------------------------ outputs


def dump_outputs(
    root: str, cases: Sequence[Case], results: Mapping[str, Mapping[str, JobResult | str]]
) -> None:
    """DIR/<fingerprint>/<target>/<k>.npy and DIR/<fingerprint>/inputs/<param>.npy."""
    for case in cases:
        base = Path(root) / case.fingerprint
        (base / "inputs").mkdir(parents=True, exist_ok=True)
        for name, a in case.inputs.items():
            _save_npy(base / "inputs" / f"{name}.npy", a)
        for tid, per_case in results.items():
            res = per_case.get(case.key)
            if isinstance(res, JobResult) and res.status == "ok":
                d = base / tid.replace(":", "_")
                d.mkdir(parents=True, exist_ok=True)
                for k, a in enumerate(res.outputs[0]):
                    _save_npy(d / f"{k}.npy", a)


def _save_npy(path: Path, a: Array) -> None:
    buf = io.BytesIO()
    np.save(buf, a)
    files.write_atomic(path, buf.getvalue())


# ------------------------------------------------------------------------------ library use


def check_deterministic(
    source_or_graph: Any,
    targets: list[str] | None,
    inputs: Mapping[str, Any] | None,
    n: int,
    seed: int,
) -> tuple[list[dict[str, Any]], str | None]:
    """For the pytest plugin: (case documents, failure message or None)."""
    opts = Options(targets=targets, n=n, seed=seed, jobs=2)
    fns: list[tuple[str, Function]]
    if isinstance(source_or_graph, Function):
        fns = [("<graph>", source_or_graph)]
    elif isinstance(source_or_graph, Graph):
        fns = [("<graph>", f) for f in source_or_graph.functions.values()]
    elif isinstance(source_or_graph, os.PathLike) or (
        isinstance(source_or_graph, str)
        and "\n" not in source_or_graph
        and source_or_graph.endswith((".kera", ".keg"))
    ):
        if not os.path.isfile(source_or_graph):
            return [], f"{os.fspath(source_or_graph)}: no such file (a path was given, not source)"
        try:
            graph = compile_file(os.fspath(source_or_graph))
        except ValueError as e:
            return [], str(e)
        fns = [(os.fspath(source_or_graph), f) for f in graph.functions.values()]
    else:
        from kera import frontend

        res = frontend.compile_source(str(source_or_graph), "<source>")
        if res.graph is None or not res.ok:
            return [], frontend.render_diagnostics(
                res.diagnostics, str(source_or_graph), "<source>"
            )
        fns = [("<source>", f) for f in res.graph.functions.values()]
    cases = []
    for path, fn in fns:
        case = make_case(path, fn, opts)
        if inputs is not None:
            case.inputs = {
                k[len(fn.name) + 1 :] if k.startswith(fn.name + ".") else k: np.asarray(v)
                for k, v in inputs.items()
            }
            case.input_source = "given"
        cases.append(case)
    doc, code = run_cases(Collected(cases, []), opts)
    if code in (EXIT_OK,):
        return doc["cases"], None
    from keracheck.formats import render

    return doc["cases"], render("text", doc)


def summary_document(
    cases: list[dict[str, Any]], targets: list[str], options: Mapping[str, Any]
) -> dict[str, Any]:
    opts = Options()
    doc = document(cases, [], opts, _now(), [], [])
    doc["run"]["targets"] = sorted({t for c in cases for t in c["targets"]})
    doc["summary"]["exitCode"] = exit_code(doc)
    return doc


def print_err(msg: str) -> None:
    print(msg, file=sys.stderr)
