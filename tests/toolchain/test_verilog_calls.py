"""Calls on the Verilog back end (``docs/verilog-backend.md``, "Calls").

* Every graph of ``tests/callgraphs.py`` and the PTX tests' call edge cases (a call in a loop
  swapping the carried values, results that are parameters, loop -> call -> loop -> call) runs
  through both targets -- ``verilog`` (cocotb + Icarus) and ``verilog-verilator`` -- in one
  simulation per target at -O0 (calls, lowered by the back end), which must equal the
  interpreter bit for bit; on ``verilog`` the same simulation also runs the -O2 graphs (the
  ``inline`` pass's expansion, then the rest of the pipeline), which must equal -O0.  Both
  targets also check the latency they observe against the design's schedule.  Few vectors:
  the loop designs take one vector per run of their loop.
* A call adds nothing to the schedule: its callee's cells join the caller's datapath (or a
  loop body's), so the design has the latency, interval, cores, registers and loop reports of
  the same graph with its calls inlined, and no module of its own.
* With ``emit(fn, unroll=N)`` a call in a loop body is copied with each trip (Icarus bench).
* Golden text of one small call; ``verilator --lint-only -Wall`` clean for every design.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from callgraphs import GRAPHS
from test_ptx_calls import EDGES, golden_call
from test_verilog_loops import _run_plain_designs

import kera.passes
from kera.backends.verilog import emit
from kera.interp import interpret
from kera.ir import Function
from kera.ops import Op
from kera_hdl import rtl_sources
from keracheck.inputs import generate
from keracheck.targets.verilog import CocotbTarget, VerilatorTarget

pytestmark = pytest.mark.toolchain

Inputs = dict[str, np.ndarray[Any, Any]]
ALL: dict[str, Callable[[], Function]] = {**GRAPHS, **EDGES}

#: vectors per graph: enough for special values in every lane, few for the loop designs
VECTORS = 3


def _inlined(fn: Function) -> Function:
    """``fn`` with only its calls expanded (the ``inline`` pass alone: no folding, no CSE)."""
    return kera.passes.optimize(fn, kera.passes.resolve(["inline"])).function


def _bits(a: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return a if a.dtype == np.bool_ else a.view(f"<u{a.dtype.itemsize}")


def _differing(got: list[Any], want: list[Any]) -> list[int]:
    """The indices of the results whose bits differ."""
    return [
        k
        for k, (g, w) in enumerate(zip(got, want, strict=True))
        if g.shape != w.shape or not np.array_equal(_bits(g), _bits(w))
    ]


def _need(target: Any) -> None:
    if reason := target.available():
        pytest.skip(reason)


#: per target, whether the -O2 graphs join its simulation: Verilator's build time grows with
#: the designs (its -O0 run is the check of its own), Icarus' barely
TARGETS = {"verilator": (VerilatorTarget, False), "cocotb": (CocotbTarget, True)}


@pytest.mark.parametrize("target", list(TARGETS))
def test_call_graphs_match_interpreter_and_o2(target: str) -> None:
    make, with_o2 = TARGETS[target]
    backend = make()
    _need(backend)
    cases = []
    for name, build in ALL.items():
        fn = build()
        assert Op.CALL in fn.ops_used(), name
        o2 = kera.passes.optimize(fn, kera.passes.pipeline(2)).function
        assert Op.CALL not in o2.ops_used(), name
        cases.append((name, fn, o2, generate(fn, VECTORS, 7)))
    runs = [(fn, xs) for _, fn, _, xs in cases]
    runs += [(o2, xs) for _, _, o2, xs in cases] if with_o2 else []
    outs = backend.run_many(runs)
    problems = []
    for j, (name, fn, _, xs) in enumerate(cases):
        problems += _check(name, interpret(fn, xs), outs[j], "ref")
        if with_o2:
            problems += _check(name, outs[j], outs[len(cases) + j], "-O0 vs -O2")
    assert not problems, "\n".join(problems)


def _check(name: str, want: Any, got: Any, what: str) -> list[str]:
    """What differs between two runs' results (either may be a run's error)."""
    for run in (want, got):
        if isinstance(run, Exception):
            return [f"{name} ({what}): {run}"]
    return [f"{name}: result {k} differs ({what})" for k in _differing(got, want)]


@pytest.mark.parametrize("name", list(ALL))
def test_a_call_joins_the_callers_schedule(name: str) -> None:
    """Same latency, interval, cores, registers and loops as the graph with its calls inlined
    (for these graphs the expansion merges nothing, so the two netlists hold the same cells)."""
    fn = ALL[name]()
    calls, inlined = emit(fn, top="kera_t"), emit(_inlined(fn), top="kera_t")
    assert calls.report() == inlined.report()
    assert calls.text.count("\nmodule ") == inlined.text.count("\nmodule ")  # no call module


def test_call_shapes() -> None:
    """Two calls are two copies of the callee's cores; a call in a loop body is part of the
    body's datapath (its latency part of the body's); a call is no FSM: without loops the
    design takes one vector per clock."""
    d = emit(GRAPHS["sum_and_product"]())
    assert d.interval == 1 and not d.loops
    # 8 lanes: per call one fmul, one fadd, one fsub; the caller's sub and mul
    assert d.cores == {
        "kf_fadd(EW=8,MW=23,SUB=0)": 2 * 8,
        "kf_fadd(EW=8,MW=23,SUB=1)": 2 * 8 + 8,
        "kf_fmul(EW=8,MW=23)": 2 * 8 + 8,
    }
    (lp,) = emit(GRAPHS["call_in_loop"]()).loops
    assert lp["core_instances"] == 4 + 4 + 1  # the caller's fmul, the callee's fadd and i2f
    assert lp["latency"] == lp["trips"] * (lp["body_latency"] + 1) + 1
    with_loop = emit(GRAPHS["callee_with_loop"]())
    assert len(with_loop.loops) == 2  # one instance per call, of one loop module
    assert with_loop.text.count("\nmodule kera_callee_with_loop_loop0 (") == 1


def test_calls_in_unrolled_loops_match_interpreter() -> None:
    """``emit(fn, unroll=N)``: a loop body holding a call is copied once per trip, each copy
    with its own copy of the callee on that trip's values (Icarus plain bench)."""
    from keracheck.runners.iverilog import Iverilog

    _need(Iverilog())
    names = ("call_in_loop", "swap_in_loop", "deep_regions")
    cases = [(n, ALL[n](), generate(ALL[n](), 4, 3)) for n in names]
    designs = [emit(fn, top=f"kera_unrolled_{n}", unroll=5000) for n, fn, _ in cases]
    assert all(d.interval == 1 and not d.loops for d in designs)
    outs = _run_plain_designs(designs, [(fn, xs) for _, fn, xs in cases])
    problems = []
    for (name, fn, xs), got in zip(cases, outs, strict=True):
        problems += _check(name, interpret(fn, xs), got, "ref, unrolled")
    assert not problems, "\n".join(problems)


def test_golden_call_text(golden: Callable[[str, str], None]) -> None:
    d = emit(golden_call())
    golden("verilog/call_twice.v", d.text)
    assert d.latency == emit(_inlined(golden_call())).latency


def test_call_designs_lint_clean(tmp_path: Path) -> None:
    from keracheck.runners.verilator import Verilator

    _need(Verilator())
    for name, build in ALL.items():
        d = emit(build())
        path = tmp_path / f"{d.top}.v"
        path.write_text(d.text)
        assert not Verilator().lint([path, *rtl_sources()], d.top), name
