"""``fold``: an op whose operands are all constants becomes the constant it computes.

Rewrite: ``op(const a, const b, ...) -> const(SEMANTICS[op](a, b, ...))``.

Why it is bit-exact: the value is computed by ``kera.semantics.SEMANTICS``, the contract's own
table (the reference interpreter's), never by host floats or Python arithmetic, so the folded
constant holds exactly the bits every target must produce for that node -- canonical NaNs,
signed zeros and the fixed reduction tree included.  The math library (``exp``, ``log``,
``tanh``...) is an expansion into contract ops, so it folds op by op through the same table.

Limits: a result of more than ``MAX_ELEMENTS`` elements is folded only when it is no larger
than its constant operands together (so ``broadcast(2.0, shape=[4096, 4096])`` stays a
broadcast of a scalar instead of becoming 64 MiB of constant); ``iota`` is a leaf, not a
constant, and stays as it is.
"""

from __future__ import annotations

import numpy as np

from kera.ir import Function, Node, const_bytes, const_value
from kera.ops import LEAVES, Op
from kera.passes.rewrite import rewrite
from kera.semantics import SEMANTICS

NAME = "fold"
VERSION = 1

#: results up to this many elements are always folded
MAX_ELEMENTS = 1024


def fold_node(node: Node) -> Node | None:
    if node.op in LEAVES or not node.inputs or any(x.op is not Op.CONST for x in node.inputs):
        return None
    size = node.type.size
    if size > MAX_ELEMENTS and size > sum(x.type.size for x in node.inputs):
        return None
    args = [const_value(x)[np.newaxis].copy() for x in node.inputs]  # a batch of one
    out = SEMANTICS[node.op](node, *args)
    data = np.ascontiguousarray(out[0], dtype=node.dtype.np).tobytes()
    return const_bytes(data, node.dtype, node.shape)


def run(fn: Function) -> tuple[Function, int]:
    return rewrite(fn, fold_node)
