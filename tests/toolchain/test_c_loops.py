"""Loops and dynamic indexing on the C back end, bit for bit against kera.interp.

* every graph of ``tests/loopgraphs.py`` and the edge graphs below, on every CPU target the
  host can run (``cpu:scalar``/``sse2``/``avx2``/``avx512``, ``cpu-aarch64`` and
  ``cpu-riscv64`` under qemu-user), on keracheck's own generated inputs (special values,
  ``INT32_MIN``/``INT32_MAX`` for start indices) for a row count that leaves a partial block;
* the edge graphs: one trip (the index as a result), a carried value that is a captured one, a
  loop feeding another, bool dynamic updates, three loops deep, carried values permuted each
  trip, carried tiles big enough for the arena, NaN payloads carried and moved, two loops with
  one body, extreme index ranges, rank-3 windows of 64-bit values;
* the code shape (no tool needed): a loop is one C ``for`` whatever its trip count, the
  emitted C is warning-free under -Wextra, and the golden C of one small loop
  (``tests/golden/c/loops/``; ``KERA_UPDATE_GOLDEN=1`` regenerates it).

The runner helpers are ``test_c_backend``'s (``usable``, ``mismatches``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from loopgraphs import GRAPHS
from test_c_backend import TARGETS, assert_agree, mismatches, usable

from kera.backends import c
from kera.backends.c.emit import parts
from kera.dtypes import DType
from kera.interp import interpret
from kera.ir import Function, FunctionBuilder, Node, loop, loop_body, make_node, start_vector
from keracheck.inputs import generate
from keracheck.targets.cpu import NONE_MADE, CpuTarget

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


def _starts(*scalars: Node | None) -> Node:
    """An i32[len] start vector from i32 scalars (None: 0), in the front end's form."""
    return start_vector(scalars)


def _at(x: Node, *starts: Node | None, size: list[int]) -> Node:
    return make_node("dynamic_slice", [x, _starts(*starts)], {"size": size})


# ------------------------------------------------------------------------------ edge graphs


def one_trip() -> Function:
    """trips = 1: the body runs once; the index itself is a carried result."""
    b = FunctionBuilder("one_trip")
    x, k = b.param("x", F32, [5]), b.param("k", I32)
    s, i = loop(7, 1, [x, k], lambda i, c: [b.op("mul", c[0], c[0]), i])
    return b.build(s, i)


def capture_is_carried() -> Function:
    """The same value is a carried init and a capture; results that are the capture itself, a
    constant, and one node twice."""
    b = FunctionBuilder("capture_is_carried")
    x = b.param("x", F32, [6])

    def body(i: Node, c: list[Node]) -> list[Node]:
        s = b.op("add", c[0], x)
        return [s, x, b.const(2.5, F32, [6]), s]

    return b.build(*loop(0, 5, [x, x, x, x], body))


def chained() -> Function:
    """A loop's results are the next loop's carried init and its capture."""
    b = FunctionBuilder("chained")
    x, y = b.param("x", F64, [4]), b.param("y", F64, [4])
    (a,) = loop(0, 3, [x], lambda i, c: [b.op("mul", c[0], y)])
    (z,) = loop(-2, 4, [a], lambda i, c: [b.op("sub", c[0], b.op("div", a, y))])
    return b.build(z, a)


def bool_update() -> Function:
    """A bool tensor updated by dynamic_update_slice each trip, at the index and at a start
    from a parameter; bool windows read back by dynamic_slice."""
    b = FunctionBuilder("bool_update")
    m, at = b.param("m", BOOL, [9]), b.param("at", I32)
    flags = b.param("flags", BOOL, [4])

    def body(i: Node, c: list[Node]) -> list[Node]:
        cur, got = c
        bit = b.op("not", _at(cur, i, size=[1]))
        put = b.op("dynamic_update_slice", cur, bit, _starts(i))
        put = b.op("dynamic_update_slice", put, _at(flags, i, size=[2]), _starts(at))
        return [put, b.op("xor", got, _at(put, at, size=[3]))]

    out, got = loop(-1, 11, [m, b.op("slice", m, start=[0], stop=[3])], body)
    return b.build(out, got)


def nested3() -> Function:
    """Three loops deep; each level captures the indices of the levels above it, the innermost
    reads a row at the middle index."""
    b = FunctionBuilder("nested3")
    x = b.param("x", F32, [3, 6])

    def outer(i: Node, c: list[Node]) -> list[Node]:
        def middle(j: Node, d: list[Node]) -> list[Node]:
            def inner(k: Node, e: list[Node]) -> list[Node]:
                row = b.op("reshape", _at(x, j, k, size=[1, 6]), shape=[6])
                ij = b.op("convert", b.op("add", i, b.op("mul", j, k)), to=F32)
                return [b.op("fma", e[0], b.op("broadcast", ij, shape=[6]), row)]

            return loop(0, 3, [d[0]], inner)

        return loop(1, 2, [c[0]], middle)

    row1 = b.op("reshape", b.op("slice", x, start=[1, 0], stop=[2, 6]), shape=[6])
    return b.build(*loop(0, 3, [row1], outer))


def permuted() -> Function:
    """Carried values that rotate each trip ((a, b, c) -> (c, a, b)) and one that swaps with
    nothing: a lowering that copies in place reads an overwritten value.  Odd trips."""
    b = FunctionBuilder("permuted")
    ps = [b.param(n, I64, [3]) for n in "abc"]
    return b.build(*loop(0, 7, ps, lambda i, c: [c[2], c[0], b.op("add", c[1], c[1])]))


def big_carried() -> Function:
    """Carried f64 values bigger than a local tile (the arena), updated at a parameter's start
    and read back; a temporary per trip takes arena space too."""
    b = FunctionBuilder("big_carried")
    x, at = b.param("x", F64, [3000]), b.param("at", I32)

    def body(i: Node, c: list[Node]) -> list[Node]:
        big, acc = c
        doubled = b.op("add", big, big)
        win = _at(doubled, b.op("add", at, i), size=[2])
        put = b.op("dynamic_update_slice", big, b.op("neg", win), _starts(b.op("mul", at, i)))
        return [put, b.op("add", acc, win)]

    out, acc = loop(0, 4, [x, b.op("slice", x, start=[0], stop=[2])], body)
    return b.build(b.op("slice", out, start=[0], stop=[8]), acc, b.op("sum", out, axis=0))


def payloads() -> Function:
    """NaN payloads carried unchanged and moved (a rotation) must keep their bits; a dirty
    init and dirty results come out canonical; a body observes a carried value's bits."""
    b = FunctionBuilder("payloads")
    x = b.param("x", F32, [4])

    def body(i: Node, c: list[Node]) -> list[Node]:
        keep, rot, dirty, bits = c
        turned = b.op(
            "concat",
            b.op("slice", rot, start=[1], stop=[4]),
            b.op("slice", rot, start=[0], stop=[1]),
            axis=0,
        )
        seen = b.op("xor", bits, b.op("bitcast", dirty, to=U32))
        return [keep, turned, b.op("add", dirty, keep), seen]

    zero = b.op("broadcast", b.const(0, U32), shape=[4])
    keep, rot, dirty, bits = loop(0, 5, [x, x, b.op("mul", x, x), zero], body)
    return b.build(keep, rot, dirty, bits)


def twin_bodies() -> Function:
    """Two loops with the same body (interned: the same nodes) on different inits."""
    b = FunctionBuilder("twin_bodies")
    x, y = b.param("x", F32, [3]), b.param("y", F32, [3])

    def step(i: Node, c: list[Node]) -> list[Node]:
        fi = b.op("broadcast", b.op("convert", i, to=F32), shape=[3])
        return [b.op("sub", b.op("mul", c[0], c[0]), fi)]

    (p,) = loop(0, 4, [x], step)
    (q,) = loop(0, 4, [y], step)
    return b.build(p, q)


def extreme_index() -> Function:
    """The extreme index ranges: lo = INT32_MIN and a loop ending at INT32_MAX, the index as
    data and as an (always clamped) start."""
    b = FunctionBuilder("extreme_index")
    x = b.param("x", U32, [5])

    def body(i: Node, c: list[Node]) -> list[Node]:
        got = b.op("reshape", _at(x, i, size=[1]), shape=[])
        return [b.op("add", c[0], b.op("xor", got, b.op("bitcast", i, to=U32)))]

    (lo,) = loop(-(1 << 31), 3, [b.const(0, U32)], body)
    (hi,) = loop((1 << 31) - 3, 3, [b.const(0, U32)], body)
    return b.build(lo, hi)


def windows3d() -> Function:
    """Rank-3 windows of u64 values at starts from parameters (any i32), one axis taken whole
    (its start is always 0), and an update of a window the size of the operand."""
    b = FunctionBuilder("windows3d")
    x = b.param("x", U64, [4, 3, 5])
    v = b.param("v", U64, [2, 3, 2])
    p, q = b.param("p", I32), b.param("q", I32)
    win = _at(x, p, q, p, size=[3, 3, 2])
    put = b.op("dynamic_update_slice", x, v, _starts(q, None, q))  # a constant 0 among them
    whole = b.op("dynamic_update_slice", v, b.op("xor", v, v), _starts(p, q, p))  # all of v
    return b.build(win, put, whole)


def uniform_counter() -> Function:
    """A loop of constants only (the same in every row) whose result is a start index: the
    window moves whole lane vectors; and a loop over parameters whose result is a start that
    differs between rows."""
    b = FunctionBuilder("uniform_counter")
    x, k = b.param("x", F32, [7]), b.param("k", I32)
    (u,) = loop(0, 4, [b.const(-5, I32)], lambda i, c: [b.op("add", c[0], i)])
    (r,) = loop(0, 2, [k], lambda i, c: [b.op("sub", c[0], i)])
    return b.build(_at(x, u, size=[3]), _at(x, r, size=[2]))


EDGES: dict[str, Callable[[], Function]] = {
    f.__name__: f
    for f in (
        one_trip,
        capture_is_carried,
        chained,
        bool_update,
        nested3,
        permuted,
        big_carried,
        payloads,
        twin_bodies,
        extreme_index,
        windows3d,
        uniform_counter,
    )
}
ALL = {**GRAPHS, **EDGES}


# ------------------------------------------------------------------------------ running


def _payload_inputs(fn: Function) -> dict[str, Array]:
    """Floats with NaN payloads of both signs (quiet and signalling) among plain values."""
    ins = generate(fn, ROWS, seed=3)
    x = ins["x"].view(np.uint32).copy()
    x[::3, 0] = 0x7FC12345
    x[1::3, 1] = 0xFF812345
    x[2::3, 2] = 0x7F800001
    return {"x": x.view(np.float32)}


def _inputs(name: str, fn: Function) -> dict[str, Array]:
    if name == "payloads":
        return _payload_inputs(fn)
    return generate(fn, ROWS, seed=sum(map(ord, name)))


@pytest.fixture(scope="module")
def cases() -> list[tuple[str, Function, dict[str, Array], list[Array]]]:
    out = []
    for name, make in ALL.items():
        fn = make()
        ins = _inputs(name, fn)
        out.append((name, fn, ins, interpret(fn, ins)))
    return out


@pytest.mark.toolchain
@pytest.mark.parametrize("target", TARGETS)
def test_loops_agree_with_the_interpreter(target: str, cases: list[Any]) -> None:
    assert_agree(target, cases)


def _ops(fn: Function) -> set[str]:
    """Every op of a function, loop bodies included."""
    out = set()
    for n in fn.nodes():
        out.add(n.op.value)
        if n.op.value == "loop":
            out |= _ops(loop_body(n))
    return out


def test_loop_cases_cover_the_ops_of_issue_16() -> None:
    """test_c_backend's suite covers every other op; these cases the three of loops and
    dynamic indexing, and every op can appear inside a body."""
    ops = set().union(*(_ops(make()) for make in ALL.values()))
    assert {"loop", "dynamic_slice", "dynamic_update_slice"} <= ops <= set(c.SUPPORTED)


def test_payloads_really_carry_payloads(cases: list[Any]) -> None:
    """The payload case is only a test if the interpreter keeps the payloads it is given."""
    (want,) = [w for name, _, _, w in cases if name == "payloads"]
    assert 0x7FC12345 in want[0].view(np.uint32) and 0xFF812345 in want[1].view(np.uint32)


class _Unrolled(CpuTarget):
    """The host's best level built at -O3 -funroll-loops instead of the pinned -O2: users build
    our C with their own optimisation level, and loops must still keep their order."""

    def _build(self, fns: Mapping[str, Function], made: Mapping[str, Any] = NONE_MADE) -> Path:
        src = c.emit(fns, isa=self.isa)
        flags = ["-O3", "-funroll-loops", *c.PINNED_FLAGS[1:], *c.ISAS[self.isa].flags]
        return self.gcc.build(src.files(), flags, "shared", self.timeout)


@pytest.mark.toolchain
def test_loops_keep_their_order_at_O3(cases: list[Any]) -> None:
    """No gcc level vectorises or reassociates across iterations (serial_sum's f32 sums)."""
    usable("cpu")
    got = _Unrolled().run_many([(fn, ins) for _, fn, ins, _ in cases])
    bad = [
        m
        for (name, fn, ins, want), g in zip(cases, got, strict=True)
        for m in mismatches(name, fn, ins, g, want)
    ]
    assert not bad, f"{len(bad)} mismatches at -O3:\n" + "\n".join(bad[:40])


@pytest.mark.toolchain
@pytest.mark.parametrize("isa", list(c.ISAS))
def test_loop_c_is_warning_free(isa: str, tmp_path: Path) -> None:
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


def test_a_loop_is_one_c_for_loop_never_unrolled() -> None:
    """verlet's 100 trips are one ``for`` over one copy of the body, whatever the ISA level."""
    for isa in c.ISAS:
        text = c.emit([GRAPHS["verlet"]()], isa=isa).c
        assert len(re.findall(r"for \(size_t k_i0 = 0; k_i0 < 100; k_i0\+\+\)", text)) == 1
        assert len(re.findall(r"k_neg_f32_n\(\d+, \w+, L0c0\);", text)) == 1


def test_nested_loops_are_nested_for_loops() -> None:
    text = c.emit([EDGES["nested3"]()], isa="scalar").c
    heads = re.findall(r"^( *)for \(size_t k_i(\d) = 0; k_i\d < (\d+);", text, re.M)
    assert [(int(m), int(n)) for _, m, n in heads] == [(0, 3), (1, 2), (2, 3)]
    assert len(heads[0][0]) < len(heads[1][0]) < len(heads[2][0])


def golden_loop() -> Function:
    """A running sum written element by element (uniform starts: the loop index), then a
    window at a parameter's start (per-row starts)."""
    b = FunctionBuilder("cumsum")
    x, at = b.param("x", F32, [4]), b.param("at", I32)

    def body(i: Node, c: list[Node]) -> list[Node]:
        s, out = c
        s2 = b.op("add", s, b.op("reshape", _at(x, i, size=[1]), shape=[]))
        return [s2, b.op("dynamic_update_slice", out, b.op("reshape", s2, shape=[1]), _starts(i))]

    zero = b.const(0.0, F32)
    _, out = loop(0, 4, [zero, b.op("broadcast", zero, shape=[4])], body)
    return b.build(_at(out, at, size=[2]))


def test_golden_loop(golden: Callable[[str, str], None]) -> None:
    """The whole .c of one small loop at the scalar level, the prelude by reference (it is
    ``tests/golden/c/prelude.scalar.c``, pinned by tests/unit/test_c_emit.py)."""
    p = parts([golden_loop()], isa="scalar", name="cumsum")
    assert p.prelude == (GOLDEN / "c" / "prelude.scalar.c").read_text()
    helpers = [f"/* ---- {k} */\n{t}" for k, t in p.helpers.items()]
    text = "\n".join([p.banner, "/* golden: prelude.scalar.c */", *helpers, *p.functions.values()])
    golden("c/loops/cumsum.scalar.c", text)
