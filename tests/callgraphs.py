"""Hand-built graphs with calls, shared by every back end's tests (as ``loopgraphs`` is for
loops).

Each entry builds one exported function with ``kera.ir`` directly.  Between them they pin what a
lowering of ``call`` gets wrong first: a callee with several results (one group, run once),
the same callee called twice on different operands (its parameters bound per call, no state
left between calls), operands in swapped order, a call of a call, a callee that returns its
parameter unchanged or a constant, a callee with a loop, a call inside a loop body (the
callee's parameters bound to the body's values on every trip), a callee reading only some of
its parameters, a call with no parameters, mixed dtypes (a bool and an i64 result), a call
whose operand is a NaN-producing op (a dirty NaN must be canonical where the callee can see
its bits), and shapes that need broadcasting and reductions inside the callee.

``GRAPHS`` maps a name to a zero-argument builder; ``graph(name)`` wraps one in a ``Graph``.
"""

from __future__ import annotations

from collections.abc import Callable

from kera.dtypes import DType
from kera.ir import Function, FunctionBuilder, Graph, Node, TensorType, call, callee, const, loop
from kera.ir import make_node as mk

F32, F64, I32, I64, BOOL = DType.F32, DType.F64, DType.I32, DType.I64, DType.BOOL


def _t(dtype: DType, *shape: int) -> TensorType:
    return TensorType(dtype, tuple(shape))


def sum_and_product() -> Function:
    """A callee with two results, called twice with the operands swapped: ``a*b + c`` is not
    symmetric, so a lowering that binds parameters by the wrong call's operands shows."""
    g = callee(
        "muladd",
        [_t(F32, 8), _t(F32, 8), _t(F32, 8)],
        lambda p: [mk("add", [mk("mul", [p[0], p[1]]), p[2]]), mk("sub", [p[0], p[2]])],
    )
    b = FunctionBuilder("sum_and_product")
    x, y, z = (b.param(n, F32, [8]) for n in "xyz")
    r1, d1 = call(g, [x, y, z])
    r2, d2 = call(g, [z, y, x])
    return b.build(b.op("sub", r1, r2), b.op("mul", d1, d2))


def nested_calls() -> Function:
    """A call of a call: ``outer(x) = inner(inner(x) * 2)``; ``inner`` divides (NaN on 0/0)."""
    inner = callee(
        "inner",
        [_t(F32, 4)],
        lambda p: [mk("div", [mk("sub", [p[0], mk("broadcast", [_one()], {"shape": [4]})]), p[0]])],
    )

    def outer_body(p: list[Node]) -> list[Node]:
        (once,) = call(inner, [p[0]])
        twice = mk("mul", [once, mk("broadcast", [_two()], {"shape": [4]})])
        return call(inner, [twice])

    outer = callee("outer", [_t(F32, 4)], outer_body)
    b = FunctionBuilder("nested_calls")
    x = b.param("x", F32, [4])
    (r,) = call(outer, [x])
    return b.build(r, b.op("neg", r))


def _one() -> Node:
    return const(1.0, F32)


def _two() -> Node:
    return const(2.0, F32)


def passthrough() -> Function:
    """A callee returning its second parameter unchanged, a constant, and its first negated:
    results that are parameters or constants (no node of the callee computes them)."""
    g = callee(
        "pass",
        [_t(F64, 3), _t(I32, 3)],
        lambda p: [p[1], const(7, I32), mk("neg", [p[0]])],
    )
    b = FunctionBuilder("passthrough")
    x, k = b.param("x", F64, [3]), b.param("k", I32, [3])
    same, seven, neg = call(g, [x, k])
    return b.build(b.op("add", same, b.op("broadcast", seven, shape=[3])), neg)


def callee_with_loop() -> Function:
    """A callee whose body is a loop (an f32 sum in a fixed order, observable)."""

    def body(p: list[Node]) -> list[Node]:
        (acc,) = loop(0, 5, [p[0]], lambda i, c: [mk("add", [mk("mul", [c[0], p[1]]), p[0]])])
        return [acc]

    g = callee("horner", [_t(F32, 6), _t(F32, 6)], body)
    b = FunctionBuilder("callee_with_loop")
    x, y = b.param("x", F32, [6]), b.param("y", F32, [6])
    (r1,) = call(g, [x, y])
    (r2,) = call(g, [y, x])
    return b.build(r1, r2)


def call_in_loop() -> Function:
    """A call inside a loop body: the callee's parameters bound to the carried value and the
    index on every trip."""
    g = callee(
        "step",
        [_t(F32, 4), _t(I32)],
        lambda p: [
            mk("add", [p[0], mk("broadcast", [mk("convert", [p[1]], {"to": F32})], {"shape": [4]})])
        ],
    )
    b = FunctionBuilder("call_in_loop")
    x = b.param("x", F32, [4])
    (r,) = loop(-2, 7, [x], lambda i, c: call(g, [mk("mul", [c[0], c[0]]), i]))
    return b.build(r)


def unused_param() -> Function:
    """A callee that reads only its second parameter, and a call with no parameters."""
    g = callee("second", [_t(F32, 2), _t(I64, 2)], lambda p: [mk("mul", [p[1], p[1]])])
    h = callee("answer", [], lambda p: [const(42, I64)])
    b = FunctionBuilder("unused_param")
    x, n = b.param("x", F32, [2]), b.param("n", I64, [2])
    (sq,) = call(g, [x, n])
    (c,) = call(h, [])
    return b.build(b.op("add", sq, b.op("broadcast", c, shape=[2])))


def mixed_results() -> Function:
    """A bool and an i64 result with a reduction and a broadcast inside the callee, the call's
    operand a NaN-producing op of the caller (sqrt of a negative)."""

    def body(p: list[Node]) -> list[Node]:
        total = mk("sum", [p[0]], {"axis": 1})
        big = mk("gt", [total, mk("broadcast", [_one()], {"shape": [3]})])
        count = mk("sum", [mk("convert", [big], {"to": I64})], {"axis": 0})
        return [big, count, total]

    g = callee("stats", [_t(F32, 3, 4)], body)
    b = FunctionBuilder("mixed_results")
    x = b.param("x", F32, [3, 4])
    big, count, total = call(g, [b.op("sqrt", x)])
    return b.build(big, count, total)


GRAPHS: dict[str, Callable[[], Function]] = {
    "sum_and_product": sum_and_product,
    "nested_calls": nested_calls,
    "passthrough": passthrough,
    "callee_with_loop": callee_with_loop,
    "call_in_loop": call_in_loop,
    "unused_param": unused_param,
    "mixed_results": mixed_results,
}


def graph(name: str) -> Graph:
    return Graph([GRAPHS[name]()])
