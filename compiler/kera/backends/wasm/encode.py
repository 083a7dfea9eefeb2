"""A small, table-driven WebAssembly binary encoder, decoder and WAT printer.

Written from the WebAssembly core specification (binary format, chapter 5) for the subset the
Kera back end emits: MVP numeric/memory/control instructions, sign extension, non-trapping
float-to-int conversions (0xFC 0..7), bulk ``memory.copy/fill`` and SIMD128 (0xFD prefix).
Two things are deliberately absent from :data:`OPCODES`, so no module built here can contain
them: the trapping float-to-int truncations (0xA8..0xB1; the Kera contract saturates) and every
relaxed-SIMD instruction (implementation-defined results).

Binary layout (all integers LEB128; ``u32`` unsigned, ``sN`` signed, minimal length)::

    module   := 00 61 73 6D  01 00 00 00  section*
    section  := id:u8  size:u32  payload            ids, in this order:
      1 type     vec(60 vec(valtype) vec(valtype))
      2 import   vec(name:str  field:str  00 typeidx:u32 | 02 limits)
      3 function vec(typeidx:u32)
      5 memory   vec(limits)                        limits := 00 min | 01 min max
      7 export   vec(name:str  kind:u8  index:u32)  kind: 00 func, 02 memory
     10 code     vec(size:u32  vec(count:u32 valtype)  instr*  0B)
     11 data     vec(00  (i32.const offset) 0B  vec(byte))
      0 "name"   01 size vec(funcidx:u32 name:str)  (custom: function names, last)
    valtype  := 7F i32 | 7E i64 | 7D f32 | 7C f64 | 7B v128
    instr    := opcode immediates                   opcode: u8, or FC/FD prefix + u32

An instruction is an :class:`Instr` (name plus immediates, validated against the table); its
immediates are plain ints except ``v128.const`` / ``i8x16.shuffle`` (16 bytes).  Float constants
are given as their IEEE bit patterns so every NaN payload survives.  A block type is one s33:
-64 (0x40) empty, a negative valtype code (``-1`` = i32 ...; see :func:`blocktype`) or a type
index.  A memarg is two ints: log2 alignment, offset.

:func:`encode` and :func:`decode` are exact inverses on the modules this file builds
(``encode(decode(b)) == b``); the decoder raises :class:`WasmDecodeError` naming the section and
byte offset and checks every length before it slices.  :func:`to_wat` prints the same module as
text that ``wat2wasm`` assembles back to the identical bytes.
"""

from __future__ import annotations

import functools
import math
import re
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum

MAGIC = b"\x00asm\x01\x00\x00\x00"
PAGE = 65536
MAX_LOCALS = 50_000  # the limit engines (V8, wasmtime) enforce


class ValType(IntEnum):
    """Value types by their binary code."""

    I32 = 0x7F
    I64 = 0x7E
    F32 = 0x7D
    F64 = 0x7C
    V128 = 0x7B

    @property
    def wat(self) -> str:
        return self.name.lower()


class Imm(StrEnum):
    """Immediate-operand layouts; each names how encoder, decoder and printer treat it."""

    NONE = ""
    BLOCK = "blocktype"  # s33
    LABEL = "label"  # u32 relative depth
    FUNC = "func"  # u32 function index
    LOCAL = "local"  # u32
    MEM = "memarg"  # u32 align_log2, u32 offset
    MEMLANE = "memarg+lane"  # memarg, u8 lane
    I32 = "i32"  # s32
    I64 = "i64"  # s64
    F32 = "f32"  # 4 bytes LE, given as the u32 bit pattern
    F64 = "f64"  # 8 bytes LE, given as the u64 bit pattern
    V128 = "v128"  # 16 bytes
    SHUFFLE = "shuffle"  # 16 lane-index bytes
    LANE = "lane"  # u8
    ZERO = "zero"  # one reserved 0x00 byte (memory index)
    ZERO2 = "zero2"  # two reserved 0x00 bytes (memory.copy)


# Number of Python values each immediate layout takes in Instr.args.
_ARITY = {Imm.NONE: 0, Imm.MEM: 2, Imm.MEMLANE: 3, Imm.ZERO: 0, Imm.ZERO2: 0}


@dataclass(frozen=True)
class OpInfo:
    """One opcode: its text name, binary prefix/code, immediates and natural alignment."""

    name: str
    prefix: int | None
    code: int
    imm: Imm
    align: int = 0  # natural log2 alignment, memory ops only

    @property
    def encoding(self) -> bytes:
        if self.prefix is None:
            return bytes([self.code])
        return bytes([self.prefix]) + uleb(self.code)


def _rows(prefix: int | None, start: int, names: str, imm: Imm = Imm.NONE) -> list[OpInfo]:
    """Consecutive opcodes from ``start``; '-' marks a reserved code."""
    return [OpInfo(n, prefix, start + i, imm) for i, n in enumerate(names.split()) if n != "-"]


_CONTROL = [
    OpInfo("unreachable", None, 0x00, Imm.NONE),
    OpInfo("nop", None, 0x01, Imm.NONE),
    OpInfo("block", None, 0x02, Imm.BLOCK),
    OpInfo("loop", None, 0x03, Imm.BLOCK),
    OpInfo("if", None, 0x04, Imm.BLOCK),
    OpInfo("else", None, 0x05, Imm.NONE),
    OpInfo("end", None, 0x0B, Imm.NONE),
    OpInfo("br", None, 0x0C, Imm.LABEL),
    OpInfo("br_if", None, 0x0D, Imm.LABEL),
    OpInfo("return", None, 0x0F, Imm.NONE),
    OpInfo("call", None, 0x10, Imm.FUNC),
    OpInfo("drop", None, 0x1A, Imm.NONE),
    OpInfo("select", None, 0x1B, Imm.NONE),
    OpInfo("local.get", None, 0x20, Imm.LOCAL),
    OpInfo("local.set", None, 0x21, Imm.LOCAL),
    OpInfo("local.tee", None, 0x22, Imm.LOCAL),
    OpInfo("memory.size", None, 0x3F, Imm.ZERO),
    OpInfo("memory.grow", None, 0x40, Imm.ZERO),
    OpInfo("i32.const", None, 0x41, Imm.I32),
    OpInfo("i64.const", None, 0x42, Imm.I64),
    OpInfo("f32.const", None, 0x43, Imm.F32),
    OpInfo("f64.const", None, 0x44, Imm.F64),
]

# (name, code, natural log2 alignment)
_MEMORY = [
    ("i32.load", 0x28, 2), ("i64.load", 0x29, 3), ("f32.load", 0x2A, 2), ("f64.load", 0x2B, 3),
    ("i32.load8_s", 0x2C, 0), ("i32.load8_u", 0x2D, 0), ("i32.load16_s", 0x2E, 1),
    ("i32.load16_u", 0x2F, 1), ("i64.load8_s", 0x30, 0), ("i64.load8_u", 0x31, 0),
    ("i64.load16_s", 0x32, 1), ("i64.load16_u", 0x33, 1), ("i64.load32_s", 0x34, 2),
    ("i64.load32_u", 0x35, 2), ("i32.store", 0x36, 2), ("i64.store", 0x37, 3),
    ("f32.store", 0x38, 2), ("f64.store", 0x39, 3), ("i32.store8", 0x3A, 0),
    ("i32.store16", 0x3B, 1), ("i64.store8", 0x3C, 0), ("i64.store16", 0x3D, 1),
    ("i64.store32", 0x3E, 2),
]  # fmt: skip

_NUMERIC = _rows(
    None,
    0x45,
    "i32.eqz i32.eq i32.ne i32.lt_s i32.lt_u i32.gt_s i32.gt_u i32.le_s i32.le_u i32.ge_s "
    "i32.ge_u i64.eqz i64.eq i64.ne i64.lt_s i64.lt_u i64.gt_s i64.gt_u i64.le_s i64.le_u "
    "i64.ge_s i64.ge_u f32.eq f32.ne f32.lt f32.gt f32.le f32.ge f64.eq f64.ne f64.lt f64.gt "
    "f64.le f64.ge i32.clz i32.ctz i32.popcnt i32.add i32.sub i32.mul i32.div_s i32.div_u "
    "i32.rem_s i32.rem_u i32.and i32.or i32.xor i32.shl i32.shr_s i32.shr_u i32.rotl i32.rotr "
    "i64.clz i64.ctz i64.popcnt i64.add i64.sub i64.mul i64.div_s i64.div_u i64.rem_s "
    "i64.rem_u i64.and i64.or i64.xor i64.shl i64.shr_s i64.shr_u i64.rotl i64.rotr f32.abs "
    "f32.neg f32.ceil f32.floor f32.trunc f32.nearest f32.sqrt f32.add f32.sub f32.mul f32.div "
    "f32.min f32.max f32.copysign f64.abs f64.neg f64.ceil f64.floor f64.trunc f64.nearest "
    "f64.sqrt f64.add f64.sub f64.mul f64.div f64.min f64.max f64.copysign i32.wrap_i64",
)
# 0xA8..0xB1 are the trapping truncations: left out on purpose (the contract saturates).
_NUMERIC += _rows(
    None,
    0xAC,
    "i64.extend_i32_s i64.extend_i32_u - - - - f32.convert_i32_s f32.convert_i32_u "
    "f32.convert_i64_s f32.convert_i64_u f32.demote_f64 f64.convert_i32_s f64.convert_i32_u "
    "f64.convert_i64_s f64.convert_i64_u f64.promote_f32 i32.reinterpret_f32 "
    "i64.reinterpret_f64 f32.reinterpret_i32 f64.reinterpret_i64 i32.extend8_s i32.extend16_s "
    "i64.extend8_s i64.extend16_s i64.extend32_s",
)
_PREFIX_FC = [
    *_rows(
        0xFC,
        0,
        "i32.trunc_sat_f32_s i32.trunc_sat_f32_u i32.trunc_sat_f64_s i32.trunc_sat_f64_u "
        "i64.trunc_sat_f32_s i64.trunc_sat_f32_u i64.trunc_sat_f64_s i64.trunc_sat_f64_u",
    ),
    OpInfo("memory.copy", 0xFC, 10, Imm.ZERO2),
    OpInfo("memory.fill", 0xFC, 11, Imm.ZERO),
]

# SIMD128, 0xFD prefix.  Relaxed SIMD (0xFD 0x100..) is never listed.
_SIMD_MEMORY = [
    ("v128.load", 0, 4), ("v128.load8x8_s", 1, 3), ("v128.load8x8_u", 2, 3),
    ("v128.load16x4_s", 3, 3), ("v128.load16x4_u", 4, 3), ("v128.load32x2_s", 5, 3),
    ("v128.load32x2_u", 6, 3), ("v128.load8_splat", 7, 0), ("v128.load16_splat", 8, 1),
    ("v128.load32_splat", 9, 2), ("v128.load64_splat", 10, 3), ("v128.store", 11, 4),
    ("v128.load32_zero", 92, 2), ("v128.load64_zero", 93, 3),
]  # fmt: skip
_SIMD_LANE_MEMORY = [
    ("v128.load8_lane", 84, 0), ("v128.load16_lane", 85, 1), ("v128.load32_lane", 86, 2),
    ("v128.load64_lane", 87, 3), ("v128.store8_lane", 88, 0), ("v128.store16_lane", 89, 1),
    ("v128.store32_lane", 90, 2), ("v128.store64_lane", 91, 3),
]  # fmt: skip
_SIMD = [OpInfo("v128.const", 0xFD, 12, Imm.V128), OpInfo("i8x16.shuffle", 0xFD, 13, Imm.SHUFFLE)]
_SIMD += _rows(0xFD, 14, "i8x16.swizzle i8x16.splat i16x8.splat i32x4.splat i64x2.splat "
               "f32x4.splat f64x2.splat")  # fmt: skip
_SIMD += _rows(
    0xFD,
    21,
    "i8x16.extract_lane_s i8x16.extract_lane_u i8x16.replace_lane i16x8.extract_lane_s "
    "i16x8.extract_lane_u i16x8.replace_lane i32x4.extract_lane i32x4.replace_lane "
    "i64x2.extract_lane i64x2.replace_lane f32x4.extract_lane f32x4.replace_lane "
    "f64x2.extract_lane f64x2.replace_lane",
    Imm.LANE,
)
_SIMD += _rows(
    0xFD,
    35,
    "i8x16.eq i8x16.ne i8x16.lt_s i8x16.lt_u i8x16.gt_s i8x16.gt_u i8x16.le_s i8x16.le_u "
    "i8x16.ge_s i8x16.ge_u i16x8.eq i16x8.ne i16x8.lt_s i16x8.lt_u i16x8.gt_s i16x8.gt_u "
    "i16x8.le_s i16x8.le_u i16x8.ge_s i16x8.ge_u i32x4.eq i32x4.ne i32x4.lt_s i32x4.lt_u "
    "i32x4.gt_s i32x4.gt_u i32x4.le_s i32x4.le_u i32x4.ge_s i32x4.ge_u f32x4.eq f32x4.ne "
    "f32x4.lt f32x4.gt f32x4.le f32x4.ge f64x2.eq f64x2.ne f64x2.lt f64x2.gt f64x2.le f64x2.ge "
    "v128.not v128.and v128.andnot v128.or v128.xor v128.bitselect v128.any_true",
)
_SIMD += _rows(
    0xFD,
    94,
    "f32x4.demote_f64x2_zero f64x2.promote_low_f32x4 i8x16.abs i8x16.neg i8x16.popcnt "
    "i8x16.all_true i8x16.bitmask i8x16.narrow_i16x8_s i8x16.narrow_i16x8_u f32x4.ceil "
    "f32x4.floor f32x4.trunc f32x4.nearest i8x16.shl i8x16.shr_s i8x16.shr_u i8x16.add "
    "i8x16.add_sat_s i8x16.add_sat_u i8x16.sub i8x16.sub_sat_s i8x16.sub_sat_u f64x2.ceil "
    "f64x2.floor i8x16.min_s i8x16.min_u i8x16.max_s i8x16.max_u f64x2.trunc i8x16.avgr_u "
    "i16x8.extadd_pairwise_i8x16_s i16x8.extadd_pairwise_i8x16_u "
    "i32x4.extadd_pairwise_i16x8_s i32x4.extadd_pairwise_i16x8_u "
    "i16x8.abs i16x8.neg i16x8.q15mulr_sat_s i16x8.all_true i16x8.bitmask "
    "i16x8.narrow_i32x4_s i16x8.narrow_i32x4_u i16x8.extend_low_i8x16_s "
    "i16x8.extend_high_i8x16_s i16x8.extend_low_i8x16_u i16x8.extend_high_i8x16_u i16x8.shl "
    "i16x8.shr_s i16x8.shr_u i16x8.add i16x8.add_sat_s i16x8.add_sat_u i16x8.sub "
    "i16x8.sub_sat_s i16x8.sub_sat_u f64x2.nearest i16x8.mul i16x8.min_s i16x8.min_u "
    "i16x8.max_s i16x8.max_u - i16x8.avgr_u i16x8.extmul_low_i8x16_s "
    "i16x8.extmul_high_i8x16_s i16x8.extmul_low_i8x16_u i16x8.extmul_high_i8x16_u "
    "i32x4.abs i32x4.neg - i32x4.all_true i32x4.bitmask - - i32x4.extend_low_i16x8_s "
    "i32x4.extend_high_i16x8_s i32x4.extend_low_i16x8_u i32x4.extend_high_i16x8_u i32x4.shl "
    "i32x4.shr_s i32x4.shr_u i32x4.add - - i32x4.sub - - - i32x4.mul i32x4.min_s i32x4.min_u "
    "i32x4.max_s i32x4.max_u i32x4.dot_i16x8_s - i32x4.extmul_low_i16x8_s "
    "i32x4.extmul_high_i16x8_s i32x4.extmul_low_i16x8_u i32x4.extmul_high_i16x8_u "
    "i64x2.abs i64x2.neg - i64x2.all_true i64x2.bitmask - - i64x2.extend_low_i32x4_s "
    "i64x2.extend_high_i32x4_s i64x2.extend_low_i32x4_u i64x2.extend_high_i32x4_u i64x2.shl "
    "i64x2.shr_s i64x2.shr_u i64x2.add - - i64x2.sub - - - i64x2.mul i64x2.eq i64x2.ne "
    "i64x2.lt_s i64x2.gt_s i64x2.le_s i64x2.ge_s i64x2.extmul_low_i32x4_s "
    "i64x2.extmul_high_i32x4_s i64x2.extmul_low_i32x4_u i64x2.extmul_high_i32x4_u "
    "f32x4.abs f32x4.neg - f32x4.sqrt f32x4.add f32x4.sub f32x4.mul f32x4.div f32x4.min "
    "f32x4.max f32x4.pmin f32x4.pmax f64x2.abs f64x2.neg - f64x2.sqrt f64x2.add f64x2.sub "
    "f64x2.mul f64x2.div f64x2.min f64x2.max f64x2.pmin f64x2.pmax i32x4.trunc_sat_f32x4_s "
    "i32x4.trunc_sat_f32x4_u f32x4.convert_i32x4_s f32x4.convert_i32x4_u "
    "i32x4.trunc_sat_f64x2_s_zero i32x4.trunc_sat_f64x2_u_zero f64x2.convert_low_i32x4_s "
    "f64x2.convert_low_i32x4_u",
)


def _build_table() -> dict[str, OpInfo]:
    ops = [*_CONTROL, *_NUMERIC, *_PREFIX_FC, *_SIMD]
    ops += [OpInfo(n, None, c, Imm.MEM, a) for n, c, a in _MEMORY]
    ops += [OpInfo(n, 0xFD, c, Imm.MEM, a) for n, c, a in _SIMD_MEMORY]
    ops += [OpInfo(n, 0xFD, c, Imm.MEMLANE, a) for n, c, a in _SIMD_LANE_MEMORY]
    table = {op.name: op for op in ops}
    assert len(table) == len(ops), "duplicate opcode name"
    return table


OPCODES: dict[str, OpInfo] = _build_table()
_BY_CODE: dict[tuple[int | None, int], OpInfo] = {(o.prefix, o.code): o for o in OPCODES.values()}
assert len(_BY_CODE) == len(OPCODES), "duplicate opcode"

# Block-type s33 values: -64 is the empty type; a valtype is its code as a one-byte s7.
BT_EMPTY = -64


def blocktype(result: ValType | None) -> int:
    """The s33 block type for a block with no result or one result."""
    return BT_EMPTY if result is None else result - 0x80


Arg = int | bytes
_WAT_ID = re.compile(r"[0-9A-Za-z!#$%&'*+\-./:<=>?@\\^_`|~]+")


@dataclass(frozen=True)
class Instr:
    """One instruction: a name from :data:`OPCODES` and its immediates."""

    op: str
    args: tuple[Arg, ...] = ()

    def __post_init__(self) -> None:
        info = OPCODES.get(self.op)
        if info is None:
            raise ValueError(f"unknown wasm instruction {self.op!r}")
        want = _ARITY.get(info.imm, 1)
        if len(self.args) != want:
            raise ValueError(f"{self.op} takes {want} immediates, got {self.args!r}")
        if info.imm in (Imm.V128, Imm.SHUFFLE) and len(_as_bytes(self.args[0])) != 16:
            raise ValueError(f"{self.op} needs 16 bytes")


@functools.lru_cache(maxsize=1 << 16)
def ins(op: str, *args: Arg) -> Instr:
    """Shorthand for :class:`Instr`; memory ops without a memarg get natural align, offset 0."""
    info = OPCODES.get(op)
    if info is not None and info.imm in (Imm.MEM, Imm.MEMLANE) and len(args) < 2:
        args = (info.align, 0, *args)
    return Instr(op, args)


@dataclass(frozen=True)
class FuncType:
    params: tuple[ValType, ...]
    results: tuple[ValType, ...]


@dataclass(frozen=True)
class Memory:
    min_pages: int
    max_pages: int | None = None


@dataclass(frozen=True)
class Import:
    """A function (``desc`` a FuncType) or memory (``desc`` a Memory) import."""

    module: str
    name: str
    desc: FuncType | Memory


@dataclass(frozen=True)
class Func:
    """A defined function; ``body`` excludes the final ``end``."""

    type: FuncType
    locals: tuple[ValType, ...]
    body: tuple[Instr, ...]
    name: str = ""

    def __post_init__(self) -> None:
        if self.name and not _WAT_ID.fullmatch(self.name):
            raise ValueError(f"function name {self.name!r} is not a WAT identifier")


class ExportKind(IntEnum):
    FUNC = 0
    MEMORY = 2


@dataclass(frozen=True)
class Export:
    name: str
    kind: ExportKind
    index: int


@dataclass(frozen=True)
class Data:
    """An active data segment for memory 0 at a constant offset."""

    offset: int
    data: bytes


@dataclass(frozen=True)
class Module:
    funcs: tuple[Func, ...] = ()
    imports: tuple[Import, ...] = ()
    memory: Memory | None = None
    exports: tuple[Export, ...] = ()
    data: tuple[Data, ...] = ()
    types: tuple[FuncType, ...] = field(default=())

    def type_list(self) -> list[FuncType]:
        """Explicit types first, then each new signature in import/function order."""
        out = list(self.types)
        sigs = [i.desc for i in self.imports if isinstance(i.desc, FuncType)]
        for t in [*sigs, *(f.type for f in self.funcs)]:
            if t not in out:
                out.append(t)
        return out


# ----------------------------------------------------------------------------- LEB128


def uleb(n: int) -> bytes:
    """Unsigned LEB128, minimal length."""
    if n < 0:
        raise ValueError(f"uleb of negative {n}")
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def sleb(n: int) -> bytes:
    """Signed LEB128, minimal length."""
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        done = (n == 0 and not byte & 0x40) or (n == -1 and byte & 0x40)
        out.append(byte if done else byte | 0x80)
        if done:
            return bytes(out)


def _signed(n: int, bits: int) -> int:
    n &= (1 << bits) - 1
    return n - (1 << bits) if n >> (bits - 1) else n


def _as_bytes(a: Arg) -> bytes:
    if not isinstance(a, bytes):
        raise TypeError(f"expected bytes immediate, got {a!r}")
    return a


def _as_int(a: Arg) -> int:
    if not isinstance(a, int):
        raise TypeError(f"expected int immediate, got {a!r}")
    return a


# ----------------------------------------------------------------------------- encoder


def _vec(items: Sequence[bytes]) -> bytes:
    return uleb(len(items)) + b"".join(items)


def _name(s: str) -> bytes:
    raw = s.encode()
    return uleb(len(raw)) + raw


def _imm_bytes(info: OpInfo, args: tuple[Arg, ...]) -> bytes:
    kind = info.imm
    if kind is Imm.NONE:
        return b""
    if kind is Imm.ZERO:
        return b"\x00"
    if kind is Imm.ZERO2:
        return b"\x00\x00"
    if kind in (Imm.V128, Imm.SHUFFLE):
        return _as_bytes(args[0])
    ints = [_as_int(a) for a in args]
    if kind in (Imm.MEM, Imm.MEMLANE):
        lane = bytes(ints[2:3])
        return uleb(ints[0]) + uleb(ints[1]) + lane
    return _INT_IMM[kind](ints[0])


_INT_IMM: dict[Imm, Callable[[int], bytes]] = {
    Imm.BLOCK: sleb,
    Imm.LABEL: uleb,
    Imm.FUNC: uleb,
    Imm.LOCAL: uleb,
    Imm.LANE: lambda n: bytes([n]),
    Imm.I32: lambda n: sleb(_signed(n, 32)),
    Imm.I64: lambda n: sleb(_signed(n, 64)),
    Imm.F32: lambda n: struct.pack("<I", n & 0xFFFFFFFF),
    Imm.F64: lambda n: struct.pack("<Q", n & 0xFFFFFFFFFFFFFFFF),
}


@functools.lru_cache(maxsize=1 << 16)
def encode_instr(i: Instr) -> bytes:
    info = OPCODES[i.op]
    return info.encoding + _imm_bytes(info, i.args)


def _locals(types: Sequence[ValType]) -> bytes:
    groups: list[list[ValType]] = []
    for t in types:
        if groups and groups[-1][0] == t:
            groups[-1].append(t)
        else:
            groups.append([t])
    return _vec([uleb(len(g)) + bytes([g[0]]) for g in groups])


def _code(f: Func) -> bytes:
    body = _locals(f.locals) + b"".join(encode_instr(i) for i in f.body) + b"\x0b"
    return uleb(len(body)) + body


def _limits(m: Memory) -> bytes:
    if m.max_pages is None:
        return b"\x00" + uleb(m.min_pages)
    return b"\x01" + uleb(m.min_pages) + uleb(m.max_pages)


def _functype(t: FuncType) -> bytes:
    return b"\x60" + _vec([bytes([p]) for p in t.params]) + _vec([bytes([r]) for r in t.results])


def _import(imp: Import, types: list[FuncType]) -> bytes:
    head = _name(imp.module) + _name(imp.name)
    if isinstance(imp.desc, FuncType):
        return head + b"\x00" + uleb(types.index(imp.desc))
    return head + b"\x02" + _limits(imp.desc)


def _section(sid: int, payload: bytes) -> bytes:
    return bytes([sid]) + uleb(len(payload)) + payload


def _name_section(m: Module) -> bytes:
    first = sum(isinstance(i.desc, FuncType) for i in m.imports)
    names = [uleb(first + k) + _name(f.name) for k, f in enumerate(m.funcs) if f.name]
    if not names:
        return b""
    sub = _vec(names)
    return _section(0, _name("name") + b"\x01" + uleb(len(sub)) + sub)


def encode(m: Module) -> bytes:
    """The binary module; sections in the spec's order, empty ones omitted."""
    types = m.type_list()
    parts = [
        (1, [_functype(t) for t in types]),
        (2, [_import(i, types) for i in m.imports]),
        (3, [uleb(types.index(f.type)) for f in m.funcs]),
        (5, [_limits(m.memory)] if m.memory else []),
        (7, [_name(e.name) + bytes([e.kind]) + uleb(e.index) for e in m.exports]),
        (10, [_code(f) for f in m.funcs]),
        (11, [b"\x00\x41" + sleb(d.offset) + b"\x0b" + _name_bytes(d.data) for d in m.data]),
    ]
    out = MAGIC + b"".join(_section(sid, _vec(items)) for sid, items in parts if items)
    return out + _name_section(m)


def _name_bytes(raw: bytes) -> bytes:
    return uleb(len(raw)) + raw


# ----------------------------------------------------------------------------- decoder


class WasmDecodeError(ValueError):
    """Malformed or unsupported module bytes; names the section and byte offset."""

    def __init__(self, msg: str, offset: int, section: str) -> None:
        super().__init__(f"{msg} at byte {offset} in section {section}")
        self.offset = offset
        self.section = section


class _Reader:
    def __init__(self, buf: bytes, pos: int, end: int, section: str) -> None:
        self.buf, self.pos, self.end, self.section = buf, pos, end, section

    def fail(self, msg: str) -> WasmDecodeError:
        return WasmDecodeError(msg, self.pos, self.section)

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > self.end:
            raise self.fail(f"need {n} bytes, {self.end - self.pos} left")
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def u8(self) -> int:
        return self.take(1)[0]

    def uleb(self, bits: int = 32) -> int:
        return self._leb(bits, signed=False)

    def sleb(self, bits: int) -> int:
        return self._leb(bits, signed=True)

    def _leb(self, bits: int, signed: bool) -> int:
        n = shift = 0
        while True:
            if shift >= bits + 7:
                raise self.fail("LEB128 too long")
            byte = self.u8()
            n |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        if signed and byte & 0x40:
            n -= 1 << shift
        return n

    def count(self, min_item_bytes: int = 1) -> int:
        n = self.uleb()
        if n * min_item_bytes > self.end - self.pos:
            raise self.fail(f"vector of {n} items cannot fit")
        return n

    def name(self) -> str:
        raw = self.take(self.count())
        try:
            return raw.decode()
        except UnicodeDecodeError as e:
            raise self.fail("name is not UTF-8") from e

    def valtype(self) -> ValType:
        b = self.u8()
        if b not in ValType._value2member_map_:
            raise self.fail(f"bad value type 0x{b:02x}")
        return ValType(b)


def _read_instr(r: _Reader) -> Instr:
    first = r.u8()
    prefix = first if first in (0xFC, 0xFD) else None
    code = r.uleb() if prefix is not None else first
    info = _BY_CODE.get((prefix, code))
    if info is None:
        raise r.fail(f"unsupported opcode {first:#x}/{code}")
    return Instr(info.name, _read_imm(r, info.imm))


def _read_imm(r: _Reader, kind: Imm) -> tuple[Arg, ...]:
    if kind is Imm.NONE:
        return ()
    if kind in (Imm.ZERO, Imm.ZERO2):
        for _ in range(1 if kind is Imm.ZERO else 2):
            if r.u8() != 0:
                raise r.fail("reserved byte must be 0")
        return ()
    if kind in (Imm.V128, Imm.SHUFFLE):
        return (r.take(16),)
    if kind in (Imm.MEM, Imm.MEMLANE):
        mem: tuple[Arg, ...] = (r.uleb(), r.uleb())
        return (*mem, r.u8()) if kind is Imm.MEMLANE else mem
    readers: dict[Imm, Callable[[], int]] = {
        Imm.BLOCK: lambda: r.sleb(33),
        Imm.LABEL: r.uleb,
        Imm.FUNC: r.uleb,
        Imm.LOCAL: r.uleb,
        Imm.LANE: r.u8,
        Imm.I32: lambda: r.sleb(32),
        Imm.I64: lambda: r.sleb(64),
        Imm.F32: lambda: int.from_bytes(r.take(4), "little"),
        Imm.F64: lambda: int.from_bytes(r.take(8), "little"),
    }
    return (readers[kind](),)


def _read_body(r: _Reader) -> tuple[tuple[ValType, ...], tuple[Instr, ...]]:
    local_types: list[ValType] = []
    for _ in range(r.count(2)):
        n = r.uleb()
        if len(local_types) + n > MAX_LOCALS:
            raise r.fail(f"more than {MAX_LOCALS} locals")
        local_types += [r.valtype()] * n
    body: list[Instr] = []
    depth = 0
    while True:
        i = _read_instr(r)
        if i.op == "end" and depth == 0:
            break
        depth += {"block": 1, "loop": 1, "if": 1, "end": -1}.get(i.op, 0)
        body.append(i)
    if r.pos != r.end:
        raise r.fail("function body has trailing bytes")
    return tuple(local_types), tuple(body)


@dataclass
class _Parts:
    types: list[FuncType] = field(default_factory=list)
    imports: list[Import] = field(default_factory=list)
    func_types: list[FuncType] = field(default_factory=list)
    memory: Memory | None = None
    exports: list[Export] = field(default_factory=list)
    bodies: list[tuple[tuple[ValType, ...], tuple[Instr, ...]]] = field(default_factory=list)
    data: list[Data] = field(default_factory=list)
    names: dict[int, str] = field(default_factory=dict)


def _read_limits(r: _Reader) -> Memory:
    flag = r.u8()
    if flag not in (0, 1):
        raise r.fail(f"bad limits flag {flag}")
    lo = r.uleb()
    return Memory(lo, r.uleb() if flag else None)


def _typeidx(r: _Reader, p: _Parts) -> FuncType:
    i = r.uleb()
    if i >= len(p.types):
        raise r.fail(f"type index {i} out of range")
    return p.types[i]


def _sec_type(r: _Reader, p: _Parts) -> None:
    for _ in range(r.count(3)):
        if r.u8() != 0x60:
            raise r.fail("expected func type 0x60")
        params = tuple(r.valtype() for _ in range(r.count()))
        results = tuple(r.valtype() for _ in range(r.count()))
        p.types.append(FuncType(params, results))


def _sec_import(r: _Reader, p: _Parts) -> None:
    for _ in range(r.count(4)):
        mod, nm, kind = r.name(), r.name(), r.u8()
        if kind not in (0, 2):
            raise r.fail(f"unsupported import kind {kind}")
        desc: FuncType | Memory = _typeidx(r, p) if kind == 0 else _read_limits(r)
        p.imports.append(Import(mod, nm, desc))


def _sec_function(r: _Reader, p: _Parts) -> None:
    p.func_types = [_typeidx(r, p) for _ in range(r.count())]


def _sec_memory(r: _Reader, p: _Parts) -> None:
    if r.count(2) != 1:
        raise r.fail("exactly one memory supported")
    p.memory = _read_limits(r)


def _sec_export(r: _Reader, p: _Parts) -> None:
    for _ in range(r.count(3)):
        nm, kind = r.name(), r.u8()
        if kind not in (0, 2):
            raise r.fail(f"unsupported export kind {kind}")
        p.exports.append(Export(nm, ExportKind(kind), r.uleb()))


def _sec_code(r: _Reader, p: _Parts) -> None:
    n = r.count(2)
    if n != len(p.func_types):
        raise r.fail(f"{n} bodies for {len(p.func_types)} functions")
    for _ in range(n):
        size = r.uleb()
        end = r.pos + size
        if end > r.end:
            raise r.fail("body size past section end")
        p.bodies.append(_read_body(_Reader(r.buf, r.pos, end, r.section)))
        r.pos = end


def _sec_data(r: _Reader, p: _Parts) -> None:
    for _ in range(r.count(4)):
        if r.take(2) != b"\x00\x41":
            raise r.fail("only active segments with an i32.const offset are supported")
        off = r.sleb(32)
        if r.u8() != 0x0B:
            raise r.fail("expected end of offset expression")
        p.data.append(Data(off, r.take(r.count())))


def _sec_custom(r: _Reader, p: _Parts) -> None:
    if r.name() != "name":
        r.pos = r.end
        return
    while r.pos < r.end:
        sub, size = r.u8(), r.uleb()
        inner = _Reader(r.buf, r.pos, r.pos + size, "name")
        r.take(size)
        if sub != 1:
            continue
        for _ in range(inner.count(2)):
            idx = inner.uleb()
            p.names[idx] = inner.name()


_SECTIONS = {
    0: ("custom", _sec_custom),
    1: ("type", _sec_type),
    2: ("import", _sec_import),
    3: ("function", _sec_function),
    5: ("memory", _sec_memory),
    7: ("export", _sec_export),
    10: ("code", _sec_code),
    11: ("data", _sec_data),
}


def decode(buf: bytes) -> Module:
    """Parse module bytes produced by :func:`encode` (or any module in the same subset)."""
    if buf[:8] != MAGIC:
        raise WasmDecodeError("bad magic/version", 0, "header")
    top = _Reader(buf, 8, len(buf), "header")
    parts = _Parts()
    last = 0
    while top.pos < top.end:
        sid, size = top.u8(), top.uleb()
        if sid not in _SECTIONS or (sid and sid <= last):
            raise top.fail(f"unexpected section id {sid}")
        last = sid or last
        name, handler = _SECTIONS[sid]
        r = _Reader(buf, top.pos, top.pos + size, name)
        top.take(size)
        handler(r, parts)
        if r.pos != r.end:
            raise r.fail("section has trailing bytes")
    return _assemble(parts)


def _assemble(p: _Parts) -> Module:
    first = sum(isinstance(i.desc, FuncType) for i in p.imports)
    funcs = tuple(
        Func(t, loc, body, p.names.get(first + k, ""))
        for k, (t, (loc, body)) in enumerate(zip(p.func_types, p.bodies, strict=True))
    )
    m = Module(funcs, tuple(p.imports), p.memory, tuple(p.exports), tuple(p.data))
    # Keep explicit types only where derivation would not reproduce the type section.
    if m.type_list() != p.types:
        m = Module(funcs, m.imports, m.memory, m.exports, m.data, tuple(p.types))
    return m


# ----------------------------------------------------------------------------- WAT printer


def wat_f32(bits: int) -> str:
    """WAT literal for an f32 bit pattern (exact; NaN payload kept)."""
    return _wat_float(bits & 0xFFFFFFFF, 8, 23, struct.unpack("<f", struct.pack("<I", bits))[0])


def wat_f64(bits: int) -> str:
    """WAT literal for an f64 bit pattern (exact; NaN payload kept)."""
    val = struct.unpack("<d", struct.pack("<Q", bits & 0xFFFFFFFFFFFFFFFF))[0]
    return _wat_float(bits, 11, 52, val)


def _wat_float(bits: int, ebits: int, mbits: int, val: float) -> str:
    sign = "-" if bits >> (ebits + mbits) & 1 else ""
    if math.isnan(val):
        return f"{sign}nan:0x{bits & ((1 << mbits) - 1):x}"
    if math.isinf(val):
        return f"{sign}inf"
    return val.hex()


def _wat_imm(info: OpInfo, args: tuple[Arg, ...]) -> str:
    kind = info.imm
    if kind in (Imm.NONE, Imm.ZERO, Imm.ZERO2):
        return ""
    if kind is Imm.V128:
        words = struct.unpack("<4I", _as_bytes(args[0]))
        return " i32x4 " + " ".join(f"0x{w:08x}" for w in words)
    if kind is Imm.SHUFFLE:
        return " " + " ".join(str(b) for b in _as_bytes(args[0]))
    ints = [_as_int(a) for a in args]
    if kind in (Imm.MEM, Imm.MEMLANE):
        text = f" offset={ints[1]}" if ints[1] else ""
        text += f" align={1 << ints[0]}" if ints[0] != info.align else ""
        return text + (f" {ints[2]}" if kind is Imm.MEMLANE else "")
    if kind is Imm.BLOCK:
        return _wat_blocktype(ints[0])
    return " " + _WAT_INT[kind](ints[0])


_WAT_INT: dict[Imm, Callable[[int], str]] = {
    Imm.LABEL: str,
    Imm.FUNC: str,
    Imm.LOCAL: str,
    Imm.LANE: str,
    Imm.I32: lambda n: str(_signed(n, 32)),
    Imm.I64: lambda n: str(_signed(n, 64)),
    Imm.F32: wat_f32,
    Imm.F64: wat_f64,
}


def _wat_blocktype(bt: int) -> str:
    if bt == BT_EMPTY:
        return ""
    if bt >= 0:
        return f" (type {bt})"
    return f" (result {ValType(bt + 0x80).wat})"


@functools.lru_cache(maxsize=1 << 16)
def wat_instr(i: Instr) -> str:
    """An instruction's text, memoised like :func:`encode_instr`: a module repeats few
    distinct instructions (a fuzzed batch's ~180k are mostly the same loads, stores and local
    moves), and the WAT is printed for every case's artifacts."""
    return i.op + _wat_imm(OPCODES[i.op], i.args)


def _wat_types(ts: Iterable[ValType], word: str) -> str:
    ts = list(ts)
    return f" ({word} {' '.join(t.wat for t in ts)})" if ts else ""


def _wat_body(body: Sequence[Instr], indent: int) -> list[str]:
    lines, depth = [], indent
    for i in body:
        if i.op in ("end", "else"):
            depth -= 1
        lines.append("  " * depth + wat_instr(i))
        if i.op in ("block", "loop", "if", "else"):
            depth += 1
    return lines


def _wat_func(f: Func, idx: int, types: list[FuncType]) -> list[str]:
    label = f"${f.name}" if f.name else f"(;{idx};)"
    head = f"  (func {label} (type {types.index(f.type)})"
    head += _wat_types(f.type.params, "param") + _wat_types(f.type.results, "result")
    lines = [head]
    if f.locals:
        lines.append("    (local" + "".join(" " + t.wat for t in f.locals) + ")")
    lines += _wat_body(f.body, 2)
    lines[-1] += ")"
    return lines


def _wat_limits(m: Memory) -> str:
    return f"{m.min_pages}" + (f" {m.max_pages}" if m.max_pages is not None else "")


def _wat_string(raw: bytes) -> str:
    plain = (chr(b) if 0x20 <= b < 0x7F and b not in b'"\\' else f"\\{b:02x}" for b in raw)
    return '"' + "".join(plain) + '"'


def _wat_import(imp: Import, types: list[FuncType]) -> str:
    if isinstance(imp.desc, FuncType):
        desc = f"(func (type {types.index(imp.desc)}))"
    else:
        desc = f"(memory {_wat_limits(imp.desc)})"
    return f"  (import {_wat_string(imp.module.encode())} {_wat_string(imp.name.encode())} {desc})"


def to_wat(m: Module) -> str:
    """Readable text form; ``wat2wasm(to_wat(m)) == encode(m)``."""
    types = m.type_list()
    lines = ["(module"]
    for k, t in enumerate(types):
        sig = _wat_types(t.params, "param") + _wat_types(t.results, "result")
        lines.append(f"  (type (;{k};) (func{sig}))")
    lines += [_wat_import(i, types) for i in m.imports]
    first = sum(isinstance(i.desc, FuncType) for i in m.imports)
    for k, f in enumerate(m.funcs):
        lines += _wat_func(f, first + k, types)
    if m.memory:
        lines.append(f"  (memory (;0;) {_wat_limits(m.memory)})")
    kinds = {ExportKind.FUNC: "func", ExportKind.MEMORY: "memory"}
    for e in m.exports:
        lines.append(f"  (export {_wat_string(e.name.encode())} ({kinds[e.kind]} {e.index}))")
    for d in m.data:
        lines.append(f"  (data (i32.const {d.offset}) {_wat_string(d.data)})")
    return "\n".join(lines) + ")\n"


# ----------------------------------------------------------------------------- code building
#
# Straight-line helpers for writing function bodies as nested expressions: each returns the
# instruction list that leaves its value on the stack (``op("i64.add", get(a), i64c(1))``).

Code = list[Instr]


def op(name: str, *operands: Code) -> Code:
    """The operands' code in order, then ``name``."""
    return [*(i for code in operands for i in code), ins(name)]


def call(func: int, *operands: Code) -> Code:
    return [*(i for code in operands for i in code), ins("call", func)]


def get(index: int) -> Code:
    return [ins("local.get", index)]


def put(index: int, value: Code) -> Code:
    """``local.set index`` of ``value``."""
    return [*value, ins("local.set", index)]


def i32c(n: int) -> Code:
    return [ins("i32.const", _signed(n, 32))]


def i64c(n: int) -> Code:
    return [ins("i64.const", _signed(n, 64))]


def f32c(bits: int) -> Code:
    return [ins("f32.const", bits & 0xFFFFFFFF)]


def f64c(bits: int) -> Code:
    return [ins("f64.const", bits & 0xFFFFFFFFFFFFFFFF)]


def select(if_true: Code, if_false: Code, cond: Code) -> Code:
    return [*if_true, *if_false, *cond, ins("select")]


def if_(
    cond: Code, then: Code, otherwise: Sequence[Instr] = (), result: ValType | None = None
) -> Code:
    """``if``/``else``/``end``; ``result`` is the type both arms leave, if any."""
    code = [*cond, ins("if", blocktype(result)), *then]
    if otherwise:
        code += [ins("else"), *otherwise]
    return [*code, ins("end")]


class Locals:
    """Allocates local indices after the parameters; ``types`` is the ``Func.locals`` tuple."""

    def __init__(self, params: Sequence[ValType]) -> None:
        self.first = len(params)
        self.types: list[ValType] = []

    def new(self, t: ValType) -> int:
        self.types.append(t)
        return self.first + len(self.types) - 1
