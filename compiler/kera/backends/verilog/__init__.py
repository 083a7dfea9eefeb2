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

Reductions, dot and matmul are the contract's tree laid out in hardware: pad to a power of two
with the identity, then ``x[i] = op(x[i], x[i+s])`` for ``s = P/2 .. 1``.  A step whose right
operand is padding is left out: ``op(x, identity)`` equals ``x`` bit for bit for every non-NaN
``x``, a NaN reaches the root through at least one real step (so it is canonical there), and a
length-1 float reduction gets an explicit canonicalising register.

The package (``docs/verilog-backend.md`` has the latency model and the targets):

===============  =============================================================================
``netlist.py``   :class:`Cell`, :class:`Netlist` (one cell per scalar net), dtype widths and
                 float-core parameters, constant folding through ``kera.semantics``
``lower.py``     :data:`LOWER`, the one op -> lowering table; :data:`SUPPORTED` derives
                 from it
``render.py``    liveness, the ASAP schedule, delay lines, the text; :class:`VerilogDesign`,
                 :class:`Port`, port and module names
``emit.py``      one element for the shared loop, ``emit``/``emit_graph``/``write``
===============  =============================================================================

The loop and the unrolled structure (reduction trees, products, data movement, constants)
are shared with the PTX back end in ``kera.backends.elementmaps``.
"""

from kera.backends.verilog.emit import emit, emit_graph, write
from kera.backends.verilog.lower import LOWER, SUPPORTED
from kera.backends.verilog.netlist import (
    MAX_CORES,
    Cell,
    Lower,
    Netlist,
    VerilogEmitError,
    VerilogSizeError,
    fparams,
    width,
)
from kera.backends.verilog.render import Port, VerilogDesign, module_name, port_name
from kera.ops import Op

#: ops of the contract this back end does not lower yet, with the reason (keracheck reports a
#: case using one as ``unsupported`` on this target, never as a pass)
UNSUPPORTED: dict[Op, str] = {
    Op.DYNAMIC_SLICE: "dynamic indexing is not lowered by this back end yet (issue #16)",
    Op.DYNAMIC_UPDATE_SLICE: "dynamic indexing is not lowered by this back end yet (issue #16)",
    Op.LOOP: "loops are not lowered by this back end yet (issue #16)",
}


__all__ = [
    "LOWER",
    "MAX_CORES",
    "SUPPORTED",
    "UNSUPPORTED",
    "Cell",
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
