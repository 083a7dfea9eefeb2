"""Warm workers: one long-lived process per target that forks a child for each batch.

``keracheck.worker.run_isolated`` starts a fresh forkserver process per batch, and such a
process first re-imports the parent's ``__main__`` (the whole ``keracheck`` CLI): ~0.1 s, more
than a planted-bug plugin needs for a batch, and paid again for every crashing case.  A
:class:`WarmWorker` starts one *zygote* process per target once; the zygote imports the back
end's module and then, for each batch, ``fork``s a child that runs the batch with
``keracheck.worker.execute`` (the back end's ``run_many``, exactly as the harness does) and
sends the results back.  Forking a process that has everything imported takes milliseconds.

Isolation is that of ``run_isolated``: a child that crashes or exceeds its limit (``timeout``
per case) is killed, and its batch is re-run one case per child, so a bad case is an error for
that case only, with the harness's messages ("target process crashed (exit code N)", "timed
out after N s").  Every batch starts from the zygote's state, so nothing leaks between batches.
The zygote itself is single-threaded and never runs a case.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import pickle
import select
import time
from multiprocessing.connection import Connection
from typing import Any

from keracheck.worker import Job, JobResult, contain_child, execute, kill_group, track

_PRELOAD = ["numpy", "kera.interp", "kera.keg", "keracheck.worker", "keracheck.targets"]
Outcome = dict[str, JobResult] | str  # results, or why there are none


# ------------------------------------------------------------------------------ the zygote


def _read_all(fd: int, deadline: float) -> bytes | None:
    """Everything written to fd until EOF, or None past the deadline."""
    chunks: list[bytes] = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _child(spec: str, jobs: list[Job], fd: int) -> None:
    """In the forked child: run the batch, write the pickled results, exit at once."""
    code = 0
    try:
        data = pickle.dumps(("ok", execute(spec, jobs, 1)))
    except BaseException as e:
        data = pickle.dumps(("fail", f"{type(e).__name__}: {e}"))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    except BaseException:
        code = 1
    os._exit(code)


def _fork_run(spec: str, jobs: list[Job], limit: float, owner: int) -> Outcome:
    """Run jobs in a forked child within ``limit`` seconds."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        contain_child(owner)
        _child(spec, jobs, w)
    os.close(w)
    try:
        data = _read_all(r, time.monotonic() + limit)
    finally:
        os.close(r)
    if data is None:
        kill_group(pid)
        os.waitpid(pid, 0)
        return f"timed out after {limit:.0f} s"
    kill_group(pid)  # whatever the batch started and left running
    _, status = os.waitpid(pid, 0)
    if not data:
        return f"target process crashed (exit code {os.waitstatus_to_exitcode(status)})"
    kind, payload = pickle.loads(data)
    return dict(payload) if kind == "ok" else f"target process failed: {payload}"


def _isolated(spec: str, jobs: list[Job], timeout: float, owner: int) -> dict[str, JobResult]:
    """A batch in one child; if that child fails, each case in a child of its own."""
    done = _fork_run(spec, jobs, timeout * len(jobs) + 2.0, owner)
    if isinstance(done, dict):
        return done
    if len(jobs) == 1:
        return {jobs[0].key: JobResult("error", done)}
    out: dict[str, JobResult] = {}
    for job in jobs:
        one = _fork_run(spec, [job], timeout + 2.0, owner)
        out[job.key] = one[job.key] if isinstance(one, dict) else JobResult("error", one)
    return out


def _zygote(conn: Connection, spec: str, timeout: float, owner: int) -> None:
    """The long-lived process: import the back end once, then fork per batch."""
    contain_child(owner)
    with contextlib.suppress(Exception):  # a broken plugin fails per batch, with its message
        from keracheck.targets import instantiate

        instantiate(spec)
    while True:
        try:
            jobs = conn.recv()
        except EOFError:
            return
        if jobs is None:
            return
        conn.send(_isolated(spec, jobs, timeout, owner))


# ------------------------------------------------------------------------------ the parent


class WarmWorker:
    """The zygote of one target spec, started on first use."""

    def __init__(self, spec: str, timeout: float) -> None:
        self.spec = spec
        self.timeout = timeout
        self.proc: Any = None
        self.conn: Connection | None = None
        self.starts = 0

    def run(self, jobs: list[Job]) -> dict[str, JobResult]:
        if self.proc is None or not self.proc.is_alive():
            self._start()
        assert self.conn is not None
        # the zygote enforces the limits; this bound only guards against the zygote itself
        bound = 2 * (self.timeout + 2.0) * (len(jobs) + 1) + 30.0
        try:
            self.conn.send(jobs)
            if self.conn.poll(bound):
                done: dict[str, JobResult] = self.conn.recv()
                return done
            why = f"worker for {self.spec} did not answer within {bound:.0f} s"
        except (EOFError, OSError) as e:
            why = f"worker for {self.spec} died: {type(e).__name__}: {e}"
        self.close()
        return {job.key: JobResult("error", why) for job in jobs}

    def _start(self) -> None:
        self.close()
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(_PRELOAD)
        parent, child = ctx.Pipe()
        self.proc = ctx.Process(
            target=_zygote, args=(child, self.spec, self.timeout, os.getpid()), daemon=True
        )
        self.proc.start()
        assert self.proc.pid is not None
        track(self.proc.pid, True)
        child.close()
        self.conn = parent
        self.starts += 1

    def close(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(OSError, ValueError):
                self.conn.send(None)
            self.conn.close()
            self.conn = None
        if self.proc is not None:
            self.proc.join(1.0)
            if self.proc.pid is not None:
                kill_group(self.proc.pid)
                track(self.proc.pid, False)
            self.proc.join(5)
            self.proc = None
