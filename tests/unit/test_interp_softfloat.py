"""The reference interpreter against Berkeley SoftFloat (softfloatpy), bit for bit.

100k edge-biased cases per op and width (see tests/floatgen.py); KERA_ORACLE_CASES raises it
for a slow run.  SoftFloat's results are mapped through the contract's rules where the contract
adds some (canonical NaN; saturating float->int with NaN -> 0); everything else must match
SoftFloat exactly.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import softfloatpy as sf
from floatgen import as_float, edge_bits, partner_bits

from kera.dtypes import CANONICAL_NAN, DType
from kera.interp import interpret
from kera.ir import FunctionBuilder

N = int(os.environ.get("KERA_ORACLE_CASES", "100000"))
FT = {32: DType.F32, 64: DType.F64}
SF: dict[int, tuple[type[sf.Float32] | type[sf.Float64], int]] = {
    32: (sf.Float32, 4),
    64: (sf.Float64, 8),
}
NEAR = sf.RoundingMode.NEAR_EVEN


@pytest.fixture(autouse=True)
def _rne() -> None:
    sf.set_rounding_mode(NEAR)


def sfloat(bits: int, x: int) -> Any:
    cls, nb = SF[bits]
    return cls.from_bytes(int(x).to_bytes(nb, "big"))


def sbits(v: Any) -> int:
    return int.from_bytes(v.to_bytes(), "big")


def canon_bits(x: int, bits: int) -> int:
    ew, mw = (8, 23) if bits == 32 else (11, 52)
    exp = (x >> mw) & ((1 << ew) - 1)
    mant = x & ((1 << mw) - 1)
    is_nan = exp == (1 << ew) - 1 and mant != 0
    return CANONICAL_NAN[FT[bits]] if is_nan else x


def run_op(op: str, dtypes: list[DType], out_attrs: dict[str, Any], args: list[Any]) -> Any:
    b = FunctionBuilder(op)
    ps = [b.param(f"p{i}", dt) for i, dt in enumerate(dtypes)]
    fn = b.build(b.op(op, *ps, **out_attrs))
    (out,) = interpret(fn, {f"p{i}": a for i, a in enumerate(args)})
    return out


def check(got: Any, expected: list[int], what: str, operands: list[Any]) -> None:
    exp = np.array(expected, dtype=np.uint64)
    if got.dtype.kind == "b":
        got_bits = got.astype(np.uint64)
    else:
        got_bits = got.view(f"<u{got.dtype.itemsize}").astype(np.uint64)
    bad = np.nonzero(got_bits != exp)[0]
    if len(bad):
        i = int(bad[0])
        ops = ", ".join(hex(int(o[i])) for o in operands)
        pytest.fail(
            f"{what}: {len(bad)} of {len(exp)} differ; first at {i}: operands {ops} "
            f"got {int(got_bits[i]):#x} expected {int(exp[i]):#x}"
        )


BINARY: dict[str, Callable[..., Any]] = {
    "add": lambda w: getattr(sf, f"f{w}_add"),
    "sub": lambda w: getattr(sf, f"f{w}_sub"),
    "mul": lambda w: getattr(sf, f"f{w}_mul"),
    "div": lambda w: getattr(sf, f"f{w}_div"),
}


@pytest.mark.parametrize("width", [32, 64])
@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary(op: str, width: int) -> None:
    rng = np.random.default_rng([width, len(op), ord(op[0])])
    a = edge_bits(rng, N, width)
    b = partner_bits(rng, a, width)
    f = BINARY[op](width)
    expected = [
        canon_bits(sbits(f(sfloat(width, x), sfloat(width, y))), width)
        for x, y in zip(a.tolist(), b.tolist(), strict=True)
    ]
    got = run_op(op, [FT[width]] * 2, {}, [as_float(a, width), as_float(b, width)])
    check(got, expected, f"f{width} {op}", [a, b])


@pytest.mark.parametrize("width", [32, 64])
def test_fma(width: int) -> None:
    rng = np.random.default_rng([width, 99])
    a = edge_bits(rng, N, width)
    b = partner_bits(rng, edge_bits(rng, N, width), width)
    # c near -(a*b) makes cancellation likely: take the product's bits, perturbed
    with np.errstate(all="ignore"):
        prod = (as_float(a, width) * as_float(b, width)).view(a.dtype)
    c = np.where(
        rng.integers(0, 2, N) == 0, partner_bits(rng, prod, width), edge_bits(rng, N, width)
    )
    c = c.astype(a.dtype)
    f = getattr(sf, f"f{width}_mul_add")
    expected = [
        canon_bits(sbits(f(sfloat(width, x), sfloat(width, y), sfloat(width, z))), width)
        for x, y, z in zip(a.tolist(), b.tolist(), c.tolist(), strict=True)
    ]
    got = run_op("fma", [FT[width]] * 3, {}, [as_float(x, width) for x in (a, b, c)])
    check(got, expected, f"f{width} fma", [a, b, c])


def test_fma_known_double_rounding_case() -> None:
    a = np.array([np.float32(1 + 2**-23)])
    b = np.array([np.float32((1 - 2**-23) * 2**-24)])
    got = run_op("fma", [DType.F32] * 3, {}, [a, b, a])
    assert int(got.view(np.uint32)[0]) == 0x3F800001


@pytest.mark.parametrize("width", [32, 64])
def test_sqrt(width: int) -> None:
    rng = np.random.default_rng([width, 7])
    a = edge_bits(rng, N, width)
    f = getattr(sf, f"f{width}_sqrt")
    expected = [canon_bits(sbits(f(sfloat(width, x))), width) for x in a.tolist()]
    check(run_op("sqrt", [FT[width]], {}, [as_float(a, width)]), expected, f"f{width} sqrt", [a])


ROUNDING = {
    "floor": sf.RoundingMode.MIN,
    "ceil": sf.RoundingMode.MAX,
    "trunc": sf.RoundingMode.MIN_MAG,
    "round": sf.RoundingMode.NEAR_EVEN,
}


@pytest.mark.parametrize("width", [32, 64])
@pytest.mark.parametrize("op", sorted(ROUNDING))
def test_rounding(op: str, width: int) -> None:
    rng = np.random.default_rng([width, 11, len(op)])
    a = edge_bits(rng, N, width)
    f = getattr(sf, f"f{width}_round_to_int")
    mode = ROUNDING[op]
    expected = [canon_bits(sbits(f(sfloat(width, x), mode, False)), width) for x in a.tolist()]
    check(run_op(op, [FT[width]], {}, [as_float(a, width)]), expected, f"f{width} {op}", [a])


def test_f32_to_f64_and_back() -> None:
    rng = np.random.default_rng(5)
    a = edge_bits(rng, N, 32)
    up = [canon_bits(sbits(sf.f32_to_f64(sfloat(32, x))), 64) for x in a.tolist()]
    check(run_op("convert", [DType.F32], {"to": DType.F64}, [as_float(a, 32)]), up, "f32->f64", [a])
    d = edge_bits(rng, N, 64)
    down = [canon_bits(sbits(sf.f64_to_f32(sfloat(64, x))), 32) for x in d.tolist()]
    check(
        run_op("convert", [DType.F64], {"to": DType.F32}, [as_float(d, 64)]), down, "f64->f32", [d]
    )


INTS = {DType.I32: "i32", DType.I64: "i64", DType.U32: "ui32", DType.U64: "ui64"}


def int_edges(rng: np.random.Generator, dt: DType, n: int) -> Any:
    edges = [dt.min, dt.min + 1, -1, 0, 1, dt.max - 1, dt.max, 1 << 24, (1 << 24) + 1]
    edges += [(1 << 53) + 1, (1 << 53) + 3, (1 << 31) - 1, (1 << 62) + (1 << 39) + 1]
    edges = [e for e in edges if dt.min <= e <= dt.max]
    raw = rng.integers(0, 1 << 63, n, dtype=np.uint64) ^ (
        rng.integers(0, 2, n, dtype=np.uint64) << np.uint64(63)
    )
    vals = raw.astype(dt.uint).view(dt.np)
    pick = rng.integers(0, 3, n) == 0
    vals[pick] = np.array(edges, dtype=object).astype(dt.np)[
        rng.integers(0, len(edges), int(pick.sum()))
    ]
    # values near powers of two exercise ties in int->float rounding
    shift = rng.integers(0, dt.bits - 1, n).astype(dt.np)
    tie = rng.integers(0, 3, n) == 1
    near = (np.ones(n, dt.np) << shift) + rng.integers(-2, 3, n).astype(dt.np)
    vals[tie] = near[tie]
    return vals


@pytest.mark.parametrize("src", list(INTS))
@pytest.mark.parametrize("width", [32, 64])
def test_int_to_float(src: DType, width: int) -> None:
    rng = np.random.default_rng([src.code, width])
    v = int_edges(rng, src, N)
    to_sf = getattr(sf, f"{INTS[src]}_to_f{width}")
    ctors: dict[str, type[sf.Int32 | sf.Int64 | sf.UInt32 | sf.UInt64]] = {
        "i32": sf.Int32,
        "i64": sf.Int64,
        "ui32": sf.UInt32,
        "ui64": sf.UInt64,
    }
    ctor = ctors[INTS[src]]
    nb = src.nbytes
    expected = [
        sbits(to_sf(ctor.from_bytes(int(x).to_bytes(nb, "big", signed=src.is_signed))))
        for x in v.tolist()
    ]
    got = run_op("convert", [src], {"to": FT[width]}, [v])
    check(got, expected, f"{src}->f{width}", [v])


@pytest.mark.parametrize("dst", list(INTS))
@pytest.mark.parametrize("width", [32, 64])
def test_float_to_int(dst: DType, width: int) -> None:
    rng = np.random.default_rng([dst.code, width, 3])
    a = edge_bits(rng, N, width)
    # also values just around the saturation bounds
    bound = as_float(a, width)
    f = getattr(sf, f"f{width}_to_{INTS[dst]}")
    expected = []
    for x, xf in zip(a.tolist(), bound.tolist(), strict=True):
        if xf != xf:
            expected.append(0)
            continue
        t = float(np.trunc(xf))
        if t > dst.max:
            r = dst.max
        elif t < dst.min:
            r = dst.min
        else:
            r = int(f(sfloat(width, x), sf.RoundingMode.MIN_MAG, False).to_int())
        expected.append(r & ((1 << dst.bits) - 1))
    got = run_op("convert", [FT[width]], {"to": dst}, [bound])
    check(got, expected, f"f{width}->{dst}", [a])
