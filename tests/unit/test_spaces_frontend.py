"""The front end of memory spaces, ownership and effects (issue #17): every rule of
docs/language.md with a program it accepts and one it refuses (the diagnostic's code, text,
primary span, secondary spans and hint), the graphs built (in-out buffers as extra results,
buffers carried by loops, effects numbered in program order), fingerprints, the layout, and
what the graphs compute (compared through the bits).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kera.frontend import compile_source, format_result, parse_source, render_diagnostics
from kera.interp import interpret
from kera.ir import Function, loop_body
from kera.ops import Op
from kera.syntax.kinds import SyntaxKind as K
from kera.syntax.tree import Param, RefExpr, SyntaxNode, tree_bytes

Array = np.ndarray[Any, Any]
ROOT = Path(__file__).parents[2]
DOCS = ROOT / "docs" / "language.md"
CORPUS = ROOT / "corpora" / "spaces.kera"
Diag = tuple[str, str, str, list[tuple[str, str]], str]


def functions(src: str) -> dict[str, Function]:
    result = compile_source(src)
    assert result.ok and result.graph is not None, render_diagnostics(
        result.diagnostics, src, "t.kera"
    )
    return dict(result.graph.functions)


def diagnostics(src: str) -> list[Diag]:
    """(code, message, text under the span, [(text under a note, its label)], hint)."""
    data = src.encode()

    def under(a: int, b: int) -> str:
        return data[a:b].decode()

    return [
        (
            d.code,
            d.message,
            under(d.start, d.end),
            [(under(n.start, n.end), n.message) for n in d.notes],
            d.hint,
        )
        for d in compile_source(src).diagnostics
    ]


def f32(value: Any) -> Array:
    """An f32 array (a scalar is a 0-d array)."""
    return np.array(value, dtype=np.float32)


def run(fn: Function, **inputs: Array) -> list[Array]:
    """One batch row: each input gets a leading axis of 1, each output loses it."""
    return [o[0] for o in interpret(fn, {k: np.asarray(v)[None] for k, v in inputs.items()})]


def bits(a: Array) -> Array:
    a = np.ascontiguousarray(a)
    return a.view({4: np.uint32, 8: np.uint64}[a.dtype.itemsize]) if a.dtype.kind == "f" else a


# ----------------------------------------------------------------------------- syntax


def test_the_new_syntax_parses_into_its_nodes() -> None:
    src = (
        "fn g(y: &mut f32[8] @device, x: &f32[8]) effects(transfer) { y = y; }\n"
        "export fn f(b: &mut f32[8] @device) -> f32 { let mut m = b; g(&mut b, &m); 0.0 }\n"
    )
    result = parse_source(src)
    assert not result.diagnostics and tree_bytes(result.tree) == src.encode()
    fn = result.root.fns()[0]
    y, x = fn.params()
    assert [_mode(y), _mode(x)] == ["&mut", "&"]
    ty = y.type()
    assert ty is not None and ty.kind == K.TENSOR_TYPE
    assert ty.text().replace(" ", "") == "f32[8]@device"
    effects = fn.effects()
    assert effects is not None and [t.text for t in effects.names()] == ["transfer"]
    body = result.root.fns()[1].body()
    assert body is not None
    assert [n.kind for n in body.items()] == [K.LET_STMT, K.EXPR_STMT, K.LITERAL]
    assert [n.kind for n in fn.body().items()] == [K.ASSIGN_STMT]  # type: ignore[union-attr]
    refs = sorted((n for n in _walk(body) if isinstance(n, RefExpr)), key=lambda n: n.offset)
    assert [(r.is_mut(), r.operand().text()) for r in refs] == [(True, "b"), (False, "m")]  # type: ignore[union-attr]


def _mode(p: Param) -> str:
    m = p.mode()
    return "" if m is None else "&mut" if m.is_mut() else "&"


def _walk(node: SyntaxNode) -> list[SyntaxNode]:
    out, stack = [], [node]
    while stack:
        n = stack.pop()
        out.append(n)
        stack.extend(n.nodes())
    return out


@pytest.mark.parametrize(
    "src",
    [
        "export fn f(mut: f32) -> f32 { let mut = mut; mut }",  # `mut` stays a name
        "export fn f(effects: f32) -> f32 { effects }",
        "export fn f(device: f32) -> f32 { let host = device; host }",
        "export fn f(a: i32, b: i32) -> i32 { a & b }",  # `&` between operands is `and`
    ],
)
def test_contextual_words_stay_names(src: str) -> None:
    assert compile_source(src).ok


def test_layout_of_the_new_syntax_is_canonical_and_idempotent() -> None:
    messy = (
        "fn g(y: & mut f32[8]   @ device, x: &f32[8]) effects( transfer ) {\n"
        "  y = y*2.0;\n}\n"
        "export fn f(b: &mut f32[8] @device) -> f32 @device effects(transfer) {\n"
        "  let mut m = b; g(& mut b, &  m);\n  sum(b, axis = 0)\n}\n"
    )
    out, diags = format_result(messy)
    assert not diags
    assert out == (
        "fn g(y: &mut f32[8] @device, x: &f32[8]) effects(transfer) {\n"
        "    y = y * 2.0;\n"
        "}\n\n"
        "export fn f(b: &mut f32[8] @device) -> f32 @device effects(transfer) {\n"
        "    let mut m = b;\n"
        "    g(&mut b, &m);\n"
        "    sum(b, axis = 0)\n"
        "}\n"
    )
    assert format_result(out) == (out, [])


def test_the_corpus_file_is_formatted_and_formatting_keeps_its_fingerprints() -> None:
    src = CORPUS.read_text(encoding="utf-8")
    assert format_result(src) == (src, [])
    squeezed = re.sub(r"\n\s+", "\n", src)  # same tokens, other layout
    before = {n: f.fingerprint for n, f in functions(src).items()}
    assert {n: f.fingerprint for n, f in functions(squeezed).items()} == before


def test_the_docs_example_compiles() -> None:
    docs = DOCS.read_text(encoding="utf-8")
    section = docs[docs.index("## Memory spaces, ownership and effects") :]
    example = re.search(r"```kera\n(.*?)```", section, re.S)
    assert example is not None
    assert list(functions(example.group(1))) == ["run"]


# ------------------------------------------------------------------ rules: accepted

ACCEPTED = {
    "spaces of params and results": "export fn f(x: f32[8] @device) -> f32[8] @device { x * 2.0 }",
    "literals adapt to any space": "export fn f(x: f32[8] @device) -> f32[8] @device { x + broadcast(1.0, shape = [8]) }",
    "unified goes with host and device": "export fn f(u: f32[4] @unified, h: f32[4], d: f32[4] @device) -> (f32[4], f32[4] @device) { (u + h, u * d) }",
    "pinned computes as host": "export fn f(p: f32[4] @pinned, h: f32[4]) -> f32[4] { p + h }",
    "a transfer makes operands agree": "export fn f(x: f32[8] @device, y: f32[8]) -> f32[8] @device effects(transfer) { x + transfer(y, to = device) }",
    "a loop keeps the carried space; the index has none": "export fn f(x: f32[8] @device) -> f32 @device { for i in 0..8 with (s = x[0]) { s + x[i] } }",
    "copy keeps a name usable": "export fn f(x: f32[8]) -> (f32[8], f32[8] @device) effects(transfer) { (x, transfer(copy(x), to = device)) }",
    "moving a loop-local name": "export fn f(x: f32[2, 8]) -> f32[8] @device effects(transfer) { for i in 0..2 with (a = transfer(x[0], to = device)) { let r = x[i]; a + transfer(r, to = device) } }",
    "a move in one branch, a use in the other": "export fn f(x: f32[8], c: bool) -> f32[8] effects(transfer) { let y = if c { transfer(transfer(x, to = device), to = host) } else { x }; y }",
    "a name bound again after a move": "export fn f(x: f32[8]) -> f32[8] @device effects(transfer) { let d = transfer(x, to = device); let x = d; x }",
    "let mut and assignment": "export fn f(x: f32[8]) -> f32[8] { let mut m = x; m = m * 2.0; m = m + 1.0; m }",
    "a &mut helper as a statement": "fn g(y: &mut f32[8], x: &f32[8]) { y = y + x; } export fn f(x: f32[8]) -> f32[8] { let mut m = x; g(&mut m, &x); m }",
    "a borrow passed on": "fn g(x: &f32[8]) -> f32 { sum(x, axis = 0) } fn h(x: &f32[8]) -> f32 { g(x) + g(&x) } export fn f(x: f32[8]) -> f32 { h(&x) }",
    "a borrow used before the owner changes": "export fn f(x: f32[8]) -> f32[8] { let mut m = x; let r = &m; let s = r * 2.0; m = m + s; m }",
    "a borrow taken inside the loop body": "export fn f(x: f32[8]) -> f32[8] { let mut m = x; let n = for i in 0..3 with (k = 0) { let r = &m; let t = r * 0.5; m = m + t; k + 1 }; m }",
    "declared effects": "fn up(x: f32[8]) -> f32[8] @device effects(transfer) { transfer(x, to = device) } export fn f(x: f32[8]) -> f32[8] @device effects(transfer) { up(x) }",
    "declaring an unused effect": "export fn f(x: f32) -> f32 effects(transfer) { x }",
    "a call statement of an effectful helper": "fn up(x: f32[8]) -> f32[8] @device effects(transfer) { transfer(x, to = device) } export fn f(x: f32[8]) -> f32[8] effects(transfer) { up(x); x }",
    "a function without a result type": "fn g(y: &mut i32[4]) { y = y + 1; } export fn f(h: &mut i32[4]) { g(&mut h); }",
}  # fmt: skip


@pytest.mark.parametrize("src", ACCEPTED.values(), ids=list(ACCEPTED))
def test_accepted(src: str) -> None:
    assert functions(src)


# ------------------------------------------------------------------ rules: refused

UP = "fn up(x: f32[8]) -> f32[8] @device effects(transfer) { transfer(x, to = device) } "
G2 = "fn g(a: &mut f32[8], b: &f32[8]) { a = a + b; } "

#: (code, source, message, under the span, [(under a note, label)], hint)
REFUSED: list[tuple[str, str, str, str, list[tuple[str, str]], str]] = [
    ("E0120", "export fn f(x: f32[8] @gpu) -> f32[8] { x }", "unknown memory space 'gpu' (spaces: host, device, pinned, unified)", "gpu", [], ""),
    ("E0121", "export fn f(x: f32[8] @device, a: f32) -> f32[8] @device { x * a }", "mul needs operands in one memory space, got device and host", "x * a", [("a", "this is in host")], "insert a transfer: transfer(a, to = device)"),
    ("E0121", "export fn f(x: f32[8] @device, p: f32[8] @pinned) -> f32[8] @device { min(x, p) }", "min needs operands in one memory space, got device and pinned", "min(x, p)", [("p", "this is in pinned")], "insert a transfer: transfer(p, to = device)"),
    ("E0121", "export fn f(x: f32[4] @device, y: f32[4] @device, c: bool) -> f32[4] @device { if c { x } else { y } }", "select needs operands in one memory space, got device and host", "if c { x } else { y }", [("c", "this is in host")], "insert a transfer: transfer(c, to = device)"),
    ("E0122", "export fn f(x: f32[8]) -> f32[8] @device { x }", "expected f32[8] @device, found f32[8] @host", "x", [], "insert a transfer: transfer(x, to = device)"),
    ("E0122", "fn g(x: f32[8] @device) -> f32 @device { sum(x, axis = 0) } export fn f(x: f32[8]) -> f32 { g(x) }", "expected f32[8] @device, found f32[8] @host", "x", [], "insert a transfer: transfer(x, to = device)"),
    ("E0122", "export fn f(x: f32[8] @device) -> f32[8] { let y: f32[8] = x; y }", "expected f32[8] @host, found f32[8] @device", "x", [], "insert a transfer: transfer(x, to = host)"),
    ("E0123", "export fn f(x: f32) -> f32 effects(io) { x }", "unknown effect 'io'; the effects are: transfer", "io", [], ""),
    ("E0123", "export fn f(x: f32) -> f32 effects(nondet) { x }", "'nondet' is reserved: no op of the contract is nondeterministic (docs/language.md); the effects are: transfer", "nondet", [], ""),
    ("E0124", "export fn f(x: f32) -> f32 effects(transfer, transfer) { x }", "effect 'transfer' is listed twice", "transfer", [], ""),
    ("E0125", "export fn f(x: f32[8]) -> f32[8] @device { transfer(x, to = device) }", "transfer has the effect transfer, which 'f' does not declare", "transfer(x, to = device)", [], "declare it: add effects(transfer) after the result type of 'f'"),
    ("E0125", UP + "export fn f(x: f32[8]) -> f32[8] @device { up(x) }", "calling 'up' has the effect transfer, which 'f' does not declare", "up(x)", [("effects(transfer)", "'up' declares its effects here")], "declare it: add effects(transfer) after the result type of 'f'"),
    ("E0125", UP + "export fn f(x: f32[2, 8]) -> f32[8] { for i in 0..2 with (a = x[0]) { let d = up(x[i]); a } }", "calling 'up' has the effect transfer, which 'f' does not declare", "up(x[i])", [("effects(transfer)", "'up' declares its effects here")], "declare it: add effects(transfer) after the result type of 'f'"),
    ("E0126", "export fn f(x: f32[8]) -> f32[8] effects(transfer) { transfer(x, to = host) }", "this value is in host already: nothing to transfer", "transfer(x, to = host)", [], "remove the transfer, or transfer to another space"),
    ("E0126", "export fn f(x: f32[8]) -> f32[8] effects(transfer) { transfer(x, to = gpu) }", "'to' is a memory space: host, device, pinned, unified", "gpu", [], ""),
    ("E0127", "export fn f(x: f32) -> &f32 { x }", "'&' marks a parameter as borrowed; a result is a value (write the type alone)", "&", [], ""),
    ("E0127", "export fn f(x: f32) -> f32 { let y: &mut f32 = x; y }", "'&' marks a parameter as borrowed; a let binding is a value (write the type alone)", "&mut", [], ""),
    ("E0128", "fn g(x: f32[8]) { } export fn f(x: f32) -> f32 { x }", "'g' has no result type and no '&mut' parameter: it would compute nothing (add '-> T', or a '&mut' parameter it updates)", "g", [], ""),
    ("E0128", "export fn f(y: &mut f32[8]) { y = y * 2.0; y }", "'f' has no result type, but its body ends with a value", "y", [], "end the body with a statement, or declare the result: -> T"),
    ("E0128", "fn g(y: &mut f32[8]) { y = y + 1.0; } export fn f(x: f32[8]) -> f32[8] { let mut m = x; let z = g(&mut m); m }", "'g' has no result: it only updates its '&mut' buffers", "g(&mut m)", [], "call it as a statement: g(&mut m);"),
    ("E0401", "export fn f(x: f32[8]) -> f32[8] effects(transfer) { let d = transfer(x, to = device); x + 1.0 }", "use of 'x' after it was moved", "x", [("x", "'x' moved here")], "transfer a copy to keep 'x': transfer(copy(x), to = device)"),
    ("E0401", "export fn f(x: f32[8], c: bool) -> f32[8] effects(transfer) { let y = if c { let d = transfer(x, to = device); 1.0 } else { 0.0 }; x * y }", "use of 'x' after it was moved", "x", [("x", "'x' moved here")], "transfer a copy to keep 'x': transfer(copy(x), to = device)"),
    ("E0402", "export fn f(x: f32[8]) -> f32 effects(transfer) { for i in 0..3 with (k = 0.0) { let d = transfer(x, to = device); k + 1.0 } }", "'x' is bound outside this loop and moved inside it: the next iteration would use a moved value", "x", [("x", "'x' is bound here, outside the loop")], "transfer a copy: transfer(copy(x), to = device)"),
    ("E0403", "export fn f(x: &f32[8]) -> f32[8] @device effects(transfer) { transfer(x, to = device) }", "cannot move 'x' out of a borrow: it belongs to the caller", "x", [("x", "'x' is borrowed here")], "transfer a copy: transfer(copy(x), to = device)"),
    ("E0403", "export fn f(b: &mut f32[8]) -> f32[8] @device effects(transfer) { transfer(b, to = device) }", "cannot move 'b' out of a borrow: it belongs to the caller", "b", [("b", "'b' is borrowed here")], "transfer a copy: transfer(copy(b), to = device)"),
    ("E0404", "export fn f(x: f32[8]) -> f32[8] { x = x + 1.0; x }", "'x' cannot be assigned: only '&mut' parameters and 'let mut' names can", "x", [("x", "'x' is bound here")], "bind a new value with let x = ...; or declare it let mut x = ...;"),
    ("E0404", "export fn f(x: &f32[8]) -> f32[8] { x = x + 1.0; x }", "'x' cannot be assigned: only '&mut' parameters and 'let mut' names can", "x", [("x", "'x' is bound here")], "bind a new value with let x = ...; or declare it let mut x = ...;"),
    ("E0405", "fn g(a: &mut f32[8], b: &mut f32[8]) { a = a + b; } export fn f(x: f32[8]) -> f32[8] { let mut m = x; g(&mut m, &mut m); m }", "'m' is borrowed mutably twice in this call", "&mut m", [("&mut m", "first mutable borrow here")], "pass a copy to one of them: let mut c = m;"),
    ("E0406", G2 + "export fn f(x: f32[8]) -> f32[8] { let mut m = x; g(&mut m, &m); m }", "'m' is borrowed mutably while this call also reads it", "&mut m", [("&m", "'m' borrowed here")], "read a copy: let c = m; then pass c"),
    ("E0406", "export fn f(x: f32[8]) -> f32[8] { let mut m = x; let r = &m; m = m * 2.0; r + m }", "cannot assign 'm' while it is borrowed", "m", [("&m", "'m' borrowed here"), ("r", "the borrow is used later here")], "use 'r' before this, or borrow after it"),
    ("E0406", G2 + "export fn f(x: f32[8]) -> f32[8] { let mut m = x; let r = &m; g(&mut m, &x); r }", "cannot borrow mutably 'm' while it is borrowed", "&mut m", [("&m", "'m' borrowed here"), ("r", "the borrow is used later here")], "use 'r' before this, or borrow after it"),
    ("E0407", "export fn f(x: f32[8]) -> f32[8] { let mut m = x; let r = &m; let n = for i in 0..3 with (k = 0) { let t = r * 0.5; m = m + t; k + 1 }; m }", "'m' is updated in this loop while a borrow of it taken before the loop is read in the body: the borrow would outlive the value it borrows into the next iteration", "m", [("&m", "'m' borrowed here"), ("r", "used in the next iteration here")], "take the borrow inside the loop body: let r = &m;"),
    ("E0407", G2 + "export fn f(b: &mut f32[8], x: f32[8]) -> f32 { let r = &b; let n = for i in 0..3 with (k = 0.0) { let s = sum(r, axis = 0); g(&mut b, &x); k + s }; n }", "'b' is updated in this loop while a borrow of it taken before the loop is read in the body: the borrow would outlive the value it borrows into the next iteration", "&mut b", [("&b", "'b' borrowed here"), ("r", "used in the next iteration here")], "take the borrow inside the loop body: let r = &b;"),
    ("E0408", "export fn f(x: f32[8]) -> f32[8] { let r = &x + 1.0; r }", "a borrow '&x' is only a call argument or the value of a let", "&x", [], "write the value itself, or bind the borrow: let r = &x;"),
    ("E0408", "export fn f(x: f32[8]) -> f32[8] { let mut m = x; let r = &mut m; m }", "a '&mut' borrow is only a call argument", "&mut m", [], "assign the buffer instead: b = expr;"),
    ("E0409", G2 + "export fn f(x: f32[8]) -> f32[8] { let mut m = x; g(m, &x); m }", "parameter 'a' of 'g' takes a '&mut' buffer, found a value", "m", [], "write &mut m"),
    ("E0409", G2 + "export fn f(x: f32[8]) -> f32[8] { let mut m = x; g(&mut m, x); m }", "parameter 'b' of 'g' takes a borrow ('&'), found a value", "x", [], "write &x"),
    ("E0409", G2 + "export fn f(x: f32[8]) -> f32[8] { g(&mut x, &x); x }", "'&mut' needs a '&mut' parameter or a 'let mut' name, found x", "&mut x", [("x", "'x' is bound here")], "bind it first: let mut b = x; then pass &mut b"),
    ("E0409", "fn g(a: f32[8]) -> f32 { sum(a, axis = 0) } export fn f(x: f32[8]) -> f32 { g(&x) }", "parameter 'a' of 'g' takes a value, found a borrow ('&')", "&x", [], "write x"),
    ("E0409", "export fn f(x: f32[8]) -> f32 { sum(&x, axis = 0) }", "'sum' takes values, not borrows", "&x", [], "write the value without '&'"),
    ("E0410", "fn g(a: f32[8]) -> f32 { sum(a, axis = 0) } export fn f(x: f32[8]) -> f32[8] { g(x); x }", "this call of 'g' is a statement, but 'g' has no '&mut' parameter and no effect: its value would be lost", "g(x)", [], "bind its value with let"),
    ("E0410", "export fn f(x: f32[8]) -> f32[8] { abs(x); x }", "this call of 'abs' is a statement, but it has no effect: its value would be lost", "abs(x)", [], "bind its value with let"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("code", "src", "message", "under", "notes", "hint"),
    REFUSED,
    ids=[f"{c[0]}-{i}" for i, c in enumerate(REFUSED)],
)
def test_refused(
    code: str, src: str, message: str, under: str, notes: list[tuple[str, str]], hint: str
) -> None:
    got = diagnostics(src)
    assert got and got[0] == (code, message, under, notes, hint), got
    assert compile_source(src).graph is None


def test_every_rule_code_has_a_refused_case() -> None:
    section = DOCS.read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| (E01[2-9]\d|E04\d\d) \|", section, re.M))
    assert documented == {c[0] for c in REFUSED}


def test_secondary_spans_and_the_hint_are_rendered() -> None:
    src = (
        "export fn f(x: f32[8]) -> f32[8] effects(transfer) {\n"
        "    let d = transfer(x, to = device);\n"
        "    x + 1.0\n"
        "}\n"
    )
    text = render_diagnostics(compile_source(src).diagnostics, src, "f.kera")
    assert text == (
        "f.kera:3:5: error[E0401]: use of 'x' after it was moved\n"
        " 3 |     x + 1.0\n"
        "   |     ^\n"
        "f.kera:2:22: note: 'x' moved here\n"
        " 2 |     let d = transfer(x, to = device);\n"
        "   |                      ^\n"
        "  = help: transfer a copy to keep 'x': transfer(copy(x), to = device)\n"
    )


def test_a_missing_effect_is_reported_once_per_function() -> None:
    src = "export fn f(x: f32[8], y: f32[8]) -> f32[8] @device { transfer(x, to = device) + transfer(y, to = device) }"
    assert [d[0] for d in diagnostics(src)] == ["E0125"]


# ------------------------------------------------------------------ graphs and bits


def test_a_mut_parameter_is_an_extra_result_after_the_declared_ones() -> None:
    fns = functions(
        "fn g(y: &mut f32[4], s: f32) -> f32 { y = y * s; sum(y, axis = 0) }\n"
        "export fn f(a: &mut f32[4], b: f32[4]) -> (f32, f32[4]) { let mut m = b; let t = g(&mut m, 2.0); (t, m) }\n"
    )
    f = fns["f"]
    assert len(f.results) == 3  # t, m, then a's new value (a is left as it is)
    assert f.results[2] is f.params[0]
    call = f.results[0]
    assert call.op is Op.CALL and len(loop_body(call).results) == 2
    out = run(f, a=f32([1, 2, 3, 4]), b=f32([1, -2, 0.5, 8]))
    assert bits(out[0]) == bits(f32(15.0))
    assert (bits(out[1]) == bits(f32([2, -4, 1, 16]))).all()


def test_a_buffer_updated_in_a_loop_is_carried_by_it() -> None:
    src = (
        "fn axpy(y: &mut f32[4], a: f32, x: &f32[4]) { y = a * x + y; }\n"
        "export fn f(buf: &mut f32[4], x: f32[4]) -> f32 {\n"
        "    let n = for i in 0..5 with (k = 0.0) { axpy(&mut buf, k, &x); k + 1.0 };\n"
        "    n\n}\n"
    )
    f = functions(src)["f"]
    loop = f.results[1]
    assert loop.op is Op.LOOP and loop.attrs["result"] == 1  # carried after `k`
    buf, x = f32([1, 2, 3, 4]), f32([0.5, -1, 2, 0.25])
    want = buf.copy()
    for k in range(5):
        want = f32(k) * x + want
    out = run(f, buf=buf, x=x)
    assert bits(out[0]) == bits(f32(5)) and (bits(out[1]) == bits(want)).all()


def test_an_update_in_one_branch_is_a_select() -> None:
    f = functions(
        "export fn f(b: &mut f32[4], c: bool) -> f32 { let s = if c { b = b * 3.0; 1.0 } else { 0.0 }; s }"
    )["f"]
    assert f.results[1].op is Op.SELECT
    b = f32([1, -0.0, 2, 3])
    for c, want in [(True, b * 3), (False, b)]:
        out = run(f, b=b, c=np.array(c))
        assert (bits(out[1]) == bits(want)).all()


def test_effects_are_numbered_in_program_order() -> None:
    f = functions(
        "fn up(x: f32[4]) -> f32[4] @device effects(transfer) { transfer(x, to = device) }\n"
        "export fn f(x: f32[4], y: f32[4]) -> f32[4] @device effects(transfer) {\n"
        "    let a = transfer(y, to = device);\n    let b = up(x);\n"
        "    let c = transfer(transfer(copy(a), to = host), to = device);\n    a + b + c\n}\n"
    )["f"]
    assert f.declared == ("transfer",)
    roots = [(n.op, n.attrs["seq"]) for n in f.effects]
    assert roots == [(Op.TRANSFER, 0), (Op.CALL, 1), (Op.TRANSFER, 2), (Op.TRANSFER, 3)]
    x, y = f32([1, np.nan, -0.0, 4]), f32([2, 3, 4, 5])
    (out,) = run(f, x=x, y=y)
    assert (bits(out) == bits(y + x + y)).all()


def test_two_transfers_of_one_value_are_two_nodes() -> None:
    f = functions(
        "export fn f(x: f32[4]) -> (f32[4] @device, f32[4] @device) effects(transfer) {\n"
        "    (transfer(copy(x), to = device), transfer(x, to = device))\n}\n"
    )["f"]
    a, b = f.results
    assert a is not b and a.op is b.op is Op.TRANSFER


def fingerprint(src: str, name: str = "f") -> str:
    return functions(src)[name].fingerprint


BASE = "export fn f(x: f32[4] @device, y: f32[4] @device) -> f32[4] @device { x * y }"


@pytest.mark.parametrize(
    ("changed", "differs"),
    [
        ("export fn f(x: f32[4] @unified, y: f32[4] @device) -> f32[4] @device { x * y }", True),
        ("export fn f(x: f32[4] @device, y: f32[4] @device) -> f32[4] @device effects(transfer) { x * y }", True),
        ("export fn f(x: f32[4] @device, y: f32[4] @device) -> f32[4] @device effects(transfer) { transfer(transfer(x, to = host), to = device) * y }", True),
        ("export fn f(x: &f32[4] @device, y: &f32[4] @device) -> f32[4] @device { x * y }", False),
        ("export fn f(x: f32[4] @device, y: f32[4] @device) -> f32[4] @device { let mut m = x; m = m * y; m }", False),
        ("export fn f(x: f32[4]  @device,  y: f32[4] @device)->f32[4] @device{x*y}", False),
    ],
)  # fmt: skip
def test_fingerprints_follow_spaces_effects_and_transfers_only(changed: str, differs: bool) -> None:
    assert (fingerprint(changed) != fingerprint(BASE)) is differs


def test_host_spelled_out_is_the_default() -> None:
    plain = "export fn f(x: f32[4]) -> f32[4] { x + 1.0 }"
    assert fingerprint(plain) == fingerprint(
        "export fn f(x: f32[4] @host) -> f32[4] @host { x + 1.0 }"
    )


def test_the_corpus_agrees_with_numpy_on_kahan_and_hist() -> None:
    fns = functions(CORPUS.read_text(encoding="utf-8"))
    rng = np.random.default_rng(7)
    x = rng.standard_normal(32).astype(np.float32) * np.float32(1e4)
    s = c = f32(0)
    for v in x:
        y = v - c
        t = s + y
        c = (t - s) - y
        s = t
    (got,) = run(fns["kahan"], x=x)
    assert bits(got) == bits(s)
    idx = rng.integers(-40, 40, 64).astype(np.int32)
    (hist,) = run(fns["device_hist"], idx=idx)
    assert (hist == np.bincount(np.clip(idx, 0, 15), minlength=16)).all()


def test_an_empty_body_leaves_the_buffer_as_it_is() -> None:
    f = functions("export fn f(b: &mut f32[4]) { }")["f"]
    assert list(f.results) == [f.params[0]]


def test_parameters_of_an_export_record_their_space() -> None:
    f = functions("export fn f(x: f32[4] @pinned, y: f32[4]) -> f32[4] { x + y }")["f"]
    assert [p.attrs.get("space", "host") for p in f.params] == ["pinned", "host"]


def test_no_input_makes_the_new_checks_raise() -> None:
    """Fragments of the new syntax in odd places are diagnostics, never exceptions."""
    for src in [
        "fn f(x: &) {",
        "export fn f(x: f32 @) -> f32 { x }",
        "export fn f() effects(",
        "export fn f(x: f32) -> f32 { & }",
        "export fn f(x: f32) -> f32 { x = ; x }",
        "export fn f(b: &mut f32) { b = b; b = b }",
        "export fn f(x: f32) -> f32 { transfer(x); x }",
        "export fn f(x: f32) -> f32 effects(transfer) { transfer(x, to = device, to = host) }",
        "export fn f(x: f32) -> f32 effects(transfer) { transfer((x, x), to = device) }",
        "export fn f(x: f32) -> f32 { copy() }",
        "fn g(b: &mut f32) { b = b; } export fn f(x: f32) -> f32 { g(&mut undefined); x }",
        "fn g(b: &mut f32) { b = b; } export fn f(x: f32) -> f32 { g(&mut (x + 1.0)); x }",
    ]:
        result = compile_source(src)
        assert result.diagnostics and result.graph is None, src
