"""keracheck.fuzz strategies, policies and the graph -> Kera printer.

Generated graphs must be valid (every node re-types under the one typing rule, the .keg loader
accepts them, the interpreter runs them without a warning), cover every dtype, odd and
power-of-two lengths and the special constants, replay exactly from their recorded choices, and
shrink to small graphs.  The printer's source must compile back to the same fingerprint.
"""

from __future__ import annotations

import collections
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, Verbosity, find, given, seed, settings
from hypothesis import strategies as st
from hypothesis.database import InMemoryExampleDatabase, choices_to_bytes

from kera import keg, mathlib
from kera.dtypes import DType
from kera.interp import interpret
from kera.ir import Function, FunctionBuilder, Graph, IRError, const, make_node, param, topo_order
from kera.ops import DYNAMIC, Op, infer
from keracheck.fuzz import calls, coverage, policies, to_kera
from keracheck.fuzz.coverage import Coverage
from keracheck.fuzz.oracle import fuzz_inputs
from keracheck.fuzz.strategies import (
    DTYPES,
    LEAF_OPS,
    Combo,
    Drawn,
    allowed_steps,
    as_ops,
    batches,
    choose,
    graphs,
    op_count,
    recorded_graphs,
)
from keracheck.inputs import generate

ALL_POLICIES = tuple(policies.POLICIES)
QUIET = settings(
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.generate],
    verbosity=Verbosity.quiet,
)


def sample(n_examples: int, seed_: int, **kw: Any) -> list[Function]:
    """Graphs of ``n_examples`` generated batches (fixed seed, so the sample is stable)."""
    out: list[Function] = []

    @settings(QUIET, max_examples=n_examples)
    @seed(seed_)
    @given(batches(**kw))
    def collect(batch: list[Drawn]) -> None:
        out.extend(d.fn for d in batch if d.fn is not None)

    collect()
    return out


@pytest.fixture(scope="module")
def corpus() -> list[Function]:
    return sample(60, 1, policies=ALL_POLICIES)


def test_generated_graphs_are_valid(corpus: list[Function]) -> None:
    assert len(corpus) > 200
    for fn in corpus:
        for n in fn.nodes():
            if n.op not in LEAF_OPS:
                assert infer(n.op, [i.type for i in n.inputs], n.attrs) == n.type
        loaded = keg.loads(keg.dumps(Graph([fn]))).functions[fn.name]
        assert loaded.fingerprint == fn.fingerprint
        assert fn.results and all(r.op not in LEAF_OPS for r in fn.results)
        names = fn.param_names()
        assert names == [f"p{k}" for k in range(len(names))]


def test_generated_graphs_run_on_the_interpreter(corpus: list[Function]) -> None:
    for fn in corpus[:150]:
        outs = interpret(fn, generate(fn, 8, 0))  # warnings are errors under pytest -W error
        rows = 8 if fn.params else 1  # a function without parameters runs once
        assert [o.shape for o in outs] == [(rows, *r.shape) for r in fn.results]


def test_coverage_of_dtypes_shapes_ops_and_constants(corpus: list[Function]) -> None:
    dtypes: set[DType] = set()
    lengths: set[int] = set()
    ops: collections.Counter[Op] = collections.Counter()
    constants: set[int] = set()
    for fn in corpus:
        for n in fn.nodes():
            dtypes.add(n.dtype)
            lengths.update(n.shape)
            ops[n.op] += 1
            if n.op is Op.CONST:
                raw = n.attr("value")
                assert isinstance(raw, bytes)
                constants.add(int.from_bytes(raw, "little"))
    assert dtypes == set(DType)
    assert {1, 2, 3, 4, 5, 7, 8, 16, 17} <= lengths  # odd and power-of-two lengths
    assert set(Op) - set(ops) <= {Op.PARAM}, f"never generated: {set(Op) - set(ops)}"
    # -0.0 in f32 and f64, the smallest subnormal, a NaN payload (bitcast from u32), u32 MAX
    for bits in (0x80000000, 0x8000000000000000, 0x00000001, 0x7FC00001, 0xFFFFFFFF):
        assert bits in constants, hex(bits)


def test_payload_nans_are_bitcast_from_integers(corpus: list[Function]) -> None:
    for fn in corpus:
        for n in fn.nodes():
            if n.op is Op.CONST and n.dtype.is_float:
                raw = n.attr("value")
                assert isinstance(raw, bytes)
                v = np.frombuffer(raw, dtype=n.dtype.np)
                bits = int(v.view(n.dtype.uint)[0]) & ~(1 << (n.dtype.bits - 1))
                assert not np.isnan(v[0]) or bits in (0x7FC00000, 0x7FF8000000000000)


def test_only_allowed_ops_are_generated() -> None:
    allowed = {Op.ADD, Op.MUL, Op.MIN}
    for fn in sample(40, 2, ops=allowed, policies=ALL_POLICIES):
        assert {n.op for n in fn.nodes()} - LEAF_OPS <= allowed


def test_each_policy_changes_the_graphs() -> None:
    base = policies.profile(())
    for name in policies.POLICIES:
        assert policies.profile((name,)) != base, name
    shifts = [
        n.inputs[1]
        for fn in sample(40, 3, ops={Op.SHL, Op.SHR, Op.BROADCAST}, policies=("shift-overflow",))
        for n in fn.nodes()
        if n.op in (Op.SHL, Op.SHR)
    ]
    over = [s for s in shifts if s.op is Op.CONST or s.op is Op.BROADCAST]
    assert over, "the shift-overflow policy never made a constant shift amount"


def test_policy_names() -> None:
    assert policies.parse(None) == policies.DEFAULT
    assert set(ALL_POLICIES) - set(policies.DEFAULT) == {"large-tensors"}  # opt-in: slow on HDL
    assert policies.parse("all") == ALL_POLICIES
    assert policies.parse("none") == ()
    assert policies.parse("ties, specials") == ("ties", "specials")
    with pytest.raises(policies.PolicyError, match="unknown policy 'bogus'"):
        policies.parse("ties,bogus")


@given(st.data())
def test_choose_never_returns_a_zero_weight(data: st.DataObject) -> None:
    weights = data.draw(st.lists(st.integers(0, 3), min_size=1, max_size=6).filter(any))
    assert weights[choose(data.draw, weights)] > 0


def test_choose_draws_nothing_for_one_choice() -> None:
    def no_draw(strategy: object) -> object:
        raise AssertionError("drew")

    assert choose(no_draw, [0, 5, 0]) == 1


def test_recorded_choices_replay_the_same_graph() -> None:
    drawn: list[Drawn] = []

    @settings(QUIET, max_examples=15)
    @seed(4)
    @given(batches(policies=ALL_POLICIES))
    def collect(batch: list[Drawn]) -> None:
        drawn.extend(batch)

    collect()
    for d in drawn[:40]:
        replayed = _replay(d.choices)
        assert d.fn is not None and replayed is not None
        assert replayed.fingerprint == d.fn.fingerprint


def _replay(choices: tuple[Any, ...]) -> Function | None:
    """The graph Hypothesis draws when it replays ``choices`` from an example database."""
    db = InMemoryExampleDatabase()
    db.save(b"k.secondary", choices_to_bytes(choices))
    seen: list[Drawn] = []

    @settings(QUIET, database=db, max_examples=2, phases=[Phase.reuse])
    @given(recorded_graphs(policies=ALL_POLICIES))
    def replay(x: Drawn) -> None:
        seen.append(x)

    replay._hypothesis_internal_database_key = b"k"  # type: ignore[attr-defined]
    replay()
    return seen[0].fn if seen else None


SHRINK_OPS = frozenset({Op.ADD, Op.MUL, Op.MIN, Op.MAX, Op.CONVERT, Op.SUM, Op.BROADCAST, Op.NEG})


@pytest.mark.parametrize(
    ("what", "condition", "most_ops"),
    [
        ("a min on f64", lambda f: any(n.op is Op.MIN and n.dtype is DType.F64 for n in f.nodes()), 2),
        ("a convert f64 -> i32", lambda f: any(n.op is Op.CONVERT and n.dtype is DType.I32 and n.inputs[0].dtype is DType.F64 for n in f.nodes()), 2),
        ("a sum", lambda f: any(n.op is Op.SUM for n in f.nodes()), 2),
    ],
)  # fmt: skip
def test_shrinking_reaches_small_graphs(what: str, condition: Any, most_ops: int) -> None:
    """Hypothesis alone shrinks a graph with the op to at most one more op (which local minimum
    it reaches depends on what it generated first; the fuzzer's reduction cuts the rest).

    Drawn over a handful of ops so the wanted one is common: over all ops a convert f64 -> i32
    is about 1 graph in 300, and Hypothesis mixes constants from every loaded local module
    (test modules included) into its draws, so which 3000 graphs a seed gives depends on what
    else the session collected."""
    found = find(
        graphs(ops=SHRINK_OPS, policies=ALL_POLICIES),
        lambda f: f is not None and condition(f),
        settings=settings(QUIET, max_examples=3000, phases=[Phase.generate, Phase.shrink]),
        random=__import__("random").Random(0),
    )
    assert found is not None
    assert op_count(found) <= most_ops, f"{what}: {op_count(found)} ops"


# ------------------------------------------------------------------------------ the printer


def test_printed_source_compiles_to_the_same_fingerprint(corpus: list[Function]) -> None:
    pytest.importorskip("kera.frontend", reason="kera.frontend (the Kera front end) is missing")
    for fn in corpus:
        text = to_kera.render(fn, "case", ["a header line"])
        assert to_kera.roundtrip(fn, text) is None, text


LITERALS = [
    (DType.F32, 0x80000000, "-0.0f32"),
    (DType.F32, 0x00000001, "1e-45f32"),
    (DType.F32, 0x7F7FFFFF, "3.4028235e+38f32"),
    (DType.F32, 0xFFC00000, "-nan"),
    (DType.F64, 0x7FF8000000000000, "nan"),
    (DType.F64, 0xFFF0000000000000, "-inf"),
    (DType.F64, 0x3FB999999999999A, "0.1f64"),
]


@pytest.mark.parametrize(("dtype", "bits", "text"), LITERALS)
def test_float_literals_keep_exact_bits(dtype: DType, bits: int, text: str) -> None:
    pytest.importorskip("kera.frontend", reason="kera.frontend (the Kera front end) is missing")
    value = np.array([bits], dtype=dtype.uint).view(dtype.np).reshape(())
    node = const(value, dtype)
    assert to_kera.literal(node) == text
    b = FunctionBuilder("f")
    x = b.param("x", dtype)
    fn = b.build(b.op("add", x, node))
    assert to_kera.roundtrip(fn, to_kera.render(fn, "f")) is None


@pytest.mark.parametrize(
    ("dtype", "value", "text"),
    [(DType.I32, -(2**31), "-2147483648i32"), (DType.U64, 2**64 - 1, "18446744073709551615u64"), (DType.BOOL, True, "true")],
)  # fmt: skip
def test_integer_and_bool_literals(dtype: DType, value: int, text: str) -> None:
    assert to_kera.literal(const(value, dtype)) == text


def test_what_source_cannot_spell_is_refused() -> None:
    with pytest.raises(to_kera.PrintError, match="broadcast a scalar"):
        to_kera.literal(const(1.0, DType.F32, [3]))
    payload = np.array([0x7FC00001], dtype=np.uint32).view(np.float32).reshape(())
    with pytest.raises(to_kera.PrintError, match="bitcast an integer"):
        to_kera.literal(const(payload, DType.F32))
    x = param(0, "x", DType.F32)
    fn = Function("f", [x], [make_node("neg", [x])])
    with pytest.raises(to_kera.PrintError, match="not an identifier"):
        to_kera.render(fn, "1f")
    with pytest.raises(IRError, match="not an identifier"):
        param(0, "1x", DType.F32)  # the IR itself admits only identifiers


def test_large_tensors_policy_raises_the_element_bound() -> None:
    def biggest(fns: list[Function]) -> int:
        return max(math.prod(n.shape) for fn in fns for n in fn.nodes())

    assert biggest(sample(20, 3, policies=policies.DEFAULT)) <= 256
    large = biggest(sample(20, 3, policies=("large-tensors",)))
    assert 256 < large <= 4096


# ------------------------------------------------------------------------------ math-library calls


def test_calls_are_generated_as_units(corpus: list[Function]) -> None:
    """Every function of the library appears, as a call the analysis finds, counted as one op
    and printed as one call."""
    seen: collections.Counter[str] = collections.Counter()
    for fn in corpus:
        units = calls.analyse(fn)
        seen.update(c.name for c in units.calls.values())
        if not fn.ops_used() & {Op.LOOP, Op.CALL, *DYNAMIC}:  # a loop or a call: once
            # with its body's ops; a dynamic op: once with its start vector
            assert op_count(fn) == sum(1 for n in units.nodes if n.op not in LEAF_OPS)
    assert set(seen) == set(calls.NAMES), seen
    assert tuple(mathlib.FUNCTIONS) == calls.NAMES  # derived from the library, not restated


def _calls_fn() -> Function:
    """exp of a vector beside an add, tanh of a log, and abs(p1), which sigmoid(p1) uses too."""
    p0, p1 = param(0, "p0", DType.F32, (3,)), param(1, "p1", DType.F64)
    e = mathlib.exp(p0)
    results = [make_node("add", [e, p0]), mathlib.tanh(mathlib.log(p1))]
    results += [make_node("abs", [p1]), mathlib.sigmoid(p1)]
    return Function("f", [p0, p1], results)


def test_a_call_is_one_unit() -> None:
    fn = _calls_fn()
    units = calls.analyse(fn)
    names = [units.op_name(n) for n in units.nodes if n.op not in LEAF_OPS]
    assert names == ["exp", "add", "log", "tanh", "abs", "sigmoid"]
    assert op_count(fn) == 6 and len(fn.nodes()) > 200
    (tanh,) = [c for c in units.calls.values() if c.name == "tanh"]
    assert units.operands(tanh.result) == (tanh.arg,) and units.call(tanh.arg) is not None
    # abs(p1) is inside sigmoid's expansion and a result of its own: visible, not hidden
    abs_p1 = fn.results[2]
    assert id(abs_p1) not in units.hidden and units.call(abs_p1) is None
    assert all(id(n) in units.hidden for n in topo_order([tanh.result], {id(tanh.arg)})[1:-1])


def test_calls_print_as_calls() -> None:
    pytest.importorskip("kera.frontend", reason="kera.frontend (the Kera front end) is missing")
    fn = _calls_fn()
    text = to_kera.render(fn, "f")
    assert "= exp(p0);" in text and "= sigmoid(p1);" in text and "abs(p1)" in text
    assert "tanh(v" in text and len(text.splitlines()) == 9  # signature, 6 lets, value, }
    assert to_kera.roundtrip(fn, text) is None


def test_a_call_needs_every_op_of_its_expansion() -> None:
    some = frozenset({Op.ADD, Op.MUL, Op.MAX})
    prof = policies.profile(())
    assert not [s for s in allowed_steps(some, prof) if not isinstance(s, Op)]
    exp_ops = calls.contract_ops("exp")
    assert "exp" in allowed_steps(exp_ops, prof) and "log" not in allowed_steps(exp_ops, prof)
    assert {Op.MAX, Op.ROUND, Op.SHL, Op.BITCAST} <= exp_ops  # asked of the expansion


def test_shrinking_keeps_a_call_whole() -> None:
    """Hypothesis deletes everything but the call: one step is one call."""
    found = find(
        graphs(policies=ALL_POLICIES),
        lambda f: f is not None and any(c.name == "tanh" for c in calls.analyse(f).calls.values()),
        settings=settings(QUIET, max_examples=2000, phases=[Phase.generate, Phase.shrink]),
        random=__import__("random").Random(0),
    )
    assert found is not None
    assert op_count(found) == 1, to_kera.render(found, "f")
    (call,) = calls.analyse(found).calls.values()
    assert call.name == "tanh" and call.arg.op is Op.PARAM and call.arg.shape == ()


def test_call_arguments_get_interesting_inputs() -> None:
    """Half the rows of a call's parameter come from its bands (exp: within the overflow and
    underflow thresholds, give or take one), where the harness's mix mostly overflows."""
    p0 = param(0, "p0", DType.F32, (4,))
    fn = Function("f", [p0], [mathlib.exp(p0)])
    x = fuzz_inputs(fn, 64, 0)["p0"]
    body = x[: 64 - 8]
    assert np.array_equal(x.view(np.uint32), fuzz_inputs(fn, 64, 0)["p0"].view(np.uint32))
    lim = calls.Limits.of(DType.F32)
    inside = (body[::2] >= lim.ln_sub - 1) & (body[::2] <= lim.ln_max + 1)
    assert inside.all()  # every biased row
    assert (np.abs(body[1::2]) > 200).any()  # the harness's rows are left as they were
    ranges = calls.ranges("log", DType.F64)
    assert any(b.lo < 1 < b.hi and b.hi - b.lo < 0.2 for b in ranges.bands)  # near 1
    assert calls.edges("exp", DType.F32)[0] == pytest.approx(88.72, abs=0.01)


# ------------------------------------------------------------------------------ coverage


def _coverage_sample(n_examples: int, guided: bool) -> tuple[Coverage, list[Drawn]]:
    """Graphs of n batches and their coverage; guided: the coverage focuses them, as in a
    campaign (which counts each batch it checks)."""
    cov = Coverage(as_ops(None))
    drawn: list[Drawn] = []

    @settings(QUIET, max_examples=n_examples)
    @seed(1)
    @given(batches(policies=policies.DEFAULT, focus=cov if guided else None))
    def collect(batch: list[Drawn]) -> None:
        drawn.extend(batch)
        cov.count(d.fn for d in batch if d.fn is not None)

    collect()
    return cov, drawn


def test_coverage_weights_rare_combinations_up_and_replays() -> None:
    """With a campaign's coverage every (op, dtype) combination is in a graph within 32 batches
    (without it, some are not), more are exercised often, an i32 -> f32 conversion is more
    common, and every focused graph replays from its choices without the coverage object."""
    plain, _ = _coverage_sample(32, False)
    guided, drawn = _coverage_sample(32, True)
    assert plain.missing() and not guided.missing()

    def exercised(cov: Coverage) -> int:
        return sum(cov.counts[c] >= cov.exercised for c in cov.table)

    assert exercised(guided) > exercised(plain)
    rare = Combo(Op.CONVERT, DType.I32, DType.F32)
    assert guided.counts[rare] > plain.counts[rare]
    for d in drawn[:: len(drawn) // 12]:
        replayed = _replay_plain(d.choices)
        assert d.fn is not None and replayed is not None
        assert replayed.fingerprint == d.fn.fingerprint


def _replay_plain(choices: tuple[Any, ...]) -> Function | None:
    db = InMemoryExampleDatabase()
    db.save(b"k.secondary", choices_to_bytes(choices))
    seen: list[Drawn] = []

    @settings(QUIET, database=db, max_examples=2, phases=[Phase.reuse])
    @given(recorded_graphs(policies=policies.DEFAULT))
    def replay(x: Drawn) -> None:
        seen.append(x)

    replay._hypothesis_internal_database_key = b"k"  # type: ignore[attr-defined]
    replay()
    return seen[0].fn if seen else None


def test_coverage_document_and_table() -> None:
    cov = Coverage(frozenset({Op.ADD, Op.CONVERT, Op.BROADCAST}))
    p = param(0, "p0", DType.I32)
    fn = Function("f", [p], [make_node("convert", [make_node("add", [p, p])], {"to": DType.F32})])
    cov.count([fn, fn])
    doc = cov.document()
    assert doc["rows"]["add"]["i32"] == 2 and doc["rows"]["convert i32"]["f32"] == 2
    assert "bool" not in doc["rows"]["add"] and doc["rows"]["convert i32"]["bool"] == 0
    assert "convert i32 -> u64" in doc["never"] and doc["graphs"] == 2
    text = doc["text"].splitlines()
    assert text[0].startswith(f"coverage: 0 of {doc['combinations']} (op, dtype) combinations")
    assert text[1].split() == ["op", *(str(d) for d in DTYPES)]
    assert text[2].split() == ["add", "0", "2", "0", "0", "0", "0", "-"]
    assert coverage.render(doc) == doc["text"]
