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


# ------------------------------------------------------- destructuring, if, indexing

CONTROL_MESSY = """\
export fn f(x: f32[4, 8], c: bool) -> f32[8] {
    let ( a,(b , _ ) )=(x [ 0 ], (x[ -1 ,2 .. ], x[ .. , .. -2]));
    let y = if c {a} else if !c { x[1] }
    else { let q = a; q };
    if c {y} else {a}
}
"""

CONTROL_GOLDEN = """\
export fn f(x: f32[4, 8], c: bool) -> f32[8] {
    let (a, (b, _)) = (x[0], (x[-1, 2..], x[.., ..-2]));
    let y = if c {
        a
    } else if !c {
        x[1]
    } else {
        let q = a;
        q
    };
    if c { y } else { a }
}
"""


def test_control_golden_layout_is_idempotent_and_keeps_meaning() -> None:
    once = format_source(CONTROL_MESSY)
    assert once == CONTROL_GOLDEN
    assert format_source(once) == once
    assert significant(once) == significant(CONTROL_MESSY)
    a, b = compile_source(CONTROL_MESSY), compile_source(once)
    assert a.graph is not None and b.graph is not None
    assert a.graph.hash == b.graph.hash


@pytest.mark.parametrize(
    ("src", "out"),
    [
        ("fn f()->f32{x [ 1 .. 3 , 0 ]}", "fn f() -> f32 {\n    x[1..3, 0]\n}\n"),
        ("fn f()->f32{x[..,..]}", "fn f() -> f32 {\n    x[.., ..]\n}\n"),
        ("fn f()->f32{x[ - 1 ..]}", "fn f() -> f32 {\n    x[-1..]\n}\n"),
        ("fn f()->f32{t.0 [0]}", "fn f() -> f32 {\n    t.0[0]\n}\n"),
        ("fn f()->f32{let(a,b,)=t;a}", "fn f() -> f32 {\n    let (a, b,) = t;\n    a\n}\n"),
        # an if written on one line stays on one line; any line break inside opens it up
        ("fn f()->f32{if c{a}else if d{b}else{e}}", "fn f() -> f32 {\n    if c { a } else if d { b } else { e }\n}\n"),
        ("fn f()->f32{if c{a}\nelse{b}}", "fn f() -> f32 {\n    if c {\n        a\n    } else {\n        b\n    }\n}\n"),
        ("fn f()->f32{if c\n{a} else\n{b}}", "fn f() -> f32 {\n    if c {\n        a\n    } else {\n        b\n    }\n}\n"),
        # an else-if chain is laid out as one: a break anywhere in it opens every branch
        ("fn f()->f32{if c{\na}else if d{b}else{e}}", "fn f() -> f32 {\n    if c {\n        a\n    } else if d {\n        b\n    } else {\n        e\n    }\n}\n"),
        ("fn f()->f32{1.0+if c{a}else{b}}", "fn f() -> f32 {\n    1.0 + if c { a } else { b }\n}\n"),
    ],
)  # fmt: skip
def test_control_spacing(src: str, out: str) -> None:
    assert format_source(src) == out
    assert format_source(out) == out


def test_an_if_with_a_comment_or_a_let_is_laid_out_as_blocks() -> None:
    assert format_source("fn f()->f32{if c{a /* x */}else{b}}") == (
        "fn f() -> f32 {\n    if c {\n        a /* x */\n    } else {\n        b\n    }\n}\n"
    )
    assert format_source("fn f()->f32{if c{let q=a;q}else{b}}") == (
        "fn f() -> f32 {\n    if c {\n        let q = a;\n        q\n    } else {\n        b\n    }\n}\n"
    )


def test_long_multiline_else_if_chains_format_in_linear_time() -> None:
    src = "fn f(c: bool) -> f32 {\n" + "if c { 1.0 }\nelse " * 5_000 + "{ 2.0 } }"
    once = format_source(src)
    assert once.count("} else if c {") == 4_999
    assert format_source(once) == once
