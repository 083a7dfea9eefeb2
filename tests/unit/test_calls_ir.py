"""Calls in the IR: the typing rule of ``call``, groups run once, what the fingerprint covers,
the ``.keg`` encoding of callees (and what the loader refuses), the expansion budget that keeps
a few bytes of nested calls from becoming an exponential graph, and the printer."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from callgraphs import GRAPHS, graph

from kera import keg, limits
from kera.dtypes import DType
from kera.interp import interpret
from kera.ir import (
    Function,
    FunctionBuilder,
    Graph,
    IRError,
    Node,
    TensorType,
    call,
    callee,
    loop_group,
    make_node,
    param,
)
from kera.ops import Op, TypeRuleError
from kera.semantics import SEMANTICS
from keracheck.fuzz import to_kera

F32, I32 = DType.F32, DType.I32
Array = np.ndarray[Any, Any]
V4 = TensorType(F32, (4,))


def _square() -> Function:
    return callee("sq", [V4], lambda p: [make_node(Op.MUL, [p[0], p[0]])])


def test_a_callee_is_named_by_position_and_its_name_is_not_hashed() -> None:
    a = callee("sq", [V4], lambda p: [make_node(Op.MUL, [p[0], p[0]])])
    b = callee("square", [V4], lambda p: [make_node(Op.MUL, [p[0], p[0]])])
    assert [p.attr("name") for p in a.params] == ["_0"]
    assert a.fingerprint == b.fingerprint


def test_the_typing_rule_refuses_mismatched_operands_results_and_names() -> None:
    x, n = param(0, "x", F32, [4]), param(1, "n", I32, [4])
    with pytest.raises(TypeRuleError, match="must match its callee's parameters"):
        make_node(Op.CALL, [n], {"body": _square(), "result": 0})
    with pytest.raises(TypeRuleError, match="call result 1 is not one of its 1 values"):
        make_node(Op.CALL, [x], {"body": _square(), "result": 1})
    named = Function("g", [param(0, "v", F32, [4])], [param(0, "v", F32, [4])])
    with pytest.raises(TypeRuleError, match="named _0, _1"):
        make_node(Op.CALL, [x], {"body": named, "result": 0})


def test_the_results_of_one_call_are_one_group_run_once() -> None:
    runs: list[int] = []

    def counting_mul(node: Node, a: Array, b: Array) -> Array:
        runs.append(1)
        return SEMANTICS[Op.MUL](node, a, b)

    g = callee("g", [V4], lambda p: [make_node(Op.MUL, [p[0], p[0]]), make_node(Op.NEG, [p[0]])])
    b = FunctionBuilder("f")
    x = b.param("x", F32, [4])
    sq, neg = call(g, [x])
    assert loop_group(sq) == loop_group(neg)
    fn = b.build(neg, sq)
    interpret(fn, {"x": np.ones((3, 4), np.float32)}, overrides={"mul": counting_mul})
    assert len(runs) == 1


def test_two_calls_on_the_same_operands_are_one_node() -> None:
    x = param(0, "x", F32, [4])
    assert call(_square(), [x])[0] is call(_square(), [x])[0]


def test_the_callee_is_in_the_fingerprint() -> None:
    x = param(0, "x", F32, [4])
    cube = callee("sq", [V4], lambda p: [make_node(Op.MUL, [p[0], make_node(Op.NEG, [p[0]])])])
    a = Function("f", [x], call(_square(), [x]))
    b = Function("f", [x], call(cube, [x]))
    assert a.fingerprint != b.fingerprint


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_keg_round_trips_every_call_graph(name: str) -> None:
    g = graph(name)
    back = keg.loads(keg.dumps(g))
    fn, got = g.functions[name], back.functions[name]
    assert got.fingerprint == fn.fingerprint
    xs = {p.attr("name"): np.full((2, *p.shape), 3, p.dtype.np) for p in fn.params}
    for w, h in zip(interpret(fn, xs), interpret(got, xs), strict=True):
        assert w.tobytes() == h.tobytes()


def _tree(depth: int) -> Function:
    """g_k(x) = g_{k-1}(x * 2) + g_{k-1}(x * 3): 2^depth copies of g_0 when inlined."""
    g = callee("g0", [V4], lambda p: [make_node(Op.NEG, [p[0]])])
    for k in range(1, depth + 1):
        prev = g

        def body(p: list[Node], prev: Function = prev) -> list[Node]:
            two = make_node(Op.ADD, [p[0], p[0]])
            a, b = call(prev, [two])[0], call(prev, [make_node(Op.MUL, [two, p[0]])])[0]
            return [make_node(Op.ADD, [a, b])]

        g = callee(f"g{k}", [V4], body)
    x = param(0, "x", F32, [4])
    return Function("f", [x], call(g, [x]))


def test_nested_calls_are_held_to_the_expansion_budget() -> None:
    assert _tree(10).inlined < 10_000  # 2^10 copies of a handful of nodes
    with pytest.raises(IRError, match="expansion budget"):
        _tree(20)


def test_a_keg_that_expands_past_the_budget_is_refused_when_loaded() -> None:
    limits.set_limits(limits.Limits(expansion=10_000_000))
    try:
        data = keg.dumps(Graph([_tree(18)]))
    finally:
        limits.set_limits(limits.Limits())
    assert len(data) < 4096  # a small file ...
    with pytest.raises(keg.KegError, match="expansion"):  # ... refused, not expanded
        keg.loads(data)


def test_the_printer_spells_calls_as_helper_functions() -> None:
    fn = GRAPHS["sum_and_product"]()
    text = to_kera.render(fn, "f")
    assert text.count("\nfn ") + text.startswith("fn ") == 1  # one helper, called twice
    assert to_kera.roundtrip(fn, text) is None
