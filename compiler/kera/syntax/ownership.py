"""What the checker knows about names: bindings (:class:`Slot`), borrows, moves and spaces.

A function body's environment maps each name to a :class:`Slot`, one per binding (a ``let``,
a parameter, a loop's index or carried value).  A slot holds the binding's current value
and what the ownership rules need (``docs/language.md``, *Memory spaces, ownership and
effects*):

* ``kind``: ``let`` (a value), ``mut`` (``let mut``, assignable), ``inout`` (a ``&mut``
  parameter, assignable), ``ref`` (a ``&`` parameter), ``borrow`` (``let r = &x;``);
* ``moved``: where ``transfer`` moved it, or None;
* ``level``: the loop depth it was bound at, so that a move inside a deeper loop body is
  seen as a move in every iteration (E0402).

Assignable slots are *cells*: an assignment or a ``&mut`` argument replaces their value, and
:class:`Log` records each change so that an ``if`` can evaluate its branches one after the
other and merge what they changed (``select``), and a loop can carry the cells its body
updates.  Borrow bindings are :class:`Borrow` records, live until the end of the block that
binds them; a conflicting action on the borrowed slot (assignment, ``&mut``, move) is kept
pending and reported when the borrow is read afterwards (a borrow lasts until its last
use).

Spaces: :func:`combine` is the one rule of which spaces an op's operands may mix and where
its result lives.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from kera.ops import TensorType
from kera.syntax.kinds import SyntaxKind
from kera.syntax.tree import GreenNode, GreenToken

K = SyntaxKind
Span = tuple[int, int]

#: slot kinds that an assignment or a ``&mut`` argument may update
ASSIGNABLE = frozenset({"mut", "inout"})
#: slot kinds that are borrows: they cannot be moved out of (E0403)
BORROWED = frozenset({"ref", "inout", "borrow"})
#: what a space computes with: ``pinned`` is host memory (``docs/language.md``)
_COMPUTE = {"host": "host", "pinned": "host", "device": "device", "unified": "unified"}


class Slot:
    """One binding of a name (see the module doc)."""

    __slots__ = ("kind", "level", "moved", "moved_to", "name", "space", "span", "type", "value")

    def __init__(self, name: str, value: Any, kind: str, span: Span, level: int) -> None:
        self.name = name
        self.value = value
        self.kind = kind
        self.span = span
        self.level = level
        self.moved: Span | None = None
        self.moved_to = ""
        self.type: TensorType | None = None  # the type an assignment must give (cells)
        self.space: str | None = None  # the space an assignment must give (cells)


class Borrow:
    """A borrow binding ``let r = &x;`` while its block runs: the borrowed slot, where it was
    taken, the conflicting actions seen since (reported at the next read of ``r``) and the
    reads of ``r`` (event numbers and spans, for the loop rule E0407)."""

    __slots__ = ("conflicts", "level", "reads", "slot", "span", "target")

    def __init__(self, slot: Slot, target: Slot, span: Span, level: int) -> None:
        self.slot = slot
        self.target = target
        self.span = span
        self.level = level
        self.conflicts: list[tuple[int, str, Span]] = []  # (clock, what, where)
        self.reads: list[tuple[int, Span]] = []


class Log:
    """Changes to cells and moves, in order, so that they can be undone and replayed."""

    __slots__ = ("cells", "moves")

    def __init__(self) -> None:
        self.cells: list[tuple[Slot, Any]] = []  # (cell, its value before the change)
        self.moves: list[Slot] = []

    def mark(self) -> tuple[int, int]:
        return len(self.cells), len(self.moves)

    def set(self, slot: Slot, value: Any) -> None:
        self.cells.append((slot, slot.value))
        slot.value = value

    def undo(self, mark: tuple[int, int]) -> tuple[dict[Slot, Any], list[tuple[Slot, Span, str]]]:
        """Undo the changes since ``mark``; the cells' values as they were at the end (each
        changed cell once) and the moves (slot, where, to), to merge or replay."""
        changed = self.cells[mark[0] :]
        final = {slot: slot.value for slot, _ in changed}
        for slot, old in reversed(changed):
            slot.value = old
        del self.cells[mark[0] :]
        moved = [(s, s.moved, s.moved_to) for s in self.moves[mark[1] :] if s.moved is not None]
        for slot, _, _ in moved:
            slot.moved = None
        del self.moves[mark[1] :]
        return final, moved


def combine(spaces: Iterable[str | None]) -> tuple[str | None, bool]:
    """Where an op's result lives and whether its operands' spaces are compatible: ``host``
    and ``pinned`` compute as ``host``; ``unified`` goes with anything; a value of no space
    (literals) adapts.  All unified gives unified; no space at all gives None."""
    seen: set[str] = set()
    any_space = False
    for sp in spaces:
        if sp is not None:
            any_space = True
            kind = _COMPUTE[sp]
            if kind != "unified":
                seen.add(kind)
    if len(seen) > 1:
        return None, False
    if seen:
        return seen.pop(), True
    return ("unified" if any_space else None), True


def updated_names(body: GreenNode) -> set[str]:
    """The names a loop body may update: assignment targets and ``&mut`` argument names,
    anywhere inside it (nested blocks, branches and loops included).  A name the body binds
    itself may be listed too; carrying an outer cell the body leaves alone changes nothing."""
    out: set[str] = set()
    for g in _subtree(body):
        if g.kind == K.ASSIGN_STMT:
            _first_name(g, K.NAME, out)
        elif g.kind == K.REF_EXPR and _is_mut_ref(g):
            _first_name(g, K.NAME_REF, out)
    return out


def _subtree(root: GreenNode) -> Iterator[GreenNode]:
    """Every green node under ``root``, ``root`` included (an explicit stack: no recursion on
    the tree's depth)."""
    stack = [root]
    while stack:
        g = stack.pop()
        yield g
        stack.extend(c for c in g.children if isinstance(c, GreenNode))


def _is_mut_ref(g: GreenNode) -> bool:
    return any(isinstance(c, GreenToken) and c.kind == K.IDENT for c in g.children)


def _first_name(g: GreenNode, kind: int, out: set[str]) -> None:
    for c in g.children:
        if isinstance(c, GreenNode):
            if c.kind == kind:
                tok = next((t for t in c.children if isinstance(t, GreenToken)), None)
                if tok is not None and tok.kind == K.IDENT:
                    out.add(tok.text.decode("utf-8", "replace"))
            return


def called_names(body: GreenNode) -> set[str]:
    """The names called anywhere inside a body (``transfer``, user functions ...): a loop
    whose body may have effects is built as an effectful loop."""
    out: set[str] = set()
    for g in _subtree(body):
        if g.kind == K.CALL_EXPR:
            _first_name(g, K.NAME_REF, out)
    return out
