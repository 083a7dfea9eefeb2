"""Item-level checking: function signatures, type syntax, reserved names, recursion.

:func:`collect` turns the functions of a source file into :class:`Signature` records (types
resolved, parameters named) and reports, each once:

* E0103 a function defined twice (the later definitions are ignored);
* E0104 two parameters with one name;
* E0106 a dtype name or builtin used as a function, parameter or variable name;
* E0110 an unknown type name; E0210/E0211 a bad shape (rules of ``kera.ops.check_shape``);
* E0309 a type form the language does not have (tuple parameters, nested or empty tuples).

Expression checking, graph building and recursion (E0105, found while expanding calls) live
in ``kera.syntax.build``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kera import limits
from kera.dtypes import DType
from kera.ops import TensorType, TypeRuleError, check_shape
from kera.syntax import literals
from kera.syntax.builtins import BUILTIN_NAMES
from kera.syntax.diagnostics import Diagnostic, LineIndex
from kera.syntax.tree import (
    Block,
    FnDef,
    SourceFile,
    SyntaxNode,
    SyntaxToken,
    TensorTypeNode,
    TupleTypeNode,
    tree_bytes,
)

DTYPES = {d.value: d for d in DType}


#: every builtin function name (ops of the contract and the math library)
@dataclass(slots=True)
class Signature:
    """A function as the checker sees it.  ``results`` is None when the result type did not
    resolve; ``ok`` is False when any part of the signature had an error."""

    name: str
    fn: FnDef
    export: bool
    params: list[tuple[str, TensorType | None]] = field(default_factory=list)
    results: list[TensorType] | None = None
    ok: bool = True
    block: Block | None = None  # the body, found once (``signature`` sets it)

    @property
    def body(self) -> Block | None:
        return self.block


class Reporter:
    """Collects diagnostics; ``error`` returns None so callers can ``return r.error(...)``."""

    def __init__(self, index: LineIndex) -> None:
        self.index = index
        self.diagnostics: list[Diagnostic] = []

    def error(self, code: str, message: str, span: tuple[int, int]) -> Any:
        """Report; returns None, typed Any so ``return r.error(...)`` fits any optional."""
        self.diagnostics.append(Diagnostic(code, message, span[0], span[1]))
        return None

    def line(self, offset: int) -> int:
        return self.index.position(offset)[0]


def reserved(name: str) -> str | None:
    """Why ``name`` cannot be bound by the user, or None."""
    if name in DTYPES:
        return f"'{name}' is a type name"
    return None


def resolve_type(node: SyntaxNode | None, r: Reporter) -> TensorType | list[TensorType] | None:
    """A tensor type, a list of them (a tuple type of two or more), or None after an error."""
    if node is None:
        return None
    if isinstance(node, TupleTypeNode):
        return _tuple_type(node, r)
    assert isinstance(node, TensorTypeNode)
    return tensor_type(node, r)


def tensor_type(node: TensorTypeNode, r: Reporter) -> TensorType | None:
    """The type ``node`` names, or None after reporting why not.  A type that resolves
    without a diagnostic is kept by its source text (a file names few distinct types)."""
    key = tree_bytes(node.green)
    if limits.current() is not _RESOLVED_UNDER[0]:  # shapes are checked against the limits
        _RESOLVED.clear()
        _RESOLVED_UNDER[0] = limits.current()
    known = _RESOLVED.get(key)
    if known is not None:
        return known
    reported = len(r.diagnostics)
    t = _resolve_tensor_type(node, r)
    if t is not None and len(r.diagnostics) == reported:
        if len(_RESOLVED) >= _RESOLVED_MAX:
            _RESOLVED.clear()
        _RESOLVED[key] = t
    return t


#: a tensor type's source text -> the type (see tensor_type), under the limits in force
_RESOLVED: dict[bytes, TensorType] = {}
_RESOLVED_UNDER: list[limits.Limits | None] = [None]
_RESOLVED_MAX = 1 << 12


def _resolve_tensor_type(node: TensorTypeNode, r: Reporter) -> TensorType | None:
    tok = node.dtype()
    if tok is None:
        return None
    dtype = DTYPES.get(tok.text)
    if dtype is None:
        return r.error("E0110", f"unknown type '{tok.text}' (types: {', '.join(DTYPES)})", tok.span)
    dims = node.dims()
    if dims is None:
        return TensorType(dtype, ())
    shape = [_dim(t, r) for t in dims]
    if any(d is None for d in shape):
        return None
    try:
        return TensorType(dtype, check_shape(tuple(d for d in shape if d is not None)))
    except TypeRuleError as e:
        return r.error(e.code, e.message, node.span)


def _dim(tok: SyntaxToken, r: Reporter) -> int | None:
    lit = literals.parse(tok.text)
    if lit is None:
        return None
    if lit.suffix is not None:
        return r.error("E0214", "a dimension is a plain integer, without a type suffix", tok.span)
    return lit.num


def _tuple_type(node: TupleTypeNode, r: Reporter) -> TensorType | list[TensorType] | None:
    parts = node.types()
    if not parts:
        return r.error("E0309", "the empty tuple type () has no values", node.span)
    out: list[TensorType] = []
    for part in parts:
        if isinstance(part, TupleTypeNode):
            return r.error("E0309", "tuple types cannot be nested", part.span)
        assert isinstance(part, TensorTypeNode)
        t = tensor_type(part, r)
        if t is None:
            return None
        out.append(t)
    return out[0] if len(out) == 1 else out


def collect(source: SourceFile, r: Reporter) -> dict[str, Signature]:
    sigs: dict[str, Signature] = {}
    for fn in source.fns():
        tok = fn.name()
        if tok is None:
            continue
        sig = signature(fn, tok, r)
        first = sigs.get(tok.text)
        if first is not None:
            line = r.line(first.fn.span[0])
            r.error("E0103", f"function '{tok.text}' is already defined on line {line}", tok.span)
            continue
        sigs[tok.text] = sig
    return sigs


def signature(fn: FnDef, tok: SyntaxToken, r: Reporter) -> Signature:
    sig = Signature(tok.text, fn, fn.is_export())
    why = reserved(tok.text) or (
        f"'{tok.text}' is a builtin function" if tok.text in BUILTIN_NAMES else None
    )
    if why:
        r.error("E0106", f"{why} and cannot name a function", tok.span)
        sig.ok = False
    seen: set[str] = set()
    for p in fn.params():
        name = p.name()
        if name is None:
            sig.ok = False
            continue
        t = resolve_type(p.type(), r)
        if isinstance(t, list):
            r.error("E0309", "a parameter cannot be a tuple", p.span)
            t = None
        if name.text in seen:
            r.error("E0104", f"parameter '{name.text}' is declared twice", name.span)
            sig.ok = False
        elif reserved(name.text):
            r.error("E0106", f"{reserved(name.text)} and cannot name a parameter", name.span)
            sig.ok = False
        seen.add(name.text)
        sig.params.append((name.text, t))
        sig.ok = sig.ok and t is not None
    ret = resolve_type(fn.ret_type(), r)
    sig.results = None if ret is None else ret if isinstance(ret, list) else [ret]
    sig.block = fn.body()
    sig.ok = sig.ok and sig.results is not None and sig.block is not None
    return sig
