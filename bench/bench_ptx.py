"""PTX back end figures: emulator throughput, cases/s on the corpus, ptxas time per module.

Phases (best of ``--repeat`` runs, process CPU time):

* ``emit``      kerac's PTX emitter: functions/s and PTX lines/s over the corpus;
* ``emulate``   ptx-emu launches of every corpus kernel at ``--batch`` threads:
                thread-instructions/s (one instruction executed by one thread) and
                issued instructions/s (one instruction for all threads of a group);
* ``cases``     end to end as the ``ptx-emu`` target runs a case (emit + parse + compile +
                launch + copy back) at 64 input vectors: cases/s;
* ``ptxas``     ``ptxas -arch=sm_90`` wall time per corpus module (skipped without ptxas).

Usage: ``.venv/bin/python bench/bench_ptx.py [--batch N] [--repeat R] [--corpus DIR]``.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from kera.backends.ptx import emit, emit_graph, kernel_name
from kera.ir import Function
from keracheck import inputs as inputs_mod
from keracheck.collect import compile_file
from keracheck.ptx_emu import GlobalMemory, LaunchStats, load, parse
from keracheck.runners.ptxas import Ptxas
from keracheck.targets.ptx import BLOCK, PtxEmuBackend, row_major


def best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """Best process CPU time of ``repeat`` calls, and the last result."""
    times, result = [], None
    for _ in range(repeat):
        start = time.process_time()
        result = fn()
        times.append(time.process_time() - start)
    return min(times), result


def corpus(directory: Path) -> list[tuple[Path, Function]]:
    out = []
    for path in sorted(directory.glob("*.kera")):
        out += [(path, fn) for fn in compile_file(str(path)).functions.values()]
    return out


def launch(fn: Function, n: int) -> LaunchStats:
    program = load(parse(emit(fn)), kernel_name(fn))
    mem = GlobalMemory()
    xs = inputs_mod.generate(fn, n, 0)
    args = [mem.upload(a) for a in row_major(fn, xs)] if fn.params else []
    args += [mem.alloc(n * r.dtype.nbytes * max(1, int(np.prod(r.shape)))) for r in fn.results]
    return program.launch([*args, n], grid=-(-n // BLOCK), block=BLOCK, memory=mem)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=4096, help="threads per emulated launch")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--corpus", type=Path, default=Path("corpora"))
    args = ap.parse_args()
    fns = corpus(args.corpus)
    if not fns:
        print(f"no .kera files in {args.corpus}", file=sys.stderr)
        return 2
    print(f"python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}")
    print(f"corpus: {len(fns)} functions from {len({p for p, _ in fns})} files")

    t, texts = best(lambda: [emit(fn) for _, fn in fns], args.repeat)
    lines = sum(text.count("\n") for text in texts)
    print(f"emit      {len(fns) / t:10.1f} functions/s   {lines / t:12.0f} PTX lines/s")

    t, stats = best(lambda: [launch(fn, args.batch) for _, fn in fns], args.repeat)
    thread_ins = sum(s.thread_instructions for s in stats)
    issued = sum(s.instructions for s in stats)
    print(
        f"emulate   {thread_ins / t:10.3e} thread-instructions/s   {issued / t:10.0f} issued/s"
        f"   ({args.batch} threads, {thread_ins} thread-instructions)"
    )

    backend = PtxEmuBackend()
    cases = [(fn, inputs_mod.generate(fn, 64, 0)) for _, fn in fns]
    t, _ = best(lambda: [backend.run(fn, xs) for fn, xs in cases], args.repeat)
    print(f"cases     {len(cases) / t:10.1f} cases/s (ptx-emu target, 64 vectors each)")

    ptxas = Ptxas()
    if ptxas.available() is not None:
        print(f"ptxas     skipped: {ptxas.available()}")
        return 0
    per_module = []
    for path in sorted({p for p, _ in fns}):
        text = emit_graph(compile_file(str(path)))
        per_module.append(min(ptxas.assemble(text).seconds for _ in range(args.repeat)))
    print(
        f"ptxas     {1000 * float(np.mean(per_module)):8.1f} ms/module mean,"
        f" {1000 * max(per_module):8.1f} ms max over {len(per_module)} modules (ptxas {ptxas.version()})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
