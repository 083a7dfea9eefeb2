"""Runs and fuzz campaigns on Dask (``keracheck/distributed/``, issue 19): how they scale over
local workers, and what a Dask task costs over the local process pool.  Prints figures;
asserts nothing.

* corpus: ``keracheck run PATHS --targets T --no-cache`` in-process, on the local pool and on
  ``local:N`` for each N of ``--workers`` (cluster start-up not counted): cases x targets per
  second, and the speed-up over one worker;
* fuzz: a campaign of ``--fuzz-examples`` examples against ``--fuzz-targets``, sharded
  (``--shard-examples``) over N workers: graphs/s and the speed-up;
* overhead: ``--tasks`` single-case batches on ``ref`` one after another, through the local
  pool (``run_isolated``) and through Dask (``local:1``), and a no-op Dask task's round trip:
  the Dask cost per task is the difference.

    .venv/bin/python bench/bench_distributed.py [--workers 1,2,4] [--targets ref,cpu,wasm,ptx-emu]
"""

from __future__ import annotations

import argparse
import platform
import queue
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from keracheck import distributed, harness
from keracheck.collect import collect
from keracheck.options import Options
from keracheck.worker import Job, run_isolated

ROOT = Path(__file__).resolve().parents[1]


def _opts(targets: list[str], cluster: Any = None) -> Options:
    return Options(targets=targets, cache_dir=None, jobs=2, localise=False, scheduler=cluster)


def corpus(paths: list[str], targets: list[str], workers: list[int]) -> None:
    cases = len(collect(paths, _opts(targets)).cases)
    units = cases * len(targets)
    t0 = time.perf_counter()
    doc, _ = harness.run(paths, _opts(targets))
    local = time.perf_counter() - t0
    print(f"corpus: {cases} cases x {len(targets)} targets ({','.join(targets)})")
    print(f"  local pool (--jobs 2)   {local:7.1f} s  {units / local:7.1f} case-targets/s")
    for tid in targets:  # the capacity model's input: one process's cases/s per target
        busy = sum(c["targets"][tid].get("seconds", 0.0) for c in doc["cases"])
        ran = sum(1 for c in doc["cases"] if c["targets"][tid].get("status") == "ok")
        print(
            f"    {tid:<10} {ran:4d} cases in {busy:6.1f} s of batch time: {ran / max(busy, 1e-9):7.1f} cases/s"
        )
    base = None
    for n in workers:
        with distributed.connect(f"local:{n}") as cluster:
            harness.run(paths[:1], _opts(targets, cluster))  # probes and first builds: warm
            t0 = time.perf_counter()
            harness.run(paths, _opts(targets, cluster))
            took = time.perf_counter() - t0
        base = base or took
        print(
            f"  local:{n:<3}               {took:7.1f} s  {units / took:7.1f} case-targets/s"
            f"  x{base / took:.2f} over local:{workers[0]}"
        )


def fuzz(targets: list[str], workers: list[int], examples: int, shard: int) -> None:
    from keracheck.distributed import fuzz as dfuzz
    from keracheck.fuzz.engine import Options as FuzzOptions

    engine = FuzzOptions()
    options = {name: getattr(engine, name) for name in dfuzz.ENGINE_FIELDS}
    specs = _specs(targets)
    print(f"fuzz: {examples} examples of {engine.batch_size} graphs against {','.join(targets)}")
    base = None
    for n in workers:
        with tempfile.TemporaryDirectory() as out, distributed.connect(f"local:{n}") as cluster:
            cluster.install(specs)
            plan = dfuzz.Plan(specs, options, 0, shard, examples, None, None, out, None, "bench")
            t0 = time.perf_counter()
            doc = dfuzz.run_campaign(cluster, plan)
            took = time.perf_counter() - t0
        rate = doc["stats"]["graphs"] / took
        base = base or rate
        print(
            f"  local:{n:<3} {took:7.1f} s  {rate:7.1f} graphs/s  x{rate / base:.2f}  "
            f"({len(doc['signatures'])} signatures)"
        )


def _specs(targets: list[str]) -> dict[str, str]:
    from keracheck.targets import known_specs

    every = known_specs()
    return {t: every[t] for t in dict.fromkeys(["ref", *targets])}


def overhead(tasks: int) -> None:
    case = collect([str(ROOT / "corpora/programs.kera")], _opts(["ref"])).cases[0]
    jobs = [
        Job(f"{case.key}#{k}", case.keg_bytes, case.function, case.inputs) for k in range(tasks)
    ]
    spec = _specs(["ref"])["ref"]
    run_isolated(spec, jobs[:1], 1, 30.0)  # the sandbox server: warm
    t0 = time.perf_counter()
    for job in jobs:
        run_isolated(spec, [job], 1, 30.0)
    local = (time.perf_counter() - t0) / tasks
    with distributed.connect("local:1") as cluster:
        cluster.install({"ref": spec})
        list(cluster.batches("ref", spec, jobs[:1], 1, 30.0))  # the worker's sandbox: warm
        t0 = time.perf_counter()
        for job in jobs:
            list(cluster.batches("ref", spec, [job], 1, 30.0))
        dask = (time.perf_counter() - t0) / tasks
        inbox: queue.Queue[Any] = queue.Queue()
        t0 = time.perf_counter()
        for _ in range(tasks):
            cluster.submit("ping", (), {}, inbox)
            inbox.get()
        ping = (time.perf_counter() - t0) / tasks
        t0 = time.perf_counter()
        for _ in range(tasks):  # all in flight at once: the cost per task, latency overlapped
            cluster.submit("ping", (), {}, inbox)
        for _ in range(tasks):
            inbox.get()
        flight = (time.perf_counter() - t0) / tasks
    print(f"overhead: {tasks} single-case ref batches, one after another")
    print(f"  local pool  {local * 1e3:7.1f} ms/batch")
    print(f"  Dask        {dask * 1e3:7.1f} ms/batch   (+{(dask - local) * 1e3:.1f} ms/task)")
    print(f"  Dask no-op  {ping * 1e3:7.1f} ms/task round trip (keracheck -> gateway -> worker)")
    print(f"  Dask no-op  {flight * 1e3:7.1f} ms/task with {tasks} in flight")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("paths", nargs="*", default=[str(ROOT / "corpora")])
    p.add_argument("--workers", default="1,2,4")
    p.add_argument("--targets", default="ref,cpu,wasm,ptx-emu")
    p.add_argument("--fuzz-targets", default="ref,wasm")
    p.add_argument("--fuzz-examples", type=int, default=24)
    p.add_argument("--shard-examples", type=int, default=3)
    p.add_argument("--tasks", type=int, default=50)
    p.add_argument("--skip", default="", help="comma list of corpus,fuzz,overhead")
    a = p.parse_args()
    skip = set(a.skip.split(","))
    print(f"Python {sys.version.split()[0]}, numpy {np.__version__}, {platform.machine()}")
    workers = [int(n) for n in a.workers.split(",")]
    if "corpus" not in skip:
        corpus(a.paths, a.targets.split(","), workers)
    if "fuzz" not in skip:
        fuzz(a.fuzz_targets.split(","), workers, a.fuzz_examples, a.shard_examples)
    if "overhead" not in skip:
        overhead(a.tasks)


if __name__ == "__main__":
    main()
