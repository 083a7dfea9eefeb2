"""The fuzzing campaign: generate batches, check them against ``ref``, shrink each new
signature to a minimal graph, and save it as a reproducer.

Discovery.  A campaign runs Hypothesis *discovery runs* (generation only), run ``k`` seeded
from (campaign seed, k).  One Hypothesis example is a *batch* of graphs
(``strategies.batches``), checked by the oracle with one call per target.  Every divergence is
counted by signature; a batch that shows a signature not seen before ends the run (a
BaseException, so Hypothesis does not shrink the batch) with the new divergences and the
choices that drew each diverging graph.  A run also ends after :data:`RUN_EXAMPLES` examples
(Hypothesis holds every example of a run in memory), and run ``k + 1`` follows.

Shrinking.  Each new signature is shrunk by its own single-graph Hypothesis run: the graph's
recorded choices go into an in-memory example database (the secondary corpus), Hypothesis
replays them, sees the failure and shrinks; the test fails exactly when the graph shows the
pinned signature.  (Shrinking the whole batch instead does not work: on a batch of ~1000
choices Hypothesis spends its 500 successful shrinks on one choice each.)  The smallest graph
seen with the signature is then reduced (``reduce``: cone, operands cut to parameters, then
the fewest rows, the smallest shapes and simple values) and written (``reproduce``); the next
discovery run follows.  The reductions are tried first on the graph as found: when they alone
bring it to at most :data:`QUICK_OPS` ops (the culprit and at most two ops feeding it), that
graph is saved without a Hypothesis shrink, which with a gcc target costs one build per step.

Budgets.  ``max_examples`` counts generated examples (batches) over all runs; ``budget`` is
wall-clock seconds of the whole campaign, shrinking included; ``max_findings`` stops it once
that many signatures are saved (``--until-first`` is 1: after the first one's shrink and save).
Each shrink may take ``shrink_seconds``, and no more than the budget has left: past it the test
function only replays cached verdicts, so Hypothesis stops at the best graph found; Hypothesis's
own limits apply too (500 successful shrinks, 300 s).  A finding made when the budget is spent
is not shrunk by Hypothesis, only reduced (a few oracle batches), so a campaign overruns its
budget by at most one batch and one reduction.  Verdicts are cached per graph.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.database import InMemoryExampleDatabase, choices_to_bytes

from kera import passes
from kera.ir import Function
from kera.ops import Op
from keracheck import opt_levels as levels
from keracheck.fuzz import policies as policies_mod
from keracheck.fuzz import reduce as reduce_mod
from keracheck.fuzz import reproduce
from keracheck.fuzz.coverage import Coverage
from keracheck.fuzz.oracle import Case, Divergence, Oracle, Signature
from keracheck.fuzz.strategies import OP_ORDER, Drawn, batches, op_count, recorded_graphs
from keracheck.targets import Target

#: a graph the reductions alone bring to at most this many ops is not shrunk by Hypothesis
QUICK_OPS = 3
#: examples per discovery run at most: the next run (the next seed) follows.  Hypothesis keeps
#: every example of a run in memory (its data tree and result cache: ~1,000 choice nodes per
#: batch), so one run for a whole campaign grew by ~1 MiB/s against ref alone; a run of this
#: many examples holds a few tens of MiB, freed when it ends
RUN_EXAMPLES = 200
#: why a campaign ended, in the order they are checked: Ctrl-C, ``max_findings`` or ``until``
#: satisfied, the budget spent, ``max_examples`` reached, else Hypothesis ran out of examples
STOP_REASONS = ("interrupted", "findings", "budget", "examples", "exhausted")


class Diverged(Exception):
    """Raised by a shrink run's test: this graph shows the pinned signature."""


class BudgetSpent(BaseException):
    """Stops a discovery run at once: the time budget is spent (not a failure to shrink)."""


class NewSignatures(BaseException):
    """Stops a discovery run at once: a batch showed new signatures (not a failure to shrink)."""

    def __init__(self, found: list[tuple[Divergence, Drawn]]) -> None:
        super().__init__(f"{len(found)} new signature(s)")
        self.found = found


@dataclass
class Options:
    """What a campaign does; the CLI fills it from its flags (``keracheck.fuzz.options``)."""

    max_examples: int | None = None  # examples (batches) over all runs; None: no limit
    budget: float | None = None  # wall-clock seconds, shrinking included; None: no limit
    max_findings: int | None = None  # stop once this many signatures are saved; None: no limit
    seed: int = 0
    out: str | None = "corpora/regressions"  # None: write no reproducer
    policies: tuple[str, ...] = policies_mod.DEFAULT
    batch_size: int = 24
    inputs: int = 64
    shrink_seconds: float = 60.0
    timeout: float = 30.0  # seconds per case and target
    isolate: bool = True
    reduce: bool = True
    command: str = "keracheck fuzz"
    progress: Callable[[Campaign], None] | None = None
    until: Callable[[Finding], bool] | None = None  # stop once a saved finding satisfies it
    opt_levels: tuple[int, ...] = (0,)  # levels above 0 add a variant T@OL of every target
    pass_plugins: tuple[str, ...] = ()  # --pass-plugin specs (run after the built-in passes)


@dataclass
class Finding:
    """One signature: how often it was seen, when first, and its reproducer."""

    signature: Signature
    count: int = 0
    first_example: int = 0
    first_graphs: int = 0
    first_seconds: float = 0.0
    ops_before: int = 0
    nodes_before: int = 0
    ops_shrunk: int = 0  # after Hypothesis, before the reductions
    ops_after: int = 0
    nodes_after: int = 0
    shrunk: bool = False
    shrink_seconds: float = 0.0
    shrink_calls: int = 0
    reduce_seconds: float = 0.0
    reproducer: str | None = None
    inputs: str | None = None
    fingerprint: str | None = None
    rows: int = 0  # rows in the reproducer's inputs (merged signatures share the files)
    example: str = ""
    final: Divergence | None = field(default=None, repr=False)


@dataclass
class Stats:
    """Running figures, read by the progress display and written to the JSON output."""

    examples: int = 0
    graphs: int = 0
    unique: int = 0  # graphs not generated before in this campaign
    ops: int = 0
    generate_seconds: float = 0.0
    shrink_seconds: float = 0.0  # Hypothesis shrinks
    reduce_seconds: float = 0.0  # the reductions (``reduce``), before and after the shrinks
    runs: int = 0
    phase: str = "starting"
    current: str = ""  # signature being shrunk or reduced
    shrink_calls: int = 0
    shrink_ops: int = 0  # ops of the best graph so far


def size_key(d: Divergence) -> tuple[int, int, int, int]:
    fn = d.fn
    elements = sum(p.type.size for p in fn.params)
    return (op_count(fn), len(fn.nodes()), len(fn.params), elements)


class Campaign:
    """One fuzzing run over ``targets`` (``ref`` among them): ``Campaign(targets, opts).run()``,
    then ``findings`` (by signature), ``stats``, ``document()`` and ``exit_code()``."""

    def __init__(self, targets: Sequence[Target], opts: Options) -> None:
        self.opts = opts
        self.extra = levels.load_pass_plugins(opts.pass_plugins)
        self.targets = list(targets)
        optimisers: dict[str, Callable[[Function], Function]] = {}
        for level in (lv for lv in opts.opt_levels if lv):
            pipeline = passes.pipeline(level, self.extra)
            for t in targets:
                variant = replace(t, id=levels.level_id(t.id, level))
                self.targets.append(variant)
                optimisers[variant.id] = _optimiser(pipeline)
        self.oracle = Oracle(
            self.targets, opts.inputs, opts.seed, opts.timeout, opts.isolate, optimisers
        )
        self.ops = common_ops(self.targets)
        self.findings: dict[Signature, Finding] = {}
        self.stats = Stats()
        self.coverage = Coverage(self.ops)  # (op, dtype) counts; focuses graphs on rare ones
        self.started = time.monotonic()
        self.interrupted = False
        self.exhausted = False  # a discovery run used up its examples
        self.stopped = ""  # why the campaign ended (``STOP_REASONS``)

    # -- the loop

    def run(self) -> Campaign:
        try:
            k = 0
            while not self._limit_reached():
                found = self._discover(self.opts.seed * 1_000_003 + k)
                k += 1
                if found is None:
                    self.exhausted = True
                    break
                for div, drawn in found:
                    self._process(div, drawn)
                    if self._satisfied():
                        break
                if self._satisfied():
                    break
        except BudgetSpent:
            pass
        except KeyboardInterrupt:
            self.interrupted = True
        finally:
            self.oracle.close()
        self.stopped = self._stop_reason()
        self.stats.phase = "done"
        self._progress()
        return self

    def _satisfied(self) -> bool:
        saved = [f for f in self.findings.values() if f.final]
        most, until = self.opts.max_findings, self.opts.until
        if most is not None and len(saved) >= most:
            return True
        return until is not None and any(until(f) for f in saved)

    def _stop_reason(self) -> str:
        """The first of STOP_REASONS that holds."""
        most = self.opts.max_examples
        checks = (
            self.interrupted,
            self._satisfied(),
            self._budget_left() <= 0,
            most is not None and self.stats.examples >= most,
            True,
        )
        return next(r for r, hit in zip(STOP_REASONS, checks, strict=True) if hit)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def _budget_left(self) -> float:
        """Seconds of the wall-clock budget left (inf without one)."""
        budget = self.opts.budget
        return float("inf") if budget is None else budget - self.elapsed()

    def _limit_reached(self) -> bool:
        o = self.opts
        if o.max_examples is not None and self.stats.examples >= o.max_examples:
            return True
        return self._budget_left() <= 0

    def _settings(self, **kw: Any) -> settings:
        return settings(
            deadline=None,
            suppress_health_check=list(HealthCheck),
            verbosity=Verbosity.quiet,
            report_multiple_bugs=False,
            **kw,
        )

    def _discover(self, seed: int) -> list[tuple[Divergence, Drawn]] | None:
        """One discovery run: the new signatures of the batch that ended it, [] when it ran
        its :data:`RUN_EXAMPLES` without one, or None when Hypothesis ran out of examples."""
        o = self.opts
        left = 10**9 if o.max_examples is None else o.max_examples - self.stats.examples
        cap = max(1, min(left, RUN_EXAMPLES))
        strategy = batches(self.ops, o.policies, size=o.batch_size, focus=self.coverage)
        clock = _Clock(self.stats, "generate_seconds")
        self.stats.runs += 1
        before = self.stats.examples

        @self._settings(database=None, max_examples=cap, phases=[Phase.generate])
        @hypothesis_seed(seed)
        @given(strategy)
        def test(batch: list[Drawn]) -> None:
            clock.tick()
            self._examine(batch, clock)

        try:
            test()
        except NewSignatures as e:
            return e.found
        finally:
            clock.tick()
        ran_all = self.stats.examples - before >= cap
        return [] if ran_all and cap < left else None

    def _examine(self, batch: list[Drawn], clock: _Clock) -> None:
        s = self.stats
        if self._budget_left() <= 0:
            raise BudgetSpent
        s.phase = "generating"
        fns = [d.fn for d in batch if d.fn is not None]
        self.coverage.count(fns)
        s.unique += len({fn.fingerprint for fn in fns if not self.oracle.judged(fn)})
        divs = self.oracle.check(fns)
        s.examples += 1
        s.graphs += len(batch)
        s.ops += sum(op_count(d.fn) for d in batch if d.fn is not None)
        new = self.tally(divs)
        clock.tick()
        self._progress()
        if new:
            drawn = {d.fn.fingerprint: d for d in batch if d.fn is not None}
            raise NewSignatures([(div, drawn[div.fn.fingerprint]) for div in new])

    def tally(self, divs: Sequence[Divergence]) -> list[Divergence]:
        """Count each signature once per graph; the smallest divergence of each new one."""
        new: dict[Signature, Divergence] = {}
        seen: set[tuple[str, Signature]] = set()
        for d in divs:
            if (d.case.key, d.signature) in seen:
                continue
            seen.add((d.case.key, d.signature))
            f = self.findings.get(d.signature)
            if f is None:
                f = self.findings[d.signature] = Finding(
                    d.signature,
                    first_example=self.stats.examples,
                    first_graphs=self.stats.graphs,
                    first_seconds=round(self.stats.generate_seconds, 3),
                    ops_before=op_count(d.fn),
                    nodes_before=len(d.fn.nodes()),
                )
                new[d.signature] = d
            elif d.signature in new and size_key(d) < size_key(new[d.signature]):
                new[d.signature] = d
            f.count += 1
        return list(new.values())

    # -- shrinking, reducing, saving

    def _process(self, div: Divergence, drawn: Drawn) -> None:
        f = self.findings[div.signature]
        s = self.stats
        s.phase, s.current = "shrinking", str(div.signature)
        s.shrink_calls, s.shrink_ops = 0, op_count(div.fn)
        self._progress()
        reducing = 0.0  # seconds in the reductions, before and after the shrink
        if self.opts.reduce:  # the reductions alone first: a few builds, where a shrink is ~250
            t0 = time.monotonic()
            quick = reduce_mod.reduce(self.oracle, div, max_ops=QUICK_OPS)
            reducing = time.monotonic() - t0
            s.reduce_seconds += reducing
            if op_count(quick.fn) <= QUICK_OPS:
                f.ops_shrunk = op_count(div.fn)
                f.reduce_seconds = round(reducing, 3)
                self._save(f, quick)
                return
        seconds = min(self.opts.shrink_seconds, self._budget_left())
        best, calls, seconds = self._shrink(div, drawn, seconds) if seconds > 0 else (div, 0, 0.0)
        s.shrink_seconds += seconds
        f.shrunk = best is not div
        f.shrink_calls, f.shrink_seconds = calls, round(seconds, 3)
        f.ops_shrunk = op_count(best.fn)
        s.phase = "reducing"
        self._progress()
        if self.opts.reduce:
            t1 = time.monotonic()
            best = reduce_mod.reduce(self.oracle, best)
            reducing += time.monotonic() - t1
            s.reduce_seconds += time.monotonic() - t1
        f.reduce_seconds = round(reducing, 3)
        self._save(f, best)

    def _shrink(self, div: Divergence, drawn: Drawn, limit: float) -> tuple[Divergence, int, float]:
        """Hypothesis shrinks the graph of div, replayed from its choices, running new graphs
        for ``limit`` seconds: (best, calls, seconds)."""
        sig = div.signature
        state = _ShrinkState(div)
        t0 = time.monotonic()
        db = InMemoryExampleDatabase()
        key = b"keracheck-fuzz/shrink"
        db.save(key + b".secondary", choices_to_bytes(drawn.choices))

        def hit(d: Drawn) -> bool:
            state.calls += 1
            self.stats.shrink_calls = state.calls
            if d.fn is None:
                return False
            capped = time.monotonic() - t0 > limit
            found = self.oracle.check([d.fn], cached_only=capped, targets=[sig.target])
            hits = [x for x in found if x.signature == sig]
            if not hits:
                return False
            if size_key(hits[0]) <= size_key(state.best):
                state.best = hits[0]
                self.stats.shrink_ops = op_count(hits[0].fn)
            self._progress()
            return True

        @self._settings(database=db, max_examples=2, phases=[Phase.reuse, Phase.shrink])
        @hypothesis_seed(self.opts.seed)
        @given(recorded_graphs(self.ops, self.opts.policies))
        def test(d: Drawn) -> None:
            if hit(d):
                raise Diverged  # raised from this one line: Hypothesis tells failures by origin

        test._hypothesis_internal_database_key = key  # type: ignore[attr-defined]
        try:
            test()
        except Diverged:
            pass
        except Exception:  # a flaky target, or no replay: keep the best graph seen
            pass
        return state.best, state.calls, time.monotonic() - t0

    def _save(self, f: Finding, div: Divergence) -> None:
        f.final = div
        f.ops_after, f.nodes_after = op_count(div.fn), len(div.fn.nodes())
        f.fingerprint = div.fn.fingerprint
        f.rows = div.case.rows
        f.example = reproduce.example_text(div)
        if self.opts.out is not None:
            w = reproduce.write(Path(self.opts.out), div, self.header(f))
            f.reproducer, f.inputs, f.rows = w.path, w.inputs, w.rows
            for other in self.findings.values():  # signatures merged into the same files
                if other.reproducer == w.path:
                    other.rows = w.rows
        self._progress()

    def header(self, f: Finding) -> list[str]:
        sig = f.signature
        ids = ", ".join(t.id for t in self.targets)
        how = (
            f"shrunk from {f.ops_before} to {f.ops_shrunk} ops in {f.shrink_seconds:.1f} s"
            if f.shrunk
            else f"{f.ops_before} ops, not shrunk"
            if f.shrink_calls or not f.reduce_seconds
            else f"{f.ops_before} ops, not shrunk (the reductions sufficed, {f.reduce_seconds:.1f} s)"
        )
        path = Path(self.opts.out or ".") / f"{f.fingerprint}.kera"
        bases = list(dict.fromkeys(levels.split_id(t)[0] for t in sig.pair))
        plugins = "".join(
            f" --backend-plugin {t.spec}" for t in self.targets if t.id in bases and _is_plugin(t)
        )
        level = levels.split_id(sig.target)[1]
        if level:
            plugins += f" --opt-levels 0,{level}" + "".join(
                f" --pass-plugin {spec}" for spec in self.opts.pass_plugins
            )
        pair = ",".join(bases)
        rows = f"{f.rows} row{'s' if f.rows != 1 else ''}"
        has_params = f.final is not None and f.final.fn.params
        inputs = f"{f.fingerprint}.inputs.npz, {rows}" if has_params else "none (no parameters)"
        culprit = self.culprit_pass(f)
        return [
            f"targets: {ids} ({sig.target} differs from {sig.base})",
            *(
                [f"pass: {culprit} (the first pass whose output changes the bits)"]
                if culprit
                else []
            ),
            f"found: {self.opts.command}, seed {self.opts.seed}, example {f.first_example} "
            f"({f.first_seconds:.1f} s), {f.count} hits; {how}, reduced to {f.ops_after}",
            f"inputs: {inputs}; {f.example}",
            f"reproduce: keracheck run {path} --targets {pair}{plugins}",
        ]

    def _progress(self) -> None:
        if self.opts.progress is not None:
            self.opts.progress(self)

    # -- report

    def exit_code(self) -> int:
        return 1 if self.findings else 0

    def culprit_pass(self, f: Finding) -> str | None:
        """For a divergence of a level variant: the first pass run that changes the bits of the
        reproducer on that target (every intermediate graph in one batch)."""
        tid = f.signature.target
        level = levels.split_id(tid)[1]
        if not level or f.final is None:
            return None
        case = f.final.case
        runner = self.oracle.runners[levels.split_id(tid)[0]]
        want = runner.run([case])[0]
        if want is None or isinstance(want, str):
            return None

        def run_all(fns: list[Function]) -> list[Sequence[Array] | None]:
            got = runner.run([Case(fn, case.inputs) for fn in fns])
            return [None if r is None or isinstance(r, str) else r for r in got]

        return levels.culprit(case.fn, want, passes.pipeline(level, self.extra), run_all)

    def document(self) -> dict[str, Any]:
        s = self.stats
        gen = s.generate_seconds
        # time from a finding to its saved reproducer: Hypothesis shrink plus reductions
        shrinks = sorted(
            f.shrink_seconds + f.reduce_seconds for f in self.findings.values() if f.final
        )
        return {
            "schemaVersion": 1,
            "command": self.opts.command,
            "seed": self.opts.seed,
            "targets": [t.id for t in self.targets],
            "policies": list(self.opts.policies),
            "ops": sorted(op.value for op in self.ops),
            "stats": {
                "examples": s.examples,
                "graphs": s.graphs,
                "uniqueGraphs": s.unique,
                "ops": s.ops,
                "runs": s.runs,
                "seconds": round(self.elapsed(), 3),
                "generateSeconds": round(gen, 3),
                "shrinkSeconds": round(s.shrink_seconds, 3),
                "reduceSeconds": round(s.reduce_seconds, 3),
                "budget": self.opts.budget,
                "maxFindings": self.opts.max_findings,
                "stopReason": self.stopped,
                "medianShrinkSeconds": shrinks[len(shrinks) // 2] if shrinks else None,
                "graphsPerSecond": round(s.graphs / gen, 2) if gen > 0 else None,
                "uniqueGraphsPerSecond": round(s.unique / gen, 2) if gen > 0 else None,
                "targetCalls": {tid: r.calls for tid, r in self.oracle.runners.items()},
                "targetCases": {tid: r.cases_run for tid, r in self.oracle.runners.items()},
                "targetSeconds": {
                    tid: round(r.seconds, 3) for tid, r in self.oracle.runners.items()
                },
                "interrupted": self.interrupted,
                "exhausted": self.exhausted,
            },
            "signatures": [finding_document(f) for f in self.findings.values()],
            "coverage": self.coverage.document(),
            "exitCode": self.exit_code(),
        }


@dataclass
class _ShrinkState:
    best: Divergence
    calls: int = 0


class _Clock:
    """Charges wall-clock time between ticks to one Stats field."""

    def __init__(self, stats: Stats, field_name: str) -> None:
        self.stats = stats
        self.field = field_name
        self.last = time.monotonic()

    def tick(self) -> None:
        now = time.monotonic()
        setattr(self.stats, self.field, getattr(self.stats, self.field) + now - self.last)
        self.last = now


def finding_document(f: Finding) -> dict[str, Any]:
    sig = f.signature
    return {
        "signature": str(sig),
        "targets": list(sig.pair),
        "op": sig.op,
        "class": sig.cls,
        "count": f.count,
        "reproducer": f.reproducer,
        "inputs": f.inputs,
        "fingerprint": f.fingerprint,
        "rows": f.rows,
        "example": f.example,
        "firstExample": f.first_example,
        "firstGraphs": f.first_graphs,
        "firstSeconds": f.first_seconds,
        "shrunk": f.shrunk,
        "opsBefore": f.ops_before,
        "nodesBefore": f.nodes_before,
        "opsShrunk": f.ops_shrunk,
        "opsAfter": f.ops_after,
        "nodesAfter": f.nodes_after,
        "shrinkSeconds": f.shrink_seconds,
        "shrinkCalls": f.shrink_calls,
        "reduceSeconds": f.reduce_seconds,
    }


Array = np.ndarray[Any, Any]


def _optimiser(pipeline: Sequence[passes.Pass]) -> Callable[[Function], Function]:
    def optimise(fn: Function) -> Function:
        return passes.optimize(fn, pipeline).function

    return optimise


def _is_plugin(t: Target) -> bool:
    from keracheck.targets import known_specs

    return known_specs().get(t.id) != t.spec


def common_ops(targets: Sequence[Target]) -> frozenset[Op]:
    """Ops every target lowers (and the strategy knows)."""
    ops = set(OP_ORDER)
    names = {op.value for op in Op}
    for t in targets:
        assert t.backend is not None
        ops &= {Op(o) for o in t.backend.supported_ops() if o in names}
    return frozenset(ops)
