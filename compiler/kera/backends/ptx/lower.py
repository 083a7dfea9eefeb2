"""PTX lowering: :data:`LOWER`, the one table from an op to the instructions of one element.

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

Reductions, ``dot``, ``matmul`` and data movement are not rows: ``elementmaps.unroll`` builds
them from the rows of their step ops (``kera.ops.REDUCE_STEP``) and of ``elementmaps.PRODUCT``,
each used in its :attr:`Row.step` form (``emit.py``), and each tree's float root is
canonicalised.  Nor are ``loop``, ``call``, ``dynamic_slice`` and ``dynamic_update_slice``,
lowered a whole node at a time (``region.NODES``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kera.backends.elementmaps import supported
from kera.backends.ptx.kernel import ARITH, REG_CLASS, Kernel, bit_type
from kera.backends.ptx.region import NODES
from kera.dtypes import DType
from kera.ir import Node
from kera.ops import COMPARE, Op

#: one element of one op: (kernel, node, operand registers of the element) -> result register
Lower = Callable[[Kernel, Node, Sequence[str]], str]


@dataclass(frozen=True)
class Row:
    """How one op is lowered: ``lower`` for an element of an elementwise node; ``inner``, where
    given, for an inner step of a reduction tree or a ``dot``/``matmul`` product, which is
    rounded on its own but not canonicalised (a NaN stays a NaN through every later step, and
    the tree's root is canonicalised)."""

    lower: Lower
    inner: Lower | None = None

    @property
    def step(self) -> Lower:
        """The lowering as a part of a tree (``inner``, else ``lower``)."""
        return self.lower if self.inner is None else self.inner


def _src(node: Node) -> DType:
    return node.inputs[0].dtype


def _arith_lower(float_op: str, int_op: str, canon: bool) -> Lower:
    def lower(k: Kernel, node: Node, a: Sequence[str]) -> str:
        dt = node.dtype
        if dt.is_float:
            d = k.op(dt, f"{float_op}.{ARITH[dt]} {{d}}, {{0}}, {{1}};", *a)
            return k.canon(dt, d) if canon else d
        return k.op(dt, f"{int_op}.{ARITH[dt]} {{d}}, {{0}}, {{1}};", *a)

    return lower


def _arith(float_op: str, int_op: str) -> Row:
    """A binary op: float form (``.rn``, then canonical NaN — left out as a tree step) or
    integer form (wraps)."""
    canonical = _arith_lower(float_op, int_op, canon=True)
    return Row(canonical, inner=_arith_lower(float_op, int_op, canon=False))


def _minmax(name: str) -> Lower:
    def lower(k: Kernel, node: Node, a: Sequence[str]) -> str:
        dt = node.dtype
        d = k.op(dt, f"{name}.{ARITH[dt]} {{d}}, {{0}}, {{1}};", *a)
        if not dt.is_float:
            return d
        p, out = k.reg("pred"), k.new(dt)
        k.emit(f"setp.nan.{ARITH[dt]} {p}, {a[0]}, {a[1]};")
        k.emit(f"selp.{bit_type(dt)} {out}, {dt.canonical_nan:#x}, {d}, {p};")
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
        return k.op(dt, f"xor.{bit_type(dt)} {{d}}, {{0}}, {dt.sign_mask:#x};", a[0])
    return k.op(dt, f"neg.s{dt.bits} {{d}}, {{0}};", a[0])  # wraps; same bits for unsigned


def _abs(k: Kernel, node: Node, a: Sequence[str]) -> str:
    dt = node.dtype
    if dt.is_float:
        return k.op(dt, f"and.{bit_type(dt)} {{d}}, {{0}}, {dt.sign_mask - 1:#x};", a[0])
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
    mag = k.op(dt, f"and.{bt} {{d}}, {{0}}, {dt.sign_mask - 1:#x};", a[0])
    sign = k.op(dt, f"and.{bt} {{d}}, {{0}}, {dt.sign_mask:#x};", a[1])
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


LOWER: dict[Op, Row] = {
    Op.ADD: _arith("add.rn", "add"),
    Op.SUB: _arith("sub.rn", "sub"),
    Op.MUL: _arith("mul.rn", "mul.lo"),  # also each dot/matmul product, in its inner form
    Op.DIV: Row(_divrem(want_rem=False)),
    Op.REM: Row(_divrem(want_rem=True)),
    # the NaN fix-up is the op's meaning, not a canonicalisation: amin/amax steps keep it
    Op.MIN: Row(_minmax("min")),
    Op.MAX: Row(_minmax("max")),
    Op.COPYSIGN: Row(_copysign),
    Op.AND: Row(_bitwise("and")),
    Op.OR: Row(_bitwise("or")),
    Op.XOR: Row(_bitwise("xor")),
    Op.SHL: Row(_shift(left=True)),
    Op.SHR: Row(_shift(left=False)),
    **dict.fromkeys(COMPARE, Row(_compare)),
    Op.NEG: Row(_neg),
    Op.ABS: Row(_abs),
    Op.NOT: Row(_not),
    Op.SQRT: Row(_float_unary("sqrt.rn.{t}")),
    Op.FLOOR: Row(_float_unary("cvt.rmi.{t}.{t}")),
    Op.CEIL: Row(_float_unary("cvt.rpi.{t}.{t}")),
    Op.TRUNC: Row(_float_unary("cvt.rzi.{t}.{t}")),
    Op.ROUND: Row(_float_unary("cvt.rni.{t}.{t}")),  # ties to even
    Op.FMA: Row(_fma),
    Op.SELECT: Row(_select),
    Op.CONVERT: Row(_convert),
    Op.BITCAST: Row(_bitcast),
}

#: the elementwise rows, the structure elementmaps unrolls from them, the leaves, and the ops
#: lowered a whole node at a time (loops, calls, dynamic indexing: ``region.NODES``)
SUPPORTED = supported(LOWER) | {op.value for op in NODES}
