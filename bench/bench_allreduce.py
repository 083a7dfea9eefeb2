"""The ring allreduce of ``kera.allreduce`` (issue 19): throughput against the number of ranks,
the overhead against the single-rank tree, and what the ring ships.

For R ranks, ``--rows`` leaves (rows) of ``--width`` f32 elements each are cut into even
contiguous shards, and the ring reduces them with the contract's sum tree:

* ``ring``: :func:`kera.allreduce.ring_allreduce` in one process (every rank's steps run in
  schedule order), elements reduced per second (rows x width / time), best of ``--repeat``,
  process CPU time;
* ``vs 1 rank``: the ring's time over the single-rank tree (``kera.allreduce.reduce_tree``,
  one forest absorbing every row; faster here than ``kera.semantics.tree_reduce``, whose
  strided slices of the transposed rows are printed for reference) -- the price of ranks,
  segments and messages;
* ``shipped``: the bytes of every reduce-scatter and all-gather message, per rank, as a
  multiple of one row (``width`` x 4 bytes); a ring of running sums ships ``2 (R-1) / R``
  rows per rank and cannot give the tree's bits;
* ``dask``: ``keracheck.dataparallel.run_rows`` with the ranks as tasks on an in-process
  ``LocalCluster`` of ``--workers`` workers (wall time per allreduce, and per task),
  ``--skip-dask`` leaves it out.

Every result's bits are compared with the single-rank tree; a mismatch stops the script.
"""

from __future__ import annotations

import argparse
import platform
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from kera.allreduce import (
    Message,
    Part,
    even_bounds,
    local_submit,
    reduce_tree,
    ring,
    ring_allreduce,
    segments,
)
from kera.dtypes import DType
from kera.ops import Op
from kera.semantics import tree_reduce

Array = np.ndarray[Any, Any]


def best(f: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeat):
        t = time.process_time()
        out = f()
        times.append(time.process_time() - t)
    return min(times), out


def shipped(shards: list[Array], n: int, width: int) -> int:
    """Bytes of every message of one ring allreduce."""
    total = 0

    def counting(rank: int, fn: Callable[..., Any], *args: Any) -> Any:
        nonlocal total
        out = local_submit(rank, fn, *args)
        if isinstance(out, Message):
            total += 4 * out.values()
        return out

    firsts = [int(f) for f in np.cumsum([0, *(len(s) for s in shards[:-1])])]
    ring(counting, [[s] for s in shards], firsts, n, [Part(Op.SUM, segments(width, len(shards)))])
    return total


def check(got: Array, want: Array, what: str) -> None:
    if not np.array_equal(got.view(np.uint32), want.view(np.uint32)):
        raise SystemExit(f"{what}: bits differ from the single-rank tree")


def bench_ring(x: Array, ranks: list[int], repeat: int) -> None:
    n, width = x.shape
    t_tree, want = best(lambda: tree_reduce(x.T.copy(), Op.SUM, DType.F32), repeat)
    t_forest, one = best(lambda: reduce_tree(x, Op.SUM), repeat)
    check(one, want, "reduce_tree")
    print(f"single rank: tree_reduce {n * width / t_tree / 1e6:8.2f} M elements/s, "
          f"forest {n * width / t_forest / 1e6:8.2f} M elements/s")  # fmt: skip
    print(
        f"{'R':>3} {'ring M el/s':>12} {'vs 1 rank':>9} {'shipped rows/rank':>18} {'naive ring':>11}"
    )
    for r in ranks:
        b = even_bounds(n, r)
        shards = [x[b[k] : b[k + 1]] for k in range(r)]
        t, outs = best(lambda shards=shards: ring_allreduce(shards, Op.SUM), repeat)
        for out in outs:
            check(out, want, f"R={r}")
        rows = shipped(shards, n, width) / (4 * width) / r
        print(f"{r:>3} {n * width / t / 1e6:12.2f} {t / t_forest:8.2f}x {rows:18.2f} "
              f"{2 * (r - 1) / r:11.2f}")  # fmt: skip


def bench_dask(x: Array, ranks: list[int], workers: int, repeat: int) -> None:
    import distributed

    from kera.ir import FunctionBuilder
    from keracheck.dataparallel import DaskRanks, LocalRanks, run_rows

    n, width = x.shape
    b = FunctionBuilder("identity_row")
    fn = b.build(b.param("x", DType.F32, [width]))
    want = reduce_tree(x, Op.SUM)
    with (
        distributed.LocalCluster(
            n_workers=workers, processes=False, threads_per_worker=1, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        place = DaskRanks(client)
        print(f"dask: {workers} in-process workers; wall time per allreduce (best of {repeat})")
        for r in ranks:
            bounds = even_bounds(n, r)
            times = []
            for _ in range(repeat):
                t = time.perf_counter()
                (out,) = run_rows(fn, {"x": x}, "sum", bounds, place)
                times.append(time.perf_counter() - t)
            check(out, want, f"dask R={r}")
            t0 = time.perf_counter()
            run_rows(fn, {"x": x}, "sum", bounds, LocalRanks())
            local = time.perf_counter() - t0
            tasks = (
                4 * r + 4 * r * (r - 1) + (1 if r == 1 else 0)
            )  # shard, start, finish; 4 per hop
            print(f"{r:>3} dask {min(times) * 1e3:8.1f} ms   in-process {local * 1e3:8.1f} ms   "
                  f"{tasks} tasks, {(min(times) - local) / tasks * 1e3:.2f} ms/task over in-process")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=64, help="leaves of the reduction (default 64)")
    ap.add_argument("--width", type=int, default=65536, help="f32 elements per row")
    ap.add_argument("--ranks", default="1,2,3,4,5,8,9", help="rank counts, comma-separated")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--skip-dask", action="store_true")
    args = ap.parse_args()
    print(f"python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}; "
          f"{args.rows} rows x {args.width} f32")  # fmt: skip
    rng = np.random.default_rng(0)
    x = (
        rng.standard_normal((args.rows, args.width))
        * 2.0 ** rng.integers(-20, 20, (args.rows, args.width))
    ).astype(np.float32)
    ranks = [int(r) for r in args.ranks.split(",")]
    bench_ring(x, ranks, args.repeat)
    if not args.skip_dask:
        bench_dask(x[:, : min(args.width, 4096)], ranks, args.workers, args.repeat)


if __name__ == "__main__":
    main()
