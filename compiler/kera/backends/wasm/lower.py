"""The lowering table of the WebAssembly back end: one contract op at given dtypes -> code.

:data:`LOWER` has one :class:`Row` per elementwise op; a row holds both of the op's lowerings:

* ``scalar``: one element.  The value representation is f32, f64, i32 for i32/u32/bool (0 or
  1) and i64 for i64/u64.
* ``simd``: four elements per step, one v128 for 32-bit types and two for 64-bit ones; a bool
  is an i32x4 lane mask (0 or -1).  ``None`` where SIMD128 has no form of the op at all; the
  lowering itself may also return ``None`` for a dtype combination SIMD128 cannot express
  exactly.  Either way :func:`lower_simd` falls back to :func:`lanewise`, the scalar lowering
  run lane by lane, so every op has a SIMD form.

Operand codes passed in are pure (``local.get`` / constants): a lowering may evaluate them
more than once.

How each gap between WebAssembly and the Kera contract is closed:

* NaN bits: every op that can produce or propagate a NaN (add sub mul div sqrt min max floor
  ceil trunc round, float conversions, fma, reduction steps) is followed by :func:`canon`:
  ``select(canonical NaN, x, x != x)`` (:func:`vcanon`, ``v128.bitselect`` with an ``ne``
  mask, in SIMD).  neg, abs and copysign use the engine's sign-bit instructions, which never
  touch payloads.
* float -> int: ``trunc_sat`` only (truncates, saturates, NaN -> 0: the contract verbatim).
* integer ``x/0``, ``x%0`` and ``MIN/-1`` would trap: the divisor is replaced by 1 where it is
  0 (or where ``MIN/-1``), then ``x/0`` -> 0 and ``x%0`` -> x are selected; ``MIN/1`` is MIN
  and ``rem_s(MIN, -1)`` is already 0.
* shifts: wasm already reduces the amount modulo the width; ``shr`` is ``shr_s`` for signed
  and ``shr_u`` for unsigned types.
* min/max: ``f32.min``/``f32.max`` are IEEE minimum/maximum (NaN-propagating, -0 < +0) up to
  NaN bits, which ``canon`` fixes.  Integer min/max select on a compare.
* fma: a call to the exact software helpers of :mod:`kera.backends.wasm.fma`.
* SIMD128 lacks: integer div/rem, per-lane variable shifts, 64-bit float<->int conversions and
  an exact f64 fma; those go lane by lane (f32 fma is vectorised as two f64x2 halves).
  Unsigned 64-bit compares flip the sign bits and compare signed.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from kera.backends.wasm.encode import (
    Code,
    ValType,
    f32c,
    f64c,
    get,
    i32c,
    i64c,
    ins,
    op,
    select,
)
from kera.dtypes import DType
from kera.ops import Op

BOOL, I32, I64, U32, U64, F32, F64 = (
    DType.BOOL,
    DType.I32,
    DType.I64,
    DType.U32,
    DType.U64,
    DType.F32,
    DType.F64,
)

VT: dict[DType, ValType] = {
    BOOL: ValType.I32,
    I32: ValType.I32,
    U32: ValType.I32,
    I64: ValType.I64,
    U64: ValType.I64,
    F32: ValType.F32,
    F64: ValType.F64,
}
#: SIMD lane shape of each dtype (bool is an i32x4 mask)
SHAPE = {BOOL: "i32x4", I32: "i32x4", U32: "i32x4", I64: "i64x2", U64: "i64x2"}
SHAPE |= {F32: "f32x4", F64: "f64x2"}
#: the function each fma width calls; the back end adds the helper's body on first use
FMA_HELPER = {F32: "kera_fma_f32", F64: "kera_fma_f64"}
#: low 32 bits of each 64-bit lane of two vectors, as one i32x4
NARROW64 = bytes([0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27])
HIGH_HALF = bytes([8, 9, 10, 11, 12, 13, 14, 15] * 2)
LOW_HALVES = bytes([*range(8), *range(16, 24)])


@dataclass(frozen=True)
class Site:
    """One elementwise op application: operand dtypes and result dtype."""

    op: Op
    ins: tuple[DType, ...]
    out: DType


class Cx(Protocol):
    """What a lowering needs from the function being emitted."""

    def temp(self, vt: ValType) -> int:
        """A scratch local of type vt, free between two uses in one expression."""
        ...

    def helper(self, name: str) -> int:
        """The function index of a helper (the fma functions)."""
        ...

    def local(self, vt: ValType) -> int:
        """A fresh local of type vt."""
        ...


#: args[i] is operand i's code (scalar) or its list of v128 registers (SIMD)
Regs = Sequence[Code]
ScalarLower = Callable[[Cx, Site, Sequence[Code]], Code]
#: one code per result register, or None where SIMD128 cannot express this dtype combination
SimdLower = Callable[[Cx, Site, Sequence[Regs]], list[Code] | None]


@dataclass(frozen=True)
class Row:
    """How one op lowers: ``scalar`` for one element, ``simd`` for four (None: lane by lane)."""

    scalar: ScalarLower
    simd: SimdLower | None


# ============================================================================ values


def pfx(dt: DType) -> str:
    return VT[dt].wat


def regs(dt: DType) -> int:
    """v128 registers holding four elements of dt."""
    return 2 if dt.bits == 64 else 1


def lanes(dt: DType) -> int:
    """Elements per v128 register."""
    return 2 if dt.bits == 64 else 4


def const(dt: DType, value: int) -> Code:
    """A scalar constant from an integer bit pattern (or the integer value)."""
    if dt is F32:
        return f32c(value)
    if dt is F64:
        return f64c(value)
    return i64c(value) if VT[dt] is ValType.I64 else i32c(value)


def v128_splat(dt: DType, value: int) -> Code:
    """A v128 constant with every element ``value`` (bits); a bool becomes a 0/-1 mask."""
    if dt is BOOL:
        value = -1 if value else 0
    if dt.bits == 64:
        raw = struct.pack("<2Q", *[value & (2**64 - 1)] * 2)
    else:
        raw = struct.pack("<4I", *[value & (2**32 - 1)] * 4)
    return [ins("v128.const", raw)]


def canon(dt: DType, x: Code, cx: Cx | None = None) -> Code:
    """x with any NaN replaced by the canonical NaN: ``select(nan, x, x != x)``.

    With ``cx``, x is evaluated once and kept in a scratch local; without it (the fma helpers,
    which have no ``Cx``) x is evaluated three times, so it must be pure.
    """
    nan, ne = const(dt, dt.canonical_nan), f"{pfx(dt)}.ne"
    if cx is None:
        return select(nan, x, op(ne, x, x))
    t = cx.temp(VT[dt])
    return [*nan, *x, ins("local.tee", t), *get(t), *get(t), ins(ne), ins("select")]


def vcanon(dt: DType, x: Code, cx: Cx) -> Code:
    """:func:`canon` on every lane of one v128 (x evaluated once)."""
    t = cx.temp(ValType.V128)
    return [*v128_splat(dt, dt.canonical_nan), *x, ins("local.tee", t), *get(t), *get(t),
            ins(f"{SHAPE[dt]}.ne"), ins("v128.bitselect")]  # fmt: skip


def _ordered(dt: DType, name: str) -> str:
    """Integer ordering compare with its signedness suffix (i32.lt_s / i32.lt_u)."""
    return f"{pfx(dt)}.{name}_{'s' if dt.is_signed else 'u'}"


def _narrow(lo: Code, hi: Code) -> Code:
    """The low 32 bits of the four 64-bit lanes of (lo, hi), as one i32x4."""
    return [*lo, *hi, ins("i8x16.shuffle", NARROW64)]


def _widen_mask(mask: Code, r: int) -> Code:
    """Lanes 2r, 2r+1 of an i32x4 mask as an i64x2 mask."""
    return op(f"i64x2.extend_{'low' if r == 0 else 'high'}_i32x4_s", mask)


def _high(x: Code) -> Code:
    """Lanes 2, 3 of an i32x4/f32x4 moved to lanes 0, 1."""
    return [*x, *x, ins("i8x16.shuffle", HIGH_HALF)]


def _per_reg(dt: DType, f: Callable[[int], Code]) -> list[Code]:
    return [f(r) for r in range(regs(dt))]


def _v_lt64(dt: DType, name: str, x: Code, y: Code) -> Code:
    """64-bit ordering compare; unsigned by flipping both sign bits."""
    if dt.is_signed:
        return op(f"i64x2.{name}_s", x, y)
    flip = v128_splat(dt, dt.sign_mask)
    return op(f"i64x2.{name}_s", op("v128.xor", x, flip), op("v128.xor", y, flip))


# ============================================================================ arithmetic


def _arith(name: str) -> ScalarLower:
    """add sub mul: floats IEEE + canonical NaN, integers wrap."""

    def lower(cx: Cx, s: Site, a: Sequence[Code]) -> Code:
        code = op(f"{pfx(s.out)}.{name}", a[0], a[1])
        return canon(s.out, code, cx) if s.out.is_float else code

    return lower


def _v_arith(name: str) -> SimdLower:
    def lower(cx: Cx, s: Site, a: Sequence[Regs]) -> list[Code] | None:
        dt, sh = s.out, SHAPE[s.out]
        if dt.is_float:
            return _per_reg(dt, lambda r: vcanon(dt, op(f"{sh}.{name}", a[0][r], a[1][r]), cx))
        if name == "div":
            return None  # no integer division in SIMD128
        return _per_reg(dt, lambda r: op(f"{sh}.{name}", a[0][r], a[1][r]))

    return lower


def _div(cx: Cx, s: Site, a: Sequence[Code]) -> Code:
    dt, p = s.out, pfx(s.out)
    if dt.is_float:
        return canon(dt, op(f"{p}.div", a[0], a[1]), cx)
    by_zero = op(f"{p}.eqz", a[1])
    bad = by_zero
    if dt.is_signed:  # MIN / -1 would trap; MIN / 1 gives the contract's MIN
        overflow = op("i32.and", op(f"{p}.eq", a[0], const(dt, dt.min)),
                      op(f"{p}.eq", a[1], const(dt, -1)))  # fmt: skip
        bad = op("i32.or", by_zero, overflow)
    q = op(_ordered(dt, "div"), a[0], select(const(dt, 1), a[1], bad))
    return select(const(dt, 0), q, by_zero)


def _rem(cx: Cx, s: Site, a: Sequence[Code]) -> Code:
    dt = s.out
    by_zero = op(f"{pfx(dt)}.eqz", a[1])
    r = op(_ordered(dt, "rem"), a[0], select(const(dt, 1), a[1], by_zero))  # rem_s(MIN,-1)=0
    return select(a[0], r, by_zero)


def _minmax(name: str) -> ScalarLower:
    def lower(cx: Cx, s: Site, a: Sequence[Code]) -> Code:
        dt = s.out
        if dt.is_float:
            return canon(dt, op(f"{pfx(dt)}.{name}", a[0], a[1]), cx)
        return select(a[0], a[1], op(_ordered(dt, "lt" if name == "min" else "gt"), a[0], a[1]))

    return lower


def _v_minmax(name: str) -> SimdLower:
    def lower(cx: Cx, s: Site, a: Sequence[Regs]) -> list[Code] | None:
        dt, sh = s.out, SHAPE[s.out]
        if dt.is_float:
            return _per_reg(dt, lambda r: vcanon(dt, op(f"{sh}.{name}", a[0][r], a[1][r]), cx))
        if dt.bits == 32:
            return [op(f"i32x4.{name}_{'s' if dt.is_signed else 'u'}", a[0][0], a[1][0])]
        cmp = "lt" if name == "min" else "gt"
        return _per_reg(
            dt, lambda r: op("v128.bitselect", a[0][r], a[1][r], _v_lt64(dt, cmp, a[0][r], a[1][r]))
        )

    return lower


def _rounding(name: str) -> ScalarLower:
    def lower(cx: Cx, s: Site, a: Sequence[Code]) -> Code:
        return canon(s.out, op(f"{pfx(s.out)}.{name}", a[0]), cx)

    return lower


def _v_rounding(name: str) -> SimdLower:
    def lower(cx: Cx, s: Site, a: Sequence[Regs]) -> list[Code] | None:
        dt = s.out
        return _per_reg(dt, lambda r: vcanon(dt, op(f"{SHAPE[dt]}.{name}", a[0][r]), cx))

    return lower


# ============================================================================ sign bits


def _neg(cx: Cx, s: Site, a: Sequence[Code]) -> Code:
    if s.out.is_float:
        return op(f"{pfx(s.out)}.neg", a[0])  # sign bit only
    return op(f"{pfx(s.out)}.sub", const(s.out, 0), a[0])


def _v_neg(cx: Cx, s: Site, a: Sequence[Regs]) -> list[Code] | None:
    return _per_reg(s.out, lambda r: op(f"{SHAPE[s.out]}.neg", a[0][r]))  # floats: sign bit


def _abs(cx: Cx, s: Site, a: Sequence[Code]) -> Code:
    dt = s.out
    if dt.is_float:
        return op(f"{pfx(dt)}.abs", a[0])  # sign bit only
    if not dt.is_signed:
        return list(a[0])
    negated = op(f"{pfx(dt)}.sub", const(dt, 0), a[0])  # abs(MIN) wraps to MIN
    return select(negated, a[0], op(f"{pfx(dt)}.lt_s", a[0], const(dt, 0)))


def _v_abs(cx: Cx, s: Site, a: Sequence[Regs]) -> list[Code] | None:
    if s.out.is_int and not s.out.is_signed:
        return [list(x) for x in a[0]]
    return _per_reg(s.out, lambda r: op(f"{SHAPE[s.out]}.abs", a[0][r]))  # abs(MIN) = MIN


def _v_copysign(cx: Cx, s: Site, a: Sequence[Regs]) -> list[Code] | None:
    sign = v128_splat(s.out, s.out.sign_mask)
    return _per_reg(s.out, lambda r: op("v128.bitselect", a[1][r], a[0][r], sign))


# ============================================================================ bits and compares


def _plain(name: str) -> ScalarLower:
    """One instruction named after the op (and/or/xor, f32.copysign ...)."""

    def lower(cx: Cx, s: Site, a: Sequence[Code]) -> Code:
        return op(f"{pfx(s.ins[0])}.{name}", *a)

    return lower


def _v_bitwise(name: str) -> SimdLower:
    def lower(cx: Cx, s: Site, a: Sequence[Regs]) -> list[Code] | None:
        return _per_reg(s.out, lambda r: op(f"v128.{name}", *(x[r] for x in a)))

    return lower


def _not(cx: Cx, s: Site, a: Sequence[Code]) -> Code:
    if s.out is BOOL:
        return op("i32.eqz", a[0])
    return op(f"{pfx(s.out)}.xor", a[0], const(s.out, -1))


def _shr(cx: Cx, s: Site, a: Sequence[Code]) -> Code:
    return op(_ordered(s.out, "shr"), a[0], a[1])  # arithmetic for signed, logical unsigned


def _compare(name: str) -> ScalarLower:
    def lower(cx: Cx, s: Site, a: Sequence[Code]) -> Code:
        dt = s.ins[0]
        if dt.is_float or name in ("eq", "ne"):
            return op(f"{pfx(dt)}.{name}", a[0], a[1])
        return op(_ordered(dt, name), a[0], a[1])

    return lower


def _v_compare(name: str) -> SimdLower:
    def lower(cx: Cx, s: Site, a: Sequence[Regs]) -> list[Code] | None:
        dt, sh = s.ins[0], SHAPE[s.ins[0]]
        x, y = a
        if dt is BOOL:
            diff = op("v128.xor", x[0], y[0])
            return [diff if name == "ne" else op("v128.not", diff)]
        if dt.is_float or name in ("eq", "ne"):
            masks = _per_reg(dt, lambda r: op(f"{sh}.{name}", x[r], y[r]))
        elif dt.bits == 32:
            masks = [op(f"i32x4.{name}_{'s' if dt.is_signed else 'u'}", x[0], y[0])]
        else:
            masks = _per_reg(dt, lambda r: _v_lt64(dt, name, x[r], y[r]))
        return masks if len(masks) == 1 else [_narrow(masks[0], masks[1])]

    return lower


def _select(cx: Cx, s: Site, a: Sequence[Code]) -> Code:
    return select(a[1], a[2], a[0])  # bits move unchanged


def _v_select(cx: Cx, s: Site, a: Sequence[Regs]) -> list[Code] | None:
    cond, x, y = a[0][0], a[1], a[2]
    if regs(s.out) == 1:
        return [op("v128.bitselect", x[0], y[0], cond)]
    return _per_reg(s.out, lambda r: op("v128.bitselect", x[r], y[r], _widen_mask(cond, r)))


# ============================================================================ fma


def _fma(cx: Cx, s: Site, a: Sequence[Code]) -> Code:
    return [*a[0], *a[1], *a[2], ins("call", cx.helper(FMA_HELPER[s.out]))]


def _v_fma(cx: Cx, s: Site, a: Sequence[Regs]) -> list[Code] | None:
    """f32x4 fma as two f64x2 halves: exact product, TwoSum, round to odd, demote (see
    kera.backends.wasm.fma); f64 has no exact SIMD form and goes lane by lane."""
    if s.out is not F32:
        return None
    halves = [_fma_half(cx, [x[0] if h == 0 else _high(x[0]) for x in a]) for h in (0, 1)]
    joined = [*op("f32x4.demote_f64x2_zero", halves[0]), *op("f32x4.demote_f64x2_zero", halves[1]),
              ins("i8x16.shuffle", LOW_HALVES)]  # fmt: skip
    return [vcanon(F32, joined, cx)]


def _fma_half(cx: Cx, abc: Sequence[Code]) -> Code:
    """Lanes 0-1 of a*b+c (f32x4 operands) rounded to odd in f64, as f64x2."""
    p, sm, bp, e, c = (cx.local(ValType.V128) for _ in range(5))
    wide = [op("f64x2.promote_low_f32x4", x) for x in abc]
    one, zero = v128_splat(U64, 1), v128_splat(U64, 0)
    inexact = op("f64x2.gt", op("f64x2.abs", get(e)), zero)  # false for NaN
    even = op("i64x2.eq", op("v128.and", get(sm), one), zero)
    away = [*op("v128.xor", get(sm), get(e)), *i32c(F64.bits - 1), ins("i64x2.shr_s")]  # signs
    step = op("v128.and", op("v128.or", away, one), op("v128.and", inexact, even))
    return [
        *wide[2], ins("local.set", c),
        *op("f64x2.mul", wide[0], wide[1]), ins("local.set", p),  # exact
        *op("f64x2.add", get(p), get(c)), ins("local.set", sm),
        *op("f64x2.sub", get(sm), get(p)), ins("local.set", bp),
        *op("f64x2.add", op("f64x2.sub", get(p), op("f64x2.sub", get(sm), get(bp))),
            op("f64x2.sub", get(c), get(bp))), ins("local.set", e),  # TwoSum error
        *op("i64x2.add", get(sm), step),
    ]  # fmt: skip


# ============================================================================ conversions


def _convert(cx: Cx, s: Site, a: Sequence[Code]) -> Code:
    src, dst = s.ins[0], s.out
    x = a[0]
    if dst is BOOL:
        return op(f"{pfx(src)}.ne", x, const(src, 0))
    if src.is_float and dst.is_float:
        if src is dst:
            return canon(dst, x, cx)
        name = "f64.promote_f32" if dst is F64 else "f32.demote_f64"
        return canon(dst, op(name, x), cx)
    if src.is_float:  # saturating, NaN -> 0
        return op(f"{pfx(dst)}.trunc_sat_{pfx(src)}_{'s' if dst.is_signed else 'u'}", x)
    sign = "s" if src.is_signed else "u"  # bool and unsigned sources zero-extend
    if dst.is_float:
        return op(f"{pfx(dst)}.convert_{pfx(src)}_{sign}", x)  # RNE
    if VT[src] is VT[dst]:
        return list(x)  # same width: the bits are the value (wraps)
    if VT[dst] is ValType.I64:
        return op(f"i64.extend_i32_{sign}", x)
    return op("i32.wrap_i64", x)


def _v_convert(cx: Cx, s: Site, a: Sequence[Regs]) -> list[Code] | None:
    src, dst = s.ins[0], s.out
    x = a[0]
    if src is dst:
        return _per_reg(dst, lambda r: vcanon(dst, x[r], cx) if dst.is_float else list(x[r]))
    if dst is BOOL:
        zero = v128_splat(src, 0)
        masks = _per_reg(src, lambda r: op(f"{SHAPE[src]}.ne", x[r], zero))
        return masks if len(masks) == 1 else [_narrow(masks[0], masks[1])]
    if src is BOOL:
        one = v128_splat(dst, 1)
        if dst.bits == 32:
            return [op("v128.and", x[0], one)]
        return _per_reg(dst, lambda r: op("v128.and", _widen_mask(x[0], r), one))
    return _CONVERT_SIMD.get((src, dst), _v_convert_fixed)(cx, s, a)


def _v_convert_fixed(cx: Cx, s: Site, a: Sequence[Regs]) -> list[Code] | None:
    """Same-width int<->int and the instructions SIMD128 has; None where it has none."""
    src, dst = s.ins[0], s.out
    x = a[0]
    if src.is_int and dst.is_int and src.bits == dst.bits:
        return [list(r) for r in x]
    if src.is_int and dst.is_int:  # 32 <-> 64, wrapping / extending like scalar convert
        if dst.bits == 32:
            return [_narrow(x[0], x[1])]
        sign = "s" if src.is_signed else "u"
        return [op(f"i64x2.extend_{half}_i32x4_{sign}", x[0]) for half in ("low", "high")]
    return None


def _f32_from_f64(cx: Cx, s: Site, a: Sequence[Regs]) -> list[Code] | None:
    x = a[0]
    joined = [*op("f32x4.demote_f64x2_zero", x[0]), *op("f32x4.demote_f64x2_zero", x[1]),
              ins("i8x16.shuffle", LOW_HALVES)]  # fmt: skip
    return [vcanon(F32, joined, cx)]


def _f64_from_f32(cx: Cx, s: Site, a: Sequence[Regs]) -> list[Code] | None:
    x = a[0][0]
    return [vcanon(F64, op("f64x2.promote_low_f32x4", h), cx) for h in (x, _high(x))]


def _i32_from_f64(sign: str) -> SimdLower:
    def lower(cx: Cx, s: Site, a: Sequence[Regs]) -> list[Code] | None:
        name = f"i32x4.trunc_sat_f64x2_{sign}_zero"
        return [[*op(name, a[0][0]), *op(name, a[0][1]), ins("i8x16.shuffle", LOW_HALVES)]]

    return lower


def _f64_from_i32(sign: str) -> SimdLower:
    def lower(cx: Cx, s: Site, a: Sequence[Regs]) -> list[Code] | None:
        x = a[0][0]
        return [op(f"f64x2.convert_low_i32x4_{sign}", h) for h in (x, _high(x))]

    return lower


def _one(name: str) -> SimdLower:
    def lower(cx: Cx, s: Site, a: Sequence[Regs]) -> list[Code] | None:
        return [op(name, a[0][0])]

    return lower


#: the SIMD side of the ``convert`` row, by (source, destination) dtype, for the pairs SIMD128
#: has instructions for; same-dtype, bool and int<->int pairs are handled in ``_v_convert``,
#: any other pair (64-bit int <-> float) goes lane by lane
_CONVERT_SIMD: dict[tuple[DType, DType], SimdLower] = {
    (F64, F32): _f32_from_f64,
    (F32, F64): _f64_from_f32,
    (F32, I32): _one("i32x4.trunc_sat_f32x4_s"),  # saturating, NaN -> 0
    (F32, U32): _one("i32x4.trunc_sat_f32x4_u"),
    (F64, I32): _i32_from_f64("s"),
    (F64, U32): _i32_from_f64("u"),
    (I32, F32): _one("f32x4.convert_i32x4_s"),
    (U32, F32): _one("f32x4.convert_i32x4_u"),
    (I32, F64): _f64_from_i32("s"),
    (U32, F64): _f64_from_i32("u"),
}


def _bitcast(cx: Cx, s: Site, a: Sequence[Code]) -> Code:
    src, dst = s.ins[0], s.out
    if VT[src] is VT[dst]:
        return list(a[0])
    return op(f"{pfx(dst)}.reinterpret_{pfx(src)}", a[0])


def _v_bitcast(cx: Cx, s: Site, a: Sequence[Regs]) -> list[Code] | None:
    return [list(r) for r in a[0]]  # same width: the registers already hold the bits


# ============================================================================ the table

LOWER: dict[Op, Row] = {
    Op.NEG: Row(_neg, _v_neg),  # floats: sign bit only, payload kept; ints wrap
    Op.ABS: Row(_abs, _v_abs),  # floats: sign bit only; abs(MIN) = MIN
    Op.NOT: Row(_not, _v_bitwise("not")),  # bool 0/1 by eqz, a mask by v128.not
    Op.SQRT: Row(_rounding("sqrt"), _v_rounding("sqrt")),
    Op.FLOOR: Row(_rounding("floor"), _v_rounding("floor")),
    Op.CEIL: Row(_rounding("ceil"), _v_rounding("ceil")),
    Op.TRUNC: Row(_rounding("trunc"), _v_rounding("trunc")),
    Op.ROUND: Row(_rounding("nearest"), _v_rounding("nearest")),  # ties to even
    Op.ADD: Row(_arith("add"), _v_arith("add")),
    Op.SUB: Row(_arith("sub"), _v_arith("sub")),
    Op.MUL: Row(_arith("mul"), _v_arith("mul")),
    Op.DIV: Row(_div, _v_arith("div")),  # integer x/0 and MIN/-1 fixed up; no SIMD int div
    Op.REM: Row(_rem, None),  # x%0 = x selected; SIMD128 has no integer division
    Op.MIN: Row(_minmax("min"), _v_minmax("min")),  # IEEE minimum, NaN bits by canon
    Op.MAX: Row(_minmax("max"), _v_minmax("max")),
    Op.COPYSIGN: Row(_plain("copysign"), _v_copysign),  # sign bit only
    Op.AND: Row(_plain("and"), _v_bitwise("and")),
    Op.OR: Row(_plain("or"), _v_bitwise("or")),
    Op.XOR: Row(_plain("xor"), _v_bitwise("xor")),
    Op.SHL: Row(_plain("shl"), None),  # wasm takes the amount mod the width; SIMD shifts
    Op.SHR: Row(_shr, None),  # take one amount for all lanes, so both go lane by lane
    Op.EQ: Row(_compare("eq"), _v_compare("eq")),
    Op.NE: Row(_compare("ne"), _v_compare("ne")),
    Op.LT: Row(_compare("lt"), _v_compare("lt")),
    Op.LE: Row(_compare("le"), _v_compare("le")),
    Op.GT: Row(_compare("gt"), _v_compare("gt")),
    Op.GE: Row(_compare("ge"), _v_compare("ge")),
    Op.FMA: Row(_fma, _v_fma),  # exact helpers (one rounding); f32x4 via round to odd
    Op.SELECT: Row(_select, _v_select),  # bits move unchanged
    Op.CONVERT: Row(_convert, _v_convert),  # trunc_sat for float -> int; pairs: _CONVERT_SIMD
    Op.BITCAST: Row(_bitcast, _v_bitcast),
}


def lower_scalar(cx: Cx, s: Site, a: Sequence[Code]) -> Code:
    """The code of one element of s (operands are pure codes)."""
    return LOWER[s.op].scalar(cx, s, a)


def _extract(dt: DType, x: Regs, k: int) -> Code:
    """Element k of a SIMD value as a scalar of dt's representation."""
    r, lane = divmod(k, lanes(dt))
    code = [*x[r], ins(f"{SHAPE[dt]}.extract_lane", lane)]
    return op("i32.and", code, i32c(1)) if dt is BOOL else code


def lanewise(cx: Cx, s: Site, a: Sequence[Regs]) -> list[Code]:
    """The scalar lowering applied to each of the four elements."""
    out = s.out
    result = []
    for r in range(regs(out)):
        code = v128_splat(out, 0)
        for lane in range(lanes(out)):
            k = r * lanes(out) + lane
            scalar = lower_scalar(cx, s, [_extract(t, x, k) for t, x in zip(s.ins, a, strict=True)])
            if out is BOOL:
                scalar = op("i32.sub", i32c(0), scalar)  # 0/1 -> mask
            code = [*code, *scalar, ins(f"{SHAPE[out]}.replace_lane", lane)]
        result.append(code)
    return result


def lower_simd(cx: Cx, s: Site, a: Sequence[Regs]) -> list[Code]:
    """The registers of four elements of s: the row's SIMD form, else lane by lane."""
    simd = LOWER[s.op].simd
    return (simd(cx, s, a) if simd is not None else None) or lanewise(cx, s, a)
