"""The lossless lexer: token kinds and spans, literals, trivia, and error tokens."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kera.syntax.kinds import SyntaxKind as K
from kera.syntax.lexer import Tokens, _lex_each, lex


def kinds(src: bytes, trivia: bool = False) -> list[tuple[str, bytes]]:
    t = lex(src)
    keep = {K.WHITESPACE, K.LINE_COMMENT, K.BLOCK_COMMENT} if not trivia else set()
    return [(K(k).name, t.text(i)) for i, k in enumerate(t.kinds) if k not in keep]


def joined(t: Tokens) -> bytes:
    return b"".join(t.text(i) for i in range(len(t)))


SAMPLE = b"""// saxpy
export fn saxpy(a: f32, x: f32[8]) -> f32[8] {
    let ax = a * x; /* block */
    ax + -1.5e-3f32 >> 2 != 0x_ffu32 && !t.0.1
}
"""


def test_round_trip_and_spans() -> None:
    t = lex(SAMPLE)
    assert joined(t) == SAMPLE
    assert t.starts[0] == 0 and t.starts[-1] == len(SAMPLE)
    assert all(a < b for a, b in zip(t.starts, t.starts[1:], strict=False))
    assert not t.diagnostics


def test_token_kinds() -> None:
    assert kinds(b"export fn let as true false inf nan f32 _x9") == [
        ("EXPORT_KW", b"export"),
        ("FN_KW", b"fn"),
        ("LET_KW", b"let"),
        ("AS_KW", b"as"),
        ("TRUE_KW", b"true"),
        ("FALSE_KW", b"false"),
        ("FLOAT_NUMBER", b"inf"),
        ("FLOAT_NUMBER", b"nan"),
        ("IDENT", b"f32"),
        ("IDENT", b"_x9"),
    ]
    ops = b"-> << >> == != <= >= && || ( ) { } [ ] , ; : . = + - * / % & | ^ ~ ! < >"
    assert [name for name, _ in kinds(ops)] == [
        "ARROW", "SHL", "SHR", "EQ2", "NEQ", "LTEQ", "GTEQ", "AMP2", "PIPE2",
        "L_PAREN", "R_PAREN", "L_BRACE", "R_BRACE", "L_BRACK", "R_BRACK", "COMMA", "SEMI",
        "COLON", "DOT", "EQ", "PLUS", "MINUS", "STAR", "SLASH", "PERCENT", "AMP", "PIPE",
        "CARET", "TILDE", "BANG", "LT", "GT",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (b"0", "INT_NUMBER"),
        (b"1_000_000", "INT_NUMBER"),
        (b"3u32", "INT_NUMBER"),
        (b"0xFFu64", "INT_NUMBER"),
        (b"0x1f32", "INT_NUMBER"),  # hex digits, not an f32 suffix
        (b"0b1010i64", "INT_NUMBER"),
        (b"3f32", "FLOAT_NUMBER"),  # an integer with a float suffix is a float literal
        (b"1.5", "FLOAT_NUMBER"),
        (b"1e-3", "FLOAT_NUMBER"),
        (b"2.5E+10f64", "FLOAT_NUMBER"),
    ],
)
def test_number_literals(text: bytes, kind: str) -> None:
    t = lex(text)
    assert [(K(k).name, t.text(i)) for i, k in enumerate(t.kinds)] == [(kind, text)]
    assert not t.diagnostics


def test_field_numbers_after_a_dot_are_integers() -> None:
    assert kinds(b"t.0.1") == [
        ("IDENT", b"t"),
        ("DOT", b"."),
        ("INT_NUMBER", b"0"),
        ("DOT", b"."),
        ("INT_NUMBER", b"1"),
    ]


def test_trivia_is_kept() -> None:
    assert kinds(b" a /* b */ // c\n", trivia=True) == [
        ("WHITESPACE", b" "),
        ("IDENT", b"a"),
        ("WHITESPACE", b" "),
        ("BLOCK_COMMENT", b"/* b */"),
        ("WHITESPACE", b" "),
        ("LINE_COMMENT", b"// c"),
        ("WHITESPACE", b"\n"),
    ]


def test_utf8_in_comments_is_fine() -> None:
    src = "// größer ≥ 1 🚀\n/* ∑ */".encode()
    t = lex(src)
    assert not t.diagnostics
    assert joined(t) == src


@pytest.mark.parametrize(
    ("src", "code", "message", "span"),
    [
        (b"a $ b", "E0001", "unexpected character '$'", (2, 3)),
        ("x é".encode(), "E0001", "unexpected character 'é'", (2, 4)),
        (b"x \xff\xfe y", "E0001", "invalid UTF-8 bytes 0xff 0xfe", (2, 4)),
        (b"// bad \xc3(\n", "E0001", "invalid UTF-8 in a comment", (7, 8)),
        (b"a /* never closed", "E0002", "unterminated block comment", (2, 4)),
        (b"0x", "E0003", "malformed number literal '0x'", (0, 2)),
        (b"1e5.5", "E0003", "malformed number literal '1e5.5'", (0, 5)),
        (
            b"3u8",
            "E0004",
            "invalid suffix 'u8' on number literal (expected i32, i64, u32, u64, f32 or f64)",
            (0, 3),
        ),
        (b"1.5i32", "E0004", "a float literal cannot take the suffix 'i32'", (0, 6)),
        (b"0b1f32", "E0004", "a hex or binary literal cannot be a float", (0, 6)),
    ],
)
def test_lexer_errors(src: bytes, code: str, message: str, span: tuple[int, int]) -> None:
    t = lex(src)
    assert joined(t) == src
    assert [(d.code, d.message, (d.start, d.end)) for d in t.diagnostics] == [(code, message, span)]


def test_lexing_goes_on_after_errors() -> None:
    t = lex(b"a $$$ b \x00 c")
    assert [d.code for d in t.diagnostics] == ["E0001", "E0001"]
    assert [name for name, _ in kinds(b"a $$$ b \x00 c")] == [
        "IDENT", "ERROR_TOKEN", "IDENT", "ERROR_TOKEN", "IDENT",
    ]  # fmt: skip


def test_every_byte_lexes() -> None:
    src = bytes(range(256)) * 2
    t = lex(src)
    assert joined(t) == src
    assert t.diagnostics


def test_ranges_lex_as_dotdot_between_numbers() -> None:
    assert kinds(b"1..5 2.. ..-1 x[..] if else") == [
        ("INT_NUMBER", b"1"), ("DOTDOT", b".."), ("INT_NUMBER", b"5"),
        ("INT_NUMBER", b"2"), ("DOTDOT", b".."),
        ("DOTDOT", b".."), ("MINUS", b"-"), ("INT_NUMBER", b"1"),
        ("IDENT", b"x"), ("L_BRACK", b"["), ("DOTDOT", b".."), ("R_BRACK", b"]"),
        ("IF_KW", b"if"), ("ELSE_KW", b"else"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("src", "want"),
    [
        (b"t.0..2", ["IDENT", "DOT", "INT_NUMBER", "DOTDOT", "INT_NUMBER"]),  # field, then a range
        (b"1.5..2.5", ["FLOAT_NUMBER", "DOTDOT", "FLOAT_NUMBER"]),
        (b"0..6u32", ["INT_NUMBER", "DOTDOT", "INT_NUMBER"]),  # a number, not a field, after ..
        (b"1.", ["INT_NUMBER", "DOT"]),  # still not a float
        (b"...", ["DOTDOT", "DOT"]),
    ],
)
def test_dotdot_next_to_numbers_and_fields(src: bytes, want: list[str]) -> None:
    t = lex(src)
    assert [name for name, _ in kinds(src)] == want
    assert joined(t) == src and not t.diagnostics


def test_suffix_after_dotdot_is_checked_like_any_number() -> None:
    t = lex(b"0..6u8")
    assert [d.code for d in t.diagnostics] == ["E0004"]


def _same_tokens(data: bytes) -> None:
    fast, each = lex(data), _lex_each(data)
    assert (fast.kinds, fast.starts, fast.diagnostics) == (
        each.kinds,
        each.starts,
        each.diagnostics,
    )
    assert [type(k) for k in fast.kinds] == [type(k) for k in each.kinds]


@pytest.mark.parametrize(
    "data",
    [
        SAMPLE,
        b"",
        b"t.0.1 + t.12 ..3 2..6u32 1..5 0x1f32 1e+5e-6 1.5f64 inf nan",
        b"x" * 300,  # an identifier over the name limit: reported, so lexed token by token
        b"9" * 50 + b" t." + b"9" * 50,
        b"/* unterminated",
        b"let a = 3u8; // bad suffix",
        "é + \xff".encode("utf-8", "surrogateescape"),
        b"a @ b # c",
    ],
)
def test_the_fast_path_gives_the_tokens_of_the_token_by_token_lexer(data: bytes) -> None:
    _same_tokens(data)


def test_a_source_without_lexical_errors_takes_the_fast_path() -> None:
    assert lex(SAMPLE).texts  # kept only by the fast path
    assert not lex(b"x" * 300).texts  # reported: token by token


@settings(max_examples=200)
@given(
    st.binary(max_size=200)
    | st.text(alphabet="x1e+-._/*\n \t.0f3u2ab()[]{}é", max_size=60).map(str.encode)
)
def test_the_fast_path_agrees_on_any_input(data: bytes) -> None:
    _same_tokens(data)
