"""A long data-parallel run that checkpoints its state and resumes after a worker dies.

A :class:`StepProgram` is one training-like step: ``contrib`` runs per row on each rank's data
shard with the current state broadcast to every row (it may hold loops), each of its results
is reduced over all rows by the ring allreduce (:func:`keracheck.dataparallel.rows.run_rows`),
and ``update`` maps (state, reduced results) to the next state.  :func:`run_steps` runs
``steps`` of them and, every ``every`` steps, writes the state to ``checkpoint/`` as
``step-<8 digits>.json`` (dtype, shape and the exact bytes in hex, a SHA-256 over them, and a
key naming the program, data, layout and initial state; written to a temporary name and
renamed, so a checkpoint is whole or absent).

Recovery: when a rank's worker disappears (:class:`WorkerLost`) or a Dask call fails, the run
waits for workers, places the ranks again and continues from the last checkpoint of the same
key -- at most ``max_restarts`` times.  A new :func:`run_steps` call with the same checkpoint
directory resumes the same way.  Every step is a pure function of the state, so the resumed
run ends with the bits of an uninterrupted one.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kera.interp import interpret
from kera.ir import Function
from kera.ops import Op
from keracheck.dataparallel.rows import DaskRanks, DataParallelError, Ranks, TargetSpec, run_rows

Array = np.ndarray[Any, Any]
State = dict[str, Array]


class WorkerLost(RuntimeError):
    """A worker that held a rank left the cluster while the step was running."""


class CheckpointError(ValueError):
    """A checkpoint directory that belongs to another run, or a checkpoint that fails its digest."""


@dataclass(frozen=True)
class StepProgram:
    """``contrib``: per row, parameters = the state's names then data names; ``reduce``: one
    tree reduction per result of ``contrib``; ``update``: parameters = the state then one per
    reduced result, results = the next state in the order of ``state``."""

    contrib: Function
    update: Function
    reduce: tuple[Op, ...]
    state: tuple[str, ...]


class WatchedDaskRanks(DaskRanks):
    """:class:`DaskRanks` whose waits notice a rank's worker leaving (instead of waiting for a
    task pinned to a worker that is gone)."""

    poll_s = 0.2

    def gather(self, handles: Sequence[Any]) -> list[Any]:
        from distributed import wait

        while True:
            try:
                wait(list(handles), timeout=self.poll_s)  # type: ignore[no-untyped-call]
                return super().gather(handles)
            except TimeoutError:
                alive = set(self.client.scheduler_info()["workers"])
                gone = [w for w in self.workers if w not in alive]
                if gone:
                    raise WorkerLost(f"worker {gone[0]} left while a step was running") from None


def _key(
    program: StepProgram, state0: State, data: Mapping[str, Array], bounds: Sequence[int]
) -> str:
    h = hashlib.sha256(b"keracheck/dataparallel-run\0")
    h.update(
        f"{program.contrib.fingerprint} {program.update.fingerprint} {program.reduce}".encode()
    )
    h.update(f"{program.state} {list(bounds)}".encode())
    for name in sorted(state0):
        h.update(name.encode() + state0[name].dtype.str.encode() + state0[name].tobytes())
    for name in sorted(data):
        h.update(
            name.encode()
            + data[name].dtype.str.encode()
            + np.ascontiguousarray(data[name]).tobytes()
        )
    return h.hexdigest()


def _arrays_json(state: State) -> dict[str, Any]:
    return {
        k: {"dtype": v.dtype.str, "shape": list(v.shape), "hex": v.tobytes().hex()}
        for k, v in state.items()
    }


def _digest(body: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def save(directory: Path, key: str, step: int, state: State) -> Path:
    """Write one checkpoint atomically; returns its path."""
    directory.mkdir(parents=True, exist_ok=True)
    body = {"key": key, "step": step, "state": _arrays_json(state)}
    path = directory / f"step-{step:08d}.json"
    tmp = directory / f".{path.name}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps({**body, "sha256": _digest(body)}, sort_keys=True))
    os.replace(tmp, path)
    return path


def _decode(entry: Mapping[str, Any]) -> Array:
    raw = bytes.fromhex(entry["hex"])
    return np.frombuffer(raw, dtype=np.dtype(entry["dtype"])).reshape(entry["shape"]).copy()


def latest(directory: Path, key: str, at_most: int | None = None) -> tuple[int, State] | None:
    """The newest intact checkpoint of the run ``key`` (step, state), or None; with
    ``at_most``, the newest of a step no later than that (a shorter rerun)."""
    for path in sorted(directory.glob("step-*.json"), reverse=True):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # unreadable: an older checkpoint will do
        body = {k: doc[k] for k in ("key", "step", "state") if k in doc}
        if doc.get("sha256") != _digest(body):
            continue
        if doc["key"] != key:
            raise CheckpointError(f"{path} belongs to another run (program, data or layout differ)")
        if at_most is not None and int(doc["step"]) > at_most:
            continue
        return int(doc["step"]), {k: _decode(v) for k, v in doc["state"].items()}
    return None


def step_once(
    program: StepProgram,
    state: State,
    data: Mapping[str, Array],
    bounds: Sequence[int],
    ranks: Ranks | None,
    target: TargetSpec,
) -> State:
    """One step: contributions on every rank, allreduce, update (on this process, exactly)."""
    n = bounds[-1]
    rows = {k: np.ascontiguousarray(np.broadcast_to(v, (n, *v.shape))) for k, v in state.items()}
    reduced = run_rows(program.contrib, {**rows, **data}, program.reduce, bounds, ranks, target)
    names = program.update.param_names()
    args = {**{k: v[None] for k, v in state.items()}}
    args.update(
        {name: r[None] for name, r in zip(names[len(program.state) :], reduced, strict=True)}
    )
    outs = interpret(program.update, args)
    return {k: o[0] for k, o in zip(program.state, outs, strict=True)}


@dataclass
class RunRecord:
    """What :func:`run_steps` did: the final state, and where it resumed from."""

    state: State
    resumed_from: list[int]
    restarts: int


def _is_transient(e: BaseException, client: Any) -> bool:
    """Worker loss or a Dask failure (a cancelled future, a closed comm): worth a restart from
    the checkpoint.  Anything else -- a bad program, a full disk -- is raised at once."""
    if client is None:
        return False
    return isinstance(e, WorkerLost | OSError) or type(e).__module__.startswith("distributed")


def run_steps(
    program: StepProgram,
    state0: State,
    data: Mapping[str, Array],
    steps: int,
    bounds: Sequence[int],
    client: Any = None,
    target: TargetSpec = "ref",
    checkpoint: Path | None = None,
    every: int = 1,
    max_restarts: int = 3,
    on_step: Callable[[int, State], None] | None = None,
) -> RunRecord:
    """``steps`` steps from ``state0`` (or from the newest checkpoint of this run)."""
    if every < 1 or steps < 0:
        raise DataParallelError("need steps >= 0 and every >= 1")
    key = _key(program, state0, data, bounds)
    record = RunRecord(dict(state0), [], 0)
    while True:
        step, state = _resume(checkpoint, key, state0, steps, record)
        try:
            record.state = _advance(
                program,
                state,
                step,
                steps,
                data,
                bounds,
                client,
                target,
                checkpoint,
                key,
                every,
                on_step,
            )
            return record
        except Exception as e:
            if not _is_transient(e, client) or record.restarts >= max_restarts:
                raise
            record.restarts += 1
            _wait_for_workers(client)


def _resume(
    checkpoint: Path | None, key: str, state0: State, steps: int, record: RunRecord
) -> tuple[int, State]:
    found = latest(checkpoint, key, steps) if checkpoint is not None else None
    if found is None:
        return 0, dict(state0)
    record.resumed_from.append(found[0])
    return found


def _advance(
    program: StepProgram,
    state: State,
    step: int,
    steps: int,
    data: Mapping[str, Array],
    bounds: Sequence[int],
    client: Any,
    target: TargetSpec,
    checkpoint: Path | None,
    key: str,
    every: int,
    on_step: Callable[[int, State], None] | None,
) -> State:
    ranks = WatchedDaskRanks(client) if client is not None else None
    while step < steps:
        state = step_once(program, state, data, bounds, ranks, target)
        step += 1
        if checkpoint is not None and step % every == 0:
            save(checkpoint, key, step, state)
        if on_step is not None:
            on_step(step, state)
    return state


def _wait_for_workers(client: Any, timeout_s: float = 60) -> None:
    """After a loss, wait until the cluster has a worker again; the ranks are then placed on
    the workers there are (a nanny's restarted worker joins later, for later runs)."""
    deadline = time.monotonic() + timeout_s
    while not client.scheduler_info()["workers"]:
        if time.monotonic() > deadline:
            raise WorkerLost(f"no worker came back within {timeout_s:.0f} s")
        time.sleep(0.1)
