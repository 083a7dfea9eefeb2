"""The PTX back end's loops and dynamic indexing: every graph of ``tests/loopgraphs.py`` and the
edge cases below agree bit for bit with the reference interpreter on ptx-emu (hardware and
adversarial policies) on generated inputs (i32 parameters include INT32_MIN/MAX, so clamped
starts are exercised at both ends); ptxas accepts their module; a loop is a real loop (its
body is emitted once, whatever the trip count); golden PTX of one small loop.

The emulator part needs no external tool; the ptxas part is skipped when ptxas is missing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from loopgraphs import GRAPHS

from kera.backends.ptx import emit, emit_graph
from kera.dtypes import DType
from kera.interp import interpret
from kera.ir import Function, FunctionBuilder, Graph, Node, loop, start_vector
from keracheck import inputs as inputs_mod
from keracheck.runners.ptxas import Ptxas
from keracheck.targets.ptx import PtxEmuAdversarialBackend, PtxEmuBackend

Array = np.ndarray[Any, Any]
I32, F32, BOOL = DType.I32, DType.F32, DType.BOOL


def _starts(*scalars: Node) -> Node:
    return start_vector(list(scalars))


def one_trip_at_int32_max() -> Function:
    """trips = 1 with lo = INT32_MAX (the index's last value is the largest i32), and
    lo = INT32_MIN over three trips: the index never overflows."""
    b = FunctionBuilder("one_trip_at_int32_max")
    x = b.param("x", I32, [2])

    def add_index(i: Node, c: list[Node]) -> list[Node]:
        return [b.op("add", c[0], b.op("broadcast", i, shape=[2]))]

    (top,) = loop((1 << 31) - 1, 1, [x], add_index)
    (bottom,) = loop(-(1 << 31), 3, [x], add_index)
    return b.build(top, bottom)


def nested3() -> Function:
    """Three loops deep; the innermost uses every index and the middle carried value."""
    b = FunctionBuilder("nested3")
    x = b.param("x", F32, [3])

    def f(i: Node) -> Node:
        return b.op("broadcast", b.op("convert", i, to=F32), shape=[3])

    def outer(i: Node, c: list[Node]) -> list[Node]:
        def middle(j: Node, d: list[Node]) -> list[Node]:
            def inner(k: Node, e: list[Node]) -> list[Node]:
                t = b.op("mul", e[0], b.op("add", f(i), f(k)))
                return [b.op("sub", t, b.op("mul", d[0], f(j)))]

            return list(loop(0, 3, [b.op("add", d[0], x)], inner))

        return list(loop(-1, 2, [c[0]], middle))

    return b.build(*loop(1, 3, [x], outer))


def bool_update() -> Function:
    """A bool mask updated by dynamic_update_slice in a loop at indices running off both
    ends (clamped), and a bool read back by dynamic_slice."""
    b = FunctionBuilder("bool_update")
    m = b.param("m", BOOL, [8])

    def body(i: Node, c: list[Node]) -> list[Node]:
        window = b.op("dynamic_slice", c[0], _starts(i), size=[2])
        flipped = b.op("not", window)
        nm = b.op("dynamic_update_slice", c[0], flipped, _starts(i))
        first = b.op("reshape", b.op("dynamic_slice", nm, _starts(i), size=[1]), shape=[])
        return [nm, b.op("xor", c[1], first)]

    mask, parity = loop(-3, 14, [m, b.const(False, BOOL)], body)
    return b.build(mask, parity)


def permuted_carries() -> Function:
    """Next values that are other carried values (a swap and a rotation), a carried value
    kept, the index, a capture and a constant: the double buffering must read every old value
    before writing any."""
    b = FunctionBuilder("permuted_carries")
    x, y, z = b.param("x", I32), b.param("y", I32), b.param("z", I32)
    w = b.param("w", DType.U64, [2])
    cap = b.op("mul", x, y)

    def body(i: Node, c: list[Node]) -> list[Node]:
        a, bb, cc, d = c[:4]
        return [bb, cc, a, d, i, cap, b.const(7, I32)]

    outs = loop(0, 5, [x, y, z, w, z, z, x], body)
    return b.build(*outs)


def rotate_with_work() -> Function:
    """(a, b, c) -> (b + 1, c, a) for 4 trips, f64 and bool carried alongside."""
    b = FunctionBuilder("rotate_with_work")
    a, bb, c = b.param("a", DType.I64), b.param("b", DType.I64), b.param("c", DType.I64)
    p = b.param("p", BOOL)
    one = b.const(1, DType.I64)

    def body(i: Node, v: list[Node]) -> list[Node]:
        return [b.op("add", v[1], one), v[2], v[0], b.op("not", v[3]), b.const(True, BOOL)]

    return b.build(*loop(0, 4, [a, bb, c, p, p], body))


def siblings_apart() -> Function:
    """One loop group whose carried values are used in different places (one emitted loop),
    and a second loop with the same body on other inits (another group)."""
    b = FunctionBuilder("siblings_apart")
    x, y = b.param("x", F32, [2]), b.param("y", F32, [2])

    def body(i: Node, c: list[Node]) -> list[Node]:
        return [b.op("add", c[0], c[1]), b.op("mul", c[1], c[1])]

    s, t = loop(0, 6, [x, y], body)
    u, _ = loop(0, 6, [y, x], body)
    return b.build(b.op("sub", t, s), u, b.op("neg", t))


def dynamic_3d() -> Function:
    """3-D dynamic slice and update with a full-size axis (start clamps to 0 whatever it is),
    i64/u32/f64 values, starts straight from i32 parameters."""
    b = FunctionBuilder("dynamic_3d")
    x = b.param("x", DType.F64, [3, 4, 5])
    v = b.param("v", DType.F64, [3, 2, 4])
    u = b.param("u", DType.U32, [5])
    r, s, t = b.param("r", I32), b.param("s", I32), b.param("t", I32)
    win = b.op("dynamic_slice", x, _starts(r, s, t), size=[2, 3, 5])
    upd = b.op("dynamic_update_slice", x, v, _starts(t, r, s))
    whole = b.op("dynamic_slice", u, _starts(r), size=[5])
    one = b.op("dynamic_update_slice", u, b.op("slice", u, start=[4], stop=[5]), _starts(s))
    return b.build(win, upd, whole, one)


def dynamic_in_nested() -> Function:
    """A dynamic slice inside an inner loop at the outer index plus the inner index."""
    b = FunctionBuilder("dynamic_in_nested")
    x = b.param("x", DType.I32, [10])

    def outer(i: Node, c: list[Node]) -> list[Node]:
        def inner(j: Node, d: list[Node]) -> list[Node]:
            at = b.op("add", i, j)
            got = b.op("reshape", b.op("dynamic_slice", x, _starts(at), size=[1]), shape=[])
            return [b.op("add", b.op("mul", d[0], b.const(3, I32)), got)]

        return list(loop(0, 4, [c[0]], inner))

    return b.build(*loop(-2, 9, [b.const(0, I32)], outer))


EDGES: dict[str, Callable[[], Function]] = {
    f.__name__: f
    for f in (
        one_trip_at_int32_max,
        nested3,
        bool_update,
        permuted_carries,
        rotate_with_work,
        siblings_apart,
        dynamic_3d,
        dynamic_in_nested,
    )
}
ALL: dict[str, Callable[[], Function]] = {**GRAPHS, **EDGES}


def bits_equal(a: Array, b: Array) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("backend", [PtxEmuBackend(), PtxEmuAdversarialBackend()], ids=str)
@pytest.mark.parametrize("name", list(ALL))
def test_ptx_emu_agrees_with_ref(name: str, backend: PtxEmuBackend) -> None:
    fn = ALL[name]()
    for seed in (0, 1):
        xs = inputs_mod.generate(fn, 64, seed)
        want = interpret(fn, xs, batch=None if fn.params else 1)
        got = backend.run(fn, xs)
        for k, (g, w) in enumerate(zip(got, want, strict=True)):
            assert bits_equal(g, w), f"{name}: result {k} differs (seed {seed})"


def _loops(text: str) -> int:
    return len(re.findall(r"^LOOP\d+:$", text, flags=re.M))


@pytest.mark.parametrize("trips", [1, 2, 1000])
def test_a_loop_is_a_loop_not_an_unrolled_body(trips: int) -> None:
    b = FunctionBuilder("count")
    x = b.param("x", F32, [4])
    (out,) = loop(0, trips, [x], lambda i, c: [b.op("mul", c[0], c[0])])
    text = emit(b.build(out))
    assert _loops(text) == 1
    assert text.count("mul.rn.f32") == 4
    assert re.search(rf"setp\.lt\.u32 %p\d+, %r\d+, {trips};\n\t@%p\d+ bra LOOP0;", text)


def test_sibling_nodes_share_one_loop_and_nesting_nests() -> None:
    assert _loops(emit(siblings_apart())) == 2
    assert _loops(emit(nested3())) == 3
    assert _loops(emit(GRAPHS["verlet"]())) == 1


@pytest.mark.toolchain
def test_ptxas_accepts_every_loop_module() -> None:
    ptxas = Ptxas()
    reason = ptxas.available()
    if reason is not None:
        pytest.skip(reason)
    module = emit_graph(Graph([make() for make in ALL.values()]))
    assert ptxas.assemble(module).cubin[:4] == b"\x7fELF"


def test_golden_ptx_loop(golden: Callable[[str, str], None]) -> None:
    """A running sum with a dynamic read: the loop head, index, body, double-buffered commit
    and back edge, and a mux tree over a clamped start."""
    b = FunctionBuilder("loop_sum")
    x = b.param("x", F32, [3])

    def body(i: Node, c: list[Node]) -> list[Node]:
        xi = b.op("reshape", b.op("dynamic_slice", x, _starts(i), size=[1]), shape=[])
        return [b.op("add", c[0], xi), c[0]]

    zero = b.const(0.0, F32)
    s, prev = loop(-1, 4, [zero, zero], body)
    golden("ptx/loop_sum.ptx", emit(b.build(s, prev)))
