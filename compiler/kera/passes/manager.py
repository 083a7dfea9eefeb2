"""The pass manager: a pipeline run to a fixed point, the validator around every pass.

``PassManager(passes).run(fn)`` validates ``fn``, then runs the passes in order, again and
again, until one whole round changes nothing (the fixed point) or ``max_rounds`` rounds have
run (reported in the result, never silent).  After every pass the validator runs again (unless
the pass handed back the very function it was given, untouched: see :class:`_Seen`); a pass
that breaks an invariant raises :class:`PassError` naming the pass.  Each pass's run is
recorded: round, nodes before and after, rewrites, seconds.

The first validation checks every node; each later one checks the region in full and, node by
node, only what the pass created (``validate(fn, known)``: the nodes already checked are
immutable, see ``kera.passes.validate``).  An *idempotent* pass (``Pass.idempotent``: ``run``
is a pure function and ``run(run(fn))`` is ``run(fn)``) is not run again on a function it
made itself and that no pass has changed since: it would hand it back untouched.  Its record
in the stats says so (0 rewrites, 0 seconds, nodes unchanged).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from kera.ir import Function, Graph, IRError, Node
from kera.passes.validate import InvariantError, effect_trace, validate


class PassError(Exception):
    """A pass that failed or left a graph that breaks an invariant."""


@dataclass(frozen=True)
class Pass:
    """A named rewrite of a function: ``run(fn) -> (new function, rewrites done)``."""

    name: str
    version: int
    run: Callable[[Function], tuple[Function, int]]
    doc: str = ""
    #: ``run`` is pure and ``run(run(fn)[0])`` hands its input back untouched, 0 rewrites
    idempotent: bool = False


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


@contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """Python's cyclic collector off while a pipeline runs, as it was before afterwards.

    A pass allocates three tracked objects per node it builds (the node, its input tuple, its
    interning reference) and keeps most of them, so the collector runs every few hundred nodes
    and, every so often, walks every live node: on a 100k-node graph that was 40-50% of a
    rewriting pass.  It can find nothing here: nodes form no cycles (inputs come first, the
    interning table holds weak references) and reference counting frees every node that dies.
    Garbage cycles that a plugin pass might make are collected once the pipeline is over."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class _State:
    """What one pipeline run remembers between passes: the nodes the validator has checked
    (the last validated function's, loop bodies included), and per idempotent pass what it
    last handed back."""

    __slots__ = ("known", "made")

    def __init__(self) -> None:
        self.known: set[Node] = set()
        self.made: dict[int, _Seen | None] = {}  # by position in the pipeline


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

    def _check(self, fn: Function, where: str, outcome: Outcome, state: _State) -> None:
        if not self.verify:
            return
        t0 = time.perf_counter()
        try:
            state.known = validate(fn, state.known)
        except InvariantError as e:
            e.where = where
            raise PassError(str(e)) from e
        finally:
            outcome.validate_seconds += time.perf_counter() - t0

    def _round(self, outcome: Outcome, number: int, state: _State) -> bool:
        changed = False
        for i, p in enumerate(self.passes):
            fn = outcome.function
            seen = _Seen(fn)
            made = state.made.get(i)
            if p.idempotent and made is not None and made.unchanged(fn):
                new, rewrites, seconds = fn, 0, 0.0  # it would hand its own output back
            else:
                new, rewrites, seconds = self._run(p, fn)
                if not seen.unchanged(new):
                    self._check(new, f"after pass '{p.name}' on '{fn.name}': ", outcome, state)
                    self._check_effects(fn, new, p)
                state.made[i] = _Seen(new) if p.idempotent else None
            before = len(seen.nodes)
            outcome.stats.append(
                PassStat(fn.name, number, p.name, before, len(new.nodes()), rewrites, seconds)
            )
            if self.after is not None:
                self.after(p, new)
            changed = changed or new.region_hash != fn.region_hash
            outcome.function = new
        return changed

    def _check_effects(self, old: Function, new: Function, p: Pass) -> None:
        """The ``effects`` invariant: the pass kept ``old``'s effect trace (module
        ``kera.passes.validate``); a function without effects costs one attribute read."""
        if not self.verify or not (old.declared or new.declared):
            return
        before, after = effect_trace(old), effect_trace(new)
        if before != after:
            raise PassError(
                f"after pass '{p.name}' on '{old.name}': invariant 'effects' broken: "
                f"{_trace_diff(before, after)} (effectful nodes are never merged, dropped, "
                "folded or reordered)"
            )

    @staticmethod
    def _run(p: Pass, fn: Function) -> tuple[Function, int, float]:
        t0 = time.perf_counter()
        try:
            new, rewrites = p.run(fn)
        except InvariantError as e:
            e.where = f"in pass '{p.name}' on '{fn.name}': "
            raise PassError(str(e)) from e
        except IRError as e:  # e.g. a Function refusing the effects the pass gave it
            raise PassError(f"in pass '{p.name}' on '{fn.name}': {e}") from e
        return new, rewrites, time.perf_counter() - t0

    def run(self, fn: Function) -> Outcome:
        outcome = Outcome(fn)
        with _cyclic_gc_paused():
            self._rounds(outcome)
        return outcome

    def _rounds(self, outcome: Outcome) -> None:
        fn, state = outcome.function, _State()
        self._check(fn, f"before the pipeline on '{fn.name}': ", outcome, state)
        if not self.passes:
            return
        for number in range(1, self.max_rounds + 1):
            outcome.rounds = number
            if not self._round(outcome, number, state):
                return
        outcome.converged = False

    def run_graph(self, graph: Graph) -> tuple[Graph, list[Outcome]]:
        outcomes = [self.run(fn) for fn in graph.functions.values()]
        return Graph(o.function for o in outcomes), outcomes


def _trace_diff(before: tuple[object, ...], after: tuple[object, ...]) -> str:
    """Where two effect traces first differ, for the error message."""
    if not before or not after or before[0] != after[0]:
        return f"the declared effects changed from {list(before[:1])} to {list(after[:1])}"
    b, a = before[1:], after[1:]
    for i, (x, y) in enumerate(zip(b, a, strict=False)):
        if x != y:
            return f"effect {i} was {x}, is now {y}"
    return f"the function had {len(b)} effects, now {len(a)}"
