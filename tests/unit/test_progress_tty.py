"""Progress of ``keracheck run`` (issue 22): a live board redrawn in place when stderr is a
terminal (tested through a pseudo-terminal), plain lines when it is not, never silent for long.

The board's logic runs on a fake clock; the end-to-end tests run the CLI in a child process
with stderr on a pty or a pipe and a target that takes a moment."""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from keracheck import harness, progress
from keracheck.cli import main
from keracheck.collect import collect
from keracheck.options import Options
from keracheck.progress import Board, Live, Reporter, duration
from keracheck.worker import JobResult

SLOW = '''
import time
from kera.interp import interpret
from kera.ops import Op

class Slow:
    """The reference interpreter, a moment slower: the board gets redrawn while it runs."""
    api_version = 1
    name = "slow"
    def available(self): return None
    def supported_ops(self): return frozenset(o.value for o in Op)
    def run(self, fn, inputs):
        time.sleep(float(__import__("os").environ.get("SLOW_SECONDS", "0.6")))
        return interpret(fn, inputs)
'''
SOURCE = "export fn f(x: f32[4]) -> f32[4] { x + x }\nexport fn g(x: i32[4]) -> i32[4] { x * x }\n"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


# ------------------------------------------------------------------------------ the board


def test_board_reads_the_plan_and_each_cache_lookup() -> None:
    board = Board({"verilog": 2.0}, t0=0.0, jobs=1)
    assert board.read("12 cases on 2 targets: ref, verilog", 1.0)
    assert board.stage == "running" and list(board.rows) == ["ref", "verilog"]
    board.start("ref", 1.0)
    assert board.read("ref: started, 12 cases to build and run, 0 from the result cache", 1.5)
    board.done("ref", "12 ok", 3.0)
    board.start("verilog", 3.0)
    assert board.read("verilog: started, 4 cases to build and run, 8 from the result cache", 3.0)
    assert not board.read("localising the first diverging node: 1 divergence", 3.0)
    assert board.progress(board.rows["ref"]) == "12/12"
    assert board.progress(board.rows["verilog"]) == "8/12"  # cached ones are done
    assert board.remaining(board.rows["verilog"], 4.0) == pytest.approx(7.0)  # 4 x 2 s - 1 s
    assert "ETA ~7.0s" in board.row_text(board.rows["verilog"], 4.0)
    assert board.remaining(board.rows["verilog"], 20.0) is None  # slower than last time
    assert board.measured() == {"ref": pytest.approx(1.5 / 12)}


def test_eta_schedules_queued_targets_on_free_slots() -> None:
    board = Board({"a": 1.0, "b": 1.0, "c": 1.0}, t0=0.0, jobs=2)
    board.read("10 cases on 3 targets: a, b, c", 0.0)
    board.start("a", 0.0)
    board.start("b", 0.0)
    board.read("a: started, 10 cases to build and run", 0.0)
    board.read("b: started, 2 cases to build and run", 0.0)
    assert board.eta(0.0) == pytest.approx(12.0)  # c starts when b frees its slot at 2 s
    assert "ETA ~12.0s" in board.header(0.0)
    assert Board({}, 0.0).eta(0.0) is None  # nothing known, nothing promised


def test_durations_read_well() -> None:
    assert [duration(s) for s in (4.24, 65, 3725)] == ["4.2s", "1m05s", "1h02m"]


def test_plain_lines_beat_when_nothing_was_said(tmp_path: Path) -> None:
    lines: list[str] = []
    clock = Clock()
    shown = Reporter(lines.append, every=10.0, clock=clock)
    shown.beat()
    assert lines == []  # said nothing yet, but nothing has been quiet for 10 s either
    clock.now += 10.0
    shown.beat()
    assert lines[-1].endswith("still collecting cases: 10.0s")
    shown("3 cases on 1 targets: verilog")
    shown.started("verilog")
    shown("verilog: started, 3 cases to build and run")
    clock.now += 9.0
    shown.beat()
    assert lines[-1].endswith("verilog: started, 3 cases to build and run")  # 9 s: quiet
    clock.now += 1.0
    shown.beat()
    assert lines[-1].endswith("still running: verilog (10 s); 0 targets finished")
    shown.finished("verilog", {"a": JobResult("ok"), "b": JobResult("error"), "c": "unsupported"})
    assert lines[-1].endswith("verilog: finished in 10.0 s (1 error, 1 ok, 1 unsupported)")
    shown.comparing()
    clock.now += 10.0
    shown.beat()
    assert lines[-1].endswith("still comparing outputs: 10.0s")


def test_live_board_redraws_in_place() -> None:
    stream = io.StringIO()
    clock = Clock()
    live = Live(stream, colour=True, clock=clock)
    live("2 cases on 2 targets: ref, cpu")  # the plan: drawn, not printed
    live.started("ref")
    live.draw()
    live("a message from the harness")  # printed above the board
    live.finished("ref", {"a": JobResult("ok"), "b": JobResult("ok")})
    out = stream.getvalue()
    assert "\x1b[3F" in out  # back to the top of the three-line board
    assert "keracheck: a message from the harness\n" in ANSI.sub("", out)
    last = ANSI.sub("", out).splitlines()[-3:]
    assert last[0].startswith("keracheck: running") and "1/2 targets done" in last[0]
    assert re.search(r"ref +2/2 +\d+\.\ds +2 ok", last[1]) and "queued" in last[2]
    assert "\x1b[32m" in out  # the done mark is green
    assert "2 cases on 2 targets" not in out


def test_the_harness_messages_are_the_ones_the_board_reads(tmp_path: Path) -> None:
    src = tmp_path / "c.kera"
    src.write_text(SOURCE)
    lines: list[str] = []
    shown = Reporter(lines.append, every=0)
    opts = Options(targets=["ref"], cache_dir=None, progress=shown, localise=False)
    harness.run_cases(collect([str(src)], opts), opts)
    assert shown.board.cases == 2 and shown.board.rows["ref"].todo == 2, lines
    assert shown.board.rows["ref"].state == "done" and shown.board.stage == "comparing"


def test_a_long_phase_is_never_silent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A target busy for longer than the beat interval gets 'still running' lines."""
    monkeypatch.setenv("SLOW_SECONDS", "1.5")
    (tmp_path / "slow.py").write_text(SLOW)
    src = tmp_path / "c.kera"
    src.write_text(SOURCE)
    lines: list[str] = []
    shown = Reporter(lines.append, every=0.3)
    shown.tick = 0.1
    opts = Options(targets=["slow"], plugins={"slow": f"{tmp_path}/slow.py:Slow"}, cache_dir=None)
    opts.progress, opts.localise = shown, False
    with shown:
        harness.run_cases(collect([str(src)], opts), opts)
    assert any("still running: slow (" in line for line in lines), lines


# ------------------------------------------------------------------------------ end to end


def _run(tmp_path: Path, env: dict[str, str], tty: bool, *extra: str) -> str:
    """stderr of ``keracheck run`` on a pty (100 columns) or a pipe."""
    (tmp_path / "slow.py").write_text(SLOW)
    (tmp_path / "c.kera").write_text(SOURCE)
    argv = [sys.executable, "-m", "keracheck.cli", "run", "c.kera", "--targets", "ref"]
    argv += ["--backend-plugin", "slow.py:Slow", "--no-cache", "--no-localise", *extra]
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "CI", "TERM")} | env
    if not tty:
        proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True)
        return proc.stderr
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    child = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        try:
            chunk = os.read(master, 65536) if ready else b""
        except OSError:  # EIO: the child closed the terminal
            chunk = b""
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    assert child.wait(60) == 0
    return b"".join(chunks).decode()


def test_terminal_gets_a_live_board(tmp_path: Path) -> None:
    (tmp_path / ".keracheck").mkdir()
    (tmp_path / ".keracheck" / "timings.json").write_text(
        json.dumps({"secondsPerCase": {"slow": 5.0}})
    )
    err = _run(tmp_path, {"TERM": "xterm-256color"}, tty=True)
    assert err.startswith("\x1b[?25l") and "\x1b[?25h" in err  # cursor hidden, then restored
    assert re.search(r"\x1b\[\d+F", err)  # redrawn in place
    assert "\x1b[32m" in err  # coloured marks
    plain = ANSI.sub("", err)
    assert "building and running" in plain and "ETA ~" in plain  # from the recorded timings
    assert re.search(r"keracheck: finished · [0-9.]+s · 2 cases · 2/2 targets done", plain)
    assert re.search(r"slow +2/2 +[0-9.]+s +2 ok", plain)
    timings = json.loads((tmp_path / ".keracheck" / "timings.json").read_text())
    assert 0 < timings["secondsPerCase"]["slow"] < 5.0  # this run's speed replaced the guess
    assert "2 cases: 2 agree" in plain


class Tty(io.StringIO):
    """A stderr that says it is a terminal (the CLI run in this process)."""

    encoding = "utf-8"

    def isatty(self) -> bool:
        return True


def _in_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *extra: str) -> str:
    """stderr of ``keracheck run`` in this process, with a stderr that is a 'terminal'."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SLOW_SECONDS", "0.3")
    (tmp_path / "slow.py").write_text(SLOW)
    (tmp_path / "c.kera").write_text(SOURCE)
    err = Tty()
    monkeypatch.setattr(sys, "stderr", err)
    argv = ["run", "c.kera", "--targets", "ref", "--backend-plugin", "slow.py:Slow"]
    assert main([*argv, "--no-cache", "--no-localise", *extra]) == 0
    return err.getvalue()


def test_no_color_keeps_the_board_without_colours(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setenv("NO_COLOR", "1")
    err = _in_process(tmp_path, monkeypatch)
    assert "\x1b[?25l" in err and not re.search(r"\x1b\[3\dm", err)
    assert re.search(r"slow +2/2 +[0-9.]+s +2 ok", ANSI.sub("", err))


@pytest.mark.parametrize("dumb", [True, False], ids=["dumb-terminal", "pipe"])
def test_plain_lines_elsewhere(dumb: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if dumb:
        monkeypatch.setenv("TERM", "dumb")
        err = _in_process(tmp_path, monkeypatch)
    else:
        err = _run(tmp_path, {}, tty=False)
    assert "\x1b[" not in err
    assert re.search(r"keracheck: \[ +[0-9.]+s\] 2 cases on 2 targets: ref, slow", err)
    assert re.search(r"keracheck: \[ +[0-9.]+s\] slow: finished in [0-9.]+ s \(2 ok\)", err)


def test_quiet_prints_no_progress(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "xterm")
    err = _in_process(tmp_path, monkeypatch, "-q")
    assert "\x1b[?25l" not in err and "finished in" not in err and "2 cases: 2 agree" in err


def test_reporter_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TERM", raising=False)
    assert type(progress.reporter(Tty(), timings=None)) is Live
    assert type(progress.reporter(io.StringIO(), timings=None)) is Reporter
    monkeypatch.setenv("TERM", "dumb")
    assert type(progress.reporter(Tty(), timings=None)) is Reporter
