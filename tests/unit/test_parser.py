"""The event-driven parser and the lossless tree: precedence, structure, events, recovery."""

from __future__ import annotations

from pathlib import Path

import pytest

from kera.frontend import parse_source
from kera.syntax.kinds import TRIVIA
from kera.syntax.kinds import SyntaxKind as K
from kera.syntax.lexer import lex
from kera.syntax.parser import ERROR, FINISH, MAX_NESTING, START, TOKEN, parse
from kera.syntax.tree import GreenNode, GreenToken, debug_tree, tree_bytes


def sexp(g: GreenNode | GreenToken) -> str:
    """The tree without trivia: ``(KIND child ...)``, tokens as their text."""
    if isinstance(g, GreenToken):
        return g.text.decode()
    inner = [sexp(c) for c in g.children if not (isinstance(c, GreenToken) and c.kind in TRIVIA)]
    return "(" + " ".join([K(g.kind).name, *inner]) + ")"


def expr(src: str) -> str:
    """The s-expression of the body value of ``fn f() -> f32 { src }``."""
    tree = parse_source(f"fn f() -> f32 {{ {src} }}").tree
    fn = tree.children[0]
    assert isinstance(fn, GreenNode)
    block = fn.children[-1]
    assert isinstance(block, GreenNode) and block.kind == K.BLOCK
    nodes = [c for c in block.children if isinstance(c, GreenNode)]
    return sexp(nodes[-1])


def bin_(a: str, op: str, b: str) -> str:
    return f"(BIN_EXPR {a} {op} {b})"


N = "(NAME_REF {})".format


@pytest.mark.parametrize(
    ("src", "tree"),
    [
        ("a + b * c", bin_(N("a"), "+", bin_(N("b"), "*", N("c")))),
        ("a - b - c", bin_(bin_(N("a"), "-", N("b")), "-", N("c"))),
        ("a || b && c", bin_(N("a"), "||", bin_(N("b"), "&&", N("c")))),
        ("a & b == c", bin_(bin_(N("a"), "&", N("b")), "==", N("c"))),
        ("a | b ^ c & d", bin_(N("a"), "|", bin_(N("b"), "^", bin_(N("c"), "&", N("d"))))),
        ("a << b + c", bin_(N("a"), "<<", bin_(N("b"), "+", N("c")))),
        ("-a * b", bin_("(PREFIX_EXPR - (NAME_REF a))", "*", N("b"))),
        ("-x as f64", "(CAST_EXPR (PREFIX_EXPR - (NAME_REF x)) as (TENSOR_TYPE f64))"),
        ("a * b as f32", bin_(N("a"), "*", "(CAST_EXPR (NAME_REF b) as (TENSOR_TYPE f32))")),
        ("!a && ~b != c", bin_("(PREFIX_EXPR ! (NAME_REF a))", "&&", bin_("(PREFIX_EXPR ~ (NAME_REF b))", "!=", N("c")))),
        ("f(x).0", "(FIELD_EXPR (CALL_EXPR (NAME_REF f) (ARG_LIST ( (NAME_REF x) ))) . 0)"),
        ("(a)", "(PAREN_EXPR ( (NAME_REF a) ))"),
        ("(a,)", "(TUPLE_EXPR ( (NAME_REF a) , ))"),
        ("(a, 1)", "(TUPLE_EXPR ( (NAME_REF a) , (LITERAL 1) ))"),
        ("sum(x, axis = 1)", "(CALL_EXPR (NAME_REF sum) (ARG_LIST ( (NAME_REF x) , (KWARG (NAME axis) = (LITERAL 1)) )))"),
        ("g(shape = [4, 4])", "(CALL_EXPR (NAME_REF g) (ARG_LIST ( (KWARG (NAME shape) = (ARRAY_EXPR [ (LITERAL 4) , (LITERAL 4) ])) )))"),
        ("{ let y: i32 = 1; y }", "(BLOCK { (LET_STMT let (NAME y) : (TENSOR_TYPE i32) = (LITERAL 1) ;) (NAME_REF y) })"),
    ],
)  # fmt: skip
def test_precedence_and_shapes(src: str, tree: str) -> None:
    assert expr(src) == tree


def test_items_params_and_types() -> None:
    src = "export fn f(x: f32[4, 16], n: i32) -> (f32[4], i32) { (x, n) }"
    tree = parse_source(src).tree
    assert sexp(tree) == (
        "(SOURCE_FILE (FN_DEF export fn (NAME f) (PARAM_LIST ( (PARAM (NAME x) : (TENSOR_TYPE f32"
        " (DIMS [ 4 , 16 ]))) , (PARAM (NAME n) : (TENSOR_TYPE i32)) )) (RET_TYPE -> (TUPLE_TYPE"
        " ( (TENSOR_TYPE f32 (DIMS [ 4 ])) , (TENSOR_TYPE i32) ))) (BLOCK { (TUPLE_EXPR ("
        " (NAME_REF x) , (NAME_REF n) )) })))"
    )


def test_trivia_placement_and_spans() -> None:
    src = "  // lead\nfn f() -> f32 { a /* in */ + b }  // tail\n"
    tree = parse_source(src).tree
    assert tree_bytes(tree) == src.encode()
    dump = debug_tree(tree)
    assert dump.splitlines()[:3] == [
        "SOURCE_FILE@0..52",
        "  WHITESPACE@0..2 '  '",
        "  LINE_COMMENT@2..9 '// lead'",
    ]
    assert "    BLOCK@24..42" in dump  # a node spans its first to its last token
    assert "      BIN_EXPR@26..40" in dump
    assert "        BLOCK_COMMENT@28..36 '/* in */'" in dump
    assert dump.rstrip().endswith("WHITESPACE@51..52 '\\n'")


def test_event_stream_is_well_nested_and_consumes_every_token() -> None:
    src = b"fn f(a: f32) -> f32 { let q = a * 2.0 + -a; (q, a).0 }"
    toks = lex(src)
    result = parse(toks)
    depth = tokens = 0
    for tag, _, _ in result.events:
        depth += {START: 1, FINISH: -1}.get(tag, 0)
        tokens += tag == TOKEN
        assert depth >= 0
    assert depth == 0
    assert tokens == sum(1 for k in toks.kinds if k not in TRIVIA)
    assert result.events[0] == (START, K.SOURCE_FILE, 0)


def errors(src: str) -> list[tuple[str, str, str]]:
    """(code, message, the source text under the span) of each syntax diagnostic."""
    result = parse_source(src)
    assert tree_bytes(result.tree) == src.encode()
    data = src.encode()
    return [(d.code, d.message, data[d.start : d.end].decode()) for d in result.diagnostics]


def test_missing_semicolon_paren_and_brace_are_reported_and_parsing_goes_on() -> None:
    src = (
        "fn a(x: f32) -> f32 { let y = x let z = y; z }\n"
        "fn b(x: f32) -> f32 { abs(x }\n"
        "fn c(x: f32) -> f32 { x \n"
        "fn d(x: f32) -> f32 { x }\n"
    )
    assert [(c, m) for c, m, _ in errors(src)] == [
        ("E0010", "expected ';', found 'let'"),
        ("E0010", "expected ')', found '}'"),
        ("E0010", "expected '}' after the block's value, found 'fn'"),
    ]
    fns = [g for g in parse_source(src).tree.children if isinstance(g, GreenNode)]
    assert [g.kind for g in fns] == [K.FN_DEF] * 4  # all four functions are in the tree


def test_error_spans() -> None:
    assert errors("fn f() -> f32 { 1 + }") == [
        ("E0010", "expected an expression after '+', found '}'", "")
    ]
    assert errors("fn f() -> f32 { let = 2; 1 }") == [
        ("E0010", "expected a name after 'let', found '='", "")
    ]
    assert errors("x y fn f() -> f32 { 1 }") == [
        ("E0010", "expected 'fn' or 'export fn', found identifier 'x'", "x")
    ]
    assert errors("fn f() -> f32 { ] 1 }") == [
        ("E0010", "expected 'let' or an expression, found ']'", "]")
    ]


def test_unexpected_tokens_become_error_nodes() -> None:
    tree = parse_source("fn f() -> f32 { ] 1 }").tree
    assert "(ERROR ])" in sexp(tree)


def test_chained_comparison() -> None:
    assert errors("fn f() -> bool { a < b < c }") == [
        (
            "E0011",
            "comparison operators cannot be chained; combine comparisons with '&&'",
            "<",
        )
    ]


def test_block_needs_a_value() -> None:
    assert errors("fn f() -> f32 { let a = 1; }") == [
        ("E0013", "a block ends with its value: add an expression before '}'", "}")
    ]
    assert errors("fn f() -> f32 { a; }")[0] == (
        "E0010",
        "an expression statement has no effect; bind it with 'let'",
        ";",
    )


@pytest.mark.parametrize("open_,close", [("(", ")"), ("[", "]"), ("{", "}"), ("abs(", ")")])
def test_deep_nesting_is_bounded_with_a_diagnostic(open_: str, close: str) -> None:
    src = "fn f(x: f32) -> f32 { " + open_ * 10_000 + "x" + close * 10_000 + " }"
    result = parse_source(src)
    assert tree_bytes(result.tree) == src.encode()
    assert [d.code for d in result.diagnostics] == ["E0012"]
    assert result.diagnostics[0].message == (
        f"brackets nested more than {MAX_NESTING} deep; use let bindings"
    )


def test_long_chains_and_prefix_runs_parse_iteratively() -> None:
    for body in ("x" + " + x" * 20_000, "-" * 20_000 + "x", "x" + ".0" * 5_000):
        result = parse_source("fn f(x: f32) -> f32 { " + body + " }")
        assert not result.diagnostics


def test_error_events_index_the_diagnostics() -> None:
    result = parse(lex(b"fn f( -> { }"))
    idx = [a for tag, a, _ in result.events if tag == ERROR]
    assert idx == list(range(len(result.diagnostics))) and idx


def test_corpus_round_trips_byte_for_byte() -> None:
    corpus = Path(__file__).parents[2] / "corpora"
    paths = sorted(corpus.rglob("*.kera"))
    if not paths:
        pytest.skip("no .kera files in corpora/")
    for path in paths:
        data = path.read_bytes()
        result = parse_source(data)
        assert tree_bytes(result.tree) == data, path


# ------------------------------------------------------- destructuring, if, indexing

IF_ = "(IF_EXPR if {} (BLOCK {{ {} }}) else {})".format
BLOCK_ = "(BLOCK {{ {} }})".format


@pytest.mark.parametrize(
    ("src", "tree"),
    [
        ("x[0]", "(INDEX_EXPR (NAME_REF x) [ (LITERAL 0) ])"),
        ("x[-1, 2..]", "(INDEX_EXPR (NAME_REF x) [ (PREFIX_EXPR - (LITERAL 1)) , (RANGE (LITERAL 2) ..) ])"),
        ("x[..3, ..,]", "(INDEX_EXPR (NAME_REF x) [ (RANGE .. (LITERAL 3)) , (RANGE ..) , ])"),
        ("x[2..-1]", "(INDEX_EXPR (NAME_REF x) [ (RANGE (LITERAL 2) .. (PREFIX_EXPR - (LITERAL 1))) ])"),
        ("x[a + 1..b]", "(INDEX_EXPR (NAME_REF x) [ (RANGE (BIN_EXPR (NAME_REF a) + (LITERAL 1)) .. (NAME_REF b)) ])"),
        ("f(x)[1][2]", "(INDEX_EXPR (INDEX_EXPR (CALL_EXPR (NAME_REF f) (ARG_LIST ( (NAME_REF x) ))) [ (LITERAL 1) ]) [ (LITERAL 2) ])"),
        ("t.0[1]", "(INDEX_EXPR (FIELD_EXPR (NAME_REF t) . 0) [ (LITERAL 1) ])"),
        ("-x[0]", "(PREFIX_EXPR - (INDEX_EXPR (NAME_REF x) [ (LITERAL 0) ]))"),
        ("if c { a } else { b }", IF_(N("c"), N("a"), BLOCK_(N("b")))),
        ("if c { a } else if d { b } else { e }", IF_(N("c"), N("a"), IF_(N("d"), N("b"), BLOCK_(N("e"))))),
        ("if { c } { a } else { b }", IF_(BLOCK_(N("c")), N("a"), BLOCK_(N("b")))),
        ("1.0 + if c { a } else { b }", bin_("(LITERAL 1.0)", "+", IF_(N("c"), N("a"), BLOCK_(N("b"))))),
        ("if a < b { a } else { b }", IF_(bin_(N("a"), "<", N("b")), N("a"), BLOCK_(N("b")))),
    ],
)  # fmt: skip
def test_index_and_if_shapes(src: str, tree: str) -> None:
    assert expr(src) == tree


def test_let_patterns() -> None:
    src = "fn f() -> f32 { let ((a, _), b,) = t; let (c) = t; let d: f32 = 1.0; a }"
    result = parse_source(src)
    assert not result.diagnostics
    body = result.root.fns()[0].body()
    assert body is not None
    lets = [sexp(n.green) for n in body.items() if n.kind == K.LET_STMT]
    assert lets == [
        "(LET_STMT let (TUPLE_PAT ( (TUPLE_PAT ( (NAME a) , (NAME _) )) , (NAME b) , )) = (NAME_REF t) ;)",
        "(LET_STMT let (TUPLE_PAT ( (NAME c) )) = (NAME_REF t) ;)",
        "(LET_STMT let (NAME d) : (TENSOR_TYPE f32) = (LITERAL 1.0) ;)",
    ]  # fmt: skip


def test_errors_in_the_new_forms_are_reported_and_parsing_goes_on() -> None:
    assert errors("fn f() -> f32 { if c { a } }") == [
        ("E0010", "expected 'else' and a block: an if has a value on both branches, found '}'", "")
    ]
    assert errors("fn f() -> f32 { if c { a } else b }")[0][:2] == (
        "E0010",
        "expected '{' or 'if' after 'else', found identifier 'b'",
    )
    assert errors("fn f() -> f32 { if c a }")[0][:2] == (
        "E0010",
        "expected '{' and the value when the condition holds, found identifier 'a'",
    )
    assert errors("fn f() -> f32 { x[] }") == [
        ("E0010", "expected an index (an integer, or a range such as 1..3), found ']'", "")
    ]
    assert errors("fn f() -> f32 { let () = x; x }") == [
        ("E0010", "expected a name, '_' or '(' in a tuple pattern, found ')'", "")
    ]
    assert errors("fn f() -> f32 { let (a b) = x; x }")[0][:2] == (
        "E0010",
        "expected ',' or ')', found identifier 'b'",
    )
    # a missing ']' or ')' does not swallow the rest of the function
    src = "fn f() -> f32 { let y = x[1..; let (a, = y; a }\nfn g() -> f32 { 1.0 }"
    assert {c for c, _, _ in errors(src)} == {"E0010"}
    fns = [g for g in parse_source(src).tree.children if isinstance(g, GreenNode)]
    assert [g.kind for g in fns] == [K.FN_DEF] * 2


def test_else_if_chains_and_index_chains_parse_iteratively() -> None:
    for body in (
        "if c { x } else " * 20_000 + "{ x }",
        "x" + "[..]" * 20_000,
    ):
        src = "fn f(x: f32[4], c: bool) -> f32[4] { " + body + " }"
        result = parse_source(src)
        assert not result.diagnostics
        assert tree_bytes(result.tree) == src.encode()


@pytest.mark.parametrize(
    "body",
    [
        "if " * 10_000 + "c" + " { x } else { x }" * 10_000,  # ifs in conditions recurse
        "if " * 10_000 + "{ c }" + " { x } else if c { x } else { x }" * 10_000,
        "x" + "[x" * 10_000 + "]" * 10_000,
    ],
)
def test_deep_ifs_and_indices_are_bounded_with_one_diagnostic(body: str) -> None:
    src = "fn f(x: f32[4], c: bool) -> f32[4] { " + body + " }"
    result = parse_source(src)
    assert tree_bytes(result.tree) == src.encode()
    assert [d.code for d in result.diagnostics] == ["E0012"]


def test_deep_tuple_patterns_are_bounded() -> None:
    src = "fn f(x: f32) -> f32 { let " + "(" * 10_000 + "a" + ")" * 10_000 + " = x; x }"
    result = parse_source(src)
    assert tree_bytes(result.tree) == src.encode()
    assert [d.code for d in result.diagnostics] == ["E0012"]
