"""Memory spaces, ``transfer`` and effects in the IR: typing, the effect rules of ``Function``,
fingerprints, the ``.keg`` round trip and loader checks, the interpreter, and the optimiser
(effects are never merged, dropped, folded, hoisted or reordered; the pass manager catches a
pass that does so)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import spacegraphs

import kera.ir
from kera import keg
from kera.dtypes import DType
from kera.interp import interpret
from kera.ir import (
    Body,
    Function,
    Graph,
    IRError,
    Node,
    call,
    callee,
    const,
    loop,
    make_node,
    param,
    transfer,
)
from kera.ops import SPACES, Op, TensorType, TypeRuleError
from kera.passes import Pass, PassError, PassManager, pipeline
from kera.passes.validate import effect_trace
from kera.text import graph_text

F32, I64 = DType.F32, DType.I64


def _x(space: str = "host") -> Node:
    return param(0, "x", F32, [4], space)


# ------------------------------------------------------------------------- spaces and typing


def test_a_host_parameter_records_no_space() -> None:
    assert _x().attr_items == (("index", 0), ("name", "x"))
    assert _x("host") is _x()
    assert _x("device").attr("space") == "device"


@pytest.mark.parametrize("space", ["gpu", "Host", "", "host "])
def test_an_unknown_space_is_refused(space: str) -> None:
    with pytest.raises(IRError, match="is not a memory space"):
        _x(space)
    with pytest.raises(TypeRuleError, match="not a memory space") as e:
        transfer(_x(), space, 0)
    assert e.value.code == "E0219"


def test_transfer_typing() -> None:
    t = transfer(_x(), "device", 0)
    assert t.type == _x().type and t.attrs == {"from": "host", "to": "device", "seq": 0}
    assert transfer(t, "host", 1).attr("from") == "device"  # the default source
    for bad in ({"from": "host", "to": "host", "seq": 0}, {"from": "host", "to": "device"}):
        with pytest.raises(TypeRuleError) as e:
            make_node(Op.TRANSFER, [_x()], bad)
        assert e.value.code in ("E0219", "E0213")
    with pytest.raises(TypeRuleError, match="'seq' of transfer must be >= 0"):
        transfer(_x(), "device", -1)


def test_two_identical_transfers_are_two_nodes() -> None:
    a, b = transfer(_x(), "device", 0), transfer(_x(), "device", 1)
    assert a is not b and a is transfer(_x(), "device", 0)


# ------------------------------------------------------------------------- effect rules


def test_a_function_keeps_an_unused_transfer() -> None:
    x = _x()
    t = transfer(x, "pinned", 0)
    fn = Function("f", [x], [make_node("neg", [x])], [t])
    assert t in fn.nodes() and fn.declared == ("transfer",)
    assert "effects %" in graph_text(Graph([fn]))


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("missing", "not among its 0 effects"),
        ("missing one", "not among its 1 effects"),
        ("seq", "has seq 0 after seq 1"),
        ("dup", "two effectful nodes of 'f' have seq 0"),
        ("order", "runs before effect"),
        ("undeclared", "does not declare them"),
        ("unknown", "declares the effect 'io'"),
        ("pure", "is not an effectful node"),
    ],
)
def test_the_effect_rules_are_enforced(case: str, message: str) -> None:
    x = _x()
    t0, t1 = transfer(x, "device", 0), transfer(x, "device", 1)
    dup = transfer(x, "pinned", 0)
    later = transfer(transfer(x, "device", 1), "host", 0)  # depends on a later effect
    args: dict[str, tuple[list[Node], list[Node], Any]] = {
        "missing": ([t0], [], None),
        "missing one": ([make_node("add", [t0, t1])], [t1], None),
        "seq": ([t0, t1], [t1, t0], None),
        "dup": ([t0, dup], [t0], None),
        "order": ([later], [later, later.inputs[0]], None),
        "undeclared": ([t0], [t0], ()),
        "unknown": ([t0], [t0], ("transfer", "io")),
        "pure": ([x], [make_node("neg", [x])], None),
    }
    results, effects, declared = args[case]
    with pytest.raises(IRError, match=message):
        Function("f", [x], results, effects, declared)


def test_an_effectful_call_needs_its_seq() -> None:
    with pytest.raises(IRError, match="not among its 0 effects"):  # its transfer listed nowhere
        callee("g", [TensorType(F32, (4,))], lambda p: Body([transfer(p[0], "device", 0)], []))
    g = callee(
        "g",
        [TensorType(F32, (4,))],
        lambda p: Body([d := transfer(p[0], "device", 0)], [d]),
    )
    with pytest.raises(TypeRuleError, match="needs its 'seq'"):
        call(g, [_x()])
    pure = callee("p", [TensorType(F32, (4,))], lambda p: [make_node("neg", [p[0]])])
    with pytest.raises(TypeRuleError, match="takes no 'seq'"):
        call(pure, [_x()], seq=0)


def test_a_transfer_in_a_loop_body_is_not_hoisted() -> None:
    """The transfer reads only an outer value (loop-invariant): a pure node would be computed
    once outside the body; an effect stays inside and runs on every trip."""
    x = _x()

    def body(i: Node, c: list[Node]) -> Body:
        t = transfer(x, "device", 0)
        return Body([make_node("add", [c[0], t])], [t])

    (out,) = loop(0, 3, [x], body, seq=0)
    inner = kera.ir.loop_body(out)
    assert Op.TRANSFER in {n.op for n in inner.nodes()}
    assert Op.TRANSFER not in {n.op for n in topo_outside(out)}


def test_an_outer_transfer_of_a_constant_is_captured_not_copied_into_the_body() -> None:
    """A body that only reads an outer effect captures it, even when the effect's operand is a
    constant: copying it in (like a constant expression) would run it on every trip, as an
    effect the body never declared."""
    t = transfer(const(2.0, F32, [4]), "device", 0)
    (out,) = loop(0, 3, [_x()], lambda i, c: [make_node("add", [c[0], t])])
    assert t in out.inputs
    assert Op.TRANSFER not in {n.op for n in kera.ir.loop_body(out).nodes()}
    fn = Function("f", [_x()], [out], [t])
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    (got,) = interpret(fn, {"x": x})
    assert got.tobytes() == (x + 6).tobytes()


def topo_outside(node: Node) -> list[Node]:
    return kera.ir.topo_order([node])


# ------------------------------------------------------------------------- fingerprints


def _fp(fn: Function) -> str:
    return fn.fingerprint


def test_fingerprints_change_with_spaces_effects_and_transfers_only() -> None:
    x, y = _x(), param(1, "y", F32, [4])
    base = Function("f", [x, y], [make_node("add", [x, y])])
    # without spaces or effects: the encoding of old (the region hash of params and results)
    assert base.region_hash == kera.ir.region_hash(base.params, base.results)
    assert _fp(Function("g", [x, y], [make_node("add", [x, y])])) == _fp(base)
    xd = _x("device")
    on_device = Function("f", [xd, y], [make_node("add", [xd, y])])
    t = transfer(x, "device", 0)
    moved = Function("f", [x, y], [make_node("add", [t, y])], [t])
    t2 = transfer(x, "unified", 0)
    moved_unified = Function("f", [x, y], [make_node("add", [t2, y])], [t2])
    extra = Function("f", [x, y], [make_node("add", [x, y])], [], ["transfer"])
    unused = transfer(y, "pinned", 1)
    with_unused = Function("f", [x, y], [make_node("add", [t, y])], [t, unused])
    prints = [_fp(f) for f in (base, on_device, moved, moved_unified, extra, with_unused)]
    assert len(set(prints)) == len(prints)
    # the same program built again has the same fingerprint
    t_again = transfer(x, "device", 0)
    assert _fp(Function("h", [x, y], [make_node("add", [t_again, y])], [t_again])) == prints[2]


def test_fingerprints_of_the_shared_graphs_are_stable_across_builds() -> None:
    for build in spacegraphs.GRAPHS.values():
        assert build().fingerprint == build().fingerprint


# ------------------------------------------------------------------------- .keg


@pytest.mark.parametrize("name", list(spacegraphs.GRAPHS))
def test_keg_round_trip(name: str) -> None:
    g = spacegraphs.graph(name)
    data = keg.dumps(g)
    back = keg.loads(data)
    fn, again = g.functions[name], back.functions[name]
    assert again.fingerprint == fn.fingerprint
    assert len(again.effects) == len(fn.effects) and again.declared == fn.declared
    assert keg.dumps(back) == data


def test_a_graph_without_effects_writes_no_effect_fields() -> None:
    x = _x()
    data = keg.dumps(Graph([Function("f", [x], [make_node("neg", [x])])]))
    assert b"transfer" not in data and b"space" not in data


def _lenient(monkeypatch: pytest.MonkeyPatch) -> None:
    """Switch the IR's effect and space checks off, as a hand-written hostile file would be
    made (the loader runs with them on)."""
    monkeypatch.setattr(
        kera.ir,
        "_check_effects",
        lambda fn, held, moves, given: tuple(sorted(given or ["transfer"])),
    )
    monkeypatch.setattr(kera.ir, "_space", lambda space, what: space)
    monkeypatch.setattr(kera.ops, "check_space", lambda space, what="space": space)


def _hostile(monkeypatch: pytest.MonkeyPatch, case: str) -> bytes:
    with monkeypatch.context() as m:
        _lenient(m)
        x = _x()
        t0, t1 = transfer(x, "device", 0), transfer(x, "device", 1)
        fns = {
            "missing root": lambda: Function("f", [x], [t0], [], ["transfer"]),
            "duplicate seq": lambda: Function(
                "f", [x], [make_node("add", [t0, transfer(x, "pinned", 0)])], [t0], None
            ),
            "bad space": lambda: Function("f", [(p := _x("gpu"))], [make_node("neg", [p])]),
            "host stored": lambda: Function(
                "f",
                [
                    (
                        p := Node(
                            Op.PARAM, x.type, (), (("index", 0), ("name", "x"), ("space", "host"))
                        )
                    )
                ],
                [make_node("neg", [p])],
            ),
            "bad transfer": lambda: Function("f", [x], [(t := transfer(x, "vram", 0))], [t]),
            "unknown effect": lambda: Function("f", [x], [t0], [t0], ["transfer", "io"]),
            "order": lambda: Function("f", [x], [t1, t0], [t1, t0], ["transfer"]),
        }
        data = keg.dumps(Graph([fns[case]()]))
    kera.ir._INFERRED.clear()  # typing results memoised while the checks were off
    return data


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("missing root", "not among its 0 effects"),
        ("duplicate seq", "have seq 0"),
        ("bad space", "parameter space 'gpu'"),
        ("host stored", "host is recorded by leaving the attribute out"),
        ("bad transfer", "'vram' is not a memory space"),
        ("unknown effect", "declares the effect 'io'"),
        ("order", "has seq 0 after seq 1"),
    ],
)
def test_the_loader_refuses_hostile_effects_and_spaces(
    case: str, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _hostile(monkeypatch, case)
    with pytest.raises(keg.KegError, match=message) as e:
        keg.loads(data)
    assert e.value.section in ("nodes", "exports", "regions")


def test_a_region_flagged_with_effects_must_have_some() -> None:
    x = _x()
    data = bytearray(keg.dumps(Graph([Function("f", [x], [make_node("neg", [x])])])))
    # REGIONS: u32 n=1, u32 p=1, u32 param, u32 r=1, u32 result; set bit 31 of r, add e=0, d=0
    start = int.from_bytes(data[16 + 20 * 4 + 4 : 16 + 20 * 4 + 12], "little")
    r_at = start + 4 + 4 + 4
    data[r_at + 3] |= 0x80
    with pytest.raises(keg.KegError, match="regions section"):
        keg.loads(bytes(data))


# ------------------------------------------------------------------------- the interpreter


def test_transfer_is_the_identity_on_bits() -> None:
    fn = spacegraphs.round_trip()
    bits = np.array([[0x7FC00001, 0xFFBFFFFF, 0x80000000, 1, 0x7F800000, 3, 4, 5]], np.uint32)
    (back, shared) = interpret(fn, {"x": bits.view(np.float32)})
    with np.errstate(invalid="ignore"):
        doubled = (bits.view(np.float32) + bits.view(np.float32)).view(np.uint32)
    assert shared.view(np.uint32).tolist() == bits.tolist()
    assert back.view(np.uint32)[0, 2:].tolist() == doubled[0, 2:].tolist()


# ------------------------------------------------------------------------- the optimiser


@pytest.mark.parametrize("name", list(spacegraphs.GRAPHS))
@pytest.mark.parametrize("level", [1, 2])
def test_passes_keep_every_effect_and_the_bits(name: str, level: int) -> None:
    fn = spacegraphs.GRAPHS[name]()
    out = PassManager(pipeline(level)).run(fn).function
    assert effect_trace(out) == effect_trace(fn)
    assert Op.CALL not in out.ops_used()
    rng = np.random.default_rng(7)
    inputs = {
        str(p.attr("name")): rng.integers(0, 2, (3, *p.shape)).astype(p.dtype.np)
        if p.dtype is DType.BOOL
        else rng.standard_normal((3, *p.shape)).astype(p.dtype.np)
        for p in fn.params
    }
    for a, b in zip(interpret(fn, inputs), interpret(out, inputs), strict=True):
        assert a.tobytes() == b.tobytes()


def test_inline_renumbers_the_callee_effects_in_program_order() -> None:
    fn = spacegraphs.callee_transfer()
    x = fn.params[0]
    t = transfer(x, "pinned", 2)
    wider = Function(fn.name, fn.params, fn.results, [*fn.effects, t])
    out = PassManager(pipeline(1)).run(wider).function
    assert [(e.op, e.int_attr("seq")) for e in out.effects] == [
        (Op.TRANSFER, 0),
        (Op.TRANSFER, 1),
        (Op.TRANSFER, 2),
    ]
    assert out.effects[2].attr("to") == "pinned"


def test_fold_never_folds_a_transfer_of_a_constant() -> None:
    x = _x()
    t = transfer(const(np.float32(2.5), F32, [4]), "device", 0)
    fn = Function("f", [x], [make_node("add", [x, t])], [t])
    out = PassManager(pipeline(2)).run(fn).function
    assert [e.op for e in out.effects] == [Op.TRANSFER]


def _drop_unused(fn: Function) -> tuple[Function, int]:
    """A careless dead-code pass: keeps only the effects the results reach."""
    used = set(kera.ir.topo_order(fn.results))
    kept = [e for e in fn.effects if e in used]
    renumbered = [e for e in kept]
    return Function(fn.name, fn.params, fn.results, renumbered, fn.declared), 1


def _merge(fn: Function) -> tuple[Function, int]:
    """A careless CSE: the second of two equal transfers replaced by the first."""
    a, rest = fn.effects[0], fn.effects[2:]
    moved = [
        kera.ir.Node(
            e.op, e.type, e.inputs, tuple((k, 1 if k == "seq" else v) for k, v in e.attr_items)
        )
        for e in rest
    ]
    results = [make_node("xor", [a, a])]
    return Function(fn.name, fn.params, results, [a, *moved], fn.declared), 1


def _reorder(fn: Function) -> tuple[Function, int]:
    """Moves the unified transfer of ``round_trip`` first."""
    x = fn.params[0]
    shared = transfer(x, "unified", 0)
    d = transfer(x, "device", 1)
    back = transfer(make_node("add", [d, d]), "host", 2, source="device")
    return Function(fn.name, fn.params, [back, shared], [shared, d, back]), 1


@pytest.mark.parametrize(
    ("graph", "bad", "message"),
    [
        ("identical_transfers", _drop_unused, "had 3 effects, now 2"),
        ("identical_transfers", _merge, "effect 1 was"),
        ("round_trip", _reorder, "effect 0 was"),
    ],
)
def test_the_pass_manager_catches_a_pass_that_breaks_effects(
    graph: str, bad: Any, message: str
) -> None:
    fn = spacegraphs.GRAPHS[graph]()
    with pytest.raises(PassError, match=f"after pass 'careless'.*invariant 'effects'.*{message}"):
        PassManager([Pass("careless", 1, bad)]).run(fn)


def test_a_pass_that_builds_an_invalid_function_is_named() -> None:
    fn = spacegraphs.identical_transfers()

    def forget(f: Function) -> tuple[Function, int]:
        return Function(f.name, f.params, f.results, []), 1  # its transfers listed nowhere

    with pytest.raises(PassError, match="in pass 'forget' on 'identical_transfers'"):
        PassManager([Pass("forget", 1, forget)]).run(fn)


def test_spaces_are_a_closed_set() -> None:
    assert SPACES == ("host", "device", "pinned", "unified")


def test_an_outer_transfer_read_in_a_loop_body_is_captured() -> None:
    """An effect of the enclosing function that a body only reads is an outer value: captured
    (an operand of the loop), not an effect of the body."""
    x = _x()
    s = transfer(x, "device", 0)
    (out,) = loop(0, 4, [x], lambda i, c: [make_node("add", [c[0], s])])
    assert s in out.inputs and Op.TRANSFER not in kera.ir.loop_body(out).ops_used()
    fn = Function("f", [x], [out], [s])
    assert fn.declared == ("transfer",) and not kera.ir.loop_body(out).declared


def test_space_members_and_space_of() -> None:
    from kera.ops import Space

    d = param(0, "d", F32, [4], Space.DEVICE)
    assert d.attr("space") == "device" and type(d.attr("space")) is str
    assert d is param(0, "d", F32, [4], "device")
    t = transfer(d, Space.HOST, 0)
    assert t.attrs == {"from": "device", "to": "host", "seq": 0}
    assert kera.ir.space_of(make_node("neg", [d])) == "device"
    assert kera.ir.space_of(const(np.float32(1), F32, [4])) is None
    assert kera.ir.space_of(make_node("add", [const(np.float32(1), F32, [4]), d])) == "device"
    g = callee("g", [TensorType(F32, (4,))], lambda p: [make_node("neg", [p[0]])], ["unified"])
    (r,) = call(g, [param(0, "u", F32, [4], "unified")])
    assert kera.ir.space_of(r) == "unified"


def test_without_effects_given_a_function_takes_those_its_results_reach() -> None:
    """``effects=None`` (a slice of a function: a reproducer, a node's localisation): the
    effects the results reach, their numbers kept; an effect nothing reaches is not in it."""
    fn = spacegraphs.identical_transfers()
    whole = Function(fn.name, fn.params, fn.results)
    assert [e.int_attr("seq") for e in whole.effects] == [0, 1]  # the unused one is not reached
    (back, _shared) = spacegraphs.round_trip().results
    part = Function("part", spacegraphs.round_trip().params, [back])
    assert [e.int_attr("seq") for e in part.effects] == [0, 1] and part.declared == ("transfer",)
    data = keg.dumps(Graph([part]))
    assert keg.loads(data).functions["part"].fingerprint == part.fingerprint
    looped = spacegraphs.loop_transfer()
    (out,) = looped.results
    assert Function("again", looped.params, [out]).fingerprint == looped.fingerprint
