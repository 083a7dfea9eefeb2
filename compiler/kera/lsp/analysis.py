"""One document's analysis, kept up to date edit by edit.

The tree comes from ``kera.syntax.reparse`` (one item reparsed per edit where that is exact).
Checking is cached per function: a function's *unit* is the function together with every
function it reaches through calls and every function sharing one of those names; the unit is
checked with the front end's own ``collect`` and ``Builder`` on a tree that holds just those
items, at their true offsets (the other items are replaced by whitespace of the same width,
so every span is the one the whole file has).  A unit's result (its diagnostics inside the
function, the types of its expressions and bindings, the built export) is keyed by the green
nodes of its items (edits that leave them alone leave them the same objects) and by the set
of function names in the file (unknown-name messages suggest the closest one).  So a keystroke
re-checks the edited function and the functions that call it, and nothing else.  A new
document is checked whole once (``kera.frontend.check_tree``, as ``kerac check`` does) and its
diagnostics split by function; those results carry no types (``UnitResult.partial``) until a
request asks for them (``Analysis.result``).

The union of the units' diagnostics is what ``kera.frontend.compile_source`` reports, because
a function's body gives the same diagnostics whether a call expands it or it is checked on its
own (``kera.frontend.check_tree``).  Two things break that, and then the whole file is checked
the ordinary way instead: recursion (E0105 names the cycle from where the expansion entered
it) and the expansion budgets (E0111, E0112, counted per export across its callees).
``tests/lsp/test_reparse.py`` holds the two equal on Hypothesis-drawn edit sequences.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from kera import frontend, limits
from kera.ir import Function, Node
from kera.syntax.build import Builder, Deferred, Tup
from kera.syntax.builtins import BUILTIN_NAMES
from kera.syntax.check import Reporter, Signature, collect
from kera.syntax.diagnostics import Diagnostic, LineIndex, sort_unique
from kera.syntax.kinds import SyntaxKind
from kera.syntax.lexer import Tokens
from kera.syntax.reparse import Edit, Parsed, full, reparse, shifted
from kera.syntax.tree import (
    FnDef,
    Green,
    GreenNode,
    GreenToken,
    SyntaxToken,
    red,
    root,
)

K = SyntaxKind
#: codes whose presence means the per-function check may differ from the whole-file one
WHOLE_FILE_CODES = frozenset({"E0105", "E0111", "E0112"})


@dataclass(frozen=True, slots=True)
class ItemFacts:
    """What the unit graph needs of one ``fn`` item (computed once per green node)."""

    name: str | None
    export: bool
    calls: frozenset[str]  # every name called (``name(...)``) anywhere in the item
    reads: frozenset[str]  # every name read (``NAME_REF``), called or not


@dataclass(slots=True)
class UnitResult:
    """A checked function; offsets relative to the function's start."""

    diagnostics: list[Diagnostic]
    function: Function | None  # the built export (fingerprint, node count)
    signature: Signature | None
    #: (start, end, type text) of every expression the builder built, innermost found last
    types: list[tuple[int, int, str]] = field(default_factory=list)
    #: name token start -> the type text of what it binds (parameters, lets, loop names)
    bindings: dict[int, str] = field(default_factory=dict)
    #: a diagnostic has a note outside the function: its offsets depend on where the other
    #: functions are, so any edit checks it again
    anchored: bool = False
    #: made from a whole-file check (on open): diagnostics and function only; the types and
    #: bindings are filled in by ``Analysis.result`` when a request needs them
    partial: bool = False


class Item:
    """A top-level ``fn`` of the current version: its green node, offset and facts."""

    __slots__ = ("end", "facts", "green", "offset")

    def __init__(self, green: GreenNode, offset: int, facts: ItemFacts) -> None:
        self.green = green
        self.offset = offset
        self.facts = facts
        self.end = offset + green.width


def item_facts(green: GreenNode) -> ItemFacts:
    """Name, export flag and called names of a ``FN_DEF``, by walking its green nodes."""
    fn = red(green, 0, None)
    assert isinstance(fn, FnDef)
    tok = fn.name()
    calls: set[str] = set()
    reads: set[str] = set()
    stack: list[Green] = [green]
    while stack:
        g = stack.pop()
        if isinstance(g, GreenToken):
            continue
        if g.kind == K.NAME_REF and g.children and isinstance(g.children[0], GreenToken):
            reads.add(g.children[0].text.decode("utf-8", "replace"))
        if g.kind == K.CALL_EXPR:
            callee = g.children[0] if g.children else None
            if isinstance(callee, GreenNode) and callee.kind == K.NAME_REF:
                first = callee.children[0]
                calls.add(
                    first.text.decode("utf-8", "replace") if isinstance(first, GreenToken) else ""
                )
        stack.extend(g.children)
    return ItemFacts(tok.text if tok else None, fn.is_export(), frozenset(calls), frozenset(reads))


def describe_value(value: Any) -> str | None:
    """A value's type as the hover shows it."""
    if isinstance(value, Node):
        return str(value.type)
    if isinstance(value, Deferred):
        return "untyped literal (i32 or f32 unless its context says otherwise)"
    if isinstance(value, Tup):
        parts = [describe_value(v) or "?" for v in value.items]
        return "(" + ", ".join(parts) + ")"
    return None


class _Recorder(Builder):
    """The front end's builder, also remembering what each name was bound to."""

    def __init__(self, sigs: dict[str, Signature], r: Reporter) -> None:
        super().__init__(sigs, r)
        self.bound: dict[int, str] = {}
        self.type_of: dict[bytes, str] = {}  # node hash -> type text (``spans`` has the hash)
        self.spans = {}

    def note(self, node: Node, *rest: Any, **kw: Any) -> Node:
        self.type_of.setdefault(node.hash, str(node.type))
        return super().note(node, *rest, **kw)

    def bind(self, tok: SyntaxToken | None, value: Any, *rest: Any, **kw: Any) -> Any:
        out = super().bind(tok, value, *rest, **kw)
        text = describe_value(value)
        if tok is not None and text is not None:
            self.bound.setdefault(tok.offset, text)
        return out


def _filtered_tree(items: list[Item], width: int) -> GreenNode:
    """A SOURCE_FILE holding ``items`` at their offsets, whitespace everywhere else."""
    children: list[Green] = []
    pos = 0
    for it in sorted(items, key=lambda i: i.offset):
        if it.offset > pos:
            children.append(GreenToken(K.WHITESPACE, b" " * (it.offset - pos)))
        children.append(it.green)
        pos = it.end
    if width > pos:
        children.append(GreenToken(K.WHITESPACE, b" " * (width - pos)))
    return GreenNode(K.SOURCE_FILE, tuple(children), width)


def check_unit(
    target: Item, group: list[Item], known: dict[str, Signature], index: LineIndex
) -> UnitResult:
    """Check ``target`` with the items of its unit (see the module doc); ``known`` has a
    placeholder signature per function name of the file.  Those names only shape messages
    (a function name read as a value; "did you mean" after an unknown call), so the builder
    gets the ones the unit reads, or all of them when it calls an unknown name."""
    source = root(_filtered_tree(group, len(index.data)))
    reporter = Reporter(index)
    sigs = collect(source, reporter)
    sig = next((s for s in sigs.values() if s.fn.offset == target.offset), None)
    calls = {c for m in group for c in m.facts.calls}
    if calls - known.keys() - BUILTIN_NAMES:
        placeholders = known
    else:
        placeholders = {n: known[n] for m in group for n in m.facts.reads if n in known}
    builder = _Recorder({**placeholders, **sigs}, reporter)
    fn = builder.function(sig) if sig is not None else None
    lo, hi = target.offset, target.end
    mine = [d for d in reporter.diagnostics if lo <= d.start and d.end <= hi]
    # a function with any diagnostic has no fingerprint, as ``kerac fingerprint`` prints none
    out = UnitResult([shifted(d, -lo) for d in mine], None if mine else fn, sig)
    out.anchored = any(
        not (lo <= n.start and n.end <= hi) for d in mine for n in getattr(d, "notes", ())
    )
    for n_hash, ((a, b), _) in (builder.spans or {}).items():
        text = builder.type_of.get(n_hash)
        if text is not None and lo <= a and b <= hi:
            out.types.append((a - lo, b - lo, text))
    out.bindings = {k - lo: v for k, v in builder.bound.items() if lo <= k < hi}
    if sig is not None:
        for p in sig.fn.params():
            tok = p.name()
            t = next((t for n, t in sig.params if tok is not None and n == tok.text), None)
            if tok is not None and t is not None:
                out.bindings.setdefault(tok.offset - lo, str(t))
    return out


def _facts_key(f: ItemFacts) -> tuple[str, bool, tuple[str, ...]]:
    return (f.name or "", f.export, tuple(sorted(f.calls)))


class _Lines(LineIndex):
    """A ``LineIndex`` that finds the line starts on first use: only a message naming a line
    (E0103) needs them, and most keystrokes check no such function."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __getattr__(self, name: str) -> Any:
        if name != "starts":
            raise AttributeError(name)
        self.starts = LineIndex(self.data).starts
        return self.starts


class Analysis:
    """The analysis of one version of a document (see the module doc)."""

    parsed: Parsed
    names: frozenset[str]
    whole_file: bool  # checked the ordinary way (recursion, budgets)
    whole_file_graph: bool  # the call graph has a cycle
    results: dict[int, UnitResult]  # id(item's green node) -> its check
    _units: dict[tuple[Any, ...], UnitResult]
    _known_sigs: dict[str, Signature] | None
    _callers_map: dict[str, set[str]] | None  # name -> the functions calling it (same graph)
    _offsets: list[int]  # the items' offsets, for bisect
    _facts: dict[int, tuple[GreenNode, ItemFacts]]  # id(green) -> (green, its facts)
    _replaced: tuple[GreenNode, Item] | None  # one item reparsed: its old node, the new item
    any_anchored: bool  # some result must be checked again after any edit (see UnitResult)

    def __init__(self, data: bytes) -> None:
        self.parsed = full(data)
        self._finish(None, data.count(b"\n"))

    @classmethod
    def edited(cls, previous: Analysis, edits: list[Edit]) -> Analysis:
        """``previous`` after ``edits`` (applied in order, each against the text before it)."""
        new = cls.__new__(cls)
        parsed = previous.parsed
        for e in edits:
            parsed = reparse(parsed, e)
        new.parsed = parsed
        one = edits[0] if len(edits) == 1 and parsed.incremental else None
        new._finish(previous, parsed.data.count(b"\n"), one)
        return new

    @property
    def data(self) -> bytes:
        return self.parsed.data

    @property
    def tree(self) -> GreenNode:
        return self.parsed.tree

    def _finish(self, previous: Analysis | None, lines: int, one: Edit | None = None) -> None:
        """Items, units and diagnostics of this version; ``one`` is the edit when it was the
        only one and reparsed one item (then nothing is walked item by item but the names)."""
        self.lines = lines
        self.index = _Lines(self.parsed.data)
        if previous is not None and one is not None:
            self.items, added, removed = self._items_one(previous, one)
        else:
            old_facts = previous._facts if previous is not None else {}
            self.items, added = self._items(old_facts)
            removed = [f for i, (g, f) in old_facts.items() if i not in self._facts]
        self.by_name: dict[str, list[Item]] = {}
        for it in self.items:
            if it.facts.name is not None:
                self.by_name.setdefault(it.facts.name, []).append(it)
        names = frozenset(self.by_name)
        same_names = previous is not None and previous.names == names
        self.names = previous.names if previous is not None and same_names else names
        self._known_sigs = previous._known_sigs if previous is not None and same_names else None
        same_graph = same_names and sorted(map(_facts_key, added)) == sorted(
            map(_facts_key, removed)
        )
        self._callers_map = previous._callers_map if previous is not None and same_graph else None
        if previous is not None and same_graph:
            self.whole_file = previous.whole_file_graph
            self._units = previous._units
            self.results = self._reuse(
                previous,
                {f.name for f in added} | {f.name for f in removed},
                lines != previous.lines,
            )
        elif previous is None:
            self.whole_file = self._has_cycle()
            self.results = self._open()
        else:
            self.whole_file = self._has_cycle()
            self._units = previous._units
            self.results = self._check_all()
        self.whole_file_graph = self.whole_file
        self.any_anchored = any(r.anchored for r in self.results.values())
        self.check_diagnostics = self._check_diagnostics()

    def _open(self) -> dict[int, UnitResult]:
        """A new document: one whole-file check (what ``kerac check`` does), its diagnostics
        split by function, and the units' keys recorded so that later versions reuse them;
        the types of a function are checked when a request needs them (``result``)."""
        syntax = frontend.SyntaxResult(Tokens(self.parsed.data), self.parsed.tree, [])
        with frontend._no_gc():
            exports, diags = frontend.check_tree(syntax)
        built = {f.name: f for f in exports}
        pending = sorted(diags, key=lambda d: d.start)
        results: dict[int, UnitResult] = {}
        self._units = {}
        k = 0
        for it in self.items:
            while k < len(pending) and pending[k].start < it.offset:
                k += 1  # outside every item: none expected (a function reports in itself)
            mine: list[Diagnostic] = []
            while k < len(pending) and pending[k].start <= it.end:
                if pending[k].end <= it.end:
                    mine.append(pending[k])
                k += 1
            name = it.facts.name
            first = name is not None and self.by_name[name][0] is it
            fn = built.get(name) if first and name is not None and not mine else None
            res = UnitResult([shifted(d, -it.offset) for d in mine], fn, None, partial=True)
            res.anchored = any(
                not (it.offset <= n.start and n.end <= it.end)
                for d in mine
                for n in getattr(d, "notes", ())
            )
            results[id(it.green)] = res
            self._units[self._unit(it)[0]] = res
        return results

    def _check_all(self) -> dict[int, UnitResult]:
        """Every unit, through the cache of unit keys (a new call graph or set of names)."""
        results: dict[int, UnitResult] = {}
        units: dict[tuple[Any, ...], UnitResult] = {}
        for it in self.items:
            key, group = self._unit(it)
            result = self._units.get(key)
            if result is None:
                result = check_unit(it, group, self._known(), self.index)
            units[key] = result
            results[id(it.green)] = result
        self._units = units
        return results

    def _reuse(
        self, previous: Analysis, changed: set[str | None], lines_moved: bool
    ) -> dict[int, UnitResult]:
        """Same call graph and names: only the changed functions and their callers (and, when
        lines moved, functions defined twice, whose message names a line) are checked."""
        affected = self._callers(changed)
        if lines_moved:
            affected |= {n for n, its in self.by_name.items() if len(its) > 1}
        if self._replaced is not None and not previous.any_anchored:
            return self._reuse_one(previous, affected, *self._replaced)
        old = previous.results  # keyed by id: every green node of ``previous`` is alive, so
        # no node of this version can have the id of one of them unless it is that node
        results: dict[int, UnitResult] = {}
        for it in self.items:
            result = old.get(id(it.green))
            if result is None or it.facts.name in affected or result.anchored:
                result = check_unit(it, self._unit(it)[1], self._known(), self.index)
            results[id(it.green)] = result
        return results

    def _reuse_one(
        self, previous: Analysis, affected: set[str | None], gone: GreenNode, new: Item
    ) -> dict[int, UnitResult]:
        """``_reuse`` after one item was reparsed: the previous results, less the replaced
        item's, with the new item and the affected functions checked again."""
        results = dict(previous.results)
        del results[id(gone)]
        todo = {id(new.green): new}
        todo.update(
            (id(it.green), it) for n in affected if n is not None for it in self.by_name.get(n, ())
        )
        for ident, it in todo.items():
            results[ident] = check_unit(it, self._unit(it)[1], self._known(), self.index)
        return results

    def _callers(self, names: set[str | None]) -> set[str | None]:
        """``names`` and every function that reaches one of them through calls."""
        callers = self._callers_map
        if callers is None:  # the call graph changed: map each name to its callers again
            callers = self._callers_map = {}
            for it in self.items:
                if it.facts.name is not None:
                    for c in it.facts.calls:
                        callers.setdefault(c, set()).add(it.facts.name)
        out = set(names)
        todo = [n for n in names if n is not None]
        while todo:
            for caller in callers.get(todo.pop(), ()):
                if caller not in out:
                    out.add(caller)
                    todo.append(caller)
        return out

    def _known(self) -> dict[str, Signature]:
        if self._known_sigs is None:
            fn = red(self.items[0].green, self.items[0].offset, None)
            assert isinstance(fn, FnDef)
            self._known_sigs = {n: Signature(n, fn, export=False, ok=False) for n in self.names}
        return self._known_sigs

    def _items_one(
        self, previous: Analysis, edit: Edit
    ) -> tuple[list[Item], list[ItemFacts], list[ItemFacts]]:
        """The items after an edit that reparsed one item: the others as they were, those
        after it moved by the change in length; and the new and the old item's facts."""
        k = bisect.bisect_right(previous._offsets, edit.start) - 1
        old = previous.items[k]
        green = self.parsed.tree.children[self.parsed.changed]
        assert isinstance(green, GreenNode) and old.offset <= edit.start < old.end
        facts = item_facts(green)
        delta = green.width - old.green.width
        later = previous.items[k + 1 :]
        if delta:
            later = [Item(it.green, it.offset + delta, it.facts) for it in later]
        items = [*previous.items[:k], Item(green, old.offset, facts), *later]
        self._facts = dict(previous._facts)
        del self._facts[id(old.green)]
        self._facts[id(green)] = (green, facts)
        offsets = previous._offsets
        self._offsets = [*offsets[: k + 1], *(o + delta for o in offsets[k + 1 :])]
        self._replaced = (old.green, items[k])
        return items, [facts], [old.facts]

    def _items(
        self, old: dict[int, tuple[GreenNode, ItemFacts]]
    ) -> tuple[list[Item], list[ItemFacts]]:
        """The items, their facts reused where the green node is the same object; and the
        facts of the items that are new in this version."""
        items: list[Item] = []
        added: list[ItemFacts] = []
        keep: dict[int, tuple[GreenNode, ItemFacts]] = {}
        for g, offset in self.parsed.tree.kids():
            if g.kind != K.FN_DEF:
                continue
            known = old.get(id(g))
            if known is not None and known[0] is g:
                facts = known[1]
            else:
                facts = item_facts(g)
                added.append(facts)
            keep[id(g)] = (g, facts)
            items.append(Item(g, offset, facts))
        self._facts = keep
        self._offsets = [it.offset for it in items]
        self._replaced = None
        return items, added

    def _unit(self, it: Item) -> tuple[tuple[Any, ...], list[Item]]:
        group: dict[int, Item] = {it.offset: it}
        todo = [it]
        if it.facts.name is not None:
            todo += self.by_name[it.facts.name]
        while todo:
            cur = todo.pop()
            group.setdefault(cur.offset, cur)
            for name in cur.facts.calls:
                for callee in self.by_name.get(name, ()):
                    if callee.offset not in group:
                        group[callee.offset] = callee
                        todo.append(callee)
        members = sorted(group.values(), key=lambda i: i.offset)
        # E0103 names the line of the first definition: with duplicates, lines are part of it
        dup = it.facts.name is not None and len(self.by_name[it.facts.name]) > 1
        lines = tuple(self.index.line_of(m.offset) for m in members) if dup else ()
        order = tuple(m.offset < it.offset for m in members)
        key = (
            tuple(m.green for m in members),
            order,
            lines,
            self._named(members),
            limits.current(),
        )
        return key, members

    def _named(self, members: list[Item]) -> frozenset[str] | None:
        """The function names a unit's messages can mention (see ``check_unit``): those it
        reads, or every name (None: ``self.names``) when it calls an unknown name."""
        calls = {c for m in members for c in m.facts.calls}
        if calls - self.names - BUILTIN_NAMES:
            return self.names
        return frozenset(n for m in members for n in m.facts.reads if n in self.names)

    def _has_cycle(self) -> bool:
        """Whether the call graph between the file's functions has a cycle (recursion)."""
        state: dict[str, int] = {}
        for start in self.by_name:
            if start in state:
                continue
            stack: list[tuple[str, Iterator[str]]] = [(start, iter(self._callees(start)))]
            state[start] = 1
            while stack:
                name, it = stack[-1]
                nxt = next(it, None)
                if nxt is None:
                    state[name] = 2
                    stack.pop()
                elif state.get(nxt) == 1:
                    return True
                elif nxt not in state:
                    state[nxt] = 1
                    stack.append((nxt, iter(self._callees(nxt))))
        return False

    def _callees(self, name: str) -> list[str]:
        return [c for it in self.by_name[name] for c in it.facts.calls if c in self.by_name]

    def _check_diagnostics(self) -> list[Diagnostic]:
        results = self.results
        diags = [
            shifted(d, it.offset) for it in self.items for d in results[id(it.green)].diagnostics
        ]
        if self.whole_file or any(d.code in WHOLE_FILE_CODES for d in diags):
            self.whole_file = True
            syntax = frontend.SyntaxResult(Tokens(self.parsed.data), self.parsed.tree, [])
            with frontend._no_gc():
                _, diags = frontend.check_tree(syntax)
        return diags

    @property
    def diagnostics(self) -> list[Diagnostic]:
        """Every diagnostic of the document, as ``kerac check`` reports them."""
        return sort_unique([*self.parsed.diagnostics, *self.check_diagnostics])

    def item_at(self, offset: int) -> Item | None:
        """The ``fn`` item whose span holds ``offset`` (its end included)."""
        for it in self.items:
            if it.offset <= offset <= it.end:
                return it
        return None

    def exports(self) -> list[tuple[Item, Function | None]]:
        """Every ``export fn`` item with its built function (None when it has errors)."""
        return [(it, self.result(it).function) for it in self.items if it.facts.export]

    def result(self, it: Item) -> UnitResult:
        """The check of one item, with its types and bindings (checked now if the version
        was opened with a whole-file check)."""
        res = self.results[id(it.green)]
        if res.partial:
            done = check_unit(it, self._unit(it)[1], self._known(), self.index)
            res.types, res.bindings, res.signature = done.types, done.bindings, done.signature
            res.partial = False
        return res
