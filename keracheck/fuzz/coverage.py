"""Per-campaign coverage of (op, dtype) combinations, and the focus that weights rare ones up.

A *combination* is a ``strategies.Combo``: a step kind (op or math-library call), the dtype of
its first operand, and for ``convert``/``bitcast`` the target dtype -- ``convert i32 -> f32`` is
one.  Left to the base weights some are rare (an i32 -> f32 conversion was in ~0.4% of graphs),
so a bug that needs one takes seconds to find.  :class:`Coverage` counts, for every
combination, the graphs checked that exercise it (:meth:`Coverage.count`, called by the engine
per batch), and is the strategy's ``Focus``: while some combination of the campaign's table has
been seen in fewer than :data:`EXERCISED` graphs, every graph gets one more step, of one of
them (drawn with weight ``EXERCISED - count``); once all are exercised, no graph has a focus.

The focus and its step are recorded choices (``strategies.GraphBuilder.draw_focus``), so the
shrinker replays a graph without this object, and the campaign stays a pure function of its
seed.

Report.  :meth:`Coverage.document` is the ``coverage`` member of the campaign's JSON: the
table's columns (dtypes), one row per op or call (per source dtype for a conversion) with the
graph count of each combination the generator can make, the combinations never exercised, and
``text``, the table as printed by the text report::

    coverage: 274 of 274 (op, dtype) combinations in >= 8 of 1439 graphs, 0 in none; graphs per combination (- the generator makes none)
    op              f32    i32    f64    i64    u32    u64   bool
    add             131    104    101     86     88     80      -
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable
from typing import Any

from kera.ir import Function
from kera.ops import Op
from keracheck.fuzz.strategies import DTYPES, Combo, combos, graph_combos

#: a combination counts as exercised once this many graphs have it
EXERCISED = 8


class Coverage:
    """Graph counts per combination over one campaign (see the module docstring)."""

    def __init__(self, ops: frozenset[Op], exercised: int = EXERCISED) -> None:
        self.table = combos(ops)
        self.exercised = exercised
        self.counts: Counter[Combo] = Counter()
        self.graphs = 0
        # the combinations of the table not yet exercised, by index (kept as graphs come)
        self._index = {c: i for i, c in enumerate(self.table)}
        self._short = dict(enumerate([exercised] * len(self.table)))

    def count(self, fns: Iterable[Function]) -> None:
        for fn in fns:
            self.graphs += 1
            for c in graph_combos(fn):
                self.counts[c] += 1
                i = self._index.get(c)
                if i is not None and i in self._short:
                    self._short[i] -= 1
                    if not self._short[i]:
                        del self._short[i]

    def focus(self, rng: random.Random, table: tuple[Combo, ...]) -> int:
        """0 (no focus) or 1 + the index in ``table`` (this campaign's) of a combination to
        focus on: one not yet exercised, weighted by how many graphs it lacks."""
        if not self._short:
            return 0
        assert table is self.table or table == self.table
        return 1 + rng.choices(list(self._short), weights=list(self._short.values()))[0]

    def missing(self) -> list[Combo]:
        return [c for c in self.table if not self.counts[c]]

    def document(self) -> dict[str, Any]:
        rows: dict[str, dict[str, int]] = {}
        for c in self.table:
            rows.setdefault(c.row, {})[c.column] = self.counts[c]
        doc: dict[str, Any] = {
            "graphs": self.graphs,
            "exercisedAt": self.exercised,
            "combinations": len(self.table),
            "exercised": sum(1 for c in self.table if self.counts[c] >= self.exercised),
            "columns": [str(d) for d in DTYPES],
            "rows": rows,
            "never": [_name(c) for c in self.missing()],
        }
        doc["text"] = render(doc)
        return doc


def _name(c: Combo) -> str:
    return f"{c.row} -> {c.column}" if c.to is not None else f"{c.row} {c.column}"


#: width of a count column
_CELL = 7


def render(doc: dict[str, Any]) -> str:
    """The coverage table of a campaign document's ``coverage`` member, as text."""
    rows: dict[str, dict[str, int]] = doc["rows"]
    cols: list[str] = doc["columns"]
    width = max([len("op"), *map(len, rows)])
    lines = [
        f"coverage: {doc['exercised']} of {doc['combinations']} (op, dtype) combinations in "
        f">= {doc['exercisedAt']} of {doc['graphs']} graphs, {len(doc['never'])} in none; "
        "graphs per combination (- the generator makes none)",
        "op".ljust(width) + "".join(c.rjust(_CELL) for c in cols),
    ]
    for row, cells in rows.items():
        text = "".join(_cell(cells.get(c)).rjust(_CELL) for c in cols)
        lines.append(row.ljust(width) + text)
    return "\n".join(lines) + "\n"


def _cell(n: int | None) -> str:
    if n is None:
        return "-"
    return str(n) if n < 100_000 else f"{n // 1000}k"
