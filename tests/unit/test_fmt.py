"""The formatter: golden layout, comments kept, idempotence, meaning and tokens preserved."""

from __future__ import annotations

from pathlib import Path

import pytest

from kera.frontend import compile_source, format_result, format_source
from kera.syntax.kinds import TRIVIA
from kera.syntax.kinds import SyntaxKind as K
from kera.syntax.lexer import lex

CORPUS = Path(__file__).parents[2] / "corpora"

MESSY = """\
// leading comment
export   fn saxpy(a:f32,x:f32[8],y : f32 [ 8 ])->f32[8]{
    let ax=a*x;            // a scalar broadcasts


    /* own line */ ax+-y
  // before the brace
}
fn sq(v: f32) -> f32 { v * v }   // trailing
// about stats

export fn stats(x: f32[4, 16]) -> (f32[4], f32[4]) {
    (sum(x, axis=1), amax(x,axis = 1),)
}
export fn long(a: f32,
        b: f32) -> f32 {
    let t = sq(a) + // why
      sq(b);
    t as f32 + { let q = 1.0; q }
}
/* end */"""

GOLDEN = """\
// leading comment
export fn saxpy(a: f32, x: f32[8], y: f32[8]) -> f32[8] {
    let ax = a * x; // a scalar broadcasts

    /* own line */ ax + -y
    // before the brace
}

fn sq(v: f32) -> f32 {
    v * v
} // trailing

// about stats

export fn stats(x: f32[4, 16]) -> (f32[4], f32[4]) {
    (sum(x, axis = 1), amax(x, axis = 1),)
}

export fn long(a: f32,
    b: f32) -> f32 {
    let t = sq(a) + // why
        sq(b);
    t as f32 + {
        let q = 1.0;
        q
    }
}
/* end */
"""


def significant(text: str) -> list[tuple[int, bytes]]:
    """Tokens and comments: everything but whitespace."""
    t = lex(text.encode())
    return [(k, t.text(i)) for i, k in enumerate(t.kinds) if k != K.WHITESPACE]


def test_golden_layout() -> None:
    assert format_source(MESSY) == GOLDEN


def test_idempotent_and_keeps_tokens_and_comments() -> None:
    once = format_source(MESSY)
    assert format_source(once) == once
    assert significant(once) == significant(MESSY)


def test_formatting_keeps_meaning() -> None:
    a, b = compile_source(MESSY), compile_source(format_source(MESSY))
    assert a.graph is not None and b.graph is not None
    assert a.graph.hash == b.graph.hash


def test_hand_laid_out_lists_keep_their_line_breaks() -> None:
    src = "export fn f(\n  a: f32,\n     b: f32,\n) -> f32 {\n    max(a,\n  b)\n}\n"
    assert format_source(src) == (
        "export fn f(\n    a: f32,\n    b: f32,\n) -> f32 {\n    max(a,\n        b)\n}\n"
    )


@pytest.mark.parametrize(
    ("src", "out"),
    [
        ("fn f()->f32{-x*!y}", "fn f() -> f32 {\n    -x * !y\n}\n"),
        ("fn f()->f32{a- -b}", "fn f() -> f32 {\n    a - -b\n}\n"),
        ("fn f()->f32{t . 0}", "fn f() -> f32 {\n    t.0\n}\n"),
        ("fn f()->f32{g ( x , y )}", "fn f() -> f32 {\n    g(x, y)\n}\n"),
        ("fn f()->f32{x<<1>>2}", "fn f() -> f32 {\n    x << 1 >> 2\n}\n"),
        ("\n\n\nfn f()->f32{1}\n\n\n", "fn f() -> f32 {\n    1\n}\n"),
        ("", ""),
        ("// only a comment", "// only a comment\n"),
    ],
)
def test_spacing(src: str, out: str) -> None:
    assert format_source(src) == out


def test_source_with_syntax_errors_is_left_alone() -> None:
    bad = "fn f( -> {"
    text, diags = format_result(bad)
    assert text == bad
    assert diags and {d.code for d in diags} == {"E0010"}
    assert format_source("fn f() -> f32 { $ }") == "fn f() -> f32 { $ }"


def test_corpus_formats_idempotently() -> None:
    paths = sorted(CORPUS.rglob("*.kera"))
    if not paths:
        pytest.skip("no .kera files in corpora/")
    for path in paths:
        text = path.read_text(encoding="utf-8")
        once = format_source(text)
        assert format_source(once) == once, path
        assert [t for t in significant(once) if t[0] not in TRIVIA] == [
            t for t in significant(text) if t[0] not in TRIVIA
        ]
