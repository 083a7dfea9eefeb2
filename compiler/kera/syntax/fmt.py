"""The formatter: one canonical layout, computed from the parser's event stream.

The formatter walks the same events as the tree builder, with the full token list beside it,
and rewrites only whitespace: the non-trivia tokens and the comments come out exactly as they
went in, in the same order.  Layout rules:

* items are separated by one blank line; the file ends with one newline;
* a block puts each ``let`` and its value on their own lines, indented four spaces per level;
  one blank line between statements is kept where the source had one or more;
* one space around binary operators, ``=``, ``->`` and ``as``, after ``,`` and ``:``; none inside
  brackets, before ``(`` of a call or parameter list, before ``[`` of a shape or an index,
  around ``.`` and ``..``, after a unary operator;
* ``f32[8] @device``, ``x: &mut f32[8]``, ``&x``, ``&mut b``, ``effects(transfer)``: no space after
  ``@`` or a borrow's ``&``, nor before the ``(`` of ``effects``;
* a ``for`` reads ``for i in 0..8 with (a = x, b = y) {``, its body laid out like any block;
  the ``{`` of its body stays on the line of the ``with`` list;
* an ``if`` the author wrote on one line, with no comment inside and no ``let`` in its blocks,
  stays on one line: ``if c { a } else if d { b } else { e }`` (an assignment or a call statement
  counts as a ``let``).  Any other ``if`` has its
  branches laid out like any block, with ``} else {`` and ``} else if d {`` on one line;
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
_NO_SPACE_AFTER = frozenset({K.L_PAREN, K.L_BRACK, K.DOT, K.DOTDOT, K.AT})
_REFS = frozenset({K.REF_MODE, K.REF_EXPR})  # `&x`, `&mut x`, `x: &f32`
_NO_SPACE_BEFORE = frozenset({K.R_PAREN, K.R_BRACK, K.COMMA, K.SEMI, K.DOT, K.COLON})
_UNARY = frozenset({K.MINUS, K.BANG, K.TILDE})
_JOIN_BEFORE = frozenset({K.COMMA, K.SEMI, K.DOT, K.COLON, K.ELSE_KW})
_NO_SPACE_BEFORE_BRACK = frozenset({K.DIMS, K.INDEX_EXPR})  # f32[4], x[0]
_BLOCK_OWNERS = frozenset({K.IF_EXPR, K.FOR_EXPR})  # `if c {`, `for i in 0..4 with (..) {`
_STATEMENTS = frozenset({K.LET_STMT, K.ASSIGN_STMT, K.EXPR_STMT})  # keep an if multi-line


def _space(prev: int, prev_parent: int, cur: int, parent: int) -> bool:
    """Whether one space separates two tokens on one line."""
    if prev in _NO_SPACE_AFTER or cur in _NO_SPACE_BEFORE:
        return False
    if cur == K.DOTDOT:
        return prev == K.COMMA  # x[1..3], x[0, ..2]
    if prev in _UNARY and prev_parent == K.PREFIX_EXPR:
        return False
    if prev == K.AMP and prev_parent in _REFS:
        return False
    if cur == K.L_PAREN and parent in (K.ARG_LIST, K.PARAM_LIST, K.EFFECTS):
        return False
    return not (cur == K.L_BRACK and parent in _NO_SPACE_BEFORE_BRACK)


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
        self.inline = 0  # stack depth of the one-line if being written; 0 when none
        self.one_line: set[int] | None = None  # _one_line_ifs, computed at the first if

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

    def start(self, kind: int, events: list[Event], i: int) -> None:
        parent = self.stack[-1] if self.stack else -1
        if kind == K.FN_DEF and parent == K.SOURCE_FILE:
            self.w.request(2)
        elif parent == K.BLOCK and not self.inline:
            self.w.request(1)
        self.stack.append(kind)
        if kind == K.IF_EXPR and not self.inline and parent != K.IF_EXPR:  # a chain's head
            if self.one_line is None:
                self.one_line = _one_line_ifs(self.kinds, self.starts, self.data, events)
            if i in self.one_line:
                self.inline = len(self.stack)

    def finish(self) -> None:
        if self.inline == len(self.stack):
            self.inline = 0
        self.stack.pop()

    def joins(self, tok: int) -> bool:
        """Whether ``tok`` stays on the line before it whatever the author wrote: ``, ; . :``,
        ``else``, and the ``{`` of an if's branch or a loop's body."""
        if tok in _JOIN_BEFORE:
            return True
        stack = self.stack
        return tok == K.L_BRACE and len(stack) > 1 and stack[-2] in _BLOCK_OWNERS

    def token(self) -> None:
        """Emit the next significant token (and the comments before it)."""
        w, kinds = self.w, self.kinds
        j = self.ti
        while kinds[j] in TRIVIA:
            j += 1
        tok = kinds[j]
        parent = self.stack[-1]
        closes_block = parent == K.BLOCK and tok == K.R_BRACE
        breaks = closes_block and not self.inline
        if breaks:
            w.request(1)
        newlines = self.trivia()
        if closes_block:
            w.indent -= 1
        if breaks:
            w.request(1)
        if newlines and not w.brk and not self.joins(tok):
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


def _one_line_ifs(
    kinds: list[int], starts: list[int], data: bytes, events: list[Event]
) -> set[int]:
    """The event indices of the ``if`` starts that stay on one line: no line break or comment
    between the if's first and last token, and no ``let`` inside.  One pass each over tokens
    and events, then prefix counts compared at each if's first and last token, so long
    else-if chains cost linear time."""
    breaks: list[int] = []  # breaks[t]: line breaks or comments between tokens 0 and t
    bad = False
    for i, k in enumerate(kinds):
        if k in TRIVIA:
            bad = bad or k != K.WHITESPACE or b"\n" in data[starts[i] : starts[i + 1]]
            continue
        breaks.append(breaks[-1] + bad if breaks else 0)
        bad = False
    lets = [0] * (len(breaks) + 2)  # lets[t + 1]: let statements starting at tokens <= t
    ifs: list[tuple[int, int, int]] = []  # (event index, first token, last token)
    opened: list[tuple[int, int]] = []
    tok = 0
    for i, (tag, kind, _) in enumerate(events):
        if tag == TOKEN:
            tok += 1
        elif tag == START:
            lets[tok + 1] += kind in _STATEMENTS
            opened.append((i if kind == K.IF_EXPR else -1, tok))
        elif tag == FINISH:
            e, first = opened.pop()
            if e >= 0:
                ifs.append((e, first, tok - 1))
    for t in range(1, len(lets)):
        lets[t] += lets[t - 1]
    return {e for e, a, b in ifs if breaks[a] == breaks[b] and lets[a] == lets[b + 1]}


def format_events(tokens: Tokens, events: list[Event]) -> bytes:
    f = _Formatter(tokens)
    for i, (tag, kind, _) in enumerate(events):
        if tag == START:
            f.start(kind, events, i)
        elif tag == FINISH:
            f.finish()
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
