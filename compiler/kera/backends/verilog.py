"""Verilog back end: one pipelined, fully spatial datapath module per exported function.

Top module ``kera_<function name>`` (Verilog-2005; the cores come from ``kera_hdl``)::

    input  wire clk, rst, valid_in          rst: synchronous, active high, clears valid only
    input  wire [S*w-1:0] p<i>_<name>       one port per parameter i, in parameter order
    output wire valid_out
    output wire [S*w-1:0] r<k>              one port per result k, in result order

A tensor of S elements of w bits (bool: w = 1) is flattened in C order; element e occupies
bits ``[e*w +: w]`` (element 0 in the least significant bits).  One input vector is accepted
per clock, with no stalls; ``valid_out`` and the results belong to the vector presented
``latency`` rising edges earlier (:attr:`VerilogDesign.latency`).

Lowering (a table of op lowerings plus a short loop, like the other back ends): every tensor
element becomes one scalar net; data movement (broadcast, reshape, transpose, slice, concat,
bitcast) is wiring resolved at compile time through the semantics table applied to element
indices; every arithmetic element gets its own core instance (``kera_hdl.CORES``) or an inline
registered expression (integer add/sub/mul/neg/abs/min/max, bitwise ops, integer compares,
select, int<->int and bool conversions); sign-bit float ops and width changes are wires.
Reductions, dot and matmul are the contract's tree laid out in hardware: pad to a power of two
with the identity, then ``x[i] = op(x[i], x[i+s])`` for ``s = P/2 .. 1``.  A step whose right
operand is padding is left out: ``op(x, identity)`` equals ``x`` bit for bit for every non-NaN
``x``, a NaN reaches the root through at least one real step (so it is canonical there), and a
length-1 float reduction gets an explicit canonicalising register.  Elementwise ops whose
operands are all constants are folded with ``kera.semantics`` (the same table as the
interpreter).

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

import json
import re
import shutil
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kera.backends.elementmaps import STRUCTURAL, unroll
from kera.dtypes import CANONICAL_NAN, DType
from kera.files import write_atomic
from kera.ir import Function, Graph, Node, const_value
from kera.ops import REDUCE_STEP, Op
from kera.semantics import LEAVES, SEMANTICS
from kera_hdl import CORES, FLOAT_FORMATS, rtl_sources  # type: ignore[import-not-found, unused-ignore]

MAX_CORES = 20_000
"""Core instances per design above which emit() refuses: the datapath is fully spatial (one
core per element and op), and beyond this size simulators and synthesis take hours."""


class VerilogEmitError(Exception):
    """A function the Verilog back end cannot lower (or would lower to an unusable size)."""


class VerilogSizeError(VerilogEmitError):
    """The datapath would need more than :data:`MAX_CORES` core instances: a documented limit
    of the target, not a lowering bug (the ``verilog`` targets decline such a function)."""


# ---------------------------------------------------------------------------- the netlist


@dataclass
class Cell:
    """One scalar net and what drives it.

    kind: ``in`` (a slice of an input port), ``const``, ``core`` (a library core instance),
    ``expr`` (an inline Verilog expression of its operands ``@0 @1 @2``; registered unless
    ``latency`` is 0).  ``partial`` lists operand positions an expression reads only in part
    (their nets go to the lint sink).
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


def width(dt: DType) -> int:
    return 1 if dt is DType.BOOL else dt.bits


def fparams(dt: DType) -> dict[str, int]:
    ew, mw = FLOAT_FORMATS[dt.value]
    return {"EW": ew, "MW": mw}


def size(shape: Sequence[int]) -> int:
    return int(np.prod(shape, dtype=np.int64)) if shape else 1


# ---------------------------------------------------------------------------- elementwise ops

Lower = Callable[[Netlist, Node, Sequence[int]], int]


def _src(node: Node) -> DType:
    return node.inputs[0].dtype


def _float_core(module: str, **extra: int) -> Lower:
    def lower(nl: Netlist, node: Node, a: Sequence[int]) -> int:
        return nl.core(module, width(node.dtype), a, **fparams(node.dtype), **extra)

    return lower


def _int_expr(text: str, signed_text: str | None = None) -> Lower:
    def lower(nl: Netlist, node: Node, a: Sequence[int]) -> int:
        t = signed_text if (signed_text and _src(node).is_signed) else text
        return nl.expr(t, width(node.dtype), a)

    return lower


def _both(float_lower: Lower, int_lower: Lower) -> Lower:
    def lower(nl: Netlist, node: Node, a: Sequence[int]) -> int:
        return (float_lower if _src(node).is_float else int_lower)(nl, node, a)

    return lower


def _idiv(rem: bool) -> Lower:
    def lower(nl: Netlist, node: Node, a: Sequence[int]) -> int:
        dt = node.dtype
        return nl.core("kf_idiv", dt.bits, a, W=dt.bits, SIGNED=int(dt.is_signed), REM=int(rem))

    return lower


def _shift(left: bool) -> Lower:
    def lower(nl: Netlist, node: Node, a: Sequence[int]) -> int:
        dt = node.dtype
        return nl.core("kf_ishift", dt.bits, a, W=dt.bits, SIGNED=int(dt.is_signed), LEFT=int(left))

    return lower


_CMP_OPS = {Op.EQ: "==", Op.NE: "!=", Op.LT: "<", Op.LE: "<=", Op.GT: ">", Op.GE: ">="}


def _compare(nl: Netlist, node: Node, a: Sequence[int]) -> int:
    src = _src(node)
    if src.is_float:
        i = nl.core("kf_fcmp", 1, a, **fparams(src))
        nl.cells[i].out = node.op.value  # the one of the six outputs this net is
        return i
    sym = _CMP_OPS[node.op]
    if src.is_signed and node.op not in (Op.EQ, Op.NE):
        return nl.expr(f"$signed(@0) {sym} $signed(@1)", 1, a)
    return nl.expr(f"@0 {sym} @1", 1, a)


def _minmax(is_max: bool) -> Lower:
    sym = ">" if is_max else "<"

    def lower(nl: Netlist, node: Node, a: Sequence[int]) -> int:
        dt = node.dtype
        if dt.is_float:
            return nl.core("kf_fminmax", dt.bits, a, **fparams(dt), MAX=int(is_max))
        cmp = f"$signed(@0) {sym} $signed(@1)" if dt.is_signed else f"@0 {sym} @1"
        return nl.expr(f"({cmp}) ? @0 : @1", dt.bits, a)

    return lower


def _neg(nl: Netlist, node: Node, a: Sequence[int]) -> int:
    dt = node.dtype
    if dt.is_float:
        w = dt.bits
        return nl.expr(f"{{~@0[{w - 1}], @0[{w - 2}:0]}}", w, a, latency=0)
    return nl.expr("-@0", dt.bits, a)


def _abs(nl: Netlist, node: Node, a: Sequence[int]) -> int:
    dt = node.dtype
    if dt.is_float:
        return nl.wire_core("kf_fsign", dt.bits, [a[0], a[0]], W=dt.bits, MODE=1)
    if not dt.is_signed:
        return a[0]
    return nl.expr(f"@0[{dt.bits - 1}] ? -@0 : @0", dt.bits, a)


def _copysign(nl: Netlist, node: Node, a: Sequence[int]) -> int:
    return nl.wire_core("kf_fsign", node.dtype.bits, a, W=node.dtype.bits, MODE=2)


def _convert(nl: Netlist, node: Node, a: Sequence[int]) -> int:
    src, dst = _src(node), node.dtype
    if src.is_float and dst.is_float:
        e1, m1 = FLOAT_FORMATS[src.value]
        e2, m2 = FLOAT_FORMATS[dst.value]
        return nl.core("kf_f2f", dst.bits, a, EWI=e1, MWI=m1, EWO=e2, MWO=m2)
    if src.is_float:
        return nl.core(
            "kf_f2i", dst.bits, a, **fparams(src), OW=dst.bits, SIGNED=int(dst.is_signed)
        )
    if dst.is_float:
        return nl.core(
            "kf_i2f", dst.bits, a, IW=width(src), SIGNED=int(src.is_signed), **fparams(dst)
        )
    return _int_to_int(nl, src, dst, a[0])


def _int_to_int(nl: Netlist, src: DType, dst: DType, x: int) -> int:
    """Wrapping (Rust ``as``): truncate, or sign/zero extend; bool is 0/1; to bool is != 0."""
    ws, wd = width(src), width(dst)
    if dst is DType.BOOL:
        return nl.expr("@0 != 0", 1, [x])
    if wd == ws:
        return x
    if wd < ws:
        return nl.expr(f"@0[{wd - 1}:0]", wd, [x], latency=0, partial=(0,))
    fill = f"{{{wd - ws}{{@0[{ws - 1}]}}}}" if src.is_signed else f"{wd - ws}'d0"
    return nl.expr(f"{{{fill}, @0}}", wd, [x], latency=0)


def _select(nl: Netlist, node: Node, a: Sequence[int]) -> int:
    return nl.expr("@0 ? @1 : @2", width(node.dtype), a)


def _bitcast(nl: Netlist, node: Node, a: Sequence[int]) -> int:
    return a[0]


ELEMENTWISE: dict[Op, Lower] = {
    Op.ADD: _both(_float_core("kf_fadd", SUB=0), _int_expr("@0 + @1")),
    Op.SUB: _both(_float_core("kf_fadd", SUB=1), _int_expr("@0 - @1")),
    Op.MUL: _both(_float_core("kf_fmul"), _int_expr("@0 * @1")),
    Op.DIV: _both(_float_core("kf_fdiv"), _idiv(rem=False)),
    Op.REM: _idiv(rem=True),
    Op.FMA: _float_core("kf_ffma"),
    Op.SQRT: _float_core("kf_fsqrt"),
    Op.FLOOR: _float_core("kf_fround", MODE=0),
    Op.CEIL: _float_core("kf_fround", MODE=1),
    Op.TRUNC: _float_core("kf_fround", MODE=2),
    Op.ROUND: _float_core("kf_fround", MODE=3),
    Op.MIN: _minmax(is_max=False),
    Op.MAX: _minmax(is_max=True),
    Op.NEG: _neg,
    Op.ABS: _abs,
    Op.COPYSIGN: _copysign,
    Op.NOT: _int_expr("~@0"),
    Op.AND: _int_expr("@0 & @1"),
    Op.OR: _int_expr("@0 | @1"),
    Op.XOR: _int_expr("@0 ^ @1"),
    Op.SHL: _shift(left=True),
    Op.SHR: _shift(left=False),
    **dict.fromkeys(_CMP_OPS, _compare),
    Op.SELECT: _select,
    Op.CONVERT: _convert,
    Op.BITCAST: _bitcast,
}


# ---------------------------------------------------------------------------- trees

# the tree's step per reduction; float steps are cores, integer steps inline and wrapping


def _canon(nl: Netlist, dt: DType, x: int) -> int:
    """Register x, replacing any NaN by the canonical NaN (length-1 float reductions)."""
    mw = FLOAT_FORMATS[dt.value][1]
    w = dt.bits
    nan = f"(&@0[{w - 2}:{mw}]) && (|@0[{mw - 1}:0])"
    return nl.expr(f"({nan}) ? {w}'h{CANONICAL_NAN[dt]:x} : @0", w, [x])


def structural(nl: Netlist, node: Node, ins: list[Elems]) -> Elems:
    """Reductions, dot, matmul and data movement, unrolled (``elementmaps.unroll``): float
    steps and products are cores (which canonicalise), integer ones inline and wrapping; the
    root of a one-element float tree, which went through no core, is canonicalised here."""

    def step(op: Op, left: int, right: int) -> int:
        sop = REDUCE_STEP[op]
        return _fold(nl, node, ELEMENTWISE[sop], [left, right], sop)

    def product(x: int, y: int) -> int:
        return _fold(nl, node, ELEMENTWISE[Op.MUL], [x, y], Op.MUL)

    def finish(root: int, n: int) -> int:
        return _canon(nl, node.dtype, root) if n == 1 and node.dtype.is_float else root

    return unroll(node, ins, step, product, finish)


SUPPORTED_OPS = frozenset(
    {op.value for op in ELEMENTWISE} | {op.value for op in STRUCTURAL} | {"param", "const", "iota"}
)


# ---------------------------------------------------------------------------- constants


def _bits_of(dt: DType, values: np.ndarray[Any, Any]) -> list[int]:
    flat = np.ascontiguousarray(values).reshape(-1)
    if dt is DType.BOOL:
        return [int(v) for v in flat]
    return [int(v) for v in flat.view(dt.uint)]


def _as_array(dt: DType, bits: int) -> np.ndarray[Any, Any]:
    if dt is DType.BOOL:
        return np.array([bool(bits)])
    return np.array([bits], dtype=dt.uint).view(dt.np)


def _fold(nl: Netlist, node: Node, lower: Lower, a: Sequence[int], op: Op | None = None) -> int:
    """Lower one element, or evaluate it with kera.semantics when every operand is constant."""
    if not a or not all(nl.is_const(i) for i in a):
        return lower(nl, node, a)
    dts = [i.dtype for i in node.inputs] if op is None else [node.dtype] * len(a)
    args = [_as_array(dt, nl.cells[i].value) for dt, i in zip(dts, a, strict=True)]
    out_dt = node.dtype if op is None or op not in _CMP_OPS else DType.BOOL
    fn = SEMANTICS[op if op is not None else node.op]
    with np.errstate(all="ignore"):
        result = fn(node, *args)
    return nl.const(width(out_dt), _bits_of(out_dt, result)[0])


# ---------------------------------------------------------------------------- the loop


def port_name(index: int, name: str) -> str:
    return f"p{index}_" + re.sub(r"[^A-Za-z0-9_]", "_", name)


def module_name(name: str) -> str:
    return "kera_" + re.sub(r"[^A-Za-z0-9_]", "_", name)


def _lower_node(nl: Netlist, node: Node, env: dict[int, Elems], ports: dict[int, str]) -> Elems:
    dt = node.dtype
    if node.op is Op.PARAM:
        w = width(dt)
        port = ports[id(node)]
        return [nl.add(Cell("in", w, port=port, lo=e * w)) for e in range(size(node.shape))]
    if node.op is Op.CONST:
        return [nl.const(width(dt), v) for v in _bits_of(dt, const_value(node))]
    if node.op is Op.IOTA:
        return [nl.const(width(dt), v) for v in _bits_of(dt, LEAVES[Op.IOTA](node, 1)[0])]
    ins = [env[id(i)] for i in node.inputs]
    if node.op in STRUCTURAL:
        return structural(nl, node, ins)
    lower = ELEMENTWISE.get(node.op)
    if lower is None:
        raise VerilogEmitError(f"the Verilog back end has no lowering for '{node.op}'")
    return [_fold(nl, node, lower, list(ops)) for ops in zip(*ins, strict=True)]


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
        return self.elem_width * size(self.shape)


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


def emit(fn: Function, top: str | None = None) -> VerilogDesign:
    """Lower, schedule and render one function (see the module docstring)."""
    nl = Netlist()
    ports = {id(p): port_name(i, str(p.attr("name"))) for i, p in enumerate(fn.params)}
    env: dict[int, Elems] = {}
    for node in fn.nodes():
        env[id(node)] = _lower_node(nl, node, env, ports)
    results = [env[id(r)] for r in fn.results]
    inputs = tuple(Port(ports[id(p)], p.dtype, p.shape) for p in fn.params)
    outputs = tuple(Port(f"r{k}", r.dtype, r.shape) for k, r in enumerate(fn.results))
    return _Renderer(nl, results, inputs, outputs).design(fn.name, top or module_name(fn.name))


def emit_graph(graph: Graph) -> list[VerilogDesign]:
    return [emit(fn) for fn in graph.functions.values()]


# ---------------------------------------------------------------------------- rendering


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
