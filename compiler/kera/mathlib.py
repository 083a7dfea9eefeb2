"""exp, log, tanh and sigmoid as fixed algorithms made only of contract ops.

These four functions are not IR ops.  Each call expands its argument into ordinary graph nodes
(``add sub mul div fma round min max abs neg copysign select lt ... convert bitcast and shl
shr``) with fixed constants, so every back end runs the same basic operations and produces the
same bits as the reference interpreter.  The algorithms, written out step by step with every
constant's bits, are ``docs/mathlib.md``; that text is part of the determinism contract, and a
change to any step or constant here is a change of the contract (the golden node counts in
``tests/unit/test_mathlib.py`` catch accidental ones).

Encoding of the constants: every float constant is given as its IEEE bit pattern (an ``int``
in the per-format table ``_FORMATS``), turned into a numpy scalar of the exact dtype with
``view``, never parsed from a decimal string.  A scalar constant is a rank-0 ``const`` node;
for a shaped argument it is ``broadcast`` to the argument's shape (one node per distinct
constant and shape, since nodes are interned).

Shared building block (``_exp_core``): for a finite t in the clamped range of each caller,
``k, h, l`` with ``e**t ~= 2**k * (h + l)``: ``k = round(t / ln 2)``, ``r = t - k ln 2`` kept
as a double-word ``r + rl``, ``e**r = 1 + r + r**2 P(r)`` with a minimax ``P``, and
``h = fl(1 + r)``, ``l`` the rest (the exact rounding error of ``1 + r`` plus the tail).

Accuracy (measured against MPFR by ``scripts/measure-mathlib``, figures in docs/mathlib.md):
at most 1 ulp for every function and dtype.  Special values: ``exp(-inf) = +0``,
``exp(+inf) = +inf``; ``log(±0) = -inf``, ``log(x < 0) = NaN``, ``log(+inf) = +inf``;
``tanh`` is odd (``tanh(-0) = -0``) and saturates to ±1; ``sigmoid(-inf) = +0``,
``sigmoid(+inf) = 1``; a NaN argument gives the canonical NaN.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from kera.dtypes import DType
from kera.ir import Node, const, make_node
from kera.ops import TypeRuleError


@dataclass(frozen=True)
class _Format:
    """The constants of one float format: float ones as bit patterns, integer ones as ints."""

    dtype: DType
    int_dtype: DType  # signed integer of the same width (arithmetic >>)
    mant: int  # stored significand bits
    bias: int
    exp_lo: int  # exp clamp: below it the result rounds to +0
    exp_hi: int  # exp clamp: above it the result overflows to +inf
    invln2: int  # RN(1/ln 2)
    ln2hi: int  # RN(ln 2) with its low bits cleared, so k * ln2hi is exact for every k used
    ln2lo: int  # RN(ln 2 - ln2hi)
    exp_poly: tuple[int, ...]  # P(r) ~= (e**r - 1 - r) / r**2, c0 first
    log_off: int  # bits of RN(sqrt(1/2)): the reduced argument z lies in [off, 2 off)
    log_poly: tuple[int, ...]  # Q(w) ~= (2 atanh(s)/s - 2) / w, w = s**2, c0 first
    min_normal: int
    tanh_tiny: int  # below it tanh(x) rounds to x
    tanh_sat: int  # above it tanh(x) rounds to 1
    sig_huge: int  # clamp of |x| for sigmoid: e**-|x| rounds to +0 beyond it
    sig_tail: int  # beyond it sigmoid(x < 0) is e**x (1 + e**x rounds to 1 by far)
    sig_kmin: int  # least exponent of the division path's e**-|x| (|x| <= sig_tail)
    two_pow_mant: int  # 2**mant: scales a subnormal to a normal number exactly
    one: int
    two: int
    half: int
    minus_two: int
    inf: int
    neg_inf: int
    nan: int  # the canonical quiet NaN


_F64 = _Format(
    dtype=DType.F64,
    int_dtype=DType.I64,
    mant=52,
    bias=1023,
    exp_lo=0xC087500000000000,  # -746.0
    exp_hi=0x4086300000000000,  # 710.0
    invln2=0x3FF71547652B82FE,
    ln2hi=0x3FE62E42FEFA3800,
    ln2lo=0x3D2EF35793C76730,
    exp_poly=(
        0x3FE0000000000000,
        0x3FC5555555555557,
        0x3FA555555555554E,
        0x3F811111111100E2,
        0x3F56C16C16C1A09B,
        0x3F2A01A01ABE5991,
        0x3EFA01A019059689,
        0x3EC71DE023653674,
        0x3E927E510E285C8F,
        0x3E5AF4DE43E58913,
        0x3E21F19FC7ED54AA,
    ),
    log_off=0x3FE6A09E667F3BCD,
    log_poly=(
        0x3FE5555555555555,
        0x3FD9999999999A39,
        0x3FD2492492476A71,
        0x3FCC71C7201986BE,
        0x3FC745CF8EB46E66,
        0x3FC3B1C3A84ED830,
        0x3FC0FBE1027B3574,
        0x3FC0C08E89F36EA1,
    ),
    min_normal=0x0010000000000000,  # 2**-1022
    tanh_tiny=0x3E40000000000000,  # 2**-27
    tanh_sat=0x4036000000000000,  # 22.0
    sig_huge=0x4087500000000000,  # 746.0
    sig_tail=0x4046800000000000,  # 45.0
    sig_kmin=-66,
    two_pow_mant=0x4330000000000000,  # 2**52
    one=0x3FF0000000000000,
    two=0x4000000000000000,
    half=0x3FE0000000000000,
    minus_two=0xC000000000000000,
    inf=0x7FF0000000000000,
    neg_inf=0xFFF0000000000000,
    nan=0x7FF8000000000000,
)

_F32 = _Format(
    dtype=DType.F32,
    int_dtype=DType.I32,
    mant=23,
    bias=127,
    exp_lo=0xC2D00000,  # -104.0
    exp_hi=0x42B20000,  # 89.0
    invln2=0x3FB8AA3B,
    ln2hi=0x3F317200,
    ln2lo=0x35BFBE8E,
    exp_poly=(0x3F000000, 0x3E2AAAAB, 0x3D2AAA75, 0x3C0888A6, 0x3AB6A181, 0x39503969),
    log_off=0x3F3504F3,
    log_poly=(0x3F2AAAAB, 0x3ECCCCF6, 0x3E922E14, 0x3E6EEA1B),
    min_normal=0x00800000,  # 2**-126
    tanh_tiny=0x39800000,  # 2**-12
    tanh_sat=0x41200000,  # 10.0
    sig_huge=0x42D00000,  # 104.0
    sig_tail=0x41C00000,  # 24.0
    sig_kmin=-36,
    two_pow_mant=0x4B000000,  # 2**23
    one=0x3F800000,
    two=0x40000000,
    half=0x3F000000,
    minus_two=0xC0000000,
    inf=0x7F800000,
    neg_inf=0xFF800000,
    nan=0x7FC00000,
)

_FORMATS = {DType.F64: _F64, DType.F32: _F32}


class _Emit:
    """Node construction for one argument: its format, its shape, and short op helpers."""

    def __init__(self, x: Node) -> None:
        if x.dtype not in _FORMATS:
            raise TypeRuleError(
                "E0203", f"exp, log, tanh and sigmoid take f32 or f64, not {x.dtype}"
            )
        self.f = _FORMATS[x.dtype]
        self.shape = x.shape

    def _shaped(self, c: Node) -> Node:
        if not self.shape:
            return c
        return make_node("broadcast", [c], {"shape": list(self.shape)})

    def fc(self, bits: int) -> Node:
        """A float constant of the argument's format, from its bit pattern."""
        dt = self.f.dtype
        value = np.array(bits, dtype=dt.uint).view(dt.np)
        return self._shaped(const(value, dt))

    def ic(self, value: int) -> Node:
        """An integer constant of the format's signed integer type (two's complement)."""
        it = self.f.int_dtype
        return self._shaped(const(np.array(value, dtype=it.np), it))

    def op(self, name: str, *xs: Node, **attrs: Any) -> Node:
        return make_node(name, xs, attrs)

    def add(self, a: Node, b: Node) -> Node:
        return self.op("add", a, b)

    def sub(self, a: Node, b: Node) -> Node:
        return self.op("sub", a, b)

    def mul(self, a: Node, b: Node) -> Node:
        return self.op("mul", a, b)

    def div(self, a: Node, b: Node) -> Node:
        return self.op("div", a, b)

    def select(self, c: Node, a: Node, b: Node) -> Node:
        return self.op("select", c, a, b)

    def horner(self, coeffs: tuple[int, ...], x: Node) -> Node:
        """c0 + x (c1 + x (c2 + ...)), each step a mul then an add (no fma)."""
        acc = self.fc(coeffs[-1])
        for c in reversed(coeffs[:-1]):
            acc = self.add(self.mul(acc, x), self.fc(c))
        return acc

    def pow2(self, k: Node) -> Node:
        """2**k for an integer k in the normal exponent range: bits (k + bias) << mant."""
        biased = self.op("add", k, self.ic(self.f.bias))
        shifted = self.op("shl", biased, self.ic(self.f.mant))
        return self.op("bitcast", shifted, to=self.f.dtype)


def _exp_core(e: _Emit, t: Node) -> tuple[Node, Node, Node]:
    """(k, h, lo): e**t ~= 2**k (h + lo), h = fl(h + lo) in [0.7, 1.42], k an integer node.

    t is finite and inside the caller's clamp (or NaN, which flows through as NaN)."""
    f = e.f
    one = e.fc(f.one)
    kf = e.op("round", e.mul(t, e.fc(f.invln2)))
    rh = e.sub(t, e.mul(kf, e.fc(f.ln2hi)))  # exact: k * ln2hi is exact, rh is small
    c = e.mul(kf, e.fc(f.ln2lo))
    r = e.sub(rh, c)
    rl = e.sub(e.sub(rh, r), c)  # the rounding error of r (exact up to a negligible term)
    tail = e.add(e.mul(e.mul(r, r), e.horner(f.exp_poly, r)), rl)
    h0 = e.add(one, r)
    l0 = e.add(e.add(e.sub(one, h0), r), tail)  # (1 - h0) + r is exact: |r| < 1
    h = e.add(h0, l0)  # renormalise: h = fl(h0 + l0), lo its exact error
    lo = e.add(e.sub(h0, h), l0)
    return e.op("convert", kf, to=f.int_dtype), h, lo


def _scale(e: _Emit, y: Node, k: Node) -> Node:
    """y * 2**k for y near 1 and k from exp's clamp: two exact-range factors, one rounding."""
    k1 = e.op("shr", k, e.ic(1))
    k2 = e.op("sub", k, k1)
    return e.mul(e.mul(y, e.pow2(k1)), e.pow2(k2))


def _scaled(e: _Emit, k: Node, h: Node, lo: Node) -> tuple[Node, Node]:
    """(h 2**k, lo 2**k), exact: the callers keep k in the normal range."""
    sc = e.pow2(k)
    return e.mul(h, sc), e.mul(lo, sc)


def _clamp(e: _Emit, x: Node, lo: int, hi: int) -> Node:
    return e.op("min", e.op("max", x, e.fc(lo)), e.fc(hi))


def exp(x: Node) -> Node:
    """e**x, elementwise, for f32 or f64 ``x`` of any shape."""
    e = _Emit(x)
    k, h, _ = _exp_core(e, _clamp(e, x, e.f.exp_lo, e.f.exp_hi))
    return _scale(e, h, k)


def log(x: Node) -> Node:
    """The natural logarithm, elementwise, for f32 or f64 ``x`` of any shape."""
    e = _Emit(x)
    kf, fm = _log_reduce(e, x)
    return _log_specials(e, x, _log_combine(e, kf, fm))


def _log_reduce(e: _Emit, x: Node) -> tuple[Node, Node]:
    """(k, f) as floats with x = 2**k (1 + f), 1 + f in [sqrt(1/2), sqrt(2)), for finite x > 0."""
    f = e.f
    sub = e.op("lt", x, e.fc(f.min_normal))
    xs = e.select(sub, e.mul(x, e.fc(f.two_pow_mant)), x)  # subnormals: exact rescale
    adj = e.select(sub, e.ic(-f.mant), e.ic(0))
    ix = e.op("bitcast", xs, to=f.int_dtype)
    tmp = e.op("sub", ix, e.ic(f.log_off))
    high = e.op("and", tmp, e.ic(-1 << f.mant))  # (tmp >> mant) << mant
    z = e.op("bitcast", e.op("sub", ix, high), to=f.dtype)
    k = e.op("add", e.op("shr", tmp, e.ic(f.mant)), adj)
    return e.op("convert", k, to=f.dtype), e.sub(z, e.fc(f.one))  # z - 1 is exact


def _log_combine(e: _Emit, kf: Node, fm: Node) -> Node:
    """k ln 2 + log1p(f), log1p(f) = f - f*f/2 + s (f*f/2 + R), s = f / (2 + f)."""
    f = e.f
    s = e.div(fm, e.add(e.fc(f.two), fm))
    w = e.mul(s, s)
    big_r = e.mul(w, e.horner(f.log_poly, w))
    hf = e.mul(fm, e.fc(f.half))  # exact
    u = e.mul(s, e.add(e.mul(hf, fm), big_r))
    lo = e.add(e.mul(kf, e.fc(f.ln2lo)), e.op("fma", e.op("neg", hf), fm, u))  # u - f*f/2
    a = e.mul(kf, e.fc(f.ln2hi))  # exact
    hi = e.add(a, fm)
    err = e.add(e.sub(a, hi), fm)  # exact: |a| >= |f| unless k = 0, where hi = f
    return e.add(hi, e.add(err, lo))


def _log_specials(e: _Emit, x: Node, y: Node) -> Node:
    """+inf -> +inf, ±0 -> -inf, x < 0 or NaN -> canonical NaN."""
    y = e.select(e.op("eq", x, e.fc(e.f.inf)), e.fc(e.f.inf), y)
    y = e.select(e.op("eq", x, e.fc(0)), e.fc(e.f.neg_inf), y)
    return e.select(e.op("ge", x, e.fc(0)), y, e.fc(e.f.nan))


def _dw_quotient(e: _Emit, nh: Node, nl: Node | None, dh: Node, dl: Node) -> Node:
    """(nh + nl) / (dh + dl): q = nh / dh, its exact remainder by fma, one correction."""
    q = e.div(nh, dh)
    rem = e.op("fma", e.op("neg", q), dh, nh)  # exact: nh - q dh
    num = rem if nl is None else e.add(rem, nl)
    return e.add(q, e.div(e.sub(num, e.mul(q, dl)), dh))


def _one_plus(e: _Emit, eh: Node, el: Node) -> tuple[Node, Node]:
    """1 + (eh + el) as a double-word (dh, dl), for 0 <= eh <= 1."""
    one = e.fc(e.f.one)
    dh = e.add(one, eh)
    return dh, e.add(e.add(e.sub(one, dh), eh), el)  # (1 - dh) + eh is exact


def _one_minus(e: _Emit, eh: Node, el: Node) -> tuple[Node, Node]:
    """1 - (eh + el) as a renormalised double-word (nh, nl), for 0 <= eh <= 1."""
    one = e.fc(e.f.one)
    n0 = e.sub(one, eh)
    n1 = e.sub(e.sub(e.sub(one, n0), eh), el)  # (1 - n0) - eh is exact
    nh = e.add(n0, n1)
    return nh, e.add(e.sub(n0, nh), n1)


def tanh(x: Node) -> Node:
    """The hyperbolic tangent, elementwise, for f32 or f64 ``x`` of any shape."""
    e = _Emit(x)
    f = e.f
    a = e.op("abs", x)
    ac = _clamp(e, a, f.tanh_tiny, f.tanh_sat)
    eh, el = _scaled(e, *_exp_core(e, e.mul(ac, e.fc(f.minus_two))))  # E = e**(-2|x|)
    nh, nl = _one_minus(e, eh, el)
    dh, dl = _one_plus(e, eh, el)
    y = _dw_quotient(e, nh, nl, dh, dl)  # (1 - E) / (1 + E)
    y = e.select(e.op("lt", a, e.fc(f.tanh_tiny)), a, y)
    return e.mul(y, e.op("copysign", e.fc(f.one), x))  # the sign of x; NaN comes out canonical


def sigmoid(x: Node) -> Node:
    """1 / (1 + e**-x), elementwise, for f32 or f64 ``x`` of any shape."""
    e = _Emit(x)
    f = e.f
    a = e.op("abs", x)
    k, h, lo = _exp_core(e, e.op("neg", e.op("min", a, e.fc(f.sig_huge))))  # E = e**-|x|
    tail = _scale(e, h, k)
    eh, el = _scaled(e, e.op("max", k, e.ic(f.sig_kmin)), h, lo)
    dh, dl = _one_plus(e, eh, el)
    pos = _dw_quotient(e, e.fc(f.one), None, dh, dl)  # 1 / (1 + E)
    neg = _dw_quotient(e, eh, el, dh, dl)  # E / (1 + E)
    neg = e.select(e.op("gt", a, e.fc(f.sig_tail)), tail, neg)
    return e.select(e.op("lt", x, e.fc(0)), neg, pos)


#: the four functions by name, for tables and tests
FUNCTIONS = {"exp": exp, "log": log, "tanh": tanh, "sigmoid": sigmoid}
