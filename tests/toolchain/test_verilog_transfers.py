"""Memory spaces and transfers on the Verilog back end (``docs/verilog-backend.md``).

* every graph of ``tests/spacegraphs.py`` through both targets -- ``verilog`` (cocotb +
  Icarus) and ``verilog-verilator`` -- in one simulation per target at ``-O0``, which must
  equal the interpreter bit for bit; on ``verilog`` the same simulation also runs the ``-O2``
  graphs, which must equal ``-O0``;
* a transfer is a wire: a design with transfers has the cores, registers and latency of the
  same graph with each transfer replaced by its operand (no cell, no cycle);
* the golden text of one small transfer; ``verilator --lint-only -Wall`` clean.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from spacegraphs import GRAPHS, golden_transfer

import kera.passes
from kera.backends.verilog import emit
from kera.interp import interpret
from kera.ir import Function, Node
from kera.ops import Op
from kera_hdl import rtl_sources
from keracheck.inputs import generate
from keracheck.targets.verilog import CocotbTarget, VerilatorTarget

pytestmark = pytest.mark.toolchain

VECTORS = 3
TARGETS = {"verilator": (VerilatorTarget, False), "cocotb": (CocotbTarget, True)}


def _need(target: Any) -> None:
    if reason := target.available():
        pytest.skip(reason)


def _bits(a: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return a if a.dtype == np.bool_ else a.view(f"<u{a.dtype.itemsize}")


def _check(name: str, want: Any, got: Any, what: str) -> list[str]:
    for run in (want, got):
        if isinstance(run, Exception):
            return [f"{name} ({what}): {run}"]
    return [
        f"{name}: result {k} differs ({what})"
        for k, (g, w) in enumerate(zip(got, want, strict=True))
        if g.shape != w.shape or not np.array_equal(_bits(g), _bits(w))
    ]


@pytest.mark.parametrize("target", list(TARGETS))
def test_transfer_graphs_match_interpreter_and_o2(target: str) -> None:
    make, with_o2 = TARGETS[target]
    backend = make()
    _need(backend)
    cases = []
    for name, build in GRAPHS.items():
        fn = build()
        o2 = kera.passes.optimize(fn, kera.passes.pipeline(2)).function
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


def _without_transfers(fn: Function) -> Function:
    """``fn`` with every transfer replaced by its operand (no effects left)."""
    new: dict[int, Node] = {}
    for n in fn.nodes():
        if n.op is Op.TRANSFER:
            new[id(n)] = new[id(n.inputs[0])]
            continue
        ins = tuple(new.get(id(i), i) for i in n.inputs)
        new[id(n)] = n if ins == n.inputs else Node(n.op, n.type, ins, n.attr_items)
    return Function(fn.name, fn.params, [new[id(r)] for r in fn.results])


@pytest.mark.parametrize("name", ["round_trip", "identical_transfers", "bool_and_int"])
def test_a_transfer_is_a_wire(name: str) -> None:
    fn = GRAPHS[name]()
    moved, plain = emit(fn, top="kera_t"), emit(_without_transfers(fn), top="kera_t")
    assert moved.report() == plain.report()


def test_golden_transfer_text(golden: Callable[[str, str], None]) -> None:
    golden("verilog/transfer_moved.v", emit(golden_transfer()).text)


def test_transfer_designs_lint_clean(tmp_path: Path) -> None:
    from keracheck.runners.verilator import Verilator

    _need(Verilator())
    for name, build in GRAPHS.items():
        d = emit(build())
        path = tmp_path / f"{d.top}.v"
        path.write_text(d.text)
        assert not Verilator().lint([path, *rtl_sources()], d.top), name
