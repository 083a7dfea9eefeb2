"""keracheck throughput on the bundled corpus, per target: cases/s when the whole corpus is one
batch (one worker, one toolchain invocation where the back end batches) versus one worker and
one invocation per case, and the ratio.  Prints figures; asserts nothing.

    .venv/bin/python bench/bench_harness.py [--targets ref,cpu,wasm] [--inputs 64] [--limit N]
"""

from __future__ import annotations

import argparse
import time

from keracheck import harness
from keracheck.collect import collect
from keracheck.options import Options
from keracheck.worker import Job, run_isolated


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--targets", default=None)
    ap.add_argument("--inputs", type=int, default=64)
    ap.add_argument("--limit", type=int, default=0, help="only the first N cases")
    ap.add_argument("paths", nargs="*", default=["corpora"])
    args = ap.parse_args()
    opts = Options(targets=args.targets.split(",") if args.targets else None, n=args.inputs)
    t0 = time.perf_counter()
    collected = collect(args.paths, opts)
    cases = collected.cases[: args.limit or None]
    print(f"collected {len(cases)} cases (compile + inputs) in {time.perf_counter() - t0:.2f} s")
    targets, _ = harness.select_targets(opts)
    print(f"{'target':<20} {'batched cases/s':>16} {'per-case cases/s':>17} {'ratio':>7}")
    for t in targets:
        if not t.available or t.backend is None:
            print(f"{t.id:<20} unavailable: {t.reason}")
            continue
        ops = t.backend.supported_ops()
        runnable = [c for c in cases if {n.op.value for n in c.fn.nodes()} <= set(ops)]
        jobs = [Job(c.key, c.keg_bytes, c.function, c.inputs) for c in runnable]
        if not jobs:
            continue
        t0 = time.perf_counter()
        res = run_isolated(t.spec, jobs, 1, 600.0)
        batched = time.perf_counter() - t0
        errors = sum(1 for r in res.values() if r.status != "ok")
        t0 = time.perf_counter()
        for job in jobs:
            run_isolated(t.spec, [job], 1, 600.0)
        single = time.perf_counter() - t0
        n = len(jobs)
        print(
            f"{t.id:<20} {n / batched:>16.1f} {n / single:>17.1f} {single / batched:>6.1f}x"
            f"   ({n} cases, {errors} errors, batch {batched:.2f} s, per-case {single:.2f} s)"
        )


if __name__ == "__main__":
    main()
