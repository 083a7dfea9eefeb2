"""Contract rules that SoftFloat does not define, checked bit for bit on the interpreter."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kera.dtypes import DType
from kera.interp import interpret
from kera.ir import FunctionBuilder

F32NAN, F64NAN = 0x7FC00000, 0x7FF8000000000000


def f32(*bits: int) -> Any:
    return np.array(bits, dtype=np.uint32).view(np.float32)


def u32(x: Any) -> list[int]:
    return [int(v) for v in np.asarray(x).view(np.uint32)]


def run1(op: str, args: list[Any], dtype: DType, **attrs: Any) -> Any:
    b = FunctionBuilder("t")
    ps = [b.param(f"p{i}", dtype, a.shape[1:]) for i, a in enumerate(args)]
    fn = b.build(b.op(op, *ps, **attrs))
    return interpret(fn, {f"p{i}": a for i, a in enumerate(args)})[0]


PZ, NZ, PINF, NINF, ONE = 0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x3F800000
QNAN_PAYLOAD, NEG_SNAN = 0x7FC12345, 0xFF800001


def test_min_max_signed_zero_and_nan() -> None:
    a = f32(PZ, NZ, QNAN_PAYLOAD, ONE, NEG_SNAN, PINF)
    b = f32(NZ, PZ, ONE, QNAN_PAYLOAD, ONE, NINF)
    assert u32(run1("min", [a, b], DType.F32)) == [NZ, NZ, F32NAN, F32NAN, F32NAN, NINF]
    assert u32(run1("max", [a, b], DType.F32)) == [PZ, PZ, F32NAN, F32NAN, F32NAN, PINF]


def test_sign_ops_keep_payloads() -> None:
    a = f32(QNAN_PAYLOAD, NEG_SNAN, PZ)
    assert u32(run1("neg", [a], DType.F32)) == [0xFFC12345, 0x7F800001, NZ]
    assert u32(run1("abs", [a], DType.F32)) == [QNAN_PAYLOAD, 0x7F800001, PZ]
    b = f32(NZ, PZ, NINF)
    assert u32(run1("copysign", [a, b], DType.F32)) == [0xFFC12345, 0x7F800001, NZ]


def test_arithmetic_nan_is_canonical() -> None:
    a = f32(PINF, QNAN_PAYLOAD, NEG_SNAN, 0xBF800000)
    b = f32(NINF, ONE, ONE, ONE)
    assert u32(run1("add", [a, b], DType.F32)) == [F32NAN, F32NAN, F32NAN, PZ]
    assert u32(run1("sqrt", [f32(0xBF800000, NZ)], DType.F32)) == [F32NAN, NZ]


def test_integer_division_is_total() -> None:
    mn = np.iinfo(np.int32).min
    a = np.array([7, -7, 7, mn, mn, 0], dtype=np.int32)
    b = np.array([0, 2, -2, -1, 0, 0], dtype=np.int32)
    assert run1("div", [a, b], DType.I32).tolist() == [0, -3, -3, mn, 0, 0]
    assert run1("rem", [a, b], DType.I32).tolist() == [7, -1, 1, 0, mn, 0]
    ua = np.array([7, 0xFFFFFFFF], dtype=np.uint32)
    ub = np.array([0, 2], dtype=np.uint32)
    assert run1("div", [ua, ub], DType.U32).tolist() == [0, 0x7FFFFFFF]
    assert run1("rem", [ua, ub], DType.U32).tolist() == [7, 1]


def test_i64_min_div_minus_one() -> None:
    mn = np.iinfo(np.int64).min
    a = np.array([mn, mn], dtype=np.int64)
    b = np.array([-1, 3], dtype=np.int64)
    assert run1("div", [a, b], DType.I64).tolist() == [mn, mn // 3 + 1]
    assert run1("rem", [a, b], DType.I64).tolist() == [0, -2]


def test_shift_amounts_are_masked() -> None:
    a = np.array([1, 1, -8, -8], dtype=np.int32)
    s = np.array([33, -1, 1, 35], dtype=np.int32)
    assert run1("shl", [a, s], DType.I32).tolist() == [2, -(1 << 31), -16, -64]
    assert run1("shr", [a, s], DType.I32).tolist() == [0, 0, -4, -1]
    u = np.array([0x80000000, 0x80000000], dtype=np.uint32)
    us = np.array([31, 63], dtype=np.uint32)
    assert run1("shr", [u, us], DType.U32).tolist() == [1, 1]


@pytest.mark.parametrize(
    ("dst", "expected"),
    [
        (DType.I32, [0, 2147483647, -2147483648, -1, 0, 0, 2147483647]),
        (DType.U32, [0, 4294967295, 0, 0, 0, 0, 2**31]),
        (DType.I64, [0, 2**63 - 1, -(2**63), -1, 0, 0, 2**31]),
    ],
)
def test_float_to_int_saturates(dst: DType, expected: list[int]) -> None:
    x = np.array([np.nan, np.inf, -np.inf, -1.5, -0.9, 0.0, 2.0**31], dtype=np.float64)
    assert run1("convert", [x], DType.F64, to=dst).tolist() == expected


def test_int_conversions_wrap_like_rust_as() -> None:
    x = np.array([-1, 300, -(2**31)], dtype=np.int32)
    assert run1("convert", [x], DType.I32, to=DType.U64).tolist() == [2**64 - 1, 300, 2**64 - 2**31]
    assert run1("convert", [x], DType.I32, to=DType.BOOL).tolist() == [True, True, True]
    y = np.array([2**40 + 5, -1], dtype=np.int64)
    assert run1("convert", [y], DType.I64, to=DType.I32).tolist() == [5, -1]


def tree_sum_reference(row: list[float]) -> float:
    """The contract's tree, written as the spec says, one element at a time in float32."""
    p = 1
    while p < len(row):
        p *= 2
    x = [np.float32(v) for v in row] + [np.float32(-0.0)] * (p - len(row))
    while p > 1:
        s = p // 2
        x = [np.float32(x[i] + x[i + s]) for i in range(s)]
        p = s
    return float(x[0])


@pytest.mark.parametrize("n", [1, 3, 5, 17, 100])
def test_sum_tree_order(n: int) -> None:
    rng = np.random.default_rng(n)
    x = (rng.standard_normal((8, n)) * 10.0 ** rng.integers(-8, 8, (8, n))).astype(np.float32)
    got = run1("sum", [x], DType.F32, axis=0)
    want = np.array([tree_sum_reference(list(r)) for r in x], dtype=np.float32)
    assert got.view(np.uint32).tolist() == want.view(np.uint32).tolist()


def test_sum_identity_is_negative_zero_and_length_one_canonicalises() -> None:
    x = f32(NZ, NZ, NZ).reshape(1, 3)
    assert u32(run1("sum", [x], DType.F32, axis=0)) == [NZ]
    one = f32(QNAN_PAYLOAD).reshape(1, 1)
    for op in ("sum", "prod", "amin", "amax"):
        assert u32(run1(op, [one], DType.F32, axis=0)) == [F32NAN]


def test_amax_propagates_nan_anywhere() -> None:
    x = f32(ONE, PINF, QNAN_PAYLOAD, NINF, NZ).reshape(1, 5)
    assert u32(run1("amax", [x], DType.F32, axis=0)) == [F32NAN]
    z = f32(NZ, PZ, NZ).reshape(1, 3)
    assert u32(run1("amax", [z], DType.F32, axis=0)) == [PZ]
    assert u32(run1("amin", [z], DType.F32, axis=0)) == [NZ]


def test_int_reductions_wrap() -> None:
    x = np.array([[2**31 - 1, 1, 5]], dtype=np.int32)
    assert run1("sum", [x], DType.I32, axis=0).tolist() == [-(2**31) + 5]
    assert run1("amin", [x], DType.I32, axis=0).tolist() == [1]


def test_matmul_rounds_each_product() -> None:
    rng = np.random.default_rng(3)
    a = rng.standard_normal((4, 3, 5)).astype(np.float32)
    b = rng.standard_normal((4, 5, 2)).astype(np.float32)
    got = run1("matmul", [a, b], DType.F32)
    for n in range(4):
        for i in range(3):
            for j in range(2):
                prods = [float(np.float32(a[n, i, k] * b[n, k, j])) for k in range(5)]
                want = np.float32(tree_sum_reference(prods))
                assert got[n, i, j].view(np.uint32) == want.view(np.uint32)


def test_select_and_bitcast_move_bits() -> None:
    c = np.array([True, False])
    a = f32(QNAN_PAYLOAD, ONE)
    b = f32(ONE, NEG_SNAN)
    b_ = FunctionBuilder("s")
    pc, pa, pb = b_.param("c", DType.BOOL), b_.param("a", DType.F32), b_.param("b", DType.F32)
    fn = b_.build(b_.op("select", pc, pa, pb), b_.op("bitcast", pa, to=DType.U32))
    sel, cast = interpret(fn, {"c": c, "a": a, "b": b})
    assert u32(sel) == [QNAN_PAYLOAD, NEG_SNAN]
    assert cast.tolist() == [QNAN_PAYLOAD, ONE]


def test_overrides_model_a_deviating_target() -> None:
    a, b = f32(PZ, QNAN_PAYLOAD), f32(NZ, ONE)
    bx = FunctionBuilder("m")
    fn = bx.build(bx.op("min", bx.param("a", DType.F32), bx.param("b", DType.F32)))

    def minss(node: Any, x: Any, y: Any) -> Any:  # x86 MINSS: returns the second operand
        return np.where(x < y, x, y)

    (got,) = interpret(fn, {"a": a, "b": b}, overrides={"min": minss})
    assert u32(got) == [NZ, ONE]
