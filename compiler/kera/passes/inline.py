"""``inline``: a ``call`` becomes its callee's nodes, built on the call's operands.

Rewrite: ``call(a0, .., an; body=g, result=k) -> g's result k`` with ``g``'s parameter ``_i``
replaced by ``ai`` throughout ``g``'s nodes (re-interned, so the expansion merges with equal
nodes already in the caller).  A callee's own calls are inlined first (``rewrite`` rewrites a
region before the node that holds it), and so are calls inside loop bodies, so one run leaves
no ``call`` anywhere (``IDEMPOTENT``).  The calls of one group (one node per callee result, the
same operands and callee) share one expansion.

Why it is bit-exact: a call's meaning is its callee's nodes evaluated on the operands
(``docs/semantics.md``, Calls); every node is a pure function of its operands' bits, so the
same nodes on the same operand nodes give the same bits wherever they sit.  No node's op,
attributes or operand order changes, so no reduction tree, rounding or NaN rule can.

Why it is a pass and not the front end's job: ``-O0`` keeps calls (``kerac show`` shows the
program's structure, each back end lowers a call on its own), so ``keracheck --opt-levels 0,2``
tests this expansion against every back end's own lowering of calls; and after inlining,
``fold``, ``simplify`` and ``cse`` see through call boundaries (a constant argument folds into
the callee's body, equal subexpressions of two calls merge).

Effects: an effectful call's place in its caller's program order (its ``seq``) is taken by its
callee's effects, in the callee's order; every later effect of the caller moves up by the
callee's count less one (the ``seq`` attributes are renumbered ``0, 1, ...`` in the caller's
order).  A call of a function that declares effects but performs none leaves no
effect behind: the caller still declares them.  Nothing is dropped, merged or reordered,
which the pass manager checks (``effect_trace``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kera.ir import Function, Node, is_effectful, loop_body, loop_group
from kera.ops import REGION_OPS, Op
from kera.passes.rewrite import rewrite

NAME = "inline"
VERSION = 1
#: one run inlines every call, nested ones and those in loop bodies included
IDEMPOTENT = True


def expand(body: Function, args: Sequence[Node]) -> list[Node]:
    """``body``'s results with its parameters replaced by ``args`` (nodes that do not depend
    on a parameter, e.g. constants, are the body's own nodes: interning shares them)."""
    new: dict[int, Node] = {id(p): a for p, a in zip(body.params, args, strict=True)}
    for n in body.nodes():
        if n.op is Op.PARAM:
            continue
        ins = tuple([new[id(i)] for i in n.inputs])
        new[id(n)] = n if ins == n.inputs else Node(n.op, n.type, ins, n.attr_items)
    return [new[id(r)] for r in body.results]


def run(fn: Function) -> tuple[Function, int]:
    if Op.CALL not in fn.ops_used():  # nothing to do: no rebuild walk
        return fn, 0
    if any(r.declared for r in fn.regions()):
        counter = [0]
        return _inline_effects(fn, {}, counter), counter[0]
    expansions: dict[tuple[Any, ...], list[Node]] = {}

    def inline(node: Node) -> Node | None:
        if node.op is not Op.CALL:
            return None
        key = loop_group(node)
        if key not in expansions:
            expansions[key] = expand(loop_body(node), node.inputs)
        return expansions[key][node.int_attr("result")]

    return rewrite(fn, inline)


# ----------------------------------------------------------------- regions with effects


def _renumbered(
    node: Node, inputs: tuple[Node, ...], seq: int | None, body: Function | None
) -> Node:
    """``node`` on ``inputs``, with ``seq`` (when not None) and ``body`` (when not None) put
    in place of its own."""
    items = tuple(
        (
            k,
            seq
            if k == "seq" and seq is not None
            else body
            if k == "body" and body is not None
            else v,
        )
        for k, v in node.attr_items
    )
    if inputs == node.inputs and items == node.attr_items:
        return node
    return Node(node.op, node.type, inputs, items)


def _expand_effects(
    body: Function, args: Sequence[Node], offset: int
) -> tuple[list[Node], list[Node]]:
    """:func:`expand` of a callee with effects (its own calls already inlined): its results
    and its effects, effect ``k`` of the callee given ``seq`` ``offset + k`` (its place in the
    caller)."""
    new: dict[int, Node] = {id(p): a for p, a in zip(body.params, args, strict=True)}
    place = {e.int_attr("seq"): offset + k for k, e in enumerate(body.effects)}
    for n in body.nodes():
        if n.op is Op.PARAM:
            continue
        ins = tuple([new[id(i)] for i in n.inputs])
        seq = place[n.int_attr("seq")] if is_effectful(n) else None
        new[id(n)] = _renumbered(n, ins, seq, None)
    return [new[id(r)] for r in body.results], [new[id(e)] for e in body.effects]


def _inline_effects(fn: Function, memo: dict[bytes, Function], counter: list[int]) -> Function:
    """``fn`` with every call inlined (bodies and callees first, each once: ``memo`` by region
    hash), effects renumbered in program order; ``counter`` counts the calls inlined."""
    done = memo.get(fn.region_hash)
    if done is not None:
        return done
    inner = {
        id(n): _inline_effects(loop_body(n), memo, counter)
        for n in fn.nodes()
        if n.op in REGION_OPS
    }
    widths = [
        len(inner[id(e)].effects) if e.op is Op.CALL else 1 for e in fn.effects
    ]  # how many effects each of fn's takes after inlining
    base = {e.int_attr("seq"): sum(widths[:k]) for k, e in enumerate(fn.effects)}
    new: dict[int, Node] = {}
    expansions: dict[tuple[Any, ...], tuple[list[Node], list[Node]]] = {}
    for n in fn.nodes():
        if n.op is Op.PARAM:
            new[id(n)] = n
            continue
        ins = tuple([new[id(i)] for i in n.inputs])
        seq = base[n.int_attr("seq")] if is_effectful(n) else None
        if n.op is Op.CALL:
            key = loop_group(n)
            if key not in expansions:
                counter[0] += 1
                expansions[key] = _expand_effects(inner[id(n)], ins, 0 if seq is None else seq)
            new[id(n)] = expansions[key][0][n.int_attr("result")]
        else:
            new[id(n)] = _renumbered(n, ins, seq, inner.get(id(n)))
    effects = [
        x
        for e in fn.effects
        for x in (expansions[loop_group(e)][1] if e.op is Op.CALL else [new[id(e)]])
    ]
    out = Function(fn.name, fn.params, [new[id(r)] for r in fn.results], effects, fn.declared)
    memo[fn.region_hash] = out
    return out
