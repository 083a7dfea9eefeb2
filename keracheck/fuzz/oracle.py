"""The differential oracle: run graphs on every target, compare with ``ref`` bit for bit, and
name each divergence by its *signature*.

Cases.  A :class:`Case` is a function and its input batch; its key is the fingerprint plus a
digest of the inputs.  Fuzzed graphs get the harness's special-biased inputs
(``keracheck.inputs.generate`` with the campaign seed) with a few *splat* rows added
(:func:`fuzz_inputs`), and half the rows of a parameter that is a math-library call's argument
drawn from that function's interesting ranges (``calls.bias_inputs``), so a case is a pure
function of its graph and every result can be cached by key: the shrinker re-runs graphs it
left unchanged for free.

Execution.  Each target runs a list of cases in one call through ``keracheck.worker.execute``
(the back end's ``run_many``, one toolchain call for the batch): in a warm child process
(``workers.WarmWorker``; a crash or hang costs that batch, which ``run_isolated`` then re-runs
case by case), or in this process when isolation is off (tests of plugins).  ``ref`` always
runs here: it is the oracle.  Jobs carry the function itself (``Job.fn``, pickled), not its
``.keg`` bytes: a fuzzed graph lives for one batch, and the ``.keg`` round trip was most of
what a pure-Python target paid over ``ref``; ``keracheck run`` (and so every reproducer's
replay) keeps the ``.keg`` path.

Signature.  For a case on which target ``t`` disagrees with ``ref`` (or fails), the *culprit*
is a node that diverges while every operation feeding it agrees: the op at the root of the
smallest graph that shows the divergence.  Intermediate nodes are observed by running, in one
extra batch, the function truncated at each node of the diverging results' cones (same
parameters, same inputs); when a diverging result takes only leaves, no extra run is needed.
The signature is ``(ref, t, culprit op, class)`` where the class is the first of
:data:`CLASS_ORDER` among the culprit's differing elements (``ulp(k)`` counts as ``ulp``;
a failure to build or run is ``error``).  A failure of ``ref`` itself is ``(ref, ref, op, error)``;
a failure that no truncated function shows (every node runs alone, the whole function does
not: a layout or resource bug) names the pseudo-op ``graph``.

Calls.  A math-library call (``exp(x)``: ~40-100 contract ops, ``keracheck.fuzz.calls``) is one
unit here: the cone steps from the call straight to its argument, its inner nodes are never
truncated at, and a call that diverges while its argument agrees is the culprit, named by its
function (``ref|t exp ulp``), not by one of its inner ops.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import numpy as np

from kera.dtypes import DType
from kera.interp import interpret
from kera.ir import Function, Node
from kera.ops import Op
from kera.passes import PassError
from keracheck import inputs as inputs_mod
from keracheck.compare import diff_outputs
from keracheck.fuzz import calls
from keracheck.fuzz.workers import WarmWorker
from keracheck.opt_levels import split_id
from keracheck.target import declines
from keracheck.targets import Target
from keracheck.worker import Job, JobResult, execute

Array = np.ndarray[Any, Any]
Outputs = list[Array]
Result = Outputs | str  # outputs, or the error message of a failed build/run


class Declined(str):
    """A target's reason for declining a case (``Backend.declines``): no result, no divergence."""


#: the class a signature takes from a culprit's differing elements: the first present
CLASS_ORDER = (
    "error",
    "shape-or-dtype",
    "int",
    "nan-vs-value",
    "ulp",
    "subnormal-flush",
    "signed-zero",
    "nan-payload",
)
LEAVES = frozenset({Op.PARAM, Op.CONST})
REF = "ref"
WHOLE = "graph"  # the op of a failure of the whole function that no single node shows


@dataclass(frozen=True, order=True)
class Signature:
    """(target pair, op at the root of the shrunk graph, divergence class)."""

    base: str
    target: str
    op: str
    cls: str

    def __str__(self) -> str:
        return f"{self.base}|{self.target} {self.op} {self.cls}"

    @property
    def pair(self) -> tuple[str, str]:
        return (self.base, self.target)


@dataclass
class Case:
    """A function and its input batch (arrays of shape ``(N, *param shape)`` by name)."""

    fn: Function
    inputs: dict[str, Array]
    key: str = ""

    def __post_init__(self) -> None:
        if not self.key:
            self.key = case_key(self.fn, self.inputs)

    @property
    def rows(self) -> int:
        return int(next(iter(self.inputs.values())).shape[0]) if self.inputs else 1


def case_key(fn: Function, inputs: Mapping[str, Array]) -> str:
    h = hashlib.sha256(fn.region_hash)
    for name in sorted(inputs):
        a = np.ascontiguousarray(inputs[name])
        h.update(name.encode() + b"\0" + str(a.shape).encode() + a.tobytes())
    return h.hexdigest()


@dataclass
class Divergence:
    """One signature seen on one case: the culprit node and how its outputs differ."""

    signature: Signature
    case: Case
    node: Node
    detail: dict[str, Any] = field(default_factory=dict)  # compare.diff_outputs record, or error

    @property
    def fn(self) -> Function:
        return self.case.fn


def primary_class(classes: Iterable[str]) -> str:
    present = {"ulp" if c.startswith("ulp(") else c for c in classes}
    return next((c for c in CLASS_ORDER if c in present), sorted(present)[0])


def truncated(fn: Function, node: Node) -> Function:
    """fn with ``node`` as its only result: same parameters, so the same inputs apply."""
    return Function("node", fn.params, [node])


# ------------------------------------------------------------------------------ execution


#: bounds of each of the oracle's caches (results per target, generated cases, verdicts):
#: entries and approximate bytes.  A campaign makes new graphs for as long as it runs, so an
#: unbounded cache grows with it (~75 KB per graph against ref alone: 8 MiB/s); past a bound
#: the oldest half goes, and only speed is lost (the shrinker re-runs recent graphs).
MAX_ENTRIES = 20_000
MAX_BYTES = 32 << 20
#: bytes counted per entry besides its arrays (key, dict slot, list and array headers)
ENTRY_BYTES = 400
#: bytes counted per node of a cached case's function (a Node and its attributes)
NODE_BYTES = 600

K = TypeVar("K")
V = TypeVar("V")


class Bounded(Generic[K, V]):
    """A dict of at most ``entries`` items and about ``max_bytes`` (by ``size``) that drops
    its oldest half when either is passed: memory stays flat over a long campaign."""

    def __init__(
        self,
        size: Callable[[V], int],
        entries: int | None = None,
        max_bytes: int | None = None,
    ) -> None:
        self.size = size
        self.entries = MAX_ENTRIES if entries is None else entries
        self.max_bytes = MAX_BYTES if max_bytes is None else max_bytes
        self.items: dict[K, tuple[V, int]] = {}
        self.bytes = 0
        self.evicted = 0  # entries dropped so far

    def __len__(self) -> int:
        return len(self.items)

    def __contains__(self, key: object) -> bool:
        return key in self.items

    def get(self, key: K) -> V | None:
        hit = self.items.get(key)
        return None if hit is None else hit[0]

    def __setitem__(self, key: K, value: V) -> None:
        old = self.items.pop(key, None)
        if old is not None:
            self.bytes -= old[1]
        n = self.size(value) + ENTRY_BYTES
        self.items[key] = (value, n)
        self.bytes += n
        if len(self.items) > self.entries or self.bytes > self.max_bytes:
            self._halve()

    def _halve(self) -> None:
        """Drop the oldest entries until at most half of each bound is used."""
        keys = iter(list(self.items))
        while self.items and (
            len(self.items) > self.entries // 2 or self.bytes > self.max_bytes // 2
        ):
            _, n = self.items.pop(next(keys))
            self.bytes -= n
            self.evicted += 1


def result_bytes(r: Result) -> int:
    return 0 if isinstance(r, str) else sum(a.nbytes for a in r)


def case_bytes(c: Case) -> int:
    return sum(a.nbytes for a in c.inputs.values()) + NODE_BYTES * len(c.fn.nodes())


def verdict_bytes(divs: list[Divergence]) -> int:
    return sum(case_bytes(d.case) for d in divs)


class Runner:
    """Runs cases on one target, caching results by case key (:class:`Bounded`)."""

    def __init__(
        self,
        target: Target,
        timeout: float,
        isolate: bool,
        optimise: Callable[[Function], Function] | None = None,
    ) -> None:
        self.target = target
        self.timeout = timeout
        self.isolate = isolate
        self.optimise = optimise  # a level variant (T@O2) runs each case's optimised graph
        self.is_ref = split_id(target.id)[0] == REF
        self.cache: Bounded[str, Result] = Bounded(result_bytes)
        self.calls = 0  # target invocations (toolchain batches)
        self.cases_run = 0
        self.seconds = 0.0
        self.worker = WarmWorker(target.spec, timeout) if isolate and not self.is_ref else None

    @property
    def id(self) -> str:
        return self.target.id

    def run(self, cases: Sequence[Case], cached_only: bool = False) -> list[Result | None]:
        todo = {c.key: c for c in cases if c.key not in self.cache}
        if todo and not cached_only:
            done = self._execute(list(todo.values()))
            self._store(done)  # may evict: answer from what was just run first
            return [done[c.key] if c.key in done else self.cache.get(c.key) for c in cases]
        return [self.cache.get(c.key) for c in cases]

    def _store(self, results: Mapping[str, Result]) -> None:
        for key, r in results.items():
            self.cache[key] = r

    def _execute(self, cases: list[Case]) -> dict[str, Result]:
        self.calls += 1
        self.cases_run += len(cases)
        t0 = time.monotonic()
        try:
            out: dict[str, Result] = {}
            if self.optimise is not None:
                cases, out = self._optimised(cases)
            if self.is_ref:
                return out | {c.key: _interpret(c) for c in cases}
            if self.target.backend is not None:
                for c in cases:
                    reason = declines(self.target.backend, c.fn)
                    if reason is not None:
                        out[c.key] = Declined(reason)
            run = [c for c in cases if c.key not in out]
            # the function itself, not .keg bytes (module docstring, "Execution")
            jobs = [Job(c.key, b"", c.fn.name, c.inputs, fn=c.fn, artifacts=False) for c in run]
            done: Mapping[str, JobResult] = {}
            if jobs:
                done = self.worker.run(jobs) if self.worker else execute(self.target.spec, jobs, 1)
            return out | {key: _result(res) for key, res in done.items()}
        finally:
            self.seconds += time.monotonic() - t0

    def _optimised(self, cases: list[Case]) -> tuple[list[Case], dict[str, Result]]:
        """The cases with their optimised graphs (same keys), and the optimiser's failures."""
        assert self.optimise is not None
        done: list[Case] = []
        failed: dict[str, Result] = {}
        for c in cases:
            try:
                done.append(Case(self.optimise(c.fn), c.inputs, c.key))
            except PassError as e:
                failed[c.key] = f"optimiser: {e}"
        return done, failed

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()


def fuzz_inputs(fn: Function, n: int, seed: int) -> dict[str, Array]:
    """The harness's generated inputs, with the last n // 8 rows *splat*: every element of a
    parameter holds one special value there (all -0.0, all NaN, all MIN ...), which the
    element-wise random mix almost never gives a whole tensor (reduction identities, NaN
    propagation through reductions).  Every other row before them of a call's argument holds
    values from the function's interesting ranges (overflow thresholds, near 1 for log ...),
    where the element-wise mix gives mostly overflow or NaN."""
    out = inputs_mod.generate(fn, n, seed)
    digest = hashlib.sha256(f"keracheck-fuzz/splat\0{seed}\0{fn.fingerprint}".encode()).digest()
    rng = np.random.default_rng(list(digest))
    for p in fn.params:
        name, dt = str(p.attr("name")), p.dtype
        pool = _splat_pool(dt)
        for r in range(n - n // 8, n):
            out[name][r] = pool[int(rng.integers(len(pool)))]
    calls_digest = hashlib.sha256(f"keracheck-fuzz/calls\0{seed}\0{fn.fingerprint}".encode())
    calls.bias_inputs(fn, out, range(n - n // 8), calls_digest.digest())
    return out


def _splat_pool(dt: DType) -> Array:
    if dt is DType.BOOL:
        return np.array([False, True])
    bits = inputs_mod.FLOAT_SPECIALS[dt] if dt.is_float else inputs_mod.int_specials(dt)
    return np.array(bits, dtype=dt.uint).view(dt.np)


def _interpret(case: Case) -> Result:
    try:
        return [np.ascontiguousarray(o) for o in interpret(case.fn, case.inputs)]
    except Exception as e:
        return f"{type(e).__name__}: {e}"


def _result(res: JobResult) -> Result:
    if res.status == "ok" and res.outputs:
        return res.outputs[0]
    return res.message or "failed without a message"


# ------------------------------------------------------------------------------ comparing


def _diff(
    ref: Result | None, got: Result | None, names: tuple[str, str]
) -> dict[int, dict[str, Any]]:
    """Differing results by index: compare.diff_outputs records, or an error record for all."""
    if isinstance(got, str) or got is None or isinstance(ref, str) or ref is None:
        return {}
    out = {}
    for k, (a, b) in enumerate(zip(ref, got, strict=True)):
        d = diff_outputs(a, b, names)
        if d is not None:
            out[k] = d
    return out


def _error(message: str) -> dict[str, Any]:
    return {"classes": {"error": 1}, "message": message}


class Oracle:
    """Every selected target against ``ref``; results cached per case, divergences per case."""

    def __init__(
        self,
        targets: Sequence[Target],
        n_inputs: int = 64,
        seed: int = 0,
        timeout: float = 30.0,
        isolate: bool = True,
        optimisers: Mapping[str, Callable[[Function], Function]] | None = None,
    ) -> None:
        ids = [t.id for t in targets]
        if REF not in ids:
            raise ValueError("the oracle needs the 'ref' target")
        opt = optimisers or {}
        self.runners = {t.id: Runner(t, timeout, isolate, opt.get(t.id)) for t in targets}
        self.others = [i for i in ids if i != REF]
        self.n_inputs = n_inputs
        self.seed = seed
        # (case key, target) -> its divergences; fingerprint -> its generated case
        self.verdicts: Bounded[tuple[str, str], list[Divergence]] = Bounded(verdict_bytes)
        self.cases: Bounded[str, Case] = Bounded(case_bytes)
        self.pool = ThreadPoolExecutor(max_workers=max(1, len(self.runners)))

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
        for r in self.runners.values():
            r.close()

    def case(self, fn: Function) -> Case:
        """fn with its fuzzing inputs for the campaign seed (cached)."""
        case = self.cases.get(fn.fingerprint)
        if case is None:
            case = Case(fn, fuzz_inputs(fn, self.n_inputs, self.seed))
            self.cases[fn.fingerprint] = case
        return case

    def judged(self, fn: Function) -> bool:
        """Whether fn's generated case has been judged (its verdict is cached)."""
        case = self.cases.get(fn.fingerprint)
        return case is not None and (case.key, REF) in self.verdicts

    def check(
        self,
        fns: Sequence[Function],
        cached_only: bool = False,
        targets: Sequence[str] | None = None,
    ) -> list[Divergence]:
        """Every divergence of the generated cases of fns (duplicates by fingerprint once)."""
        seen: dict[str, Function] = {}
        for fn in fns:
            seen.setdefault(fn.fingerprint, fn)
        return self.check_cases([self.case(fn) for fn in seen.values()], cached_only, targets)

    def check_cases(
        self,
        cases: Sequence[Case],
        cached_only: bool = False,
        targets: Sequence[str] | None = None,
    ) -> list[Divergence]:
        """Every divergence of cases on ``targets`` (default: all) against ref; with
        ``cached_only``, cases not judged before count as agreeing."""
        tids = [REF, *(t for t in (targets or self.others) if t != REF)]
        todo = [c for c in cases if any((c.key, t) not in self.verdicts for t in tids)]
        fresh: dict[tuple[str, str], list[Divergence]] = {}
        if todo and not cached_only:
            found = self._judge(todo, tids[1:])
            for c in todo:
                for t in tids:
                    divs = [d for d in found.get(c.key, []) if d.signature.target == t]
                    fresh[(c.key, t)] = self.verdicts[(c.key, t)] = divs
        return [
            d
            for c in cases
            for t in tids
            for d in fresh.get((c.key, t), self.verdicts.get((c.key, t)) or [])
        ]

    def run_all(
        self,
        cases: Sequence[Case],
        cached_only: bool = False,
        targets: Sequence[str] | None = None,
    ) -> dict[str, list[Result | None]]:
        """Results of ref and ``targets`` (default: all) for cases, targets in parallel."""
        tids = [REF, *(t for t in (targets or self.others) if t != REF)]
        futures = {t: self.pool.submit(self.runners[t].run, cases, cached_only) for t in tids}
        return {tid: f.result() for tid, f in futures.items()}

    # -- judging

    def _judge(self, cases: list[Case], targets: Sequence[str]) -> dict[str, list[Divergence]]:
        results = self.run_all(cases, targets=targets)
        suspects: list[_Suspect] = []
        for i, case in enumerate(cases):
            ref = results[REF][i]
            if isinstance(ref, str):
                suspects.append(_Suspect(case, REF, {}, failure=ref))
                continue
            for tid in targets:
                got = results[tid][i]
                if isinstance(got, Declined):
                    continue  # past a documented limit of the target: nothing to compare
                if isinstance(got, str):
                    suspects.append(_Suspect(case, tid, {}, failure=got))
                elif diffs := _diff(ref, got, (REF, tid)):
                    suspects.append(_Suspect(case, tid, diffs))
        return self._localize(suspects) if suspects else {}

    def _localize(self, suspects: list[_Suspect]) -> dict[str, list[Divergence]]:
        """Culprits of every suspect, running the truncated functions they need in one batch
        per target (and ref)."""
        need: dict[str, dict[str, Case]] = {}  # target -> sub-case key -> sub-case
        for s in suspects:
            for sub in s.subs().values():
                need.setdefault(s.target, {})[sub.key] = sub
                need.setdefault(REF, {})[sub.key] = sub
        futures = {
            tid: self.pool.submit(self.runners[tid].run, list(subs.values()))
            for tid, subs in need.items()
        }
        sub_results = {
            (tid, c.key): r
            for tid, fut in futures.items()
            for c, r in zip(need[tid].values(), fut.result(), strict=True)
        }
        out: dict[str, list[Divergence]] = {}
        for s in suspects:
            found = _culprits(s.case, s.target, s.states(sub_results))
            if not found and s.failure is not None:
                found = [_whole(s.case, s.target, s.failure)]
            out.setdefault(s.case.key, []).extend(found)
        return out


@dataclass
class _Suspect:
    """A case on which target disagrees with ref on results ``diffs`` (by index), or on which
    it (or ref, when target is ref) failed outright."""

    case: Case
    target: str
    diffs: dict[int, dict[str, Any]]
    failure: str | None = None  # the error message when the whole case failed
    _subs: dict[int, Case] | None = None

    @property
    def failed(self) -> bool:
        return self.failure is not None

    def subs(self) -> dict[int, Case]:
        """id(node) -> the case truncated at node, for every node whose state is not known:
        inner nodes of the diverging results' cones, and every result after a failure."""
        if self._subs is None:
            fn = self.case.fn
            roots = list(fn.results) if self.failed else [fn.results[k] for k in sorted(self.diffs)]
            known = set() if self.failed else {id(r) for r in fn.results}
            nodes = [n for n in _cone(calls.analyse(fn), roots) if id(n) not in known]
            self._subs = {id(n): Case(truncated(fn, n), self.case.inputs) for n in nodes}
        return self._subs

    def states(
        self, sub_results: Mapping[tuple[str, str], Result | None]
    ) -> dict[int, dict[str, Any] | None]:
        """id(node) -> None (agrees) or its diff record (diverges or fails)."""
        states: dict[int, dict[str, Any] | None] = {}
        if not self.failed:
            for k, r in enumerate(self.case.fn.results):
                states[id(r)] = self.diffs.get(k)
        for nid, sub in self.subs().items():
            ref = sub_results.get((REF, sub.key))
            got = sub_results.get((self.target, sub.key))
            if isinstance(ref, str):
                states[nid] = _error(ref)
            elif self.target == REF:
                states[nid] = None
            elif isinstance(got, str):
                states[nid] = _error(got)
            else:
                states[nid] = _diff(ref, got, (REF, self.target)).get(0)
        return states


def _cone(units: calls.Units, roots: Sequence[Node]) -> list[Node]:
    """Non-leaf nodes that roots depend on, roots included; a call is entered only through its
    argument."""
    cone: list[Node] = []
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        n = stack.pop()
        if id(n) in seen or n.op in LEAVES:
            continue
        seen.add(id(n))
        cone.append(n)
        stack.extend(units.operands(n))
    return cone


def _whole(case: Case, tid: str, message: str) -> Divergence:
    """A failure no single node reproduces (every truncated function runs): the signature
    names the pseudo-op ``graph``, and the culprit node is the last result."""
    sig = Signature(REF, tid, WHOLE, "error")
    return Divergence(sig, case, case.fn.results[-1], _error(message))


def _culprits(
    case: Case, tid: str, states: Mapping[int, dict[str, Any] | None]
) -> list[Divergence]:
    """Nodes that diverge while every non-leaf operand agrees (ancestors of diverging results;
    a call's operand is its argument, and the call is named by its function)."""
    out: list[Divergence] = []
    seen: set[tuple[str, str]] = set()
    units = calls.analyse(case.fn)
    for node in units.nodes:
        d = states.get(id(node))
        if d is None or any(states.get(id(i)) is not None for i in units.operands(node)):
            continue
        sig = Signature(REF, tid, units.op_name(node), primary_class(d["classes"]))
        if (sig.op, sig.cls) not in seen:
            seen.add((sig.op, sig.cls))
            out.append(Divergence(sig, case, node, d))
    return out


# ------------------------------------------------------------------------------ row analysis


def row_classes(ref: Outputs, got: Result | None, rows: int) -> list[set[str]]:
    """For each input row, the divergence classes (ulp(k) as ulp) over every result."""
    if got is None:
        raise ValueError("a target result is missing")
    if isinstance(got, str):
        return [{"error"} for _ in range(rows)]
    out: list[set[str]] = [set() for _ in range(rows)]
    for a, b in zip(ref, got, strict=True):
        for r in range(rows):
            d = diff_outputs(a[r : r + 1], b[r : r + 1], (REF, "t"))
            if d is not None:
                out[r] |= {"ulp" if c.startswith("ulp(") else c for c in d["classes"]}
    return out


def node_rows(oracle: Oracle, case: Case, sig: Signature, node: Node) -> list[bool]:
    """For each row of case: does ``node`` diverge with the signature's class there while every
    non-leaf operand of ``node`` agrees (so the row alone shows this signature)?"""
    operands = calls.analyse(case.fn).operands(node)
    subs = [Case(truncated(case.fn, n), case.inputs) for n in (node, *operands)]
    results = oracle.run_all(subs, targets=[sig.target])
    ref, got = results[REF], results[sig.target]
    rows = case.rows
    if sig.target == REF:
        return [isinstance(ref[0], str)] * rows
    ok = [sig.cls in cls for cls in row_classes(_outputs(ref[0]), got[0], rows)]
    for k, n in enumerate(operands, start=1):
        if n.op in LEAVES:
            continue
        bad = row_classes(_outputs(ref[k]), got[k], rows)
        ok = [o and not b for o, b in zip(ok, bad, strict=True)]
    return ok


def _outputs(r: Result | None) -> Outputs:
    if r is None or isinstance(r, str):
        raise ValueError(f"ref failed on a case it ran before: {r}")
    return r
