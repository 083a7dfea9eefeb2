"""The front end of loops and dynamic indexing (issue #16, part 2): syntax, layout, checks,
the graphs built, their fingerprints and what they compute.

What a graph computes is compared with a plain numpy computation through the bits
(``.view(uint)``), never with ``==``; inputs are finite and non-zero where numpy's NaN payloads
or signed-zero choices would differ from the contract for reasons unrelated to loops.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from loopgraphs import GRAPHS

from kera import limits, passes
from kera.frontend import compile_source, format_result, format_source, parse_source
from kera.interp import interpret
from kera.ir import Function, Node, loop_body, start_pieces
from kera.ops import MAX_LOOP_DEPTH, Op
from kera.syntax.kinds import TRIVIA
from kera.syntax.kinds import SyntaxKind as K
from kera.syntax.lexer import lex
from kera.syntax.tree import GreenNode, GreenToken, tree_bytes
from keracheck.fuzz import to_kera

Array = np.ndarray[Any, Any]
DOCS = Path(__file__).parents[2] / "docs" / "language.md"
CORPUS = Path(__file__).parents[2] / "corpora"
UINT = {4: np.uint32, 8: np.uint64}

#: the surface of the issue, verbatim (docs/language.md has it too: test_docs_show_the_examples)
SURFACE = """\
export fn verlet(x0: f32[64], v0: f32[64], dt: f32) -> (f32[64], f32[64]) {
    for i in 0..100 with (x = x0, v = v0) {
        let a = -x;
        (x + v * dt, v + a * dt)
    }
}
export fn running_max(x: f32[16, 8]) -> f32[8] {
    for i in 0..16 with (m = x[0]) {
        max(m, x[i])
    }
}
export fn clip_rows(x: f32[4, 8], lim: f32) -> f32[4, 8] {
    let (lo, hi) = (-lim, lim);
    if lim > 0.0 { min(max(x, lo), hi) } else { x }
}
export fn window(x: f32[32]) -> (f32[4], f32, f32[8, 2]) {
    (x[2..6], x[-1], reshape(x[..16], shape = [8, 2]))
}
export fn scatter_hist(idx: i32[64]) -> i32[16] {
    for k in 0..64 with (h = broadcast(0i32, shape = [16])) {
        dynamic_update_slice(h, h[idx[k]] + 1i32, idx[k])
    }
}
"""


def functions(src: str) -> dict[str, Function]:
    result = compile_source(src)
    assert result.ok and result.graph is not None, result.diagnostics
    return dict(result.graph.functions)


def fingerprint(src: str, name: str = "f") -> str:
    return functions(src)[name].fingerprint


def inlined_fingerprint(src: str, name: str = "f") -> str:
    """The fingerprint after the ``inline`` pass (``-O0`` graphs keep calls)."""
    fn = functions(src)[name]
    return passes.optimize(fn, passes.resolve(["inline"])).function.fingerprint


def bits(a: Array) -> Array:
    a = np.ascontiguousarray(a)
    return a.view(UINT[a.dtype.itemsize]) if a.dtype.kind == "f" else a


def same_bits(got: Array, want: Array) -> bool:
    return got.dtype == want.dtype and np.array_equal(bits(got), bits(want))


def diagnostics(src: str) -> list[tuple[str, str, str]]:
    """(code, message, the source under the span) of each diagnostic."""
    data = src.encode()
    return [
        (d.code, d.message, data[d.start : d.end].decode()) for d in compile_source(src).diagnostics
    ]


# ----------------------------------------------------------------------------- syntax


def sexp(g: GreenNode | GreenToken) -> str:
    if isinstance(g, GreenToken):
        return g.text.decode()
    inner = [sexp(c) for c in g.children if not (isinstance(c, GreenToken) and c.kind in TRIVIA)]
    return "(" + " ".join([K(g.kind).name, *inner]) + ")"


def body_value(src: str) -> str:
    tree = parse_source(f"fn f() -> f32 {{ {src} }}").tree
    fn = tree.children[0]
    assert isinstance(fn, GreenNode)
    block = fn.children[-1]
    assert isinstance(block, GreenNode)
    return sexp([c for c in block.children if isinstance(c, GreenNode)][-1])


def test_for_tree_shape() -> None:
    assert body_value("for i in -2..3 with (a = x, b = 0) { a }") == (
        "(FOR_EXPR for (NAME i) in (RANGE (PREFIX_EXPR - (LITERAL 2)) .. (LITERAL 3)) with "
        "(LOOP_VARS ( (LOOP_VAR (NAME a) = (NAME_REF x)) , (LOOP_VAR (NAME b) = (LITERAL 0)) )) "
        "(BLOCK { (NAME_REF a) }))"
    )


def test_a_loop_is_an_operand_and_takes_postfix_forms() -> None:
    assert body_value("1.0 + for _ in 0..2 with (a = x, b = x) { (a, b) }.0").startswith(
        "(BIN_EXPR (LITERAL 1.0) + (FIELD_EXPR (FOR_EXPR for (NAME _) in"
    )


def test_for_in_with_are_keywords() -> None:
    kinds = [k for k in lex(b"for in with fore into without").kinds if k not in TRIVIA]
    assert kinds == [K.FOR_KW, K.IN_KW, K.WITH_KW, K.IDENT, K.IDENT, K.IDENT]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("for i in 0..4 { x }", "expected 'with' and the carried values, such as with (acc = 0.0), found '{'"),
        ("for i in 0..4 with () { x }", "expected a carried value such as acc = 0.0, found ')'"),
        ("for i in 0..4 with a = x { x }", "expected '(' and the carried values, such as (acc = 0.0), found identifier 'a'"),
        ("for i in 0.. with (a = x) { a }", "expected the end of the loop range, such as 8, found 'with'"),
        ("for in 0..3 with (a = x) { a }", "expected the loop index name (or _), found 'in'"),
        ("for i 0..3 with (a = x) { a }", "expected 'in' and the loop bounds, such as 0..8, found number '0'"),
        ("for i in 0..3 with (a x) { a }", "expected '=' and the initial value, found identifier 'x'"),
        ("for i in 0..3 with (a = x)", "expected '{' and the loop body, found '}'"),
    ],
)  # fmt: skip
def test_loop_syntax_errors_are_reported_and_parsing_goes_on(body: str, message: str) -> None:
    src = f"fn f(x: f32) -> f32 {{ {body} }}\nfn g(x: f32) -> f32 {{ x }}\n"
    result = parse_source(src)
    assert tree_bytes(result.tree) == src.encode()
    assert result.diagnostics[0].code == "E0010"
    assert result.diagnostics[0].message == message
    assert [g.kind for g in result.tree.children if isinstance(g, GreenNode)][-1] == K.FN_DEF
    assert not compile_source(src).ok  # and checking after the error does not raise


@pytest.mark.parametrize(
    "body",
    [
        "for i in 0.." * 10_000 + "1" + " with (a = x) { a }" * 10_000,  # loops in bounds
        "for i in 0..1 with (a = " * 10_000 + "x" + ") { a }" * 10_000,  # in initial values
        "for i in 0..1 with (a = x) { " * 10_000 + "a" + " }" * 10_000,  # in bodies
    ],
)
def test_deep_loops_are_bounded_with_one_diagnostic(body: str) -> None:
    src = "fn f(x: f32[4]) -> f32[4] { " + body + " }"
    result = parse_source(src)
    assert tree_bytes(result.tree) == src.encode()
    assert [d.code for d in result.diagnostics] == ["E0012"]
    codes = [d.code for d in compile_source(src).diagnostics]
    assert codes.count("E0012") == 1 and set(codes) <= {"E0012", "E0315", "E0316"}


# --------------------------------------------------------------------------------- fmt

LOOP_MESSY = """\
export fn f(x: f32[4],n:i32)->f32[4]{
  let s=for i in -2 .. 3 with(a=x,b = x ,){ let t=a*b;
  (t,b+x[ i ])}.0;
  for _ in 0..2 with (acc=s)
  { if n>0 { acc+x[n,] } else { acc } }
}
"""

LOOP_GOLDEN = """\
export fn f(x: f32[4], n: i32) -> f32[4] {
    let s = for i in -2..3 with (a = x, b = x,) {
        let t = a * b;
        (t, b + x[i])
    }.0;
    for _ in 0..2 with (acc = s) {
        if n > 0 { acc + x[n,] } else { acc }
    }
}
"""


def significant(text: str) -> list[bytes]:
    t = lex(text.encode())
    return [t.text(i) for i, k in enumerate(t.kinds) if k != K.WHITESPACE]


def test_loop_golden_layout_is_idempotent_and_keeps_meaning() -> None:
    once = format_source(LOOP_MESSY)
    assert once == LOOP_GOLDEN
    assert format_source(once) == once
    assert significant(once) == significant(LOOP_MESSY)
    a, b = compile_source(LOOP_MESSY), compile_source(once)
    assert a.graph is not None and b.graph is not None and a.graph.hash == b.graph.hash


@pytest.mark.parametrize(
    ("src", "out"),
    [
        ("fn f()->f32{for i in 0..4 with(a=x){a}}", "fn f() -> f32 {\n    for i in 0..4 with (a = x) {\n        a\n    }\n}\n"),
        ("fn f()->f32{for i in - 4 .. - 1 with (a = x)\n\n{a}}", "fn f() -> f32 {\n    for i in -4..-1 with (a = x) {\n        a\n    }\n}\n"),
        ("fn f()->f32{for i in 0..4\nwith (a = x) {a}}", "fn f() -> f32 {\n    for i in 0..4\n        with (a = x) {\n        a\n    }\n}\n"),
        ("fn f()->f32{dynamic_slice(x,i , j,size=[2 ,2])}", "fn f() -> f32 {\n    dynamic_slice(x, i, j, size = [2, 2])\n}\n"),
        ("fn f()->f32{x [ i+1 , 2.. ] [ 0 ]}", "fn f() -> f32 {\n    x[i + 1, 2..][0]\n}\n"),
        ("fn f()->f32{if c{for i in 0..2 with(a=x){a}}else{x}}", "fn f() -> f32 {\n    if c { for i in 0..2 with (a = x) { a } } else { x }\n}\n"),
    ],
)  # fmt: skip
def test_loop_spacing(src: str, out: str) -> None:
    assert format_source(src) == out
    assert format_source(out) == out


def test_formatting_never_changes_a_fingerprint() -> None:
    for path in [CORPUS / "loops.kera"]:
        text = path.read_text(encoding="utf-8")
        squashed = re.sub(r"\s+", " ", re.sub(r"//[^\n]*", "", text))
        once, diags = format_result(squashed)
        assert not diags
        assert format_source(once) == once
        a, b = compile_source(text), compile_source(once)
        assert a.graph is not None and b.graph is not None
        assert a.graph.source_fingerprints() == b.graph.source_fingerprints()


# -------------------------------------------------------------------------- graphs


def test_the_surface_compiles() -> None:
    assert list(functions(SURFACE)) == [
        "verlet",
        "running_max",
        "clip_rows",
        "window",
        "scatter_hist",
    ]


def test_docs_show_the_examples_verbatim() -> None:
    docs = DOCS.read_text(encoding="utf-8")
    for block in re.findall(r"export fn .*?\n}\n", SURFACE, re.S):
        assert block in docs, block.splitlines()[0]


@pytest.mark.parametrize("name", ["verlet", "scatter_hist"])
def test_the_front_end_builds_the_hand_built_loop_graphs(name: str) -> None:
    """tests/loopgraphs.py builds these with kera.ir directly; the language builds the same
    nodes, so the back ends' loop tests cover what the front end emits."""
    assert functions(SURFACE)[name].fingerprint == GRAPHS[name]().fingerprint


def every_node(fn: Function) -> list[Node]:
    """The nodes of ``fn`` and of every loop body in it, nested bodies included."""
    out: list[Node] = []
    stack = [fn]
    while stack:
        region = stack.pop()
        for n in region.nodes():
            out.append(n)
            if n.op is Op.LOOP:
                stack.append(loop_body(n))
    return out


def test_start_vectors_have_the_one_form_of_kera_ir() -> None:
    """kera.ir.start_vector is the form a fuzzer's graph must have to print as source."""
    for fn in functions((CORPUS / "loops.kera").read_text(encoding="utf-8")).values():
        for n in every_node(fn):
            if n.op in (Op.DYNAMIC_SLICE, Op.DYNAMIC_UPDATE_SLICE):
                assert start_pieces(n.inputs[-1]) is not None, fn.name


def test_the_source_printer_round_trips_every_loop_of_the_corpus() -> None:
    """keracheck's reproducer printer spells loops and dynamic ops as this front end reads
    them: printing a corpus function and compiling the text gives its fingerprint back."""
    for name, fn in functions((CORPUS / "loops.kera").read_text(encoding="utf-8")).items():
        text = to_kera.render(fn, name)
        assert fingerprint(text, name) == fn.fingerprint, text


def test_loop_nodes_and_bodies() -> None:
    fn = functions(SURFACE)["verlet"]
    loops = [n for n in fn.nodes() if n.op is Op.LOOP]
    assert [n.int_attr("result") for n in loops] == [0, 1]
    assert {(n.int_attr("lo"), n.int_attr("trips")) for n in loops} == {(0, 100)}
    body = loop_body(loops[0])
    assert [str(p.attr("name")) for p in body.params] == ["_0", "_1", "_2", "_3"]  # i, x, v, dt


def test_zero_trips_build_no_loop_and_give_the_initial_values() -> None:
    fns = functions(
        "export fn f(x: f32[4]) -> (f32[4], f32[4]) { for i in 5..5 with (a = x, b = -x) { (b, a) } }"
    )
    fn = fns["f"]
    assert all(n.op is not Op.LOOP for n in fn.nodes())
    x = np.array([[1.5, -2.0, 3.0, 4.0]], np.float32)
    a, b = interpret(fn, {"x": x})
    assert same_bits(a, x) and same_bits(b, -x)


def test_a_body_is_evaluated_once_whatever_the_trip_count() -> None:
    """The expansion budget counts the body once: a loop of 2^24 trips costs what one does."""
    src = "export fn f(x: f32) -> f32 {{ for i in 0..{n} with (a = x) {{ {body} }} }}"
    body = " + ".join(["a"] * 60)
    old = limits.current()
    limits.set_limits(limits.Limits(expansion=200))
    try:
        assert compile_source(src.format(n=1, body=body)).ok
        assert compile_source(src.format(n=1 << 24, body=body)).ok
        over = compile_source(src.format(n=1, body=body + " + a" * 100))
        assert [d.code for d in over.diagnostics] == ["E0111"]
    finally:
        limits.set_limits(old)


def test_renaming_loop_names_keeps_the_fingerprint() -> None:
    base = (
        "export fn f(x: f32[4], y: f32[4]) -> f32[4] {\n"
        "    let (p, _) = for i in 0..8 with (a = x, b = y) { (a * b + x[i], b - a) };\n"
        "    p\n}\n"
    )
    renamed = base.replace("i in", "step in").replace("x[i]", "x[step]")
    renamed = renamed.replace("(a = x, b = y) { (a * b", "(acc = x, bb = y) { (acc * bb")
    renamed = renamed.replace("b - a)", "bb - acc)")
    assert renamed != base and compile_source(renamed).ok
    assert fingerprint(renamed) == fingerprint(base)
    unused = base.replace("x[i]", "x[0]")
    assert fingerprint(unused.replace("for i in", "for _ in")) == fingerprint(unused)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("0..8", "0..9"),  # the trip count
        ("0..8", "1..9"),  # lo: the index values
        ("(a = x, b = y)", "(a = y, b = x)"),  # an initial value
        ("b - a)", "b + a)"),  # one op in the body
        ("x[i]", "x[i + 1]"),  # an index
    ],
)
def test_changing_a_loop_changes_the_fingerprint(old: str, new: str) -> None:
    base = (
        "export fn f(x: f32[4], y: f32[4]) -> f32[4] {\n"
        "    let (p, _) = for i in 0..8 with (a = x, b = y) { (a * b + x[i], b - a) };\n"
        "    p\n}\n"
    )
    assert old in base
    assert fingerprint(base.replace(old, new)) != fingerprint(base)


def test_a_helper_called_in_a_body_is_the_same_as_writing_it_out() -> None:
    helper = "fn step(a: f32[4], x: f32[4]) -> f32[4] { a * 0.5 + x }\n"
    called = (
        helper + "export fn f(x: f32[4]) -> f32[4] { for i in 0..4 with (a = x) { step(a, x) } }"
    )
    inline = "export fn f(x: f32[4]) -> f32[4] { for i in 0..4 with (a = x) { a * 0.5 + x } }"
    assert fingerprint(called) != fingerprint(inline)  # -O0 keeps the call, in the body
    assert inlined_fingerprint(called) == fingerprint(inline)


# ----------------------------------------------------------------- what they compute

RNG = np.random.default_rng(16)


def normal(*shape: int) -> Array:
    """Finite, non-zero f32 values (no NaN payloads, no signed-zero ties for min/max)."""
    a = RNG.standard_normal(shape).astype(np.float32)
    return np.where(a == 0, np.float32(0.5), a)


def test_verlet_against_numpy() -> None:
    x0, v0 = normal(8, 64), normal(8, 64)
    dt = np.full((8,), 0.01, np.float32)
    got = interpret(functions(SURFACE)["verlet"], {"x0": x0, "v0": v0, "dt": dt})
    x, v = x0.copy(), v0.copy()
    d = dt[:, None]
    for _ in range(100):
        a = -x
        x, v = x + v * d, v + a * d
    assert same_bits(got[0], x) and same_bits(got[1], v)


def test_running_max_against_numpy() -> None:
    x = normal(8, 16, 8)
    (got,) = interpret(functions(SURFACE)["running_max"], {"x": x})
    m = x[:, 0]
    for i in range(16):
        m = np.maximum(m, x[:, i])
    assert same_bits(got, m)


def test_scatter_hist_against_numpy() -> None:
    idx = RNG.integers(-40, 40, (8, 64), dtype=np.int32)
    idx[0, :4] = [np.iinfo(np.int32).min, np.iinfo(np.int32).max, -1, 16]
    (got,) = interpret(functions(SURFACE)["scatter_hist"], {"idx": idx})
    want = np.stack([np.bincount(np.clip(row, 0, 15), minlength=16) for row in idx])
    assert same_bits(got, want.astype(np.int32))


@pytest.mark.parametrize("lim", [2.0, 0.5, -1.0, 0.0])
def test_clip_rows_against_numpy(lim: float) -> None:
    x = normal(4, 4, 8) * np.float32(2)
    limv = np.full((4,), lim, np.float32)
    (got,) = interpret(functions(SURFACE)["clip_rows"], {"x": x, "lim": limv})
    l3 = limv[:, None, None]
    want = np.minimum(np.maximum(x, -l3), l3) if lim > 0 else x
    assert same_bits(got, want)


def test_window_against_numpy() -> None:
    x = normal(4, 32)
    a, b, c = interpret(functions(SURFACE)["window"], {"x": x})
    assert (
        same_bits(a, x[:, 2:6])
        and same_bits(b, x[:, -1])
        and same_bits(c, x[:, :16].reshape(4, 8, 2))
    )


def corpus(name: str) -> Function:
    return functions((CORPUS / "loops.kera").read_text(encoding="utf-8"))[name]


def test_corpus_prefix_sum_and_kahan_against_numpy() -> None:
    x = normal(4, 64) * np.float32(1e3)
    (got,) = interpret(corpus("prefix_sum"), {"x": x[:, :16]})
    want, s = np.empty_like(x[:, :16]), np.zeros(4, np.float32)
    for i in range(16):
        s = s + x[:, i]
        want[:, i] = s
    assert same_bits(got, want)
    naive, kahan = interpret(corpus("kahan_vs_naive"), {"x": x})
    n, k, c = (np.zeros(4, np.float32) for _ in range(3))
    for i in range(64):
        y = x[:, i] - c
        t = k + y
        n, k, c = n + x[:, i], t, (t - k) - y
    assert same_bits(naive, n) and same_bits(kahan, k)


def test_corpus_streams_against_numpy() -> None:
    seed = np.array([1, 0xDEADBEEF, 0xFFFFFFFF], np.uint32)
    (got,) = interpret(corpus("xorshift_stream"), {"seed": seed})
    s, want = seed | np.uint32(1), []
    for _ in range(32):
        s = s ^ (s << np.uint32(13))
        s = s ^ (s >> np.uint32(17))
        s = s ^ (s << np.uint32(5))
        want.append(s)
    assert same_bits(got, np.stack(want, axis=1))
    seed64 = np.array([0, 1, 2**64 - 1], np.uint64)
    (got64,) = interpret(corpus("lcg_stream"), {"seed": seed64})
    t, out = seed64, np.zeros((3, 16), np.uint64)
    for i in range(16):
        with np.errstate(over="ignore"):
            t = t * np.uint64(6364136223846793005) + np.uint64(1442695040888963407)
        out[:, 15 - i] = t
    assert same_bits(got64, out)


def test_corpus_sort_and_horner_against_numpy() -> None:
    x = normal(16, 8)
    (got,) = interpret(corpus("odd_even_sort"), {"x": x})
    assert same_bits(got, np.sort(x, axis=1))
    c, xs = normal(4, 8), normal(4, 16)
    (got,) = interpret(corpus("horner"), {"c": c, "x": xs})
    acc = np.zeros((4, 16), np.float32)
    for k in range(8):
        acc = acc * xs + c[:, 7 - k : 8 - k]
    assert same_bits(got, acc)


# ------------------------------------------------------------------ dynamic indexing

EXTREMES = [-(2**31), -5, -1, 0, 1, 3, 4, 7, 2**31 - 1]


@pytest.mark.parametrize("dtype", ["i32", "i64", "u32", "u64"])
def test_dynamic_index_is_clamped_for_every_integer_dtype(dtype: str) -> None:
    np_t = np.dtype(dtype.replace("i", "int").replace("u", "uint"))
    info = np.iinfo(np_t)
    values = sorted({int(np.clip(v, info.min, info.max)) for v in EXTREMES} | {info.min, info.max})
    fn = functions(
        f"export fn f(x: f32[4, 6], i: {dtype}) -> (f32[6], f32, f32[2]) {{ (x[i], x[-1, i], x[i, 1..3]) }}"
    )["f"]
    x = np.tile(normal(4, 6), (len(values), 1, 1))
    i = np.array(values, np_t)
    row, elem, part = interpret(fn, {"x": x, "i": i})
    r = np.clip(np.array(values, dtype=object), 0, 3).astype(np.int64)
    c = np.clip(np.array(values, dtype=object), 0, 5).astype(np.int64)
    n = np.arange(len(values))
    assert same_bits(row, x[n, r]) and same_bits(elem, x[n, 3, c]) and same_bits(part, x[n, r, 1:3])


def test_dynamic_slice_and_update_builtins() -> None:
    fn = functions(
        "export fn f(m: i32[6, 8], r: i32, c: i64) -> (i32[2, 3], i32[6, 8], i32[6, 8], i32[6, 8]) {\n"
        "    (dynamic_slice(m, r, c, size = [2, 3]), dynamic_update_slice(m, m[0], r),\n"
        "     dynamic_update_slice(m, -1, r, c), dynamic_update_slice(m, m[0..2, 0..2], r))\n}\n"
    )["f"]
    rs = [-(2**31), 0, 3, 5, 2**31 - 1]
    cs = [-(2**62), 7, 2, 0, 2**40]
    m = RNG.integers(0, 100, (len(rs), 6, 8), dtype=np.int32)
    win, row, one, block = interpret(
        fn, {"m": m, "r": np.array(rs, np.int32), "c": np.array(cs, np.int64)}
    )
    for k, (r, c) in enumerate(zip(rs, cs, strict=True)):
        r0, c0 = min(max(r, 0), 4), min(max(c, 0), 5)
        assert np.array_equal(win[k], m[k, r0 : r0 + 2, c0 : c0 + 3])
        want = m[k].copy()
        want[min(max(r, 0), 5)] = m[k, 0]
        assert np.array_equal(row[k], want)
        want = m[k].copy()
        want[min(max(r, 0), 5), min(max(c, 0), 7)] = -1
        assert np.array_equal(one[k], want)
        want = m[k].copy()
        want[r0 : r0 + 2, 0:2] = m[k, 0:2, 0:2]
        assert np.array_equal(block[k], want)


def test_negative_axes_count_from_the_end() -> None:
    neg = "export fn f(x: f32[3, 4]) -> (f32[3], f32[3, 8], i32[3, 4]) {{ (sum(x, axis = {a}), concat(x, x, axis = {a}), iota(shape = [3, 4], axis = {a}, to = i32)) }}"
    assert fingerprint(neg.format(a=-1)) == fingerprint(neg.format(a=1))
    assert diagnostics(neg.format(a=-3))[0][:2] == (
        "E0207",
        "axis -3 of sum is out of range for rank 2",
    )


# ------------------------------------------------------------------------ diagnostics

LOOP = "export fn f(x: f32[4], n: i32) -> f32[4] {{ {} }}"


@pytest.mark.parametrize(
    ("code", "body", "message", "under"),
    [
        ("E0315", "for i in 0..n with (a = x) { a }", "a loop bound is an integer literal such as 0 or -4: the trip count is static (index a value with the loop index instead)", "n"),
        ("E0315", "for i in 0..4i32 with (a = x) { a }", "a loop bound is an integer literal such as 0 or -4: the trip count is static (index a value with the loop index instead)", "4i32"),
        ("E0315", "for i in 5..2 with (a = x) { a }", "the loop range 5..2 is reversed: write it as LO..HI with LO <= HI", "5..2"),
        ("E0315", "for i in 0..2147483649 with (a = x) { a }", "the loop range 0..2147483649 leaves i32: the index runs from -2147483648 to 2147483647", "0..2147483649"),
        ("E0315", "for i in 0..1" + "0" * 5000 + " with (a = x) { a }", "the loop range 0..10000000000000000... leaves i32: the index runs from -2147483648 to 2147483647", "0..1" + "0" * 5000),
        ("E0316", "for i in 0..16777217 with (a = x) { a }", "the loop 0..16777217 runs more than 16,777,216 times", "0..16777217"),
        ("E0316", "for i in 0..2 with (a = x) { " * (MAX_LOOP_DEPTH + 1) + "a" + " }" * (MAX_LOOP_DEPTH + 1), f"loops nest more than {MAX_LOOP_DEPTH} deep here (bodies included through calls); move the inner loop out, or merge two loops into one", "for"),
        ("E0317", "for i in 0..4 with (a = x) { a[0] }", "the loop body gives f32 for the carried value 'a', which is f32[4]: a carried value keeps its initial value's type", "a[0]"),
        ("E0317", "for i in 0..4 with (a = x) { i }", "the loop body gives i32 for the carried value 'a', which is f32[4]: a carried value keeps its initial value's type", "i"),
        ("E0317", "for i in 0..4 with (a = x, b = 0) { (a, b > 0) }.0", "the loop body gives bool for the carried value 'b', which is i32: a carried value keeps its initial value's type", "b > 0"),
        ("E0318", "for i in 0..4 with (a = x) { (a, a) }", "the loop carries one value ('a'), but its body gives a tuple of 2", "(a, a)"),
        ("E0318", "for i in 0..4 with (a = x, b = x) { a }.0", "the loop carries 2 values ('a', 'b'), but its body gives f32[4]", "a"),
        ("E0319", "for a in 0..4 with (a = x) { a }", "'a' is bound twice in this loop: the index and the carried values need distinct names", "a"),
        ("E0106", "for i in 0..4 with (f32 = x) { x }", "'f32' is a type name and cannot name a variable", "f32"),
        ("E0307", "for i in 0..4 with (a = (x, x)) { a }", "a carried value is a tensor, not a tuple (carry each part)", "(x, x)"),
        ("E0201", "for i in 0..0 with (a = x) { a + 1i32 }", "add needs operands of one dtype, got f32 and i32", "a + 1i32"),
        ("E0320", "x[x[0]]", "a dynamic index is an integer scalar (i32, i64, u32 or u64), found f32", "x[0]"),
        ("E0320", "x[n > 0]", "a dynamic index is an integer scalar (i32, i64, u32 or u64), found bool", "n > 0"),
        ("E0320", "x[broadcast(n, shape = [2])]", "a dynamic index is an integer scalar (i32, i64, u32 or u64), found i32[2]", "broadcast(n, shape = [2])"),
        ("E0320", "dynamic_update_slice(x, 1.0, 0.5)", "a start index is an integer scalar (i32, i64, u32 or u64), found a float literal", "0.5"),
        ("E0320", "dynamic_slice(x, n, n, size = [2])", "dynamic_slice of f32[4] takes at most 1 start index, got 2", "n"),
        ("E0218", "dynamic_slice(x, n, size = [5])", "dynamic_slice size [5] does not fit in f32[4]", "dynamic_slice(x, n, size = [5])"),
        ("E0218", "dynamic_slice(x[0], n, size = [1])", "dynamic_slice needs an operand of rank >= 1, got f32", "dynamic_slice(x[0], n, size = [1])"),
        ("E0218", "dynamic_update_slice(x, broadcast(x, shape = [2, 4]), n)", "dynamic_update_slice cannot write f32[2, 4] into f32[4]", "dynamic_update_slice(x, broadcast(x, shape = [2, 4]), n)"),
        ("E0213", "dynamic_slice(x, n)", "dynamic_slice needs the attribute 'size'", "dynamic_slice(x, n)"),
        ("E0204", "dynamic_update_slice(x)", "dynamic_update_slice takes x, v and start indices, got 1", "dynamic_update_slice(x)"),
        ("E0201", "dynamic_update_slice(x, n, n)", "dynamic_update_slice needs one dtype, got f32 and i32", "dynamic_update_slice(x, n, n)"),
        ("E0212", "dynamic_update_slice(x, x, n, size = [4])", "dynamic_update_slice takes no attribute 'size'", "size = [4]"),
    ],
)  # fmt: skip
def test_loop_and_dynamic_diagnostics(code: str, body: str, message: str, under: str) -> None:
    got = diagnostics(LOOP.format(body))
    assert got[0] == (code, message, under), got


def test_a_body_over_the_function_elements_budget_is_a_diagnostic() -> None:
    src = (
        "export fn f(x: f32[16777216]) -> f32[16777216] {"
        " for i in 0..16777216 with (a = x) { a * x + a } }"
    )
    (d,) = compile_source(src).diagnostics
    assert d.code == "E0216" and "when its loops run" in d.message


def test_errors_in_a_loop_are_reported_once_and_do_not_cascade() -> None:
    src = LOOP.format("for i in 0..n with (a = x, b = nope) { (a + 1i32, b) }.0")
    assert [c for c, *_ in diagnostics(src)] == ["E0315", "E0101", "E0201"]


def test_names_inside_and_around_a_loop() -> None:
    """The index and the carried names shadow outer names inside the body only; a `let`
    inside the body shadows them in turn; `_` is not bound."""
    fn = functions(
        "export fn f(x: f32[4], i: f32) -> (f32[4], f32) {\n"
        "    let y = for i in 0..3 with (x = x) { let x = x * 2.0; x };\n"
        "    (y, i)\n}\n"
    )["f"]
    x = normal(2, 4)
    y, i = interpret(fn, {"x": x, "i": np.array([1.5, 2.5], np.float32)})
    assert same_bits(y, x * np.float32(8)) and same_bits(i, np.array([1.5, 2.5], np.float32))
    assert diagnostics(LOOP.format("for _ in 0..2 with (a = x) { a + _ }"))[0][:2] == (
        "E0101",
        "'_' binds nothing, so it cannot be read",
    )
