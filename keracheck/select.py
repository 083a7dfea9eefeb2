"""Choosing cases the way pytest chooses tests: ``-k EXPR`` and ``path::function`` node ids.

A case's *node id* is ``<path>::<function>``.  ``-k`` takes an expression of words joined by
``and``, ``or``, ``not`` and parentheses; a word matches when it occurs in the node id
(case-insensitive): ``-k "softmax or (linalg and not f64)"``.  ``--lf`` reruns the cases that
diverged or errored in earlier runs (recorded in ``.keracheck/lastfailed.json``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

Matcher = Callable[[str], bool]
_TOKEN = re.compile(r"\(|\)|[^\s()]+")


class SelectError(ValueError):
    """A malformed -k expression."""


class _Parser:
    """Recursive descent over -k tokens: or > and > not > atom."""

    def __init__(self, expr: str) -> None:
        self.expr = expr
        self.tokens = _TOKEN.findall(expr)
        self.pos = 0

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> str:
        tok = self.peek()
        if tok is None:
            raise SelectError(f"-k {self.expr!r}: the expression ends too early")
        self.pos += 1
        return tok

    def _joined(
        self, word: str, part: Callable[[], Matcher], combine: Callable[[Iterable[bool]], bool]
    ) -> Matcher:
        """``part (word part)*``, the parts combined by ``combine`` (any / all)."""
        parts = [part()]
        while self.peek() == word:
            self.take()
            parts.append(part())
        return parts[0] if len(parts) == 1 else lambda s: combine(p(s) for p in parts)

    def disjunction(self) -> Matcher:
        return self._joined("or", self.conjunction, any)

    def conjunction(self) -> Matcher:
        return self._joined("and", self.negation, all)

    def negation(self) -> Matcher:
        if self.peek() == "not":
            self.take()
            inner = self.negation()
            return lambda s: not inner(s)
        return self.atom()

    def atom(self) -> Matcher:
        tok = self.take()
        if tok == "(":
            inner = self.disjunction()
            if self.take() != ")":
                raise SelectError(f"-k {self.expr!r}: expected ')'")
            return inner
        if tok in (")", "and", "or"):
            raise SelectError(f"-k {self.expr!r}: unexpected '{tok}'")
        word = tok.lower()
        return lambda s: word in s.lower()


def keyword_matcher(expr: str) -> Matcher:
    """The predicate over node ids that ``expr`` describes; SelectError when it is malformed."""
    parser = _Parser(expr)
    if not parser.tokens:
        raise SelectError("-k needs an expression")
    matcher = parser.disjunction()
    if parser.pos != len(parser.tokens):
        raise SelectError(f"-k {expr!r}: unexpected '{parser.tokens[parser.pos]}'")
    return matcher


def node_ids(args: list[str] | tuple[str, ...]) -> tuple[list[str], dict[str, set[str] | None]]:
    """The paths to read, in order, and per path the functions asked for by node id (None:
    all of them)."""
    wanted: dict[str, set[str] | None] = {}
    for arg in args:
        path, function = split_node_id(arg)
        if function is None:
            wanted[path] = None
        elif wanted.get(path, set()) is not None:
            chosen = wanted.setdefault(path, set())
            assert chosen is not None
            chosen.add(function)
    return list(wanted), wanted


LAST_FAILED = Path(".keracheck") / "lastfailed.json"
FAILED_VERDICTS = ("diverge", "error")


def load_last_failed(path: Path = LAST_FAILED) -> set[str]:
    """Node ids that did not agree in earlier runs (empty when none are recorded)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    ids = data.get("nodeIds") if isinstance(data, dict) else None
    return {str(x) for x in ids} if isinstance(ids, list) else set()


def save_last_failed(cases: list[dict[str, Any]], path: Path = LAST_FAILED) -> None:
    """Merge a run into the record, as pytest's --lf does: cases that ran and did not fail
    leave it, cases that diverged or errored join it."""
    from kera.files import write_atomic

    ran = {f"{c['path']}::{c['function']}": c["verdict"] for c in cases}
    failed = (load_last_failed(path) - set(ran)) | {
        nid for nid, verdict in ran.items() if verdict in FAILED_VERDICTS
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps({"schemaVersion": 1, "nodeIds": sorted(failed)}, indent=1))
    except OSError:
        pass  # a read-only checkout only loses --lf


def split_node_id(arg: str) -> tuple[str, str | None]:
    """``path::function`` -> (path, function); a plain path -> (path, None)."""
    path, sep, function = arg.rpartition("::")
    return (path, function) if sep and path else (arg, None)
