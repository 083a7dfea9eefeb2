"""The tile helpers as a library of their own: one C file per ISA level that a build compiles
once and links, instead of compiling the helpers again in every translation unit (issue 20).

An elementwise node over more than one element calls ``k_<op>_<type>_n`` (``lower.elementwise``:
``static``, ``K_NOINLINE``, a loop over the tile's elements), and so does in-place NaN
canonicalisation (``k_canon_<type>_n``).  Compiling them was ~25% of gcc's time on a fuzzed
batch, paid again by every unit.  :func:`library` is the C text of *every* such helper the back
end can emit at one ISA level (every elementwise op, convert and bitcast on every dtype its
typing rule accepts, found by emitting sample functions through the emitter itself), each
defined with external, hidden linkage (``lower.tile_definition``) after the same prelude and
per-element helpers a unit has.  A unit built against it is ``emit(..., shared=helpers)``: each
helper whose text is exactly the library's is declared (``lower.tile_declaration``) instead of
defined; anything else stays in the unit.

Nothing of what is computed changes: the helpers' text is the same, built with the same flags,
and the call sites are the same; only the object file that holds a helper's code moves.
``emit``, ``kerac emit`` and ``artifacts()`` never use it (their output is self-contained);
``keracheck.targets.cpu`` builds and caches the library (``keracheck.runners.gcc``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from kera.backends.c.emit import _HEAD, _isa, _ordered_helpers, _prelude, bodies
from kera.backends.c.lower import LOWER, is_tile, tile_definition
from kera.dtypes import DType
from kera.ir import Function, FunctionBuilder, Node
from kera.ops import ARITY, ELEMENTWISE, Op, TypeRuleError

#: the file name of the library's source (its object is ``tiles.o``)
NAME = "tiles"


@dataclass(frozen=True)
class Library:
    """The tile library of one ISA level: its C text and the helpers it defines (key -> the
    text a unit would define it with, what ``emit(..., shared=...)`` compares)."""

    isa: str
    c: str
    helpers: dict[str, str]


def samples() -> list[Function]:
    """One function per dtype applying every elementwise op the typing rules accept to tiles of
    two elements (so each node calls its ``_n`` helper), converting and bitcasting to every
    dtype they allow, and returning it all (float results are canonicalised: ``k_canon``)."""
    out = []
    for dt in DType:
        b = FunctionBuilder(f"tiles_{dt.value}")
        x, y, z = (b.param(n, dt, [2]) for n in "xyz")
        cond = b.param("c", DType.BOOL, [2])
        nodes: list[Node] = []
        for op in sorted(ELEMENTWISE & LOWER.keys(), key=lambda o: o.value):
            calls: list[tuple[tuple[Node, ...], dict[str, DType]]]
            if op in (Op.CONVERT, Op.BITCAST):
                calls = [((x,), {"to": to}) for to in DType]
            else:
                calls = [((cond, y, z) if op is Op.SELECT else (x, y, z)[: ARITY[op]], {})]
            for ins, attrs in calls:
                try:
                    nodes.append(b.op(op, *ins, **attrs))
                except TypeRuleError:
                    continue  # the typing rules never let the op meet these operands
        out.append(b.build(*nodes))
    return out


@cache
def library(isa: str) -> Library:
    """The tile library of ``isa`` (compile it with the flags of the units that link it)."""
    level = _isa(isa)
    helpers: dict[str, str] = {}
    for _, needed in bodies({f.name: f for f in samples()}, isa).values():
        helpers |= needed
    ordered = _ordered_helpers(helpers)
    text = "\n".join(
        [
            f"/* {NAME}.c: the tile helpers of kera.backends.c (isa={isa}, lanes={level.lanes}),",
            "   compiled once and linked by translation units that declare them. */",
            _HEAD,
            _prelude(level.lanes),
            *(tile_definition(t) if is_tile(t) else t for t in ordered.values()),
        ]
    )
    return Library(isa, text, {k: t for k, t in ordered.items() if is_tile(t)})
