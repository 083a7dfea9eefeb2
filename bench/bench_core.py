"""Throughput of the Kera core: graph build + hash + serialize, .keg load + verify, interpreter.

Prints figures, asserts nothing.  Run from the repository root::

    .venv/bin/python bench/bench_core.py                  # default sizes, best of 3
    .venv/bin/python bench/bench_core.py --profile build  # cProfile one phase, top functions
    .venv/bin/python bench/bench_core.py --no-gc          # cyclic GC off while timing (its share)

Phases (each the best of ``--repeat`` runs; rates are computed from process CPU time, which
other jobs on a shared machine disturb less than wall-clock time; both are printed):

* ``build``     construct the graph through the public builder: typing rule, canonical
                encoding and SHA3-256 of every node (interning), region hash of the function.
* ``serialize`` ``kera.keg.dumps`` of the built graph.
* ``load``      ``kera.keg.loads`` of those bytes, after the built graph is freed so the loader
                creates every node itself: parse, bounds checks, type re-inference, node
                hashing, fingerprint check and the canonical re-encoding check.
* ``interp``    ``kera.interp.interpret`` of a small elementwise chain over a batch of
                ``--elements`` scalars.

The graph is one function of about ``--nodes`` nodes made of repeated blocks, each with fresh
constants (so nothing is merged by CSE) and chained through a carried f32[64] value: float
elementwise chains, integer bit ops and conversions, comparisons and select, a sum reduction,
reshape / transpose / slice / concat / broadcast, and a small matmul.  The aim in issue 2 is
>= 100k nodes/s for build + hash + serialize and for load + verify on a 2-core machine.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import platform
import pstats
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from kera import keg
from kera.dtypes import DType
from kera.interp import interpret
from kera.ir import Function, FunctionBuilder, Graph, Node, sweep

AIM_NODES_PER_S = 100_000
WIDTH = 64  # the carried vector; reshaped to 8 x 8


def _block(b: FunctionBuilder, k: int, acc: Node, y: Node, ints: Node, m: Node) -> Node:
    """One block of 31 nodes; ``k`` makes its constants (and so every node) unique."""
    c = b.const(np.float32(k) * np.float32(1e-3), DType.F32, [WIDTH])
    ci = b.const(k, DType.I32, [WIDTH])  # shifts use its low 5 bits
    # float elementwise chain
    t = b.op("add", acc, c)
    t = b.op("mul", t, y)
    t = b.op("max", t, b.op("neg", acc))
    t = b.op("sqrt", b.op("abs", t))
    t = b.op("fma", t, c, y)
    t = b.op("floor", t)
    # integer bit ops and a conversion back to float
    s = b.op("xor", b.op("shl", ints, ci), b.op("shr", ints, ci))
    s = b.op("convert", b.op("and", s, ci), to=DType.F32)
    # comparison and select
    t = b.op("select", b.op("lt", t, s), t, b.op("sub", s, c))
    # data movement and a reduction
    sq = b.op("reshape", t, shape=[8, 8])
    r = b.op("sum", b.op("transpose", sq, perm=[1, 0]), axis=1)  # f32[8]
    mm = b.op("matmul", sq, m)  # f32[8, 8]
    half = b.op("slice", b.op("reshape", mm, shape=[WIDTH]), start=[0], stop=[WIDTH - 8])
    back = b.op("concat", half, r, axis=0)  # f32[64]
    wide = b.op("broadcast", b.op("amax", sq, axis=0), shape=[8, 8])
    u = b.op("add", back, b.op("reshape", wide, shape=[WIDTH]))
    return b.op("min", u, b.op("div", t, c))


def build_graph(nodes: int) -> Graph:
    b = FunctionBuilder("bench")
    acc = b.param("x", DType.F32, [WIDTH])
    y = b.param("y", DType.F32, [WIDTH])
    ints = b.param("i", DType.I32, [WIDTH])
    m = b.param("m", DType.F32, [8, 8])
    k = 0
    per_block = 31
    while 4 + per_block * (k + 1) <= nodes:
        acc = _block(b, k, acc, y, ints, m)
        k += 1
    return Graph([b.build(acc)])


def node_count(graph: Graph) -> int:
    return sum(len(f.nodes()) for f in graph.functions.values())


@dataclass(frozen=True)
class Timing:
    """Best wall-clock and best process CPU seconds over the repeats."""

    wall: float
    cpu: float


GC_WHILE_TIMING = True  # --no-gc turns Python's cyclic collector off inside the timed region


def best_of(repeat: int, run: Callable[[], Any]) -> tuple[Timing, Any]:
    wall, cpu, out = float("inf"), float("inf"), None
    for _ in range(repeat):
        out = None  # free the previous result first: live nodes would be found by interning
        gc.collect()
        sweep()  # and drop every node nothing holds now, as a fresh process would have none
        if not GC_WHILE_TIMING:
            gc.disable()
        w0, c0 = time.perf_counter(), time.process_time()
        out = run()
        cpu = min(cpu, time.process_time() - c0)
        wall = min(wall, time.perf_counter() - w0)
        gc.enable()
    return Timing(wall, cpu), out


def bench_build_serialize(nodes: int, repeat: int) -> tuple[int, str, bytes, Timing, Timing]:
    """Node count, fingerprint, .keg bytes, build seconds, serialize seconds."""
    t_build, graph = best_of(repeat, lambda: build_graph(nodes))
    t_ser, data = best_of(repeat, lambda: keg.dumps(graph))
    return node_count(graph), graph.functions["bench"].fingerprint, data, t_build, t_ser


def bench_load(data: bytes, fingerprint: str, repeat: int) -> Timing:
    """Seconds to load + verify; call it after the built graph is gone (no interning hits)."""
    t_load, loaded = best_of(repeat, lambda: keg.loads(data))
    if loaded.functions["bench"].fingerprint != fingerprint:
        raise SystemExit("load changed the fingerprint: the benchmark graph is not round-tripped")
    return t_load


def interp_function() -> Function:
    """A small elementwise chain on scalars (17 nodes), float and integer ops."""
    b = FunctionBuilder("chain")
    x = b.param("x", DType.F32)
    y = b.param("y", DType.F32)
    t = b.op("fma", x, y, b.op("sqrt", b.op("abs", x)))
    t = b.op("max", b.op("min", t, y), b.op("neg", x))
    t = b.op("div", b.op("add", t, y), b.op("mul", x, x))
    n = b.op("convert", t, to=DType.I32)
    t2 = b.op("convert", b.op("shr", n, b.const(3, DType.I32)), to=DType.F32)
    return b.build(b.op("select", b.op("lt", t, y), t, t2))


def bench_interp(elements: int, repeat: int) -> tuple[int, Timing]:
    fn = interp_function()
    rng = np.random.default_rng(0)
    inputs = {
        "x": rng.standard_normal(elements).astype(np.float32),
        "y": rng.standard_normal(elements).astype(np.float32),
    }
    timing, _ = best_of(repeat, lambda: interpret(fn, inputs))
    return len(fn.nodes()), timing


def row(name: str, count: int, unit: str, t: Timing, aim: int | None = None) -> str:
    rate = count / t.cpu
    verdict = "" if aim is None else ("meets aim" if rate >= aim else "BELOW aim")
    return (
        f"{name:<36} {count:>11,} {unit:<5} {t.wall:7.3f} {t.cpu:7.3f} "
        f"{rate:>13,.0f} {unit}/s  {verdict}"
    ).rstrip()


def profile(phase: str, nodes: int, top: int) -> None:
    graph = build_graph(nodes)
    data = keg.dumps(graph)
    calls: dict[str, Callable[[], Any]] = {
        "build": lambda: build_graph(nodes),
        "serialize": lambda: keg.dumps(graph),
        "load": lambda: keg.loads(data),
    }
    if phase == "load":
        del graph
        gc.collect()
        sweep()
    prof = cProfile.Profile()
    prof.runcall(calls[phase])
    stats = pstats.Stats(prof)
    print(f"cProfile of '{phase}' ({nodes:,} nodes), top {top} by own time:")
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=100_000, help="graph size (default 100000)")
    ap.add_argument("--elements", type=int, default=1_000_000, help="interpreter batch size")
    ap.add_argument("--repeat", type=int, default=3, help="runs per phase; the best is shown")
    ap.add_argument("--profile", choices=["build", "serialize", "load"], help="cProfile a phase")
    ap.add_argument("--top", type=int, default=25, help="functions shown by --profile")
    ap.add_argument("--no-gc", action="store_true", help="disable the cyclic GC while timing")
    args = ap.parse_args()
    global GC_WHILE_TIMING
    GC_WHILE_TIMING = not args.no_gc
    if args.profile:
        profile(args.profile, args.nodes, args.top)
        return
    gc_note = "cyclic GC off while timing" if args.no_gc else "cyclic GC on"
    print(
        f"python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}, {gc_note}"
    )
    n, fingerprint, data, t_build, t_ser = bench_build_serialize(args.nodes, args.repeat)
    t_load = bench_load(data, fingerprint, args.repeat)
    ops, t_int = bench_interp(args.elements, args.repeat)
    print(f"graph: {n:,} nodes, .keg {len(data):,} bytes, fingerprint {fingerprint[:16]}...")
    print(f"{'phase':<36} {'count':>17} {'wall s':>7} {'cpu s':>7} {'rate (cpu time)':>21}")
    both = Timing(t_build.wall + t_ser.wall, t_build.cpu + t_ser.cpu)
    print(row("build (type + encode + SHA3)", n, "nodes", t_build))
    print(row("serialize (keg.dumps)", n, "nodes", t_ser))
    print(row("build + hash + serialize", n, "nodes", both, AIM_NODES_PER_S))
    print(row("load + verify (keg.loads)", n, "nodes", t_load, AIM_NODES_PER_S))
    print(row(f"interpret {ops}-node chain", args.elements, "elems", t_int))
    print(row(f"  = node-elements ({ops} nodes)", args.elements * ops, "elems", t_int))


if __name__ == "__main__":
    main()
