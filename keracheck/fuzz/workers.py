"""Warm workers: one long-lived process per target that runs batch after batch.

``keracheck.worker.run_isolated`` starts a fresh forkserver process per batch, and such a
process first re-imports the parent's ``__main__`` (the whole ``keracheck`` CLI): ~0.1 s, more
than a planted-bug plugin needs for a batch, and paid again for every crashing case.  A
:class:`WarmWorker` starts one worker process per target once; the worker instantiates the back
end (``keracheck.worker.backend_for``: a ``file.py`` plugin's module is executed there, once)
and then runs each batch it is sent with ``keracheck.worker.execute`` (the back end's
``run_many``, exactly as the harness does) and sends the results back.  So a plugin module runs
twice per campaign -- in its plugin host (``keracheck.plugin_host``, which answers
``available``/``supported_ops``/``declines``) and in the worker -- never per batch, and the
worker's state (module globals, the instance, a cache of compiled kernels) survives from batch
to batch.  A target's ``run`` must still be a function of its case alone: the reproducers are
replayed by ``keracheck run`` in a fresh process.

Isolation.  A batch whose worker crashes, raises past ``execute`` or runs past its limit
(``timeout`` per case, summed over the batch) costs the worker: it is killed with everything it
started, and a fresh one re-runs the batch one case per ``fork``ed child (forking a process
that has everything loaded takes milliseconds), so a bad case is an error for that case only,
with the harness's messages ("target process crashed (exit code N)", "timed out after N s").
The next batch runs in that fresh worker.  A plugin that cannot run in a separate process at
all (one that needs keracheck's own process state) runs with ``keracheck fuzz --in-process``
(``Options.isolate=False``): one instance in keracheck's process, without crash isolation.
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

from keracheck import sandbox
from keracheck.sandbox import explain
from keracheck.worker import (
    Job,
    JobResult,
    backend_for,
    contain_child,
    execute,
    kill_group,
    track,
)

_PRELOAD = ["numpy", "kera.interp", "kera.keg", "keracheck.worker", "keracheck.targets"]
Outcome = dict[str, JobResult] | str  # results, or why there are none


# ------------------------------------------------------------------------------ the worker


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


def _one_by_one(spec: str, jobs: list[Job], timeout: float, owner: int) -> dict[str, JobResult]:
    """Each case in a forked child of its own (after the batch failed as a whole)."""
    out: dict[str, JobResult] = {}
    for job in jobs:
        one = _fork_run(spec, [job], timeout + 2.0, owner)
        out[job.key] = one[job.key] if isinstance(one, dict) else JobResult("error", one)
    return out


def _serve(conn: Connection, spec: str, timeout: float, owner: int) -> None:
    """The worker process (a forkserver child, the sandbox off): contained, then
    :func:`serve`."""
    contain_child(owner)
    serve(conn, spec, timeout, owner)


def serve(conn: Any, spec: str, timeout: float, owner: int = 0) -> None:
    """Load the back end once, then answer ``(isolate, jobs)`` requests: the batch run here,
    or (after a failure) each case in a child of its own.  In a sandbox (the ``warm`` role of
    ``keracheck.sandbox.entry``) ``owner`` is unused: the sandbox dies with keracheck."""
    with contextlib.suppress(Exception):  # a broken plugin fails per batch, with its message
        backend_for(spec)
    while True:
        try:
            request = conn.recv()
        except EOFError:
            return
        if request is None:
            return
        isolate, jobs = request
        conn.send(_one_by_one(spec, jobs, timeout, owner) if isolate else _here(spec, jobs))


def _here(spec: str, jobs: list[Job]) -> Outcome:
    try:
        return execute(spec, jobs, 1)
    except BaseException as e:  # SystemExit from a plugin, say: the batch is re-run isolated
        return f"target process failed: {type(e).__name__}: {e}"


# ------------------------------------------------------------------------------ the parent


class WarmWorker:
    """The worker process of one target spec, started on first use and after a failure."""

    def __init__(self, spec: str, timeout: float) -> None:
        self.spec = spec
        self.timeout = timeout
        self.proc: Any = None
        self.conn: Any = None  # a Connection, or a sandbox's Duplex
        self.starts = 0

    def run(self, jobs: list[Job]) -> dict[str, JobResult]:
        done = self._ask(False, jobs, self.timeout * len(jobs) + 2.0)
        if isinstance(done, dict):
            return done
        self.close()  # crashed, hung or failed: its state is not trusted for the next batch
        if len(jobs) == 1:
            return {jobs[0].key: JobResult("error", done)}
        # the forked children enforce the limits; this bound only guards the worker itself
        bound = 2 * (self.timeout + 2.0) * (len(jobs) + 1) + 30.0
        again = self._ask(True, jobs, bound)
        if isinstance(again, dict):
            return again
        self.close()
        why = f"worker for {self.spec}: {again}"
        return {job.key: JobResult("error", why) for job in jobs}

    def _ask(self, isolate: bool, jobs: list[Job], limit: float) -> Outcome:
        """The worker's answer to one request, or why there is none."""
        if self.proc is None or not self.proc.is_alive():
            self._start()
        assert self.conn is not None
        try:
            self.conn.send((isolate, jobs))
            if not self.conn.poll(limit):
                return f"timed out after {limit:.0f} s"
            done: Outcome = self.conn.recv()
            return done
        except (EOFError, OSError):
            self.proc.join(5)
            return explain.crashed(self.proc.exitcode)[0]

    def _start(self) -> None:
        self.close()
        if sandbox.enabled():  # a sandboxed process of the target's kind (keracheck.sandbox)
            from keracheck.sandbox import launch, policy

            kind = launch.kind_of(self.spec)
            init = {"spec": launch.absolute_spec(self.spec), "timeout": self.timeout}
            limits = policy.limits_for(kind, self.spec)
            self.proc = launch.spawn(kind, "warm", self.spec, init, limits)
            self.conn = self.proc.conn
            self.starts += 1
            return
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(_PRELOAD)
        parent, child = ctx.Pipe()
        self.proc = ctx.Process(
            target=_serve, args=(child, self.spec, self.timeout, os.getpid()), daemon=True
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
        if self.proc is not None and hasattr(self.proc, "server"):  # a sandbox's child
            self.proc.join(1.0)
            self.proc.close()
            self.proc = None
        if self.proc is not None:
            self.proc.join(1.0)
            if self.proc.pid is not None:
                kill_group(self.proc.pid)
                track(self.proc.pid, False)
            self.proc.join(5)
            self.proc = None
