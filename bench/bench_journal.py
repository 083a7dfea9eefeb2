"""What the run journal (keracheck/journal.py) costs: ``keracheck run`` with the journal on and
off, interleaved, on the warm main job (every result from the result cache: the journal is
opened, locked, finds nothing, and is deleted) and with the result cache off (every result
computed and journaled: one write and one fsync per target batch); then the journal alone:
records/s appended (with fsync) and read back.  Prints medians (wall time, and keracheck's own
CPU time) and the overhead; asserts nothing.

    .venv/bin/python bench/bench_journal.py [--targets ref,cpu,wasm] [--rounds 5] [PATH ...]
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from keracheck import harness
from keracheck import journal as jr
from keracheck.options import Options
from keracheck.worker import JobResult


def cpu_seconds() -> float:
    """CPU time of keracheck's own process, where the journal's work happens (workers are
    the forkserver's children, not this process's, and do the same work either way)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    w0, c0 = time.perf_counter(), cpu_seconds()
    fn()
    return time.perf_counter() - w0, cpu_seconds() - c0


def options(targets: list[str] | None, cache: str | None, journal: str | None) -> Options:
    return Options(targets=targets, cache_dir=cache, journal_dir=journal, jobs=os.cpu_count() or 2)


def compare(
    name: str, paths: list[str], targets: list[str] | None, cache: str | None, rounds: int
) -> None:
    """Interleaved runs with the journal off and on; medians of wall and CPU seconds."""
    with tempfile.TemporaryDirectory(prefix="bench-journal-") as jdir:
        runs: dict[str, list[tuple[float, float]]] = {"off": [], "on": []}
        for _ in range(rounds):
            for mode in ("off", "on"):
                opts = options(targets, cache, jdir if mode == "on" else None)
                runs[mode].append(timed(functools.partial(harness.run, paths, opts)))
        wall = {m: statistics.median(w for w, _ in r) for m, r in runs.items()}
        cpu = {m: statistics.median(c for _, c in r) for m, r in runs.items()}
    print(
        f"{name:<34} off {wall['off']:7.2f} s wall {cpu['off']:7.2f} s CPU | "
        f"on {wall['on']:7.2f} s wall {cpu['on']:7.2f} s CPU | overhead "
        f"{100 * (wall['on'] / wall['off'] - 1):+5.1f}% wall {100 * (cpu['on'] / cpu['off'] - 1):+5.1f}% CPU"
    )


def journal_alone(records: int, batch: int) -> None:
    """Append ``records`` corpus-sized results in batches of ``batch`` (write + fsync each),
    then open the journal again (read, authenticate, decode every record)."""
    rng = np.random.default_rng(0)
    outs = [rng.standard_normal((64, 8)).astype(np.float32) for _ in range(3)]
    res = JobResult("ok", outputs=[outs], loaded="0" * 64, seconds=0.01)
    with tempfile.TemporaryDirectory(prefix="bench-journal-") as root:
        j = jr.open_journal(root, "bench")
        assert isinstance(j, jr.Journal)
        items = [(f"{k:064x}", res) for k in range(records)]
        t0 = time.perf_counter()
        for k in range(0, records, batch):
            j.append(items[k : k + batch])
        appended = time.perf_counter() - t0
        j.close(finished=False)
        size = (Path(root) / "bench.jnl").stat().st_size
        t0 = time.perf_counter()
        again = jr.open_journal(root, "bench")
        loaded = time.perf_counter() - t0
        assert isinstance(again, jr.Journal) and again.found == records
        again.close(finished=True)
    print(
        f"journal alone: {records} records ({size / 1e6:.1f} MB, batches of {batch}): "
        f"append + fsync {records / appended:,.0f} records/s, resume (read + verify + decode) "
        f"{records / loaded:,.0f} records/s"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--targets", default="ref,cpu,wasm", help="comma list; 'all' for every one")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--skip", default="", help="comma list of: warm, computed, alone")
    ap.add_argument("paths", nargs="*", default=["corpora"])
    args = ap.parse_args()
    targets = None if args.targets == "all" else args.targets.split(",")
    skip = set(args.skip.split(","))
    print(
        f"python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}, "
        f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; targets {args.targets}, "
        f"{args.rounds} rounds"
    )
    cache = harness.default_cache_dir()
    if "warm" not in skip:
        harness.run(args.paths, options(targets, cache, None))  # warm the result cache
        compare("warm main job (result cache on)", args.paths, targets, cache, args.rounds)
    if "computed" not in skip:
        compare("every result computed (cache off)", args.paths, targets, None, args.rounds)
    if "alone" not in skip:
        journal_alone(2000, 150)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
