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
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kera.ir import Function, Node, loop_body, loop_group
from kera.ops import Op
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
    expansions: dict[tuple[Any, ...], list[Node]] = {}

    def inline(node: Node) -> Node | None:
        if node.op is not Op.CALL:
            return None
        key = loop_group(node)
        if key not in expansions:
            expansions[key] = expand(loop_body(node), node.inputs)
        return expansions[key][node.int_attr("result")]

    return rewrite(fn, inline)
