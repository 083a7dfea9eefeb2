"""Rewriting an immutable, interned graph: rebuild it bottom-up through a rule.

Nodes never change; a pass builds new ones.  ``rewrite`` walks a function in canonical order,
gives each node (already rebuilt on its rewritten inputs) to ``rule``, and uses what the rule
returns in its place.  Interning does the rest: a rebuilt node identical to a live one *is*
that node, so common subexpressions merge by construction, and nodes that nothing reaches any
more are simply not part of the new function (``Function`` holds only what its results need).

A loop's body (or a call's callee) is a region of its own, held in the node's ``body``
attribute: ``rewrite`` rewrites it with the same rule first (once per distinct body) and
rebuilds the node on the new body, so every pass reaches every region.  A body keeps its
parameters (a loop's index, carried values and captures; a callee's arguments) as they are.

Effects (``docs/passes.md``, Effects): an effectful node (a ``transfer``, or a loop or call of a
region with effects) is rebuilt on its rewritten inputs but never offered to ``rule``, and the
function keeps its effect roots, in order: a rule can neither fold, merge, drop nor reorder an
effect.  (``inline``, which must expand effectful calls, does so itself.)
"""

from __future__ import annotations

from collections.abc import Callable

from kera.ir import Function, Node, is_effectful, loop_body
from kera.ops import EFFECTS, REGION_OPS, Op

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


def rewrite(
    fn: Function, rule: Rule, bodies: dict[bytes, tuple[Function, int]] | None = None
) -> tuple[Function, int]:
    """``fn`` with ``rule`` applied once to every node, inputs first; and how many nodes the
    rule replaced.  A replacement must have the type of the node it replaces.  ``bodies``
    memoises rewritten loop bodies by region hash (shared by nested calls)."""
    new: dict[Node, Node] = {}  # nodes hash by identity (they define no ``__eq__``)
    count = 0
    param = Op.PARAM
    bodies = {} if bodies is None else bodies
    guarded = _EFFECT_OPS if fn.declared else _NONE  # a region without effects has none
    for node in fn.nodes():
        op = node.op
        if op is param:
            new[node] = node
            continue
        original = node
        if op in REGION_OPS:
            node, n = _with_rewritten_body(node, rule, bodies)
            count += n
        inputs = node.inputs
        if inputs:  # the hot loop: a list, not a generator, and no call when nothing changed
            rebuilt_inputs = tuple([new[i] for i in inputs])
            rebuilt = (
                node
                if rebuilt_inputs == inputs
                else Node(op, node.type, rebuilt_inputs, node.attr_items)
            )
        else:
            rebuilt = node
        if op in guarded and is_effectful(rebuilt):
            new[original] = rebuilt
            continue
        out = rule(rebuilt)
        if out is not None and out is not rebuilt:
            if out.type != node.type:
                raise AssertionError(f"rewrite of {op} changed its type to {out.type}")
            count += 1
            rebuilt = out
        new[original] = rebuilt
    results = tuple([new[r] for r in fn.results])
    effects = tuple([new[e] for e in fn.effects])
    if results == fn.results and effects == fn.effects:  # the same nodes (see ``with_inputs``)
        return fn, count
    return Function(fn.name, fn.params, results, effects, fn.declared), count


_EFFECT_OPS = frozenset({*EFFECTS, *REGION_OPS})
_NONE: frozenset[Op] = frozenset()


def _with_rewritten_body(
    node: Node, rule: Rule, bodies: dict[bytes, tuple[Function, int]]
) -> tuple[Node, int]:
    """The loop ``node`` on its body rewritten by ``rule``, and the body's rewrite count
    (counted once per distinct body, at its first loop node)."""
    body = loop_body(node)
    done = bodies.get(body.region_hash)
    first = done is None
    if done is None:
        done = bodies[body.region_hash] = rewrite(body, rule, bodies)
    new_body, n = done
    if new_body is body:
        return node, 0
    items = tuple((k, new_body if k == "body" else v) for k, v in node.attr_items)
    return Node(node.op, node.type, node.inputs, items), n if first else 0
