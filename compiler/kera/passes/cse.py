"""``cse``: commutative operands in one canonical order, so ``b + a`` and ``a + b`` are one node.

Interning already merges structurally identical nodes when they are built (``kera.ir``), and a
``Function`` holds only the nodes its results reach, so common subexpressions and dead code
need no pass of their own.  What interning cannot see is that two nodes differ only in the
order of a commutative op's operands; this pass sorts those operands by node hash and lets
re-interning merge the pair.

Rewrite: ``op(a, b) -> op(b, a)`` when ``hash(b) < hash(a)``, for ``op`` in
``kera.ops.COMMUTATIVE`` (add, mul, min, max, and, or, xor, eq, ne); ``fma(a, b, c) ->
fma(b, a, c)`` likewise.

Why it is bit-exact: IEEE addition and multiplication are commutative in value, signed zeros
included; the contract's NaN result is the canonical NaN whichever operand was a NaN (the
payload that x86 or Arm would propagate from the *first* operand never reaches the result);
``min``/``max`` pick -0/+0 symmetrically and return the canonical NaN; the bitwise ops and
equality are symmetric.  ``fma`` rounds the exact product ``a*b = b*a`` once.
"""

from __future__ import annotations

from kera.ir import Function, Node
from kera.ops import COMMUTATIVE, Op
from kera.passes.rewrite import rewrite, with_inputs

NAME = "cse"
VERSION = 1
#: after one run every commutative node's first two operands are in hash order: each node is
#: rebuilt on its operands' final forms before its own pair is compared, so a second run finds
#: nothing to swap (``Pass.idempotent``)
IDEMPOTENT = True


def canonical_operands(node: Node) -> Node | None:
    if node.op in COMMUTATIVE or node.op is Op.FMA:
        a, b = node.inputs[0], node.inputs[1]
        if b.hash < a.hash:
            return with_inputs(node, (b, a, *node.inputs[2:]))
    return None


def run(fn: Function) -> tuple[Function, int]:
    return rewrite(fn, canonical_operands)
