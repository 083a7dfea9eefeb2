"""``ptx-emu`` and ``ptx-gpu``: the PTX back end run by our emulator, and on an NVIDIA GPU.

Both execute the module :func:`kera.backends.ptx.emit` produces, with the kernel ABI given
there: one pointer per parameter and per result (N rows each, C order, bool as one byte), and
the batch size.  Launch: blocks of :data:`BLOCK` threads, one thread per batch row.

* ``ptx-emu`` parses the PTX *text* with :mod:`keracheck.ptx_emu` and runs it on the CPU.  The
  ``ptx-emu:adversarial`` variant runs under the adversarial NaN policy, where every value the
  PTX ISA leaves unspecified is random: agreeing there shows the code never relies on one.
* ``ptx-gpu`` assembles a cubin with ptxas for the device's architecture when ptxas is on
  PATH (else hands the PTX to the driver's JIT) and launches it through the CUDA driver API of
  NVIDIA's ``cuda-bindings``.  ``available()`` names what is missing: the package, the driver,
  or a GPU.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import numpy as np

from kera.backends.ptx import SUPPORTED, emit, kernel_name
from kera.ir import Function
from keracheck.ptx_emu import GlobalMemory, NanPolicy, PtxError, load, parse
from keracheck.target import API_VERSION, BackendError, Inputs, Outputs

BLOCK = 128
GPU_INSTALL = "pip install cuda-bindings cuda-core"  # the project's [gpu] extra


def _size(shape: tuple[int, ...]) -> int:
    return int(np.prod(shape, dtype=np.int64))


def batch_of(fn: Function, inputs: Inputs) -> int:
    """N from the first parameter; a function without parameters runs once (as ``ref``)."""
    for p in fn.params:
        return int(np.asarray(inputs[str(p.attr("name"))]).shape[0])
    return 1


def row_major(fn: Function, inputs: Inputs) -> list[np.ndarray[Any, Any]]:
    """The input arrays in parameter order, contiguous, in the parameter's dtype."""
    arrays = []
    for p in fn.params:
        name = str(p.attr("name"))
        arr = np.ascontiguousarray(inputs[name])
        if arr.dtype != p.dtype.np:
            raise BackendError(f"input {name} has dtype {arr.dtype}, expected {p.dtype}")
        arrays.append(arr)
    return arrays


def empty_outputs(fn: Function, n: int) -> Outputs:
    return [np.zeros((n, *r.shape), dtype=r.dtype.np) for r in fn.results]


class PtxEmuBackend:
    """The emitted PTX on :mod:`keracheck.ptx_emu` (hardware NaN policy by default)."""

    name = "ptx-emu"
    api_version = API_VERSION

    def __init__(self, policy: str = "hardware") -> None:
        self.policy = policy

    def available(self) -> str | None:
        try:
            import softfloatpy  # noqa: F401  (the emulator's exact f64 fma)
        except ImportError:
            return "softfloatpy is not installed: pip install softfloatpy"
        return None

    def supported_ops(self) -> frozenset[str]:
        return SUPPORTED

    def artifacts(self, fn: Function) -> dict[str, bytes]:
        return {f"{kernel_name(fn)}.ptx": emit(fn).encode()}

    def versions(self) -> dict[str, str]:
        return {"numpy": np.__version__, "ptx-emu": "1", "nan-policy": self.policy}

    def run(self, fn: Function, inputs: Inputs) -> Outputs:
        n = batch_of(fn, inputs)
        if n == 0:
            return empty_outputs(fn, 0)
        try:
            program = load(parse(emit(fn)), kernel_name(fn))
            mem = GlobalMemory()
            args: list[int] = [mem.upload(a) for a in row_major(fn, inputs)]
            outs = [mem.alloc(n * _size(r.shape) * r.dtype.nbytes) for r in fn.results]
            policy = NanPolicy("adversarial" if self.policy == "adversarial" else "hardware")
            grid = -(-n // BLOCK)
            program.launch([*args, *outs, n], grid=grid, block=BLOCK, memory=mem, policy=policy)
        except PtxError as err:
            raise BackendError(f"ptx-emu: {err}") from err
        return [
            mem.download(addr, r.dtype.np, n * _size(r.shape)).reshape((n, *r.shape))
            for addr, r in zip(outs, fn.results, strict=True)
        ]


class PtxEmuAdversarialBackend(PtxEmuBackend):
    """``ptx-emu:adversarial``: every ISA-unspecified value is random (see the module doc)."""

    name = "ptx-emu:adversarial"

    def __init__(self) -> None:
        super().__init__(policy="adversarial")


class PtxGpuBackend:
    """The emitted PTX on an NVIDIA GPU through the CUDA driver API (``cuda-bindings``)."""

    name = "ptx-gpu"
    api_version = API_VERSION

    def available(self) -> str | None:
        try:
            from cuda.bindings import driver  # type: ignore[import-not-found,unused-ignore]
        except ImportError:
            return f"cuda-bindings is not installed: {GPU_INSTALL}"
        try:
            _check(driver, driver.cuInit(0), "cuInit")
            count = _check(driver, driver.cuDeviceGetCount(), "cuDeviceGetCount")
        except Exception as err:  # no driver library, driver too old, no device ...
            return f"no usable NVIDIA driver ({type(err).__name__}: {err})"
        return None if count else "the NVIDIA driver sees no GPU"

    def supported_ops(self) -> frozenset[str]:
        return SUPPORTED

    def artifacts(self, fn: Function) -> dict[str, bytes]:
        return {f"{kernel_name(fn)}.ptx": emit(fn).encode()}

    def versions(self) -> dict[str, str]:
        out = {"numpy": np.__version__}
        try:
            gpu = Gpu()
            out.update({"device": gpu.device_name(), "arch": gpu.arch, "driver": gpu.driver})
        except Exception:
            pass
        return out

    def run(self, fn: Function, inputs: Inputs) -> Outputs:
        n = batch_of(fn, inputs)
        if n == 0:
            return empty_outputs(fn, 0)
        reason = self.available()
        if reason is not None:
            raise BackendError(f"ptx-gpu unavailable: {reason}")
        gpu = Gpu()
        arrays = row_major(fn, inputs)
        sizes = [n * _size(r.shape) * r.dtype.nbytes for r in fn.results]
        raw = gpu.launch(emit(fn), kernel_name(fn), arrays, sizes, n)
        return [
            out.view(r.dtype.np).reshape((n, *r.shape))
            for out, r in zip(raw, fn.results, strict=True)
        ]


def _check(driver: Any, result: Any, what: str) -> Any:
    """Unpack a ``cuda.bindings.driver`` call's (CUresult, values...) tuple."""
    err, *values = result if isinstance(result, tuple) else (result,)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise BackendError(f"{what} failed: {err}")
    return values[0] if len(values) == 1 else tuple(values)


class Gpu:
    """Device 0's primary context and the few driver calls a launch needs."""

    def __init__(self) -> None:
        from cuda.bindings import driver

        self.cu = driver
        _check(driver, driver.cuInit(0), "cuInit")
        self.device = _check(driver, driver.cuDeviceGet(0), "cuDeviceGet")
        ctx = _check(
            driver, driver.cuDevicePrimaryCtxRetain(self.device), "cuDevicePrimaryCtxRetain"
        )
        _check(driver, driver.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        attr = driver.CUdevice_attribute
        major = self._attr(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
        minor = self._attr(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
        self.arch = f"sm_{major}{minor}"
        self.driver = str(_check(driver, driver.cuDriverGetVersion(), "cuDriverGetVersion"))

    def _attr(self, which: Any) -> int:
        return int(_check(self.cu, self.cu.cuDeviceGetAttribute(which, self.device), "attribute"))

    def device_name(self) -> str:
        raw = _check(self.cu, self.cu.cuDeviceGetName(256, self.device), "cuDeviceGetName")
        return bytes(raw).split(b"\0")[0].decode()

    def module(self, ptx: str) -> Any:
        """Load a cubin from ptxas when it is on PATH (reproducible); JIT the PTX when there is
        no ptxas or the driver does not take that ptxas' cubin."""
        from keracheck.runners.ptxas import Ptxas

        ptxas = Ptxas(arch=self.arch)
        if ptxas.available() is None:
            err, module = self.cu.cuModuleLoadData(ptxas.assemble(ptx).cubin)
            if err == self.cu.CUresult.CUDA_SUCCESS:
                return module
        return _check(self.cu, self.cu.cuModuleLoadData(ptx.encode() + b"\0"), "cuModuleLoadData")

    def launch(
        self,
        ptx: str,
        name: str,
        arrays: Sequence[np.ndarray[Any, Any]],
        out_sizes: Sequence[int],
        n: int,
    ) -> list[np.ndarray[Any, Any]]:
        """Copy inputs in, run ``name`` over n threads, copy the outputs (raw bytes) back."""
        cu = self.cu
        module = self.module(ptx)
        func = _check(cu, cu.cuModuleGetFunction(module, name.encode()), "cuModuleGetFunction")
        bufs = [self._alloc(max(a.nbytes, 1)) for a in arrays]
        bufs += [self._alloc(max(s, 1)) for s in out_sizes]
        try:
            for buf, a in zip(bufs, arrays, strict=False):
                host = np.ascontiguousarray(a)
                if host.nbytes:
                    _check(cu, cu.cuMemcpyHtoD(buf, host.ctypes.data, host.nbytes), "cuMemcpyHtoD")
            values = (*(int(b) for b in bufs), n)
            types = (*(ctypes.c_void_p for _ in bufs), ctypes.c_uint32)
            grid = -(-n // BLOCK)
            _check(
                cu,
                cu.cuLaunchKernel(func, grid, 1, 1, BLOCK, 1, 1, 0, 0, (values, types), 0),
                "cuLaunchKernel",
            )
            _check(cu, cu.cuCtxSynchronize(), "kernel execution")
            outs = []
            for buf, size in zip(bufs[len(arrays) :], out_sizes, strict=True):
                host = np.empty(size, dtype=np.uint8)
                if size:
                    _check(cu, cu.cuMemcpyDtoH(host.ctypes.data, buf, size), "cuMemcpyDtoH")
                outs.append(host)
            return outs
        finally:
            for buf in bufs:
                cu.cuMemFree(buf)
            cu.cuModuleUnload(module)

    def _alloc(self, size: int) -> Any:
        return _check(self.cu, self.cu.cuMemAlloc(size), "cuMemAlloc")
