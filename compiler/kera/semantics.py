"""The determinism contract as ONE table: op -> function on numpy arrays.

Every entry takes the node (for its attributes and result type) and its operands, each an
array with a leading batch axis, and returns the result with the same leading axis.  The
reference interpreter, the test oracles and any constant folding all call this table, so they
cannot disagree.  ``docs/semantics.md`` states the same rules in prose, one section per op.

Exactness notes (why each numpy call below is bit-exact on our contract):
* numpy's float32/float64 add, sub, mul, div, sqrt, rint, floor, ceil, trunc and the
  f64->f32 cast are the IEEE-754 correctly rounded operations (round-to-nearest-even,
  subnormals kept) on the SSE2/NEON hardware numpy runs on; NaN *bits* are not trusted and are
  canonicalised afterwards.
* fma is computed exactly: f32 through an exact f64 product and a round-to-odd f64 sum
  (53 >= 2*24 + 2, so the final RNE rounding to f32 is correct); f64 through Boldo-Melquiond's
  emulated FMA (error-free product and sum, round-to-odd) where no intermediate can underflow
  or overflow, and exact integer arithmetic elsewhere.
* numpy's pairwise ``sum``, BLAS ``matmul`` and ``fmin``/``fmax`` are never used: the contract's
  reduction tree, individually rounded products and IEEE minimum/maximum are spelled out here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kera.dtypes import CANONICAL_NAN, DType
from kera.ir import Node, const_value
from kera.ops import REDUCE_STEP, Op, reduce_identity

Array = np.ndarray[Any, Any]
Impl = Callable[..., Array]


# ---------------------------------------------------------------------------- float helpers


def canon(x: Array) -> Array:
    """Replace every NaN by the contract's positive canonical quiet NaN."""
    if x.dtype.kind != "f":
        return x
    nan = np.isnan(x)
    if not nan.any():
        return x
    out = x.copy()
    out[nan] = x.dtype.type(np.nan)  # numpy's nan is the positive quiet 0x7fc00000 / 0x7ff8...
    return out


def bits(x: Array) -> Array:
    return x.view(np.dtype(f"<u{x.dtype.itemsize}"))


def sign_mask(dt: np.dtype[Any]) -> Any:
    return np.dtype(f"<u{dt.itemsize}").type(1 << (8 * dt.itemsize - 1))


def _fl(f: Callable[..., Array]) -> Impl:
    """Lift a numpy float function to a contract op: IEEE result, then canonical NaN."""

    def impl(node: Node, *args: Array) -> Array:
        with np.errstate(all="ignore"):
            return canon(f(*args))

    return impl


def _next_toward(s: Array, e: Array) -> Array:
    """The float next to s in the direction of the sign of e (s finite)."""
    return np.nextafter(s, np.where(e > 0, np.inf, -np.inf).astype(s.dtype))


def _round_to_odd_sum(x: Array, y: Array) -> Array:
    """RO(x + y): x + y rounded toward zero with the last bit forced to 1 when inexact."""
    s = x + y
    xx = s - y
    yy = s - xx
    e = (x - xx) + (y - yy)  # TwoSum: exact error, since nothing here overflows
    fix = np.isfinite(s) & (e != 0) & ((bits(s) & 1) == 0)
    if fix.any():
        s = s.copy()
        s[fix] = _next_toward(s[fix], e[fix])
    return s


def fma32(a: Array, b: Array, c: Array) -> Array:
    with np.errstate(all="ignore"):
        a64, b64, c64 = a.astype(np.float64), b.astype(np.float64), c.astype(np.float64)
        p = a64 * b64  # exact: 24 + 24 bits, exponent within f64 range
        s = _round_to_odd_sum(p, c64)
        return canon(s.astype(np.float32))


def _two_prod(a: Array, b: Array) -> tuple[Array, Array]:
    p = a * b
    split = 134217729.0  # 2**27 + 1 (Veltkamp)
    ta, tb = split * a, split * b
    ahi, bhi = ta - (ta - a), tb - (tb - b)
    alo, blo = a - ahi, b - bhi
    e = ((ahi * bhi - p) + ahi * blo + alo * bhi) + alo * blo
    return p, e


def _fma64_exact_scalar(a: float, b: float, c: float) -> float:
    """Exactly rounded a*b+c for finite a, b, c by integer arithmetic (RNE, subnormals)."""
    from fractions import Fraction

    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:
        if (a == 0 or b == 0) and c == 0:
            product_negative = (math.copysign(1.0, a) < 0) != (math.copysign(1.0, b) < 0)
            if product_negative and math.copysign(1.0, c) < 0:
                return -0.0  # an exact zero sum is -0 only when both addends are -0 (RNE)
        return 0.0
    try:
        return exact.numerator / exact.denominator  # CPython: correctly rounded (RNE)
    except OverflowError:
        return math.inf if exact > 0 else -math.inf


def fma64(a: Array, b: Array, c: Array) -> Array:
    a, b, c = np.broadcast_arrays(a, b, c)
    with np.errstate(all="ignore"):
        # right for inf/NaN operands (a finite product never turns an infinite c into NaN);
        # finite lanes are recomputed exactly below
        out = np.where(np.isinf(c) & np.isfinite(a) & np.isfinite(b), c, a * b + c)
        _, ea = np.frexp(a)
        _, eb = np.frexp(b)
        _, ec = np.frexp(c)
        finite = np.isfinite(a) & np.isfinite(b) & np.isfinite(c)
        fast = (
            finite
            & (a != 0)
            & (b != 0)
            & (c != 0)
            & (np.abs(ea + eb) < 900)
            & (np.abs(ea) < 990)  # Veltkamp's split multiplies by 2**27 + 1: keep it finite
            & (np.abs(eb) < 990)
            & (ec > -900)
            & (ec < 1000)
        )
        if fast.any():
            fa, fb, fc = a[fast], b[fast], c[fast]
            uh, ul = _two_prod(fa, fb)
            th = fc + uh
            cc = th - uh
            tl = (fc - cc) + (uh - (th - cc))
            v = _round_to_odd_sum(tl, ul)
            out = out.copy()
            out[fast] = th + v
        slow = finite & ~fast
        if slow.any():
            out = out.copy()
            out[slow] = [
                _fma64_exact_scalar(float(x), float(y), float(z))
                for x, y, z in zip(a[slow], b[slow], c[slow], strict=True)
            ]
        return canon(out)


def _fma(node: Node, a: Array, b: Array, c: Array) -> Array:
    return fma32(a, b, c) if node.dtype is DType.F32 else fma64(a, b, c)


def _minmax(is_min: bool) -> Impl:
    def impl(node: Node, a: Array, b: Array) -> Array:
        if a.dtype.kind != "f":
            return np.minimum(a, b) if is_min else np.maximum(a, b)
        with np.errstate(all="ignore"):
            r = np.where(a < b, a, b) if is_min else np.where(a > b, a, b)
            eq = a == b  # equal values: only ±0 differ in bits; min takes -0, max +0
            rb = bits(r).copy()
            ab, bb = bits(a), bits(b)
            rb[eq] = (ab | bb)[eq] if is_min else (ab & bb)[eq]
            out = rb.view(a.dtype)
            nan = np.isnan(a) | np.isnan(b)
            out[nan] = a.dtype.type(np.nan)
            return out

    return impl


def _neg(node: Node, a: Array) -> Array:
    if a.dtype.kind == "f":
        return (bits(a) ^ sign_mask(a.dtype)).view(a.dtype)
    return np.negative(a)  # arrays wrap: -MIN == MIN, unsigned wraps modulo 2**n


def _abs(node: Node, a: Array) -> Array:
    if a.dtype.kind == "f":
        return (bits(a) & ~sign_mask(a.dtype)).view(a.dtype)
    if a.dtype.kind == "u":
        return a.copy()
    return np.abs(a)  # abs(MIN) == MIN (wraps)


def _copysign(node: Node, a: Array, b: Array) -> Array:
    m = sign_mask(a.dtype)
    return ((bits(a) & ~m) | (bits(b) & m)).view(a.dtype)


def _not(node: Node, a: Array) -> Array:
    return np.logical_not(a) if a.dtype == np.bool_ else np.invert(a)


# ---------------------------------------------------------------------------- integer helpers


def _int_divrem(a: Array, b: Array) -> tuple[Array, Array]:
    """Truncating division and remainder, total: x/0 = 0, x%0 = x, MIN/-1 = MIN, MIN%-1 = 0."""
    zero = b == 0
    if a.dtype.kind == "i":
        mn = np.iinfo(a.dtype).min
        ovf = (a == mn) & (b == -1)
        safe = np.where(zero | ovf, a.dtype.type(1), b)
        q = a // safe  # floor division
        r = a - q * safe
        adjust = (r != 0) & ((a < 0) != (safe < 0))  # floor -> truncation
        q = np.where(adjust, q + 1, q)
        r = np.where(adjust, r - safe, r)
        q = np.where(ovf, a, q)  # MIN / -1 wraps to MIN
        r = np.where(ovf, a.dtype.type(0), r)
    else:
        safe = np.where(zero, a.dtype.type(1), b)
        q, r = a // safe, a % safe
    q = np.where(zero, a.dtype.type(0), q)
    r = np.where(zero, a, r)
    return q.astype(a.dtype), r.astype(a.dtype)


def _div(node: Node, a: Array, b: Array) -> Array:
    if a.dtype.kind == "f":
        with np.errstate(all="ignore"):
            return canon(a / b)
    return _int_divrem(a, b)[0]


def _rem(node: Node, a: Array, b: Array) -> Array:
    return _int_divrem(a, b)[1]  # integers only: kera.ops.INT_ONLY


def _shift(left: bool) -> Impl:
    def impl(node: Node, a: Array, s: Array) -> Array:
        width = a.dtype.itemsize * 8
        amount = (s & a.dtype.type(width - 1)).astype(a.dtype)
        return np.left_shift(a, amount) if left else np.right_shift(a, amount)

    return impl


def _binop(f: Callable[[Array, Array], Array]) -> Impl:
    """Integer/bool ops (wrapping) and floats (IEEE, canonical NaN)."""

    def impl(node: Node, a: Array, b: Array) -> Array:
        with np.errstate(all="ignore"):
            return canon(f(a, b))

    return impl


def _compare(f: Callable[[Array, Array], Array]) -> Impl:
    def impl(node: Node, a: Array, b: Array) -> Array:
        with np.errstate(all="ignore"):
            return f(a, b)

    return impl


def _select(node: Node, c: Array, a: Array, b: Array) -> Array:
    if a.dtype.kind == "f":
        return np.where(c, bits(a), bits(b)).view(a.dtype)  # bits move unchanged
    return np.where(c, a, b)


# ---------------------------------------------------------------------------- conversions


def float_to_int(x: Array, dst: DType) -> Array:
    """Truncate toward zero, saturate to dst's range, NaN -> 0."""
    with np.errstate(all="ignore"):
        t = np.trunc(x)
        hi = x.dtype.type(2.0 ** (dst.bits - (1 if dst.is_signed else 0)))  # max + 1, exact
        lo = x.dtype.type(float(dst.min))
        nan, over, under = np.isnan(x), t >= hi, t < lo
        ok = ~(nan | over | under)
        out = np.zeros(x.shape, dtype=dst.np)
        out[ok] = t[ok].astype(dst.np)
        out[over] = dst.max
        out[under] = dst.min
        return out


def convert(x: Array, src: DType, dst: DType) -> Array:
    if dst is DType.BOOL:
        return x != 0
    if src.is_float and dst.is_float:
        with np.errstate(all="ignore"):
            return canon(x.astype(dst.np))  # f32->f64 exact; f64->f32 RNE
    if src.is_float:
        return float_to_int(x, dst)
    return x.astype(dst.np)  # int->int wraps (like Rust `as`); int->float RNE; bool -> 0/1


def _convert(node: Node, x: Array) -> Array:
    to = node.attr("to")
    assert isinstance(to, DType)
    from kera.dtypes import from_numpy

    return convert(x, from_numpy(x.dtype), to)


def _bitcast(node: Node, x: Array) -> Array:
    return x.view(node.dtype.np)


# ---------------------------------------------------------------------------- reductions


def tree_reduce(x: Array, op: Op, dt: DType) -> Array:
    """The contract's tree over the LAST axis: pad to a power of two P with the identity, then
    x[i] = op(x[i], x[i + s]) for s = P/2 ... 1."""
    n = x.shape[-1]
    p = 1 << (n - 1).bit_length()
    if p > n:
        pad = np.full((*x.shape[:-1], p - n), reduce_identity(op, dt), dtype=x.dtype)
        x = np.concatenate([x, pad], axis=-1)
    step = SEMANTICS[REDUCE_STEP[op]]
    while p > 1:
        s = p // 2
        x = step(_STEP_NODE, x[..., :s], x[..., s:p])
        p = s
    return canon(x[..., 0])


_STEP_NODE: Any = None  # the binary step entries ignore their node argument


def _reduce(node: Node, x: Array) -> Array:
    axis = node.attr("axis")
    assert isinstance(axis, int)
    return tree_reduce(np.moveaxis(x, axis + 1, -1), node.op, node.dtype)


def _products(a: Array, b: Array) -> Array:
    with np.errstate(all="ignore"):
        return a * b  # each product rounded on its own; ints wrap


def _dot(node: Node, a: Array, b: Array) -> Array:
    return tree_reduce(_products(a, b), Op.SUM, node.dtype)


def _matmul(node: Node, a: Array, b: Array) -> Array:
    # (N, m, 1, k) * (N, 1, n, k) -> (N, m, n, k), then the sum tree over k
    prods = _products(a[:, :, None, :], np.swapaxes(b, 1, 2)[:, None, :, :])
    return tree_reduce(prods, Op.SUM, node.dtype)


# ---------------------------------------------------------------------------- data movement


def _ints(node: Node, name: str) -> tuple[int, ...]:
    v = node.attr(name)
    assert isinstance(v, tuple)
    return v


def _broadcast(node: Node, x: Array) -> Array:
    shape = _ints(node, "shape")
    lead = (1,) * (len(shape) - (x.ndim - 1))
    x = x.reshape((x.shape[0], *lead, *x.shape[1:]))
    return np.ascontiguousarray(np.broadcast_to(x, (x.shape[0], *shape)))


def _reshape(node: Node, x: Array) -> Array:
    return np.ascontiguousarray(x).reshape((x.shape[0], *_ints(node, "shape")))


def _transpose(node: Node, x: Array) -> Array:
    perm = _ints(node, "perm")
    return np.ascontiguousarray(x.transpose((0, *(p + 1 for p in perm))))


def _slice(node: Node, x: Array) -> Array:
    start, stop = _ints(node, "start"), _ints(node, "stop")
    idx = (slice(None), *(slice(a, b) for a, b in zip(start, stop, strict=True)))
    return np.ascontiguousarray(x[idx])


def _concat(node: Node, a: Array, b: Array) -> Array:
    axis = node.attr("axis")
    assert isinstance(axis, int)
    return np.concatenate([a, b], axis=axis + 1)


def clamped_starts(starts: Array, dims: Sequence[int], sizes: Sequence[int]) -> Array:
    """Start indices (N, rank) of i32 clamped per axis into ``[0, dim - size]`` (XLA's
    DynamicSlice rule: the window always lies inside the operand)."""
    hi = np.array([d - s for d, s in zip(dims, sizes, strict=True)], dtype=np.int64)
    return np.clip(starts.astype(np.int64), 0, hi)


def _window(starts: Array, sizes: Sequence[int]) -> tuple[Array, ...]:
    """Advanced indices selecting, per batch row, the window at ``starts`` of ``sizes``."""
    n, rank = starts.shape
    grids: list[Array] = [np.arange(n).reshape((n,) + (1,) * rank)]
    for k, size in enumerate(sizes):
        shape = [n] + [1] * rank
        shape[1 + k] = size
        grids.append((starts[:, k : k + 1] + np.arange(size)).reshape(shape))
    return tuple(grids)


def _dynamic_slice(node: Node, x: Array, starts: Array) -> Array:
    sizes = _ints(node, "size")
    at = clamped_starts(starts, x.shape[1:], sizes)
    return np.ascontiguousarray(x[_window(at, sizes)])


def _dynamic_update_slice(node: Node, x: Array, v: Array, starts: Array) -> Array:
    sizes = v.shape[1:]
    at = clamped_starts(starts, x.shape[1:], sizes)
    out = x.copy()
    out[_window(at, sizes)] = v
    return out


def _transfer(node: Node, x: Array) -> Array:
    """A move between memory spaces: the identity on every bit (NaN payloads included); a
    copy, so that no two values share a buffer."""
    return x.copy()


def iota(node: Node, batch: int) -> Array:
    shape, axis = _ints(node, "shape"), node.attr("axis")
    assert isinstance(axis, int)
    idx = np.arange(shape[axis], dtype=np.int64).reshape(
        [-1 if i == axis else 1 for i in range(len(shape))]
    )
    vals = convert(np.broadcast_to(idx, shape), DType.I64, node.dtype)
    return np.ascontiguousarray(np.broadcast_to(vals, (batch, *shape)))


def constant(node: Node, batch: int) -> Array:
    v = const_value(node)
    return np.ascontiguousarray(np.broadcast_to(v, (batch, *v.shape)))


# ---------------------------------------------------------------------------- the table

SEMANTICS: dict[Op, Impl] = {
    Op.NEG: _neg,
    Op.ABS: _abs,
    Op.NOT: _not,
    Op.SQRT: _fl(np.sqrt),
    Op.FLOOR: _fl(np.floor),
    Op.CEIL: _fl(np.ceil),
    Op.TRUNC: _fl(np.trunc),
    Op.ROUND: _fl(np.rint),  # ties to even
    Op.ADD: _binop(np.add),
    Op.SUB: _binop(np.subtract),
    Op.MUL: _binop(np.multiply),
    Op.DIV: _div,
    Op.REM: _rem,
    Op.MIN: _minmax(True),
    Op.MAX: _minmax(False),
    Op.COPYSIGN: _copysign,
    Op.AND: _binop(np.bitwise_and),
    Op.OR: _binop(np.bitwise_or),
    Op.XOR: _binop(np.bitwise_xor),
    Op.SHL: _shift(True),
    Op.SHR: _shift(False),  # numpy >> is arithmetic on signed, logical on unsigned
    Op.EQ: _compare(np.equal),
    Op.NE: _compare(np.not_equal),
    Op.LT: _compare(np.less),
    Op.LE: _compare(np.less_equal),
    Op.GT: _compare(np.greater),
    Op.GE: _compare(np.greater_equal),
    Op.FMA: _fma,
    Op.SELECT: _select,
    Op.CONVERT: _convert,
    Op.BITCAST: _bitcast,
    Op.SUM: _reduce,
    Op.PROD: _reduce,
    Op.AMIN: _reduce,
    Op.AMAX: _reduce,
    Op.DOT: _dot,
    Op.MATMUL: _matmul,
    Op.BROADCAST: _broadcast,
    Op.RESHAPE: _reshape,
    Op.TRANSPOSE: _transpose,
    Op.SLICE: _slice,
    Op.CONCAT: _concat,
    Op.DYNAMIC_SLICE: _dynamic_slice,
    Op.DYNAMIC_UPDATE_SLICE: _dynamic_update_slice,
    Op.TRANSFER: _transfer,
}

#: leaves are not functions of operands: they need the batch size
LEAVES: dict[Op, Callable[[Node, int], Array]] = {Op.CONST: constant, Op.IOTA: iota}

CANONICAL_NAN_BITS = CANONICAL_NAN
