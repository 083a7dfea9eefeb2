"""Definitions and references, by walking the tree with the language's scoping rules.

Functions live in their own namespace (the file); variables are parameters, ``let`` names
(tuple patterns included; ``_`` binds nothing), a loop's index and its carried values.  A
``let`` binds from the next statement on, a block is a scope, a loop's index and carried names
are seen by its body only (its bounds and initial values are outside).  These rules are the
handful of node kinds in :data:`SCOPES`; every other node, including kinds added after this
was written, is walked generically (its children in order, in the same scope), so a new
expression form has its names resolved without a change here.

Each ``fn`` item is resolved on its own, with offsets relative to its start, and cached by
its green node (an edit elsewhere leaves the node, and so its names, as they were).  The walk
uses an explicit stack: binary chains nest as deep as they are long.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kera.syntax.kinds import SyntaxKind
from kera.syntax.tree import GreenNode, SyntaxNode, SyntaxToken, red

K = SyntaxKind
Span = tuple[int, int]


@dataclass(eq=False, slots=True)
class Symbol:
    """A variable of one function: what binds it, and where (relative to the item)."""

    name: str
    kind: str  # "parameter", "let", "index", "carried"
    span: Span  # the name token where it is bound
    refs: list[Span] = field(default_factory=list)
    value: Span | None = None  # a carried value's initial value (its type is the value's)


@dataclass(slots=True)
class ItemNames:
    """The names of one ``fn`` item, offsets relative to its start."""

    fn_name: Span | None = None
    symbols: list[Symbol] = field(default_factory=list)
    #: where each variable name is read or bound -> its symbol
    at: dict[int, Symbol] = field(default_factory=dict)
    #: every other name read: calls and uses of function names, builtins, unknown names
    fn_refs: list[tuple[Span, str]] = field(default_factory=list)
    #: attribute names of builtin calls (``axis = 1``)
    attributes: list[Span] = field(default_factory=list)


Scope = dict[str, Symbol]
Step = tuple[SyntaxNode, Scope] | Callable[[], None]


class _Walk:
    def __init__(self, out: ItemNames) -> None:
        self.out = out
        self.stack: list[Step] = []

    def run(self, fn: SyntaxNode) -> None:
        self.stack.append((fn, {}))
        while self.stack:
            step = self.stack.pop()
            if callable(step):
                step()
                continue
            node, scope = step
            handler = SCOPES.get(node.kind)
            if handler is not None:
                handler(self, node, scope)
            else:
                self.children(node.nodes(), scope)

    def children(self, nodes: list[SyntaxNode], scope: Scope) -> None:
        self.stack.extend((n, scope) for n in reversed(nodes))

    def bind(
        self, tok: SyntaxToken | None, kind: str, scope: Scope, value: Span | None = None
    ) -> None:
        if tok is None or tok.text == "_":
            return
        sym = Symbol(tok.text, kind, tok.span, value=value)
        self.out.symbols.append(sym)
        self.out.at[tok.offset] = sym
        scope[tok.text] = sym

    # -- the kinds that shape scopes
    def fn_def(self, node: SyntaxNode, scope: Scope) -> None:
        inner: Scope = {}
        for child in node.nodes():
            if child.kind == K.NAME:
                tok = child.token(K.IDENT)
                self.out.fn_name = tok.span if tok else None
            elif child.kind == K.PARAM_LIST:
                for p in child.nodes():
                    for part in p.nodes():
                        if part.kind == K.NAME:
                            self.bind(part.token(K.IDENT), "parameter", inner)
        self.children([c for c in node.nodes() if c.kind not in (K.NAME, K.PARAM_LIST)], inner)

    def block(self, node: SyntaxNode, scope: Scope) -> None:
        self.children(node.nodes(), dict(scope))

    def let(self, node: SyntaxNode, scope: Scope) -> None:
        patterns = [c for c in node.nodes() if c.kind in (K.NAME, K.TUPLE_PAT)]
        rest = [c for c in node.nodes() if c.kind not in (K.NAME, K.TUPLE_PAT)]

        def bind() -> None:
            for p in patterns:
                self.bind_pattern(p, "let", scope)

        self.stack.append(bind)
        self.children(rest, scope)

    def bind_pattern(self, pattern: SyntaxNode, kind: str, scope: Scope) -> None:
        todo = [pattern]
        while todo:
            p = todo.pop(0)
            if p.kind == K.NAME:
                self.bind(p.token(K.IDENT), kind, scope)
            else:
                todo[:0] = [c for c in p.nodes() if c.kind in (K.NAME, K.TUPLE_PAT)]

    def for_(self, node: SyntaxNode, scope: Scope) -> None:
        inner = dict(scope)
        body: list[SyntaxNode] = []
        outside: list[SyntaxNode] = []
        binds: list[tuple[SyntaxToken | None, str, Span | None]] = []
        for child in node.nodes():
            if child.kind == K.NAME:
                binds.append((child.token(K.IDENT), "index", None))
            elif child.kind == K.LOOP_VARS:
                for var in child.nodes():
                    parts = var.nodes()
                    names = [p for p in parts if p.kind == K.NAME]
                    inits = [p.span for p in parts if p.kind != K.NAME]
                    value = inits[0] if inits else None
                    binds += [(n.token(K.IDENT), "carried", value) for n in names[:1]]
                    outside += [p for p in parts if p.kind != K.NAME]
            elif child.kind == K.BLOCK:
                body.append(child)
            else:
                outside.append(child)

        def enter() -> None:
            for tok, kind, value in binds:
                self.bind(tok, kind, inner, value)

        self.stack.extend((b, inner) for b in reversed(body))
        self.stack.append(enter)
        self.children(outside, scope)

    def name_ref(self, node: SyntaxNode, scope: Scope) -> None:
        tok = node.tokens()[0] if node.tokens() else None
        if tok is None:
            return
        sym = scope.get(tok.text)
        if sym is not None and not _is_callee(node):
            sym.refs.append(tok.span)
            self.out.at[tok.offset] = sym
        else:
            self.out.fn_refs.append((tok.span, tok.text))

    def assign(self, node: SyntaxNode, scope: Scope) -> None:
        """``b = expr;`` (a ``let mut`` name or a ``&mut`` parameter): the target is a use of
        the variable it names, not a new binding."""
        for child in node.nodes():
            tok = child.token(K.IDENT) if child.kind == K.NAME else None
            sym = scope.get(tok.text) if tok is not None else None
            if tok is not None and sym is not None:
                sym.refs.append(tok.span)
                self.out.at[tok.offset] = sym
            elif child.kind != K.NAME:
                self.stack.append((child, scope))

    def kwarg(self, node: SyntaxNode, scope: Scope) -> None:
        for child in node.nodes():
            if child.kind == K.NAME:
                tok = child.token(K.IDENT)
                if tok is not None:
                    self.out.attributes.append(tok.span)
            else:
                self.stack.append((child, scope))


def _is_callee(node: SyntaxNode) -> bool:
    """Whether ``node`` is what a call calls (``f`` in ``f(x)``: a function name)."""
    parent = node.parent
    if parent is None or parent.kind != K.CALL_EXPR:
        return False
    kids = parent.green.kids()
    return bool(kids) and kids[0][0] is node.green and kids[0][1] == node.offset - parent.offset


#: node kind -> how it shapes scopes; every other kind is walked generically
SCOPES: dict[int, Callable[[_Walk, SyntaxNode, Scope], None]] = {
    K.FN_DEF: _Walk.fn_def,
    K.BLOCK: _Walk.block,
    K.LET_STMT: _Walk.let,
    K.FOR_EXPR: _Walk.for_,
    K.NAME_REF: _Walk.name_ref,
    K.KWARG: _Walk.kwarg,
}
if hasattr(K, "ASSIGN_STMT"):  # the memory-space syntax (issue of `&mut`, `let mut`)
    SCOPES[K.ASSIGN_STMT] = _Walk.assign

_CACHE: dict[int, tuple[GreenNode, ItemNames]] = {}
_CACHE_MAX = 1 << 14


def item_names(green: GreenNode) -> ItemNames:
    """The names of one ``fn`` item (cached by its green node)."""
    known = _CACHE.get(id(green))
    if known is not None and known[0] is green:
        return known[1]
    out = ItemNames()
    _Walk(out).run(red(green, 0, None))
    if len(_CACHE) >= _CACHE_MAX:
        _CACHE.clear()
    _CACHE[id(green)] = (green, out)
    return out
