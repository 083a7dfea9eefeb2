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

from kera.backends.verilog.netlist import (
    MAX_CORES,
    Cell,
    Elems,
    LoopModule,
    Netlist,
    VerilogSizeError,
    width,
)
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
    """One emitted top module and its schedule report.

    ``interval``: clocks between two vectors the module accepts (1: one per clock; a design
    with loops accepts one vector per run of its longest loop and has a ``ready`` output).
    ``loops``: one report entry per loop module (``loop.py``).
    """

    function: str
    top: str
    text: str
    latency: int
    inputs: tuple[Port, ...]
    outputs: tuple[Port, ...]
    cores: Mapping[str, int]
    register_bits: int
    interval: int = 1
    loops: tuple[Mapping[str, Any], ...] = ()

    def sources(self) -> list[Path]:
        """Library sources the design needs (all of them; unused modules cost nothing)."""
        return [Path(p) for p in rtl_sources()]

    def report(self) -> dict[str, Any]:
        """The schedule: total latency, core instances by kind, registers outside cores (and
        for a design with loops its interval and its loops)."""
        loops = {"interval": self.interval, "loops": list(self.loops)} if self.loops else {}
        return {
            "function": self.function,
            "top": self.top,
            "latency": self.latency,
            **loops,
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
    """Liveness, ASAP schedule, delay lines and the Verilog text of one netlist.

    The top module of a function; ``loop.py`` derives the module of a loop body from it.
    """

    #: the least latency of the module (the top registers at least once)
    MIN_LATENCY = 1

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
        self.latency = max([self.MIN_LATENCY, *ends])
        self.taps: dict[int, set[int]] = {}
        self.sink: list[str] = []
        self.decls: list[str] = []  # every net before any logic that reads it
        self.body: list[str] = []
        self.reg_bits = 0
        self.loops = [self.nl.cells[i] for i in sorted(self.live) if self.nl.cells[i].sub]
        #: clocks between accepted vectors: a loop instance is busy for its whole latency
        self.interval = max([1, *(c.latency for c in self.loops)])

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
        if cell.kind in ("in", "pick"):
            self.decls.append(
                f"    wire [{w - 1}:0] n{i} = {cell.port}[{cell.lo + w - 1}:{cell.lo}];"
            )
        elif cell.kind == "expr":
            self._render_expr(i, cell, ops)
        elif cell.kind == "loop":
            self._render_loop(i, cell, ops, t)
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

    def _render_loop(self, i: int, cell: Cell, ops: list[str], t: int) -> None:
        """An instance of a loop module, started by the valid pulse of its start cycle; its
        carried values are read through ``pick`` cells (the whole buses go to the sink)."""
        sub = cell.sub
        assert sub is not None
        conns, pos = [".clk(clk)", ".rst(rst)", f".go(vat[{t}])"], 0
        for j, (_, n) in enumerate(sub.inputs):
            conns.append(f".p{j}({{{', '.join(reversed(ops[pos : pos + n]))}}})")
            pos += n
        for k, (w, n) in enumerate(sub.outputs):
            self.decls.append(f"    wire [{w * n - 1}:0] L{i}_r{k};")
            conns.append(f".r{k}(L{i}_r{k})")
            self.sink.append(f"L{i}_r{k}")
        self.body.append(f"    {cell.module} loop{i} ({', '.join(conns)});")

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
        ports += ["    output wire ready"] if self.loops else []
        ports += [f"    input  wire [{p.width - 1}:0] {p.name}" for p in self.inputs]
        ports += ["    output wire valid_out"]
        ports += [f"    output wire [{p.width - 1}:0] {p.name}" for p in self.outputs]
        return [f"module {top} (", ",\n".join(ports), ");"]

    def _valid_line(self) -> list[str]:
        if self.loops:
            return self._handshake()
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

    def _handshake(self) -> list[str]:
        """A design with loops accepts a vector (``valid_in & ready``) once per ``INTERVAL``
        clocks, the latency of its longest loop: every loop instance is then free again when
        the next vector reaches it.  Results still come exactly ``LATENCY`` clocks later."""
        self.reg_bits += self.latency
        return [
            f"    localparam LATENCY = {self.latency};",
            f"    localparam INTERVAL = {self.interval};  // clocks between accepted vectors",
            "    reg [LATENCY-1:0] vpipe;  // vpipe[i]: a vector accepted i + 1 clocks ago",
            "    assign ready = ~|vpipe[INTERVAL-2:0];  // none accepted in INTERVAL - 1 clocks",
            "    wire accept = valid_in & ready;",
            "    always @(posedge clk) vpipe <= rst ? {LATENCY{1'b0}} : {vpipe[LATENCY-2:0], accept};",
            "    wire [LATENCY:0] vat = {vpipe, accept};  // vat[t]: valid of the vector at cycle t",
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

    def _assigns(self) -> list[str]:
        assigns = []
        for port, elems in zip(self.outputs, self.results, strict=True):
            nets = ", ".join(self.at(e, self.latency) for e in reversed(elems))
            assigns.append(f"    assign {port.name} = {{{nets}}};")
        return assigns

    def _module(self, top: str) -> list[str]:
        """The module's lines, ``module`` to ``endmodule``."""
        for i in sorted(self.start):
            self._render_cell(i)
        assigns = self._assigns()
        taps = self._render_taps()
        self.sink += ["vat", *(p.name for p in self.inputs)]
        sink = _lint_sink(self.sink)
        return [
            *self._header(top),
            *self._valid_line(),
            *self._consts(),
            *self.decls,
            *self.body,
            *taps,
            *assigns,
            *sink,
            "endmodule",
        ]

    def cores(self) -> Counter[str]:
        """Core instances by kind, those of the loop modules instantiated included."""
        cores = Counter(
            _core_key(c) for i, c in enumerate(self.nl.cells) if i in self.live and c.kind == "core"
        )
        for cell in self.loops:
            assert cell.sub is not None
            cores.update(cell.sub.cores)
        if sum(cores.values()) > MAX_CORES:
            raise VerilogSizeError(
                f"the design needs more than {MAX_CORES} core instances (one per element and op "
                "of each loop body and of the rest); use smaller tensors"
            )
        return cores

    def submodules(self) -> dict[str, str]:
        """The text of every loop module this one instantiates, nested ones too, by name."""
        texts: dict[str, str] = {}
        for cell in self.loops:
            assert cell.sub is not None
            texts.update(cell.sub.texts)
        return texts

    def design(self, function: str, top: str) -> VerilogDesign:
        lines = [
            "// Generated by kerac (Verilog back end); cores from kera_hdl",
            "`default_nettype none",
            *self._module(top),
            "`default_nettype wire",
            "",
        ]
        subs = self.submodules()
        if subs:  # one file holds the top and its loop modules
            lines += ["// verilator lint_off DECLFILENAME"]
        for text in subs.values():
            lines += ["`default_nettype none", text, "`default_nettype wire", ""]
        cores = self.cores()
        loops = [_loop_report(c.sub) for c in self.loops if c.sub is not None]
        return VerilogDesign(
            function=function,
            top=top,
            text="\n".join(lines),
            latency=self.latency,
            inputs=self.inputs,
            outputs=self.outputs,
            cores=dict(sorted(cores.items())),
            register_bits=self.reg_bits + sum(c.sub.register_bits for c in self.loops if c.sub),
            interval=self.interval,
            loops=tuple(loops),
        )


def _loop_report(sub: LoopModule) -> dict[str, Any]:
    return {
        "module": sub.name,
        "lo": sub.lo,
        "trips": sub.trips,
        "body_latency": sub.body_latency,
        "latency": sub.latency,
        "core_instances": sum(sub.cores.values()),
    }


def _lint_sink(nets: Sequence[str]) -> list[str]:
    """The nets read only in part (or not at all: the cores' ``valid_out``), XORed into one
    net so that ``verilator -Wall`` sees them read and still flags any other unused net.

    The net is for Verilator's lint alone, so it is guarded by ``VERILATOR`` (which Verilator
    always defines): Icarus would otherwise evaluate the reduction over a concatenation of
    every such net on each change of any of them -- every clock of the valid pipeline, once per
    core's ``valid_out`` -- which cost more than the cores themselves on loop designs (verlet:
    8.3 ms per clock with it, 3.0 ms without).  Nothing reads it, so no result changes.
    """
    return [
        "`ifdef VERILATOR  // lint only: Icarus need not evaluate it",
        f"    wire unused_ok = ^{{1'b0, {', '.join(nets)}}};  // lint: nets read in part",
        "`endif",
    ]


def _fill(template: str, ops: Sequence[str]) -> str:
    for k in reversed(range(len(ops))):
        template = template.replace(f"@{k}", ops[k])
    return template


def _core_key(cell: Cell) -> str:
    return f"{cell.module}(" + ",".join(f"{k}={v}" for k, v in cell.params) + ")"
