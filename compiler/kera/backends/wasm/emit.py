"""The WebAssembly back end: Kera functions -> one binary module (scalar or SIMD128).

Calling convention.  Each function becomes an exported wasm function ``(param i32 ...)``::

    name(n, scratch, in_0, ..., in_{P-1}, out_0, ..., out_{R-1})

``n`` is the number of cases; ``in_k`` / ``out_j`` point at arrays of shape ``(n, *shape)`` in C
order (the numpy layout; bool is one byte 0/1); ``scratch`` points at ``n *
Kernel.scratch_per_case`` bytes the kernel may use for intermediates.  The module exports its
memory as ``mem``; the host grows it as needed and places buffers at or above ``heap_base``
(16-byte aligned).  Below ``heap_base`` lie the reduction work area (at 1024) and the constant
data (data segments).  No imports; no traps on any input.

Code shape.  Nodes are visited in the function's canonical order.  Consecutive elementwise
nodes with the same number of elements per case form a *group*, compiled to one loop over all
``n * size`` elements (the batch is flat): only values used outside the group, and results,
are stored.  ``reshape`` is free (a different view of the same bytes); ``broadcast``,
``transpose``, ``slice`` and ``concat`` are strided copies; ``sum/prod/amin/amax``, ``dot`` and
``matmul`` gather each reduced row into the work area, pad it to a power of two with the
identity and run the contract's tree there, level by level (x[i] = op(x[i], x[i+s])).  With
``simd=True`` every such loop runs four elements per step on v128 values (lane i of a step is
tree index i, so the tree is the contract's), with a scalar tail; each op's lowering is in
:data:`kera.backends.wasm.lower.LOWER`.  Uniform constants (and broadcasts of them) become
immediates; other constants are data segments copied per case when read through memory.  No
op is evaluated at compile time, data movement over constants included: folding is the
``fold`` pass's (``_Kernel._materialise``).

``dynamic_slice`` and ``dynamic_update_slice`` load each case's start indices, clamp them into
``[0, dim - window]`` by i32 compares before any address arithmetic, and copy the window row
by row (an update first copies x into a new array).  A ``loop`` is one wasm ``loop`` per loop
group (never unrolled): carried values live in two scratch arrays each, ``cur`` read and
``next`` written by the body, the pointers swapped after every iteration; captured operands
are computed once before it; the body is emitted once inside it as a region of its own
(:class:`_Scope`), by the same per-node code, nested loops included; the index is an i32
local.  A ``call`` is its callee's region emitted in place, once per call group, in a scope
whose parameters are the operands' arrays and whose results go to arrays of their own.  See
``docs/wasm-backend.md``, "Dynamic indexing", "Loops" and "Calls".
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kera.backends.wasm import lower as wl
from kera.backends.wasm.encode import (
    BT_EMPTY,
    Code,
    Data,
    Export,
    ExportKind,
    Func,
    FuncType,
    Locals,
    Memory,
    Module,
    ValType,
    encode,
    get,
    i32c,
    if_,
    ins,
    op,
    put,
    select,
    to_wat,
)
from kera.backends.wasm.fma import fma_f32, fma_f64
from kera.backends.wasm.lower import BOOL, VT, Site
from kera.dtypes import DType
from kera.files import write_atomic
from kera.ir import Function, Graph, Node, loop_body, loop_group, topo_order
from kera.ops import (
    ELEMENTWISE,
    LEAVES,
    REDUCE,
    REDUCE_STEP,
    REGION_OPS,
    Op,
    reduce_identity_bits,
)
from kera.semantics import LEAVES as LEAF_VALUES

WORK_BASE = 1024
ALIGN = 16
PAGE = 65536
I32 = ValType.I32

#: helper name (what a lowering calls) -> the function that builds it under that name
_HELPERS: dict[str, Callable[[str], Func]] = {
    wl.FMA_HELPER[DType.F32]: fma_f32,
    wl.FMA_HELPER[DType.F64]: fma_f64,
}
#: ops with no code of their own: a parameter is an input buffer, constants and iota are data
#: (materialised, never computed by an op), a reshape is a view of its input's bytes
_FREE = LEAVES | {Op.RESHAPE}


class WasmCompileError(Exception):
    """A function the back end cannot compile (an op it does not lower)."""


@dataclass(frozen=True)
class Kernel:
    """One exported function and the per-case sizes the host needs to lay out buffers."""

    export: str
    fn: Function
    scratch_per_case: int
    in_bytes: tuple[int, ...]
    out_bytes: tuple[int, ...]


@dataclass(frozen=True)
class Program:
    module: Module
    wasm: bytes
    kernels: tuple[Kernel, ...]
    heap_base: int
    simd: bool

    @property
    def wat(self) -> str:
        return to_wat(self.module)

    def kernel(self, export: str) -> Kernel:
        for k in self.kernels:
            if k.export == export:
                return k
        raise KeyError(export)


def _align(x: int) -> int:
    return -(-x // ALIGN) * ALIGN


def _size(node: Node) -> int:
    # math.prod, not np.prod: called for every node several times per emission, where
    # numpy's per-call overhead was ~13% of emitting a fuzzed batch (same value: ints)
    return math.prod(node.shape)


def _nbytes(node: Node) -> int:
    return _size(node) * node.dtype.nbytes


def _strides(shape: Sequence[int]) -> list[int]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return out[::-1]


def _pow2(n: int) -> int:
    return 1 << (n - 1).bit_length()


def _uniform_bits(value: np.ndarray[Any, Any]) -> int | None:
    """The common bit pattern if every element of value is bit-identical, else None."""
    flat = value.reshape(-1).view(f"<u{value.dtype.itemsize}")
    if flat.size == 0 or not (flat == flat[0]).all():
        return None
    return int(flat[0])


# ============================================================================ streams and steps


@dataclass(frozen=True)
class Stream:
    """Elements of ``dtype`` read or written at ``ptr`` (+ i * stride elements)."""

    key: object
    dtype: DType
    ptr: Code
    stride: int = 1


@dataclass(frozen=True)
class Step:
    key: object
    site: Site
    args: tuple[object, ...]


#: a value every element of a stream shares: its dtype and its bits (a constant) or the code
#: that yields it (a loop's index, in a local)
Imm = tuple[DType, int | Code]


# ============================================================================ module state


@dataclass
class _ModuleState:
    simd: bool
    n_kernels: int
    work_bytes: int
    helpers: list[str] = field(default_factory=list)
    data: list[Data] = field(default_factory=list)
    data_end: int = 0

    def helper(self, name: str) -> int:
        if name not in self.helpers:
            self.helpers.append(name)
        return self.n_kernels + self.helpers.index(name)

    def add_data(self, raw: bytes) -> int:
        for d in self.data:
            if d.data == raw:
                return d.offset
        addr = self.data_end
        self.data.append(Data(addr, raw))
        self.data_end = _align(addr + len(raw))
        return addr


# ============================================================================ one kernel


@dataclass
class _Scope:
    """The region being emitted: the exported function, a loop's body inside its loop, or a
    callee where it is called.

    What a node's values are is looked up here, per region, never function-wide: regions nest
    and share interned nodes (every body's index is the same ``_0`` node, and an inner body's
    carried ``_1`` may be the outer body's ``_1``).  ``nodes`` are the region's nodes in an
    order valid to run, ``results`` the values it hands back (a callee's: those some node
    reads), ``inputs`` maps a parameter to the local holding its array's address, ``outputs``
    are the locals of the arrays the results go to, ``base`` maps a node to the local holding
    its array's address, ``groups`` a loop or call group already run to the locals of its
    result arrays by result index (a loop's final carried ones).  In a body, ``index`` is the
    index parameter and the local holding its value, ``index_buf`` the local of the array it
    is spread into each iteration when something reads it through memory.
    """

    nodes: list[Node]
    results: Sequence[Node]
    inputs: dict[Node, int]
    outputs: list[int]
    base: dict[Node, int] = field(default_factory=dict)
    groups: dict[tuple[Any, ...], dict[int, int]] = field(default_factory=dict)
    index: tuple[Node, int] | None = None
    index_buf: int | None = None

    def index_local(self, node: Node) -> int | None:
        """The local holding node's value if node is this body's index."""
        return self.index[1] if self.index is not None and node is self.index[0] else None


class _Kernel:
    """Emits the body of one exported function (see the module docstring)."""

    def __init__(self, ms: _ModuleState, fn: Function) -> None:
        self.ms, self.fn, self.simd = ms, fn, ms.simd
        n_in, n_out = len(fn.params), len(fn.results)
        self.loc = Locals([I32] * (2 + n_in + n_out))
        self.n, self.scratch = 0, 1
        inputs = {p: 2 + i for i, p in enumerate(fn.params)}
        self.sc = _Scope(fn.nodes(), fn.results, inputs, [2 + n_in + j for j in range(n_out)])
        self._temps: dict[ValType, int] = {}
        #: the values of the const and iota nodes met so far (materialised, see _materialise)
        self.consts: dict[Node, np.ndarray[Any, Any]] = {}
        #: nodes whose elements all have these bits, known while compiling (see _materialise)
        self.splats: dict[Node, int] = {}
        self.scratch_bytes = 0
        self.prologue: Code = []

    # -- Cx protocol for the lowering tables

    def temp(self, vt: ValType) -> int:
        if vt not in self._temps:
            self._temps[vt] = self.loc.new(vt)
        return self._temps[vt]

    def helper(self, name: str) -> int:
        return self.ms.helper(name)

    def local(self, vt: ValType) -> int:
        return self.loc.new(vt)

    # -- classification

    def key(self, node: Node) -> Node:
        """The node whose values a node shares (reshape is a view of its input)."""
        while node.op is Op.RESHAPE:
            node = node.inputs[0]
        return node

    def known(self, key: Node) -> bool:
        """Whether key's values are known while compiling: a constant, iota or splat."""
        return key in self.consts or key in self.splats

    def _materialise(self, nodes: Sequence[Node]) -> None:
        """How constants are stored, never what an op computes (folding is the ``fold``
        pass's, once; ``docs/wasm-backend.md``).  A ``const`` node's bytes and an ``iota``'s
        values (``kera.semantics.LEAVES``, the interpreter's own) become data, written into a
        case's array when something reads them through memory.  A value whose elements all
        have the same bits is a *splat*: a uniform constant, and a ``broadcast`` of a splat --
        the one way the IR spells a uniform tensor constant (every literal ``2.0`` is
        ``broadcast(const)``, and the ``fold`` pass keeps a uniform result that way).  A splat
        is an immediate in a loop, never an array in memory: its bits are its operand's bits,
        computed by no op.  Every other op over constants, data movement included, runs at
        run time like any other."""
        for node in nodes:
            if node.op in LEAF_VALUES:
                value = self.consts[node] = LEAF_VALUES[node.op](node, 1)[0]
                if (bits := _uniform_bits(value)) is not None:
                    self.splats[node] = bits
            elif node.op is Op.BROADCAST and self.key(node.inputs[0]) in self.splats:
                self.splats[node] = self.splats[self.key(node.inputs[0])]

    def _actions(self, nodes: Sequence[Node]) -> list[list[Node]]:
        """Groups of elementwise nodes and single nodes, in an order valid to run."""
        actions: list[list[Node]] = []
        group: list[Node] = []
        for node in nodes:
            if node.op in _FREE or node in self.splats:
                continue
            if node.op not in SUPPORTED:
                raise WasmCompileError(f"the wasm back end does not lower '{node.op}'")
            if node.op in ELEMENTWISE:
                if group and _size(group[0]) != _size(node):
                    actions.append(group)
                    group = []
                group.append(node)
                continue
            if group:
                actions.append(group)
                group = []
            actions.append([node])
        if group:
            actions.append(group)
        return actions

    # -- buffers

    def _alloc(self, per_case: int) -> int:
        """A local holding the address of ``n * per_case`` bytes of scratch (set on entry)."""
        local = self.loc.new(I32)
        off = self.scratch_bytes
        self.scratch_bytes += _align(per_case)
        addr = op("i32.add", get(self.scratch), op("i32.mul", get(self.n), i32c(off)))
        self.prologue += put(local, addr)
        return local

    def _scratch_buffer(self, key: Node) -> int:
        local = self.sc.base[key] = self._alloc(_nbytes(key))
        return local

    def buffer(self, key: Node) -> Code:
        """The address of key's (n, *shape) array, materialising a constant on first use."""
        if key.op is Op.PARAM:
            if self.sc.index_local(key) is not None:
                return get(self._index_buffer())
            return get(self.sc.inputs[key])
        if key not in self.sc.base:
            if not self.known(key):
                raise AssertionError(f"{key} has no buffer")
            local = self._scratch_buffer(key)
            self.prologue += self._fill(key, get(local))
        return get(self.sc.base[key])

    def _index_buffer(self) -> int:
        """The array a body's index is spread into, each iteration, for reads through memory."""
        if self.sc.index_buf is None:
            self.sc.index_buf = self._alloc(DType.I32.nbytes)
        return self.sc.index_buf

    def _copy_in(self, src: Node, dst: Code) -> Code:
        """Every case of src's array copied to the array at dst (a constant: written there)."""
        k = self.key(src)
        if self.known(k) and k not in self.sc.base:
            return self._fill(k, dst)
        size = op("i32.mul", get(self.n), i32c(_nbytes(k)))
        return [*dst, *self.buffer(k), *size, ins("memory.copy")]

    def _fill(self, key: Node, dst: Code) -> Code:
        """Code writing the constant key into every case of the array at dst."""
        bits = self.splats.get(key)
        count = op("i32.mul", get(self.n), i32c(_size(key)))
        if bits is not None:
            return self.map(count, [], {key: (key.dtype, bits)}, [], [Stream(key, key.dtype, dst)])
        addr = self.ms.add_data(np.ascontiguousarray(self.consts[key]).tobytes())
        nbytes = _nbytes(key)

        def copy(ptrs: list[Code]) -> Code:
            return [*ptrs[0], *i32c(addr), *i32c(nbytes), ins("memory.copy")]

        return self.nest([get(self.n)], [(dst, [nbytes])], copy)

    # -- loops

    def nest(
        self,
        extents: Sequence[int | Code],
        ptrs: Sequence[tuple[Code, Sequence[int]]],
        body: Callable[[list[Code]], Code],
    ) -> Code:
        """Nested counted loops; each pointer advances by its byte stride for each level."""
        if not extents:
            return body([p for p, _ in ptrs])
        extent, rest = extents[0], extents[1:]
        if isinstance(extent, int) and extent == 1:
            return self.nest(rest, [(p, s[1:]) for p, s in ptrs], body)
        cur = [self.loc.new(I32) for _ in ptrs]
        inner = self.nest(
            rest, [(get(c), s[1:]) for c, (_, s) in zip(cur, ptrs, strict=True)], body
        )
        advance = [
            i for c, (_, s) in zip(cur, ptrs, strict=True) if s[0]
            for i in put(c, op("i32.add", get(c), i32c(s[0])))
        ]  # fmt: skip
        init = [i for c, (p, _) in zip(cur, ptrs, strict=True) for i in put(c, p)]
        return init + self._counted(extent, inner + advance)

    def _counted(self, count: int | Code, body: Code) -> Code:
        if isinstance(count, int):
            if count <= 0:
                return []
            count = i32c(count)
        cnt = self.loc.new(I32)
        loop = [
            ins("loop", BT_EMPTY),
            *body,
            *put(cnt, op("i32.sub", get(cnt), i32c(1))),
            *get(cnt),
            ins("br_if", 0),
            ins("end"),
        ]
        return [*put(cnt, count), *if_(get(cnt), loop)]

    def map(
        self,
        count: int | Code,
        loads: Sequence[Stream],
        imms: dict[object, Imm],
        steps: Sequence[Step],
        stores: Sequence[Stream],
    ) -> Code:
        """One pass over ``count`` elements: load, compute the steps, store (SIMD + tail)."""
        if isinstance(count, int) and count <= 0:
            return []
        streams = [*loads, *stores]
        ptr = [self.loc.new(I32) for _ in streams]
        code = [i for p, s in zip(ptr, streams, strict=True) for i in put(p, s.ptr)]
        contiguous = all(s.stride == 1 for s in streams)
        wide = self.simd and contiguous and not (isinstance(count, int) and count < 4)
        if not wide:
            return code + self._counted(count, self._scalar_body(ptr, loads, imms, steps, stores))
        total = count if not isinstance(count, int) else i32c(count)
        n_vec, n_tail = self.loc.new(I32), self.loc.new(I32)
        code += put(n_vec, op("i32.shr_u", total, i32c(2)))
        code += put(n_tail, op("i32.and", total, i32c(3)))
        code += self._counted(get(n_vec), self._simd_body(ptr, loads, imms, steps, stores))
        code += self._counted(get(n_tail), self._scalar_body(ptr, loads, imms, steps, stores))
        return code

    def _advance(self, ptr: Sequence[int], streams: Sequence[Stream], elems: int) -> Code:
        code: Code = []
        for p, s in zip(ptr, streams, strict=True):
            step = s.stride * s.dtype.nbytes * elems
            if step:
                code += put(p, op("i32.add", get(p), i32c(step)))
        return code

    def _scalar_body(
        self,
        ptr: Sequence[int],
        loads: Sequence[Stream],
        imms: dict[object, Imm],
        steps: Sequence[Step],
        stores: Sequence[Stream],
    ) -> Code:
        code: Code = []
        val: dict[object, Code] = {k: _imm(dt, v) for k, (dt, v) in imms.items()}
        for p, s in zip(ptr[: len(loads)], loads, strict=True):
            local = self.loc.new(VT[s.dtype])
            code += put(local, op(_LOAD[s.dtype], get(p)))
            val[s.key] = get(local)
        for st in steps:
            local = self.loc.new(VT[st.site.out])
            code += put(local, wl.lower_scalar(self, st.site, [val[a] for a in st.args]))
            val[st.key] = get(local)
        for p, s in zip(ptr[len(loads) :], stores, strict=True):
            code += [*get(p), *val[s.key], ins(_STORE[s.dtype])]
        return code + self._advance(ptr, [*loads, *stores], 1)

    def _simd_body(
        self,
        ptr: Sequence[int],
        loads: Sequence[Stream],
        imms: dict[object, Imm],
        steps: Sequence[Step],
        stores: Sequence[Stream],
    ) -> Code:
        code: Code = []
        val: dict[object, list[Code]] = {
            k: [_vimm(dt, v)] * wl.regs(dt) for k, (dt, v) in imms.items()
        }
        for p, s in zip(ptr[: len(loads)], loads, strict=True):
            val[s.key] = []
            for load in _simd_load(s.dtype, get(p)):
                local = self.loc.new(ValType.V128)
                code += put(local, load)
                val[s.key].append(get(local))
        for st in steps:
            val[st.key] = []
            for reg in wl.lower_simd(self, st.site, [val[a] for a in st.args]):
                local = self.loc.new(ValType.V128)
                code += put(local, reg)
                val[st.key].append(get(local))
        for p, s in zip(ptr[len(loads) :], stores, strict=True):
            code += _simd_store(s.dtype, get(p), val[s.key])
        return code + self._advance(ptr, [*loads, *stores], 4)

    # -- actions

    def emit(self) -> Func:
        body = self._region()
        code = self.prologue + body  # the prologue is complete once the body is emitted
        sig = FuncType((I32,) * (2 + len(self.fn.params) + len(self.fn.results)), ())
        return Func(sig, tuple(self.loc.types), tuple(code), _wat_name(self.fn.name))

    def _region(self) -> Code:
        """The code of the current scope's region: its actions, then its result copies."""
        nodes = self.sc.nodes
        self._materialise(nodes)
        actions = self._actions(nodes)
        owner = {id(m): k for k, act in enumerate(actions) for m in act}
        outside: set[int] = set()
        for k, act in enumerate(actions):
            for m in act:
                for i in m.inputs:
                    src = self.key(i)
                    if owner.get(id(src), k) != k:
                        outside.add(id(src))
        primary = self._assign_outputs(actions)
        body: Code = []
        for act in actions:
            if act[0].op in ELEMENTWISE:
                body += self._group(act, outside, primary)
            else:
                body += self._single(act[0], primary)
        return body + self._result_copies(primary)

    def _assign_outputs(self, actions: list[list[Node]]) -> dict[int, int]:
        """Result j is written in place by the node computing it (first occurrence); a loop's
        or a call's values stay in its own buffers and are copied."""
        computed = {id(m) for act in actions for m in act if m.op not in _CONTROL}
        primary: dict[int, int] = {}
        for j, r in enumerate(self.sc.results):
            k = self.key(r)
            if id(k) in computed and id(k) not in primary:
                primary[id(k)] = j
                self.sc.base[k] = self.sc.outputs[j]
        return primary

    def _own_buffer(self, node: Node) -> Code:
        if node not in self.sc.base:
            self._scratch_buffer(node)
        return get(self.sc.base[node])

    def _operand(
        self, node: Node, members: set[int], loads: list[Stream], imms: dict[object, Any]
    ) -> object:
        k = self.key(node)
        if id(k) in members or k in imms or any(s.key is k for s in loads):
            return k
        if (bits := self.splats.get(k)) is not None:
            imms[k] = (k.dtype, bits)
        elif (index := self.sc.index_local(k)) is not None:
            imms[k] = (k.dtype, get(index))  # a loop's index: the same in every element
        else:
            loads.append(Stream(k, k.dtype, self.buffer(k)))
        return k

    def _group(self, group: list[Node], outside: set[int], primary: dict[int, int]) -> Code:
        members = {id(m) for m in group}
        loads: list[Stream] = []
        imms: dict[object, Any] = {}
        steps = []
        for m in group:
            args = tuple(self._operand(i, members, loads, imms) for i in m.inputs)
            steps.append(Step(m, Site(m.op, tuple(i.dtype for i in m.inputs), m.dtype), args))
        stores = [
            Stream(m, m.dtype, self._own_buffer(m))
            for m in group
            if id(m) in outside or id(m) in primary
        ]
        count = op("i32.mul", get(self.n), i32c(_size(group[0])))
        return self.map(count, loads, imms, steps, stores)

    def _result_copies(self, primary: dict[int, int]) -> Code:
        code: Code = []
        for j, r in enumerate(self.sc.results):
            k = self.key(r)
            if primary.get(id(k)) == j:
                continue
            dst = get(self.sc.outputs[j])
            if self.known(k) and k not in self.sc.base:
                code += self._fill(k, dst)
                continue
            count = op("i32.mul", get(self.n), i32c(_size(k)))
            code += self.map(count, [Stream(k, k.dtype, self.buffer(k))], {}, [],
                             [Stream(k, k.dtype, dst)])  # fmt: skip
        return code

    # -- movement, reductions

    def _single(self, node: Node, primary: dict[int, int]) -> Code:
        if node.op in _CONTROL:
            return self._grouped(node)
        out = self._own_buffer(node)
        if node.op in _PLANS:
            return self._reduction(node, out)
        return self._movement(node, out)

    def _box(
        self,
        src: Node,
        dst_case: int,
        dst: Code,
        extents: Sequence[int],
        src_strides: Sequence[int],
        dst_strides: Sequence[int],
        src_off: int = 0,
        dst_off: int = 0,
    ) -> Code:
        """Per case: dst[dst_off + i.dst_strides] = src[src_off + i.src_strides] (elements)."""
        k = self.key(src)
        es = src.dtype.nbytes
        s0 = op("i32.add", self.buffer(k), i32c(src_off * es))
        d0 = op("i32.add", dst, i32c(dst_off * es))
        outer: list[int | Code] = [get(self.n), *extents[:-1]]
        ptrs = [
            (s0, [_nbytes(k), *(s * es for s in src_strides[:-1])]),
            (d0, [dst_case, *(s * es for s in dst_strides[:-1])]),
        ]

        def row(p: list[Code]) -> Code:
            return self.map(
                extents[-1],
                [Stream(k, src.dtype, p[0], src_strides[-1])],
                {},
                [],
                [Stream(k, src.dtype, p[1], dst_strides[-1])],
            )

        return self.nest(outer, ptrs, row)

    def _movement(self, node: Node, out: Code) -> Code:
        """A strided copy per case (see :data:`_MOVES`)."""
        if not node.shape:  # rank 0: one element, no offset
            return self._box(node.inputs[0], _nbytes(node), out, [1], [0], [1])
        return _MOVES[node.op](self, node, out)

    def _broadcast(self, node: Node, out: Code) -> Code:
        """Stride 0 along the new leading axes and the size-1 axes."""
        (x,) = node.inputs
        xs, lead = _strides(x.shape), len(node.shape) - len(x.shape)
        src = [
            0 if d < lead or x.shape[d - lead] == 1 else xs[d - lead]
            for d in range(len(node.shape))
        ]
        return self._box(x, _nbytes(node), out, node.shape, src, _strides(node.shape))

    def _transpose(self, node: Node, out: Code) -> Code:
        (x,) = node.inputs
        perm = node.attr("perm")
        assert isinstance(perm, tuple)
        xs = _strides(x.shape)
        src = [xs[p] for p in perm]
        return self._box(x, _nbytes(node), out, node.shape, src, _strides(node.shape))

    def _transfer(self, node: Node, out: Code) -> Code:
        """A move between memory spaces, which WASM does not have (one linear memory): every
        case's bytes copied to the node's own array (``memory.copy``: bits as they are)."""
        return self._copy_in(node.inputs[0], out)

    def _slice(self, node: Node, out: Code) -> Code:
        (x,) = node.inputs
        start = node.attr("start")
        assert isinstance(start, tuple)
        xs = _strides(x.shape)
        off = sum(a * s for a, s in zip(start, xs, strict=True))
        return self._box(x, _nbytes(node), out, node.shape, xs, _strides(node.shape), off)

    def _concat(self, node: Node, out: Code) -> Code:
        """The first operand, then the second shifted along the axis."""
        axis = node.attr("axis")
        assert isinstance(axis, int)
        a, b = node.inputs
        out_strides = _strides(node.shape)
        first = self._box(a, _nbytes(node), out, a.shape, _strides(a.shape), out_strides)
        shift = a.shape[axis] * out_strides[axis]
        second = self._box(b, _nbytes(node), out, b.shape, _strides(b.shape), out_strides, 0, shift)
        return first + second

    # -- dynamic indexing

    def _dynamic_slice(self, node: Node, out: Code) -> Code:
        """Per case: the window of ``size`` at the clamped start of x, row by row."""
        x, start = node.inputs
        return self._window(x, start, out, node, x, node.shape)

    def _dynamic_update_slice(self, node: Node, out: Code) -> Code:
        """A new array (x copied, never updated in place: x may have other readers), then per
        case v written over the window at the clamped start."""
        x, v, start = node.inputs
        return self._copy_in(x, out) + self._window(v, start, out, node, x, v.shape)

    def _window(
        self, src: Node, start: Node, dst: Code, node: Node, big: Node, window: Sequence[int]
    ) -> Code:
        """Per case, a box of shape ``window`` copied from src to the array at dst (node's); the
        box lies at the clamped start inside ``big``, which is src (a slice) or the result (an
        update); the other side is the dense window.  Rows are contiguous on both sides."""
        k, ks = self.key(src), self.key(start)
        es = src.dtype.nbytes
        big_strides = [s * es for s in _strides(big.shape)]
        dense = [s * es for s in _strides(window)]
        at_src = big is src
        src_strides, dst_strides = (big_strides, dense) if at_src else (dense, big_strides)
        cases = [
            (self.buffer(k), [_nbytes(k)]),
            (self.buffer(ks), [_nbytes(ks)]),
            (dst, [_nbytes(node)]),
        ]

        def row(p: list[Code]) -> Code:
            return self.map(window[-1], [Stream(k, src.dtype, p[0])], {}, [],
                            [Stream(k, src.dtype, p[1])])  # fmt: skip

        def case(p: list[Code]) -> Code:
            code, off = self._clamped_offset(p[1], big.shape, window, big_strides)
            moved = op("i32.add", p[0 if at_src else 2], get(off))
            ends = (moved, p[2]) if at_src else (p[0], moved)
            return code + self.nest(
                window[:-1], [(ends[0], src_strides[:-1]), (ends[1], dst_strides[:-1])], row
            )

        return self.nest([get(self.n)], cases, case)

    def _clamped_offset(
        self, start: Code, dims: Sequence[int], window: Sequence[int], strides: Sequence[int]
    ) -> tuple[Code, int]:
        """Code setting a local to the window's byte offset: per axis ``d`` the start index
        (i32 ``start[d]``) clamped into ``[0, dims[d] - window[d]]`` by signed i32 compares,
        which no index value (INT32_MIN, INT32_MAX) overflows, times the axis' byte stride.
        Only the clamped index, at most a dimension, takes part in address arithmetic."""
        off, t = self.loc.new(I32), self.loc.new(I32)
        code = put(off, i32c(0))
        for d, (dim, size, stride) in enumerate(zip(dims, window, strides, strict=True)):
            hi = dim - size
            if hi == 0:
                continue  # the window spans the axis: the start is 0 whatever the index
            code += put(t, [*start, ins("i32.load", 2, 4 * d)])
            code += put(t, select(get(t), i32c(0), op("i32.gt_s", get(t), i32c(0))))  # max(t, 0)
            code += put(t, select(get(t), i32c(hi), op("i32.lt_s", get(t), i32c(hi))))  # min
            code += put(off, op("i32.add", get(off), op("i32.mul", get(t), i32c(stride))))
        return code, off

    # -- regions (loop, call)

    def _grouped(self, node: Node) -> Code:
        """A loop or call node's value: its group's region is emitted (by its op's
        :data:`_CONTROL` entry) at the first sibling met; every sibling reads its value from
        that one run's buffer."""
        group = loop_group(node)
        code: Code = []
        if group not in self.sc.groups:
            code, self.sc.groups[group] = _CONTROL[node.op](self, node)
        self.sc.base[node] = self.sc.groups[group][node.int_attr("result")]
        return code

    def _run_call(self, node: Node) -> tuple[Code, dict[int, int]]:
        """The callee's region, emitted once per call group, in place (no loop): its
        parameters are the operands' arrays (their addresses in locals, set here), its results
        go to arrays of their own in scratch, written by the nodes computing them (a result
        that is a parameter, a constant or a value returned twice is copied there).  Only the
        results some node of this region reads are made, with what they depend on (a call has
        no effects).  Values are canonical in memory, so nothing happens to NaNs at the
        boundary.  Returns the code and the locals pointing at the result arrays."""
        body, group = loop_body(node), loop_group(node)
        code: Code = []
        inputs: dict[Node, int] = {}
        for p, x in zip(body.params, node.inputs, strict=True):
            inputs[p] = self.loc.new(I32)
            code += put(inputs[p], self.buffer(self.key(x)))
        read = sorted(
            {
                n.int_attr("result")
                for n in self.sc.nodes
                if n.op is node.op and loop_group(n) == group
            }
        )
        results = [body.results[k] for k in read]
        outs = [self._alloc(_nbytes(r)) for r in results]
        code += self._inside(_Scope(topo_order(results), results, inputs, outs))
        return code, dict(zip(read, outs, strict=True))

    # -- loops

    def _run_loop(self, node: Node) -> tuple[Code, dict[int, int]]:
        """``block loop <body> <swap> br_if 0 end end``, run ``trips`` times (at least once).

        Each carried value has two arrays in scratch, ``cur`` (read by the body) and ``next``
        (the body's result j is written there); after each iteration the two pointers swap, so
        no next value overwrites a value the same iteration still reads.  Captured operands are
        computed before the loop, outside it; the body is emitted once, as a region of its own,
        by the same per-node emission (loops in it nest).  The index is an i32 local, ``lo`` +
        the iteration.  Returns the code and the locals pointing at the final values."""
        body = loop_body(node)
        code, inputs, cur, nxt = self._loop_operands(node, body)
        index, count = self.loc.new(I32), self.loc.new(I32)
        code += put(index, i32c(node.int_attr("lo"))) + put(count, i32c(node.int_attr("trips")))
        scope = _Scope(body.nodes(), body.results, inputs, nxt, index=(body.params[0], index))
        step = self._iteration(scope)
        for now, then in zip(cur, nxt, strict=True):  # swap: cur, next = next, cur
            step += [*get(now), *get(then), ins("local.set", now), ins("local.set", then)]
        step += put(index, op("i32.add", get(index), i32c(1)))  # wraps after the last trip only
        step += [*op("i32.sub", get(count), i32c(1)), ins("local.tee", count), ins("br_if", 0)]
        loop = [ins("block", BT_EMPTY), ins("loop", BT_EMPTY), *step, ins("end"), ins("end")]
        return code + loop, dict(enumerate(cur))

    def _loop_operands(
        self, node: Node, body: Function
    ) -> tuple[Code, dict[Node, int], list[int], list[int]]:
        """Before the loop: each captured operand's address in a local (computed once), each
        carried value's two arrays with its initial value copied into ``cur``.  Returns that
        code, the body's parameters -> address locals, and the ``cur`` and ``next`` locals."""
        k = len(body.results)
        params, operands = body.params, node.inputs
        code: Code = []
        inputs: dict[Node, int] = {}
        for p, c in zip(params[1 + k :], operands[k:], strict=True):
            inputs[p] = self.loc.new(I32)
            code += put(inputs[p], self.buffer(self.key(c)))
        cur, nxt = [], []
        for p, init in zip(params[1 : 1 + k], operands[:k], strict=True):
            first, second = self._alloc(_nbytes(init)), self._alloc(_nbytes(init))
            cur.append(self.loc.new(I32))
            nxt.append(self.loc.new(I32))
            code += put(cur[-1], get(first)) + put(nxt[-1], get(second))
            code += self._copy_in(init, get(cur[-1]))
            inputs[p] = cur[-1]
        return code, inputs, cur, nxt

    def _iteration(self, scope: _Scope) -> Code:
        """One iteration: the body's region in its own scope, preceded by spreading the index
        into its array when something in the body reads the index through memory."""
        region = self._inside(scope)
        if scope.index_buf is None or scope.index is None:
            return region
        index = get(scope.index[1])
        spread = self.map(get(self.n), [], {"i": (DType.I32, index)}, [],
                          [Stream("i", DType.I32, get(scope.index_buf))])  # fmt: skip
        return spread + region

    def _inside(self, scope: _Scope) -> Code:
        """The region of ``scope`` (a loop's body, a callee), emitted in that scope."""
        outer, self.sc = self.sc, scope
        try:
            return self._region()
        finally:
            self.sc = outer

    def _reduction(self, node: Node, out: Code) -> Code:
        """Per case and output element: fill the work area, pad, run the tree, store x[0]."""
        extents, ptrs, fill = _PLANS[node.op](self, node)
        length = _tree_length(node)
        es = node.dtype.nbytes
        outs = _strides(node.shape)
        ptrs.append((out, [_nbytes(node), *(s * es for s in outs)]))

        def body(p: list[Code]) -> Code:
            tree = self._tree(node.op, node.dtype, length)
            return fill(p) + tree + self._store_root(node.dtype, p[-1])

        return self.nest([get(self.n), *extents], ptrs, body)

    def _plan_reduce(self, node: Node) -> _Plan:
        """The reduced axis of each output element, gathered with its stride."""
        (x,) = node.inputs
        dt, es = node.dtype, node.dtype.nbytes
        axis = node.attr("axis")
        assert isinstance(axis, int)
        xs = _strides(x.shape)
        keep = [d for d in range(len(x.shape)) if d != axis]
        ptrs = [(self.buffer(self.key(x)), [_nbytes(x), *(xs[d] * es for d in keep)])]

        def fill(p: list[Code]) -> Code:
            gather = [Stream("x", dt, p[0], xs[axis])]
            return self.map(x.shape[axis], gather, {}, [], [Stream("x", dt, i32c(WORK_BASE))])

        return [x.shape[d] for d in keep], ptrs, fill

    def _plan_dot(self, node: Node) -> _Plan:
        a, b = node.inputs
        ptrs = [(self.buffer(self.key(v)), [_nbytes(v)]) for v in (a, b)]

        def fill(p: list[Code]) -> Code:
            return self._products(a.shape[0], p[0], 1, p[1], 1, node.dtype)

        return [], ptrs, fill

    def _plan_matmul(self, node: Node) -> _Plan:
        """Row i of a (stride 1) times column j of b (stride n), per output element (i, j)."""
        a, b = node.inputs
        m, k = a.shape
        n = b.shape[1]
        es = node.dtype.nbytes
        ptrs = [
            (self.buffer(self.key(a)), [_nbytes(a), k * es, 0]),
            (self.buffer(self.key(b)), [_nbytes(b), 0, es]),
        ]

        def fill(p: list[Code]) -> Code:
            return self._products(k, p[0], 1, p[1], n, node.dtype)

        return [m, n], ptrs, fill

    def _products(self, k: int, a: Code, sa: int, b: Code, sb: int, dt: DType) -> Code:
        mul = Step("p", Site(Op.MUL, (dt, dt), dt), ("a", "b"))
        loads = [Stream("a", dt, a, sa), Stream("b", dt, b, sb)]
        return self.map(k, loads, {}, [mul], [Stream("p", dt, i32c(WORK_BASE))])

    def _tree(self, rop: Op, dt: DType, length: int) -> Code:
        es = dt.nbytes
        p = _pow2(length)
        ident = reduce_identity_bits(rop, dt)
        code = self.map(p - length, [], {"i": (dt, ident)}, [],
                        [Stream("i", dt, i32c(WORK_BASE + length * es))])  # fmt: skip
        step = Site(REDUCE_STEP[rop], (dt, dt), dt)
        s = p // 2
        while s >= 1:
            loads = [Stream("x", dt, i32c(WORK_BASE)), Stream("y", dt, i32c(WORK_BASE + s * es))]
            code += self.map(s, loads, {}, [Step("z", step, ("x", "y"))],
                             [Stream("z", dt, i32c(WORK_BASE))])  # fmt: skip
            s //= 2
        return code

    def _store_root(self, dt: DType, dst: Code) -> Code:
        """x[0], NaN made canonical (a tree of length 1 has no step that would do it)."""
        fix = Step("r", Site(Op.CONVERT, (dt,), dt), ("x",))
        return self.map(1, [Stream("x", dt, i32c(WORK_BASE))], {}, [fix], [Stream("r", dt, dst)])


#: a tree op's loops: the extents per case, their pointers with byte strides per level, and
#: the code that gathers one output element's row into the work area
_Plan = tuple[list[int], list[tuple[Code, list[int]]], Callable[[list[Code]], Code]]

#: movement op -> its strided copy (reshape is free, iota is folded: see _FREE)
_MOVES: dict[Op, Callable[[_Kernel, Node, Code], Code]] = {
    Op.BROADCAST: _Kernel._broadcast,
    Op.TRANSPOSE: _Kernel._transpose,
    Op.SLICE: _Kernel._slice,
    Op.CONCAT: _Kernel._concat,
    # a window at a start that is data, clamped per case before it becomes an address
    Op.DYNAMIC_SLICE: _Kernel._dynamic_slice,
    Op.DYNAMIC_UPDATE_SLICE: _Kernel._dynamic_update_slice,  # copy of x, then the window
    Op.TRANSFER: _Kernel._transfer,  # one memory: a copy of the bytes, into its own array
}
#: tree op -> how each output element's row is gathered into the work area; the tree's step
#: and padding come from kera.ops (REDUCE_STEP, reduce_identity_bits)
_PLANS: dict[Op, Callable[[_Kernel, Node], _Plan]] = {
    **dict.fromkeys(REDUCE, _Kernel._plan_reduce),
    Op.DOT: _Kernel._plan_dot,  # the products of a and b
    Op.MATMUL: _Kernel._plan_matmul,  # row i of a times column j of b
}

#: ops that hold a region: no array of their own, their values stay in the region's buffers;
#: each entry emits one group's region and returns its code and its result arrays' locals
_CONTROL: dict[Op, Callable[[_Kernel, Node], tuple[Code, dict[int, int]]]] = {
    Op.LOOP: _Kernel._run_loop,  # a wasm loop over the body, carried values double-buffered
    Op.CALL: _Kernel._run_call,  # the callee's region in place, once per call group
}

#: contract ops this back end lowers: the keys of its tables, never a hand-kept list
SUPPORTED = (
    frozenset(wl.LOWER) | frozenset(_MOVES) | frozenset(_PLANS) | frozenset(_CONTROL) | _FREE
)


_LOAD = {dt: f"{VT[dt].wat}.load" for dt in VT} | {BOOL: "i32.load8_u"}
_STORE = {dt: f"{VT[dt].wat}.store" for dt in VT} | {BOOL: "i32.store8"}


def _imm(dt: DType, value: int | Code) -> Code:
    """One element of an :data:`Imm`: a constant, or the code yielding the value."""
    return list(value) if isinstance(value, list) else wl.const(dt, value)


def _vimm(dt: DType, value: int | Code) -> Code:
    """An :data:`Imm` in every lane (a 32-bit value: the index is i32)."""
    if isinstance(value, list):
        return op(f"{wl.SHAPE[dt]}.splat", value)
    return wl.v128_splat(dt, value)


def _simd_load(dt: DType, ptr: Code) -> list[Code]:
    if dt is BOOL:  # four bytes 0/1 -> i32x4 mask 0/-1
        return [[*ptr, ins("v128.load32_zero"), ins("i16x8.extend_low_i8x16_u"),
                 ins("i32x4.extend_low_i16x8_u"), ins("i32x4.neg")]]  # fmt: skip
    return [[*ptr, ins("v128.load", 4, 16 * r)] for r in range(wl.regs(dt))]


def _simd_store(dt: DType, ptr: Code, regs: Sequence[Code]) -> Code:
    if dt is BOOL:  # mask -> four bytes 0/1
        one = wl.v128_splat(DType.I32, 1)
        v = op("v128.and", regs[0], one)
        v = [*v, *v, ins("i16x8.narrow_i32x4_u")]
        v = [*v, *v, ins("i8x16.narrow_i16x8_u")]
        return [*ptr, *v, ins("v128.store32_lane", 2, 0, 0)]
    code: Code = []
    for r, reg in enumerate(regs):
        code += [*ptr, *reg, ins("v128.store", 4, 16 * r)]
    return code


_ID_BAD = re.compile(r"[^0-9A-Za-z_.]")


def _wat_name(name: str) -> str:
    return _ID_BAD.sub("_", name) or "f"


# ============================================================================ the module


def _tree_length(node: Node) -> int:
    """The values one output element of a tree op combines: the reduced axis, the vectors of a
    dot, the shared dimension k of a matmul."""
    a = node.inputs[0]
    if node.op is Op.DOT:
        return a.shape[0]
    if node.op is Op.MATMUL:
        return a.shape[1]
    axis = node.attr("axis")
    assert isinstance(axis, int)
    return a.shape[axis]


def _region_nodes(fn: Function, seen: set[int]) -> list[Node]:
    """fn's nodes and those of every loop body and callee in it, nested ones included (each
    region once: a group's sibling nodes share theirs)."""
    out = []
    for node in fn.nodes():
        out.append(node)
        if node.op in REGION_OPS and id(body := loop_body(node)) not in seen:
            seen.add(id(body))
            out += _region_nodes(body, seen)
    return out


def _work_bytes(fns: Sequence[Function]) -> int:
    """The work area: room for the longest tree of any function (loop bodies included),
    padded to a power of two."""
    seen: set[int] = set()
    trees = [node for fn in fns for node in _region_nodes(fn, seen) if node.op in _PLANS]
    return _align(max((_pow2(_tree_length(t)) * t.dtype.nbytes for t in trees), default=0))


def _export_names(fns: Sequence[Function]) -> list[str]:
    names = [fn.name for fn in fns]
    if len(set(names)) == len(names):
        return names
    return [f"k{i}" for i in range(len(fns))]


def compile_functions(
    fns: Function | Sequence[Function], simd: bool = False, exports: Sequence[str] | None = None
) -> Program:
    """One module exporting every function (and ``mem``); raises WasmCompileError."""
    fns = [fns] if isinstance(fns, Function) else list(fns)
    names = list(exports) if exports is not None else _export_names(fns)
    ms = _ModuleState(simd, len(fns), _work_bytes(fns))
    ms.data_end = WORK_BASE + ms.work_bytes
    funcs, kernels = [], []
    for fn, name in zip(fns, names, strict=True):
        k = _Kernel(ms, fn)
        funcs.append(k.emit())
        ins_b = tuple(_nbytes(p) for p in fn.params)
        outs_b = tuple(_nbytes(r) for r in fn.results)
        kernels.append(Kernel(name, fn, k.scratch_bytes, ins_b, outs_b))
    funcs += [_HELPERS[h](h) for h in ms.helpers]
    heap = _align(ms.data_end)
    exports_ = [Export("mem", ExportKind.MEMORY, 0)]
    exports_ += [Export(name, ExportKind.FUNC, i) for i, name in enumerate(names)]
    module = Module(
        funcs=tuple(funcs),
        memory=Memory(max(1, -(-heap // PAGE))),
        exports=tuple(exports_),
        data=tuple(ms.data),
    )
    return Program(module, encode(module), tuple(kernels), heap, simd)


def check(fn: Function, simd: bool = False) -> None:
    """Raise WasmCompileError if fn cannot be compiled (cheaper than compiling a module)."""
    _Kernel(_ModuleState(simd, 1, _work_bytes([fn])), fn).emit()


def emit(fns: Function | Sequence[Function], simd: bool = False) -> bytes:
    """The binary module for one or many functions."""
    return compile_functions(fns, simd).wasm


def emit_wat(fns: Function | Sequence[Function], simd: bool = False) -> str:
    return compile_functions(fns, simd).wat


@dataclass(frozen=True)
class Layout:
    """Where one call's buffers go (byte addresses) and the memory it needs."""

    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    scratch: int
    end: int


def layout(kernel: Kernel, n: int, base: int) -> Layout:
    """Buffers for n cases from ``base`` on, each 16-byte aligned."""
    pos = _align(base)
    ins_, outs = [], []
    for b in kernel.in_bytes:
        ins_.append(pos)
        pos = _align(pos + n * b)
    for b in kernel.out_bytes:
        outs.append(pos)
        pos = _align(pos + n * b)
    scratch = pos
    return Layout(tuple(ins_), tuple(outs), scratch, _align(scratch + n * kernel.scratch_per_case))


def _write(data: bytes | str, output: str | None) -> None:
    if output is None or output == "-":
        if isinstance(data, str):
            sys.stdout.write(data)
        else:
            sys.stdout.buffer.write(data)
        return
    write_atomic(output, data)


def emit_wasm_file(graph: Graph, output: str | None) -> None:
    """``kerac emit --target wasm``: every exported function in one scalar module."""
    _write(emit(list(graph.functions.values())), output)


def emit_wasm_simd_file(graph: Graph, output: str | None) -> None:
    _write(emit(list(graph.functions.values()), simd=True), output)


def emit_wat_file(graph: Graph, output: str | None) -> None:
    """``kerac emit --target wat``: the scalar module as text."""
    _write(emit_wat(list(graph.functions.values())), output)
