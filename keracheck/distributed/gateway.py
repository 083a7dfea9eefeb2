"""The gateway: the one process of a keracheck command that holds the Dask client.

keracheck's own process never opens a network socket (``docs/security.md``: while a security
manager is installed an audit hook refuses every non-``AF_UNIX`` connect and bind).  A Dask
client is network traffic, so ``--scheduler`` starts this process (``python -m
keracheck.distributed.gateway``, talking to keracheck over a socket pair) and it connects to the scheduler -- or, for ``local:N``,
starts the ``LocalCluster`` (scheduler, nannies, worker processes) itself.  keracheck sends it
requests and it answers with messages, all pickled over the pipe:

=====================================================  =============================================
request                                                answer
=====================================================  =============================================
(process start)                                        ``("ready", None)`` or ``("fail", message)``
``("install", specs, mode, files, env)``               ``("installed", {name: {id: (reason, versions)}})``
``("submit", id, task, args, resources)``              later ``("done", id, kind, payload)``: kind
                                                       ``ok`` (payload: the task's value), ``killed``
                                                       (its workers kept dying) or ``error``
``("close",)``                                         the cluster closed, the process exits
=====================================================  =============================================

``task`` names a function of :mod:`keracheck.distributed.tasks`.  The gateway exits when the
pipe closes (keracheck ended, however it ended), closing the cluster it started.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import subprocess
import sys
import threading
import uuid
import warnings
from multiprocessing.connection import Connection
from typing import Any

#: seconds to wait for a tcp:// scheduler to answer
CONNECT_SECONDS = 10.0
#: times the scheduler lets a task's worker die under it before the task fails with
#: ``KilledWorker`` (``distributed.scheduler.allowed-failures``, set for local clusters; a
#: remote scheduler keeps its own setting)
ALLOWED_FAILURES = 1
PLUGIN_NAME = "keracheck-targets"
#: Dask settings of the gateway: worker processes may start processes of their own (the local
#: pool's forkserver children), and a task whose worker dies twice fails
CONFIG = {
    "distributed.worker.daemon": False,
    "distributed.scheduler.allowed-failures": ALLOWED_FAILURES,
    "distributed.admin.tick.limit": "1h",  # a long batch blocks no event loop of ours
}


def serve(conn: Connection, kind: str, workers: int, address: str) -> None:
    """The gateway's body: connect or start, then answer requests until ``close`` or EOF."""
    logging.getLogger("distributed").setLevel(logging.CRITICAL)
    warnings.simplefilter("ignore")  # distributed's start-up and shutdown chatter
    send = _sender(conn)
    try:
        client, local = _connect(kind, workers, address)
    except Exception as e:
        send(("fail", f"{type(e).__name__}: {e}"))
        return
    send(("ready", None))
    try:
        _loop(conn, client, send)
    finally:
        with contextlib.suppress(Exception):
            client.close(timeout=CONNECT_SECONDS)
        if local is not None:
            with contextlib.suppress(Exception):
                local.close(timeout=CONNECT_SECONDS)


def _sender(conn: Connection) -> Any:
    lock = threading.Lock()

    def send(message: Any) -> None:
        with lock, contextlib.suppress(OSError, ValueError):
            conn.send(message)

    return send


def _connect(kind: str, workers: int, address: str) -> tuple[Any, Any]:
    import dask
    from distributed import Client, LocalCluster

    dask.config.set(CONFIG)
    if kind == "tcp":
        _reachable(address)
        return Client(address, timeout=CONNECT_SECONDS, set_as_default=False), None  # type: ignore[no-untyped-call]
    local = LocalCluster(  # type: ignore[no-untyped-call]
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        silence_logs=logging.CRITICAL,
    )
    return Client(local, set_as_default=False), local  # type: ignore[no-untyped-call]


def _reachable(address: str) -> None:
    """Fail at once when nothing listens at ``tcp://HOST:PORT`` (Dask's client would retry
    until its timeout)."""
    host, _, port = address.removeprefix("tcp://").rpartition(":")
    with socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_SECONDS):
        pass


def _loop(conn: Connection, client: Any, send: Any) -> None:
    futures: dict[int, Any] = {}  # kept until done: a released future is cancelled
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return
        if request[0] == "close":
            return
        if request[0] == "install":
            try:
                send(("installed", _install(client, *request[1:])))
            except Exception as e:
                send(("fail", f"probing the workers failed: {type(e).__name__}: {e}"))
        elif request[0] == "submit":
            _submit(client, futures, send, *request[1:])


def _install(client: Any, specs: dict[str, str], mode: str, files: Any, env: Any) -> Any:
    from keracheck.distributed.probe import NannyResources, TargetProbe, report

    client.register_plugin(TargetProbe(specs, mode, files, env), name=PLUGIN_NAME)
    found = {str(rep["name"]): rep["targets"] for rep in client.run(report).values()}
    if _partial(found) and _has_nannies(client):  # restarts the workers: only when needed
        client.register_plugin(NannyResources(specs, mode, files, env), name=PLUGIN_NAME)
        found = {str(rep["name"]): rep["targets"] for rep in client.run(report).values()}
    return found


def _partial(found: dict[str, dict[str, Any]]) -> bool:
    """Whether some target is on some workers only (its batches then need its resource)."""
    have = [frozenset(t for t, (r, _) in rep.items() if r is None) for rep in found.values()]
    return len(set(have)) > 1


def _has_nannies(client: Any) -> bool:
    """Whether the workers run under nannies (``dask worker`` without ``--no-nanny``)."""
    info = client.scheduler_info()
    return any(w.get("nanny") for w in info.get("workers", {}).values())


def _submit(
    client: Any, futures: dict[int, Any], send: Any, bid: int, task: str, args: Any, need: Any
) -> None:
    from keracheck.distributed import tasks

    fn = getattr(tasks, task)
    key = f"keracheck-{task}-{uuid.uuid4().hex[:12]}"
    fut = client.submit(fn, *args, resources=need, key=key, pure=False)
    futures[bid] = fut

    def done(f: Any) -> None:
        send(("done", bid, *_outcome(f)))
        futures.pop(bid, None)

    fut.add_done_callback(done)


def _outcome(fut: Any) -> tuple[str, Any]:
    """(kind, payload) of a finished future (see the module docstring)."""
    from distributed.scheduler import KilledWorker

    try:
        return "ok", fut.result()
    except KilledWorker as e:
        return "killed", f"{ALLOWED_FAILURES + 1} Dask workers died running it ({e})"
    except BaseException as e:
        return "error", f"{type(e).__name__}: {e}"


def start(kind: str, workers: int, address: str) -> tuple[subprocess.Popen[bytes], Connection]:
    """The gateway process (a fresh interpreter: no thread of keracheck's is forked, and no
    ``__main__`` re-imported) and keracheck's end of the socket pair it talks over."""
    ours, theirs = socket.socketpair()  # AF_UNIX: local IPC, never the network
    cmd = [sys.executable, "-m", "keracheck.distributed.gateway", str(theirs.fileno())]
    proc = subprocess.Popen(
        [*cmd, kind, str(workers), address or "-"],
        pass_fds=[theirs.fileno()],
        stdin=subprocess.DEVNULL,
    )
    theirs.close()
    return proc, Connection(ours.detach())


def main(argv: list[str]) -> None:
    """``python -m keracheck.distributed.gateway FD KIND WORKERS ADDRESS``."""
    fd, kind, workers, address = argv
    serve(Connection(int(fd)), kind, int(workers), "" if address == "-" else address)


if __name__ == "__main__":
    main(sys.argv[1:])
