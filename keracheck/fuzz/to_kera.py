"""Graph -> Kera source: the printer behind ``.kera`` reproducers.

``render(fn, name)`` prints one exported function whose front-end compilation is the same
graph, node for node, so the source has ``fn``'s fingerprint (``roundtrip`` checks it).  Each
operation becomes one typed ``let`` in canonical topological order, named ``v<k>``; parameters
keep their names; the results are returned as a tuple.  Only syntax from ``docs/language.md`` is
used:

* operators for ``+ - * / % & | ^ << >> == != < <= > >=``, prefix ``-`` (neg), ``!`` (bool not)
  and ``~`` (integer not), ``x as T`` (convert);
* calls with keyword attributes for every other op: ``min(a, b)``, ``sum(x, axis = 0)``,
  ``broadcast(x, shape = [3])``, ``bitcast(x, to = f32)``, ``iota(shape = [4], axis = 0, to = i32)``;
* math-library calls as calls, ``exp(x)``: the front end expands ``exp(x)`` into the very nodes
  the graph holds (``kera.mathlib``; the calls are found by ``keracheck.fuzz.calls``), so one
  ``let`` stands for the call's whole expansion;
* scalar constants as literals in a let of their type: integers in decimal with a suffix
  (``-2147483648i32``), floats as the shortest decimal that rounds back to the same bits
  (``1e-45f32``, ``-0.0f64``), ``inf``, ``-inf``, ``nan`` (the canonical NaN) and ``-nan``;
  ``true`` and ``false``.

* ``dynamic_slice(x, i0, i1, size = [..])`` and ``dynamic_update_slice(x, v, i0, ...)`` with
  the start indices as arguments (the start vector the front end assembles from them, and
  only that form, ``kera.ir.start_pieces``, is not printed on its own);
* a loop as ``let (a, b) = for i in lo..hi with (c0 = x, c1 = y) { ...; (n0, n1) };`` (``_``
  for a carried value the function does not use), its body's lets inside the block, captured
  values by their outer names;
* a ``call`` as ``let (a, b) = name(x, y);`` (``_`` likewise), each distinct callee printed once
  as a helper ``fn`` before the export (named after the callee when that name is free, else
  ``<prefix>fn<k>``), its parameters ``p0, p1, ...`` (the front end names a callee's parameters
  by position, so any names give the same graph);
* a ``transfer`` as ``transfer(copy(v), to = device)`` (``copy`` leaves ``v`` usable and builds
  no node), a value outside host memory with its space in its type (``f32[4] @device``), and a
  function with effects declaring them (``-> f32 effects(transfer)``); the front end numbers
  the transfers in program order, which is the order the lets are printed in.

What Kera source cannot spell raises :class:`PrintError`: a tensor constant (write
``broadcast`` of a scalar), a NaN constant with a payload (write ``bitcast`` of an integer, as
``bitcast(0x7fc00001u32, to = f32)``), a parameter name that is not an identifier.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kera.dtypes import CANONICAL_NAN, DType
from kera.ir import (
    Function,
    Node,
    const_value,
    loop_body,
    loop_group,
    param_space,
    spaces_of,
    start_pieces,
)
from kera.ops import ATTRS, DYNAMIC, Op, TensorType
from kera.syntax.builtins import BUILTIN_NAMES
from keracheck.fuzz import calls


class PrintError(ValueError):
    """A graph (or node) with no Kera source spelling."""


INFIX = {
    Op.ADD: "+",
    Op.SUB: "-",
    Op.MUL: "*",
    Op.DIV: "/",
    Op.REM: "%",
    Op.AND: "&",
    Op.OR: "|",
    Op.XOR: "^",
    Op.SHL: "<<",
    Op.SHR: ">>",
    Op.EQ: "==",
    Op.NE: "!=",
    Op.LT: "<",
    Op.LE: "<=",
    Op.GT: ">",
    Op.GE: ">=",
}
#: ops printed as calls of their own name, operands first, then their attributes in the order
#: of ``kera.ops.ATTRS``
_CALLED = (
    Op.ABS, Op.SQRT, Op.FLOOR, Op.CEIL, Op.TRUNC, Op.ROUND, Op.MIN, Op.MAX, Op.COPYSIGN, Op.FMA,
    Op.SELECT, Op.DOT, Op.MATMUL, Op.SUM, Op.PROD, Op.AMIN, Op.AMAX, Op.BITCAST, Op.BROADCAST,
    Op.RESHAPE, Op.TRANSPOSE, Op.SLICE, Op.CONCAT, Op.IOTA,
)  # fmt: skip
CALL_ATTRS: dict[Op, tuple[str, ...]] = {op: tuple(ATTRS.get(op, {})) for op in _CALLED}
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def type_text(t: TensorType, space: str | None = None) -> str:
    """``t`` in source form, with `` @space`` for a value outside host memory."""
    text = f"{t.dtype}[{', '.join(map(str, t.shape))}]" if t.shape else str(t.dtype)
    return text if space in (None, "host") else f"{text} @{space}"


def attr_text(value: object) -> str:
    if isinstance(value, bytes):
        raise PrintError("a bytes attribute has no source form")
    if isinstance(value, tuple):
        return "[" + ", ".join(map(str, value)) + "]"
    return str(value)


def float_literal(value: Any, dt: DType) -> str:
    """The literal for one float: shortest round-tripping decimal, inf, nan or -nan."""
    bits = int(np.array(value, dtype=dt.np).view(dt.uint))
    sign = "-" if bits >> (dt.bits - 1) else ""
    if np.isnan(value):
        if bits & ~(1 << (dt.bits - 1)) != CANONICAL_NAN[dt]:
            raise PrintError(
                f"a {dt} NaN with payload 0x{bits:x} has no literal: bitcast an integer to it"
            )
        return f"{sign}nan"
    if np.isinf(value):
        return f"{sign}inf"
    text = str(dt.np.type(value))  # numpy prints the shortest string that reads back the same
    return f"{text}{dt}"


def literal(node: Node) -> str:
    if node.shape:
        raise PrintError(
            f"a constant of type {type_text(node.type)} has no literal: broadcast a scalar"
        )
    value = const_value(node).reshape(())
    if node.dtype is DType.BOOL:
        return "true" if bool(value) else "false"
    if node.dtype.is_float:
        return float_literal(value, node.dtype)
    return f"{int(value)}{node.dtype}"


def _call(name: str, args: Sequence[str], node: Node, attrs: Sequence[str]) -> str:
    parts = [*args, *(f"{a} = {attr_text(node.attr(a))}" for a in attrs)]
    return f"{name}({', '.join(parts)})"


def expression(node: Node, names: Callable[[Node], str]) -> str:
    """The source of one non-parameter node, its operands named by ``names``."""
    args = [names(i) for i in node.inputs]
    op = node.op
    if op is Op.CONST:
        return literal(node)
    if op in INFIX:
        return f"{args[0]} {INFIX[op]} {args[1]}"
    if op is Op.NEG:
        return f"-{args[0]}"
    if op is Op.NOT:
        return f"!{args[0]}" if node.dtype is DType.BOOL else f"~{args[0]}"
    if op is Op.CONVERT:
        return f"{args[0]} as {attr_text(node.attr('to'))}"
    if op is Op.TRANSFER:
        return f"transfer(copy({args[0]}), to = {attr_text(node.attr('to'))})"
    if op in CALL_ATTRS:
        return _call(op.value, args, node, CALL_ATTRS[op])
    raise PrintError(f"no source form for op {op}")


def _starts(node: Node, names: Callable[[Node], str]) -> list[str]:
    """The start-index arguments of a dynamic op (trailing zeros left out)."""
    pieces = start_pieces(node.inputs[-1])
    while pieces and pieces[-1] is None:
        pieces.pop()
    if not pieces or any(p is None for p in pieces):
        raise PrintError("a start vector not of the front end's form has no source spelling")
    return [names(p) for p in pieces if p is not None]


def _dynamic(node: Node, names: Callable[[Node], str]) -> str:
    args = [names(x) for x in node.inputs[:-1]] + _starts(node, names)
    if node.op is Op.DYNAMIC_SLICE:
        args.append(f"size = {attr_text(node.attr('size'))}")
    return f"{node.op.value}({', '.join(args)})"


class _Printer:
    """One function's source lines; names are unique across the function and its bodies."""

    def __init__(self, prefix: str, helpers: dict[bytes, tuple[str, list[str]]]) -> None:
        self.prefix = prefix
        self.count = 0
        self.depth = 0
        self.helpers = helpers  # callee region hash -> (name, source lines), shared

    def fresh(self) -> str:
        self.count += 1
        return f"{self.prefix}{self.count - 1}"

    def region(self, fn: Function, names: dict[int, str], indent: str) -> list[str]:
        """The lets of ``fn``'s nodes (its parameters already named in ``names``)."""
        lines: list[str] = []
        units = calls.analyse(fn)
        skip = calls.start_internals(units.nodes)
        where = spaces_of(fn.nodes())
        done: dict[tuple[object, ...], list[Node]] = {}
        for node in units.nodes:
            if node.op is Op.PARAM or id(node) in skip or id(node) in names:
                continue
            call = units.call(node)
            if node.op is Op.LOOP:
                lines += self.loop(node, units.nodes, names, indent, done)
                continue
            if node.op is Op.CALL:
                lines += self.call(node, units.nodes, names, indent)
                continue
            if call is not None:
                text = f"{call.name}({names[id(call.arg)]})"
            elif node.op in DYNAMIC:
                text = _dynamic(node, lambda n: names[id(n)])
            else:
                text = expression(node, lambda n: names[id(n)])
            names[id(node)] = self.fresh()
            kind = type_text(node.type, where.get(id(node)))
            lines.append(f"{indent}let {names[id(node)]}: {kind} = {text};")
        return lines

    def siblings(self, node: Node, nodes: Sequence[Node]) -> list[Node | None]:
        """The nodes of ``node``'s loop or call group in ``nodes``, by result index."""
        out: list[Node | None] = [None] * len(loop_body(node).results)
        for n in nodes:
            if n.op is node.op and loop_group(n) == loop_group(node):
                out[n.int_attr("result")] = n
        return out

    def bind(self, siblings: Sequence[Node | None], names: dict[int, str]) -> str:
        """Name each sibling; the ``let`` target (``_`` for a result nothing uses)."""
        bound = [self.fresh() if s is not None else "_" for s in siblings]
        for s, name in zip(siblings, bound, strict=True):
            if s is not None:
                names[id(s)] = name
        return bound[0] if len(bound) == 1 else f"({', '.join(bound)})"

    def call(
        self, node: Node, nodes: Sequence[Node], names: dict[int, str], indent: str
    ) -> list[str]:
        """The call of ``node``'s group as one let; its callee printed as a helper once."""
        name = self.helper(loop_body(node))
        args = ", ".join(names[id(x)] for x in node.inputs)
        target = self.bind(self.siblings(node, nodes), names)
        return [f"{indent}let {target} = {name}({args});"]

    def helper(self, fn: Function) -> str:
        """The source name of callee ``fn``, printing its definition the first time."""
        if fn.region_hash in self.helpers:
            return self.helpers[fn.region_hash][0]
        taken = {n for n, _ in self.helpers.values()}
        name = fn.name
        if name in taken or name.startswith(self.prefix) or name in BUILTIN_NAMES:
            name = f"{self.prefix}fn{len(self.helpers)}"
        self.helpers[fn.region_hash] = (name, [])  # reserved before its body is printed
        params = [f"p{i}" for i in range(len(fn.params))]
        names: dict[int, str] = {id(p): q for p, q in zip(fn.params, params, strict=True)}
        body = _Printer(self.prefix, self.helpers).region(fn, names, "    ")
        signature = ", ".join(
            f"{q}: {_param_type(p)}" for q, p in zip(params, fn.params, strict=True)
        )
        self.helpers[fn.region_hash] = (name, _definition("fn", name, signature, fn, names, body))
        return name

    def loop(
        self,
        node: Node,
        nodes: Sequence[Node],
        names: dict[int, str],
        indent: str,
        done: dict[tuple[object, ...], list[Node]],
    ) -> list[str]:
        """The whole loop of ``node``'s group as one let, every sibling in ``nodes`` named."""
        body = loop_body(node)
        k = len(body.results)
        siblings = self.siblings(node, nodes)
        self.depth += 1
        index = f"{self.prefix}i{self.depth}"
        inner: dict[int, str] = {id(body.params[0]): index}
        carried = [f"{self.prefix}c{self.count}_{j}" for j in range(k)]
        inner.update({id(p): c for p, c in zip(body.params[1 : k + 1], carried, strict=True)})
        for p, x in zip(body.params[k + 1 :], node.inputs[k:], strict=True):
            inner[id(p)] = names[id(x)]
        inits = ", ".join(
            f"{c} = {names[id(x)]}" for c, x in zip(carried, node.inputs, strict=False)
        )
        lo, trips = node.int_attr("lo"), node.int_attr("trips")
        lines = self.region(body, inner, indent + "    ")
        self.depth -= 1
        results = [inner[id(r)] for r in body.results]
        value = results[0] if k == 1 else f"({', '.join(results)})"
        target = self.bind(siblings, names)
        return [
            f"{indent}let {target} = for {index} in {lo}..{lo + trips} with ({inits}) {{",
            *lines,
            f"{indent}    {value}",
            f"{indent}}};",
        ]


def render(fn: Function, name: str, header: Sequence[str] = ()) -> str:
    """Kera source of ``fn`` exported as ``name``; comment lines from ``header`` first."""
    if not _IDENT.match(name):
        raise PrintError(f"function name {name!r} is not an identifier")
    params = [str(p.attr("name")) for p in fn.params]
    for p in params:
        if not _IDENT.match(p):
            raise PrintError(f"parameter name {p!r} is not an identifier")
    prefix = "v"
    while any(p.startswith(prefix) for p in params):
        prefix += "v"
    names: dict[int, str] = {id(p): str(p.attr("name")) for p in fn.params}
    helpers: dict[bytes, tuple[str, list[str]]] = {}
    printer = _Printer(prefix, helpers)
    for taken in (name, *params):  # names a helper must not take (keys no region hash has)
        helpers[taken.encode()] = (taken, [])
    body = printer.region(fn, names, "    ")
    signature = ", ".join(f"{n}: {_param_type(p)}" for n, p in zip(params, fn.params, strict=True))
    lines = [f"// {h}" if h else "//" for h in header]
    for _, text in helpers.values():
        lines += [*text, ""] if text else []
    lines += _definition("export fn", name, signature, fn, names, body)
    return "\n".join(lines) + "\n"


def _definition(
    keyword: str, name: str, signature: str, fn: Function, names: dict[int, str], body: list[str]
) -> list[str]:
    results = [names[id(r)] for r in fn.results]
    where = spaces_of(fn.nodes())
    ret_types = [type_text(r.type, where.get(id(r))) for r in fn.results]
    ret = ret_types[0] if len(ret_types) == 1 else f"({', '.join(ret_types)})"
    value = results[0] if len(results) == 1 else f"({', '.join(results)})"
    effects = f" effects({', '.join(fn.declared)})" if fn.declared else ""
    return [f"{keyword} {name}({signature}) -> {ret}{effects} {{", *body, f"    {value}", "}"]


def _param_type(p: Node) -> str:
    return type_text(p.type, param_space(p))


def roundtrip(fn: Function, text: str) -> str | None:
    """None when ``text`` compiles to a function with fn's fingerprint, else why not."""
    from kera import frontend

    result = frontend.compile_source(text, "<fuzz>")
    if result.graph is None or not result.ok:
        return frontend.render_diagnostics(result.diagnostics, text, "<fuzz>").strip()
    got = [f.fingerprint for f in result.graph.functions.values()]
    if got != [fn.fingerprint]:
        return f"the source compiles to fingerprint(s) {got}, expected {fn.fingerprint}"
    return None
