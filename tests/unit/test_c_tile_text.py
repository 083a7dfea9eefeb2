"""The C back end's tile library (issue 20, ``kera.backends.c.tiles``): every tile helper the
emitter can write at an ISA level, defined once with external linkage; a unit built against it
declares exactly the helpers whose text is the library's, and nothing else of its text
changes; without ``shared`` (``c.emit``, ``kerac emit``, ``artifacts()``) the unit is
self-contained and byte-identical.  No compiler runs here
(``tests/toolchain/test_c_tile_library.py`` builds and runs both)."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

from kera import frontend
from kera.backends import c
from kera.backends.c import tiles
from kera.backends.c.emit import parts
from kera.backends.c.lower import is_tile, tile_declaration, tile_definition
from kera.dtypes import DType
from kera.ir import Function, FunctionBuilder

CORPUS = Path(__file__).parents[2] / "corpora"


@cache
def _corpus() -> dict[str, Function]:
    fns: dict[str, Function] = {}
    for path in sorted(CORPUS.rglob("*.kera")):
        graph = frontend.compile_source(path.read_text(encoding="utf-8"), str(path)).graph
        assert graph is not None
        fns |= {f"f{fn.fingerprint[:20]}": fn for fn in graph.functions.values()}
    return fns


@pytest.mark.parametrize("isa", sorted(c.ISAS))
def test_the_library_has_every_tile_helper_the_corpus_uses(isa: str) -> None:
    lib = tiles.library(isa)
    used = {k: t for k, t in parts(_corpus(), isa).helpers.items() if is_tile(t)}
    assert used and all(lib.helpers.get(k) == t for k, t in used.items()), sorted(
        k for k, t in used.items() if lib.helpers.get(k) != t
    )
    # so the corpus's unit against it defines no tile helper at all
    unit = c.emit(_corpus(), isa=isa, shared=lib.helpers).c
    assert re.search(r"static K_NOINLINE void k_(?!load|store)", unit) is None


@pytest.mark.parametrize("isa", sorted(c.ISAS))
def test_the_library_defines_each_helper_once_with_hidden_linkage(isa: str) -> None:
    lib = tiles.library(isa)
    assert len(lib.helpers) > 150  # elementwise ops x dtypes, converts, bitcasts, canon
    for key, text in lib.helpers.items():
        assert lib.c.count(tile_definition(text)) == 1, key
        assert f"static K_NOINLINE void {key}(" not in lib.c
    assert {"k_canon_f32_n", "k_convert_f64_u32_n", "k_select_bool_n", "k_lt_i64_n"} <= set(
        lib.helpers
    )
    decl = tile_declaration(lib.helpers["k_add_f32_n"])
    assert decl.startswith('extern __attribute__((visibility("hidden"))) void k_add_f32_n(')


@pytest.mark.parametrize("isa", sorted(c.ISAS))
def test_a_unit_against_the_library_only_declares_its_helpers(isa: str) -> None:
    fns = dict(list(_corpus().items())[:40])
    alone = c.emit(fns, isa=isa)
    assert c.emit(fns, isa=isa, shared=None).files() == alone.files()
    assert c.emit(fns, isa=isa, shared={}).files() == alone.files()
    lib = tiles.library(isa)
    linked = c.emit(fns, isa=isa, shared=lib.helpers)
    want = alone.c
    for text in parts(fns, isa).helpers.values():
        if is_tile(text):
            want = want.replace(text, tile_declaration(text))
    assert linked.c == want and linked.h == alone.h and linked.symbols == alone.symbols
    made = c.bodies(fns, isa)
    assert c.assemble(fns, made, isa=isa, shared=lib.helpers).files() == linked.files()


def test_a_helper_the_library_defines_differently_stays_in_the_unit() -> None:
    b = FunctionBuilder("f")
    x = b.param("x", DType.F32, [4])
    fns = {"f": b.build(b.op("sqrt", b.op("add", x, x)))}
    lib = tiles.library("avx2")
    other = dict(lib.helpers)
    other["k_add_f32_n"] = other["k_add_f32_n"].replace("r[j] =", "r[j] = ")  # another text
    unit = c.emit(fns, isa="avx2", shared=other).c
    assert "static K_NOINLINE void k_add_f32_n(" in unit  # defined, as without a library
    assert tile_declaration(lib.helpers["k_sqrt_f32_n"]) in unit
    assert re.search(r"static K_NOINLINE void k_sqrt_f32_n\(", unit) is None
