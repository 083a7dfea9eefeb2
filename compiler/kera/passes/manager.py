"""The pass manager: a pipeline run to a fixed point, the validator around every pass.

``PassManager(passes).run(fn)`` validates ``fn``, then runs the passes in order, again and
again, until one whole round changes nothing (the fixed point) or ``max_rounds`` rounds have
run (reported in the result, never silent).  After every pass the validator runs again (unless
the pass handed back the very function it was given, untouched: see :class:`_Seen`); a pass
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


class _Seen:
    """A function as it was validated, to recognise a pass that hands it back untouched.

    Validating that function again would check the very graph that was just checked: nodes
    cannot change (``Node.__setattr__`` refuses), so what could is the ``Function`` itself, whose
    attributes a careless pass may reassign, or its node list, which it may edit in place.  A
    pass result counts as unchanged only when it is the same object holding the same name,
    parameters, results, region hash and node list (compared by identity); anything else is
    validated.  What this cannot see is a node changed behind ``Node.__setattr__``'s back
    (``object.__setattr__``), which only a test corrupting a graph on purpose does.  On a
    100k-node graph it leaves out half of ``-O2``'s validations (every run that rewrites
    nothing, including the whole last round).
    """

    __slots__ = ("fn", "name", "nodes", "params", "region_hash", "results")

    def __init__(self, fn: Function) -> None:
        self.fn = fn
        self.name = fn.name
        self.params = fn.params
        self.results = fn.results
        self.region_hash = fn.region_hash
        self.nodes = fn.nodes()  # a copy

    def unchanged(self, new: Function) -> bool:
        return (
            new is self.fn
            and new.name == self.name
            and new.params is self.params
            and new.results is self.results
            and new.region_hash is self.region_hash
            and new.nodes() == self.nodes  # identity per item: nodes have no ``__eq__``
        )


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
            seen = _Seen(fn)
            t0 = time.perf_counter()
            try:
                new, rewrites = p.run(fn)
            except InvariantError as e:
                e.where = f"in pass '{p.name}' on '{fn.name}': "
                raise PassError(str(e)) from e
            seconds = time.perf_counter() - t0
            if not seen.unchanged(new):
                self._check(new, f"after pass '{p.name}' on '{fn.name}': ", outcome)
            before = len(seen.nodes)
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
