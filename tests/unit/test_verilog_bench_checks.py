"""The Verilog targets' benches without a simulator (``keracheck.targets.verilog``).

* The cocotb bench's checks (``check_design``) on read-backs made up here: a run as the
  schedule says passes and gives its result words; a result a clock late, vectors taken at
  the wrong interval (the ready handshake), a vector never taken, a result missing or extra,
  an unknown ``valid_out``/``ready`` and an x/z result bit each fail, naming the property.
* ``cocotb_outputs`` splits the result words per case (segments of one design back to back).
* ``Batch.counts``/``design_inputs``: a design's segments concatenated in order.
* The Verilator C++ optimisation is chosen by the clocks to simulate per core instance, not
  by vectors: a loop design's interval multiplies its vectors.
* The runtime objects a Verilator build can reuse are read from its ``classes.mk``.
* ``balance`` splits a batch of much simulation work into parts of about equal work.
* ``split_heavy`` cuts a case that is more than a CPU's share of the work into pieces of its
  vectors (each piece its own ``balance`` key), and ``join_pieces`` puts each case's outputs
  back together in vector order (a piece's error is its case's).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kera.dtypes import DType
from kera.ir import Function, FunctionBuilder, loop
from keracheck.runners.verilator import _runtime_objects
from keracheck.target import BackendError, Inputs, Outputs
from keracheck.targets.verilog import (
    QUICK_BUILD_VECTORS,
    SPLIT_WORK,
    Batch,
    balance,
    check_design,
    cocotb_outputs,
    design_of,
    render_testbench,
    render_wrapper,
)
from keracheck.targets.verilog.batch import (
    ELAB_WEIGHT,
    EVAL_WEIGHT,
    Piece,
    elaboration,
    join_pieces,
    piece_case,
    split_heavy,
    weights,
    work,
)
from keracheck.targets.verilog.cocotb_bench import _words
from keracheck.targets.verilog.testbench import clocks_per_core, cxx_opt


def _copy() -> Function:
    """y = x on f32[2] (a wire), so its result words are its input words."""
    b = FunctionBuilder("copy")
    x = b.param("x", DType.F32, [2])
    return b.build(b.op("neg", b.op("neg", x)))


def _counter() -> Function:
    """i32, 10 trips of an add: a loop design (interval = latency = 21)."""
    b = FunctionBuilder("counter")
    x = b.param("x", DType.I32)
    return b.build(*loop(0, 10, [x], lambda i, c: [b.op("add", c[0], i)]))


def _readback(n: int, latency: int, interval: int, words: list[int]) -> dict[str, Any]:
    """What cocotb_stream reads back from a design that behaves as scheduled."""
    acc = [7 + i * interval for i in range(n)]
    return {
        "taken": f"{n:032b}",
        "recv": f"{n:032b}",
        "unknown": "0" * 32,
        "acc": [f"{a:032b}" for a in acc],
        "got": [f"{a + latency:032b}" for a in acc],
        "res": [f"{w:064b}" for w in words],
    }


def test_check_design_passes_a_run_as_scheduled() -> None:
    d = design_of(_counter())
    got = _readback(3, d.latency, d.interval, [5, 6, 7])
    assert check_design(d, 3, got) == [5, 6, 7]


BREAKS = {
    "observed latency 22 clocks (vector 1)": lambda g: g["got"].__setitem__(
        1, f"{7 + 21 + 22:032b}"
    ),
    "vector 2 taken 22 clocks after vector 1": lambda g: g["acc"].__setitem__(2, f"{7 + 43:032b}"),
    "2 of 3 vectors taken": lambda g: g.__setitem__("taken", f"{2:032b}"),
    "2 results for 3 vectors": lambda g: g.__setitem__("recv", f"{2:032b}"),
    "4 results for 3 vectors": lambda g: g.__setitem__("recv", f"{4:032b}"),
    "x/z on 2 clocks": lambda g: g.__setitem__("unknown", f"{2:032b}"),
    "result 1 holds x/z": lambda g: g["res"].__setitem__(1, "0" * 60 + "x010"),
}


@pytest.mark.parametrize("why", sorted(BREAKS))
def test_check_design_names_the_broken_property(why: str) -> None:
    d = design_of(_counter())
    got = _readback(3, d.latency, d.interval, [5, 6, 7])
    if why.startswith("vector 2"):  # keep its result on time, so the interval is what breaks
        got["got"][2] = f"{7 + 43 + d.latency:032b}"
    BREAKS[why](got)
    with pytest.raises(BackendError, match=why.replace("(", r"\(").replace(")", r"\)")):
        check_design(d, 3, got)


def test_cocotb_outputs_split_segments_of_one_design() -> None:
    fn = _copy()
    d = design_of(fn)
    rng = np.random.default_rng(1)
    first = {"x": rng.standard_normal((3, 2)).astype(np.float32)}
    second = {"x": rng.standard_normal((2, 2)).astype(np.float32)}
    batch = Batch.of([(fn, first), (fn, second)])
    words = [int(w, 16) for w in _words(d.inputs, [np.concatenate([first["x"], second["x"]])], 5)]
    got = _readback(5, d.latency, 1, words)
    (a,), (b,) = cocotb_outputs(batch, {"designs": [got]})
    assert np.array_equal(a.view(np.uint32), first["x"].view(np.uint32))
    assert np.array_equal(b.view(np.uint32), second["x"].view(np.uint32))


def test_batch_streams_a_designs_segments_back_to_back() -> None:
    fn, other = _copy(), _counter()
    xs = [np.arange(k * 2, dtype=np.float32).reshape(k, 2) + k for k in (3, 2)]
    batch = Batch.of(
        [(fn, {"x": xs[0]}), (other, {"x": np.arange(4, dtype=np.int32)}), (fn, {"x": xs[1]})]
    )
    assert batch.counts() == [5, 4]
    first, second = batch.design_inputs()
    # per vector the port's bus big-endian: element 1's bytes reversed, then element 0's
    assert first == np.concatenate(xs).view(np.uint8).reshape(5, 8)[:, ::-1].tobytes()
    assert second == np.arange(4, dtype=">i4").tobytes()
    tb = render_testbench(batch.designs)
    assert 'fopen("in_0.bin"' in tb and 'fopen("in_1.bin"' in tb and "run_1 = 1'b0" in tb


def test_wrapper_memories_are_a_power_of_two_deep() -> None:
    d = design_of(_copy())
    assert "d0_vec [0:127]" in render_wrapper([d], [100])
    assert "d0_vec [0:1]" in render_wrapper([d])  # no vectors: the smallest memory
    assert "d0_vec [0:63]" in render_wrapper([d], [64])


def test_verilator_optimises_by_clocks_per_core_not_vectors() -> None:
    few = Batch.of([(_copy(), {"x": np.zeros((64, 2), np.float32)})])
    assert cxx_opt(few) == "-O0"
    many = Batch.of([(_copy(), {"x": np.zeros((QUICK_BUILD_VECTORS + 1, 2), np.float32)})])
    assert cxx_opt(many) is None
    d = design_of(_counter())
    n = QUICK_BUILD_VECTORS // d.interval + 1  # few vectors, but each takes `interval` clocks
    looped = Batch.of([(_counter(), {"x": np.zeros(n, np.int32)})])
    assert clocks_per_core(looped) == n * d.interval + d.latency
    assert cxx_opt(looped) is None


def test_runtime_objects_come_from_the_classes_makefile(tmp_path: Path) -> None:
    mk = tmp_path / "Vtop_classes.mk"
    mk.write_text(
        "VM_GLOBAL_FAST += \\\n\tverilated \\\n\tverilated_timing \\\n\n"
        "VM_GLOBAL_SLOW += \\\n\tverilated_vcd_c \\\n\n"
        "VM_CLASSES_FAST += \\\n\tVtop \\\n"
    )
    assert _runtime_objects(mk) == ["verilated.o", "verilated_timing.o", "verilated_vcd_c.o"]
    assert _runtime_objects(tmp_path / "missing.mk") == []


def test_balance_splits_heavy_batches_by_work_keeping_a_function_together() -> None:
    heavy, light = _counter(), _copy()
    n = SPLIT_WORK // design_of(heavy).interval + 1  # over the threshold on its own
    cases: list[tuple[Function, Inputs]] = [
        (light, {"x": np.zeros((8, 2), np.float32)}),
        (heavy, {"x": np.zeros(n, np.int32)}),
        (light, {"x": np.zeros((8, 2), np.float32)}),
        (heavy, {"x": np.zeros(2, np.int32)}),
    ]
    assert work(*cases[1]) == (n * design_of(heavy).interval + design_of(heavy).latency) * max(
        1, sum(design_of(heavy).cores.values())
    )
    assert balance(cases, 2) == [[1, 3], [0, 2]]  # the heavy function's cases stay together
    assert balance(cases, 1) == [[0, 1, 2, 3]]
    assert balance(cases[:1], 2) == [[0]]  # little work: one simulation


def test_split_heavy_cuts_a_case_over_a_cpus_share_into_pieces_of_its_vectors() -> None:
    heavy, light = _counter(), _copy()
    n = SPLIT_WORK // design_of(heavy).interval + 1
    xs = np.arange(n, dtype=np.int32)
    cases: list[tuple[Function, Inputs]] = [
        (light, {"x": np.zeros((8, 2), np.float32)}),
        (heavy, {"x": xs}),
    ]
    pieces = split_heavy(cases, 2)
    assert pieces == [Piece(0), Piece(1, 0, (0, n // 2)), Piece(1, 1, (n // 2, n))]
    sub = [piece_case(cases, p) for p in pieces]
    assert sub[0][1] is cases[0][1]  # a whole case is passed on as it is
    assert np.array_equal(np.concatenate([sub[1][1]["x"], sub[2][1]["x"]]), xs)
    keys = [f"{f.fingerprint}/{p.part}" for (f, _), p in zip(sub, pieces, strict=True)]
    groups = balance(sub, 2, keys)
    assert sorted(i for g in groups for i in g) == [0, 1, 2]
    assert not any({1, 2} <= set(g) for g in groups)  # the two pieces simulate side by side
    assert split_heavy(cases, 1) == [Piece(0), Piece(1)]  # one CPU: nothing to gain
    assert split_heavy(cases[:1], 2) == [Piece(0)]  # little work: nothing cut
    outs: list[Outputs | Exception] = [
        [np.ones((8, 2), np.float32)],
        [xs[: n // 2]],
        [xs[n // 2 :]],
    ]
    joined = join_pieces(2, pieces, outs)
    assert joined[0] is outs[0] and not isinstance(joined[1], Exception)
    assert np.array_equal(joined[1][0], xs)
    err = BackendError("piece failed")
    assert join_pieces(2, pieces, [outs[0], outs[1], err])[1] is err


def test_a_design_is_weighed_by_its_core_instances_once_per_simulation() -> None:
    """Elaboration is per design, not per case: two cases of one function add their clocks
    but the design's instances once; a function that cannot be emitted weighs its cases only."""
    heavy, light = _counter(), _copy()
    cases: list[tuple[Function, Inputs]] = [
        (heavy, {"x": np.zeros(3, np.int32)}),
        (light, {"x": np.zeros((8, 2), np.float32)}),
        (heavy, {"x": np.zeros(5, np.int32)}),
    ]
    got = weights(cases, {"h": [0, 2], "l": [1]})
    cores = max(1, sum(design_of(heavy).cores.values()))
    assert got["h"] == work(*cases[0]) + work(*cases[2]) + ELAB_WEIGHT * cores
    assert got["l"] == work(*cases[1]) + ELAB_WEIGHT * max(1, sum(design_of(light).cores.values()))
    assert elaboration(heavy) == ELAB_WEIGHT * cores


def test_work_counts_each_core_evaluation_once_per_trip() -> None:
    """A float core in a loop body evaluates once per trip: 5 trips of a multiply weigh 5
    evaluations per vector on top of the core-clocks (an idle core still costs a clock)."""
    b = FunctionBuilder("square5")
    x = b.param("x", DType.F32)
    fn = b.build(*loop(0, 5, [x], lambda i, c: [b.op("mul", c[0], c[0])]))
    d = design_of(fn)
    assert sum(d.cores.values()) == 1 and d.loops[0]["trips"] == 5
    n = 3
    clocks = n * d.interval + d.latency
    assert work(fn, {"x": np.zeros(n, np.float32)}) == clocks + EVAL_WEIGHT * n * 5
