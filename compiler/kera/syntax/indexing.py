"""Static indexing ``x[item, ...]``: the items -> the ``slice`` and ``reshape`` that compute it.

An item is an integer literal ``k`` — element ``k`` of its axis, and the axis is dropped; a
negative ``k`` counts from the end (``-1`` is the last element) — or a range ``a..b``, ``a..``,
``..b``, ``..`` — elements ``a`` to ``b - 1``, and the axis is kept; an omitted start is 0, an
omitted end the axis size, and a negative end counts from the end.  Items apply to the leading
axes in order; the axes after them are kept whole.  Nothing out of range is clamped: an index
outside ``-d .. d-1``, a range end outside ``-d .. d`` or an empty range is an error (E0313)
that names the valid range.

The result is ``reshape(slice(x, start, stop), shape = kept)``, both contract ops, without a
``slice`` that keeps everything or a ``reshape`` that drops nothing (so ``x[..]`` is ``x``).
This module only does the arithmetic; ``kera.syntax.build`` evaluates the items and builds
the nodes.  A dynamic item (an integer scalar expression) is planned here as a whole axis
(``..``); the builder then reads one element of it with a ``dynamic_slice`` and drops it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

Span = tuple[int, int]


@dataclass(frozen=True, slots=True)
class Item:
    """One static item: ``drops`` for an integer (``lo`` is the index), else a range with
    optional ends.  ``text`` is its source, for messages (a literal may be 100,000 digits
    long, so messages never print the numbers themselves)."""

    lo: int | None
    hi: int | None
    drops: bool
    text: str
    span: Span


@dataclass(frozen=True, slots=True)
class Plan:
    start: tuple[int, ...]
    stop: tuple[int, ...]
    shape: tuple[int, ...]  # the result's shape: the kept axes

    def slices(self, shape: tuple[int, ...]) -> bool:
        """Whether a ``slice`` is needed, i.e. the plan does not keep all of ``shape``."""
        return any(self.start) or self.stop != shape

    def reshapes(self) -> bool:
        """Whether an axis is dropped (the slice's shape differs from the result's)."""
        return len(self.shape) != len(self.start)


class IndexingError(Exception):
    """An item that does not fit its axis: the message and the item's span (code E0313)."""

    def __init__(self, message: str, span: Span) -> None:
        super().__init__(message)
        self.message = message
        self.span = span


def _index(item: Item, axis: int, size: int, what: str) -> tuple[int, int]:
    k = item.lo if item.lo is not None else 0
    k = k + size if k < 0 else k
    if not 0 <= k < size:
        raise IndexingError(
            f"index {item.text} is out of range for axis {axis} of {what}: "
            f"valid indices are {-size} to {size - 1}",
            item.span,
        )
    return k, k + 1


def _range(item: Item, axis: int, size: int, what: str) -> tuple[int, int]:
    lo = 0 if item.lo is None else item.lo + size if item.lo < 0 else item.lo
    hi = size if item.hi is None else item.hi + size if item.hi < 0 else item.hi
    if not (0 <= lo <= size and 0 <= hi <= size):
        raise IndexingError(
            f"range {item.text} is out of range for axis {axis} of {what}: "
            f"its ends go from {-size} to {size}",
            item.span,
        )
    if lo >= hi:
        raise IndexingError(
            f"range {item.text} is empty on axis {axis} of {what} (size {size}); "
            "a range keeps at least one element",
            item.span,
        )
    return lo, hi


def plan(shape: tuple[int, ...], items: Sequence[Item], what: str) -> Plan:
    """The slice bounds and result shape of ``x[items]`` for ``x`` of ``shape`` (``what``
    names its type in messages); raises :class:`IndexingError`.  The caller has checked that
    there are at most ``len(shape)`` items."""
    start: list[int] = []
    stop: list[int] = []
    kept: list[int] = []
    for axis, size in enumerate(shape):
        if axis >= len(items):
            start.append(0)
            stop.append(size)
            kept.append(size)
            continue
        item = items[axis]
        lo, hi = (_index if item.drops else _range)(item, axis, size, what)
        start.append(lo)
        stop.append(hi)
        if not item.drops:
            kept.append(hi - lo)
    return Plan(tuple(start), tuple(stop), tuple(kept))
