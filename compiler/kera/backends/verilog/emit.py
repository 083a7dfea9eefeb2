"""The entry points ``emit(fn)``, ``emit_graph`` and ``write``, and what one element costs for
the loop shared with PTX (``elementmaps.unroll_function``).

Every tensor element becomes one scalar net: a parameter element is a slice of its input port,
a constant or ``iota`` element a constant cell, data movement is wiring, and every other
element is built by its op's row of :data:`kera.backends.verilog.lower.LOWER`, even when all
its operands are constant cells: the back end evaluates no op (folding is the ``fold`` pass's,
once, at ``-O1`` and up; ``docs/verilog-backend.md``).  The ops
``elementmaps`` has no static element map for are rows of :data:`NODES`, lowered a whole node
at a time: dynamic indexing (``dynamic.py``), loop groups (one instance of a loop module
per group, ``loop.py``; the body is unrolled here into its own netlist by the same walk,
:func:`unroll_region`) and call groups (the callee unrolled by that walk into the caller's
own netlist, its parameters bound to the operands' nets: :func:`_call`).  The netlist is then
scheduled and rendered (``render.py``).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kera.backends.elementmaps import supported, unroll_node
from kera.backends.verilog.dynamic import dynamic_slice, dynamic_update_slice
from kera.backends.verilog.loop import render_loop
from kera.backends.verilog.lower import LOWER, canonical
from kera.backends.verilog.netlist import (
    Cell,
    Elems,
    LoopModule,
    Netlist,
    VerilogEmitError,
    width,
)
from kera.backends.verilog.render import Port, VerilogDesign, _Renderer, module_name, port_name
from kera.dtypes import DType
from kera.files import write_atomic
from kera.ir import Function, Graph, Node, loop_body, loop_group
from kera.ops import Op
from kera_hdl import rtl_sources  # type: ignore[import-not-found, unused-ignore]


@dataclass
class _Loops:
    """The loop modules of one design, by (body, lo, trips): identical loops share one."""

    top: str
    unroll: int = 0  # see emit()
    modules: dict[tuple[bytes, int, int], LoopModule] = field(default_factory=dict)
    count: int = 0

    def unrolls(self, node: Node) -> bool:
        return self.unroll > 0 and node.int_attr("trips") * loop_body(node).work <= self.unroll

    def module(self, node: Node) -> LoopModule:
        body, lo, trips = loop_body(node), node.int_attr("lo"), node.int_attr("trips")
        key = (body.region_hash, lo, trips)
        if key not in self.modules:
            name = f"{self.top}_loop{self.count}"
            self.count += 1
            self.modules[key] = self._build(name, body, lo, trips)
        return self.modules[key]

    def _build(self, name: str, body: Function, lo: int, trips: int) -> LoopModule:
        nl = Netlist()
        k = len(body.results)
        regs = ["idx", *(f"cr{j}" for j in range(k))]
        regs += [f"cp{j}" for j in range(len(body.params) - 1 - k)]
        results = unroll_region(
            body, _Elements(nl, dict(zip(map(id, body.params), regs, strict=True)), self)
        )
        ports = tuple(Port(f"p{j}", p.dtype, p.shape) for j, p in enumerate(body.params[1:]))
        return render_loop(nl, results, name, ports, lo, trips)


@dataclass(frozen=True)
class _Elements:
    """What one element costs (``elementmaps.Emitter``): a net of :class:`Netlist`; and the
    loop groups of the region being unrolled (one instance each)."""

    nl: Netlist
    ports: dict[int, str]
    loops: _Loops | None = None
    groups: dict[tuple[Any, ...], list[Elems]] = field(default_factory=dict)
    bound: dict[int, Elems] = field(default_factory=dict)  # an unrolled body's parameters

    def load(self, node: Node) -> Elems:
        if id(node) in self.bound:
            return self.bound[id(node)]
        w, port = width(node.dtype), self.ports[id(node)]
        return [self.nl.add(Cell("in", w, port=port, lo=e * w)) for e in range(node.type.size)]

    def constant(self, dt: DType, bits: int) -> int:
        return self.nl.const(width(dt), bits)

    def element(self, node: Node, operands: Sequence[int]) -> int:
        lower = LOWER.get(node.op)
        if lower is None:
            raise VerilogEmitError(f"the Verilog back end has no lowering for '{node.op}'")
        return lower(self.nl, node, operands)

    def binary(self, node: Node, op: Op, left: int, right: int) -> int:
        return LOWER[op](self.nl, node, [left, right])

    def finish(self, node: Node, root: int, n: int) -> int:
        return canonical(self.nl, node.dtype, root) if n == 1 and node.dtype.is_float else root


def _loop(el: _Elements, node: Node, ins: list[Elems]) -> Elems:
    """One carried value of a loop group; the group's instance is made at its first node."""
    key = loop_group(node)
    assert el.loops is not None
    if key not in el.groups and el.loops.unrolls(node):
        el.groups[key] = _unrolled(el, node, ins)
    if key not in el.groups:
        sub = el.loops.module(node)
        flat = tuple(e for operand in ins for e in operand)
        i = el.nl.add(Cell("loop", 0, flat, sub.latency, module=sub.name, sub=sub))
        el.groups[key] = [
            [el.nl.add(Cell("pick", w, (i,), port=f"L{i}_r{k}", lo=e * w)) for e in range(n)]
            for k, (w, n) in enumerate(sub.outputs)
        ]
    return el.groups[key][node.int_attr("result")]


def _call(el: _Elements, node: Node, ins: list[Elems]) -> Elems:
    """One result of a call group; the group's callee joins the netlist at its first node.

    A call is no FSM and no module: the callee's nodes become cells of the caller's netlist
    (the function's, or a loop body's), its parameters bound to the operands' element nets,
    its results the nets its walk gives (an operand's own net for a callee that returns its
    parameter, a shared constant cell for a constant).  The ASAP schedule then runs over the
    combined netlist, so the latency (and the schedule report) is that of the whole datapath,
    with no register at the call boundary; loops inside the callee are loop instances of the
    caller's netlist like any other (``_loop``).  Each call group is walked on its own, so two
    calls of one callee are two copies of its cells."""
    key = loop_group(node)
    if key not in el.groups:
        callee = loop_body(node)
        bound = dict(zip(map(id, callee.params), ins, strict=True))
        el.groups[key] = unroll_region(callee, _Elements(el.nl, {}, el.loops, bound=bound))
    return el.groups[key][node.int_attr("result")]


#: one whole node (all its elements) from the elements of its operands
NodeLower = Callable[[_Elements, Node, list[Elems]], Elems]


def _transfer(el: _Elements, node: Node, ins: list[Elems]) -> Elems:
    """A move between memory spaces, which a netlist does not have: a wire (the operand's own
    element nets, every bit as it is; no cell, no register, no cycle)."""
    return ins[0]


def _unrolled(el: _Elements, node: Node, ins: list[Elems]) -> list[Elems]:
    """The loop fully unrolled: the body once per trip, in order, its index a constant cell
    (so a dynamic index by the index itself becomes wiring: ``dynamic.py`` clamps a constant
    start at emit time), each trip on the previous trip's carried values.  Arithmetic on the
    index is built like any other op (no back-end folding): a start computed from it, such as
    ``i + 1``, selects through a mux."""
    body, lo = loop_body(node), node.int_attr("lo")
    k = len(body.results)
    carried, captured = ins[:k], ins[k:]
    for i in range(lo, lo + node.int_attr("trips")):
        args = [[el.nl.const(32, i & 0xFFFFFFFF)], *carried, *captured]
        trip = _Elements(
            el.nl, {}, el.loops, bound=dict(zip(map(id, body.params), args, strict=True))
        )
        carried = unroll_region(body, trip)
    return carried


def _on_netlist(lower: Callable[[Netlist, Node, list[Elems]], Elems]) -> NodeLower:
    def node_lower(el: _Elements, node: Node, ins: list[Elems]) -> Elems:
        return lower(el.nl, node, ins)

    return node_lower


#: the ops this back end lowers as whole nodes rather than element by element (``elementmaps``
#: has no static element map for them): run-time indices select through muxes
#: (``dynamic.py``), a loop group becomes one module with an FSM (``loop.py``), a call group
#: its callee's cells in the caller's netlist
NODES: dict[Op, NodeLower] = {
    Op.DYNAMIC_SLICE: _on_netlist(dynamic_slice),
    Op.DYNAMIC_UPDATE_SLICE: _on_netlist(dynamic_update_slice),
    Op.LOOP: _loop,
    Op.CALL: _call,
    Op.TRANSFER: _transfer,  # a wire: one design has one memory space
}

SUPPORTED = supported(LOWER) | frozenset(op.value for op in NODES)


def unroll_region(fn: Function, el: _Elements) -> list[Elems]:
    """Every node of ``fn`` in canonical order (``elementmaps.unroll_function``, plus the rows
    of :data:`NODES`); the elements of each result."""
    env: dict[int, Elems] = {}
    for node in fn.nodes():
        ins = [env[id(i)] for i in node.inputs]
        whole = NODES.get(node.op)
        env[id(node)] = whole(el, node, ins) if whole else unroll_node(el, node, ins)
    return [env[id(r)] for r in fn.results]


def emit(fn: Function, top: str | None = None, unroll: int = 0) -> VerilogDesign:
    """Lower, schedule and render one function (see the package docstring).

    ``unroll``: a loop whose trips x body elements (``trips * body.work``, what the unrolled
    loop computes) is at most this is fully unrolled into the datapath (one body per trip,
    pipelined, one vector per clock) instead of one body iterated by an FSM; 0, the default,
    unrolls none."""
    top = top or module_name(fn.name)
    nl = Netlist()
    ports = {id(p): port_name(i, str(p.attr("name"))) for i, p in enumerate(fn.params)}
    results = unroll_region(fn, _Elements(nl, ports, _Loops(top, unroll)))
    inputs = tuple(Port(ports[id(p)], p.dtype, p.shape) for p in fn.params)
    outputs = tuple(Port(f"r{k}", r.dtype, r.shape) for k, r in enumerate(fn.results))
    return _Renderer(nl, results, inputs, outputs).design(fn.name, top)


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
