"""Per-launch machine state: registers (one numpy lane per thread), parameters, global memory.

Registers hold raw bits: ``uint16``/``uint32``/``uint64`` arrays for the 16/32/64-bit register
types (float registers too — floats are only *viewed* as floats while an instruction computes),
``bool`` arrays for ``.pred``.  A register is created by its first write; lanes not covered by a
partial (masked) first write are tracked as undefined, and reading an undefined lane of an
active thread is an error: PTX registers start with unspecified contents.  Register arrays are never modified in place
(every write stores a new array), so two registers may share one array safely.

Memory is four separate address spaces (``docs/ptx-backend.md``, Memory spaces): device,
unified, pinned and host, each one flat little-endian byte array at its own base address
(:data:`SPACE_BASE`; device memory at :data:`GlobalMemory.BASE`, above 4 GiB, so a pointer
truncated to 32 bits faults).  Allocations are 256-byte aligned and separated by unmapped
gaps; a load or store must fall inside one allocation and be naturally aligned, as on the GPU.
A kernel may access device, unified and pinned (mapped) memory; a load or store of host memory
is refused, as the hardware would fault.  A store in which two active lanes write different
values to the same address is refused (the order of such writes is unspecified).
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


#: the memory spaces of a launch (``kera.ops.SPACES``), each a separate address range 2^40
#: bytes wide: a pointer names its space by its top bits (device memory keeps the addresses
#: it had before spaces existed)
SPACE_BASE = {
    "device": 0x7F00_0000_0000,
    "unified": 0x7E00_0000_0000,
    "pinned": 0x7D00_0000_0000,
    "host": 0x5500_0000_0000,
}
#: the spaces a kernel may load from and store to: device memory, unified (managed) memory
#: and pinned host memory mapped into the device's address space; never pageable host memory
KERNEL_SPACES = frozenset({"device", "unified", "pinned"})
_SPAN = 40  # bits of one space's address range


class _Arena:
    """The allocations of one memory space: one flat little-endian byte array."""

    ALIGN = 256

    def __init__(self, space: str) -> None:
        self.space = space
        self.base = SPACE_BASE[space]
        self.data = np.zeros(0, dtype=np.uint8)
        self.starts: list[int] = []
        self.sizes: list[int] = []

    def alloc(self, nbytes: int) -> int:
        """Reserve ``nbytes`` (zero-filled); returns the address."""
        offset = -(-len(self.data) // self.ALIGN) * self.ALIGN + self.ALIGN  # leave a gap
        size = max(nbytes, 1)
        grown = np.zeros(offset + size, dtype=np.uint8)
        grown[: len(self.data)] = self.data
        self.data = grown
        self.starts.append(offset)
        self.sizes.append(nbytes)
        return self.base + offset

    def offsets(self, addrs: Bits, width: int) -> Bits:
        """Byte offsets of accesses, after bounds and alignment checks."""
        off = addrs.astype(np.uint64) - np.uint64(self.base)
        bad_align = (addrs % np.uint64(width)) != 0
        if bad_align.any():
            at = int(addrs[np.argmax(bad_align)])
            raise PtxExecutionError(f"misaligned {width}-byte access at address {at:#x}")
        starts = np.asarray(self.starts, dtype=np.uint64)
        ends = starts + np.asarray(self.sizes, dtype=np.uint64)
        idx = np.searchsorted(starts, off, side="right") - 1
        inside = (idx >= 0) & (addrs >= np.uint64(self.base))
        safe = np.maximum(idx, 0)
        inside &= off + np.uint64(width) <= ends[safe] if len(ends) else False
        if not np.all(inside):
            at = int(addrs[np.argmin(inside)])
            raise PtxExecutionError(f"{width}-byte access at {at:#x} is outside every allocation")
        return off


class GlobalMemory:
    """The memory of a launch, in separate address spaces (see the module docstring).

    ``alloc``/``upload``/``download``/``copy`` are the launcher's (the host side: any space);
    ``load``/``store`` are the kernel's, refused on host memory.  ``copies`` counts the bytes
    the launcher copied per direction (``"host->device"``); ``watch`` marks an allocation whose
    stores by the kernel are counted in ``stored`` (a transfer's staging buffer)."""

    BASE = SPACE_BASE["device"]
    ALIGN = _Arena.ALIGN

    def __init__(self) -> None:
        self.arenas = {space: _Arena(space) for space in SPACE_BASE}
        self.copies: dict[str, int] = {}
        self.watched: dict[int, tuple[int, str]] = {}  # address -> (size, label)
        self.stored: dict[str, int] = {}  # label -> bytes the kernel stored there

    @property
    def data(self) -> Bits:
        """Device memory's bytes (what the only space held before there were others)."""
        return self.arenas["device"].data

    def alloc(self, nbytes: int, space: str = "device") -> int:
        """Reserve ``nbytes`` (zero-filled) in ``space``; returns the address."""
        return self._arena_named(space).alloc(nbytes)

    def upload(self, array: npt.NDArray[Any], space: str = "device") -> int:
        """Copy an array's bytes (C order, little-endian) into a new allocation in ``space``
        (placing data where the caller says it lives: not a transfer)."""
        raw = np.ascontiguousarray(array).view(np.uint8).reshape(-1)
        addr = self.alloc(raw.size, space)
        arena = self._arena_named(space)
        arena.data[addr - arena.base : addr - arena.base + raw.size] = raw
        return addr

    def download(self, addr: int, dtype: npt.DTypeLike, count: int) -> npt.NDArray[Any]:
        """Read ``count`` elements of ``dtype`` starting at ``addr`` (any space)."""
        dt = np.dtype(dtype)
        arena = self._arena_at(addr)
        lo = addr - arena.base
        return arena.data[lo : lo + count * dt.itemsize].copy().view(dt)

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        """The launcher's explicit copy (``cuMemcpy``), counted per direction."""
        a, b = self._arena_at(src), self._arena_at(dst)
        raw = a.data[src - a.base : src - a.base + nbytes]
        b.data[dst - b.base : dst - b.base + nbytes] = raw
        key = f"{a.space}->{b.space}"
        self.copies[key] = self.copies.get(key, 0) + nbytes

    def space_of(self, addr: int) -> str:
        return self._arena_at(addr).space

    def watch(self, addr: int, nbytes: int, label: str) -> None:
        """Count the kernel's stores into the allocation at ``addr`` under ``label``."""
        self.watched[addr] = (nbytes, label)
        self.stored.setdefault(label, 0)

    def _arena_named(self, space: str) -> _Arena:
        arena = self.arenas.get(space)
        if arena is None:
            raise ValueError(f"unknown memory space {space!r}; known: {', '.join(SPACE_BASE)}")
        return arena

    def _arena_at(self, addr: int) -> _Arena:
        for arena in self.arenas.values():
            if arena.base >> _SPAN == addr >> _SPAN:
                return arena
        raise PtxExecutionError(f"address {addr:#x} is in no memory space")

    def _kernel_arena(self, addrs: Bits, width: int) -> _Arena:
        """The one space the active lanes' accesses fall in, which a kernel may access."""
        tops = np.unique(addrs.astype(np.uint64) >> np.uint64(_SPAN))
        if len(tops) != 1:
            raise PtxExecutionError(f"one {width}-byte access spans several memory spaces")
        arena = self._arena_at(int(tops[0]) << _SPAN)
        if arena.space not in KERNEL_SPACES:
            at = int(addrs[0])
            raise PtxExecutionError(
                f"the kernel dereferences host memory ({width}-byte access at {at:#x}): a kernel "
                "may read only device, unified and pinned (mapped) memory; host data must be "
                "copied to the device (or transferred) first"
            )
        return arena

    def load(self, addrs: Bits, width: int) -> Bits:
        """The kernel's little-endian loads of ``width`` bytes; ``uint{8*width}`` values."""
        if not len(addrs):
            return np.zeros(0, dtype=UINT[8 * width])
        arena = self._kernel_arena(addrs, width)
        off = arena.offsets(addrs, width)
        idx = off.astype(np.int64)[:, None] + np.arange(width)
        out: Bits = arena.data[idx].reshape(-1).view(UINT[8 * width]).copy()
        return out

    def store(self, addrs: Bits, width: int, values: Bits) -> None:
        """The kernel's little-endian stores; refuses two lanes writing different values to
        one address."""
        if not len(addrs):
            return
        arena = self._kernel_arena(addrs, width)
        off = arena.offsets(addrs, width)
        vals = np.ascontiguousarray(values.astype(UINT[8 * width]))
        _, counts = np.unique(off, return_counts=True)
        if (counts > 1).any():
            order = np.argsort(off, kind="stable")
            sorted_vals = vals[order]
            same = np.repeat(sorted_vals[np.cumsum(counts) - counts], counts)
            if not np.array_equal(same, sorted_vals):
                raise PtxExecutionError("threads store different values to the same address")
        idx = off.astype(np.int64)[:, None] + np.arange(width)
        arena.data[idx.reshape(-1)] = vals.view(np.uint8)
        if self.watched:
            self._count(addrs, width)

    def _count(self, addrs: Bits, width: int) -> None:
        for start, (size, label) in self.watched.items():
            a = addrs.astype(np.uint64)
            inside = (a >= np.uint64(start)) & (a < np.uint64(start + size))
            self.stored[label] += int(inside.sum()) * width


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
