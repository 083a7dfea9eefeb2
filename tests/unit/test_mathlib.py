"""kera.mathlib: special values bit for bit, accuracy against MPFR, and the algorithms' shape.

The golden op counts and fingerprints pin the expansion of every function and dtype: any change
to a step or a constant of docs/mathlib.md changes them, and that is a change of the
determinism contract (update the doc, the measured figures and these goldens together).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from kera import mathlib
from kera.dtypes import DType
from kera.interp import interpret
from kera.ir import Function, FunctionBuilder
from kera.ops import ELEMENTWISE, TypeRuleError
from kera.semantics import fma32, fma64

F32, F64 = DType.F32, DType.F64
NAMES = ("exp", "log", "tanh", "sigmoid")
ROOT = Path(__file__).resolve().parents[2]


def build(name: str, dt: DType, shape: tuple[int, ...] = ()) -> Function:
    b = FunctionBuilder(name)
    x = b.param("x", dt, shape)
    return b.build(mathlib.FUNCTIONS[name](x))


def run_bits(name: str, dt: DType, bits: list[int]) -> list[int]:
    xs = np.array(bits, dtype=dt.uint).view(dt.np)
    ys = interpret(build(name, dt), {"x": xs})[0]
    return [int(v) for v in ys.view(dt.uint)]


# ----------------------------------------------------------------------------- special values

# (input bits, expected bits): exact cases, and results that round to a special value
SPECIAL: dict[tuple[str, DType], list[tuple[int, int]]] = {
    ("exp", F32): [
        (0x00000000, 0x3F800000),  # +0 -> 1
        (0x80000000, 0x3F800000),  # -0 -> 1
        (0xFF800000, 0x00000000),  # -inf -> +0
        (0x7F800000, 0x7F800000),  # +inf -> +inf
        (0xFFC12345, 0x7FC00000),  # NaN (negative, payload) -> canonical NaN
        (0x7F800001, 0x7FC00000),  # signalling NaN -> canonical NaN
        (0x42B20000, 0x7F800000),  # 89 -> overflow to +inf
        (0x7F7FFFFF, 0x7F800000),  # FLT_MAX -> +inf
        (0xC2D00000, 0x00000000),  # -104 -> +0
        (0xFF7FFFFF, 0x00000000),  # -FLT_MAX -> +0
        (0xC2CE8000, 0x00000001),  # -103.25 -> the least subnormal (gradual underflow)
        (0x00000001, 0x3F800000),  # the least subnormal -> 1
        (0x80000001, 0x3F800000),
    ],
    ("exp", F64): [
        (0x0000000000000000, 0x3FF0000000000000),
        (0x8000000000000000, 0x3FF0000000000000),
        (0xFFF0000000000000, 0x0000000000000000),
        (0x7FF0000000000000, 0x7FF0000000000000),
        (0xFFF8000000000123, 0x7FF8000000000000),
        (0x7FF0000000000001, 0x7FF8000000000000),
        (0x4086300000000000, 0x7FF0000000000000),  # 710 -> +inf
        (0x7FEFFFFFFFFFFFFF, 0x7FF0000000000000),
        (0xC087500000000000, 0x0000000000000000),  # -746 -> +0
        (0xFFEFFFFFFFFFFFFF, 0x0000000000000000),
        (0xC08748E000000000, 0x0000000000000001),  # -745.109375 -> the least subnormal
        (0x0000000000000001, 0x3FF0000000000000),
    ],
    ("log", F32): [
        (0x00000000, 0xFF800000),  # +0 -> -inf
        (0x80000000, 0xFF800000),  # -0 -> -inf
        (0x3F800000, 0x00000000),  # 1 -> +0
        (0x7F800000, 0x7F800000),  # +inf -> +inf
        (0xBF800000, 0x7FC00000),  # -1 -> NaN
        (0x80000001, 0x7FC00000),  # negative subnormal -> NaN
        (0xFF800000, 0x7FC00000),  # -inf -> NaN
        (0xFFC12345, 0x7FC00000),
        (0x7FA00000, 0x7FC00000),
        (0x00000001, 0xC2CE8ED0),  # log(2**-149) = -103.27893 (correctly rounded)
        (0x7F7FFFFF, 0x42B17218),  # log(FLT_MAX) = 88.72284 (correctly rounded)
    ],
    ("log", F64): [
        (0x0000000000000000, 0xFFF0000000000000),
        (0x8000000000000000, 0xFFF0000000000000),
        (0x3FF0000000000000, 0x0000000000000000),
        (0x7FF0000000000000, 0x7FF0000000000000),
        (0xBFF0000000000000, 0x7FF8000000000000),
        (0x8000000000000001, 0x7FF8000000000000),
        (0xFFF0000000000000, 0x7FF8000000000000),
        (0x7FF4000000000000, 0x7FF8000000000000),
        (0x0000000000000001, 0xC0874385446D71C3),  # log(2**-1074) (correctly rounded)
        (0x7FEFFFFFFFFFFFFF, 0x40862E42FEFA39EF),  # log(DBL_MAX) (correctly rounded)
    ],
    ("tanh", F32): [
        (0x00000000, 0x00000000),  # +0 -> +0
        (0x80000000, 0x80000000),  # -0 -> -0
        (0x00000001, 0x00000001),  # subnormals: tanh(x) = x
        (0x80000001, 0x80000001),
        (0x7F800000, 0x3F800000),  # +inf -> 1
        (0xFF800000, 0xBF800000),  # -inf -> -1
        (0x41200000, 0x3F800000),  # 10 -> 1 (saturated)
        (0xC1F00000, 0xBF800000),  # -30 -> -1
        (0x7F7FFFFF, 0x3F800000),
        (0xFFC12345, 0x7FC00000),
        (0x7FA00000, 0x7FC00000),
    ],
    ("tanh", F64): [
        (0x0000000000000000, 0x0000000000000000),
        (0x8000000000000000, 0x8000000000000000),
        (0x0000000000000001, 0x0000000000000001),
        (0x8000000000000001, 0x8000000000000001),
        (0x7FF0000000000000, 0x3FF0000000000000),
        (0xFFF0000000000000, 0xBFF0000000000000),
        (0x4036000000000000, 0x3FF0000000000000),  # 22 -> 1
        (0xC044000000000000, 0xBFF0000000000000),  # -40 -> -1
        (0xFFEFFFFFFFFFFFFF, 0xBFF0000000000000),
        (0xFFF8000000000123, 0x7FF8000000000000),
        (0x7FF0000000000001, 0x7FF8000000000000),
    ],
    ("sigmoid", F32): [
        (0x00000000, 0x3F000000),  # +0 -> 0.5
        (0x80000000, 0x3F000000),  # -0 -> 0.5
        (0xFF800000, 0x00000000),  # -inf -> +0
        (0x7F800000, 0x3F800000),  # +inf -> 1
        (0x42480000, 0x3F800000),  # 50 -> 1
        (0xC2D20000, 0x00000000),  # -105 -> +0
        (0xFF7FFFFF, 0x00000000),
        (0xFFC12345, 0x7FC00000),
        (0x7FA00000, 0x7FC00000),
    ],
    ("sigmoid", F64): [
        (0x0000000000000000, 0x3FE0000000000000),
        (0x8000000000000000, 0x3FE0000000000000),
        (0xFFF0000000000000, 0x0000000000000000),
        (0x7FF0000000000000, 0x3FF0000000000000),
        (0x4049000000000000, 0x3FF0000000000000),  # 50 -> 1
        (0xC089000000000000, 0x0000000000000000),  # -800 -> +0
        (0xC08748E000000000, 0x0000000000000001),  # -745.109375 -> the least subnormal
        (0xFFF8000000000123, 0x7FF8000000000000),
        (0x7FF0000000000001, 0x7FF8000000000000),
    ],
}


@pytest.mark.parametrize("key", list(SPECIAL), ids=lambda k: f"{k[0]}-{k[1]}")
def test_special_values_bit_exact(key: tuple[str, DType]) -> None:
    name, dt = key
    ins = [i for i, _ in SPECIAL[key]]
    want = [o for _, o in SPECIAL[key]]
    got = run_bits(name, dt, ins)
    bad = [
        f"{i:#x} -> {g:#x}, want {w:#x}" for i, g, w in zip(ins, got, want, strict=True) if g != w
    ]
    assert not bad, f"{name} {dt}: " + "; ".join(bad)


@pytest.mark.parametrize("dt", [F32, F64])
def test_tanh_is_odd_bit_for_bit(dt: DType) -> None:
    rng = np.random.default_rng(7)
    x = rng.uniform(-30, 30, 4000).astype(dt.np)
    x[:1000] = np.exp2(rng.uniform(-60, 3, 1000)).astype(dt.np)
    fn = build("tanh", dt)
    pos, neg = (interpret(fn, {"x": v})[0].view(dt.uint) for v in (np.abs(x), -np.abs(x)))
    assert (neg == (pos ^ dt.uint.type(1 << (dt.bits - 1)))).all()


@pytest.mark.parametrize("dt", [F32, F64])
def test_sigmoid_symmetry_and_monotone_saturation(dt: DType) -> None:
    """sigmoid(x) + sigmoid(-x) = 1 within rounding, and the outputs never leave [0, 1]."""
    rng = np.random.default_rng(8)
    x = rng.uniform(-60, 60, 4000).astype(dt.np)
    fn = build("sigmoid", dt)
    p, n = interpret(fn, {"x": x})[0], interpret(fn, {"x": -x})[0]
    assert ((p >= 0) & (p <= 1) & (n >= 0) & (n <= 1)).all()
    assert np.max(np.abs(p.astype(np.float64) + n - 1)) <= 2 * np.finfo(dt.np).eps


# ----------------------------------------------------------------------------- accuracy


def measure_module() -> ModuleType:
    """scripts/measure-mathlib as a module: the tests use the very oracle the figures come from."""
    pytest.importorskip("gmpy2", reason="gmpy2 (MPFR) is the accuracy oracle: pip install gmpy2")
    name = "measure_mathlib"
    if name in sys.modules:
        return sys.modules[name]
    loader = importlib.machinery.SourceFileLoader(name, str(ROOT / "scripts" / "measure-mathlib"))
    spec = importlib.util.spec_from_loader(name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    loader.exec_module(module)
    return module


#: the documented bound (docs/mathlib.md): every function and dtype is within 1 ulp
MAX_ULP = 1.0


@pytest.mark.parametrize("dt", [F32, F64])
@pytest.mark.parametrize("name", NAMES)
def test_accuracy_sample_against_mpfr(name: str, dt: DType) -> None:
    row = measure_module().measure(name, dt, 20_000, seed=1)
    assert row["max_ulp"] <= MAX_ULP, row
    assert row["within_half"] > 0.95, row  # nearly all correctly rounded


def test_measure_counts_a_wrong_result() -> None:
    """The oracle itself: an error of one ulp reads as 1, a wrong special value as inf."""
    m = measure_module()
    xs = np.array([1.0, 0.0, np.inf, np.nan], dtype=np.float64)
    ys = np.exp(xs)
    ys[0] = np.nextafter(ys[0], 4.0)  # e rounded, then one ulp up: between 1/2 and 3/2 ulp
    ys[2] = np.finfo(np.float64).max
    err = m.ulp_errors("exp", xs, ys, F64)
    assert 0.5 < err[0] < 1.5 and err[1] == 0 and err[2] == np.inf and err[3] == 0


# ----------------------------------------------------------------------------- the expansion

#: each scalar expansion (parameter "x"): (node count, op histogram, fingerprint).  The
#: fingerprint covers every op, edge and constant bit; the count and histogram say what moved.
GOLDEN: dict[tuple[str, DType], tuple[int, str, str]] = {
    ("exp", F32): (
        55,
        "add 12, bitcast 2, const 15, convert 1, max 1, min 1, mul 12, param 1, round 1, shl 2, shr 1, sub 6",
        "5cdf6c136ce2f3f450390ec9d7c70fc9fd59bc2fc1511f9c016cb52083a81141",
    ),
    ("exp", F64): (
        70,
        "add 17, bitcast 2, const 20, convert 1, max 1, min 1, mul 17, param 1, round 1, shl 2, shr 1, sub 6",
        "ea4c530aa7aaf6405bd0d7cad4115a615f1ab2a6c6e921a7c890057d8b810f44",
    ),
    ("log", F32): (
        64,
        "add 11, and 1, bitcast 2, const 20, convert 1, div 1, eq 2, fma 1, ge 1, lt 1, mul 11, neg 1, param 1, select 5, shr 1, sub 4",
        "3e08257f8c8956167da335f20ccefb3160b31eb06e4b903bb738734738dfae5f",
    ),
    ("log", F64): (
        76,
        "add 15, and 1, bitcast 2, const 24, convert 1, div 1, eq 2, fma 1, ge 1, lt 1, mul 15, neg 1, param 1, select 5, shr 1, sub 4",
        "2d5e2191309aaa6f93c05cc4adc994449108c2ad2f05436b756691e0ff7b2c4c",
    ),
    ("tanh", F32): (
        77,
        "abs 1, add 19, bitcast 1, const 15, convert 1, copysign 1, div 2, fma 1, lt 1, max 1, min 1, mul 15, neg 1, param 1, round 1, select 1, shl 1, sub 13",
        "b938de279fefb641d16addbc743edff204ba7e25d8140098d388add55d186406",
    ),
    ("tanh", F64): (
        92,
        "abs 1, add 24, bitcast 1, const 20, convert 1, copysign 1, div 2, fma 1, lt 1, max 1, min 1, mul 20, neg 1, param 1, round 1, select 1, shl 1, sub 13",
        "b0f6103147fc2164a42a87cfdc971618a3ff501a2f87b83a9dcc6d53ee6a9794",
    ),
    ("sigmoid", F32): (
        89,
        "abs 1, add 20, bitcast 3, const 17, convert 1, div 4, fma 2, gt 1, lt 1, max 1, min 1, mul 16, neg 3, param 1, round 1, select 2, shl 3, shr 1, sub 10",
        "6723c6d3f4375332e596d543e977f11009358202c20367a4e72f467d2df482be",
    ),
    ("sigmoid", F64): (
        104,
        "abs 1, add 25, bitcast 3, const 22, convert 1, div 4, fma 2, gt 1, lt 1, max 1, min 1, mul 21, neg 3, param 1, round 1, select 2, shl 3, shr 1, sub 10",
        "152df0b66fe977552403c83c2e37ccd162d78c901f046c9121e5515d95b36867",
    ),
}


def op_counts(fn: Function) -> str:
    return ", ".join(
        f"{op} {n}" for op, n in sorted(Counter(str(n.op) for n in fn.nodes()).items())
    )


@pytest.mark.parametrize("key", list(GOLDEN), ids=lambda k: f"{k[0]}-{k[1]}")
def test_expansion_is_golden(key: tuple[str, DType]) -> None:
    name, dt = key
    count, ops, fingerprint = GOLDEN[key]
    fn = build(name, dt)
    assert (len(fn.nodes()), op_counts(fn)) == (count, ops)
    assert fn.fingerprint == fingerprint


#: elementwise contract ops, leaves and the broadcast of scalar constants: nothing else
ALLOWED = {str(op) for op in ELEMENTWISE} | {"param", "const", "broadcast"}


@pytest.mark.parametrize("dt", [F32, F64])
@pytest.mark.parametrize("name", NAMES)
def test_shaped_argument_matches_scalar_runs(name: str, dt: DType) -> None:
    """A shaped argument expands with broadcast constants; elementwise it equals the scalar run."""
    rng = np.random.default_rng(3)
    x = rng.uniform(-5, 5, (16, 2, 3)).astype(dt.np)
    if name == "log":
        x = np.abs(x)
    shaped = interpret(build(name, dt, (2, 3)), {"x": x})[0]
    flat = interpret(build(name, dt), {"x": x.reshape(-1)})[0]
    assert (shaped.view(dt.uint).reshape(-1) == flat.view(dt.uint)).all()
    ops = {str(n.op) for n in build(name, dt, (2, 3)).nodes()}
    assert ops <= ALLOWED, ops - ALLOWED
    consts = [n for n in build(name, dt, (2, 3)).nodes() if n.op == "const"]
    assert all(n.shape == () for n in consts)  # scalars, broadcast: never a full-size copy


@pytest.mark.parametrize("name", NAMES)
def test_non_float_arguments_are_rejected(name: str) -> None:
    b = FunctionBuilder("t")
    for dt in (DType.I32, DType.U64, DType.BOOL):
        with pytest.raises(TypeRuleError) as info:
            mathlib.FUNCTIONS[name](b.param(f"x{dt}", dt))
        assert info.value.code == "E0203"


def test_results_do_not_depend_on_construction_order() -> None:
    """Interning: expanding twice gives the very same nodes (and fingerprint)."""
    fns: list[Any] = [build(name, dt) for name in NAMES for dt in (F32, F64)]
    again = [build(name, dt) for name in NAMES for dt in (F32, F64)]
    assert [f.fingerprint for f in fns] == [f.fingerprint for f in again]


# ----------------------------------------------------------------------------- the document

#: the constant tables of docs/mathlib.md: name, f64 bits, f32 bits ("-": none)
DOC_TABLE = """
EXP_LO C087500000000000 C2D00000      EXP_HI 4086300000000000 42B20000
INVLN2 3FF71547652B82FE 3FB8AA3B      LN2HI 3FE62E42FEFA3800 3F317200
LN2LO 3D2EF35793C76730 35BFBE8E       LOG_OFF 3FE6A09E667F3BCD 3F3504F3
MIN_NORMAL 0010000000000000 00800000  TWO_POW_MANT 4330000000000000 4B000000
TANH_TINY 3E40000000000000 39800000   TANH_SAT 4036000000000000 41200000
SIG_HUGE 4087500000000000 42D00000    SIG_TAIL 4046800000000000 41C00000
P0 3FE0000000000000 3F000000  P1 3FC5555555555557 3E2AAAAB  P2 3FA555555555554E 3D2AAA75
P3 3F811111111100E2 3C0888A6  P4 3F56C16C16C1A09B 3AB6A181  P5 3F2A01A01ABE5991 39503969
P6 3EFA01A019059689 -  P7 3EC71DE023653674 -  P8 3E927E510E285C8F -  P9 3E5AF4DE43E58913 -
P10 3E21F19FC7ED54AA -
Q0 3FE5555555555555 3F2AAAAB  Q1 3FD9999999999A39 3ECCCCF6  Q2 3FD2492492476A71 3E922E14
Q3 3FCC71C7201986BE 3E6EEA1B  Q4 3FC745CF8EB46E66 -  Q5 3FC3B1C3A84ED830 -
Q6 3FC0FBE1027B3574 -  Q7 3FC0C08E89F36EA1 -
"""


class Transcript:
    """The steps of docs/mathlib.md in numpy, written from the doc (not from kera.mathlib).

    Every numpy op below is the contract op of the same name on these operands (the clamps
    never see ±0 against ±0, where numpy's minimum/maximum would be unspecified); NaNs are
    canonicalised once at the end, as every NaN the steps produce is arithmetic."""

    def __init__(self, dt: DType) -> None:
        self.ft, self.it, self.ut = dt.np.type, np.dtype(f"<i{dt.nbytes}").type, dt.uint.type
        self.mant, self.bias = (52, 1023) if dt is F64 else (23, 127)
        self.kmin = -66 if dt is F64 else -36
        words = DOC_TABLE.split()
        col = 1 if dt is F64 else 2
        self.raw = {
            words[i]: int(words[i + col], 16)
            for i in range(0, len(words), 3)
            if words[i + col] != "-"
        }
        self.k = {n: np.array(b, dtype=self.ut).view(self.ft)[()] for n, b in self.raw.items()}
        self.p = [self.k[f"P{i}"] for i in range(11) if f"P{i}" in self.k]
        self.q = [self.k[f"Q{i}"] for i in range(8) if f"Q{i}" in self.k]

    def fma(self, a: Any, b: Any, c: Any) -> Any:
        return (fma64 if self.ft is np.float64 else fma32)(a, b, c)

    def horner(self, coeffs: list[Any], v: Any) -> Any:
        acc = coeffs[-1]
        for c in reversed(coeffs[:-1]):
            acc = acc * v + c
        return acc

    def to_int(self, v: Any) -> Any:
        return np.where(np.isnan(v), 0, v).astype(self.it)

    def pow2(self, k: Any) -> Any:
        return ((k + self.it(self.bias)) << self.it(self.mant)).view(self.ft)

    def exp_core(self, t: Any) -> tuple[Any, Any, Any]:
        one, k = self.ft(1), self.k
        kf = np.rint(t * k["INVLN2"])
        rh = t - kf * k["LN2HI"]
        c = kf * k["LN2LO"]
        r = rh - c
        rl = (rh - r) - c
        tail = ((r * r) * self.horner(self.p, r)) + rl
        h0 = one + r
        l0 = ((one - h0) + r) + tail
        h = h0 + l0
        return self.to_int(kf), h, (h0 - h) + l0

    def scale(self, h: Any, k: Any) -> Any:
        k1 = k >> self.it(1)
        return (h * self.pow2(k1)) * self.pow2(k - k1)

    def exp(self, x: Any) -> Any:
        k, h, _ = self.exp_core(np.minimum(np.maximum(x, self.k["EXP_LO"]), self.k["EXP_HI"]))
        return self.scale(h, k)

    def log(self, x: Any) -> Any:
        ft, it, k = self.ft, self.it, self.k
        sub = x < k["MIN_NORMAL"]
        xs = np.where(sub, x * k["TWO_POW_MANT"], x)
        adj = np.where(sub, it(-self.mant), it(0))
        ix = xs.view(it)
        tmp = ix - it(self.raw["LOG_OFF"])
        z = (ix - (tmp & it(-1 << self.mant))).view(ft)
        kf = ((tmp >> it(self.mant)) + adj).astype(ft)
        f = z - ft(1)
        s = f / (ft(2) + f)
        w = s * s
        big_r = w * self.horner(self.q, w)
        hf = f * ft(0.5)
        u = s * ((hf * f) + big_r)
        lo = (kf * k["LN2LO"]) + self.fma(-hf, f, u)
        a = kf * k["LN2HI"]
        hi = a + f
        y = hi + (((a - hi) + f) + lo)
        y = np.where(x == np.inf, ft(np.inf), y)
        y = np.where(x == 0, ft(-np.inf), y)
        return np.where(x >= 0, y, ft(np.nan))

    def one_plus(self, eh: Any, el: Any) -> tuple[Any, Any]:
        one = self.ft(1)
        dh = one + eh
        return dh, ((one - dh) + eh) + el

    def tanh(self, x: Any) -> Any:
        one, k = self.ft(1), self.k
        a = np.abs(x)
        ac = np.minimum(np.maximum(a, k["TANH_TINY"]), k["TANH_SAT"])
        kk, h, lo = self.exp_core(ac * self.ft(-2))
        sc = self.pow2(kk)
        eh, el = h * sc, lo * sc
        n0 = one - eh
        n1 = ((one - n0) - eh) - el
        nh = n0 + n1
        nl = (n0 - nh) + n1
        dh, dl = self.one_plus(eh, el)
        q = nh / dh
        y = q + (((self.fma(-q, dh, nh) + nl) - (q * dl)) / dh)
        y = np.where(a < k["TANH_TINY"], a, y)
        return y * np.copysign(one, x)

    def sigmoid(self, x: Any) -> Any:
        one, k = self.ft(1), self.k
        a = np.abs(x)
        kk, h, lo = self.exp_core(-np.minimum(a, k["SIG_HUGE"]))
        tail = self.scale(h, kk)
        sc = self.pow2(np.maximum(kk, self.it(self.kmin)))
        eh, el = h * sc, lo * sc
        dh, dl = self.one_plus(eh, el)
        qp = one / dh
        pos = qp + ((self.fma(-qp, dh, np.full_like(dh, one)) - (qp * dl)) / dh)
        qn = eh / dh
        neg = qn + (((self.fma(-qn, dh, eh) + el) - (qn * dl)) / dh)
        neg = np.where(a > k["SIG_TAIL"], tail, neg)
        return np.where(x < 0, neg, pos)


def transcript(name: str, x: Any, dt: DType) -> Any:
    with np.errstate(all="ignore"):
        y = np.array(getattr(Transcript(dt), name)(x), dtype=dt.np)
    y[np.isnan(y)] = dt.np.type(np.nan)
    return y


@pytest.mark.parametrize("dt", [F32, F64])
@pytest.mark.parametrize("name", NAMES)
def test_doc_transcription_matches_expansion(name: str, dt: DType) -> None:
    """A reader's reimplementation of docs/mathlib.md gives the expansion's bits exactly."""
    rng = np.random.default_rng(3)
    raw = rng.integers(0, 1 << 63, 8000, dtype=np.uint64) * np.uint64(2)
    bits = raw if dt is F64 else (raw >> np.uint64(32)).astype(np.uint32)
    wide, near = rng.uniform(-800, 800, 6000), rng.uniform(-3, 3, 6000)
    xs = np.concatenate([bits.view(dt.np), wide.astype(dt.np), near.astype(dt.np)])
    want = interpret(build(name, dt), {"x": xs})[0].view(dt.uint)
    got = transcript(name, xs, dt).view(dt.uint)
    bad = np.nonzero(want != got)[0]
    assert len(bad) == 0, [(xs[i], want[i], got[i]) for i in bad[:5]]


def test_doc_tables_hold_the_transcribed_constants() -> None:
    """Each constant of DOC_TABLE stands, with both bit patterns, on its row of the doc."""
    rows = {}
    for line in (ROOT / "docs" / "mathlib.md").read_text().splitlines():
        cells = [c.strip().strip("`") for c in line.split("|")[1:-1]]
        if len(cells) >= 3:
            rows[cells[0]] = cells[1:3]
    words = DOC_TABLE.split()
    for i in range(0, len(words), 3):
        name, b64, b32 = words[i : i + 3]
        assert rows.get(name) == [b64, "" if b32 == "-" else b32], (name, rows.get(name))
