"""Verilog lowering: :data:`LOWER`, the one table from an op to the cell(s) of one element.

Every arithmetic element gets its own core instance (``kera_hdl.CORES``) or an inline
registered expression (integer add/sub/mul/neg/abs/min/max, bitwise ops, integer compares,
select, int<->int and bool conversions); sign-bit float ops and width changes are wires.

Reductions, ``dot``, ``matmul`` and data movement are not rows: ``elementmaps.unroll`` builds
them from the rows of their step ops (``kera.ops.REDUCE_STEP``) and of ``elementmaps.PRODUCT``
(``emit.py``); a step or product of constants is a cell like any other (the back end folds
nothing).  Float steps and products are cores, which canonicalise, so a tree's root needs no
fix-up unless it went through no core (a one-element float reduction: :func:`canonical`).
"""

from __future__ import annotations

from collections.abc import Sequence

from kera.backends.verilog.netlist import Lower, Netlist, fparams, width
from kera.dtypes import DType
from kera.ir import Node
from kera.ops import Op


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
        formats = {"EWI": src.exp_bits, "MWI": src.mant_bits}
        return nl.core("kf_f2f", dst.bits, a, **formats, EWO=dst.exp_bits, MWO=dst.mant_bits)
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


LOWER: dict[Op, Lower] = {
    Op.ADD: _both(_float_core("kf_fadd", SUB=0), _int_expr("@0 + @1")),
    Op.SUB: _both(_float_core("kf_fadd", SUB=1), _int_expr("@0 - @1")),
    Op.MUL: _both(_float_core("kf_fmul"), _int_expr("@0 * @1")),  # never kf_ffma for dot
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


def canonical(nl: Netlist, dt: DType, x: int) -> int:
    """Register x, replacing any NaN by the canonical NaN (length-1 float reductions)."""
    mw, w = dt.mant_bits, dt.bits
    nan = f"(&@0[{w - 2}:{mw}]) && (|@0[{mw - 1}:0])"
    return nl.expr(f"({nan}) ? {w}'h{dt.canonical_nan:x} : @0", w, [x])
