"""The lossless green tree, its red (positioned) view and the typed view over it.

*Green* nodes are immutable and position-free: a kind, the children (green nodes and tokens)
and the total byte width.  Tokens are interned per ``(kind, text)``.  Every byte of the input,
trivia and error tokens included, is in exactly one token, so ``tree_bytes(root)`` gives back
the input byte for byte, for any input.

Trivia placement: trivia before a node's first token belongs to the enclosing node, trivia
between two tokens of a node belongs to that node, and trivia after the last token of the file
belongs to ``SOURCE_FILE``.  So a node's span starts at its first token and ends at its last.

*Red* nodes (:class:`SyntaxNode`, :class:`SyntaxToken`) add an absolute offset and a parent,
and are made on demand while walking.  The *typed view* is a set of ``SyntaxNode`` subclasses,
one per node kind that later stages read (``FnDef``, ``BinExpr`` ...), with accessors that
return ``None`` where a syntax error left a part missing.

Nothing here recurses on the tree's depth: building, printing and walking use explicit stacks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import ClassVar, TypeVar

from kera.syntax.kinds import EXPRS, TRIVIA, SyntaxKind
from kera.syntax.lexer import Tokens
from kera.syntax.parser import FINISH, START, TOKEN, Event

K = SyntaxKind
T = TypeVar("T", bound="SyntaxNode")
EXPRS_OR_ERROR = EXPRS | {K.ERROR}


class GreenToken:
    __slots__ = ("kind", "string", "text", "width")

    def __init__(self, kind: int, text: bytes) -> None:
        self.kind = kind
        self.text = text
        self.width = len(text)
        self.string: str | None = None  # the text decoded, on first use (SyntaxToken.text)

    def __repr__(self) -> str:
        return f"{SyntaxKind(self.kind).name}@{self.text!r}"


class GreenNode:
    __slots__ = ("_kids", "children", "kind", "width")

    def __init__(
        self, kind: int, children: tuple[GreenNode | GreenToken, ...], width: int = -1
    ) -> None:
        self.kind = kind
        self.children = children
        self.width: int = width if width >= 0 else sum(c.width for c in children)
        self._kids: tuple[tuple[GreenNode, int], ...] | None = None

    def kids(self) -> tuple[tuple[GreenNode, int], ...]:
        """The child nodes with their offsets from this node's start (computed once)."""
        kids = self._kids
        if kids is None:
            out = []
            pos = 0
            for g in self.children:
                if type(g) is GreenNode:
                    out.append((g, pos))
                pos += g.width
            kids = self._kids = tuple(out)
        return kids

    def __repr__(self) -> str:
        return f"{SyntaxKind(self.kind).name}[{self.width}]"


Green = GreenNode | GreenToken


def green_tokens(tokens: Tokens) -> list[GreenToken]:
    """One green token per token, shared between equal (kind, text) pairs."""
    texts = tokens.texts
    if texts:  # each text has one kind: one green token per distinct text
        kind_of = dict(zip(texts, tokens.kinds, strict=True))
        made = {t: GreenToken(k, t) for t, k in kind_of.items()}
        return list(map(made.__getitem__, texts))
    cache: dict[bytes, GreenToken] = {}
    get = cache.get
    data, starts = tokens.data, tokens.starts
    out: list[GreenToken] = []
    for kind, a, b in zip(tokens.kinds, starts, starts[1:], strict=False):
        text = data[a:b]
        tok = get(text)
        if tok is None or tok.kind != kind:
            tok = cache[text] = GreenToken(kind, text)
        out.append(tok)
    return out


def build_green(tokens: Tokens, events: list[Event], sig: list[int]) -> GreenNode:
    """The green tree of a parse: events give the structure, tokens the bytes.

    ``sig`` lists the indices of the non-trivia tokens, the ones TOKEN events consume; the
    trivia before each is attached as the module doc says.
    """
    toks = green_tokens(tokens)
    starts = tokens.starts
    n = len(toks)
    sig = [*sig, n]
    i = 0  # next token to attach
    k = 0  # next significant token (index into sig)
    stack: list[tuple[int, list[Green], int]] = []
    children: list[Green] = []
    add, push, pop = children.append, stack.append, stack.pop
    for tag, kind, _ in events:
        if tag == TOKEN:
            s = sig[k]
            k += 1
            if s == i:  # no trivia before it
                add(toks[i])
            else:
                children += toks[i : s + 1]
            i = s + 1
        elif tag == START:
            if stack:  # leading trivia of the file goes into SOURCE_FILE itself
                s = sig[k]
                if s != i:
                    children += toks[i:s]
                    i = s
            push((kind, children, starts[i]))
            children = []
            add = children.append
        elif tag == FINISH:
            done_kind, parent, begin = pop()
            if not stack:
                children += toks[i:]
                i = n
            node = GreenNode(done_kind, tuple(children), starts[i] - begin)
            children = parent
            add = children.append
            add(node)
    children += toks[i:]
    only = children[0] if len(children) == 1 else None
    if isinstance(only, GreenNode) and only.kind == K.SOURCE_FILE:
        return only
    return GreenNode(K.SOURCE_FILE, tuple(children))


def tree_bytes(root: GreenNode) -> bytes:
    """The text of a green tree (iterative; equals the parsed input)."""
    out: list[bytes] = []
    stack: list[Green] = [root]
    while stack:
        g = stack.pop()
        if isinstance(g, GreenToken):
            out.append(g.text)
        else:
            stack.extend(reversed(g.children))
    return b"".join(out)


def debug_tree(root: GreenNode, data: bytes | None = None) -> str:
    """An indented dump of the tree (kinds, spans, token texts) for tests and debugging."""
    lines: list[str] = []
    stack: list[tuple[Green, int, int]] = [(root, 0, 0)]
    while stack:
        g, depth, offset = stack.pop()
        name = SyntaxKind(g.kind).name
        span = f"{offset}..{offset + g.width}"
        if isinstance(g, GreenToken):
            lines.append(f"{'  ' * depth}{name}@{span} {g.text.decode('utf-8', 'replace')!r}")
            continue
        lines.append(f"{'  ' * depth}{name}@{span}")
        pos = offset
        kids = []
        for c in g.children:
            kids.append((c, depth + 1, pos))
            pos += c.width
        stack.extend(reversed(kids))
    return "\n".join(lines) + "\n"


# -------------------------------------------------------------------------- red view


class SyntaxToken:
    __slots__ = ("green", "offset", "parent")

    def __init__(self, green: GreenToken, offset: int, parent: SyntaxNode) -> None:
        self.green = green
        self.offset = offset
        self.parent = parent

    @property
    def kind(self) -> int:
        return self.green.kind

    @property
    def span(self) -> tuple[int, int]:
        return self.offset, self.offset + len(self.green.text)

    @property
    def text(self) -> str:
        g = self.green
        string = g.string
        if string is None:  # tokens are shared: each distinct one is decoded once
            string = g.string = g.text.decode("utf-8", "replace")
        return string


class SyntaxNode:
    """A green node at an absolute offset.  Subclasses add typed accessors."""

    __slots__ = ("green", "offset", "parent")
    KIND: ClassVar[int] = -1

    def __init__(self, green: GreenNode, offset: int, parent: SyntaxNode | None) -> None:
        self.green = green
        self.offset = offset
        self.parent = parent

    @property
    def kind(self) -> int:
        return self.green.kind

    @property
    def span(self) -> tuple[int, int]:
        return self.offset, self.offset + self.green.width

    def children(self) -> Iterator[SyntaxNode | SyntaxToken]:
        pos = self.offset
        for g in self.green.children:
            if type(g) is GreenNode:
                yield _VIEW_OF[g.kind](g, pos, self)
            else:
                assert isinstance(g, GreenToken)
                yield SyntaxToken(g, pos, self)
            pos += g.width

    def nodes(self) -> list[SyntaxNode]:
        base, views = self.offset, _VIEW_OF
        return [views[g.kind](g, base + rel, self) for g, rel in self.green.kids()]

    def tokens(self) -> list[SyntaxToken]:
        """The direct non-trivia tokens."""
        out: list[SyntaxToken] = []
        pos = self.offset
        for g in self.green.children:
            if type(g) is GreenToken and g.kind not in TRIVIA:
                out.append(SyntaxToken(g, pos, self))
            pos += g.width
        return out

    def token(self, kind: int) -> SyntaxToken | None:
        pos = self.offset
        for g in self.green.children:
            if g.kind == kind and type(g) is GreenToken:
                return SyntaxToken(g, pos, self)
            pos += g.width
        return None

    def node(self, cls: type[T]) -> T | None:
        """The first child node of ``cls``'s kind."""
        want = cls.KIND
        for g, rel in self.green.kids():
            if g.kind == want:
                return cls(g, self.offset + rel, self)
        return None

    def exprs(self) -> list[SyntaxNode]:
        """Direct children that are expressions (an ERROR node stands for a missing one)."""
        base, views, wanted = self.offset, _VIEW_OF, _IS_EXPR_OR_ERROR
        return [
            views[g.kind](g, base + rel, self) for g, rel in self.green.kids() if wanted[g.kind]
        ]

    def first_token_kind(self) -> int | None:
        """The kind of the first direct non-trivia token (an operator), or None."""
        for g in self.green.children:
            if type(g) is GreenToken and g.kind not in TRIVIA:
                return g.kind
        return None

    def text(self) -> str:
        return tree_bytes(self.green).decode("utf-8", "replace")

    def has_errors(self) -> bool:
        stack: list[Green] = [self.green]
        while stack:
            g = stack.pop()
            if g.kind in (K.ERROR, K.ERROR_TOKEN):
                return True
            if isinstance(g, GreenNode):
                stack.extend(g.children)
        return False

    def __repr__(self) -> str:
        return f"<{SyntaxKind(self.kind).name} {self.span[0]}..{self.span[1]}>"


VIEWS: dict[int, type[SyntaxNode]] = {}
#: kind -> its view class (SyntaxNode for kinds without one): VIEWS as a list, by kind
_VIEW_OF: list[type[SyntaxNode]] = [SyntaxNode] * (max(SyntaxKind) + 1)
_IS_EXPR_OR_ERROR = [k in EXPRS_OR_ERROR for k in range(max(SyntaxKind) + 1)]


def red(green: GreenNode, offset: int, parent: SyntaxNode | None) -> SyntaxNode:
    return _VIEW_OF[green.kind](green, offset, parent)


def view(kind: SyntaxKind) -> Callable[[type[T]], type[T]]:
    def register(cls: type[T]) -> type[T]:
        cls.KIND = kind
        VIEWS[kind] = cls
        _VIEW_OF[kind] = cls
        return cls

    return register


def root(green: GreenNode) -> SourceFile:
    node = red(green, 0, None)
    assert isinstance(node, SourceFile)
    return node


# ------------------------------------------------------------------------- typed view


@view(K.SOURCE_FILE)
class SourceFile(SyntaxNode):
    def fns(self) -> list[FnDef]:
        return [n for n in self.nodes() if isinstance(n, FnDef)]


@view(K.NAME)
class Name(SyntaxNode):
    def ident(self) -> SyntaxToken | None:
        return self.token(K.IDENT)


@view(K.FN_DEF)
class FnDef(SyntaxNode):
    def is_export(self) -> bool:
        return self.token(K.EXPORT_KW) is not None

    def name(self) -> SyntaxToken | None:
        n = self.node(Name)
        return n.ident() if n else None

    def params(self) -> list[Param]:
        pl = self.node(ParamList)
        return pl.params() if pl else []

    def ret_type(self) -> SyntaxNode | None:
        r = self.node(RetType)
        return r.type() if r else None

    def body(self) -> Block | None:
        return self.node(Block)

    def effects(self) -> Effects | None:
        """The ``effects(...)`` clause, None when the function declares none."""
        return self.node(Effects)


@view(K.EFFECTS)
class Effects(SyntaxNode):
    def names(self) -> list[SyntaxToken]:
        """The effect names, in order."""
        out = []
        for n in self.nodes():
            if isinstance(n, Name) and (tok := n.ident()) is not None:
                out.append(tok)
        return out


@view(K.PARAM_LIST)
class ParamList(SyntaxNode):
    def params(self) -> list[Param]:
        return [n for n in self.nodes() if isinstance(n, Param)]


@view(K.PARAM)
class Param(SyntaxNode):
    def name(self) -> SyntaxToken | None:
        n = self.node(Name)
        return n.ident() if n else None

    def type(self) -> SyntaxNode | None:
        return _type_child(self)

    def mode(self) -> RefMode | None:
        """``&`` or ``&mut`` before the type, None for a parameter taken by value."""
        return self.node(RefMode)


@view(K.REF_MODE)
class RefMode(SyntaxNode):
    def is_mut(self) -> bool:
        return self.token(K.IDENT) is not None


@view(K.RET_TYPE)
class RetType(SyntaxNode):
    def type(self) -> SyntaxNode | None:
        return _type_child(self)


def _type_child(node: SyntaxNode) -> SyntaxNode | None:
    for n in node.nodes():
        if n.kind in (K.TENSOR_TYPE, K.TUPLE_TYPE):
            return n
    return None


@view(K.TENSOR_TYPE)
class TensorTypeNode(SyntaxNode):
    def dtype(self) -> SyntaxToken | None:
        return self.token(K.IDENT)

    def dims(self) -> list[SyntaxToken] | None:
        """The dimension tokens, or None for a scalar type."""
        d = self.node(Dims)
        return d.tokens_of(K.INT_NUMBER) if d else None

    def space(self) -> SpaceNode | None:
        """The ``@space`` part, None when the type has none (host)."""
        return self.node(SpaceNode)


@view(K.SPACE)
class SpaceNode(SyntaxNode):
    def name(self) -> SyntaxToken | None:
        n = self.node(Name)
        return n.ident() if n else None


@view(K.DIMS)
class Dims(SyntaxNode):
    def tokens_of(self, kind: int) -> list[SyntaxToken]:
        return [t for t in self.tokens() if t.kind == kind]


@view(K.TUPLE_TYPE)
class TupleTypeNode(SyntaxNode):
    def types(self) -> list[SyntaxNode]:
        return [n for n in self.nodes() if n.kind in (K.TENSOR_TYPE, K.TUPLE_TYPE)]


#: the statements a block holds besides expressions
STATEMENTS = frozenset({K.LET_STMT, K.ASSIGN_STMT, K.EXPR_STMT})


@view(K.BLOCK)
class Block(SyntaxNode):
    def items(self) -> list[SyntaxNode]:
        """Statements (let, assignment, call statement) and expressions in order; the last
        item is the value when it is an expression."""
        return [n for n in self.nodes() if n.kind in STATEMENTS or n.kind in EXPRS]


@view(K.ASSIGN_STMT)
class AssignStmt(SyntaxNode):
    def target(self) -> SyntaxToken | None:
        n = self.node(Name)
        return n.ident() if n else None

    def value(self) -> SyntaxNode | None:
        e = self.exprs()
        return e[0] if e else None


@view(K.EXPR_STMT)
class ExprStmt(SyntaxNode):
    def call(self) -> SyntaxNode | None:
        e = self.exprs()
        return e[0] if e else None


@view(K.REF_EXPR)
class RefExpr(SyntaxNode):
    def is_mut(self) -> bool:
        return self.token(K.IDENT) is not None

    def operand(self) -> SyntaxNode | None:
        e = self.exprs()
        return e[0] if e else None


@view(K.LET_STMT)
class LetStmt(SyntaxNode):
    def name(self) -> SyntaxToken | None:
        n = self.node(Name)
        return n.ident() if n else None

    def pattern(self) -> Name | TuplePat | None:
        """What the statement binds: a name (``_`` binds nothing) or a tuple pattern."""
        for n in self.nodes():
            if isinstance(n, Name | TuplePat):
                return n
        return None

    def type(self) -> SyntaxNode | None:
        return _type_child(self)

    def is_mut(self) -> bool:
        """``let mut b = ..;``: an assignable name (the one identifier token of a LET_STMT)."""
        return self.token(K.IDENT) is not None

    def init(self) -> SyntaxNode | None:
        e = self.exprs()
        return e[0] if e else None

    def parts(self) -> tuple[Name | TuplePat | None, SyntaxNode | None, SyntaxNode | None]:
        """(pattern, type, init): what ``pattern()``, ``type()`` and ``init()`` give, in one
        pass over the children."""
        pattern = annotation = init = None
        base = self.offset
        for g, rel in self.green.kids():
            kind = g.kind
            if pattern is None and (kind == K.NAME or kind == K.TUPLE_PAT):
                pattern = _VIEW_OF[kind](g, base + rel, self)
            elif annotation is None and (kind == K.TENSOR_TYPE or kind == K.TUPLE_TYPE):
                annotation = _VIEW_OF[kind](g, base + rel, self)
            elif init is None and _IS_EXPR_OR_ERROR[kind]:
                init = _VIEW_OF[kind](g, base + rel, self)
        return pattern, annotation, init  # type: ignore[return-value]


def _only_token(node: SyntaxNode) -> SyntaxToken:
    g = node.green.children[0]  # the node's one token (its trivia belongs to the parent)
    assert isinstance(g, GreenToken)
    return SyntaxToken(g, node.offset, node)


def _only_text(node: SyntaxNode) -> str:
    g = node.green.children[0]  # the node's one token
    assert isinstance(g, GreenToken)
    string = g.string
    if string is None:
        string = g.string = g.text.decode("utf-8", "replace")
    return string


@view(K.LITERAL)
class Literal(SyntaxNode):
    def tok(self) -> SyntaxToken:
        return _only_token(self)

    def tok_kind(self) -> int:
        return self.green.children[0].kind

    def tok_text(self) -> str:
        return _only_text(self)


@view(K.NAME_REF)
class NameRef(SyntaxNode):
    def ident(self) -> SyntaxToken:
        return _only_token(self)

    def name(self) -> str:
        """The identifier's text (``ident().text`` without making the token)."""
        return _only_text(self)


@view(K.PAREN_EXPR)
class ParenExpr(SyntaxNode):
    def inner(self) -> SyntaxNode | None:
        e = self.exprs()
        return e[0] if e else None


@view(K.TUPLE_EXPR)
class TupleExpr(SyntaxNode):
    def elements(self) -> list[SyntaxNode]:
        return self.exprs()


@view(K.ARRAY_EXPR)
class ArrayExpr(SyntaxNode):
    def elements(self) -> list[SyntaxNode]:
        return self.exprs()


@view(K.PREFIX_EXPR)
class PrefixExpr(SyntaxNode):
    def op(self) -> int:
        kind = self.first_token_kind()
        assert kind is not None  # a PREFIX_EXPR starts with its operator
        return kind

    def operand(self) -> SyntaxNode | None:
        e = self.exprs()
        return e[0] if e else None


@view(K.BIN_EXPR)
class BinExpr(SyntaxNode):
    def op(self) -> SyntaxToken:
        return self.tokens()[0]

    def op_kind(self) -> int:
        """``op().kind`` without making the token (a BIN_EXPR always has its operator)."""
        kind = self.first_token_kind()
        assert kind is not None
        return kind

    def operands(self) -> tuple[SyntaxNode | None, SyntaxNode | None]:
        e = self.exprs()
        return (e[0] if e else None), (e[1] if len(e) > 1 else None)


@view(K.CAST_EXPR)
class CastExpr(SyntaxNode):
    def operand(self) -> SyntaxNode | None:
        e = self.exprs()
        return e[0] if e else None

    def type(self) -> SyntaxNode | None:
        return _type_child(self)


@view(K.CALL_EXPR)
class CallExpr(SyntaxNode):
    def callee(self) -> SyntaxNode | None:
        e = self.exprs()
        return e[0] if e else None

    def args(self) -> ArgList | None:
        return self.node(ArgList)


@view(K.ARG_LIST)
class ArgList(SyntaxNode):
    def positional(self) -> list[SyntaxNode]:
        return self.exprs()

    def keywords(self) -> list[Kwarg]:
        return [n for n in self.nodes() if isinstance(n, Kwarg)]

    def split(self) -> tuple[list[SyntaxNode], list[Kwarg], list[SyntaxNode]]:
        """(positional, keywords, every child node) in one pass over the children."""
        every = self.nodes()
        wanted = _IS_EXPR_OR_ERROR
        return (
            [n for n in every if wanted[n.green.kind]],
            [n for n in every if isinstance(n, Kwarg)],
            every,
        )


@view(K.KWARG)
class Kwarg(SyntaxNode):
    def name(self) -> SyntaxToken | None:
        n = self.node(Name)
        return n.ident() if n else None

    def value(self) -> SyntaxNode | None:
        e = self.exprs()
        return e[0] if e else None


@view(K.FIELD_EXPR)
class FieldExpr(SyntaxNode):
    def base(self) -> SyntaxNode | None:
        e = self.exprs()
        return e[0] if e else None

    def index(self) -> SyntaxToken | None:
        return self.token(K.INT_NUMBER)


@view(K.TUPLE_PAT)
class TuplePat(SyntaxNode):
    def elements(self) -> list[Name | TuplePat]:
        """The parts in order: names (``_`` among them) and nested tuple patterns."""
        return [n for n in self.nodes() if isinstance(n, Name | TuplePat)]


def _split_at(node: SyntaxNode, kind: int) -> tuple[list[SyntaxNode], list[SyntaxNode]]:
    """The expression children before and after the first direct token of ``kind`` (all of
    them before when there is no such token)."""
    tok = node.token(kind)
    cut = tok.offset if tok is not None else node.span[1]
    exprs = node.exprs()
    return [e for e in exprs if e.offset < cut], [e for e in exprs if e.offset >= cut]


@view(K.IF_EXPR)
class IfExpr(SyntaxNode):
    def parts(self) -> tuple[SyntaxNode, SyntaxNode, SyntaxNode] | None:
        """(condition, then-block, else part: a block or an IfExpr), or None where a syntax
        error left a part out (the parser has reported it)."""
        before, after = _split_at(self, K.ELSE_KW)
        if len(before) != 2 or len(after) != 1 or before[1].kind != K.BLOCK:
            return None
        if after[0].kind not in (K.BLOCK, K.IF_EXPR):
            return None
        return before[0], before[1], after[0]


@view(K.INDEX_EXPR)
class IndexExpr(SyntaxNode):
    def base(self) -> SyntaxNode | None:
        e = self.exprs()
        return e[0] if e else None

    def items(self) -> list[SyntaxNode]:
        """The index items after ``[``: expressions and :class:`Range` nodes (an ERROR node
        stands for a missing one)."""
        tok = self.token(K.L_BRACK)
        if tok is None:
            return []
        return [
            n
            for n in self.nodes()
            if n.offset > tok.offset and (n.kind in EXPRS_OR_ERROR or n.kind == K.RANGE)
        ]


@view(K.RANGE)
class Range(SyntaxNode):
    def ends(self) -> tuple[SyntaxNode | None, SyntaxNode | None]:
        """The start and the end expressions, None where omitted (``..b``, ``a..``)."""
        lo, hi = _split_at(self, K.DOTDOT)
        return (lo[0] if lo else None), (hi[0] if hi else None)


@view(K.FOR_EXPR)
class ForExpr(SyntaxNode):
    def index(self) -> Name | None:
        """The index's name (``_`` when unused), None where a syntax error left it out."""
        return self.node(Name)

    def bounds(self) -> Range | None:
        return self.node(Range)

    def carried(self) -> list[LoopVar]:
        lv = self.node(LoopVars)
        return lv.vars() if lv else []

    def body(self) -> Block | None:
        return self.node(Block)

    def parts(self) -> tuple[Name, Range, list[LoopVar], Block] | None:
        """(index, bounds, carried values, body), or None where a syntax error left a part
        out (the parser has reported it)."""
        index, bounds, carried, body = self.index(), self.bounds(), self.carried(), self.body()
        if index is None or bounds is None or not carried or body is None:
            return None
        if any(v.name() is None or v.init() is None for v in carried):
            return None
        return index, bounds, carried, body


@view(K.LOOP_VARS)
class LoopVars(SyntaxNode):
    def vars(self) -> list[LoopVar]:
        return [n for n in self.nodes() if isinstance(n, LoopVar)]


@view(K.LOOP_VAR)
class LoopVar(SyntaxNode):
    def name(self) -> SyntaxToken | None:
        n = self.node(Name)
        return n.ident() if n else None

    def init(self) -> SyntaxNode | None:
        e = self.exprs()
        return e[0] if e else None
