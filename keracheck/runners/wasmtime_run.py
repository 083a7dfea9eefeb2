"""wasmtime (PyPI ``wasmtime``) runner: validate, instantiate and run modules in-process.

The engine is configured so that what runs is exactly the module we emitted: Cranelift NaN
canonicalisation OFF (our lowering must produce canonical NaNs itself), SIMD128 on, relaxed SIMD
OFF (a module using it fails validation).  Array I/O is zero-copy: a numpy ``uint8`` view is laid
over the instance's linear memory (re-made after any ``memory.grow``) and inputs are assigned
straight into it; outputs are copied once, out of it.  Compiled modules are cached by content.
"""

from __future__ import annotations

import atexit
import hashlib
import importlib.metadata
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from keracheck.runners.wasm_job import PAGE, Bytes, JobResult, WasmJob, as_bytes
from keracheck.target import BackendError

try:
    import wasmtime

    _IMPORT_ERROR: str | None = None
except ImportError as _e:  # pragma: no cover - depends on the environment
    _IMPORT_ERROR = str(_e)

_INSTALL = "pip install wasmtime==50.0.1 (or: pip install -e '.[targets]')"


def available() -> str | None:
    """None when wasmtime can run here, else the reason and the fix."""
    if _IMPORT_ERROR is not None:
        return f"python package wasmtime not importable ({_IMPORT_ERROR}): {_INSTALL}"
    return None


def version() -> str:
    try:
        return importlib.metadata.version("wasmtime")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


class WasmtimeRunner:
    """One engine, a module cache, and :meth:`run_jobs` for many modules per call."""

    name = "wasmtime"

    def __init__(self) -> None:
        reason = available()
        if reason:
            raise BackendError(reason)
        cfg = wasmtime.Config()
        cfg.cranelift_nan_canonicalization = False
        cfg.wasm_simd = True
        cfg.wasm_relaxed_simd = False
        self.engine = wasmtime.Engine(cfg)
        self._modules: dict[bytes, Any] = {}
        _LIVE.add(self)

    def close(self) -> None:
        """Free the compiled modules and the engine now (a closed runner must not be used)."""
        for module in self._modules.values():
            module.close()
        self._modules.clear()
        self.engine.close()

    def validate(self, wasm: bytes) -> str | None:
        """None if the engine's validator accepts the module, else its message."""
        try:
            wasmtime.Module.validate(self.engine, wasm)
        except wasmtime.WasmtimeError as e:
            return str(e)
        return None

    def module(self, wasm: bytes) -> Any:
        key = hashlib.sha256(wasm).digest()
        if key not in self._modules:
            try:
                self._modules[key] = wasmtime.Module(self.engine, wasm)
            except wasmtime.WasmtimeError as e:
                raise BackendError(f"wasmtime rejected the module: {e}") from e
        return self._modules[key]

    def instantiate(self, wasm: bytes, memory: str = "mem") -> WasmInstance:
        return WasmInstance(self, self.module(wasm), memory)

    def run_job(self, job: WasmJob) -> list[Bytes]:
        inst = self.instantiate(job.wasm, job.memory)
        inst.ensure_pages(job.pages_needed())
        for off, arr in job.writes:
            inst.write(off, arr)
        for export, args in job.calls:
            inst.call(export, *args)
        return [inst.read(off, n) for off, n in job.reads]

    def run_jobs(self, jobs: Sequence[WasmJob]) -> list[JobResult]:
        out: list[JobResult] = []
        for job in jobs:
            try:
                out.append(self.run_job(job))
            except (BackendError, wasmtime.WasmtimeError, wasmtime.Trap) as e:
                out.append(e if isinstance(e, BackendError) else BackendError(str(e)))
        return out


#: runners not yet collected; closed at exit, while wasmtime's bindings still exist (left to
#: the interpreter's teardown, their finalisers run after the bindings are gone and print
#: "Exception ignored in: Managed.__del__")
_LIVE: weakref.WeakSet[WasmtimeRunner] = weakref.WeakSet()


@atexit.register
def _close_live_runners() -> None:
    for runner in list(_LIVE):
        runner.close()


class WasmInstance:
    """An instance with its store; ``view`` is a zero-copy uint8 window on linear memory."""

    def __init__(self, runner: WasmtimeRunner, module: Any, memory: str) -> None:
        self.store = wasmtime.Store(runner.engine)
        self.instance = wasmtime.Instance(self.store, module, [])
        self.exports = self.instance.exports(self.store)
        mem = self.exports.get(memory)
        if not isinstance(mem, wasmtime.Memory):
            raise BackendError(f"module exports no memory named {memory!r}")
        self.memory = mem
        self.view = self._view()

    def _view(self) -> Bytes:
        size = self.memory.data_len(self.store)
        window = np.ctypeslib.as_array(self.memory.data_ptr(self.store), shape=(size,))
        return window.view(np.uint8)

    def ensure_pages(self, pages: int) -> None:
        have = self.memory.size(self.store)
        if pages > have:
            self.memory.grow(self.store, pages - have)
            self.view = self._view()

    def write(self, offset: int, arr: npt.NDArray[Any]) -> None:
        raw = as_bytes(arr)
        self.ensure_pages(-(-(offset + raw.size) // PAGE))
        self.view[offset : offset + raw.size] = raw

    def read(self, offset: int, nbytes: int) -> Bytes:
        return self.view[offset : offset + nbytes].copy()

    def call(self, export: str, *args: int) -> Any:
        fn = self.exports.get(export)
        if not isinstance(fn, wasmtime.Func):
            raise BackendError(f"module exports no function named {export!r}")
        result = fn(self.store, *args)
        self.view = self._view()  # the call may have grown memory
        return result
