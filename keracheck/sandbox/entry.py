"""What runs inside a sandbox: the server, and the children it forks.

The server (:func:`main`) takes requests from keracheck over a Unix socket, one at a time:

* ``("batch", spec, jobs, repeat, limit, limits)`` — a fresh forked child: it leads a process
  group, takes the batch's rlimits, adds a seccomp filter that forbids signalling the server
  (:func:`seccomp.guard_server`), works in ``/tmp/batch-<n>`` and runs
  ``keracheck.worker.execute``.  The server enforces the time limit, watches the sandbox's
  process table (a fork bomb is stopped at ``limits.processes`` and named), then kills what the
  batch left running — everything in this pid namespace but the server, its init and its
  long-lived children — and answers ``("ok", results)`` or ``("fail", message, violation)``
  with the messages of ``keracheck.worker``.  After a time-out or a fork bomb it answers and
  exits: keracheck then stops the whole sandbox, which kills what is left at once.
* ``("spawn", role, init, limits)`` with two pipe ends passed alongside (SCM_RIGHTS) — a
  long-lived child under the same limits and guard, running ``host``
  (``keracheck.plugin_host.serve``) or ``warm`` (``keracheck.fuzz.workers.serve``) over those
  pipes; the answer is its pid (in this namespace).
* ``("wait", pid, seconds)`` and ``("kill", pid)`` — a child's exit status, waiting up to that
  long; kill its process group.

Standard input is ``/dev/null`` and standard output goes to standard error, so nothing a
target prints can reach keracheck's own output.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import resource
import select
import shutil
import signal
import socket
import tempfile
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.reduction import recvfds
from typing import Any

from keracheck.sandbox import explain, policy, seccomp
from keracheck.sandbox.launch import Duplex
from keracheck.sandbox.policy import Limits

#: seconds between two looks at the process table while a batch runs
WATCH_INTERVAL = 0.02


_PRELOAD = ("numpy", "kera.interp", "kera.keg", "keracheck.worker", "keracheck.targets")


def main(fd: int) -> None:
    """The server: its socket to keracheck is ``fd``."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    conn = Connection(fd)
    sock = socket.socket(fileno=os.dup(fd))
    init: dict[str, Any] = conn.recv()
    explain.CONTEXT = explain.Context(masked=tuple(init["masked"]), home=init["home"])
    for name in _PRELOAD:
        __import__(name)
    Server(conn, sock).serve()


def apply_limits(limits: Limits, cpu_seconds: int | None) -> None:
    """This process's rlimits (inherited by everything it starts)."""
    settings = [
        (resource.RLIMIT_FSIZE, limits.file_size),
        (resource.RLIMIT_NPROC, limits.tasks),
        (resource.RLIMIT_CORE, 0),
    ]
    if limits.address_space is not None:
        settings.append((resource.RLIMIT_AS, limits.address_space))
    for which, value in settings:
        resource.setrlimit(which, (value, value))
    if cpu_seconds is not None:  # soft: SIGXCPU (named in the report); hard: SIGKILL
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 5))
        explain.CONTEXT.cpu_seconds = cpu_seconds


# ------------------------------------------------------------------------------ server


class Server:
    """The request loop (module docstring); ``children``: long-lived child pid -> exit status
    once reaped (None while it runs)."""

    def __init__(self, conn: Connection, sock: socket.socket) -> None:
        self.conn = conn
        self.sock = sock
        self.children: dict[int, int | None] = {}
        self.seq = 0

    def serve(self) -> None:
        while True:
            try:
                request = self.conn.recv()
            except (EOFError, OSError):
                return
            if request is None:
                return
            reply = HANDLERS[request[0]](self, *request[1:])
            self.conn.send(reply)
            if reply[0] == "fail" and reply[2] in policy.RETIRE:
                return  # keracheck stops this sandbox: the kernel kills what is left, at once

    def batch(
        self, spec: str, jobs: list[Any], repeat: int, limit: float, limits: Limits
    ) -> tuple[Any, ...]:
        self.seq += 1
        private = (self.conn.fileno(), self.sock.fileno())
        return run_batch(spec, jobs, repeat, limit, limits, self.seq, self.keep(), private)

    def keep(self) -> frozenset[int]:
        """Process groups a sweep leaves alone: the live long-lived children's."""
        self.reap()
        return frozenset(pid for pid, code in self.children.items() if code is None)

    def spawn(self, role: str, init: dict[str, Any], limits: Limits) -> tuple[Any, ...]:
        read_fd, write_fd = recvfds(self.sock, 2)
        pid = os.fork()
        if pid == 0:
            try:
                self.conn.close()
                self.sock.close()
                _child_setup(limits, None)
                explain.CONTEXT.limits = limits
                ROLES[role](Duplex(read_fd, write_fd), init)
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(0)
        os.close(read_fd)
        os.close(write_fd)
        self.children[pid] = None
        return ("ok", pid)

    def reap(self) -> None:
        for pid, code in list(self.children.items()):
            if code is None:
                with contextlib.suppress(ChildProcessError):
                    done, status = os.waitpid(pid, os.WNOHANG)
                    if done:
                        self.children[pid] = os.waitstatus_to_exitcode(status)

    def wait(self, pid: int, seconds: float) -> tuple[Any, ...]:
        deadline = time.monotonic() + seconds
        while True:
            self.reap()
            code = self.children.get(pid)
            if code is not None or time.monotonic() >= deadline:
                return ("ok", code)
            time.sleep(0.01)

    def kill(self, pid: int) -> tuple[Any, ...]:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        reply = self.wait(pid, 5.0)
        self.children.pop(pid, None)
        return reply


HANDLERS: dict[str, Callable[..., tuple[Any, ...]]] = {
    "batch": Server.batch,
    "spawn": Server.spawn,
    "wait": Server.wait,
    "kill": Server.kill,
}


def _child_setup(limits: Limits, cpu: int | None) -> None:
    """What every process the server forks does first: a process group of its own, the
    limits, and the guard that keeps it from signalling the server."""
    os.setpgid(0, 0)
    apply_limits(limits, cpu)
    seccomp.install(seccomp.guard_server(os.getppid()))


def run_batch(
    spec: str,
    jobs: list[Any],
    repeat: int,
    limit: float,
    limits: Limits,
    seq: int,
    keep: frozenset[int] = frozenset(),
    private: tuple[int, ...] = (),
) -> tuple[Any, ...]:
    """One batch in a fresh child (module docstring); ``private``: the server's descriptors
    the child must not keep (its socket to keracheck: a batch could forge answers on it)."""
    scratch = f"/tmp/batch-{seq}"
    os.makedirs(scratch, exist_ok=True)
    cpu = policy.cpu_seconds(limits, limit)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            for fd in (r, *private):
                os.close(fd)
            _batch_child(w, spec, jobs, repeat, limits, cpu, scratch)
        except BaseException:
            traceback.print_exc()  # the sandbox could not be set up for the batch
        finally:
            os._exit(70)
    os.close(w)
    try:
        data, why = _collect(r, time.monotonic() + limit, limits.processes, keep)
    finally:
        os.close(r)
    if why is not None:  # a hang or a fork bomb: the sandbox goes, with everything in it
        return _verdict(None, why, 0, limit, limits)
    sweep(keep)
    _, status = os.waitpid(pid, 0)
    shutil.rmtree(scratch, ignore_errors=True)
    code = os.waitstatus_to_exitcode(status)
    explain.CONTEXT.limits = limits
    explain.CONTEXT.cpu_seconds = cpu
    return _verdict(data, why, code, limit, limits)


def _verdict(
    data: bytes | None, why: str | None, code: int, limit: float, limits: Limits
) -> tuple[Any, ...]:
    if why == "timeout":
        return ("fail", f"timed out after {limit:.0f} s", "time-limit")
    if why == "processes":
        return (
            "fail",
            f"killed: process-count limit ({limits.processes} processes in the sandbox): the "
            "batch kept starting processes",
            "process-count",
        )
    if not data:
        message, kind = explain.crashed(code)
        return ("fail", message, kind)
    try:
        kind_, payload = pickle.loads(data)
    except Exception as e:
        return ("fail", f"target process sent an unreadable answer ({type(e).__name__})", None)
    if kind_ != "ok":
        return ("fail", f"target process failed: {payload}", None)
    return ("ok", payload)


def _batch_child(
    w: int, spec: str, jobs: list[Any], repeat: int, limits: Limits, cpu: int, scratch: str
) -> None:
    me = os.getpid()
    _child_setup(limits, cpu)
    explain.CONTEXT.limits = limits
    os.chdir(scratch)
    os.environ["TMPDIR"] = scratch
    tempfile.tempdir = None
    from keracheck.worker import execute

    payload: tuple[str, Any]
    try:
        payload = ("ok", execute(spec, jobs, repeat))
    except BaseException as e:
        text = f"{type(e).__name__}: {e}"[:4000]
        payload = ("fail", f"{text}\n{traceback.format_exc(limit=5)}")
    if os.getpid() != me:  # a process the batch forked returned here: it never answers
        os._exit(0)
    try:
        data = pickle.dumps(payload)
    except Exception as e:
        data = pickle.dumps(("fail", f"results cannot be sent: {type(e).__name__}: {e}"))
    with os.fdopen(w, "wb") as f:
        f.write(data)
    os._exit(0)


def _collect(
    fd: int, deadline: float, most: int, keep: frozenset[int]
) -> tuple[bytes | None, str | None]:
    """Everything the batch writes until it closes the pipe, or why not: ``timeout`` past the
    deadline, ``processes`` when the sandbox holds more than ``most`` processes."""
    chunks: list[bytes] = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None, "timeout"
        if select.select([fd], [], [], min(left, WATCH_INTERVAL))[0]:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return b"".join(chunks), None
            chunks.append(chunk)
        elif len(others(keep)) > most:
            return None, "processes"


def others(keep: frozenset[int] = frozenset()) -> list[int]:
    """Live processes of this sandbox but its init (pid 1), this server and the process
    groups in ``keep``."""
    me = os.getpid()
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in (1, me):
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rpartition(b")")[2].split()
        except OSError:
            continue
        if fields and fields[0] != b"Z" and int(fields[2]) not in keep:
            out.append(int(name))
    return out


def sweep(keep: frozenset[int] = frozenset()) -> None:
    """Kill everything a batch left in the sandbox (a process that forks while it is killed
    is caught on the next round)."""
    for _ in range(1000):
        pids = others(keep)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.002)


# ------------------------------------------------------------------------------ children


def serve_host(conn: Any, init: dict[str, Any]) -> None:
    from keracheck.plugin_host import serve

    serve(conn, init["spec"])


def serve_warm(conn: Any, init: dict[str, Any]) -> None:
    from keracheck.fuzz.workers import serve

    serve(conn, init["spec"], init["timeout"])


ROLES: dict[str, Callable[[Any, dict[str, Any]], None]] = {
    "host": serve_host,
    "warm": serve_warm,
}
