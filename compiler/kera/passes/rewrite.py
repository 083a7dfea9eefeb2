"""Rewriting an immutable, interned graph: rebuild it bottom-up through a rule.

Nodes never change; a pass builds new ones.  ``rewrite`` walks a function in canonical order,
gives each node (already rebuilt on its rewritten inputs) to ``rule``, and uses what the rule
returns in its place.  Interning does the rest: a rebuilt node identical to a live one *is*
that node, so common subexpressions merge by construction, and nodes that nothing reaches any
more are simply not part of the new function (``Function`` holds only what its results need).
"""

from __future__ import annotations

from collections.abc import Callable

from kera.ir import Function, Node
from kera.ops import Op

#: node -> replacement, or None to keep it
Rule = Callable[[Node], Node | None]


def with_inputs(node: Node, inputs: tuple[Node, ...]) -> Node:
    """``node`` on other inputs of the same types (the result type is unchanged)."""
    # Tuple equality compares identical items without calling ``__eq__``, and a Node has no
    # ``__eq__`` of its own (distinct nodes are unequal): this is "every input is the same node",
    # without a generator per node.
    if inputs == node.inputs:
        return node
    return Node(node.op, node.type, inputs, node.attr_items)


def rewrite(fn: Function, rule: Rule) -> tuple[Function, int]:
    """``fn`` with ``rule`` applied once to every node, inputs first; and how many nodes the
    rule replaced.  A replacement must have the type of the node it replaces."""
    new: dict[int, Node] = {}
    count = 0
    param = Op.PARAM
    for node in fn.nodes():
        if node.op is param:
            new[id(node)] = node
            continue
        inputs = node.inputs
        if inputs:  # the hot loop: a list, not a generator, and no call when nothing changed
            rebuilt_inputs = tuple([new[id(i)] for i in inputs])
            rebuilt = (
                node
                if rebuilt_inputs == inputs
                else Node(node.op, node.type, rebuilt_inputs, node.attr_items)
            )
        else:
            rebuilt = node
        out = rule(rebuilt)
        if out is not None and out is not rebuilt:
            if out.type != node.type:
                raise AssertionError(f"rewrite of {node.op} changed its type to {out.type}")
            count += 1
            rebuilt = out
        new[id(node)] = rebuilt
    results = tuple([new[id(r)] for r in fn.results])
    if results == fn.results:  # the same nodes (see ``with_inputs``)
        return fn, count
    return Function(fn.name, fn.params, results), count
