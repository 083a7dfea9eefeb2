"""Hypothesis fuzzing of the front end: random bytes and mutated valid programs.

For any input: no exception from lexing, parsing, checking, building or formatting; the tree
prints back the input byte for byte; a result has a graph exactly when it has no diagnostics;
formatting, when it applies, is idempotent and keeps the meaning (the graph's hash).
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from kera.frontend import compile_source, format_result, parse_source
from kera.syntax.diagnostics import decode_source
from kera.syntax.tree import tree_bytes

CORPUS = Path(__file__).parents[2] / "corpora"

SEEDS = [
    b"""export fn saxpy(a: f32, x: f32[8], y: f32[8]) -> f32[8] {
    let ax = a * x; // a scalar broadcasts
    ax + y
}
fn sq(v: f32) -> f32 { v * v }
export fn stats(x: f32[4, 16]) -> (f32[4], f32[4]) {
    (sum(x, axis = 1), amax(x, axis = 1))
}
""",
    b"""/* ints */ export fn mix(x: u32[4], n: i32) -> (u32[4], i32, bool) {
    let h = (x ^ (x >> 16u32)) * 0x45d9f3bu32;
    (h | ~x, -n % 7 << 2, n < 3 && !(n == 0))
}
export fn conv(x: f64[2, 3]) -> (f32[3, 2], f64) {
    (transpose(x as f32, perm = [1, 0]), select(true, 1e-3, -0.0) + nan)
}
""",
    b"""fn pair(a: f32, b: f32) -> (f32, f32) { (a + b, min(a, b)) }
export fn f(x: f32) -> f32 { let p = pair(x, 2.5); { let q = p.0; q * p.1 } }
export fn g(x: f32[4]) -> f32[2, 4] { broadcast(exp(x), shape = [2, 4]) }
""",
]
SEEDS += [p.read_bytes() for p in sorted(CORPUS.rglob("*.kera"))[:6]]


def check(data: bytes) -> None:
    syntax = parse_source(data)
    assert tree_bytes(syntax.tree) == data
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
    if result.graph is not None:
        formatted = compile_source(text)
        assert formatted.graph is not None and formatted.graph.hash == result.graph.hash


@settings(max_examples=300)
@given(st.binary(max_size=300))
def test_random_bytes(data: bytes) -> None:
    check(data)


TOKENS = st.sampled_from(
    [b"fn", b"export", b"let", b" ", b"\n", b"(", b")", b"{", b"}", b"[", b"]", b",", b";",
     b":", b"->", b"=", b"+", b"-", b"*", b"<", b"&&", b"!", b"as", b"x", b"f32", b"f32[4]",
     b"1", b"1.5", b"0xffu32", b"nan", b"sum(", b"axis = 0", b".0", b"//c\n", b"/*", b"*/",
     b"\xff", "é".encode()]
)  # fmt: skip


def mutations(seeds: list[bytes], tokens: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    """One of ``seeds`` with 1-4 edits: spans deleted, replaced by or inserted with ``tokens``,
    or duplicated (shared with ``test_control_fuzz.py``)."""

    @st.composite
    def mutated(draw: st.DrawFn) -> bytes:
        data = bytearray(draw(st.sampled_from(seeds)))
        for _ in range(draw(st.integers(1, 4))):
            i = draw(st.integers(0, len(data)))
            j = draw(st.integers(i, min(len(data), i + 12)))
            action = draw(st.sampled_from(["delete", "insert", "replace", "duplicate"]))
            if action == "delete":
                del data[i:j]
            elif action == "insert":
                data[i:i] = draw(tokens)
            elif action == "replace":
                data[i:j] = draw(tokens)
            else:
                data[i:i] = data[i:j]
        return bytes(data)

    return mutated()


@settings(max_examples=300)
@given(mutations(SEEDS, TOKENS))
def test_mutated_programs(data: bytes) -> None:
    check(data)


def test_seeds_are_valid_programs() -> None:
    for seed in SEEDS:
        assert compile_source(seed).ok, seed[:60]
        check(seed)


def test_deep_nesting_does_not_exhaust_the_stack() -> None:
    n = 10_000
    for body in (
        "(" * n + "x" + ")" * n,
        "[" * n + "x" + "]" * n,
        "{" * n + "x" + "}" * n,
        "abs(" * n + "x" + ")" * n,
        "-" * n + "x",
        "!" * n + "x",
        "x" + " + x" * n,
        "x" + ".0" * n,
        "(" * n,
        ")" * n,
    ):
        data = f"export fn f(x: f32) -> f32 {{ {body} }}".encode()
        check(data)
    check(b"export fn f(x: " + b"(" * n + b"f32" + b")" * n + b") -> f32 { x }")
    chain = "\n".join(f"fn g{i}(x: f32) -> f32 {{ g{i + 1}(x) + 1.0 }}" for i in range(500))
    check((chain + "\nfn g500(x: f32) -> f32 { x }\nexport fn f(x: f32) -> f32 { g0(x) }").encode())
