"""Data-parallel runs (``keracheck.dataparallel``) equal the single-rank bits.

Batch shards (``run_rows``) on ``ref`` and on the ``cpu`` target, compared with a graph whose
reduction nodes reduce the same rows (so the allreduce is checked against each target's own
reduction tree, not only against itself); reduced-axis shards (``axis.interpret``) against the
reference interpreter; ranks as Dask tasks on a real ``LocalCluster``; and keracheck catching a
ring that sums partials in rank order while the data-parallel target agrees.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from floatgen import edge_bits
from hypothesis import given, settings
from hypothesis import strategies as st

from kera.dtypes import DType
from kera.interp import interpret
from kera.ir import Function, FunctionBuilder, Node
from keracheck.cli import main
from keracheck.dataparallel import DaskRanks, run_rows, single_rank
from keracheck.dataparallel.axis import Layout
from keracheck.dataparallel.axis import interpret as dp_interpret
from keracheck.dataparallel.rows import DataParallelError, ring_on

Array = np.ndarray[Any, Any]
F32 = DType.F32
N, W = 23, 6  # rows of the batch, elements per row
REDUCE = ["sum", "prod", "amin", "amax", "sum", "prod"]
NAIVE = Path(__file__).with_name("naive_ring.py")


def _bits(a: Array) -> Array:
    return np.ascontiguousarray(a).view(f"u{a.dtype.itemsize}")


def _same(got: list[Array], want: list[Array]) -> bool:
    return all(np.array_equal(_bits(g), _bits(w)) for g, w in zip(got, want, strict=True))


def _f32(rng: np.random.Generator, shape: tuple[int, ...]) -> Array:
    return edge_bits(rng, int(np.prod(shape)), 32).view(np.float32).reshape(shape)


def _parts(b: FunctionBuilder, x: Node, w: Node) -> list[Node]:
    """Six vectors, one per reduction: f32 product, sum, quotient and x itself; an f64 product
    (the sum of exact products of f32 values); x's bits as i32 (wrapping product)."""
    to64 = [b.op("convert", v, to=DType.F64) for v in (x, w)]
    bits = b.op("bitcast", x, to=DType.I32)
    return [b.op("mul", x, w), b.op("add", x, w), b.op("div", x, w), x, b.op("mul", *to64), bits]


def _map_graph() -> Function:
    """Per row: the six vectors of :func:`_parts`."""
    b = FunctionBuilder("per_row")
    return b.build(*_parts(b, b.param("x", F32, [W]), b.param("w", F32, [W])))


def _full_graph() -> Function:
    """The same computation with the rows as axis 0, reduced by the graph's own nodes."""
    b = FunctionBuilder("full")
    parts = _parts(b, b.param("x", F32, [N, W]), b.param("w", F32, [N, W]))
    return b.build(*(b.op(op, p, axis=0) for op, p in zip(REDUCE, parts, strict=True)))


def _inputs(seed: int) -> dict[str, Array]:
    rng = np.random.default_rng(seed)
    return {"x": _f32(rng, (N, W)), "w": _f32(rng, (N, W))}


def _cuts(rng: np.random.Generator, ranks: int, n: int = N) -> list[int]:
    return [0, *sorted(int(c) for c in rng.integers(0, n + 1, ranks - 1)), n]


def _whole(fn: Function, xs: dict[str, Array], target: Any = None) -> list[Array]:
    """The full graph on one row holding every input row."""
    one = {k: v[None] for k, v in xs.items()}
    outs = target.run(fn, one) if target is not None else interpret(fn, one)
    return [o[0] for o in outs]


@given(ranks=st.integers(1, 9), seed=st.integers(0, 2**32 - 1))
@settings(max_examples=30)
def test_rows_on_ref_equal_single_rank(ranks: int, seed: int) -> None:
    xs = _inputs(seed)
    cuts = _cuts(np.random.default_rng(seed), ranks)
    got = run_rows(_map_graph(), xs, REDUCE, cuts)
    assert _same(got, single_rank(_map_graph(), xs, REDUCE))
    assert _same(got, _whole(_full_graph(), xs))


def _cpu() -> Any:
    from keracheck.targets.cpu import CpuTarget

    target = CpuTarget()
    reason = target.available()
    if reason is not None:
        pytest.skip(f"cpu unavailable: {reason}")
    return target


def test_rows_on_cpu_equal_the_c_back_ends_own_reduction() -> None:
    """Each rank runs its rows on the C back end; the result equals the full graph compiled
    by the same back end (its sum/prod/amin/amax trees) for R = 1..9."""
    cpu = _cpu()
    rng = np.random.default_rng(3)
    xs = _inputs(3)
    want = _whole(_full_graph(), xs, cpu)
    assert _same(want, _whole(_full_graph(), xs))
    for ranks in range(1, 10):
        got = run_rows(_map_graph(), xs, REDUCE, _cuts(rng, ranks), target="cpu")
        assert _same(got, want), ranks


def _outer() -> Function:
    """Per row l: the products a[i] * b[j] -- the leaves of matmul's sum over l."""
    b = FunctionBuilder("outer")
    a, c = b.param("a", F32, [3]), b.param("b", F32, [4])
    col = b.op("broadcast", b.op("reshape", a, shape=[3, 1]), shape=[3, 4])
    return b.build(b.op("mul", col, b.op("broadcast", c, shape=[3, 4])))


def _matmul(k: int) -> Function:
    b = FunctionBuilder("mm")
    at, c = b.param("a", F32, [k, 3]), b.param("b", F32, [k, 4])
    return b.build(b.op("matmul", b.op("transpose", at, perm=[1, 0]), c))


def test_split_k_matmul_on_cpu_equals_matmul() -> None:
    """matmul's contraction axis sharded over ranks (rows = k): the allreduce of the rows'
    products equals ``matmul`` compiled by the C back end and run by the interpreter."""
    cpu = _cpu()
    rng = np.random.default_rng(5)
    k = 19
    xs = {"a": _f32(rng, (k, 3)), "b": _f32(rng, (k, 4))}
    want = _whole(_matmul(k), xs, cpu)
    assert _same(want, _whole(_matmul(k), xs))
    for ranks in (1, 2, 4, 7, 9):
        assert _same(run_rows(_outer(), xs, "sum", _cuts(rng, ranks, k), target="cpu"), want)


def _reductions_graph() -> Function:
    """Every reduction on f32 over several axes and lengths, with dot and matmul."""
    b = FunctionBuilder("reductions")
    x = b.param("x", F32, [5, 13])
    v, u = b.param("v", F32, [11]), b.param("u", F32, [11])
    outs: list[Node] = [b.op(op, x, axis=a) for op in REDUCE for a in (0, 1)]
    outs.append(b.op("dot", v, u))
    outs.append(b.op("matmul", x, b.op("transpose", x, perm=[1, 0])))
    return b.build(*outs)


@pytest.mark.parametrize("ranks", range(1, 10))
def test_reduced_axis_shards_equal_the_interpreter(ranks: int) -> None:
    fn = _reductions_graph()
    rng = np.random.default_rng(ranks)
    xs = {"x": _f32(rng, (16, 5, 13)), "v": _f32(rng, (16, 11)), "u": _f32(rng, (16, 11))}
    want = interpret(fn, xs)
    for salt in range(3):
        assert _same(dp_interpret(fn, xs, Layout(ranks=ranks, salt=salt)), want)
    assert _same(dp_interpret(fn, xs, Layout(ranks=ranks, even=True)), want)


def test_bad_reductions_and_layouts_are_errors() -> None:
    xs = _inputs(0)
    with pytest.raises(DataParallelError, match="not a reduction"):
        run_rows(_map_graph(), xs, "add", [0, N])
    with pytest.raises(DataParallelError, match="reductions for 6 results"):
        run_rows(_map_graph(), xs, ["sum", "sum"], [0, N])
    with pytest.raises(DataParallelError, match="do not cover"):
        run_rows(_map_graph(), xs, "sum", [0, 5])
    with pytest.raises(DataParallelError, match="unknown target"):
        run_rows(_map_graph(), xs, "sum", [0, N], target="nope")


def test_ranks_as_dask_tasks_on_a_local_cluster() -> None:
    distributed = pytest.importorskip(
        "distributed", reason="dask not installed: .venv/bin/pip install -e '.[distributed]'"
    )
    xs = _inputs(11)
    want = single_rank(_map_graph(), xs, REDUCE)
    rng = np.random.default_rng(11)
    with (
        distributed.LocalCluster(
            n_workers=2, processes=False, threads_per_worker=1, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        ranks = DaskRanks(client)
        assert len(ranks.workers) == 2
        for count in (1, 3):
            assert _same(run_rows(_map_graph(), xs, REDUCE, _cuts(rng, count), ranks), want)
        # reduced-axis shards, every reduction of the graph a ring of Dask tasks
        fn = _reductions_graph()
        ys = {"x": _f32(rng, (2, 5, 13)), "v": _f32(rng, (2, 11)), "u": _f32(rng, (2, 11))}
        got = dp_interpret(fn, ys, Layout(ranks=3), ring=ring_on(ranks))
        assert _same(got, interpret(fn, ys))


CASE = """\
// f32 sums and products whose bits depend on the reduction order.
export fn order(x: f32[12, 4]) -> (f32[4], f32[12], f32[4]) {
    (sum(x, axis = 0), sum(x, axis = 1), prod(x, axis = 0))
}

// Integer and min/max reductions: every order gives the same bits.
export fn order_free(a: i32[9], m: f32[9]) -> (i32, f32, f32) {
    (sum(a, axis = 0), amin(m, axis = 0), amax(m, axis = 0))
}
"""


def _run(path: Path, plugin: str) -> int:
    return main(["run", str(path), "--targets", "ref", "--backend-plugin", plugin, "-q",
                 "--no-cache", "--inputs", "32"])  # fmt: skip


def test_keracheck_catches_a_naive_ring_and_passes_the_tree_ring(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "reductions.kera"
    src.write_text(CASE)
    assert _run(src, f"{NAIVE}:NaiveRing") == 1
    verdicts = {line.split()[1]: line.split()[-1] for line in capsys.readouterr().out.splitlines()
                if line.endswith(("diverge", "agree")) and "reductions.kera:" in line}  # fmt: skip
    assert {k.rpartition(":")[2]: v for k, v in verdicts.items()} == {
        "order": "diverge",  # float sum/prod in rank order is not the tree
        "order_free": "agree",  # integers and min/max: every order gives the tree's bits
    }
    assert _run(src, "keracheck.dataparallel.axis:DataParallelTarget") == 0
    linalg = Path(__file__).parents[2] / "corpora" / "linalg.kera"  # the documented command
    assert _run(linalg, f"{NAIVE}:NaiveRing") == 1
