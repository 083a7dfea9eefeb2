"""Progress of ``keracheck run`` on stderr: a live board on a terminal, plain lines elsewhere.

The run goes through three stages: *collecting* (reading and compiling the sources),
*running* (each target builds and runs its cases in a worker: compiling and simulating happen
inside that one process, so a target's row says "building and running" until its batch
returns) and *comparing* (outputs compared bit for bit, opt-level culprits and first diverging
nodes searched, which may run targets again).

* :class:`Board` is the state: per target its row (queued, checking the result cache,
  building and running, done), cases done of the total (cached and unsupported ones count as
  done once the target has looked them up), elapsed time and an ETA from the seconds per case
  the same target took last time (``.keracheck/timings.json``; none on a first run).
* :class:`Reporter` prints plain lines (CI logs, pipes): every message as it comes, prefixed
  with the elapsed time, and whenever nothing was printed for ``every`` seconds (10 s), one
  line saying what is still busy — so a long phase is never silent.
* :class:`Live` redraws the board in place with ANSI cursor movement, a few times a second;
  messages scroll above it.  Colours unless ``NO_COLOR`` is set (https://no-color.org: colour
  only, so the board itself stays).  ``TERM=dumb`` gets plain lines.
* :class:`Phases` is what the harness drives (``start``/``done`` per target, ``say``); it
  forwards to the reporter the CLI handed over as ``Options.progress``, or wraps a plain
  callable in a :class:`Reporter` of its own.

The harness reports a run's plan and a target's cache lookup as messages; :data:`HARNESS_LINES`
reads those two (a test runs the real harness, so a reworded message fails it).
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from keracheck.worker import JobResult

TIMINGS = Path(".keracheck") / "timings.json"

#: the harness's messages the board reads: the plan, and a target's result-cache lookup
HARNESS_LINES = {
    "plan": re.compile(r"(?P<cases>\d+) cases on (?P<n>\d+) targets: (?P<ids>.*)"),
    "todo": re.compile(
        r"(?P<tid>\S+): started, (?P<todo>\d+) cases to build and run"
        r"(?:, (?P<cached>\d+) from the result cache)?"
    ),
}


def duration(seconds: float) -> str:
    """``4.2s``, ``1m05s``, ``1h02m``: short and of steady width for a board."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    return f"{minutes // 60}h{minutes % 60:02d}m"


def eta_text(seconds: float) -> str:
    """``ETA ~1m05s``; never below a second (an estimate, not a countdown)."""
    return f"ETA ~{duration(max(seconds, 1.0))}"


@dataclass
class Row:
    """One target's progress; times are ``time.monotonic()`` readings."""

    tid: str
    state: str = "queued"  # queued | checking cache | building and running | done
    todo: int | None = None  # cases its worker builds and runs (known after the cache lookup)
    began: float | None = None
    ran: float | None = None  # when its batch went to the worker
    ended: float | None = None
    tally: str = ""  # "140 ok, 1 error" once done
    per_case: float | None = None  # seconds per case the last time (ETA)


class Board:
    """The run's progress as the harness reports it; :meth:`header`, :meth:`row_text` and
    :meth:`busy` put it in words."""

    def __init__(self, timings: Mapping[str, float], t0: float, jobs: int = 1) -> None:
        self.timings = dict(timings)
        self.t0 = t0
        self.jobs = max(1, jobs)  # targets that run side by side (the ETA schedules them)
        self.stage = "collecting"
        self.stage_began = t0
        self.cases: int | None = None
        self.rows: dict[str, Row] = {}

    def row(self, tid: str) -> Row:
        if tid not in self.rows:
            self.rows[tid] = Row(tid, per_case=self.timings.get(tid))
        return self.rows[tid]

    def read(self, msg: str, now: float) -> bool:
        """Take in a harness message; True when it was one the board shows."""
        plan = HARNESS_LINES["plan"].fullmatch(msg)
        if plan:
            self.cases = int(plan["cases"])
            for tid in plan["ids"].split(", "):
                self.row(tid)
            self.set_stage("running", now)
            return True
        todo = HARNESS_LINES["todo"].fullmatch(msg)
        if todo:
            row = self.row(todo["tid"])
            row.todo, row.ran, row.state = int(todo["todo"]), now, "building and running"
            return True
        return False

    def set_stage(self, stage: str, now: float) -> None:
        if stage != self.stage:
            self.stage, self.stage_began = stage, now

    def start(self, tid: str, now: float) -> None:
        row = self.row(tid)
        row.began, row.state = now, "checking cache"
        self.set_stage("running", now)

    def done(self, tid: str, tally: str, now: float) -> None:
        row = self.row(tid)
        row.ended, row.state, row.tally = now, "done", tally

    def progress(self, row: Row) -> str:
        """``done/total`` cases of one target."""
        total = self.cases
        if total is None:
            return ""
        if row.state == "done":
            return f"{total}/{total}"
        return f"{total - row.todo}/{total}" if row.todo is not None else f"0/{total}"

    def remaining(self, row: Row, now: float) -> float | None:
        """Seconds left for a target at its last run's speed per case (before its cache
        lookup, as if no case were cached); None when unknown, or slower than last time."""
        if row.state == "done":
            return 0.0
        if row.per_case is None:
            return None
        if row.todo is None or row.ran is None:
            since = now - row.began if row.began is not None else 0.0
            left = row.per_case * (self.cases or 0) - since
        else:
            left = row.per_case * row.todo - (now - row.ran)
        return left if left > 0 else None

    def eta(self, now: float) -> float | None:
        """The whole run's: busy targets' time left, then each queued one in turn on the
        first of ``jobs`` slots to come free (the harness's pool), the last to finish."""
        busy = [r for r in self.rows.values() if r.state not in ("queued", "done")]
        queued = [r for r in self.rows.values() if r.state == "queued"]
        left = [self.remaining(r, now) for r in busy + queued]
        if not self.rows or any(x is None for x in left):
            return None
        slots = sorted([x for x in left[: len(busy)] if x is not None] + [0.0] * self.jobs)
        slots = slots[-self.jobs :] if len(slots) > self.jobs else slots
        for estimate in left[len(busy) :]:
            slots.sort()
            slots[0] += estimate or 0.0
        return max(slots)

    def measured(self) -> dict[str, float]:
        """Seconds per case each target took this run (targets that built and ran cases)."""
        out = {}
        for r in self.rows.values():
            if r.todo and r.ran is not None and r.ended is not None:
                out[r.tid] = (r.ended - r.ran) / r.todo
        return out

    # ------------------------------------------------------------------------ drawing

    def header(self, now: float) -> str:
        stage = self.stage
        if stage == "comparing":
            stage += f" ({duration(now - self.stage_began)})"
        parts = [f"keracheck: {stage}", duration(now - self.t0)]
        if self.cases is not None:
            parts.append(f"{self.cases} cases")
        if self.rows:
            done = sum(r.state == "done" for r in self.rows.values())
            parts.append(f"{done}/{len(self.rows)} targets done")
        eta = self.eta(now) if self.stage == "running" else None
        if eta is not None:
            parts.append(eta_text(eta))
        return " · ".join(parts)

    def row_text(self, row: Row, now: float) -> str:
        width = max((len(t) for t in self.rows), default=0)
        text = f"{row.tid:<{width}}  {self.progress(row):>9}  "
        if row.state == "done" and row.ended is not None:
            return text + f"{duration(row.ended - (row.began or row.ended)):>7}  {row.tally}"
        if row.state == "queued":
            return text + "queued"
        since = now - (row.began if row.began is not None else now)
        text += f"{duration(since):>7}  {row.state}"
        left = self.remaining(row, now)
        return text + (f", {eta_text(left)}" if left is not None else "")

    def busy(self, now: float) -> str:
        """What is still going on, for a plain line."""
        if self.stage == "collecting":
            return f"still collecting cases: {duration(now - self.stage_began)}"
        if self.stage == "comparing":
            return f"still comparing outputs: {duration(now - self.stage_began)}"
        running = []
        for r in self.rows.values():
            if r.state in ("checking cache", "building and running") and r.began is not None:
                left = self.remaining(r, now)
                eta = f", {eta_text(left)}" if left is not None else ""
                running.append(f"{r.tid} ({now - r.began:.0f} s{eta})")
        finished = sum(r.state == "done" for r in self.rows.values())
        s = "" if finished == 1 else "s"
        return f"still running: {', '.join(running) or 'nothing'}; {finished} target{s} finished"


def tally(results: Mapping[str, JobResult | str]) -> str:
    """``140 ok, 1 error``: a target's results by status."""
    counts: dict[str, int] = {}
    for r in results.values():
        status = "unsupported" if isinstance(r, str) else r.status
        counts[status] = counts.get(status, 0) + 1
    return ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) or "no cases"


def load_timings(path: Path) -> dict[str, float]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    table = data.get("secondsPerCase") if isinstance(data, dict) else None
    if not isinstance(table, dict):
        return {}
    return {str(k): float(v) for k, v in table.items() if isinstance(v, int | float) and v >= 0}


def save_timings(path: Path, measured: Mapping[str, float]) -> None:
    """Merge this run's seconds per case into the record (a read-only checkout loses ETAs)."""
    if not measured:
        return
    from kera.files import write_atomic

    table = load_timings(path) | dict(measured)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps({"schemaVersion": 1, "secondsPerCase": table}, indent=1))
    except OSError:
        pass


class Reporter:
    """Plain progress lines through ``write`` (one whole line per call), and a line saying
    what is busy whenever nothing was printed for ``every`` seconds.  A context manager: its
    ticker runs inside it, and on exit it records the timings when it has a ``timings`` path."""

    tick = 1.0  # how often the ticker looks (seconds)

    def __init__(
        self,
        write: Callable[[str], None],
        every: float = 10.0,
        timings: Path | None = None,
        clock: Callable[[], float] = time.monotonic,
        jobs: int = 1,
    ) -> None:
        self.write, self.every, self.timings, self.clock = write, every, timings, clock
        self.board = Board(load_timings(timings) if timings else {}, clock(), jobs)
        self.lock = threading.RLock()
        self.last = self.board.t0
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def __call__(self, msg: str) -> None:
        """A message for people (the harness's, the localiser's, the CLI's)."""
        with self.lock:
            self.board.read(msg, self.clock())
            self.line(msg)

    def line(self, msg: str) -> None:
        with self.lock:
            self.last = self.clock()
            self.write(f"[{self.last - self.board.t0:6.1f}s] {msg}")

    def __enter__(self) -> Reporter:
        if self.every > 0:
            self.thread = threading.Thread(
                target=self._beat, name="keracheck-progress", daemon=True
            )
            self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join()
        self.board.set_stage("finished", self.clock())
        if self.timings is not None and exc[0] is None:
            save_timings(self.timings, self.board.measured())

    def _beat(self) -> None:
        while not self.stop.wait(min(self.tick, self.every)):
            self.beat()

    def beat(self) -> None:
        with self.lock:
            now = self.clock()
            if now - self.last >= self.every:
                self.line(self.board.busy(now))

    # events from Phases
    def started(self, tid: str) -> None:
        with self.lock:
            self.board.start(tid, self.clock())

    def finished(self, tid: str, results: Mapping[str, JobResult | str]) -> None:
        with self.lock:
            now = self.clock()
            self.board.done(tid, tally(results), now)
            row = self.board.rows[tid]
            self.line(f"{tid}: finished in {now - (row.began or now):.1f} s ({row.tally})")

    def comparing(self) -> None:
        with self.lock:
            self.board.set_stage("comparing", self.clock())


# ANSI: move to the start of the line N up, clear the line, clear to the end of the screen
_UP, _CLEAR_LINE, _CLEAR_BELOW = "\x1b[{}F", "\x1b[2K", "\x1b[J"
_HIDE, _SHOW = "\x1b[?25l", "\x1b[?25h"
#: state -> (SGR colour, mark); the mark leads each target's row
_MARKS = {
    "queued": ("2", "·"),
    "checking cache": ("36", "…"),
    "building and running": ("33", "▸"),
    "done": ("32", "✓"),
}
_ASCII = {"·": ".", "…": "?", "▸": ">", "✓": "+"}


class Live(Reporter):
    """The board redrawn in place on a terminal ``stream``; messages scroll above it."""

    tick = 0.25

    def __init__(
        self,
        stream: TextIO,
        timings: Path | None = None,
        colour: bool = True,
        clock: Callable[[], float] = time.monotonic,
        jobs: int = 1,
    ) -> None:
        super().__init__(lambda text: None, 0.25, timings, clock, jobs)
        self.stream, self.colour = stream, colour
        self.unicode = (getattr(stream, "encoding", "") or "").lower().replace("-", "") == "utf8"
        self.drawn = 0

    def __call__(self, msg: str) -> None:
        with self.lock:
            if not self.board.read(msg, self.clock()):
                self.line(msg)
            self.draw()

    def line(self, msg: str) -> None:
        """A message above the board: clear the board, print it, draw the board again."""
        with self.lock:
            self.last = self.clock()
            self._emit(self._erase() + f"keracheck: {msg}\n")
            self.drawn = 0

    def beat(self) -> None:
        self.draw()

    def finished(self, tid: str, results: Mapping[str, JobResult | str]) -> None:
        with self.lock:
            self.board.done(tid, tally(results), self.clock())
            self.draw()

    def __enter__(self) -> Live:
        self._emit(_HIDE)
        super().__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        with self.lock:
            self.draw()
            self._emit(_SHOW)

    def draw(self) -> None:
        with self.lock:
            now = self.clock()
            width = self._width()
            header = self.board.header(now)
            lines = [(header if self.unicode else header.replace("·", "-"))[: width - 1]]
            for row in self.board.rows.values():
                colour, mark = _MARKS[row.state]
                text = f"  {self._mark(mark)} {self.board.row_text(row, now)}"[: width - 1]
                lines.append(self._paint(text, colour) if self.colour else text)
            body = "".join(f"{_CLEAR_LINE}{line}\n" for line in lines)
            self._emit(self._erase(clear=False) + body + _CLEAR_BELOW)
            self.drawn = len(lines)

    def _mark(self, mark: str) -> str:
        return mark if self.unicode else _ASCII[mark]

    @staticmethod
    def _paint(text: str, colour: str) -> str:
        """Colour the mark (the row's third character) by the row's state."""
        if len(text) < 3:  # a terminal too narrow for the mark
            return text
        return f"{text[:2]}\x1b[{colour}m{text[2]}\x1b[0m{text[3:]}"

    def _erase(self, clear: bool = True) -> str:
        up = _UP.format(self.drawn) if self.drawn else ""
        return up + (_CLEAR_BELOW if clear else "")

    def _width(self) -> int:
        try:
            return os.get_terminal_size(self.stream.fileno()).columns or 80
        except (OSError, ValueError, AttributeError):
            return 80

    def _emit(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            pass  # a closed terminal costs the display, never the run


def reporter(
    stream: TextIO, every: float = 10.0, timings: Path | None = TIMINGS, jobs: int = 1
) -> Reporter:
    """The progress display for ``stream``: :class:`Live` on a terminal (unless ``TERM`` is
    ``dumb``), plain lines otherwise; colours unless ``NO_COLOR`` is set.  ``jobs``: targets
    that run side by side."""
    tty = hasattr(stream, "isatty") and stream.isatty()
    if tty and os.environ.get("TERM") != "dumb":
        return Live(stream, timings, colour=not os.environ.get("NO_COLOR"), jobs=jobs)

    def write(text: str) -> None:
        stream.write(f"keracheck: {text}\n")
        stream.flush()

    return Reporter(write, every, timings, jobs=jobs)


class Phases:
    """What the harness drives while its targets run: ``start``/``done`` per target and
    ``say`` for a target's own messages.  ``report`` is a :class:`Reporter` (the CLI's, which
    owns its lifetime), a plain callable (lines, with a :class:`Reporter` made here that beats
    every ``every`` seconds while targets run), or None."""

    def __init__(self, report: Callable[[str], None] | None, every: float) -> None:
        self.own = report is not None and not isinstance(report, Reporter)
        self.reporter: Reporter | None
        if isinstance(report, Reporter) or report is None:
            self.reporter = report
        else:
            self.reporter = Reporter(report, every)

    def say(self, msg: str) -> None:
        if self.reporter is not None:
            self.reporter(msg)

    def __enter__(self) -> Phases:
        if self.own and self.reporter is not None:
            self.reporter.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.reporter is not None:
            self.reporter.comparing()
            if self.own:
                self.reporter.__exit__(*exc)

    def start(self, tid: str) -> None:
        if self.reporter is not None:
            self.reporter.started(tid)

    def done(self, tid: str, results: Mapping[str, JobResult | str]) -> None:
        if self.reporter is not None:
            self.reporter.finished(tid, results)
