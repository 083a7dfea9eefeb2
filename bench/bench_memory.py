"""Peak memory of keracheck (issue 20, aim 5): the main job and a fuzz campaign, sampled over
time.

    .venv/bin/python bench/bench_memory.py [--phases main,fuzz] [--minutes 10] [--every 10]

1. ``main``: ``keracheck run PATHS --no-cache`` (default ``corpora/``, the software targets
   ``ref,cpu,cpu-aarch64,cpu-riscv64,wasm,wasm-simd,wasm-node,ptx-emu``; the Verilog targets
   are left out: they are measured by ``bench_verilog.py``) as a subprocess: peak RSS of
   keracheck's own process and of its whole process tree (workers, gcc, qemu, node ...).
2. ``fuzz``: ``keracheck fuzz --targets ref,cpu,wasm --budget MINUTES*60`` as a subprocess
   with a fresh build cache, RSS of keracheck's process and of its process tree every
   ``--every`` seconds; the growth of keracheck's RSS from the first sample after warm-up
   (one minute, or a fifth of the run when shorter) to the end, and the bound it is held to:
   the oracle's caches full (each is bounded in bytes: ``keracheck.fuzz.oracle.Bounded``)
   plus ``SLACK_MIB``.  A long campaign's RSS rises while the caches fill and then stays
   flat.

RSS is sampled from ``/proc`` (``VmRSS`` of each process whose parent chain leads to the
command), so the tree figure is the sum at one instant (shared pages counted once per
process) and the peak is the largest sum seen.  Prints figures; asserts nothing.  ``bench_scale.py`` uses
:class:`Sampler` too.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOFTWARE = "ref,cpu,cpu-aarch64,cpu-riscv64,wasm,wasm-simd,wasm-node,ptx-emu"
#: what keracheck's own RSS may grow by after warm-up in a fuzz campaign, besides the
#: oracle's caches (``keracheck.fuzz.oracle.MAX_BYTES`` for the generated cases, for the
#: results of each target and for the verdicts): Hypothesis's data of one discovery run
#: (``engine.RUN_EXAMPLES`` examples), the interning table, the allocator's slack
SLACK_MIB = 64
MIB = 1024 * 1024


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process now."""
    out: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # the command name is in parentheses and may hold spaces: fields after the last ')'
        out[int(entry)] = int(stat.rpartition(")")[2].split()[1])
    return out


def tree(root: int) -> list[int]:
    """root and every process descended from it."""
    children: dict[int, list[int]] = {}
    for pid, ppid in _parents().items():
        children.setdefault(ppid, []).append(pid)
    out, stack = [], [root]
    while stack:
        pid = stack.pop()
        out.append(pid)
        stack.extend(children.get(pid, []))
    return out


@dataclass
class Sample:
    seconds: float
    main_kib: int  # the root process
    tree_kib: int  # the root and its descendants, summed


@dataclass
class Sampler:
    """Samples the RSS of a process and its tree every ``every`` seconds in a thread: the
    time series and the peaks."""

    pid: int
    every: float = 0.5
    samples: list[Sample] = field(default_factory=list)
    peak_main: int = 0
    peak_tree: int = 0

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.every)

    def sample(self) -> Sample:
        main = _rss_kib(self.pid)
        total = sum(_rss_kib(p) for p in tree(self.pid))
        s = Sample(time.monotonic() - self._t0, main, total)
        self.peak_main = max(self.peak_main, main)
        self.peak_tree = max(self.peak_tree, total)
        self.samples.append(s)
        return s

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def header() -> None:
    load = os.getloadavg()
    print(
        f"python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} cores, "
        f"load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )


def run_sampled(argv: list[str], env: dict[str, str], every: float) -> tuple[int, Sampler, str]:
    """Run argv (stdout kept, stderr dropped) sampling its tree: (exit code, sampler, stdout)."""
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
        sampler = Sampler(proc.pid, every)
        try:
            code = proc.wait()
        finally:
            sampler.stop()
        out.seek(0)
        return code, sampler, out.read().decode(errors="replace")


def keracheck(*args: str) -> list[str]:
    return [sys.executable, "-m", "keracheck.cli", *args]


def bench_main(paths: list[str], targets: str, every: float) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        env = {**os.environ, "KERACHECK_CACHE": str(Path(tmp) / "cache"), "NO_COLOR": "1"}
        argv = keracheck("run", *paths, "--targets", targets, "--no-cache", "-q")
        argv += ["--format", "json", "--output", str(Path(tmp) / "run.json")]
        t0 = time.monotonic()
        code, s, _ = run_sampled(argv, env, every)
        wall = time.monotonic() - t0
    print(
        f"main job  exit {code}, {wall:.1f} s wall, {len(s.samples)} samples: keracheck peak "
        f"{s.peak_main / 1024:.0f} MiB, tree peak {s.peak_tree / 1024:.0f} MiB"
    )


def growth(samples: list[Sample], warm: float) -> tuple[float, float]:
    """keracheck's RSS growth after ``warm`` seconds: (MiB in all, MiB per minute)."""
    after = [s for s in samples if s.seconds >= warm]
    if len(after) < 2:
        return 0.0, 0.0
    first, last = after[0], after[-1]
    mib = (last.main_kib - first.main_kib) / 1024
    minutes = (last.seconds - first.seconds) / 60
    return mib, mib / minutes if minutes > 0 else 0.0


def bench_fuzz(minutes: float, targets: str, every: float) -> None:
    budget = minutes * 60
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        env = {**os.environ, "KERACHECK_CACHE": str(Path(tmp) / "cache"), "NO_COLOR": "1"}
        argv = keracheck("fuzz", "--targets", targets, "--budget", f"{budget:g}")
        argv += ["--format", "json", "--out", str(Path(tmp) / "out")]
        code, s, out = run_sampled(argv, env, min(1.0, every))
    print(f"fuzz      {minutes:g} min against {targets}, exit {code}")
    print(f"  {'s':>6} {'keracheck MiB':>14} {'tree MiB':>9}")
    shown = -every
    for x in s.samples:  # sampled every second for the peaks, printed every ``every``
        if x.seconds - shown >= every or x is s.samples[-1]:
            shown = x.seconds
            print(f"  {x.seconds:6.0f} {x.main_kib / 1024:14.1f} {x.tree_kib / 1024:9.1f}")
    try:
        stats = json.loads(out)["stats"]
        print(
            f"  {stats['graphs']} graphs ({stats['uniqueGraphs']} distinct), "
            f"{stats['graphsPerSecond']} graphs/s, {len(json.loads(out)['signatures'])} signatures"
        )
    except (ValueError, KeyError):
        print("  (no JSON document on stdout)")
    warm = min(60.0, budget / 5)
    mib, rate = growth(s.samples, warm)
    bound = growth_bound(targets)
    verdict = "within" if mib <= bound else "OVER"
    print(
        f"  peak keracheck {s.peak_main / 1024:.0f} MiB, tree {s.peak_tree / 1024:.0f} MiB; "
        f"growth after {warm:.0f} s: {mib:+.1f} MiB ({rate:+.2f} MiB/min), {verdict} the bound "
        f"of {bound:.0f} MiB (the oracle's caches full, + {SLACK_MIB} MiB)"
    )


def growth_bound(targets: str) -> float:
    """MiB keracheck's RSS may grow by after warm-up: every cache of the oracle full (cases,
    verdicts, one result table per target), plus :data:`SLACK_MIB`."""
    from keracheck.fuzz import oracle

    tables = 2 + len(set(targets.split(",")) | {"ref"})
    return tables * oracle.MAX_BYTES / MIB + SLACK_MIB


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--phases", default="main,fuzz", help="main, fuzz or both")
    p.add_argument("--paths", nargs="*", default=["corpora"], help="the main job's paths")
    p.add_argument("--targets", default=SOFTWARE, help="the main job's targets")
    p.add_argument("--fuzz-targets", default="ref,cpu,wasm")
    p.add_argument("--minutes", type=float, default=10.0, help="length of the fuzz campaign")
    p.add_argument("--every", type=float, default=10.0, help="seconds between fuzz samples")
    args = p.parse_args()
    phases = set(args.phases.split(","))
    header()
    if "main" in phases:
        bench_main(args.paths, args.targets, 0.25)
    if "fuzz" in phases:
        bench_fuzz(args.minutes, args.fuzz_targets, args.every)


if __name__ == "__main__":
    main()
