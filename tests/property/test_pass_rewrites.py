"""Every optimisation rewrite keeps every bit: each ``simplify`` rule on the pattern it
rewrites, ``fold`` and ``cse``, and the whole ``-O2`` pipeline on random graphs, each checked
with Hypothesis over special values (signed zeros, infinities, NaNs with other payloads,
integer extremes) by comparing the reference interpreter's output bits before and after.

Each pattern test also asserts that its rule fired, so none of them can pass vacuously.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from callgraphs import GRAPHS as CALL_GRAPHS
from hypothesis import given, settings
from hypothesis import strategies as st

from kera import passes
from kera.dtypes import DType
from kera.interp import interpret
from kera.ir import Function, FunctionBuilder, Node, TensorType, call, callee, const, make_node
from kera.ops import Op
from kera.passes import cse, fold, inline, simplify
from keracheck.fuzz.strategies import graphs
from keracheck.inputs import generate

Array = np.ndarray[Any, Any]
FLOATS = (DType.F32, DType.F64)
INTS = (DType.I32, DType.U32, DType.I64, DType.U64)
SIGNED = (DType.I32, DType.I64)
SHAPE = (4,)


def _bits(a: Array) -> bytes:
    return np.ascontiguousarray(a).tobytes()


def same_bits(before: Function, after: Function, seed: int, rows: int = 64) -> None:
    xs = generate(before, rows, seed)
    want = interpret(before, xs)
    got = interpret(after, {k: v for k, v in xs.items()})
    for w, g in zip(want, got, strict=True):
        assert w.dtype == g.dtype and w.shape == g.shape
        assert _bits(w) == _bits(g), f"{before} -> {after}: bits differ"


def _fn(build: Callable[[FunctionBuilder, list[Node]], Node], dt: DType, n: int) -> Function:
    b = FunctionBuilder("f")
    xs = [b.param(f"x{i}", dt, SHAPE) for i in range(n)]
    return b.build(build(b, xs))


def _k(dt: DType, value: int) -> Node:
    """A uniform constant of ``dt`` whose every element has the bit pattern ``value``."""
    if dt is DType.BOOL:
        return const(bool(value), dt, SHAPE)
    raw = np.full(SHAPE, value, dtype=f"u{dt.nbytes}")
    return const(raw.view(dt.np), dt, SHAPE)


def _ones(dt: DType) -> int:
    return 1 if dt is DType.BOOL else (1 << dt.bits) - 1


# (rule, dtypes, number of params, pattern)
Pattern = tuple[str, tuple[DType, ...], int, Callable[[FunctionBuilder, list[Node]], Node]]
PATTERNS: list[Pattern] = [
    ("neg_neg", FLOATS + INTS, 1, lambda b, x: b.op("neg", b.op("neg", x[0]))),
    ("not_not", (*INTS, DType.BOOL), 1, lambda b, x: b.op("not", b.op("not", x[0]))),
    ("abs_abs", FLOATS + SIGNED, 1, lambda b, x: b.op("abs", b.op("abs", x[0]))),
    ("abs_abs", FLOATS + SIGNED, 1, lambda b, x: b.op("abs", b.op("neg", x[0]))),
    ("copysign_self", FLOATS, 1, lambda b, x: b.op("copysign", x[0], x[0])),
    (
        "select_same",
        FLOATS + INTS,
        2,
        lambda b, x: b.op("select", b.op("lt", x[0], x[1]), x[1], x[1]),
    ),
    (
        "select_same",
        FLOATS + INTS,
        2,
        lambda b, x: b.op("select", const(True, DType.BOOL, SHAPE), x[0], x[1]),
    ),
    (
        "select_same",
        FLOATS + INTS,
        2,
        lambda b, x: b.op("select", const(False, DType.BOOL, SHAPE), x[0], x[1]),
    ),
    (
        "bitcast_roundtrip",
        (DType.F32, DType.F64),
        1,
        lambda b, x: b.op(
            "bitcast",
            b.op("bitcast", x[0], to=DType.U32 if x[0].dtype is DType.F32 else DType.I64),
            to=x[0].dtype,
        ),
    ),
    (
        "convert_roundtrip",
        (DType.I32, DType.U32, DType.BOOL),
        1,
        lambda b, x: b.op("convert", b.op("convert", x[0], to=DType.I64), to=x[0].dtype),
    ),
    (
        "convert_roundtrip",
        (DType.I32, DType.U32),
        1,
        lambda b, x: b.op(
            "convert",
            b.op("convert", x[0], to=DType.U32 if x[0].dtype is DType.I32 else DType.I32),
            to=x[0].dtype,
        ),
    ),
    ("same_shape", FLOATS + INTS, 1, lambda b, x: b.op("reshape", x[0], shape=[4])),
    ("same_shape", FLOATS + INTS, 1, lambda b, x: b.op("broadcast", x[0], shape=[4])),
    ("same_shape", FLOATS + INTS, 1, lambda b, x: b.op("slice", x[0], start=[0], stop=[4])),
    ("same_shape", FLOATS + INTS, 1, lambda b, x: b.op("transpose", x[0], perm=[0])),
    (
        "reshape_reshape",
        FLOATS + INTS,
        1,
        lambda b, x: b.op("reshape", b.op("reshape", x[0], shape=[2, 2]), shape=[1, 4]),
    ),
    (
        "transpose_transpose",
        FLOATS + INTS,
        1,
        lambda b, x: b.op(
            "transpose",
            b.op("transpose", b.op("reshape", x[0], shape=[1, 2, 2]), perm=[2, 0, 1]),
            perm=[1, 2, 0],
        ),
    ),
    ("int_add", INTS, 1, lambda b, x: b.op("add", x[0], _k(x[0].dtype, 0))),
    ("int_add", INTS, 1, lambda b, x: b.op("add", _k(x[0].dtype, 0), x[0])),
    ("int_sub", INTS, 1, lambda b, x: b.op("sub", x[0], _k(x[0].dtype, 0))),
    ("int_sub", INTS, 1, lambda b, x: b.op("sub", x[0], x[0])),
    ("int_mul", INTS, 1, lambda b, x: b.op("mul", x[0], _k(x[0].dtype, 1))),
    ("int_mul", INTS, 1, lambda b, x: b.op("mul", _k(x[0].dtype, 0), x[0])),
    ("int_div", INTS, 1, lambda b, x: b.op("div", x[0], _k(x[0].dtype, 1))),
    ("int_rem", INTS, 1, lambda b, x: b.op("rem", x[0], _k(x[0].dtype, 1))),
    ("int_and", (*INTS, DType.BOOL), 1, lambda b, x: b.op("and", x[0], x[0])),
    ("int_and", (*INTS, DType.BOOL), 1, lambda b, x: b.op("and", x[0], _k(x[0].dtype, 0))),
    (
        "int_and",
        (*INTS, DType.BOOL),
        1,
        lambda b, x: b.op("and", _k(x[0].dtype, _ones(x[0].dtype)), x[0]),
    ),
    ("int_or", (*INTS, DType.BOOL), 1, lambda b, x: b.op("or", x[0], x[0])),
    ("int_or", (*INTS, DType.BOOL), 1, lambda b, x: b.op("or", x[0], _k(x[0].dtype, 0))),
    (
        "int_or",
        (*INTS, DType.BOOL),
        1,
        lambda b, x: b.op("or", x[0], _k(x[0].dtype, _ones(x[0].dtype))),
    ),
    ("int_xor", (*INTS, DType.BOOL), 1, lambda b, x: b.op("xor", x[0], x[0])),
    ("int_xor", (*INTS, DType.BOOL), 1, lambda b, x: b.op("xor", _k(x[0].dtype, 0), x[0])),
    ("shift_zero", INTS, 1, lambda b, x: b.op("shl", x[0], _k(x[0].dtype, 0))),
    ("shift_zero", INTS, 1, lambda b, x: b.op("shr", x[0], _k(x[0].dtype, x[0].dtype.bits))),
    ("shift_zero", INTS, 1, lambda b, x: b.op("shr", x[0], _k(x[0].dtype, 2 * x[0].dtype.bits))),
    ("int_minmax_self", INTS, 1, lambda b, x: b.op("min", x[0], x[0])),
    ("int_minmax_self", INTS, 1, lambda b, x: b.op("max", x[0], x[0])),
    *[
        ("int_compare_self", (*INTS, DType.BOOL), 1, lambda b, x, op=op: b.op(op, x[0], x[0]))
        for op in ("eq", "ne")
    ],
    *[
        ("int_compare_self", INTS, 1, lambda b, x, op=op: b.op(op, x[0], x[0]))
        for op in ("lt", "le", "gt", "ge")
    ],
]


def _cases() -> list[Any]:
    return [
        pytest.param(rule, dt, n, build, id=f"{rule}-{i}-{dt.value}")
        for i, (rule, dts, n, build) in enumerate(PATTERNS)
        for dt in dts
    ]


@pytest.mark.parametrize(("rule", "dt", "n", "build"), _cases())
@settings(max_examples=8)
@given(seed=st.integers(0, 2**32 - 1))
def test_simplify_rule_keeps_bits(
    rule: str, dt: DType, n: int, build: Callable[[FunctionBuilder, list[Node]], Node], seed: int
) -> None:
    fn = _fn(build, dt, n)
    root = fn.results[0]
    fired = getattr(simplify, rule)(root)
    assert fired is not None, f"{rule} did not fire on {root}"
    after, rewrites = simplify.run(fn)
    assert rewrites >= 1
    same_bits(fn, after, seed)


def test_every_simplify_rule_has_a_pattern() -> None:
    named = {r.__name__ for rules in simplify.RULES.values() for r in rules}
    assert named == {rule for rule, *_ in PATTERNS}


# rewrites that are true of real numbers and false of bits: simplify must leave them alone
UNSAFE: list[tuple[str, Callable[[FunctionBuilder, list[Node]], Node]]] = [
    ("x*1.0", lambda b, x: b.op("mul", x[0], const(1.0, x[0].dtype, SHAPE))),
    ("x+0.0", lambda b, x: b.op("add", x[0], const(0.0, x[0].dtype, SHAPE))),
    ("x+-0.0", lambda b, x: b.op("add", x[0], const(-0.0, x[0].dtype, SHAPE))),
    ("x-x", lambda b, x: b.op("sub", x[0], x[0])),
    ("min(x,x)", lambda b, x: b.op("min", x[0], x[0])),
    ("x==x", lambda b, x: b.op("eq", x[0], x[0])),
    ("x/1.0", lambda b, x: b.op("div", x[0], const(1.0, x[0].dtype, SHAPE))),
]


@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: d.value)
@pytest.mark.parametrize(("name", "build"), UNSAFE, ids=[u[0] for u in UNSAFE])
def test_float_non_identities_are_not_simplified(
    name: str, build: Callable[[FunctionBuilder, list[Node]], Node], dt: DType
) -> None:
    fn = _fn(build, dt, 1)
    after = passes.optimize(fn, passes.pipeline(2)).function
    assert after.results[0].op is fn.results[0].op, f"{name} was rewritten to {after.results[0]}"


@settings(max_examples=60)
@given(fn=graphs(), seed=st.integers(0, 2**32 - 1))
def test_o2_keeps_bits_on_random_graphs(fn: Function | None, seed: int) -> None:
    if fn is None:
        return
    outcome = passes.optimize(fn, passes.pipeline(2))
    same_bits(fn, outcome.function, seed, rows=16)


@settings(max_examples=40)
@given(fn=graphs(), seed=st.integers(0, 2**32 - 1))
def test_inline_fold_and_cse_alone_keep_bits(fn: Function | None, seed: int) -> None:
    if fn is None:
        return
    for p in (inline, fold, cse):
        after, _ = p.run(fn)
        same_bits(fn, after, seed, rows=16)


def test_cse_merges_commuted_operands() -> None:
    b = FunctionBuilder("f")
    x, y = b.param("x", DType.F32, SHAPE), b.param("y", DType.F32, SHAPE)
    fn = b.build(b.op("sub", b.op("add", x, y), b.op("add", y, x)))
    after, swapped = cse.run(fn)
    assert swapped == 1 and len(after.nodes()) == len(fn.nodes()) - 1
    sub = after.results[0]
    assert sub.inputs[0] is sub.inputs[1]


def test_fold_uses_the_contract_for_nan_and_signed_zero() -> None:
    snan = np.array(0x7FA00001, dtype=np.uint32).view(np.float32)
    b = FunctionBuilder("f")
    k = b.op("add", const(snan, DType.F32), const(-0.0, DType.F32))
    z = b.op("min", const(0.0, DType.F32), const(-0.0, DType.F32))
    fn = b.build(k, z)
    after, folded = fold.run(fn)
    assert folded == 2 and all(r.op is Op.CONST for r in after.results)
    nan, zero = (r.attr("value") for r in after.results)
    assert isinstance(nan, bytes) and isinstance(zero, bytes)
    assert np.frombuffer(nan, dtype=np.uint32).tolist() == [DType.F32.canonical_nan]
    assert np.frombuffer(zero, dtype=np.uint32).tolist() == [1 << 31]


def test_fold_does_not_blow_up_a_broadcast() -> None:
    b = FunctionBuilder("f")
    big = b.op("broadcast", const(2.0, DType.F32), shape=[4096, 4])
    fn = b.build(big)
    after, folded = fold.run(fn)
    assert folded == 0 and after.results[0].op is Op.BROADCAST


def test_fold_keeps_uniform_results_as_a_broadcast_scalar() -> None:
    b = FunctionBuilder("f")
    two = b.op("broadcast", const(2.0, DType.F32), shape=[4096, 4])
    three = b.op("broadcast", const(3.0, DType.F32), shape=[4096, 4])
    fn = b.build(b.op("add", two, three))
    after, folded = fold.run(fn)
    (r,) = after.results
    assert folded == 1 and r.op is Op.BROADCAST and r.inputs[0].op is Op.CONST
    assert r.inputs[0].shape == () and fold.constant_value(r.inputs[0]) == np.float32(5.0)
    mixed = FunctionBuilder("g")
    ramp = const(np.arange(8, dtype=np.float32), DType.F32, [8])
    fn2 = mixed.build(
        mixed.op("add", ramp, mixed.op("broadcast", const(1.0, DType.F32), shape=[8]))
    )
    (r2,) = fold.run(fn2)[0].results
    value = fold.constant_value(r2)
    assert r2.op is Op.CONST and value is not None and value.tolist() == list(range(1, 9))


def test_fold_folds_an_op_over_iotas_and_keeps_the_iota() -> None:
    """``iota == iota`` (an identity matrix) folds through the contract's leaf values, as the
    Verilog back end's element folding used to; the iota itself stays a leaf, and a huge iota
    is never computed while compiling."""
    b = FunctionBuilder("f")
    rows = b.op("iota", shape=[3, 3], axis=0, to=DType.I32)
    cols = b.op("iota", shape=[3, 3], axis=1, to=DType.I32)
    huge = b.op("iota", shape=[fold.HARD_LIMIT + 1], axis=0, to=DType.I64)
    fn = b.build(b.op("eq", rows, cols), rows, b.op("sum", huge, axis=0))
    after, folded = fold.run(fn)
    eye, kept, total = after.results
    assert folded == 1 and (eye.op, kept.op, total.op) == (Op.CONST, Op.IOTA, Op.SUM)
    value = fold.constant_value(eye)
    assert value is not None and value.tolist() == np.eye(3, dtype=bool).tolist()
    same_bits(fn, after, 0, rows=1)


@pytest.mark.parametrize("name", sorted(CALL_GRAPHS))
def test_inline_expands_every_call_and_keeps_bits(name: str) -> None:
    """Nested calls, calls in loop bodies and loops in callees: one run leaves no call."""
    fn = CALL_GRAPHS[name]()
    after, rewrites = inline.run(fn)
    assert Op.CALL in fn.ops_used() and Op.CALL not in after.ops_used()
    assert rewrites >= 1
    same_bits(fn, after, seed=7, rows=32)


def test_inline_merges_a_callee_with_the_caller() -> None:
    """After inlining, cse and fold see through the call: ``g(x) + x*x`` is one product."""
    g = callee("g", [TensorType(DType.F32, (4,))], lambda p: [make_node(Op.MUL, [p[0], p[0]])])
    b = FunctionBuilder("f")
    x = b.param("x", DType.F32, [4])
    fn = b.build(b.op("add", call(g, [x])[0], b.op("mul", x, x)))
    after = passes.optimize(fn, passes.pipeline(2)).function
    add = after.results[0]
    assert add.op is Op.ADD and add.inputs[0] is add.inputs[1]
