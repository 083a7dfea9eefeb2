"""Unsafe rewrites, planted as pass plugins: each is true of real numbers and false of bits,
so each must be caught by ``keracheck --opt-levels 0,2 --pass-plugin`` (``fuzz`` and ``run``).

Load one with ``--pass-plugin tests/quality/planted_passes.py:Reassociate``.  ``PLANTED`` lists
each with the op the fuzzer's signature must name and the most nodes its reproducer may keep.
None of these may ever be a real pass: ``kera.passes.simplify`` says why for each.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from kera.ir import Function, Node, const, const_value, make_node
from kera.ops import REDUCE, REDUCE_STEP, Op
from kera.passes.rewrite import rewrite


class Planted:
    name: ClassVar[str] = "planted"
    version: ClassVar[int] = 1

    def rule(self, node: Node) -> Node | None:
        raise NotImplementedError

    def run(self, fn: Function) -> tuple[Function, int]:
        return rewrite(fn, self.rule)


def _uniform_float(node: Node) -> float | None:
    if node.op is Op.BROADCAST:
        node = node.inputs[0]
    if node.op is not Op.CONST or not node.dtype.is_float:
        return None
    v = const_value(node).reshape(-1)
    return (
        float(v[0])
        if v.size
        and bool((v.view(f"u{node.dtype.nbytes}") == v.view(f"u{node.dtype.nbytes}")[0]).all())
        else None
    )


class Reassociate(Planted):
    """``(a + b) + c -> a + (b + c)`` on floats: each order rounds differently.  It fires when
    ``c`` is a constant (what a compiler does to bring constants together) or when ``c`` has
    the largest node hash of the three (an arbitrary but fixed association order), so the
    rewrite cannot undo itself and the pipeline reaches a fixed point."""

    name = "planted-reassociate"

    def rule(self, node: Node) -> Node | None:
        if node.op is not Op.ADD or not node.dtype.is_float:
            return None
        for left, c in (node.inputs, node.inputs[::-1]):
            if left.op is not Op.ADD or c.op is Op.ADD:
                continue
            a, b = left.inputs
            if Op.ADD in (a.op, b.op):
                continue
            if _uniform_float(c) is not None or c.hash > max(a.hash, b.hash):
                return make_node(Op.ADD, [a, make_node(Op.ADD, [b, c])])
        return None


class Contract(Planted):
    """``a * b + c -> fma(a, b, c)``: one rounding instead of two (the catalog's contraction
    row: what ``-ffp-contract=fast`` does)."""

    name = "planted-contract"

    def rule(self, node: Node) -> Node | None:
        if node.op is not Op.ADD or not node.dtype.is_float:
            return None
        for m, c in (node.inputs, node.inputs[::-1]):
            if m.op is Op.MUL:
                return make_node(Op.FMA, [m.inputs[0], m.inputs[1], c])
        return None


class AddZero(Planted):
    """``x + 0.0 -> x``: wrong for ``x = -0.0`` (the sum is ``+0.0``) and for NaN payloads."""

    name = "planted-add-zero"

    def rule(self, node: Node) -> Node | None:
        if node.op is not Op.ADD or not node.dtype.is_float:
            return None
        a, b = node.inputs
        if _uniform_float(b) == 0.0:
            return a
        if _uniform_float(a) == 0.0:
            return b
        return None


class ReductionOrder(Planted):
    """``sum(x)`` over a vector -> ``x[0] + sum(x[1:])``: a different tree than the
    contract's (any reduction order change is one)."""

    name = "planted-reduction-order"

    def rule(self, node: Node) -> Node | None:
        if node.op not in REDUCE or len(node.inputs[0].shape) != 1:
            return None
        x = node.inputs[0]
        n = x.shape[0]
        if n < 3 or x.op is Op.SLICE:
            return None
        head = make_node(
            Op.RESHAPE, [make_node(Op.SLICE, [x], {"start": [0], "stop": [1]})], {"shape": []}
        )
        rest = make_node(Op.SLICE, [x], {"start": [1], "stop": [n]})
        tail = make_node(node.op, [rest], {"axis": 0})
        return make_node(REDUCE_STEP[node.op], [head, tail])


class DivToMul(Planted):
    """``x / c -> x * (1/c)`` for a constant ``c``: ``1/c`` is rounded, then the product."""

    name = "planted-div-to-mul"

    def rule(self, node: Node) -> Node | None:
        if node.op is not Op.DIV or not node.dtype.is_float:
            return None
        c = _uniform_float(node.inputs[1])
        if c is None or c == 0.0 or not np.isfinite(c):
            return None
        recip = np.asarray(1.0, node.dtype.np) / np.asarray(c, node.dtype.np)
        k: Any = const(recip, node.dtype, node.shape)
        return make_node(Op.MUL, [node.inputs[0], k])


#: plugin -> (ops the fuzzer's signature may name, most nodes of its reproducer)
PLANTED: dict[type[Planted], tuple[frozenset[str], int]] = {
    Reassociate: (frozenset({"add"}), 4),
    Contract: (frozenset({"add", "fma"}), 4),
    AddZero: (frozenset({"add"}), 4),
    ReductionOrder: (frozenset({"sum", "prod", "amin", "amax", "add", "mul"}), 4),
    DivToMul: (frozenset({"div", "mul"}), 4),
}
