"""The ring allreduce of ``kera.allreduce`` against the contract's tree (``kera.semantics``).

The oracle is ``kera.semantics.tree_reduce`` -- the reference interpreter's own reduction, an
implementation independent of the forests -- and results are compared by their bits.  Layouts
cover R = 1..9 ranks with random contiguous shards (empty ones included); values include NaNs
with payloads, -0.0, infinities and subnormals.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from floatgen import edge_bits
from hypothesis import given
from hypothesis import strategies as st

from kera import allreduce
from kera.allreduce import AllreduceError, absorb, empty, merge, ring_allreduce
from kera.dtypes import DType, from_numpy
from kera.ops import Op
from kera.semantics import tree_reduce

Array = np.ndarray[Any, Any]
OPS = [Op.SUM, Op.PROD, Op.AMIN, Op.AMAX]
DTYPES = [DType.F32, DType.F64, DType.I32, DType.U64]
SPECIALS32 = [0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00001, 0xFF812345, 0x00000001,
              0x807FFFFF, 0x3F800000, 0x4B800000, 0xCB800001, 0x7F7FFFFF]  # fmt: skip


def _bits(a: Array) -> Array:
    return np.ascontiguousarray(a).view(f"u{a.dtype.itemsize}")


def _values(rng: np.random.Generator, dt: DType, shape: tuple[int, ...]) -> Array:
    size = int(np.prod(shape))
    if dt.is_float:
        width = dt.np.itemsize * 8
        raw = edge_bits(rng, size, width)
        if width == 32:  # a quarter of the elements from the special values above
            pick = rng.integers(0, 4, size) == 0
            raw = np.where(pick, np.array(SPECIALS32, np.uint32)[rng.integers(0, 12, size)], raw)
        return raw.astype(f"u{width // 8}").view(dt.np).reshape(shape)
    info = np.iinfo(dt.np)
    return rng.integers(info.min, info.max, size, dtype=dt.np, endpoint=True).reshape(shape)


def _cuts(rng: np.random.Generator, n: int, ranks: int) -> list[int]:
    return [0, *sorted(int(c) for c in rng.integers(0, n + 1, ranks - 1)), n]


def _oracle(x: Array, op: Op) -> Array:
    return tree_reduce(np.moveaxis(x, 0, -1), op, from_numpy(x.dtype))


@given(
    n=st.integers(1, 40),
    ranks=st.integers(1, 9),
    width=st.integers(1, 7),
    op=st.sampled_from(OPS),
    dt=st.sampled_from(DTYPES),
    seed=st.integers(0, 2**32 - 1),
)
def test_ring_equals_tree_bits(
    n: int, ranks: int, width: int, op: Op, dt: DType, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    x = _values(rng, dt, (n, width))
    cuts = _cuts(rng, n, ranks)
    copies = ring_allreduce([x[cuts[r] : cuts[r + 1]] for r in range(ranks)], op)
    want = _bits(_oracle(x, op))
    assert len(copies) == ranks
    for got in copies:
        assert np.array_equal(_bits(got), want), (cuts, op, dt)


@pytest.mark.parametrize("ranks", range(1, 10))
def test_every_rank_count_on_special_f32_sums(ranks: int) -> None:
    """R = 1..9 on f32 sums over n = 1..33 leaves with every layout family: even, one rank
    with everything, and random."""
    rng = np.random.default_rng(ranks)
    for n in range(1, 34):
        x = _values(rng, DType.F32, (n, 5))
        want = _bits(_oracle(x, Op.SUM))
        layouts = [list(allreduce.even_bounds(n, ranks)), [0] * ranks + [n], _cuts(rng, n, ranks)]
        for cuts in layouts:
            got = ring_allreduce([x[cuts[r] : cuts[r + 1]] for r in range(ranks)], Op.SUM)[0]
            assert np.array_equal(_bits(got), want), (n, cuts)


@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 64))
def test_merge_order_does_not_matter(seed: int, n: int) -> None:
    """Forests of disjoint leaf sets merged in any order give the same root: the tree's bits
    do not depend on where or when a node is combined."""
    rng = np.random.default_rng(seed)
    x = _values(rng, DType.F64, (n, 3))
    cuts = _cuts(rng, n, int(rng.integers(1, 10)))
    forests = [
        absorb(empty(n, Op.PROD, DType.F64, 3), lo, x[lo:hi]) for lo, hi in itertools.pairwise(cuts)
    ]
    order = rng.permutation(len(forests))
    total = empty(n, Op.PROD, DType.F64, 3)
    for k in order:
        merge(total, forests[k])
    assert np.array_equal(_bits(total.root()), _bits(_oracle(x, Op.PROD)))


def test_segment_boundaries_do_not_change_bits() -> None:
    rng = np.random.default_rng(7)
    x = _values(rng, DType.F32, (13, 10))
    shards = [x[:4], x[4:4], x[4:13]]
    want = _bits(_oracle(x, Op.SUM))
    for seg in ([0, 0, 0, 10], [0, 10, 10, 10], [0, 3, 4, 10]):
        assert np.array_equal(_bits(ring_allreduce(shards, Op.SUM, seg)[0]), want)


def test_a_running_sum_is_not_the_tree() -> None:
    """The oracle can fail: ((x0 + x1) + x2) is not the tree's (x0 + x2) + x1."""
    x = np.array([[1.0], [2.0**-24], [-1.0]], np.float32)
    running = (x[0] + x[1]) + x[2]
    assert not np.array_equal(_bits(running), _bits(_oracle(x, Op.SUM)))
    assert np.array_equal(
        _bits(ring_allreduce([x[:1], x[1:2], x[2:]], Op.SUM)[0]), _bits(_oracle(x, Op.SUM))
    )


def test_bad_layouts_are_errors() -> None:
    x = np.ones((4, 2), np.float32)
    with pytest.raises(AllreduceError, match="do not cover"):
        allreduce.check_bounds([0, 3, 2, 4], 4)
    with pytest.raises(AllreduceError, match="at least one leaf"):
        allreduce.tree_size(0)
    a = absorb(empty(4, Op.SUM, DType.F32, 2), 0, x[:3])
    with pytest.raises(AllreduceError, match=r"both forests|leaves of 4"):
        merge(a, absorb(empty(4, Op.SUM, DType.F32, 2), 2, x[2:]))
    with pytest.raises(AllreduceError, match="no root yet"):
        absorb(empty(4, Op.SUM, DType.F32, 2), 0, x[:3]).root()
    with pytest.raises(AllreduceError, match="not a tree reduction"):
        empty(4, Op.ADD, DType.F32, 2)


@given(seed=st.integers(0, 2**32 - 1), ranks=st.integers(1, 9))
def test_any_ring_order_gives_the_tree(seed: int, ranks: int) -> None:
    """The default order (bit-reversed first leaves) only saves traffic: every permutation of
    the ranks around the ring gives the same bits."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 50))
    x = _values(rng, DType.F32, (n, 4))
    cuts = _cuts(rng, n, ranks)
    shards = [x[cuts[r] : cuts[r + 1]] for r in range(ranks)]
    order = [int(r) for r in rng.permutation(ranks)]
    part = allreduce.Part(Op.SUM, allreduce.segments(4, ranks))
    outs = allreduce.ring(
        allreduce.local_submit, [[s] for s in shards], cuts[:-1], n, [part], order
    )
    want = _bits(_oracle(x, Op.SUM))
    assert all(np.array_equal(_bits(o[0]), want) for o in outs)


def test_ring_order_pairs_partners_and_rejects_non_permutations() -> None:
    assert allreduce.ring_order([0, 16, 32, 48], 64) == [0, 2, 1, 3]
    assert allreduce.ring_order([0, 8, 16, 24, 32, 40, 48, 56], 64) == [0, 4, 2, 6, 1, 5, 3, 7]
    x = np.ones((4, 1), np.float32)
    with pytest.raises(AllreduceError, match="not a permutation"):
        part = allreduce.Part(Op.SUM, (0, 1, 1))
        allreduce.ring(allreduce.local_submit, [[x[:2]], [x[2:]]], [0, 2], 4, [part], [0, 0])
