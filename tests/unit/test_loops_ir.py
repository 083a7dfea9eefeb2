"""Loops and dynamic indexing in the IR: closing a body over its captures, what the fingerprint
covers, the .keg encoding of bodies (and the loader's refusals), the interpreter's meaning of
the three ops, and passes and the validator reaching into bodies."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from loopgraphs import GRAPHS, graph

from kera import keg
from kera.dtypes import DType
from kera.interp import interpret
from kera.ir import (
    Function,
    FunctionBuilder,
    Graph,
    IRError,
    Node,
    const,
    loop,
    loop_body,
    loop_group,
    make_node,
    param,
)
from kera.ops import MAX_LOOP_DEPTH, MAX_TRIPS, Op, TypeRuleError
from kera.passes import optimize_graph, pipeline
from kera.passes.fold import run as fold
from kera.passes.validate import InvariantError, validate

F32, I32 = DType.F32, DType.I32
Body = Callable[[Node, list[Node]], list[Node]]


def _accumulate(trips: int = 8, lo: int = 0, op: str = "add") -> Function:
    """``for i in lo..lo+trips with (s = x) { s op (x * y) }`` over f32[4]."""
    b = FunctionBuilder("acc")
    x, y = b.param("x", F32, [4]), b.param("y", F32, [4])
    (s,) = loop(lo, trips, [x], lambda i, c: [b.op(op, c[0], b.op("mul", x, y))])
    return b.build(s)


# ------------------------------------------------------------------------- closing a body


def test_loop_invariant_values_become_captured_operands() -> None:
    fn = _accumulate()
    (node,) = fn.results
    body = loop_body(node)
    # x * y does not depend on the index or the carried value: computed once, outside
    assert [i.op.value for i in node.inputs] == ["param", "mul"]
    assert [p.attr("name") for p in body.params] == ["_0", "_1", "_2"]
    assert [n.op.value for n in body.nodes() if n.op.value != "param"] == ["add"]


def test_constant_subexpressions_stay_in_the_body() -> None:
    b = FunctionBuilder("f")
    x = b.param("x", F32, [4])
    two = b.op("add", const(1.0, F32, [4]), const(1.0, F32, [4]))
    (s,) = loop(0, 3, [x], lambda i, c: [b.op("mul", c[0], two)])
    assert s.inputs == (x,)  # nothing captured: the constant expression is part of the body
    assert "add" in [n.op.value for n in loop_body(s).nodes()]


def test_a_body_returning_a_captured_value_or_its_carried_value() -> None:
    b = FunctionBuilder("f")
    x, y = b.param("x", F32, [4]), b.param("y", F32, [4])
    a, same = loop(0, 2, [x, x], lambda i, c: [b.op("neg", y), c[1]])
    body = loop_body(a)
    assert body.results[1] is body.params[2]  # carried unchanged
    assert body.results[0] is body.params[3]  # neg(y) is invariant: captured
    out = interpret(
        b.build(a, same), {"x": np.ones((2, 4), np.float32), "y": np.ones((2, 4), np.float32)}
    )
    assert (out[0] == -1).all() and (out[1] == 1).all()


def test_siblings_share_one_group_and_one_body() -> None:
    fn = GRAPHS["verlet"]()
    x, v = fn.results
    assert loop_group(x) == loop_group(v) and x is not v
    assert loop_body(x) is loop_body(v)


def test_nested_loops_capture_the_outer_index() -> None:
    fn = GRAPHS["nested_sum"]()
    assert fn.depth == 2
    outer = loop_body(fn.results[0])
    inner = next(n for n in outer.nodes() if n.op.value == "loop")
    assert len(inner.inputs) == 2  # the carried start and the outer index, converted


def test_a_body_of_the_wrong_arity_or_type_is_refused() -> None:
    x = param(0, "x", F32, [4])
    with pytest.raises(IRError, match="2 values for 1 carried"):
        loop(0, 2, [x], lambda i, c: [c[0], c[0]])
    with pytest.raises(TypeRuleError, match="carried values"):
        loop(0, 2, [x], lambda i, c: [make_node("convert", [c[0]], {"to": DType.F64})])


@pytest.mark.parametrize("trips", [0, MAX_TRIPS + 1])
def test_trip_counts_out_of_range_are_refused(trips: int) -> None:
    with pytest.raises(TypeRuleError, match="a loop runs 1"):
        _accumulate(trips=trips)


def test_the_index_must_fit_in_i32() -> None:
    with pytest.raises(TypeRuleError, match="does not fit in i32"):
        _accumulate(trips=4, lo=(1 << 31) - 2)


def test_nesting_deeper_than_the_limit_is_refused() -> None:
    x = param(0, "x", F32, [4])

    def nest(depth: int, v: Node) -> Node:
        if depth == 0:
            return make_node("neg", [v])
        return loop(0, 2, [v], lambda i, c: [nest(depth - 1, c[0])])[0]

    Function("ok", [x], [nest(MAX_LOOP_DEPTH, x)])
    with pytest.raises(IRError, match=f"nest {MAX_LOOP_DEPTH + 1} deep"):
        Function("deep", [x], [nest(MAX_LOOP_DEPTH + 1, x)])


def test_work_counts_trips_times_body_and_is_capped() -> None:
    b = FunctionBuilder("big")
    x = b.param("x", F32, [1 << 16])
    (s,) = loop(0, 1 << 15, [x], lambda i, c: [b.op("neg", c[0])])
    with pytest.raises(IRError, match=r"trip count x body size"):
        b.build(s)


# ------------------------------------------------------------------------- fingerprints


def test_the_fingerprint_does_not_depend_on_how_the_loop_was_built() -> None:
    # each build uses fresh placeholder parameters; the closed bodies are the same
    assert _accumulate().fingerprint == _accumulate().fingerprint


@pytest.mark.parametrize(
    "change",
    [
        lambda: _accumulate(trips=9),
        lambda: _accumulate(lo=1),
        lambda: _accumulate(op="sub"),
    ],
)
def test_trips_lo_and_the_body_are_in_the_fingerprint(change: Callable[[], Function]) -> None:
    assert change().fingerprint != _accumulate().fingerprint


def test_the_initial_value_is_in_the_fingerprint() -> None:
    b = FunctionBuilder("acc")
    x, y = b.param("x", F32, [4]), b.param("y", F32, [4])
    (s,) = loop(0, 8, [b.op("neg", x)], lambda i, c: [b.op("add", c[0], b.op("mul", x, y))])
    assert b.build(s).fingerprint != _accumulate().fingerprint


# ------------------------------------------------------------------------- .keg


@pytest.mark.parametrize("name", list(GRAPHS))
def test_keg_round_trips_every_loop_graph(name: str) -> None:
    g = graph(name)
    data = keg.dumps(g)
    again = keg.loads(data)
    assert again.functions[name].fingerprint == g.functions[name].fingerprint
    assert keg.dumps(again) == data


def test_shared_bodies_are_stored_once() -> None:
    b = FunctionBuilder("two")
    x, y = b.param("x", F32, [4]), b.param("y", F32, [4])
    body: Body = lambda i, c: [b.op("neg", c[0])]  # noqa: E731
    fn = b.build(loop(0, 3, [x], body)[0], loop(0, 3, [y], body)[0])
    data = keg.dumps(Graph([fn]))
    assert _region_count(data) == 2  # one body, one export


def _section(data: bytes, kind: int) -> tuple[int, int]:
    count = struct.unpack_from("<H", data, 6)[0]
    for i in range(count):
        k, off, length = struct.unpack_from("<IQQ", data, 16 + 20 * i)
        if k == kind:
            return off, length
    raise AssertionError(kind)


def _region_count(data: bytes) -> int:
    off, _ = _section(data, 5)
    return int(struct.unpack_from("<I", data, off)[0])


def _strings(data: bytes) -> list[str]:
    off, _ = _section(data, 1)
    n, at, out = struct.unpack_from("<I", data, off)[0], off + 4, []
    for _ in range(n):
        length = struct.unpack_from("<I", data, at)[0]
        out.append(data[at + 4 : at + 4 + length].decode())
        at += 4 + length
    return out


def _patch_region_attr(data: bytes, new_index: int) -> bytes:
    """The loop's ``body`` attribute (key, tag 7, u32 region) pointed at another region."""
    off, length = _section(data, 3)
    entry = struct.pack("<I", _strings(data).index("body")) + bytes([7])
    at = data.index(entry, off, off + length) + len(entry)
    return data[:at] + struct.pack("<I", new_index) + data[at + 4 :]


def test_a_region_attribute_out_of_range_is_a_keg_error() -> None:
    data = keg.dumps(Graph([_accumulate()]))
    with pytest.raises(keg.KegError, match="region 9 out of range"):
        keg.loads(_patch_region_attr(data, 9))


def test_a_loop_naming_its_own_export_region_is_a_keg_error() -> None:
    data = keg.dumps(Graph([_accumulate()]))
    with pytest.raises(keg.KegError, match="written after the loop"):
        keg.loads(_patch_region_attr(data, 1))  # region 1 is the export, written later


def test_an_export_naming_a_loop_body_is_a_keg_error() -> None:
    data = keg.dumps(Graph([_accumulate()]))
    off, _ = _section(data, 6)
    at = off + 4 + 4  # count, then the first export's name string; its region index
    bad = data[:at] + struct.pack("<I", 0) + data[at + 4 :]
    with pytest.raises(keg.KegError, match="is a loop body"):
        keg.loads(bad)


def test_every_truncation_of_a_loop_keg_is_a_clean_error() -> None:
    data = keg.dumps(graph("nested_sum"))
    for cut in range(0, len(data), 7):
        with pytest.raises(keg.KegError):
            keg.loads(data[:cut])


# ------------------------------------------------------------------------- interpreter


def _ds_reference(x: np.ndarray[Any, Any], starts: list[int], size: list[int]) -> Any:
    """dynamic_slice of one (unbatched) value, by the contract's words."""
    s = [min(max(a, 0), d - w) for a, d, w in zip(starts, x.shape, size, strict=True)]
    return x[tuple(slice(a, a + w) for a, w in zip(s, size, strict=True))]


_I32S = st.one_of(
    st.sampled_from([-(1 << 31), -1, 0, 1, 2, 5, 6, (1 << 31) - 1]),
    st.integers(-(1 << 31), (1 << 31) - 1),
)


@given(st.lists(st.tuples(_I32S, _I32S), min_size=1, max_size=6))
def test_dynamic_ops_clamp_every_start_index(starts: list[tuple[int, int]]) -> None:
    b = FunctionBuilder("dyn")
    x, v = b.param("x", F32, [6, 5]), b.param("v", F32, [2, 3])
    at = b.param("at", I32, [2])
    fn = b.build(b.op("dynamic_slice", x, at, size=[3, 2]), b.op("dynamic_update_slice", x, v, at))
    n = len(starts)
    xs = np.arange(n * 30, dtype=np.float32).reshape(n, 6, 5)
    vs = -np.arange(n * 6, dtype=np.float32).reshape(n, 2, 3) - 1
    ats = np.array(starts, dtype=np.int32)
    win, upd = interpret(fn, {"x": xs, "v": vs, "at": ats})
    for k in range(n):
        assert np.array_equal(win[k], _ds_reference(xs[k], list(starts[k]), [3, 2]))
        want = xs[k].copy()
        r, c = (min(max(a, 0), d - w) for a, d, w in zip(starts[k], (6, 5), (2, 3), strict=True))
        want[r : r + 2, c : c + 3] = vs[k]
        assert np.array_equal(upd[k], want)


def test_a_loop_runs_its_iterations_in_order() -> None:
    fn = GRAPHS["serial_sum"]()
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((4, 256)) * 1e4).astype(np.float32)
    naive, _ = interpret(fn, {"x": x})
    for row in range(4):
        s = np.float32(0)
        for value in x[row]:
            s = np.float32(s + value)
        assert naive[row].view(np.uint32) == s.view(np.uint32)


def test_index_as_data_matches_python() -> None:
    fn = GRAPHS["index_as_data"]()
    a = np.array([[0.5, -2.0, 3.0]], dtype=np.float64)
    once, same = interpret(fn, {"a": a})
    acc = a[0].copy()
    for i in range(-3, 4):
        acc = acc * i + a[0]  # fma of exactly representable values: no rounding differs
    assert np.array_equal(once[0], acc * acc) and np.array_equal(same[0], -a[0])


# ------------------------------------------------------------------------- passes, validator


def test_passes_rewrite_inside_bodies() -> None:
    b = FunctionBuilder("f")
    x = b.param("x", F32, [4])
    two = b.op("add", const(1.0, F32, [4]), const(1.0, F32, [4]))
    fn = b.build(*loop(0, 3, [x], lambda i, c: [b.op("mul", c[0], two)]))
    folded, count = fold(fn)
    assert count == 1
    assert "add" not in [n.op.value for n in loop_body(folded.results[0]).nodes()]
    validate(folded)
    xs = np.array([[1, -0.0, np.inf, 3]], dtype=np.float32)
    assert np.array_equal(interpret(fn, {"x": xs})[0], interpret(folded, {"x": xs})[0])


@pytest.mark.parametrize("name", list(GRAPHS))
def test_optimised_loop_graphs_keep_their_bits(name: str) -> None:
    from keracheck.inputs import generate

    g = graph(name)
    opt, _ = optimize_graph(g, pipeline(2))
    fn, fo = g.functions[name], opt.functions[name]
    validate(fo)
    inputs = generate(fn, 16, 0)
    for a, b in zip(interpret(fn, inputs), interpret(fo, inputs), strict=True):
        assert np.array_equal(a.view(np.uint8), b.view(np.uint8))


def test_the_validator_reaches_into_bodies() -> None:
    fn = _accumulate()
    body = loop_body(fn.results[0])
    nodes = body._nodes
    body._nodes = list(reversed(nodes))
    try:
        with pytest.raises(InvariantError, match="in the body of loop") as err:
            validate(fn)
        assert err.value.invariant == "body"
    finally:
        body._nodes = nodes


def test_ops_used_include_every_body() -> None:
    fn = GRAPHS["nested_sum"]()
    assert {n.op for n in fn.nodes()} == {Op.PARAM, Op.LOOP}
    assert {Op.LOOP, Op.CONVERT, Op.FMA} - fn.ops_used() == {Op.FMA}
    assert len(fn.regions()) == 3  # the function, the outer body, the inner body


def test_a_parameter_named_like_a_placeholder_stays_a_parameter() -> None:
    from kera import ir

    taken = f"_loop{ir._SERIAL[0] + 1}_i"  # the name the next loop would give its index
    b = FunctionBuilder("f")
    p = b.param(taken, I32)  # parameter 0, an i32 scalar: a placeholder's very content
    (s,) = loop(0, 3, [p], lambda i, c: [b.op("add", c[0], p)])
    out = interpret(b.build(s), {taken: np.array([5], dtype=np.int32)})[0]
    assert out[0] == 20  # p + 3 * p, not p + (0 + 1 + 2)
