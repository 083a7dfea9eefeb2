"""ptx-emu on handwritten PTX: expected bits come from the PTX ISA text, not from our codegen.

Each test wraps a few instructions in a kernel (keracheck.ptx_emu.snippets.Snippet, one test
vector per thread) and compares the output *bits*.  ISA references: PTX ISA 9.7.x sections as
cited next to each group.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest
import softfloatpy as sf

from keracheck.ptx_emu import (
    GlobalMemory,
    NanPolicy,
    PtxExecutionError,
    PtxSyntaxError,
    PtxUnsupportedError,
    load,
    parse,
)
from keracheck.ptx_emu.numerics import fma32_exact
from keracheck.ptx_emu.snippets import Snippet

NV_NAN32 = 0x7FFFFFFF
NV_NAN64 = 0xFFF8000000000000
INF32, NINF32 = 0x7F800000, 0xFF800000
INF64 = 0x7FF0000000000000


def f32(x: float) -> int:
    return int(np.array(x, dtype=np.float32).view(np.uint32))


def f64(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def run(
    body: str,
    inputs: Mapping[str, str],
    outputs: Mapping[str, str],
    values: Mapping[str, Sequence[Any]],
    temps: Mapping[str, str] | None = None,
    policy: NanPolicy | None = None,
) -> dict[str, list[int]]:
    """Run a snippet; input values are given as bits (ints) for every type; outputs as bits."""
    snip = Snippet(body, inputs, outputs, temps or {})
    arrays = {}
    for reg, ty in inputs.items():
        width = 8 if ty == "pred" else int(ty[1:])
        arrays[reg] = np.array(
            [int(v) % (1 << width) for v in values[reg]], dtype=f"<u{width // 8}"
        )
    out = snip.run(arrays, policy=policy)
    result = {}
    for reg, arr in out.items():
        bits = arr.view(f"<u{arr.dtype.itemsize}") if arr.dtype.kind != "b" else arr
        result[reg] = [int(v) for v in bits]
    return result


def unary(body: str, ty: str, out_ty: str, xs: Sequence[int], **kw: Any) -> list[int]:
    return run(body, {"%a": ty}, {"%d": out_ty}, {"%a": xs}, **kw)["%d"]


def binary(body: str, ty: str, out_ty: str, xs: Sequence[int], ys: Sequence[int]) -> list[int]:
    return run(body, {"%a": ty, "%b": ty}, {"%d": out_ty}, {"%a": xs, "%b": ys})["%d"]


# -- NaN rules (9.7.3 intro: f32 "unspecified NaN", f64 "NaN payloads are supported") -------


def test_f32_generated_and_propagated_nans_are_nvidia_canonical() -> None:
    xs = [INF32, 0x7FC12345, 0x7F800001, f32(1.0)]
    ys = [NINF32, f32(1.0), f32(2.0), 0xFFC00001]
    assert binary("add.rn.f32 %d, %a, %b;", "f32", "f32", xs, ys) == [NV_NAN32] * 4


def test_f64_nan_payload_propagates_quieted_and_generated_nan() -> None:
    snan = 0x7FF0000000000001
    xs = [snan, f64(1.0), INF64, 0x7FF8000000000002]
    ys = [f64(1.0), 0xFFF8000000000005, INF64 | (1 << 63), 0x7FF8000000000003]
    got = binary("add.rn.f64 %d, %a, %b;", "f64", "f64", xs, ys)
    assert got == [snan | (1 << 51), 0xFFF8000000000005, NV_NAN64, 0x7FF8000000000002]


def test_adversarial_policy_randomises_unspecified_nans() -> None:
    xs = [INF32] * 64
    ys = [NINF32] * 64
    snip_out = run(
        "add.rn.f32 %d, %a, %b;",
        {"%a": "f32", "%b": "f32"},
        {"%d": "f32"},
        {"%a": xs, "%b": ys},
        policy=NanPolicy("adversarial", seed=3),
    )["%d"]
    assert all((v & 0x7FFFFFFF) > INF32 for v in snip_out)
    assert len(set(snip_out)) > 1


def test_float_arithmetic_is_ieee_with_subnormals() -> None:
    tiny = 1  # 2**-149
    got = binary(
        "mul.rn.f32 %d, %a, %b;", "f32", "f32", [3 * tiny, f32(1e30)], [f32(0.5), f32(1e10)]
    )
    assert got == [2, INF32]  # 1.5 * 2**-149 ties to even; overflow to +inf
    got = binary("div.rn.f32 %d, %a, %b;", "f32", "f32", [f32(1.0), f32(-1.0)], [0, 0])
    assert got == [INF32, NINF32]
    got = unary("sqrt.rn.f32 %d, %a;", "f32", "f32", [f32(-1.0), 1 << 31, f32(2.0)])
    assert got == [NV_NAN32, 1 << 31, f32(float(np.sqrt(np.float32(2.0))))]
    got = unary("rcp.rn.f64 %d, %a;", "f64", "f64", [f64(3.0), 1 << 63])
    assert got == [f64(1 / 3), INF64 | (1 << 63)]


# -- fma: exact (9.7.3.6 "computes the product of a and b to infinite precision") ----------


def test_fma_f32_counterexample_to_float64_emulation() -> None:
    a = 0x3F800001  # 1 + 2**-23
    b = f32((1 - 2**-23) * 2**-24)
    got = run(
        "fma.rn.f32 %d, %a, %b, %c;",
        {"%a": "f32", "%b": "f32", "%c": "f32"},
        {"%d": "f32"},
        {"%a": [a], "%b": [b], "%c": [a]},
    )["%d"]
    assert got == [0x3F800001]  # float64 emulation gives 0x3f800002


def _sf32_fma(a: int, b: int, c: int) -> int:
    args = [sf.Float32.from_bytes(v.to_bytes(4, "big")) for v in (a, b, c)]
    return int.from_bytes(sf.f32_mul_add(*args).to_bytes(), "big")


def _sf64_fma(a: int, b: int, c: int) -> int:
    args = [sf.Float64.from_bytes(v.to_bytes(8, "big")) for v in (a, b, c)]
    return int.from_bytes(sf.f64_mul_add(*args).to_bytes(), "big")


def test_fma_f32_matches_softfloat_on_random_and_cancelling_inputs() -> None:
    rng = np.random.default_rng(7)
    n = 4000
    a = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    # subnormal-range operands and c close to -a*b (catastrophic cancellation)
    a[: n // 4] = rng.integers(0, 0x01000000, n // 4, dtype=np.uint32)
    with np.errstate(all="ignore"):
        prod = a.view(np.float32).astype(np.float64) * b.view(np.float32).astype(np.float64)
        near = (-prod).astype(np.float32).view(np.uint32).astype(np.int64)
    c = (near + rng.integers(-2, 3, n)).astype(np.uint32)
    c[::3] = rng.integers(0, 2**32, len(c[::3]), dtype=np.uint64).astype(np.uint32)
    got = fma32_exact(a, b, c)
    for x, y, z, g in zip(a, b, c, got, strict=True):
        want = _sf32_fma(int(x), int(y), int(z))
        if (want & 0x7FFFFFFF) > INF32:
            assert (int(g) & 0x7FFFFFFF) > INF32
        else:
            assert int(g) == want, (hex(x), hex(y), hex(z))


def test_fma_f64_matches_softfloat_and_propagates_payload() -> None:
    rng = np.random.default_rng(11)
    xs = [int(v) for v in rng.integers(0, 2**63, 64, dtype=np.uint64)] + [0x7FF0000000000009]
    ys = [int(v) for v in rng.integers(0, 2**63, 64, dtype=np.uint64)] + [f64(2.0)]
    zs = [int(v) ^ (1 << 63) for v in rng.integers(0, 2**63, 64, dtype=np.uint64)] + [f64(1.0)]
    got = run(
        "fma.rn.f64 %d, %a, %b, %c;",
        {"%a": "f64", "%b": "f64", "%c": "f64"},
        {"%d": "f64"},
        {"%a": xs, "%b": ys, "%c": zs},
    )["%d"]
    for x, y, z, g in zip(xs[:-1], ys[:-1], zs[:-1], got[:-1], strict=True):
        want = _sf64_fma(x, y, z)
        assert g == (NV_NAN64 if (want & ~(1 << 63)) > INF64 else want)
    assert got[-1] == 0x7FF8000000000009


# -- min/max (9.7.3.11/12): -0 < +0; min_num vs .NaN ----------------------------------------


def test_min_max_signed_zero_and_nan_rules_f32() -> None:
    nan = 0x7FC00001
    xs = [0, 1 << 31, nan, nan, f32(1.0)]
    ys = [1 << 31, 0, f32(1.0), nan, f32(2.0)]
    assert binary("min.f32 %d, %a, %b;", "f32", "f32", xs, ys) == [
        1 << 31,
        1 << 31,
        f32(1.0),
        NV_NAN32,
        f32(1.0),
    ]
    assert binary("max.f32 %d, %a, %b;", "f32", "f32", xs, ys) == [
        0,
        0,
        f32(1.0),
        NV_NAN32,
        f32(2.0),
    ]
    got = binary("max.NaN.f32 %d, %a, %b;", "f32", "f32", xs, ys)
    assert got == [0, 0, NV_NAN32, NV_NAN32, f32(2.0)]


def test_min_f64_keeps_payload_when_both_nan() -> None:
    xs = [0x7FF0000000000003, f64(-0.0), 0x7FF8000000000004]
    ys = [0x7FF8000000000005, 0, f64(3.0)]
    assert binary("min.f64 %d, %a, %b;", "f64", "f64", xs, ys) == [
        0x7FF8000000000003,
        f64(-0.0),
        f64(3.0),
    ]


# -- abs/neg (9.7.3.9/10) -------------------------------------------------------------------


def test_abs_neg_float_nan_rules() -> None:
    assert unary("neg.f32 %d, %a;", "f32", "f32", [0x7FC00001, 0, f32(2.0)]) == [
        NV_NAN32,
        1 << 31,
        f32(-2.0),
    ]
    assert unary("abs.f32 %d, %a;", "f32", "f32", [0xFFC00001, 1 << 31]) == [NV_NAN32, 0]
    assert unary("abs.f64 %d, %a;", "f64", "f64", [0xFFF0000000000001]) == [0xFFF0000000000001]
    assert unary("neg.f64 %d, %a;", "f64", "f64", [0x7FF0000000000001]) == [0xFFF0000000000001]


# -- cvt (9.7.9.21) --------------------------------------------------------------------------


def test_cvt_float_to_int_saturates_and_nan_rule() -> None:
    xs = [0x7FC00000, INF32, NINF32, f32(2.5), f32(-2.5), f32(3e9), f32(-0.5)]
    got = unary("cvt.rzi.s32.f32 %d, %a;", "f32", "s32", xs)
    assert got == [0, 0x7FFFFFFF, 0x80000000, 2, 2**32 - 2, 0x7FFFFFFF, 0]
    got = unary(
        "cvt.rzi.u32.f32 %d, %a;", "f32", "u32", [f32(-1.0), f32(-0.9), f32(5e9), 0x7FC00000]
    )
    assert got == [0, 0, 0xFFFFFFFF, 0]
    got = unary("cvt.rni.s32.f32 %d, %a;", "f32", "s32", [f32(2.5), f32(3.5), f32(-2.5)])
    assert got == [2, 4, 2**32 - 2]
    got = unary("cvt.rmi.s32.f32 %d, %a;", "f32", "s32", [f32(-0.5), f32(1.5)])
    assert got == [2**32 - 1, 1]
    got = unary("cvt.rpi.s32.f32 %d, %a;", "f32", "s32", [f32(-0.5), f32(1.5)])
    assert got == [0, 2]


def test_cvt_nan_to_64_bit_and_from_f64_is_one_shifted() -> None:
    # "Zero if source is not .f64 and destination is not .s64, .u64; otherwise 1 << (N-1)"
    nan64, nan32 = 0x7FF8000000000000, 0x7FC00000
    assert unary("cvt.rzi.s64.f64 %d, %a;", "f64", "s64", [nan64]) == [1 << 63]
    assert unary("cvt.rzi.u64.f64 %d, %a;", "f64", "u64", [nan64]) == [1 << 63]
    assert unary("cvt.rzi.s32.f64 %d, %a;", "f64", "s32", [nan64]) == [1 << 31]
    assert unary("cvt.rzi.s64.f32 %d, %a;", "f32", "s64", [nan32]) == [1 << 63]
    got = unary("cvt.rzi.s64.f64 %d, %a;", "f64", "s64", [f64(9.3e18), f64(-9.3e18), f64(-1.5)])
    assert got == [2**63 - 1, 2**63, 2**64 - 1]
    got = unary("cvt.rzi.u64.f64 %d, %a;", "f64", "u64", [f64(1.8e19), f64(2e19), f64(-3.0)])
    assert got == [18000000000000000000, 2**64 - 1, 0]


def test_cvt_int_to_float_rounds_to_nearest_even() -> None:
    got = unary("cvt.rn.f32.s32 %d, %a;", "s32", "f32", [16777217, 16777219, 2**32 - 16777217])
    assert got == [f32(16777216.0), f32(16777220.0), f32(-16777216.0)]
    got = unary("cvt.rn.f32.u64 %d, %a;", "u64", "f32", [2**64 - 1, (1 << 40) + (1 << 16)])
    assert got == [f32(2.0**64), f32(2.0**40)]
    got = unary("cvt.rn.f64.s64 %d, %a;", "s64", "f64", [(1 << 53) + 1, 2**64 - ((1 << 53) + 3)])
    assert got == [f64(2.0**53), f64(-(2.0**53) - 4)]


def _round_int_to_f32(v: int) -> int:
    """Exact RNE of an integer to binary32 (reference independent of numpy)."""
    mag, sign = abs(v), (1 << 31 if v < 0 else 0)
    shift = max(mag.bit_length() - 24, 0)
    q, r = divmod(mag, 1 << shift) if shift else (mag, 0)
    half = (1 << shift) >> 1
    if shift and (r > half or (r == half and q & 1)):
        q += 1
    return sign | f32(float(q << shift))


def test_cvt_64_bit_ints_to_f32_round_exactly_at_midpoints() -> None:
    rng = np.random.default_rng(5)
    vals = []
    for _ in range(300):
        width = int(rng.integers(25, 64))
        base = (int(rng.integers(1 << 23, 1 << 24)) << (width - 24)) + (1 << (width - 25))
        vals += [base - 1, base, base + 1]
    got = unary("cvt.rn.f32.s64 %d, %a;", "s64", "f32", [-v for v in vals])
    assert got == [_round_int_to_f32(-v) for v in vals]
    got = unary("cvt.rn.f32.u64 %d, %a;", "u64", "f32", [v << 1 for v in vals])
    assert got == [_round_int_to_f32(v << 1) for v in vals]


def test_cvt_float_to_float() -> None:
    half_tiny = f64(1.5 * 2.0**-149)  # midpoint between 1 and 2 f32 subnormal ulps -> even
    got = unary("cvt.rn.f32.f64 %d, %a;", "f64", "f32", [half_tiny, f64(1e300), 0x7FF8000000000001])
    assert got == [2, INF32, NV_NAN32]
    got = unary("cvt.f64.f32 %d, %a;", "f32", "f64", [1, 0xFFC00001])
    assert got == [f64(2.0**-149), 0xFFF8000020000000]
    got = unary("cvt.rni.f32.f32 %d, %a;", "f32", "f32", [f32(2.5), f32(-0.5), f32(1e20)])
    assert got == [f32(2.0), f32(-0.0), f32(1e20)]


def test_cvt_int_to_int() -> None:
    assert unary("cvt.s64.s32 %d, %a;", "s32", "s64", [2**32 - 1]) == [2**64 - 1]
    assert unary("cvt.u64.s32 %d, %a;", "s32", "u64", [2**32 - 1]) == [2**64 - 1]
    assert unary("cvt.u64.u32 %d, %a;", "u32", "u64", [2**32 - 1]) == [2**32 - 1]
    assert unary("cvt.u32.u64 %d, %a;", "u64", "u32", [2**40 + 5]) == [5]
    assert unary("cvt.sat.s32.s64 %d, %a;", "s64", "s32", [2**40, 2**64 - 2**40]) == [
        2**31 - 1,
        2**31,
    ]
    assert unary("cvt.sat.u32.s32 %d, %a;", "s32", "u32", [2**32 - 5, 7]) == [0, 7]


# -- shifts (9.7.8.8/9: "Shift amounts greater than the register width N are clamped to N")


def test_shifts_clamp_the_amount() -> None:
    amounts = [0, 31, 32, 33, 0xFFFFFFFF]
    one = [1] * 5
    got = run(
        "shl.b32 %d, %a, %b;", {"%a": "b32", "%b": "u32"}, {"%d": "b32"}, {"%a": one, "%b": amounts}
    )
    assert got["%d"] == [1, 1 << 31, 0, 0, 0]
    neg = [0x80000000] * 5
    got = run(
        "shr.s32 %d, %a, %b;", {"%a": "s32", "%b": "u32"}, {"%d": "s32"}, {"%a": neg, "%b": amounts}
    )
    assert got["%d"] == [0x80000000, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF]
    got = run(
        "shr.u32 %d, %a, %b;", {"%a": "u32", "%b": "u32"}, {"%d": "u32"}, {"%a": neg, "%b": amounts}
    )
    assert got["%d"] == [0x80000000, 1, 0, 0, 0]
    got = run(
        "shl.b64 %d, %a, %b;",
        {"%a": "b64", "%b": "u32"},
        {"%d": "b64"},
        {"%a": [1, 1], "%b": [63, 64]},
    )
    assert got["%d"] == [1 << 63, 0]


# -- integer arithmetic ----------------------------------------------------------------------


def test_integer_div_rem_truncate() -> None:
    xs = [2**32 - 7, 7, 2**32 - 7, 2**31]
    ys = [2, 2**32 - 2, 2**32 - 2, 3]
    assert binary("div.s32 %d, %a, %b;", "s32", "s32", xs, ys) == [
        2**32 - 3,
        2**32 - 3,
        3,
        2**32 - 715827882,
    ]
    assert binary("rem.s32 %d, %a, %b;", "s32", "s32", xs, ys) == [
        2**32 - 1,
        1,
        2**32 - 1,
        2**32 - 2,
    ]
    assert binary("div.u32 %d, %a, %b;", "u32", "u32", [7, 2**32 - 1], [2, 2**32 - 1]) == [3, 1]
    assert binary("rem.u64 %d, %a, %b;", "u64", "u64", [2**64 - 1], [10]) == [5]


def test_integer_division_by_zero_is_refused_at_run_time() -> None:
    with pytest.raises(PtxExecutionError, match=r"line \d+: integer division by zero") as err:
        binary("div.u32 %d, %a, %b;", "u32", "u32", [1, 2], [1, 0])
    assert "div.u32 %d, %a, %b;" in str(err.value)
    with pytest.raises(PtxExecutionError, match="MIN / -1"):
        binary("div.s32 %d, %a, %b;", "s32", "s32", [2**31], [2**32 - 1])
    with pytest.raises(PtxExecutionError, match="MIN / -1"):
        binary("rem.s64 %d, %a, %b;", "s64", "s64", [2**63], [2**64 - 1])


def test_guarded_division_by_zero_does_not_execute() -> None:
    body = """
        setp.ne.u32 %p, %b, 0;
        mov.u32 %d, 99;
        @%p div.u32 %d, %a, %b;
    """
    got = run(
        body,
        {"%a": "u32", "%b": "u32"},
        {"%d": "u32"},
        {"%a": [7, 7], "%b": [2, 0]},
        {"%p": "pred"},
    )
    assert got["%d"] == [3, 99]


def test_integer_mul_forms_and_wrapping() -> None:
    got = binary("mul.wide.s32 %d, %a, %b;", "s32", "s64", [2**32 - 3], [2**31 - 1])
    assert got == [(-3 * (2**31 - 1)) % 2**64]
    regs = run(
        "mul.wide.s32 %d, %a, %b;",
        {"%a": "s32", "%b": "s32"},
        {"%d": "s64"},
        {"%a": [2**32 - 3], "%b": [2**31 - 1]},
    )
    assert regs["%d"] == [(-3 * (2**31 - 1)) % 2**64]
    assert binary("mul.hi.u32 %d, %a, %b;", "u32", "u32", [2**32 - 1], [2**32 - 1]) == [2**32 - 2]
    assert binary("mul.hi.s32 %d, %a, %b;", "s32", "s32", [2**32 - 1], [2]) == [2**32 - 1]
    assert binary("mul.lo.s64 %d, %a, %b;", "s64", "s64", [2**63 + 1], [2]) == [2]
    assert unary("neg.s32 %d, %a;", "s32", "s32", [2**31, 5]) == [2**31, 2**32 - 5]
    assert unary("abs.s32 %d, %a;", "s32", "s32", [2**31, 2**32 - 5]) == [2**31, 5]
    assert binary("min.s32 %d, %a, %b;", "s32", "s32", [2**32 - 1], [1]) == [2**32 - 1]
    assert binary("min.u32 %d, %a, %b;", "u32", "u32", [2**32 - 1], [1]) == [1]
    regs = run(
        "mad.lo.u32 %d, %a, %b, %c;",
        {"%a": "u32", "%b": "u32", "%c": "u32"},
        {"%d": "u32"},
        {"%a": [2**31], "%b": [2], "%c": [7]},
    )
    assert regs["%d"] == [7]


# -- comparisons (9.7.6.2) -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cmp", "expected"),
    [
        ("eq", [0, 1, 0, 0]),
        ("ne", [1, 0, 0, 0]),
        ("lt", [1, 0, 0, 0]),
        ("ge", [0, 1, 0, 0]),
        ("equ", [0, 1, 1, 1]),
        ("neu", [1, 0, 1, 1]),
        ("ltu", [1, 0, 1, 1]),
        ("leu", [1, 1, 1, 1]),
        ("gtu", [0, 0, 1, 1]),
        ("geu", [0, 1, 1, 1]),
        ("num", [1, 1, 0, 0]),
        ("nan", [0, 0, 1, 1]),
    ],
)
def test_setp_float_ordered_and_unordered(cmp: str, expected: list[int]) -> None:
    xs = [f32(1.0), 1 << 31, 0x7FC00000, f32(1.0)]
    ys = [f32(2.0), 0, f32(1.0), 0xFFC00000]
    assert binary(f"setp.{cmp}.f32 %d, %a, %b;", "f32", "pred", xs, ys) == expected


def test_setp_integer_signedness_pairs_and_combine() -> None:
    xs, ys = [2**32 - 1, 1], [1, 2**32 - 1]
    assert binary("setp.lt.s32 %d, %a, %b;", "s32", "pred", xs, ys) == [1, 0]
    assert binary("setp.lo.u32 %d, %a, %b;", "u32", "pred", xs, ys) == [0, 1]
    body = "setp.lt.and.s32 %p|%q, %a, %b, %c;"
    got = run(
        body,
        {"%a": "s32", "%b": "s32", "%c": "pred"},
        {"%p": "pred", "%q": "pred"},
        {"%a": [1, 1, 5, 5], "%b": [2, 2, 2, 2], "%c": [1, 0, 1, 0]},
    )
    assert got["%p"] == [1, 0, 0, 0]
    assert got["%q"] == [0, 0, 1, 0]


def test_testp_classes() -> None:
    xs = [0, 1 << 31, 1, f32(1.0), INF32, 0x7FC00000]
    expected = {
        "finite": [1, 1, 1, 1, 0, 0],
        "infinite": [0, 0, 0, 0, 1, 0],
        "number": [1, 1, 1, 1, 1, 0],
        "notanumber": [0, 0, 0, 0, 0, 1],
        "normal": [1, 1, 0, 1, 0, 0],
        "subnormal": [0, 0, 1, 0, 0, 0],
    }
    for prop, want in expected.items():
        assert unary(f"testp.{prop}.f32 %d, %a;", "f32", "pred", xs) == want, prop


def test_selp_and_bit_moves() -> None:
    got = run(
        "mov.b32 %x, %a;\nxor.b32 %x, %x, 0x80000000;\nselp.f32 %d, %x, 0f3F800000, %c;",
        {"%a": "f32", "%c": "pred"},
        {"%d": "f32"},
        {"%a": [0x7FC00001, 0x7FC00001], "%c": [1, 0]},
        {"%x": "b32"},
    )
    assert got["%d"] == [0xFFC00001, f32(1.0)]


# -- predication and control flow ------------------------------------------------------------


def test_divergent_loop_and_reconvergence() -> None:
    body = """
        mov.u32 %d, 0;
        mov.u32 %i, 0;
    LOOP:
        setp.ge.u32 %p, %i, %a;
        @%p bra DONE;
        add.u32 %d, %d, %i;
        add.u32 %i, %i, 1;
        bra.uni LOOP;
    DONE:
        @!%p add.u32 %d, %d, 1000;
        add.u32 %d, %d, 1;
    """
    counts = [0, 1, 5, 100, 3]
    got = run(body, {"%a": "u32"}, {"%d": "u32"}, {"%a": counts}, {"%i": "u32", "%p": "pred"})
    assert got["%d"] == [n * (n - 1) // 2 + 1 for n in counts]


def test_early_exit_of_some_threads() -> None:
    body = """
        mov.u32 %d, 1;
        setp.eq.u32 %p, %a, 0;
        @%p bra SKIP;
        mov.u32 %d, 2;
    SKIP:
    """
    got = run(body, {"%a": "u32"}, {"%d": "u32"}, {"%a": [0, 1, 0, 7]}, {"%p": "pred"})
    assert got["%d"] == [1, 2, 1, 2]


# -- run-time faults -------------------------------------------------------------------------

KERNEL = """.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p, .param .u32 n)
{{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    .reg .f32 %f<4>;
    .reg .pred %p<2>;
{body}
    ret;
}}
"""


def launch(body: str, n: int = 4, buf: int = 16) -> np.ndarray:
    mem = GlobalMemory()
    addr = mem.alloc(buf)
    load(parse(KERNEL.format(body=body)), "k").launch([addr, n], grid=1, block=n, memory=mem)
    return mem.download(addr, np.uint8, buf)


PROLOGUE = """
    ld.param.u64 %rd1, [p];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd1, %rd1, %rd2;
"""


def test_in_bounds_store_works() -> None:
    out = launch(PROLOGUE + "    st.global.u32 [%rd1], %r1;")
    assert list(out.view(np.uint32)) == [0, 1, 2, 3]


def test_out_of_bounds_and_misaligned_access_fault() -> None:
    with pytest.raises(PtxExecutionError, match="outside every allocation"):
        launch(PROLOGUE + "    st.global.u32 [%rd1+4], %r1;")
    with pytest.raises(PtxExecutionError, match="misaligned"):
        launch(PROLOGUE + "    ld.global.u32 %r2, [%rd1+2];")


def test_racing_stores_and_undefined_registers_fault() -> None:
    with pytest.raises(PtxExecutionError, match="same address"):
        launch(
            "    ld.param.u64 %rd1, [p];\n    mov.u32 %r1, %tid.x;\n    st.global.u32 [%rd1], %r1;"
        )
    with pytest.raises(PtxExecutionError, match=r"%r2 is read before"):
        launch("    add.s32 %r1, %r2, 1;")
    body = "    mov.u32 %r1, %tid.x;\n    setp.eq.u32 %p1, %r1, 0;\n    @%p1 mov.u32 %r2, 5;\n    add.s32 %r3, %r2, 1;"
    with pytest.raises(PtxExecutionError, match="never wrote it"):
        launch(body)


# -- refusals (outside the subset) and malformed PTX -----------------------------------------


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("add.f32 %f1, %f2, %f3;", "without a rounding modifier"),
        ("mul.f32 %f1, %f2, %f3;", "without a rounding modifier"),
        ("add.rn.ftz.f32 %f1, %f2, %f3;", "flushes subnormals"),
        ("div.approx.f32 %f1, %f2, %f3;", "approximat"),
        ("div.full.f32 %f1, %f2, %f3;", "div.full"),
        ("sqrt.approx.f32 %f1, %f2;", "approximat"),
        ("add.rz.f32 %f1, %f2, %f3;", "only round-to-nearest-even"),
        ("cvt.rz.f32.s32 %f1, %r1;", "only round-to-nearest-even"),
        ("add.rn.sat.f32 %f1, %f2, %f3;", "saturation"),
        ("ex2.approx.f32 %f1, %f2;", "instruction 'ex2'"),
        ("atom.global.add.f32 %f1, [%rd1], %f2;", "instruction 'atom'"),
        ("min.xorsign.abs.f32 %f1, %f2, %f3;", "xorsign"),
        ("add.rn.f32 %f1, %f2, 1.5;", "0f/0d hex"),
        ("ld.global.v2.f32 {%f1, %f2}, [%rd1];", "vector operands"),
        ("cvt.rn.f16.f32 %r1, %f1;", "type .f16"),
    ],
)
def test_refuses_outside_subset_naming_the_line(line: str, reason: str) -> None:
    text = KERNEL.format(body="    mov.u32 %r1, 1;\n    " + line)
    with pytest.raises(PtxUnsupportedError, match=reason) as err:
        load(parse(text), "k")
    assert err.value.line == 11
    assert line in str(err.value)


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("add.s32 %r1, %f1, %r2;", "does not match"),
        ("add.s32 %r1, %r9, %r2;", "undeclared register %r9"),
        ("add.s32 %r1, %tid.x, 1;", "only be read by mov"),
        ("min.NaN.f64 %rd1, %rd2, %rd3;", "only for .f32"),
        ("setp.lo.s32 %p1, %r1, %r2;", "unsigned types only"),
        ("bra NOWHERE;", "unknown branch target"),
    ],
)
def test_malformed_ptx_is_a_syntax_error(line: str, reason: str) -> None:
    text = KERNEL.format(body="    " + line)
    with pytest.raises(PtxSyntaxError, match=reason):
        load(parse(text), "k")


def test_module_level_refusals() -> None:
    with pytest.raises(PtxUnsupportedError, match=r"line 10: directive '\.shared'"):
        parse(KERNEL.format(body="    .shared .b32 s;"))
    with pytest.raises(PtxUnsupportedError, match=r"module-level statement '\.global'"):
        parse(".version 8.0\n.target sm_90\n.address_size 64\n.global .b32 g;\n")
    with pytest.raises(PtxSyntaxError, match=r"needs \.version"):
        parse(".visible .entry k() { ret; }")


def test_hardware_questions_run_on_the_emulator_without_a_gpu() -> None:
    from keracheck.ptx_emu.questions import QUESTIONS, ask

    answers = ask(QUESTIONS[:4] + [q for q in QUESTIONS if q.name == "div.u32 by 0"])
    rows = {row["question"]: row for row in answers["answers"]}
    assert rows["f32 generated NaN (inf + -inf)"]["emulator"] == ["0x7fffffff"]
    assert str(rows["div.u32 by 0"]["emulator"]).startswith("refused: integer division by zero")
    if answers["gpuUnavailable"] is not None:
        assert all(row["gpu"] is None for row in answers["answers"])


def test_sass_lint_parses_nvdisasm_output() -> None:
    from keracheck.runners.nvdisasm import kernels, lint

    sass = """
        .section	.text.kera_f,"ax",@progbits
kera_f:
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0070*/               @P0 EXIT ;
        /*0080*/                   FFMA R3, R2, R2, R4 ;
        /*0090*/              @!P1 MUFU.RCP R5, R2 ;
        /*00a0*/                   HFMA2.MMA R3, -RZ, RZ, 0, 0 ;
        .section	.text.kera_g,"ax",@progbits
        /*0000*/                   FADD R3, R2, R4 ;
"""
    got = kernels(sass)
    assert got == {
        "kera_f": ["LDC", "EXIT", "FFMA", "MUFU.RCP", "HFMA2.MMA"],
        "kera_g": ["FADD"],
    }
    assert lint(got["kera_f"], exempt=False) == ["FFMA", "MUFU.RCP"]
    assert lint(got["kera_f"], exempt=True) == []
    assert lint(got["kera_g"], exempt=False) == []
