"""WebAssembly back end benchmarks: compile + instantiate time, cases/s, element throughput.

    .venv/bin/python bench/bench_wasm.py [--elements 1048576] [--repeat 5]

1. Compile + instantiate per batch: the op x dtype batch of the back-end tests (one module
   holding every function): Python code generation, wasmtime compile, instantiate.
2. Cases/s: ``run_many`` over that batch (every function on its special-value inputs),
   end to end (layout, copies, one engine call), for wasm, wasm-simd and wasm-node.
3. Element throughput of a 1M-element f32 and f64 elementwise chain
   ``max(sqrt(|x*a + b|) - c, x) * d``: scalar wasm vs SIMD128 vs numpy (numpy does not
   canonicalise NaNs, so it does less work than the contract asks), kernel call only (inputs
   already in linear memory), best of ``--repeat``.  Also the reference interpreter.
Prints figures and ratios; asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "toolchain"))

from kera.backends.wasm import compile_functions, layout
from kera.dtypes import DType
from kera.interp import interpret
from kera.ir import Function, FunctionBuilder
from keracheck.runners import node_wasm, wasmtime_run
from keracheck.targets.wasm import WasmBackend, WasmNodeBackend, WasmSimdBackend


def best(f: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return min(times)


def chain(dt: DType, width: int) -> Function:
    b = FunctionBuilder(f"chain_{dt}")
    x = b.param("x", dt, [width])
    a, bb, c, d = (b.const(v, dt, [width]) for v in (1.5, -0.25, 0.75, 3.0))
    y = b.op("add", b.op("mul", x, a), bb)
    y = b.op("sub", b.op("sqrt", b.op("abs", y)), c)
    return b.build(b.op("mul", b.op("max", y, x), d))


def numpy_chain(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    t = x.dtype.type
    with np.errstate(all="ignore"):
        y = np.sqrt(np.abs(x * t(1.5) + t(-0.25))) - t(0.75)
        return np.maximum(y, x) * t(3.0)


def bench_compile(repeat: int) -> list[Any]:
    from test_wasm_backend import elementwise_cases

    cases = elementwise_cases()
    fns = list({fn.fingerprint: fn for fn, _ in cases}.values())
    print(f"\n1. compile + instantiate: batch of {len(fns)} functions (op x dtype)")
    if wasmtime_run.available():
        print(f"   skipped: {wasmtime_run.available()}")
        return cases
    import wasmtime

    runner = wasmtime_run.WasmtimeRunner()
    for simd in (False, True):
        gen = best(lambda s=simd: compile_functions(fns, s), repeat)
        program = compile_functions(fns, simd)
        comp = best(lambda p=program: wasmtime.Module(runner.engine, p.wasm), repeat)
        module = wasmtime.Module(runner.engine, program.wasm)

        def inst(m: Any = module) -> None:
            store = wasmtime.Store(runner.engine)
            wasmtime.Instance(store, m, [])

        ins = best(inst, repeat)
        kb = len(program.wasm) / 1024
        print(f"   {'simd  ' if simd else 'scalar'}: codegen {gen * 1e3:7.1f} ms, wasmtime compile "
              f"{comp * 1e3:7.1f} ms, instantiate {ins * 1e3:5.2f} ms, module {kb:6.1f} KiB, "
              f"{(gen + comp + ins) / len(fns) * 1e3:5.2f} ms/function")  # fmt: skip
    return cases


def bench_cases(cases: list[Any], repeat: int) -> None:
    vectors = sum(len(next(iter(inputs.values()))) for _, inputs in cases)
    print(f"\n2. run_many: {len(cases)} cases, {vectors} input vectors, end to end")
    for backend in (WasmBackend(), WasmSimdBackend(), WasmNodeBackend()):
        if backend.available():
            print(f"   {backend.name:9s}: skipped: {backend.available()}")
            continue
        t = best(lambda b=backend: b.run_many(cases), repeat)
        print(f"   {backend.name:9s}: {t * 1e3:7.1f} ms  {len(cases) / t:8.0f} cases/s  "
              f"{vectors / t / 1e6:6.2f} M vectors/s")  # fmt: skip
    t = best(lambda: [interpret(fn, inputs) for fn, inputs in cases], 1)
    print(
        f"   {'ref':9s}: {t * 1e3:7.1f} ms  {len(cases) / t:8.0f} cases/s (reference interpreter)"
    )


def bench_chain(elements: int, repeat: int) -> None:
    print(f"\n3. elementwise chain max(sqrt(|x*a+b|)-c, x)*d over {elements} elements")
    if wasmtime_run.available():
        print(f"   skipped: {wasmtime_run.available()}")
        return
    runner = wasmtime_run.WasmtimeRunner()
    width = 1024
    n = elements // width
    for dt in (DType.F32, DType.F64):
        fn = chain(dt, width)
        x = np.random.default_rng(1).standard_normal((n, width)).astype(dt.np)
        want = interpret(fn, {"x": x})[0]
        t_np = best(lambda x=x: numpy_chain(x), repeat)
        t_ref = best(lambda fn=fn, x=x: interpret(fn, {"x": x}), max(1, repeat // 2))
        row = {"numpy": t_np, "ref": t_ref}
        for simd in (False, True):
            program = compile_functions(fn, simd)
            kernel = program.kernels[0]
            lay = layout(kernel, n, program.heap_base)
            inst = runner.instantiate(program.wasm)
            inst.ensure_pages(-(-lay.end // 65536))
            inst.write(lay.inputs[0], x)
            args = (n, lay.scratch, *lay.inputs, *lay.outputs)
            t = best(lambda i=inst, a=args, k=kernel.export: i.call(k, *a), repeat)
            got = inst.read(lay.outputs[0], x.nbytes).view(dt.np).reshape(x.shape)
            assert np.array_equal(got.view(dt.uint), want.view(dt.uint)), "wrong result"
            row["simd" if simd else "scalar"] = t
        melem = {k: elements / v / 1e6 for k, v in row.items()}
        print(f"   {dt}: scalar {melem['scalar']:7.1f}  simd {melem['simd']:7.1f}  "
              f"numpy {melem['numpy']:7.1f}  ref {melem['ref']:6.1f}  M elements/s;  "
              f"simd/scalar {row['scalar'] / row['simd']:4.2f}x  "
              f"simd/numpy {row['numpy'] / row['simd']:4.2f}x")  # fmt: skip
    if node_wasm.available() is None:
        fn = chain(DType.F32, width)
        x = np.random.default_rng(1).standard_normal((n, width)).astype(np.float32)
        for backend in (WasmNodeBackend(),):
            t = best(lambda b=backend: b.run(fn, {"x": x}), max(1, repeat // 2))
            print(f"   f32 in node (V8), end to end incl. process start and file I/O: "
                  f"{elements / t / 1e6:6.1f} M elements/s")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--elements", type=int, default=1 << 20)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    print(f"wasmtime {wasmtime_run.version()}, node {node_wasm.version()}, numpy {np.__version__}")
    cases = bench_compile(args.repeat)
    bench_cases(cases, max(1, args.repeat // 2))
    bench_chain(args.elements, args.repeat)


if __name__ == "__main__":
    main()
