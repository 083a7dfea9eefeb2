"""Loops (issue 16): ``verlet`` at many steps over a long vector, on the cpu target (each ISA
level), scalar wasm and wasm-simd, against the same loop in numpy (one vectorised step per
iteration), with every result's bits compared.

    for i in 0..STEPS with (x = x0, v = v0) { let a = -x; (x + v * dt, v + a * dt) }

Then the Verilog back end on the corpus's verlet (100 steps over f32[64]): core count,
latency and interval of the FSM design against the fully unrolled one, and Verilator's
vectors/s on the FSM design (``--verilog-vectors``; ``--skip-verilog`` leaves it out).

Kernel time only (the C entry point through ctypes, the WASM export through wasmtime), best
of ``--repeat``, process CPU time.  The aim: cpu (AVX2) at least 1.0x numpy; wasm-simd within
3x of cpu.  Run for one row (the issue's figure: one problem of ``--width`` elements) and for
``--rows`` rows (a batch of independent problems, numpy stepping all of them at once): the C
back end puts rows, not a tensor's elements, in its vector lanes, so one row runs its lanes
one-sixteenth full at AVX-512.
"""

from __future__ import annotations

import argparse
import platform
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from kera.dtypes import DType
from kera.ir import Function, FunctionBuilder, Node, loop

Array = np.ndarray[Any, Any]


def verlet(steps: int, width: int) -> Function:
    b = FunctionBuilder("verlet")
    x0, v0 = b.param("x0", DType.F32, [width]), b.param("v0", DType.F32, [width])
    dt = b.param("dt", DType.F32)

    def body(i: Node, c: list[Node]) -> list[Node]:
        x, v = c
        d = b.op("broadcast", dt, shape=[width])
        return [b.op("add", x, b.op("mul", v, d)), b.op("add", v, b.op("mul", b.op("neg", x), d))]

    return b.build(*loop(0, steps, [x0, v0], body))


def numpy_verlet(x: Array, v: Array, dt: Array, steps: int) -> tuple[Array, Array]:
    for _ in range(steps):
        a = -x
        x, v = x + v * dt, v + a * dt
    return x, v


def best(f: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.process_time()
        f()
        times.append(time.process_time() - t)
    return min(times)


def same(got: list[Array], want: tuple[Array, Array]) -> str:
    ok = all(
        np.array_equal(g.view(np.uint32), w.view(np.uint32)) for g, w in zip(got, want, strict=True)
    )
    return "bits equal numpy" if ok else "BITS DIFFER from numpy"


def cpu(fn: Function, x: Array, v: Array, dt: Array, repeat: int, want: Any, t_np: float) -> float:
    from keracheck.targets.cpu import CpuTarget, isa_problem

    avx2 = 0.0
    for isa in ("scalar", "sse2", "avx2", "avx512"):
        if isa_problem(isa):
            print(f"   cpu:{isa:7} unavailable: {isa_problem(isa)}")
            continue
        t0 = time.perf_counter()
        entry = CpuTarget(isa).entry(fn)
        build = time.perf_counter() - t0
        ox, ov = np.empty_like(x), np.empty_like(v)
        args = [a.ctypes.data for a in (x, v, dt, ox, ov)]
        t = best(lambda e=entry, a=args: e(len(x), *a), repeat)
        avx2 = t if isa == "avx2" else avx2
        print(f"   cpu:{isa:7} {t * 1e3:8.1f} ms  {t_np / t:5.2f}x numpy  (gcc {build:.1f} s)"
              f"  {same([ox, ov], want)}")  # fmt: skip
    return avx2


def wasm(fn: Function, x: Array, v: Array, dt: Array, repeat: int, want: Any, t_cpu: float) -> None:
    from kera.backends.wasm import compile_functions, layout
    from keracheck.runners import wasmtime_run

    if wasmtime_run.available():
        print(f"   wasm unavailable: {wasmtime_run.available()}")
        return
    runner = wasmtime_run.WasmtimeRunner()
    for simd in (False, True):
        program = compile_functions(fn, simd)
        kernel = program.kernels[0]
        lay = layout(kernel, len(x), program.heap_base)
        inst = runner.instantiate(program.wasm)
        inst.ensure_pages(-(-lay.end // 65536))
        for at, a in zip(lay.inputs, (x, v, dt), strict=True):
            inst.write(at, a)
        args = (len(x), lay.scratch, *lay.inputs, *lay.outputs)
        t = best(lambda i=inst, a=args, k=kernel.export: i.call(k, *a), repeat)
        got = [inst.read(at, x.nbytes).view(np.float32).reshape(x.shape) for at in lay.outputs]
        name = "wasm-simd" if simd else "wasm"
        ratio = f"{t / t_cpu:5.2f}x cpu:avx2" if t_cpu else ""
        print(f"   {name:11} {t * 1e3:8.1f} ms  {ratio}  {same(got, want)}")


def verilog(vectors: int) -> None:
    from kera.backends.verilog import VerilogSizeError, emit
    from keracheck.inputs import generate
    from keracheck.runners.verilator import Verilator
    from keracheck.targets import verilog as vt

    fn = verlet(100, 64)
    print("\nverilog: verlet, 100 steps over f32[64]")
    for name, unroll in (("FSM", 0), ("unrolled", 1 << 40)):
        t0 = time.perf_counter()
        try:
            d = emit(fn, unroll=unroll)
        except VerilogSizeError as e:
            print(f"   {name:9} refused: {e}")
            continue
        dt = time.perf_counter() - t0
        interval = getattr(d, "interval", 1) or 1
        print(f"   {name:9} {sum(d.cores.values()):7,} cores  latency {d.latency:6,} clocks  "
              f"one vector per {interval:,} clocks  (emit {dt:.1f} s)")  # fmt: skip
    if Verilator().available() is not None:
        print(f"   verilator unavailable: {Verilator().available()}")
        return
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        vt.run_plain([(fn, generate(fn, 1, 0))], "verilator", cache=Path(tmp))
        build = time.perf_counter() - t0
        t0 = time.perf_counter()
        vt.run_plain([(fn, generate(fn, vectors, 0))], "verilator", cache=Path(tmp))
        run = time.perf_counter() - t0
    print(f"   verilator (FSM): build + 1 vector {build:.1f} s; {vectors} vectors {run:.1f} s "
          f"warm ({vectors / run:,.1f} vectors/s, {vectors * 501 / run:,.0f} clocks/s)")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--width", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rows", type=int, default=16, help="the batch run after the single row")
    ap.add_argument("--verilog-vectors", type=int, default=64)
    ap.add_argument("--skip-verilog", action="store_true")
    args = ap.parse_args()
    print(f"python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}")
    fn = verlet(args.steps, args.width)
    for rows in (1, args.rows):
        print(f"\nverlet: {args.steps} steps over f32[{args.width}], {rows} row(s)")
        rng = np.random.default_rng(0)
        x = rng.standard_normal((rows, args.width)).astype(np.float32)
        v = rng.standard_normal((rows, args.width)).astype(np.float32)
        dt = np.full((rows,), 1e-3, dtype=np.float32)
        d = dt[:, None]
        want = numpy_verlet(x, v, d, args.steps)
        t_np = best(lambda x=x, v=v, d=d: numpy_verlet(x, v, d, args.steps), args.repeat)
        print(f"   numpy       {t_np * 1e3:8.1f} ms")
        t_cpu = cpu(fn, x, v, dt, args.repeat, want, t_np)
        wasm(fn, x, v, dt, args.repeat, want, t_cpu)
    if not args.skip_verilog:
        verilog(args.verilog_vectors)


if __name__ == "__main__":
    main()
