"""Where a case lives in its source, and which node of its graph first diverges.

Source positions.  A ``.kera`` case records where its ``export fn`` starts
(``keracheck.collect.export_positions``: the file is parsed again, not built; 1-based line and
character column, as diagnostics print them).  A ``.keg`` case has no source and records none.
Nodes carry no positions (they are content: a position in a hash would change every
fingerprint when a comment is added), so the positions of a function's nodes come from building its source again
with the builder's side table on (:func:`node_places`, ``kera.syntax.build.Builder.spans``),
and only when a divergence is localised.  The rebuilt function must have the case's
fingerprint, or no node gets a position.

First diverging node.  For a divergence between the oracle ``base`` (``ref``) and a target
``t``, the *first diverging node* is the earliest node, in the function's canonical order,
whose bits differ on ``t`` while every operand that is not a leaf agrees: the fuzzer's culprit
(``keracheck.fuzz.oracle``), searched the same way.  The function is truncated at each node of
the diverging outputs' cones (same parameters, same inputs; a math-library call is one unit,
entered only through its argument: ``keracheck.fuzz.calls``), and the truncations run in one
batch on ``t`` and one on ``base`` (:func:`batch_runner`, as the opt-level culprit search
does).  The cone is probed in canonical order, at most :data:`MAX_PROBES` nodes: a topological
prefix, so every operand of a probed node is probed too, and the first differing probed node
is a culprit.  The result states of the whole run are known and never probed again.

The named node differs while its operands agree *as computed here*; a back end that is wrong
only in a larger context (a fusion across nodes) shows as the node where that context ends.  A
divergence that names no node gets ``firstNodeNote`` instead, saying why: the truncated
functions did not run on the target, the first :data:`MAX_PROBES` nodes agree (the rest were
not probed), or some of them failed.  Localisation costs target runs, so only not-baselined
``diverge`` records between two level-0 targets are localised, and
``keracheck run --no-localise`` skips it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from kera import keg
from kera.ir import Function, Graph, Node
from kera.ops import Op
from keracheck.collect import Case, Place
from keracheck.compare import diff_outputs
from keracheck.fuzz import calls
from keracheck.opt_levels import split_id
from keracheck.target import declines
from keracheck.targets import Target
from keracheck.worker import Job, JobResult, run_isolated

Array = np.ndarray[Any, Any]
Outputs = Sequence[Array]
Runner = Callable[[list[Function]], list[Outputs | None]]

#: truncated functions run per target and case: a bound on what localising one case costs
MAX_PROBES = 64
LEAVES = frozenset({Op.PARAM, Op.CONST})


# ------------------------------------------------------------------------------ source positions


def node_places(text: bytes, name: str, fingerprint: str) -> dict[bytes, Place]:
    """Node hash -> where the export ``name`` built it, from building ``text`` again with the
    builder's side table on; empty when the source no longer builds to ``fingerprint``."""
    from kera import frontend
    from kera.syntax.build import Builder
    from kera.syntax.check import Reporter, collect
    from kera.syntax.diagnostics import LineIndex

    syntax = frontend.parse_source(text)
    index = LineIndex(syntax.tokens.data)
    reporter = Reporter(index)
    sigs = collect(syntax.root, reporter)
    sig = sigs.get(name)
    if sig is None or not sig.export:
        return {}
    builder = Builder(sigs, reporter)
    builder.spans = {}
    fn = builder.function(sig)
    if fn is None or fn.fingerprint != fingerprint:
        return {}
    return {h: Place(*index.position(span[0]), let) for h, (span, let) in builder.spans.items()}


# ------------------------------------------------------------------------------ running probes


def batch_runner(target: Target, case: Case, timeout: float) -> Runner:
    """Run several functions over the case's inputs on ``target`` in one batch (one worker
    process, one toolchain call where the back end batches); None for a function the target
    declines or failed on."""

    def run_all(fns: list[Function]) -> list[Outputs | None]:
        jobs: list[Job] = []
        out: list[Outputs | None] = [None] * len(fns)
        for i, f in enumerate(fns):
            if target.backend is None or declines(target.backend, f) is None:
                jobs.append(Job(f"{i}", keg.dumps(Graph([f])), f.name, case.inputs))
        if not jobs:
            return out
        got = run_isolated(target.spec, jobs, 1, timeout)
        for job in jobs:
            res = got.get(job.key)
            if isinstance(res, JobResult) and res.status == "ok" and res.outputs:
                out[int(job.key)] = res.outputs[0]
        return out

    return run_all


def truncated(fn: Function, node: Node) -> Function:
    """fn with ``node`` as its only result: same parameters, so the same inputs apply."""
    return Function(fn.name, fn.params, [node])


# ------------------------------------------------------------------------------ the search


def cone(units: calls.Units, roots: Iterable[Node]) -> list[Node]:
    """The non-leaf nodes ``roots`` depend on (roots included, even a leaf), in the function's
    canonical order; a math-library call is entered only through its argument."""
    seen: set[int] = set()
    stack = list(roots)
    members = {id(n) for n in stack}
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        stack.extend(i for i in units.operands(n) if i.op not in LEAVES)
    members |= seen
    return [n for n in units.nodes if id(n) in members]


@dataclass
class Search:
    """One case on one target: the divergences to localise and the nodes to probe."""

    case: Case
    target: str
    records: list[dict[str, Any]]  # the case document's divergence records (updated in place)
    units: calls.Units
    order: list[Node]  # the diverging outputs' cone, canonical order
    inner: list[Node]  # the nodes of order that are not results (the run has those)
    probes: list[Node]  # the prefix of inner that runs

    @classmethod
    def of(cls, case: Case, target: str, records: list[dict[str, Any]]) -> Search:
        fn = case.fn
        units = calls.analyse(fn)
        order = cone(units, [fn.results[d["output"]] for d in records])
        results = {id(r) for r in fn.results}
        inner = [n for n in order if id(n) not in results]
        return cls(case, target, records, units, order, inner, inner[:MAX_PROBES])

    @property
    def base(self) -> str:
        """The target the divergences compare against (``ref``, the oracle, when it ran)."""
        return str(self.records[0]["targets"][0])

    def known(self) -> dict[int, dict[str, Any] | None]:
        """The states the run already shows: each result node's diff record, or None."""
        diverging = {d["output"]: d for d in self.records}
        return {id(r): diverging.get(k) for k, r in enumerate(self.case.fn.results)}

    def states(
        self, base: Mapping[int, Outputs | None], got: Mapping[int, Outputs | None]
    ) -> dict[int, dict[str, Any] | None]:
        """id(node) -> None (agrees) or its diff record (differs); unknown nodes left out."""
        states = self.known()
        names = (self.base, self.target)
        for n in self.probes:
            want, have = base.get(id(n)), got.get(id(n))
            if want is not None and have is not None:
                states[id(n)] = diff_outputs(want[0], have[0], names)
        return states

    def first(self, states: Mapping[int, dict[str, Any] | None], root: Node) -> Node | None:
        """The earliest node of root's cone that differs while its non-leaf operands agree."""
        members = {id(n) for n in cone(self.units, [root])}
        for n in self.order:
            if id(n) not in members or states.get(id(n)) is None:
                continue
            operands = [i for i in self.units.operands(n) if i.op not in LEAVES]
            if all(id(i) in states and states[id(i)] is None for i in operands):
                return n
        return None

    def note(self, ran: bool) -> str:
        """Why no node is named: an operand of every differing node is unknown, because the
        truncated functions did not run, or lie past the probe bound, or some failed."""
        if not ran:
            return f"not localised: the truncated functions did not run on {self.target}"
        if len(self.probes) < len(self.inner):
            return (
                f"not localised: the first {len(self.probes)} of the {len(self.inner)} inner "
                f"nodes agree (at most {MAX_PROBES} are probed)"
            )
        return f"not localised: some truncated functions failed on {self.target}"

    def conclude(
        self,
        base: Mapping[int, Outputs | None],
        got: Mapping[int, Outputs | None],
        places: Mapping[bytes, Place],
    ) -> None:
        """Write ``firstNode`` (or ``firstNodeNote``) into each of the search's records."""
        states = self.states(base, got)
        ran = not self.probes or any(id(n) in states for n in self.probes)
        for record in self.records:
            node = self.first(states, self.case.fn.results[record["output"]])
            if node is None:
                record["firstNodeNote"] = self.note(ran)
                continue
            record["firstNode"] = describe(node, self, places)
            diff = states.get(id(node))
            if diff is not None:
                record["firstNode"]["classes"] = diff["classes"]


def describe(node: Node, search: Search, places: Mapping[bytes, Place]) -> dict[str, Any]:
    """The ``firstNode`` record: op (a math-library call by its function), position in the
    function's canonical node order, type, and where the source built it (when known)."""
    index = next(i for i, n in enumerate(search.case.fn.nodes()) if n is node)
    place = places.get(node.hash)
    record: dict[str, Any] = {
        "op": search.units.op_name(node),
        "index": index,
        "type": str(node.type),
        "line": place.line if place else None,
        "column": place.column if place else None,
    }
    if place is not None and place.let is not None:
        record["let"] = place.let
    return record


# ------------------------------------------------------------------------------ a run


def localisable(record: Mapping[str, Any]) -> bool:
    """A divergence worth target runs: a new bit difference between two level-0 targets."""
    targets = record["targets"]
    return (
        record.get("kind") == "diverge"
        and not record.get("baselined")
        and len(targets) == 2
        and all(split_id(t)[1] == 0 for t in targets)
    )


def searches(cases: Sequence[Case], case_docs: Sequence[Mapping[str, Any]]) -> list[Search]:
    """One search per (case, diverging target) with something to localise."""
    out: list[Search] = []
    for case, doc in zip(cases, case_docs, strict=True):
        by_target: dict[str, list[dict[str, Any]]] = {}
        for record in doc["divergences"]:
            if localisable(record) and record["output"] < len(case.fn.results):
                by_target.setdefault(record["targets"][1], []).append(record)
        out += [Search.of(case, t, records) for t, records in by_target.items()]
    return out


Batch = tuple[Case, dict[int, Node]]  # a case and the nodes to truncate it at, by id


def batches(todo: Sequence[Search]) -> dict[tuple[str, str], Batch]:
    """(target id, case key) -> what to run there: each search's probes on its target, the
    union of one case's searches' probes on their base."""
    out: dict[tuple[str, str], Batch] = {}
    for s in todo:
        out[(s.target, s.case.key)] = (s.case, {id(n): n for n in s.probes})
        out.setdefault((s.base, s.case.key), (s.case, {}))[1].update({id(n): n for n in s.probes})
    return out


def run_batch(target: Target, batch: Batch, timeout: float) -> dict[int, Outputs | None]:
    """id(node) -> the outputs of the case truncated at that node on ``target``."""
    case, nodes = batch
    ids = list(nodes)
    got = batch_runner(target, case, timeout)([truncated(case.fn, nodes[i]) for i in ids])
    return dict(zip(ids, got, strict=True))


def localise(
    cases: Sequence[Case],
    case_docs: Sequence[dict[str, Any]],
    targets: Mapping[str, Target],
    timeout: float,
    jobs: int = 2,
    progress: Callable[[str], None] | None = None,
) -> int:
    """Name the first diverging node of every localisable divergence (records updated in
    place); returns how many (case, target) searches ran.  Per case: one batch on the base
    target and one per diverging target, at most :data:`MAX_PROBES` functions each."""
    todo = [s for s in searches(cases, case_docs) if s.target in targets and s.base in targets]
    if not todo:
        return 0
    if progress:
        pairs = ", ".join(f"{s.case.function} on {s.target}" for s in todo[:5])
        more = f" and {len(todo) - 5} more" if len(todo) > 5 else ""
        progress(f"localising the first diverging node: {pairs}{more}")
    work = batches(todo)
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        ran = pool.map(lambda key: run_batch(targets[key[0]], work[key], timeout), list(work))
        done = dict(zip(work, ran, strict=True))
    places: dict[str, dict[bytes, Place]] = {}
    for s in todo:
        if s.case.key not in places:
            places[s.case.key] = _places(s.case)
        key = s.case.key
        s.conclude(done[(s.base, key)], done[(s.target, key)], places[key])
    return len(todo)


def _places(case: Case) -> dict[bytes, Place]:
    """The case's node positions; none for a ``.keg`` case (no source)."""
    if case.text is None:
        return {}
    return node_places(case.text, case.function, case.fingerprint)
