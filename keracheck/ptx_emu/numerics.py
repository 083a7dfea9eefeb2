"""Bit-exact IEEE arithmetic for the PTX emulator, on register bit arrays.

Every value is an array of unsigned integers (``uint32`` for ``.f32``, ``uint64`` for ``.f64``)
with one lane per thread; functions take and return such bit arrays so NaN payloads and the
sign of zero are never lost in a float round trip.

Exactness:

* ``add/sub/mul/div/sqrt .rn`` use numpy's float32/float64 ufuncs, which are the host's
  correctly rounded IEEE operations (SSE on x86-64, round-to-nearest-even, subnormals kept —
  :func:`check_host_fp` verifies that no flush-to-zero mode is set).
* ``fma.rn.f32`` is exact: it is the contract's ``kera.semantics.fma32`` (the product of two
  f32 is exact in f64, the sum is rounded to odd at 53 bits and then to nearest-even at 24
  bits; round-to-odd with >= 2 extra bits makes the double rounding innocuous).
* ``fma.rn.f64`` uses Berkeley SoftFloat (``softfloatpy``) lane by lane — never float64 maths.

NaN results follow the PTX ISA where it speaks and a :class:`NanPolicy` where it does not
(PTX ISA 9.7.3, "Floating-Point Instructions", introduction: "NaN payloads are supported for
double-precision instructions ... Single-precision instructions return an unspecified NaN").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import softfloatpy as sf

from kera.dtypes import DType
from kera.semantics import fma32
from keracheck.ptx_emu.errors import PtxExecutionError

Bits = npt.NDArray[Any]
Bools = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class Fmt:
    """An IEEE binary format as register bits."""

    name: str
    bits: int
    ftype: type[np.floating[Any]]
    utype: type[np.unsignedinteger[Any]]
    sign: int
    exp_mask: int
    quiet: int
    frac_bits: int


def _fmt(dt: DType, ftype: type[np.floating[Any]], utype: type[np.unsignedinteger[Any]]) -> Fmt:
    return Fmt(
        dt.value, dt.bits, ftype, utype, dt.sign_mask, dt.exp_mask, 1 << (dt.mant_bits - 1),
        dt.mant_bits,
    )  # fmt: skip


F32 = _fmt(DType.F32, np.float32, np.uint32)
F64 = _fmt(DType.F64, np.float64, np.uint64)
FMTS = {"f32": F32, "f64": F64}

# NVIDIA's single-precision canonical NaN (CUDA math_constants.h CUDART_NAN_F; "GPUs use a
# single canonical QNaN for single precision", NVIDIA forums).  The ISA only says "unspecified".
NV_F32_NAN = 0x7FFFFFFF
# CUDA math_constants.h CUDART_NAN; what sm_90 generates for an invalid f64 op is unverified.
NV_F64_NAN = 0xFFF8000000000000


class NanPolicy:
    """What the emulator writes where the PTX ISA leaves the result open.

    ``hardware`` (default) models NVIDIA's documented/observed choices: f32 NaN results are
    0x7FFFFFFF, an invalid f64 operation gives 0xFFF8000000000000, an f64 NaN operand
    propagates (the first one, quieted), ``neg.f64`` of NaN flips only the sign.
    ``adversarial`` replaces every such value by pseudo-random NaN bits (seeded), and picks a
    random NaN operand to propagate: code that passes under both policies does not depend on
    anything the ISA leaves unspecified.  The float->int NaN rule of ``cvt`` is literal ISA text
    but unverified on hardware, so ``adversarial`` randomises it too.
    """

    def __init__(self, mode: Literal["hardware", "adversarial"] = "hardware", seed: int = 0):
        if mode not in ("hardware", "adversarial"):
            raise ValueError(f"unknown NaN policy {mode!r}: use 'hardware' or 'adversarial'")
        self.mode = mode
        self.rng = np.random.default_rng(seed)

    @property
    def adversarial(self) -> bool:
        return self.mode == "adversarial"

    def random_nans(self, fmt: Fmt, n: int) -> Bits:
        """``n`` NaNs with random sign, quiet bit and payload."""
        frac = self.rng.integers(1, 1 << fmt.frac_bits, size=n, dtype=np.uint64)
        sign = self.rng.integers(0, 2, size=n, dtype=np.uint64) << np.uint64(fmt.bits - 1)
        return (sign | np.uint64(fmt.exp_mask) | frac).astype(fmt.utype)

    def f32_nan(self, n: int) -> Bits:
        """The "unspecified NaN" of a single-precision instruction."""
        if self.adversarial:
            return self.random_nans(F32, n)
        return np.full(n, NV_F32_NAN, dtype=np.uint32)

    def f64_generated(self, n: int) -> Bits:
        """The NaN of an invalid f64 operation whose operands are not NaN."""
        if self.adversarial:
            return self.random_nans(F64, n)
        return np.full(n, NV_F64_NAN, dtype=np.uint64)

    def unspecified_int(self, value: Bits) -> Bits:
        """An integer result whose modelling is unverified (randomised when adversarial)."""
        if not self.adversarial:
            return value
        info = np.iinfo(value.dtype)
        return self.rng.integers(0, int(info.max), size=value.shape, dtype=value.dtype)


def check_host_fp() -> None:
    """Refuse to run when the host flushes subnormals (FTZ/DAZ set by some library)."""
    tiny = np.array([1], dtype=np.uint32).view(np.float32)
    with np.errstate(all="ignore"):
        out = (tiny * np.float32(1.0)).view(np.uint32)
    if int(out[0]) != 1:
        raise PtxExecutionError("host flushes subnormals (FTZ/DAZ set): results would be wrong")


def isnan(fmt: Fmt, x: Bits) -> Bools:
    """Lanes holding a NaN (exponent all ones, fraction non-zero)."""
    return _magnitude(fmt, x) > fmt.utype(fmt.exp_mask)


def quiet(fmt: Fmt, x: Bits) -> Bits:
    out: Bits = x | fmt.utype(fmt.quiet)
    return out


def fix_nans(fmt: Fmt, result: Bits, inputs: Sequence[Bits], policy: NanPolicy) -> Bits:
    """Replace the NaN lanes of a host result by what PTX produces.

    f32: the unspecified single-precision NaN.  f64: a NaN operand's payload, quieted (the first
    operand in order; a random one under the adversarial policy), else the generated f64 NaN.
    """
    nan = isnan(fmt, result)
    if not nan.any():
        return result
    out = result.copy()
    if fmt is F32:
        out[nan] = policy.f32_nan(int(nan.sum()))
        return out
    pick = policy.f64_generated(int(nan.sum()))
    order = list(reversed(range(len(inputs))))
    if policy.adversarial:
        order = [int(k) for k in policy.rng.permutation(len(inputs))]
    for k in order:
        src = np.broadcast_to(inputs[k], result.shape)[nan]
        pick = np.where(isnan(fmt, src), quiet(fmt, src), pick)
    out[nan] = pick
    return out


# -- arithmetic ------------------------------------------------------------------------------

FloatOp = Callable[..., Any]


def arith(fmt: Fmt, op: FloatOp, inputs: Sequence[Bits], policy: NanPolicy) -> Bits:
    """Apply a correctly rounded numpy ufunc (add, subtract, multiply, divide, sqrt) on bits."""
    vals = [np.asarray(x, dtype=fmt.utype).view(fmt.ftype) for x in inputs]
    with np.errstate(all="ignore"):
        res = np.asarray(op(*vals), dtype=fmt.ftype).view(fmt.utype)
    return fix_nans(fmt, res, inputs, policy)


def fma32_exact(a: Bits, b: Bits, c: Bits) -> Bits:
    """Correctly rounded f32 fused multiply-add (NaN lanes are fixed by the caller): the
    contract's own ``kera.semantics.fma32`` (exact f64 product, round-to-odd f64 sum, one
    rounding to f32)."""
    out = fma32(a.view(np.float32), b.view(np.float32), c.view(np.float32))
    return np.asarray(out, dtype=np.float32).view(np.uint32)


def fma64_softfloat(a: Bits, b: Bits, c: Bits) -> Bits:
    """Correctly rounded f64 fused multiply-add via Berkeley SoftFloat, lane by lane."""
    sf.set_rounding_mode(sf.RoundingMode.NEAR_EVEN)
    out = np.empty(a.shape, dtype=np.uint64)
    for i, lane in enumerate(zip(a.tolist(), b.tolist(), c.tolist(), strict=True)):
        x, y, z = (sf.Float64.from_bytes(v.to_bytes(8, "big")) for v in lane)
        out[i] = int.from_bytes(sf.f64_mul_add(x, y, z).to_bytes(), "big")
    return out


def fma(fmt: Fmt, a: Bits, b: Bits, c: Bits, policy: NanPolicy) -> Bits:
    """``fma.rn``: a*b+c with a single rounding."""
    res = fma32_exact(a, b, c) if fmt is F32 else fma64_softfloat(a, b, c)
    return fix_nans(fmt, res, (a, b, c), policy)


ROUND_INT: dict[str, Callable[[Any], Any]] = {
    "rni": np.rint,  # nearest, ties to even (numpy's default rounding mode)
    "rzi": np.trunc,
    "rmi": np.floor,
    "rpi": np.ceil,
}


def round_integral(fmt: Fmt, rnd: str, x: Bits, policy: NanPolicy) -> Bits:
    """``cvt.rXi.fT.fT``: round to an integral value in the same format."""
    with np.errstate(all="ignore"):
        res = np.asarray(ROUND_INT[rnd](x.view(fmt.ftype)), dtype=fmt.ftype).view(fmt.utype)
    return fix_nans(fmt, res, (x,), policy)


def minmax(fmt: Fmt, a: Bits, b: Bits, is_max: bool, nan_mode: bool, policy: NanPolicy) -> Bits:
    """``min/max{.NaN}`` (PTX ISA 9.7.3.11/12): -0.0 < +0.0; NaN rules from the ISA pseudocode.

    Without ``.NaN`` a single NaN operand is ignored (min_num); with it any NaN operand gives
    the "canonical NaN".  Both-NaN and ``.NaN`` results go through :func:`fix_nans`.
    """
    fa, fb = a.view(fmt.ftype), b.view(fmt.ftype)
    with np.errstate(all="ignore"):
        first, second = (fa > fb, fb > fa) if is_max else (fa < fb, fb < fa)
    tie = (a & b) if is_max else (a | b)  # equal values: identical bits except +-0
    res = np.where(first, a, np.where(second, b, tie))
    na, nb = isnan(fmt, a), isnan(fmt, b)
    if not nan_mode:
        res = np.where(na & ~nb, b, np.where(nb & ~na, a, res))
        res = np.where(na & nb, a, res)
    else:
        res = np.where(na | nb, np.where(na, a, b), res)
    return fix_nans(fmt, res.astype(fmt.utype), (a, b), policy)


def absneg(fmt: Fmt, x: Bits, negate: bool, policy: NanPolicy) -> Bits:
    """``abs``/``neg`` (PTX ISA 9.7.3.9/10).

    Non-NaN: a sign-bit operation.  NaN: f32 gives an unspecified NaN; ``abs.f64`` passes the
    NaN through unchanged (documented); ``neg.f64`` of NaN is unspecified (modelled as a sign
    flip, the IEEE behaviour the ISA says future implementations may adopt).
    """
    res = (x ^ fmt.utype(fmt.sign)) if negate else _magnitude(fmt, x)
    nan = isnan(fmt, x)
    if not nan.any():
        return res
    out = res.copy()
    if fmt is F32:
        out[nan] = policy.f32_nan(int(nan.sum()))
    elif not negate:
        out[nan] = x[nan]
    elif policy.adversarial:
        out[nan] = policy.random_nans(F64, int(nan.sum()))
    return out


def _exp_field(f: Fmt, x: Bits) -> Bits:
    out: Bits = x & f.utype(f.exp_mask)
    return out


def _frac_field(f: Fmt, x: Bits) -> Bits:
    out: Bits = x & f.utype((1 << f.frac_bits) - 1)
    return out


def _magnitude(f: Fmt, x: Bits) -> Bits:
    out: Bits = x & f.utype(~f.sign & ((1 << f.bits) - 1))
    return out


def _normal(f: Fmt, x: Bits) -> Bools:
    # "As a special case, positive and negative zero are considered normal numbers"
    # (PTX ISA 9.7.3.1 testp).
    exp = _exp_field(f, x)
    out: Bools = ((exp != 0) & (exp != f.utype(f.exp_mask))) | (_magnitude(f, x) == 0)
    return out


TESTP: dict[str, Callable[[Fmt, Bits], Bools]] = {
    "finite": lambda f, x: _exp_field(f, x) != f.utype(f.exp_mask),
    "infinite": lambda f, x: _magnitude(f, x) == f.utype(f.exp_mask),
    "number": lambda f, x: ~isnan(f, x),
    "notanumber": isnan,
    "normal": _normal,
    "subnormal": lambda f, x: (_exp_field(f, x) == 0) & (_frac_field(f, x) != 0),
}


# -- conversions -----------------------------------------------------------------------------


def float_to_float(src: Fmt, dst: Fmt, x: Bits, policy: NanPolicy) -> Bits:
    """``cvt.f64.f32`` (exact) and ``cvt.rn.f32.f64`` (round to nearest even)."""
    with np.errstate(all="ignore"):
        res = x.view(src.ftype).astype(dst.ftype).view(dst.utype)
    nan = isnan(src, x)
    if not nan.any():
        return res
    out = res.copy()
    if dst is F32:
        out[nan] = policy.f32_nan(int(nan.sum()))
        return out
    # f32 NaN widened: sign, payload shifted up, quieted (cvt does not document it).
    wide = x[nan].astype(np.uint64)
    sign = (wide >> np.uint64(31)) << np.uint64(63)
    frac = (wide & np.uint64(0x7FFFFF)) << np.uint64(29)
    out[nan] = sign | np.uint64(F64.exp_mask | F64.quiet) | frac
    if policy.adversarial:
        out[nan] = policy.random_nans(F64, int(nan.sum()))
    return out


def int_range(bits: int, signed: bool) -> tuple[int, int]:
    if signed:
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


def float_to_int(src: Fmt, rnd: str, x: Bits, bits: int, signed: bool, policy: NanPolicy) -> Bits:
    """``cvt.rXi.{s,u}N.fT``: round, then clamp to the destination range (PTX ISA cvt:
    "For float-to-integer conversions, the result is clamped to the destination range by
    default").  NaN: "Zero if source is not .f64 and destination is not .s64, .u64; otherwise
    1 << (BitWidth(dst) - 1)".  Returns the result as ``uint64`` holding ``bits`` bits.
    """
    with np.errstate(all="ignore"):
        v = x.view(src.ftype).astype(np.float64)  # exact widening
        nan = np.isnan(v)
        r = np.where(nan, 0.0, ROUND_INT[rnd](v))
    lo, hi = int_range(bits, signed)
    top = float(1 << bits) if not signed else float(1 << (bits - 1))
    big = r >= top
    small = r < float(lo)
    inside = np.where(big | small, 0.0, r)
    vals = inside.astype(np.int64).astype(np.uint64) if signed else inside.astype(np.uint64)
    mask = np.uint64((1 << bits) - 1)
    out = np.where(big, np.uint64(hi & ((1 << bits) - 1)), vals & mask)
    out = np.where(small, np.uint64(lo & ((1 << bits) - 1)), out)
    if not nan.any():
        return out.astype(np.uint64)
    nan_value = 0 if (src is not F64 and bits != 64) else 1 << (bits - 1)
    nan_bits = policy.unspecified_int(np.full(int(nan.sum()), nan_value, dtype=np.uint64))
    out[nan] = nan_bits & mask
    return out.astype(np.uint64)


def int_to_float(dst: Fmt, x: Bits, signed: bool) -> Bits:
    """``cvt.rn.fT.{s,u}N``: round to nearest even (numpy's integer casts are correctly
    rounded; the unit tests check the midpoints against exact integer rounding)."""
    return x.astype(dst.ftype).view(dst.utype)
