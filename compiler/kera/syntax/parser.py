"""The event-driven Pratt parser: tokens -> a flat stream of events.

The parser builds no tree.  It emits events, each a tuple ``(tag, a, b)``:

* ``(START, kind, 0)``  open a node of ``kind``;
* ``(TOKEN, 0, 0)``     attach the next non-trivia token (trivia is attached by the consumer);
* ``(FINISH, 0, 0)``    close the innermost open node;
* ``(ERROR, i, 0)``     ``parse.diagnostics[i]`` was reported here.

``parse(tokens).events`` is well nested (forward parents are resolved before it is returned),
so the tree builder (``kera.syntax.tree``) and the formatter (``kera.syntax.fmt``) both
consume the same stream.  Every token is consumed exactly once, in order.

Binary operators use Pratt binding powers; while parsing, a completed left operand is wrapped
by a later ``START`` through a *forward parent* link (rust-analyzer's ``precede``).

Error recovery never stops the parse: a missing ``;``, ``)``, ``]`` or ``}`` is reported
(zero-width span after the previous token) and parsing continues; an unexpected token is
wrapped in an ``ERROR`` node.  Every loop consumes a token or exits, so parsing terminates.

Depth: binary chains, prefix operators, postfix chains (calls, fields, indices) and else-if
chains are parsed by loops; only brackets (``( [ {``, argument and index lists, tuple
patterns, a loop's carried values), an ``if`` inside a condition and a ``for`` inside a loop's
bounds or initial values recurse.  Nesting deeper than :data:`MAX_NESTING`
is reported once (E0012) and the over-deep bracket (or ``if``) is skipped to its end, so no
input exhausts the Python stack.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import compress, count

from kera.syntax.diagnostics import Diagnostic
from kera.syntax.kinds import TRIVIA, SyntaxKind, describe
from kera.syntax.lexer import Tokens

K = SyntaxKind
START, TOKEN, FINISH, ERROR = 0, 1, 2, 3
Event = tuple[int, int, int]
TOKEN_EVENT: Event = (TOKEN, 0, 0)
FINISH_EVENT: Event = (FINISH, 0, 0)
START_EVENTS: dict[int, Event] = {k: (START, k, 0) for k in SyntaxKind}  # shared, immutable
TOMBSTONE_EVENT = START_EVENTS[SyntaxKind.TOMBSTONE]
NAME_REF_START = START_EVENTS[SyntaxKind.NAME_REF]
LITERAL_START = START_EVENTS[SyntaxKind.LITERAL]
MAX_NESTING = 100

#: binary operator -> binding power (higher binds tighter); all left-associative except the
#: comparisons, which do not chain.  ``as`` (AS_BP) and unary operators bind tighter still.
BINARY_BP: dict[int, int] = {
    K.PIPE2: 1,
    K.AMP2: 2,
    **dict.fromkeys((K.EQ2, K.NEQ, K.LT, K.LTEQ, K.GT, K.GTEQ), 3),
    K.PIPE: 4,
    K.CARET: 5,
    K.AMP: 6,
    K.SHL: 7,
    K.SHR: 7,
    K.PLUS: 8,
    K.MINUS: 8,
    K.STAR: 9,
    K.SLASH: 9,
    K.PERCENT: 9,
}
COMPARE_BP = 3
AS_BP = 10
PREFIX_OPS = frozenset({K.MINUS, K.BANG, K.TILDE})
UNARY_START = PREFIX_OPS | {K.AMP}  # `&` starts a borrow, `&x` (a REF_EXPR)
EXPR_START = frozenset(
    {
        K.INT_NUMBER,
        K.FLOAT_NUMBER,
        K.TRUE_KW,
        K.FALSE_KW,
        K.IDENT,
        K.L_PAREN,
        K.L_BRACE,
        K.L_BRACK,
        K.IF_KW,
        K.FOR_KW,
        K.AMP,  # a borrow `&x` (docs/language.md, *Memory spaces, ownership and effects*)
        *PREFIX_OPS,
    }
)
LITERALS = frozenset({K.INT_NUMBER, K.FLOAT_NUMBER, K.TRUE_KW, K.FALSE_KW})
ATOMS = LITERALS | {K.IDENT}  # one token that is a whole primary expression
POSTFIX_START = frozenset({K.L_PAREN, K.DOT, K.L_BRACK})  # what postfix() continues with
CLOSERS = {K.L_PAREN: K.R_PAREN, K.L_BRACK: K.R_BRACK, K.L_BRACE: K.R_BRACE}
ITEM_START = frozenset({K.FN_KW, K.EXPORT_KW})
#: tokens that close or end what encloses a construct: a skip stops before them
CLOSED_BY = frozenset({K.R_PAREN, K.R_BRACK, K.R_BRACE, K.SEMI, K.COMMA, K.LET_KW, *ITEM_START})
#: tokens an expression error does not swallow: they close or start an enclosing construct
EXPR_RECOVERY = frozenset(
    {K.SEMI, K.COMMA, K.R_PAREN, K.R_BRACK, K.R_BRACE, K.LET_KW, K.ELSE_KW, K.EOF, *ITEM_START}
    | {K.IN_KW, K.WITH_KW}
)
#: tokens that end an index item (so ``x[2..]`` has no upper bound)
INDEX_END = frozenset({K.COMMA, K.R_BRACK})
#: kind -> whether a token of that kind is significant (not trivia)
_SIGNIFICANT = [k not in TRIVIA for k in range(max(SyntaxKind) + 1)]


@dataclass(slots=True)
class Parse:
    """The result of parsing: a well-nested event stream and the parser's diagnostics."""

    tokens: Tokens
    events: list[Event] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    sig: list[int] = field(default_factory=list)  # indices of the non-trivia tokens


class Parser:
    """Cursor over the non-trivia tokens plus the event sink.  Markers are event indices."""

    def __init__(self, tokens: Tokens) -> None:
        self.tokens = tokens
        flags = list(map(_SIGNIFICANT.__getitem__, tokens.kinds))
        sig = list(compress(count(), flags))
        self.sig = sig
        self.kinds = [*compress(tokens.kinds, flags), K.EOF]
        self.pos = 0
        self.end = len(sig)
        self.depth = 0
        self.events: list[Event] = []
        self.forward: dict[int, int] = {}
        self.diagnostics: list[Diagnostic] = []
        self.binds_return: bool | None = None  # see binds_return()
        self.no_result = False  # the function being parsed has no result type (see _fn_body)

    # -- cursor
    def current(self) -> int:
        return self.kinds[self.pos]

    def nth(self, n: int) -> int:
        return self.kinds[min(self.pos + n, len(self.kinds) - 1)]

    def at(self, kind: int) -> bool:
        return self.kinds[self.pos] == kind

    def bump(self) -> None:
        if self.pos < self.end:  # the EOF sentinel is never consumed
            self.events.append(TOKEN_EVENT)
            self.pos += 1

    def eat(self, kind: int) -> bool:
        if self.kinds[self.pos] != kind:
            return False
        self.bump()
        return True

    def span(self, pos: int) -> tuple[int, int]:
        if pos >= len(self.sig):
            n = len(self.tokens.data)
            return n, n
        i = self.sig[pos]
        return self.tokens.starts[i], self.tokens.starts[i + 1]

    def text(self, pos: int | None = None) -> str:
        i = self.pos if pos is None else pos
        if i >= len(self.sig):
            return ""
        return self.tokens.text(self.sig[i]).decode("utf-8", "replace")

    # -- markers
    def start(self) -> int:
        events = self.events
        events.append(TOMBSTONE_EVENT)
        return len(events) - 1

    def complete(self, marker: int, kind: int) -> int:
        self.events[marker] = START_EVENTS[kind]
        self.events.append(FINISH_EVENT)
        return marker

    def leaf(self, start: Event) -> int:
        """A node holding just the current token (a literal or a name), completed; ``start``
        is the node's START event."""
        events = self.events
        marker = len(events)
        events += (start, TOKEN_EVENT, FINISH_EVENT)
        self.pos += 1
        return marker

    def precede(self, completed: int) -> int:
        """A new marker that will become the parent of the completed node ``completed``."""
        m = self.start()
        self.forward[completed] = m
        return m

    # -- errors
    def error(self, message: str, code: str = "E0010", span: tuple[int, int] | None = None) -> None:
        start, end = span if span is not None else self.span(self.pos)
        if self.diagnostics and self.diagnostics[-1].start == start:
            return  # one error per position: the first explains it, the rest cascade
        self.diagnostics.append(Diagnostic(code, message, start, end))
        self.events.append((ERROR, len(self.diagnostics) - 1, 0))

    def expected(self, what: str) -> None:
        """``expected X, found Y``, pointing just after the previous token."""
        end = self.span(self.pos - 1)[1] if self.pos > 0 else 0
        self.error(f"expected {what}, found {self.found()}", span=(end, end))

    def expect(self, kind: int, what: str) -> bool:
        if self.eat(kind):
            return True
        self.expected(what)
        return False

    def err_and_bump(self, message: str) -> None:
        m = self.start()
        self.error(message)
        self.bump()
        self.complete(m, K.ERROR)

    def found(self) -> str:
        return describe(self.current(), self.text())

    def unexpected(self, what: str) -> None:
        """Report the current token as unexpected; wrap it in an ERROR node unless it closes
        or starts an enclosing construct."""
        if self.current() in EXPR_RECOVERY:
            self.expected(what)
        else:
            self.err_and_bump(f"expected {what}, found {self.found()}")

    # -- nesting
    def enter(self) -> int | None:
        """Enter the bracket at the cursor.  When nesting is too deep, skip it to its matching
        closer inside an ERROR node and return that node's marker instead."""
        if self.depth < MAX_NESTING:
            self.depth += 1
            return None
        m = self.start()
        self.error(f"brackets nested more than {MAX_NESTING} deep; use let bindings", code="E0012")
        self.skip_balanced()
        return self.complete(m, K.ERROR)

    def leave(self) -> None:
        self.depth -= 1

    def skip_balanced(self) -> None:
        """Consume the bracket at the cursor and everything up to its matching closer."""
        stack: list[int] = []
        while not self.at(K.EOF):
            k = self.current()
            if k in CLOSERS:
                stack.append(CLOSERS[SyntaxKind(k)])
            elif stack and k == stack[-1]:
                stack.pop()
            self.bump()
            if not stack:
                return

    def finish(self) -> Parse:
        out = Parse(self.tokens, diagnostics=self.diagnostics, sig=self.sig)
        out.events = resolve_forward_parents(self.events, self.forward)
        return out


def resolve_forward_parents(events: list[Event], forward: dict[int, int]) -> list[Event]:
    """Rewrite ``precede`` links into plain nesting.

    Only the starts involved in links are visited; the runs between them are copied whole.
    (This parser completes every marker it starts, so no tombstone reaches the output.)
    """
    tomb = K.TOMBSTONE
    moved = set(forward.values())
    special = sorted({*forward, *moved})
    out: list[Event] = []
    done = 0
    for i in special:
        out.extend(events[done:i])
        done = i + 1
        if i in moved:
            continue
        chain = [events[i][1]]
        j = i
        while j in forward:
            j = forward[j]
            chain.append(events[j][1])
        out.extend((START, kind, 0) for kind in reversed(chain) if kind != tomb)
    out.extend(events[done:])
    return out


def parse(tokens: Tokens) -> Parse:
    p = Parser(tokens)
    source_file(p)
    return p.finish()


# ------------------------------------------------------------------------------ items


def source_file(p: Parser) -> None:
    m = p.start()
    while not p.at(K.EOF):
        if p.current() in ITEM_START:
            fn_def(p)
            continue
        junk = p.start()
        p.error(f"expected 'fn' or 'export fn', found {p.found()}")
        while not p.at(K.EOF) and p.current() not in ITEM_START:
            p.bump()
        p.complete(junk, K.ERROR)
    p.complete(m, K.SOURCE_FILE)


def fn_def(p: Parser) -> None:
    m = p.start()
    p.eat(K.EXPORT_KW)
    p.expect(K.FN_KW, "'fn'")
    p.no_result = False
    for part in (_fn_name, _fn_params, _fn_result, _fn_effects, _fn_body):
        if p.at(K.EOF) or p.current() in ITEM_START:
            p.expected(part.__doc__ or "")
            break
        part(p)
    p.complete(m, K.FN_DEF)


def _fn_name(p: Parser) -> None:
    """a function name"""
    name(p, "a function name")


def _fn_params(p: Parser) -> None:
    """'(' and the parameters"""
    if p.at(K.L_PAREN):
        param_list(p)
    else:
        p.expected("'(' and the parameters")


def _fn_result(p: Parser) -> None:
    """'->' and the result type"""
    if p.at(K.ARROW):
        r = p.start()
        p.bump()
        type_(p)
        p.complete(r, K.RET_TYPE)
    elif p.at(K.L_BRACE) or at_word(p, "effects", K.L_PAREN):
        p.no_result = True  # a function that only updates &mut buffers (the checker sees to it)
    else:
        p.expected("'->' and the result type")


def _fn_effects(p: Parser) -> None:
    """'{' and the function body"""
    if at_word(p, "effects", K.L_PAREN):
        effects(p)


def _fn_body(p: Parser) -> None:
    """'{' and the function body"""
    if p.at(K.L_BRACE):
        block(p, value_optional=p.no_result)
    else:
        p.expected("'{' and the function body")


def at_word(p: Parser, word: str, then: int) -> bool:
    """At the identifier ``word`` (a contextual word: ``effects``, ``mut``) followed by a token
    of kind ``then`` (or, for ``then == -1``, by any token that starts an expression)."""
    if not p.at(K.IDENT) or p.text() != word:
        return False
    after = p.nth(1)
    return after in EXPR_START if then == -1 else after == then


def effects(p: Parser) -> None:
    """``effects(a, b)``: the effect names (identifiers), trailing ``,`` ok, none allowed."""
    m = p.start()
    p.bump()
    p.bump()  # '(' (at_word checked it)
    while p.at(K.IDENT):
        name(p, "an effect name")
        if not p.eat(K.COMMA):
            break
    if not p.at(K.R_PAREN):
        p.unexpected("an effect name such as transfer, or ')'")
    p.eat(K.R_PAREN)
    p.complete(m, K.EFFECTS)


def name(p: Parser, what: str) -> None:
    if p.at(K.IDENT):
        m = p.start()
        p.bump()
        p.complete(m, K.NAME)
    else:
        p.expected(what)


def param_list(p: Parser) -> None:
    m = p.start()
    p.bump()
    while not p.at(K.R_PAREN) and not p.at(K.EOF):
        if not p.at(K.IDENT):
            if p.current() in (K.L_BRACE, K.ARROW, *ITEM_START):
                break
            p.err_and_bump(f"expected a parameter 'name: type', found {p.found()}")
            continue
        param(p)
        if not p.at(K.R_PAREN) and not p.expect(K.COMMA, "',' or ')'") and not p.at(K.IDENT):
            break
    p.expect(K.R_PAREN, "')'")
    p.complete(m, K.PARAM_LIST)


def param(p: Parser) -> None:
    m = p.start()
    name(p, "a parameter name")
    if p.expect(K.COLON, "':' and the parameter type"):
        type_(p)
    p.complete(m, K.PARAM)


def ref_mode(p: Parser) -> None:
    """``&`` or ``&mut`` before a type (a borrow, an in-out buffer): a sibling of the type's
    node, so ``Param.type()`` is the type either way.  Parsed before any type; the checker
    allows it on parameters only (E0127)."""
    m = p.start()
    p.bump()
    if p.at(K.IDENT) and p.text() == "mut" and p.nth(1) in (K.IDENT, K.L_PAREN):
        p.bump()
    p.complete(m, K.REF_MODE)


def type_(p: Parser) -> None:
    if p.at(K.AMP):
        ref_mode(p)
    if p.at(K.IDENT):
        m = p.start()
        p.bump()
        if p.at(K.L_BRACK):
            dims(p)
        if p.at(K.AT):
            space(p)
        p.complete(m, K.TENSOR_TYPE)
    elif p.at(K.L_PAREN):
        m = p.start()
        p.bump()
        while not p.at(K.R_PAREN) and (p.at(K.IDENT) or p.at(K.L_PAREN)):
            if p.depth >= MAX_NESTING:
                p.error(f"types nested more than {MAX_NESTING} deep", code="E0012")
                p.skip_balanced()
                continue
            p.depth += 1
            type_(p)
            p.depth -= 1
            if not p.eat(K.COMMA):
                break
        p.expect(K.R_PAREN, "')'")
        p.complete(m, K.TUPLE_TYPE)
    else:
        p.expected("a type such as f32 or f32[4]")


def space(p: Parser) -> None:
    """``@device``: the memory space of a tensor type."""
    m = p.start()
    p.bump()
    name(p, "a memory space (host, device, pinned or unified) after '@'")
    p.complete(m, K.SPACE)


def dims(p: Parser) -> None:
    m = p.start()
    p.bump()
    while p.at(K.INT_NUMBER):
        p.bump()
        if not p.eat(K.COMMA):
            break
    if not p.at(K.R_BRACK):
        p.unexpected("a dimension (an integer) or ']'")
    p.eat(K.R_BRACK)
    p.complete(m, K.DIMS)


# ----------------------------------------------------------------------- statements


def block(p: Parser, value_optional: bool = False) -> int:
    """``{ stmt* expr }``; ``value_optional``: the body of a function without a result type,
    which may end with a statement (the checker says whether it must)."""
    too_deep = p.enter()
    if too_deep is not None:
        return too_deep
    m = p.start()
    p.bump()
    has_value = returned = False
    while not p.at(K.R_BRACE) and not p.at(K.EOF):
        k = p.current()
        if k == K.LET_KW:
            let_stmt(p)
            has_value = False
        elif k in ITEM_START:
            break
        elif k == K.IDENT and p.nth(1) == K.EQ:
            assign_stmt(p)
            has_value = False
        elif k == K.IDENT and is_return(p):
            has_value = return_item(p)
            returned = True
        elif k in EXPR_START:
            has_value = block_expr(p)
        else:
            p.err_and_bump(f"expected 'let' or an expression, found {p.found()}")
    if not has_value and not returned and p.at(K.R_BRACE) and not value_optional:
        p.error("a block ends with its value: add an expression before '}'", code="E0013")
    p.expect(K.R_BRACE, "'}'")
    p.leave()
    return p.complete(m, K.BLOCK)


def block_expr(p: Parser) -> bool:
    """An expression in a block: its value, or a call statement ``f(&mut b);``.  Returns
    whether the block now has its value."""
    done = expr_bp(p, 1)
    if p.at(K.SEMI):
        if done is not None and p.events[done][1] == K.CALL_EXPR:
            s = p.precede(done)
            p.bump()
            p.complete(s, K.EXPR_STMT)
            return False
        p.err_and_bump("an expression statement has no effect; bind it with 'let'")
        return False
    if not p.at(K.R_BRACE):
        p.expected("'}' after the block's value")
    return True


def assign_stmt(p: Parser) -> None:
    """``b = expr;``: a new value for a ``&mut`` parameter or a ``let mut`` name."""
    m = p.start()
    name(p, "a name")
    p.bump()  # '='
    if not expr(p):
        p.unexpected("an expression")
    p.expect(K.SEMI, "';'")
    p.complete(m, K.ASSIGN_STMT)


#: tokens after ``return`` that could also continue an expression of a *name* ``return``
#: (a call, a subtraction, an index): a hint there only when the file binds no such name
RETURN_AMBIGUOUS = frozenset({K.L_PAREN, K.MINUS, K.L_BRACK})
#: what follows the name where a declaration binds it (``fn return``, ``let return``, a
#: parameter ``return: f32``, a carried value ``return = x``)
DECLARES_AFTER = frozenset({K.COLON, K.EQ})
DECLARES_BEFORE = frozenset({K.FN_KW, K.LET_KW, K.FOR_KW})


def is_return(p: Parser) -> bool:
    """At a block item starting with the word ``return`` followed by a value or ``;``, as in
    C or Rust: never a valid item in Kera (``return`` is an ordinary name, so ``return y``
    would be two juxtaposed expressions), unless the file binds that name and what follows
    could continue it."""
    if p.text() != "return":
        return False
    after = p.nth(1)
    if after in RETURN_AMBIGUOUS:
        return not binds_return(p)
    return after in EXPR_START or after == K.SEMI


def binds_return(p: Parser) -> bool:
    """Whether the file declares a name ``return`` anywhere (computed once, on demand)."""
    if p.binds_return is None:
        kinds, n = p.kinds, p.end
        p.binds_return = any(
            kinds[i] == K.IDENT
            and (kinds[i + 1] in DECLARES_AFTER or (i and kinds[i - 1] in DECLARES_BEFORE))
            and p.text(i) == "return"
            for i in range(n)
        )
    return p.binds_return


def return_item(p: Parser) -> bool:
    """``return VALUE;``: Kera has no ``return`` -- a block ends with its value.  Report it
    once (E0014, with the fix) and parse on as if the word were not there: the value is the
    block's value (the word, and a ``;`` right before the ``}``, are ERROR nodes beside it),
    so nothing cascades.  A ``return`` with more items after it (an early return), or
    without a value, is kept whole in one ERROR node.  Returns whether the block now has its
    value."""
    word = p.span(p.pos)
    r = p.start()
    p.bump()
    r = p.complete(r, K.ERROR)
    first = p.pos
    has_value = expr(p)
    semi = p.at(K.SEMI)
    if has_value and (p.at(K.R_BRACE) or (semi and p.nth(1) in (K.R_BRACE, K.EOF))):
        value = p.tokens.data[p.span(first)[0] : p.span(p.pos - 1)[1]]
        p.error(NO_RETURN + return_fix(value.decode("utf-8", "replace"), semi), "E0014", word)
        if semi:
            m = p.start()
            p.bump()
            p.complete(m, K.ERROR)
        return True
    early = "for an early return, end the block with if c { a } else { b }"
    p.error(NO_RETURN + (early if has_value else "end it with an expression"), "E0014", word)
    skip = p.precede(r)
    p.eat(K.SEMI)
    p.complete(skip, K.ERROR)
    return False


NO_RETURN = "Kera has no 'return': a block ends with its value; "


def return_fix(value: str, semi: bool) -> str:
    """``write `x * 2.0` without 'return' and ';'`` (a long or multi-line value unquoted)."""
    shown = f"`{value}`" if len(value) <= 40 and "\n" not in value else "the value"
    return f"write {shown} without 'return'" + (" and ';'" if semi else "")


def let_stmt(p: Parser) -> None:
    m = p.start()
    p.bump()
    kinds = p.kinds
    if kinds[p.pos] == K.IDENT and kinds[p.pos + 1] == K.IDENT and p.text() == "mut":
        p.bump()  # `let mut b = ..;`: an assignable name (`let mut = ..` binds `mut`)
    if p.at(K.L_PAREN):
        tuple_pat(p)
    else:
        name(p, "a name after 'let'")
    if p.eat(K.COLON):
        type_(p)  # after a tuple pattern: parsed, and refused by the checker (E0309)
    has_eq = p.expect(K.EQ, "'='")
    if (has_eq or p.current() in EXPR_START) and not expr(p):
        p.unexpected("an expression")
    p.expect(K.SEMI, "';'")
    p.complete(m, K.LET_STMT)


def tuple_pat(p: Parser) -> None:
    """``(a, (b, _), c)``: names and nested tuple patterns, at least one, trailing ``,`` ok."""
    if p.enter() is not None:
        return
    m = p.start()
    p.bump()
    count = 0
    while not p.at(K.R_PAREN) and not p.at(K.EOF):
        if p.at(K.IDENT):
            name(p, "a name")
        elif p.at(K.L_PAREN):
            tuple_pat(p)
        else:
            p.unexpected("a name, '_' or '(' in a tuple pattern")
            break
        count += 1
        if not p.at(K.R_PAREN) and not p.expect(K.COMMA, "',' or ')'"):
            break
    if count == 0 and p.at(K.R_PAREN):
        p.expected("a name, '_' or '(' in a tuple pattern")
    p.expect(K.R_PAREN, "')'")
    p.leave()
    p.complete(m, K.TUPLE_PAT)


# ---------------------------------------------------------------------- expressions


def expr(p: Parser) -> bool:
    return expr_bp(p, 1) is not None


def expr_bp(p: Parser, min_bp: int) -> int | None:
    kinds, binary_bp = p.kinds, BINARY_BP
    k = kinds[p.pos]
    if k in ATOMS and kinds[p.pos + 1] not in POSTFIX_START:  # a name or literal alone
        lhs: int | None = p.leaf(NAME_REF_START if k == K.IDENT else LITERAL_START)
    else:  # (kinds ends with EOF, which is no atom: p.pos + 1 is in range)
        lhs = unary(p)
    if lhs is None:
        return None
    while True:
        op = kinds[p.pos]
        if op == K.AS_KW:
            if min_bp > AS_BP:
                break
            m = p.precede(lhs)
            p.bump()
            type_(p)
            lhs = p.complete(m, K.CAST_EXPR)
            continue
        bp = binary_bp.get(op)
        if bp is None or bp < min_bp:
            break
        m = p.precede(lhs)
        p.bump()
        if expr_bp(p, bp + 1) is None:
            p.unexpected(f"an expression after {describe(op)}")
        lhs = p.complete(m, K.BIN_EXPR)
        if bp == COMPARE_BP and binary_bp.get(kinds[p.pos]) == COMPARE_BP:
            lhs = chained_comparison(p, lhs)
    return lhs


def chained_comparison(p: Parser, lhs: int) -> int:
    """``a < b < c``: report it, and wrap the whole chain in an ERROR node."""
    p.error("comparison operators cannot be chained; combine comparisons with '&&'", code="E0011")
    m = p.precede(lhs)
    while BINARY_BP.get(p.current()) == COMPARE_BP:
        p.bump()
        if expr_bp(p, COMPARE_BP + 1) is None:
            p.unexpected("an expression")
            break
    return p.complete(m, K.ERROR)


def unary(p: Parser) -> int | None:
    if p.kinds[p.pos] not in UNARY_START:
        return postfix(p)
    markers: list[tuple[int, int]] = []
    while p.current() in UNARY_START:
        kind: int = K.REF_EXPR if p.at(K.AMP) else K.PREFIX_EXPR
        markers.append((p.start(), kind))
        p.bump()
        if kind == K.REF_EXPR and at_word(p, "mut", -1):
            p.bump()  # `&mut x` (`&mut` alone borrows a name `mut`)
    operand = postfix(p)
    if operand is None and markers:
        p.unexpected("an expression after the unary operator")
    for m, kind in reversed(markers):
        operand = p.complete(m, kind)
    return operand


def postfix(p: Parser) -> int | None:
    cm = primary(p)
    if cm is None:
        return None
    kinds = p.kinds
    while True:
        k = kinds[p.pos]
        if k == K.L_PAREN:
            m = p.precede(cm)
            arg_list(p)
            cm = p.complete(m, K.CALL_EXPR)
        elif k == K.DOT:
            m = p.precede(cm)
            p.bump()
            if not p.eat(K.INT_NUMBER):
                p.expected("a field number such as .0")
            cm = p.complete(m, K.FIELD_EXPR)
        elif k == K.L_BRACK:
            m = p.precede(cm)
            index_list(p)
            cm = p.complete(m, K.INDEX_EXPR)
        else:
            return cm


def primary(p: Parser) -> int | None:
    k = p.kinds[p.pos]
    if k == K.IDENT:
        return p.leaf(NAME_REF_START)
    if k in LITERALS:
        return p.leaf(LITERAL_START)
    if k == K.L_PAREN:
        return paren_or_tuple(p)
    if k == K.L_BRACE:
        return block(p)
    if k == K.L_BRACK:
        return array(p)
    if k == K.IF_KW:
        return if_expr(p)
    if k == K.FOR_KW:
        return for_expr(p)
    return None


def delimited(
    p: Parser, close: int, item_what: str, item: Callable[[Parser], bool] | None = None
) -> int:
    """Comma-separated items (expressions unless ``item`` says otherwise) up to ``close`` (the
    opener is consumed); returns the count of items and commas seen, i.e. 1 for ``(a)`` and 2
    for ``(a,)``."""
    parse_item = item or expr
    seen = 0
    while not p.at(close) and not p.at(K.EOF):
        if not parse_item(p):
            p.unexpected(item_what)
            if p.current() in EXPR_RECOVERY and not p.at(K.COMMA):
                break
        seen += 1
        if p.at(close):
            break
        if not p.eat(K.COMMA):
            if p.current() not in EXPR_START:
                break  # the caller reports the missing closer
            p.expected(f"',' or {describe(close)}")
            continue
        seen += 1
    return seen


def paren_or_tuple(p: Parser) -> int:
    too_deep = p.enter()
    if too_deep is not None:
        return too_deep
    m = p.start()
    p.bump()
    seen = delimited(p, K.R_PAREN, "an expression")
    p.expect(K.R_PAREN, "')'")
    p.leave()
    return p.complete(m, K.PAREN_EXPR if seen == 1 else K.TUPLE_EXPR)


def array(p: Parser) -> int:
    too_deep = p.enter()
    if too_deep is not None:
        return too_deep
    m = p.start()
    p.bump()
    delimited(p, K.R_BRACK, "an expression")
    p.expect(K.R_BRACK, "']'")
    p.leave()
    return p.complete(m, K.ARRAY_EXPR)


def index_list(p: Parser) -> None:
    """``[item, ...]`` after an expression: the items are expressions or ranges."""
    if p.enter() is not None:
        return
    p.bump()
    if delimited(p, K.R_BRACK, "an index", index_item) == 0:
        p.expected("an index (an integer, or a range such as 1..3)")
    p.expect(K.R_BRACK, "']'")
    p.leave()


def index_item(p: Parser) -> bool:
    """An expression, or a range ``a..b`` whose ends are optional expressions."""
    if p.at(K.DOTDOT):
        m = p.start()
    else:
        lo = expr_bp(p, 1)
        if lo is None:
            return False
        if not p.at(K.DOTDOT):
            return True
        m = p.precede(lo)
    p.bump()
    if p.current() not in INDEX_END and not expr(p):
        p.unexpected("the end of the range, ',' or ']'")
    p.complete(m, K.RANGE)
    return True


def if_expr(p: Parser) -> int:
    """``if c { a } else if d { b } else { c }``.  An else-if chain is parsed by a loop (one
    IF_EXPR per ``if``, each nested in the previous one's else part); an ``if`` in a condition
    recurses, so it counts towards the nesting limit like a bracket."""
    if p.depth >= MAX_NESTING:
        return too_deep_if(p)
    markers: list[int] = []
    while True:
        markers.append(p.start())
        p.bump()
        p.depth += 1  # only the condition: the branches are blocks, which count themselves
        if not expr(p):
            p.unexpected("a condition")
        p.depth -= 1
        branch(p, "'{' and the value when the condition holds")
        if not p.eat(K.ELSE_KW):
            p.expected("'else' and a block: an if has a value on both branches")
            break
        if p.at(K.IF_KW):
            continue
        branch(p, "'{' or 'if' after 'else'")
        break
    for m in reversed(markers):
        p.complete(m, K.IF_EXPR)
    return markers[0]


def branch(p: Parser, what: str) -> None:
    if p.at(K.L_BRACE):
        block(p)
    else:
        p.expected(what)


def too_deep_if(p: Parser) -> int:
    """An ``if`` nested too deep: report it once and skip it inside an ERROR node.  Bracket
    groups are skipped whole; ``pending`` counts the ifs whose else part is still to come
    (an ``if`` in a condition adds one, ``else if`` continues a chain, an else block ends
    one), so the skip ends where the outermost skipped ``if`` ends."""
    m = p.start()
    p.error(f"brackets nested more than {MAX_NESTING} deep; use let bindings", code="E0012")
    pending = 0
    while not p.at(K.EOF) and p.current() not in CLOSED_BY:
        if p.eat(K.IF_KW):
            pending += 1
        elif p.current() in CLOSERS and not p.at(K.L_BRACE):
            p.skip_balanced()
        elif not p.at(K.L_BRACE):
            p.bump()
        else:
            p.skip_balanced()
            if not p.eat(K.ELSE_KW) or p.eat(K.IF_KW):
                continue  # a block in a condition, or an else-if chain going on
            if p.at(K.L_BRACE):
                p.skip_balanced()
            pending -= 1
            if pending == 0:
                break
    return p.complete(m, K.ERROR)


def for_expr(p: Parser) -> int:
    """``for i in LO..HI with (c = init, ...) { body }``.  The bounds recurse into
    expressions, so they count towards the nesting limit like an ``if`` condition (the
    carried values are in brackets and the body is a block, which count themselves)."""
    if p.depth >= MAX_NESTING:
        return too_deep_for(p)
    m = p.start()
    p.bump()
    name(p, "the loop index name (or _)")
    p.expect(K.IN_KW, "'in' and the loop bounds, such as 0..8")
    if p.at(K.DOTDOT) or p.current() in EXPR_START:
        p.depth += 1  # only the bounds: the carried values and the body count themselves
        loop_bounds(p)
        p.depth -= 1
    if not p.eat(K.WITH_KW):
        p.expected("'with' and the carried values, such as with (acc = 0.0)")
    elif p.at(K.L_PAREN):
        loop_vars(p)
    else:
        p.expected("'(' and the carried values, such as (acc = 0.0)")
    branch(p, "'{' and the loop body")
    return p.complete(m, K.FOR_EXPR)


def loop_bounds(p: Parser) -> None:
    """``LO..HI`` as a RANGE node: both ends are expressions (the checker wants literals)."""
    m = p.start()
    if not p.at(K.DOTDOT) and not expr(p):
        p.unexpected("the first index of the loop, such as 0")
    if p.expect(K.DOTDOT, "'..' and the end of the loop range") and not expr(p):
        p.unexpected("the end of the loop range, such as 8")
    p.complete(m, K.RANGE)


def loop_vars(p: Parser) -> None:
    """``(c = init, ...)``: at least one carried value, trailing ``,`` ok."""
    if p.enter() is not None:
        return
    m = p.start()
    p.bump()
    if delimited(p, K.R_PAREN, "a carried value 'name = value'", loop_var) == 0:
        p.expected("a carried value such as acc = 0.0")
    p.expect(K.R_PAREN, "')'")
    p.leave()
    p.complete(m, K.LOOP_VARS)


def loop_var(p: Parser) -> bool:
    if not p.at(K.IDENT):
        return False
    m = p.start()
    name(p, "a carried value's name")
    if p.expect(K.EQ, "'=' and the initial value") and not expr(p):
        p.unexpected("the initial value")
    p.complete(m, K.LOOP_VAR)
    return True


def too_deep_for(p: Parser) -> int:
    """A ``for`` nested too deep: report it once and skip it inside an ERROR node.  Bracket
    groups are skipped whole; ``pending`` counts the loops whose body is still to come (a
    ``for`` in the bounds adds one; a ``{`` group right after a ``with (...)`` group is a body
    and ends one), so the skip ends where the outermost skipped ``for`` ends."""
    m = p.start()
    p.error(f"brackets nested more than {MAX_NESTING} deep; use let bindings", code="E0012")
    pending = 0
    after_with = False
    while not p.at(K.EOF) and p.current() not in CLOSED_BY:
        body = after_with and p.at(K.L_BRACE)
        after_with = False
        if p.eat(K.FOR_KW):
            pending += 1
        elif p.eat(K.WITH_KW):
            if p.at(K.L_PAREN):
                p.skip_balanced()
                after_with = True
        elif p.current() in CLOSERS:
            p.skip_balanced()
            pending -= body
            if body and pending == 0:
                break
        else:
            p.bump()
    return p.complete(m, K.ERROR)


def arg_list(p: Parser) -> None:
    if p.enter() is not None:
        return
    m = p.start()
    p.bump()
    while not p.at(K.R_PAREN) and not p.at(K.EOF):
        if p.at(K.IDENT) and p.nth(1) == K.EQ:
            kw = p.start()
            name(p, "an argument name")
            p.bump()
            if not expr(p):
                p.unexpected("the argument value")
            p.complete(kw, K.KWARG)
        elif not expr(p):
            p.unexpected("an argument")
            if p.current() in EXPR_RECOVERY and not p.at(K.COMMA):
                break
        if p.at(K.R_PAREN):
            break
        if not p.eat(K.COMMA):
            if p.current() not in EXPR_START:
                break
            p.expected("',' or ')'")
    p.expect(K.R_PAREN, "')'")
    p.leave()
    p.complete(m, K.ARG_LIST)
