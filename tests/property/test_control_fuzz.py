"""Hypothesis fuzzing of destructuring, ``if`` and indexing: the front end's guarantees hold
for them as for the rest of the language.

For mutated programs full of the new forms: no exception anywhere; the tree prints back the
input byte for byte; a graph exactly when there are no diagnostics, each with a span inside
the input; formatting, when it applies, is idempotent, keeps every token and comment, and
keeps the graph's hash (so the fingerprints).
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from test_frontend_fuzz import mutations

from kera.frontend import compile_source, format_result, parse_source
from kera.syntax.diagnostics import decode_source
from kera.syntax.kinds import SyntaxKind as K
from kera.syntax.lexer import lex
from kera.syntax.tree import tree_bytes

CORPUS = Path(__file__).parents[2] / "corpora"

SEEDS = [
    b"""export fn f(x: f32[4, 8], c: bool, m: bool[8]) -> (f32[8], f32, f32[2, 3]) {
    let ((a, _), b) = ((x[0], x[-1, 2..5]), x[1..3, ..-5]);
    let y = if c { a } else if m[0] { -a } else { x[3] };
    (if m { y } else { a }, b[-1, -1], b)
}
""",
    b"""fn pair(a: i32[6], b: i32[6]) -> (i32[6], i32[6]) { (a + b, a - b) }
export fn g(v: i32[6], c: bool) -> (i32[3], i32) {
    let (s, d) = if c { pair(v, v) } else { (v, v * 2) };
    (s[1..4], d[-2])
}
""",
    (CORPUS / "control.kera").read_bytes(),
]
TOKENS = st.sampled_from(
    [b"if", b"else", b"if c {", b"} else {", b"..", b"[", b"]", b"[0]", b"[-1]", b"[1..]",
     b"[..2, ..]", b"let (", b"(a, _)", b"_", b",", b"(", b")", b"{", b"}", b";", b" ", b"\n",
     b"-", b"1", b"x", b".0", b"//c\n", b"/* c */"]
)  # fmt: skip


def check(data: bytes) -> None:
    assert tree_bytes(parse_source(data).tree) == data
    result = compile_source(data)
    assert (result.graph is not None) == (not result.diagnostics) == result.ok
    for d in result.diagnostics:
        assert 0 <= d.start <= d.end <= len(data)
        assert d.code.startswith("E0") and d.message
    text, diags = format_result(data)
    if diags:
        assert text == decode_source(data)
        return
    again, more = format_result(text)
    assert again == text and not more
    assert significant(text.encode()) == significant(data)
    if result.graph is not None:
        formatted = compile_source(text)
        assert formatted.graph is not None and formatted.graph.hash == result.graph.hash


def significant(data: bytes) -> list[bytes]:
    """Tokens and comments: everything but whitespace."""
    t = lex(data)
    return [t.text(i) for i, k in enumerate(t.kinds) if k != K.WHITESPACE]


@settings(max_examples=300)
@given(mutations(SEEDS, TOKENS))
def test_mutated_control_programs(data: bytes) -> None:
    check(data)


def test_seeds_are_valid_programs() -> None:
    for seed in SEEDS:
        assert compile_source(seed).ok, seed[:60]
        check(seed)


def test_deep_and_long_control_forms_do_not_exhaust_the_stack() -> None:
    n = 5_000
    for body in (
        "if " * n + "c" + " { x } else { x }" * n,
        "if c { x } else " * n + "{ x }",
        "x" + "[..]" * n,
        "x" + "[x" * n + "]" * n,
        "if " * n,
        "x[" + ".." * n + "]",
        "let " + "(" * n + "a" + ")" * n + " = x; a",
    ):
        check(f"export fn f(x: f32[4], c: bool) -> f32[4] {{ {body} }}".encode())
