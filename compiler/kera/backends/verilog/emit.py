"""The entry points ``emit(fn)``, ``emit_graph`` and ``write``, and what one element costs for
the loop shared with PTX (``elementmaps.unroll_function``).

Every tensor element becomes one scalar net: a parameter element is a slice of its input port,
a constant or ``iota`` element a constant cell, data movement is wiring, and every other
element is built by its op's row of :data:`kera.backends.verilog.lower.LOWER` — or folded with
``kera.semantics`` when all its operands are constants (``netlist._fold``).  The netlist is
then scheduled and rendered (``render.py``).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kera.backends.elementmaps import unroll_function
from kera.backends.verilog.lower import LOWER, canonical
from kera.backends.verilog.netlist import Cell, Elems, Netlist, VerilogEmitError, _fold, width
from kera.backends.verilog.render import Port, VerilogDesign, _Renderer, module_name, port_name
from kera.dtypes import DType
from kera.files import write_atomic
from kera.ir import Function, Graph, Node
from kera.ops import Op
from kera_hdl import rtl_sources  # type: ignore[import-not-found, unused-ignore]


@dataclass(frozen=True)
class _Elements:
    """What one element costs (``elementmaps.Emitter``): a net of :class:`Netlist`."""

    nl: Netlist
    ports: dict[int, str]

    def load(self, node: Node) -> Elems:
        w, port = width(node.dtype), self.ports[id(node)]
        return [self.nl.add(Cell("in", w, port=port, lo=e * w)) for e in range(node.type.size)]

    def constant(self, dt: DType, bits: int) -> int:
        return self.nl.const(width(dt), bits)

    def element(self, node: Node, operands: Sequence[int]) -> int:
        lower = LOWER.get(node.op)
        if lower is None:
            raise VerilogEmitError(f"the Verilog back end has no lowering for '{node.op}'")
        return _fold(self.nl, node, lower, list(operands))

    def binary(self, node: Node, op: Op, left: int, right: int) -> int:
        return _fold(self.nl, node, LOWER[op], [left, right], op)

    def finish(self, node: Node, root: int, n: int) -> int:
        return canonical(self.nl, node.dtype, root) if n == 1 and node.dtype.is_float else root


def emit(fn: Function, top: str | None = None) -> VerilogDesign:
    """Lower, schedule and render one function (see the package docstring)."""
    nl = Netlist()
    ports = {id(p): port_name(i, str(p.attr("name"))) for i, p in enumerate(fn.params)}
    results = unroll_function(fn, _Elements(nl, ports))
    inputs = tuple(Port(ports[id(p)], p.dtype, p.shape) for p in fn.params)
    outputs = tuple(Port(f"r{k}", r.dtype, r.shape) for k, r in enumerate(fn.results))
    return _Renderer(nl, results, inputs, outputs).design(fn.name, top or module_name(fn.name))


def emit_graph(graph: Graph) -> list[VerilogDesign]:
    return [emit(fn) for fn in graph.functions.values()]


def write(graph: Graph, output: str | None) -> None:
    """``kerac emit --target verilog FILE -o DIR``: one ``<top>.v`` per exported function,
    the library sources under ``DIR/rtl`` and the schedules in ``DIR/schedule.json``."""
    designs = emit_graph(graph)
    if output is None:
        for d in designs:
            print(d.text, end="")
        return
    out = Path(output)
    (out / "rtl").mkdir(parents=True, exist_ok=True)
    for d in designs:
        write_atomic(out / f"{d.top}.v", d.text)
    for src in rtl_sources():
        shutil.copyfile(src, out / "rtl" / src.name)
    report = [d.report() for d in designs]
    write_atomic(out / "schedule.json", json.dumps(report, indent=2) + "\n")
