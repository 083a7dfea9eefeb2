"""``ptx-emu`` and ``ptx-gpu``: the PTX back end run by our emulator, and on an NVIDIA GPU.

Both execute the module :func:`kera.backends.ptx.emit` produces, with the kernel ABI given
there: one pointer per parameter and per result (N rows each, C order, bool as one byte), and
the batch size.  Launch: blocks of :data:`BLOCK` threads, one thread per batch row.

* ``ptx-emu`` parses the PTX *text* with :mod:`keracheck.ptx_emu` and runs it on the CPU.  The
  ``ptx-emu:adversarial`` variant runs under the adversarial NaN policy, where every value the
  PTX ISA leaves unspecified is random: agreeing there shows the code never relies on one.
* Memory spaces (``docs/ptx-backend.md``, Memory spaces): the launcher places each parameter's
  buffer in its declared space (``kera.ir.param_space``).  A ``host`` parameter (every
  program without spaces) is put in host memory and copied to a device buffer before the
  launch: the kernel boundary's implicit transfer, counted; results are copied back to host
  memory after it, counted too.  A ``device``, ``unified`` or ``pinned`` parameter is placed
  where it lives and the kernel reads it there.  Each ``transfer`` of the kernel has a staging
  buffer in its destination space (``kera.backends.ptx.Slot``), which the kernel writes and
  reads back.  ``ptx-emu`` keeps the spaces apart (a kernel that dereferences host memory is
  refused) and records the bytes moved in :attr:`PtxEmuBackend.traffic` after each run.
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

from kera.backends.ptx import SUPPORTED, Slot, emit, emit_slots, kernel_name
from kera.ir import Function, param_space
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
        #: the last run's bytes moved, per direction (``"host->device"``): ``boundary``, the
        #: launcher's copies (host parameters in, results out); ``transfers``, what the
        #: kernel's ``transfer`` nodes stored into their staging buffers (all rows, all trips)
        self.traffic: dict[str, dict[str, int]] = {"boundary": {}, "transfers": {}}

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
            text, slots = emit_slots(fn)
            program = load(parse(text), kernel_name(fn))
            mem = GlobalMemory()
            arrays = row_major(fn, inputs)
            args = [_place(mem, param_space(p), a) for p, a in zip(fn.params, arrays, strict=True)]
            outs = [mem.alloc(n * _size(r.shape) * r.dtype.nbytes) for r in fn.results]
            xfers = [_staging(mem, slot, n) for slot in slots]
            policy = NanPolicy("adversarial" if self.policy == "adversarial" else "hardware")
            grid = -(-n // BLOCK)
            launch = [*args, *outs, n, *xfers]
            program.launch(launch, grid=grid, block=BLOCK, memory=mem, policy=policy)
            results = [
                _fetch(mem, addr, r.dtype.np, n * _size(r.shape))
                for addr, r in zip(outs, fn.results, strict=True)
            ]
        except PtxError as err:
            raise BackendError(f"ptx-emu: {err}") from err
        self.traffic = {"boundary": dict(mem.copies), "transfers": dict(mem.stored)}
        return [out.reshape((n, *r.shape)) for out, r in zip(results, fn.results, strict=True)]


def _place(mem: GlobalMemory, space: str, array: np.ndarray[Any, Any]) -> int:
    """The device pointer the kernel gets for a parameter living in ``space``: a host array is
    put in host memory and copied to the device (counted); any other is placed in its space."""
    if space != "host":
        return mem.upload(array, space)
    host = mem.upload(array, "host")
    device = mem.alloc(array.nbytes)
    mem.copy(device, host, array.nbytes)
    return device


def _staging(mem: GlobalMemory, slot: Slot, n: int) -> int:
    """A transfer's staging buffer, ``n`` rows in its space, its stores counted."""
    addr = mem.alloc(n * slot.row_bytes, slot.space)
    mem.watch(addr, n * slot.row_bytes, f"{slot.source}->{slot.dest}")
    return addr


def _fetch(mem: GlobalMemory, addr: int, dtype: Any, count: int) -> np.ndarray[Any, Any]:
    """A result copied from the device to host memory (counted), then read."""
    nbytes = count * np.dtype(dtype).itemsize
    host = mem.alloc(nbytes, "host")
    mem.copy(host, addr, nbytes)
    return mem.download(host, dtype, count)


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
        text, slots = emit_slots(fn)
        spaces = [param_space(p) for p in fn.params]
        staging = [(slot.space, n * slot.row_bytes) for slot in slots]
        raw = gpu.launch(text, kernel_name(fn), arrays, sizes, n, spaces, staging)
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
        spaces: Sequence[str] = (),
        staging: Sequence[tuple[str, int]] = (),
    ) -> list[np.ndarray[Any, Any]]:
        """Copy inputs in, run ``name`` over n threads, copy the outputs (raw bytes) back.
        Each input is allocated in its space (``spaces``, default device: a host parameter's
        device copy), then the transfers' staging buffers (``staging``: space, bytes)."""
        cu = self.cu
        module = self.module(ptx)
        func = _check(cu, cu.cuModuleGetFunction(module, name.encode()), "cuModuleGetFunction")
        where = [*spaces, *["device"] * (len(arrays) - len(spaces))]
        allocs = [(max(a.nbytes, 1), sp) for a, sp in zip(arrays, where, strict=True)]
        allocs += [(max(size, 1), "device") for size in out_sizes]
        allocs += [(max(size, 1), sp) for sp, size in staging]
        bufs: list[tuple[Any, str]] = []
        try:
            for size, sp in allocs:
                bufs.append((self._alloc(size, sp), sp))
            for (buf, _), a in zip(bufs, arrays, strict=False):
                host = np.ascontiguousarray(a)
                if host.nbytes:  # a host parameter's copy in; any other placed in its space
                    _check(cu, cu.cuMemcpyHtoD(buf, host.ctypes.data, host.nbytes), "cuMemcpyHtoD")
            pointers = [int(b) for b, _ in bufs]
            k = len(arrays) + len(out_sizes)
            values = (*pointers[:k], n, *pointers[k:])
            types = (
                *(ctypes.c_void_p for _ in pointers[:k]),
                ctypes.c_uint32,
                *(ctypes.c_void_p for _ in pointers[k:]),
            )
            grid = -(-n // BLOCK)
            _check(
                cu,
                cu.cuLaunchKernel(func, grid, 1, 1, BLOCK, 1, 1, 0, 0, (values, types), 0),
                "cuLaunchKernel",
            )
            _check(cu, cu.cuCtxSynchronize(), "kernel execution")
            outs = []
            for (buf, _), size in zip(bufs[len(arrays) : k], out_sizes, strict=True):
                host = np.empty(size, dtype=np.uint8)
                if size:
                    _check(cu, cu.cuMemcpyDtoH(host.ctypes.data, buf, size), "cuMemcpyDtoH")
                outs.append(host)
            return outs
        finally:
            for buf, sp in bufs:
                (cu.cuMemFreeHost if sp == "pinned" else cu.cuMemFree)(buf)
            cu.cuModuleUnload(module)

    def _alloc(self, size: int, space: str = "device") -> Any:
        """A buffer the kernel can address, in ``space``: device memory (``cuMemAlloc``; also
        a host parameter's device copy), managed memory (``cuMemAllocManaged``), or pinned
        host memory mapped into the device (``cuMemHostAlloc`` with ``DEVICEMAP``; under
        unified addressing its host pointer is its device pointer)."""
        cu = self.cu
        if space == "unified":
            flag = cu.CUmemAttach_flags.CU_MEM_ATTACH_GLOBAL
            return _check(cu, cu.cuMemAllocManaged(size, flag), "cuMemAllocManaged")
        if space == "pinned":
            return _check(
                cu, cu.cuMemHostAlloc(size, cu.CU_MEMHOSTALLOC_DEVICEMAP), "cuMemHostAlloc"
            )
        return _check(cu, cu.cuMemAlloc(size), "cuMemAlloc")
