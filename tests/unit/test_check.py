"""Diagnostics: every code with its message and span, rendering, and no cascades."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from kera import limits
from kera.frontend import compile_source, render_diagnostics

DOCS = Path(__file__).parents[2] / "docs" / "language.md"

#: (code, source, message, the source text under the span)
CASES: list[tuple[str, str, str, str]] = [
    # syntax
    ("E0001", "export fn f() -> f32 { 1.0 $ }", "unexpected character '$'", "$"),
    ("E0002", "export fn f() -> f32 { 1.0 } /* open", "unterminated block comment", "/*"),
    ("E0003", "export fn f() -> f32 { 1e5.5 }", "malformed number literal '1e5.5'", "1e5.5"),
    ("E0004", "export fn f() -> u32 { 3u8 }", "invalid suffix 'u8' on number literal (expected i32, i64, u32, u64, f32 or f64)", "3u8"),
    ("E0005", "export fn f() -> f32 { 1" + "0" * 100_000 + ".0 }", "number literal of 100,003 characters; the limit is 100,000 (raise it with --limit literal_chars=N or KERA_LIMITS=literal_chars=N)", "1" + "0" * 100_000 + ".0"),
    ("E0006", "export fn f(" + "x" * 256 + ": f32) -> f32 { 1.0 }", "identifier of 256 characters; names are at most 255", "x" * 256),
    ("E0010", "export fn f() -> f32 { let a = 1.0 a }", "expected ';', found identifier 'a'", ""),
    ("E0011", "export fn f(a: i32) -> bool { a < a < a }", "comparison operators cannot be chained; combine comparisons with '&&'", "<"),
    ("E0012", "export fn f() -> f32 { " + "(" * 200 + "1.0" + ")" * 200 + " }", "brackets nested more than 100 deep; use let bindings", "("),
    ("E0013", "export fn f() -> f32 { let a = 1.0; }", "a block ends with its value: add an expression before '}'", "}"),
    ("E0014", "export fn f(x: f32) -> f32 { let y = x * 2.0; return y; }", "Kera has no 'return': a block ends with its value; write `y` without 'return' and ';'", "return"),
    # names and items
    ("E0101", "export fn f(value: f32) -> f32 { valu }", "unknown name 'valu'; did you mean 'value'?", "valu"),
    ("E0101", "export fn f(x: f32) -> f32 { sum }", "'sum' is a function; call it: sum(...)", "sum"),
    ("E0102", "export fn f(x: f32) -> f32 { sqr(x) }", "unknown function 'sqr'; did you mean 'sqrt'?", "sqr"),
    ("E0103", "fn g(x: f32) -> f32 { x }\nfn g(x: f32) -> f32 { -x }", "function 'g' is already defined on line 1", "g"),
    ("E0104", "fn g(x: f32, x: f32) -> f32 { x }", "parameter 'x' is declared twice", "x"),
    ("E0105", "fn g(x: f32) -> f32 { g(x) }", "recursive call (g -> g); Kera has no recursion", "g"),
    ("E0106", "fn sum(x: f32) -> f32 { x }", "'sum' is a builtin function and cannot name a function", "sum"),
    ("E0106", "fn g(x: f32) -> f32 { let i32 = x; x }", "'i32' is a type name and cannot name a variable", "i32"),
    ("E0107", "export fn f(x: f32) -> f32 { (x)(x) }", "only functions can be called, by name", "(x)"),
    ("E0108", "fn g(x: f32) -> f32 { x }\nexport fn f(x: f32) -> f32 { g(x, x) }", "'g' takes 1 argument, got 2", "g(x, x)"),
    ("E0109", "fn g(x: f32) -> f32 { x }\nexport fn f(x: f32) -> f32 { g(x = x) }", "'g' takes positional arguments only", "x = x"),
    ("E0109", "export fn f(x: f32[4]) -> f32 { sum(x, axis = 0, axis = 0) }", "argument 'axis' is given twice", "axis = 0"),
    ("E0109", "export fn f(x: f32[4]) -> f32 { sum(axis = 0, x) }", "a positional argument cannot follow a keyword argument", "x"),
    ("E0111", "fn g0(x: f32) -> f32 { x }\n" + "".join(f"fn g{j}(x: f32) -> f32 {{ g{j - 1}(x * 2.0) + g{j - 1}(x * 3.0) }}\n" for j in range(1, 19)) + "export fn f(x: f32) -> f32 { g18(x) }", "this function expands to more than 200,000 expressions through its calls (counting each call as its callee's body; raise it with --limit expansion=N or KERA_LIMITS=expansion=N)", "export fn f(x: f32) -> f32 { g18(x) }"),
    ("E0112", "fn g0(x: f32) -> f32 { x }\n" + "".join(f"fn g{j}(x: f32) -> f32 {{ g{j - 1}(x) }}\n" for j in range(1, 10_002)) + "export fn f(x: f32) -> f32 { g10001(x) }", "calls nest more than 10,000 deep here (raise it with --limit call_depth=N or KERA_LIMITS=call_depth=N)", "g2"),
    ("E0110", "export fn f(x: f16) -> f32 { 1.0 }", "unknown type 'f16' (types: bool, i32, i64, u32, u64, f32, f64)", "f16"),
    # typing rules of kera.ops
    ("E0201", "export fn f(x: f32, n: i32) -> f32 { x * n }", "mul needs operands of one dtype, got f32 and i32", "x * n"),
    ("E0202", "export fn f(x: f32[4], y: f32[3]) -> f32[4] { x + y }", "add needs operands of one shape, got f32[4] and f32[3]", "x + y"),
    ("E0202", "export fn f(x: f32[4, 8], y: f32[8]) -> f32[4, 8] { x * y }", "mul needs operands of one shape, got f32[4, 8] and f32[8]; only scalars broadcast implicitly: write broadcast(..., shape = [4, 8]) for the [8] operand", "x * y"),
    ("E0202", "export fn f(x: f32[4, 8], y: f32[4]) -> f32[4, 8] { x + y }", "add needs operands of one shape, got f32[4, 8] and f32[4]; broadcasting aligns trailing dimensions, so reshape the [4] operand first: broadcast(reshape(..., shape = [4, 1]), shape = [4, 8])", "x + y"),
    ("E0208", "export fn f(y: f32[4]) -> f32[4, 8] { broadcast(y, shape = [4, 8]) }", "cannot broadcast f32[4] to shape [4, 8] (trailing dimensions must match or be 1: reshape to [4, 1] first)", "broadcast(y, shape = [4, 8])"),
    ("E0203", "export fn f(x: i32) -> i32 { sqrt(x) }", "sqrt is defined on f32 and f64, not i32", "sqrt(x)"),
    ("E0204", "export fn f(x: f32) -> f32 { fma(x, x) }", "fma takes 3 operands, got 2", "fma(x, x)"),
    ("E0205", "export fn f(x: f32) -> f32 { select(x, x, x) }", "the condition of select must be bool, got f32", "select(x, x, x)"),
    ("E0206", "export fn f(b: bool) -> f32 { b as f32 }", "no conversion from bool to f32 (compare with 0.0 instead)", "b as f32"),
    ("E0206", "export fn f(x: f32) -> i64 { bitcast(x, to = i64) }", "bitcast needs types of one width (not bool): f32 to i64", "bitcast(x, to = i64)"),
    ("E0207", "export fn f(x: f32[4]) -> f32 { sum(x, axis = 1) }", "axis 1 of sum is out of range for rank 1", "axis = 1"),
    ("E0208", "export fn f(x: f32[4]) -> f32[3] { reshape(x, shape = [3]) }", "cannot reshape f32[4] (4 elements) to [3]", "reshape(x, shape = [3])"),
    ("E0211", "export fn f(x: f32[0]) -> f32 { 1.0 }", "shape [0] has a dimension outside 1..16777216", "f32[0]"),
    ("E0211", "export fn f(x: f32) -> f32[2] { broadcast(x, shape = [2, 0]) }", "shape [2, 0] has a dimension outside 1..16777216", "shape = [2, 0]"),
    ("E0212", "export fn f(x: f32[4]) -> f32 { sum(x, axes = 0) }", "sum takes no attribute 'axes'", "axes = 0"),
    ("E0212", "export fn f(x: f32) -> f32 { abs(x, axis = 0) }", "abs takes no attribute 'axis'", "axis = 0"),
    ("E0213", "export fn f(x: f32[4]) -> f32 { sum(x) }", "sum needs the attribute 'axis'", "sum(x)"),
    ("E0214", "export fn f(x: f32[4]) -> f32 { sum(x, axis = f32) }", "attribute 'axis' of sum must be int", "axis = f32"),
    ("E0214", "export fn f(x: f32[4]) -> f32 { sum(x, axis = 1.5) }", "an attribute is an integer, a list of integers like [4, 4], or a dtype like f32", "1.5"),
    ("E0214", "export fn f(x: f32[4]) -> f32 { sum(x, axis = 99999999999999999999) }", "attribute 'axis' = 99999999999999999999 does not fit in i64", "axis = 99999999999999999999"),
    ("E0214", "export fn f(x: f32[2u32]) -> f32 { 1.0 }", "a dimension is a plain integer, without a type suffix", "2u32"),
    # front-end typing
    ("E0215", "export fn f(x: f32[65536, 65536]) -> f32 { 1.0 }", "shape [65536, 65536] has 4,294,967,296 elements; the limit is 268,435,456 per value (raise it with --limit elements=N or KERA_LIMITS=elements=N)", "f32[65536, 65536]"),
    ("E0216", "export fn f(x: f32[16384, 16384]) -> f32[16384, 16384] { let a = x * x; let b = a + x; let c = b * a; let d = c - b; d }", "function 'f' computes 1,342,177,280 elements in all; the limit is 1,073,741,824 per function (raise it with --limit function_elements=N or KERA_LIMITS=function_elements=N)", "export fn f(x: f32[16384, 16384]) -> f32[16384, 16384] { let a = x * x; let b = a + x; let c = b * a; let d = c - b; d }"),
    ("E0301", "export fn f() -> i32 { 2147483648 }", "literal out of range for i32 (-2147483648..2147483647)", "2147483648"),
    ("E0301", "export fn f() -> i32 { 0xffffffff }", "literal out of range for i32 (-2147483648..2147483647)", "0xffffffff"),
    ("E0301", "export fn f() -> u32 { -1 }", "literal out of range for u32 (0..4294967295)", "-1"),
    ("E0301", "export fn f() -> f32 { 1e39 }", "literal out of range for f32 (it rounds to infinity)", "1e39"),
    ("E0302", "export fn f(n: i32) -> i32 { n + 1.5 }", "a float literal cannot have the integer type i32", "1.5"),
    ("E0302", "export fn f(b: bool) -> bool { b == 1 }", "a number literal cannot be a bool (write true or false)", "1"),
    ("E0303", "export fn f(x: f32[4]) -> f32 { x }", "expected f32, found f32[4]", "x"),
    ("E0303", "fn g(x: f32) -> f32 { x }\nexport fn f(n: i32) -> f32 { g(n) }", "expected f32, found i32", "n"),
    ("E0304", "export fn f(n: i32) -> i32 { n && n }", "'&&' needs bool operands, found i32 (for bits use '&')", "n && n"),
    ("E0304", "export fn f(n: i32) -> i32 { !n }", "'!' needs a bool operand, found i32 (for bits use '~')", "!n"),
    ("E0304", "export fn f(b: bool) -> bool { ~b }", "'~' is bitwise not on integers; use '!' on bool", "~b"),
    ("E0305", "export fn f(x: f32) -> f32 { f32 }", "'f32' is a type, not a value", "f32"),
    ("E0306", "export fn f(x: f32) -> f32 { [1, 2] }", "a list like [4, 4] is only allowed as an attribute value", "[1, 2]"),
    ("E0307", "export fn f(x: f32) -> f32 { (x, x) }", "expected f32, found a tuple", "(x, x)"),
    ("E0307", "export fn f(x: f32) -> f32 { x.0 }", "'.0' needs a tuple, found f32", "x.0"),
    ("E0307", "export fn f(x: f32) -> f32 { (x, x).2 }", "tuple of 2 has no field .2", "2"),
    ("E0307", "export fn f(x: f32) -> (f32, f32) { x }", "'f' returns 2 values, found one value", "x"),
    ("E0307", "export fn f(x: f32) -> f32 { let t = (x, x); " + "let t = (t, t); " * 100 + "x }", "tuples nest at most 100 deep", "(t, t)"),
    ("E0307", "export fn f(x: f32) -> (f32, f32) { ((x, x), x) }", "expected f32, found a tuple", "((x, x), x)"),
    ("E0307", "export fn f(x: f32) -> f32 { () }", "the empty tuple () has no value", "()"),
    ("E0307", "export fn f(x: f32) -> f32 { (x, x) + x }", "'+' takes tensors, not a tuple", "(x, x) + x"),
    ("E0308", "export fn f(x: f32[2]) -> f64[2] { x as f64[2] }", "'as' changes the dtype only; use reshape or broadcast for shapes", "f64[2]"),
    ("E0309", "export fn f(x: (f32, f32)) -> f32 { 1.0 }", "a parameter cannot be a tuple", "x: (f32, f32)"),
    ("E0309", "export fn f(x: f32) -> ((f32, f32), f32) { 1.0 }", "tuple types cannot be nested", "(f32, f32)"),
    ("E0309", "export fn f(x: f32) -> () { 1.0 }", "the empty tuple type () has no values", "()"),
    ("E0309", "export fn f(x: f32) -> f32 { let p: (f32, f32) = (x, x); x }", "a let binding has one type, not a tuple", "(f32, f32)"),
    ("E0309", "export fn f(x: f32) -> f32 { let (a, b): f32 = (x, x); a }", "a tuple pattern has no type annotation: its names take the value's types", "f32"),
    # destructuring, if, indexing
    ("E0310", "export fn f(x: f32) -> f32 { let (a, b) = (x, x, x); a }", "this pattern takes apart a tuple of 2, but the value is a tuple of 3", "(a, b)"),
    ("E0310", "export fn f(x: f32[4]) -> f32[4] { let ((a, b), c) = (x, x); c }", "this pattern takes apart a tuple of 2, but the value is f32[4], not a tuple", "(a, b)"),
    ("E0310", "export fn f(x: f32) -> f32 { let (a, a) = (x, x); a }", "'a' is bound twice in this pattern", "a"),
    ("E0311", "export fn f(x: f32) -> f32 { if x { x } else { -x } }", "the condition of an if must be bool, found f32", "x"),
    ("E0311", "export fn f(x: f32[4], c: bool[2]) -> f32[4] { if c { x } else { -x } }", "the condition of an if is bool[2] but the branches are f32[4]: a condition is a bool scalar or has the branches' shape", "c"),
    ("E0312", "export fn f(x: f32, c: bool) -> f32 { if c { x } else { 1i32 } }", "the branches of an if have different types: f32 and i32", "if c { x } else { 1i32 }"),
    ("E0312", "export fn f(x: f32[4], y: f32[2], c: bool) -> f32[4] { if c { x } else if !c { y } else { x } }", "the branches of an if have different types: f32[2] and f32[4]", "if !c { y } else { x }"),
    ("E0312", "export fn f(x: f32, c: bool) -> (f32, f32) { if c { (x, x) } else { (x, x, x) } }", "the branches of an if have different types: a tuple of 2 and a tuple of 3", "if c { (x, x) } else { (x, x, x) }"),
    ("E0313", "export fn f(x: f32[4]) -> f32 { x[4] }", "index 4 is out of range for axis 0 of f32[4]: valid indices are -4 to 3", "4"),
    ("E0313", "export fn f(x: f32[2, 3]) -> f32[2] { x[.., -4] }", "index -4 is out of range for axis 1 of f32[2, 3]: valid indices are -3 to 2", "-4"),
    ("E0313", "export fn f(x: f32[4]) -> f32[4] { x[0..5] }", "range 0..5 is out of range for axis 0 of f32[4]: its ends go from -4 to 4", "0..5"),
    ("E0313", "export fn f(x: f32[4]) -> f32[1] { x[3..-2] }", "range 3..-2 is empty on axis 0 of f32[4] (size 4); a range keeps at least one element", "3..-2"),
    ("E0313", "export fn f(x: f32[4]) -> f32 { x[0, 0] }", "f32[4] has 1 axis, but 2 items index it", "x[0, 0]"),
    ("E0313", "export fn f(x: f32) -> f32 { x[0] }", "f32 is a scalar: it has no axes to index", "x[0]"),
    ("E0313", "export fn f(x: f32) -> f32 { (x, x)[0] }", "only a tensor can be indexed, found a tuple of 2 (take a tuple apart with .0 or let (a, b) = ...)", "(x, x)[0]"),
    ("E0313", "export fn f(x: f32[4], n: i32) -> f32[2] { x[n..2] }", "a range end is an integer literal such as 2 or -1", "n"),
    # loops and dynamic indexing (more in test_loops_frontend.py)
    ("E0218", "export fn f(x: f32[4], i: i32) -> f32[5] { dynamic_slice(x, i, size = [5]) }", "dynamic_slice size [5] does not fit in f32[4]", "dynamic_slice(x, i, size = [5])"),
    ("E0315", "export fn f(x: f32[4], n: i32) -> f32[4] { for i in 0..n with (a = x) { a } }", "a loop bound is an integer literal such as 0 or -4: the trip count is static (index a value with the loop index instead)", "n"),
    ("E0316", "export fn f(x: f32[4]) -> f32[4] { for i in 0..16777217 with (a = x) { a } }", "the loop 0..16777217 runs more than 16,777,216 times", "0..16777217"),
    ("E0317", "export fn f(x: f32[4]) -> f32[4] { for i in 0..4 with (a = x) { a[0] } }", "the loop body gives f32 for the carried value 'a', which is f32[4]: a carried value keeps its initial value's type", "a[0]"),
    ("E0318", "export fn f(x: f32[4]) -> f32[4] { for i in 0..4 with (a = x) { (a, a) } }", "the loop carries one value ('a'), but its body gives a tuple of 2", "(a, a)"),
    ("E0319", "export fn f(x: f32[4]) -> f32[4] { for a in 0..4 with (a = x) { a } }", "'a' is bound twice in this loop: the index and the carried values need distinct names", "a"),
    ("E0320", "export fn f(x: f32[4], i: f32) -> f32 { x[i] }", "a dynamic index is an integer scalar (i32, i64, u32 or u64), found f32", "i"),
    # memory spaces, effects, ownership (secondary spans and hints: test_spaces_frontend.py)
    ("E0120", "export fn f(x: f32 @gpu) -> f32 { x }", "unknown memory space 'gpu' (spaces: host, device, pinned, unified)", "gpu"),
    ("E0121", "export fn f(x: f32 @device, y: f32) -> f32 { x + y }", "add needs operands in one memory space, got device and host", "x + y"),
    ("E0122", "export fn f(x: f32 @device) -> f32 { x }", "expected f32 @host, found f32 @device", "x"),
    ("E0123", "export fn f(x: f32) -> f32 effects(io) { x }", "unknown effect 'io'; the effects are: transfer", "io"),
    ("E0124", "export fn f(x: f32) -> f32 effects(transfer, transfer) { x }", "effect 'transfer' is listed twice", "transfer"),
    ("E0125", "export fn f(x: f32) -> f32 @device { transfer(x, to = device) }", "transfer has the effect transfer, which 'f' does not declare", "transfer(x, to = device)"),
    ("E0126", "export fn f(x: f32) -> f32 effects(transfer) { transfer(x, to = host) }", "this value is in host already: nothing to transfer", "transfer(x, to = host)"),
    ("E0127", "export fn f(x: f32) -> &f32 { x }", "'&' marks a parameter as borrowed; a result is a value (write the type alone)", "&"),
    ("E0128", "export fn f(x: f32) { }", "'f' has no result type and no '&mut' parameter: it would compute nothing (add '-> T', or a '&mut' parameter it updates)", "f"),
    ("E0401", "export fn f(x: f32) -> f32 effects(transfer) { let d = transfer(x, to = device); x }", "use of 'x' after it was moved", "x"),
    ("E0402", "export fn f(x: f32) -> f32 effects(transfer) { for i in 0..2 with (a = 0.0) { let d = transfer(x, to = device); a } }", "'x' is bound outside this loop and moved inside it: the next iteration would use a moved value", "x"),
    ("E0403", "export fn f(x: &f32) -> f32 @device effects(transfer) { transfer(x, to = device) }", "cannot move 'x' out of a borrow: it belongs to the caller", "x"),
    ("E0404", "export fn f(x: f32) -> f32 { x = 1.0; x }", "'x' cannot be assigned: only '&mut' parameters and 'let mut' names can", "x"),
    ("E0405", "fn g(a: &mut f32, b: &mut f32) { a = b; } export fn f(x: f32) -> f32 { let mut m = x; g(&mut m, &mut m); m }", "'m' is borrowed mutably twice in this call", "&mut m"),
    ("E0406", "export fn f(x: f32) -> f32 { let mut m = x; let r = &m; m = 2.0; r }", "cannot assign 'm' while it is borrowed", "m"),
    ("E0407", "export fn f(x: f32) -> f32 { let mut m = x; let r = &m; for i in 0..2 with (a = 0.0) { let t = r; m = t; a } }", "'m' is updated in this loop while a borrow of it taken before the loop is read in the body: the borrow would outlive the value it borrows into the next iteration", "m"),
    ("E0408", "export fn f(x: f32) -> f32 { &x }", "a borrow '&x' is only a call argument or the value of a let", "&x"),
    ("E0409", "fn g(a: &f32) -> f32 { a } export fn f(x: f32) -> f32 { g(x) }", "parameter 'a' of 'g' takes a borrow ('&'), found a value", "x"),
    ("E0410", "export fn f(x: f32) -> f32 { abs(x); x }", "this call of 'abs' is a statement, but it has no effect: its value would be lost", "abs(x)"),
]  # fmt: skip


@pytest.mark.parametrize(("code", "src", "message", "under"), CASES)
def test_diagnostic(code: str, src: str, message: str, under: str) -> None:
    result = compile_source(src)
    assert result.graph is None and not result.ok
    data = src.encode()
    got = [(d.code, d.message, data[d.start : d.end].decode()) for d in result.diagnostics]
    assert got[0] == (code, message, under), got


def documented_codes() -> set[str]:
    return set(re.findall(r"^\| (E0\d{3}) \|", DOCS.read_text(encoding="utf-8"), re.M))


def test_every_documented_code_is_tested() -> None:
    unreachable = {"E0210"}  # kera.ops rule the front end cannot trigger (lists are int lists)
    assert documented_codes() == {c for c, *_ in CASES} | unreachable


def test_rendering() -> None:
    src = "export fn f(x: f32) -> f32 {\n\tlet y = x + 1u32;\n    /* ünï */ x * 1i32\n}\n"
    result = compile_source(src, "k.kera")
    text = render_diagnostics(result.diagnostics, src, "k.kera")
    assert text == (
        "k.kera:2:10: error[E0201]: add needs operands of one dtype, got f32 and u32\n"
        " 2 | \tlet y = x + 1u32;\n"
        "   | \t        ^^^^^^^^\n"
        "k.kera:3:15: error[E0201]: mul needs operands of one dtype, got f32 and i32\n"
        " 3 |     /* ünï */ x * 1i32\n"
        "   |               ^^^^^^^^\n"
    )


def test_a_file_reports_all_its_independent_errors() -> None:
    src = (
        "export fn a(x: f32) -> f32 { x + 1i32 }\n"
        "export fn b(x: f32) -> f32 { y }\n"
        "export fn c(x: f32) -> f32 { let q = ; x }\n"
        "export fn d(x: f32[4]) -> f32 { sum(x, axis = 2) }\n"
    )
    codes = [d.code for d in compile_source(src).diagnostics]
    assert codes == ["E0201", "E0101", "E0010", "E0207"]


def test_poison_does_not_cascade() -> None:
    src = "export fn f(x: f32) -> f32 { let y = nope + 1.0; let z = y * x; abs(z) - y }"
    assert [d.code for d in compile_source(src).diagnostics] == ["E0101"]


def test_errors_in_a_callee_are_reported_once() -> None:
    src = (
        "fn g(x: f32) -> f32 { x + 1i32 }\n"
        "export fn a(x: f32) -> f32 { g(x) }\n"
        "export fn b(x: f32) -> f32 { g(x) * 2.0 }\n"
    )
    assert [d.code for d in compile_source(src).diagnostics] == ["E0201"]


def test_mutual_recursion_is_reported_not_expanded_forever() -> None:
    src = (
        "fn g(x: f32) -> f32 { h(x) }\n"
        "fn h(x: f32) -> f32 { g(x) }\n"
        "export fn f(x: f32) -> f32 { g(x) }\n"
    )
    diags = compile_source(src).diagnostics
    assert {d.code for d in diags} == {"E0105"}
    assert [(d.message, src[d.start : d.end], src[: d.start].count("\n")) for d in diags] == [
        ("recursive call (g -> h -> g); Kera has no recursion", "g", 1)  # the call in h
    ]


def test_long_recursion_chains_are_abbreviated() -> None:
    fns = [f"fn g{i}(x: f32) -> f32 {{ g{(i + 1) % 40}(x) }}" for i in range(40)]
    diags = compile_source("\n".join(fns)).diagnostics
    assert diags[0].message == (
        "recursive call (g0 -> g1 -> g2 -> ... 35 more ... -> g38 -> g39 -> g0);"
        " Kera has no recursion"
    )


# `return` (E0014): one diagnostic with the fix, never a cascade; a name `return` still works
RETURNS: list[tuple[str, list[tuple[str, str]]]] = [
    ("export fn f(x: f32[4]) -> f32[4] {\n    return x * 2.0\n}", [("E0014", "write `x * 2.0` without 'return'")]),
    ("export fn f(x: f32) -> f32 { if x > 0.0 { return x; } else { return -x; } }", [("E0014", "write `x` without 'return' and ';'"), ("E0014", "write `-x` without 'return' and ';'")]),
    ("export fn f(x: f32) -> (f32, f32) { return (x, x); }", [("E0014", "write `(x, x)` without 'return' and ';'")]),
    ("export fn f(x: f32[4]) -> f32[4] { for i in 0..4 with (a = x) { return a * 2.0; } }", [("E0014", "write `a * 2.0` without 'return' and ';'")]),
    ("export fn f(x: f32) -> f32 { return x; let y = x; y }", [("E0014", "for an early return, end the block with if c { a } else { b }")]),
    ("export fn f(x: f32) -> f32 { let y = x; return; }", [("E0014", "end it with an expression")]),
    # a separate mistake in the value is still reported, once
    ("export fn f(x: f32) -> f32 { return x + 1i32; }", [("E0014", "write `x + 1i32` without 'return' and ';'"), ("E0201", "add needs operands of one dtype, got f32 and i32")]),
]  # fmt: skip


@pytest.mark.parametrize(("src", "want"), RETURNS)
def test_return_is_one_diagnostic_with_the_fix(src: str, want: list[tuple[str, str]]) -> None:
    diags = compile_source(src).diagnostics
    prefix = "Kera has no 'return': a block ends with its value; "
    got = [(d.code, d.message.removeprefix(prefix)) for d in diags]
    assert got == want
    assert all(src[d.start : d.end] == "return" for d in diags if d.code == "E0014")


def test_return_fixed_as_the_hint_says_compiles() -> None:
    """Doing what the message says gives a program that compiles."""
    src = "export fn f(x: f32[4]) -> f32[4] {\n    let y = x * 2.0;\n    return y;\n}\n"
    (d,) = compile_source(src).diagnostics
    assert d.message.endswith("write `y` without 'return' and ';'")
    assert compile_source(src.replace("return y;", "y")).ok


@pytest.mark.parametrize(
    "src",
    [
        "export fn f(x: f32) -> f32 { let return = x; return - x }",
        "export fn f(x: f32) -> f32 { let return = x; return * x }",
        "export fn f(x: f32) -> f32 { let return = x; return }",
        "export fn f(return: f32[2]) -> f32 { return[0] }",
        "fn return(x: f32) -> f32 { x }\nexport fn f(x: f32) -> f32 { return(x) }",
    ],
)
def test_a_name_return_is_still_a_name(src: str) -> None:
    assert compile_source(src).ok


def test_indexing_a_tensor_needs_no_hint() -> None:
    """``x[0]`` on a tensor is indexing (the language has it), so no hint points at slice;
    on a scalar it is E0313 (in CASES)."""
    assert compile_source("export fn f(x: f32[4]) -> f32 { x[0] }").ok
    assert compile_source("export fn f(x: f32[4], i: i32) -> f32 { x[i] }").ok


def test_a_type_resolved_before_is_checked_against_the_limits_now_in_force() -> None:
    src = "export fn f(x: f32[64, 64]) -> f32[64, 64] { x }"
    assert compile_source(src).ok  # resolved once (and kept by its text)
    saved = limits.current()
    limits.set_limits(dataclasses.replace(saved, elements=100))
    try:
        diags = compile_source(src).diagnostics
    finally:
        limits.set_limits(saved)
    assert {d.code for d in diags} == {"E0215"}
    assert compile_source(src).ok
