"""Progress lines of ``keracheck run`` while its targets run."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping

from keracheck.worker import JobResult


class Phases:
    """Progress of the per-target phases: a line when each starts and ends, and while any
    runs, a line every ``every`` seconds naming those still running and for how long — so a
    first run (minutes of compiling and simulating) is never silent, terminal or not."""

    def __init__(self, report: Callable[[str], None] | None, every: float) -> None:
        self.report = report
        self.every = every
        self.t0 = time.monotonic()
        self.running: dict[str, float] = {}
        self.finished = 0
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def say(self, msg: str) -> None:
        if self.report is not None:
            self.report(f"[{time.monotonic() - self.t0:6.1f}s] {msg}")

    def __enter__(self) -> Phases:
        if self.report is not None and self.every > 0:
            self.thread = threading.Thread(target=self._beat, daemon=True)
            self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join()

    def _beat(self) -> None:
        while not self.stop.wait(self.every):
            now = time.monotonic()
            with self.lock:
                busy = [f"{t} ({now - s:.0f} s)" for t, s in self.running.items()]
                finished = self.finished
            if busy:
                self.say(
                    f"still running: {', '.join(busy)}; "
                    f"{finished} target{'' if finished == 1 else 's'} finished"
                )

    def start(self, tid: str) -> None:
        with self.lock:
            self.running[tid] = time.monotonic()

    def done(self, tid: str, results: Mapping[str, JobResult | str]) -> None:
        with self.lock:
            began = self.running.pop(tid, time.monotonic())
            self.finished += 1
        counts: dict[str, int] = {}
        for r in results.values():
            status = "unsupported" if isinstance(r, str) else r.status
            counts[status] = counts.get(status, 0) + 1
        tally = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
        self.say(f"{tid}: finished in {time.monotonic() - began:.1f} s ({tally or 'no cases'})")
