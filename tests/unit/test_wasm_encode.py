"""The WebAssembly encoder: LEB128 vectors, the opcode table against wat2wasm, the decoder as an
exact inverse, the WAT printer, and validation of built modules by wasmtime."""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pytest

from kera.backends.wasm.encode import (
    BT_EMPTY,
    OPCODES,
    Data,
    Export,
    ExportKind,
    Func,
    FuncType,
    Imm,
    Import,
    Instr,
    Locals,
    Memory,
    Module,
    ValType,
    WasmDecodeError,
    blocktype,
    decode,
    encode,
    f32c,
    f64c,
    get,
    i32c,
    if_,
    ins,
    op,
    put,
    sleb,
    to_wat,
    uleb,
)

I32, I64, F32, F64, V128 = ValType.I32, ValType.I64, ValType.F32, ValType.F64, ValType.V128


def _wasmtime() -> Any:
    return pytest.importorskip("wasmtime", reason="pip install wasmtime==50.0.1")


def validate(wasm: bytes) -> None:
    wasmtime = _wasmtime()
    cfg = wasmtime.Config()
    cfg.wasm_relaxed_simd = False
    wasmtime.Module.validate(wasmtime.Engine(cfg), wasm)


# ----------------------------------------------------------------------------- LEB128

ULEB = [(0, "00"), (1, "01"), (127, "7f"), (128, "8001"), (624485, "e58e26"),
        (2**32 - 1, "ffffffff0f")]  # fmt: skip
SLEB = [(0, "00"), (-1, "7f"), (63, "3f"), (64, "c000"), (-64, "40"), (-65, "bf7f"),
        (-123456, "c0bb78"), (2**31 - 1, "ffffffff07"), (-(2**31), "8080808078"),
        (-(2**63), "8080808080808080807f")]  # fmt: skip


@pytest.mark.parametrize(("n", "hexed"), ULEB)
def test_uleb_vectors(n: int, hexed: str) -> None:
    assert uleb(n).hex() == hexed


@pytest.mark.parametrize(("n", "hexed"), SLEB)
def test_sleb_vectors(n: int, hexed: str) -> None:
    assert sleb(n).hex() == hexed


def test_leb_round_trip_through_decoder() -> None:
    rng = np.random.default_rng(7)
    values = [int(v) for v in rng.integers(-(2**63), 2**63 - 1, 300, dtype=np.int64)]
    body = tuple(ins("i64.const", v) for v in values) + tuple(ins("drop") for _ in values)
    m = Module(funcs=(Func(FuncType((), ()), (), body),))
    assert decode(encode(m)) == m


def test_uleb_rejects_negative() -> None:
    with pytest.raises(ValueError, match="negative"):
        uleb(-1)


# ----------------------------------------------------------------------------- opcode table

SAMPLE_IMM: dict[Imm, tuple[int | bytes, ...]] = {
    Imm.NONE: (), Imm.BLOCK: (blocktype(F32),), Imm.LABEL: (0,), Imm.FUNC: (0,),
    Imm.LOCAL: (0,), Imm.I32: (-5,), Imm.I64: (1 << 40,), Imm.F32: (0x7FC01234,),
    Imm.F64: (0x3FF8000000000000,), Imm.V128: (bytes(range(16)),),
    Imm.SHUFFLE: (bytes(range(16)),), Imm.LANE: (1,), Imm.ZERO: (), Imm.ZERO2: (),
}  # fmt: skip


def _sample(name: str) -> tuple[Instr, ...]:
    info = OPCODES[name]
    if info.imm is Imm.MEM:
        args: tuple[int | bytes, ...] = (info.align, 16)
    elif info.imm is Imm.MEMLANE:
        args = (info.align, 8, 1)
    else:
        args = SAMPLE_IMM[info.imm]
    if name in ("else", "end"):
        return (ins("if", BT_EMPTY), ins("else"), ins("end"))
    tail = (ins("end"),) if name in ("block", "loop", "if") else ()
    return (Instr(name, args), *tail)


def test_every_opcode_matches_wat2wasm() -> None:
    """Print each table entry as WAT, assemble it independently, compare the bytes."""
    wasmtime = _wasmtime()
    body = tuple(i for name in OPCODES for i in _sample(name))
    m = Module(funcs=(Func(FuncType((), ()), (), body),), memory=Memory(1))
    assert wasmtime.wat2wasm(to_wat(m)) == encode(m)
    assert decode(encode(m)) == m


def test_no_relaxed_simd_and_no_trapping_truncation() -> None:
    assert not [n for n in OPCODES if "relaxed" in n]
    trapping = [n for n in OPCODES if ".trunc_f" in n]  # i32.trunc_f32_s ... (not trunc_sat)
    assert trapping == []
    assert all(o.code < 0x100 for o in OPCODES.values() if o.prefix == 0xFD)


def test_instr_checks_immediates() -> None:
    with pytest.raises(ValueError, match="unknown wasm instruction"):
        Instr("f32.fma")
    with pytest.raises(ValueError, match="takes 1 immediates"):
        Instr("local.get")
    with pytest.raises(ValueError, match="16 bytes"):
        Instr("v128.const", (b"\x00" * 15,))
    assert ins("f64.load").args == (3, 0)  # natural alignment by default
    assert ins("v128.load32_lane", 2).args == (2, 0, 2)


# ----------------------------------------------------------------------------- modules


def _sample_module() -> Module:
    loc = Locals([I32, F32])
    acc, tmp = loc.new(F32), loc.new(F32)
    _ = tmp
    body = [
        *put(acc, f32c(0x80000000)),
        *if_(op("i32.gt_s", get(0), i32c(0)), put(acc, op("f32.add", get(acc), get(1)))),
        *op("f32.mul", get(acc), f32c(0x7FC00001)),
    ]
    f = Func(FuncType((I32, F32), (F32,)), tuple(loc.types), tuple(body), "scale")
    g = Func(FuncType((), (F64,)), (I64, I64, V128), tuple(f64c(0xFFF0000000000001)), "g.2")
    return Module(
        funcs=(f, g),
        imports=(Import("env", "hook", FuncType((I32,), ())),),
        memory=Memory(2, 10),
        exports=(Export("mem", ExportKind.MEMORY, 0), Export("scale", ExportKind.FUNC, 1)),
        data=(Data(16, b'ab"\\\x00\xff'),),
    )


def test_module_round_trip_and_wat() -> None:
    wasmtime = _wasmtime()
    m = _sample_module()
    wasm = encode(m)
    validate(wasm)
    assert decode(wasm) == m
    assert encode(decode(wasm)) == wasm
    assert wasmtime.wat2wasm(to_wat(m)) == wasm


GOLDEN = """\
(module
  (type (;0;) (func (param i32)))
  (type (;1;) (func (param i32 f32) (result f32)))
  (type (;2;) (func (result f64)))
  (import "env" "hook" (func (type 0)))
  (func $scale (type 1) (param i32 f32) (result f32)
    (local f32 f32)
    f32.const -0x0.0p+0
    local.set 2
    local.get 0
    i32.const 0
    i32.gt_s
    if
      local.get 2
      local.get 1
      f32.add
      local.set 2
    end
    local.get 2
    f32.const nan:0x400001
    f32.mul)
  (func $g.2 (type 2) (result f64)
    (local i64 i64 v128)
    f64.const -nan:0x1)
  (memory (;0;) 2 10)
  (export "mem" (memory 0))
  (export "scale" (func 1))
  (data (i32.const 16) "ab\\22\\5c\\00\\ff"))
"""


def test_wat_golden() -> None:
    assert to_wat(_sample_module()) == GOLDEN


@pytest.mark.parametrize(
    "bits",
    [
        0x00000000,
        0x80000000,
        0x00000001,
        0x807FFFFF,
        0x7F7FFFFF,
        0x7F800000,
        0xFF800000,
        0x7FC00000,
        0xFFA00001,
        0x3F800001,
    ],
)
def test_f32_literals_are_exact(bits: int) -> None:
    wasmtime = _wasmtime()
    m = Module(funcs=(Func(FuncType((), (F32,)), (), tuple(f32c(bits))),))
    wasm = wasmtime.wat2wasm(to_wat(m))
    assert wasm == encode(m)
    assert struct.pack("<I", bits) in wasm


def test_invalid_module_is_rejected_by_validator() -> None:
    wasmtime = _wasmtime()
    bad = Module(funcs=(Func(FuncType((), (I32,)), (), tuple(f32c(0))),))
    with pytest.raises(wasmtime.WasmtimeError):
        validate(encode(bad))


def test_block_types_and_nesting_print() -> None:
    body = (ins("block", blocktype(I32)), ins("loop", BT_EMPTY), *i32c(7), ins("br", 1),
            ins("end"), *i32c(1), ins("end"))  # fmt: skip
    m = Module(funcs=(Func(FuncType((), (I32,)), (), body),))
    validate(encode(m))
    assert (
        "    block (result i32)\n      loop\n        i32.const 7\n        br 1\n      end"
        in to_wat(m)
    )


# ----------------------------------------------------------------------------- decoder errors


def test_decode_errors_name_section_and_offset() -> None:
    wasm = encode(_sample_module())
    with pytest.raises(WasmDecodeError, match="header"):
        decode(b"\x00asm\x02\x00\x00\x00")
    with pytest.raises(WasmDecodeError) as info:
        decode(wasm[:40])
    assert info.value.offset <= 40
    body = (*f32c(0), ins("i32.trunc_sat_f32_s"), ins("drop"))
    saturating = encode(Module(funcs=(Func(FuncType((), ()), (), body),)))
    patched = saturating.replace(b"\xfc\x00\x1a", b"\xa8\x01\x1a")  # i32.trunc_f32_s; nop
    with pytest.raises(WasmDecodeError, match="unsupported opcode 0xa8") as info:
        decode(patched)
    assert info.value.section == "code"


def test_decode_rejects_huge_vector_before_allocating() -> None:
    wasm = b"\x00asm\x01\x00\x00\x00" + b"\x01\x05" + uleb(2**31) + b"\x00"
    with pytest.raises(WasmDecodeError, match="cannot fit"):
        decode(wasm)
