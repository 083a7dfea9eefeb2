"""Vectors, oracles and the batch test bench of the RTL core tests (test_hdl_cores.py).

* Generators (numpy, seeded) are edge-biased, TestFloat style: exponent edges (0, 1, bias,
  max-1, max) with fraction patterns (0, all ones, single bits, tie tails), subnormals, +-0,
  +-inf, NaNs with payloads of both signs; binary partners chosen for ties, cancellation,
  alignment past the sticky bit, overflow and underflow to subnormal; fma addends near
  -(a*b); near-squares for sqrt; values around 2**31/2**32/2**63/2**64 for conversions.
* Oracles are Berkeley SoftFloat (softfloatpy, round to nearest even) with the contract's rules
  applied on top: canonical NaN results, IEEE 754-2019 minimum/maximum, saturating float->int
  with NaN -> 0, total integer division, masked shifts.
* :func:`render_testbench` generates one plain Verilog test bench instantiating every core of a
  suite; a plan file selects, per segment, a core and either vectors read with ``$fread`` from
  ``in.bin`` (operands big-endian, 4 or 8 bytes each) or a counter (``op0 = start + k``, for
  exhaustive sweeps).  Each core writes its results to ``out_<j>.hex`` (one fixed-width hex
  word per line, in input order) and the observed latency to ``lat.txt``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import softfloatpy as sf

from kera_hdl import CORES, FLOAT_FORMATS

U64 = np.uint64
Arr = np.ndarray[Any, np.dtype[np.uint64]]
Gen = Callable[[np.random.Generator, int], tuple[Arr, ...]]
Oracle = Callable[..., Arr]


# ---------------------------------------------------------------- formats and bit helpers


@dataclass(frozen=True)
class Fmt:
    """An IEEE-754 binary format: name, exponent width, fraction width."""

    name: str
    ew: int
    mw: int

    @property
    def bits(self) -> int:
        return 1 + self.ew + self.mw

    @property
    def bias(self) -> int:
        return (1 << (self.ew - 1)) - 1

    @property
    def emax(self) -> int:
        return (1 << self.ew) - 1

    @property
    def qnan(self) -> int:
        return (self.emax << self.mw) | (1 << (self.mw - 1))

    @property
    def sf_cls(self) -> Any:
        return sf.Float32 if self.bits == 32 else sf.Float64

    def sf(self, name: str) -> Any:
        """softfloatpy function ``f32_<name>`` / ``f64_<name>``."""
        return getattr(sf, f"f{self.bits}_{name}")

    def pack(self, sign: Arr, exp: Arr, frac: Arr) -> Arr:
        s = sign.astype(U64) << U64(self.bits - 1)
        return s | (exp.astype(U64) << U64(self.mw)) | (frac.astype(U64) & U64((1 << self.mw) - 1))

    def is_nan(self, x: Arr) -> Any:
        e = (x >> U64(self.mw)) & U64(self.emax)
        return (e == U64(self.emax)) & ((x & U64((1 << self.mw) - 1)) != U64(0))

    def canon(self, x: Arr) -> Arr:
        return np.where(self.is_nan(x), U64(self.qnan), x).astype(U64)

    def from_float(self, v: float) -> int:
        dt = np.float32 if self.bits == 32 else np.float64
        return int(np.array([v], dtype=dt).view(f"<u{self.bits // 8}")[0])


F32 = Fmt("f32", *FLOAT_FORMATS["f32"])
F64 = Fmt("f64", *FLOAT_FORMATS["f64"])
FMTS = {"f32": F32, "f64": F64}


def _to_sf(fmt: Fmt, x: int) -> Any:
    return fmt.sf_cls.from_bytes(x.to_bytes(fmt.bits // 8, "big"))


def _from_sf(v: Any) -> int:
    return int.from_bytes(v.to_bytes(), "big")


def _arr(values: Sequence[int]) -> Arr:
    return np.array(values, dtype=U64)


def _rand64(rng: np.random.Generator, n: int) -> Arr:
    return rng.integers(0, 2**64 - 1, n, dtype=U64, endpoint=True)


def _mask(bits: int) -> U64:
    return U64((1 << bits) - 1) if bits < 64 else U64(2**64 - 1)


# ---------------------------------------------------------------- float generators


def special_floats(fmt: Fmt) -> list[int]:
    """Values every float op sees: zeros, extremes, infinities, NaNs, ties around integers."""
    m, e = fmt.mw, fmt.emax
    vals = [0, 1, 2, 3, (1 << m) - 1, 1 << (m - 1), 1 << m, (1 << m) + 1, (e - 1) << m]
    vals += [((e - 1) << m) | ((1 << m) - 1), e << m, fmt.qnan, fmt.qnan | 1, (e << m) | 1]
    vals += [(e << m) | ((1 << m) - 1), fmt.bias << m, ((fmt.bias - 1) << m) | (1 << (m - 1))]
    for v in (0.5, 1.5, 2.5, 3.5, 0.49999997, 2.0**31, 2.0**32, 2.0**63, 2.0**64, 1e-30):
        vals.append(fmt.from_float(v))
    signed = [v | (1 << (fmt.bits - 1)) for v in vals]
    return vals + signed


def floats(rng: np.random.Generator, fmt: Fmt, n: int) -> Arr:
    """n edge-biased float bit patterns (see the module docstring)."""
    m, bias, emax = fmt.mw, fmt.bias, fmt.emax
    sign = rng.integers(0, 2, n, dtype=U64)
    edges = _arr(
        [0, 1, 2, 3, bias - 2, bias - 1, bias, bias + 1, bias + 2, emax - 2, emax - 1, emax]
    )
    pick = rng.integers(0, 10, n)
    exp = np.where(
        pick < 4,
        rng.integers(0, emax + 1, n, dtype=U64),
        np.where(
            pick < 7,
            edges[rng.integers(0, len(edges), n)],
            rng.integers(bias - m - 3, bias + m + 4, n, dtype=U64),
        ),
    ).astype(U64)
    return _with_specials(rng, fmt, fmt.pack(sign, exp, fractions(rng, fmt, n)))


def fractions(rng: np.random.Generator, fmt: Fmt, n: int) -> Arr:
    """Fraction fields: random, 0, all ones, single bits, runs, and tie / near-tie tails."""
    m = fmt.mw
    full = _mask(m)
    r = _rand64(rng, n) & full
    k = rng.integers(0, m, n, dtype=U64)
    one = U64(1)
    tails = (one << k) - one
    pick = rng.integers(0, 9, n)
    choices = [
        r,
        np.zeros(n, U64),
        np.full(n, full, U64),
        one << k,
        (full << k) & full,
        r >> k,
        (r & ~tails) | (one << k >> one),  # ...1000 tail below bit k: an exact tie
        r | tails,
        (r & ~tails) | ((one << k >> one) + one) * (k > 1),  # just above a tie
    ]
    return np.choose(pick, choices).astype(U64)


def _with_specials(rng: np.random.Generator, fmt: Fmt, x: Arr, frac: float = 0.04) -> Arr:
    sp = _arr(special_floats(fmt))
    take = rng.random(len(x)) < frac
    out = x.copy()
    out[take] = sp[rng.integers(0, len(sp), int(take.sum()))]
    return out


def _field_exp(fmt: Fmt, x: Arr) -> Any:
    return ((x >> U64(fmt.mw)) & U64(fmt.emax)).astype(np.int64)


def _set_exp(fmt: Fmt, x: Arr, exp: Any) -> Arr:
    e = np.clip(exp, 0, fmt.emax - 1).astype(U64)
    keep = ~(U64(fmt.emax) << U64(fmt.mw))
    return (x & keep) | (e << U64(fmt.mw))


def pair_add(rng: np.random.Generator, fmt: Fmt, n: int) -> tuple[Arr, Arr]:
    """Operands for add/sub: independent, same binade, shifted past the sticky bit, +-a."""
    a = floats(rng, fmt, n)
    b = floats(rng, fmt, n)
    ea = _field_exp(fmt, a)
    near = _set_exp(fmt, b, ea + rng.integers(-2, 3, n))
    far = _set_exp(fmt, b, ea - rng.integers(fmt.mw - 2, fmt.mw + 5, n))
    flip = a ^ U64(1 << (fmt.bits - 1))
    ulp = flip + rng.integers(-3, 4, n).astype(np.int64).astype(U64)
    pick = rng.integers(0, 6, n)
    b = np.choose(pick, [b, near, far, flip, ulp, a]).astype(U64)
    return a, b


def pair_mul(rng: np.random.Generator, fmt: Fmt, n: int, divide: bool = False) -> tuple[Arr, Arr]:
    """Operands whose product (quotient) lands near underflow, overflow or anywhere."""
    a = floats(rng, fmt, n)
    b = floats(rng, fmt, n)
    ea = _field_exp(fmt, a)
    targets = np.choose(
        rng.integers(0, 3, n),
        [
            rng.integers(-fmt.mw - 3, 4, n),  # subnormal results and the underflow edge
            rng.integers(fmt.emax - 4, fmt.emax + 2, n),  # the overflow edge
            rng.integers(1, fmt.emax, n),
        ],
    )
    eb = (ea - targets + fmt.bias) if divide else (targets - ea + fmt.bias)
    aimed = _set_exp(fmt, b, eb)
    b = np.where(rng.integers(0, 3, n) == 0, b, aimed).astype(U64)
    return a, b


def pair_cmp(rng: np.random.Generator, fmt: Fmt, n: int) -> tuple[Arr, Arr]:
    """Operands for compare/min/max: equal, negated, adjacent, independent."""
    a = floats(rng, fmt, n)
    b = floats(rng, fmt, n)
    sgn = U64(1 << (fmt.bits - 1))
    adj = a + rng.integers(-1, 2, n).astype(np.int64).astype(U64)
    pick = rng.integers(0, 4, n)
    return a, np.choose(pick, [b, a, a ^ sgn, adj]).astype(U64)


def triple_fma(rng: np.random.Generator, fmt: Fmt, n: int) -> tuple[Arr, Arr, Arr]:
    """a, b as for mul; c independent, near -(a*b) (cancellation), or a few binades away."""
    a, b = pair_mul(rng, fmt, n)
    c = floats(rng, fmt, n)
    mul = fmt.sf("mul")
    prod = _arr(
        [
            _from_sf(mul(_to_sf(fmt, x), _to_sf(fmt, y)))
            for x, y in zip(a.tolist(), b.tolist(), strict=True)
        ]
    )
    cancel = (prod ^ U64(1 << (fmt.bits - 1))) + rng.integers(-2, 3, n).astype(np.int64).astype(U64)
    ep = _field_exp(fmt, a) + _field_exp(fmt, b) - fmt.bias
    shifted = _set_exp(fmt, c, ep + rng.integers(-2 * fmt.mw - 5, fmt.mw + 6, n))
    pick = rng.integers(0, 4, n)
    c = np.choose(pick, [c, cancel, shifted, shifted ^ U64(1 << (fmt.bits - 1))]).astype(U64)
    return a, b, c


def near_squares(rng: np.random.Generator, fmt: Fmt, n: int) -> tuple[Arr]:
    """sqrt inputs: edge-biased values (mostly positive) and squares +- a few ulps."""
    x = floats(rng, fmt, n)
    mul = fmt.sf("mul")
    sq = _arr([_from_sf(mul(_to_sf(fmt, v), _to_sf(fmt, v))) for v in x.tolist()])
    sq = (sq + rng.integers(-2, 3, n).astype(np.int64).astype(U64)) & _mask(fmt.bits - 1)
    pos = x & _mask(fmt.bits - 1)
    pick = rng.integers(0, 5, n)
    return (np.choose(pick, [x, pos, pos, sq, sq]).astype(U64),)


def integral_edges(rng: np.random.Generator, fmt: Fmt, n: int, top: int) -> tuple[Arr]:
    """Floats around integers of up to ``top`` bits (rounding ops, float->int)."""
    x = floats(rng, fmt, n)
    near = _set_exp(fmt, x, fmt.bias + rng.integers(-2, top + 2, n))
    bounds = [2.0**k for k in (31, 32, 63, 64) if k <= top + 1] + [0.5, 1.0, 1.5]
    edge = _arr([fmt.from_float(v) for v in bounds])
    at = edge[rng.integers(0, len(edge), n)] + rng.integers(-3, 4, n).astype(np.int64).astype(U64)
    at = at | (rng.integers(0, 2, n, dtype=U64) << U64(fmt.bits - 1))
    pick = rng.integers(0, 4, n)
    return (np.choose(pick, [x, near, near, at]).astype(U64),)


def narrowing(rng: np.random.Generator, n: int) -> tuple[Arr]:
    """f64 values around the f32 range (overflow, subnormal, ties at f32 precision)."""
    x = floats(rng, F64, n)
    lo, hi = F64.bias - F32.bias - F32.mw - 3, F64.bias + F32.bias + 2
    inside = _set_exp(F64, x, rng.integers(lo, hi, n))
    drop = F64.mw - F32.mw
    tie = (inside & ~_mask(drop)) | U64(1 << (drop - 1))
    pick = rng.integers(0, 4, n)
    return (np.choose(pick, [x, inside, inside, tie]).astype(U64),)


# ---------------------------------------------------------------- integer generators


def ints(rng: np.random.Generator, bits: int, n: int) -> Arr:
    """Edge-biased bit patterns of an integer width: random, short, powers of two +- 1, edges."""
    m = _mask(bits)
    r = _rand64(rng, n) & m
    short = r >> rng.integers(0, bits, n, dtype=U64)
    pw = (U64(1) << rng.integers(0, bits, n, dtype=U64)) + rng.integers(-2, 3, n).astype(
        np.int64
    ).astype(U64)
    edges = _arr([0, 1, 2, 3, 1 << (bits - 1), (1 << (bits - 1)) - 1, (1 << (bits - 1)) + 1])
    edges = np.concatenate([edges, (U64(0) - edges) & m])
    ed = edges[rng.integers(0, len(edges), n)]
    neg = (U64(0) - short) & m
    pick = rng.integers(0, 5, n)
    return np.choose(pick, [r, short, pw & m, ed, neg]).astype(U64) & m


def int_pair_div(rng: np.random.Generator, bits: int, n: int) -> tuple[Arr, Arr]:
    """Dividends and divisors with zeros, +-1, MIN, equal magnitudes and small divisors."""
    a = ints(rng, bits, n)
    b = ints(rng, bits, n)
    small = (rng.integers(0, 16, n, dtype=U64) - U64(8)) & _mask(bits)
    pick = rng.integers(0, 6, n)
    b = np.choose(pick, [b, b, small, a, (U64(0) - a) & _mask(bits), np.zeros(n, U64)])
    return a, b.astype(U64)


def int_pair_shift(rng: np.random.Generator, bits: int, n: int) -> tuple[Arr, Arr]:
    """Values and shift amounts, including amounts >= width (the contract masks them)."""
    a = ints(rng, bits, n)
    b = np.where(
        rng.integers(0, 2, n) == 0, rng.integers(0, 4 * bits, n, dtype=U64), ints(rng, bits, n)
    )
    return a, b.astype(U64)


def at_width(gen: Callable[[np.random.Generator, int, int], tuple[Arr, ...]], bits: int) -> Gen:
    """``gen`` with its width bound now: a lambda in a loop would see the loop's last width."""
    return lambda rng, n: gen(rng, bits, n)


# ---------------------------------------------------------------- oracles


def _softfloat_map(fmt: Fmt, fn: Callable[..., Any], *ops: Arr) -> Arr:
    args = [[_to_sf(fmt, v) for v in o.tolist()] for o in ops]
    return fmt.canon(_arr([_from_sf(fn(*xs)) for xs in zip(*args, strict=True)]))


def oracle_binary(fmt: Fmt, name: str) -> Oracle:
    return lambda a, b: _softfloat_map(fmt, fmt.sf(name), a, b)


def oracle_fma(fmt: Fmt) -> Oracle:
    return lambda a, b, c: _softfloat_map(fmt, fmt.sf("mul_add"), a, b, c)


def oracle_sqrt(fmt: Fmt) -> Oracle:
    return lambda a: _softfloat_map(fmt, fmt.sf("sqrt"), a)


ROUND_MODES = {
    "floor": sf.RoundingMode.MIN,
    "ceil": sf.RoundingMode.MAX,
    "trunc": sf.RoundingMode.MIN_MAG,
    "round": sf.RoundingMode.NEAR_EVEN,
}


def oracle_round(fmt: Fmt, name: str) -> Oracle:
    rti, mode = fmt.sf("round_to_int"), ROUND_MODES[name]
    return lambda a: _softfloat_map(fmt, lambda x: rti(x, mode, False), a)


def oracle_cmp(fmt: Fmt) -> Oracle:
    """6-bit {eq, ne, lt, le, gt, ge} from SoftFloat's quiet predicates."""
    eq, lt, le = fmt.sf("eq"), fmt.sf("lt_quiet"), fmt.sf("le_quiet")

    def one(x: Any, y: Any) -> int:
        e, l_, le_ = bool(eq(x, y)), bool(lt(x, y)), bool(le(x, y))
        g, ge_ = bool(lt(y, x)), bool(le(y, x))
        return e << 5 | (not e) << 4 | l_ << 3 | le_ << 2 | g << 1 | ge_

    def run(a: Arr, b: Arr) -> Arr:
        return _arr(
            [
                one(_to_sf(fmt, x), _to_sf(fmt, y))
                for x, y in zip(a.tolist(), b.tolist(), strict=True)
            ]
        )

    return run


def oracle_minmax(fmt: Fmt, is_max: bool) -> Oracle:
    """IEEE 754-2019 minimum/maximum: NaN -> canonical, -0 < +0, else SoftFloat's order."""
    lt = fmt.sf("lt_quiet")
    sign = 1 << (fmt.bits - 1)

    def one(x: int, y: int) -> int:
        if x == y:
            return x
        fx, fy = _to_sf(fmt, x), _to_sf(fmt, y)
        zeros = (x | y) & ~sign == 0
        x_less = bool(x & sign) if zeros else bool(lt(fx, fy))
        return (y if x_less else x) if is_max else (x if x_less else y)

    def run(a: Arr, b: Arr) -> Arr:
        nan = fmt.is_nan(a) | fmt.is_nan(b)
        got = _arr([one(x, y) for x, y in zip(a.tolist(), b.tolist(), strict=True)])
        return np.where(nan, U64(fmt.qnan), got).astype(U64)

    return run


def oracle_sign(fmt: Fmt, mode: int) -> Oracle:
    """neg / abs / copysign as sign-bit operations (payloads kept)."""
    s = U64(1 << (fmt.bits - 1))
    if mode == 0:
        return lambda a, b: a ^ s
    if mode == 1:
        return lambda a, b: a & ~s
    return lambda a, b: (a & ~s) | (b & s)


INT_NAMES = {(32, True): "i32", (64, True): "i64", (32, False): "ui32", (64, False): "ui64"}


def oracle_f2i(fmt: Fmt, bits: int, signed: bool) -> Oracle:
    """Truncate toward zero (SoftFloat), saturate to the range, NaN -> 0 (the contract)."""
    rti, le = fmt.sf("round_to_int"), fmt.sf("le_quiet")
    conv = fmt.sf(f"to_{INT_NAMES[bits, signed]}")
    top = bits - 1 if signed else bits
    hi = _to_sf(fmt, fmt.from_float(2.0**top))
    lo = _to_sf(fmt, fmt.from_float(-(2.0 ** (bits - 1)) if signed else 0.0))
    mask = (1 << bits) - 1
    big = (1 << top) - 1

    def one(x: int) -> int:
        fx = _to_sf(fmt, x)
        if fmt.is_nan(_arr([x]))[0]:
            return 0
        t = rti(fx, sf.RoundingMode.MIN_MAG, False)
        if le(hi, t):
            return big
        if le(t, lo):
            return (1 << (bits - 1)) if signed else 0
        return int.from_bytes(conv(fx, sf.RoundingMode.MIN_MAG, False).to_bytes(), "big") & mask

    return lambda a: _arr([one(x) for x in a.tolist()])


def oracle_i2f(fmt: Fmt, bits: int, signed: bool) -> Oracle:
    name = INT_NAMES[bits, signed]
    conv = getattr(sf, f"{name}_to_f{fmt.bits}")
    ctors: dict[str, type[sf.Int32 | sf.Int64 | sf.UInt32 | sf.UInt64]] = {
        "i32": sf.Int32,
        "i64": sf.Int64,
        "ui32": sf.UInt32,
        "ui64": sf.UInt64,
    }
    ctor = ctors[name]
    nb = bits // 8
    return lambda a: _arr(
        [_from_sf(conv(ctor.from_bytes(x.to_bytes(nb, "big")))) for x in a.tolist()]
    )


def oracle_f2f(src: Fmt, dst: Fmt) -> Oracle:
    fn = getattr(sf, f"f{src.bits}_to_f{dst.bits}")

    def run(a: Arr) -> Arr:
        got = _arr([_from_sf(fn(_to_sf(src, x))) for x in a.tolist()])
        return dst.canon(got)

    return run


def _signed(x: int, bits: int) -> int:
    return x - (1 << bits) if x >> (bits - 1) else x


def int_div(x: int, y: int, bits: int, signed: bool, rem: bool) -> int:
    """The contract's total division: x/0 = 0, x%0 = x, MIN/-1 = MIN, MIN%-1 = 0."""
    mask = (1 << bits) - 1
    if y == 0:
        return x if rem else 0
    if signed:
        sx, sy = _signed(x, bits), _signed(y, bits)
        q = abs(sx) // abs(sy) * (1 if (sx < 0) == (sy < 0) else -1)
        return (sx - q * sy) & mask if rem else q & mask
    return x % y if rem else x // y


def oracle_idiv(bits: int, signed: bool, rem: bool) -> Oracle:
    return lambda a, b: _arr(
        [int_div(x, y, bits, signed, rem) for x, y in zip(a.tolist(), b.tolist(), strict=True)]
    )


def oracle_shift(bits: int, signed: bool, left: bool) -> Oracle:
    mask = (1 << bits) - 1

    def one(x: int, y: int) -> int:
        k = y & (bits - 1)
        if left:
            return (x << k) & mask
        return (_signed(x, bits) >> k) & mask if signed else x >> k

    return lambda a, b: _arr([one(x, y) for x, y in zip(a.tolist(), b.tolist(), strict=True)])


# ---------------------------------------------------------------- the core-test table


@dataclass(frozen=True)
class CoreTest:
    """One core instance of a test bench and how to feed and check it."""

    name: str
    module: str
    params: dict[str, int]
    in_bits: tuple[int, ...]
    out_bits: int
    gen: Gen
    oracle: Oracle
    outputs: tuple[str, ...] = ("y",)
    seed: int = 0

    @property
    def clocked(self) -> bool:
        return CORES[self.module].clocked

    def vectors(self, n: int) -> tuple[Arr, ...]:
        """n operand tuples from the generator (seeded by the core and n), masked to width."""
        ops = self.gen(np.random.default_rng([self.seed, n]), n)
        return tuple(o.astype(U64) & _mask(b) for o, b in zip(ops, self.in_bits, strict=True))

    @property
    def latency(self) -> int:
        return CORES[self.module].latency(self.params)


def float_suite(fmt: Fmt) -> list[CoreTest]:
    """Every float core at one width, with conversions from and to this width."""
    fp = {"EW": fmt.ew, "MW": fmt.mw}
    w = fmt.bits
    t: list[CoreTest] = []

    def add(
        name: str,
        module: str,
        params: dict[str, int],
        ins: tuple[int, ...],
        out: int,
        gen: Gen,
        oracle: Oracle,
        outputs: tuple[str, ...] = ("y",),
    ) -> None:
        t.append(
            CoreTest(
                f"{fmt.name}.{name}",
                module,
                params,
                ins,
                out,
                gen,
                oracle,
                outputs,
                seed=len(t) + 100 * w,
            )
        )

    add(
        "add",
        "kf_fadd",
        {**fp, "SUB": 0},
        (w, w),
        w,
        lambda r, n: pair_add(r, fmt, n),
        oracle_binary(fmt, "add"),
    )
    add(
        "sub",
        "kf_fadd",
        {**fp, "SUB": 1},
        (w, w),
        w,
        lambda r, n: pair_add(r, fmt, n),
        oracle_binary(fmt, "sub"),
    )
    add(
        "mul", "kf_fmul", fp, (w, w), w, lambda r, n: pair_mul(r, fmt, n), oracle_binary(fmt, "mul")
    )
    add(
        "div",
        "kf_fdiv",
        fp,
        (w, w),
        w,
        lambda r, n: pair_mul(r, fmt, n, divide=True),
        oracle_binary(fmt, "div"),
    )
    add("fma", "kf_ffma", fp, (w, w, w), w, lambda r, n: triple_fma(r, fmt, n), oracle_fma(fmt))
    add("sqrt", "kf_fsqrt", fp, (w,), w, lambda r, n: near_squares(r, fmt, n), oracle_sqrt(fmt))
    add(
        "cmp",
        "kf_fcmp",
        fp,
        (w, w),
        6,
        lambda r, n: pair_cmp(r, fmt, n),
        oracle_cmp(fmt),
        ("eq", "ne", "lt", "le", "gt", "ge"),
    )
    for mx, nm in ((0, "min"), (1, "max")):
        add(
            nm,
            "kf_fminmax",
            {**fp, "MAX": mx},
            (w, w),
            w,
            lambda r, n: pair_cmp(r, fmt, n),
            oracle_minmax(fmt, mx == 1),
        )
    for mode, nm in enumerate(("neg", "abs", "copysign")):
        add(
            nm,
            "kf_fsign",
            {"W": w, "MODE": mode},
            (w, w),
            w,
            lambda r, n: pair_cmp(r, fmt, n),
            oracle_sign(fmt, mode),
        )
    for mode, nm in enumerate(("floor", "ceil", "trunc", "round")):
        add(
            nm,
            "kf_fround",
            {**fp, "MODE": mode},
            (w,),
            w,
            lambda r, n: integral_edges(r, fmt, n, fmt.mw + 1),
            oracle_round(fmt, nm),
        )
    for bits, signed in ((32, True), (64, True), (32, False), (64, False)):
        tag = INT_NAMES[bits, signed]
        add(
            f"to_{tag}",
            "kf_f2i",
            {**fp, "OW": bits, "SIGNED": int(signed)},
            (w,),
            bits,
            at_width(lambda r, b, n: integral_edges(r, fmt, n, b), bits),
            oracle_f2i(fmt, bits, signed),
        )
        add(
            f"from_{tag}",
            "kf_i2f",
            {"IW": bits, "SIGNED": int(signed), **fp},
            (bits,),
            w,
            at_width(lambda r, b, n: (ints(r, b, n),), bits),
            oracle_i2f(fmt, bits, signed),
        )
    other = F64 if fmt is F32 else F32
    conv = {"EWI": fmt.ew, "MWI": fmt.mw, "EWO": other.ew, "MWO": other.mw}
    gen: Gen = (lambda r, n: (floats(r, F32, n),)) if fmt is F32 else (lambda r, n: narrowing(r, n))
    add(f"to_{other.name}", "kf_f2f", conv, (w,), other.bits, gen, oracle_f2f(fmt, other))
    return t


def int_suite() -> list[CoreTest]:
    """Integer division/remainder and shifts at 32 and 64 bits, signed and unsigned."""
    t: list[CoreTest] = []
    for bits in (32, 64):
        for signed in (True, False):
            tag = ("i" if signed else "u") + str(bits)
            for rem in (False, True):
                t.append(
                    CoreTest(
                        f"{tag}.{'rem' if rem else 'div'}",
                        "kf_idiv",
                        {"W": bits, "SIGNED": int(signed), "REM": int(rem)},
                        (bits, bits),
                        bits,
                        at_width(int_pair_div, bits),
                        oracle_idiv(bits, signed, rem),
                        seed=len(t) + 7,
                    )
                )
            for left in (True, False):
                t.append(
                    CoreTest(
                        f"{tag}.{'shl' if left else 'shr'}",
                        "kf_ishift",
                        {"W": bits, "SIGNED": int(signed), "LEFT": int(left)},
                        (bits, bits),
                        bits,
                        at_width(int_pair_shift, bits),
                        oracle_shift(bits, signed, left),
                        seed=len(t) + 7,
                    )
                )
    return t


SUITES: dict[str, Callable[[], list[CoreTest]]] = {
    "f32": lambda: float_suite(F32),
    "f64": lambda: float_suite(F64),
    "int": int_suite,
}


# ---------------------------------------------------------------- the batch test bench


def _instance(j: int, t: CoreTest) -> str:
    params = ", ".join(f".{k}({v})" for k, v in t.params.items())
    ports = [
        f".{p}(in{i}_{j}[{b - 1}:0])"
        for i, (p, b) in enumerate(zip(CORES[t.module].inputs, t.in_bits, strict=True))
    ]
    y = f"y_{j}" if t.clocked else f"yc_{j}"
    if len(t.outputs) == 1:
        ports.append(f".{t.outputs[0]}({y})")
    else:
        ports += [f".{p}({y}[{len(t.outputs) - 1 - i}])" for i, p in enumerate(t.outputs)]
    if t.clocked:
        ports = [".clk(clk)", ".rst(rst)", f".valid_in(vin_{j})", *ports, f".valid_out(vout_{j})"]
    return f"    {t.module} #({params}) u_{j} (\n        " + ",\n        ".join(ports) + ");\n"


def _core_block(j: int, t: CoreTest) -> str:
    ow = t.out_bits
    lines = [f"    // core {j}: {t.name} ({t.module}, latency {t.latency})\n"]
    lines.append(f"    wire vin_{j} = valid & (cur == 8'd{j});\n")
    # each core has its own operand registers, written only for its own vectors, so idle
    # cores see no input changes and cost an event-driven simulator nothing
    lines += [f"    reg [63:0] in{i}_{j} = 64'd0;\n" for i in range(len(t.in_bits))]
    if t.clocked:
        lines.append(f"    wire [{ow - 1}:0] y_{j};\n    wire vout_{j};\n")
    else:
        lines.append(
            f"    wire [{ow - 1}:0] yc_{j};\n    reg [{ow - 1}:0] y_{j};\n    reg vout_{j};\n"
        )
        lines.append(
            f"    always @(posedge clk) begin y_{j} <= yc_{j}; vout_{j} <= ~rst & vin_{j}; end\n"
        )
    lines.append(_instance(j, t))
    lines.append(f"    integer fo_{j};\n    integer lin_{j};\n    integer lout_{j};\n")
    lines.append(
        f"    always @(posedge clk) begin\n"
        f"        if (vin_{j} && lin_{j} < 0) lin_{j} <= cyc;\n"
        f"        if (vout_{j} && lout_{j} < 0) lout_{j} <= cyc;\n"
        f"    end\n"
        f'    always @(negedge clk) if (vout_{j}) $fwrite(fo_{j}, "%h\\n", y_{j});\n'
    )
    return "".join(lines)


def _latch_case(j: int, t: CoreTest) -> str:
    sets = " ".join(f"in{i}_{j} = op{i};" for i in range(len(t.in_bits)))
    return f"                {j}: begin {sets} end\n"


def _read_case(j: int, t: CoreTest) -> str:
    reads = []
    for i, b in enumerate(t.in_bits):
        reads.append(
            f"rd = $fread(t{b}, fin); op{i} = {{{64 - b}'d0, t{b}}};"
            if b < 64
            else f"rd = $fread(t64, fin); op{i} = t64;"
        )
        reads.append(f'if (rd != {b // 8}) begin $display("short read"); $finish; end')
    return f"                    {j}: begin " + " ".join(reads) + " end\n"


def render_testbench(tests: Sequence[CoreTest]) -> str:
    """The batch test bench ``tb`` for ``tests`` (core j is selected by op code j)."""
    if len(tests) > 255:
        raise ValueError("at most 255 cores per test bench")
    drain = max(t.latency for t in tests) + 4
    opens = "".join(
        f'        fo_{j} = $fopen("out_{j}.hex", "w"); lin_{j} = -1; lout_{j} = -1;\n'
        for j in range(len(tests))
    )
    closes = "".join(
        f'        $fwrite(flat, "%0d %0d\\n", {j}, lout_{j} < 0 ? -1 : lout_{j} - lin_{j}'
        f"{'' if t.clocked else ' - 1'});\n        $fclose(fo_{j});\n"
        for j, t in enumerate(tests)
    )
    cases = "".join(_read_case(j, t) for j, t in enumerate(tests))
    latches = "".join(_latch_case(j, t) for j, t in enumerate(tests))
    blocks = "".join(_core_block(j, t) for j, t in enumerate(tests))
    return f"""// generated by tests/toolchain/hdl_vectors.py: batch test bench of the RTL cores
`timescale 1ns/1ps
module tb;
    reg clk = 1'b0;
    reg rst = 1'b1;
    reg valid = 1'b0;
    reg [7:0] cur = 8'd0;
    reg [63:0] op0 = 64'd0;
    reg [63:0] op1 = 64'd0;
    reg [63:0] op2 = 64'd0;
    reg [31:0] t32;
    reg [63:0] t64;
    integer cyc = 0;
    integer fin, fplan, flat, nseg, s, k, rd, a_op, a_n, a_gen, a_start;
    integer seg_op [0:1023];
    integer seg_n [0:1023];
    integer seg_gen [0:1023];
    integer seg_start [0:1023];
    always #5 clk = ~clk;
    always @(posedge clk) cyc <= cyc + 1;

{blocks}
    initial begin
        fplan = $fopen("plan.txt", "r");
        fin = $fopen("in.bin", "rb");
{opens}        nseg = 0;
        while ($fscanf(fplan, "%d %d %d %d\\n", a_op, a_n, a_gen, a_start) == 4) begin
            seg_op[nseg] = a_op; seg_n[nseg] = a_n; seg_gen[nseg] = a_gen;
            seg_start[nseg] = a_start;
            nseg = nseg + 1;
        end
        repeat (3) @(negedge clk);
        rst = 1'b0;
        for (s = 0; s < nseg; s = s + 1) begin
            for (k = 0; k < seg_n[s]; k = k + 1) begin
                @(negedge clk);
                cur = seg_op[s][7:0];
                if (seg_gen[s] != 0) begin
                    op0 = {{32'd0, seg_start[s] + k}};
                end else begin
                    case (seg_op[s])
{cases}                    default: ;
                    endcase
                end
                case (seg_op[s])
{latches}                default: ;
                endcase
                valid = 1'b1;
            end
        end
        @(negedge clk);
        valid = 1'b0;
        repeat ({drain}) @(negedge clk);
        flat = $fopen("lat.txt", "w");
{closes}        $fclose(flat);
        $finish;
    end
endmodule
"""


# ---------------------------------------------------------------- files in, results out


@dataclass
class Segment:
    """A run of one core: vectors from memory, or a counter sweep ``start .. start + count``."""

    core: int
    operands: tuple[Arr, ...] = ()
    count: int = 0
    start: int = -1


def write_inputs(work: Path, tests: Sequence[CoreTest], segments: Sequence[Segment]) -> None:
    """plan.txt (op count gen start per line) and in.bin (big-endian operands)."""
    plan = []
    with open(work / "in.bin", "wb") as fh:
        for seg in segments:
            if seg.start >= 0:
                plan.append(f"{seg.core} {seg.count} 1 {seg.start}")
                continue
            bits = tests[seg.core].in_bits
            n = len(seg.operands[0])
            cols = [
                o.astype(f">u{b // 8}").view(np.uint8).reshape(n, b // 8)
                for o, b in zip(seg.operands, bits, strict=True)
            ]
            fh.write(np.concatenate(cols, axis=1).tobytes())
            plan.append(f"{seg.core} {n} 0 0")
    (work / "plan.txt").write_text("\n".join(plan) + "\n")


def parse_hex_lines(data: bytes, bits: int) -> Arr:
    """Fixed-width hex lines (``%h`` of a ``bits``-wide value) -> uint64; x/z raise."""
    nd = math.ceil(bits / 4)
    if not data:
        return np.zeros(0, U64)
    raw = np.frombuffer(data, np.uint8).reshape(-1, nd + 1)[:, :nd]
    digit = np.where(raw >= ord("a"), raw - ord("a") + 10, raw - ord("0")).astype(np.int64)
    if ((digit < 0) | (digit > 15)).any():
        raise ValueError("simulation output has x/z or malformed digits")
    out = np.zeros(len(raw), U64)
    for i in range(nd):
        out = (out << U64(4)) | digit[:, i].astype(U64)
    return out


def read_outputs(work: Path, tests: Sequence[CoreTest]) -> tuple[list[Arr], dict[int, int]]:
    """Per-core results (in input order) and observed latencies (core -> clocks)."""
    outs = [
        parse_hex_lines((work / f"out_{j}.hex").read_bytes(), t.out_bits)
        for j, t in enumerate(tests)
    ]
    lat: dict[int, int] = {}
    for line in (work / "lat.txt").read_text().split("\n"):
        if line.strip():
            j, v = line.split()
            lat[int(j)] = int(v)
    return outs, lat
