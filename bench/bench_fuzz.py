"""``keracheck fuzz`` benchmarks: throughput, time to detection, shrinking.

    .venv/bin/python bench/bench_fuzz.py [--budget 30] [--targets ref,cpu,wasm] [--skip ...]
                                         [--split-batches 10]

1. ``generate``: graphs/s of the strategy alone (Hypothesis drawing and graph building).
2. ``ref``: graphs/s generated and checked against ``ref`` alone (every graph interpreted).
3. ``targets``: graphs/s generated and checked against ``--targets`` (default ref,cpu,wasm),
   through the warm worker processes, with a fresh ``KERACHECK_CACHE`` so every gcc build is
   real.  "graphs" counts every graph Hypothesis drew, "distinct" only the first of each
   fingerprint (a repeat is a cache hit); both rates are printed.
3b. ``split``: the cpu target's cold build of the first ``--split-batches`` batches of a
   seed-0 campaign, one batch per build as the fuzz loop builds them, with the batch split
   over the CPUs by function count (as before), by the size of each function's C text
   (``keracheck.targets.cpu.balance``), not split (one part), and by text with
   self-contained units (``alone``: the tile helpers compiled in every unit, no tile
   library), alternately batch by batch: wall and CPU seconds (the compilers are this
   process's children, so their CPU time is counted).  The tile library is built once first
   (its one-off time is printed) and every batch's cold cache starts with it, as every batch
   after a campaign's first does.
4. ``plugin``: graphs/s against ref and a pure-Python plugin
   (``tests/unit/plugins/fake_targets.py:Clone``, the reference interpreter behind the plugin
   interface), in warm worker processes and in this process (``--in-process``), each as a
   share of ref's own rate: what a back-end author pays for the plugin machinery.  Each run is
   a ``keracheck fuzz --budget`` campaign in a process of its own; the three are repeated
   ``--rounds`` times, interleaved, and the medians compared.
5. ``planted``: each planted bug of ``tests/quality/planted.py`` against ref (plugins in this
   process): examples, graphs and seconds to first detection; ops/nodes of the diverging
   graph as found, after Hypothesis's shrink and after the reductions; shrink calls and time.
   Medians at the end.
6. ``gcc``: a real toolchain bug: the cpu target built with ``-ffp-contract=fast`` (hidden fma
   contraction, as gcc does by default on an FMA machine), through the worker processes:
   detection, and shrink time when every shrink step is a gcc build.

Prints figures; asserts nothing.  Timings are wall clock on a shared machine: compare
figures from one run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "quality"))

from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402

from kera.backends import c  # noqa: E402
from kera.ir import Function  # noqa: E402
from keracheck.fuzz import policies, select_targets  # noqa: E402
from keracheck.fuzz.engine import Campaign, Finding, Options, common_ops  # noqa: E402
from keracheck.fuzz.strategies import Drawn, batches  # noqa: E402
from keracheck.targets.cpu import NONE_MADE, CpuTarget  # noqa: E402

PLANTED = ROOT / "tests" / "quality" / "planted.py"
CLONE = ROOT / "tests" / "unit" / "plugins" / "fake_targets.py"


class CpuContract(CpuTarget):
    """The host cpu target built with -ffp-contract=fast: gcc fuses a*b+c into an fma."""

    def __init__(self) -> None:
        super().__init__()
        self.name = "cpu-contract"
        self.tiles = False  # its own _build emits self-contained units: no tile library

    def _build(self, fns: Mapping[str, Function], made: Mapping[str, Any] = NONE_MADE) -> Path:
        src = c.emit(fns, isa=self.isa)
        pinned = [f for f in c.PINNED_FLAGS if f != "-ffp-contract=off"]
        flags = [*pinned, "-ffp-contract=fast", *c.ISAS[self.isa].flags]
        return self.gcc.build(src.files(), flags, "shared", self.timeout)


def header() -> None:
    print(f"python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")  # fmt: skip


def bench_generate(seconds: float) -> None:
    count = [0, 0]
    t0 = time.perf_counter()

    @settings(database=None, deadline=None, max_examples=10**6, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @seed(0)
    @given(batches(policies=policies.DEFAULT))
    def draw(batch: list[Drawn]) -> None:
        count[0] += 1
        count[1] += len(batch)
        if time.perf_counter() - t0 > seconds:
            raise TimeoutError

    with contextlib.suppress(TimeoutError):
        draw()
    dt = time.perf_counter() - t0
    print(
        f"generate  {count[1] / dt:8.1f} graphs/s  ({count[0]} examples, {count[1]} graphs, {dt:.1f} s)"
    )


def throughput(label: str, ids: list[str], plugins: list[str], seconds: float) -> Campaign:
    targets, notes = select_targets(ids, plugins)
    for n in notes:
        print(f"  {n}")
    campaign = Campaign(targets, Options(budget=seconds, seed=0, out=None)).run()
    s = campaign.document()["stats"]
    print(
        f"{label:9} {s['graphsPerSecond'] or 0:8.1f} graphs/s, {s['uniqueGraphsPerSecond'] or 0:6.1f} "
        f"distinct/s  ({s['examples']} examples, {s['graphs']} graphs, {s['uniqueGraphs']} "
        f"distinct, {s['generateSeconds']:.1f} s) against {','.join(t.id for t in targets)}"
    )
    print(f"          target seconds {s['targetSeconds']}, calls {s['targetCalls']}")
    for f in campaign.findings.values():
        print(f"          DIVERGENCE {f.signature}: {f.count} hits, {f.reproducer}")
    return campaign


#: the plugin phase's runs: label, extra ``keracheck fuzz`` flags
PLUGIN_RUNS: tuple[tuple[str, list[str]], ...] = (
    ("ref", []),
    ("clone", ["--backend-plugin", f"{CLONE}:Clone"]),
    ("clone-in", ["--backend-plugin", f"{CLONE}:Clone", "--in-process"]),
)


def fuzz_rate(flags: list[str], seconds: float, out: str) -> float:
    """graphs/s of one ``keracheck fuzz --targets ref`` campaign, run as a back-end author runs
    it: a process of its own."""
    argv = ["fuzz", "--targets", "ref", "--budget", str(seconds), "--format", "json"]
    res = subprocess.run(
        [sys.executable, "-m", "keracheck.cli", *argv, "--out", out, *flags],
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
    )
    if res.returncode not in (0, 1):
        print(f"  keracheck fuzz {' '.join(flags)} failed: {res.stderr.strip()[-300:]}")
        return 0.0
    return float(json.loads(res.stdout)["stats"]["graphsPerSecond"] or 0.0)


def bench_plugin(seconds: float, rounds: int, out: str) -> None:
    """ref alone, then ref and the Clone plugin (worker processes, then --in-process), each a
    CLI campaign of its own, ``rounds`` times interleaved (a shared machine's load drifts):
    median graphs/s of each and the plugin's share of ref's rate (the same seed draws the same
    graphs)."""
    rates: dict[str, list[float]] = {label: [] for label, _ in PLUGIN_RUNS}
    for _ in range(rounds):
        for label, flags in PLUGIN_RUNS:
            rates[label].append(fuzz_rate(flags, seconds, out))
    ref = statistics.median(rates["ref"])
    for label, _ in PLUGIN_RUNS:
        rate = statistics.median(rates[label])
        share = rate / ref if ref else 0.0
        runs = ", ".join(f"{r:.0f}" for r in rates[label])
        print(f"{label:9} {rate:8.1f} graphs/s median ({runs}), {share:4.0%} of ref's")


def planted_row(name: str, f: Finding | None, total: float) -> dict[str, Any] | None:
    if f is None:
        print(f"{name:18} not found")
        return None
    print(
        f"{name:18} {f.signature!s:40} ex {f.first_example:4} graphs {f.first_graphs:5} "
        f"{f.first_seconds:6.2f} s | ops {f.ops_before:3} -> {f.ops_shrunk:2} -> {f.ops_after} "
        f"nodes {f.nodes_before:3} -> {f.nodes_after} | shrink {f.shrink_seconds:6.2f} s "
        f"{f.shrink_calls:4} calls, reduce {f.reduce_seconds:5.2f} s | total {total:6.1f} s"
    )
    shrink = f.shrink_seconds + f.reduce_seconds  # to the saved reproducer
    return {"examples": f.first_example, "seconds": f.first_seconds, "shrink": shrink}


def run_planted(
    cls_name: str, spec: str, wanted: Any, isolate: bool, out: str
) -> dict[str, Any] | None:
    ops, klass, _ = wanted
    targets, _ = select_targets(["ref"], [spec])

    def until(f: Finding) -> bool:
        return f.signature.op in ops and f.signature.cls == klass

    t0 = time.perf_counter()
    opts = Options(max_examples=1000, seed=0, out=out, isolate=isolate, until=until)
    campaign = Campaign(targets, opts).run()
    hit = next((f for f in campaign.findings.values() if until(f) and f.final), None)
    return planted_row(cls_name, hit, time.perf_counter() - t0)


def bench_planted(out: str) -> None:
    import planted

    rows = []
    for cls, wanted in planted.PLANTED.items():
        row = run_planted(cls.__name__, f"{PLANTED}:{cls.__name__}", wanted, False, out)
        if row:
            rows.append(row)
    if rows:
        print(
            f"median: {statistics.median(r['examples'] for r in rows):.0f} examples and "
            f"{statistics.median(r['seconds'] for r in rows):.2f} s to detection, shrink "
            f"{statistics.median(r['shrink'] for r in rows):.2f} s"
        )


def bench_gcc(out: str) -> None:
    spec = f"{Path(__file__).resolve()}:CpuContract"
    row = run_planted("CpuContract", spec, (frozenset({"add", "sub"}), "ulp", 2), True, out)
    if row is None:
        print("  (the contraction was not found within the example budget)")


def drawn_batches(count: int, targets: list[Any]) -> list[list[Function]]:
    """The first ``count`` batches a seed-0 campaign against ``targets`` draws."""
    out: list[list[Function]] = []

    @settings(database=None, deadline=None, max_examples=count, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @seed(0)
    @given(batches(common_ops(targets), policies.DEFAULT))
    def draw(batch: list[Drawn]) -> None:
        out.append([d.fn for d in batch if d.fn is not None])

    draw()
    return out


def _by_count(weights: Mapping[str, float], k: int) -> list[list[str]]:
    """The split before text-sized parts: k runs of equal function counts."""
    keys = list(weights)
    return [keys[len(keys) * j // k : len(keys) * (j + 1) // k] for j in range(k)]


def _one_part(weights: Mapping[str, float], k: int) -> list[list[str]]:
    """The batch as one translation unit, whatever the CPUs."""
    return [list(weights)]


def bench_split(count: int, root: Path) -> None:
    """The cpu target's build of the first ``count`` fuzzed batches (cold, one batch per
    build, as the fuzz loop builds them), its parts split by function count (before), by
    the size of their C text (``cpu.balance``), as one part (the prelude built once: less
    CPU, more wall) and by text without the tile library (``alone``), batch by batch
    alternately: wall seconds (what the fuzz loop waits) and CPU seconds of the compilers."""
    import keracheck.targets.cpu as cpu_mod

    targets, _ = select_targets(["ref", "cpu"], [])
    todo = drawn_batches(count, targets)
    cpu = cpu_mod.CpuTarget()
    if cpu.available() is not None:
        print(f"split     cpu unavailable: {cpu.available()}")
        return
    ways = {  # how to split, and whether to link the tile library
        "count": (_by_count, True),
        "text": (cpu_mod.balance, True),
        "one": (_one_part, True),
        "alone": (cpu_mod.balance, False),
    }
    lib = root / "split-tiles"
    os.environ["KERACHECK_CACHE"] = str(lib)
    r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    cpu._tile_library()
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        f"split     tile library (isa {cpu.isa}) built once: {time.perf_counter() - t0:.2f} s "
        f"wall, {r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime:.2f} s CPU"
    )
    wall = dict.fromkeys(ways, 0.0)
    used = dict.fromkeys(ways, 0.0)
    for i, fns in enumerate(todo):
        for name, (split, linked) in ways.items():
            cache = root / f"split-{name}-{i}"
            shutil.copytree(lib, cache)  # cold, but for the library
            os.environ["KERACHECK_CACHE"] = str(cache)
            cpu_mod.balance, cpu.tiles = split, linked
            r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
            cpu._build_parallel({f"f{f.fingerprint[:20]}": f for f in fns})
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            wall[name] += time.perf_counter() - t0
            used[name] += r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
    cpu_mod.balance, cpu.tiles = ways["text"][0], True
    n = sum(len({f.fingerprint for f in b}) for b in todo)
    for name in ways:
        print(
            f"split     by {name:5}: {wall[name]:6.1f} s wall, {used[name]:6.1f} s CPU for {count} "
            f"batches ({n} functions): {n / wall[name]:5.1f} functions/s, "
            f"{used[name] / n * 1000:4.0f} ms CPU each"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--budget", type=float, default=30.0, help="seconds per throughput phase")
    p.add_argument("--targets", default="ref,cpu,wasm")
    p.add_argument("--rounds", type=int, default=3, help="interleaved runs of the plugin phase")
    p.add_argument(
        "--skip", default="", help="phases to skip: generate,ref,targets,split,plugin,planted,gcc"
    )
    p.add_argument("--split-batches", type=int, default=10, help="batches of the split phase")
    args = p.parse_args()
    skip = set(args.skip.split(","))
    header()
    with tempfile.TemporaryDirectory(prefix="bench-fuzz-") as tmp:
        os.environ["KERACHECK_CACHE"] = str(Path(tmp) / "cache")  # cold gcc builds
        out = str(Path(tmp) / "out")
        if "generate" not in skip:
            bench_generate(args.budget)
        if "ref" not in skip:
            throughput("ref", ["ref"], [], args.budget)
        if "targets" not in skip:
            throughput("targets", args.targets.split(","), [], args.budget)
        if "split" not in skip:
            bench_split(args.split_batches, Path(tmp))
        if "plugin" not in skip:
            bench_plugin(args.budget, args.rounds, out)
        if "planted" not in skip:
            bench_planted(out)
        if "gcc" not in skip:
            bench_gcc(out)


if __name__ == "__main__":
    main()
