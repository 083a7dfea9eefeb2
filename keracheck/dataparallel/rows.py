"""Data-parallel over the batch: rank ``r`` runs the graph on rows ``bounds[r] .. bounds[r+1]``
of every input, and each result is then reduced over all rows with the contract's tree.

The single-rank meaning (:func:`single_rank`) is: run the graph on every row on one target,
then reduce each result over the rows with ``kera.allreduce.reduce_tree`` -- exactly what a
graph computes whose ``sum``/``prod``/``amin``/``amax`` reduces an axis holding those rows.
:func:`run_rows` gives the same bits for every number of ranks and every shard layout (empty
shards included): rows of a batch are independent by the contract, so a shard's outputs are
the single-rank rows, and the ring allreduce (:func:`kera.allreduce.ring`) combines them in
the tree's order.

Where ranks run is a :class:`Ranks`: :class:`LocalRanks` (every step in this process, in
schedule order) or :class:`DaskRanks` (each rank's steps are Dask tasks pinned to one worker,
so the ring's messages travel between workers).  The graph travels as canonical ``.keg``
bytes; a worker loads it once per process and checks the fingerprint it loaded.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import cache
from typing import Any, Protocol

import numpy as np

from kera import keg
from kera.allreduce import OPS, AllreduceError, Part, check_bounds, reduce_tree, ring, segments
from kera.interp import batch_size
from kera.ir import Function, Graph
from kera.ops import Op
from keracheck.target import Backend

Array = np.ndarray[Any, Any]
#: a target: a built-in id (``ref``, ``cpu``, ...; resolved on the rank's process) or an object
TargetSpec = str | Backend


class DataParallelError(ValueError):
    """A data-parallel run that cannot be set up: a bad reduction, layout or target."""


class Ranks(Protocol):
    """Where each rank's steps run."""

    def submit(self, rank: int, fn: Callable[..., Any], *args: Any) -> Any: ...

    def gather(self, handles: Sequence[Any]) -> list[Any]: ...


class LocalRanks:
    """Every rank in this process; handles are the values themselves."""

    def submit(self, rank: int, fn: Callable[..., Any], *args: Any) -> Any:
        return fn(*args)

    def gather(self, handles: Sequence[Any]) -> list[Any]:
        return list(handles)


class DaskRanks:
    """Rank ``r`` on worker ``workers[r mod len(workers)]`` of a ``distributed.Client``
    (default: the client's workers, sorted by address).  Tasks are pinned to their rank's
    worker, so a message between ranks is a transfer between workers."""

    def __init__(self, client: Any, workers: Sequence[str] | None = None) -> None:
        self.client = client
        self.workers = list(workers or sorted(client.scheduler_info()["workers"]))
        if not self.workers:
            raise DataParallelError("the Dask cluster has no workers")

    def where(self, rank: int) -> str:
        return self.workers[rank % len(self.workers)]

    def submit(self, rank: int, fn: Callable[..., Any], *args: Any) -> Any:
        return self.client.submit(fn, *args, workers=[self.where(rank)], pure=False)

    def gather(self, handles: Sequence[Any]) -> list[Any]:
        return list(self.client.gather(list(handles)))


def reductions(fn: Function, reduce: str | Op | Sequence[str | Op]) -> list[Op]:
    """One tree reduction per result of ``fn`` (a single one applies to every result)."""
    given = [reduce] if isinstance(reduce, str | Op) else list(reduce)
    ops = given * len(fn.results) if len(given) == 1 else given
    if len(ops) != len(fn.results):
        raise DataParallelError(f"{len(ops)} reductions for {len(fn.results)} results")
    out = []
    for o in ops:
        op = Op(o) if o in {x.value for x in Op} else None
        if op not in OPS:
            raise DataParallelError(
                f"'{o}' is not a reduction (one of {sorted(x.value for x in OPS)})"
            )
        out.append(op)
    for op, r in zip(out, fn.results, strict=True):
        if not (r.dtype.is_float or r.dtype.is_int):
            raise DataParallelError(f"{op} over rows of {r.dtype} is not defined")
    return out


@cache
def _backend(target: str) -> Backend:
    from keracheck.targets import BUILTIN, instantiate

    if target not in BUILTIN:
        raise DataParallelError(f"unknown target '{target}' (one of {', '.join(BUILTIN)})")
    backend = instantiate(BUILTIN[target])
    reason = backend.available()
    if reason is not None:
        raise DataParallelError(f"target '{target}' is unavailable here: {reason}")
    return backend


@cache
def _load(data: bytes, name: str, fingerprint: str) -> Function:
    fn = keg.loads(data).functions[name]
    if fn.fingerprint != fingerprint:
        raise DataParallelError(f"loaded {fn.fingerprint[:16]}, expected {fingerprint[:16]}")
    return fn


def run_shard(
    data: bytes,
    name: str,
    fingerprint: str,
    rows: Mapping[str, Array],
    count: int,
    target: TargetSpec,
) -> list[Array]:
    """One rank's outputs for its rows (an empty shard has empty outputs)."""
    fn = _load(data, name, fingerprint)
    if count == 0:
        return [np.empty((0, *r.shape), dtype=r.dtype.np) for r in fn.results]
    backend = _backend(target) if isinstance(target, str) else target
    outs = backend.run(fn, rows)
    for out, r in zip(outs, fn.results, strict=True):
        if out.dtype != r.dtype.np or out.shape != (count, *r.shape):
            raise DataParallelError(
                f"target gave {out.dtype}{list(out.shape)}, expected {r.dtype}{[count, *r.shape]}"
            )
    return outs


def single_rank(
    fn: Function,
    inputs: Mapping[str, Array],
    reduce: str | Op | Sequence[str | Op],
    target: TargetSpec = "ref",
) -> list[Array]:
    """The meaning a data-parallel run must reproduce: every row on one target, each result
    reduced over the rows by the contract's tree."""
    ops = reductions(fn, reduce)
    backend = _backend(target) if isinstance(target, str) else target
    return [reduce_tree(out, op) for out, op in zip(backend.run(fn, inputs), ops, strict=True)]


def run_rows(
    fn: Function,
    inputs: Mapping[str, Array],
    reduce: str | Op | Sequence[str | Op],
    bounds: Sequence[int],
    ranks: Ranks | None = None,
    target: TargetSpec = "ref",
) -> list[Array]:
    """``fn`` over ``len(bounds) - 1`` ranks, rank ``r`` holding rows ``bounds[r]..bounds[r+1]``;
    each result reduced over all rows by the ring allreduce.  Equal in bits to
    :func:`single_rank` on the same target."""
    ops = reductions(fn, reduce)
    n = batch_size(fn, inputs)
    try:
        layout = check_bounds(bounds, n)
    except AllreduceError as e:
        raise DataParallelError(str(e)) from None
    place = ranks or LocalRanks()
    data = keg.dumps(Graph([fn]))
    count = len(layout) - 1
    outs = []
    for r in range(count):
        lo, hi = layout[r], layout[r + 1]
        rows = {k: np.ascontiguousarray(v[lo:hi]) for k, v in inputs.items()}  # with the task
        outs.append(
            place.submit(r, run_shard, data, fn.name, fn.fingerprint, rows, hi - lo, target)
        )
    parts = [
        Part(op, segments(_width(r.shape), count)) for op, r in zip(ops, fn.results, strict=True)
    ]
    handles = ring(place.submit, outs, layout[:-1], layout[-1], parts)  # one ring, every result
    copies = place.gather(handles)
    return [_agreed([c[k] for c in copies], r.shape) for k, r in enumerate(fn.results)]


def _width(shape: tuple[int, ...]) -> int:
    return int(np.prod(shape, dtype=np.int64))


def _agreed(copies: Sequence[Array], shape: tuple[int, ...]) -> Array:
    """Rank 0's copy, after checking every rank ended with the same bits."""
    first = np.asarray(copies[0]).view(np.uint8)
    if any(not np.array_equal(np.asarray(c).view(np.uint8), first) for c in copies[1:]):
        raise DataParallelError("ranks ended the allreduce with different bits")  # never expected
    return np.asarray(copies[0]).reshape(shape)


def ring_on(place: Ranks) -> Callable[[list[Array], Op], list[Array]]:
    """A ring for :mod:`keracheck.dataparallel.axis` whose ranks run on ``place`` (rank
    ``r``'s shard travels with its first task)."""

    def run(shards: list[Array], op: Op) -> list[Array]:
        count = len(shards)
        firsts = [int(f) for f in np.cumsum([0, *(len(s) for s in shards[:-1])])]
        part = Part(op, segments(_width(shards[0].shape[1:]), count))
        n = sum(len(s) for s in shards)
        handles = ring(place.submit, [[s] for s in shards], firsts, n, [part])
        return [np.asarray(c[0]).reshape(shards[0].shape[1:]) for c in place.gather(handles)]

    return run
