"""Distributed reductions whose bits are the contract's reduction tree, for any number of ranks.

The contract (``docs/semantics.md``, Reductions) reduces ``n`` leaves with a fixed tree: pad to
``P`` (the next power of two) with the identity, then ``x[i] = op(x[i], x[i + s])`` for
``s = P/2, ..., 1``.  Name the value ``x[i]`` holds after the step of stride ``s`` the **node**
``(s, i)`` (``0 <= i < s``): it is the reduction of the leaves ``{j < P : j = i mod s}``.  The
leaves are the nodes ``(P, j)``, the root is ``(1, 0)``, and for ``s < P`` node ``(s, i)`` is
``op((2s, i), (2s, i + s))`` -- first operand the child with the smaller index.  A node whose
smallest leaf ``i`` is ``>= n`` holds only padding: its value is the identity.

So the tree is a fixed binary tree, and its bits do not depend on *when* or *where* a node is
computed, only on each internal node being ``op(first child, second child)`` of exactly those
children.  A rank that holds an arbitrary set of leaves (a contiguous shard, any size, even
empty) therefore owns a **forest**: the maximal nodes all of whose real leaves it holds
(:func:`absorb`).  Forests of disjoint leaf sets merge (:func:`merge`) by pairing siblings that
both became complete (or whose sibling is padding) and combining them in the contract's operand
order -- never a running sum.  Merging every rank's forest, in any order and any grouping, ends
in the single root, bit-identical to the single-rank tree.  This is what lets a ring allreduce
(:func:`ring_allreduce`) reproduce the strided pairing ``i`` with ``i + s`` although shards are
contiguous: what travels around the ring is a forest, not a partial sum.

What a contiguous shard can pre-reduce locally is small: ``(s, i)`` spans leaves ``i, i + s,
...``, so a shard shorter than ``P/2`` holds no complete pair, and a forest carries up to one
value per leaf until the siblings of its leaves arrive.  The data moved is therefore up to the
leaves themselves (``n`` values per element), not one partial per rank; that is the price of
the contract's order (``docs/semantics.md``, Distributed reductions).

Ring schedule: the reduced elements (``M`` of them per leaf) are cut into ``R`` contiguous
**segments**; any boundaries give the same bits (each element's forest is independent), so
:func:`segments` balances them.  Reduce-scatter: at step ``t = 0 .. R-2`` rank ``r`` sends its
forest of segment ``(r - t) mod R`` to rank ``r + 1``, which merges it into its own forest of
that segment; after ``R - 1`` steps rank ``r`` holds every leaf of segment ``(r + 1) mod R``
merged into the root.  All-gather: ``R - 1`` more steps pass the finished segments around.
The ring's positions need not follow rank numbers (:func:`ring_order` puts ranks whose leaves
pair early next to each other, which only saves traffic), and several reductions (a graph's
results, each a :class:`Part` with its own op, dtype and segments) share one ring and one
message per hop.  Integer reductions and float ``amin``/``amax`` are order-free but take the
same path.

Everything here is pure (numpy in, numpy out); ``keracheck.dataparallel`` places the ranks on
Dask workers or runs them in one process.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kera.dtypes import DType, from_numpy
from kera.ops import REDUCE_STEP, Op, reduce_identity
from kera.semantics import SEMANTICS, canon

Array = np.ndarray[Any, Any]

#: reductions the allreduce combines with their tree (dot and matmul sum their products)
OPS = frozenset({Op.SUM, Op.PROD, Op.AMIN, Op.AMAX})


class AllreduceError(ValueError):
    """A shard layout or state that does not describe one reduction (overlap, gap, length)."""


def tree_size(n: int) -> int:
    """``P``: the smallest power of two ``>= n`` (1 for ``n = 1``)."""
    if n < 1:
        raise AllreduceError(f"a reduction needs at least one leaf, got n = {n}")
    return 1 << (n - 1).bit_length()


@dataclass
class Forest:
    """The complete nodes one rank holds for one segment: ``levels[s]`` maps a node index
    ``i`` to its values (one per element of the segment).  ``leaves`` counts the real leaves
    merged in, to check that a root really covers all ``n``."""

    n: int
    op: Op
    dtype: DType
    width: int
    levels: dict[int, dict[int, Array]] = field(default_factory=dict)
    leaves: int = 0

    def nodes(self) -> int:
        return sum(len(level) for level in self.levels.values())

    def root(self) -> Array:
        """The reduction's result, once every leaf is in: ``canon(x[0])`` as the tree ends."""
        top = self.levels.get(1, {})
        if self.leaves != self.n or set(self.levels) != {1} or set(top) != {0}:
            raise AllreduceError(f"forest holds {self.leaves} of {self.n} leaves, no root yet")
        return canon(top[0])


def empty(n: int, op: Op, dtype: DType, width: int) -> Forest:
    if op not in OPS:
        raise AllreduceError(f"{op} is not a tree reduction (one of {sorted(OPS)})")
    tree_size(n)
    return Forest(n, op, dtype, width)


def _identity(forest: Forest) -> Array:
    return np.full(forest.width, reduce_identity(forest.op, forest.dtype), dtype=forest.dtype.np)


def _combine(forest: Forest, first: Array, second: Array) -> Array:
    """One tree step through the contract's table: ``op(first, second)``."""
    return SEMANTICS[REDUCE_STEP[forest.op]](None, first, second)


def _insert(forest: Forest, s: int, i: int, value: Array) -> None:
    """Add complete node ``(s, i)`` and combine upwards while its sibling is complete too.
    The sibling of ``(s, i)`` is ``(s, i ^ s/2)``; the one with the smaller index is the
    first operand; a sibling whose smallest leaf is ``>= n`` is padding (the identity)."""
    while s > 1:
        half = s // 2
        sib = i ^ half
        if sib >= forest.n:
            other = _identity(forest)
        elif sib in forest.levels.get(s, {}):
            other = forest.levels[s].pop(sib)
        else:
            break
        value = _combine(forest, value, other) if i < sib else _combine(forest, other, value)
        s, i = half, i % half
    forest.levels.setdefault(s, {})[i] = value
    forest.levels = {k: v for k, v in forest.levels.items() if v}


def absorb(forest: Forest, first_leaf: int, values: Array) -> Forest:
    """Merge leaves ``first_leaf, first_leaf + 1, ...`` (rows of ``values``, each ``width``
    elements) into ``forest``; returns it."""
    p = tree_size(forest.n)
    rows = values.reshape(values.shape[0], forest.width) if values.size else values
    if first_leaf < 0 or first_leaf + len(rows) > forest.n:
        raise AllreduceError(f"leaves {first_leaf}..{first_leaf + len(rows)} outside 0..{forest.n}")
    for k in range(len(rows)):
        _insert(forest, p, first_leaf + k, rows[k])
    forest.leaves += len(rows)
    return forest


def merge(into: Forest, other: Forest) -> Forest:
    """Merge the forest of a disjoint leaf set; the result does not depend on the order."""
    if (into.n, into.op, into.dtype, into.width) != (other.n, other.op, other.dtype, other.width):
        raise AllreduceError("merging forests of different reductions")
    if into.leaves + other.leaves > into.n:
        raise AllreduceError(f"forests hold {into.leaves + other.leaves} leaves of {into.n}")
    for s in sorted(other.levels, reverse=True):
        for i, value in sorted(other.levels[s].items()):
            if i in into.levels.get(s, {}):
                raise AllreduceError(f"node ({s}, {i}) is in both forests (overlapping shards)")
            _insert(into, s, i, value)
    into.leaves += other.leaves
    return into


def reduce_tree(values: Array, op: Op) -> Array:
    """The single-rank reference: the contract's tree over axis 0 of ``values``."""
    flat = values.reshape(values.shape[0], -1)
    forest = absorb(empty(len(flat), op, from_numpy(flat.dtype), flat.shape[1]), 0, flat)
    return forest.root().reshape(values.shape[1:])


# ---------------------------------------------------------------------------- layouts


def check_bounds(bounds: Sequence[int], n: int) -> tuple[int, ...]:
    """``bounds`` as a shard layout: rank ``r`` holds leaves ``bounds[r] .. bounds[r+1]``;
    it must start at 0, end at ``n`` and never decrease (empty shards are allowed)."""
    b = tuple(int(x) for x in bounds)
    if len(b) < 2 or b[0] != 0 or b[-1] != n or any(x > y for x, y in itertools.pairwise(b)):
        raise AllreduceError(f"shard bounds {list(b)} do not cover 0..{n} in order")
    return b


def even_bounds(n: int, ranks: int) -> tuple[int, ...]:
    """Contiguous shards as equal as possible (the first ``n mod R`` get one more leaf)."""
    if ranks < 1:
        raise AllreduceError(f"need at least one rank, got {ranks}")
    q, extra = divmod(n, ranks)
    out = [0]
    for r in range(ranks):
        out.append(out[-1] + q + (1 if r < extra else 0))
    return tuple(out)


def segments(width: int, ranks: int) -> tuple[int, ...]:
    """Segment boundaries of the reduced elements for the ring (balanced; any would do)."""
    return even_bounds(width, ranks)


# ---------------------------------------------------------------------------- the ring


@dataclass(frozen=True)
class Part:
    """One reduction the ring carries: its op and the segment boundaries of its ``width``
    elements (``seg_bounds[-1]``).  Several parts (a graph's results) share one ring, so one
    message per hop carries a forest of each -- like the fusion buffers of gradient allreduces,
    but every part keeps its own tree."""

    op: Op
    seg_bounds: tuple[int, ...]

    @property
    def width(self) -> int:
        return self.seg_bounds[-1]


@dataclass
class RankState:
    """The state at one position of the ring: per segment, a forest of each part while
    reducing; then the finished segments."""

    position: int
    ranks: int
    forests: list[list[Forest]]
    done: dict[int, list[Array]] = field(default_factory=dict)


@dataclass(frozen=True)
class Message:
    """What position ``sender`` ships to the next position at one step: a forest of each part
    (reduce-scatter) or a finished segment of each part (all-gather)."""

    sender: int
    segment: int
    forests: list[Forest] | None = None
    results: list[Array] | None = None

    def values(self) -> int:
        """How many values it carries (for the traffic figures of the bench)."""
        if self.forests is not None:
            return sum(f.nodes() * f.width for f in self.forests)
        return sum(r.size for r in self.results or [])


def start(
    position: int,
    first_leaf: int,
    values: Sequence[Array],
    n: int,
    parts: Sequence[Part],
) -> RankState:
    """The state at ``position`` before the ring: the rank's leaves (rows of ``values[k]`` for
    part ``k``, starting at leaf ``first_leaf``) absorbed into one forest per segment and part."""
    ranks = len(parts[0].seg_bounds) - 1
    forests: list[list[Forest]] = [[] for _ in range(ranks)]
    for part, v in zip(parts, values, strict=True):
        flat = v.reshape(v.shape[0], part.width)
        dtype = from_numpy(flat.dtype)
        for k in range(ranks):
            lo, hi = part.seg_bounds[k], part.seg_bounds[k + 1]
            forests[k].append(absorb(empty(n, part.op, dtype, hi - lo), first_leaf, flat[:, lo:hi]))
    return RankState(position, ranks, forests)


def scatter_send(state: RankState, step: int) -> Message:
    """Reduce-scatter step ``step``: the forests of segment ``(position - step) mod R``."""
    seg = (state.position - step) % state.ranks
    return Message(state.position, seg, forests=state.forests[seg])


def scatter_receive(state: RankState, msg: Message) -> RankState:
    seg = msg.segment
    assert msg.forests is not None
    merged = [merge(_copy(a), b) for a, b in zip(msg.forests, state.forests[seg], strict=True)]
    forests = [merged if k == seg else f for k, f in enumerate(state.forests)]
    done = dict(state.done)
    if seg == (state.position + 1) % state.ranks:  # the last hop of this segment: complete
        done[seg] = [f.root() for f in merged]
    return RankState(state.position, state.ranks, forests, done)


def gather_send(state: RankState, step: int) -> Message:
    """All-gather step ``step``: the finished segment ``(position + 1 - step) mod R``."""
    seg = (state.position + 1 - step) % state.ranks
    return Message(state.position, seg, results=state.done[seg])


def gather_receive(state: RankState, msg: Message) -> RankState:
    assert msg.results is not None
    done = {**state.done, msg.segment: msg.results}
    return RankState(state.position, state.ranks, state.forests, done)


def finish(state: RankState) -> list[Array]:
    """Every part's whole reduced vector, once the all-gather is over."""
    parts = len(state.done[0])
    return [np.concatenate([state.done[k][i] for k in range(state.ranks)]) for i in range(parts)]


def finish_single(state: RankState) -> RankState:
    """With one rank there is no ring: its forests are already complete."""
    return RankState(0, 1, state.forests, {0: [f.root() for f in state.forests[0]]})


def _copy(forest: Forest) -> Forest:
    levels = {s: dict(level) for s, level in forest.levels.items()}
    return Forest(forest.n, forest.op, forest.dtype, forest.width, levels, forest.leaves)


#: how the ring places a step on a rank: ``submit(rank, fn, *args)`` returns a handle that
#: later steps take as an argument (a value in one process, a Dask future on a cluster)
Submit = Callable[..., Any]


def local_submit(rank: int, fn: Callable[..., Any], *args: Any) -> Any:
    """Run every rank's steps in this process, in schedule order."""
    return fn(*args)


def ring_order(firsts: Sequence[int], n: int) -> list[int]:
    """The ring's order of ranks (position -> rank): by the bit-reversal of each rank's first
    leaf within ``log2 P`` bits.  Any order gives the same bits; this one puts ranks whose
    leaves pair early in the tree (``i`` and ``i + P/2``, then ``i + P/4`` ...) next to each
    other, so a forest collapses before it travels far (for even shards over a power of two
    ranks: rank 0, R/2, R/4, 3R/4, ...).  Ties keep rank order."""
    bits = tree_size(n).bit_length() - 1

    def key(r: int) -> tuple[int, int]:
        first = min(firsts[r], n - 1)
        return int(f"{first:0{bits}b}"[::-1], 2) if bits else 0, r

    return sorted(range(len(firsts)), key=key)


def ring(
    submit: Submit,
    leaves: Sequence[Any],
    firsts: Sequence[int],
    n: int,
    parts: Sequence[Part],
    order: Sequence[int] | None = None,
) -> list[Any]:
    """The ring schedule: ``leaves[r]`` (a handle to rank ``r``'s rows of each part, starting
    at leaf ``firsts[r]``) in, a handle per rank to every part's reduced vector out.  Position ``p`` of
    the ring is rank ``order[p]`` (default :func:`ring_order`) and sends to position ``p + 1``;
    every step runs on the rank ``submit`` is given, and a message is produced on the sender
    and consumed on the receiver, so on a cluster it travels between their workers."""
    ranks = len(leaves)
    at = list(order) if order is not None else ring_order(firsts[:ranks], n)
    if sorted(at) != list(range(ranks)):
        raise AllreduceError(f"ring order {at} is not a permutation of the {ranks} ranks")
    states = [submit(at[p], start, p, firsts[at[p]], leaves[at[p]], n, parts) for p in range(ranks)]
    for step in range(ranks - 1):
        sent = [submit(at[p], scatter_send, states[p], step) for p in range(ranks)]
        states = [
            submit(at[p], scatter_receive, states[p], sent[(p - 1) % ranks]) for p in range(ranks)
        ]
    if ranks == 1:
        states = [submit(at[0], finish_single, states[0])]
    for step in range(ranks - 1):
        sent = [submit(at[p], gather_send, states[p], step) for p in range(ranks)]
        states = [
            submit(at[p], gather_receive, states[p], sent[(p - 1) % ranks]) for p in range(ranks)
        ]
    done = [submit(at[p], finish, states[p]) for p in range(ranks)]
    return [done[at.index(r)] for r in range(ranks)]


def ring_allreduce(
    shards: Sequence[Array], op: Op, bounds: Sequence[int] | None = None
) -> list[Array]:
    """Allreduce in one process: ``shards[r]`` is rank ``r``'s leaves (rows, in leaf order,
    rank after rank); returns every rank's copy of the reduced vector (all equal, and equal in
    bits to :func:`reduce_tree` of the concatenated leaves).  ``bounds`` overrides the
    segment boundaries of the reduced elements."""
    ranks = len(shards)
    n = sum(len(s) for s in shards)
    shape = shards[0].shape[1:]
    width = int(np.prod(shape, dtype=np.int64))
    seg = check_bounds(bounds, width) if bounds is not None else segments(width, ranks)
    if len(seg) != ranks + 1:
        raise AllreduceError(f"{len(seg) - 1} segments for {ranks} ranks")
    firsts = [int(f) for f in np.cumsum([0, *(len(s) for s in shards[:-1])])]
    outs = ring(local_submit, [[s] for s in shards], firsts, n, [Part(op, seg)])
    return [o[0].reshape(shape) for o in outs]
