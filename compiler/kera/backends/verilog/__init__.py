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

A function with loops is still one top module, with an ``output wire ready`` after
``valid_in``: each loop group is an instance of a loop module (a body datapath iterated by an
FSM, ``loop.py``) and the top accepts a vector (``valid_in & ready``) once per
:attr:`VerilogDesign.interval` clocks; results still come exactly ``latency`` clocks later.
``dynamic_slice``/``dynamic_update_slice`` clamp their start indices and select through
registered muxes (``dynamic.py``).  A ``call`` adds no module: its callee's cells join the
caller's datapath (or loop body), bound to the operands' nets, in one schedule.

Reductions, dot and matmul are the contract's tree laid out in hardware: pad to a power of two
with the identity, then ``x[i] = op(x[i], x[i+s])`` for ``s = P/2 .. 1``.  A step whose right
operand is padding is left out: ``op(x, identity)`` equals ``x`` bit for bit for every non-NaN
``x``, a NaN reaches the root through at least one real step (so it is canonical there), and a
length-1 float reduction gets an explicit canonicalising register.

The package (``docs/verilog-backend.md`` has the latency model and the targets):

===============  =============================================================================
``netlist.py``   :class:`Cell`, :class:`Netlist` (one cell per scalar net), dtype widths and
                 float-core parameters (no op is evaluated here: folding is the ``fold`` pass)
``lower.py``     :data:`LOWER`, the one elementwise op -> lowering table
``dynamic.py``   start-index clamps and the muxes of ``dynamic_slice``/``dynamic_update_slice``
``loop.py``      the module of one loop group: registers, FSM, the body's datapath
``render.py``    liveness, the ASAP schedule, delay lines, the text; :class:`VerilogDesign`,
                 :class:`Port`, port and module names
``emit.py``      one element for the shared loop, :data:`NODES` (the ops lowered as whole
                 nodes: dynamic indexing, loops, calls); :data:`SUPPORTED` derives from ``LOWER``
                 and ``NODES``; ``emit``/``emit_graph``/``write``
===============  =============================================================================

The loop and the unrolled structure (reduction trees, products, data movement, constants)
are shared with the PTX back end in ``kera.backends.elementmaps``.
"""

from kera.backends.verilog.emit import NODES, SUPPORTED, emit, emit_graph, write
from kera.backends.verilog.lower import LOWER
from kera.backends.verilog.netlist import (
    MAX_CORES,
    Cell,
    LoopModule,
    Lower,
    Netlist,
    VerilogEmitError,
    VerilogSizeError,
    fparams,
    width,
)
from kera.backends.verilog.render import Port, VerilogDesign, module_name, port_name
from kera.ops import Op

#: ops of the contract this back end does not lower, with the reason (keracheck reports a case
#: using one as ``unsupported`` on this target, never as a pass); none at present
UNSUPPORTED: dict[Op, str] = {}


__all__ = [
    "LOWER",
    "MAX_CORES",
    "NODES",
    "SUPPORTED",
    "UNSUPPORTED",
    "Cell",
    "LoopModule",
    "Lower",
    "Netlist",
    "Port",
    "VerilogDesign",
    "VerilogEmitError",
    "VerilogSizeError",
    "emit",
    "emit_graph",
    "fparams",
    "module_name",
    "port_name",
    "width",
    "write",
]
