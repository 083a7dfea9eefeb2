"""The fuzzer's loops and dynamic indexing: generated (policy ``loops``), interpreted, printed
as Kera source with the same fingerprint, and counted as the source reads."""

from __future__ import annotations

import collections

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from loopgraphs import GRAPHS

from kera.dtypes import DType
from kera.interp import interpret
from kera.ir import Function, FunctionBuilder, Node, loop, start_vector
from kera.ops import DYNAMIC, Op
from keracheck.fuzz import to_kera
from keracheck.fuzz.strategies import graphs, op_count
from keracheck.inputs import generate

LOOPY = frozenset({Op.LOOP} | DYNAMIC)
SEEN: collections.Counter[str] = collections.Counter()


@settings(
    max_examples=220,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@given(graphs(policies=("loops", "specials")))
def test_generated_loops_run_and_print_as_source(fn: Function | None) -> None:
    if fn is None:
        return
    used = fn.ops_used()
    SEEN.update(op.value for op in used & LOOPY)
    interpret(fn, generate(fn, 4, 0))
    if used & LOOPY:
        text = to_kera.render(fn, "case")
        assert to_kera.roundtrip(fn, text) is None, text


def test_the_loops_policy_generates_every_new_op() -> None:
    test_generated_loops_run_and_print_as_source()
    assert set(SEEN) == {op.value for op in LOOPY}, SEEN


def _accumulate() -> Function:
    """``for i in 0..4 with (s = a) { s + x[i] }``."""
    b = FunctionBuilder("acc")
    a, x = b.param("a", DType.F32), b.param("x", DType.F32, [4])

    def body(i: Node, c: list[Node]) -> list[Node]:
        row = b.op("dynamic_slice", x, start_vector([i]), size=[1])
        return [b.op("add", c[0], b.op("reshape", row, shape=[]))]

    return b.build(*loop(0, 4, [a], body))


def test_a_loop_counts_one_op_plus_its_body_as_printed() -> None:
    fn = _accumulate()
    assert op_count(fn) == 4  # the loop; dynamic_slice (its start vector inside), reshape, add
    text = to_kera.render(fn, "acc")
    assert "dynamic_slice(x, vi1, size = [1])" in text
    assert to_kera.roundtrip(fn, text) is None


@pytest.mark.parametrize("name", list(GRAPHS))
def test_every_shared_loop_graph_prints_back(name: str) -> None:
    fn = GRAPHS[name]()
    assert to_kera.roundtrip(fn, to_kera.render(fn, name)) is None


def test_a_start_vector_not_in_the_front_ends_form_is_a_print_error() -> None:
    b = FunctionBuilder("f")
    x, at = b.param("x", DType.F32, [4]), b.param("at", DType.I32, [1])
    fn = b.build(b.op("dynamic_slice", x, at, size=[2]))
    with pytest.raises(to_kera.PrintError, match="start vector"):
        to_kera.render(fn, "f")
    assert np.array_equal(
        interpret(fn, {"x": np.arange(4, dtype=np.float32)[None], "at": np.array([[9]], np.int32)})[
            0
        ],
        [[2.0, 3.0]],
    )
