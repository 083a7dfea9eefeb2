"""PTX back end: one contract-exact kernel per exported function.

Kernel ABI (``kera_<function name>``)::

    .param .u64 in0 .. in{P-1}     one pointer per parameter, rows of N input vectors (C order)
    .param .u64 out0 .. out{R-1}   one pointer per result, rows of N output vectors
    .param .u32 n                  the batch size N

Thread ``i`` computes batch row ``i``, fully unrolled (every element in its own register).

The package (``docs/ptx-backend.md`` has the fix-ups and their ISA references):

==============  ==============================================================================
``kernel.py``   :class:`Kernel` (instruction buffer, register allocator, constant pool), the
                register classes and instruction types of each dtype, :class:`PtxEmitError`
``lower.py``    :data:`LOWER`, the one op -> lowering table (why each row is contract-exact);
                :data:`SUPPORTED` derives from it
``emit.py``     the kernel structure: loads, stores, one element for the shared loop,
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
    header,
    kernel,
    kernel_name,
    write,
)
from kera.backends.ptx.kernel import MAX_INSTRUCTIONS, Kernel, PtxEmitError
from kera.backends.ptx.lower import LOWER, SUPPORTED, Lower, Row
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
    "MAX_INSTRUCTIONS",
    "SUPPORTED",
    "TARGET",
    "UNSUPPORTED",
    "VERSION",
    "Kernel",
    "Lower",
    "PtxEmitError",
    "Row",
    "emit",
    "emit_graph",
    "header",
    "kernel",
    "kernel_name",
    "write",
]
