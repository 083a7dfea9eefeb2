"""Element index maps for back ends that unroll a graph element by element (PTX, Verilog).

They say, at compile time, which input elements feed each output element of the structural
ops; the back end only decides what to emit for one element.  Data movement is derived from
the semantics table itself (applied to element *indices*), so it cannot disagree with the
reference interpreter.  Elements are numbered in C order within each operand.
"""

from __future__ import annotations

import numpy as np

from kera.ir import Node
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
