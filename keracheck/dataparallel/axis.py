"""Data-parallel over a reduced axis: every reduction of a graph split over R ranks.

:func:`interpret` runs a function with the reference interpreter, except that each ``sum``,
``prod``, ``amin``, ``amax``, ``dot`` and ``matmul`` (in loop and call bodies too) has its
reduced axis cut into contiguous shards, one per rank, and is combined by the ring allreduce
of :mod:`kera.allreduce` (for ``dot``/``matmul`` the leaves are the individually rounded
products, as the contract defines them).  The number of ranks and the shard sizes come from a
:class:`Layout`; by default each reduction node draws its own (R from 1 to 9, shard sizes
random, empty shards included) from its content hash, so one run covers many layouts and a
rerun is reproducible.

:class:`DataParallelTarget` is that interpreter as a keracheck target (``--backend-plugin
keracheck.dataparallel.axis:DataParallelTarget``): it must agree with ``ref`` on every case,
and a ring that combines in another order does not (``tests/distributed/naive_ring.py``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kera.allreduce import ring_allreduce
from kera.interp import interpret as reference
from kera.ir import Function, Node
from kera.ops import Op
from keracheck.target import API_VERSION

Array = np.ndarray[Any, Any]
#: a ring: rank shards (leaves first) and the reduction in, one copy per rank out
Ring = Callable[[list[Array], Op], list[Array]]


@dataclass(frozen=True)
class Layout:
    """How a reduction over ``n`` leaves is sharded: ``ranks`` fixed, or drawn per node from
    1..``max_ranks``; shard sizes ``even`` or drawn (``salt`` varies the draw)."""

    ranks: int | None = None
    max_ranks: int = 9
    even: bool = False
    salt: int = 0

    def bounds(self, node: Node, n: int) -> list[int]:
        seed = int.from_bytes(
            hashlib.sha256(node.hash + self.salt.to_bytes(8, "little")).digest()[:8]
        )
        rng = np.random.default_rng(seed)
        count = self.ranks or int(rng.integers(1, self.max_ranks + 1))
        if self.even:
            q, extra = divmod(n, count)
            sizes = [q + (1 if r < extra else 0) for r in range(count)]
            return [0, *np.cumsum(sizes).tolist()]
        cuts = sorted(int(c) for c in rng.integers(0, n + 1, count - 1))
        return [0, *cuts, n]


def _sharded(leaves: Array, op: Op, bounds: list[int], ring: Ring) -> Array:
    """Reduce axis 0 of ``leaves`` over the ranks of ``bounds``; rank 0's copy."""
    shards = [leaves[bounds[r] : bounds[r + 1]] for r in range(len(bounds) - 1)]
    return ring(shards, op)[0]


def _products(a: Array, b: Array) -> Array:
    with np.errstate(all="ignore"):
        return a * b  # each product rounded on its own (the contract's dot); ints wrap


def overrides(layout: Layout, ring: Ring = ring_allreduce) -> dict[str, Callable[..., Array]]:
    """Interpreter overrides that run every reduction through ``ring`` under ``layout``."""

    def reduce(node: Node, x: Array) -> Array:
        leaves = np.moveaxis(x, node.int_attr("axis") + 1, 0)
        return _sharded(leaves, node.op, layout.bounds(node, leaves.shape[0]), ring)

    def dot(node: Node, a: Array, b: Array) -> Array:
        leaves = np.moveaxis(_products(a, b), -1, 0)
        return _sharded(leaves, Op.SUM, layout.bounds(node, leaves.shape[0]), ring)

    def matmul(node: Node, a: Array, b: Array) -> Array:
        prods = _products(a[:, :, None, :], np.swapaxes(b, 1, 2)[:, None, :, :])
        leaves = np.moveaxis(prods, -1, 0)
        return _sharded(leaves, Op.SUM, layout.bounds(node, leaves.shape[0]), ring)

    table: dict[str, Callable[..., Array]] = {op: reduce for op in ("sum", "prod", "amin", "amax")}
    return {**table, "dot": dot, "matmul": matmul}


def interpret(
    fn: Function,
    inputs: Mapping[str, Array],
    layout: Layout | None = None,
    ring: Ring = ring_allreduce,
) -> list[Array]:
    """``fn`` on ``inputs`` with every reduction split over ranks (see the module docstring)."""
    return reference(fn, inputs, overrides=overrides(layout or Layout(), ring))


class DataParallelTarget:
    """keracheck target: the reference interpreter with every reduction data-parallel."""

    name = "dataparallel"
    api_version = API_VERSION
    layout = Layout()

    def available(self) -> str | None:
        return None

    def supported_ops(self) -> frozenset[str]:
        return frozenset(op.value for op in Op)

    def run(self, fn: Function, inputs: Mapping[str, Array]) -> list[Array]:
        return interpret(fn, inputs, self.layout)

    def versions(self) -> dict[str, str]:
        return {"numpy": np.__version__, "allreduce": "ring-forest-1"}
