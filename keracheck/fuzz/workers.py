"""Warm worker processes: one long-lived child per target, for the fuzzer's many small batches.

``keracheck.worker.run_isolated`` starts a fresh process per batch; a forkserver child re-runs
the parent's ``__main__`` module first, which for the ``keracheck`` command costs ~0.1 s, more
than a planted-bug plugin needs for a whole batch and a real share of a shrink step.  A
:class:`WarmWorker` keeps one child per target and sends it each batch over a pipe; the child
runs it with ``keracheck.worker.execute`` (the back end's ``run_many``, exactly as the harness
does).  Isolation is kept: when the child crashes, or does not answer within the time limit,
it is killed and the batch goes to ``run_isolated``, which re-runs it in a fresh process and
then case by case, so a bad case is an error for that case only.  The child is also replaced
every ``recycle`` batches, so a back end that keeps state per batch (loaded libraries) cannot
grow without bound.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
from multiprocessing.connection import Connection
from typing import Any

from keracheck.worker import Job, JobResult, execute, run_isolated

_PRELOAD = ["numpy", "kera.interp", "kera.keg", "keracheck.worker", "keracheck.targets"]


def _serve(conn: Connection, spec: str) -> None:
    """The child: run each batch it is sent until it gets None."""
    while True:
        try:
            jobs = conn.recv()
        except EOFError:
            return
        if jobs is None:
            return
        try:
            conn.send(("ok", execute(spec, jobs, 1)))
        except BaseException as e:
            conn.send(("fail", f"{type(e).__name__}: {e}"))


class WarmWorker:
    """One long-lived worker process for one target spec."""

    def __init__(self, spec: str, timeout: float, recycle: int = 256) -> None:
        self.spec = spec
        self.timeout = timeout
        self.recycle = recycle
        self.proc: Any = None
        self.conn: Connection | None = None
        self.batches = 0
        self.restarts = 0

    def run(self, jobs: list[Job]) -> dict[str, JobResult]:
        if self.proc is None or not self.proc.is_alive() or self.batches >= self.recycle:
            self._start()
        assert self.conn is not None
        self.batches += 1
        try:
            self.conn.send(jobs)
            if self.conn.poll(self.timeout * len(jobs) + 2.0):
                kind, payload = self.conn.recv()
                if kind == "ok":
                    return dict(payload)
        except (EOFError, OSError):
            pass
        self.close()  # crashed, hung or failed: isolate the batch the slow way
        return run_isolated(self.spec, jobs, 1, self.timeout)

    def _start(self) -> None:
        self.close()
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(_PRELOAD)
        parent, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, self.spec), daemon=True)
        self.proc.start()
        child.close()
        self.conn = parent
        self.batches = 0
        self.restarts += 1

    def close(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(OSError, ValueError):
                self.conn.send(None)
            self.conn.close()
            self.conn = None
        if self.proc is not None:
            self.proc.join(0.5)
            if self.proc.is_alive():
                self.proc.kill()
                self.proc.join(5)
            self.proc = None
