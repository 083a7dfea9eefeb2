"""A planted bug: data-parallel reductions through a ring that sums partials in rank order.

Each rank reduces its own shard left to right, and the ring then accumulates the ranks'
partials as ``((g0 + g1) + g2) + ...`` -- what a ring allreduce of running sums gives.  Integer
reductions and ``amin``/``amax`` come out right (they are order-free); float ``sum``, ``prod``,
``dot`` and ``matmul`` do not follow the contract's tree, and keracheck must report them.
Loaded with ``--backend-plugin tests/distributed/naive_ring.py:NaiveRing``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kera.ops import REDUCE_STEP, Op
from kera.semantics import SEMANTICS, canon
from keracheck.dataparallel.axis import DataParallelTarget, Layout, interpret

Array = np.ndarray[Any, Any]


def _running(rows: Array, op: Op) -> Array:
    step = SEMANTICS[REDUCE_STEP[op]]
    acc = rows[0]
    for row in rows[1:]:
        acc = step(None, acc, row)
    return acc


def naive_ring(shards: list[Array], op: Op) -> list[Array]:
    """Every rank's copy of ``((g0 op g1) op g2) op ...`` over the non-empty shards."""
    partials = [_running(s, op) for s in shards if len(s)]
    total = canon(_running(np.stack(partials), op))
    return [total for _ in shards]


class NaiveRing(DataParallelTarget):
    name = "dataparallel-naive"
    layout = Layout(ranks=3, even=True)

    def run(self, fn: Any, inputs: Any) -> list[Array]:
        return interpret(fn, inputs, self.layout, ring=naive_ring)
