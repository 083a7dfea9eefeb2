"""Run one Kera graph data-parallel over R ranks, with the bits of the single-rank run.

* :mod:`.rows` -- shards of the batch: each rank runs the graph on its rows (on any target),
  and each result is reduced over the rows with the contract's tree through the ring allreduce
  of :mod:`kera.allreduce`; ranks are Dask tasks on a cluster or steps in this process.
* :mod:`.axis` -- shards of a reduced axis: every ``sum``/``prod``/``amin``/``amax``/``dot``/
  ``matmul`` of a graph is split over R ranks along the axis it reduces and combined by the
  same ring; :class:`.axis.DataParallelTarget` is a keracheck target that does this.
* :mod:`.checkpoint` -- a long run of steps (per-row graph, allreduce, update graph) that
  checkpoints its state every k steps and resumes from the last checkpoint when a worker dies.

What is guaranteed (and what is not) is in ``docs/semantics.md``, "Distributed reductions".
"""

from __future__ import annotations

from keracheck.dataparallel.rows import DaskRanks, LocalRanks, Ranks, ring_on, run_rows, single_rank

__all__ = ["DaskRanks", "LocalRanks", "Ranks", "ring_on", "run_rows", "single_rank"]
