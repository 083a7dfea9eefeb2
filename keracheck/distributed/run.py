"""``keracheck run --scheduler``: a target's cases as Dask batches, results as they finish.

:func:`batches` is what ``keracheck.harness.run_target`` iterates instead of its one local
batch.  The cases of one target are cut into :func:`batch_size` pieces (about two per worker
that has the target, so a slow worker or a lost one costs a fraction of the target) and
submitted asking for the target's resource; each finished batch is yielded at once, so the
harness journals it and caches it before the next one returns.

Faults.  When a worker dies mid-batch the scheduler gives the batch to another worker that
has the target; when it has seen :data:`~keracheck.distributed.gateway.ALLOWED_FAILURES` + 1
workers die under the same batch it fails it with ``KilledWorker``.  A failed batch of several
cases is then cut into single cases, each submitted again (the local pool does the same when a
batch process crashes), and a single case whose workers keep dying is an ``error`` for that
case and target with the reason.  Nothing a finished batch returned is lost: it has been
yielded.
"""

from __future__ import annotations

import math
import queue
from collections.abc import Iterator, Sequence
from typing import Any

from keracheck import sandbox
from keracheck.distributed.cluster import Cluster
from keracheck.distributed.probe import resource
from keracheck.worker import Job, JobResult

#: the smallest batch worth a Dask task (a batch builds its cases together: one gcc call)
MIN_BATCH = 4
#: batches per worker that has the target (two: the last one overlaps a slow neighbour's)
BATCHES_PER_WORKER = 2


def batch_size(cases: int, workers: int) -> int:
    """Cases per batch for ``cases`` cases over ``workers`` workers."""
    per = math.ceil(cases / max(1, workers * BATCHES_PER_WORKER))
    return max(MIN_BATCH, per)


def batches(
    cluster: Cluster, target_id: str, spec: str, jobs: Sequence[Job], repeat: int, timeout: float
) -> Iterator[dict[str, JobResult]]:
    """Results of ``jobs`` on target ``target_id`` (``spec``), one batch at a time as each
    finishes on a worker that has the resource of the target's base id."""
    from keracheck.opt_levels import split_id

    base = split_id(target_id)[0]
    have = cluster.workers_with(base)
    # a target every worker has needs no restriction (and a batch resubmitted while every
    # worker is restarting waits for any worker, which Dask wakes it for)
    need = {} if len(have) == cluster.worker_count() else {resource(base): 1.0}
    size = batch_size(len(jobs), len(have))
    inbox: queue.Queue[tuple[int, str, Any]] = queue.Queue()
    waiting: dict[int, list[Job]] = {}

    def submit(chunk: list[Job]) -> None:
        waiting[cluster.submit("run_batch", (spec, chunk, repeat, timeout), need, inbox)] = chunk

    for i in range(0, len(jobs), size):
        submit(list(jobs[i : i + size]))
    while waiting:
        bid, kind, payload = inbox.get()
        chunk = waiting.pop(bid)
        if kind == "killed" and len(chunk) > 1:  # again, case by case
            cluster.ledger.count("split")
            for job in chunk:
                submit([job])
        elif kind == "killed":
            cluster.ledger.count("killed", f"{target_id} {chunk[0].key}")
            yield {chunk[0].key: JobResult("error", _KILLED.format(why=payload))}
        elif kind == "error":
            yield {job.key: JobResult("error", f"Dask: {payload}") for job in chunk}
        else:
            worker, results = payload
            cluster.ledger.note(target_id, worker, len(chunk))
            _note_violations(spec, results)
            yield results


_KILLED = "the case kills the worker process that runs it: {why}"


def _note_violations(spec: str, results: dict[str, JobResult]) -> None:
    """Record in this process what the sandbox stopped on the worker (the run's ``sandbox``
    object and the audit log name it, as for a local batch)."""
    for key, res in results.items():
        if res.violation is not None:
            sandbox.record_violation(sandbox.Violation(spec, key, res.violation, res.message or ""))
