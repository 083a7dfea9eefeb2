"""``keracheck run``: compile each case once, run it on every target, compare bit for bit.

The run's orchestration: collect the cases (:mod:`keracheck.collect`), resolve and probe the
targets, run each target's cases in contained workers (``keracheck.worker``; results cached by
``keracheck.result_cache``), then build the run document (:mod:`keracheck.document`, where the
exit codes are defined) with the baseline applied (:mod:`keracheck.baseline`) and each new
divergence's first diverging node named (:mod:`keracheck.localise`; ``opts.localise``).  Every
target consumes the case's canonical ``.keg`` bytes and reports the fingerprint it loaded.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from kera import files, passes
from kera.passes import Pass
from keracheck import localise, sandbox, security
from keracheck import opt_levels as levels
from keracheck.baseline import apply_baseline
from keracheck.collect import Case, Collected, collect
from keracheck.document import (
    EXIT_REQUIRED,
    case_document,
    document,
    exit_code,
    utc_now,
)
from keracheck.journal import Journal, open_journal, run_key
from keracheck.options import Options
from keracheck.progress import Phases
from keracheck.result_cache import ResultCache as ResultCache
from keracheck.result_cache import _shaped_like, result_key
from keracheck.result_cache import default_cache_dir as default_cache_dir
from keracheck.result_cache import plugin_digest as plugin_digest
from keracheck.result_cache import source_digest as source_digest
from keracheck.target import cost, declines
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
    for t in ids:  # resolving probes toolchains and loads plugins: both need their grant
        if t in specs:
            security.check_target(t, specs[t])
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
    target: Target,
    cases: list[Case],
    opts: Options,
    versions: Mapping[str, str],
    journal: Journal | None = None,
) -> dict[str, JobResult | str]:
    """Results per case key; a plain string means 'unsupported: <ops or the target's reason>'.
    A result is taken from the run's journal, else the result cache, else computed; what is
    computed is journaled as soon as the batch returns."""
    assert target.backend is not None
    security.check_target(target.id, target.spec)
    cache = ResultCache(opts.cache_dir) if opts.cache_dir and opts.repeat == 1 else None
    keys: dict[str, str] = {}
    if cache is not None or journal is not None:
        keys = {
            c.key: result_key(c.fingerprint, c.inputs, target.id, versions, target.spec)
            for c in cases
        }
    out: dict[str, JobResult | str] = {}
    todo: list[Case] = []
    came = {"journal": 0, "cache": 0}
    for case in cases:
        source, known = _known(target, case, keys.get(case.key, ""), journal, cache)
        if known is None:
            todo.append(case)
            continue
        out[case.key] = known
        if source in came:
            came[source] += 1
    if opts.progress:
        if came["journal"]:
            opts.progress(
                f"{target.id}: {came['journal']} results from the journal of an interrupted run"
            )
        opts.progress(
            f"{target.id}: started, {len(todo)} cases to build and run"
            + (f", {came['cache']} from the result cache" if cache is not None else "")
        )
    jobs = [Job(c.key, c.keg_bytes, c.function, c.inputs) for c in todo]
    for done in _batches(target, jobs, opts) if jobs else ():
        if journal is not None:
            journal.append([(keys[key], res) for key, res in done.items()])
        for key, res in done.items():
            out[key] = res
            if cache is not None:
                cache.put(keys[key], res)
    return out


#: cases per worker batch in the local pool: the whole corpus (165 cases) is still one batch,
#: so a target's build is shared as before; 100x that is 65 batches of a fork each
BATCH_CASES = 256


def _batches(target: Target, jobs: list[Job], opts: Options) -> Iterable[dict[str, JobResult]]:
    """The results of ``jobs`` batch by batch as they finish: batches of at most
    :data:`BATCH_CASES` in the local pool, or Dask batches on the workers that have the target
    (``--scheduler``).  A bounded batch keeps a worker's memory flat however large the corpus
    (one batch of 16,500 cases held 1.3 GB in the workers, ``bench/bench_scale.py``) and
    journals results as each batch returns."""
    if opts.scheduler is not None:
        batches: Iterable[dict[str, JobResult]] = opts.scheduler.batches(
            target.id, target.spec, jobs, opts.repeat, opts.timeout
        )
        return batches
    return (
        run_isolated(target.spec, jobs[i : i + BATCH_CASES], opts.repeat, opts.timeout)
        for i in range(0, len(jobs), BATCH_CASES)
    )


def _known(
    target: Target, case: Case, key: str, journal: Journal | None, cache: ResultCache | None
) -> tuple[str, JobResult | str | None]:
    """(where from, result) of a case ``target`` need not run -- unsupported ops, the journal,
    the result cache, a declined case -- or ("", None) when it must run it."""
    assert target.backend is not None
    missing = sorted({op.value for op in case.fn.ops_used()} - set(target.backend.supported_ops()))
    if missing:
        return "unsupported", "unsupported: " + ", ".join(missing)
    rows = next(iter(case.inputs.values())).shape[0] if case.inputs else 1
    hit = journal.take(key, partial(_fits, fn=case.fn, rows=rows)) if journal else None
    if hit is not None:
        return "journal", hit
    hit = cache.get(key, case.fn, rows) if cache else None
    if hit is not None:  # a declined case never ran, so it is never cached
        return "cache", hit
    reason = declines(target.backend, case.fn)
    return ("declined", "unsupported: " + reason) if reason is not None else ("", None)


def _fits(res: JobResult, fn: Any, rows: int) -> bool:
    """A journaled result is used only if each repeat's outputs are shaped as ``fn``'s results
    for the case's rows (an ``error`` carries none)."""
    return res.status != "ok" or all(_shaped_like(fn, outs, rows) for outs in res.outputs)


def run(paths: Sequence[str], opts: Options) -> tuple[dict[str, Any], int]:
    started = utc_now()
    with _managed(opts, paths):
        collected = collect(paths, opts)
        return run_cases(collected, opts, started)


@contextlib.contextmanager
def _managed(opts: Options, paths: Sequence[str] = ()) -> Iterator[None]:
    """Run under the installed SecurityManager, or, when none is (a library run), under one
    granting what ``opts`` and ``paths`` ask for (``keracheck.security.startup``)."""
    if security.current() is not None:
        yield
        return
    from keracheck.security.startup import for_options

    with security.installed(for_options(opts, paths)):
        yield


def run_cases(
    collected: Collected, opts: Options, started: str | None = None
) -> tuple[dict[str, Any], int]:
    started = started or utc_now()
    with _managed(opts):
        journal = _open_journal(collected, opts)
        try:
            doc, code = _run_cases(collected, opts, started, journal)
        except BaseException:
            if journal is not None:
                journal.close(finished=False)
            raise
        if journal is not None:
            journal.close(finished=True)
            _resumed(journal, opts)
        return doc, code


def _run_cases(
    collected: Collected, opts: Options, started: str, journal: Journal | None
) -> tuple[dict[str, Any], int]:
    since = sandbox.mark()  # the violations of this run, for doc["sandbox"]
    targets, unknown = select_targets(opts)
    if opts.scheduler is not None:  # available where some Dask worker has it
        targets = opts.scheduler.place(targets)
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
    versions = {
        t.id: opts.scheduler.versions(t.id) if opts.scheduler is not None else _versions(t)
        for t in runnable
    }
    results: dict[str, dict[str, JobResult | str]] = {}
    for spec in opts.pass_plugins:  # a pass runs in keracheck's own process
        security.check_plugin(spec)
    extra = levels.load_pass_plugins(opts.pass_plugins)
    plan = _level_plan(collected.cases, runnable, opts, extra)
    targets = [*targets, *(t for t, _ in plan if t.id not in by_id)]

    phases = Phases(opts.progress, opts.heartbeat)

    def one(job: tuple[Target, levels.Optimised | None]) -> None:
        t, opt = job
        phases.start(t.id)
        mine = replace(opts, progress=phases.say if opts.progress else None)
        base = versions[levels.split_id(t.id)[0]]
        results[t.id] = _run_level(t, collected.cases, opt, mine, base, journal)
        phases.done(t.id, results[t.id])

    if collected.cases:
        if opts.progress:
            opts.progress(
                f"{len(collected.cases)} cases on {len(plan)} targets: "
                + ", ".join(t.id for t, _ in plan)
            )
        # with a scheduler every target's batches are in flight at once: the workers limit
        threads = len(plan) if opts.scheduler is not None else max(1, opts.jobs)
        with phases, ThreadPoolExecutor(max_workers=threads) as pool:
            list(pool.map(one, costliest_first(plan)))
    checks, culprits = _level_checks(collected.cases, plan, results, opts, extra)
    case_docs = [
        case_document(c, targets, results, opts, checks.get(c.key, ()), culprits)
        for c in collected.cases
    ]
    if opts.dump_outputs:
        dump_outputs(opts.dump_outputs, collected.cases, results)
    stale = apply_baseline(case_docs, opts.baseline)
    if opts.localise:  # after the baseline: an accepted divergence costs no target runs
        runnable_ids = {t.id: t for t in runnable}
        localise.localise(
            collected.cases, case_docs, runnable_ids, opts.timeout, opts.jobs, opts.progress
        )
    doc = document(case_docs, targets, opts, started, errors, stale, versions)
    doc["sandbox"] = sandbox.summary(since, {t.spec: t.id for t in targets})
    if opts.scheduler is not None:
        doc["distributed"] = opts.scheduler.document()
    code = exit_code(doc)
    doc["summary"]["exitCode"] = code
    return doc, code


# ------------------------------------------------------------------------------ the journal


def _open_journal(collected: Collected, opts: Options) -> Journal | None:
    """The journal of this run's arguments (``opts.journal_dir``; None: no journal)."""
    if opts.journal_dir is None:
        return None
    key = run_key(
        {
            "cwd": os.getcwd(),
            "cases": sorted({(c.path, c.function) for c in collected.cases}),
            "targets": opts.targets,
            "require": opts.require,
            "plugins": opts.plugins,
            "inputs": [opts.n, opts.seed, opts.input_profile],
            "repeat": opts.repeat,
            "timeout": opts.timeout,
            "levels": [list(opts.opt_levels), opts.pass_plugins],
        }
    )
    got = open_journal(opts.journal_dir, key, fresh=not opts.resume)
    if isinstance(got, str):
        if opts.progress:
            opts.progress(f"no journal for this run: {got}")
        return None
    if got.found and opts.progress:
        damaged = f" ({got.damaged} damaged records skipped)" if got.damaged else ""
        opts.progress(
            f"resuming an interrupted run: its journal holds {got.found} results{damaged}"
        )
    return got


def _resumed(journal: Journal, opts: Options) -> None:
    """Say (and audit) how much of a resumed run came from its journal."""
    if not journal.found and not journal.damaged:
        return
    counts = {"taken": journal.taken, "computed": journal.computed, "damaged": journal.damaged}
    security.note("journal", counts | {"path": str(journal.path)})
    if opts.progress:
        opts.progress(
            f"resumed from the journal: {journal.taken} results taken from it, "
            f"{journal.computed} computed"
        )


# ------------------------------------------------------------------------------ opt levels


def costliest_first(
    plan: Sequence[tuple[Target, levels.Optimised | None]],
) -> list[tuple[Target, levels.Optimised | None]]:
    """The order the pool starts the plan's targets in: the costliest first (each target's
    ``cost`` hint), ties in plan order.  With two slots and a simulator that takes most of the
    run, starting it last would leave one CPU idle for the whole tail; the order never changes
    a result, only when each target's rows fill in."""
    return sorted(plan, key=lambda job: -cost(job[0].backend))


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
    journal: Journal | None = None,
) -> dict[str, JobResult | str]:
    """Results per source case key; a variant runs the optimised cases."""
    if opt is None:
        return run_target(t, cases, opts, versions, journal)
    mine = [opt.cases[c.key] for c in cases if c.key in opt.cases]
    got = run_target(t, mine, opts, versions, journal)
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
    return localise.batch_runner(t, case, opts.timeout)


# ------------------------------------------------------------------------------ outputs


def dump_outputs(
    root: str, cases: Sequence[Case], results: Mapping[str, Mapping[str, JobResult | str]]
) -> None:
    """DIR/<fingerprint>/<target>/<k>.npy and DIR/<fingerprint>/inputs/<param>.npy."""
    security.check_write(root)
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


def print_err(msg: str) -> None:
    print(msg, file=sys.stderr)
