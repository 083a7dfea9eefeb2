"""The C back end's translation unit: Kera functions -> one self-contained C11 file plus a header.

``emit(functions, isa)`` returns a :class:`CSource` (``.c`` and ``.h`` text); ``parts`` returns
the same ``.c`` as its :class:`Parts` (banner, prelude, helpers, functions; the golden tests pin
each where it varies); ``write`` is ``kerac emit --target c``.  Nothing here runs a compiler;
``keracheck.runners.gcc`` does that with :data:`PINNED_FLAGS` + ``ISAS[isa].flags``.  This
module holds the file's structure: the ISA levels, the prelude (includes, contract guards, lane
types, the FP-environment check, the loads and stores), the helpers in a stable order, the
header, and :class:`_Entry`, the loop that turns one function into its entry point: tiles and
their storage, lazy NaN canonicalisation, the row loop.  What each node becomes is its row in ``kera.backends.c.lower.LOWER``; the
calling convention is ``kera.backends.c.abi``.

Execution model.  The batch is processed in blocks of ``L`` rows (``L`` = ``ISAS[isa].lanes``).
Every node value is a *tile*: one lane vector per element of the node's shape, lane ``l`` holding
row ``block + l``.  So every op is computed lane-wise across independent rows, and the contract's
per-row order (reduction trees, dot/matmul sums) is kept exactly while all of it is SIMD.  With
``L == 1`` (``isa="scalar"``) the lane types are plain C scalars and the file is strict ISO C11;
with ``L > 1`` they are GCC vector types (``vector_size``), which gcc lowers to SSE2/AVX2/AVX-512/
NEON according to the ``-march`` in ``ISAS[isa].flags``.  The C text differs between ISA levels
only in ``KERA_LANES`` and the lane typedefs.

NaN results are canonicalised (0x7FC00000 / 0x7FF8000000000000) lazily: arithmetic leaves a
tile *NaN-dirty*, and it is canonicalised in place before anything observes its bits (results,
and the ops whose ``LOWER`` row says ``Nan.OBSERVES``, or a ``Nan.MOVES`` op mixing dirty and
clean tiles; see ``_Entry._track``).

Loops.  A ``loop`` is one C ``for`` over its body inside the block of rows (every row runs the
same trips), the body lowered by the same per-node loop as a function, in a :class:`_Scope` of
its own (``_Entry._body``).  Each carried value has two buffers reached through a *current*
and a *next* pointer, swapped after every iteration, so the body never reads a value it has
overwritten; carried values are canonicalised at every iteration boundary, so they are never
NaN-dirty.

Calls.  A ``call`` is its callee's nodes lowered in place, once per call group, in a
:class:`_Scope` of their own whose parameters are the operands' tiles (``_Entry._emit_call``):
straight-line code, no C function and no loop.  Operands are canonicalised before and results
after, so a call's values are never NaN-dirty.  docs/c-backend.md ("Loops", "Calls",
"Dynamic indexing") has the details.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from math import prod
from pathlib import Path

from kera.backends.c.abi import E_FPENV, E_NOMEM, OK, c_ident, entry_points, param_name, signature
from kera.backends.c.lower import (
    LANE,
    LOWER,
    Alias,
    Helper,
    Nan,
    Region,
    Structural,
    base_helper,
    elementwise,
    is_tile,
    tile_declaration,
)
from kera.dtypes import DType
from kera.files import write_atomic
from kera.ir import Function, Graph, Node, loop_body, loop_group, topo_order
from kera.ops import REGION_OPS, Op

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
/* Compile time, not semantics: helpers over whole tiles (k_<op>_<type>_n, lane-by-lane loads
   and stores) are functions of their own, built once per unit, and loops that move elements
   stay loops (not unrolled into every node's code).  Neither changes what is computed. */
#if defined(__GNUC__) && !defined(__clang__)
#define K_NOINLINE __attribute__((noinline, noclone, unused))
#define K_ROLLED _Pragma("GCC unroll 1")
#elif defined(__GNUC__)
#define K_NOINLINE __attribute__((noinline, unused))
#define K_ROLLED
#else
#define K_NOINLINE
#define K_ROLLED
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
static K_NOINLINE void k_load${W}_n(void *t, const void *src, size_t row, size_t cnt, size_t size)
{
    const unsigned char *s = (const unsigned char *)src;
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

static inline void k_load$W(void *t, const void *src, size_t row, size_t cnt, size_t size)
{
    if (size == 1 && cnt == KERA_LANES) { /* a full block of scalars: one vector load */
        ku$W v;
        memcpy(&v, (const unsigned char *)src + row * $B, sizeof v);$FAST
        memcpy(t, &v, sizeof v);
        return;
    }
    k_load${W}_n(t, src, row, cnt, size); /* element by element, lane by lane */
}

static K_NOINLINE void k_store${W}_n(void *dst, const void *t, size_t row, size_t cnt, size_t size)
{
    unsigned char *d = (unsigned char *)dst;
    for (size_t j = 0; j < size; j++) {
        ku$W v;
        memcpy(&v, (const unsigned char *)t + j * sizeof v, sizeof v);
        for (size_t l = 0; l < cnt; l++) {
            uint${W}_t w = v[l];
            memcpy(d + ((row + l) * size + j) * $B, &w, $B);
        }
    }
}

static inline void k_store$W(void *dst, const void *t, size_t row, size_t cnt, size_t size)
{
    if (size == 1 && cnt == KERA_LANES) {
        memcpy((unsigned char *)dst + row * $B, t, sizeof(ku$W));
        return;
    }
    k_store${W}_n(dst, t, row, cnt, size);
}
""")


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


@dataclass(frozen=True)
class Parts:
    """The pieces ``<name>.c`` is made of, in emitted order: :meth:`text` *is* the file.

    Exposed so that tests can pin each piece where it varies (the golden tests pin the prelude
    once per ISA level, each helper once, the functions per case) instead of re-parsing C text.
    """

    banner: str  # the file's comment and its #include of <name>.h (the name and ISA level)
    prelude: str  # includes, contract guards, lane types, macros, FP-env check, loads/stores
    helpers: dict[str, str]  # helper key (``base_f32``, ``k_add_f32`` ...) -> text, in order
    functions: dict[str, str]  # entry-point symbol -> its definition (and any static code)

    def text(self) -> str:
        return "\n".join(
            [self.banner, self.prelude, *self.helpers.values(), *self.functions.values()]
        )


def parts(
    functions: Iterable[Function] | Mapping[str, Function],
    isa: str = "scalar",
    name: str = "kera",
) -> Parts:
    """The translation unit of ``emit(functions, isa, name)``, as its :class:`Parts`."""
    return _parts(entry_points(functions), _isa(isa), name)


def emit(
    functions: Iterable[Function] | Mapping[str, Function],
    isa: str = "scalar",
    name: str = "kera",
    shared: Mapping[str, str] | None = None,
) -> CSource:
    """C source for ``functions`` (a mapping gives the entry names: ``kera_<key>``).

    ``shared``: the tile helpers a tile library defines (``kera.backends.c.tiles``, key ->
    text): each one the unit needs *with that very text* is declared instead of defined, and
    the unit must be linked with the library.  None (the default): self-contained."""
    level = _isa(isa)
    fns = entry_points(functions)
    c = _parts(fns, level, name, shared=shared).text()
    header = _header(name, f"KERA_{c_ident(name).upper()}_H", fns)
    return CSource(name, isa, c, header, {s: f.name for s, f in fns.items()})


#: an entry point's definition (and any static code) and the helpers it needs, by key
Body = tuple[str, dict[str, str]]


def bodies(
    functions: Iterable[Function] | Mapping[str, Function], isa: str = "scalar"
) -> dict[str, Body]:
    """Each entry point of ``functions`` emitted once, by symbol: :func:`assemble` makes
    translation units of any subsets of them (a caller that splits a batch over several
    compilers sizes the parts by these texts without emitting anything twice)."""
    level = _isa(isa)
    return {sym: _Entry(sym, fn, level.lanes).emit() for sym, fn in entry_points(functions).items()}


def assemble(
    functions: Mapping[str, Function],
    made: Mapping[str, Body],
    isa: str = "scalar",
    name: str = "kera",
    shared: Mapping[str, str] | None = None,
) -> CSource:
    """``emit(functions, isa, name, shared)`` from the :func:`bodies` of the same entry points
    (symbol -> function as ``entry_points`` names them): the same text, byte for byte."""
    level = _isa(isa)
    fns = entry_points(functions)
    c = _parts(fns, level, name, {sym: made[sym] for sym in fns}, shared).text()
    header = _header(name, f"KERA_{c_ident(name).upper()}_H", fns)
    return CSource(name, isa, c, header, {s: f.name for s, f in fns.items()})


def _isa(isa: str) -> Isa:
    if isa not in ISAS:
        raise ValueError(f"unknown ISA level '{isa}'; choose one of {', '.join(ISAS)}")
    return ISAS[isa]


def _parts(
    fns: Mapping[str, Function],
    isa: Isa,
    name: str,
    made: Mapping[str, Body] | None = None,
    shared: Mapping[str, str] | None = None,
) -> Parts:
    lanes = isa.lanes
    bodies = made if made is not None else {s: _Entry(s, f, lanes).emit() for s, f in fns.items()}
    helpers: dict[str, str] = {}
    for _, needed in bodies.values():
        helpers |= needed
    if shared:  # linked with a tile library: its helpers declared, where the text is the same
        helpers = {
            k: tile_declaration(t) if is_tile(t) and shared.get(k) == t else t
            for k, t in helpers.items()
        }
    return Parts(
        banner="\n".join(
            [
                f"/* {name}.c: generated by kera.backends.c (isa={isa.name}, lanes={lanes}). */",
                f'#include "{name}.h"',
            ]
        ),
        prelude="\n".join([_HEAD, _prelude(lanes)]),
        helpers=_ordered_helpers(helpers),
        functions={sym: text for sym, (text, _) in bodies.items()},
    )


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


def _ordered_helpers(helpers: Mapping[str, str]) -> dict[str, str]:
    """Dtype helpers first (dtype order), then op helpers by name: a stable, diffable order."""
    base = [k for k in helpers if k.startswith("base_")]
    rest = sorted(k for k in helpers if not k.startswith("base_"))
    order = sorted(base, key=lambda k: list(DType).index(DType(k[5:])))
    return {k: helpers[k] for k in order + rest}


def comment(text: str) -> str:
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
        f"#define KERA_OK {OK}",
        f"#define KERA_E_FPENV {E_FPENV}",
        f"#define KERA_E_NOMEM {E_NOMEM}",
    ]
    for sym, fn in fns.items():
        ps = ", ".join(f"{param_name(p)}: {p.type}" for p in fn.params)
        rs = ", ".join(str(r.type) for r in fn.results)
        text = f"{fn.name}({ps}) -> ({rs}); fingerprint {fn.fingerprint[:16]}"
        lines.append(f"/* {comment(text)} */")
        lines.append(signature(sym, fn) + ";")
    lines += ["#ifdef __cplusplus", "}", "#endif", f"#endif /* {guard} */", ""]
    return "\n".join(lines)


# ---------------------------------------------------------------------------- entry points

_LOCAL_TILE_BYTES = 16 * 1024  # larger tiles (and everything past the stack budget) use an arena
_LOCAL_BUDGET = 256 * 1024
_ALIGN = 128  # the widest lane vector (16 x f64)


class Arena:
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


@dataclass
class _Scope:
    """What one region (the function, a loop's body or a callee) knows while it is lowered: its
    lines and the tiles, owners and NaN state of its nodes, keyed by ``id`` — nodes are
    interned and may appear in several regions (and a callee in several calls), each with its
    own tile."""

    prefix: str  # of its tile names: "" for the function, "<m>_" in region m (loop or call)
    body: list[str]  # its lines: per block of rows, per iteration, or a callee's: the caller's
    names: dict[int, str] = field(default_factory=dict)  # id(node) -> tile name
    root: dict[int, Node] = field(default_factory=dict)  # id(node) -> owner of its tile
    dirty: set[int] = field(default_factory=set)  # ids of owners whose NaNs may be raw
    uniform: set[int] = field(default_factory=set)  # ids of nodes equal in every lane
    bound: dict[int, str] = field(default_factory=dict)  # id(region parameter) -> existing tile
    into: dict[int, str] = field(default_factory=dict)  # id(node) -> the buffer it is built in
    groups: dict[tuple[object, ...], list[str]] = field(default_factory=dict)  # group -> tiles
    read: set[tuple[tuple[object, ...], int]] = field(default_factory=set)  # (group, result)
    same: set[tuple[tuple[object, ...], int]] = field(default_factory=set)  # uniform call results


class _Entry:
    """One function -> its entry point (the ``Cx`` its LOWER rows see); collects the helpers
    it uses."""

    def __init__(self, sym: str, fn: Function, lanes: int) -> None:
        self.sym, self.fn, self.lanes = sym, fn, lanes
        self.nodes = fn.nodes()
        self.helpers: dict[str, str] = {}
        self.arena = Arena()
        self.arena_slots: dict[str, tuple[int, int]] = {}  # tile -> (offset, bytes)
        self.local_bytes = 0
        self.outer: list[str] = []  # declarations and hoisted constant tiles
        self.top = _Scope("", [])  # the function's region: its lines run per block of rows
        self.s = self.top  # the region being lowered
        self.regions = 0  # loops and calls emitted so far: region m's tiles are named after m

    # -- storage

    def _declare(self, name: str, dt: DType, size: int, hoisted: bool) -> None:
        nbytes = size * self.lanes * dt.nbytes
        local = nbytes <= _LOCAL_TILE_BYTES and self.local_bytes + nbytes <= _LOCAL_BUDGET
        lane = LANE[dt]
        if local:
            self.local_bytes += nbytes
            (self.outer if hoisted else self.s.body).append(f"{lane} {name}[{size}];")
            return
        off = self.arena.alloc(nbytes, reuse=not hoisted)
        self.arena_slots[name] = (off, nbytes)
        self.outer.append(f"{lane} *{name} = ({lane} *)(k_arena + {off});")

    def _release(self, name: str) -> None:
        slot = self.arena_slots.get(name)
        if slot is not None and not name.startswith("c"):
            self.arena.release(*slot)

    # -- what the rows of LOWER use (lower.Cx)

    def tile(self, node: Node) -> str:
        return self.s.names[id(node)]

    def use_dtype(self, dt: DType) -> None:
        key = f"base_{dt.value}"
        if key not in self.helpers:
            self.helpers[key] = base_helper(dt)

    def helper(self, key: str, text: str, *dts: DType) -> str:
        for dt in dts:
            self.use_dtype(dt)
        self.helpers.setdefault(key, text)
        return key

    def scratch(self, node: Node, name: str, n: int) -> tuple[str, list[str]]:
        sname = f"s{name[1:]}"
        before = len(self.s.body)
        self._declare(sname, node.dtype, n, hoisted=False)
        decl = self.s.body[before:]
        del self.s.body[before:]
        self._release(sname)
        return sname, decl

    def uniform(self, node: Node) -> bool:
        return id(node) in self.s.uniform

    # -- the loop

    def emit(self) -> tuple[str, dict[str, str]]:
        self._region(self.nodes, self.fn.results)
        for r in self.fn.results:
            self._clean(r)
        return self._assemble(), self.helpers

    def _region(self, nodes: Sequence[Node], results: Sequence[Node]) -> None:
        """Lower a region's nodes in order into the current scope, each arena tile released
        after its last use (results live to the end of the region)."""
        last = self._last_uses(nodes, results)
        self.s.read = {(loop_group(n), n.int_attr("result")) for n in nodes if n.op in REGION_OPS}
        for i, node in enumerate(nodes):
            self._lower(node, i)
            for dead in last.get(i, ()):
                self._release(self.s.names[id(dead)])

    def _roots(self, nodes: Sequence[Node]) -> dict[int, Node]:
        root = self.s.root
        for n in nodes:
            root[id(n)] = root[id(n.inputs[0])] if isinstance(LOWER[n.op], Alias) else n
        return root

    def _last_uses(self, nodes: Sequence[Node], results: Sequence[Node]) -> dict[int, list[Node]]:
        """index of the node after which each tile is dead (results live to the end); a body's
        parameters are tiles of the enclosing region, never released here."""
        root = self._roots(nodes)
        end: dict[int, int] = {}
        for i, n in enumerate(nodes):
            for x in n.inputs:
                end[id(root[id(x)])] = i
        for r in results:
            end[id(root[id(r)])] = len(nodes)
        out: dict[int, list[Node]] = {}
        for n in nodes:
            if root[id(n)] is n and id(n) in end and id(n) not in self.s.bound:
                out.setdefault(end[id(n)], []).append(n)
        return out

    # -- lazy NaN canonicalisation (lower.Nan): a dirty tile is canonicalised in place before
    # its bits are observed; its other readers are unaffected (a canonical NaN is still a valid
    # dirty value).

    def _clean(self, node: Node) -> None:
        s = self.s
        key = id(s.root[id(node)])
        if key not in s.dirty:
            return
        s.dirty.discard(key)
        dt, tile, size = node.dtype, s.names[id(node)], prod(node.shape)
        self.use_dtype(dt)
        if size == 1:
            s.body.append(f"{tile}[0] = k_canon_{dt.value}({tile}[0]);")
            return
        each = elementwise(self, f"k_canon_{dt.value}", dt, [dt])
        s.body.append(f"{each}({size}, {tile}, {tile});")

    def _track(self, node: Node) -> None:
        """Canonicalise the inputs node observes; record whether its own tile is dirty."""
        s = self.s
        nan = LOWER[node.op].nan
        ins = [x for x in node.inputs if x.dtype.is_float]
        is_dirty = [id(s.root[id(x)]) in s.dirty for x in ins]
        if nan is Nan.OBSERVES or (nan is Nan.MOVES and len(set(is_dirty)) > 1):
            for x in ins:
                self._clean(x)
            return
        # a float computed from floats (not int->float), or moved from a dirty tile
        raw = (nan is Nan.DIRTY and bool(ins)) or (nan is Nan.MOVES and any(is_dirty))
        if node.dtype.is_float and raw:
            s.dirty.add(id(s.root[id(node)]))

    def _lower(self, node: Node, i: int) -> None:
        s = self.s
        if id(node) in s.bound:  # a body's or callee's parameter: a tile of the enclosing region
            s.names[id(node)] = s.bound[id(node)]
            return
        if node.op in _UNIFORM_LEAVES or (
            node.inputs and all(self.uniform(x) for x in node.inputs)
        ):
            s.uniform.add(id(node))
        self._track(node)
        rule = LOWER[node.op]
        if isinstance(rule, Alias):
            s.names[id(node)] = s.names[id(node.inputs[0])]
            return
        if isinstance(rule, Region):
            self._grouped(node)
            return
        hoisted = isinstance(rule, Structural) and rule.hoisted
        name = s.into.get(id(node)) or f"{'c' if hoisted else 't'}{s.prefix}{i}"
        s.names[id(node)] = name
        args = ", ".join(s.names[id(x)] for x in node.inputs)
        attrs = ", ".join(f"{k}={_attr_text(v)}" for k, v in node.attr_items if k != "value")
        what = f"{node.op.value}({', '.join(filter(None, [args, attrs]))})"
        target = self.outer if hoisted else s.body
        target.append(f"/* {comment(f'{name} = {what} : {node.type}')} */")
        size = prod(node.shape)
        if id(node) not in s.into:
            self._declare(name, node.dtype, size, hoisted)
        target += rule.lower(self, node, name, size)

    # -- regions (loop, call): emitted once per group, at the first of its sibling nodes

    def _grouped(self, node: Node) -> None:
        """Name node's tile: its group's result (a loop's carried value after the last
        iteration, a callee's result), the group emitted by its op's ``_REGIONS`` entry when
        its first sibling is met; a call result the same in every lane is uniform."""
        s, key, k = self.s, loop_group(node), node.int_attr("result")
        if key not in s.groups:
            s.groups[key] = _REGIONS[node.op](self, node)
        s.names[id(node)] = s.groups[key][k]
        if (key, k) in s.same:
            s.uniform.add(id(node))

    # -- loops: a C for loop over the body region, the carried values double-buffered

    def _emit_loop(self, node: Node) -> list[str]:
        """Loop m.  Carried value j has two buffers, ``L<m>a<j>`` and ``L<m>b<j>``, reached
        through the pointers ``L<m>c<j>`` (this iteration's value, which the body reads) and
        ``L<m>n<j>`` (the next one, which it writes), swapped after every iteration: the body
        never reads a value an earlier statement of the same iteration overwrote.  The
        initial values are copied into the a buffers; after ``trips`` swaps the values are in
        the a buffers (even trips) or the b buffers (odd), which name the loop's results."""
        m, self.regions = self.regions, self.regions + 1
        body, s = loop_body(node), self.s
        k, lo, trips = len(body.results), node.int_attr("lo"), node.int_attr("trips")
        ops = [s.names[id(x)] for x in node.inputs]
        head = f"loop {m}: for i in {lo}..{lo + trips} with ({', '.join(ops[:k])})"
        caps = f", captured ({', '.join(ops[k:])})" if ops[k:] else ""
        s.body.append(f"/* {comment(head + caps)} */")
        cur, nxt = [f"L{m}c{j}" for j in range(k)], [f"L{m}n{j}" for j in range(k)]
        for j, r in enumerate(body.results):
            a, b, size, lane = f"L{m}a{j}", f"L{m}b{j}", prod(r.shape), LANE[r.dtype]
            self._declare(a, r.dtype, size, hoisted=False)
            self._declare(b, r.dtype, size, hoisted=False)
            s.body += [*_move(a, ops[j], size), f"{lane} *{cur[j]} = {a}, *{nxt[j]} = {b};"]
        lines = self._body(node, m, cur, nxt)
        s.body += [f"for (size_t k_i{m} = 0; k_i{m} < {trips}; k_i{m}++) {{"]
        s.body += [f"    {x}" for x in lines] + ["}"]
        final = [f"L{m}{'ab'[trips % 2]}{j}" for j in range(k)]
        for j in range(k):  # the other buffer is dead now, and so is a value no node reads
            self._release(f"L{m}{'ba'[trips % 2]}{j}")
            if (loop_group(node), j) not in s.read:
                self._release(final[j])
        return final

    def _body(self, node: Node, m: int, cur: list[str], nxt: list[str]) -> list[str]:
        """One iteration of loop m: the index tile, the body's nodes as a region of their own,
        its results canonicalised and in the next buffers, the buffers swapped."""
        body, outer = loop_body(node), self.s
        self.s = inner = self._scope(node, m, cur)
        nodes = body.nodes()
        root = self._roots(nodes)
        for j, r in enumerate(body.results):  # computed straight into the next buffer
            owner = root[id(r)]
            if _buildable(owner) and id(owner) not in inner.bound and id(owner) not in inner.into:
                inner.into[id(owner)] = nxt[j]
        if any(n is body.params[0] for n in nodes):  # the index i = lo + iteration, as i32
            self._declare(f"L{m}i", DType.I32, 1, hoisted=False)
            value = f"(uint32_t)(INT64_C({node.int_attr('lo')}) + (int64_t)k_i{m})"
            inner.body.append(f"L{m}i[0] = K_SPLAT(ku32, {value});")
        self._region(nodes, body.results)
        self._next(body.results, cur, nxt)
        self.s = outer
        return inner.body

    def _scope(self, node: Node, m: int, cur: list[str]) -> _Scope:
        """Loop m's body scope: its parameters bound to the index tile, the current buffers
        and the captured tiles; which of them are the same in every lane."""
        body, outer = loop_body(node), self.s
        k = len(body.results)
        inner = _Scope(f"{m}_", [])
        tiles = [f"L{m}i", *cur, *(outer.names[id(x)] for x in node.inputs[k:])]
        inner.bound = {id(p): t for p, t in zip(body.params, tiles, strict=True)}
        every = all(id(x) in outer.uniform for x in node.inputs)  # then so is every value
        inner.uniform = {id(body.params[0])} | {
            id(p)
            for j, (p, x) in enumerate(zip(body.params[1:], node.inputs, strict=True))
            if every or (j >= k and id(x) in outer.uniform)  # a uniform capture
        }
        return inner

    def _next(self, results: Sequence[Node], cur: list[str], nxt: list[str]) -> None:
        """The end of an iteration: results canonicalised (carried values are never dirty),
        those not built in their next buffer copied there (after every result is complete),
        then each pair of buffers swapped."""
        s = self.s
        for r in results:
            self._clean(r)
        for j, r in enumerate(results):
            if s.into.get(id(s.root[id(r)])) != nxt[j]:
                s.body += _move(nxt[j], s.names[id(r)], prod(r.shape))
        for j, r in enumerate(results):
            swap = f"{LANE[r.dtype]} *k_t = {cur[j]}; {cur[j]} = {nxt[j]}; {nxt[j]} = k_t;"
            s.body.append(f"{{ {swap} }}")

    # -- calls: the callee's region lowered in place, its parameters bound to the operands

    def _emit_call(self, node: Node) -> list[str]:
        """Call m: the callee's nodes lowered once, in place (straight-line code, no loop and
        no copies in), in a scope of their own (tiles ``t<m>_<i>``, constants ``c<m>_<i>``)
        whose parameters are the operands' tiles.  Only what the results some node reads
        depend on is lowered (a call has no effects; the rest would be dead code).  The
        operands were canonicalised before (the ``Region`` row observes them) and the results
        are canonicalised at the end, so a call's values are never NaN-dirty.  Returns the
        tile of each result ("" for one no node reads)."""
        m, self.regions = self.regions, self.regions + 1
        body, outer, key = loop_body(node), self.s, loop_group(node)
        ops = [outer.names[id(x)] for x in node.inputs]
        head = f"call {m}: {body.name}({', '.join(ops)})"
        outer.body.append(f"/* {comment(head)} */")
        self.s = inner = _Scope(f"{m}_", outer.body)  # its lines go where the call stands
        inner.bound = {id(p): t for p, t in zip(body.params, ops, strict=True)}
        inner.uniform = {
            id(p) for p, x in zip(body.params, node.inputs, strict=True) if id(x) in outer.uniform
        }
        read = [r if (key, k) in outer.read else None for k, r in enumerate(body.results)]
        results = [r for r in read if r is not None]
        self._region(topo_order(results), results)
        for r in results:
            self._clean(r)
        self.s = outer
        tiles = self._returned(key, m, inner, read)
        outer.body.append(f"/* call {m} returns ({', '.join(t or '-' for t in tiles)}) */")
        return tiles

    def _returned(
        self, key: tuple[object, ...], m: int, inner: _Scope, read: list[Node | None]
    ) -> list[str]:
        """The tiles of call m's results, each owned by its call node alone so that it dies
        with it: a result that is not a tile of the callee's own (a parameter, which is an
        operand's tile, or a tile already returned) is copied into ``t<m>_r<k>``.  Which
        results are the same in every lane is recorded in the scope (``same``)."""
        s = self.s
        tiles: list[str] = []
        owned: set[int] = set()
        for k, r in enumerate(read):
            if r is None:
                tiles.append("")
                continue
            owner, tile, size = id(inner.root[id(r)]), inner.names[id(r)], prod(r.shape)
            if owner in inner.bound or owner in owned:
                tile = f"t{m}_r{k}"
                self._declare(tile, r.dtype, size, hoisted=False)
                s.body += _move(tile, inner.names[id(r)], size)
            owned.add(owner)
            if id(r) in inner.uniform:
                s.same.add((key, k))
            tiles.append(tile)
        return tiles

    def _assemble(self) -> str:
        fn = self.fn
        out = [
            signature(self.sym, fn),
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
        out += [f"        {line}" for line in self.top.body]
        for i, r in enumerate(fn.results):
            w = 8 * r.dtype.nbytes
            out.append(
                f"        k_store{w}(out{i}, {self.tile(r)}, k_row, k_cnt, {prod(r.shape)});"
            )
        out.append("    }")
        if self.arena.top:
            out.append("    free(k_arena);")
        out += ["    return KERA_OK;", "}", ""]
        return "\n".join(out)


#: leaves whose every lane holds the same value
_UNIFORM_LEAVES = frozenset({Op.CONST, Op.IOTA})

#: how each op that holds a region is emitted (the tiles of its results; ``lower.Region``)
_REGIONS: dict[Op, Callable[[_Entry, Node], list[str]]] = {
    Op.LOOP: _Entry._emit_loop,  # a C for loop, the carried values double-buffered
    Op.CALL: _Entry._emit_call,  # the callee in place, once per call group
}


def _buildable(node: Node) -> bool:
    """Whether a body's result can be built straight in its next buffer: a node with code of
    its own, computed per iteration (not a parameter, alias, hoisted leaf or nested loop)."""
    rule = LOWER[node.op]
    if isinstance(rule, Helper):
        return True
    return isinstance(rule, Structural) and not rule.hoisted and node.op is not Op.PARAM


def _move(dst: str, src: str, size: int) -> list[str]:
    """dst[j] = src[j] for every element (whole lane vectors: bits unchanged)."""
    if size == 1:
        return [f"{dst}[0] = {src}[0];"]
    return ["K_ROLLED", f"for (size_t j = 0; j < {size}; j++)", f"    {dst}[j] = {src}[j];"]


def _attr_text(v: object) -> str:
    if isinstance(v, tuple):
        return "[" + ", ".join(map(str, v)) + "]"
    return str(v)
