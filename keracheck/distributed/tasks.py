"""What runs on a Dask worker.  Each function is called by the scheduler on a worker whose
:class:`~keracheck.distributed.cluster.TargetProbe` set-up has run (sandbox configured,
targets probed), and returns plain, picklable data."""

from __future__ import annotations

from typing import Any

from keracheck.worker import Job, JobResult, run_isolated


def worker_name() -> str:
    """This Dask worker's name (its address when it was started without ``--name``)."""
    from distributed import get_worker

    return str(get_worker().name)


def run_batch(
    spec: str, jobs: list[Job], repeat: int, timeout: float
) -> tuple[str, dict[str, JobResult]]:
    """(worker name, results): the batch run exactly as the local pool runs it --
    ``keracheck.worker.run_isolated``: each case loaded from its ``.keg`` bytes in a sandboxed
    (or, with the sandbox off, forked) process under the time limit, a crash or hang costing
    that batch and then each case alone."""
    return worker_name(), run_isolated(spec, jobs, repeat, timeout)


def run_shard(shard: Any) -> Any:
    """A fuzz shard (``keracheck.distributed.fuzz.Shard``) run as a local campaign here."""
    from keracheck.distributed import fuzz

    return fuzz.run_shard(shard, worker_name())


def ping() -> str:
    """Nothing, on a worker: the round trip of a Dask task (``bench/bench_distributed.py``)."""
    return worker_name()
