"""PTX back end: one contract-exact kernel per exported function.

Kernel ABI (``kera_<function name>``)::

    .param .u64 in0 .. in{P-1}     one pointer per parameter, rows of N input vectors (C order)
    .param .u64 out0 .. out{R-1}   one pointer per result, rows of N output vectors
    .param .u32 n                  the batch size N
    .param .u64 xfer0 .. xfer{T-1} only with transfers: one staging buffer per transfer the
                                   kernel performs, N rows, in its destination space (Slot)

Thread ``i`` computes batch row ``i``, fully unrolled (every element in its own register)
except loops, which are loops in the kernel over those registers (a call is its callee's
code in place, on the operands' registers).

The package (``docs/ptx-backend.md`` has the fix-ups and their ISA references):

==============  ==============================================================================
``kernel.py``   :class:`Kernel` (instruction buffer, register allocator, constant pool), the
                register classes and instruction types of each dtype, :class:`PtxEmitError`
``lower.py``    :data:`LOWER`, the one op -> lowering table (why each row is contract-exact);
                :data:`SUPPORTED` derives from it
``region.py``   :class:`Walk`, the walk over a region's nodes; :data:`NODES`, the ops
                lowered a whole node at a time (``loop`` as a loop in the kernel, ``call``
                as its callee walked in place, dynamic indexing)
``dynamic.py``  ``dynamic_slice``/``dynamic_update_slice``: clamped starts and mux trees
``emit.py``     the kernel structure: loads, stores, one element for the walk,
                ``emit``/``emit_graph``/``write``
==============  ==============================================================================

The loop and the unrolled structure (reduction trees, products, data movement, constants)
are shared with the Verilog back end in ``kera.backends.elementmaps``.
"""

from kera.backends.ptx.emit import (
    TARGET,
    VERSION,
    emit,
    emit_graph,
    emit_slots,
    header,
    kernel,
    kernel_name,
    write,
)
from kera.backends.ptx.kernel import MAX_INSTRUCTIONS, Kernel, PtxEmitError, Slot
from kera.backends.ptx.lower import LOWER, SUPPORTED, Lower, Row
from kera.backends.ptx.region import NODES, Walk
from kera.ops import Op

#: ops of the contract this back end does not lower yet, with the reason (keracheck reports a
#: case using one as ``unsupported`` on this target, never as a pass): none left
UNSUPPORTED: dict[Op, str] = {}


__all__ = [
    "LOWER",
    "MAX_INSTRUCTIONS",
    "NODES",
    "SUPPORTED",
    "TARGET",
    "UNSUPPORTED",
    "VERSION",
    "Kernel",
    "Lower",
    "PtxEmitError",
    "Row",
    "Slot",
    "Walk",
    "emit",
    "emit_graph",
    "emit_slots",
    "header",
    "kernel",
    "kernel_name",
    "write",
]
