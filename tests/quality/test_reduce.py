"""The reductions after the shrinker (``keracheck.fuzz.reduce``) on planted targets: rows for
every signature class (an error included), then shapes, then values, each step checked by the
oracle -- the result still shows the signature."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kera.dtypes import DType
from kera.ir import Function, FunctionBuilder
from keracheck.fuzz import reduce, select_targets
from keracheck.fuzz.oracle import Case, Divergence, Oracle

PLANTED = str(Path(__file__).parent / "planted.py")
Array = np.ndarray[Any, Any]


@pytest.fixture
def oracle_of() -> Iterator[Any]:
    made: list[Oracle] = []

    def make(cls: str) -> Oracle:
        targets, _ = select_targets(["ref"], [f"{PLANTED}:{cls}"])
        made.append(Oracle(targets, isolate=False))
        return made[-1]

    yield make
    for o in made:
        o.close()


def _divergence(oracle: Oracle, fn: Function, inputs: dict[str, Array], op: str) -> Divergence:
    found = [d for d in oracle.check_cases([Case(fn, inputs)]) if d.signature.op == op]
    assert found, "the planted bug does not show on this case"
    return found[0]


def _still_shows(oracle: Oracle, div: Divergence) -> bool:
    fresh = Case(Function(div.fn.name, div.fn.params, div.fn.results), div.case.inputs)
    return div.signature in {d.signature for d in oracle.check_cases([fresh])}


def test_an_error_keeps_one_row_one_element_and_simple_values(oracle_of: Any) -> None:
    """DivZeroTrap raises on any zero divisor in the batch, so a row analysis cannot tell the
    rows apart: each row is tried alone.  Row 37 of 64 holds the only zero, at element 2."""
    oracle = oracle_of("DivZeroTrap")
    b = FunctionBuilder("f")
    x, y = b.param("x", DType.I32, [4]), b.param("y", DType.I32, [4])
    fn = b.build(b.op("div", x, y))
    rng = np.random.default_rng(0)
    xs = rng.integers(-1000, 1000, (64, 4)).astype(np.int32)
    ys = rng.integers(1, 1000, (64, 4)).astype(np.int32)
    ys[37, 2] = 0
    div = _divergence(oracle, fn, {"x": xs, "y": ys}, "div")
    assert div.signature.cls == "error" and div.case.rows == 64
    small = reduce.reduce(oracle, div)
    assert small.signature == div.signature and small.case.rows == 1
    assert [str(p.type) for p in small.fn.params] == ["i32[1]", "i32[1]"]
    assert [int(v.reshape(-1)[0]) for v in small.case.inputs.values()] == [0, 0]
    assert _still_shows(oracle, small)


def test_a_sum_over_129_elements_keeps_three(oracle_of: Any) -> None:
    """SequentialSum adds left to right: three elements of the 129 are enough to round
    differently from the contract's tree."""
    oracle = oracle_of("SequentialSum")
    b = FunctionBuilder("f")
    x = b.param("x", DType.F32, [129])
    fn = b.build(b.op("sum", x, axis=0))
    xs = np.random.default_rng(1).standard_normal((8, 129)).astype(np.float32)
    div = _divergence(oracle, fn, {"x": xs}, "sum")
    assert div.signature.cls == "ulp"
    small = reduce.reduce(oracle, div)
    assert small.signature == div.signature and small.case.rows == 1
    assert [str(p.type) for p in small.fn.params] == ["f32[3]"]
    assert _still_shows(oracle, small)


def test_a_shape_the_type_rules_cannot_follow_is_kept(oracle_of: Any) -> None:
    """neg(reshape(x: f64[6]) to [2, 3]): no dimension can shrink alone (the reshape's sizes
    would no longer match), so the shapes step leaves the graph as it is."""
    oracle = oracle_of("NegCanonicalises")
    b = FunctionBuilder("f")
    x = b.param("x", DType.F64, [6])
    fn = b.build(b.op("neg", b.op("reshape", x, shape=(2, 3))))
    nan = np.array([0x7FF8000000000001], dtype=np.uint64).view(np.float64)[0]
    xs = np.full((1, 6), nan)
    div = _divergence(oracle, fn, {"x": xs}, "neg")
    same = reduce.smaller_shapes(oracle, div)
    assert same.fn.fingerprint == div.fn.fingerprint
    # the whole reduction first cuts the reshape away (a parameter fed its values), then shrinks
    small = reduce.reduce(oracle, div)
    assert [str(p.type) for p in small.fn.params] == ["f64[1, 1]"]
    assert _still_shows(oracle, small)
