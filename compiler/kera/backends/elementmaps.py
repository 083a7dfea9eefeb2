"""The unrolled structure shared by the back ends that lower a graph element by element (PTX,
Verilog): the loop over a function's nodes, element index maps, the contract's reduction
tree, and the constants of leaves.

They say, at compile time, which input elements feed each output element of every op; the
back end only decides what to emit for one element (an :class:`Emitter`, generic over the
element type: a PTX register name, a Verilog net index).  Data movement is derived from
the semantics table itself (applied to element *indices*), so it cannot disagree with the
reference interpreter; so are constant and ``iota`` elements.  Elements are numbered in C
order within each operand.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any, Protocol, TypeVar

import numpy as np

from kera.dtypes import DType
from kera.ir import Function, Node
from kera.ops import LEAVES, MOVEMENT, REDUCE, REDUCE_STEP, Op
from kera.semantics import LEAVES as LEAF_VALUES
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


# ---------------------------------------------------------------------------- constants


def element_bits(dt: DType, values: np.ndarray[Any, Any]) -> list[int]:
    """Each element's bits as an unsigned integer, in C order (bool: 0/1)."""
    flat = np.ascontiguousarray(values).reshape(-1)
    if dt is DType.BOOL:
        return [int(v) for v in flat]
    return [int(v) for v in flat.view(dt.uint)]


def constant_bits(node: Node) -> list[int]:
    """The element bits of a ``const`` or ``iota`` node, from the interpreter's own leaves
    (``kera.semantics.LEAVES``): a back end materialises them, it never recomputes them."""
    return element_bits(node.dtype, LEAF_VALUES[node.op](node, 1)[0])


# ---------------------------------------------------------------------------- unrolling

E = TypeVar("E")

#: the structural ops :func:`unroll` builds from per-element steps
STRUCTURAL = REDUCE | {Op.DOT, Op.MATMUL} | (MOVEMENT - {Op.IOTA})

#: the elementwise op of each product of ``dot``/``matmul`` (each product is rounded on its own
#: before the sum tree; never fused)
PRODUCT = Op.MUL


def supported(lowered: Iterable[Op]) -> frozenset[str]:
    """The op names an unrolling back end covers: the elementwise ops of its lowering table,
    the structural ops :func:`unroll` builds from them, and the leaves (``kera.ops.LEAVES``:
    inputs and constants)."""
    return frozenset(op.value for op in (*lowered, *STRUCTURAL, *LEAVES))


def tree(elems: Sequence[E], step: Callable[[E, E], E]) -> E:
    """The contract's reduction tree over ``elems``: pad to a power of two P, then
    x[i] = step(x[i], x[i+s]) for s = P/2 .. 1, leaving out every step whose right operand is
    padding (``op(x, identity) == x`` bit for bit for every non-NaN x; a NaN root is
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
                xs[i] = step(left, right)
    root = xs[0]
    assert root is not None
    return root


def unroll(
    node: Node,
    ins: Sequence[Sequence[E]],
    binary: Callable[[Op, E, E], E],
    finish: Callable[[E, int], E],
) -> list[E]:
    """The output elements of a structural op (:data:`STRUCTURAL`), element by element.

    The back end supplies what one element costs: ``binary(op, left, right)``, one element of
    the elementwise ``op`` as a part of a tree — a step (``kera.ops.REDUCE_STEP`` of the
    node's op; ``dot`` and ``matmul`` sum) or a product of ``dot``/``matmul``
    (:data:`PRODUCT`) — and ``finish(root, n)`` (the root of a tree over ``n`` elements, e.g.
    its NaN canonicalisation).  Products are made before their tree, rows and output elements
    in index order, so the emitted code's order is fixed."""
    op = node.op
    if op not in REDUCE_STEP:
        flat = [x for e in ins for x in e]
        return [flat[j] for j in movement_map(node)]

    def reduce(elems: Sequence[E]) -> E:
        return finish(tree(elems, lambda a, b: binary(REDUCE_STEP[op], a, b)), len(elems))

    if op in REDUCE:
        return [reduce([ins[0][j] for j in row]) for row in reduce_rows(node)]
    a, b = ins
    pairs = matmul_pairs(node) if op is Op.MATMUL else [(list(range(len(a))), list(range(len(b))))]
    return [
        reduce([binary(PRODUCT, a[i], b[j]) for i, j in zip(row, col, strict=True)])
        for row, col in pairs
    ]


# ---------------------------------------------------------------------------- the loop


class Emitter(Protocol[E]):
    """What one element costs in a back end that unrolls (:func:`unroll_function`)."""

    def load(self, node: Node) -> list[E]:
        """The elements of a ``param`` node."""
        ...

    def constant(self, dt: DType, bits: int) -> E:
        """A constant element with these bits."""
        ...

    def element(self, node: Node, operands: Sequence[E]) -> E:
        """One element of an elementwise node (its op's row of the back end's table; an op
        without a row raises the back end's error)."""
        ...

    def binary(self, node: Node, op: Op, left: E, right: E) -> E:
        """One element of the elementwise ``op`` inside structural ``node`` (see :func:`unroll`)."""
        ...

    def finish(self, node: Node, root: E, n: int) -> E:
        """The root of a tree over ``n`` elements inside structural ``node``."""
        ...


def unroll_function(fn: Function, emitter: Emitter[E]) -> list[list[E]]:
    """Every node of ``fn`` in canonical order, element by element; the elements of each
    result.  Leaves are loads and constants, structural ops :func:`unroll`, every other op one
    ``emitter.element`` per output element."""
    env: dict[int, list[E]] = {}
    for node in fn.nodes():
        env[id(node)] = unroll_node(emitter, node, [env[id(i)] for i in node.inputs])
    return [env[id(r)] for r in fn.results]


def unroll_node(emitter: Emitter[E], node: Node, ins: list[list[E]]) -> list[E]:
    """One node's elements from its operands' (a parameter, a leaf, a structural op or an
    elementwise op); back ends with ops lowered a whole node at a time call this for the rest."""
    if node.op is Op.PARAM:
        return emitter.load(node)
    if node.op in LEAF_VALUES:
        return [emitter.constant(node.dtype, bits) for bits in constant_bits(node)]
    if node.op in STRUCTURAL:
        return unroll(node, ins, partial(emitter.binary, node), partial(emitter.finish, node))
    return [emitter.element(node, operands) for operands in zip(*ins, strict=True)]
