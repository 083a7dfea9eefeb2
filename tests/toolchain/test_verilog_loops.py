"""Loops and dynamic indexing on the Verilog back end (``docs/verilog-backend.md``, "Loops").

* Every graph of ``tests/loopgraphs.py`` runs through both targets -- ``verilog`` (cocotb +
  Icarus) and ``verilog-verilator`` -- and must equal the interpreter bit for bit; both targets
  also check the latency they observe against the design's.  Inputs come from keracheck's
  generator (special values, ``INT32_MIN``/``INT32_MAX`` among the i32 starts), few vectors:
  a loop module takes one vector per run of its loop (verlet: 501 clocks of 256 cores, about 6 s
  per vector on Icarus, so it gets 2).
* The latency a bench measures is ``trips * (body latency + 1) + 1`` for loops of different
  trip counts and body latencies (0 included), one of them nested.
* verlet's FSM design has one body's worth of cores, not trips x.
* Golden text of a small loop; ``verilator --lint-only -Wall`` clean for every design.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from loopgraphs import GRAPHS

from kera.backends.verilog import emit
from kera.dtypes import DType
from kera.interp import interpret
from kera.ir import Function, FunctionBuilder, Node, loop, loop_body, make_node
from kera_hdl import rtl_sources
from keracheck.inputs import generate
from keracheck.targets.verilog import (
    CocotbTarget,
    VerilatorTarget,
    clear_memo,
    design_of,
    render_testbench,
    render_wrapper,
    run_plain,
    write_inputs,
)
from keracheck.targets.verilog.batch import Batch

pytestmark = pytest.mark.toolchain

Inputs = dict[str, np.ndarray[Any, Any]]

#: vectors per graph (a loop design takes one vector per run of its loop)
VECTORS = {"verlet": 2, "serial_sum": 4}


def _edges() -> tuple[Function, Inputs]:
    """dynamic_2d at the extreme starts: every i32 start must clamp, never wrap."""
    fn = GRAPHS["dynamic_2d"]()
    edge = [-(1 << 31), (1 << 31) - 1, -1, 0, 1, 2, 3, 4, 5, 6, 1 << 30]
    rs, cs = np.meshgrid(np.array(edge, np.int32), np.array(edge, np.int32))
    n = rs.size
    rng = np.random.default_rng(5)
    return fn, {
        "x": rng.standard_normal((n, 6, 5)).astype(np.float32),
        "v": rng.standard_normal((n, 2, 3)).astype(np.float32),
        "r": rs.reshape(-1),
        "c": cs.reshape(-1),
    }


def _cases() -> list[tuple[str, Function, Inputs]]:
    out = []
    for name, build in GRAPHS.items():
        fn = build()
        out.append((name, fn, generate(fn, VECTORS.get(name, 8), 7)))
    return [*out, ("dynamic_2d edges", *_edges())]


def _bits(a: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return a if a.dtype == np.bool_ else a.view(f"<u{a.dtype.itemsize}")


def _problems(cases: list[tuple[str, Function, Inputs]], outs: list[Any]) -> list[str]:
    problems = []
    for (name, fn, inputs), got in zip(cases, outs, strict=True):
        if isinstance(got, Exception):
            problems.append(f"{name}: {got}")
            continue
        for k, (g, w) in enumerate(zip(got, interpret(fn, inputs), strict=True)):
            if g.shape != w.shape or not np.array_equal(_bits(g), _bits(w)):
                problems.append(f"{name} result {k}: got {_bits(g)} want {_bits(w)}")
    return problems


def _need(target: Any) -> None:
    if reason := target.available():
        pytest.skip(reason)


@pytest.mark.parametrize("target", [VerilatorTarget, CocotbTarget], ids=["verilator", "cocotb"])
def test_loop_graphs_match_interpreter(target: Callable[[], Any]) -> None:
    backend = target()
    _need(backend)
    cases = _cases()
    outs = backend.run_many([(fn, inputs) for _, fn, inputs in cases])
    problems = _problems(cases, outs)
    assert not problems, "\n".join(problems)


def test_unrolled_loops_match_interpreter() -> None:
    """``emit(fn, unroll=N)``: small loops become one pipelined datapath (no FSM, no ready)."""
    from keracheck.runners.iverilog import Iverilog

    if reason := Iverilog().available():
        pytest.skip(reason)
    fns = {n: GRAPHS[n]() for n in ("running_max", "nested_sum", "index_as_data")}
    cases = [(n, fn, generate(fn, 8, 3)) for n, fn in fns.items()]
    designs = [emit(fn, top=f"kera_unrolled_{n}", unroll=5000) for n, fn, _ in cases]
    assert all(d.interval == 1 and not d.loops for d in designs)
    outs = _run_plain_designs(designs, [(fn, inputs) for _, fn, inputs in cases])
    problems = _problems(cases, outs)
    assert not problems, "\n".join(problems)


def _run_plain_designs(designs: list[Any], cases: list[tuple[Function, Inputs]]) -> list[Any]:
    """run_plain on Icarus with these designs in place of the memoised ones."""
    from keracheck.targets.verilog import batch

    clear_memo()
    try:
        for d, (fn, _) in zip(designs, cases, strict=True):
            batch._DESIGNS[fn.fingerprint] = d
        return list(run_plain(cases, "icarus"))
    finally:
        clear_memo()


# ---------------------------------------------------------------------------- latency


def _counter() -> Function:
    """i32, body latency 1 (an add), 10 trips."""
    b = FunctionBuilder("counter")
    x = b.param("x", DType.I32)
    return b.build(*loop(0, 10, [x], lambda i, c: [b.op("add", c[0], i)]))


def _swap() -> Function:
    """Body latency 0 (the results are the carried values, swapped), 5 trips."""
    b = FunctionBuilder("swap")
    x, y = b.param("x", DType.F32, [2]), b.param("y", DType.F32, [2])
    return b.build(*loop(0, 5, [x, y], lambda i, c: [c[1], c[0]]))


def _div() -> Function:
    """f64 division in the body (latency 16, plus a dynamic slice), 3 trips from -1."""
    b = FunctionBuilder("div")
    x, t = b.param("x", DType.F64, [3]), b.param("t", DType.F64)

    def body(i: Node, c: list[Node]) -> list[Node]:
        idx = make_node("reshape", [i], {"shape": [1]})
        pick = b.op("dynamic_slice", x, idx, size=[1])
        return [b.op("div", c[0], b.op("reshape", pick, shape=[]))]

    return b.build(*loop(-1, 3, [t], body))


LATENCY_CASES: dict[str, Callable[[], Function]] = {
    "counter": _counter,
    "swap": _swap,
    "div": _div,
    "nested_sum": GRAPHS["nested_sum"],
}


def test_latency_is_the_documented_formula() -> None:
    """trips * (body latency + 1) + 1, the body latency being that of the body's datapath
    scheduled on its own (as a function: the same ASAP schedule)."""
    for name, build in LATENCY_CASES.items():
        fn = build()
        d = emit(fn)
        (lp,) = d.loops
        assert d.latency == lp["latency"] == lp["trips"] * (lp["body_latency"] + 1) + 1, name
        assert d.interval == d.latency, name  # the loop is the whole function
        if name != "swap":  # a function's latency is at least 1; swap's body is wires only
            assert lp["body_latency"] == emit(loop_body(fn.results[0])).latency, name
    assert emit(_swap()).loops[0]["body_latency"] == 0
    assert emit(_div()).loops[0]["body_latency"] == 1 + 16  # dynamic slice mux, kf_fdiv f64
    nested = emit(GRAPHS["nested_sum"]()).loops[0]
    assert (nested["trips"], nested["body_latency"], nested["latency"]) == (3, 2 + 21, 73)


def test_bench_measures_the_documented_latency() -> None:
    """The plain bench on Icarus reports first valid_in to first valid_out per design."""
    from keracheck.runners.iverilog import Iverilog

    if reason := Iverilog().available():
        pytest.skip(reason)
    fns = [build() for build in LATENCY_CASES.values()]
    batch = Batch.of([(fn, generate(fn, 3, 11)) for fn in fns])
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        tb = work / "kera_tb.v"
        tb.write_text(render_testbench(batch.designs))
        write_inputs(work, batch)
        sources = [tb, *batch.write_design_files(work), *rtl_sources()]
        Iverilog().run(Iverilog().compile(sources, "kera_tb", work / "tb.vvp"), cwd=work)
        measured = dict(line.split() for line in (work / "lat.txt").read_text().splitlines())
    want = {"counter": 21, "swap": 6, "div": 3 * 18 + 1, "nested_sum": 73}
    for j, name in enumerate(LATENCY_CASES):
        assert int(measured[str(j)]) == want[name] == batch.designs[j].latency, name


# ---------------------------------------------------------------------------- size, text


def test_verlet_has_one_body_of_cores() -> None:
    d = emit(GRAPHS["verlet"]())
    # the body: x + v*dt and v + (-x)*dt on 64 lanes, one fmul and one fadd each
    assert d.cores == {"kf_fadd(EW=8,MW=23,SUB=0)": 128, "kf_fmul(EW=8,MW=23)": 128}
    assert d.latency == d.interval == 100 * (4 + 1) + 1
    assert d.report()["loops"][0]["core_instances"] == 256  # unrolled: 100 x 256


def _golden_loop() -> Function:
    """``for i in 0..4 with (s = 0) { s + x[i] }`` on f32: a dynamic slice by the index, a
    capture, the FSM."""
    b = FunctionBuilder("golden_loop")
    x = b.param("x", DType.F32, [4])

    def body(i: Node, c: list[Node]) -> list[Node]:
        at = make_node("reshape", [i], {"shape": [1]})
        xi = b.op("reshape", b.op("dynamic_slice", x, at, size=[1]), shape=[])
        return [b.op("add", c[0], xi)]

    return b.build(*loop(0, 4, [b.const(0.0, DType.F32)], body))


def test_golden_loop_text(golden: Callable[[str, str], None]) -> None:
    d = emit(_golden_loop())
    golden("verilog/golden_loop.v", d.text)
    assert d.latency == 4 * (3 + 1) + 1


def test_loop_designs_lint_clean(tmp_path: Path) -> None:
    from keracheck.runners.verilator import Verilator

    _need(Verilator())
    fns = [*(b() for b in GRAPHS.values()), _golden_loop(), _swap(), _div(), _counter()]
    designs = [design_of(fn) for fn in fns]
    files = []
    for d in designs:
        files.append(tmp_path / f"{d.top}.v")
        files[-1].write_text(d.text)
        assert not Verilator().lint([files[-1], *rtl_sources()], d.top), d.function
    wrapper = tmp_path / "kera_cocotb_top.v"
    wrapper.write_text(render_wrapper(designs))
    assert not Verilator().lint([wrapper, *files, *rtl_sources()], "kera_cocotb_top")
