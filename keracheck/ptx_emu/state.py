"""Per-launch machine state: registers (one numpy lane per thread), parameters, global memory.

Registers hold raw bits: ``uint16``/``uint32``/``uint64`` arrays for the 16/32/64-bit register
types (float registers too — floats are only *viewed* as floats while an instruction computes),
``bool`` arrays for ``.pred``.  A register is created by its first write; lanes not covered by a
partial (masked) first write are tracked as undefined, and reading an undefined lane of an
active thread is an error: PTX registers start with unspecified contents.  Register arrays are never modified in place
(every write stores a new array), so two registers may share one array safely.

Global memory is one flat little-endian byte array.  Allocations start at
:data:`GlobalMemory.BASE` (above 4 GiB, so a pointer truncated to 32 bits faults), are 256-byte
aligned and separated by unmapped gaps; a load or store must fall inside one allocation and be
naturally aligned, as on the GPU.  A store in which two active lanes write different values to
the same address is refused (the order of such writes is unspecified).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from keracheck.ptx_emu.errors import PtxExecutionError
from keracheck.ptx_emu.numerics import NanPolicy

Bits = npt.NDArray[Any]
Bools = npt.NDArray[np.bool_]
Mask = Bools | None

UINT: dict[int, type[np.unsignedinteger[Any]]] = {
    8: np.uint8,
    16: np.uint16,
    32: np.uint32,
    64: np.uint64,
}
SINT: dict[int, type[np.signedinteger[Any]]] = {
    8: np.int8,
    16: np.int16,
    32: np.int32,
    64: np.int64,
}


def storage_dtype(reg_type: str) -> type[np.generic]:
    """numpy dtype a register of this PTX type is stored in."""
    if reg_type == "pred":
        return np.bool_
    return UINT[int(reg_type[1:])]


class GlobalMemory:
    """Flat global memory with an allocation table (see the module docstring)."""

    BASE = 0x7F00_0000_0000
    ALIGN = 256

    def __init__(self) -> None:
        self.data = np.zeros(0, dtype=np.uint8)
        self.starts: list[int] = []
        self.sizes: list[int] = []

    def alloc(self, nbytes: int) -> int:
        """Reserve ``nbytes`` (zero-filled); returns the device address."""
        offset = -(-len(self.data) // self.ALIGN) * self.ALIGN + self.ALIGN  # leave a gap
        size = max(nbytes, 1)
        grown = np.zeros(offset + size, dtype=np.uint8)
        grown[: len(self.data)] = self.data
        self.data = grown
        self.starts.append(offset)
        self.sizes.append(nbytes)
        return self.BASE + offset

    def upload(self, array: npt.NDArray[Any]) -> int:
        """Copy an array's bytes (C order, little-endian) into a new allocation."""
        raw = np.ascontiguousarray(array).view(np.uint8).reshape(-1)
        addr = self.alloc(raw.size)
        self.data[addr - self.BASE : addr - self.BASE + raw.size] = raw
        return addr

    def download(self, addr: int, dtype: npt.DTypeLike, count: int) -> npt.NDArray[Any]:
        """Read ``count`` elements of ``dtype`` starting at ``addr``."""
        dt = np.dtype(dtype)
        lo = addr - self.BASE
        return self.data[lo : lo + count * dt.itemsize].copy().view(dt)

    def _offsets(self, addrs: Bits, width: int) -> Bits:
        """Byte offsets of accesses, after bounds and alignment checks."""
        off = addrs.astype(np.uint64) - np.uint64(self.BASE)
        bad_align = (addrs % np.uint64(width)) != 0
        if bad_align.any():
            at = int(addrs[np.argmax(bad_align)])
            raise PtxExecutionError(f"misaligned {width}-byte access at address {at:#x}")
        starts = np.asarray(self.starts, dtype=np.uint64)
        ends = starts + np.asarray(self.sizes, dtype=np.uint64)
        idx = np.searchsorted(starts, off, side="right") - 1
        inside = (idx >= 0) & (addrs >= np.uint64(self.BASE))
        safe = np.maximum(idx, 0)
        inside &= off + np.uint64(width) <= ends[safe] if len(ends) else False
        if not np.all(inside):
            at = int(addrs[np.argmin(inside)])
            raise PtxExecutionError(f"{width}-byte access at {at:#x} is outside every allocation")
        return off

    def load(self, addrs: Bits, width: int) -> Bits:
        """Little-endian loads of ``width`` bytes; returns ``uint{8*width}`` values."""
        off = self._offsets(addrs, width)
        idx = off.astype(np.int64)[:, None] + np.arange(width)
        out: Bits = self.data[idx].reshape(-1).view(UINT[8 * width]).copy()
        return out

    def store(self, addrs: Bits, width: int, values: Bits) -> None:
        """Little-endian stores; refuses two lanes writing different values to one address."""
        off = self._offsets(addrs, width)
        vals = np.ascontiguousarray(values.astype(UINT[8 * width]))
        _, counts = np.unique(off, return_counts=True)
        if (counts > 1).any():
            order = np.argsort(off, kind="stable")
            sorted_vals = vals[order]
            same = np.repeat(sorted_vals[np.cumsum(counts) - counts], counts)
            if not np.array_equal(same, sorted_vals):
                raise PtxExecutionError("threads store different values to the same address")
        idx = off.astype(np.int64)[:, None] + np.arange(width)
        self.data[idx.reshape(-1)] = vals.view(np.uint8)


class State:
    """Registers and launch context of one kernel launch over ``n`` threads."""

    def __init__(
        self,
        n: int,
        reg_types: dict[str, str],
        params: dict[str, bytes],
        memory: GlobalMemory,
        specials: dict[str, Bits],
        policy: NanPolicy,
    ) -> None:
        self.n = n
        self.reg_types = reg_types
        self.params = params
        self.memory = memory
        self.specials = specials
        self.policy = policy
        self.regs: dict[str, Bits] = {}
        self.undefined: dict[str, Bools] = {}
        self.consts: dict[tuple[int, str], Bits] = {}

    def const(self, bits: int, dtype: type[np.generic]) -> Bits:
        """A lane-wide constant (cached, read-only)."""
        key = (bits, np.dtype(dtype).str)
        arr = self.consts.get(key)
        if arr is None:
            arr = np.full(self.n, bits, dtype=dtype)
            arr.flags.writeable = False
            self.consts[key] = arr
        return arr

    def read(self, name: str, m: Mask) -> Bits:
        value = self.regs.get(name)
        if value is None:
            raise PtxExecutionError(f"register {name} is read before it is written")
        undef = self.undefined.get(name)
        if undef is not None and (undef if m is None else undef & m).any():
            raise PtxExecutionError(f"register {name} is read in a thread that never wrote it")
        return value

    def write(self, name: str, value: Bits, m: Mask) -> None:
        dtype = storage_dtype(self.reg_types[name])
        full = value
        if value.shape != (self.n,) or value.dtype != dtype:
            full = np.broadcast_to(value, (self.n,)).astype(dtype)
        if m is None:
            self.regs[name] = full
            self.undefined.pop(name, None)
            return
        old = self.regs.get(name)
        if old is None:
            old = np.zeros(self.n, dtype=dtype)
            self.undefined[name] = ~m
        elif name in self.undefined:
            self.undefined[name] = self.undefined[name] & ~m
        self.regs[name] = np.where(m, full, old)
