"""The C back end on real compilers: every contract op x dtype, bit for bit against kera.interp.

One suite of cases (every op on every dtype it accepts, on special values: +-0, +-inf, NaNs with
payloads and both signs, signalling NaNs, subnormals, MIN/MAX, -1, shift amounts >= the width,
plus edge-biased random bits) is built with FunctionBuilder and run through ``run_many`` on each
target: ``cpu:scalar``/``sse2``/``avx2``/``avx512`` (those the host has) and ``cpu-aarch64`` /
``cpu-riscv64`` under qemu-user.  Each target compiles the whole suite as one translation unit
(cached by content under $KERACHECK_CACHE), so a target costs one gcc call.

The catalog regressions (divergence-catalog.md, one test per row) state the contract's bits by
hand, check that kera.interp agrees, then check every target.  The C-integration tests compile
the emitted .c with a user's main() and check the KERA_E_FPENV guard (FTZ/DAZ set).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from floatgen import edge_bits, partner_bits

from kera.backends import c
from kera.dtypes import DType
from kera.interp import interpret
from kera.ir import Function, FunctionBuilder, Node
from kera.ops import DYNAMIC, REGION_OPS, Op, TypeRuleError
from keracheck.target import BackendError
from keracheck.targets.cpu import NONE_MADE, CpuTarget, QemuTarget

pytestmark = pytest.mark.toolchain

Array = np.ndarray[Any, Any]
Case = tuple[str, Function, dict[str, Array]]
D = DType
NUMERIC = [D.I32, D.I64, D.U32, D.U64, D.F32, D.F64]
ALL = [D.BOOL, *NUMERIC]
TARGETS = ["cpu:scalar", "cpu:sse2", "cpu:avx2", "cpu:avx512", "cpu-aarch64", "cpu-riscv64"]


def make_target(name: str) -> CpuTarget | QemuTarget:
    if name.startswith("cpu-"):
        return QemuTarget(name[4:])
    return CpuTarget(name.partition(":")[2] or None)


def usable(name: str) -> CpuTarget | QemuTarget:
    t = make_target(name)
    reason = t.available()
    if reason is not None:
        pytest.skip(f"{name} unavailable: {reason}")
    return t


# ------------------------------------------------------------------------------ special values


def _f32(*bits: int) -> Array:
    return np.array(bits, dtype=np.uint32)


F32_SPECIAL = _f32(
    0x00000000, 0x80000000, 0x3F800000, 0xBF800000, 0x7F800000, 0xFF800000,  # +-0 +-1 +-inf
    0x7FC00000, 0xFFC00000, 0x7FC12345, 0xFF812345, 0x7F800001, 0x7FA00000,  # NaNs, sNaNs
    0x00000001, 0x80000003, 0x007FFFFF, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF,  # subnormal, edges
    0x3F000000, 0xBF000000, 0x3FC00000, 0x40200000, 0xC0200000, 0x3EFFFFFF,  # .5 1.5 2.5 ties
    0x4B000000, 0x4AFFFFFF, 0x4B000001, 0xCAFFFFFF,  # 2^23 and neighbours
    0x4F000000, 0xCF000000, 0x4EFFFFFF, 0x4F800000, 0x5F000000, 0xDF000000, 0x5F800000,  # 2^31..
    0x501502F9, 0xD01502F9, 0x4F9502F9,  # +-1e10, 5e9
)  # fmt: skip
F64_SPECIAL = np.array(
    [
        0x0000000000000000, 0x8000000000000000, 0x3FF0000000000000, 0xBFF0000000000000,
        0x7FF0000000000000, 0xFFF0000000000000, 0x7FF8000000000000, 0xFFF8000000000000,
        0x7FF8000000012345, 0xFFF0000000012345, 0x7FF0000000000001, 0x7FF4000000000000,
        0x0000000000000001, 0x8000000000000003, 0x000FFFFFFFFFFFFF, 0x0010000000000000,
        0x7FEFFFFFFFFFFFFF, 0xFFEFFFFFFFFFFFFF, 0x3FE0000000000000, 0xBFE0000000000000,
        0x3FF8000000000000, 0x4004000000000000, 0xC004000000000000, 0x3FDFFFFFFFFFFFFF,
        0x4330000000000000, 0x432FFFFFFFFFFFFF, 0x4330000000000001, 0xC32FFFFFFFFFFFFF,
        0x41E0000000000000, 0xC1E0000000000000, 0x41DFFFFFFFC00000, 0x41E0000000100000,
        0xC1E0000000100000, 0x41F0000000000000, 0x43E0000000000000, 0xC3E0000000000000,
        0x43F0000000000000, 0x43DFFFFFFFFFFFFF, 0x3810000000000000, 0x47EFFFFFE0000000,
    ],
    dtype=np.uint64,
)  # fmt: skip


def _ints(dt: DType) -> Array:
    w = dt.bits
    vals = {0, 1, 2, 3, 7, w - 1, w, w + 1, 2 * w, 255, 0x5555, dt.max, dt.max - 1}
    vals |= {dt.min, dt.min + 1, -1, -2, -7, -w} if dt.is_signed else {dt.max // 2 + 1}
    return np.array(sorted(vals), dtype=dt.np)


def specials(dt: DType) -> Array:
    if dt is D.BOOL:
        return np.array([False, True])
    if dt is D.F32:
        return F32_SPECIAL.view(np.float32)
    if dt is D.F64:
        return F64_SPECIAL.view(np.float64)
    return _ints(dt)


def randoms(dt: DType, n: int, rng: np.random.Generator) -> Array:
    if dt.is_float:
        return edge_bits(rng, n, dt.bits).view(dt.np)
    if dt is D.BOOL:
        return rng.integers(0, 2, n).astype(np.bool_)
    return rng.integers(0, 1 << 64, n, dtype=np.uint64).astype(dt.uint).view(dt.np)


def pairs(dt: DType, rng: np.random.Generator, extra: int = 256) -> tuple[Array, Array]:
    """Every pair of special values, then random partners chosen to tie or cancel."""
    s = specials(dt)
    a, b = np.repeat(s, len(s)), np.tile(s, len(s))
    ra = randoms(dt, extra, rng)
    rb = partner_bits(rng, ra.view(dt.uint), dt.bits).view(dt.np) if dt.is_float else None
    rb = rb if rb is not None else randoms(dt, extra, rng)
    return np.concatenate([a, ra]), np.concatenate([b, rb])


# ------------------------------------------------------------------------------ the suite


def _build(name: str, make: Callable[[FunctionBuilder], Node | tuple[Node, ...]]) -> Function:
    b = FunctionBuilder(name)
    out = make(b)
    return b.build(*(out if isinstance(out, tuple) else (out,)))


def _try(name: str, make: Callable[[FunctionBuilder], Node | tuple[Node, ...]]) -> Function | None:
    try:
        return _build(name, make)
    except TypeRuleError:
        return None  # the op is not defined on this dtype


def _op(
    op: str, *params: tuple[str, DType, list[int]], **attrs: Any
) -> Callable[[FunctionBuilder], Node]:
    """The body of a one-op function on fresh parameters (``(name, dtype, shape)``); binding
    them here, not in a lambda, keeps a loop's later values out."""
    return lambda b: b.op(op, *(b.param(*p) for p in params), **attrs)


UNARY = ["neg", "abs", "not", "sqrt", "floor", "ceil", "trunc", "round"]
BINARY = ["add", "sub", "mul", "div", "rem", "min", "max", "copysign", "and", "or", "xor"]
BINARY += ["shl", "shr", "eq", "ne", "lt", "le", "gt", "ge"]


def elementwise_cases(rng: np.random.Generator) -> Iterator[Case]:
    for dt in ALL:
        x = np.concatenate([specials(dt), randoms(dt, 256, rng)])
        for op in UNARY:
            fn = _try(f"{op}_{dt}", _op(op, ("x", dt, [])))
            if fn is not None:
                yield fn.name, fn, {"x": x}
        a, bb = pairs(dt, rng)
        for op in BINARY:
            fn = _try(f"{op}_{dt}", _op(op, ("a", dt, []), ("b", dt, [])))
            if fn is not None:
                yield fn.name, fn, {"a": a, "b": bb}
        cond = rng.integers(0, 2, len(a)).astype(np.bool_)
        fn = _build(f"select_{dt}", _op("select", ("c", D.BOOL, []), ("a", dt, []), ("b", dt, [])))
        yield fn.name, fn, {"c": cond, "a": a, "b": bb}
        for to in ALL:
            for op in ("convert", "bitcast"):
                fn = _try(f"{op}_{dt}_{to}", _op(op, ("x", dt, []), to=to))
                if fn is not None:
                    yield fn.name, fn, {"x": x}


def fma_cases(rng: np.random.Generator) -> Iterator[Case]:
    for dt in (D.F32, D.F64):
        s = specials(dt)[::2]
        a, b, cc = (g.reshape(-1) for g in np.meshgrid(s, s, s, indexing="ij"))
        ra = randoms(dt, 4096, rng)
        rb = randoms(dt, 4096, rng)
        with np.errstate(all="ignore"):  # addends near -(a*b): cancellation and ties
            near = (-(ra * rb)).view(dt.uint) + rng.integers(-2, 3, 4096).astype(dt.uint)
        rc = np.where(rng.integers(0, 2, 4096) == 0, near.view(dt.np), randoms(dt, 4096, rng))
        fn = _build(f"fma_{dt}", _op("fma", ("a", dt, []), ("b", dt, []), ("c", dt, [])))
        cat = np.concatenate
        yield fn.name, fn, {"a": cat([a, ra]), "b": cat([b, rb]), "c": cat([cc, rc])}


def _mixed(dt: DType, shape: tuple[int, ...], rows: int, rng: np.random.Generator) -> Array:
    """rows x shape values: specials, randoms and (for floats) small integers and halves."""
    n = rows * int(np.prod(shape))
    pool = [specials(dt), randoms(dt, 64, rng)]
    if dt.is_float:
        pool.append((rng.integers(-8, 9, 64) / 2).astype(dt.np))
    flat = np.concatenate(pool)
    return flat[rng.integers(0, len(flat), n)].reshape((rows, *shape))


def reduction_cases(rng: np.random.Generator) -> Iterator[Case]:
    shapes: list[tuple[tuple[int, ...], int]] = [((n,), 0) for n in (1, 2, 3, 5, 7, 8, 13)]
    shapes += [((2, 3, 4), a) for a in (0, 1, 2)]
    for dt in NUMERIC:
        for op in ("sum", "prod", "amin", "amax"):
            for shape, axis in shapes:
                name = f"{op}_{dt}_{'x'.join(map(str, shape))}_a{axis}"
                fn = _build(name, _op(op, ("x", dt, list(shape)), axis=axis))
                yield name, fn, {"x": _mixed(dt, shape, 96, rng)}
        for k in (1, 3, 8, 13):
            fn = _build(f"dot_{dt}_{k}", _op("dot", ("a", dt, [k]), ("b", dt, [k])))
            yield fn.name, fn, {"a": _mixed(dt, (k,), 96, rng), "b": _mixed(dt, (k,), 96, rng)}
        for m, k, n in ((2, 3, 4), (1, 5, 1), (3, 1, 2)):
            fn = _build(
                f"matmul_{dt}_{m}x{k}x{n}", _op("matmul", ("a", dt, [m, k]), ("b", dt, [k, n]))
            )
            ins = {"a": _mixed(dt, (m, k), 64, rng), "b": _mixed(dt, (k, n), 64, rng)}
            yield fn.name, fn, ins


def movement_cases(rng: np.random.Generator) -> Iterator[Case]:
    for dt in (D.BOOL, D.I32, D.U64, D.F32, D.F64):
        x = _mixed(dt, (2, 3, 4), 5, rng)

        def moves(b: FunctionBuilder, dt: DType = dt) -> tuple[Node, ...]:
            p = b.param("x", dt, [2, 3, 4])
            return (
                b.op(
                    "broadcast",
                    b.op("slice", p, start=[0, 1, 0], stop=[1, 2, 4]),
                    shape=[3, 2, 1, 4],
                ),
                b.op("reshape", p, shape=[4, 6]),
                b.op("transpose", p, perm=[2, 0, 1]),
                b.op("slice", p, start=[1, 0, 1], stop=[2, 3, 3]),
                b.op("concat", p, b.op("transpose", p, perm=[0, 1, 2]), axis=1),
                b.op("broadcast", b.op("reshape", p, shape=[24]), shape=[2, 24]),
            )

        fn = _build(f"moves_{dt}", moves)
        yield fn.name, fn, {"x": x}
    for dt in NUMERIC:

        def iotas(b: FunctionBuilder, dt: DType = dt) -> tuple[Node, ...]:
            return (
                b.op("iota", shape=[3, 5], axis=1, to=dt),
                b.op("iota", shape=[4, 2, 3], axis=0, to=dt),
            )

        fn = _build(f"iota_{dt}", iotas)
        yield fn.name, fn, {}
    payload = np.array([0x7FC12345, 0x80000000, 0xFF800001, 0x00000001], dtype=np.uint32)

    def consts(b: FunctionBuilder) -> tuple[Node, ...]:
        p = b.param("x", D.F32, [4])
        k = b.const(payload.view(np.float32), D.F32, [4])
        return k, b.op("select", b.param("c", D.BOOL, [4]), k, p), b.const(-7, D.I64, [2, 2])

    fn = _build("consts", consts)
    yield fn.name, fn, {"x": _mixed(D.F32, (4,), 9, rng), "c": _mixed(D.BOOL, (4,), 9, rng)}


def chain_cases(rng: np.random.Generator) -> Iterator[Case]:
    """Shaped elementwise chains (tile loops) and a large tile (arena storage)."""

    def chain(b: FunctionBuilder) -> tuple[Node, ...]:
        x = b.param("x", D.F32, [3, 2])
        y = b.param("y", D.F32, [3, 2])
        s = b.op("sqrt", b.op("abs", b.op("sub", b.op("mul", x, y), y)))
        i = b.op("convert", b.op("floor", s), to=D.I32)
        return b.op("max", s, x), b.op("shl", i, b.op("convert", b.op("round", y), to=D.I32))

    fn = _build("chain", chain)
    yield fn.name, fn, {"x": _mixed(D.F32, (3, 2), 33, rng), "y": _mixed(D.F32, (3, 2), 33, rng)}

    def big(b: FunctionBuilder) -> tuple[Node, ...]:
        x = b.param("x", D.F64, [1500])
        y = b.op("mul", x, b.op("transpose", x, perm=[0]))
        return b.op("sum", b.op("add", y, x), axis=0), b.op("amax", b.op("neg", y), axis=0)

    fn = _build("big", big)
    yield fn.name, fn, {"x": _mixed(D.F64, (1500,), 21, rng)}


def observer_cases(rng: np.random.Generator) -> Iterator[Case]:
    """Arithmetic NaNs (left non-canonical in registers until observed) flowing into every op
    that observes bits: neg, abs, copysign, bitcast, select, mixed concat, results, after
    aliases and data movement; and NaN-only readers (compare, min, float->int) in between."""

    def observers(b: FunctionBuilder) -> tuple[Node, ...]:
        a, q = b.param("a", D.F32), b.param("q", D.F32)
        c = b.param("c", D.BOOL)
        v = b.param("v", D.F32, [3])
        d = b.param("d", D.F64)
        diff = b.op("sub", a, q)  # inf - inf, NaN payloads in
        s1 = b.op("sum", b.op("reshape", v, shape=[3, 1]), axis=1)  # length-1 sums: canonical
        both = b.op("concat", b.op("broadcast", diff, shape=[3]), v, axis=0)
        narrow = b.op("convert", b.op("mul", d, d), to=D.F32)
        return (
            b.op("neg", diff),
            b.op("abs", b.op("add", q, a)),
            b.op("copysign", b.op("div", a, q), b.op("sqrt", q)),
            b.op("bitcast", b.op("mul", a, q), to=D.U32),
            b.op("select", c, b.op("sqrt", a), q),
            both,
            b.op("neg", b.op("reshape", s1, shape=[3])),
            b.op("transpose", b.op("reshape", b.op("floor", v), shape=[3, 1]), perm=[1, 0]),
            b.op("neg", b.op("fma", a, q, a)),
            b.op("bitcast", narrow, to=D.I32),
            b.op("neg", b.op("dot", v, v)),
            b.op("lt", diff, a),
            b.op("min", diff, a),
            b.op("convert", diff, to=D.I64),
            b.op("neg", b.op("convert", d, to=D.F32)),
            b.op("neg", b.op("convert", b.op("convert", a, to=D.F64), to=D.F32)),
        )

    fn = _build("observers", observers)
    rows = 512
    yield (
        fn.name,
        fn,
        {
            "a": _mixed(D.F32, (), rows, rng),
            "q": _mixed(D.F32, (), rows, rng),
            "c": _mixed(D.BOOL, (), rows, rng),
            "v": _mixed(D.F32, (3,), rows, rng),
            "d": _mixed(D.F64, (), rows, rng),
        },
    )


def suite() -> list[Case]:
    rng = np.random.default_rng(20240501)
    gens: list[Callable[[np.random.Generator], Iterator[Case]]]
    gens = [elementwise_cases, fma_cases, reduction_cases, movement_cases, chain_cases]
    gens += [observer_cases]
    return [case for gen in gens for case in gen(rng)]


# ------------------------------------------------------------------------------ comparison


def bits_of(a: Array) -> Array:
    a = np.asarray(a)
    return a.view(np.uint8) if a.dtype == np.bool_ else a.view(f"<u{a.dtype.itemsize}")


def mismatches(
    name: str, fn: Function, ins: dict[str, Array], got: Any, want: list[Array]
) -> list[str]:
    if isinstance(got, Exception):
        return [f"{name}: {type(got).__name__}: {got}"]
    out = []
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        if g.dtype != w.dtype or g.shape != w.shape:
            out.append(f"{name} result {k}: {g.dtype}{g.shape} != {w.dtype}{w.shape}")
            continue
        gb, wb = bits_of(g).reshape(len(g), -1), bits_of(w).reshape(len(w), -1)
        bad = np.nonzero((gb != wb).any(axis=1))[0]
        for row in bad[:3]:
            inputs = {p: bits_of(v[row]).tolist() for p, v in ins.items()}
            out.append(
                f"{name} result {k} row {row}: inputs {inputs} "
                f"want {[hex(v) for v in wb[row]]} got {[hex(v) for v in gb[row]]}"
            )
    return out


@pytest.fixture(scope="module")
def cases() -> list[tuple[str, Function, dict[str, Array], list[Array]]]:
    return [(name, fn, ins, interpret(fn, ins)) for name, fn, ins in suite()]


@pytest.mark.parametrize("target", TARGETS)
def test_every_op_and_dtype(target: str, cases: list[Any]) -> None:
    assert_agree(target, cases)


def assert_agree(target: str, cases: list[Any]) -> None:
    """``cases`` of (name, fn, inputs, the interpreter's outputs) run on ``target`` in one
    batch, every output compared bit for bit."""
    t = usable(target)
    got = t.run_many([(fn, ins) for _, fn, ins, _ in cases])
    bad = [
        m
        for (name, fn, ins, want), g in zip(cases, got, strict=True)
        for m in mismatches(name, fn, ins, g, want)
    ]
    assert not bad, f"{len(bad)} mismatches on {target}:\n" + "\n".join(bad[:40])


def test_suite_covers_every_op() -> None:
    """Every op but loops, calls and dynamic indexing, which test_c_loops.py and
    test_c_calls.py cover (bodies too), and transfers (test_c_transfers.py)."""
    ops = {n.op.value for _, fn, _ in suite() for n in fn.nodes()}
    assert ops == set(c.SUPPORTED) - {op.value for op in DYNAMIC | REGION_OPS | {Op.TRANSFER}}


# ------------------------------------------------------------------------------ catalog rows

U32 = np.uint32
U64 = np.uint64


def f32(*bits: int) -> Array:
    return np.array(bits, dtype=U32).view(np.float32)


def f64(*bits: int) -> Array:
    return np.array(bits, dtype=U64).view(np.float64)


def _binop(op: str, dt: DType) -> Function:
    return _build(f"{op}_{dt}", lambda b: b.op(op, b.param("a", dt), b.param("b", dt)))


def _unop(op: str, dt: DType, **attrs: Any) -> Function:
    return _build(f"{op}_{dt}", lambda b: b.op(op, b.param("x", dt), **attrs))


def _sum(dt: DType, n: int) -> Function:
    return _build(f"sum_{dt}_{n}", lambda b: b.op("sum", b.param("x", dt, [n]), axis=0))


def _fn(name: str, params: str, dt: DType, body: Callable[..., tuple[Node, ...]]) -> Function:
    """A function of scalar parameters named by the letters of ``params``."""
    b = FunctionBuilder(name)
    ps = [b.param(n, dt) for n in params]
    return b.build(*body(b, *ps))


# (catalog row, function, inputs, expected bits of each result): the contract stated by hand
CATALOG: list[tuple[str, Function, dict[str, Array], list[list[int]]]] = [
    (
        "generated NaN: 0/0, inf-inf, 0*inf, sqrt(-1) are +0x7FC00000",
        _fn(
            "gen_nan",
            "zio",
            D.F32,
            lambda b, z, i, o: (
                b.op("div", z, z),
                b.op("sub", i, i),
                b.op("mul", z, i),
                b.op("sqrt", b.op("neg", o)),
            ),
        ),
        {"z": f32(0), "i": f32(0x7F800000), "o": f32(0x3F800000)},
        [[0x7FC00000]] * 4,
    ),
    (
        "NaN propagation: qNaN(..01) + sNaN(..02) and -NaN * 1 are canonical; neg/abs keep payloads",
        _fn(
            "prop_nan",
            "qsn",
            D.F32,
            lambda b, q, s, n: (
                b.op("add", q, s),
                b.op("mul", n, q),
                b.op("neg", s),
                b.op("abs", n),
            ),
        ),
        {"q": f32(0x7FC00001), "s": f32(0x7F800002), "n": f32(0xFFC01234)},
        [[0x7FC00000], [0x7FC00000], [0xFF800002], [0x7FC01234]],
    ),
    (
        "min/max: -0 < +0 both ways; any NaN gives the canonical NaN",
        _fn("minmax", "ab", D.F32, lambda b, x, y: (b.op("min", x, y), b.op("max", x, y))),
        {
            "a": f32(0x00000000, 0x80000000, 0x7FC12345, 0x3F800000),
            "b": f32(0x80000000, 0x00000000, 0x3F800000, 0xFF812345),
        },
        [[0x80000000, 0x80000000, 0x7FC00000, 0x7FC00000], [0, 0, 0x7FC00000, 0x7FC00000]],
    ),
    (
        "f32->i32: NaN->0, 1e10->MAX, -1e10->MIN, -inf->MIN, -2.9->-2",
        _unop("convert", D.F32, to=D.I32),
        {"x": f32(0x7FC00000, 0x501502F9, 0xD01502F9, 0xFF800000, 0xC039999A)},
        [[0, 0x7FFFFFFF, 0x80000000, 0x80000000, 0xFFFFFFFE]],
    ),
    (
        "f32->u32: -1.0->0, 5e9->MAX, NaN->0, 4294967040.0 exact",
        _unop("convert", D.F32, to=D.U32),
        {"x": f32(0xBF800000, 0x4F9502F9, 0x7FC00000, 0x4F7FFFFF)},
        [[0, 0xFFFFFFFF, 0, 0xFFFFFF00]],
    ),
    (
        "f64->i64 and f64->u64 of NaN are 0; 2^63 saturates i64",
        _fn(
            "f64_to_64",
            "x",
            D.F64,
            lambda b, x: (b.op("convert", x, to=D.I64), b.op("convert", x, to=D.U64)),
        ),
        {"x": f64(0x7FF8000000000000, 0x43E0000000000000, 0xC3E0000000000000)},
        [[0, 0x7FFFFFFFFFFFFFFF, 0x8000000000000000], [0, 0x8000000000000000, 0]],
    ),
    (
        "shifts by >= width use amount & (width-1): 1 << 40 = 256, -4096 >> 40 = -16 (i32)",
        _fn("shifts", "ans", D.I32, lambda b, a, n, s: (b.op("shl", a, s), b.op("shr", n, s))),
        {
            "a": np.array([1], np.int32),
            "n": np.array([-4096], np.int32),
            "s": np.array([40], np.int32),
        },
        [[256], [0xFFFFFFF0]],
    ),
    (
        "u64 >> 127 shifts by 63",
        _binop("shr", D.U64),
        {"a": np.array([1 << 63], np.uint64), "b": np.array([127], np.uint64)},
        [[1]],
    ),
    (
        "x/0 = 0 and x%0 = x (signed and unsigned)",
        _fn("divzero", "az", D.I32, lambda b, a, z: (b.op("div", a, z), b.op("rem", a, z))),
        {"a": np.array([7, -7], np.int32), "z": np.array([0, 0], np.int32)},
        [[0, 0], [7, 0xFFFFFFF9]],
    ),
    (
        "u64: x/0 = 0 and x%0 = x",
        _fn("divzero_u", "az", D.U64, lambda b, a, z: (b.op("div", a, z), b.op("rem", a, z))),
        {"a": np.array([9, 2**64 - 1], np.uint64), "z": np.array([0, 0], np.uint64)},
        [[0, 0], [9, 2**64 - 1]],
    ),
    (
        "MIN/-1 = MIN and MIN%-1 = 0; -7/2 = -3, -7%2 = -1",
        _fn("minneg1", "ab", D.I64, lambda b, x, y: (b.op("div", x, y), b.op("rem", x, y))),
        {"a": np.array([-(2**63), -7], np.int64), "b": np.array([-1, 2], np.int64)},
        [[1 << 63, 0xFFFFFFFFFFFFFFFD], [0, 0xFFFFFFFFFFFFFFFF]],
    ),
    (
        "a*b+c is two roundings (0), fma one (2^-24): (1+2^-12)^2 - (1+2^-11)",
        _fn(
            "mul_add",
            "abc",
            D.F32,
            lambda b, x, y, z: (b.op("add", b.op("mul", x, y), z), b.op("fma", x, y, z)),
        ),
        {"a": f32(0x3F800800), "b": f32(0x3F800800), "c": f32(0xBF801000)},
        [[0x00000000], [0x33800000]],
    ),
    (
        "subnormals kept: 3*2^-149 * 0.5 = 2*2^-149 (ties to even), 2^-149 + 2^-149",
        _fn("subnormal", "aht", D.F32, lambda b, a, h, t: (b.op("mul", a, h), b.op("add", t, t))),
        {"a": f32(0x00000003), "h": f32(0x3F000000), "t": f32(0x00000001)},
        [[0x00000002], [0x00000002]],
    ),
    (
        "reduction of odd length uses the padded tree: sum(1e8, 1, -1e8) = 1 (not 0)",
        _sum(D.F32, 3),
        {"x": f32(0x4CBEBC20, 0x3F800000, 0xCCBEBC20).reshape(1, 3)},
        [[0x3F800000]],
    ),
    (
        "reduction of length 1 canonicalises NaN; sum of all -0 is -0",
        _build(
            "sum1",
            lambda b: (
                b.op("sum", b.param("x", D.F32, [1]), axis=0),
                b.op("sum", b.param("z", D.F32, [3]), axis=0),
            ),
        ),
        {
            "x": f32(0xFF812345).reshape(1, 1),
            "z": f32(0x80000000, 0x80000000, 0x80000000).reshape(1, 3),
        },
        [[0x7FC00000], [0x80000000]],
    ),
]


@pytest.mark.parametrize("row", range(len(CATALOG)), ids=[r[0][:40] for r in CATALOG])
def test_catalog_row_interp(row: int) -> None:
    """The oracle states the catalog's contract bits (a disagreement here is an interp bug)."""
    _, fn, ins, want = CATALOG[row]
    got = [bits_of(r).reshape(-1).tolist() for r in interpret(fn, ins)]
    assert got == want


@pytest.mark.parametrize("target", TARGETS)
def test_catalog_rows(target: str) -> None:
    t = usable(target)
    outs = t.run_many([(fn, ins) for _, fn, ins, _ in CATALOG])
    for (why, _, _, want), out in zip(CATALOG, outs, strict=True):
        assert not isinstance(out, Exception), f"{why}: {out}"
        got = [bits_of(r).reshape(-1).tolist() for r in out]
        assert got == want, why


# ------------------------------------------------------------------------------ C integration

USER_MAIN = r"""
#include "kera.h"
#include <stdio.h>
#include <string.h>
int set_ftz(void);
int main(void)
{
    float a[2] = {2.0f, 0.5f}, x[6] = {1, 2, 3, 4, 5, 6}, out[6];
    int rc = kera_saxpy(2, a, x, x, out);
    for (int i = 0; i < 6; i++) {
        unsigned u;
        memcpy(&u, &out[i], 4);
        printf("%08x ", u);
    }
    memset(out, 0, sizeof out);
    printf("rc=%d", rc);
    if (set_ftz())
        printf(" ftz_rc=%d", kera_saxpy(2, a, x, x, out));
    printf("\n");
    return 0;
}
"""
SET_FTZ = {
    "x86_64": "int set_ftz(void) { __builtin_ia32_ldmxcsr(__builtin_ia32_stmxcsr() | 0x8040u); return 1; }",
    "aarch64": "int set_ftz(void) { __builtin_aarch64_set_fpcr(__builtin_aarch64_get_fpcr() | (1u << 24)); return 1; }",
    "riscv64": "int set_ftz(void) { return 0; }",
}


def _saxpy() -> Function:
    def make(b: FunctionBuilder) -> Node:
        a = b.param("a", D.F32)
        x = b.param("x", D.F32, [3])
        y = b.param("y", D.F32, [3])
        return b.op("add", b.op("mul", b.op("broadcast", a, shape=[3]), x), y)

    return _build("saxpy", make)


@pytest.mark.parametrize("target", ["cpu", "cpu-aarch64", "cpu-riscv64"])
def test_c_program_links_and_guards_the_fp_environment(target: str, tmp_path: Path) -> None:
    t = usable(target)
    src = c.emit([_saxpy()], isa=t.isa)
    for name, text in src.files().items():
        (tmp_path / name).write_text(text)
    arch = "x86_64" if isinstance(t, CpuTarget) else t.arch
    if isinstance(t, CpuTarget) and arch != "x86_64":
        pytest.skip("the FTZ probe is written for x86-64 hosts")
    (tmp_path / "main.c").write_text(USER_MAIN + SET_FTZ[arch] + "\n")
    flags = [*c.PINNED_FLAGS, *c.ISAS[t.isa].flags]
    if isinstance(t, QemuTarget):
        flags += [*t.extra, "-static"]
    exe = tmp_path / "prog"
    sources = [str(tmp_path / "kera.c"), str(tmp_path / "main.c")]
    subprocess.run([t.gcc.exe, *flags, "-o", str(exe), *sources, "-lm"], check=True)
    run = [str(exe)] if isinstance(t, CpuTarget) else [t.qemu.exe, str(exe)]
    out = subprocess.run(run, capture_output=True, text=True, check=True).stdout.split()
    # row 0: 2*x + x; row 1: 0.5*x + x
    want = np.array([3, 6, 9, 6, 7.5, 9], dtype=np.float32).view(np.uint32)
    assert out[:6] == [f"{v:08x}" for v in want]
    assert out[6] == "rc=0"
    if arch != "riscv64":  # RISC-V has no flush-to-zero mode to guard against
        assert out[7] == "ftz_rc=1"


@pytest.mark.slow
@pytest.mark.timeout(0)  # hours by design; no per-test limit
@pytest.mark.parametrize("target", TARGETS)
def test_fma_edge_biased(target: str) -> None:
    """100k edge-biased fma cases per width (a third cancelling), against the interpreter (whose
    fma is checked against SoftFloat): glibc's fma/fmaf on SSE2-only builds, VFMADD, FMADD and
    RISC-V fmadd all round once."""
    t = usable(target)
    rng = np.random.default_rng(11)
    cases = []
    for dt in (D.F32, D.F64):
        n = 100_000
        a = edge_bits(rng, n, dt.bits)
        b = partner_bits(rng, a, dt.bits)
        with np.errstate(all="ignore"):
            p = a.view(dt.np) * b.view(dt.np)
        near = (-p).view(dt.uint) + rng.integers(-3, 4, n).astype(dt.uint)
        cc = np.where(rng.integers(0, 3, n) == 0, near, edge_bits(rng, n, dt.bits))
        fn = _fn(f"fma_edge_{dt}", "abc", dt, lambda bl, x, y, z: (bl.op("fma", x, y, z),))
        ins = {"a": a.view(dt.np), "b": b.view(dt.np), "c": cc.view(dt.np)}
        cases.append((fn.name, fn, ins, interpret(fn, ins)))
    got = t.run_many([(fn, ins) for _, fn, ins, _ in cases])
    bad = [
        m
        for (name, fn, ins, want), g in zip(cases, got, strict=True)
        for m in mismatches(name, fn, ins, g, want)
    ]
    assert not bad, "\n".join(bad[:20])


def test_a_function_that_fails_to_build_costs_only_its_cases(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The batch build is bisected: the failing function's cases get the error, the rest run."""
    t = usable("cpu")
    fns = [_unop(op, D.I32) for op in ("neg", "abs", "not")] + [_binop("add", D.I32)]
    poison = fns[1]
    real = CpuTarget._build
    builds: list[int] = []

    def build(self: CpuTarget, group: Any, made: Any = NONE_MADE) -> Path:
        builds.append(len(group))
        if any(fn is poison for fn in group.values()):
            raise BackendError("gcc failed (simulated)")
        return real(self, group, made)

    monkeypatch.setattr(CpuTarget, "_build", build)
    x = np.array([1, -2, 2**31 - 1], dtype=np.int32)
    cases = [(fn, {p: x for p in fn.param_names()}) for fn in fns]
    out = t.run_many(cases)
    assert isinstance(out[1], Exception) and "simulated" in str(out[1])
    for (fn, ins), got in zip(cases, out, strict=True):
        if fn is not poison:
            assert not isinstance(got, Exception)
            assert bits_of(got[0]).tolist() == bits_of(interpret(fn, ins)[0]).tolist()
    assert builds == [4, 2, 1, 1, 2]


def _hoisted_after_dead_tile(op: str) -> Function:
    """A per-row tile that dies before a hoisted (iota or const) tile is declared, every tile
    large enough for the arena at every lane count (a fuzzer finding: the hoisted tile took the
    dead tile's arena space, and the row loop overwrote it)."""

    def make(b: FunctionBuilder) -> tuple[Node, Node]:
        x = b.param("x", D.I64, [64, 33])
        if op == "iota":
            h = b.op("iota", shape=[64, 33], axis=0, to=D.I64)
        else:
            h = b.const(np.arange(64 * 33, dtype=np.int64).reshape(64, 33), D.I64, [64, 33])
        return b.op("not", x), h

    return _build(f"hoisted_{op}", make)


@pytest.mark.parametrize("target", TARGETS)
def test_hoisted_tiles_keep_their_arena_space(target: str) -> None:
    t = usable(target)
    rng = np.random.default_rng(9)
    cases = []
    for op in ("iota", "const"):
        fn = _hoisted_after_dead_tile(op)
        cases.append((fn, {"x": rng.integers(-(2**63), 2**63 - 1, (19, 64, 33), dtype=np.int64)}))
    for (fn, ins), out in zip(cases, t.run_many(cases), strict=True):
        assert not isinstance(out, Exception), f"{fn.name}: {out}"
        want = interpret(fn, ins)
        for k, (g, w) in enumerate(zip(out, want, strict=True)):
            assert np.array_equal(bits_of(g), bits_of(w)), f"{fn.name} result {k}"


@pytest.mark.parametrize("isa", list(c.ISAS))
def test_emitted_c_is_warning_free(isa: str, tmp_path: Path) -> None:
    """The whole corpus's C, at every ISA level, under -Wall -Wextra -Werror: users build our C
    with their own warning flags (found: unused variables in the rounding and float->unsigned
    helpers, and a misleading-indentation warning in the lane-map macros)."""
    import shutil

    from kera import frontend

    gcc = {"x86_64": "gcc", "aarch64": "aarch64-linux-gnu-gcc"}.get(c.ISAS[isa].arch, "gcc")
    if shutil.which(gcc) is None:
        pytest.skip(f"{gcc} not on PATH")
    fns: dict[str, Function] = {}
    for path in sorted((Path(__file__).parents[2] / "corpora").rglob("*.kera")):
        graph = frontend.compile_source(path.read_text(encoding="utf-8"), str(path)).graph
        assert graph is not None
        fns |= {f"f{fn.fingerprint[:20]}": fn for fn in graph.functions.values()}
    for name, text in c.emit(fns, isa=isa).files().items():
        (tmp_path / name).write_text(text)
    flags = [*c.PINNED_FLAGS, *c.ISAS[isa].flags, "-Wextra", "-Werror", "-fsyntax-only"]
    proc = subprocess.run([gcc, *flags, str(tmp_path / "kera.c")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]


def _snan_graph(dt: DType) -> Function:
    """Signalling-NaN constants (made by bitcast, as Kera source spells them) through every op
    that must keep NaN bits: broadcast, copysign, neg, abs, select, concat, reshape."""
    w, u = (32, D.U32) if dt is D.F32 else (64, D.U64)
    snan = {32: 0x7F800001, 64: 0x7FF0000000000001}[w]  # payload 1, quiet bit clear
    nsnan = snan | (1 << (w - 1))

    def make(b: FunctionBuilder) -> tuple[Node, ...]:
        x = b.param("x", dt, [3])
        s = b.op("bitcast", b.const(snan, u), to=dt)
        n = b.op("bitcast", b.const(nsnan, u), to=dt)
        v = b.op("broadcast", s, shape=[3])
        return (
            b.op("copysign", v, x),
            b.op("neg", v),
            b.op("abs", b.op("broadcast", n, shape=[3])),
            b.op("select", b.op("lt", x, x), x, v),
            b.op(
                "concat", v, b.op("reshape", b.op("broadcast", n, shape=[1, 3]), shape=[3]), axis=0
            ),
        )

    return _build(f"snan_{dt.value}", make)


@pytest.mark.parametrize("target", TARGETS)
def test_signalling_nan_constants_keep_their_bits(target: str) -> None:
    """A fuzzer finding: without -fsignaling-nans gcc folded a broadcast signalling-NaN constant
    into a quiet NaN at scalar lanes (RISC-V, x86 scalar), where the contract keeps the bits."""
    t = usable(target)
    rng = np.random.default_rng(4)
    cases = []
    for dt in (D.F32, D.F64):
        x = rng.standard_normal((5, 3)).astype(dt.np)
        cases.append((_snan_graph(dt), {"x": x}))
    for (fn, ins), out in zip(cases, t.run_many(cases), strict=True):
        assert not isinstance(out, Exception), f"{fn.name}: {out}"
        for k, (g, want) in enumerate(zip(out, interpret(fn, ins), strict=True)):
            assert np.array_equal(bits_of(g), bits_of(want)), f"{fn.name} result {k}"


def test_c_refuses_to_build_without_signalling_nans(tmp_path: Path) -> None:
    import shutil

    if shutil.which("gcc") is None:
        pytest.skip("gcc not on PATH")
    for name, text in c.emit({"f": _snan_graph(D.F32)}, isa="scalar").files().items():
        (tmp_path / name).write_text(text)
    flags = [f for f in c.PINNED_FLAGS if f != "-fsignaling-nans"]
    proc = subprocess.run(
        ["gcc", *flags, "-fsyntax-only", str(tmp_path / "kera.c")], capture_output=True, text=True
    )
    assert proc.returncode != 0 and "-fsignaling-nans" in proc.stderr


def test_a_large_batch_builds_in_parallel_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch of >= 2 * MIN_PER_BUILD functions is split into one artifact per CPU (up to
    build_jobs()), and every case still runs its own function."""
    import keracheck.targets.cpu as cpu_mod

    t = usable("cpu:scalar")
    monkeypatch.setattr(cpu_mod, "build_jobs", lambda: 3)
    fns = []
    for k in range(3 * cpu_mod.MIN_PER_BUILD):

        def make(b: FunctionBuilder, k: int = k) -> Node:
            x = b.param("x", D.I32, [2])
            return b.op("add", x, b.const(k, D.I32, [2]))

        fns.append(_build(f"plus{k}", make))
    groups = t._build_parallel({f"f{fn.fingerprint[:20]}": fn for fn in fns})
    assert not any(isinstance(g, Exception) for g in groups.values())
    assert len({g[0] for g in groups.values() if not isinstance(g, Exception)}) == 3
    x = np.arange(8, dtype=np.int32).reshape(4, 2)
    outs = t.run_many([(fn, {"x": x}) for fn in fns])
    for k, out in enumerate(outs):
        assert not isinstance(out, Exception) and np.array_equal(out[0], x + k), k
