"""Item-level checking: function signatures, type syntax, reserved names, recursion.

:func:`collect` turns the functions of a source file into :class:`Signature` records (types
resolved, parameters named) and reports, each once:

* E0103 a function defined twice (the later definitions are ignored);
* E0104 two parameters with one name;
* E0106 a dtype name or builtin used as a function, parameter or variable name;
* E0110 an unknown type name; E0210/E0211 a bad shape (rules of ``kera.ops.check_shape``);
* E0309 a type form the language does not have (tuple parameters, nested or empty tuples);
* E0120 an unknown memory space; E0123/E0124 an unknown or repeated effect name; E0127 ``&``
  outside a parameter type; E0128 a function without a result type and no ``&mut`` parameter.

Expression checking, graph building and recursion (E0105, found while expanding calls) live
in ``kera.syntax.build``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kera import limits
from kera.dtypes import DType
from kera.ops import DEFAULT_SPACE, EFFECT_NAMES, SPACES, TensorType, TypeRuleError, check_shape
from kera.syntax import literals
from kera.syntax.builtins import BUILTIN_NAMES
from kera.syntax.diagnostics import Diagnostic, LineIndex, Note
from kera.syntax.tree import (
    Block,
    Effects,
    FnDef,
    RefMode,
    RetType,
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
    #: per parameter: "" (a value), "&" (a borrow) or "&mut" (an in-out buffer)
    modes: list[str] = field(default_factory=list)
    #: per parameter and per result: its memory space (``host`` by default)
    param_spaces: list[str] = field(default_factory=list)
    result_spaces: list[str] = field(default_factory=list)
    #: the declared effects (sorted) and the ``effects(...)`` clause's span, if any
    effects: tuple[str, ...] = ()
    effects_span: tuple[int, int] | None = None
    no_result: bool = False  # no ``-> T``: the function only updates its &mut buffers

    @property
    def inouts(self) -> list[int]:
        """The positions of the ``&mut`` parameters, in order."""
        return [i for i, m in enumerate(self.modes) if m == "&mut"]

    @property
    def body(self) -> Block | None:
        return self.block


class Reporter:
    """Collects diagnostics; ``error`` returns None so callers can ``return r.error(...)``."""

    def __init__(self, index: LineIndex) -> None:
        self.index = index
        self.diagnostics: list[Diagnostic] = []

    def error(
        self,
        code: str,
        message: str,
        span: tuple[int, int],
        notes: tuple[tuple[tuple[int, int], str], ...] = (),
        hint: str = "",
    ) -> Any:
        """Report; returns None, typed Any so ``return r.error(...)`` fits any optional.
        ``notes`` are (span, label) pairs shown after the primary span; ``hint`` the fix."""
        extra = tuple(Note(a, b, label) for (a, b), label in notes)
        self.diagnostics.append(Diagnostic(code, message, span[0], span[1], extra, hint))
        return None

    def line(self, offset: int) -> int:
        return self.index.position(offset)[0]


def reserved(name: str) -> str | None:
    """Why ``name`` cannot be bound by the user, or None."""
    if name in DTYPES:
        return f"'{name}' is a type name"
    return None


#: the memory spaces, as written after ``@``
SPACE_NAMES = ", ".join(SPACES)


def type_space(node: SyntaxNode | None, r: Reporter) -> str:
    """The memory space a tensor type names (``host`` without ``@``); an unknown name is
    reported (E0120) and read as ``host`` so that checking goes on."""
    if not isinstance(node, TensorTypeNode):
        return DEFAULT_SPACE
    sp = node.space()
    tok = sp.name() if sp is not None else None
    if tok is None:
        return DEFAULT_SPACE
    if tok.text not in SPACES:
        r.error("E0120", f"unknown memory space '{tok.text}' (spaces: {SPACE_NAMES})", tok.span)
        return DEFAULT_SPACE
    return tok.text


def type_spaces(node: SyntaxNode | None, r: Reporter) -> list[str]:
    """The space of each element of a (tuple) type."""
    if isinstance(node, TupleTypeNode):
        return [type_space(t, r) for t in node.types()]
    return [type_space(node, r)]


def no_ref(owner: SyntaxNode | None, r: Reporter, where: str) -> None:
    """E0127 for a ``&``/``&mut`` written before a type that is not a parameter's."""
    mode = owner.node(RefMode) if owner is not None else None
    if mode is not None:
        r.error(
            "E0127",
            f"'&' marks a parameter as borrowed; {where} is a value (write the type alone)",
            mode.span,
        )


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
        mode = p.mode()
        sig.modes.append("" if mode is None else "&mut" if mode.is_mut() else "&")
        sig.param_spaces.append(type_space(p.type(), r))
        sig.ok = sig.ok and t is not None
    ret_node = fn.ret_type()
    ret = resolve_type(ret_node, r)
    sig.results = None if ret is None else ret if isinstance(ret, list) else [ret]
    sig.result_spaces = type_spaces(ret_node, r) if ret_node is not None else []
    no_ref(fn.node(RetType), r, "a result")
    sig.block = fn.body()
    _declared_effects(sig, fn.effects(), r)
    if sig.results is None and fn.node(RetType) is None and sig.block is not None:
        sig.results, sig.no_result = [], True
        if not sig.inouts:
            r.error(
                "E0128",
                f"'{tok.text}' has no result type and no '&mut' parameter: it would compute "
                "nothing (add '-> T', or a '&mut' parameter it updates)",
                tok.span,
            )
            sig.ok = False
    sig.ok = sig.ok and sig.results is not None and sig.block is not None
    return sig


def _declared_effects(sig: Signature, clause: Effects | None, r: Reporter) -> None:
    """``effects(a, b)``: known names (E0123), each once (E0124), kept sorted."""
    if clause is None:
        return
    sig.effects_span = clause.span
    names: set[str] = set()
    for tok in clause.names():
        if tok.text in names:
            r.error("E0124", f"effect '{tok.text}' is listed twice", tok.span)
        elif tok.text not in EFFECT_NAMES:
            known = ", ".join(sorted(EFFECT_NAMES))
            why = (
                "'nondet' is reserved: no op of the contract is nondeterministic (docs/language.md)"
                if tok.text == "nondet"
                else f"unknown effect '{tok.text}'"
            )
            r.error("E0123", f"{why}; the effects are: {known}", tok.span)
        else:
            names.add(tok.text)
    sig.effects = tuple(sorted(names))
