"""Rendering one netlist: liveness, the ASAP schedule, delay lines and the Verilog text.

Schedule: as soon as possible.  A net is *ready* at cycle t (relative to the cycle its vector
entered); a cell starts when its last non-constant operand is ready and its output is ready
``latency`` cycles later (a core's fixed latency; 1 for inline expressions and combinational
cores, which are registered; 0 for wires).  An operand ready before its user starts is
delayed through a shared shift register (``kf_pipe``) tapped at each cycle it is needed, so
every path from input to output has the same number of registers.  Results are aligned the
same way to the total latency (at least 1).  ``valid`` travels through its own delay line
with reset.  Only elements that reach a result are built.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import prod
from pathlib import Path
from typing import Any

from kera.backends.verilog.netlist import Cell, Elems, Netlist, width
from kera.dtypes import DType
from kera_hdl import CORES, rtl_sources  # type: ignore[import-not-found, unused-ignore]


def port_name(index: int, name: str) -> str:
    return f"p{index}_" + re.sub(r"[^A-Za-z0-9_]", "_", name)


def module_name(name: str) -> str:
    return "kera_" + re.sub(r"[^A-Za-z0-9_]", "_", name)


@dataclass(frozen=True)
class Port:
    """A top-level data port: name, element dtype, tensor shape, total width in bits."""

    name: str
    dtype: DType
    shape: tuple[int, ...]

    @property
    def elem_width(self) -> int:
        return width(self.dtype)

    @property
    def width(self) -> int:
        return self.elem_width * prod(self.shape)


@dataclass(frozen=True)
class VerilogDesign:
    """One emitted top module and its schedule report."""

    function: str
    top: str
    text: str
    latency: int
    inputs: tuple[Port, ...]
    outputs: tuple[Port, ...]
    cores: Mapping[str, int]
    register_bits: int

    def sources(self) -> list[Path]:
        """Library sources the design needs (all of them; unused modules cost nothing)."""
        return [Path(p) for p in rtl_sources()]

    def report(self) -> dict[str, Any]:
        """The schedule: total latency, core instances by kind, registers outside cores."""
        return {
            "function": self.function,
            "top": self.top,
            "latency": self.latency,
            "cores": dict(self.cores),
            "core_instances": sum(self.cores.values()),
            "register_bits": self.register_bits,
            "inputs": [
                {"port": p.name, "dtype": str(p.dtype), "shape": list(p.shape)} for p in self.inputs
            ],
            "outputs": [
                {"port": p.name, "dtype": str(p.dtype), "shape": list(p.shape)}
                for p in self.outputs
            ],
        }


class _Renderer:
    """Liveness, ASAP schedule, delay lines and the Verilog text of one netlist."""

    def __init__(
        self, nl: Netlist, results: list[Elems], inputs: tuple[Port, ...], outputs: tuple[Port, ...]
    ) -> None:
        self.nl = nl
        self.results = results
        self.inputs = inputs
        self.outputs = outputs
        self.live = self._liveness()
        self.ready: dict[int, int] = {}
        self.start: dict[int, int] = {}
        self._schedule()
        ends = [self.ready[e] for r in results for e in r if not nl.is_const(e)]
        self.latency = max([1, *ends])
        self.taps: dict[int, set[int]] = {}
        self.sink: list[str] = []
        self.decls: list[str] = []  # every net before any logic that reads it
        self.body: list[str] = []
        self.reg_bits = 0

    def _liveness(self) -> set[int]:
        live: set[int] = set()
        todo = [e for r in self.results for e in r]
        while todo:
            i = todo.pop()
            if i not in live:
                live.add(i)
                todo.extend(self.nl.cells[i].ins)
        return live

    def _schedule(self) -> None:
        for i, cell in enumerate(self.nl.cells):
            if i not in self.live or cell.kind == "const":
                continue
            t = max([0, *(self.ready[j] for j in cell.ins if not self.nl.is_const(j))])
            self.start[i] = t
            self.ready[i] = t + cell.latency

    def at(self, i: int, t: int) -> str:
        """The net of cell i as seen at cycle t (a delay-line tap when t > ready)."""
        cell = self.nl.cells[i]
        if cell.kind == "const":
            return f"k{i}"
        d = t - self.ready[i]
        assert d >= 0, (i, t, self.ready[i])
        if d == 0:
            return f"n{i}"
        self.taps.setdefault(i, set()).add(d)
        return f"n{i}_d{d}"

    def _render_cell(self, i: int) -> None:
        cell, t = self.nl.cells[i], self.start[i]
        w = cell.width
        ops = [self.at(j, t) for j in cell.ins]
        if cell.kind == "in":
            self.decls.append(
                f"    wire [{w - 1}:0] n{i} = {cell.port}[{cell.lo + w - 1}:{cell.lo}];"
            )
        elif cell.kind == "expr":
            self._render_expr(i, cell, ops)
        else:
            self._render_core(i, cell, ops, t)

    def _render_expr(self, i: int, cell: Cell, ops: list[str]) -> None:
        w, text = cell.width, _fill(cell.expr, ops)
        self.sink += [ops[k] for k in cell.partial]
        if cell.latency == 0:
            self.decls.append(f"    wire [{w - 1}:0] n{i};")
            self.body.append(f"    assign n{i} = {text};")
            return
        self.decls.append(f"    reg [{w - 1}:0] n{i};")
        self.body.append(f"    always @(posedge clk) n{i} <= {text};")
        self.reg_bits += w

    def _render_core(self, i: int, cell: Cell, ops: list[str], t: int) -> None:
        core = CORES[cell.module]
        params = ", ".join(f".{k}({v})" for k, v in cell.params)
        conns = [f".{name}({op})" for name, op in zip(core.inputs, ops, strict=True)]
        registered = not core.clocked and cell.latency > 0
        target = f"c{i}" if registered else f"n{i}"
        for out in core.outputs:
            net = target if out == cell.out else f"c{i}_{out}"
            ow = cell.width if out == cell.out else (1 if len(core.outputs) > 1 else cell.width)
            self.decls.append(f"    wire [{ow - 1}:0] {net};")
            conns.append(f".{out}({net})")
            if out != cell.out:
                self.sink.append(net)
        if core.clocked:
            self.decls.append(f"    wire v{i};")
            conns = [".clk(clk)", ".rst(rst)", f".valid_in(vat[{t}])", *conns, f".valid_out(v{i})"]
            self.sink.append(f"v{i}")
        self.body.append(f"    {cell.module} #({params}) cell{i} ({', '.join(conns)});")
        if registered:
            self.decls.append(f"    reg [{cell.width - 1}:0] n{i};")
            self.body.append(f"    always @(posedge clk) n{i} <= c{i};")
            self.reg_bits += cell.width

    def _render_taps(self) -> list[str]:
        lines = []
        for i, delays in sorted(self.taps.items()):
            w, prev, src = self.nl.cells[i].width, 0, f"n{i}"
            for d in sorted(delays):
                self.decls.append(f"    wire [{w - 1}:0] n{i}_d{d};")
                lines.append(
                    f"    kf_pipe #(.W({w}), .N({d - prev})) dly{i}_{d} "
                    f"(.clk(clk), .d({src}), .q(n{i}_d{d}));"
                )
                self.reg_bits += w * (d - prev)
                prev, src = d, f"n{i}_d{d}"
        return lines

    def _header(self, top: str) -> list[str]:
        ports = ["    input  wire clk", "    input  wire rst", "    input  wire valid_in"]
        ports += [f"    input  wire [{p.width - 1}:0] {p.name}" for p in self.inputs]
        ports += ["    output wire valid_out"]
        ports += [f"    output wire [{p.width - 1}:0] {p.name}" for p in self.outputs]
        return [f"module {top} (", ",\n".join(ports), ");"]

    def _valid_line(self) -> list[str]:
        t = self.latency
        shift = "valid_in" if t == 1 else f"{{vpipe[{t - 2}:0], valid_in}}"
        self.reg_bits += t
        return [
            f"    localparam LATENCY = {t};",
            "    reg [LATENCY-1:0] vpipe;  // vpipe[i]: valid_in delayed i + 1 clocks",
            f"    always @(posedge clk) vpipe <= rst ? {{LATENCY{{1'b0}}}} : {shift};",
            "    wire [LATENCY:0] vat = {vpipe, valid_in};  // vat[t]: valid of the vector at cycle t",
            "    assign valid_out = vat[LATENCY];",
        ]

    def _consts(self) -> list[str]:
        lines = []
        for i in sorted(self.live):
            cell = self.nl.cells[i]
            if cell.kind == "const":
                lines.append(
                    f"    localparam [{cell.width - 1}:0] k{i} = {cell.width}'h{cell.value:x};"
                )
        return lines

    def design(self, function: str, top: str) -> VerilogDesign:
        for i in sorted(self.start):
            self._render_cell(i)
        assigns = []
        for port, elems in zip(self.outputs, self.results, strict=True):
            nets = ", ".join(self.at(e, self.latency) for e in reversed(elems))
            assigns.append(f"    assign {port.name} = {{{nets}}};")
        taps = self._render_taps()
        self.sink += ["vat", *(p.name for p in self.inputs)]
        sink = [
            f"    wire unused_ok = ^{{1'b0, {', '.join(self.sink)}}};  // lint: nets read in part"
        ]
        lines = [
            "// Generated by kerac (Verilog back end); cores from kera_hdl",
            "`default_nettype none",
            *self._header(top),
            *self._valid_line(),
            *self._consts(),
            *self.decls,
            *self.body,
            *taps,
            *assigns,
            *sink,
            "endmodule",
            "`default_nettype wire",
            "",
        ]
        cores = Counter(
            _core_key(c) for i, c in enumerate(self.nl.cells) if i in self.live and c.kind == "core"
        )
        return VerilogDesign(
            function=function,
            top=top,
            text="\n".join(lines),
            latency=self.latency,
            inputs=self.inputs,
            outputs=self.outputs,
            cores=dict(sorted(cores.items())),
            register_bits=self.reg_bits,
        )


def _fill(template: str, ops: Sequence[str]) -> str:
    for k in reversed(range(len(ops))):
        template = template.replace(f"@{k}", ops[k])
    return template


def _core_key(cell: Cell) -> str:
    return f"{cell.module}(" + ",".join(f"{k}={v}" for k, v in cell.params) + ")"
