"""``keracheck run``: compile each case once, run it on every target, compare bit for bit.

The run's orchestration: collect the cases (:mod:`keracheck.collect`), resolve and probe the
targets, run each target's cases in contained workers (``keracheck.worker``; results cached by
``keracheck.result_cache``), then build the run document (:mod:`keracheck.document`, where the
exit codes are defined) with the baseline applied (:mod:`keracheck.baseline`).  Every target
consumes the case's canonical ``.keg`` bytes and reports the fingerprint it loaded.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from kera import files, keg, passes
from kera.ir import Function, Graph
from kera.passes import Pass
from keracheck import opt_levels as levels
from keracheck.baseline import apply_baseline
from keracheck.collect import Case, Collected, collect, compile_file, make_case
from keracheck.document import (
    EXIT_OK,
    EXIT_REQUIRED,
    case_document,
    document,
    exit_code,
    utc_now,
)
from keracheck.options import Options
from keracheck.progress import Phases
from keracheck.result_cache import ResultCache as ResultCache
from keracheck.result_cache import default_cache_dir as default_cache_dir
from keracheck.result_cache import plugin_digest as plugin_digest
from keracheck.result_cache import source_digest as source_digest
from keracheck.target import declines
from keracheck.targets import Target, default_ids, known_specs, resolve_all
from keracheck.worker import Job, JobResult, run_isolated

Array = np.ndarray[Any, Any]


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
    cached = 0
    for case in cases:
        missing = sorted({op.value for op in case.fn.ops_used()} - set(supported))
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
                cached += 1
                continue
        reason = declines(target.backend, case.fn)
        if reason is not None:
            out[case.key] = "unsupported: " + reason
            continue
        todo.append(case)
    if opts.progress:
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
    started = utc_now()
    collected = collect(paths, opts)
    return run_cases(collected, opts, started)


def run_cases(
    collected: Collected, opts: Options, started: str | None = None
) -> tuple[dict[str, Any], int]:
    started = started or utc_now()
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
    extra = levels.load_pass_plugins(opts.pass_plugins)
    plan = _level_plan(collected.cases, runnable, opts, extra)
    targets = [*targets, *(t for t, _ in plan if t.id not in by_id)]

    phases = Phases(opts.progress, opts.heartbeat)

    def one(job: tuple[Target, levels.Optimised | None]) -> None:
        t, opt = job
        phases.start(t.id)
        mine = replace(opts, progress=phases.say if opts.progress else None)
        base = versions[levels.split_id(t.id)[0]]
        results[t.id] = _run_level(t, collected.cases, opt, mine, base)
        phases.done(t.id, results[t.id])

    if collected.cases:
        if opts.progress:
            opts.progress(
                f"{len(collected.cases)} cases on {len(plan)} targets: "
                + ", ".join(t.id for t, _ in plan)
            )
        with phases, ThreadPoolExecutor(max_workers=max(1, opts.jobs)) as pool:
            list(pool.map(one, plan))
    checks, culprits = _level_checks(collected.cases, plan, results, opts, extra)
    case_docs = [
        case_document(c, targets, results, opts, checks.get(c.key, ()), culprits)
        for c in collected.cases
    ]
    if opts.dump_outputs:
        dump_outputs(opts.dump_outputs, collected.cases, results)
    stale = apply_baseline(case_docs, opts.baseline)
    doc = document(case_docs, targets, opts, started, errors, stale, versions)
    code = exit_code(doc)
    doc["summary"]["exitCode"] = code
    return doc, code


# ------------------------------------------------------------------------------ opt levels


def _level_plan(
    cases: Sequence[Case], runnable: Sequence[Target], opts: Options, extra: Sequence[Pass]
) -> list[tuple[Target, levels.Optimised | None]]:
    """(target or level variant, its optimised cases; None at level 0), level 0 first."""
    plan: list[tuple[Target, levels.Optimised | None]] = []
    for level in opts.opt_levels:
        opt = levels.optimise_cases(cases, level, extra) if level else None
        for t in runnable:
            plan.append((replace(t, id=levels.level_id(t.id, level)), opt))
    return plan


def _run_level(
    t: Target,
    cases: list[Case],
    opt: levels.Optimised | None,
    opts: Options,
    versions: Mapping[str, str],
) -> dict[str, JobResult | str]:
    """Results per source case key; a variant runs the optimised cases."""
    if opt is None:
        return run_target(t, cases, opts, versions)
    mine = [opt.cases[c.key] for c in cases if c.key in opt.cases]
    got = run_target(t, mine, opts, versions)
    out: dict[str, JobResult | str] = {k: JobResult("error", m) for k, m in opt.errors.items()}
    for c in cases:
        if c.key in opt.cases:
            out[c.key] = got[opt.cases[c.key].key]
    return out


def _level_checks(
    cases: Sequence[Case],
    plan: Sequence[tuple[Target, levels.Optimised | None]],
    results: Mapping[str, Mapping[str, JobResult | str]],
    opts: Options,
    extra: Sequence[Pass],
) -> tuple[dict[str, list[dict[str, Any]]], dict[tuple[str, str], str | None]]:
    """The in-process -O0/-O2 check on ref (when no level was asked for), and the culprit
    pass of each level variant that differs from its target at level 0."""
    checks: dict[str, list[dict[str, Any]]] = {}
    if opts.opt_levels == (0,):
        for c in cases:
            ran = results.get("ref", {}).get(c.key)
            outputs = ran.outputs[0] if isinstance(ran, JobResult) and _ok(ran) else None
            checks[c.key] = levels.ref_check(c, extra, outputs)
    culprits: dict[tuple[str, str], str | None] = {}
    for t, opt in plan:
        if opt is None:
            continue
        own = levels.split_id(t.id)[0]
        for c in cases:
            base, got = results.get(own, {}).get(c.key), results[t.id].get(c.key)
            if not (_ok(base) and _ok(got)):
                continue
            assert isinstance(base, JobResult) and isinstance(got, JobResult)
            if levels.first_differing(base.outputs[0], [("", got.outputs[0])]) is None:
                continue
            pipeline = passes.pipeline(opt.level, extra)
            culprits[(c.key, t.id)] = levels.culprit(
                c.fn, base.outputs[0], pipeline, _runner(t, c, opts)
            )
    return checks, culprits


def _ok(res: JobResult | str | None) -> bool:
    return isinstance(res, JobResult) and res.status == "ok"


def _runner(t: Target, case: Case, opts: Options) -> Any:
    """Run several graphs of one case on ``t`` in one batch (the culprit search)."""

    def run_all(fns: list[Function]) -> list[Sequence[Array] | None]:
        jobs = [
            Job(f"{i}", keg.dumps(Graph([f])), case.function, case.inputs)
            for i, f in enumerate(fns)
        ]
        got = run_isolated(t.spec, jobs, 1, opts.timeout)
        return [got[j.key].outputs[0] if _ok(got.get(j.key)) else None for j in jobs]

    return run_all


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


def print_err(msg: str) -> None:
    print(msg, file=sys.stderr)
