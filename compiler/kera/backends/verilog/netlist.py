"""The netlist being built: one :class:`Cell` per scalar net, in topological order.

Also the widths and float-core parameters of the contract's dtypes.  Nothing here evaluates an
op: an element whose operands are all constant cells still gets its op's cell (constants are
folded once, by the ``fold`` pass, so ``-O0`` builds exactly what the graph says).  This module
imports neither the lowering table (``lower.py``) nor the renderer, so both can be typed over
:class:`Netlist`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from kera.dtypes import DType
from kera.ir import Node
from kera_hdl import CORES  # type: ignore[import-not-found, unused-ignore]

MAX_CORES = 20_000
"""Core instances per design above which emit() refuses: the datapath is fully spatial (one
core per element and op), and beyond this size simulators and synthesis take hours."""


class VerilogEmitError(Exception):
    """A function the Verilog back end cannot lower (or would lower to an unusable size)."""


class VerilogSizeError(VerilogEmitError):
    """The datapath would need more than :data:`MAX_CORES` core instances: a documented limit
    of the target, not a lowering bug (the ``verilog`` targets decline such a function)."""


@dataclass(frozen=True)
class LoopModule:
    """The module of one loop group (rendered by ``loop.py``): its FSM and body datapath.

    Ports ``clk, rst, go`` (a one-clock pulse: latch the initial carried values and the
    captured values), ``p<j>`` (the initial carried values, then the captured values; each
    ``count`` elements of ``width`` bits, as in :attr:`inputs`), ``r<k>`` (the carried values,
    :attr:`outputs`), valid from ``latency`` clocks after ``go`` until the next ``go``.
    ``latency = trips * (body_latency + 1) + 1``.  ``texts`` holds this module's text and
    every module it instantiates, by name.
    """

    name: str
    latency: int
    body_latency: int
    lo: int
    trips: int
    inputs: tuple[tuple[int, int], ...]  # (element width, element count) per p<j>
    outputs: tuple[tuple[int, int], ...]  # (element width, element count) per r<k>
    cores: Mapping[str, int]
    register_bits: int
    texts: Mapping[str, str]


@dataclass
class Cell:
    """One scalar net and what drives it.

    kind: ``in`` (a slice of an input port), ``const``, ``core`` (a library core instance),
    ``expr`` (an inline Verilog expression of its operands ``@0 @1 @2``; registered unless
    ``latency`` is 0), ``loop`` (an instance of a :class:`LoopModule`, ``sub``; its operands
    are the elements of its ``p<j>`` ports in order; it drives no net of its own) and ``pick``
    (a slice ``[lo +: width]`` of port ``port`` of the loop instance that is its operand).
    ``partial`` lists operand positions an expression reads only in part (their nets go to the
    lint sink).
    """

    kind: str
    width: int
    ins: tuple[int, ...] = ()
    latency: int = 0
    value: int = 0  # const: the bits
    port: str = ""  # in: port name
    lo: int = 0  # in: lowest bit in the port
    module: str = ""
    params: tuple[tuple[str, int], ...] = ()
    out: str = "y"  # core: the output port this net is
    outputs: tuple[str, ...] = ("y",)  # core: every output port (others are sunk)
    expr: str = ""
    partial: tuple[int, ...] = ()
    sub: LoopModule | None = None  # loop: the module instantiated


@dataclass
class Netlist:
    """Cells in creation (= topological) order."""

    cells: list[Cell] = field(default_factory=list)
    consts: dict[tuple[int, int], int] = field(default_factory=dict)
    cores: int = 0

    def add(self, cell: Cell) -> int:
        if cell.kind == "core":
            self.cores += 1
            if self.cores > MAX_CORES:
                raise VerilogSizeError(
                    f"the datapath needs more than {MAX_CORES} core instances (one per element "
                    "and op); use smaller tensors"
                )
        self.cells.append(cell)
        return len(self.cells) - 1

    def const(self, width: int, value: int) -> int:
        key = (width, value)
        if key not in self.consts:
            self.consts[key] = self.add(Cell("const", width, value=value))
        return self.consts[key]

    def is_const(self, i: int) -> bool:
        """A constant cell is a ``localparam``: it is never scheduled nor delayed
        (``render.py``), and a constant start index is clamped at emit time (``dynamic.py``,
        address arithmetic on the start, not an op's value).  No op is evaluated on it."""
        return self.cells[i].kind == "const"

    def core(self, module: str, width: int, ins: Sequence[int], **params: int) -> int:
        """A clocked core (its latency) or a combinational core (registered: latency 1)."""
        core = CORES[module]
        cell = Cell("core", width, tuple(ins), max(core.latency(params), 1), module=module)
        cell.params, cell.outputs = tuple(params.items()), core.outputs
        return self.add(cell)

    def wire_core(self, module: str, width: int, ins: Sequence[int], **params: int) -> int:
        """A combinational core used as wiring (latency 0, not registered)."""
        cell = Cell("core", width, tuple(ins), 0, module=module, params=tuple(params.items()))
        return self.add(cell)

    def expr(
        self,
        text: str,
        width: int,
        ins: Sequence[int],
        latency: int = 1,
        partial: tuple[int, ...] = (),
    ) -> int:
        return self.add(Cell("expr", width, tuple(ins), latency, expr=text, partial=partial))


Elems = list[int]

#: one element of one op: (netlist, node, operand nets of the element) -> result net
Lower = Callable[[Netlist, Node, Sequence[int]], int]


def width(dt: DType) -> int:
    return 1 if dt is DType.BOOL else dt.bits


def fparams(dt: DType) -> dict[str, int]:
    """The float cores' format parameters: exponent and stored fraction widths."""
    return {"EW": dt.exp_bits, "MW": dt.mant_bits}
