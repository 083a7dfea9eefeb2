"""The walk over a region's nodes, with the ops lowered a whole node at a time: ``loop``
(a real loop in the kernel), ``call`` (its callee walked in place) and dynamic indexing
(``dynamic.py``).

Every other node is lowered exactly as ``elementmaps.unroll_function`` does it (parameters
loaded, constants materialised, structural ops unrolled, elementwise ops one ``LOWER`` row
per element), in the same order, so a function without these ops emits the same text.

A loop group (``kera.ir.loop_group``: the sibling nodes of one loop, one per carried value) is
emitted once, where its first node comes in the region's canonical order::

        mov.bN      c, init              one register per carried element (copied: the loop
        mov.u32     count, 0             writes it, the init may be used elsewhere)
    LOOPn:
        add.s32     i, count, lo         the index _0 (lo + count never overflows: kera.ops
        <the body's nodes>                checks lo + trips - 1 fits in i32)
        mov.bN      t, next              only where a next value is another carried register
        mov.bN      c, next              the carried values, all at once (double-buffered)
        add.u32     count, count, 1
        setp.lt.u32 p, count, trips
        @p bra      LOOPn

Captured values are the loop's operands, computed before it; the body is walked as a region
of its own with its parameters bound to (index, carried registers, captures), nested loops
recursively.  Every thread runs the same trips, so the branch never diverges; iterations run
one after the other, in order.  A constant first materialised inside a body is defined before
any later use: every body runs at least once (``trips >= 1``) and is entered by falling
through, so its definitions dominate the code after it.

A call group (the sibling ``call`` nodes of one call, one per callee result) is the simpler
case: its callee is walked once, where the group's first node comes, as a region of its own
with its parameters bound to the operands' registers — straight-line code, no label, no copy.
A result is whatever register the callee's walk gives it: a new one, an operand's (a callee
that returns its parameter) or the constant pool's.  Every register is written once outside
a loop's commit, so sharing one between the caller and the callee is safe, and a second call
of the same callee is walked again with fresh registers (nothing carries from one call to
the next).  Float values are exact bits in registers (every arithmetic result is
canonicalised where it is made), so the call boundary needs no fix-up.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from kera.backends.elementmaps import Emitter, unroll_node
from kera.backends.ptx.dynamic import dynamic_slice, dynamic_update_slice
from kera.backends.ptx.kernel import Elems, Kernel
from kera.dtypes import DType
from kera.ir import Function, Node, loop_body, loop_group
from kera.ops import Op


class Elements(Emitter[str], Protocol):
    """One element of the kernel (``emit._Elements``), and the one whole-node lowering that
    needs the kernel's memory: a transfer, stored to and read back from a staging buffer."""

    def transfer(self, node: Node, elems: Elems) -> Elems: ...


@dataclass
class Walk:
    """Lowers regions of one kernel: ``k`` holds the code, ``emitter`` one element."""

    k: Kernel
    emitter: Elements
    groups: list[dict[tuple[Any, ...], list[Elems]]] = field(default_factory=list)

    def region(self, fn: Function, bound: Mapping[int, Elems]) -> list[Elems]:
        """The elements of ``fn``'s results; its parameters are ``bound`` (by ``id``) or,
        unbound, loaded (an exported function's)."""
        env: dict[int, Elems] = {}
        self.groups.append({})
        for node in fn.nodes():
            if node.op is Op.PARAM and id(node) in bound:
                env[id(node)] = bound[id(node)]
            else:
                env[id(node)] = self.node(node, [env[id(i)] for i in node.inputs])
        self.groups.pop()
        return [env[id(r)] for r in fn.results]

    def node(self, node: Node, ins: list[Elems]) -> Elems:
        whole = NODES.get(node.op)
        if whole is not None:
            return whole(self, node, ins)
        return unroll_node(self.emitter, node, ins)

    def loop(self, node: Node, ins: list[Elems]) -> Elems:
        """One carried value of a loop; the group's loop is emitted at its first node."""
        groups, key = self.groups[-1], loop_group(node)
        if key not in groups:
            groups[key] = self._emit_loop(node, ins)
        return groups[key][node.int_attr("result")]

    def call(self, node: Node, ins: list[Elems]) -> Elems:
        """One result of a call; the group's callee is walked at its first node."""
        groups, key = self.groups[-1], loop_group(node)
        if key not in groups:
            callee = loop_body(node)
            bound = {id(p): v for p, v in zip(callee.params, ins, strict=True)}
            groups[key] = self.region(callee, bound)
        return groups[key][node.int_attr("result")]

    def _emit_loop(self, node: Node, ins: list[Elems]) -> list[Elems]:
        k, body = self.k, loop_body(node)
        kinds = [r.dtype for r in body.results]
        carried = [self._fresh(dt, elems) for dt, elems in zip(kinds, ins, strict=False)]
        count = k.reg("b32")
        k.emit(f"mov.u32 {count}, 0;")
        head = k.label()
        index = k.op(DType.I32, f"add.s32 {{d}}, {{0}}, {node.int_attr('lo')};", count)
        values = [[index], *carried, *ins[len(carried) :]]
        bound = {id(p): v for p, v in zip(body.params, values, strict=True)}
        self._commit(kinds, carried, self.region(body, bound))
        done = k.reg("pred")
        k.emit(f"add.u32 {count}, {count}, 1;")
        k.emit(f"setp.lt.u32 {done}, {count}, {node.int_attr('trips')};")
        k.emit(f"@{done} bra {head};")
        return carried

    def _fresh(self, dt: DType, elems: Elems) -> Elems:
        """Registers of a carried value, holding ``elems`` (the loop writes them)."""
        out = []
        for x in elems:
            r = self.k.new(dt)
            self.k.move(dt, r, x)
            out.append(r)
        return out

    def _commit(self, kinds: Sequence[DType], carried: list[Elems], nxt: list[Elems]) -> None:
        """``carried = nxt`` for every value at once: a next value that is itself a carried
        register (a swap, a rotation) is copied aside before any carried register is written."""
        written = {r for elems in carried for r in elems}
        staged = []
        for dt, dst, src in zip(kinds, carried, nxt, strict=True):
            staged.append(
                [
                    self._fresh(dt, [s])[0] if s in written and s != d else s
                    for d, s in zip(dst, src, strict=True)
                ]
            )
        for dt, dst, src in zip(kinds, carried, staged, strict=True):
            for d, s in zip(dst, src, strict=True):
                if d != s:
                    self.k.move(dt, d, s)


def _dynamic(lower: Callable[[Kernel, Node, Sequence[Elems]], Elems]) -> NodeLower:
    def whole(walk: Walk, node: Node, ins: list[Elems]) -> Elems:
        return lower(walk.k, node, ins)

    return whole


NodeLower = Callable[[Walk, Node, list[Elems]], Elems]


def _transfer(walk: Walk, node: Node, ins: list[Elems]) -> Elems:
    """A transfer, performed through memory of its destination space (``emit._Elements``)."""
    return walk.emitter.transfer(node, ins[0])


#: ops lowered a whole node at a time: their elements are not independent of each other (a
#: start index that is data chooses among them; a loop runs its body, a call its callee) —
#: SUPPORTED counts them
NODES: dict[Op, NodeLower] = {
    Op.DYNAMIC_SLICE: _dynamic(dynamic_slice),
    Op.DYNAMIC_UPDATE_SLICE: _dynamic(dynamic_update_slice),
    Op.LOOP: Walk.loop,
    Op.CALL: Walk.call,
    Op.TRANSFER: _transfer,  # stored to and reloaded from a buffer in the destination space
}
