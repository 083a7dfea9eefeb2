"""A loop group as one module: the body's datapath, iterated by a small FSM.

``for i in lo..lo+trips with (c = init) { body }`` becomes a module (``LoopModule``, ports in
``netlist.py``) holding

* registers for the index (``idx``, the body's parameter ``_0``), the carried values
  (``cr<k>``) and the captured values (``cp<j>``, loaded once per run and held for all of it);
* ONE datapath for the body, scheduled ASAP like a function (``render.py``) with the registers
  as its inputs, of latency ``BODY`` (0 when every result is a wire or a constant);
* the FSM: ``go`` loads the registers (``idx = lo``); a pulse ``trip`` marks the first clock
  of each trip and walks down ``vat`` (``vat[t]``: a trip started t clocks ago, the valid of
  the body's clocked cores and the start of nested loops); at ``vat[BODY]`` the body's results
  are latched into ``cr<k>`` and ``idx`` steps, and a new trip starts unless that was the last.

The registers are the double buffer: they hold trip ``j``'s values while the datapath computes
trip ``j + 1``'s, so every net of the body is stable from its ready cycle to the end of the
trip and the body needs no delay lines.  One trip takes ``BODY + 1`` clocks (the datapath,
then the latch), so the carried values appear on ``r<k>`` exactly

    LATENCY = trips * (BODY + 1) + 1

clocks after ``go`` (the 1 is the load), and stay there until the next ``go``.  A loop in a
body is one more instance with its own FSM, its latency part of the enclosing ``BODY``.
"""

from __future__ import annotations

from kera.backends.verilog.netlist import Elems, LoopModule, Netlist
from kera.backends.verilog.render import Port, _Renderer


class _BodyRenderer(_Renderer):
    """The module of one loop group: the FSM and the body's datapath."""

    MIN_LATENCY = 0

    def __init__(
        self,
        nl: Netlist,
        results: list[Elems],
        inputs: tuple[Port, ...],
        outputs: tuple[Port, ...],
        lo: int,
        trips: int,
    ) -> None:
        super().__init__(nl, results, inputs, outputs)
        self.lo, self.trips = lo, trips
        self.carried = len(outputs)

    def at(self, i: int, t: int) -> str:
        """Every net of a body holds its value from its ready cycle to the end of the trip
        (the inputs are registers held for the whole trip), so it is read without delay."""
        if self.nl.is_const(i):
            return f"k{i}"
        assert t >= self.ready[i], (i, t, self.ready[i])
        return f"n{i}"

    def _header(self, top: str) -> list[str]:
        ports = ["    input  wire clk", "    input  wire rst", "    input  wire go"]
        ports += [f"    input  wire [{p.width - 1}:0] {p.name}" for p in self.inputs]
        ports += [f"    output wire [{p.width - 1}:0] {p.name}" for p in self.outputs]
        return [f"module {top} (", ",\n".join(ports), ");"]

    def _valid_line(self) -> list[str]:
        """Registers and the FSM's control; the latching itself is in :meth:`_assigns`."""
        b = self.latency
        regs = ["    reg [31:0] idx;  // the loop index, body parameter _0"]
        regs += [
            f"    reg [{p.width - 1}:0] cr{j};  // carried value {j}" for j, p in self._carried()
        ]
        regs += [
            f"    reg [{p.width - 1}:0] cp{j};  // captured value" for j, p in self._captured()
        ]
        regs += [
            f"    wire [{p.width - 1}:0] b{j};  // next carried value" for j, p in self._carried()
        ]
        self.reg_bits += 32 + sum(p.width for p in self.inputs) + 1 + b
        if b == 0:
            trips = ["    wire [0:0] vat = trip;"]
        else:
            shift = "trip" if b == 1 else f"{{tpipe[{b - 2}:0], trip}}"
            trips = [
                "    reg [BODY-1:0] tpipe;",
                f"    always @(posedge clk) tpipe <= rst ? {{BODY{{1'b0}}}} : {shift};",
                "    wire [BODY:0] vat = {tpipe, trip};  // vat[t]: a trip started t clocks ago",
            ]
        last = (self.lo + self.trips - 1) & 0xFFFFFFFF
        total = self.trips * (b + 1) + 1
        return [
            f"    // {self.trips} trips from {self.lo}; r* hold the results {total} clocks after go",
            f"    localparam BODY = {b};  // clocks of the body's datapath; a trip is BODY + 1",
            *regs,
            "    reg trip;  // the first clock of a trip",
            *trips,
            "    wire latch = vat[BODY];  // the trip's results are ready: latch them",
            f"    wire last = idx == 32'h{last:x};  // index of the last trip",
            "    always @(posedge clk) trip <= ~rst & (go | (latch & ~last));",
        ]

    def _carried(self) -> list[tuple[int, Port]]:
        return list(enumerate(self.inputs[: self.carried]))

    def _captured(self) -> list[tuple[int, Port]]:
        return list(enumerate(self.inputs[self.carried :]))

    def _assigns(self) -> list[str]:
        """The next carried values, the latch and the outputs."""
        lines = []
        for k, elems in enumerate(self.results):
            nets = ", ".join(self.at(e, self.latency) for e in reversed(elems))
            lines.append(f"    assign b{k} = {{{nets}}};")
        load = [f"idx <= 32'h{self.lo & 0xFFFFFFFF:x};"]
        load += [f"cr{k} <= p{k};" for k, _ in self._carried()]
        load += [f"cp{j} <= p{self.carried + j};" for j, _ in self._captured()]
        step = ["idx <= idx + 32'd1;", *(f"cr{k} <= b{k};" for k, _ in self._carried())]
        lines += [
            "    always @(posedge clk)",
            f"        if (go) begin {' '.join(load)} end",
            f"        else if (latch) begin {' '.join(step)} end",
        ]
        lines += [f"    assign r{k} = cr{k};" for k, _ in self._carried()]
        return lines


def render_loop(
    nl: Netlist,
    results: list[Elems],
    name: str,
    inputs: tuple[Port, ...],
    lo: int,
    trips: int,
) -> LoopModule:
    """Schedule and render the module of one loop group (see the module docstring).

    ``inputs``: the body's parameters after the index (carried values, then captures), named
    ``p<j>``; the carried values are the first ``len(results)``."""
    outputs = tuple(Port(f"r{k}", p.dtype, p.shape) for k, p in enumerate(inputs[: len(results)]))
    r = _BodyRenderer(nl, results, inputs, outputs, lo, trips)
    text = "\n".join(r._module(name))
    texts = {name: text, **r.submodules()}
    return LoopModule(
        name=name,
        latency=trips * (r.latency + 1) + 1,
        body_latency=r.latency,
        lo=lo,
        trips=trips,
        inputs=tuple((p.elem_width, p.width // p.elem_width) for p in inputs),
        outputs=tuple((p.elem_width, p.width // p.elem_width) for p in outputs),
        cores=dict(r.cores()),
        register_bits=r.reg_bits + sum(c.sub.register_bits for c in r.loops if c.sub),
        texts=texts,
    )
