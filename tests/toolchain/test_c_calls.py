"""Calls on the C back end, bit for bit against kera.interp.

* every graph of ``tests/callgraphs.py`` and the edge graphs below, on every CPU target the host
  can run (``cpu:scalar``/``sse2``/``avx2``/``avx512``, ``cpu-aarch64`` and ``cpu-riscv64``
  under qemu-user), on keracheck's generated inputs for a row count that leaves a partial
  block, each graph twice: as built (``-O0``: the back end lowers every ``call`` itself) and
  inlined (``-O2``, ``kera.passes.optimize(fn, pipeline(2))``, no call left); both must give
  the interpreter's bits, so the back end's call lowering and the inline pass agree bit for bit;
* the edge graphs: tiles in the arena passed through two calls (a caller's operand still live
  after them, a big result nobody reads), results that alias (a parameter returned, one value
  returned twice, a reshape of a parameter), NaN payloads passed through untouched beside
  NaN-dirty operands and results, start indices made by calls (uniform or per row), calls in
  loops nested in loops with a loop in the callee, bool and 64-bit values;
* the code shape (no tool needed): a call group's callee is lowered once, whatever the number
  of its results, and once per call (no loop, no function of its own); a uniform start made by
  a call moves whole lane vectors; the C is warning-free under -Wextra at every level; the
  golden C of one small call (``tests/golden/c/calls/``; ``KERA_UPDATE_GOLDEN=1`` regenerates).

The runner helpers are ``test_c_backend``'s (``usable``, ``mismatches``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from callgraphs import GRAPHS
from test_c_backend import TARGETS, mismatches, usable

from kera.backends import c
from kera.backends.c.emit import parts
from kera.dtypes import DType
from kera.interp import interpret
from kera.ir import (
    Function,
    FunctionBuilder,
    Node,
    TensorType,
    call,
    callee,
    const,
    loop,
    loop_body,
    start_vector,
)
from kera.ir import make_node as mk
from kera.ops import REGION_OPS, Op
from kera.passes import optimize, pipeline
from keracheck.inputs import generate

Array = np.ndarray[Any, Any]
F32, F64, I32, I64, U32, U64, BOOL = (
    DType.F32,
    DType.F64,
    DType.I32,
    DType.I64,
    DType.U32,
    DType.U64,
    DType.BOOL,
)
GOLDEN = Path(__file__).parents[1] / "golden"
ROWS = 37  # not a multiple of any lane count: every target runs a partial block


def _t(dtype: DType, *shape: int) -> TensorType:
    return TensorType(dtype, tuple(shape))


def _bcast(x: Node, *shape: int) -> Node:
    return mk("broadcast", [x], {"shape": list(shape)})


# ------------------------------------------------------------------------------ edge graphs


def arena_calls() -> Function:
    """f64[3000] tiles (the arena) through two calls of one callee, the first call's results
    the second's operands; the caller's operand is read again after both calls; the callee's
    third result (a big tile) is read by no one."""
    g = callee(
        "scale",
        [_t(F64, 3000), _t(F64)],
        lambda p: [
            mk("add", [mk("mul", [p[0], _bcast(p[1], 3000)]), p[0]]),
            mk("sum", [p[0]], {"axis": 0}),
            mk("sub", [p[0], p[0]]),
        ],
    )
    b = FunctionBuilder("arena_calls")
    x, s = b.param("x", F64, [3000]), b.param("s", F64)
    a, t1, _ = call(g, [x, s])
    bb, t2, _ = call(g, [a, t1])
    head = b.op("slice", bb, start=[0], stop=[8])
    return b.build(head, t1, t2, b.op("amax", b.op("mul", x, x), axis=0))


def aliases() -> Function:
    """Results that are not tiles of the callee's own: a parameter, one value twice, a reshape
    of a parameter; an unread result; both operands read again after the call."""
    g = callee(
        "shuffle",
        [_t(U64, 5), _t(U64, 5)],
        lambda p: [
            p[1],
            mk("add", [p[0], p[1]]),
            mk("add", [p[0], p[1]]),
            mk("reshape", [p[0]], {"shape": [1, 5]}),
            mk("neg", [p[0]]),
        ],
    )
    b = FunctionBuilder("aliases")
    u, v = b.param("u", U64, [5]), b.param("v", U64, [5])
    same, s1, s2, flat, _ = call(g, [u, v])
    mixed = b.op("xor", b.op("mul", s1, same), b.op("reshape", flat, shape=[5]))
    return b.build(mixed, s2, b.op("sub", u, v), same)


def payloads() -> Function:
    """A NaN payload passed through a callee untouched keeps its bits; a NaN-dirty operand
    (``x * x``) and a dirty result (``y + y``) are canonical where their bits are seen."""
    g = callee(
        "keep",
        [_t(F32, 4), _t(F32, 4)],
        lambda p: [p[0], p[1], mk("bitcast", [p[1]], {"to": U32}), mk("add", [p[1], p[1]])],
    )
    b = FunctionBuilder("payloads")
    x = b.param("x", F32, [4])
    kept, squared, bits, doubled = call(g, [x, b.op("mul", x, x)])
    return b.build(kept, squared, bits, b.op("bitcast", doubled, to=U32), b.op("neg", doubled))


def starts() -> Function:
    """Start indices made by calls: from a constant operand and from a call with no operands
    (the same in every row), and from a parameter (different per row)."""
    g = callee("next", [_t(I32)], lambda p: [mk("add", [p[0], const(1, I32)])])
    h = callee("two", [], lambda p: [const(2, I32)])
    b = FunctionBuilder("starts")
    x, r = b.param("x", F32, [7]), b.param("r", I32)
    (u,) = call(g, [b.const(3, I32)])
    (w,) = call(h, [])
    (v,) = call(g, [r])
    windows = [
        b.op("dynamic_slice", x, start_vector([s]), size=[3]) for s in (u, w, v)
    ]  # fmt: skip
    return b.build(*windows)


def loops_and_calls() -> Function:
    """A call in a loop nested in a loop (its operands the carried value and both indices),
    a callee holding a loop, the same callee called again outside the loops."""

    def step_body(p: list[Node]) -> list[Node]:
        f = mk("convert", [mk("sub", [p[1], p[2]])], {"to": F32})
        (acc,) = loop(0, 2, [p[0]], lambda k, c: [mk("fma", [c[0], _bcast(f, 3), p[0]])])
        return [acc, f]

    g = callee("step", [_t(F32, 3), _t(I32), _t(I32)], step_body)
    b = FunctionBuilder("loops_and_calls")
    x, k = b.param("x", F32, [3]), b.param("k", I32)

    def outer(i: Node, c: list[Node]) -> list[Node]:
        def inner(j: Node, d: list[Node]) -> list[Node]:
            acc, f = call(g, [d[0], i, j])
            return [mk("sub", [acc, _bcast(f, 3)])]

        return loop(-1, 2, [c[0]], inner)

    (y,) = loop(0, 3, [x], outer)
    again, f = call(g, [y, k, b.const(5, I32)])
    return b.build(y, again, f)


def bools() -> Function:
    """Bool and i64 operands and results; a comparison as an operand; a bool result used as a
    select's condition by the caller."""
    g = callee(
        "pick",
        [_t(BOOL, 6), _t(I64, 6)],
        lambda p: [
            mk("not", [p[0]]),
            mk("select", [p[0], p[1], mk("neg", [p[1]])]),
            mk("eq", [p[1], mk("abs", [p[1]])]),
        ],
    )
    b = FunctionBuilder("bools")
    m, x = b.param("m", BOOL, [6]), b.param("x", I64, [6])
    flipped, chosen, positive = call(g, [b.op("xor", m, b.op("lt", x, b.op("neg", x))), x])
    return b.build(flipped, b.op("select", positive, chosen, x), positive)


EDGES: dict[str, Callable[[], Function]] = {
    f.__name__: f for f in (arena_calls, aliases, payloads, starts, loops_and_calls, bools)
}
ALL = {**GRAPHS, **EDGES}


# ------------------------------------------------------------------------------ running


def inlined(fn: Function) -> Function:
    """The -O2 form of fn: every call expanded by the inline pass (and the rest optimised)."""
    out = optimize(fn, pipeline(2)).function
    assert Op.CALL not in out.ops_used(), f"{fn.name}: a call survived -O2"
    return out


def inputs(name: str, fn: Function) -> dict[str, Array]:
    """keracheck's generated inputs; the payload case gets NaN payloads of both signs, quiet
    and signalling, among them."""
    ins = generate(fn, ROWS, seed=sum(map(ord, name)))
    if name == "payloads":
        x = ins["x"].view(np.uint32).copy()
        x[::3, 0] = 0x7FC12345
        x[1::3, 1] = 0xFF812345
        x[2::3, 2] = 0x7F800001
        ins["x"] = x.view(np.float32)
    return ins


Case = tuple[str, Function, dict[str, Array], list[Array]]


@pytest.fixture(scope="module")
def cases() -> list[Case]:
    """Each graph at -O0 and inlined, on the same inputs, with the interpreter's outputs at
    -O0 (the oracle for both)."""
    out = []
    for name, make in ALL.items():
        fn = make()
        ins = inputs(name, fn)
        want = interpret(fn, ins)
        out += [(name, fn, ins, want), (f"{name}@O2", inlined(fn), ins, want)]
    return out


def bits(a: Array) -> Array:
    return a.view(np.uint8) if a.dtype == np.bool_ else a.view(f"<u{a.dtype.itemsize}")


@pytest.mark.toolchain
@pytest.mark.parametrize("target", TARGETS)
def test_calls_agree_with_the_interpreter_at_O0_and_O2(target: str, cases: list[Case]) -> None:
    """One batch per target: every case against the interpreter, then each graph's -O0 run
    (the back end's calls) against its -O2 run (inlined), bit for bit."""
    got = usable(target).run_many([(fn, ins) for _, fn, ins, _ in cases])
    bad = [
        m
        for (name, fn, ins, want), g in zip(cases, got, strict=True)
        for m in mismatches(name, fn, ins, g, want)
    ]
    for (name, *_), o0, o2 in zip(cases[::2], got[::2], got[1::2], strict=True):
        if isinstance(o0, Exception) or isinstance(o2, Exception):
            continue  # reported above
        for k, (a, b) in enumerate(zip(o0, o2, strict=True)):
            if not np.array_equal(bits(a), bits(b)):
                bad.append(f"{name} result {k}: -O0 and -O2 differ on {target}")
    assert not bad, f"{len(bad)} mismatches on {target}:\n" + "\n".join(bad[:40])


def test_cases_exercise_calls_in_every_position() -> None:
    """The cases hold calls at top level, in loop bodies, in callees (nested calls) and
    callees with loops; every op they use is one the back end lowers."""
    fns = [make() for make in ALL.values()]
    assert all(Op.CALL in fn.ops_used() for fn in fns)
    assert set().union(*(fn.ops_used() for fn in fns)) <= {Op(x) for x in c.SUPPORTED}

    def holders(fn: Function) -> set[tuple[Op, Op]]:
        """(op holding a region, op holding a region inside it)"""
        out = set()
        for region in fn.regions():
            for n in region.nodes():
                if n.op in REGION_OPS:
                    out |= {(n.op, m.op) for m in loop_body(n).nodes() if m.op in REGION_OPS}
        return out

    found = set().union(*(holders(fn) for fn in fns))
    assert {(Op.LOOP, Op.CALL), (Op.CALL, Op.CALL), (Op.CALL, Op.LOOP)} <= found


def test_payloads_really_carry_payloads(cases: list[Case]) -> None:
    """The payload case tests something only if the interpreter keeps the payloads given."""
    (want,) = [w for name, _, _, w in cases if name == "payloads"]
    assert 0x7FC12345 in want[0].view(np.uint32) and 0xFF812345 in want[0].view(np.uint32)


@pytest.mark.toolchain
@pytest.mark.parametrize("isa", list(c.ISAS))
def test_call_c_is_warning_free(isa: str, tmp_path: Path) -> None:
    gcc = {"x86_64": "gcc", "aarch64": "aarch64-linux-gnu-gcc"}.get(c.ISAS[isa].arch, "gcc")
    if shutil.which(gcc) is None:
        pytest.skip(f"{gcc} not on PATH: scripts/setup installs it")
    fns = {name: make() for name, make in ALL.items()}
    for name, text in c.emit(fns, isa=isa).files().items():
        (tmp_path / name).write_text(text)
    flags = [*c.PINNED_FLAGS, *c.ISAS[isa].flags, "-Wextra", "-Werror", "-fsyntax-only"]
    proc = subprocess.run([gcc, *flags, str(tmp_path / "kera.c")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]


# ------------------------------------------------------------------------------ code shape


def _calls(text: str) -> list[str]:
    """The callee name of each call emitted, in order."""
    return re.findall(r"/\* call \d+: (\w+)\(", text)


def test_a_call_group_lowers_its_callee_once() -> None:
    """mixed_results' callee has three results (three call nodes, one group): its code is
    emitted once, so its reduction over axis 1 appears once and no loop is made for it."""
    fn = GRAPHS["mixed_results"]()
    assert sum(n.op is Op.CALL for n in fn.nodes()) == 3
    for isa in c.ISAS:
        text = c.emit([fn], isa=isa).c
        assert _calls(text) == ["stats"]
        assert len(re.findall(r"= gt\(", text)) == 1
        assert "k_i0" not in text  # no C loop: a call is straight-line code


def test_each_call_lowers_its_callee_in_place() -> None:
    """One expansion per call (the same callee at two calls: twice, on its own tiles), calls
    of calls nested in order; no C function is made for a callee."""
    text = c.emit([GRAPHS["sum_and_product"]()], isa="scalar").c
    assert _calls(text) == ["muladd", "muladd"]
    assert "t0_4 = add(t0_2, t2)" in text and "t1_4 = add(t1_2, t0)" in text
    nested = c.emit([GRAPHS["nested_calls"]()], isa="scalar").c
    assert _calls(nested) == ["outer", "inner", "inner"]
    assert "muladd" not in re.sub(r"/\*.*?\*/", "", text)  # only in comments


def test_a_uniform_start_made_by_a_call_moves_whole_lanes() -> None:
    """Of the three windows of ``starts`` only the one at a parameter's start moves lane by
    lane: a call's result is uniform when its callee computes it from uniform values."""
    text = c.emit([EDGES["starts"]()], isa="avx2").c
    body = text[text.index("int kera_starts(") :]
    assert body.count("k_lane_move(") == 1


def golden_call() -> Function:
    """A callee with two results, one its parameter (copied), called once."""
    g = callee(
        "scaled",
        [_t(F32, 4), _t(F32)],
        lambda p: [mk("mul", [p[0], _bcast(p[1], 4)]), p[0]],
    )
    b = FunctionBuilder("scaled_pair")
    x, s = b.param("x", F32, [4]), b.param("s", F32)
    y, same = call(g, [x, s])
    return b.build(b.op("sub", y, same))


def test_golden_call(golden: Callable[[str, str], None]) -> None:
    """The whole .c of one small call at the scalar level, the prelude by reference (it is
    ``tests/golden/c/prelude.scalar.c``, pinned by tests/unit/test_c_emit.py)."""
    p = parts([golden_call()], isa="scalar", name="scaled_pair")
    assert p.prelude == (GOLDEN / "c" / "prelude.scalar.c").read_text()
    helpers = [f"/* ---- {k} */\n{t}" for k, t in p.helpers.items()]
    text = "\n".join([p.banner, "/* golden: prelude.scalar.c */", *helpers, *p.functions.values()])
    golden("c/calls/scaled_pair.scalar.c", text)
