"""The formatter: one canonical layout, computed from the parser's event stream.

The formatter walks the same events as the tree builder, with the full token list beside it,
and rewrites only whitespace: the non-trivia tokens and the comments come out exactly as they
went in, in the same order.  Layout rules:

* items are separated by one blank line; the file ends with one newline;
* a block puts each ``let`` and its value on their own lines, indented four spaces per level;
  one blank line between statements is kept where the source had one or more;
* one space around binary operators, ``=``, ``->`` and ``as``, after ``,`` and ``:``; none inside
  brackets, before ``(`` of a call or parameter list, before ``[`` of a shape, around ``.``,
  after a unary operator;
* inside a statement, a line break the author wrote is kept (except before ``, ; . :``) and
  the statement continues one level deeper; a closing ``)`` or ``]`` starting a line goes back
  to the statement's level (so long argument and parameter lists can be laid out by hand);
  other whitespace is normalised.  Lines are never wrapped automatically;
* a comment on the same line as code stays there (after one space); a comment on its own line
  stays on its own line, at the indentation of what follows; a line comment inside a statement
  breaks the line like an author's line break.

Input with any lexer or parser diagnostic is not formatted (:func:`format_bytes` returns None):
a layout cannot be trusted where the structure is unknown.  The result is idempotent:
formatting formatted text returns it unchanged.
"""

from __future__ import annotations

from kera.syntax.kinds import TRIVIA, SyntaxKind
from kera.syntax.lexer import Tokens, lex
from kera.syntax.parser import FINISH, START, TOKEN, Event, parse

K = SyntaxKind
INDENT = b"    "
_NO_SPACE_AFTER = frozenset({K.L_PAREN, K.L_BRACK, K.DOT})
_NO_SPACE_BEFORE = frozenset({K.R_PAREN, K.R_BRACK, K.COMMA, K.SEMI, K.DOT, K.COLON})
_UNARY = frozenset({K.MINUS, K.BANG, K.TILDE})
_JOIN_BEFORE = frozenset({K.COMMA, K.SEMI, K.DOT, K.COLON})


def _space(prev: int, prev_parent: int, cur: int, parent: int) -> bool:
    """Whether one space separates two tokens on one line."""
    if prev in _NO_SPACE_AFTER or cur in _NO_SPACE_BEFORE:
        return False
    if prev in _UNARY and prev_parent == K.PREFIX_EXPR:
        return False
    if cur == K.L_PAREN and parent in (K.ARG_LIST, K.PARAM_LIST):
        return False
    return not (cur == K.L_BRACK and parent == K.DIMS)


class _Writer:
    """Output with pending line breaks: ``brk`` 0 (same line), 1 (newline) or 2 (blank line);
    ``structural`` breaks start a statement, other breaks continue an expression."""

    def __init__(self) -> None:
        self.out: list[bytes] = []
        self.indent = 0
        self.brk = 0
        self.structural = False
        self.prev = -1
        self.prev_parent = -1

    def request(self, brk: int) -> None:
        self.brk = max(self.brk, brk)
        self.structural = True

    def emit(self, text: bytes, space: bool, blank_in_source: bool, closer: bool = False) -> None:
        if not self.out:
            pass
        elif self.brk:
            blank = self.brk == 2 or (blank_in_source and self.structural)
            depth = self.indent + (0 if self.structural or closer else 1)
            self.out.append(b"\n\n" if blank else b"\n")
            self.out.append(INDENT * depth)
        elif space:
            self.out.append(b" ")
        self.out.append(text)
        self.brk = 0
        self.structural = False

    def comment(self, text: bytes, own_line: bool, blank_in_source: bool, nl_after: bool) -> None:
        ends_line = nl_after or text.startswith(b"//")
        if own_line or not self.out:
            keep = self.structural and self.brk > 0
            self.brk = max(self.brk, 1)
            self.emit(text, True, blank_in_source)
            self.structural = keep
            self.brk = 1 if ends_line else 0
        else:  # a trailing comment stays on its line; a pending break stays pending
            self.out.append(b" " + text)
            if ends_line:
                self.brk = max(self.brk, 1)
        self.prev = K.BLOCK_COMMENT


class _Formatter:
    """Walks the parser's events, writing each token with the spacing and line breaks of the
    canonical layout and keeping every comment."""

    def __init__(self, tokens: Tokens) -> None:
        self.kinds, self.starts, self.data = tokens.kinds, tokens.starts, tokens.data
        self.w = _Writer()
        self.stack: list[int] = []
        self.ti = 0

    def trivia(self) -> int:
        """Emit the comments before the next significant token; returns newlines seen last."""
        kinds, starts, data, n = self.kinds, self.starts, self.data, len(self.kinds)
        newlines = 0
        while self.ti < n and kinds[self.ti] in TRIVIA:
            ti = self.ti
            text = data[starts[ti] : starts[ti + 1]]
            if kinds[ti] == K.WHITESPACE:
                newlines += text.count(b"\n")
            else:
                nxt = data[starts[ti + 1] : starts[ti + 2]] if ti + 1 < n else b"\n"
                nl_after = kinds[ti + 1] == K.WHITESPACE and b"\n" in nxt if ti + 1 < n else True
                self.w.comment(text, newlines > 0, newlines > 1, nl_after)
                newlines = 0
            self.ti += 1
        return newlines

    def start(self, kind: int) -> None:
        parent = self.stack[-1] if self.stack else -1
        if kind == K.FN_DEF and parent == K.SOURCE_FILE:
            self.w.request(2)
        elif parent == K.BLOCK:
            self.w.request(1)
        self.stack.append(kind)

    def token(self) -> None:
        """Emit the next significant token (and the comments before it)."""
        w, kinds = self.w, self.kinds
        j = self.ti
        while kinds[j] in TRIVIA:
            j += 1
        tok = kinds[j]
        parent = self.stack[-1]
        closes_block = parent == K.BLOCK and tok == K.R_BRACE
        if closes_block:
            w.request(1)
        newlines = self.trivia()
        if closes_block:
            w.indent -= 1
            w.request(1)
        if newlines and not w.brk and tok not in _JOIN_BEFORE:
            w.brk = 1  # a line break the author put inside an expression is kept
        space = _space(w.prev, w.prev_parent, tok, parent)
        closer = tok in (K.R_PAREN, K.R_BRACK)
        w.emit(
            self.data[self.starts[self.ti] : self.starts[self.ti + 1]], space, newlines > 1, closer
        )
        w.prev, w.prev_parent = tok, parent
        if parent == K.BLOCK and tok == K.L_BRACE:
            w.indent += 1
        self.ti += 1


def format_events(tokens: Tokens, events: list[Event]) -> bytes:
    f = _Formatter(tokens)
    for tag, kind, _ in events:
        if tag == START:
            f.start(kind)
        elif tag == FINISH:
            f.stack.pop()
        elif tag == TOKEN:
            f.token()
    f.w.request(1)
    f.trivia()
    return b"".join(f.w.out) + (b"\n" if f.w.out else b"")


def format_bytes(data: bytes) -> bytes | None:
    """The formatted source, or None when the source has syntax errors."""
    tokens = lex(data)
    if tokens.diagnostics:
        return None
    result = parse(tokens)
    if result.diagnostics:
        return None
    return format_events(tokens, result.events)
