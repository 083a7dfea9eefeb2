"""PTX back end: one contract-exact kernel per exported function.

Kernel ABI (``kera_<function name>``)::

    .param .u64 in0 .. in{P-1}     one pointer per parameter, rows of N input vectors (C order)
    .param .u64 out0 .. out{R-1}   one pointer per result, rows of N output vectors
    .param .u32 n                  the batch size N

Thread ``i = ctaid.x * ntid.x + tid.x`` computes batch row ``i`` (threads with ``i >= N``
exit), fully unrolled: every tensor element lives in its own register, data movement
(broadcast, reshape, transpose, slice, concat) is resolved at compile time into register
renaming, and reductions are trees of instructions in the contract's order.  ``bool`` is one
byte in memory (0/1) and a ``.pred`` register inside the kernel.

Why the PTX is contract-exact (the fix-ups; ``docs/ptx-backend.md`` has the ISA references):

* every float ``add/sub/mul/fma/div/sqrt`` carries ``.rn`` — without a rounding modifier ptxas
  may fuse a mul and an add into an fma; there is no ``.approx``, ``.ftz``, ``.sat``, no
  atomics, no transcendental instruction;
* every float result that can be NaN is canonicalised (``setp.nan`` + ``selp.b32/.b64`` of the
  integer bits 0x7FC00000 / 0x7FF8000000000000): GPU NaN bits are unspecified;
* ``neg``/``abs``/``copysign`` are ``xor``/``and``/``or`` on the bits (``neg.f32`` does not keep
  payloads);
* ``min``/``max``: ``min.fT`` orders -0 < +0; a ``setp.nan`` fix-up makes any NaN operand give
  the canonical NaN (IEEE 754-2019 minimum/maximum);
* float->int: ``cvt.rzi`` (truncates and saturates, per the ISA) then NaN -> 0, which also
  covers the f64->64-bit case where PTX gives 1 << 63;
* integer ``div``/``rem``: a zero divisor (and signed MIN / -1) is replaced by 1 before the
  instruction — PTX leaves those results unspecified — then x/0 = 0, x%0 = x are selected;
* shift amounts are masked to ``width - 1`` before ``shl``/``shr`` (PTX clamps instead).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kera.backends.elementmaps import STRUCTURAL, unroll
from kera.dtypes import CANONICAL_NAN, DType
from kera.files import write_atomic
from kera.ir import Function, Graph, Node, const_value
from kera.ops import Op
from kera.semantics import convert

VERSION = "8.0"
TARGET = "sm_80"
MAX_INSTRUCTIONS = 400_000

REG_CLASS = {
    DType.BOOL: "pred",
    DType.I32: "b32",
    DType.U32: "b32",
    DType.I64: "b64",
    DType.U64: "b64",
    DType.F32: "f32",
    DType.F64: "f64",
}
PREFIX = {"pred": "%p", "b16": "%h", "b32": "%r", "b64": "%rd", "f32": "%f", "f64": "%fd"}
ARITH = {
    DType.I32: "s32",
    DType.U32: "u32",
    DType.I64: "s64",
    DType.U64: "u64",
    DType.F32: "f32",
    DType.F64: "f64",
}
MEMTYPE = {**ARITH, DType.BOOL: "u8"}
SIGN = {DType.F32: 1 << 31, DType.F64: 1 << 63}


class PtxEmitError(Exception):
    """A function this back end cannot lower (an op it lacks, or a graph too large)."""


def bit_type(dt: DType) -> str:
    return f"b{dt.bits}"


def kernel_name(fn: Function) -> str:
    return "kera_" + re.sub(r"[^A-Za-z0-9_]", "_", fn.name)


Elems = list[str]


class Kernel:
    """Instruction buffer, register allocator and constant pool of one kernel."""

    def __init__(self) -> None:
        self.body: list[str] = []
        self.counts: dict[str, int] = {}
        self.consts: dict[tuple[str, int], str] = {}

    def reg(self, cls: str) -> str:
        k = self.counts.get(cls, 0)
        self.counts[cls] = k + 1
        return f"{PREFIX[cls]}{k}"

    def new(self, dt: DType) -> str:
        return self.reg(REG_CLASS[dt])

    def emit(self, text: str) -> None:
        if len(self.body) >= MAX_INSTRUCTIONS:
            raise PtxEmitError(
                f"the unrolled kernel exceeds {MAX_INSTRUCTIONS} instructions; the PTX back end"
                " keeps every element in a register, so tensors this large are out of reach"
            )
        self.body.append(f"\t{text}")

    def label(self, name: str) -> None:
        self.body.append(f"{name}:")

    def const(self, dt: DType, bits: int) -> str:
        """A register holding the constant with these bits (materialised once)."""
        key = (dt.value, bits)
        if key not in self.consts:
            r = self.new(dt)
            if dt is DType.BOOL:
                self.emit(f"mov.pred {r}, {1 if bits else 0};")
            else:
                self.emit(f"mov.{bit_type(dt)} {r}, {bits:#x};")
            self.consts[key] = r
        return self.consts[key]

    def canon(self, dt: DType, x: str) -> str:
        """x with any NaN replaced by the contract's canonical NaN."""
        p, d = self.reg("pred"), self.new(dt)
        self.emit(f"setp.nan.{ARITH[dt]} {p}, {x}, {x};")
        self.emit(f"selp.{bit_type(dt)} {d}, {CANONICAL_NAN[dt]:#x}, {x}, {p};")
        return d

    def op(self, dt: DType, template: str, *args: str) -> str:
        """Emit ``template`` with a fresh destination of class ``dt`` as ``{d}``."""
        d = self.new(dt)
        self.emit(template.format(*args, d=d))
        return d


# -- elementwise lowerings: (kernel, node, operand registers of one element) -> register ----

Lower = Callable[[Kernel, Node, Sequence[str]], str]


def _src(node: Node) -> DType:
    return node.inputs[0].dtype


def _arith(float_op: str, int_op: str, canon: bool = True) -> Lower:
    """A binary op: float form (``.rn``, then canonical NaN) or integer form (wraps)."""

    def lower(k: Kernel, node: Node, a: Sequence[str]) -> str:
        dt = node.dtype
        if dt.is_float:
            d = k.op(dt, f"{float_op}.{ARITH[dt]} {{d}}, {{0}}, {{1}};", *a)
            return k.canon(dt, d) if canon else d
        return k.op(dt, f"{int_op}.{ARITH[dt]} {{d}}, {{0}}, {{1}};", *a)

    return lower


def _minmax(name: str) -> Lower:
    def lower(k: Kernel, node: Node, a: Sequence[str]) -> str:
        dt = node.dtype
        d = k.op(dt, f"{name}.{ARITH[dt]} {{d}}, {{0}}, {{1}};", *a)
        if not dt.is_float:
            return d
        p, out = k.reg("pred"), k.new(dt)
        k.emit(f"setp.nan.{ARITH[dt]} {p}, {a[0]}, {a[1]};")
        k.emit(f"selp.{bit_type(dt)} {out}, {CANONICAL_NAN[dt]:#x}, {d}, {p};")
        return out

    return lower


def _divrem(want_rem: bool) -> Lower:
    """Never executes a division by zero or MIN / -1 (unspecified in PTX)."""

    def lower(k: Kernel, node: Node, a: Sequence[str]) -> str:
        dt, (x, y) = node.dtype, a
        if dt.is_float:  # never rem: the type rule (kera.ops.INT_ONLY) admits integers only
            return k.canon(dt, k.op(dt, f"div.rn.{ARITH[dt]} {{d}}, {{0}}, {{1}};", x, y))
        ty, zero, bad = ARITH[dt], k.reg("pred"), k.reg("pred")
        k.emit(f"setp.eq.{ty} {zero}, {y}, 0;")
        k.emit(f"mov.pred {bad}, {zero};")
        if dt.is_signed:
            m1, mn = k.reg("pred"), k.reg("pred")
            k.emit(f"setp.eq.{ty} {m1}, {y}, -1;")
            k.emit(f"setp.eq.{ty} {mn}, {x}, {dt.min};")
            k.emit(f"and.pred {m1}, {m1}, {mn};")
            k.emit(f"or.pred {bad}, {bad}, {m1};")
        safe = k.op(dt, f"selp.{ty} {{d}}, 1, {{0}}, {{1}};", y, bad)
        if want_rem:  # x % 0 = x; MIN % -1 = MIN % 1 = 0
            r = k.op(dt, f"rem.{ty} {{d}}, {{0}}, {{1}};", x, safe)
            return k.op(dt, f"selp.{ty} {{d}}, {{0}}, {{1}}, {{2}};", x, r, zero)
        q = k.op(dt, f"div.{ty} {{d}}, {{0}}, {{1}};", x, safe)  # MIN / 1 = MIN
        return k.op(dt, f"selp.{ty} {{d}}, 0, {{0}}, {{1}};", q, zero)

    return lower


def _bitwise(name: str) -> Lower:
    def lower(k: Kernel, node: Node, a: Sequence[str]) -> str:
        dt = node.dtype
        ty = "pred" if dt is DType.BOOL else bit_type(dt)
        return k.op(
            dt, f"{name}.{ty} {{d}}, " + ", ".join(f"{{{i}}}" for i in range(len(a))) + ";", *a
        )

    return lower


def _shift(left: bool) -> Lower:
    """Mask the amount to width - 1 (the contract), then shift (PTX would clamp)."""

    def lower(k: Kernel, node: Node, a: Sequence[str]) -> str:
        dt, (x, s) = node.dtype, a
        amount = k.reg("b32")
        if dt.bits == 64:
            k.emit(f"cvt.u32.u64 {amount}, {s};")
            s = amount
        k.emit(f"and.b32 {amount}, {s}, {dt.bits - 1};")
        op = "shl.b" if left else ("shr.s" if dt.is_signed else "shr.u")
        return k.op(dt, f"{op}{dt.bits} {{d}}, {{0}}, {{1}};", x, amount)

    return lower


FLOAT_CMP = {Op.EQ: "eq", Op.NE: "neu", Op.LT: "lt", Op.LE: "le", Op.GT: "gt", Op.GE: "ge"}


def _compare(k: Kernel, node: Node, a: Sequence[str]) -> str:
    src = _src(node)
    if src is DType.BOOL:
        ne = k.op(DType.BOOL, "xor.pred {d}, {0}, {1};", *a)
        return ne if node.op is Op.NE else k.op(DType.BOOL, "not.pred {d}, {0};", ne)
    cmp = FLOAT_CMP[node.op] if src.is_float else node.op.value  # NE is unordered (NaN != x)
    return k.op(DType.BOOL, f"setp.{cmp}.{ARITH[src]} {{d}}, {{0}}, {{1}};", *a)


def _neg(k: Kernel, node: Node, a: Sequence[str]) -> str:
    dt = node.dtype
    if dt.is_float:
        return k.op(dt, f"xor.{bit_type(dt)} {{d}}, {{0}}, {SIGN[dt]:#x};", a[0])
    return k.op(dt, f"neg.s{dt.bits} {{d}}, {{0}};", a[0])  # wraps; same bits for unsigned


def _abs(k: Kernel, node: Node, a: Sequence[str]) -> str:
    dt = node.dtype
    if dt.is_float:
        return k.op(dt, f"and.{bit_type(dt)} {{d}}, {{0}}, {SIGN[dt] - 1:#x};", a[0])
    if not dt.is_signed:
        return a[0]
    t = k.op(dt, f"shr.s{dt.bits} {{d}}, {{0}}, {dt.bits - 1};", a[0])  # 0 or -1
    u = k.op(dt, f"xor.b{dt.bits} {{d}}, {{0}}, {{1}};", a[0], t)
    return k.op(dt, f"sub.s{dt.bits} {{d}}, {{0}}, {{1}};", u, t)  # abs(MIN) = MIN


def _not(k: Kernel, node: Node, a: Sequence[str]) -> str:
    ty = "pred" if node.dtype is DType.BOOL else bit_type(node.dtype)
    return k.op(node.dtype, f"not.{ty} {{d}}, {{0}};", a[0])


def _copysign(k: Kernel, node: Node, a: Sequence[str]) -> str:
    dt, bt = node.dtype, bit_type(node.dtype)
    mag = k.op(dt, f"and.{bt} {{d}}, {{0}}, {SIGN[dt] - 1:#x};", a[0])
    sign = k.op(dt, f"and.{bt} {{d}}, {{0}}, {SIGN[dt]:#x};", a[1])
    return k.op(dt, f"or.{bt} {{d}}, {{0}}, {{1}};", mag, sign)


def _float_unary(template: str) -> Lower:
    def lower(k: Kernel, node: Node, a: Sequence[str]) -> str:
        dt = node.dtype
        return k.canon(dt, k.op(dt, template.format(t=ARITH[dt]) + " {d}, {0};", a[0]))

    return lower


def _fma(k: Kernel, node: Node, a: Sequence[str]) -> str:
    dt = node.dtype
    return k.canon(dt, k.op(dt, f"fma.rn.{ARITH[dt]} {{d}}, {{0}}, {{1}}, {{2}};", *a))


def _select(k: Kernel, node: Node, a: Sequence[str]) -> str:
    dt, (c, x, y) = node.dtype, a
    if dt is not DType.BOOL:
        return k.op(dt, f"selp.{bit_type(dt)} {{d}}, {{0}}, {{1}}, {{2}};", x, y, c)  # bits move
    d = k.op(dt, "mov.pred {d}, {0};", y)
    k.emit(f"@{c} mov.pred {d}, {x};")
    return d


def _bitcast(k: Kernel, node: Node, a: Sequence[str]) -> str:
    dt = node.dtype
    if REG_CLASS[dt] == REG_CLASS[_src(node)]:
        return a[0]
    return k.op(dt, f"mov.{bit_type(dt)} {{d}}, {{0}};", a[0])


def _convert(k: Kernel, node: Node, a: Sequence[str]) -> str:
    src, dst, x = _src(node), node.dtype, a[0]
    if src is dst:
        return k.canon(dst, x) if dst.is_float else x  # a conversion canonicalises NaN
    if dst is DType.BOOL:
        return k.op(dst, f"setp.ne.{ARITH[src]} {{d}}, {{0}}, 0;", x)
    if src is DType.BOOL:
        return k.op(dst, f"selp.{ARITH[dst]} {{d}}, 1, 0, {{0}};", x)
    if src.is_float and dst.is_float:  # f32->f64 exact, f64->f32 RNE; NaN canonical
        rnd = ".rn" if dst.bits < src.bits else ""
        return k.canon(dst, k.op(dst, f"cvt{rnd}.{ARITH[dst]}.{ARITH[src]} {{d}}, {{0}};", x))
    if src.is_float:
        return _float_to_int(k, src, dst, x)
    if dst.is_float:
        return k.op(dst, f"cvt.rn.{ARITH[dst]}.{ARITH[src]} {{d}}, {{0}};", x)
    return _int_to_int(k, src, dst, x)


def _float_to_int(k: Kernel, src: DType, dst: DType, x: str) -> str:
    """cvt.rzi truncates and saturates (PTX ISA cvt); NaN -> 0 is ours (PTX: 0 or 1<<(N-1))."""
    t = k.op(dst, f"cvt.rzi.{ARITH[dst]}.{ARITH[src]} {{d}}, {{0}};", x)
    p = k.reg("pred")
    k.emit(f"setp.nan.{ARITH[src]} {p}, {x}, {x};")
    return k.op(dst, f"selp.{bit_type(dst)} {{d}}, 0, {{0}}, {{1}};", t, p)


def _int_to_int(k: Kernel, src: DType, dst: DType, x: str) -> str:
    """Wrap like Rust ``as``: same width keeps the bits, widening extends by the source's
    signedness, narrowing keeps the low bits."""
    if src.bits == dst.bits:
        return x
    if dst.bits > src.bits:
        return k.op(dst, f"cvt.{ARITH[src][0]}64.{ARITH[src]} {{d}}, {{0}};", x)
    return k.op(dst, "cvt.u32.u64 {d}, {0};", x)


ELEMENTWISE: dict[Op, Lower] = {
    Op.ADD: _arith("add.rn", "add"),
    Op.SUB: _arith("sub.rn", "sub"),
    Op.MUL: _arith("mul.rn", "mul.lo"),
    Op.DIV: _divrem(want_rem=False),
    Op.REM: _divrem(want_rem=True),
    Op.MIN: _minmax("min"),
    Op.MAX: _minmax("max"),
    Op.COPYSIGN: _copysign,
    Op.AND: _bitwise("and"),
    Op.OR: _bitwise("or"),
    Op.XOR: _bitwise("xor"),
    Op.SHL: _shift(left=True),
    Op.SHR: _shift(left=False),
    **dict.fromkeys((Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE), _compare),
    Op.NEG: _neg,
    Op.ABS: _abs,
    Op.NOT: _not,
    Op.SQRT: _float_unary("sqrt.rn.{t}"),
    Op.FLOOR: _float_unary("cvt.rmi.{t}.{t}"),
    Op.CEIL: _float_unary("cvt.rpi.{t}.{t}"),
    Op.TRUNC: _float_unary("cvt.rzi.{t}.{t}"),
    Op.ROUND: _float_unary("cvt.rni.{t}.{t}"),  # ties to even
    Op.FMA: _fma,
    Op.SELECT: _select,
    Op.CONVERT: _convert,
    Op.BITCAST: _bitcast,
}

# -- reductions, dot, matmul: the contract's tree --------------------------------------------

# the tree's step op; inner float steps skip canonicalisation (a NaN stays a NaN through every
# later step, and the root is canonicalised)
TREE_STEP: dict[Op, Lower] = {
    Op.SUM: _arith("add.rn", "add", canon=False),
    Op.PROD: _arith("mul.rn", "mul.lo", canon=False),
    Op.AMIN: _minmax("min"),
    Op.AMAX: _minmax("max"),
}


def structural(k: Kernel, node: Node, ins: list[Elems]) -> Elems:
    """Reductions, dot, matmul and data movement, unrolled (``elementmaps.unroll``): tree
    steps and products are rounded on their own and not canonicalised; each tree's float root
    is."""

    def step(op: Op, left: str, right: str) -> str:
        return TREE_STEP[op](k, node, (left, right))

    def product(x: str, y: str) -> str:
        return _PRODUCT(k, node, (x, y))

    def finish(root: str, n: int) -> str:
        return k.canon(node.dtype, root) if node.dtype.is_float else root

    return unroll(node, ins, step, product, finish)


_PRODUCT = _arith("mul.rn", "mul.lo", canon=False)  # each product rounded on its own

SUPPORTED_OPS = frozenset(
    {op.value for op in ELEMENTWISE} | {op.value for op in STRUCTURAL} | {"param", "const", "iota"}
)


# -- leaves ----------------------------------------------------------------------------------


def _constants(k: Kernel, dt: DType, values: np.ndarray[Any, Any]) -> Elems:
    flat = np.ascontiguousarray(values).reshape(-1)
    if dt is DType.BOOL:
        return [k.const(dt, int(v)) for v in flat]
    return [k.const(dt, int(v)) for v in flat.view(dt.uint)]


def _iota(k: Kernel, node: Node) -> Elems:
    shape, axis = node.attr("shape"), node.attr("axis")
    assert isinstance(shape, tuple) and isinstance(axis, int)
    idx = np.arange(shape[axis], dtype=np.int64).reshape(
        [-1 if i == axis else 1 for i in range(len(shape))]
    )
    vals = convert(np.broadcast_to(idx, shape), DType.I64, node.dtype)
    return _constants(k, node.dtype, vals)


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
    dt, size = node.dtype, max(1, int(np.prod(node.shape, dtype=np.int64)))
    base = _row_base(k, f"in{index}", size * dt.nbytes)
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
    dt = node.dtype
    base = _row_base(k, f"out{index}", len(elems) * dt.nbytes)
    for j, x in enumerate(elems):
        addr = f"[{base}+{j * dt.nbytes}]"
        if dt is DType.BOOL:
            byte = k.reg("b16")
            k.emit(f"selp.u16 {byte}, 1, 0, {x};")
            k.emit(f"st.global.u8 {addr}, {byte};")
        else:
            k.emit(f"st.global.{MEMTYPE[dt]} {addr}, {x};")


# -- the loop --------------------------------------------------------------------------------


def _lower_node(k: Kernel, node: Node, env: dict[int, Elems], params: dict[int, int]) -> Elems:
    if node.op is Op.PARAM:
        return _load(k, node, params[id(node)])
    if node.op is Op.CONST:
        return _constants(k, node.dtype, const_value(node))
    if node.op is Op.IOTA:
        return _iota(k, node)
    ins = [env[id(i)] for i in node.inputs]
    if node.op in STRUCTURAL:
        return structural(k, node, ins)
    lower = ELEMENTWISE.get(node.op)
    if lower is None:
        raise PtxEmitError(f"the PTX back end has no lowering for '{node.op}'")
    return [lower(k, node, operands) for operands in zip(*ins, strict=True)]


def kernel(fn: Function) -> str:
    """The ``.entry`` of one function (see the module docstring for its ABI)."""
    k = Kernel()
    params = {id(p): i for i, p in enumerate(fn.params)}
    env: dict[int, Elems] = {}
    for node in fn.nodes():
        env[id(node)] = _lower_node(k, node, env, params)
    for index, result in enumerate(fn.results):
        _store(k, result, index, env[id(result)])
    names = [f"in{i}" for i in range(len(fn.params))] + [f"out{i}" for i in range(len(fn.results))]
    head = [f"\t.param .u64 {name}," for name in names] + ["\t.param .u32 n"]
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
    return "\n".join([*lines, *k.body, "DONE:", "\tret;", "}", ""])


def header() -> str:
    return f"// Generated by kerac (PTX back end)\n.version {VERSION}\n.target {TARGET}\n.address_size 64\n"


def emit(fn: Function) -> str:
    """A PTX module with the kernel of one function."""
    return header() + "\n" + kernel(fn)


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
