"""Native CPU back end benchmarks (issue 5): cases/s, batching, element throughput vs numpy.

    .venv/bin/python bench/bench_cpu.py [--elements 1048576] [--repeat 5] [--corpus corpora]

1. Cases/s through ``run_many`` on ``cpu`` (every host ISA level) and on ``cpu-aarch64`` /
   ``cpu-riscv64`` (qemu-user): the corpus (``.kera``/``.keg`` files, 64 generated input rows
   per case, as ``keracheck run`` does; the op x dtype suite of tests/toolchain/test_c_backend.py
   when the corpus cannot be loaded), cold (empty build cache: emit + gcc + run) and warm
   (cached artifact: emit + hash + run).
2. Batched vs one process per case: the same cases run as one ``run_many`` call (one gcc build,
   one process) and as one call per case (one build and, for qemu, one process per case), both
   cold, and warm with the qemu binary already built (process start + file I/O per case).
3. Element throughput of a 1M-element elementwise chain ``max(sqrt(|x*a + b|) - c, x) * d`` in
   f32 and f64 (one batch row per element) at each ISA level, kernel call only (ctypes, arrays
   preallocated), against numpy doing the same five ops (numpy canonicalises no NaN, so it does
   less than the contract asks) and the reference interpreter; best process CPU time of
   ``--repeat`` runs (all single-threaded), so other jobs on the machine disturb it little.
Prints figures and ratios; asserts nothing.  Builds go to a temporary $KERACHECK_CACHE.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "toolchain"))

from kera.dtypes import DType
from kera.interp import interpret
from kera.ir import Function, FunctionBuilder
from keracheck.targets.cpu import CpuTarget, QemuTarget, best_isa, isa_problem

ROOT = Path(__file__).resolve().parent.parent
Array = np.ndarray[Any, Any]
Case = tuple[Function, dict[str, Array]]


def best(
    f: Callable[[], Any], repeat: int, clock: Callable[[], float] = time.perf_counter
) -> float:
    times = []
    for _ in range(repeat):
        t = clock()
        f()
        times.append(clock() - t)
    return min(times)


def cpu_best(f: Callable[[], Any], repeat: int) -> float:
    """Best process CPU time: single-threaded kernels, robust to other jobs on the machine."""
    return best(f, repeat, time.process_time)


def fresh_cache() -> None:
    os.environ["KERACHECK_CACHE"] = tempfile.mkdtemp(prefix="kera-bench-cache-")


def corpus_cases(paths: Sequence[str]) -> tuple[str, list[Case]]:
    try:
        from keracheck.collect import collect
        from keracheck.options import Options

        got = collect(list(paths), Options())
        if got.cases:
            return f"corpus {', '.join(paths)}", [(c.fn, c.inputs) for c in got.cases]
        why = "no cases"
    except Exception as e:  # the corpus front end may be mid-change; fall back to the suite
        why = f"{type(e).__name__}: {e}"
    import test_c_backend

    suite = [(fn, ins) for _, fn, ins in test_c_backend.suite()]
    return f"op x dtype suite (corpus not loaded: {why[:80]})", suite


def targets() -> list[CpuTarget | QemuTarget]:
    out: list[CpuTarget | QemuTarget] = []
    for isa in ("scalar", "sse2", "avx2", "avx512", "neon"):
        if isa_problem(isa) is None:
            out.append(CpuTarget(isa))
    for arch in ("aarch64", "riscv64"):
        t = QemuTarget(arch)
        if t.available() is None:
            out.append(t)
    return out


def cases_per_second(cases: list[Case]) -> None:
    print(f"\n## 1. cases/s through run_many ({len(cases)} cases)")
    print(f"{'target':14} {'cold s':>8} {'cold cases/s':>13} {'warm s':>8} {'warm cases/s':>13}")
    for t in targets():
        fresh_cache()
        t0 = time.perf_counter()
        out = t.run_many(cases)
        cold = time.perf_counter() - t0
        errors = sum(isinstance(o, Exception) for o in out)
        warm = best(lambda t=t: t.run_many(cases), 2)
        note = f"  ({errors} errors)" if errors else ""
        n = len(cases)
        print(f"{t.name:14} {cold:8.2f} {n / cold:13.1f} {warm:8.3f} {n / warm:13.1f}{note}")


def batching(cases: list[Case], count: int) -> None:
    sub = cases[:count]
    print(f"\n## 2. batched vs one call per case ({len(sub)} cases)")
    print(f"{'target':14} {'batched s':>10} {'per-case s':>11} {'ratio':>7}   (cold: build + run)")
    for t in targets():
        if isinstance(t, CpuTarget) and t.isa != best_isa():
            continue
        fresh_cache()
        batched = best(lambda t=t: t.run_many(sub), 1)
        fresh_cache()
        t0 = time.perf_counter()
        for case in sub:
            t.run_many([case])
        single = time.perf_counter() - t0
        print(f"{t.name:14} {batched:10.2f} {single:11.2f} {single / batched:7.1f}x")
    print("warm, qemu only: one process for the batch vs one process per case (same binary)")
    for t in targets():
        if not isinstance(t, QemuTarget):
            continue
        binary = t.build([fn for fn, _ in sub])
        index: dict[str, int] = {}
        for fn, _ in sub:
            index.setdefault(fn.fingerprint, len(index))
        rows = [(index[fn.fingerprint], fn, ins) for fn, ins in sub]
        one = best(lambda t=t, rows=rows, binary=binary: t.run_binary(binary, rows), 2)
        each = best(
            lambda t=t, rows=rows, binary=binary: [t.run_binary(binary, [r]) for r in rows], 1
        )
        per = each / len(rows) * 1e3
        print(f"{t.name:14} {one:10.2f} {each:11.2f} {each / one:7.1f}x   ({per:.1f} ms/process)")


def chain(dt: DType) -> Function:
    b = FunctionBuilder(f"chain_{dt}")
    x = b.param("x", dt)
    a, bb, c, d = (b.const(v, dt) for v in (1.5, -0.25, 0.75, 3.0))
    y = b.op("add", b.op("mul", x, a), bb)
    y = b.op("sub", b.op("sqrt", b.op("abs", y)), c)
    return b.build(b.op("mul", b.op("max", y, x), d))


def numpy_chain(x: Array) -> Array:
    t = x.dtype.type
    with np.errstate(all="ignore"):
        y = np.sqrt(np.abs(x * t(1.5) + t(-0.25))) - t(0.75)
        return np.maximum(y, x) * t(3.0)


def throughput(elements: int, repeat: int) -> None:
    print(f"\n## 3. elementwise chain, {elements} elements (Melem/s, kernel call only)")
    rng = np.random.default_rng(0)
    for dt in (DType.F32, DType.F64):
        fn = chain(dt)
        x = (rng.standard_normal(elements) * 4).astype(dt.np)
        np_rate = elements / cpu_best(lambda x=x: numpy_chain(x), repeat) / 1e6
        small = {"x": x[: elements // 16]}
        ref_s = cpu_best(lambda fn=fn, small=small: interpret(fn, small), 2)
        ref_rate = len(small["x"]) / ref_s / 1e6
        print(f"{dt}: numpy {np_rate:8.1f}   reference interpreter {ref_rate:8.1f}")
        for t in targets():
            if not isinstance(t, CpuTarget):
                continue
            entry = t.entry(fn)
            out = np.empty_like(x)
            px, po = x.ctypes.data, out.ctypes.data
            kernel = cpu_best(lambda e=entry, px=px, po=po: e(elements, px, po), repeat)
            rate = elements / kernel / 1e6
            print(f"    {t.name:12} {rate:8.1f}   {rate / np_rate:5.2f}x numpy")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--elements", type=int, default=1 << 20)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--corpus", nargs="*", default=[str(ROOT / "corpora")])
    ap.add_argument("--per-case", type=int, default=40, help="cases in the batching comparison")
    args = ap.parse_args()
    print(f"python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}")
    fresh_cache()
    what, cases = corpus_cases(args.corpus)
    print(f"cases: {what}")
    throughput(args.elements, args.repeat)
    cases_per_second(cases)
    batching(cases, args.per_case)


if __name__ == "__main__":
    main()
