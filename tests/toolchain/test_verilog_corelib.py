"""Verilator builds with the clocked cores linked in as per-machine libraries
(``keracheck.targets.verilog.corelib``, ``docs/verilog-backend.md``, "How to run").

* Every clocked core kind (add, sub, mul, fma, div, sqrt, round, float -> int, int -> float,
  float -> float, integer div and rem), a loop design and a pipelined one, in one batch built
  with the libraries, equal the interpreter bit for bit (special values included, as
  ``keracheck.inputs.generate`` draws them).
* A library is built once per machine: a second batch needing the same core reuses its object
  (not rebuilt), and a damaged object is rebuilt rather than linked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kera.dtypes import DType
from kera.interp import interpret
from kera.ir import Function, FunctionBuilder, loop
from keracheck.inputs import generate
from keracheck.targets.verilog import VerilatorTarget, corelib, design_of, run_plain

pytestmark = pytest.mark.toolchain

Inputs = dict[str, np.ndarray[Any, Any]]


def _every_clocked_core() -> Function:
    b = FunctionBuilder("clocked_cores")
    x, y, z = (b.param(n, DType.F32, [2]) for n in "xyz")
    i, j = b.param("i", DType.I32, [2]), b.param("j", DType.I32, [2])
    return b.build(
        b.op("add", x, y),
        b.op("sub", x, y),
        b.op("fma", x, y, z),
        b.op("div", x, b.op("mul", y, z)),
        b.op("sqrt", x),
        b.op("floor", y),
        b.op("convert", x, to=DType.I32),
        b.op("convert", i, to=DType.F32),
        b.op("convert", z, to=DType.F64),
        b.op("div", i, j),
        b.op("rem", i, j),
    )


def _counter(trips: int) -> Function:
    b = FunctionBuilder(f"counter{trips}")
    x = b.param("x", DType.F32)
    return b.build(*loop(0, trips, [x], lambda k, c: [b.op("add", c[0], c[0])]))


def _bits(a: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return a if a.dtype == np.bool_ else a.view(f"<u{a.dtype.itemsize}")


def _need_verilator() -> None:
    if reason := VerilatorTarget().available():
        pytest.skip(reason)


def test_every_clocked_core_as_a_library_equals_the_interpreter(tmp_path: Path) -> None:
    _need_verilator()
    cores, counter = _every_clocked_core(), _counter(5)
    cases: list[tuple[Function, Inputs]] = [
        (cores, generate(cores, 24, 1)),
        (counter, generate(counter, 3, 2)),
        (cores, generate(cores, 8, 3)),
    ]
    libs = corelib.libs_of([design_of(fn) for fn, _ in cases])
    assert {lib.module for lib in libs} == corelib.LIB_CORES
    outs = run_plain(cases, "verilator", cache=tmp_path)
    for (fn, inputs), got in zip(cases, outs, strict=True):
        for g, w in zip(got, interpret(fn, inputs), strict=True):
            assert np.array_equal(_bits(np.asarray(g)), _bits(w)), fn.name
    built = sorted((tmp_path / "verilator").glob("corelib-*/kfl_*.o"))
    assert sorted(p.stem for p in built) == sorted(lib.name for lib in libs)


def test_a_library_is_built_once_and_rebuilt_when_damaged(tmp_path: Path) -> None:
    _need_verilator()
    (lib,) = [lib for lib in corelib.libs_of([design_of(_counter(2))])]
    first = corelib.build(lib, tmp_path)
    stamp = first.obj.stat().st_mtime_ns
    # another design using the same core: the library is reused as it is
    outs = run_plain([(_counter(3), generate(_counter(3), 2, 0))], "verilator", cache=tmp_path)
    assert first.obj.stat().st_mtime_ns == stamp and len(outs) == 1
    good = first.obj.read_bytes()
    first.obj.write_bytes(good[: len(good) // 2])  # a truncated object is not linked
    again = corelib.build(lib, tmp_path)
    assert again.obj.read_bytes() == good
