"""Hypothesis fuzzing of destructuring, ``if``, indexing, loops and dynamic indexing: the
front end's guarantees hold for them as for the rest of the language.

For mutated programs full of the new forms: no exception anywhere; the tree prints back the
input byte for byte; a graph exactly when there are no diagnostics, each with a span inside
the input; formatting, when it applies, is idempotent, keeps every token and comment, and
keeps the graph's hash (so the fingerprints).  For generated loops: renaming the index and
the carried values keeps the fingerprint, and the graph computes what a Python loop does.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from test_frontend_fuzz import mutations

from kera.frontend import compile_source, format_result, parse_source
from kera.interp import interpret
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
    b"""fn step(a: f32[4], x: f32[4]) -> f32[4] { a * 0.5 + x }
export fn h(x: f32[4], m: f32[3, 4], n: i64, k: u32) -> (f32[4], f32, f32[4]) {
    let (a, b) = for i in -2..3 with (a = x, b = 0.0) {
        let r = m[i, ..];
        (step(a, r) + x[k], b + for j in 0..2 with (s = a[i]) { s * m[j, i] })
    };
    let u = dynamic_update_slice(x, dynamic_slice(a, n, size = [2]), k);
    (a, b + x[n], for _ in 0..0 with (z = u) { z })
}
""",
    (CORPUS / "loops.kera").read_bytes(),
]
TOKENS = st.sampled_from(
    [b"if", b"else", b"if c {", b"} else {", b"..", b"[", b"]", b"[0]", b"[-1]", b"[1..]",
     b"[..2, ..]", b"let (", b"(a, _)", b"_", b",", b"(", b")", b"{", b"}", b";", b" ", b"\n",
     b"-", b"1", b"x", b".0", b"//c\n", b"/* c */",
     b"for", b"in", b"with", b"for i in 0..4 with (a = x) {", b"with (", b"0..3", b"-1..2",
     b"16777217", b"i", b"[i]", b"[i, 1..]", b"[k]", b"dynamic_slice(", b"dynamic_update_slice(",
     b"size = [2]", b"axis = -1", b"1.5", b"(a, b)", b"a = ", b"=", b"as u64"]
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
        "for i in 0..1 with (a = x) { " * n + "a" + " }" * n,
        "for i in 0.." * n + "1" + " with (a = x) { a }" * n,
        "for i in 0..1 with (a = " * n + "x" + ") { a }" * n,
        "for i in 0..2 with (a = x) { " * 8 + "x[i]" * n + " }" * 8,
        "x" + "[x[0] as i32]" * n,
        "if " * n + "c" + " { x } else { x }" * n,
        "if c { x } else " * n + "{ x }",
        "x" + "[..]" * n,
        "x" + "[x" * n + "]" * n,
        "if " * n,
        "x[" + ".." * n + "]",
        "let " + "(" * n + "a" + ")" * n + " = x; a",
    ):
        check(f"export fn f(x: f32[4], c: bool) -> f32[4] {{ {body} }}".encode())


NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True).filter(
    lambda s: s not in {"fn", "export", "let", "as", "true", "false", "if", "else", "for", "in",
                        "with", "inf", "nan", "x", "bool", "i32", "i64", "u32", "u64", "f32", "f64"}
)  # fmt: skip


@st.composite
def loops(draw: st.DrawFn) -> tuple[int, int, list[str], list[int]]:
    """(lo, trips, index and carried names, one multiplier per carried value)."""
    lo = draw(st.integers(-5, 5))
    trips = draw(st.integers(0, 6))
    k = draw(st.integers(1, 3))
    names = draw(st.lists(NAMES, min_size=k + 1, max_size=k + 1, unique=True))
    return lo, trips, names, draw(st.lists(st.integers(-3, 3), min_size=k, max_size=k))


def loop_source(lo: int, trips: int, names: list[str], mults: list[int]) -> str:
    """A loop whose carried value j becomes ``c_j * m_j + c_(j+1) + index`` (i64): the
    values are read from the previous iteration, so an in-place update shows."""
    i, carried = names[0], names[1:]
    k = len(carried)
    inits = ", ".join(f"{c} = x + {j}i64" for j, c in enumerate(carried))
    nexts = [
        f"{c} * {m}i64 + {carried[(j + 1) % k]} + {i} as i64"
        for j, (c, m) in enumerate(zip(carried, mults, strict=True))
    ]
    value = nexts[0] if k == 1 else f"({', '.join(nexts)})"
    result = "i64" if k == 1 else f"({', '.join(['i64'] * k)})"
    return (
        f"export fn f(x: i64) -> {result} {{\n"
        f"    for {i} in {lo}..{lo + trips} with ({inits}) {{ {value} }}\n}}\n"
    )


@settings(max_examples=60, deadline=None)
@given(loops(), st.lists(NAMES, min_size=4, max_size=4, unique=True))
def test_generated_loops_compute_a_python_loop_and_renaming_keeps_them(
    spec: tuple[int, int, list[str], list[int]], other: list[str]
) -> None:
    lo, trips, names, mults = spec
    src = loop_source(lo, trips, names, mults)
    result = compile_source(src)
    assert result.graph is not None, (src, result.diagnostics)
    fn = result.graph.functions["f"]
    renamed = compile_source(loop_source(lo, trips, other[: len(names)], mults)).graph
    assert renamed is not None and renamed.functions["f"].fingerprint == fn.fingerprint
    x = np.array([0, 7, -(2**63), 2**63 - 1], np.int64)
    got = interpret(fn, {"x": x})
    k = len(mults)
    want = [x + np.int64(j) for j in range(k)]
    with np.errstate(over="ignore"):
        for i in range(lo, lo + trips):
            want = [
                want[j] * np.int64(mults[j]) + want[(j + 1) % k] + np.int64(i) for j in range(k)
            ]
    assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))
