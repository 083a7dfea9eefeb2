"""The kernel being built: instruction buffer, register allocator and constant pool.

Also the PTX names of the contract's dtypes, which the lowerings (``lower.py``) and the kernel
structure (``emit.py``) share: a register class per dtype (``bool`` is a ``.pred`` register)
and the type suffix of arithmetic instructions.  This module imports neither of them, so both
can type their code over :class:`Kernel`.
"""

from __future__ import annotations

from dataclasses import dataclass

from kera.dtypes import DType

MAX_INSTRUCTIONS = 400_000

REG_CLASS = {
    DType.BOOL: "pred",
    DType.I32: "b32",
    DType.U32: "b32",
    DType.I64: "b64",
    DType.U64: "b64",
    DType.F32: "f32",
    DType.F64: "f64",
}
PREFIX = {"pred": "%p", "b16": "%h", "b32": "%r", "b64": "%rd", "f32": "%f", "f64": "%fd"}
ARITH = {
    DType.I32: "s32",
    DType.U32: "u32",
    DType.I64: "s64",
    DType.U64: "u64",
    DType.F32: "f32",
    DType.F64: "f64",
}

Elems = list[str]


class PtxEmitError(Exception):
    """A function this back end cannot lower (an op it lacks, or a graph too large)."""


def bit_type(dt: DType) -> str:
    return f"b{dt.bits}"


@dataclass(frozen=True)
class Slot:
    """The staging buffer of one ``transfer`` in the kernel (kernel parameter ``xfer<i>``):
    the value moves from space ``source`` to ``dest``; the launcher allocates ``row_bytes``
    per batch row in :attr:`space` (``docs/ptx-backend.md``, Memory spaces)."""

    source: str
    dest: str
    row_bytes: int

    @property
    def space(self) -> str:
        """Where the buffer lives: ``dest``, except that a kernel cannot write host memory, so
        a move to the host goes through mapped pinned memory (zero-copy)."""
        return "pinned" if self.dest == "host" else self.dest


class Kernel:
    """Instruction buffer, register allocator and constant pool of one kernel."""

    def __init__(self) -> None:
        self.body: list[str] = []
        self.counts: dict[str, int] = {}
        self.consts: dict[tuple[str, int], str] = {}
        self.labels = 0
        self.slots: list[Slot] = []  # one per transfer emitted, in kernel order

    def reg(self, cls: str) -> str:
        k = self.counts.get(cls, 0)
        self.counts[cls] = k + 1
        return f"{PREFIX[cls]}{k}"

    def new(self, dt: DType) -> str:
        return self.reg(REG_CLASS[dt])

    def emit(self, text: str) -> None:
        if len(self.body) >= MAX_INSTRUCTIONS:
            raise PtxEmitError(
                f"the unrolled kernel exceeds {MAX_INSTRUCTIONS} instructions; the PTX back end"
                " keeps every element in a register, so tensors this large are out of reach"
            )
        self.body.append(f"\t{text}")

    def label(self) -> str:
        """A fresh label (``LOOP0``, ``LOOP1`` ...), placed here: the head of a loop."""
        name = f"LOOP{self.labels}"
        self.labels += 1
        self.body.append(f"{name}:")
        return name

    def move(self, dt: DType, dst: str, src: str) -> None:
        """``dst = src``, bits unchanged (``mov.pred`` for bool, else ``mov.bN``)."""
        ty = "pred" if dt is DType.BOOL else bit_type(dt)
        self.emit(f"mov.{ty} {dst}, {src};")

    def const(self, dt: DType, bits: int) -> str:
        """A register holding the constant with these bits (materialised once)."""
        key = (dt.value, bits)
        if key not in self.consts:
            r = self.new(dt)
            if dt is DType.BOOL:
                self.emit(f"mov.pred {r}, {1 if bits else 0};")
            else:
                self.emit(f"mov.{bit_type(dt)} {r}, {bits:#x};")
            self.consts[key] = r
        return self.consts[key]

    def canon(self, dt: DType, x: str) -> str:
        """x with any NaN replaced by the contract's canonical NaN."""
        p, d = self.reg("pred"), self.new(dt)
        self.emit(f"setp.nan.{ARITH[dt]} {p}, {x}, {x};")
        self.emit(f"selp.{bit_type(dt)} {d}, {dt.canonical_nan:#x}, {x}, {p};")
        return d

    def op(self, dt: DType, template: str, *args: str) -> str:
        """Emit ``template`` with a fresh destination of class ``dt`` as ``{d}``."""
        d = self.new(dt)
        self.emit(template.format(*args, d=d))
        return d
