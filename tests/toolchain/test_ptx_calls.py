"""The PTX back end's calls (``docs/ptx-backend.md``, "Calls"): every graph of
``tests/callgraphs.py`` and the edge cases below agree bit for bit with the reference
interpreter on ptx-emu (hardware and adversarial policies) on generated inputs (special values
included), and the -O0 graph (calls, lowered by the back end) with the -O2 graph (the ``inline``
pass's expansion, then the rest of the pipeline) on the emulator; ptxas accepts their module; a
call group's callee is emitted once per group, in place (no ``.func``, no ``call``
instruction); golden PTX of one small call.

The emulator part needs no external tool; the ptxas part is skipped when ptxas is missing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from callgraphs import GRAPHS

import kera.passes
from kera.backends.ptx import emit, emit_graph
from kera.dtypes import DType
from kera.interp import interpret
from kera.ir import Function, FunctionBuilder, Graph, Node, TensorType, call, callee, const, loop
from kera.ir import make_node as mk
from kera.ops import Op
from keracheck import inputs as inputs_mod
from keracheck.runners.ptxas import Ptxas
from keracheck.targets.ptx import PtxEmuAdversarialBackend, PtxEmuBackend

Array = np.ndarray[Any, Any]
F32, I32, BOOL = DType.F32, DType.I32, DType.BOOL


def _t(dtype: DType, *shape: int) -> TensorType:
    return TensorType(dtype, tuple(shape))


def swap_in_loop() -> Function:
    """A call in a loop body whose results are its parameters swapped (the loop's carried
    registers themselves) and a constant: the loop's commit must read both old values before
    writing either, and a constant first made inside the body is a carried value."""
    swap = callee("swap", [_t(F32, 2), _t(F32, 2)], lambda p: [p[1], p[0], const(3, I32)])
    b = FunctionBuilder("swap_in_loop")
    x, y, k = b.param("x", F32, [2]), b.param("y", F32, [2]), b.param("k", I32)
    a, c, three = loop(0, 5, [x, y, k], lambda i, v: call(swap, [v[0], v[1]]))
    return b.build(a, c, three)


def identity_results() -> Function:
    """A callee returning its parameters unchanged, its results the function's own results (a
    loaded register stored as it is; an f32 NaN input keeps its payload) and a bool."""
    ident = callee("ident", [_t(F32, 2), _t(BOOL, 2)], lambda p: [p[0], p[1]])
    b = FunctionBuilder("identity_results")
    x, m = b.param("x", F32, [2]), b.param("m", BOOL, [2])
    same, mask = call(ident, [x, m])
    return b.build(same, mask, b.op("select", mask, same, b.op("neg", same)))


def deep_regions() -> Function:
    """Loop -> call -> loop -> call: each region binds its own parameters; the inner call's
    callee reads the outer index through a parameter, never a register of another region."""
    leaf = callee(
        "leaf",
        [_t(F32, 2), _t(I32, 2)],
        lambda p: [mk("mul", [p[0], mk("convert", [p[1]], {"to": F32})])],
    )

    def mid_body(p: list[Node]) -> list[Node]:
        def inner(j: Node, c: list[Node]) -> list[Node]:
            jj = mk("broadcast", [mk("add", [j, p[1]])], {"shape": [2]})
            return [mk("add", [call(leaf, [c[0], jj])[0], p[0]])]

        return loop(1, 3, [p[0]], inner)

    mid = callee("mid", [_t(F32, 2), _t(I32)], mid_body)
    b = FunctionBuilder("deep_regions")
    x = b.param("x", F32, [2])
    (r,) = loop(-1, 3, [x], lambda i, c: call(mid, [c[0], i]))
    return b.build(r)


def golden_call() -> Function:
    """``f(a, b) = (a * b + a, b)`` on f32[2], called on (x, y) and on (y, x): two copies of
    the callee's instructions on the operands' registers, a result that is a parameter's
    register stored as it is."""
    f = callee(
        "f",
        [_t(F32, 2), _t(F32, 2)],
        lambda p: [mk("add", [mk("mul", [p[0], p[1]]), p[0]]), p[1]],
    )
    b = FunctionBuilder("call_twice")
    x, y = b.param("x", F32, [2]), b.param("y", F32, [2])
    r1, same = call(f, [x, y])
    r2, _ = call(f, [y, x])
    return b.build(b.op("sub", r1, r2), same)


EDGES: dict[str, Callable[[], Function]] = {
    f.__name__: f for f in (swap_in_loop, identity_results, deep_regions, golden_call)
}
ALL: dict[str, Callable[[], Function]] = {**GRAPHS, **EDGES}


def optimized(fn: Function) -> Function:
    """``fn`` at -O2: calls inlined (the ``inline`` pass), then the rest of the pipeline."""
    return kera.passes.optimize(fn, kera.passes.pipeline(2)).function


def bits_equal(a: Array, b: Array) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def _has_call(fn: Function) -> bool:
    return Op.CALL in fn.ops_used()


BACKENDS = [PtxEmuBackend(), PtxEmuAdversarialBackend()]


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
@pytest.mark.parametrize("name", list(ALL))
def test_ptx_emu_agrees_with_ref(name: str, backend: PtxEmuBackend) -> None:
    fn = ALL[name]()
    assert _has_call(fn)
    for seed in (0, 1):
        xs = inputs_mod.generate(fn, 64, seed)
        want = interpret(fn, xs, batch=None if fn.params else 1)
        got = backend.run(fn, xs)
        for k, (g, w) in enumerate(zip(got, want, strict=True)):
            assert bits_equal(g, w), f"{name}: result {k} differs (seed {seed})"


@pytest.mark.parametrize("name", list(ALL))
def test_calls_at_o0_match_the_inlined_o2_graph(name: str) -> None:
    """The back end's own call lowering against the inline pass's expansion, both on the
    emulator (adversarial policy: no unspecified bit may reach a result)."""
    fn = ALL[name]()
    inlined = optimized(fn)
    assert not _has_call(inlined)
    xs = inputs_mod.generate(fn, 64, 2)
    backend = PtxEmuAdversarialBackend()
    at0, at2 = backend.run(fn, xs), backend.run(inlined, xs)
    for k, (g, w) in enumerate(zip(at0, at2, strict=True)):
        assert bits_equal(g, w), f"{name}: result {k} differs between -O0 and -O2"


def test_a_call_group_is_its_callee_once_in_place() -> None:
    """sum_and_product: two calls of a two-result callee on f32[8] are two copies of its body
    (8 lanes x (mul, add, sub) each), not four (one per call node) and not one (a shared
    routine); a callee with a loop gets one loop per call; a call in a loop body is emitted
    once, inside the loop."""
    text = emit(GRAPHS["sum_and_product"]())
    assert ".func" not in text and not re.search(r"^\s*call", text, flags=re.M)
    assert text.count("mul.rn.f32") == 2 * 8 + 8  # and the caller's mul
    assert text.count("add.rn.f32") == 2 * 8
    assert text.count("sub.rn.f32") == 2 * 8 + 8  # and the caller's sub
    assert len(re.findall(r"^LOOP\d+:$", emit(GRAPHS["callee_with_loop"]()), flags=re.M)) == 2
    in_loop = emit(GRAPHS["call_in_loop"]())
    assert len(re.findall(r"^LOOP\d+:$", in_loop, flags=re.M)) == 1
    assert in_loop.count("cvt.rn.f32.s32") == 1  # the callee's convert: once, in the body


@pytest.mark.toolchain
def test_ptxas_accepts_every_call_module() -> None:
    ptxas = Ptxas()
    reason = ptxas.available()
    if reason is not None:
        pytest.skip(reason)
    module = emit_graph(Graph([make() for make in ALL.values()]))
    assert ptxas.assemble(module).cubin[:4] == b"\x7fELF"


def test_golden_ptx_call(golden: Callable[[str, str], None]) -> None:
    golden("ptx/call_twice.ptx", emit(golden_call()))
