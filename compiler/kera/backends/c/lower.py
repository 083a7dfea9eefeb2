"""How the C back end lowers each op: :data:`LOWER`, one row per op, the only place an op is
lowered (:data:`SUPPORTED` is its keys).

A row is one of three kinds:

* :class:`Helper` (elementwise ops): the body of a ``static inline`` helper
  ``k_<op>_<dtype>`` per kind of dtype (``"f"`` float, ``"i"`` signed, ``"u"`` unsigned
  integer, ``"b"`` bool; ``"n"`` stands for both integer kinds).  A kind a row has no body for
  is one the typing rules never let the op meet.  Bodies are written once for both lane
  flavours (scalar C and GCC vectors) through the ``K_*`` macros of the prelude, with the
  ``$``-fields of :func:`fields`; the node becomes one call of ``k_<op>_<dtype>_n``, a loop
  over its tile's elements calling the helper, a function of its own (:func:`elementwise`).
* :class:`Structural` (leaves, convert and bitcast, reductions, dot, matmul, data movement): a
  function that returns the node's C lines, given the :class:`Cx` of the entry point being
  lowered (``kera.backends.c.emit`` drives the per-function loop, the tiles and their storage).
* :class:`Alias` (reshape): the node's tile *is* its input's (same elements, same order).
* :class:`Region` (loop, call): the node owns a region of nodes (a loop's body, a call's
  callee), which the emitter emits itself: a loop as a C ``for`` loop, a call as its callee's
  code in place, once per group (``kera.backends.c.emit``, ``_Entry._grouped``).

Every row also says what it does to the lazy NaN canonicalisation (:class:`Nan`).

Dynamic indexing (``dynamic_slice``, ``dynamic_update_slice``) clamps each start index into
``[0, dim - window]`` in 64-bit arithmetic (``k_dyn_at``) before it becomes an address, so
every i32 value is safe.  Starts differ between the rows of a block, so the window moves lane
by lane (``k_lane_move``), unless the start is *uniform* (it depends on no row's data: constants
and loop indices only, see ``Cx.uniform``), when whole lane vectors move at once.

How each gap between C and the Kera contract is closed (no undefined or
implementation-defined behaviour is relied on): integers live in unsigned lanes (wrapping is
defined), signed views go through ``memcpy``; shift amounts are masked to ``width - 1`` and
``>>`` on signed values is built from unsigned shifts; division is made total before ``/``
(x/0 = 0, x%0 = x, MIN/-1 = MIN, MIN%-1 = 0); float->int conversions saturate and map NaN to 0
before the C conversion sees an out-of-range value; bits move through ``memcpy`` (scalar lanes)
or vector casts.  neg, abs and copysign are sign-bit operations; min/max are IEEE 754-2019
minimum/maximum; rounding ops use the exact ``(|x| + 2^p) - 2^p`` construction; ``fma`` is C99
``fma``/``fmaf`` (single rounding).  Reductions, dot and matmul run the contract's tree
(``kera.ops.REDUCE_STEP``) and skip its identity padding, which is exact: op(x, identity) == x
for every non-NaN x, a NaN stays a NaN through every step, and the result is NaN-dirty, so
even a length-1 reduction comes out canonical.
"""

from __future__ import annotations

import enum
import re
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from math import prod
from typing import Protocol

from kera.backends.c.abi import c_ident, param_name
from kera.dtypes import DType
from kera.ir import Node, const_value
from kera.ops import ARITY, COMPARE, REDUCE_STEP, Op, Shape

#: lane type of a tile; integers live in unsigned lanes (wrapping is defined)
LANE = {
    DType.F32: "kf32",
    DType.F64: "kf64",
    DType.I32: "ku32",
    DType.I64: "ku64",
    DType.U32: "ku32",
    DType.U64: "ku64",
    DType.BOOL: "ku8",
}


def _u(bits: int, value: int) -> str:
    """An unsigned C literal of the given width."""
    return f"0x{value:08x}u" if bits <= 32 else f"UINT64_C(0x{value:016x})"


def _pow2(value: int, sfx: str) -> str:
    """``value`` (a power of two) as an exact C float literal."""
    return f"0x1p{value.bit_length() - 1}{sfx}"


def fields(dt: DType) -> dict[str, str]:
    """The ``$``-fields of the helper templates for one dtype."""
    w = dt.bits
    f = {
        "d": dt.value,
        "V": LANE[dt],
        "U": f"ku{w}",
        "S": f"ks{w}",
        "C": f"K_C{w}",  # mask of a comparison: $C(a, <, b)
        "W1": f"{w - 1}u",
        "TOP": str(w - 1),
        "SIGN": _u(w, dt.sign_mask),
        "ABS": _u(w, dt.sign_mask - 1),
        "ONES": _u(w, (1 << w) - 1),
    }
    if dt.is_float:
        sfx = "f" if dt is DType.F32 else ""
        f |= {
            "CANON": _u(w, dt.canonical_nan),
            "BIG": f"0x1p{dt.mant_bits}{sfx}",  # 2^p: from here on every float is an integer
            "ONE": f"1.0{sfx}",
            "SQRT": f"sqrt{sfx}",
            "FMA": f"fma{sfx}",
        }
    return f


def kind(dt: DType) -> str:
    """The kind of a dtype that selects a helper body: f, i, u or b."""
    if dt.is_float:
        return "f"
    if dt is DType.BOOL:
        return "b"
    return "i" if dt.is_signed else "u"


# ---------------------------------------------------------------------------- dtype helpers
# The helpers every tile of a dtype may need (``base_<dtype>`` in the helper set): bits <->
# float views, the select by mask, canonicalisation, signed views.

_BASE = {
    "f": """\
static inline $U k_bits_$d($V x) { K_AS($U, x); }
static inline $V k_float_$d($U x) { K_AS($V, x); }
static inline $V k_sel_$d($U m, $V a, $V b)
{
    return k_float_$d((k_bits_$d(a) & m) | (k_bits_$d(b) & ~m));
}
static inline $V k_canon_$d($V x) /* every NaN -> the positive canonical quiet NaN */
{
    $U m = $C(x, !=, x);
    return k_float_$d((k_bits_$d(x) & ~m) | ($CANON & m));
}
""",
    "i": """\
static inline $S k_signed_$d($U x) { K_AS($S, x); }
static inline $U k_unsigned_$d($S x) { K_AS($U, x); }
static inline $U k_sel_$d($U m, $U a, $U b) { return (a & m) | (b & ~m); }
""",
    "u": """\
static inline $U k_sel_$d($U m, $U a, $U b) { return (a & m) | (b & ~m); }
""",
    "b": """\
static inline ku8 k_sel_$d(ku8 m, ku8 a, ku8 b) { return (ku8)((a & m) | (b & ~m)); }
""",
}


def base_helper(dt: DType) -> str:
    """The C text of the dtype helpers of ``dt``."""
    return string.Template(_BASE[kind(dt)]).substitute(fields(dt))


# ---------------------------------------------------------------------------- the rows' kinds


class Nan(enum.Enum):
    """What an op does to lazy NaN canonicalisation.

    A float tile is *dirty* when its NaNs may be any NaN where the contract has the canonical
    one.  Ops that only test NaN-ness take dirty inputs as they are; ops that observe bits get
    their dirty inputs canonicalised in place first (a canonical NaN is a valid dirty value, so
    other readers of the tile are unaffected), and the stores of results do the same."""

    EXACT = "exact"  # the result has the contract's bits (or is not a float)
    DIRTY = "dirty"  # a float result computed from floats may hold any NaN
    OBSERVES = "observes"  # reads its float inputs' bits: they are canonicalised first
    MOVES = "moves"  # moves elements: dirty iff its inputs are; a dirty/clean mix is cleaned


class Cx(Protocol):
    """What a row needs from the entry point being lowered (``emit._Entry``)."""

    def tile(self, node: Node) -> str:
        """The name of the tile holding ``node``'s value."""
        ...

    def use_dtype(self, dt: DType) -> None:
        """Include the dtype helpers of ``dt``."""
        ...

    def helper(self, key: str, text: str, *dts: DType) -> str:
        """Include helper ``text`` once under ``key`` (plus the dtype helpers of ``dts``);
        returns ``key``, the helper's C name."""
        ...

    def scratch(self, node: Node, name: str, n: int) -> tuple[str, list[str]]:
        """A scratch tile of n elements of node's dtype for a tree, released after the node:
        its name and its declaration lines."""
        ...

    def uniform(self, node: Node) -> bool:
        """True when every lane of ``node``'s tile holds the same value (it is computed from
        constants and loop indices only, never from a row's parameters)."""
        ...


Lower = Callable[[Cx, Node, str, int], list[str]]


@dataclass(frozen=True)
class Helper:
    """An elementwise op lowered to helper ``k_<op>_<dtype>``: ``bodies[kind]`` is its body."""

    bodies: Mapping[str, str]
    nan: Nan = Nan.EXACT

    def body(self, op: Op, k: str) -> str:
        body = self.bodies.get(k) or (self.bodies.get("n") if k in "iu" else None)
        if body is None:
            raise ValueError(f"{op} is not defined on kind {k!r}")
        return body

    def text(self, op: Op, dt: DType) -> str:
        """The C text of ``k_<op>_<dt>``."""
        ret = "ku8" if op in COMPARE else "$V"
        if op is Op.SELECT:
            params = "ku8 c, $V a, $V b"
        else:
            params = ", ".join(f"$V {v}" for v in "abc"[: ARITY[op]])
        text = f"static inline {ret} k_{op.value}_$d({params})\n{{\n{self.body(op, kind(dt))}\n}}\n"
        return string.Template(text).substitute(fields(dt))

    def lower(self, cx: Cx, node: Node, name: str, size: int) -> list[str]:
        dt = node.inputs[-1].dtype  # select's condition comes first
        return _map(cx, node, name, size, call(cx, node.op, dt))


@dataclass(frozen=True)
class Structural:
    """An op lowered by a function that returns its C lines."""

    lower: Lower
    nan: Nan = Nan.EXACT
    hoisted: bool = False  # computed once per call, before the row loop (reads no row)


@dataclass(frozen=True)
class Alias:
    """An op whose tile is its input's tile: no code at all."""

    nan: Nan = Nan.MOVES


@dataclass(frozen=True)
class Region:
    """An op that owns a region of nodes (``loop``'s body, ``call``'s callee): the emitter
    lowers it itself, a loop as a C ``for`` loop over the body's nodes with the carried values
    double-buffered, a call as its callee's nodes in place.  Its float inputs are canonicalised
    first and its region's results are canonicalised at its end (each iteration's, for a
    loop), so a carried tile is never NaN-dirty and the op's results are exact."""

    nan: Nan = Nan.OBSERVES


Rule = Helper | Structural | Alias | Region


def helper_text(op: Op, dt: DType) -> str:
    """The C text of helper ``k_<op>_<dt>`` (ValueError for an op without a helper)."""
    rule = LOWER.get(op)
    if not isinstance(rule, Helper):
        raise ValueError(f"{op} has no helper in the C back end")
    return rule.text(op, dt)


def call(cx: Cx, op: Op, dt: DType) -> str:
    """The name of helper ``k_<op>_<dt>``, included in the translation unit (with bool's dtype
    helpers too, whatever the op: comparisons return bool lanes and select takes them)."""
    return cx.helper(f"k_{op.value}_{dt.value}", helper_text(op, dt), dt, DType.BOOL)


#: how every :func:`elementwise` helper's text begins, and the linkage a tile library gives it
#: (external, but hidden: every shared object keeps its own copy, so two ISA levels loaded in
#: one process never bind each other's helpers)
_TILE_HEAD = "static K_NOINLINE void "
_HIDDEN = '__attribute__((visibility("hidden")))'


def elementwise(cx: Cx, fname: str, out: DType, ins: Sequence[DType]) -> str:
    """The name of helper ``<fname>_n(n, r, a...)``: ``r[j] = fname(a[j]...)`` for the n
    elements of whole tiles, included once per translation unit.

    It is a function of its own (``K_NOINLINE``, a loop gcc keeps), called by every node that
    maps ``fname`` over more than one element: inlined, gcc unrolled the loop at each node and
    then optimised one straight-line block of every element's lane code, which cost 2-4x the
    compile time of the same bits built this way (issue 20, docs/c-backend.md).  Each element
    is computed by the same ``fname`` with the same operands in the same order, so the bits are
    those of the inline loop; ``r`` may be one of the inputs (canonicalisation in place)."""
    key = f"{fname}_n"
    params = ", ".join(f"const {LANE[dt]} *{v}" for dt, v in zip(ins, "abc", strict=False))
    args = ", ".join(f"{v}[j]" for v in "abc"[: len(ins)])
    text = (
        f"{_TILE_HEAD}{key}(size_t n, {LANE[out]} *r, {params})\n{{\n"
        f"    for (size_t j = 0; j < n; j++)\n        r[j] = {fname}({args});\n}}\n"
    )
    return cx.helper(key, text)


def is_tile(text: str) -> bool:
    """Whether ``text`` is a helper of :func:`elementwise` (``k_<op>_<type>_n``)."""
    return text.startswith(_TILE_HEAD)


def tile_definition(text: str) -> str:
    """The tile helper ``text`` (:func:`elementwise`) with external, hidden linkage: the same
    definition, compiled once in a tile library (``kera.backends.c.tiles``) instead of in
    every translation unit."""
    assert is_tile(text), text
    return f"{_HIDDEN} K_NOINLINE void {text[len(_TILE_HEAD) :]}"


def tile_declaration(text: str) -> str:
    """The prototype of the tile helper ``text`` that a translation unit linked with a tile
    library has in its place (``emit.assemble(..., shared=...)``)."""
    assert is_tile(text), text
    head = text[len(_TILE_HEAD) :].split("\n", 1)[0]
    return f"extern {_HIDDEN} void {head};\n"


def _map(cx: Cx, node: Node, name: str, size: int, fname: str) -> list[str]:
    """``name[j] = fname(input[j]...)`` for every element j: one call of its
    :func:`elementwise` helper (inline for a single element)."""
    if size == 1:
        args = ", ".join(f"{cx.tile(x)}[0]" for x in node.inputs)
        return [f"{name}[0] = {fname}({args});"]
    each = elementwise(cx, fname, node.dtype, [x.dtype for x in node.inputs])
    tiles = ", ".join(cx.tile(x) for x in node.inputs)
    return [f"{each}({size}, {name}, {tiles});"]


# ---------------------------------------------------------------------------- helper bodies


def _ret(expr: str) -> str:
    return f"    return {expr};"


def _cmp(rel: str, signed: bool = False) -> str:
    a, b = ("k_signed_$d(a)", "k_signed_$d(b)") if signed else ("a", "b")
    return _ret(f"K_CVT($C({a}, {rel}, {b}) & 1u, ku8)")


def _compare(rel: str) -> dict[str, str]:
    """A comparison on floats and integers (a mask turned into bool 0/1)."""
    return {"f": _cmp(rel), "i": _cmp(rel, signed=True), "u": _cmp(rel)}


def _minmax_float(rel: str, zero: str) -> str:
    """IEEE 754-2019 minimum/maximum: pick by ``rel``; equal operands differ only for +-0,
    joined by ``zero`` (| for min, & for max); any NaN gives the canonical NaN."""
    return "\n".join(
        [
            "    $U x = k_bits_$d(a), y = k_bits_$d(b);",
            f"    $U pick = $C(a, {rel}, b), eq = $C(a, ==, b), nan = $C(a, !=, a) | $C(b, !=, b);",
            "    $U r = (x & pick) | (y & ~pick);",
            f"    r = (r & ~eq) | ((x {zero} y) & eq);      /* equal: only +-0 differ; -0 < +0 */",
            "    return k_float_$d((r & ~nan) | ($CANON & nan));",
        ]
    )


def _minmax_int(rel: str, signed: bool) -> str:
    a, b = ("k_signed_$d(a)", "k_signed_$d(b)") if signed else ("a", "b")
    return f"    $U m = $C({a}, {rel}, {b});\n    return (a & m) | (b & ~m);"


def _minmax(rel: str, zero: str) -> dict[str, str]:
    return {
        "f": _minmax_float(rel, zero),
        "i": _minmax_int(rel, True),
        "u": _minmax_int(rel, False),
    }


def _divrem_u(sym: str, result: str) -> str:
    """Unsigned a ``sym`` b with a divisor of 1 where b == 0, then ``result`` (z: b == 0)."""
    return "\n".join(
        [
            "    $U z = $C(b, ==, K_SPLAT($U, 0u));",
            f"    $U q = a {sym} (b | (z & 1u));              /* divisor 1 where b == 0 */",
            f"    return {result};",
        ]
    )


def _divrem_i(sym: str, result: str) -> str:
    """Signed a ``sym`` b with a divisor of 1 where b == 0 or MIN / -1 would overflow."""
    return "\n".join(
        [
            "    $U z = $C(b, ==, K_SPLAT($U, 0u));",
            "    $U ovf = $C(a, ==, K_SPLAT($U, $SIGN)) & $C(b, ==, K_SPLAT($U, $ONES));",
            "    $U bad = z | ovf, safe = (b & ~bad) | (bad & 1u);   /* x/0 and MIN/-1 divide by 1 */",
            f"    $U q = k_unsigned_$d(k_signed_$d(a) {sym} k_signed_$d(safe));",
            f"    return {result};",
        ]
    )


_RINT_LINES = (  # (line, the variable it defines when only some picks need it)
    ("    $U b = k_bits_$d(a), sg = b & $SIGN;", None),
    ("    $U neg = 0u - (b >> $TOP);", "neg"),
    ("    $V ax = k_float_$d(b ^ sg);", None),
    ("    $U small = $C(ax, <, K_SPLAT($V, $BIG));  /* |a| < 2^p: may have a fraction; not NaN */",
     None),
    ("    $V r = (ax + $BIG) - $BIG;              /* exact: rounds |a| to an integer, ties to even */",
     None),
    ("    $V t = k_sel_$d($C(r, >, ax), r - $ONE, r);", "t"),
    ("    $V c = k_sel_$d($C(r, <, ax), r + $ONE, r);", "c"),
    ("    $V m = PICK;", None),
    ("    $U out = ((k_bits_$d(m) | sg) & small) | (b & ~small);  /* the result has a's sign */",
     None),
    ("    return k_float_$d(out);", None),
)  # fmt: skip


def _rint(pick: str) -> dict[str, str]:
    """A rounding op: the magnitude it picks from r = |a| rounded to nearest-even, t = trunc,
    c = ceil (and neg, the sign mask); only the lines the pick uses (no unused variables)."""
    used = set(re.findall(r"\b\w+\b", pick))
    lines = [ln for ln, var in _RINT_LINES if var is None or var in used]
    return {"f": "\n".join(lines).replace("PICK", pick)}


def _select() -> dict[str, str]:
    same = _ret("k_sel_$d(0u - K_CVT(c, $U), a, b)")
    return {"f": same, "n": same, "b": _ret("k_sel_$d((ku8)(0u - c), a, b)")}


# ---------------------------------------------------------------------------- leaves


def _param(cx: Cx, node: Node, name: str, size: int) -> list[str]:
    cx.use_dtype(node.dtype)
    w = 8 * node.dtype.nbytes
    arg = f"p_{c_ident(param_name(node))}"
    return [f"k_load{w}({name}, {arg}, k_row, k_cnt, {size});"]


def _const(cx: Cx, node: Node, name: str, size: int) -> list[str]:
    dt = node.dtype
    cx.use_dtype(dt)
    bits = const_value(node).reshape(-1).view(dt.uint) if dt.is_float else None
    raw = [int(v) for v in (bits if bits is not None else const_value(node).reshape(-1))]
    w = 8 * dt.nbytes
    vals = [_u(w, v & ((1 << w) - 1)) for v in raw]
    wrap = f"k_float_{dt.value}" if dt.is_float else ""
    if size == 1:
        return [f"{name}[0] = {wrap}(K_SPLAT(ku{w}, {vals[0]}));"]
    table = ", ".join(vals)
    return [
        f"static const uint{w}_t {name}_bits[{size}] = {{{table}}};",
        "K_ROLLED",
        f"for (size_t j = 0; j < {size}; j++)",
        f"    {name}[j] = {wrap}(K_SPLAT(ku{w}, {name}_bits[j]));",
    ]


def _iota(cx: Cx, node: Node, name: str, size: int) -> list[str]:
    shape = node.shape
    axis = node.attr("axis")
    assert isinstance(axis, int)
    inner = prod(shape[axis + 1 :])
    cvt = _convert_call(cx, DType.I64, node.dtype)
    idx = (
        f"(uint64_t)(j / {inner} % {shape[axis]})"
        if inner > 1
        else f"(uint64_t)(j % {shape[axis]})"
    )
    return [
        "K_ROLLED",
        f"for (size_t j = 0; j < {size}; j++)",
        f"    {name}[j] = {cvt}(K_SPLAT(ku64, {idx}));",
    ]


# ---------------------------------------------------------------------------- convert, bitcast


def _widen_mask(m: str, src: DType, dst: DType) -> str:
    """A src-width all-ones/zero mask as a dst-width mask."""
    if src.bits == dst.bits:
        return m
    if src.bits < dst.bits:
        return f"(0u - K_CVT({m} & 1u, ku{dst.bits}))"
    return f"K_CVT({m}, ku{dst.bits})"


def _f2i_body(src: DType, dst: DType) -> str:
    """Saturating float->int: truncate toward zero, clamp to dst's range, NaN -> 0."""
    sfx = "f" if src is DType.F32 else ""
    lo = f"-{_pow2(-dst.min, sfx)}" if dst.is_signed else f"0.0{sfx}"
    hi = _pow2(dst.max + 1, sfx)  # max + 1, exact
    conv = (
        f"k_unsigned_{dst.value}(K_CVT(xs, ks{dst.bits}))"
        if dst.is_signed
        else f"K_CVT(xs, ku{dst.bits})"
    )
    sat = f"({_widen_mask('hi', src, dst)} & {_u(dst.bits, dst.max)})"
    if dst.is_signed:
        sat += f" | ({_widen_mask('lo', src, dst)} & {_u(dst.bits, dst.sign_mask)})"
    return "\n".join(
        [
            f"    $sV lo_ = K_SPLAT($sV, {lo}), hi_ = K_SPLAT($sV, {hi});",
            "    $sU ok = $sC(x, >=, lo_) & $sC(x, <, hi_);  /* false for NaN */",
            "    $sU hi = $sC(x, >=, hi_), lo = $sC(x, <, lo_);"
            if dst.is_signed  # an unsigned result saturates below at 0, which ok gives
            else "    $sU hi = $sC(x, >=, hi_);",
            "    $sV xs = k_float_$sd(k_bits_$sd(x) & ok);  /* out-of-range lanes -> +0 */",
            f"    $dU v = {conv};",
            f"    return (v & {_widen_mask('ok', src, dst)}) | {sat};",
        ]
    )


def _cvt_expr(src: DType, dst: DType) -> str:
    if src is dst:
        return "x"  # f32 -> f32: the result is marked NaN-dirty (canonicalised when observed)
    if dst is DType.BOOL:
        return "K_CVT($sC(x, !=, K_SPLAT($sV, 0u)) & 1u, ku8)"
    if src is DType.BOOL:
        return "K_CVT(x, $dU)"
    if src.is_float and dst.is_float:
        return "K_CVT(x, $dV)"  # f32->f64 exact, f64->f32 RNE
    x = "k_signed_$sd(x)" if src.is_signed else "x"
    if dst.is_float:
        return f"K_CVT({x}, $dV)"  # RNE (Annex F)
    if src.bits == dst.bits:
        return "x"  # i32 <-> u32 share their bits
    if src.bits < dst.bits and src.is_signed:
        return "($dU)K_CVT(k_signed_$sd(x), $dS)"  # sign-extend; the cast keeps the bits
    return "K_CVT(x, $dU)"  # zero-extend, or truncate mod 2^n


def _cvt_helper(name: str, src: DType, dst: DType, body: str) -> str:
    """Helper ``<name>_<src>_<dst>``: ``$s``-fields are src's, ``$d``-fields dst's."""
    f = {f"s{k}": v for k, v in fields(src).items()}
    f |= {f"d{k}": v for k, v in fields(dst).items()}
    text = f"static inline $dV {name}_${{sd}}_${{dd}}($sV x)\n{{\n{body}\n}}\n"
    return string.Template(text).substitute(f)


def _convert_helper(src: DType, dst: DType) -> str:
    if src.is_float and dst.is_int:
        body = _f2i_body(src, dst)
    else:
        body = f"    return {_cvt_expr(src, dst)};"
    return _cvt_helper("k_convert", src, dst, body)


def _bitcast_helper(src: DType, dst: DType) -> str:
    if src.is_float and src is not dst:
        expr = "k_bits_$sd(x)" if not dst.is_float else "x"
    elif dst.is_float and src is not dst:
        expr = "k_float_$dd(x)"
    else:
        expr = "x"  # same bits in the same unsigned lanes
    return _cvt_helper("k_bitcast", src, dst, f"    return {expr};")


def _convert_call(cx: Cx, src: DType, dst: DType) -> str:
    key = f"k_convert_{src.value}_{dst.value}"
    return cx.helper(key, _convert_helper(src, dst), src, dst)


def _convert(cx: Cx, node: Node, name: str, size: int) -> list[str]:
    return _map(cx, node, name, size, _convert_call(cx, node.inputs[0].dtype, node.dtype))


def _bitcast(cx: Cx, node: Node, name: str, size: int) -> list[str]:
    src, dst = node.inputs[0].dtype, node.dtype
    fname = cx.helper(f"k_bitcast_{src.value}_{dst.value}", _bitcast_helper(src, dst), src, dst)
    return _map(cx, node, name, size, fname)


# ---------------------------------------------------------------------------- trees


def _lin(terms: Sequence[tuple[str, int]], base: int = 0) -> str:
    """``base + sum(var * coef)`` as C, dropping zero terms and unit coefficients."""
    parts = [v if c == 1 else f"{v} * {c}" for v, c in terms if c != 0]
    if base or not parts:
        parts.append(str(base))
    return " + ".join(parts)


def _nest(loops: Sequence[tuple[str, int]], body: list[str]) -> list[str]:
    """Wrap body in `for` loops, skipping loops of one iteration (their index is unused); each
    stays a loop (``K_ROLLED``: unrolled at every node, they were most of gcc's time)."""
    for var, n in reversed(loops):
        if n == 1:
            continue
        body = [
            "K_ROLLED",
            f"for (size_t {var} = 0; {var} < {n}; {var}++) {{",
            *(f"    {x}" for x in body),
            "}",
        ]
    return body


def _tree(cx: Cx, node: Node, scratch: str, n: int, step: Op) -> list[str]:
    """The contract's tree over scratch[0..n): x[i] = op(x[i], x[i+s]), s = P/2 ... 1."""
    if n == 1:
        return []
    fname = call(cx, step, node.dtype)
    p = 1 << (n - 1).bit_length()
    return [
        f"for (size_t s = {p // 2}, m = {n}; s > 0; m = m < s ? m : s, s >>= 1)",
        "    for (size_t k = 0; k + s < m; k++)",
        f"        {scratch}[k] = {fname}({scratch}[k], {scratch}[k + s]);",
    ]


# A tree's root, scratch[0], is its result as it is: a float result is NaN-dirty (rows below),
# canonicalised when observed.


def _reduce(cx: Cx, node: Node, name: str, size: int) -> list[str]:
    (x,) = node.inputs
    axis = node.attr("axis")
    assert isinstance(axis, int)
    n, inner = x.shape[axis], prod(x.shape[axis + 1 :])
    outer = prod(x.shape[:axis])
    s, lines = cx.scratch(node, name, n)
    gather = _lin(
        [("k_o", n * inner if outer > 1 else 0), ("k", inner), ("k_i", 1 if inner > 1 else 0)]
    )
    dst = _lin([("k_o", inner if outer > 1 else 0), ("k_i", 1 if inner > 1 else 0)])
    body = [
        f"for (size_t k = 0; k < {n}; k++)",
        f"    {s}[k] = {cx.tile(x)}[{gather}];",
        *_tree(cx, node, s, n, REDUCE_STEP[node.op]),
        f"{name}[{dst}] = {s}[0];",
    ]
    return lines + _nest([("k_o", outer), ("k_i", inner)], body)


def _dot(cx: Cx, node: Node, name: str, size: int) -> list[str]:
    a, b = node.inputs
    n = a.shape[0]
    s, lines = cx.scratch(node, name, n)
    mul = call(cx, Op.MUL, a.dtype)  # each product rounded on its own
    body = [
        f"for (size_t k = 0; k < {n}; k++)",
        f"    {s}[k] = {mul}({cx.tile(a)}[k], {cx.tile(b)}[k]);",
        *_tree(cx, node, s, n, REDUCE_STEP[Op.DOT]),
        f"{name}[0] = {s}[0];",
    ]
    return lines + body


def _matmul(cx: Cx, node: Node, name: str, size: int) -> list[str]:
    a, b = node.inputs
    m, k, n = a.shape[0], a.shape[1], b.shape[1]
    s, lines = cx.scratch(node, name, k)
    mul = call(cx, Op.MUL, a.dtype)  # each product rounded on its own
    ai = _lin([("k_o", k if m > 1 else 0), ("k", 1)])
    bi = _lin([("k", n), ("k_i", 1 if n > 1 else 0)])
    di = _lin([("k_o", n if m > 1 else 0), ("k_i", 1 if n > 1 else 0)])
    body = [
        f"for (size_t k = 0; k < {k}; k++)",
        f"    {s}[k] = {mul}({cx.tile(a)}[{ai}], {cx.tile(b)}[{bi}]);",
        *_tree(cx, node, s, k, REDUCE_STEP[Op.MATMUL]),
        f"{name}[{di}] = {s}[0];",
    ]
    return lines + _nest([("k_o", m), ("k_i", n)], body)


# ---------------------------------------------------------------------------- data movement


def _strides(shape: Shape) -> tuple[int, ...]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return tuple(reversed(out))


def _copy(
    dst: str,
    doff: int,
    dstrides: Sequence[int],
    src: str,
    soff: int,
    sstrides: Sequence[int],
    shape: Shape,
) -> list[str]:
    """dst[doff + i . dstrides] = src[soff + i . sstrides] for every index i of shape."""
    vars_ = [f"k_a{i}" for i in range(len(shape))]
    live = [(v, d) for v, d in zip(vars_, shape, strict=True)]
    di = _lin([(v, st if d > 1 else 0) for (v, d), st in zip(live, dstrides, strict=True)], doff)
    si = _lin([(v, st if d > 1 else 0) for (v, d), st in zip(live, sstrides, strict=True)], soff)
    return _nest(live, [f"{dst}[{di}] = {src}[{si}];"])


def _broadcast(cx: Cx, node: Node, name: str, size: int) -> list[str]:
    (x,) = node.inputs
    lead = len(node.shape) - len(x.shape)
    xs = _strides(x.shape)
    src = [0] * lead + [st if d != 1 else 0 for st, d in zip(xs, x.shape, strict=True)]
    return _copy(name, 0, _strides(node.shape), cx.tile(x), 0, src, node.shape)


def _transfer(cx: Cx, node: Node, name: str, size: int) -> list[str]:
    """A move between memory spaces, which C does not have: a copy of every lane, bits as they
    are (a tile of its own, so the effect is a copy even where nothing reads it)."""
    return _copy(name, 0, (1,), cx.tile(node.inputs[0]), 0, (1,), (size,))


def _transpose(cx: Cx, node: Node, name: str, size: int) -> list[str]:
    (x,) = node.inputs
    perm = node.attr("perm")
    assert isinstance(perm, tuple)
    xs = _strides(x.shape)
    src = [xs[p] for p in perm]
    return _copy(name, 0, _strides(node.shape), cx.tile(x), 0, src, node.shape)


def _slice(cx: Cx, node: Node, name: str, size: int) -> list[str]:
    (x,) = node.inputs
    start = node.attr("start")
    assert isinstance(start, tuple)
    xs = _strides(x.shape)
    off = sum(a * st for a, st in zip(start, xs, strict=True))
    return _copy(name, 0, _strides(node.shape), cx.tile(x), off, xs, node.shape)


def _concat(cx: Cx, node: Node, name: str, size: int) -> list[str]:
    a, b = node.inputs
    axis = node.attr("axis")
    assert isinstance(axis, int)
    ds = _strides(node.shape)
    boff = a.shape[axis] * ds[axis]
    first = _copy(name, 0, ds, cx.tile(a), 0, _strides(a.shape), a.shape)
    second = _copy(name, boff, ds, cx.tile(b), 0, _strides(b.shape), b.shape)
    return first + second


# ---------------------------------------------------------------------------- dynamic indexing

_DYN_AT = """\
/* Start index d of lane l (an i32 held in unsigned lanes), clamped into [0, hi] in 64-bit
   arithmetic before it becomes an address: every i32 value is safe. */
static inline size_t k_dyn_at(const void *start, size_t d, size_t l, int64_t hi)
{
    uint32_t w;
    memcpy(&w, (const unsigned char *)start + (d * KERA_LANES + l) * 4, 4);
    int64_t v = (int64_t)w - (int64_t)(w & 0x80000000u) * 2; /* the i32's value */
    return (size_t)(v < 0 ? 0 : v > hi ? hi : v);
}
"""

_LANE_MOVE = """\
/* Lane l of element sj of src -> lane l of element dj of dst (b-byte lanes): a dynamic window
   whose start differs between the rows of a block moves row by row. */
static inline void k_lane_move(void *dst, size_t dj, const void *src, size_t sj, size_t l,
                               size_t b)
{
    memcpy((unsigned char *)dst + (dj * KERA_LANES + l) * b,
           (const unsigned char *)src + (sj * KERA_LANES + l) * b, b);
}
"""


def _plus(base: str, offset: str) -> str:
    return base if offset == "0" else f"{base} + {offset}"


def _dyn_offset(cx: Cx, start: Node, dims: Shape, window: Shape, lane: str) -> str:
    """The flat offset of the clamped window start in one lane: sum of clamp(start[d]) times
    the stride of axis d (axes where the window spans the whole dimension start at 0)."""
    at = cx.helper("k_dyn_at", _DYN_AT)
    terms = []
    for d, (dim, w, st) in enumerate(zip(dims, window, _strides(dims), strict=True)):
        if dim > w:
            term = f"{at}({cx.tile(start)}, {d}, {lane}, {dim - w})"
            terms.append(term if st == 1 else f"{term} * {st}")
    return " + ".join(terms) or "0"


def _dyn_window(
    cx: Cx,
    node: Node,
    dims: Shape,
    window: Shape,
    move: Callable[[str, str, str | None], str],
) -> list[str]:
    """Move every element of a window at the clamped start (``node.inputs[-1]``) of an array of
    ``dims``.  ``move(offset in the array, offset in the window, lane or None)`` is the C
    statement for one element: of every lane at once when the start is uniform, else of one
    lane (rows of a block may start their windows at different places)."""
    start = node.inputs[-1]
    loops = [(f"k_a{i}", n) for i, n in enumerate(window)]
    live = [(v, n > 1) for v, n in loops]
    big = _lin([(v, st if on else 0) for (v, on), st in zip(live, _strides(dims), strict=True)])
    small = _lin([(v, st if on else 0) for (v, on), st in zip(live, _strides(window), strict=True)])
    at = _dyn_offset(cx, start, dims, window, "0")
    if cx.uniform(start) or at == "0":  # every lane starts its window at the same place
        body = _nest(loops, [move(_plus("k_at", big), small, None)])
        return (
            ["{", f"    size_t k_at = {at}; /* the same in every row */"]
            + [f"    {x}" for x in body]
            + ["}"]
        )
    at = _dyn_offset(cx, start, dims, window, "k_l")
    body = _nest(loops, [move(_plus("k_at", big), small, "k_l")])
    return [
        "for (size_t k_l = 0; k_l < KERA_LANES; k_l++) { /* row by row */",
        f"    size_t k_at = {at};",
        *(f"    {x}" for x in body),
        "}",
    ]


def _lane_move(cx: Cx, dst: str, dj: str, src: str, sj: str, lane: str, nbytes: int) -> str:
    mover = cx.helper("k_lane_move", _LANE_MOVE)
    return f"{mover}({dst}, {dj}, {src}, {sj}, {lane}, {nbytes});"


def _dynamic_slice(cx: Cx, node: Node, name: str, size: int) -> list[str]:
    x = node.inputs[0]
    src, nbytes = cx.tile(x), node.dtype.nbytes

    def move(big: str, small: str, lane: str | None) -> str:
        if lane is None:
            return f"{name}[{small}] = {src}[{big}];"
        return _lane_move(cx, name, small, src, big, lane, nbytes)

    return _dyn_window(cx, node, x.shape, node.shape, move)


def _dynamic_update_slice(cx: Cx, node: Node, name: str, size: int) -> list[str]:
    """A copy of x (the result is a new value), then v over the window."""
    x, v = node.inputs[0], node.inputs[1]
    src, nbytes = cx.tile(v), node.dtype.nbytes

    def move(big: str, small: str, lane: str | None) -> str:
        if lane is None:
            return f"{name}[{big}] = {src}[{small}];"
        return _lane_move(cx, name, big, src, small, lane, nbytes)

    copy = _copy(name, 0, (1,), cx.tile(x), 0, (1,), (size,))
    return copy + _dyn_window(cx, node, x.shape, v.shape, move)


# ---------------------------------------------------------------------------- the table

LOWER: dict[Op, Rule] = {
    # -- leaves
    Op.PARAM: Structural(_param),  # the block's rows, transposed into lanes (k_load*)
    Op.CONST: Structural(_const, hoisted=True),  # from its bits: NaN payloads kept
    Op.IOTA: Structural(_iota, hoisted=True),  # i64 indices through the convert helper
    # -- unary elementwise
    # sign-bit ops keep NaN payloads, so they observe bits: dirty inputs are cleaned first
    Op.NEG: Helper(
        {"f": _ret("k_float_$d(k_bits_$d(a) ^ $SIGN)"), "n": _ret("0u - a")}, Nan.OBSERVES
    ),
    Op.ABS: Helper(
        {
            "f": _ret("k_float_$d(k_bits_$d(a) & $ABS)"),
            "i": "    $U m = $C(k_signed_$d(a), <, K_SPLAT($S, 0));\n"
            "    return (a ^ m) - m;  /* wraps: |MIN| = MIN */",
            "u": _ret("a"),
        },
        Nan.OBSERVES,
    ),
    Op.NOT: Helper({"n": _ret("~a"), "b": _ret("(ku8)(a ^ 1u)")}),
    Op.SQRT: Helper({"f": _ret("K_MAP1($V, $SQRT, a)")}, Nan.DIRTY),  # correctly rounded
    Op.FLOOR: Helper(_rint("k_sel_$d(neg, c, t)"), Nan.DIRTY),  # floor(-y) = -ceil(y)
    Op.CEIL: Helper(_rint("k_sel_$d(neg, t, c)"), Nan.DIRTY),  # ceil(-y) = -trunc(y)
    Op.TRUNC: Helper(_rint("t"), Nan.DIRTY),
    Op.ROUND: Helper(_rint("r"), Nan.DIRTY),  # ties to even (never C's round: ties away)
    # -- binary elementwise
    Op.ADD: Helper({"f": _ret("a + b"), "n": _ret("a + b")}, Nan.DIRTY),
    Op.SUB: Helper({"f": _ret("a - b"), "n": _ret("a - b")}, Nan.DIRTY),
    Op.MUL: Helper({"f": _ret("a * b"), "n": _ret("a * b")}, Nan.DIRTY),
    Op.DIV: Helper(
        {"f": _ret("a / b"), "i": _divrem_i("/", "q & ~z"), "u": _divrem_u("/", "q & ~z")},
        Nan.DIRTY,
    ),  # x/0 = 0
    Op.REM: Helper(
        {"i": _divrem_i("%", "(q & ~z) | (a & z)"), "u": _divrem_u("%", "(q & ~z) | (a & z)")}
    ),  # x%0 = x
    Op.MIN: Helper(_minmax("<", "|")),  # IEEE minimum, never fmin: NaN wins, -0 < +0
    Op.MAX: Helper(_minmax(">", "&")),
    Op.COPYSIGN: Helper(
        {"f": _ret("k_float_$d((k_bits_$d(a) & $ABS) | (k_bits_$d(b) & $SIGN))")}, Nan.OBSERVES
    ),
    Op.AND: Helper({"n": _ret("a & b"), "b": _ret("(ku8)(a & b)")}),
    Op.OR: Helper({"n": _ret("a | b"), "b": _ret("(ku8)(a | b)")}),
    Op.XOR: Helper({"n": _ret("a ^ b"), "b": _ret("(ku8)(a ^ b)")}),
    Op.SHL: Helper({"n": _ret("a << (b & $W1)")}),  # the amount is reduced mod the width
    Op.SHR: Helper(
        {
            # arithmetic shift from logical ones: ((a ^ g) >> s) ^ g
            "i": "    $U g = 0u - (a >> $TOP);\n    return ((a ^ g) >> (b & $W1)) ^ g;",
            "u": _ret("a >> (b & $W1)"),
        }
    ),
    Op.EQ: Helper(_compare("==") | {"b": _ret("(ku8)(a ^ b ^ 1u)")}),
    Op.NE: Helper(_compare("!=") | {"b": _ret("(ku8)(a ^ b)")}),
    Op.LT: Helper(_compare("<")),
    Op.LE: Helper(_compare("<=")),
    Op.GT: Helper(_compare(">")),
    Op.GE: Helper(_compare(">=")),
    # -- ternary elementwise
    Op.FMA: Helper({"f": _ret("K_MAP3($V, $FMA, a, b, c)")}, Nan.DIRTY),  # C99 fma: one rounding
    Op.SELECT: Helper(_select(), Nan.OBSERVES),  # by mask: moves the chosen operand's bits
    # -- conversions
    Op.CONVERT: Structural(_convert, Nan.DIRTY),  # dirty only from a float (int->float: exact)
    Op.BITCAST: Structural(_bitcast, Nan.OBSERVES),
    # -- reductions: the contract's tree, REDUCE_STEP's op at each step.  Dirty even for
    # amin/amax (whose step canonicalises): a length-1 tree returns its element as it is
    Op.SUM: Structural(_reduce, Nan.DIRTY),
    Op.PROD: Structural(_reduce, Nan.DIRTY),
    Op.AMIN: Structural(_reduce, Nan.DIRTY),
    Op.AMAX: Structural(_reduce, Nan.DIRTY),
    Op.DOT: Structural(_dot, Nan.DIRTY),  # products rounded one by one, then the tree
    Op.MATMUL: Structural(_matmul, Nan.DIRTY),
    # -- data movement
    Op.BROADCAST: Structural(_broadcast, Nan.MOVES),
    Op.RESHAPE: Alias(),  # same elements in the same order
    Op.TRANSPOSE: Structural(_transpose, Nan.MOVES),
    Op.SLICE: Structural(_slice, Nan.MOVES),
    Op.CONCAT: Structural(_concat, Nan.MOVES),
    # -- dynamic indexing: starts clamped in 64-bit arithmetic before any address is formed
    Op.DYNAMIC_SLICE: Structural(_dynamic_slice, Nan.MOVES),
    Op.DYNAMIC_UPDATE_SLICE: Structural(_dynamic_update_slice, Nan.MOVES),  # a copy, then v
    # -- memory spaces: C has one; a transfer is a copy with the same bits
    Op.TRANSFER: Structural(_transfer, Nan.MOVES),
    # -- regions (emit._REGIONS): operands cleaned before, results clean after
    Op.LOOP: Region(),  # a C for loop over the body, carried values double-buffered
    Op.CALL: Region(),  # the callee's nodes in place, once per call group, bound to the operands
}

#: every op this back end lowers: the keys of LOWER
SUPPORTED = frozenset(op.value for op in LOWER)
