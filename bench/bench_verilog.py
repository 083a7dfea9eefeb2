"""Verilog back end figures: simulation throughput of a 50-op datapath, build times, corpus cases/s.

Prints figures, asserts nothing.  Run from the repository root::

    .venv/bin/python bench/bench_verilog.py [--vectors N] [--corpus DIR] [--yosys] [--skip ...]

Phases (wall-clock time; builds are measured cold, in a fresh cache directory):

* ``emit``      kera.backends.verilog on the 50-op f32 graph: emit time, latency, core count.
* ``icarus``    the plain batch test bench in Icarus: compile + run of N vectors, vectors/s.
* ``cocotb``    cocotb 2.x + Icarus (the ``verilog`` target): build + run at two batch sizes;
                the marginal rate (difference of the two) separates start-up from per-vector cost.
* ``verilator`` the plain bench with ``verilator --binary``: cold build at -O0 (small batches)
                and at the default optimisation, then 1M vectors through the optimised build.
* ``corpus``    every function of the corpus with 64 generated vectors through ``run_many`` of
                both targets (what keracheck calls: simulations chunked by core count), cold
                (fresh build cache) and warm (cached builds): cases/s.
* ``yosys``     (with ``--yosys``) synth_ice40 resource estimate of the 50-op datapath.

The 50-op graph is scalar f32 (x, y, z) -> 2 results, cycling through add, mul, sub, fma, div,
sqrt(abs), min, max, floor, round, convert to i32 and back, compare + select and neg.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from kera.backends.verilog import emit
from kera.dtypes import DType
from kera.ir import Function, FunctionBuilder, Node
from keracheck import inputs as inputs_mod
from keracheck.collect import compile_file, iter_files
from keracheck.runners.verilator import Verilator
from keracheck.targets import verilog as vt
from keracheck.targets.verilog import testbench

Case = tuple[Function, dict[str, np.ndarray[Any, Any]]]


def graph50() -> Function:
    """50 op nodes over scalar f32 params x, y, z."""
    b = FunctionBuilder("graph50")
    x, y, z = b.param("x", DType.F32), b.param("y", DType.F32), b.param("z", DType.F32)
    acc: Node = x
    steps: list[Callable[[Node], Node]] = [
        lambda a: b.op("add", a, y),
        lambda a: b.op("mul", a, z),
        lambda a: b.op("sub", a, x),
        lambda a: b.op("fma", a, y, z),
        lambda a: b.op("div", a, b.op("add", y, z)),
        lambda a: b.op("sqrt", b.op("abs", a)),
        lambda a: b.op("min", a, y),
        lambda a: b.op("max", a, z),
        lambda a: b.op("floor", a),
        lambda a: b.op("convert", b.op("convert", a, to=DType.I32), to=DType.F32),
        lambda a: b.op("select", b.op("lt", a, x), a, b.op("neg", a)),
        lambda a: b.op("round", a),
    ]
    k = 0
    while _count(acc) < 49:
        acc = steps[k % len(steps)](acc)
        k += 1
    fn = b.build(acc, b.op("mul", acc, y))
    return fn


def _count(node: Node) -> int:
    seen: set[int] = set()
    todo = [node]
    while todo:
        n = todo.pop()
        if id(n) not in seen:
            seen.add(id(n))
            todo.extend(n.inputs)
    return sum(1 for _ in seen) - 3  # the three params are not ops


def vectors(fn: Function, n: int, seed: int = 0) -> dict[str, np.ndarray[Any, Any]]:
    return inputs_mod.generate(fn, n, seed)


def timed(f: Callable[[], Any]) -> tuple[float, Any]:
    t = time.perf_counter()
    out = f()
    return time.perf_counter() - t, out


def phase_emit(fn: Function) -> None:
    dt, d = timed(lambda: emit(fn))
    ops = sum(1 for n in fn.nodes() if n.op.value != "param")
    print(
        f"emit       {ops} ops: {dt * 1e3:.1f} ms, latency {d.latency} clocks, "
        f"{sum(d.cores.values())} cores, {d.register_bits} register bits outside cores"
    )


def phase_icarus(fn: Function, n: int) -> None:
    case = [(fn, vectors(fn, n))]
    dt, _ = timed(lambda: vt.run_plain(case, "icarus"))
    small = [(fn, vectors(fn, 1))]
    d1, _ = timed(lambda: vt.run_plain(small, "icarus"))
    print(
        f"icarus     plain bench, {n} vectors: {dt:.2f} s total ({n / dt:,.0f} vectors/s); "
        f"compile + 1 vector {d1:.2f} s; marginal {n / max(dt - d1, 1e-9):,.0f} vectors/s"
    )


def phase_cocotb(fn: Function, n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp)
        cold, _ = timed(lambda: vt.run_cocotb([(fn, vectors(fn, 1))], cache=cache))
        warm1, _ = timed(lambda: vt.run_cocotb([(fn, vectors(fn, 1))], cache=cache))
        big, _ = timed(lambda: vt.run_cocotb([(fn, vectors(fn, n))], cache=cache))
    print(
        f"cocotb     build + 1 vector {cold:.2f} s cold, {warm1:.2f} s warm; {n} vectors "
        f"{big:.2f} s ({n / big:,.0f} vectors/s); marginal "
        f"{(n - 1) / max(big - warm1, 1e-9):,.0f} vectors/s"
    )


def phase_verilator(fn: Function, n: int) -> None:
    d = vt.design_of(fn)
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp)
        quick, _ = timed(lambda: vt.run_plain([(fn, vectors(fn, 1))], "verilator", cache=cache))
        full_case = [(fn, vectors(fn, max(n, testbench.QUICK_BUILD_VECTORS + 1)))]
        testbench.QUICK_BUILD_VECTORS, saved = 0, testbench.QUICK_BUILD_VECTORS
        try:
            full, _ = timed(lambda: vt.run_plain([(fn, vectors(fn, 1))], "verilator", cache=cache))
            run, _ = timed(lambda: vt.run_plain(full_case, "verilator", cache=cache))
        finally:
            testbench.QUICK_BUILD_VECTORS = saved
    m = len(full_case[0][1]["x"])
    print(
        f"verilator  build + 1 vector: {quick:.1f} s at -O0, {full:.1f} s optimised "
        f"({d.top}); {m:,} vectors {run:.2f} s incl. I/O ({m / run:,.0f} vectors/s)"
    )


def corpus_cases(directory: Path) -> list[Case]:
    cases = []
    for path, err in iter_files([str(directory)]):
        if err is None and path.endswith(".kera"):
            for fn in compile_file(path).functions.values():
                cases.append((fn, vectors(fn, 64)))
    return cases


def phase_corpus(directory: Path, skip: set[str]) -> None:
    """Both targets' run_many (what keracheck calls), in a fresh build cache, then warm."""
    cases = corpus_cases(directory)
    for name, factory in vt.TARGETS.items():
        if name in skip:
            continue
        target = factory()
        with tempfile.TemporaryDirectory() as tmp:
            saved = os.environ.get("KERACHECK_CACHE")
            os.environ["KERACHECK_CACHE"] = tmp
            try:
                cold, res = timed(lambda: target.run_many(cases))  # noqa: B023
                warm, _ = timed(lambda: target.run_many(cases))  # noqa: B023
            finally:
                _restore("KERACHECK_CACHE", saved)
        n, bad = len(cases), sum(isinstance(r, Exception) for r in res)
        sims = len(vt.chunks(cases))
        print(
            f"corpus     {name}: {n} cases x 64 vectors in {sims} simulations, cold {cold:.1f} s "
            f"({n / cold:.2f} cases/s), warm {warm:.1f} s ({n / warm:.2f} cases/s), {bad} errors"
        )


def _restore(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def phase_yosys(fn: Function) -> None:
    dt, res = timed(lambda: vt.resource_estimate(fn))
    print(
        f"yosys      synth_ice40: {res.luts} LUT4, {res.ffs} FF, {res.carries} carries, "
        f"{res.dsps} DSP, {res.cells} cells ({dt:.1f} s)"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vectors", type=int, default=2000, help="vectors for Icarus and cocotb")
    ap.add_argument("--verilator-vectors", type=int, default=1_000_000)
    ap.add_argument("--corpus", type=Path, default=Path("corpora"))
    ap.add_argument("--yosys", action="store_true", help="also run the yosys estimate")
    ap.add_argument("--skip", default="", help="comma-separated phases to skip")
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    print(
        f"python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}, "
        f"{Verilator().version()}"
    )
    fn = graph50()
    phases: dict[str, Callable[[], None]] = {
        "emit": lambda: phase_emit(fn),
        "icarus": lambda: phase_icarus(fn, args.vectors),
        "cocotb": lambda: phase_cocotb(fn, args.vectors),
        "verilator": lambda: phase_verilator(fn, args.verilator_vectors),
        "corpus": lambda: phase_corpus(args.corpus, skip),
    }
    if args.yosys:
        phases["yosys"] = lambda: phase_yosys(fn)
    for name, phase in phases.items():
        if name not in skip:
            phase()
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
