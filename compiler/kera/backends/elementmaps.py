"""Element index maps for back ends that unroll a graph element by element (PTX, Verilog).

They say, at compile time, which input elements feed each output element of the structural
ops; the back end only decides what to emit for one element.  Data movement is derived from
the semantics table itself (applied to element *indices*), so it cannot disagree with the
reference interpreter.  Elements are numbered in C order within each operand.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np

from kera.ir import Node
from kera.ops import MOVEMENT, REDUCE, Op
from kera.semantics import SEMANTICS


def reduce_rows(node: Node) -> list[list[int]]:
    """For a reduction: the input element indices of each output element, in index order."""
    axis = node.attr("axis")
    assert isinstance(axis, int)
    shape = node.inputs[0].shape
    idx = np.arange(int(np.prod(shape))).reshape(shape)
    rows = np.moveaxis(idx, axis, -1).reshape(-1, shape[axis])
    return [[int(j) for j in row] for row in rows]


def matmul_pairs(node: Node) -> list[tuple[list[int], list[int]]]:
    """For matmul T[m,k] x T[k,n]: (row of a, column of b) element indices per output element."""
    (m, kk), (_, n) = node.inputs[0].shape, node.inputs[1].shape
    return [
        (list(range(i * kk, (i + 1) * kk)), [t * n + j for t in range(kk)])
        for i in range(m)
        for j in range(n)
    ]


def movement_map(node: Node) -> list[int]:
    """For data movement: each output element's index into the concatenated operands."""
    sizes = [int(np.prod(i.shape)) for i in node.inputs]
    offsets = np.cumsum([0, *sizes])
    idx = [
        (np.arange(n, dtype=np.int64) + off).reshape((1, *i.shape))
        for n, off, i in zip(sizes, offsets, node.inputs, strict=False)
    ]
    return [int(j) for j in SEMANTICS[node.op](node, *idx).reshape(-1)]


# ---------------------------------------------------------------------------- unrolling

E = TypeVar("E")

#: the structural ops :func:`unroll` builds from per-element steps
STRUCTURAL = REDUCE | {Op.DOT, Op.MATMUL} | (MOVEMENT - {Op.IOTA})


def tree(op: Op, elems: Sequence[E], step: Callable[[Op, E, E], E]) -> E:
    """The contract's reduction tree over ``elems`` for reduction ``op``: pad to a power of two
    P, then x[i] = step(x[i], x[i+s]) for s = P/2 .. 1, leaving out every step whose right
    operand is padding (``op(x, identity) == x`` bit for bit for every non-NaN x; a NaN root is
    canonicalised by the caller)."""
    xs: list[E | None] = list(elems)
    p = 1 << (len(xs) - 1).bit_length()
    xs += [None] * (p - len(xs))
    while p > 1:
        p //= 2
        for i in range(p):
            right, left = xs[i + p], xs[i]
            if right is not None:
                assert left is not None
                xs[i] = step(op, left, right)
    root = xs[0]
    assert root is not None
    return root


def unroll(
    node: Node,
    ins: Sequence[Sequence[E]],
    step: Callable[[Op, E, E], E],
    product: Callable[[E, E], E],
    finish: Callable[[E, int], E],
) -> list[E]:
    """The output elements of a structural op (:data:`STRUCTURAL`), element by element.

    The back end supplies what one element costs: ``step(reduction, left, right)`` (a step of
    the tree; ``dot`` and ``matmul`` reduce with ``sum``), ``product(a, b)`` (one rounded
    product of ``dot``/``matmul``) and ``finish(root, n)`` (the root of a tree over ``n``
    elements, e.g. its NaN canonicalisation).  Products are made before their tree, rows and
    output elements in index order, so the emitted code's order is fixed."""
    op = node.op
    if op in REDUCE:
        out = []
        for row in reduce_rows(node):
            out.append(finish(tree(op, [ins[0][j] for j in row], step), len(row)))
        return out
    if op is Op.DOT:
        prods = [product(x, y) for x, y in zip(ins[0], ins[1], strict=True)]
        return [finish(tree(Op.SUM, prods, step), len(prods))]
    if op is Op.MATMUL:
        a, b = ins
        out = []
        for row, col in matmul_pairs(node):
            prods = [product(a[i], b[j]) for i, j in zip(row, col, strict=True)]
            out.append(finish(tree(Op.SUM, prods, step), len(prods)))
        return out
    flat = [x for e in ins for x in e]
    return [flat[j] for j in movement_map(node)]
