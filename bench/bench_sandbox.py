"""What the sandbox costs (docs/security.md): worker start-up with and without it, and the warm
main job per target with and without it.  Prints figures and ratios; asserts nothing.

    .venv/bin/python bench/bench_sandbox.py [--targets ref,cpu,wasm,ptx-emu] [--repeat 5]
                                            [--skip startup,main]

* **start-up**: one batch of the probe case on ``ref`` through ``keracheck.worker.run_isolated``
  in this process: *cold* is the first batch (sandbox off: the forkserver starts; on: bubblewrap
  and the server's Python start), *warm* every later one (a fork of a warm process either way),
  and a plugin host start (load + ``available()`` + ``supported_ops()``), median of --repeat.
* **main job**: ``keracheck run corpora/ --targets T --no-cache -q`` as a fresh process per
  run, build caches warm (a warm-up run first), ``--sandbox on`` and ``off`` interleaved; best
  and median wall time of --repeat each, and on/off of the medians.  Wall time, because the
  sandbox's processes are not children keracheck waits for (their CPU time is not in its
  rusage); run it on an idle machine.  ``all (result cache warm)`` is the main job as a user
  reruns it: every result cached, no worker runs.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
KERACHECK = [sys.executable, "-m", "keracheck.cli"]


def header() -> None:
    from keracheck.sandbox import bwrap

    print(
        f"python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}, "
        f"{os.cpu_count()} CPUs, {bwrap.version()}, load {os.getloadavg()[0]:.1f}"
    )


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


# ------------------------------------------------------------------------------ start-up


def startup(repeat: int) -> None:
    from kera import keg
    from kera.ir import Graph
    from keracheck import probe, sandbox
    from keracheck.plugin_host import contained
    from keracheck.sandbox import launch
    from keracheck.worker import Job, run_isolated

    fn, inputs = probe.probe_case()
    job = Job("probe", keg.dumps(Graph([fn])), fn.name, inputs)
    spec = "keracheck.targets.ref:RefBackend"
    plugin = f"{ROOT / 'tests/unit/plugins/fake_targets.py'}:Clone"
    print(f"{'worker start-up (ms)':<34} {'sandbox off':>12} {'sandbox on':>12} {'on/off':>8}")
    rows: dict[str, dict[str, float]] = {}
    for mode in ("off", "on"):
        sandbox.configure(mode)
        launch.close_all()
        cold = timed(lambda: run_isolated(spec, [job], 1, 60.0))
        warm = [timed(lambda: run_isolated(spec, [job], 1, 60.0)) for _ in range(repeat)]
        hosts = [timed(lambda: contained(plugin).close()) for _ in range(repeat)]
        rows[mode] = {
            "first batch (cold)": cold,
            "later batch (warm)": statistics.median(warm),
            "plugin host start": statistics.median(hosts),
        }
    for name in rows["off"]:
        off, on = rows["off"][name] * 1000, rows["on"][name] * 1000
        print(f"{name:<34} {off:>12.1f} {on:>12.1f} {on / off:>7.2f}x")
    sandbox.configure("on")
    launch.close_all()


# ------------------------------------------------------------------------------ main job


def run_once(target: str | None, mode: str, cached: bool) -> float:
    argv = [*KERACHECK, "run", "corpora", "-q", "--format", "json", "--output", os.devnull]
    argv += ["--sandbox", mode]
    argv += [] if target is None else ["--targets", target]
    argv += [] if cached else ["--no-cache"]
    t0 = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    took = time.perf_counter() - t0
    if done.returncode not in (0, 1):
        sys.exit(f"{' '.join(argv)} failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    return took


def main_job(targets: list[str], repeat: int) -> None:
    print(
        f"\n{'warm main job (s, best / median)':<34} {'sandbox off':>15} {'sandbox on':>15} {'on/off':>8}"
    )
    rows: list[tuple[str, str | None, bool]] = [(t, t, False) for t in targets]
    rows.append(("all (result cache warm)", ",".join(targets), True))
    for name, target, cached in rows:
        run_once(target, "off", cached)  # warm the build caches (and, cached, the results)
        times: dict[str, list[float]] = {"off": [], "on": []}
        for _ in range(repeat):
            for mode in ("off", "on"):  # interleaved: load changes hit both alike
                times[mode].append(run_once(target, mode, cached))
        off, on = (statistics.median(times[m]) for m in ("off", "on"))
        cells = [f"{min(times[m]):6.2f} / {statistics.median(times[m]):6.2f}" for m in times]
        print(f"{name:<34} {cells[0]:>15} {cells[1]:>15} {on / off:>7.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--targets", default="ref,cpu,cpu-aarch64,wasm,wasm-node,ptx-emu")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--skip", default="", help="comma list of phases to skip: startup, main")
    args = ap.parse_args()
    skip = set(args.skip.split(","))
    header()
    if "startup" not in skip:
        startup(args.repeat)
    if "main" not in skip:
        main_job([t for t in args.targets.split(",") if t], args.repeat)


if __name__ == "__main__":
    main()
