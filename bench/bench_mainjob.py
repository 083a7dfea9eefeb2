"""The main job, cold and warm: ``keracheck run corpora/`` with its wall time split per target.

Prints figures, asserts nothing.  Run from the repository root::

    .venv/bin/python bench/bench_mainjob.py [--paths corpora/] [--targets ref,verilog,...]
                                            [--phases cold,builds-warm,warm] [--inputs N]

Each phase runs ``.venv/bin/keracheck run PATHS`` as a subprocess, as a user would, with every
cache of this project pointed at a fresh temporary folder instead of the user's (nothing of
the user's is read, written or deleted):

* ``KERACHECK_CACHE``: the result cache (``results/``), gcc's shared objects (``c/``), the
  Verilator builds (``verilator/``), cocotb's Icarus images (``cocotb/``) and the availability
  probes (``probes/``);
* ``XDG_CACHE_HOME``: where those would go without ``KERACHECK_CACHE``;
* ``CCACHE_DIR``: ccache's store, in case a compiler of the run goes through ccache.

Phases (``--phases``, default ``cold,warm``), in this order, sharing that folder:

* ``cold``         every cache empty: the main job on a fresh CI machine, the figure issue 20
                   holds to 90 s on 2 cores.  It is ``keracheck run PATHS`` in an empty cache
                   folder, which reads nothing from the (empty) result cache, as
                   ``--no-cache`` would, and fills it for ``warm``;
* ``builds-warm``  ``--no-cache`` with the toolchain caches as ``cold`` left them: every case
                   simulated again, nothing built;
* ``warm``         everything cached: the repeated run (held to 10 s).

Per phase: the total wall time and CPU time (user + system of every process of the run, as
reaped: the figure to compare when other jobs load the machine), the set-up before the first target starts (collecting and
compiling the cases, the availability probes: a probe builds and runs a small program per
target once per machine), each target's wall time from its "started" to its "finished"
progress line (targets run ``--jobs`` at a time, CPU count by default, so they overlap and
their sum exceeds the total), the time after the last one (comparison, the document), and
the run's verdicts: every case must still agree.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

PHASES = ("cold", "builds-warm", "warm")
PR_SET_CHILD_SUBREAPER = 36
STARTED = re.compile(r"(?P<tid>[\w:.-]+): started\b")
FINISHED = re.compile(r"(?P<tid>[\w:.-]+): finished in (?P<s>[\d.]+) s")


@dataclass
class Phase:
    """One run: wall time, per-target start/finish (seconds after launch), the summary."""

    name: str
    wall: float = 0.0
    cpu: float = 0.0  # user + system seconds of the run's processes (RUSAGE_CHILDREN)
    started: dict[str, float] = field(default_factory=dict)
    finished: dict[str, float] = field(default_factory=dict)
    reported: dict[str, float] = field(default_factory=dict)  # "finished in X s"
    summary: dict[str, object] = field(default_factory=dict)
    exit_code: int = 0
    tail: list[str] = field(default_factory=list)


def cache_env(root: Path) -> dict[str, str]:
    """The environment of a run whose caches all live under ``root``."""
    env = dict(os.environ)
    for var, sub in (("KERACHECK_CACHE", "keracheck"), ("XDG_CACHE_HOME", "xdg")):
        env[var] = str(root / sub)
    env["CCACHE_DIR"] = str(root / "ccache")
    env.pop("CI", None)
    return env


def keracheck_argv(args: argparse.Namespace, phase: str, out: Path) -> list[str]:
    exe = Path(sys.executable).with_name("keracheck")
    argv = [str(exe), "run", *args.paths, "--format", "json", "--output", str(out)]
    argv += ["--targets", args.targets] if args.targets else []
    argv += ["--inputs", str(args.inputs)] if args.inputs else []
    return argv + (["--no-cache"] if phase == "builds-warm" else [])


def run_phase(args: argparse.Namespace, phase: str, root: Path) -> Phase:
    """Run one phase, timestamping the targets' progress lines as they arrive."""
    result = Phase(phase)
    out = root / f"{phase}.json"
    cpu0 = _children_cpu()
    t0 = time.monotonic()
    proc = subprocess.Popen(
        keracheck_argv(args, phase, out),
        env=cache_env(root),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None

    def watch() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            now = time.monotonic() - t0
            result.tail = [*result.tail[-19:], line.rstrip()]
            if m := STARTED.search(line):
                result.started.setdefault(m["tid"], now)
            if m := FINISHED.search(line):
                result.finished[m["tid"]] = now
                result.reported[m["tid"]] = float(m["s"])
            if args.verbose:
                print(f"    | {line.rstrip()}", flush=True)

    reader = threading.Thread(target=watch, daemon=True)
    reader.start()
    result.exit_code = proc.wait()
    reader.join()
    result.wall = time.monotonic() - t0
    _reap_orphans()
    result.cpu = _children_cpu() - cpu0
    if out.is_file():
        result.summary = json.loads(out.read_text()).get("summary", {})
    return result


def _children_cpu() -> float:
    """User + system CPU seconds of every descendant reaped so far: the run's own figure when
    other jobs share the machine (its wall time then depends on their load)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _adopt_orphans() -> None:
    """Become the child subreaper (Linux ``prctl(PR_SET_CHILD_SUBREAPER)``): a process of the
    run that outlives its parent (a worker pool's server) is then reparented to this bench,
    which reaps it (:func:`_reap_orphans`), so its CPU time is counted too."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _reap_orphans(limit: float = 30.0) -> None:
    """Wait (up to ``limit`` seconds) for every adopted process of the run to exit."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.05)


def report(p: Phase) -> None:
    s = p.summary
    verdicts = ", ".join(f"{s.get(k, '?')} {k}" for k in ("agree", "diverge", "error", "skipped"))
    print(
        f"{p.name}: {p.wall:.1f} s wall, {p.cpu:.1f} s CPU, exit {p.exit_code}; "
        f"{s.get('cases', '?')} cases: {verdicts}; load average after it "
        + " ".join(f"{x:.2f}" for x in os.getloadavg())
    )
    if p.started:
        first = min(p.started.values())
        last = max(p.finished.values(), default=first)
        print(f"  {'set-up (collect, compile, probes)':36s} {first:8.1f} s")
        order = sorted(p.started, key=lambda t: p.finished.get(t, float("inf")))
        for tid in order:
            took = p.reported.get(tid)
            began = p.started[tid]
            span = f"{took:8.1f} s" if took is not None else "   (none)"
            print(
                f"  {tid:36s} {span}   [{began:6.1f} -> {p.finished.get(tid, float('nan')):6.1f}]"
            )
        print(f"  {'after the last target (compare, write)':36s} {p.wall - last:8.1f} s")
    if p.exit_code not in (0, 1) or not p.summary:
        print("  last lines of its stderr:")
        for line in p.tail:
            print(f"    {line}")


def machine() -> str:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"Python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs"
        f" ({cpu or 'unknown CPU'}), load average {load}; ccache "
        f"{'on PATH' if shutil.which('ccache') else 'not on PATH'}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--paths", nargs="+", default=["corpora/"], help="what to run (default corpora/)"
    )
    ap.add_argument("--targets", help="comma-separated target ids (default: every available one)")
    ap.add_argument(
        "--inputs", type=int, help="generated vectors per case (default keracheck's, 64)"
    )
    ap.add_argument(
        "--phases",
        default="cold,warm",
        help=f"comma-separated, run in this order: {','.join(PHASES)} (default cold,warm)",
    )
    ap.add_argument("--keep", action="store_true", help="keep the cache folder and print its path")
    ap.add_argument("-v", "--verbose", action="store_true", help="echo keracheck's progress lines")
    args = ap.parse_args()
    phases = [p for p in PHASES if p in args.phases.split(",")]
    if unknown := set(args.phases.split(",")) - set(PHASES):
        ap.error(
            f"unknown phase(s): {', '.join(sorted(unknown))} (choose from {', '.join(PHASES)})"
        )
    if phases and phases[0] != "cold":
        ap.error("every phase needs cold before it (it fills the caches the others reuse)")
    _adopt_orphans()
    print(machine())
    print(f"keracheck run {' '.join(args.paths)} --targets {args.targets or '(every available)'}")
    root = Path(tempfile.mkdtemp(prefix="kera-mainjob-"))
    try:
        for phase in phases:
            report(run_phase(args, phase, root))
    finally:
        if args.keep:
            print(f"caches kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
