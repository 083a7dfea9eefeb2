"""Incremental reparsing on the green tree: an edit reparses only the item it falls in.

A :class:`Parsed` source is its bytes, its green tree and its syntax (lexer and parser)
diagnostics.  :func:`reparse` applies one :class:`Edit` (a byte range replaced by new bytes)
and returns the new :class:`Parsed`, equal to ``full(new bytes)`` in tree bytes, debug tree
and diagnostics (``tests/lsp/test_reparse.py`` holds them equal on Hypothesis-drawn edit
sequences over the corpus), but built by reparsing the smallest enclosing item, a top-level
``fn``, on its own and reusing every other item's green node as it is (the same objects).

Why one item can be parsed alone.  Items are the top-level nodes of ``SOURCE_FILE``; the
parser starts every item at depth 0 with no state from the items before it, and the lexer
starts a fresh token at the item's first byte (its ``fn``/``export``, which no token before it
can absorb).  The item parsed alone is the item the full parse would build when:

* the edit lies strictly inside the old item (its first and last bytes untouched), so the
  item still starts where it did;
* the old and the new item each end with the closing ``}`` of their body: the parser then
  never looked past the item (no lookahead at the next item or at the end of the file, whose
  names appear in messages: "found 'fn'" / "found end of file"), and no block comment runs
  past the item's end (an unterminated ``/*`` would swallow the rest of the file);
* the new text parses to exactly one ``FN_DEF`` covering all of it (an edit that splits an
  item in two, or joins it to the next, is a boundary change);
* neither text has the name ``return`` (in a comment it is fine): whether ``return`` starts a
  misplaced return statement depends on whether *any* item of the file declares that name
  (``parser.binds_return``).

Anything else falls back to a full parse (``Parsed.incremental`` says which was done).

Diagnostics: the old item's own diagnostics (found by parsing its old text alone, which by
the same argument gives what the full parse gave) are taken out, the later ones shifted by
the edit's change in length, and the new item's put in.  The list is kept in source order
(``sort_unique``), which is how the front end reports them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Final

from kera.syntax.diagnostics import Diagnostic, sort_unique
from kera.syntax.kinds import SyntaxKind
from kera.syntax.lexer import lex
from kera.syntax.parser import parse
from kera.syntax.tree import GreenNode, GreenToken, build_green

K = SyntaxKind
#: bytes whose presence in an item makes its parse depend on other items (module doc)
_CONTEXT_WORD: Final = b"return"


@dataclass(frozen=True, slots=True)
class Edit:
    """Replace ``data[start:end]`` with ``text`` (byte offsets into the old source)."""

    start: int
    end: int
    text: bytes

    def apply(self, data: bytes) -> bytes:
        return data[: self.start] + self.text + data[self.end :]


@dataclass(frozen=True, slots=True)
class Parsed:
    """A parsed source: bytes, green tree, syntax diagnostics in source order."""

    data: bytes
    tree: GreenNode
    diagnostics: tuple[Diagnostic, ...]
    incremental: bool = False  # whether the last edit reparsed one item (else: everything)
    changed: int = -1  # then: the index of that item among the tree's children


def full(data: bytes) -> Parsed:
    """Parse the whole source (what ``kera.frontend.parse_source`` does)."""
    tokens = lex(data)
    result = parse(tokens)
    tree = build_green(tokens, result.events, result.sig)
    diags = sort_unique([*tokens.diagnostics, *result.diagnostics])
    return Parsed(data, tree, tuple(diags))


def reparse(old: Parsed, edit: Edit) -> Parsed:
    """``old`` with ``edit`` applied: one item reparsed where that is exact, else all."""
    data = edit.apply(old.data)
    return _reparse_item(old, edit, data) or full(data)


def parse_item(text: bytes) -> tuple[GreenNode, list[Diagnostic]] | None:
    """The ``FN_DEF`` of ``text`` parsed alone, with its diagnostics (offsets into ``text``),
    or None when ``text`` is not exactly one item that ends with its body's ``}``."""
    tokens = lex(text)
    if _CONTEXT_WORD in text and any(
        k == K.IDENT and tokens.text(i) == _CONTEXT_WORD for i, k in enumerate(tokens.kinds)
    ):
        return None
    result = parse(tokens)
    tree = build_green(tokens, result.events, result.sig)
    if len(tree.children) != 1:
        return None
    item = tree.children[0]
    if not isinstance(item, GreenNode) or not ends_with_body(item):
        return None
    return item, [*tokens.diagnostics, *result.diagnostics]


def ends_with_body(item: GreenNode) -> bool:
    """Whether ``item`` is a ``FN_DEF`` whose last child is its body block, closed by ``}``
    (then its parse never looked past it)."""
    if item.kind != K.FN_DEF or not item.children:
        return False
    body = item.children[-1]
    if not isinstance(body, GreenNode) or body.kind != K.BLOCK or not body.children:
        return False
    last = body.children[-1]
    return isinstance(last, GreenToken) and last.kind == K.R_BRACE


def item_at(tree: GreenNode, start: int, end: int) -> tuple[int, int] | None:
    """(child index, offset) of the top-level item that strictly contains ``start..end``
    (its first and last bytes outside the range), or None."""
    pos = 0
    for i, child in enumerate(tree.children):
        after = pos + child.width
        if pos < start and end < after:
            return (i, pos) if isinstance(child, GreenNode) and child.kind == K.FN_DEF else None
        if start < after:
            return None
        pos = after
    return None


def _reparse_item(old: Parsed, edit: Edit, data: bytes) -> Parsed | None:
    found = item_at(old.tree, edit.start, edit.end)
    if found is None:
        return None
    index, offset = found
    item = old.tree.children[index]
    assert isinstance(item, GreenNode)
    if not ends_with_body(item):
        return None
    old_text = old.data[offset : offset + item.width]
    before = parse_item(old_text)
    if before is None:
        return None
    local = Edit(edit.start - offset, edit.end - offset, edit.text)
    new_text = local.apply(old_text)
    return _splice(old, edit, data, index, offset, before[1], new_text)


def _splice(
    old: Parsed,
    edit: Edit,
    data: bytes,
    index: int,
    offset: int,
    old_diags: list[Diagnostic],
    new_text: bytes,
) -> Parsed | None:
    after = parse_item(new_text)
    if after is None:
        return None
    green, new_diags = after
    delta = len(edit.text) - (edit.end - edit.start)
    item_end = offset + old.tree.children[index].width
    remove = {shifted(d, offset).key() for d in old_diags}
    kept: list[Diagnostic] = []
    for d in old.diagnostics:
        if d.key() in remove and offset <= d.start <= item_end:
            continue
        kept.append(shifted(d, delta) if d.start >= item_end else d)
    kept += (shifted(d, offset) for d in new_diags)
    children = (*old.tree.children[:index], green, *old.tree.children[index + 1 :])
    tree = GreenNode(K.SOURCE_FILE, children, old.tree.width + delta)
    return Parsed(data, tree, tuple(sort_unique(kept)), incremental=True, changed=index)


def shifted(d: Diagnostic, by: int) -> Diagnostic:
    """``d`` moved by ``by`` bytes, its notes too (every other field kept as it is)."""
    if not by:
        return d
    notes = getattr(d, "notes", ())
    moved: dict[str, Any] = {"start": d.start + by, "end": d.end + by}
    if notes:
        moved["notes"] = tuple(replace(n, start=n.start + by, end=n.end + by) for n in notes)
    return replace(d, **moved)
