"""Targets ``wasm`` and ``wasm-simd`` (wasmtime) and ``wasm-node`` (the same bytes in V8).

A batch of cases becomes ONE module holding every distinct function (by fingerprint) and ONE
instance: each case's inputs are written into linear memory at addresses from
:func:`kera.backends.wasm.layout`, its kernel is called once over all its input vectors, and
its outputs are read back.  If that job fails (a trap, an engine error) the cases are rerun one
job each, so one bad case never loses the others.  A function with an op the back end does not
lower fails alone, with a :class:`~keracheck.target.BackendError`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from kera.backends.wasm import (
    SUPPORTED,
    Program,
    WasmCompileError,
    check,
    compile_functions,
    layout,
)
from kera.ir import Function
from keracheck import probe
from keracheck.runners import node_wasm, wasmtime_run
from keracheck.runners.wasm_job import WasmJob
from keracheck.target import API_VERSION, Array, BackendError, Inputs, Outputs

Engine = Any  # WasmtimeRunner | NodeWasmRunner: both have run_jobs(jobs)


def _batch(fn: Function, inputs: Inputs) -> tuple[int, list[Array]]:
    """The batch size and the inputs in parameter order, checked against the signature."""
    arrays, sizes = [], set()
    for p in fn.params:
        name = str(p.attr("name"))
        if name not in inputs:
            raise BackendError(f"missing input '{name}' for '{fn.name}'")
        a = np.ascontiguousarray(inputs[name])
        if a.dtype != p.dtype.np or a.shape[1:] != p.shape:
            raise BackendError(f"input '{name}' is {a.dtype}{list(a.shape)}, expected {p.type}")
        arrays.append(a)
        sizes.add(a.shape[0])
    if len(sizes) > 1:
        raise BackendError(f"inputs of '{fn.name}' have different batch sizes {sorted(sizes)}")
    return (sizes.pop() if sizes else 1), arrays


class _Batch:
    """Cases laid out in one module's memory, one after the other."""

    def __init__(self, program: Program, cases: Sequence[tuple[Function, Inputs]]) -> None:
        self.program = program
        export = {k.fn.fingerprint: k for k in program.kernels}
        pos = program.heap_base
        self.writes: list[tuple[int, Array]] = []
        self.calls: list[tuple[str, tuple[int, ...]]] = []
        self.reads: list[tuple[int, int]] = []
        self.shapes: list[list[tuple[np.dtype[Any], tuple[int, ...]]]] = []
        self.end = pos  # every call's buffers, scratch included, lie below this
        for fn, inputs in cases:
            n, arrays = _batch(fn, inputs)
            kernel = export[fn.fingerprint]
            lay = layout(kernel, n, pos)
            pos = self.end = lay.end
            self.writes += list(zip(lay.inputs, arrays, strict=True))
            self.calls.append((kernel.export, (n, lay.scratch, *lay.inputs, *lay.outputs)))
            self.reads += [(a, n * b) for a, b in zip(lay.outputs, kernel.out_bytes, strict=True)]
            self.shapes.append([(r.dtype.np, (n, *r.shape)) for r in fn.results])

    def job(self) -> WasmJob:
        return WasmJob(self.program.wasm, self.writes, self.calls, self.reads, memory_end=self.end)

    def outputs(self, regions: list[Any]) -> list[Outputs]:
        out, k = [], 0
        for shapes in self.shapes:
            case = []
            for dt, shape in shapes:
                case.append(regions[k].view(dt).reshape(shape))
                k += 1
            out.append(case)
        return out


class WasmBackend:
    """Scalar wasm on wasmtime (Cranelift, NaN canonicalisation off)."""

    name: ClassVar[str] = "wasm"
    api_version = API_VERSION
    simd: ClassVar[bool] = False
    _engine: Engine | None = None

    def available(self) -> str | None:
        return wasmtime_run.available()

    def versions(self) -> dict[str, str]:
        return {"wasmtime": wasmtime_run.version()}

    def engine(self) -> Engine:
        if self._engine is None:
            self._engine = wasmtime_run.WasmtimeRunner()
        return self._engine

    def supported_ops(self) -> frozenset[str]:
        return frozenset(op.value for op in SUPPORTED)

    def artifacts(self, fn: Function) -> dict[str, bytes]:
        program = compile_functions(fn, self.simd)
        return {f"{fn.name}.wasm": program.wasm, f"{fn.name}.wat": program.wat.encode()}

    def run(self, fn: Function, inputs: Inputs) -> Outputs:
        (result,) = self.run_many([(fn, inputs)])
        if isinstance(result, Exception):
            raise result
        return result

    def run_many(self, cases: Sequence[tuple[Function, Inputs]]) -> list[Outputs | Exception]:
        fns: dict[str, Function] = {}
        for fn, _ in cases:
            fns.setdefault(fn.fingerprint, fn)
        program: Program | None
        failed: dict[str, Exception] = {}
        try:
            program = self._module(list(fns.values()))
        except WasmCompileError:
            program, failed = self._without_failures(fns)
        results: list[Outputs | Exception | None] = [failed.get(fn.fingerprint) for fn, _ in cases]
        todo = [i for i, r in enumerate(results) if r is None]
        if todo and program is not None:
            for i, r in zip(todo, self._run_cases(program, [cases[i] for i in todo]), strict=True):
                results[i] = r
        return [r if r is not None else BackendError("case was not run") for r in results]

    def _module(self, fns: Sequence[Function]) -> Program:
        return compile_functions(fns, self.simd, [f"k{i}" for i in range(len(fns))])

    def _without_failures(
        self, fns: Mapping[str, Function]
    ) -> tuple[Program | None, dict[str, Exception]]:
        """After the batch's module failed to compile: each function checked alone, and the
        module of those that compile.  Only on that path: the module is emitted once, not once
        per function for a check and again for the module (``check`` emits the function)."""
        failed = {fp: e for fp, fn in fns.items() if (e := self._compile_error(fn)) is not None}
        ok = [fn for fp, fn in fns.items() if fp not in failed]
        return (self._module(ok) if ok else None), failed

    def _compile_error(self, fn: Function) -> Exception | None:
        try:
            check(fn, self.simd)
        except WasmCompileError as e:
            return BackendError(str(e))
        return None

    def _run_cases(
        self, program: Program, cases: Sequence[tuple[Function, Inputs]]
    ) -> list[Outputs | Exception]:
        """All cases in one job; if that fails, each case in a job of its own (one engine call)."""
        try:
            batch = _Batch(program, cases)
        except BackendError:
            return self._run_each(program, cases)
        (result,) = self.engine().run_jobs([batch.job()])
        if not isinstance(result, Exception):
            return list(batch.outputs(result))
        return [result] if len(cases) == 1 else self._run_each(program, cases)

    def _run_each(
        self, program: Program, cases: Sequence[tuple[Function, Inputs]]
    ) -> list[Outputs | Exception]:
        out: list[Outputs | Exception | None] = [None] * len(cases)
        batches: list[tuple[int, _Batch]] = []
        for i, case in enumerate(cases):
            try:
                batches.append((i, _Batch(program, [case])))
            except BackendError as e:
                out[i] = e
        results = self.engine().run_jobs([b.job() for _, b in batches])
        for (i, b), r in zip(batches, results, strict=True):
            out[i] = r if isinstance(r, Exception) else b.outputs(r)[0]
        return [r if r is not None else BackendError("case was not run") for r in out]


class WasmSimdBackend(WasmBackend):
    """SIMD128 wasm on wasmtime."""

    name: ClassVar[str] = "wasm-simd"
    simd: ClassVar[bool] = True


class WasmNodeBackend(WasmBackend):
    """The scalar module in Node.js (V8): a second engine on the same bytes.

    ``node_args`` pass V8 flags, e.g. ``("--liftoff-only",)`` or ``("--no-liftoff",)`` to pin
    one of V8's two wasm compilers (by default short runs stay mostly in Liftoff).
    """

    name: ClassVar[str] = "wasm-node"

    def __init__(self, node_args: Sequence[str] = ()) -> None:
        self.node_args = tuple(node_args)

    def available(self) -> str | None:
        def attempt() -> None:
            fn, inputs = probe.probe_case()
            self.run(fn, inputs)

        return node_wasm.available() or probe.proven(
            self.name,
            [node_wasm.node_path() or "", node_wasm.version(), *self.node_args],
            attempt,
            "node cannot run a test module",
            node_wasm.INSTALL,
        )

    def versions(self) -> dict[str, str]:
        return {"node": node_wasm.version()}

    def engine(self) -> Engine:
        if self._engine is None:
            self._engine = node_wasm.NodeWasmRunner(self.node_args)
        return self._engine


__all__ = ["WasmBackend", "WasmNodeBackend", "WasmSimdBackend"]
