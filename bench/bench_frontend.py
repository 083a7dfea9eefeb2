"""Front-end throughput: lex, parse (+ tree), check + build, in source lines per second.

Generates a Kera file of about 50,000 lines (kernels with helper functions, integer bit
twiddling, reductions, comments and blank lines, as real sources have), then times each stage
on it, best of ``--repeat`` runs, and prints lines/s per stage and for the whole pipeline; the
last line times the whole pipeline with the GC on, with the young collections that follow.
Usage: ``python bench/bench_frontend.py [--lines N] [--repeat R] [--profile]``.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import time
from collections.abc import Callable

from kera.frontend import check_tree, compile_source, parse_source
from kera.syntax.lexer import lex
from kera.syntax.parser import parse

CHUNK = """\
// kernel {i}: scaled difference of two clamped signals
fn helper{i}(v: f32[16], s: f32) -> f32[16] {{
    let t = v * s + 1.0;
    let u = max(t, 0.0);
    u * u
}}

export fn kernel{i}(a: f32[16], b: f32[16], k: f32) -> (f32[16], f32) {{
    let p = helper{i}(a, k);
    let q = helper{i}(b, k * 0.5);
    let d = p - q;
    let m = select(d > 0.0, d, -d);
    /* normalise by the total */
    let total = sum(m, axis = 0);
    (m / (total + 1e-6), dot(a, b))
}}

export fn bits{i}(x: u32[8], y: i32[8]) -> (u32[8], i32) {{
    let h = x ^ (x >> 16u32);
    let g = h * 0x45d9f3bu32 + (y as u32);
    let z = (g & 0xffffu32) | (h << 3u32);
    (z, amax(y % 7 - 3, axis = 0))
}}

"""


def source(lines: int) -> str:
    per = CHUNK.count("\n")
    return "".join(CHUNK.format(i=i) for i in range(max(1, lines // per)))


def best(fn: Callable[[], object], repeat: int) -> float:
    """Best CPU time of ``repeat`` runs (CPU time: the figure survives a busy machine), with
    the cyclic GC paused as ``compile_source`` pauses it."""
    times = []
    for _ in range(repeat):
        gc.disable()
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
        gc.enable()
        gc.collect()
    return min(times)


def best_gc_on(fn: Callable[[], object], repeat: int) -> float:
    """Best CPU time of ``repeat`` runs with the GC on, counting the young collections
    (generations 0 and 1) that the result meets next while it is alive (what a program that
    goes on allocating pays for the objects the compile leaves behind, short of a full
    collection), then freeing it, as the other lines do."""
    times = []
    for _ in range(repeat):
        gc.collect()
        t = time.process_time()
        result = fn()
        gc.collect(1)
        del result
        times.append(time.process_time() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=50_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    text = source(args.lines)
    data = text.encode()
    n = text.count("\n")
    if args.profile:
        cProfile.runctx("compile_source(text)", globals(), {"text": text}, "/tmp/kera_fe.prof")
        pstats.Stats("/tmp/kera_fe.prof").sort_stats("tottime").print_stats(30)
        return
    tokens = lex(data)
    syntax = parse_source(data)
    stages = {
        "lex": lambda: lex(data),
        "parse": lambda: parse(tokens),
        "lex+parse+tree": lambda: parse_source(data),
        "check+build": lambda: check_tree(syntax),
        "total": lambda: compile_source(text),
    }
    result = compile_source(text)
    assert result.ok, result.diagnostics[:3]
    assert result.graph is not None
    print(
        f"{n} lines, {len(data)} bytes, {len(tokens)} tokens, {len(result.graph.functions)} exports"
    )
    for name, fn in stages.items():
        t = best(fn, args.repeat)
        print(f"{name:>16}: {t:7.3f} s  {n / t:10,.0f} lines/s")
    t = best_gc_on(stages["total"], args.repeat)
    print(
        f"{'total, GC on':>16}: {t:7.3f} s  {n / t:10,.0f} lines/s  (+ the young collections after)"
    )


if __name__ == "__main__":
    main()
