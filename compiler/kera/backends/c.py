"""The C back end: Kera functions -> one self-contained C11 translation unit plus a header.

``emit(functions, isa)`` returns a :class:`CSource` (``.c`` and ``.h`` text).  Nothing here runs a
compiler; ``keracheck.runners.gcc`` does that with :data:`PINNED_FLAGS` + ``ISAS[isa].flags``.

Calling convention (one entry point per exported function, documented in docs/c-backend.md)::

    int kera_<name>(size_t n, const P0 *p_<param0>, ..., R0 *out0, R1 *out1, ...);

Every array holds ``n`` batch rows in C order: row ``r`` of a parameter of shape ``(d0, d1..)``
starts at element ``r * d0 * d1 * ...``.  Element types: f32 ``float``, f64 ``double``, i32
``int32_t``, i64 ``int64_t``, u32 ``uint32_t``, u64 ``uint64_t``, bool ``uint8_t`` (0/1; any non-zero
input byte reads as 1).  Arrays need their element type's natural alignment and must not overlap
the outputs.  Returns ``KERA_OK`` (0); ``KERA_E_FPENV`` (1) if the floating-point environment
would break the contract (x86 MXCSR FTZ/DAZ set, AArch64 FPCR FZ/AH set, or a rounding mode other
than to-nearest-even), before touching any output; ``KERA_E_NOMEM`` (2) if a large-tile arena
could not be allocated.

Execution model.  The batch is processed in blocks of ``L`` rows (``L`` = ``ISAS[isa].lanes``).
Every node value is a *tile*: one lane vector per element of the node's shape, lane ``l`` holding
row ``block + l``.  So every op is computed lane-wise across independent rows, and the contract's
per-row order (reduction trees, dot/matmul sums) is kept exactly while all of it is SIMD.  With
``L == 1`` (``isa="scalar"``) the lane types are plain C scalars and the file is strict ISO C11;
with ``L > 1`` they are GCC vector types (``vector_size``), which gcc lowers to SSE2/AVX2/AVX-512/
NEON according to the ``-march`` in ``ISAS[isa].flags``.  The C text differs between ISA levels
only in ``KERA_LANES`` and the lane typedefs.

No undefined or implementation-defined behaviour is relied on: integers live in unsigned lanes
(wrapping is defined), signed views go through ``memcpy``; shift amounts are masked to
``width - 1`` and ``>>`` on signed values is built from unsigned shifts; division is made total
before ``/`` (x/0 = 0, x%0 = x, MIN/-1 = MIN, MIN%-1 = 0); float->int conversions saturate and
map NaN to 0 before the C conversion sees an out-of-range value; bits move through ``memcpy``
(scalar lanes) or vector casts.  NaN results are canonicalised (0x7FC00000 / 0x7FF8000000000000)
lazily: arithmetic leaves a tile *NaN-dirty*, and it is canonicalised in place before anything
observes its bits (results, neg, abs, copysign, bitcast, select, mixed concat; see
``_Lowering._track``).  neg, abs and copysign are sign-bit operations; min/max are IEEE 754-2019
minimum/maximum; rounding ops use the exact ``(|x| + 2^p) - 2^p`` construction; ``fma`` is C99
``fma``/``fmaf`` (single rounding).  Reductions skip the identity padding of the contract's tree,
which is exact: op(x, identity) == x for every non-NaN x, a NaN stays a NaN through every step,
and the result is dirty, so even a length-1 reduction comes out canonical.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from math import prod
from pathlib import Path

from kera.dtypes import DType
from kera.files import write_atomic
from kera.ir import Function, Graph, Node, const_value
from kera.ops import COMPARE, MOVEMENT, REDUCE_STEP, UNARY, Op, Shape

#: gcc flags every build uses (contract: no contraction, IEEE, wrapping, no fast-math).
#: -fno-math-errno only stops sqrt() from setting errno (the value is the same, correctly
#: rounded), which lets gcc vectorise it; -Wno-psabi silences notes about vector-type ABIs of
#: static helpers that are always inlined.
PINNED_FLAGS = (
    "-O2",
    "-std=c11",
    "-ffp-contract=off",
    "-fno-fast-math",
    "-fwrapv",
    "-fsignaling-nans",
    "-fno-math-errno",
    "-Wall",
    "-Wno-psabi",
    "-Wno-unused-function",
)


@dataclass(frozen=True)
class Isa:
    """An ISA level: its lane count (1 = scalar ISO C) and the gcc flags that select it."""

    name: str
    lanes: int
    flags: tuple[str, ...]
    arch: str  # the machine it runs on: x86_64, aarch64, riscv64 (or "any")


ISAS: dict[str, Isa] = {
    # plain C scalars; no auto-vectorisation so it really is scalar code
    "scalar": Isa("scalar", 1, ("-fno-tree-vectorize",), "any"),
    "sse2": Isa("sse2", 4, ("-march=x86-64",), "x86_64"),  # x86-64 baseline = SSE2
    # -mmove-max/-mstore-max only tune code generation: without them gcc moves 64-bit lane
    # vectors (two registers wide) through the stack in 16-byte pieces (3-4x slower f64)
    "avx2": Isa("avx2", 8, ("-march=x86-64-v3", "-mmove-max=256", "-mstore-max=256"), "x86_64"),
    "avx512": Isa(
        "avx512",
        16,
        ("-march=x86-64-v4", "-mprefer-vector-width=512", "-mmove-max=512", "-mstore-max=512"),
        "x86_64",
    ),
    "neon": Isa("neon", 4, ("-march=armv8-a",), "aarch64"),
}

OK, E_FPENV, E_NOMEM = 0, 1, 2

# ---------------------------------------------------------------------------- dtype tables

IO_TYPES = {  # element type in the public arrays (and in the batch driver, c_driver.py)
    DType.F32: "float",
    DType.F64: "double",
    DType.I32: "int32_t",
    DType.I64: "int64_t",
    DType.U32: "uint32_t",
    DType.U64: "uint64_t",
    DType.BOOL: "uint8_t",
}
_IO = IO_TYPES
_LANE = {  # lane type of a tile; integers live in unsigned lanes (wrapping is defined)
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


def _fields(dt: DType) -> dict[str, str]:
    """Template fields for one dtype (see the helper templates below)."""
    w = dt.bits
    f = {
        "d": dt.value,
        "V": _LANE[dt],
        "U": f"ku{w}",
        "S": f"ks{w}",
        "C": f"K_C{w}",  # mask of a comparison: $C(a, <, b)
        "W1": f"{w - 1}u",
        "TOP": str(w - 1),
        "SIGN": _u(w, 1 << (w - 1)),
        "ABS": _u(w, (1 << (w - 1)) - 1),
        "ONES": _u(w, (1 << w) - 1),
    }
    if dt.is_float:
        sfx = "f" if dt is DType.F32 else ""
        f |= {
            "CANON": _u(w, dt.canonical_nan),
            "BIG": f"0x1p{dt.mant_bits}{sfx}",
            "ONE": f"1.0{sfx}",
            "SQRT": f"sqrt{sfx}",
            "FMA": f"fma{sfx}",
        }
    return f


def _kind(dt: DType) -> str:
    if dt.is_float:
        return "f"
    if dt is DType.BOOL:
        return "b"
    return "i" if dt.is_signed else "u"


# ---------------------------------------------------------------------------- the prelude

_HEAD = """\
#include <fenv.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__FAST_MATH__) || (defined(__FINITE_MATH_ONLY__) && __FINITE_MATH_ONLY__)
#error "kera: compile without -ffast-math/-Ofast: the contract needs IEEE arithmetic"
#endif
#if defined(__GNUC__) && !defined(__clang__) && !defined(__SUPPORT_SNAN__)
#error "kera: compile with -fsignaling-nans: without it gcc may quiet a signalling NaN constant"
#endif
#if FLT_EVAL_METHOD != 0
#error "kera: needs FLT_EVAL_METHOD == 0 (x87 excess precision changes results; use SSE)"
#endif
#if !defined(__GNUC__) || defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif
"""

_SCALAR = """\
/* scalar lanes: one batch row per block, plain ISO C11 */
#define KERA_LANES 1
typedef float kf32;
typedef double kf64;
typedef uint8_t ku8;
typedef uint32_t ku32;
typedef int32_t ks32;
typedef uint64_t ku64;
typedef int64_t ks64;
/* all-ones/zero mask of a comparison (C gives 0/1) */
#define K_C32(a, op, b) ((ku32)0 - (ku32)((a) op (b)))
#define K_C64(a, op, b) ((ku64)0 - (ku64)((a) op (b)))
#define K_CVT(x, T) ((T)(x))                  /* C conversion (operands are in range) */
#define K_AS(T, x) T k_r_; memcpy(&k_r_, &(x), sizeof k_r_); return k_r_  /* same bits */
#define K_SPLAT(T, x) ((T)(x))
#define K_MAP1(T, f, a) (f(a))
#define K_MAP3(T, f, a, b, c) (f((a), (b), (c)))
"""

_VECTOR = """\
/* vector lanes: KERA_LANES batch rows per block, GCC vector types */
#define KERA_LANES {L}
typedef float kf32 __attribute__((vector_size({L4})));
typedef double kf64 __attribute__((vector_size({L8})));
typedef uint8_t ku8 __attribute__((vector_size({L})));
typedef uint32_t ku32 __attribute__((vector_size({L4})));
typedef int32_t ks32 __attribute__((vector_size({L4})));
typedef uint64_t ku64 __attribute__((vector_size({L8})));
typedef int64_t ks64 __attribute__((vector_size({L8})));
/* mask of a comparison: a vector comparison is already -1/0 per lane.  64-bit lanes span two
   hardware registers, and gcc scalarises comparisons wider than one, so they go by halves. */
#define K_C32(a, op, b) ((ku32)((a) op (b)))
typedef uint64_t ku64h __attribute__((vector_size({L4})));
#define K_LO(x) __builtin_shufflevector((x), (x), {LO})
#define K_HI(x) __builtin_shufflevector((x), (x), {HI})
#define K_C64(a, op, b) __builtin_shufflevector((ku64h)(K_LO(a) op K_LO(b)), \
    (ku64h)(K_HI(a) op K_HI(b)), {ALL})
#define K_CVT(x, T) __builtin_convertvector((x), T)
#define K_AS(T, x) return (T)(x)              /* a vector cast keeps the bits, in registers */
#define K_SPLAT(T, x) ((T){{0}} + (x))
#define K_MAP1(T, f, a) ({{ T k_r_; for (int k_l_ = 0; k_l_ < KERA_LANES; k_l_++) {{ \\
    k_r_[k_l_] = f((a)[k_l_]); }} k_r_; }})
#define K_MAP3(T, f, a, b, c) ({{ T k_r_; for (int k_l_ = 0; k_l_ < KERA_LANES; k_l_++) {{ \\
    k_r_[k_l_] = f((a)[k_l_], (b)[k_l_], (c)[k_l_]); }} k_r_; }})
"""

_FPENV = """\
/* The contract needs round-to-nearest-even and subnormals kept (no FTZ/DAZ). */
static int k_fpenv_ok(void)
{
#if defined(__GNUC__) && defined(__SSE__) && (defined(__x86_64__) || defined(__i386__))
    if (__builtin_ia32_stmxcsr() & 0xE040u) /* MXCSR: FTZ bit 15, rounding 13-14, DAZ bit 6 */
        return 0;
#elif defined(__GNUC__) && defined(__aarch64__)
    if (__builtin_aarch64_get_fpcr() & 0x01C00002u) /* FPCR: FZ bit 24, RMode 22-23, AH bit 1 */
        return 0;
#endif
    return fegetround() == FE_TONEAREST;
}
"""

# Transposing loads/stores between the public row-major arrays and lane tiles; bits move
# through memcpy (no type punning).  8-bit data is bool: loads normalise any non-zero byte to 1.
_IO_SCALAR = string.Template("""\
static inline void k_load$W(void *t, const void *src, size_t row, size_t cnt, size_t size)
{
    (void)cnt;
    memcpy(t, (const unsigned char *)src + row * size * $B, size * $B);$NORM
}

static inline void k_store$W(void *dst, const void *t, size_t row, size_t cnt, size_t size)
{
    (void)cnt;
    memcpy((unsigned char *)dst + row * size * $B, t, size * $B);
}
""")
_NORM_SCALAR = """
    for (size_t j = 0; j < size; j++)
        ((ku8 *)t)[j] = ((ku8 *)t)[j] != 0;"""

_IO_VECTOR = string.Template("""\
static inline void k_load$W(void *t, const void *src, size_t row, size_t cnt, size_t size)
{
    const unsigned char *s = (const unsigned char *)src;
    if (size == 1 && cnt == KERA_LANES) { /* a full block of scalars: one vector load */
        ku$W v;
        memcpy(&v, s + row * $B, sizeof v);$FAST
        memcpy(t, &v, sizeof v);
        return;
    }
    for (size_t j = 0; j < size; j++) {
        ku$W v = {0};
        for (size_t l = 0; l < cnt; l++) {
            uint${W}_t w;
            memcpy(&w, s + ((row + l) * size + j) * $B, $B);
            v[l] = $NORM;
        }
        memcpy((unsigned char *)t + j * sizeof v, &v, sizeof v);
    }
}

static inline void k_store$W(void *dst, const void *t, size_t row, size_t cnt, size_t size)
{
    unsigned char *d = (unsigned char *)dst;
    if (size == 1 && cnt == KERA_LANES) {
        memcpy(d + row * $B, t, sizeof(ku$W));
        return;
    }
    for (size_t j = 0; j < size; j++) {
        ku$W v;
        memcpy(&v, (const unsigned char *)t + j * sizeof v, sizeof v);
        for (size_t l = 0; l < cnt; l++) {
            uint${W}_t w = v[l];
            memcpy(d + ((row + l) * size + j) * $B, &w, $B);
        }
    }
}
""")

# ---------------------------------------------------------------------------- helper templates
# Each helper is `static inline`, written once for both lane flavours through the K_* macros.
# Fields: $d dtype, $V lane type, $U bit lanes, $S signed lanes, $C mask macro (see _fields).

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

_CMP = {Op.EQ: "==", Op.NE: "!=", Op.LT: "<", Op.LE: "<=", Op.GT: ">", Op.GE: ">="}
_ARITH = {Op.ADD: "+", Op.SUB: "-", Op.MUL: "*", Op.DIV: "/"}
_BITOP = {Op.AND: "&", Op.OR: "|", Op.XOR: "^"}

# (rounding op) -> the chosen magnitude; r = |x| rounded to nearest-even, t = trunc, c = ceil
_RINT_PICK = {
    Op.ROUND: "r",
    Op.TRUNC: "t",
    Op.FLOOR: "k_sel_$d(neg, c, t)",  # floor(-y) = -ceil(y)
    Op.CEIL: "k_sel_$d(neg, t, c)",  # ceil(-y) = -trunc(y)
}
_RINT_LINES = (  # (line, the names of _RINT_PICK's picks that need it; None: every op)
    ("    $U b = k_bits_$d(a), sg = b & $SIGN;", None),
    ("    $U neg = 0u - (b >> $TOP);", ("floor", "ceil")),
    ("    $V ax = k_float_$d(b ^ sg);", None),
    ("    $U small = $C(ax, <, K_SPLAT($V, $BIG));  /* |a| < 2^p: may have a fraction; not NaN */",
     None),
    ("    $V r = (ax + $BIG) - $BIG;              /* exact: rounds |a| to an integer, ties to even */",
     None),
    ("    $V t = k_sel_$d($C(r, >, ax), r - $ONE, r);", ("trunc", "floor", "ceil")),
    ("    $V c = k_sel_$d($C(r, <, ax), r + $ONE, r);", ("floor", "ceil")),
    ("    $V m = PICK;", None),
    ("    $U out = ((k_bits_$d(m) | sg) & small) | (b & ~small);  /* the result has a's sign */",
     None),
    ("    return k_float_$d(out);", None),
)  # fmt: skip


def _rint_body(op: Op) -> str:
    """The rounding helper's body with only the lines op uses (no unused variables)."""
    lines = [ln for ln, ops in _RINT_LINES if ops is None or op.value in ops]
    return "\n".join(lines).replace("PICK", _RINT_PICK[op])


_MINMAX = """\
    $U x = k_bits_$d(a), y = k_bits_$d(b);
    $U pick = $C(a, REL, b), eq = $C(a, ==, b), nan = $C(a, !=, a) | $C(b, !=, b);
    $U r = (x & pick) | (y & ~pick);
    r = (r & ~eq) | ((x ZERO y) & eq);      /* equal: only +-0 differ; -0 < +0 */
    return k_float_$d((r & ~nan) | ($CANON & nan));"""

_DIVREM_U = """\
    $U z = $C(b, ==, K_SPLAT($U, 0u));
    $U q = a / (b | (z & 1u));              /* divisor 1 where b == 0 */
    return RESULT;"""
_DIVREM_I = """\
    $U z = $C(b, ==, K_SPLAT($U, 0u));
    $U ovf = $C(a, ==, K_SPLAT($U, $SIGN)) & $C(b, ==, K_SPLAT($U, $ONES));
    $U bad = z | ovf, safe = (b & ~bad) | (bad & 1u);   /* x/0 and MIN/-1 divide by 1 */
    $U q = k_unsigned_$d(k_signed_$d(a) OP k_signed_$d(safe));
    return RESULT;"""


# ---------------------------------------------------------------------------- helpers
# One row per elementwise op: the body of its helper ``k_<op>_<dtype>`` for each kind of dtype
# ("f" float, "i" signed, "u" unsigned integer, "b" bool; "n" stands for both integer kinds),
# before the $-fields of ``_fields`` are substituted.  A kind an op has no row for is one the
# typing rules never let it meet.


def _ret(expr: str) -> str:
    return f"    return {expr};"


def _cmp(rel: str, signed: bool = False) -> str:
    a, b = ("k_signed_$d(a)", "k_signed_$d(b)") if signed else ("a", "b")
    return _ret(f"K_CVT($C({a}, {rel}, {b}) & 1u, ku8)")


def _minmax_float(op: Op) -> str:
    rel, zero = ("<", "|") if op is Op.MIN else (">", "&")
    return _MINMAX.replace("REL", rel).replace("ZERO", zero)


def _minmax_int(op: Op, signed: bool) -> str:
    rel = "<" if op is Op.MIN else ">"
    a, b = ("k_signed_$d(a)", "k_signed_$d(b)") if signed else ("a", "b")
    return f"    $U m = $C({a}, {rel}, {b});\n    return (a & m) | (b & ~m);"


def _divrem(op: Op, signed: bool) -> str:
    result = "q & ~z" if op is Op.DIV else "(q & ~z) | (a & z)"
    if signed:
        return _DIVREM_I.replace("OP", "/" if op is Op.DIV else "%").replace("RESULT", result)
    if op is Op.REM:
        return _DIVREM_U.replace("a / ", "a % ").replace("RESULT", result)
    return _DIVREM_U.replace("RESULT", result)


_SELECT = _ret("k_sel_$d(0u - K_CVT(c, $U), a, b)")

HELPER_BODY: dict[Op, dict[str, str]] = {
    **{op: {"f": _ret(f"a {sym} b"), "n": _ret(f"a {sym} b")} for op, sym in _ARITH.items()},
    Op.DIV: {"f": _ret("a / b"), "i": _divrem(Op.DIV, True), "u": _divrem(Op.DIV, False)},
    Op.REM: {"i": _divrem(Op.REM, True), "u": _divrem(Op.REM, False)},
    **{
        op: {"f": _cmp(rel), "i": _cmp(rel, signed=True), "u": _cmp(rel)}
        for op, rel in _CMP.items()
    },
    Op.EQ: {
        "f": _cmp("=="),
        "i": _cmp("==", True),
        "u": _cmp("=="),
        "b": _ret("(ku8)(a ^ b ^ 1u)"),
    },
    Op.NE: {"f": _cmp("!="), "i": _cmp("!=", True), "u": _cmp("!="), "b": _ret("(ku8)(a ^ b)")},
    **{
        op: {"f": _minmax_float(op), "i": _minmax_int(op, True), "u": _minmax_int(op, False)}
        for op in (Op.MIN, Op.MAX)
    },
    Op.NEG: {"f": _ret("k_float_$d(k_bits_$d(a) ^ $SIGN)"), "n": _ret("0u - a")},
    Op.ABS: {
        "f": _ret("k_float_$d(k_bits_$d(a) & $ABS)"),  # sign-bit ops keep NaN payloads
        "i": "    $U m = $C(k_signed_$d(a), <, K_SPLAT($S, 0));\n"
        "    return (a ^ m) - m;  /* wraps: |MIN| = MIN */",
        "u": _ret("a"),
    },
    Op.COPYSIGN: {"f": _ret("k_float_$d((k_bits_$d(a) & $ABS) | (k_bits_$d(b) & $SIGN))")},
    Op.SQRT: {"f": _ret("K_MAP1($V, $SQRT, a)")},
    Op.FMA: {"f": _ret("K_MAP3($V, $FMA, a, b, c)")},  # C99 fma: one rounding
    **{op: {"f": _rint_body(op)} for op in _RINT_PICK},
    Op.NOT: {"n": _ret("~a"), "b": _ret("(ku8)(a ^ 1u)")},
    **{op: {"n": _ret(f"a {sym} b"), "b": _ret(f"(ku8)(a {sym} b)")} for op, sym in _BITOP.items()},
    Op.SHL: {"n": _ret("a << (b & $W1)")},  # the amount is reduced mod the width
    Op.SHR: {
        # arithmetic shift from logical ones: ((a ^ g) >> s) ^ g
        "i": "    $U g = 0u - (a >> $TOP);\n    return ((a ^ g) >> (b & $W1)) ^ g;",
        "u": _ret("a >> (b & $W1)"),
    },
    Op.SELECT: {"f": _SELECT, "n": _SELECT, "b": _ret("k_sel_$d((ku8)(0u - c), a, b)")},
}


def _body(op: Op, kind: str) -> str:
    row = HELPER_BODY.get(op, {})
    body = row.get(kind) or (row.get("n") if kind in "iu" else None)
    if body is None:
        raise ValueError(f"{op} is not defined on kind {kind!r}")
    return body


def _op_helper(op: Op, dt: DType) -> str:
    """The C text of ``k_<op>_<dtype>``."""
    body = _body(op, _kind(dt))
    ret = "ku8" if op in COMPARE else "$V"
    if op is Op.SELECT:
        params = "ku8 c, $V a, $V b"
    else:
        n = 3 if op is Op.FMA else 1 if op in UNARY else 2
        params = ", ".join(f"$V {v}" for v in "abc"[:n])
    text = f"static inline {ret} k_{op.value}_$d({params})\n{{\n{body}\n}}\n"
    return string.Template(text).substitute(_fields(dt))


# ---------------------------------------------------------------------------- conversions


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
    lo = f"-0x1p{dst.bits - 1}{sfx}" if dst.is_signed else f"0.0{sfx}"
    hi = f"0x1p{dst.bits - (1 if dst.is_signed else 0)}{sfx}"  # max + 1, exact
    conv = (
        f"k_unsigned_{dst.value}(K_CVT(xs, ks{dst.bits}))"
        if dst.is_signed
        else f"K_CVT(xs, ku{dst.bits})"
    )
    sat = f"({_widen_mask('hi', src, dst)} & {_u(dst.bits, dst.max)})"
    if dst.is_signed:
        sat += f" | ({_widen_mask('lo', src, dst)} & {_u(dst.bits, 1 << (dst.bits - 1))})"
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
    fields = {f"s{k}": v for k, v in _fields(src).items()}
    fields |= {f"d{k}": v for k, v in _fields(dst).items()}
    text = f"static inline $dV {name}_${{sd}}_${{dd}}($sV x)\n{{\n{body}\n}}\n"
    return string.Template(text).substitute(fields)


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


# ---------------------------------------------------------------------------- emitted source


@dataclass(frozen=True)
class CSource:
    """The emitted translation unit: ``<name>.c`` includes ``<name>.h``."""

    name: str
    isa: str
    c: str
    h: str
    symbols: dict[str, str]  # entry-point symbol -> Kera function name

    def files(self) -> dict[str, str]:
        return {f"{self.name}.c": self.c, f"{self.name}.h": self.h}


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def c_ident(name: str) -> str:
    """``name`` as a C identifier fragment (invalid characters become ``_``)."""
    s = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return s if _IDENT.match(s) else f"_{s}"


def _named(functions: Iterable[Function] | Mapping[str, Function]) -> dict[str, Function]:
    items = (
        list(functions.items())
        if isinstance(functions, Mapping)
        else [(f.name, f) for f in functions]
    )
    out: dict[str, Function] = {}
    for name, fn in items:
        sym = f"kera_{c_ident(name)}"
        if sym in out:
            raise ValueError(f"two functions map to the C symbol {sym}")
        out[sym] = fn
    return out


def emit(
    functions: Iterable[Function] | Mapping[str, Function],
    isa: str = "scalar",
    name: str = "kera",
) -> CSource:
    """C source for ``functions`` (a mapping gives the entry names: ``kera_<key>``)."""
    if isa not in ISAS:
        raise ValueError(f"unknown ISA level '{isa}'; choose one of {', '.join(ISAS)}")
    fns = _named(functions)
    lanes = ISAS[isa].lanes
    bodies = [_Lowering(sym, fn, lanes).emit() for sym, fn in fns.items()]
    helpers: dict[str, str] = {}
    for _, needed in bodies:
        helpers |= needed
    guard = f"KERA_{c_ident(name).upper()}_H"
    header = _header(name, guard, fns)
    c = "\n".join(
        [
            f"/* {name}.c: generated by kera.backends.c (isa={isa}, lanes={lanes}). */",
            f'#include "{name}.h"',
            _HEAD,
            _prelude(lanes),
            *_ordered_helpers(helpers),
            *(text for text, _ in bodies),
        ]
    )
    return CSource(name, isa, c, header, {s: f.name for s, f in fns.items()})


def write(graph: Graph, output: str | None, isa: str = "scalar") -> list[Path]:
    """``kerac emit --target c``: every export of ``graph`` as ``<name>.c`` + ``<name>.h``.

    ``output``: a directory (created; files ``kera.c``, ``kera.h``), a path ending in ``.c``
    (the header goes beside it, same stem), or None (header then source on stdout).
    Returns the paths written."""
    if output is None:
        src = emit(graph.functions.values(), isa=isa)
        print(src.h + "\n" + src.c, end="")
        return []
    out = Path(output)
    if out.suffix == ".c":
        folder, name = out.parent, c_ident(out.stem)
    else:
        folder, name = out, "kera"
    folder.mkdir(parents=True, exist_ok=True)
    src = emit(graph.functions.values(), isa=isa, name=name)
    paths = []
    for filename, text in src.files().items():
        write_atomic(folder / filename, text)
        paths.append(folder / filename)
    return paths


def _prelude(lanes: int) -> str:
    if lanes == 1:
        io = "\n".join(
            _IO_SCALAR.substitute(W=w, B=w // 8, NORM=_NORM_SCALAR if w == 8 else "")
            for w in (8, 32, 64)
        )
        return "\n".join([_SCALAR, _FPENV, io])
    half = lanes // 2
    vec = _VECTOR.format(
        L=lanes,
        L4=4 * lanes,
        L8=8 * lanes,
        LO=", ".join(map(str, range(half))),
        HI=", ".join(map(str, range(half, lanes))),
        ALL=", ".join(map(str, range(lanes))),
    )
    io = "\n".join(
        _IO_VECTOR.substitute(
            W=w,
            B=w // 8,
            NORM="w != 0" if w == 8 else "w",
            FAST="\n        v = (ku8)(v != (ku8){0}) & 1u;" if w == 8 else "",
        )
        for w in (8, 32, 64)
    )
    return "\n".join([vec, _FPENV, io])


def _ordered_helpers(helpers: Mapping[str, str]) -> list[str]:
    """Base helpers first (dtype order), then op helpers by name: a stable, diffable order."""
    base = [k for k in helpers if k.startswith("base_")]
    rest = sorted(k for k in helpers if not k.startswith("base_"))
    order = sorted(base, key=lambda k: list(DType).index(DType(k[5:])))
    return [helpers[k] for k in order + rest]


def _signature(sym: str, fn: Function) -> str:
    args = ["size_t n"]
    for p in fn.params:
        args.append(f"const {_IO[p.dtype]} *p_{c_ident(_pname(p))}")
    for i, r in enumerate(fn.results):
        args.append(f"{_IO[r.dtype]} *out{i}")
    return f"int {sym}({', '.join(args)})"


def _pname(p: Node) -> str:
    name = p.attr("name")
    assert isinstance(name, str)
    return name


def _comment(text: str) -> str:
    """``text`` safe inside a C block comment: no ``*/``, and no backslash or line break (a
    backslash-newline splices lines before comments are seen, so ``*\\`` newline ``/`` would
    close it).  IR names are identifiers already (``kera.ir.check_name``); this is the second
    line of defence."""
    return re.sub(r"[\\\r\n]", " ", text).replace("*/", "* /")


def _header(name: str, guard: str, fns: Mapping[str, Function]) -> str:
    lines = [
        f"/* {name}.h: generated by kera.backends.c. Do not edit.",
        " *",
        " * int kera_<fn>(size_t n, const P *p_<param>..., R *out<i>...): n batch rows, C order,",
        " * row r of an argument of shape (d0, d1, ...) at element r * d0 * d1 * ...;",
        " * bool is uint8_t 0/1.  Returns KERA_OK, KERA_E_FPENV (FTZ/DAZ set or a rounding mode",
        " * other than to-nearest; nothing written) or KERA_E_NOMEM.  Build with",
        f" * {' '.join(PINNED_FLAGS[:6])} (never -ffast-math). */",
        f"#ifndef {guard}",
        f"#define {guard}",
        "#include <stddef.h>",
        "#include <stdint.h>",
        "#ifdef __cplusplus",
        'extern "C" {',
        "#endif",
        "#define KERA_OK 0",
        "#define KERA_E_FPENV 1",
        "#define KERA_E_NOMEM 2",
    ]
    for sym, fn in fns.items():
        ps = ", ".join(f"{_pname(p)}: {p.type}" for p in fn.params)
        rs = ", ".join(str(r.type) for r in fn.results)
        text = f"{fn.name}({ps}) -> ({rs}); fingerprint {fn.fingerprint[:16]}"
        lines.append(f"/* {_comment(text)} */")
        lines.append(_signature(sym, fn) + ";")
    lines += ["#ifdef __cplusplus", "}", "#endif", f"#endif /* {guard} */", ""]
    return "\n".join(lines)


# ---------------------------------------------------------------------------- lowering

_LOCAL_TILE_BYTES = 16 * 1024  # larger tiles (and everything past the stack budget) use an arena
_LOCAL_BUDGET = 256 * 1024
_ALIGN = 128  # the widest lane vector (16 x f64)


def _strides(shape: Shape) -> tuple[int, ...]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return tuple(reversed(out))


def _lin(terms: Sequence[tuple[str, int]], base: int = 0) -> str:
    """``base + sum(var * coef)`` as C, dropping zero terms and unit coefficients."""
    parts = [v if c == 1 else f"{v} * {c}" for v, c in terms if c != 0]
    if base or not parts:
        parts.append(str(base))
    return " + ".join(parts)


class _Arena:
    """First-fit allocation of large tiles in one aligned block, reusing dead tiles' space."""

    def __init__(self) -> None:
        self.free: list[tuple[int, int]] = []
        self.top = 0

    def alloc(self, size: int, reuse: bool = True) -> int:
        """An offset for size bytes; ``reuse=False`` never takes a dead tile's space (a hoisted
        tile is written before the row loop, so it is live while every per-row tile is)."""
        size = -(-size // _ALIGN) * _ALIGN
        for i, (off, n) in enumerate(self.free if reuse else ()):
            if n >= size:
                self.free[i : i + 1] = [(off + size, n - size)] if n > size else []
                return off
        off, self.top = self.top, self.top + size
        return off

    def release(self, off: int, size: int) -> None:
        size = -(-size // _ALIGN) * _ALIGN
        blocks = sorted([*self.free, (off, size)])
        merged: list[tuple[int, int]] = []
        for o, n in blocks:
            if merged and merged[-1][0] + merged[-1][1] == o:
                merged[-1] = (merged[-1][0], merged[-1][1] + n)
            else:
                merged.append((o, n))
        self.free = merged


class _Lowering:
    """One function -> its entry point; collects the helpers it uses."""

    def __init__(self, sym: str, fn: Function, lanes: int) -> None:
        self.sym, self.fn, self.lanes = sym, fn, lanes
        self.nodes = fn.nodes()
        self.helpers: dict[str, str] = {}
        self.names: dict[int, str] = {}  # id(node) -> tile name
        self.arena = _Arena()
        self.arena_slots: dict[str, tuple[int, int]] = {}  # tile -> (offset, bytes)
        self.local_bytes = 0
        self.root: dict[int, Node] = {}  # id(node) -> the node owning its tile (reshape aliases)
        self.dirty: set[int] = set()  # ids of tile owners whose NaNs may be non-canonical
        self.outer: list[str] = []  # declarations and hoisted constant tiles
        self.body: list[str] = []  # per block of rows

    # -- storage

    def _tile_bytes(self, dt: DType, size: int) -> int:
        return size * self.lanes * dt.nbytes

    def _declare(self, name: str, dt: DType, size: int, hoisted: bool) -> None:
        nbytes = self._tile_bytes(dt, size)
        local = nbytes <= _LOCAL_TILE_BYTES and self.local_bytes + nbytes <= _LOCAL_BUDGET
        lane = _LANE[dt]
        if local:
            self.local_bytes += nbytes
            (self.outer if hoisted else self.body).append(f"{lane} {name}[{size}];")
            return
        off = self.arena.alloc(nbytes, reuse=not hoisted)
        self.arena_slots[name] = (off, nbytes)
        self.outer.append(f"{lane} *{name} = ({lane} *)(k_arena + {off});")

    def _release(self, name: str) -> None:
        slot = self.arena_slots.get(name)
        if slot is not None and not name.startswith("c"):
            self.arena.release(*slot)

    def _use_dtype(self, dt: DType) -> None:
        key = f"base_{dt.value}"
        if key not in self.helpers:
            self.helpers[key] = string.Template(_BASE[_kind(dt)]).substitute(_fields(dt))

    def _helper(self, key: str, text: str, *dts: DType) -> str:
        for dt in dts:
            self._use_dtype(dt)
        self.helpers.setdefault(key, text)
        return key

    # -- driver

    def emit(self) -> tuple[str, dict[str, str]]:
        last = self._last_uses()
        for i, node in enumerate(self.nodes):
            self._lower(node, i)
            for dead in last.get(i, ()):
                self._release(self.names[id(dead)])
        for r in self.fn.results:
            self._clean(r)
        return self._assemble(), self.helpers

    def _last_uses(self) -> dict[int, list[Node]]:
        """index of the node after which each tile is dead (results live to the end)."""
        root = self.root
        for n in self.nodes:
            root[id(n)] = root[id(n.inputs[0])] if n.op is Op.RESHAPE else n
        end: dict[int, int] = {}
        for i, n in enumerate(self.nodes):
            for x in n.inputs:
                end[id(root[id(x)])] = i
        for r in self.fn.results:
            end[id(root[id(r)])] = len(self.nodes)
        out: dict[int, list[Node]] = {}
        for n in self.nodes:
            if root[id(n)] is n and id(n) in end:
                out.setdefault(end[id(n)], []).append(n)
        return out

    # -- lazy NaN canonicalisation
    # A float tile is *dirty* when its NaNs may be any NaN where the contract has the canonical
    # one (the raw result of add, sub, mul, div, sqrt, fma, rounding, float conversions and of
    # every reduction, dot and matmul).  Ops that only test NaN-ness (arithmetic, min/max,
    # comparisons, float->int) take dirty inputs as they are; ops that observe bits (neg, abs,
    # copysign, bitcast, select, a concat of a dirty and a clean tile, and the stores of
    # results) get their dirty inputs canonicalised in place first.  A canonical NaN is a valid
    # dirty value, so other readers of the tile are unaffected.

    def _clean(self, node: Node) -> None:
        key = id(self.root[id(node)])
        if key not in self.dirty:
            return
        self.dirty.discard(key)
        dt, tile, size = node.dtype, self.names[id(node)], prod(node.shape)
        self._use_dtype(dt)
        line = f"{tile}[j] = k_canon_{dt.value}({tile}[j]);"
        self.body += [f"for (size_t j = 0; j < {size}; j++)", f"    {line}"]

    def _track(self, node: Node) -> None:
        """Canonicalise the inputs node observes; record whether its own tile is dirty."""
        ins = [x for x in node.inputs if x.dtype.is_float]
        is_dirty = [id(self.root[id(x)]) in self.dirty for x in ins]
        if node.op in _OBSERVES or (node.op is Op.CONCAT and len(set(is_dirty)) > 1):
            for x in ins:
                self._clean(x)
            return
        raw = node.op in _DIRTIES and (node.op is not Op.CONVERT or bool(ins))  # not int->float
        if node.dtype.is_float and (raw or (node.op in MOVEMENT and any(is_dirty))):
            self.dirty.add(id(self.root[id(node)]))

    def _lower(self, node: Node, i: int) -> None:
        self._track(node)
        if node.op is Op.RESHAPE:  # same elements in the same order: an alias
            self.names[id(node)] = self.names[id(node.inputs[0])]
            return
        hoisted = node.op in (Op.CONST, Op.IOTA)
        name = f"{'c' if hoisted else 't'}{i}"
        self.names[id(node)] = name
        args = ", ".join(self.names[id(x)] for x in node.inputs)
        attrs = ", ".join(f"{k}={_attr_text(v)}" for k, v in node.attr_items if k != "value")
        what = f"{node.op.value}({', '.join(filter(None, [args, attrs]))})"
        target = self.outer if hoisted else self.body
        target.append(f"/* {_comment(f'{name} = {what} : {node.type}')} */")
        size = prod(node.shape)
        self._declare(name, node.dtype, size, hoisted)
        target += _LOWER[node.op](self, node, name, size)

    def _assemble(self) -> str:
        fn = self.fn
        out = [
            _signature(self.sym, fn),
            "{",
            "    if (!k_fpenv_ok())",
            "        return KERA_E_FPENV;",
        ]
        if self.arena.top:
            out += [
                f"    unsigned char *k_arena = aligned_alloc({_ALIGN}, {self.arena.top});",
                "    if (!k_arena)",
                "        return KERA_E_NOMEM;",
            ]
        out += [f"    {line}" for line in self.outer]
        out += [
            "    for (size_t k_row = 0; k_row < n; k_row += KERA_LANES) {",
            "        size_t k_cnt = n - k_row < KERA_LANES ? n - k_row : KERA_LANES;",
            "        (void)k_cnt;",
        ]
        out += [f"        {line}" for line in self.body]
        for i, r in enumerate(fn.results):
            w = 8 * r.dtype.nbytes
            tile = self.names[id(r)]
            out.append(f"        k_store{w}(out{i}, {tile}, k_row, k_cnt, {prod(r.shape)});")
        out.append("    }")
        if self.arena.top:
            out.append("    free(k_arena);")
        out += ["    return KERA_OK;", "}", ""]
        return "\n".join(out)

    # -- node lowerings (each returns C lines)

    def param(self, node: Node, name: str, size: int) -> list[str]:
        self._use_dtype(node.dtype)
        w = 8 * node.dtype.nbytes
        arg = f"p_{c_ident(_pname(node))}"
        return [f"k_load{w}({name}, {arg}, k_row, k_cnt, {size});"]

    def const(self, node: Node, name: str, size: int) -> list[str]:
        dt = node.dtype
        self._use_dtype(dt)
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
            f"for (size_t j = 0; j < {size}; j++)",
            f"    {name}[j] = {wrap}(K_SPLAT(ku{w}, {name}_bits[j]));",
        ]

    def iota(self, node: Node, name: str, size: int) -> list[str]:
        shape = node.shape
        axis = node.attr("axis")
        assert isinstance(axis, int)
        inner = prod(shape[axis + 1 :])
        cvt = self._convert_name(DType.I64, node.dtype)
        idx = (
            f"(uint64_t)(j / {inner} % {shape[axis]})"
            if inner > 1
            else f"(uint64_t)(j % {shape[axis]})"
        )
        return [
            f"for (size_t j = 0; j < {size}; j++)",
            f"    {name}[j] = {cvt}(K_SPLAT(ku64, {idx}));",
        ]

    def _convert_name(self, src: DType, dst: DType) -> str:
        key = f"k_convert_{src.value}_{dst.value}"
        return self._helper(key, _convert_helper(src, dst), src, dst)

    def elementwise(self, node: Node, name: str, size: int) -> list[str]:
        op, dt = node.op, node.inputs[-1].dtype
        if op is Op.CONVERT:
            fname = self._convert_name(dt, node.dtype)
        elif op is Op.BITCAST:
            key = f"k_bitcast_{dt.value}_{node.dtype.value}"
            fname = self._helper(key, _bitcast_helper(dt, node.dtype), dt, node.dtype)
        else:
            key = f"k_{op.value}_{dt.value}"
            fname = self._helper(key, _op_helper(op, dt), dt, DType.BOOL)
        j = "0" if size == 1 else "j"
        args = ", ".join(f"{self.names[id(x)]}[{j}]" for x in node.inputs)
        line = f"{name}[{j}] = {fname}({args});"
        return [line] if size == 1 else [f"for (size_t j = 0; j < {size}; j++)", f"    {line}"]

    def _tree(self, node: Node, scratch: str, n: int, step: Op) -> list[str]:
        """The contract's tree over scratch[0..n): x[i] = op(x[i], x[i+s]), s = P/2 ... 1."""
        if n == 1:
            return []
        dt = node.dtype
        fname = self._helper(f"k_{step.value}_{dt.value}", _op_helper(step, dt), dt, DType.BOOL)
        p = 1 << (n - 1).bit_length()
        return [
            f"for (size_t s = {p // 2}, m = {n}; s > 0; m = m < s ? m : s, s >>= 1)",
            "    for (size_t k = 0; k + s < m; k++)",
            f"        {scratch}[k] = {fname}({scratch}[k], {scratch}[k + s]);",
        ]

    def _scratch(self, node: Node, name: str, n: int) -> tuple[str, list[str]]:
        """A scratch tile of n elements for a tree; released right after the node."""
        sname = f"s{name[1:]}"
        before = len(self.body)
        self._declare(sname, node.dtype, n, hoisted=False)
        decl = self.body[before:]
        del self.body[before:]
        self._release(sname)
        return sname, decl

    def _finish(self, node: Node, scratch: str) -> str:
        return f"{scratch}[0]"  # a float result is NaN-dirty, canonicalised when observed

    def reduce(self, node: Node, name: str, size: int) -> list[str]:
        (x,) = node.inputs
        axis = node.attr("axis")
        assert isinstance(axis, int)
        n, inner = x.shape[axis], prod(x.shape[axis + 1 :])
        outer = prod(x.shape[:axis])
        src = self.names[id(x)]
        s, lines = self._scratch(node, name, n)
        gather = _lin(
            [("k_o", n * inner if outer > 1 else 0), ("k", inner), ("k_i", 1 if inner > 1 else 0)]
        )
        dst = _lin([("k_o", inner if outer > 1 else 0), ("k_i", 1 if inner > 1 else 0)])
        step = REDUCE_STEP[node.op]
        body = [
            f"for (size_t k = 0; k < {n}; k++)",
            f"    {s}[k] = {src}[{gather}];",
            *self._tree(node, s, n, step),
            f"{name}[{dst}] = {self._finish(node, s)};",
        ]
        return lines + _nest([("k_o", outer), ("k_i", inner)], body)

    def dot(self, node: Node, name: str, size: int) -> list[str]:
        a, b = node.inputs
        n = a.shape[0]
        s, lines = self._scratch(node, name, n)
        mul = self._helper(
            f"k_mul_{a.dtype.value}", _op_helper(Op.MUL, a.dtype), a.dtype, DType.BOOL
        )
        body = [
            f"for (size_t k = 0; k < {n}; k++)",
            f"    {s}[k] = {mul}({self.names[id(a)]}[k], {self.names[id(b)]}[k]);",
            *self._tree(node, s, n, Op.ADD),
            f"{name}[0] = {self._finish(node, s)};",
        ]
        return lines + body

    def matmul(self, node: Node, name: str, size: int) -> list[str]:
        a, b = node.inputs
        m, k, n = a.shape[0], a.shape[1], b.shape[1]
        s, lines = self._scratch(node, name, k)
        mul = self._helper(
            f"k_mul_{a.dtype.value}", _op_helper(Op.MUL, a.dtype), a.dtype, DType.BOOL
        )
        ai = _lin([("k_o", k if m > 1 else 0), ("k", 1)])
        bi = _lin([("k", n), ("k_i", 1 if n > 1 else 0)])
        di = _lin([("k_o", n if m > 1 else 0), ("k_i", 1 if n > 1 else 0)])
        body = [
            f"for (size_t k = 0; k < {k}; k++)",
            f"    {s}[k] = {mul}({self.names[id(a)]}[{ai}], {self.names[id(b)]}[{bi}]);",
            *self._tree(node, s, k, Op.ADD),
            f"{name}[{di}] = {self._finish(node, s)};",
        ]
        return lines + _nest([("k_o", m), ("k_i", n)], body)

    def broadcast(self, node: Node, name: str, size: int) -> list[str]:
        (x,) = node.inputs
        lead = len(node.shape) - len(x.shape)
        xs = _strides(x.shape)
        src = [0] * lead + [st if d != 1 else 0 for st, d in zip(xs, x.shape, strict=True)]
        return _copy(name, 0, _strides(node.shape), self.names[id(x)], 0, src, node.shape)

    def transpose(self, node: Node, name: str, size: int) -> list[str]:
        (x,) = node.inputs
        perm = node.attr("perm")
        assert isinstance(perm, tuple)
        xs = _strides(x.shape)
        src = [xs[p] for p in perm]
        return _copy(name, 0, _strides(node.shape), self.names[id(x)], 0, src, node.shape)

    def slice(self, node: Node, name: str, size: int) -> list[str]:
        (x,) = node.inputs
        start = node.attr("start")
        assert isinstance(start, tuple)
        xs = _strides(x.shape)
        off = sum(a * st for a, st in zip(start, xs, strict=True))
        return _copy(name, 0, _strides(node.shape), self.names[id(x)], off, xs, node.shape)

    def concat(self, node: Node, name: str, size: int) -> list[str]:
        a, b = node.inputs
        axis = node.attr("axis")
        assert isinstance(axis, int)
        ds = _strides(node.shape)
        boff = a.shape[axis] * ds[axis]
        first = _copy(name, 0, ds, self.names[id(a)], 0, _strides(a.shape), a.shape)
        second = _copy(name, boff, ds, self.names[id(b)], 0, _strides(b.shape), b.shape)
        return first + second


#: ops whose float result may hold non-canonical NaNs (all others give contract bits)
_DIRTIES = frozenset(
    {*_ARITH, Op.SQRT, Op.FMA, *_RINT_PICK, Op.CONVERT, Op.SUM, Op.PROD, Op.AMIN, Op.AMAX}
    | {Op.DOT, Op.MATMUL}
)
#: ops that read their float inputs' bits (the inputs must be canonical first)
_OBSERVES = frozenset({Op.NEG, Op.ABS, Op.COPYSIGN, Op.BITCAST, Op.SELECT})


def _attr_text(v: object) -> str:
    if isinstance(v, tuple):
        return "[" + ", ".join(map(str, v)) + "]"
    return str(v)


def _nest(loops: Sequence[tuple[str, int]], body: list[str]) -> list[str]:
    """Wrap body in `for` loops, skipping loops of one iteration (their index is unused)."""
    for var, n in reversed(loops):
        if n == 1:
            continue
        body = [
            f"for (size_t {var} = 0; {var} < {n}; {var}++) {{",
            *(f"    {x}" for x in body),
            "}",
        ]
    return body


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


_LOWER = {
    Op.PARAM: _Lowering.param,
    Op.CONST: _Lowering.const,
    Op.IOTA: _Lowering.iota,
    **{op: _Lowering.elementwise for op in Op if op in UNARY or op in COMPARE},
    **{
        op: _Lowering.elementwise
        for op in (
            *_ARITH,
            *_BITOP,
            Op.REM,
            Op.MIN,
            Op.MAX,
            Op.COPYSIGN,
            Op.SHL,
            Op.SHR,
            Op.FMA,
            Op.SELECT,
            Op.CONVERT,
            Op.BITCAST,
        )
    },
    **dict.fromkeys((Op.SUM, Op.PROD, Op.AMIN, Op.AMAX), _Lowering.reduce),
    Op.DOT: _Lowering.dot,
    Op.MATMUL: _Lowering.matmul,
    Op.BROADCAST: _Lowering.broadcast,
    Op.TRANSPOSE: _Lowering.transpose,
    Op.SLICE: _Lowering.slice,
    Op.CONCAT: _Lowering.concat,
}

#: every op this back end lowers: the rows of _LOWER, and reshape, an alias of its input
SUPPORTED = frozenset(op.value for op in (*_LOWER, Op.RESHAPE))
