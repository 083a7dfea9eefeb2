"""Optimiser figures: pipeline throughput on a ~100k-node graph, and what -O2 does to targets.

Prints figures, asserts nothing.  Run from the repository root::

    .venv/bin/python bench/bench_passes.py                    # everything, best of 3
    .venv/bin/python bench/bench_passes.py --skip run         # no target runs (seconds, not minutes)
    .venv/bin/python bench/bench_passes.py --profile          # cProfile one -O2 run, top functions

Phases:

* ``pipeline``  ``kera.passes`` on the graph of ``bench_core.py`` (its builder, ``--nodes``):
                the validator alone, ``-O1``, ``-O2`` without the validator (``verify=False``)
                and ``-O2`` with it, as ``kerac build`` runs it.  Best of ``--repeat`` wall and
                process CPU times; nodes/s counts the *input* graph's nodes once per pipeline
                (all rounds, every pass and every validation included); the ratio to the aim
                is printed for both clocks, the verdict uses wall time.  The validator's share
                is ``Outcome.validate_seconds`` over validation + pass seconds of one run.  The
                aim (the passes issue): >= 100k nodes/s through ``-O2`` including validation.
                Then the per-pass record of that ``-O2`` run (``kerac build --stats``).
* ``code``      every function of ``corpora/**/*.kera`` at ``-O0`` and at ``-O2``: nodes; C
                source of one translation unit at ``kerac emit``'s default ISA (``scalar``);
                one scalar WASM module; PTX instructions (every kernel is straight-line, so
                static = executed per thread); Verilog core instances and latency (clocks).
                A function a back end rejects at either level is left out of that back end's
                rows, and the count is printed.
* ``run``       the corpus at both levels on ``ref`` (``kera.interp.interpret``), ``wasm``
                (``keracheck``'s target: ``run_many`` cold -- emit, Cranelift, run -- then warm,
                with the module cached), ``ptx-emu`` (one ``run`` per case: emit, parse,
                emulate) and ``cpu`` (the host's best ISA: one gcc build of all functions in a
                fresh cache, then the kernel calls alone through ctypes; the two are printed
                apart and summed).  Inputs are generated once from the ``-O0`` function and
                given to both levels; the outputs' bits are compared between levels.  Levels
                are timed alternately (best of ``--repeat``; ``--builds`` for gcc) and compared
                in CPU time -- this process's and its children's (gcc) -- which other jobs on
                a shared machine disturb less than wall time (printed beside it).

Ratios are ``-O2 / -O0``: below 1 means ``-O2`` is smaller or faster.
"""

from __future__ import annotations

import argparse
import cProfile
import ctypes
import gc
import os
import platform
import pstats
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from bench_core import Timing, best_of, build_graph

from kera import passes
from kera.backends import c, ptx, verilog, wasm
from kera.frontend import compile_source
from kera.interp import batch_size, interpret
from kera.ir import Function
from keracheck.inputs import generate
from keracheck.targets.cpu import CpuTarget
from keracheck.targets.ptx import PtxEmuBackend
from keracheck.targets.wasm import WasmBackend

Array = np.ndarray[Any, Any]
Inputs = dict[str, Array]
Outputs = Sequence[Array]
LEVELS = (0, 2)
AIM_NODES_PER_S = 100_000  # through -O2 including validation (the passes issue)

# ------------------------------------------------------------------------------ pipeline


def _share(outcome: passes.Outcome) -> str:
    """The validator's share of one run's measured time (validation + passes)."""
    work = outcome.validate_seconds + sum(s.seconds for s in outcome.stats)
    return f"{outcome.validate_seconds / work:6.1%}" if outcome.validate_seconds else "     -"


def _row(name: str, nodes: int, t: Timing, share: str = "     -", aim: bool = False) -> str:
    wall, cpu = nodes / t.wall, nodes / t.cpu
    verdict = ""
    if aim:
        ratios = f"{wall / AIM_NODES_PER_S:.3f}x / {cpu / AIM_NODES_PER_S:.3f}x"
        verdict = f"aim {ratios}: " + ("meets it" if wall >= AIM_NODES_PER_S else "BELOW it")
    return (
        f"{name:<34} {t.wall:8.3f} {t.cpu:8.3f} {wall:>11,.0f} {cpu:>11,.0f}  {share}  {verdict}"
    ).rstrip()


def phase_pipeline(nodes: int, repeat: int) -> None:
    fn = build_graph(nodes).functions["bench"]
    n = len(fn.nodes())
    print(f"\n## pipeline: bench_core graph, {n:,} nodes, best of {repeat}")
    print(
        f"{'run':<34} {'wall s':>8} {'cpu s':>8} {'nodes/s wall':>11} {'nodes/s cpu':>11}"
        f"  {'valid.':>6}"
    )
    t, _ = best_of(repeat, lambda: passes.validate(fn))
    print(_row("validate alone (one pass over it)", n, t))
    runs: list[tuple[str, passes.PassManager, bool]] = [
        ("-O1 (fold, cse) + validation", passes.PassManager(passes.pipeline(1)), False),
        (
            "-O2 passes only (verify=False)",
            passes.PassManager(passes.pipeline(2), verify=False),
            False,
        ),
        ("-O2 + validation (kerac build)", passes.PassManager(passes.pipeline(2)), True),
    ]
    outcome: passes.Outcome | None = None
    for name, manager, aim in runs:
        outcome = None  # the previous run's nodes would be found by interning, not built
        t, outcome = best_of(repeat, partial(manager.run, fn))
        assert outcome is not None
        print(_row(name, n, t, _share(outcome), aim))
    assert outcome is not None
    print_stats(outcome)


def print_stats(outcome: passes.Outcome) -> None:
    """The per-pass record of one -O2 run, as ``kerac build --stats`` prints it."""
    converged = "converged" if outcome.converged else "NOT converged"
    print(f"\n-O2 per pass (last run; {outcome.rounds} rounds, {converged}):")
    print(f"{'round':>5} {'pass':<9} {'nodes before':>12} {'after':>8} {'rewrites':>8} {'s':>7}")
    for s in outcome.stats:
        print(
            f"{s.round:>5} {s.name:<9} {s.nodes_before:>12,} {s.nodes_after:>8,} "
            f"{s.rewrites:>8,} {s.seconds:7.3f}"
        )
    passes_s = sum(s.seconds for s in outcome.stats)
    print(f"passes {passes_s:.3f} s, validation {outcome.validate_seconds:.3f} s")


def profile(nodes: int, top: int) -> None:
    fn = build_graph(nodes).functions["bench"]
    manager = passes.PassManager(passes.pipeline(2))
    prof = cProfile.Profile()
    prof.runcall(lambda: manager.run(fn))
    stats = pstats.Stats(prof)
    print(f"cProfile of -O2 + validation ({len(fn.nodes()):,} nodes), top {top}:")
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)


# ------------------------------------------------------------------------------ the corpus


def load_corpus(root: Path) -> list[Function]:
    fns: list[Function] = []
    for path in sorted(root.glob("**/*.kera")):
        result = compile_source(path.read_text(), str(path))
        if result.graph is None:
            print(f"  {path}: does not compile, left out", file=sys.stderr)
            continue
        fns.extend(result.graph.functions.values())
    return fns


def optimise(fns: Sequence[Function], level: int) -> list[Function]:
    pipeline = passes.pipeline(level)
    return [passes.optimize(fn, pipeline).function for fn in fns]


def accepted(
    emit_one: Callable[[Function], object], levels: dict[int, list[Function]]
) -> list[int]:
    """Indices of the functions the back end emits at every level (like for like)."""
    ok = []
    for i in range(len(levels[0])):
        try:
            for fns in levels.values():
                emit_one(fns[i])
        except Exception:  # a back-end limit (size, unsupported op): not this bench's concern
            continue
        ok.append(i)
    return ok


def ptx_instructions(text: str) -> int:
    """Instruction lines of a PTX module: indented, ending in ``;``, not a ``.`` directive."""
    return sum(
        1
        for line in text.splitlines()
        if line[:1] == "\t" and line[1:2] != "." and line[-1:] == ";"
    )


def _c_source(fns: Sequence[Function]) -> str:
    return c.emit({f"f{i}": fn for i, fn in enumerate(fns)}, isa="scalar").c


def _wasm_module(fns: Sequence[Function]) -> bytes:
    return wasm.compile_functions(list(fns), False, [f"k{i}" for i in range(len(fns))]).wasm


#: metric -> (what must emit per function, value over the accepted functions of one level)
CODE_METRICS: dict[str, tuple[Callable[[Function], object], Callable[[list[Function]], float]]] = {
    "nodes (all functions)": (lambda f: f, lambda fs: sum(len(f.nodes()) for f in fs)),
    "C source bytes (scalar, one unit)": (
        lambda f: c.emit([f], isa="scalar"),
        lambda fs: len(_c_source(fs)),
    ),
    "C source lines": (
        lambda f: c.emit([f], isa="scalar"),
        lambda fs: _c_source(fs).count("\n"),
    ),
    "WASM module bytes (scalar, one)": (lambda f: wasm.check(f), lambda fs: len(_wasm_module(fs))),
    "PTX instructions (sum of kernels)": (
        ptx.emit,
        lambda fs: sum(ptx_instructions(ptx.emit(f)) for f in fs),
    ),
    "Verilog core instances (sum)": (
        verilog.emit,
        lambda fs: sum(sum(verilog.emit(f).cores.values()) for f in fs),
    ),
    "Verilog latency, clocks (sum)": (
        verilog.emit,
        lambda fs: sum(verilog.emit(f).latency for f in fs),
    ),
    "Verilog latency, clocks (max)": (
        verilog.emit,
        lambda fs: max(verilog.emit(f).latency for f in fs),
    ),
}


def phase_code(levels: dict[int, list[Function]]) -> None:
    total = len(levels[0])
    changed = sum(a is not b for a, b in zip(levels[0], levels[2], strict=True))
    print(f"\n## code: corpus, {total} functions ({changed} changed by -O2)")
    print(f"{'metric':<34} {'-O0':>10} {'-O2':>10} {'O2/O0':>7}")
    for name, (emit_one, measure) in CODE_METRICS.items():
        ok = accepted(emit_one, levels)
        if not ok:
            print(f"{name:<34} no function emits at both levels")
            continue
        v0, v2 = (measure([levels[lv][i] for i in ok]) for lv in LEVELS)
        note = "" if len(ok) == total else f"  ({total - len(ok)} functions left out)"
        print(f"{name:<34} {v0:>10,.0f} {v2:>10,.0f} {v2 / v0:7.3f}{note}")


# ------------------------------------------------------------------------------ running it

Case = tuple[Function, Inputs]
Runner = Callable[[list[Case]], list[Outputs | Exception]]


def _bits(outs: Outputs | Exception) -> bytes | None:
    if isinstance(outs, Exception):
        return None
    return b"".join(np.ascontiguousarray(a).tobytes() for a in outs)


def _compare(got: dict[int, list[Outputs | Exception]]) -> str:
    errors = [sum(isinstance(o, Exception) for o in got[lv]) for lv in LEVELS]
    differ = sum(
        _bits(a) != _bits(b)
        for a, b in zip(got[0], got[2], strict=True)
        if not isinstance(a, Exception) and not isinstance(b, Exception)
    )
    bad = f"errors -O0 {errors[0]}, -O2 {errors[1]}; " if any(errors) else ""
    return f"{bad}bits differ between levels in {differ} cases"


def _cpu_seconds() -> float:
    """CPU seconds of this process and of its finished children (gcc)."""
    t = os.times()  # children: to the clock tick; this process: to the nanosecond
    return time.process_time() + t.children_user + t.children_system


def _timed(run: Callable[[], Any], repeat: int) -> tuple[Timing, Any]:
    """Best wall and best CPU seconds (this process and its children) of ``repeat`` calls, and
    the last result."""
    wall, cpu, out = float("inf"), float("inf"), None
    for _ in range(repeat):
        gc.collect()
        w0, c0 = time.perf_counter(), _cpu_seconds()
        out = run()
        cpu = min(cpu, _cpu_seconds() - c0)
        wall = min(wall, time.perf_counter() - w0)
    return Timing(wall, cpu), out


def _ratio_row(name: str, t0: Timing, t2: Timing, note: str) -> None:
    """Compared in CPU time, steadier than wall time on a shared machine; wall time beside."""
    print(
        f"{name:<34} {t0.cpu:9.3f} {t2.cpu:9.3f} {t2.cpu / max(t0.cpu, 1e-9):7.3f}   "
        f"{t0.wall:8.3f} {t2.wall:8.3f}  {note}".rstrip()
    )


def _each(run: Callable[[Function, Inputs], Outputs]) -> Runner:
    def many(cases: list[Case]) -> list[Outputs | Exception]:
        out: list[Outputs | Exception] = []
        for fn, xs in cases:
            try:
                out.append(run(fn, xs))
            except Exception as e:
                out.append(e)
        return out

    return many


def _paired(run: Callable[[int], Any], repeat: int) -> tuple[dict[int, Timing], dict[int, Any]]:
    """``run(level)`` for each level in turn, ``repeat`` times over: best wall and CPU seconds
    per level and its last result.  Alternating keeps a change in the machine's load from
    landing on one level only."""
    wall = dict.fromkeys(LEVELS, float("inf"))
    cpu = dict.fromkeys(LEVELS, float("inf"))
    out: dict[int, Any] = {}
    for _ in range(repeat):
        for lv in LEVELS:
            t, out[lv] = _timed(partial(run, lv), 1)
            wall[lv], cpu[lv] = min(wall[lv], t.wall), min(cpu[lv], t.cpu)
    return {lv: Timing(wall[lv], cpu[lv]) for lv in LEVELS}, out


def run_simple(name: str, runner: Runner, cases: dict[int, list[Case]], repeat: int) -> None:
    times, got = _paired(lambda lv: runner(cases[lv]), repeat)
    _ratio_row(name, times[0], times[2], _compare(got))


def run_wasm(cases: dict[int, list[Case]], repeat: int) -> None:
    reason = WasmBackend().available()
    if reason is not None:
        print(f"{'wasm':<34} skipped: {reason}")
        return
    # a fresh target has a fresh engine, whose module cache is empty
    cold, _ = _paired(lambda lv: WasmBackend().run_many(cases[lv]), repeat)
    targets = {lv: WasmBackend() for lv in LEVELS}
    # the first of these runs compiles (cold), the best of the rest is warm
    warm, got = _paired(lambda lv: targets[lv].run_many(cases[lv]), repeat + 1)
    _ratio_row("wasm run_many cold (emit+compile)", cold[0], cold[2], "one module per level")
    _ratio_row("wasm run_many warm (module cached)", warm[0], warm[2], _compare(got))


def _sym(fn: Function) -> str:
    """The entry point of ``fn`` in a CpuTarget build (keracheck.targets.cpu's docstring)."""
    return f"kera_f{fn.fingerprint[:20]}"


def _call(lib: ctypes.CDLL, fn: Function, xs: Inputs) -> Outputs:
    """One kernel call: ``(size_t n, void *param..., void *result...) -> int``."""
    args = [np.ascontiguousarray(xs[str(p.attr("name"))], dtype=p.dtype.np) for p in fn.params]
    n = batch_size(fn, xs)
    outs = [np.empty((n, *r.shape), dtype=r.dtype.np) for r in fn.results]
    entry = getattr(lib, _sym(fn))
    entry.restype = ctypes.c_int
    entry.argtypes = [ctypes.c_size_t] + [ctypes.c_void_p] * (len(args) + len(outs))
    status = entry(n, *(a.ctypes.data for a in args), *(o.ctypes.data for o in outs))
    if status != c.OK:
        raise RuntimeError(f"{_sym(fn)} returned {status}")
    return outs


def _calls(lib: ctypes.CDLL) -> Runner:
    return _each(lambda fn, xs: _call(lib, fn, xs))


def run_cpu(cases: dict[int, list[Case]], repeat: int, builds: int) -> None:
    target = CpuTarget()
    reason = target.available()
    if reason is not None:
        print(f"{'cpu':<34} skipped: {reason}")
        return
    saved = os.environ.get("KERACHECK_CACHE")
    with tempfile.TemporaryDirectory(prefix="kera-bench-passes-") as tmp:

        def build(lv: int) -> Path:
            os.environ["KERACHECK_CACHE"] = tempfile.mkdtemp(dir=tmp)  # cold: gcc really runs
            return target.build([fn for fn, _ in cases[lv]])

        try:
            built, paths = _paired(build, builds)
        finally:
            if saved is None:
                os.environ.pop("KERACHECK_CACHE", None)
            else:
                os.environ["KERACHECK_CACHE"] = saved
        runs = {lv: _calls(ctypes.CDLL(str(paths[lv]))) for lv in LEVELS}
        calls, got = _paired(lambda lv: runs[lv](cases[lv]), repeat)
    isa = f"isa {target.isa}, gcc {target.gcc.version()}, best of {builds}"
    _ratio_row("cpu build (emit + one gcc, cold)", built[0], built[2], isa)
    _ratio_row("cpu kernel calls only (no build)", calls[0], calls[2], _compare(got))
    both = {
        lv: Timing(built[lv].wall + calls[lv].wall, built[lv].cpu + calls[lv].cpu) for lv in LEVELS
    }
    _ratio_row("cpu build + calls", both[0], both[2], "")


def phase_run(
    levels: dict[int, list[Function]], rows: int, ptx_rows: int, repeat: int, builds: int
) -> None:
    inputs = [generate(fn, rows, 0) for fn in levels[0]]  # -O2 keeps the parameters
    small = [{k: v[:ptx_rows] for k, v in xs.items()} for xs in inputs]
    cases = {lv: list(zip(levels[lv], inputs, strict=True)) for lv in LEVELS}
    ptx_cases = {lv: list(zip(levels[lv], small, strict=True)) for lv in LEVELS}
    print(
        f"\n## run: corpus, {len(inputs)} cases x {rows} rows (ptx-emu {ptx_rows}), best of {repeat}"
    )
    print(
        f"{'target':<34} {'-O0 cpu s':>9} {'-O2 cpu s':>9} {'O2/O0':>7}   "
        f"{'-O0 wall':>8} {'-O2 wall':>8}"
    )
    run_simple("ref (interpret)", _each(interpret), cases, repeat)
    run_wasm(cases, repeat)
    emu = PtxEmuBackend()
    if emu.available() is None:
        run_simple("ptx-emu (run per case)", _each(emu.run), ptx_cases, repeat)
    else:
        print(f"{'ptx-emu':<34} skipped: {emu.available()}")
    run_cpu(cases, repeat, builds)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=100_000, help="pipeline graph size")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement; best shown")
    ap.add_argument("--corpus", type=Path, default=Path("corpora"))
    ap.add_argument("--rows", type=int, default=1024, help="input rows per case (ref, wasm, cpu)")
    ap.add_argument("--ptx-rows", type=int, default=64, help="input rows per case on ptx-emu")
    ap.add_argument("--builds", type=int, default=2, help="cold gcc builds per level (cpu)")
    ap.add_argument("--skip", default="", help="comma-separated phases: pipeline,code,run")
    ap.add_argument("--profile", action="store_true", help="cProfile one -O2 run and stop")
    ap.add_argument("--top", type=int, default=25, help="functions shown by --profile")
    args = ap.parse_args()
    if args.profile:
        profile(args.nodes, args.top)
        return 0
    skip = set(filter(None, args.skip.split(",")))
    print(
        f"python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}"
    )
    if "pipeline" not in skip:
        phase_pipeline(args.nodes, args.repeat)
    if {"code", "run"} <= skip:
        return 0
    fns = load_corpus(args.corpus)
    t0 = time.perf_counter()
    levels = {lv: optimise(fns, lv) for lv in LEVELS}
    dt = time.perf_counter() - t0
    print(f"\ncorpus: {len(fns)} functions; -O0 and -O2 pipelines over all of them {dt:.3f} s")
    if "code" not in skip:
        phase_code(levels)
    if "run" not in skip:
        phase_run(levels, args.rows, args.ptx_rows, args.repeat, args.builds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
