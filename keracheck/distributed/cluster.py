"""Connecting to a Dask scheduler (or starting a ``LocalCluster``), and which worker has which
target.

``--scheduler`` takes ``local:N`` (a ``LocalCluster`` of N worker processes, one thread each,
started and closed by keracheck) or ``tcp://HOST:PORT`` (a scheduler someone started with
``dask scheduler``; keracheck only connects).  Anything else, or a scheduler that does not
answer within ``gateway.CONNECT_SECONDS``, is a :class:`SchedulerError`: a usage error (exit 2)
with the forms that are accepted, never a traceback.

The Dask client lives in the gateway process (:mod:`.gateway`: keracheck's own process never
opens a network socket); a :class:`Cluster` is keracheck's end of it: requests go down the
pipe, and a reader thread hands each answer to the queue of the batch that waits for it.
:meth:`Cluster.place` probes the run's targets on every worker (:mod:`.probe`) and makes a
target available when some worker has it, else ``unavailable`` with each worker's reason.
"""

from __future__ import annotations

import contextlib
import itertools
import queue
import re
import subprocess
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

#: the largest ``local:N``
MOST_LOCAL_WORKERS = 256
#: seconds to wait for the gateway's answer to a connect or a probe (probes may build)
ANSWER_SECONDS = 300.0
FORMS = "local:N (a local cluster of N worker processes) or tcp://HOST:PORT"
_TCP = re.compile(r"^tcp://(?P<host>\[[0-9a-fA-F:]+\]|[A-Za-z0-9_.-]+):(?P<port>[0-9]{1,5})$")
_LOCAL = re.compile(r"^local:(?P<n>[0-9]+)$")


class SchedulerError(Exception):
    """A ``--scheduler`` value that is malformed or cannot be reached (exit 2)."""


@dataclass(frozen=True)
class Address:
    """A parsed ``--scheduler``: ``local`` with ``workers``, or ``tcp`` with ``address``."""

    kind: str
    workers: int = 0
    address: str = ""

    def __str__(self) -> str:
        return f"local:{self.workers}" if self.kind == "local" else self.address


def parse(text: str) -> Address:
    """The ``--scheduler`` value as an :class:`Address`; raises :class:`SchedulerError`."""
    local = _LOCAL.match(text)
    if local is not None:
        n = int(local["n"])
        if not 1 <= n <= MOST_LOCAL_WORKERS:
            raise SchedulerError(
                f"--scheduler {text}: a local cluster has 1 to {MOST_LOCAL_WORKERS} workers"
            )
        return Address("local", workers=n)
    tcp = _TCP.match(text)
    if tcp is not None and 1 <= int(tcp["port"]) <= 65535:
        return Address("tcp", address=text)
    raise SchedulerError(f"--scheduler {text!r} is not {FORMS}")


@dataclass
class Ledger:
    """Where the batches of a run went: target -> worker -> cases, and the faults seen."""

    placed: dict[str, dict[str, int]] = field(default_factory=dict)
    batches: int = 0
    split: int = 0  # batches cut into single cases after their workers died
    killed: list[str] = field(default_factory=list)  # case keys that kept killing workers
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def note(self, target: str, worker: str, cases: int) -> None:
        with self.lock:
            per = self.placed.setdefault(target, {})
            per[worker] = per.get(worker, 0) + cases
            self.batches += 1

    def count(self, what: str, key: str = "") -> None:
        """A batch cut into single cases (``split``), or a case that kept killing its workers
        (``killed``, its target and key)."""
        with self.lock:
            if what == "split":
                self.split += 1
            else:
                self.killed.append(key)

    def document(self) -> dict[str, Any]:
        return {
            "batches": self.batches,
            "placed": {t: dict(sorted(w.items())) for t, w in sorted(self.placed.items())},
            "splitAfterWorkerDeaths": self.split,
            "killedWorkers": sorted(self.killed),
        }


@dataclass
class Cluster:
    """keracheck's end of the gateway: the scheduler's address, what each worker reported of
    the installed targets (worker name -> target id -> (reason or None, versions)), and where
    the batches went."""

    address: Address
    process: Any
    conn: Any
    reports: dict[str, dict[str, tuple[str | None, dict[str, str]]]] = field(default_factory=dict)
    ledger: Ledger = field(default_factory=Ledger)
    _inboxes: dict[int, queue.Queue[tuple[int, str, Any]]] = field(default_factory=dict)
    _control: queue.Queue[Any] = field(default_factory=queue.Queue)
    _ids: Iterator[int] = field(default_factory=itertools.count)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _reader: threading.Thread | None = None

    # -- the pipe

    def start_reader(self) -> None:
        self._reader = threading.Thread(target=self._read, name="keracheck-dask", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                message = self.conn.recv()
            except (EOFError, OSError):
                break
            if message[0] == "done":
                with self._lock:
                    inbox = self._inboxes.pop(message[1], None)
                if inbox is not None:
                    inbox.put(tuple(message[1:]))
            else:
                self._control.put(message)
        with self._lock:  # the gateway ended: nothing more will come
            left, self._inboxes = self._inboxes, {}
        for bid, inbox in left.items():
            inbox.put((bid, "error", "the Dask gateway process ended"))
        self._control.put(("fail", "the Dask gateway process ended"))

    def _send(self, message: Any) -> None:
        with self._lock:
            self.conn.send(message)

    def answer(self, want: str) -> Any:
        """The gateway's next control message, which must be ``want``; raises SchedulerError."""
        try:
            kind, payload = self._control.get(timeout=ANSWER_SECONDS)
        except queue.Empty:
            raise SchedulerError(f"--scheduler {self.address}: no answer from Dask") from None
        if kind != want:
            raise SchedulerError(f"--scheduler {self.address}: {payload}")
        return payload

    def submit(
        self,
        task: str,
        args: tuple[Any, ...],
        need: Mapping[str, float],
        inbox: queue.Queue[tuple[int, str, Any]],
    ) -> int:
        """Submit ``tasks.<task>(*args)`` needing resources ``need``; its answer, (id, kind,
        payload), goes to ``inbox``."""
        bid = next(self._ids)
        with self._lock:
            self._inboxes[bid] = inbox
        try:
            self._send(("submit", bid, task, args, dict(need)))
        except (OSError, ValueError):
            with self._lock:
                self._inboxes.pop(bid, None)
            inbox.put((bid, "error", "the Dask gateway process ended"))
        return bid

    # -- targets

    def install(self, specs: Mapping[str, str]) -> None:
        """Probe ``specs`` (target id -> spec) on every worker and declare its resources."""
        from keracheck import sandbox

        files, env = sandbox.secrets()
        self._send(("install", dict(specs), sandbox.mode(), files, env))
        got = self.answer("installed")
        self.reports = {
            w: {tid: (r, dict(v)) for tid, (r, v) in rep.items()} for w, rep in sorted(got.items())
        }

    def workers_with(self, target_id: str) -> list[str]:
        return [w for w, rep in self.reports.items() if rep.get(target_id, ("?", {}))[0] is None]

    def reason(self, target_id: str) -> str | None:
        """None when some worker has the target, else why none has it (each worker's reason)."""
        if self.workers_with(target_id):
            return None
        if not self.reports:
            return f"no Dask worker is connected to {self.address}"
        why = sorted(
            {rep.get(target_id, ("not probed", {}))[0] or "" for rep in self.reports.values()}
        )
        return "no Dask worker has it: " + "; ".join(why)

    def versions(self, target_id: str) -> dict[str, str]:
        """The tool versions the first worker that has the target reported."""
        for w in self.workers_with(target_id):
            return dict(self.reports[w][target_id][1])
        return {}

    def worker_count(self) -> int:
        return len(self.reports)

    def place(self, targets: Sequence[Any]) -> list[Any]:
        """``targets`` (``keracheck.targets.Target``) probed on the workers: each available
        when some worker has it (and it loads here: its ops and ``declines`` are read here),
        else unavailable with the workers' reasons."""
        loadable = [t for t in targets if t.backend is not None]
        self.install({t.id: t.spec for t in loadable})
        return [t if t.backend is None else replace(t, reason=self.reason(t.id)) for t in targets]

    def batches(
        self, target_id: str, spec: str, jobs: Sequence[Any], repeat: int, timeout: float
    ) -> Iterator[dict[str, Any]]:
        """Results of ``jobs`` as their batches finish (``keracheck.distributed.run``)."""
        from keracheck.distributed import run

        return run.batches(self, target_id, spec, jobs, repeat, timeout)

    def document(self) -> dict[str, Any]:
        """The run document's ``distributed`` object: the scheduler, each worker's targets and
        where the batches ran (worker names: the one part of a run that differs from a local
        run's, with the timings)."""
        return {
            "scheduler": str(self.address),
            "workers": {
                w: sorted(t for t, (r, _) in rep.items() if r is None)
                for w, rep in sorted(self.reports.items())
            },
            **self.ledger.document(),
        }

    # -- life

    def close(self) -> None:
        """Close the gateway (and the local cluster it started); kill it if it hangs."""
        with contextlib.suppress(OSError, ValueError):
            self._send(("close",))
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)
        with contextlib.suppress(OSError):
            self.conn.close()

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(text: str) -> Cluster:
    """Connect to (or start) the scheduler ``text`` names, through a gateway process; raises
    :class:`SchedulerError` (a malformed value, no Dask installed, no scheduler answering)."""
    address = parse(text)
    try:
        import distributed  # noqa: F401  (installed? the gateway imports it)
    except ModuleNotFoundError:
        raise SchedulerError(
            "--scheduler needs Dask: pip install 'keracheck[distributed]' "
            "(dask[distributed]); without --scheduler keracheck runs on this machine"
        ) from None
    from keracheck.distributed import gateway

    process, conn = gateway.start(address.kind, address.workers, address.address)
    cluster = Cluster(address, process, conn)
    cluster.start_reader()
    try:
        cluster.answer("ready")
    except SchedulerError as e:
        cluster.close()
        hint = (
            "; start one with 'dask scheduler' and workers with 'dask worker ADDRESS' "
            "(docs/distributed.md)"
            if address.kind == "tcp"
            else ""
        )
        raise SchedulerError(
            f"{e}: cannot connect{hint}" if address.kind == "tcp" else str(e)
        ) from None
    return cluster
