"""Calls on the WebAssembly back end, bit for bit against the reference.

* every graph of ``tests/callgraphs.py``, the edge graphs of ``test_c_calls`` and a few of our
  own on ``wasm``, ``wasm-simd`` and ``wasm-node`` (and V8 with Liftoff only and TurboFan
  only), on inputs mixing the special values of each dtype with plain values, each graph
  twice: as built (``-O0``: the back end lowers every ``call`` itself) and inlined (``-O2``,
  ``kera.passes.optimize(fn, pipeline(2))``); both against the interpreter, and the two runs
  against each other;
* our edge graphs: a loop's index as a call's operand and as a callee's result (read through
  memory), constant operands (a splat, a table) and constant results, values of 5, 7 and 13
  elements (the SIMD tail), a reduction's result returned;
* the code shape: a call group's callee is emitted once, whatever the number of its results,
  and a result no node reads is not computed; the scalar module validates without SIMD; the
  golden WAT of one small call (``tests/golden/wasm/call_scaled_pair*.wat``).

The runner helpers are ``test_wasm_backend``'s (``_describe`` compares with ``kera.interp``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from callgraphs import GRAPHS
from test_c_calls import EDGES as C_EDGES
from test_c_calls import golden_call, inlined
from test_wasm_backend import TARGETS, Case, _backend, _describe
from test_wasm_loops import _inputs

from kera.backends.wasm import compile_functions, emit, emit_wat
from kera.dtypes import DType
from kera.interp import interpret
from kera.ir import Function, FunctionBuilder, Node, TensorType, call, callee, const, loop
from kera.ir import make_node as mk

pytestmark = pytest.mark.toolchain

F32, F64, I32, I64, U32, BOOL = DType.F32, DType.F64, DType.I32, DType.I64, DType.U32, DType.BOOL


def _t(dtype: DType, *shape: int) -> TensorType:
    return TensorType(dtype, tuple(shape))


# ----------------------------------------------------------------------------- edge graphs


def index_operand() -> Function:
    """A loop's index as a call's only operand and as its callee's result (both through
    memory), a carried value as another call's operand beside a capture."""
    ident = callee("ident", [_t(I32)], lambda p: [p[0], mk("mul", [p[0], p[0]])])
    blend = callee(
        "blend",
        [_t(F32, 5), _t(F32, 5), _t(I32)],
        lambda p: [
            mk("add", [p[0], mk("mul", [p[1], mk("broadcast", [mk("convert", [p[2]], {"to": F32})], {"shape": [5]})])])
        ],
    )  # fmt: skip
    b = FunctionBuilder("index_operand")
    x, y = b.param("x", F32, [5]), b.param("y", F32, [5])

    def body(i: Node, c: list[Node]) -> list[Node]:
        same, square = call(ident, [i])
        (nxt,) = call(blend, [c[0], y, square])
        return [nxt, same]

    s, last = loop(-3, 4, [x, b.const(0, I32)], body)
    return b.build(s, last)


def constants() -> Function:
    """A splat (a broadcast literal) and a non-uniform table as operands; a callee returning
    a splat, a table and a value made from both."""
    g = callee(
        "mix",
        [_t(I64, 7), _t(I64, 7)],
        lambda p: [
            mk("broadcast", [const(-9, I64)], {"shape": [7]}),
            const(np.arange(7, dtype=np.int64) * 3 - 10, I64, (7,)),
            mk("sub", [mk("mul", [p[0], p[1]]), p[1]]),
        ],
    )
    b = FunctionBuilder("constants")
    x = b.param("x", I64, [7])
    splat = b.op("broadcast", b.const(5, I64), shape=[7])
    table = b.const(np.arange(7, dtype=np.int64) - 3, I64, (7,))
    nine, tab, r1 = call(g, [splat, table])
    _, _, r2 = call(g, [x, table])
    return b.build(b.op("add", nine, tab), r1, r2)


def ragged() -> Function:
    """Operands and results of 13 f32, 7 f64 and 5 bool elements (a SIMD step and a tail), a
    reduction's scalar result returned."""
    g = callee(
        "rag",
        [_t(F32, 13), _t(F64, 7), _t(BOOL, 5)],
        lambda p: [
            mk("sqrt", [mk("abs", [p[0]])]),
            mk("sum", [p[1]], {"axis": 0}),
            mk("not", [p[2]]),
            mk("floor", [p[1]]),
        ],
    )
    b = FunctionBuilder("ragged")
    x, y, m = b.param("x", F32, [13]), b.param("y", F64, [7]), b.param("m", BOOL, [5])
    root, total, flipped, low = call(g, [x, y, m])
    return b.build(root, total, flipped, low)


EDGES: dict[str, Callable[[], Function]] = {
    **C_EDGES,
    **{f.__name__: f for f in (index_operand, constants, ragged)},
}
ALL = {**GRAPHS, **EDGES}


@pytest.fixture(scope="module")
def cases() -> list[Case]:
    """Each graph at -O0 then inlined (-O2), on the same inputs."""
    out: list[Case] = []
    for seed, make in enumerate(ALL.values()):
        fn = make()
        ins = _inputs(fn, seed)
        out += [(fn, ins), (inlined(fn), ins)]
    return out


def _bits(a: Any) -> Any:
    return a.view(np.uint8) if a.dtype == np.bool_ else a.view(f"<u{a.dtype.itemsize}")


def _agree(target: str, cases: list[Case], backend: Any = None) -> None:
    """Every case against the interpreter at -O0, and each -O0 run against its -O2 run."""
    got = (backend or _backend(target)).run_many(cases)
    problems = []
    for (fn, ins), o0, o2 in zip(cases[::2], got[::2], got[1::2], strict=True):
        want = interpret(fn, ins)
        for level, g in (("-O0", o0), ("-O2", o2)):
            text = f"{g}" if isinstance(g, Exception) else _describe(fn, ins, g, want)
            if text:
                problems.append(f"{level} {text}")
        if isinstance(o0, Exception) or isinstance(o2, Exception):
            continue
        for k, (a, b) in enumerate(zip(o0, o2, strict=True)):
            if not np.array_equal(_bits(a), _bits(b)):
                problems.append(f"{fn.name} result {k}: -O0 and -O2 differ on {target}")
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:20])


@pytest.mark.parametrize("target", TARGETS)
def test_calls_agree_with_the_reference_at_O0_and_O2(target: str, cases: list[Case]) -> None:
    _agree(target, cases)


@pytest.mark.parametrize(
    "flags", [("--liftoff-only",), ("--no-liftoff",)], ids=["liftoff", "turbofan"]
)
def test_both_v8_compilers(flags: tuple[str, ...], cases: list[Case]) -> None:
    from keracheck.targets.wasm import WasmNodeBackend

    _backend("wasm-node")
    _agree("wasm-node", cases, WasmNodeBackend(flags))


def test_call_modules_validate_without_simd() -> None:
    wasmtime = pytest.importorskip("wasmtime")
    cfg = wasmtime.Config()
    cfg.wasm_simd = False
    cfg.wasm_relaxed_simd = False
    wasmtime.Module.validate(wasmtime.Engine(cfg), emit([f() for f in ALL.values()]))


# ----------------------------------------------------------------------------- code shape


def _three_results(read: int) -> Function:
    """A callee with three results, each from an op of its own (sqrt, floor, ceil), of which
    the caller reads the first ``read``."""
    g = callee(
        "three",
        [_t(F32, 6)],
        lambda p: [mk("sqrt", [p[0]]), mk("floor", [p[0]]), mk("ceil", [p[0]])],
    )
    b = FunctionBuilder("three")
    x = b.param("x", F32, [6])
    return b.build(*call(g, [x])[:read])


def test_a_call_group_emits_its_callee_once() -> None:
    """Three call nodes of one group: the callee's code once (each op once), in both modules."""
    for simd, shape in ((False, "f32"), (True, "f32x4")):
        text = emit_wat(_three_results(3), simd=simd)
        for name in ("sqrt", "floor", "ceil"):
            assert text.count(f"{shape}.{name}") == 1, (simd, name)


def test_a_result_no_node_reads_is_not_computed() -> None:
    text = emit_wat(_three_results(1))
    assert text.count("f32.sqrt") == 1
    assert "f32.floor" not in text and "f32.ceil" not in text


def test_each_call_emits_its_callee() -> None:
    """The same callee at two calls on different operands: emitted at each (in place, no
    function of its own: the module holds one function per export)."""
    fn = GRAPHS["sum_and_product"]()
    program = compile_functions(fn)
    assert len(program.module.funcs) == 1
    assert emit_wat(fn).count("f32.sub") == 2 + 1  # muladd's sub twice, the caller's once


@pytest.mark.parametrize("simd", [False, True], ids=["scalar", "simd"])
def test_golden_call_wat(simd: bool, golden: Callable[[str, str], None]) -> None:
    """The emitted text of one small call; regenerate with KERA_UPDATE_GOLDEN=1."""
    text = emit_wat(golden_call(), simd=simd)
    golden(f"wasm/call_scaled_pair{'.simd' if simd else ''}.wat", text)
    wasmtime = pytest.importorskip("wasmtime")
    assert wasmtime.wat2wasm(text) == compile_functions(golden_call(), simd).wasm


def test_interpreter_sees_the_same_graphs(cases: list[Case]) -> None:
    """The -O2 forms hold no call and give the interpreter's -O0 bits (what the back end's
    runs are compared with)."""
    for (fn, ins), (opt, _) in zip(cases[::2], cases[1::2], strict=True):
        for a, b in zip(interpret(fn, ins), interpret(opt, ins), strict=True):
            assert np.array_equal(_bits(a), _bits(b)), fn.name
