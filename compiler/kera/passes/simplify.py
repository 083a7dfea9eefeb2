"""``simplify``: algebraic rewrites that are identities on *bits* under the contract.

Each rule below names its rewrite and why it keeps every bit; ``tests/property/test_passes.py``
checks each one with Hypothesis over special values (signed zeros, infinities, canonical and
non-canonical NaNs, integer extremes).  Rules that are true of real numbers but not of bits are
deliberately absent:

* ``x * 1.0 -> x``, ``x + (-0.0) -> x``, ``min(x, x) -> x`` on floats: the contract gives the
  canonical NaN where ``x`` may hold another NaN payload (a parameter can).
* ``x + 0.0 -> x``: also wrong for ``x = -0.0`` (``-0 + +0 = +0``).
* ``x - x -> 0``, ``x == x -> true`` on floats: NaN and infinities.
* reassociation, contraction into ``fma``, ``x / c -> x * (1/c)``, any change of a reduction's
  order: each rounds differently (these exist only as planted passes in the quality suite).

Integers wrap and their division is total, so integer rules may do more.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kera.dtypes import DType
from kera.ir import Function, Node, const, const_value, make_node
from kera.ops import Op
from kera.passes.rewrite import rewrite

NAME = "simplify"
VERSION = 1

SimplifyRule = Callable[[Node], Node | None]


def _uniform(node: Node) -> int | None:
    """The common bit pattern of a constant whose elements are all alike, else None."""
    if node.op is Op.BROADCAST:
        node = node.inputs[0]
    if node.op is not Op.CONST:
        return None
    raw = const_value(node).reshape(-1)
    if raw.size == 0:
        return None
    if node.dtype is DType.BOOL:
        b = raw.view(np.uint8)
    else:
        b = raw.view(f"u{node.dtype.nbytes}")
    first = int(b[0])
    return first if bool((b == first).all()) else None


def _is_int(node: Node) -> bool:
    return not node.dtype.is_float


def _filled(node: Node, value: int) -> Node:
    """A constant like ``node``'s type whose every element is ``value`` (0 or all-ones)."""
    if node.dtype is DType.BOOL:
        return const(bool(value), DType.BOOL, node.shape)
    bits = np.full(node.shape, value, dtype=f"u{node.dtype.nbytes}")
    return const(bits.view(node.dtype.np), node.dtype, node.shape)


def _ones_bits(dt: DType) -> int:
    return 1 if dt is DType.BOOL else (1 << dt.bits) - 1


# ---------------------------------------------------------------------------- bit movers


def neg_neg(node: Node) -> Node | None:
    """``-(-x) -> x``: float negation flips the sign bit (twice: none); integers wrap, and
    ``-(-MIN) = MIN``."""
    x = node.inputs[0]
    return x.inputs[0] if x.op is Op.NEG else None


def not_not(node: Node) -> Node | None:
    """``!!x -> x``: bitwise complement twice (bool: logical not twice)."""
    x = node.inputs[0]
    return x.inputs[0] if x.op is Op.NOT else None


def abs_abs(node: Node) -> Node | None:
    """``|(|x|)| -> |x|`` and ``|-x| -> |x|`` (floats and signed integers): the float forms
    clear the sign bit whatever it was; for integers ``|-x| = |x|`` in wrapping arithmetic
    (``|-MIN| = |MIN| = MIN``).  Not ``|-x|`` for unsigned ``x``: there ``abs`` is the
    identity and ``-x`` wraps."""
    x = node.inputs[0]
    if x.op is Op.ABS:
        return x
    if x.op is Op.NEG and (node.dtype.is_float or node.dtype.is_signed):
        return make_node(Op.ABS, [x.inputs[0]])
    return None


def copysign_self(node: Node) -> Node | None:
    """``copysign(x, x) -> x``: the magnitude bits of x with the sign bit of x."""
    a, b = node.inputs
    return a if a is b else None


def select_same(node: Node) -> Node | None:
    """``select(c, x, x) -> x``; ``select(true, a, b) -> a``, ``select(false, a, b) -> b``:
    select moves bits unchanged."""
    c, a, b = node.inputs
    if a is b:
        return a
    k = _uniform(c)
    return None if k is None else (a if k else b)


def bitcast_roundtrip(node: Node) -> Node | None:
    """``bitcast(bitcast(x, U), T) -> x`` when x has type T: the bits are never touched."""
    x = node.inputs[0]
    return x.inputs[0] if x.op is Op.BITCAST and x.inputs[0].type == node.type else None


def convert_roundtrip(node: Node) -> Node | None:
    """``(x as W) as T -> x`` for an integer or bool ``x`` of type T and an integer W at least
    as wide: widening extends, narrowing back truncates to the same bits; a bool goes to 0/1
    and back through ``!= 0``.  Not through floats or narrower integers (values are lost)."""
    x = node.inputs[0]
    if x.op is not Op.CONVERT or x.inputs[0].type != node.type or node.dtype.is_float:
        return None
    mid = x.dtype
    if mid.is_float or mid is DType.BOOL or mid.bits < node.dtype.bits:
        return None
    return x.inputs[0]


def same_shape(node: Node) -> Node | None:
    """``reshape``, ``broadcast`` or ``slice`` to the operand's own shape -> the operand (a
    slice that keeps every element starts at 0); ``transpose`` by the identity -> the operand."""
    x = node.inputs[0]
    if node.op is Op.TRANSPOSE:
        perm = node.attr("perm")
        return x if perm == tuple(range(len(x.shape))) else None
    return x if node.shape == x.shape else None


def reshape_reshape(node: Node) -> Node | None:
    """``reshape(reshape(x, s1), s2) -> reshape(x, s2)``: reshape keeps row-major element
    order, so two are one."""
    x = node.inputs[0]
    if x.op is not Op.RESHAPE:
        return None
    return make_node(Op.RESHAPE, [x.inputs[0]], {"shape": node.attr("shape")})


def transpose_transpose(node: Node) -> Node | None:
    """``transpose(transpose(x, p), q) -> transpose(x, [p[q[i]]])``: output axis i of the
    outer one is axis q[i] of the inner, which is axis p[q[i]] of x."""
    x = node.inputs[0]
    if x.op is not Op.TRANSPOSE:
        return None
    p, q = x.attr("perm"), node.attr("perm")
    assert isinstance(p, tuple) and isinstance(q, tuple)
    return make_node(Op.TRANSPOSE, [x.inputs[0]], {"perm": [p[i] for i in q]})


# ---------------------------------------------------------------------------- integers


def _int_rule(f: Callable[[Node, Node, Node], Node | None]) -> SimplifyRule:
    def rule(node: Node) -> Node | None:
        a, b = node.inputs
        return f(node, a, b) if _is_int(a) else None

    rule.__doc__ = f.__doc__
    rule.__name__ = f.__name__
    return rule


def _either(node: Node, a: Node, b: Node, bits: int) -> Node | None:
    """The operand that is not the uniform constant ``bits``, if one of them is."""
    if _uniform(b) == bits:
        return a
    if _uniform(a) == bits:
        return b
    return None


@_int_rule
def int_add(node: Node, a: Node, b: Node) -> Node | None:
    """``x + 0 -> x``, ``0 + x -> x`` (integers: exact)."""
    return _either(node, a, b, 0)


@_int_rule
def int_sub(node: Node, a: Node, b: Node) -> Node | None:
    """``x - 0 -> x``; ``x - x -> 0`` (integers: exact, wrapping)."""
    if a is b:
        return _filled(node, 0)
    return a if _uniform(b) == 0 else None


@_int_rule
def int_mul(node: Node, a: Node, b: Node) -> Node | None:
    """``x * 1 -> x``; ``x * 0 -> 0`` (integers: exact, wrapping)."""
    if _uniform(a) == 0 or _uniform(b) == 0:
        return _filled(node, 0)
    return _either(node, a, b, 1)


@_int_rule
def int_div(node: Node, a: Node, b: Node) -> Node | None:
    """``x / 1 -> x``: truncating division by one."""
    return a if _uniform(b) == 1 else None


@_int_rule
def int_rem(node: Node, a: Node, b: Node) -> Node | None:
    """``x % 1 -> 0``.  (Not ``x % x``: the contract's ``x % 0`` is ``x``.)"""
    return _filled(node, 0) if _uniform(b) == 1 else None


@_int_rule
def int_and(node: Node, a: Node, b: Node) -> Node | None:
    """``x & x -> x``, ``x & 0 -> 0``, ``x & ~0 -> x`` (bool: ``x && x``, ``&& false``,
    ``&& true``)."""
    if a is b:
        return a
    if _uniform(a) == 0 or _uniform(b) == 0:
        return _filled(node, 0)
    return _either(node, a, b, _ones_bits(node.dtype))


@_int_rule
def int_or(node: Node, a: Node, b: Node) -> Node | None:
    """``x | x -> x``, ``x | 0 -> x``, ``x | ~0 -> ~0``."""
    if a is b:
        return a
    ones = _ones_bits(node.dtype)
    if ones in (_uniform(a), _uniform(b)):
        return _filled(node, ones)
    return _either(node, a, b, 0)


@_int_rule
def int_xor(node: Node, a: Node, b: Node) -> Node | None:
    """``x ^ x -> 0``, ``x ^ 0 -> x``."""
    if a is b:
        return _filled(node, 0)
    return _either(node, a, b, 0)


@_int_rule
def shift_zero(node: Node, a: Node, b: Node) -> Node | None:
    """``x << s -> x`` and ``x >> s -> x`` when every ``s`` is a multiple of the width: the
    contract shifts by ``s mod width``."""
    s = _uniform(b)
    return a if s is not None and s % node.dtype.bits == 0 else None


@_int_rule
def int_minmax_self(node: Node, a: Node, b: Node) -> Node | None:
    """``min(x, x) -> x``, ``max(x, x) -> x`` on integers (not floats: a NaN operand gives
    the canonical NaN)."""
    return a if a is b else None


_REFLEXIVE = {Op.EQ: 1, Op.LE: 1, Op.GE: 1, Op.NE: 0, Op.LT: 0, Op.GT: 0}


@_int_rule
def int_compare_self(node: Node, a: Node, b: Node) -> Node | None:
    """``x == x``, ``x <= x``, ``x >= x`` -> true; ``x != x``, ``x < x``, ``x > x`` -> false,
    on integers and bools (not floats: NaN is unordered)."""
    return _filled(node, _REFLEXIVE[node.op]) if a is b else None


RULES: dict[Op, tuple[SimplifyRule, ...]] = {
    Op.NEG: (neg_neg,),
    Op.NOT: (not_not,),
    Op.ABS: (abs_abs,),
    Op.COPYSIGN: (copysign_self,),
    Op.SELECT: (select_same,),
    Op.BITCAST: (bitcast_roundtrip,),
    Op.CONVERT: (convert_roundtrip,),
    Op.RESHAPE: (same_shape, reshape_reshape),
    Op.BROADCAST: (same_shape,),
    Op.SLICE: (same_shape,),
    Op.TRANSPOSE: (same_shape, transpose_transpose),
    Op.ADD: (int_add,),
    Op.SUB: (int_sub,),
    Op.MUL: (int_mul,),
    Op.DIV: (int_div,),
    Op.REM: (int_rem,),
    Op.AND: (int_and,),
    Op.OR: (int_or,),
    Op.XOR: (int_xor,),
    Op.SHL: (shift_zero,),
    Op.SHR: (shift_zero,),
    Op.MIN: (int_minmax_self,),
    Op.MAX: (int_minmax_self,),
    **dict.fromkeys(_REFLEXIVE, (int_compare_self,)),
}


def simplify_node(node: Node) -> Node | None:
    for rule in RULES.get(node.op, ()):
        out = rule(node)
        if out is not None:
            return out
    return None


def run(fn: Function) -> tuple[Function, int]:
    return rewrite(fn, simplify_node)
