"""The pass manager: a pipeline run to a fixed point, the validator around every pass.

``PassManager(passes).run(fn)`` validates ``fn``, then runs the passes in order, again and
again, until one whole round changes nothing (the fixed point) or ``max_rounds`` rounds have
run (reported in the result, never silent).  After every pass the validator runs again; a pass
that breaks an invariant raises :class:`PassError` naming the pass.  Each pass's run is
recorded: round, nodes before and after, rewrites, seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kera.ir import Function, Graph
from kera.passes.validate import InvariantError, validate


class PassError(Exception):
    """A pass that failed or left a graph that breaks an invariant."""


@dataclass(frozen=True)
class Pass:
    """A named rewrite of a function: ``run(fn) -> (new function, rewrites done)``."""

    name: str
    version: int
    run: Callable[[Function], tuple[Function, int]]
    doc: str = ""


@dataclass(frozen=True)
class PassStat:
    function: str
    round: int
    name: str
    nodes_before: int
    nodes_after: int
    rewrites: int
    seconds: float


@dataclass
class Outcome:
    """What one pipeline run did to one function."""

    function: Function
    stats: list[PassStat] = field(default_factory=list)
    rounds: int = 0
    converged: bool = True
    validate_seconds: float = 0.0


class PassManager:
    def __init__(
        self,
        passes: Sequence[Pass],
        max_rounds: int = 8,
        verify: bool = True,
        after: Callable[[Pass, Function], None] | None = None,
    ) -> None:
        self.passes = tuple(passes)
        self.max_rounds = max_rounds
        self.verify = verify
        self.after = after  # called with each pass and its output (``--print-after``)

    def _check(self, fn: Function, where: str, outcome: Outcome) -> None:
        if not self.verify:
            return
        t0 = time.perf_counter()
        try:
            validate(fn)
        except InvariantError as e:
            e.where = where
            raise PassError(str(e)) from e
        finally:
            outcome.validate_seconds += time.perf_counter() - t0

    def _round(self, outcome: Outcome, number: int) -> bool:
        changed = False
        for p in self.passes:
            fn = outcome.function
            before = len(fn.nodes())
            t0 = time.perf_counter()
            try:
                new, rewrites = p.run(fn)
            except InvariantError as e:
                e.where = f"in pass '{p.name}' on '{fn.name}': "
                raise PassError(str(e)) from e
            seconds = time.perf_counter() - t0
            self._check(new, f"after pass '{p.name}' on '{fn.name}': ", outcome)
            outcome.stats.append(
                PassStat(fn.name, number, p.name, before, len(new.nodes()), rewrites, seconds)
            )
            if self.after is not None:
                self.after(p, new)
            changed = changed or new.region_hash != fn.region_hash
            outcome.function = new
        return changed

    def run(self, fn: Function) -> Outcome:
        outcome = Outcome(fn)
        self._check(fn, f"before the pipeline on '{fn.name}': ", outcome)
        if not self.passes:
            return outcome
        for number in range(1, self.max_rounds + 1):
            outcome.rounds = number
            if not self._round(outcome, number):
                return outcome
        outcome.converged = False
        return outcome

    def run_graph(self, graph: Graph) -> tuple[Graph, list[Outcome]]:
        outcomes = [self.run(fn) for fn in graph.functions.values()]
        return Graph(o.function for o in outcomes), outcomes
