"""A long data-parallel run: checkpoints, resume, and a worker process killed mid-run.

The step is a loop program per row (a carried f32 Horner-like recurrence, whose order is
observable), an allreduce of the rows' results, and an update; every run is compared by its
bits with an uninterrupted run in this process.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import cloudpickle  # type: ignore[import-untyped]
import numpy as np
import pytest

from kera.dtypes import DType
from kera.interp import interpret
from kera.ir import Function, FunctionBuilder, Node, loop
from kera.ops import Op
from keracheck.dataparallel.checkpoint import (
    CheckpointError,
    StepProgram,
    latest,
    run_steps,
    save,
)

Array = np.ndarray[Any, Any]
F32 = DType.F32
W, ROWS, STEPS = 8, 12, 8
BOUNDS = [0, 5, 5, 12]  # three ranks, one of them empty
ON_WORKERS = [0, 5, 12]  # two ranks, one per worker: few tasks per step


def _contrib() -> Function:
    """Per row: ``for i in 0..6 with (a = w) { a * x + w }`` and ``amax(a)`` broadcast."""
    b = FunctionBuilder("contrib")
    w, x = b.param("w", F32, [W]), b.param("x", F32, [W])

    def body(i: Node, c: list[Node]) -> list[Node]:
        return [b.op("add", b.op("mul", c[0], x), w)]

    (a,) = loop(0, 6, [w], body)
    return b.build(a, b.op("broadcast", b.op("amax", a, axis=0), shape=[W]))


def _update() -> Function:
    """``w' = w * 0.5 + g * 2^-4 - m * 2^-8`` (bounded, so the run stays finite)."""
    b = FunctionBuilder("update")
    w, g, m = b.param("w", F32, [W]), b.param("g", F32, [W]), b.param("m", F32, [W])
    half = b.op("broadcast", b.const(0.5, F32), shape=[W])
    k1 = b.op("broadcast", b.const(2.0**-4, F32), shape=[W])
    k2 = b.op("broadcast", b.const(2.0**-8, F32), shape=[W])
    return b.build(
        b.op("sub", b.op("add", b.op("mul", w, half), b.op("mul", g, k1)), b.op("mul", m, k2))
    )


PROGRAM = StepProgram(_contrib(), _update(), (Op.SUM, Op.AMAX), ("w",))


def _data() -> tuple[dict[str, Array], dict[str, Array]]:
    rng = np.random.default_rng(19)
    state = {"w": rng.uniform(-0.4, 0.4, W).astype(np.float32)}
    return state, {"x": rng.uniform(-1.1, 1.1, (ROWS, W)).astype(np.float32)}


def _uninterrupted(steps: int = STEPS) -> Array:
    """The meaning, spelled out: every row in one interpreter call, the tree over rows."""
    from kera.allreduce import reduce_tree

    state, data = _data()
    w = state["w"]
    for _ in range(steps):
        g, m = interpret(PROGRAM.contrib, {"w": np.broadcast_to(w, (ROWS, W)).copy(), **data})
        args = {"w": w[None], "g": reduce_tree(g, Op.SUM)[None], "m": reduce_tree(m, Op.AMAX)[None]}
        w = interpret(PROGRAM.update, args)[0][0]
    return w


def _bits(a: Array) -> Array:
    return a.view(np.uint32)


def test_in_process_run_and_resume_from_checkpoint(tmp_path: Path) -> None:
    state, data = _data()
    want = _bits(_uninterrupted())
    first = run_steps(PROGRAM, state, data, 7, BOUNDS, checkpoint=tmp_path, every=3)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "step-00000003.json",
        "step-00000006.json",
    ]
    assert np.array_equal(_bits(first.state["w"]), _bits(_uninterrupted(7)))
    resumed = run_steps(PROGRAM, state, data, STEPS, BOUNDS, checkpoint=tmp_path, every=3)
    assert resumed.resumed_from == [6]
    assert np.array_equal(_bits(resumed.state["w"]), want)
    shorter = run_steps(PROGRAM, state, data, 5, BOUNDS, checkpoint=tmp_path, every=3)
    assert shorter.resumed_from == [3]  # not a checkpoint past the end of this run
    assert np.array_equal(_bits(shorter.state["w"]), _bits(_uninterrupted(5)))


def test_damaged_and_foreign_checkpoints(tmp_path: Path) -> None:
    state, data = _data()
    run_steps(PROGRAM, state, data, 4, BOUNDS, checkpoint=tmp_path, every=2)
    newest = tmp_path / "step-00000004.json"
    doc = json.loads(newest.read_text())
    doc["state"]["w"]["hex"] = "00" * (4 * W)
    newest.write_text(json.dumps(doc))  # fails its digest: the one before is used
    found = latest(tmp_path, doc["key"])
    assert found is not None and found[0] == 2
    save(tmp_path, "another run", 9, state)
    with pytest.raises(CheckpointError, match="another run"):
        run_steps(PROGRAM, state, data, 12, BOUNDS, checkpoint=tmp_path)


class KillOnArm:
    """The reference interpreter as a target, except that the first call after ``arm``
    exists SIGKILLs the worker process running it: a worker dies in the middle of a step.
    (Shipped to the workers by value, so they need not import the tests folder.)"""

    name = "kill-on-arm"
    api_version = 1

    def __init__(self, arm: Path, fired: Path) -> None:
        self.arm, self.fired = str(arm), str(fired)

    def available(self) -> str | None:
        return None

    def supported_ops(self) -> frozenset[str]:
        return frozenset(o.value for o in Op)

    def run(self, fn: Any, inputs: Any) -> Any:
        if os.path.exists(self.arm) and not os.path.exists(self.fired):
            Path(self.fired).write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        return interpret(fn, inputs)


def test_worker_killed_mid_run_resumes_from_checkpoint(tmp_path: Path) -> None:
    distributed = pytest.importorskip(
        "distributed", reason="dask not installed: .venv/bin/pip install -e '.[distributed]'"
    )
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    state, data = _data()
    arm, fired = tmp_path / "arm", tmp_path / "fired"

    def arm_at_step_4(step: int, _state: dict[str, Array]) -> None:
        if step == 4:
            arm.write_text("armed")  # the next step's first rank task kills its worker

    with (
        distributed.LocalCluster(
            n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        record = run_steps(PROGRAM, state, data, STEPS, ON_WORKERS, client=client,
                           target=KillOnArm(arm, fired), checkpoint=tmp_path / "ckpt", every=3,
                           on_step=arm_at_step_4)  # fmt: skip
    assert fired.exists(), "no worker was killed"
    assert record.restarts == 1 and record.resumed_from == [3]
    assert np.array_equal(_bits(record.state["w"]), _bits(_uninterrupted()))
