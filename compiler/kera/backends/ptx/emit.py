"""The kernel structure: one ``.entry`` per function, its loads and stores, and what one
element costs for the walk over its nodes (``region.Walk``, which lowers the rest as
``elementmaps.unroll_function`` does for Verilog).

Thread ``i = ctaid.x * ntid.x + tid.x`` computes batch row ``i`` (threads with ``i >= N``
exit), fully unrolled: every tensor element lives in its own register, data movement
(broadcast, reshape, transpose, slice, concat) is resolved at compile time into register
renaming, and reductions are trees of instructions in the contract's order.  ``bool`` is one
byte in memory (0/1) and a ``.pred`` register inside the kernel.  Each element of an op is
lowered by its row of :data:`kera.backends.ptx.lower.LOWER`; loops and dynamic indexing by
:data:`kera.backends.ptx.region.NODES` (a loop is a loop in the kernel, over registers; a call
is its callee walked in place, on its operands' registers).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from kera.backends.ptx.kernel import ARITH, PREFIX, Elems, Kernel, PtxEmitError, Slot
from kera.backends.ptx.lower import LOWER
from kera.backends.ptx.region import Walk
from kera.dtypes import DType
from kera.files import write_atomic
from kera.ir import Function, Graph, Node
from kera.ops import Op

VERSION = "8.0"
TARGET = "sm_80"

MEMTYPE = {**ARITH, DType.BOOL: "u8"}


def kernel_name(fn: Function) -> str:
    return "kera_" + re.sub(r"[^A-Za-z0-9_]", "_", fn.name)


# -- loads and stores: one row of the batch per thread ---------------------------------------


def _row_base(k: Kernel, param: str, row_bytes: int) -> str:
    if row_bytes >= 1 << 32:
        raise PtxEmitError(f"a row of {row_bytes} bytes does not fit the 32-bit offset scheme")
    base, off = k.reg("b64"), k.reg("b64")
    k.emit(f"ld.param.u64 {base}, [{param}];")
    k.emit(f"cvta.to.global.u64 {base}, {base};")
    k.emit(f"mul.wide.u32 {off}, %row, {row_bytes};")
    k.emit(f"add.s64 {base}, {base}, {off};")
    return base


def _load(k: Kernel, node: Node, index: int) -> Elems:
    return _load_row(k, node, f"in{index}")


def _load_row(k: Kernel, node: Node, param: str) -> Elems:
    """This thread's row of ``node``'s elements from the buffer kernel parameter ``param``
    points to."""
    return _load_at(k, node, _row_base(k, param, node.type.size * node.dtype.nbytes))


def _load_at(k: Kernel, node: Node, base: str) -> Elems:
    dt, size = node.dtype, node.type.size
    out = []
    for j in range(size):
        addr = f"[{base}+{j * dt.nbytes}]"
        if dt is DType.BOOL:
            byte = k.reg("b16")
            k.emit(f"ld.global.u8 {byte}, {addr};")
            out.append(k.op(dt, "setp.ne.b16 {d}, {0}, 0;", byte))
        else:
            out.append(k.op(dt, f"ld.global.{MEMTYPE[dt]} {{d}}, {addr};"))
    return out


def _store(k: Kernel, node: Node, index: int, elems: Elems) -> None:
    _store_row(k, node, f"out{index}", elems)


def _store_row(k: Kernel, node: Node, param: str, elems: Elems) -> None:
    """``elems`` as this thread's row of the buffer kernel parameter ``param`` points to."""
    _store_at(k, node, _row_base(k, param, len(elems) * node.dtype.nbytes), elems)


def _store_at(k: Kernel, node: Node, base: str, elems: Elems) -> None:
    dt = node.dtype
    for j, x in enumerate(elems):
        addr = f"[{base}+{j * dt.nbytes}]"
        if dt is DType.BOOL:
            byte = k.reg("b16")
            k.emit(f"selp.u16 {byte}, 1, 0, {x};")
            k.emit(f"st.global.u8 {addr}, {byte};")
        else:
            k.emit(f"st.global.{MEMTYPE[dt]} {addr}, {x};")


# -- one element, for the walk (region.Walk) -------------------------------------------------


@dataclass(frozen=True)
class _Elements:
    """What one element costs (``elementmaps.Emitter``): a register of :class:`Kernel`."""

    k: Kernel
    params: dict[int, int]

    def load(self, node: Node) -> Elems:
        return _load(self.k, node, self.params[id(node)])

    def constant(self, dt: DType, bits: int) -> str:
        return self.k.const(dt, bits)

    def element(self, node: Node, operands: Sequence[str]) -> str:
        row = LOWER.get(node.op)
        if row is None:
            raise PtxEmitError(f"the PTX back end has no lowering for '{node.op}'")
        return row.lower(self.k, node, operands)

    def binary(self, node: Node, op: Op, left: str, right: str) -> str:
        return LOWER[op].step(self.k, node, (left, right))

    def finish(self, node: Node, root: str, n: int) -> str:
        return self.k.canon(node.dtype, root) if node.dtype.is_float else root

    def transfer(self, node: Node, elems: Elems) -> Elems:
        """A move between memory spaces, performed: the row is stored to the transfer's own
        staging buffer (kernel parameter ``xfer<i>``, allocated by the launcher in the
        destination space: :class:`Slot`) and read back from there; the value goes on from
        the copy.  In a loop body it is performed on every trip."""
        k = self.k
        slot = Slot(str(node.attr("from")), str(node.attr("to")), len(elems) * node.dtype.nbytes)
        param = f"xfer{len(k.slots)}"
        k.slots.append(slot)
        k.emit(f"// transfer {slot.source} -> {slot.dest} through {param} ({slot.space})")
        base = _row_base(k, param, slot.row_bytes)
        _store_at(k, node, base, elems)
        return _load_at(k, node, base)


def kernel(fn: Function) -> str:
    """The ``.entry`` of one function (see the package docstring for its ABI)."""
    return kernel_slots(fn)[0]


def kernel_slots(fn: Function) -> tuple[str, list[Slot]]:
    """The ``.entry`` of one function and the staging buffers of its transfers, one per
    ``xfer<i>`` parameter, in order (what a launcher allocates)."""
    k = Kernel()
    params = {id(p): i for i, p in enumerate(fn.params)}
    results = Walk(k, _Elements(k, params)).region(fn, {})
    for index, (result, elems) in enumerate(zip(fn.results, results, strict=True)):
        _store(k, result, index, elems)
    names = [f"in{i}" for i in range(len(fn.params))] + [f"out{i}" for i in range(len(fn.results))]
    head = [f"\t.param .u64 {name}," for name in names] + ["\t.param .u32 n"]
    if k.slots:  # after n: the ABI of a kernel without transfers is unchanged
        head[-1] += ","
        head += [f"\t.param .u64 xfer{i}," for i in range(len(k.slots))]
        head[-1] = head[-1].rstrip(",")
    decls = [f"\t.reg .{cls} {PREFIX[cls]}<{count}>;" for cls, count in sorted(k.counts.items())]
    prologue = [
        "\t.reg .b32 %row, %nthreads, %block, %rows;",
        "\t.reg .pred %done;",
        "\tmov.u32 %row, %tid.x;",
        "\tmov.u32 %nthreads, %ntid.x;",
        "\tmov.u32 %block, %ctaid.x;",
        "\tmad.lo.u32 %row, %block, %nthreads, %row;",
        "\tld.param.u32 %rows, [n];",
        "\tsetp.ge.u32 %done, %row, %rows;",
        "\t@%done bra DONE;",
    ]
    lines = [f".visible .entry {kernel_name(fn)}(", *head, ")", "{", *decls, *prologue]
    return "\n".join([*lines, *k.body, "DONE:", "\tret;", "}", ""]), k.slots


def header() -> str:
    return f"// Generated by kerac (PTX back end)\n.version {VERSION}\n.target {TARGET}\n.address_size 64\n"


def emit(fn: Function) -> str:
    """A PTX module with the kernel of one function."""
    return header() + "\n" + kernel(fn)


def emit_slots(fn: Function) -> tuple[str, list[Slot]]:
    """:func:`emit` and the staging buffers of the kernel's transfers (:func:`kernel_slots`)."""
    text, slots = kernel_slots(fn)
    return header() + "\n" + text, slots


def emit_graph(graph: Graph) -> str:
    """A PTX module with one kernel per exported function, in export order."""
    return header() + "".join("\n" + kernel(fn) for fn in graph.functions.values())


def write(graph: Graph, output: str | None) -> None:
    """``kerac emit --target ptx``: the module to ``output`` (stdout when None)."""
    text = emit_graph(graph)
    if output is None:
        print(text, end="")
    else:
        write_atomic(output, text)
