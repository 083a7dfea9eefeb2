"""The pass manager's shortcuts keep every check: incremental validation (``validate(fn,
known)``) still catches what a pass breaks, and a corrupted input in the first, full
validation; an idempotent pass is skipped only on its own output; the cyclic collector is
paused only while a pipeline runs; ``topo_order`` is the recursive walk it unrolls; and
``fold``, ``cse`` and ``inline`` are idempotent on the corpus (and the call graphs), as their ``IDEMPOTENT`` flags claim."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest
from callgraphs import GRAPHS as CALL_GRAPHS

from kera import passes
from kera.dtypes import DType
from kera.frontend import compile_source
from kera.ir import Function, FunctionBuilder, Node, TensorType, const, topo_order
from kera.ops import Op
from kera.passes import InvariantError, Pass, PassError, PassManager, cse, fold, inline, validate

ROOT = Path(__file__).resolve().parents[2]
_set = object.__setattr__


def _fn(k: float = 2.0) -> Function:
    b = FunctionBuilder("f")
    x, y = b.param("x", DType.F32, [4]), b.param("y", DType.F32, [4])
    two = const(k, DType.F32, [4])
    return b.build(b.op("mul", b.op("add", x, y), b.op("add", two, two)))


@pytest.fixture
def fn() -> Iterator[Function]:
    yield _fn()


def _raises(invariant: str, f: Function, known: set[Node]) -> None:
    with pytest.raises(InvariantError) as e:
        validate(f, known)
    assert e.value.invariant == invariant, str(e.value)


def test_validate_returns_the_nodes_it_vouches_for(fn: Function) -> None:
    known = validate(fn)
    assert known == set(fn.nodes())
    assert validate(fn, known) == known  # nothing new: only the region-level checks ran


def test_region_order_and_results_are_checked_in_full(fn: Function) -> None:
    known = validate(fn)
    nodes = fn.nodes()
    _set(fn, "_nodes", [*nodes[1:], nodes[0]])
    _raises("order", fn, known)
    _set(fn, "_nodes", nodes)
    _set(fn, "region_hash", b"\0" * 32)
    _raises("region", fn, known)


def test_a_new_node_of_the_wrong_type_is_caught(fn: Function) -> None:
    known = validate(fn)
    x, y = fn.params
    wrong = Node(Op.ADD, TensorType(DType.F32, (8,)), (x, y), ())  # the constructor trusts
    g = Function("f", fn.params, [Node(Op.MUL, wrong.type, (wrong, fn.results[0]), ())])
    _raises("type", g, known)


def test_a_new_node_whose_hash_is_wrong_is_caught(fn: Function) -> None:
    known = validate(fn)
    r = fn.results[0]
    new = Node(Op.NEG, r.type, (r,), ())
    g = Function("f", fn.params, [Node(Op.ABS, r.type, (new,), ())])
    saved = new.hash
    _set(new, "hash", b"\1" * 32)
    try:
        _raises("hash", g, known)
    finally:
        _set(new, "hash", saved)


def test_a_cycle_through_new_nodes_is_caught(fn: Function) -> None:
    known = set(fn.params)
    mul = fn.results[0]
    add = mul.inputs[0]
    _set(add, "inputs", (add.inputs[0], mul))  # add <- mul <- add
    try:
        _set(fn, "_nodes", topo_order(fn.results))
        _raises("acyclic", fn, known)
    finally:
        _set(add, "inputs", (add.inputs[0], fn.params[1]))


def test_known_nodes_are_not_checked_again(fn: Function) -> None:
    """The contract, shown: a known node changed behind ``Node.__setattr__``'s back is not
    seen by an incremental call; it is by a full one, which the manager runs first."""
    known = validate(fn)
    add = fn.results[0].inputs[0]
    saved = add.type
    _set(add, "type", TensorType(DType.F32, (8,)))
    try:
        validate(fn, known)
        _raises("hash", fn, set())
    finally:
        _set(add, "type", saved)


def test_a_corrupted_input_is_caught_before_the_pipeline(fn: Function) -> None:
    add = fn.results[0].inputs[0]
    saved = add.type
    _set(add, "type", TensorType(DType.F32, (8,)))
    try:
        with pytest.raises(PassError, match=r"before the pipeline on 'f': invariant 'hash'"):
            PassManager(passes.pipeline(2)).run(fn)
    finally:
        _set(add, "type", saved)


def test_a_pass_that_builds_a_bad_node_is_named(fn: Function) -> None:
    def sloppy(f: Function) -> tuple[Function, int]:
        r = f.results[0]
        return Function(f.name, f.params, [Node(Op.NEG, TensorType(DType.F64, (4,)), (r,), ())]), 1

    with pytest.raises(PassError, match=r"after pass 'sloppy' on 'f': invariant 'type'"):
        PassManager([*passes.pipeline(2), Pass("sloppy", 1, sloppy)]).run(fn)


def _counting(name: str, idempotent: bool, calls: list[str]) -> Pass:
    def run(f: Function) -> tuple[Function, int]:
        calls.append(name)
        return passes.PASSES["fold"].run(f)

    return Pass(name, 1, run, idempotent=idempotent)


def test_an_idempotent_pass_is_not_run_on_its_own_output(fn: Function) -> None:
    calls: list[str] = []
    out = PassManager([_counting("once", True, calls)]).run(fn)
    assert calls == ["once"] and out.rounds == 2  # round 2 confirms without running it
    assert [(s.round, s.rewrites, s.seconds) for s in out.stats][1] == (2, 0, 0.0)
    calls.clear()
    PassManager([_counting("again", False, calls)]).run(fn)
    assert calls == ["again", "again"]


def test_an_idempotent_pass_runs_again_after_another_changed_the_graph(fn: Function) -> None:
    calls: list[str] = []
    changes = [0, 1]  # popped from the end

    def once(f: Function) -> tuple[Function, int]:  # changes the graph on its first run only
        if not changes.pop():
            return f, 0
        r = f.results[0]
        return Function(f.name, f.params, [Node(Op.NEG, r.type, (r,), ())]), 1

    out = PassManager([_counting("a", True, calls), Pass("once", 1, once)]).run(fn)
    assert out.converged and out.rounds == 2 and calls == ["a", "a"]


@pytest.mark.parametrize("enabled", [True, False])
def test_the_cyclic_collector_is_restored(fn: Function, enabled: bool) -> None:
    seen: list[bool] = []

    def probe(f: Function) -> tuple[Function, int]:
        seen.append(gc.isenabled())
        raise InvariantError("probe", "stop here")

    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        with pytest.raises(PassError):
            PassManager([Pass("probe", 1, probe)]).run(fn)
        assert seen == [False] and gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


def _recursive_order(results: list[Node], stop: set[int]) -> list[Node]:
    seen: set[int] = set()
    order: list[Node] = []

    def visit(n: Node) -> None:
        if id(n) in seen:
            return
        seen.add(id(n))
        if id(n) not in stop:
            for x in n.inputs:
                visit(x)
        order.append(n)

    for r in results:
        visit(r)
    return order


def _corpus() -> list[Function]:
    fns: list[Function] = []
    for path in sorted((ROOT / "corpora").glob("*.kera")):
        graph = compile_source(path.read_text(), str(path)).graph
        assert graph is not None, path
        fns.extend(graph.functions.values())
    return fns


CORPUS = _corpus()


def test_topo_order_is_the_recursive_walk() -> None:
    for f in CORPUS:
        for region in f.regions():
            nodes = region.nodes()
            assert topo_order(region.results) == _recursive_order(list(region.results), set())
            stop = {id(n) for n in nodes[::3]}
            want = _recursive_order([*region.results, *nodes[::-5]], stop)
            assert topo_order([*region.results, *nodes[::-5]], stop) == want


@pytest.mark.parametrize("module", [fold, cse, inline], ids=["fold", "cse", "inline"])
def test_idempotent_builtins_hand_their_output_back(module: object) -> None:
    run = module.run  # type: ignore[attr-defined]
    assert module.IDEMPOTENT is True  # type: ignore[attr-defined]
    for f in [*CORPUS, *(build() for build in CALL_GRAPHS.values())]:
        once, _ = run(f)
        twice, rewrites = run(once)
        assert twice is once and rewrites == 0, f.name
