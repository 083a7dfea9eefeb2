"""The Verilog targets' benches in the simulators (``docs/verilog-backend.md``, "How to run").

* One batch holding a loop design twice (two segments back to back), a pipelined design and a
  second loop of another length: the cocotb bench, the plain bench on Icarus and the Verilator
  target all equal the interpreter (every design streams at once, each on its own gated clock,
  so designs finish at different times).
* A design whose schedule is wrong by one clock fails both benches: latency (the cocotb bench
  checks every result, the plain bench the first) and, on the cocotb bench, the interval (the
  clocks between two vectors taken: the ready handshake's timing).
* A Verilator build compiles the Verilator runtime once per machine: the next build, of
  another model, copies it from the cache instead of compiling it again.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kera.backends.verilog import VerilogDesign
from kera.dtypes import DType
from kera.interp import interpret
from kera.ir import Function, FunctionBuilder, loop
from keracheck.inputs import generate
from keracheck.runners.iverilog import Iverilog
from keracheck.runners.sealed import seal
from keracheck.runners.verilator import Verilator
from keracheck.target import BackendError
from keracheck.targets.verilog import (
    CocotbTarget,
    VerilatorTarget,
    batch,
    clear_memo,
    design_of,
    run_cocotb,
    run_plain,
)

pytestmark = pytest.mark.toolchain

Inputs = dict[str, np.ndarray[Any, Any]]


def _counter(trips: int) -> Function:
    """i32, ``trips`` trips of an add (body latency 1): interval = latency = 2 * trips + 1."""
    b = FunctionBuilder(f"counter{trips}")
    x = b.param("x", DType.I32)
    return b.build(*loop(0, trips, [x], lambda i, c: [b.op("add", c[0], i)]))


def _pipelined() -> Function:
    b = FunctionBuilder("fma_pair")
    x, y = b.param("x", DType.F32, [2]), b.param("y", DType.F32, [2])
    return b.build(b.op("fma", x, y, x), b.op("mul", x, y))


def _cases() -> list[tuple[Function, Inputs]]:
    long, short, flat = _counter(10), _counter(3), _pipelined()
    return [
        (long, generate(long, 3, 1)),
        (flat, generate(flat, 9, 2)),
        (short, generate(short, 4, 3)),
        (long, generate(long, 2, 4)),
    ]


def _bits(a: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return a if a.dtype == np.bool_ else a.view(f"<u{a.dtype.itemsize}")


def _agree(cases: list[tuple[Function, Inputs]], outs: list[Any]) -> None:
    for (fn, inputs), got in zip(cases, outs, strict=True):
        assert not isinstance(got, Exception), f"{fn.name}: {got}"
        for g, w in zip(got, interpret(fn, inputs), strict=True):
            assert np.array_equal(_bits(np.asarray(g)), _bits(w)), fn.name


def _need(tool: Any) -> None:
    if reason := tool.available():
        pytest.skip(reason)


@pytest.mark.parametrize("bench", ["cocotb", "icarus-plain", "verilator"])
def test_designs_of_different_lengths_share_one_simulation(bench: str, tmp_path: Path) -> None:
    cases = _cases()
    if bench == "cocotb":
        _need(CocotbTarget())
        outs: list[Any] = list(run_cocotb(cases, cache=tmp_path))
    elif bench == "icarus-plain":
        _need(Iverilog())
        outs = list(run_plain(cases, "icarus"))
    else:
        _need(VerilatorTarget())
        outs = list(run_plain(cases, "verilator", cache=tmp_path))
    _agree(cases, outs)


def _claim(fn: Function, make: Callable[[VerilogDesign], VerilogDesign]) -> None:
    """Make the memoised design of fn claim another schedule."""
    batch._DESIGNS[fn.fingerprint] = make(design_of(fn))


WRONG: dict[str, tuple[Callable[[VerilogDesign], VerilogDesign], str]] = {
    "latency": (
        lambda d: dataclasses.replace(d, latency=d.latency + 1),
        "observed latency 21 clocks",
    ),
    "interval": (
        lambda d: dataclasses.replace(d, interval=d.interval + 1),
        "vector 1 taken 21 clocks after vector 0",
    ),
}


@pytest.mark.parametrize("wrong", sorted(WRONG))
def test_cocotb_bench_fails_a_wrong_schedule(wrong: str, tmp_path: Path) -> None:
    _need(CocotbTarget())
    fn = _counter(10)
    make, message = WRONG[wrong]
    clear_memo()
    try:
        _claim(fn, make)
        with pytest.raises(BackendError, match=message):
            run_cocotb([(fn, generate(fn, 3, 5))], cache=tmp_path)
    finally:
        clear_memo()


def test_plain_bench_fails_a_wrong_latency() -> None:
    _need(Iverilog())
    fn = _counter(3)
    clear_memo()
    try:
        _claim(fn, WRONG["latency"][0])
        with pytest.raises(BackendError, match="observed latency 7 clocks"):
            run_plain([(fn, generate(fn, 2, 5))], "icarus")
    finally:
        clear_memo()


def test_verilator_runtime_is_compiled_once(tmp_path: Path) -> None:
    _need(Verilator())
    cache = tmp_path / "cache"

    def build(k: int) -> Path:
        src = tmp_path / f"top{k}.v"
        src.write_text(f"module top; initial begin #{k}; $finish; end endmodule\n")
        return Verilator().build([src], "top", cache=cache, cxx_opt="-O0")

    first = build(1)
    (runtime,) = (cache / "verilator").glob("runtime-*")
    kept = runtime / "verilated.o"
    assert kept.read_bytes() == (first.parent / "verilated.o").read_bytes()
    # mark the kept copy (bytes past an ELF object's end are ignored by the linker)
    kept.write_bytes(kept.read_bytes() + b"keracheck-kept-runtime")
    seal(kept)
    second = build(2)
    assert (second.parent / "verilated.o").read_bytes().endswith(b"keracheck-kept-runtime")
    Verilator().run(second, cwd=tmp_path)  # linked with it, and it runs


def test_the_plain_icarus_measuring_plugin_runs_as_its_docstring_says(tmp_path: Path) -> None:
    """``bench/plain_icarus.py`` (issue 20's cocotb-cost figure): the command in its docstring,
    on one corpus file, agrees with ref."""
    if reason := Iverilog().available():
        pytest.skip(reason)
    root = Path(__file__).resolve().parents[2]
    plugin = root / "bench" / "plain_icarus.py"
    assert "--backend-plugin bench/plain_icarus.py:PlainIcarus" in plugin.read_text()
    argv = [sys.executable, "-m", "keracheck.cli", "run", "corpora/bitwise.kera", "--no-cache"]
    argv += ["-q", "--targets", "ref", "--backend-plugin", "bench/plain_icarus.py:PlainIcarus"]
    env = dict(os.environ, KERACHECK_CACHE=str(tmp_path))
    proc = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert " 0 diverge, 0 error, 0 skipped" in proc.stdout + proc.stderr
