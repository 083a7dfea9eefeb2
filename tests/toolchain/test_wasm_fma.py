"""Software fma for WebAssembly (kera.backends.wasm.fma) against Berkeley SoftFloat.

One module per width maps the fma helper over arrays in linear memory, so each engine run is one
call over every case.  Cases: >= 100k edge-biased per width (tests/floatgen.py, with a third of
the addends set to -(a*b) +- a few ulps for cancellation) plus 50k built to land near the
subnormal and overflow thresholds with sparse significands (ties).  Expected bits are SoftFloat's
f32_mul_add / f64_mul_add with NaN results mapped to the canonical NaN (the contract).  The same
bytes run in wasmtime and in Node (V8).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from floatgen import edge_bits, partner_bits

from kera.backends.wasm.encode import (
    BT_EMPTY,
    Export,
    ExportKind,
    Func,
    FuncType,
    Locals,
    Memory,
    Module,
    ValType,
    call,
    encode,
    get,
    i32c,
    if_,
    ins,
    op,
    put,
)
from kera.backends.wasm.fma import fma_f32, fma_f64
from keracheck.runners import node_wasm, wasmtime_run
from keracheck.runners.wasm_job import WasmJob

sf = pytest.importorskip("softfloatpy", reason="pip install softfloatpy")

pytestmark = pytest.mark.toolchain

N_EDGE = int(os.environ.get("KERA_ORACLE_CASES", "100000"))
N_HARD = N_EDGE // 2
Array = np.ndarray[Any, Any]
WIDTH: dict[int, tuple[ValType, type[np.unsignedinteger[Any]], type[np.floating[Any]]]] = {
    32: (ValType.F32, np.uint32, np.float32),
    64: (ValType.F64, np.uint64, np.float64),
}
CANON = {32: 0x7FC00000, 64: 0x7FF8000000000000}
HELPER: dict[int, Callable[[], Func]] = {32: fma_f32, 64: fma_f64}


def map_kernel(vt: ValType, nbytes: int) -> Func:
    """run(pa, pb, pc, pout, n): out[i] = f(a[i], b[i], c[i]) where f is function 0."""
    loc = Locals([ValType.I32] * 5)
    i = loc.new(ValType.I32)

    def at(ptr: int) -> list[Any]:
        return op("i32.add", get(ptr), op("i32.mul", get(i), i32c(nbytes)))

    load = [op(f"{vt.wat}.load", at(p)) for p in (0, 1, 2)]
    step = [
        *at(3),
        *call(0, *load),
        ins(f"{vt.wat}.store"),
        *put(i, op("i32.add", get(i), i32c(1))),
        *op("i32.lt_s", get(i), get(4)),
        ins("br_if", 0),
    ]
    body = if_(op("i32.gt_s", get(4), i32c(0)), [ins("loop", BT_EMPTY), *step, ins("end")])
    return Func(FuncType((ValType.I32,) * 5, ()), tuple(loc.types), tuple(body), "run")


def fma_module(bits: int) -> bytes:
    vt, _, _ = WIDTH[bits]
    funcs = (HELPER[bits](), map_kernel(vt, bits // 8))
    exports = (Export("mem", ExportKind.MEMORY, 0), Export("run", ExportKind.FUNC, 1))
    return encode(Module(funcs=funcs, memory=Memory(1), exports=exports))


def job(bits: int, a: Array, b: Array, c: Array) -> WasmJob:
    n, w = len(a), bits // 8
    ptrs = (0, n * w, 2 * n * w, 3 * n * w)
    return WasmJob(
        fma_module(bits),
        writes=[(ptrs[0], a), (ptrs[1], b), (ptrs[2], c)],
        calls=[("run", (*ptrs, n))],
        reads=[(ptrs[3], n * w)],
    )


def softfloat_fma(bits: int, a: Array, b: Array, c: Array) -> Array:
    cls, nb, fn = (sf.Float32, 4, sf.f32_mul_add) if bits == 32 else (sf.Float64, 8, sf.f64_mul_add)
    sf.set_rounding_mode(sf.RoundingMode.NEAR_EVEN)

    def f(x: int) -> Any:
        return cls.from_bytes(x.to_bytes(nb, "big"))

    out = [
        int.from_bytes(fn(f(x), f(y), f(z)).to_bytes(), "big")
        for x, y, z in zip(a.tolist(), b.tolist(), c.tolist(), strict=True)
    ]
    res = np.array(out, dtype=a.dtype)
    _, _, ft = WIDTH[bits]
    return np.where(np.isnan(res.view(ft)), a.dtype.type(CANON[bits]), res)


def edge_cases(bits: int, rng: np.random.Generator) -> tuple[Array, Array, Array]:
    ut, ft = WIDTH[bits][1], WIDTH[bits][2]
    a = edge_bits(rng, N_EDGE, bits)
    b = partner_bits(rng, a, bits)
    c = edge_bits(rng, N_EDGE, bits)
    with np.errstate(all="ignore"):
        minus_ab = (-(a.view(ft) * b.view(ft))).view(ut)
    nudge = rng.integers(-2, 3, N_EDGE).astype(ut)
    c = np.where(rng.integers(0, 3, N_EDGE) == 0, minus_ab + nudge, c).astype(ut)
    return a, b, c


def threshold_cases(bits: int, rng: np.random.Generator) -> tuple[Array, Array, Array]:
    """Products near the subnormal range or overflow; sparse significands make ties likely."""
    ut = WIDTH[bits][1]
    mw, bias = (23, 127) if bits == 32 else (52, 1023)
    n = N_HARD

    def pack(e: Array, m: Array) -> Array:
        sign = rng.integers(0, 2, n).astype(np.uint64) << np.uint64(bits - 1)
        frac = m.astype(np.uint64) & np.uint64((1 << mw) - 1)
        return (sign | (e.astype(np.uint64) << np.uint64(mw)) | frac).astype(ut)

    def sig() -> Array:
        m = rng.integers(0, 1 << mw, n, dtype=np.uint64)
        keep = ~((np.uint64(1) << rng.integers(0, mw, n).astype(np.uint64)) - np.uint64(1))
        return np.where(rng.integers(0, 2, n) == 0, m, m & keep)

    low = rng.integers(-mw - 4, 3, n)
    high = rng.integers(2 * bias - 3, 2 * bias + 2, n)
    target = np.where(rng.integers(0, 2, n) == 0, low, high)
    ea = rng.integers(1, 2 * bias, n)
    eb = np.clip(target - ea + bias, 0, 2 * bias)
    near = np.clip(target + rng.integers(-mw - 3, 4, n), 0, 2 * bias)
    ec = np.where(rng.integers(0, 2, n) == 0, rng.integers(0, 4, n), near)
    return pack(ea, sig()), pack(eb, sig()), pack(ec, sig())


@pytest.fixture(scope="module", params=[32, 64], ids=["f32", "f64"])
def cases(request: pytest.FixtureRequest) -> tuple[int, Array, Array, Array, Array]:
    bits: int = request.param
    rng = np.random.default_rng(bits)
    parts = [edge_cases(bits, rng), threshold_cases(bits, rng)]
    a, b, c = (np.concatenate([p[k] for p in parts]) for k in range(3))
    return bits, a, b, c, softfloat_fma(bits, a, b, c)


def _runner(engine: str) -> Any:
    mod = wasmtime_run if engine == "wasmtime" else node_wasm
    reason = mod.available()
    if reason:
        pytest.skip(reason)
    return wasmtime_run.WasmtimeRunner() if engine == "wasmtime" else node_wasm.NodeWasmRunner()


def _run(engine: str, bits: int, a: Array, b: Array, c: Array) -> Array:
    (result,) = _runner(engine).run_jobs([job(bits, a, b, c)])
    assert not isinstance(result, Exception), result
    return result[0].view(a.dtype)


def _show(a: Array, b: Array, c: Array, got: Array, want: Array) -> str:
    bad = np.nonzero(got != want)[0][:5]
    rows = [f"{a[k]:x} {b[k]:x} {c[k]:x}: got {got[k]:x} want {want[k]:x}" for k in bad]
    return f"{int((got != want).sum())} mismatches, e.g.\n" + "\n".join(rows)


@pytest.mark.parametrize("engine", ["wasmtime", "node"])
def test_fma_matches_softfloat(engine: str, cases: tuple[int, Array, Array, Array, Array]) -> None:
    bits, a, b, c, want = cases
    got = _run(engine, bits, a, b, c)
    assert np.array_equal(got, want), _show(a, b, c, got, want)


def test_cases_defeat_naive_lowering(cases: tuple[int, Array, Array, Array, Array]) -> None:
    """The case set must catch the obvious wrong lowerings (so a pass above means something)."""
    bits, a, b, c, want = cases
    _, ut, ft = WIDTH[bits]
    with np.errstate(all="ignore"):
        if bits == 32:
            wide = [x.view(np.float32).astype(np.float64) for x in (a, b, c)]
            naive = (wide[0] * wide[1] + wide[2]).astype(np.float32).view(ut)
        else:
            naive = (a.view(ft) * b.view(ft) + c.view(ft)).view(ut)
    finite = ~np.isnan(want.view(ft))
    assert int(((naive != want) & finite).sum()) > 100
    tiny = np.abs(want.view(ft)) < np.finfo(ft).tiny
    assert int((tiny & (want.view(ft) != 0)).sum()) > 1000  # subnormal results
    assert int(np.isinf(want.view(ft)).sum()) > 1000
    assert int((want == ut(CANON[bits])).sum()) > 1000


# a=1+2^-23, b=(1-2^-23)*2^-24, c=1+2^-23: f32 via f64 gives 0x3f800002 (toolchains.md §1d).
KNOWN_F32 = [
    (0x3F800001, 0x337FFFFE, 0x3F800001, 0x3F800001),
    (0x7F800000, 0x00000000, 0x3F800000, 0x7FC00000),  # inf*0 -> canonical NaN
    (0x7F800000, 0x3F800000, 0xFF800000, 0x7FC00000),  # inf-inf
    (0xFFC12345, 0x3F800000, 0x3F800000, 0x7FC00000),  # NaN payload does not leak
    (0x7F7FFFFF, 0x40000000, 0xFF7FFFFF, 0x7F7FFFFF),  # 2*MAX-MAX: no intermediate overflow
    (0x80000000, 0x3F800000, 0x00000000, 0x00000000),  # -0*1 + 0 = +0
    (0x80000000, 0x3F800000, 0x80000000, 0x80000000),  # -0 + -0 = -0
    (0x00000001, 0x3F000000, 0x00000000, 0x00000000),  # min subnormal/2: tie to even (0)
    (0x00000003, 0x3F000000, 0x00000000, 0x00000002),  # 1.5 ulp: tie to even (2)
]
KNOWN_F64 = [
    (0x3FF0000000000001, 0x3FEFFFFFFFFFFFFF, 0xBFF0000000000000, 0x3C9FFFFFFFFFFFFE),  # naive: 0
    (0x7FEFFFFFFFFFFFFF, 0x4000000000000000, 0xFFEFFFFFFFFFFFFF, 0x7FEFFFFFFFFFFFFF),
    (0x7FEFFFFFFFFFFFFF, 0x4000000000000000, 0xFFF0000000000000, 0xFFF0000000000000),
    (0x0000000000000001, 0x3FE0000000000000, 0x8000000000000000, 0x0000000000000000),
    (0x0000000000000003, 0x3FE0000000000000, 0x0000000000000000, 0x0000000000000002),
    (0x7FF0000000000000, 0x0000000000000000, 0x7FF8000000000001, 0x7FF8000000000000),
    (0x3FF8000000000000, 0x3FF8000000000000, 0xC002000000000000, 0x0000000000000000),
]


@pytest.mark.parametrize("engine", ["wasmtime", "node"])
@pytest.mark.parametrize("bits", [32, 64])
def test_known_cases(engine: str, bits: int) -> None:
    rows = KNOWN_F32 if bits == 32 else KNOWN_F64
    ut = WIDTH[bits][1]
    a, b, c, want = (np.array([r[k] for r in rows], dtype=ut) for k in range(4))
    got = _run(engine, bits, a, b, c)
    assert [hex(x) for x in got] == [hex(x) for x in want]
    assert np.array_equal(softfloat_fma(bits, a, b, c), want)  # the table itself is right


@pytest.mark.parametrize("target", ["wasm", "wasm-simd"])
def test_kera_fma_through_the_back_end(
    target: str, cases: tuple[int, Array, Array, Array, Array]
) -> None:
    """The same cases through a Kera graph: wasm-simd's f32 fma is the vectorised f64x2 form."""
    from kera.dtypes import DType
    from kera.ir import FunctionBuilder
    from keracheck.targets.wasm import WasmBackend, WasmSimdBackend

    bits, a, b, c, want = cases
    dt = DType.F32 if bits == 32 else DType.F64
    fb = FunctionBuilder(f"fma_{dt}")
    x, y, z = (fb.param(name, dt) for name in "abc")
    fn = fb.build(fb.op("fma", x, y, z))
    backend = WasmSimdBackend() if target == "wasm-simd" else WasmBackend()
    if reason := backend.available():
        pytest.skip(reason)
    ft = WIDTH[bits][2]
    (got,) = backend.run(fn, {"a": a.view(ft), "b": b.view(ft), "c": c.view(ft)})
    got_bits = got.view(a.dtype)
    assert np.array_equal(got_bits, want), _show(a, b, c, got_bits, want)
