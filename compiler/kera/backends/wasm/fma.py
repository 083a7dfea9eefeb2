"""Exact fused multiply-add for WebAssembly, which has none in its core instruction set.

Both helpers return ``round_nearest_even(a*b + c)`` with one rounding, subnormals kept, the
IEEE special cases (inf*0, inf-inf -> NaN; overflow -> inf) and every NaN result replaced by
the canonical quiet NaN (``DType.canonical_nan``), as the Kera contract requires.

f32 (:func:`fma_f32`): the product of two f32 is exact in f64 (24+24 <= 53 significant bits,
exponents far inside f64 range).  The sum ``s = p + c`` is rounded to f64 and its exact error
``e`` is recovered with Knuth's TwoSum; if ``e != 0`` and ``s`` has an even last bit, ``s`` is
moved one ulp towards ``e``.  That makes ``s`` the sum *rounded to odd* in 53 bits, and rounding
a round-to-odd value of precision >= p+2 to p bits gives the correctly rounded result (Boldo &
Melquiond, "Emulation of FMA and correctly-rounded sums: proved algorithms using rounding to
odd", IEEE TC 2008).  ``f32.demote_f64`` does that final rounding, subnormal range included.
Plain ``f32(f64(a)*f64(b)+f64(c))`` double-rounds: a=1+2^-23, b=(1-2^-23)*2^-24, c=1+2^-23
gives 0x3f800002 instead of 0x3f800001.

f64 (:func:`fma_f64`): integer emulation on i64.  Significands (53 bits) multiply into a
128-bit product (four 32x32 partial products); the product and c are each placed with their top
bit at bit 125 of a 128-bit word, the smaller is shifted right with a sticky bit, they are added
or subtracted, the result is normalised to bit 126 and rounded to nearest-even at the ulp that
the exponent (normal or subnormal) implies, with overflow to infinity.  Non-finite operands and
zero factors go through ordinary f64 arithmetic, which is exact for them.
"""

from __future__ import annotations

from kera.backends.wasm.encode import (
    Code,
    Func,
    FuncType,
    Locals,
    ValType,
    f64c,
    get,
    i64c,
    if_,
    ins,
    op,
    put,
    select,
)
from kera.backends.wasm.lower import canon
from kera.dtypes import DType

# The binary64 format, from its one home (kera.dtypes), and the positions it implies here.
_D = DType.F64
F64_INF = _D.exp_mask
_MW = _D.mant_bits  # 52 stored fraction bits
_FRAC = (1 << _MW) - 1
_HIDDEN = 1 << _MW
_EXP_MAX = (1 << _D.exp_bits) - 1  # the all-ones exponent field (inf, NaN)
_E0 = (_EXP_MAX >> 1) + _MW  # 1075: an unpacked value is m * 2^(e - _E0), e >= 1
_ULP_MIN = 1 - _E0  # -1074: the ulp of the subnormals
_SIGN = _D.bits - 1  # the sign bit's position
_ULP_NORMAL = 62 - _MW  # ulp of a normal result in h, whose top bit is at 62 (126 of 128)
_LO32 = 0xFFFFFFFF
_NO_EXP = -(1 << 40)  # exponent given to a zero addend so it always aligns below the product

I32, I64, F32, F64 = ValType.I32, ValType.I64, ValType.F32, ValType.F64


# ----------------------------------------------------------------------------- f32


def fma_f32(name: str = "kera_fma_f32") -> Func:
    """``(a f32, b f32, c f32) -> f32``: exact fma via f64 and round-to-odd."""
    a, b, c = 0, 1, 2
    loc = Locals([F32, F32, F32])
    p, s, bp, e, sb = (loc.new(t) for t in (F64, F64, F64, F64, I64))
    promote = {x: op("f64.promote_f32", get(x)) for x in (a, b, c)}
    body = [
        *put(p, op("f64.mul", promote[a], promote[b])),  # exact
        *put(s, op("f64.add", get(p), promote[c])),
        # TwoSum: e = (p - (s - bp)) + (c - bp) is the exact error of s (NaN when s is inf).
        *put(bp, op("f64.sub", get(s), get(p))),
        *put(
            e,
            op(
                "f64.add",
                op("f64.sub", get(p), op("f64.sub", get(s), get(bp))),
                op("f64.sub", promote[c], get(bp)),
            ),
        ),
        *put(sb, op("i64.reinterpret_f64", get(s))),
        *put(sb, op("i64.add", get(sb), select(_odd_step(sb, e), i64c(0), _needs_odd(sb, e)))),
        *canon(DType.F32, op("f32.demote_f64", op("f64.reinterpret_i64", get(sb)))),
    ]
    return Func(FuncType((F32, F32, F32), (F32,)), tuple(loc.types), tuple(body), name)


def _needs_odd(sb: int, e: int) -> Code:
    """Inexact (0 < |e|, false for NaN) and the last bit of s is even."""
    inexact = op("f64.gt", op("f64.abs", get(e)), f64c(0))
    even = op("i64.eqz", op("i64.and", get(sb), i64c(1)))
    return op("i32.and", inexact, even)


def _odd_step(sb: int, e: int) -> Code:
    """+1 in the bit pattern when e has s's sign (away from zero), else -1."""
    differ = op("i64.shr_s", op("i64.xor", get(sb), op("i64.reinterpret_f64", get(e))), i64c(_SIGN))
    return op("i64.or", differ, i64c(1))


# ----------------------------------------------------------------------------- f64


class _F64Fma:
    """Builds the body of the f64 fma; one method per step, locals named as attributes."""

    A, B, C = 0, 1, 2

    def __init__(self) -> None:
        self.loc = Locals([F64, F64, F64])
        new = self.loc.new
        self.ma, self.mb, self.mc, self.ea, self.eb, self.ec = (new(I64) for _ in range(6))
        self.ph, self.pl, self.ep, self.ch, self.cl = (new(I64) for _ in range(5))
        self.xh, self.xl, self.ex, self.yh, self.yl, self.ey = (new(I64) for _ in range(6))
        self.sx, self.sy, self.d, self.k, self.t = (new(I64) for _ in range(5))
        self.h, self.u, self.q, self.rem, self.half, self.bits = (new(I64) for _ in range(6))
        self.swap = new(I32)

    def func(self, name: str) -> Func:
        body = [
            *if_(self._special(), [*self._special_result(), ins("return")]),
            *self._unpack(self.A, self.ma, self.ea),
            *self._unpack(self.B, self.mb, self.eb),
            *self._unpack(self.C, self.mc, self.ec),
            *self._product(),
            *self._addend(),
            *self._order(),
            *self._align(),
            *self._add(),
            *if_(
                op("i64.eqz", op("i64.or", get(self.xh), get(self.xl))), [*f64c(0), ins("return")]
            ),
            *self._normalise(),
            *self._round(),
        ]
        sig = FuncType((F64, F64, F64), (F64,))
        return Func(sig, tuple(self.loc.types), tuple(body), name)

    # -- special operands: any non-finite, or a zero factor

    @staticmethod
    def _finite(x: int) -> Code:
        return op("f64.lt", op("f64.abs", get(x)), f64c(F64_INF))

    def _special(self) -> Code:
        a, b, c = self.A, self.B, self.C
        ordinary = op(
            "i32.and",
            op("i32.and", self._finite(a), self._finite(b)),
            op(
                "i32.and",
                self._finite(c),
                op("i32.and", op("f64.ne", get(a), f64c(0)), op("f64.ne", get(b), f64c(0))),
            ),
        )
        return op("i32.eqz", ordinary)

    def _special_result(self) -> Code:
        """c when only c is non-finite (a*b may overflow), else a*b+c, which is exact here."""
        a, b, c = self.A, self.B, self.C
        product_sum = op("f64.add", op("f64.mul", get(a), get(b)), get(c))
        finite_ab = op("i32.and", self._finite(a), self._finite(b))
        only_c = op("i32.and", finite_ab, op("i32.eqz", self._finite(c)))
        return canon(_D, select(get(c), product_sum, only_c))

    # -- unpacking: value = m * 2^(e - 1075), e >= 1

    def _unpack(self, x: int, m: int, e: int) -> Code:
        bits = op("i64.reinterpret_f64", get(x))
        field = op("i64.and", op("i64.shr_u", bits, i64c(_MW)), i64c(_EXP_MAX))
        frac = op("i64.and", bits, i64c(_FRAC))
        is_sub = op("i64.eqz", get(e))
        return [
            *put(e, field),
            *put(m, select(frac, op("i64.or", frac, i64c(_HIDDEN)), is_sub)),
            *put(e, select(i64c(1), get(e), is_sub)),
        ]

    # -- the exact 106-bit product, normalised to top bit 125: value = (ph:pl) * 2^ep

    def _product(self) -> Code:
        ma, mb = self.ma, self.mb
        lo = {x: op("i64.and", get(x), i64c(_LO32)) for x in (ma, mb)}
        hi = {x: op("i64.shr_u", get(x), i64c(32)) for x in (ma, mb)}
        mid = op("i64.add", op("i64.mul", lo[ma], hi[mb]), op("i64.mul", hi[ma], lo[mb]))
        return [
            *put(self.t, op("i64.mul", lo[ma], lo[mb])),
            *put(self.d, mid),
            *put(self.pl, op("i64.add", get(self.t), op("i64.shl", get(self.d), i64c(32)))),
            *put(
                self.ph,
                op(
                    "i64.add",
                    op(
                        "i64.add",
                        op("i64.mul", hi[ma], hi[mb]),
                        op("i64.shr_u", get(self.d), i64c(32)),
                    ),
                    op("i64.extend_i32_u", op("i64.lt_u", get(self.pl), get(self.t))),
                ),
            ),
            *put(self.ep, op("i64.sub", op("i64.add", get(self.ea), get(self.eb)), i64c(2 * _E0))),
            *put(self.k, op("i64.sub", _clz128(self.ph, self.pl), i64c(2))),
            *_shl128(self.ph, self.pl, self.k),
            *put(self.ep, op("i64.sub", get(self.ep), get(self.k))),
        ]

    # -- c placed with its top bit at 125: value = (ch:0) * 2^ec; a zero c aligns below all

    def _addend(self) -> Code:
        shift = op("i64.sub", op("i64.clz", get(self.mc)), i64c(2))
        exp = op("i64.sub", op("i64.sub", get(self.ec), i64c(_E0 + 64)), shift)
        return [
            *put(self.ch, op("i64.shl", get(self.mc), shift)),
            *put(self.cl, i64c(0)),
            *put(self.ec, select(i64c(_NO_EXP), exp, op("i64.eqz", get(self.mc)))),
        ]

    # -- x is the operand with the larger exponent; signs as 0/1

    def _order(self) -> Code:
        sign = {
            x: op("i64.shr_u", op("i64.reinterpret_f64", get(x)), i64c(_SIGN))
            for x in (self.A, self.B, self.C)
        }
        sp = op("i64.xor", sign[self.A], sign[self.B])
        sw = get(self.swap)
        pick = [
            (self.xh, self.ch, self.ph),
            (self.xl, self.cl, self.pl),
            (self.ex, self.ec, self.ep),
            (self.yh, self.ph, self.ch),
            (self.yl, self.pl, self.cl),
            (self.ey, self.ep, self.ec),
        ]
        code = put(self.swap, op("i64.gt_s", get(self.ec), get(self.ep)))
        for dst, when_swapped, otherwise in pick:
            code += put(dst, select(get(when_swapped), get(otherwise), sw))
        code += put(self.sx, select(sign[self.C], sp, sw))
        code += put(self.sy, select(sp, sign[self.C], sw))
        return code

    # -- y >>= (ex - ey) with every shifted-out bit ORed into bit 0

    def _align(self) -> Code:
        yh, yl, d = self.yh, self.yl, self.d
        lost_hi = op("i64.shl", op("i64.shl", get(yh), i64c(1)), op("i64.sub", i64c(127), get(d)))
        far = [
            *put(yl, op("i64.extend_i32_u", op("i64.ne", op("i64.or", get(yh), get(yl)), i64c(0)))),
            *put(yh, i64c(0)),
        ]
        mid = [
            *put(
                yl,
                op(
                    "i64.or",
                    op("i64.shr_u", get(yh), op("i64.sub", get(d), i64c(64))),
                    _nonzero(op("i64.or", lost_hi, get(yl))),
                ),
            ),
            *put(yh, i64c(0)),
        ]
        left = op("i64.sub", i64c(64), get(d))
        near = [
            *put(
                yl,
                op(
                    "i64.or",
                    op("i64.or", op("i64.shl", get(yh), left), op("i64.shr_u", get(yl), get(d))),
                    _nonzero(op("i64.shl", get(yl), left)),
                ),
            ),
            *put(yh, op("i64.shr_u", get(yh), get(d))),
        ]
        return [
            *put(d, op("i64.sub", get(self.ex), get(self.ey))),
            *if_(
                op("i64.ge_u", get(d), i64c(128)),
                far,
                if_(
                    op("i64.ge_u", get(d), i64c(64)),
                    mid,
                    if_(op("i64.ne", get(d), i64c(0)), near),
                ),
            ),
        ]

    # -- x = |x +- y| in 128 bits, sx its sign

    def _add(self) -> Code:
        xh, xl, yh, yl, t = self.xh, self.xl, self.yh, self.yl, self.t
        same = [
            *put(t, get(xl)),
            *put(xl, op("i64.add", get(xl), get(yl))),
            *put(
                xh,
                op(
                    "i64.add",
                    op("i64.add", get(xh), get(yh)),
                    op("i64.extend_i32_u", op("i64.lt_u", get(xl), get(t))),
                ),
            ),
        ]
        borrow = op("i64.extend_i32_u", op("i64.lt_u", get(xl), get(yl)))
        differ = [
            *put(xh, op("i64.sub", op("i64.sub", get(xh), get(yh)), borrow)),
            *put(xl, op("i64.sub", get(xl), get(yl))),
            *if_(
                op("i64.lt_s", get(xh), i64c(0)),
                [
                    *put(
                        xh,
                        op(
                            "i64.add",
                            op("i64.xor", get(xh), i64c(-1)),
                            op("i64.extend_i32_u", op("i64.eqz", get(xl))),
                        ),
                    ),
                    *put(xl, op("i64.sub", i64c(0), get(xl))),
                    *put(self.sx, get(self.sy)),
                ],
            ),
        ]
        return if_(op("i64.eq", get(self.sx), get(self.sy)), same, differ)

    # -- top bit to 126, low word folded into a sticky bit: value = h * 2^(ex + 64)

    def _normalise(self) -> Code:
        xh, xl = self.xh, self.xl
        return [
            *put(self.k, op("i64.sub", _clz128(xh, xl), i64c(1))),
            *_shl128(xh, xl, self.k),
            *put(self.ex, op("i64.sub", get(self.ex), get(self.k))),
            *put(self.h, op("i64.or", get(xh), _nonzero(get(xl)))),
        ]

    # -- round h to nearest-even at bit u = ulp - 64, pack, overflow to inf

    def _round(self) -> Code:
        h, u, q, rem, half, bits = self.h, self.u, self.q, self.rem, self.half, self.bits
        ulp = op("i64.sub", i64c(_ULP_MIN - 64), get(self.ex))  # subnormal ulp position - 64
        up = op(
            "i32.or",
            op("i64.gt_u", get(rem), get(half)),
            op(
                "i32.and",
                op("i64.eq", get(rem), get(half)),
                op("i32.wrap_i64", op("i64.and", get(q), i64c(1))),
            ),
        )
        z = op("i64.add", op("i64.add", get(u), get(self.ex)), i64c(64 - _ULP_MIN))
        sign = op("i64.shl", get(self.sx), i64c(_SIGN))
        return [
            *put(u, select(i64c(_ULP_NORMAL), ulp, op("i64.lt_s", ulp, i64c(_ULP_NORMAL)))),
            *if_(
                op("i64.gt_s", get(u), i64c(63)),
                [*op("f64.reinterpret_i64", sign), ins("return")],
            ),
            *put(q, op("i64.shr_u", get(h), get(u))),
            *put(
                rem, op("i64.and", get(h), op("i64.sub", op("i64.shl", i64c(1), get(u)), i64c(1)))
            ),
            *put(half, op("i64.shl", i64c(1), op("i64.sub", get(u), i64c(1)))),
            *put(q, op("i64.add", get(q), op("i64.extend_i32_u", up))),
            *put(self.t, z),
            *put(bits, op("i64.add", op("i64.shl", get(self.t), i64c(_MW)), get(q))),
            *put(
                bits,
                select(
                    i64c(F64_INF),
                    get(bits),
                    op(
                        "i32.or",
                        op("i64.gt_s", get(self.t), i64c(_EXP_MAX - 1)),
                        op("i64.ge_u", get(bits), i64c(F64_INF)),
                    ),
                ),
            ),
            *op("f64.reinterpret_i64", op("i64.or", get(bits), sign)),
        ]


def _nonzero(x: Code) -> Code:
    """1 if x != 0 else 0, as i64."""
    return op("i64.extend_i32_u", op("i64.ne", x, i64c(0)))


def _clz128(h: int, lo: int) -> Code:
    return select(
        op("i64.clz", get(h)),
        op("i64.add", i64c(64), op("i64.clz", get(lo))),
        op("i64.ne", get(h), i64c(0)),
    )


def _shl128(h: int, lo: int, k: int) -> Code:
    """(h:lo) <<= k for 0 <= k < 128 (wasm masks shift counts, hence the split)."""
    small = op(
        "i64.or",
        op("i64.shl", get(h), get(k)),
        op("i64.shr_u", op("i64.shr_u", get(lo), i64c(1)), op("i64.sub", i64c(63), get(k))),
    )
    big = op("i64.ge_u", get(k), i64c(64))
    return [
        *put(h, select(op("i64.shl", get(lo), op("i64.sub", get(k), i64c(64))), small, big)),
        *put(lo, select(i64c(0), op("i64.shl", get(lo), get(k)), big)),
    ]


def fma_f64(name: str = "kera_fma_f64") -> Func:
    """``(a f64, b f64, c f64) -> f64``: exact fma by 128-bit integer emulation."""
    return _F64Fma().func(name)


__all__ = ["fma_f32", "fma_f64"]
