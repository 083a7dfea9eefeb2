"""``dynamic_slice`` and ``dynamic_update_slice`` in the unrolled kernel: selection, not
addressing.

Every element lives in its own register, so a start index that is data cannot become an
address: there is no memory to index.  Instead each axis's start is clamped into
``[0, dim - size]`` in ``s32`` arithmetic (``max.s32`` then ``min.s32``; any i32, INT32_MIN
and INT32_MAX included, is safe because nothing is ever formed from the unclamped value), its
bits become predicates (``and.b32`` + ``setp.ne.u32``, one pair per bit), and each output
element is a *mux tree* over the candidates the clamped start can select: one ``selp.bN``
per tree node (bits move unchanged: NaN payloads and -0.0 survive; a ``bool`` uses
``mov.pred`` + ``@p mov.pred``, as ``select`` does).  Axes are done one at a time, so the cost
is the sum over axes of (elements at that stage x candidates), never their product; an axis
whose window is the whole dimension costs nothing (its start clamps to 0).

``dynamic_update_slice`` places ``v`` along each axis the same way (a position that no start
could fill from ``v`` is a "don't care" leaf, pruned from the tree), then picks, per element of
``x``, the placed value where the element lies inside the window on every axis
(``setp.le``/``setp.ge`` on the clamped start, ``and.pred`` across axes) and ``x``'s own
element elsewhere.  The semantics are ``kera.semantics._dynamic_slice`` /
``_dynamic_update_slice`` (``clamped_starts``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kera.backends.ptx.kernel import Elems, Kernel, bit_type
from kera.dtypes import DType
from kera.ir import Node

Grid = np.ndarray[Any, Any]  # an object array of register names (None: a don't-care leaf)


def _clamped(k: Kernel, start: str, hi: int) -> str:
    """``min(max(start, 0), hi)`` in s32: the clamp happens before anything uses the value."""
    t = k.op(DType.I32, "max.s32 {d}, {0}, 0;", start)
    return k.op(DType.I32, f"min.s32 {{d}}, {{0}}, {hi};", t)


def _bits(k: Kernel, s: str, count: int) -> list[str]:
    """Predicates of the low ``count`` bits of ``s``, bit 0 first."""
    out = []
    for b in range(count):
        t = k.op(DType.I32, f"and.b32 {{d}}, {{0}}, {1 << b};", s)
        out.append(k.op(DType.BOOL, "setp.ne.u32 {d}, {0}, 0;", t))
    return out


def _pick(k: Kernel, dt: DType, p: str, hi: str, lo: str) -> str:
    """``p ? hi : lo``, bits unchanged."""
    if dt is not DType.BOOL:
        return k.op(dt, f"selp.{bit_type(dt)} {{d}}, {{0}}, {{1}}, {{2}};", hi, lo, p)
    d = k.op(dt, "mov.pred {d}, {0};", lo)
    k.emit(f"@{p} mov.pred {d}, {hi};")
    return d


def _mux(k: Kernel, dt: DType, bits: Sequence[str], leaves: Sequence[str | None]) -> str:
    """``leaves[s]`` for the ``s`` whose bits are ``bits``: a tree, bit 0 at the leaves.  A None
    leaf is never selected (the caller's mask hides it), so a pair with one is no node."""
    level = list(leaves)
    for bit in bits:
        level += [None] * (len(level) % 2)
        level = [_node(k, dt, bit, level[i + 1], level[i]) for i in range(0, len(level), 2)]
    (root,) = level
    assert root is not None
    return root


def _node(k: Kernel, dt: DType, bit: str, hi: str | None, lo: str | None) -> str | None:
    if hi is None or hi == lo:
        return lo
    if lo is None:
        return hi
    return _pick(k, dt, bit, hi, lo)


class _Axis:
    """One axis of a dynamic op: the clamped start's bits, over ``m = dim - size + 1``
    candidate starts; ``start`` is None when the window spans the axis (start is 0)."""

    def __init__(self, k: Kernel, start: str, dim: int, size: int) -> None:
        self.m = dim - size + 1
        self.start = None if self.m == 1 else _clamped(k, start, self.m - 1)
        self.bits = [] if self.start is None else _bits(k, self.start, (self.m - 1).bit_length())


def _grid(elems: Elems, shape: Sequence[int]) -> Grid:
    grid = np.empty(len(elems), dtype=object)
    grid[:] = elems
    return grid.reshape(tuple(shape))


def _along(grid: Grid, axis: int, length: int, leaves: Any) -> Grid:
    """A grid with ``axis`` resized to ``length``: ``leaves(line, i)`` makes element ``i``
    of each line (the 1-D runs along ``axis``, in C order of the other axes)."""
    lines = np.moveaxis(grid, axis, -1)
    out = np.empty((*lines.shape[:-1], length), dtype=object)
    for idx in np.ndindex(lines.shape[:-1]):
        for i in range(length):
            out[(*idx, i)] = leaves(lines[idx], i)
    return np.moveaxis(out, -1, axis)


def dynamic_slice(k: Kernel, node: Node, ins: Sequence[Elems]) -> Elems:
    """``out[i] = x[s + i]``, s the clamped start: one mux tree per element and axis."""
    x, dt = node.inputs[0], node.dtype
    grid = _grid(ins[0], x.shape)
    for axis, size in enumerate(node.shape):
        ax = _Axis(k, ins[1][axis], x.shape[axis], size)
        if ax.start is None:
            continue

        def pick(line: Grid, i: int, ax: _Axis = ax) -> str:
            return _mux(k, dt, ax.bits, [line[o + i] for o in range(ax.m)])

        grid = _along(grid, axis, size, pick)
    return list(grid.reshape(-1))


def _inside(k: Kernel, ax: _Axis, j: int, size: int) -> str | None:
    """Whether position ``j`` lies in the window ``[s, s + size)``: ``j - size < s <= j``
    (None: for every start it does)."""
    assert ax.start is not None
    low, high = j - size + 1 > 0, j < ax.m - 1
    if not (low or high):
        return None
    if not low:
        return k.op(DType.BOOL, f"setp.le.s32 {{d}}, {{0}}, {j};", ax.start)
    if not high:
        return k.op(DType.BOOL, f"setp.ge.s32 {{d}}, {{0}}, {j - size + 1};", ax.start)
    q = k.op(DType.BOOL, f"setp.le.s32 {{d}}, {{0}}, {j};", ax.start)
    return k.op(DType.BOOL, f"setp.ge.and.s32 {{d}}, {{0}}, {j - size + 1}, {{1}};", ax.start, q)


def _both(k: Kernel, p: str | None, q: str | None) -> str | None:
    if p is None or q is None:
        return q if p is None else p
    return k.op(DType.BOOL, "and.pred {d}, {0}, {1};", p, q)


def _window_mask(k: Kernel, masks: Sequence[Sequence[str | None]]) -> list[str | None]:
    """Per element of x (C order): the AND over axes of its position's predicate, built
    prefix by prefix so each partial AND is emitted once."""
    level: list[str | None] = [None]
    for axis_masks in masks:
        level = [_both(k, p, q) for p in level for q in axis_masks]
    return level


def dynamic_update_slice(k: Kernel, node: Node, ins: Sequence[Elems]) -> Elems:
    """x with the window at the clamped start replaced by v (see the module docstring)."""
    x, v, dt = node.inputs[0], node.inputs[1], node.dtype
    placed = _grid(ins[1], v.shape)
    masks: list[list[str | None]] = []
    for axis, (dim, size) in enumerate(zip(x.shape, v.shape, strict=True)):
        ax = _Axis(k, ins[2][axis], dim, size)
        if ax.start is None:
            masks.append([None] * dim)
            continue

        def place(line: Grid, j: int, ax: _Axis = ax, size: int = size) -> str:
            leaves = [line[j - o] if 0 <= j - o < size else None for o in range(ax.m)]
            return _mux(k, dt, ax.bits, leaves)

        placed = _along(placed, axis, dim, place)
        masks.append([_inside(k, ax, j, size) for j in range(dim)])
    out = []
    for p, new, old in zip(_window_mask(k, masks), placed.reshape(-1), ins[0], strict=True):
        out.append(new if p is None or new == old else _pick(k, dt, p, new, old))
    return out
