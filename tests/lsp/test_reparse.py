"""Incremental reparsing and checking equal a full parse and check, after every edit.

``kera.syntax.reparse`` reparses only the ``fn`` an edit falls in and reuses the other items'
green nodes; ``kera.lsp.analysis`` checks only the functions whose unit changed.  After each
edit of a Hypothesis-drawn edit sequence applied to a corpus file, the tree bytes, the debug
tree and the syntax diagnostics must equal those of parsing the new text from scratch, and the
diagnostics of the analysis must equal ``kera.frontend.compile_source``'s.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kera import frontend
from kera.lsp.analysis import Analysis
from kera.syntax.reparse import Edit, full, reparse
from kera.syntax.tree import GreenNode, debug_tree, tree_bytes

CORPUS = sorted((Path(__file__).parents[2] / "corpora").glob("*.kera"))
SOURCES = [p.read_bytes() for p in CORPUS]

#: what an edit inserts: characters as typed, code that opens or closes items, blocks and
#: comments, a `return` (whose parse depends on the whole file) and non-ASCII text
FRAGMENTS = [
    b"x", b"1", b" ", b"\n", b";", b"+", b"*", b"(", b")", b"{", b"}", b"[", b"]", b",",
    b"let t = x;", b"1.5f64", b"//", b"/*", b"*/", b"\xc3\xa9", b"\xf0\x9f\x98\x80",
    b"fn ", b"export ", b"fn g() -> f32 { 1.0 }", b"return ", b"@", b"sum(", b"axis = 0",
]  # fmt: skip


@st.composite
def edits(draw: st.DrawFn, size: int) -> Edit:
    """An edit of a text of ``size`` bytes: mostly a keystroke (one fragment typed or one
    byte deleted), sometimes a larger deletion or replacement."""
    start = draw(st.integers(0, size))
    length = draw(st.sampled_from([0, 0, 0, 1, 1, 3, 12]))
    text = draw(st.sampled_from([b"", *FRAGMENTS]))
    return Edit(start, min(size, start + length), text)


def check_equal(parsed_tree: GreenNode, data: bytes, diags: tuple[object, ...]) -> None:
    whole = full(data)
    assert tree_bytes(parsed_tree) == data
    assert debug_tree(parsed_tree) == debug_tree(whole.tree)
    assert diags == whole.diagnostics


@settings(max_examples=15, deadline=None)
@given(st.data())
def test_incremental_parse_and_check_equal_full(data: st.DataObject) -> None:
    edit_sequences(data)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.data())
def test_incremental_parse_and_check_equal_full_long(data: st.DataObject) -> None:
    edit_sequences(data)


def edit_sequences(data: st.DataObject) -> None:
    source = data.draw(st.sampled_from(SOURCES), label="corpus file")
    parsed = full(source)
    analysis = Analysis(source)
    for _ in range(data.draw(st.integers(1, 12), label="edits")):
        edit = data.draw(edits(len(parsed.data)))
        parsed = reparse(parsed, edit)
        check_equal(parsed.tree, parsed.data, parsed.diagnostics)
        analysis = Analysis.edited(analysis, [edit])
        assert analysis.data == parsed.data
        assert analysis.diagnostics == frontend.compile_source(parsed.data).diagnostics


def test_typing_inside_a_function_reuses_every_other_item() -> None:
    """Keystrokes inside a body reparse that item only: the others are the same objects."""
    source = (Path(__file__).parents[2] / "corpora" / "programs.kera").read_bytes()
    parsed = full(source)
    at = source.index(b"\n    let ", len(source) // 2) + 9  # inside a body, after `let `
    for i, ch in enumerate(b"tmp_"):
        before = parsed.tree.children
        parsed = reparse(parsed, Edit(at + i, at + i, bytes([ch])))
        assert parsed.incremental
        changed = [
            i
            for i, (a, b) in enumerate(zip(before, parsed.tree.children, strict=True))
            if a is not b
        ]
        assert len(changed) == 1
        check_equal(parsed.tree, parsed.data, parsed.diagnostics)


def test_boundary_edits_fall_back_to_a_full_parse() -> None:
    source = b"fn a() -> f32 { 1.0 }\n\nfn b() -> f32 { 2.0 }\n"
    parsed = full(source)
    cases = [
        Edit(0, 0, b"export "),  # before the item's first byte
        Edit(source.index(b"}"), source.index(b"}") + 1, b""),  # its closing brace
        Edit(5, 5, b"/*"),  # a comment that runs past the item's end
        Edit(15, 15, b"} fn c() -> f32 {"),  # one item becomes two
        Edit(16, 16, b"return "),  # depends on every item of the file
    ]
    for edit in cases:
        after = reparse(parsed, edit)
        assert not after.incremental, edit
        check_equal(after.tree, after.data, after.diagnostics)


def test_unit_checks_follow_calls() -> None:
    """Editing a helper re-checks its callers: an error in the helper's result type shows
    at the call site of the caller, as in a full check."""
    source = b"fn h(v: f32) -> f32 { v }\n\nexport fn e(x: f32) -> f32 { h(x) + 1.0 }\n"
    analysis = Analysis(source)
    assert analysis.diagnostics == []
    at = source.index(b"-> f32 { v }") + 3
    analysis = Analysis.edited(analysis, [Edit(at, at + 3, b"i32")])
    assert analysis.parsed.incremental
    assert analysis.diagnostics == frontend.compile_source(analysis.data).diagnostics
    assert {d.code for d in analysis.diagnostics} >= {"E0303"}


def test_recursion_is_checked_the_whole_file_way() -> None:
    """E0105 names the cycle from where the expansion entered it, so a file whose call graph
    has a cycle is checked whole, and says the same as kerac check through every edit."""
    source = (
        b"fn a(v: f32) -> f32 { b(v) }\n\nfn b(v: f32) -> f32 { a(v) + 1.0 }\n\n"
        b"export fn e(x: f32) -> f32 { b(x) }\n"
    )
    analysis = Analysis(source)
    assert analysis.whole_file
    assert analysis.diagnostics == frontend.compile_source(source).diagnostics
    assert {d.code for d in analysis.diagnostics} == {"E0105"}
    at = source.index(b"+ 1.0") + 2
    for i, ch in enumerate(b"2.5 * "):
        analysis = Analysis.edited(analysis, [Edit(at + i, at + i, bytes([ch]))])
        assert analysis.diagnostics == frontend.compile_source(analysis.data).diagnostics
