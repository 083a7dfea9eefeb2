"""IR: interning, canonical order, fingerprints (stability and sensitivity), golden text."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

from kera import ir, limits
from kera.dtypes import DType
from kera.ir import Function, FunctionBuilder, Graph, IRError, Node, const, make_node
from kera.ops import Op, TensorType, TypeRuleError
from kera.text import graph_text


def saxpy(op: str = "add", scale: Any = 2.5, dtype: DType = DType.F32, n: int = 4) -> Function:
    b = FunctionBuilder("saxpy")
    x = b.param("x", dtype, [n])
    y = b.param("y", dtype, [n])
    a = b.op("broadcast", b.const(np.asarray(scale, dtype=dtype.np), dtype), shape=[n])
    return b.build(b.op(op, b.op("mul", a, x), y))


GOLDEN_FP = "a43260042e81df75870a82abf80ae01bb3a8479b8d81670078e572ca150a04c3"


def test_identical_nodes_are_one_object() -> None:
    b = FunctionBuilder("f")
    x = b.param("x", DType.I32, [3])
    assert b.op("add", x, x) is b.op("add", x, x)
    assert const(np.int32(1), DType.I32) is const(1, DType.I32)
    assert b.op("add", x, x) is not b.op("sub", x, x)


def test_nodes_are_immutable() -> None:
    n = const(1, DType.I32)
    with pytest.raises(AttributeError):
        n.op = "add"  # type: ignore[assignment]


def test_fingerprint_is_stable_across_processes_and_hash_seeds() -> None:
    code = (
        "import sys; sys.path.insert(0, 'tests/unit');"
        "from test_ir import saxpy; print(saxpy().fingerprint)"
    )
    seen = set()
    for seed in ("0", "1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        seen.add(out.stdout.strip())
    assert seen == {saxpy().fingerprint}
    assert saxpy().fingerprint == GOLDEN_FP, "canonical encoding changed: bump SCHEMA_VERSION"


def test_one_bit_changes_change_the_fingerprint() -> None:
    base = saxpy().fingerprint
    flipped = np.array([2.5], np.float32).view(np.uint32) ^ np.uint32(1)
    variants = {
        "constant bit": saxpy(scale=flipped.view(np.float32)[0]),
        "negative zero": saxpy(scale=np.float32(-0.0)),
        "operator": saxpy(op="sub"),
        "dtype": saxpy(dtype=DType.F64, scale=np.float64(2.5)),
        "shape": saxpy(n=5),
    }
    for what, fn in variants.items():
        assert fn.fingerprint != base, what
    assert saxpy(scale=np.float32(0.0)).fingerprint != saxpy(scale=np.float32(-0.0)).fingerprint


def test_edges_and_parameter_names_count_but_function_name_does_not() -> None:
    def f(swap: bool, pname: str = "y", fname: str = "f") -> Function:
        b = FunctionBuilder(fname)
        x, y = b.param("x", DType.I32), b.param(pname, DType.I32)
        return b.build(b.op("sub", y, x) if swap else b.op("sub", x, y))

    assert f(False).fingerprint != f(True).fingerprint
    assert f(False).fingerprint != f(False, pname="z").fingerprint
    assert f(False).fingerprint == f(False, fname="g").fingerprint


def test_nan_payload_constants_are_distinct() -> None:
    a = const(np.array(0x7FC00001, np.uint32).view(np.float32), DType.F32)
    b = const(np.array(0x7FC00002, np.uint32).view(np.float32), DType.F32)
    assert a is not b and a.hash != b.hash


def test_type_errors_are_reported_with_codes() -> None:
    b = FunctionBuilder("f")
    x, y = b.param("x", DType.F32, [4]), b.param("y", DType.I32, [4])
    with pytest.raises(TypeRuleError) as e:
        make_node("add", [x, y])
    assert e.value.code == "E0201"
    with pytest.raises(TypeRuleError) as e:
        make_node("sum", [x], {"axis": 1})
    assert e.value.code == "E0207"
    with pytest.raises(TypeRuleError) as e:
        make_node("shl", [x, x])
    assert e.value.code == "E0203"


def test_function_rejects_undeclared_params() -> None:
    b = FunctionBuilder("f")
    x = b.param("x", DType.I32)
    other = FunctionBuilder("g").param("x", DType.I64)
    with pytest.raises(IRError):
        Function("f", [x], [make_node("convert", [other], {"to": DType.I32})])


def test_topological_order_handles_deep_graphs() -> None:
    b = FunctionBuilder("deep")
    x = b.param("x", DType.I32)
    y = x
    for _ in range(20000):
        y = b.op("add", y, x)
    fn = b.build(y)
    nodes = fn.nodes()
    assert len(nodes) == 20001 and nodes[0] is x


GOLDEN_TEXT = """\
export fn saxpy(x: f32[4], y: f32[4]) -> (f32[4])
  ; fingerprint {fp}
  %0 = const : f32 [0x40200000]  ; 2.5
  %1 = broadcast %0 {{shape=[4]}} : f32[4]
  %2 = param x : f32[4]
  %3 = mul %1 %2 : f32[4]
  %4 = param y : f32[4]
  %5 = add %3 %4 : f32[4]
  return %5
"""


def test_golden_text_form() -> None:
    fn = saxpy()
    assert graph_text(Graph([fn])) == GOLDEN_TEXT.format(fp=fn.fingerprint)


def test_equal_but_differently_typed_attribute_values_hash_apart() -> None:
    """The attribute encoding cache is keyed by value types: 1 == True and DType.F32 == "f32"
    in Python, but their canonical encodings (and so the node hashes) differ."""
    from kera.ir import Node
    from kera.ops import AttrValue, Op, TensorType

    t = TensorType(DType.F32, (4,))
    x = make_node("neg", [FunctionBuilder("f").param("x", DType.F32, [4, 4])])
    pairs: list[tuple[AttrValue, AttrValue]] = [(1, True), (DType.F32, "f32"), (0, False)]
    for a, b in pairs:
        first = Node(Op.SUM, t, (x,), (("axis", a),))
        second = Node(Op.SUM, t, (x,), (("axis", b),))
        assert first is not second and first.hash != second.hash, (a, b)


def test_record_order_is_the_walk_from_params_then_effects_then_results() -> None:
    from pathlib import Path

    from kera import frontend
    from kera.ir import topo_order

    for path in sorted((Path(__file__).parents[2] / "corpora").glob("*.kera")):
        res = frontend.compile_source(path.read_text(encoding="utf-8"), str(path))
        assert res.graph is not None
        for fn in res.graph.functions.values():
            assert fn.record_order() == topo_order([*fn.params, *fn.effects, *fn.results]), fn.name


def test_a_sweep_drops_the_nodes_only_the_table_holds() -> None:
    b = FunctionBuilder("f")
    x = b.param("x", DType.F32, [4])
    kept = b.op("neg", x)
    dropped = b.op("abs", b.op("sqrt", kept))
    h_kept, h_dropped = kept.hash, dropped.hash
    fn = b.build(dropped)
    del dropped
    assert ir.interned(h_dropped) is fn.results[0]  # held by the function
    del fn, b  # the function's __del__ sweeps; a sweep is also run here for certain
    ir.sweep()
    assert ir.interned(h_dropped) is None
    assert ir.interned(h_kept) is kept and ir.interned(x.hash) is x  # still held here
    again = make_node("abs", [make_node("sqrt", [kept])])
    assert again.hash == h_dropped and ir.interned(h_dropped) is again


def test_a_freed_graph_takes_its_nodes_with_it() -> None:
    ir.sweep()
    before = len(ir._INTERNED)
    b = FunctionBuilder("f")
    v = b.param("v", DType.I32, [3])
    for k in range(2 * before + 100):  # more nodes than the table held: worth a sweep
        v = b.op("add", v, const(k, DType.I32, [3]))
    g = Graph([b.build(v)])
    del b, v
    assert len(ir._INTERNED) > 2 * before
    del g  # no explicit sweep: the function's __del__ sweeps when this many nodes died
    assert len(ir._INTERNED) <= before


def test_nodes_hold_one_object_per_type() -> None:
    b = FunctionBuilder("f")
    x = b.param("x", DType.F32, [4])
    y = b.param("y", DType.F32, [4])
    mine = TensorType(DType.F32, (4,))
    z = Node(Op.NEG, mine, (x,), ())  # a type object made by the caller
    assert x.type is y.type is z.type is b.op("add", x, y).type
    assert z.type == mine


def test_inferred_types_follow_the_limits_in_force() -> None:
    b = FunctionBuilder("f")
    x = b.param("x", DType.F32, [64])
    assert make_node("reshape", [x], {"shape": [8, 8]}).shape == (8, 8)  # inferred once
    saved = limits.current()
    limits.set_limits(dataclasses.replace(saved, elements=32))
    try:
        with pytest.raises(TypeRuleError) as e:  # the same inference, now over the budget
            make_node("reshape", [x], {"shape": [8, 8]})
        assert e.value.code == "E0215"
    finally:
        limits.set_limits(saved)
    assert make_node("reshape", [x], {"shape": [8, 8]}).shape == (8, 8)
