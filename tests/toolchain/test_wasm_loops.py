"""Loops and dynamic indexing on the WebAssembly back end, bit for bit against the reference.

* every graph of ``tests/loopgraphs.py`` on ``wasm``, ``wasm-simd`` and ``wasm-node`` (and V8
  with Liftoff only and TurboFan only), on inputs mixing the special values of each dtype
  (``INT32_MIN``/``INT32_MAX`` for start indices) with plain finite values;
* edge cases of our own: one trip, loops nested three deep, a loop's results feeding another
  loop, bool dynamic updates, carried values longer than a SIMD step and not a multiple of it,
  reductions and the index read through memory in a body, a body returning its index, a
  capture, a constant or one value twice, the extreme index ranges;
* the code shape: a loop is one wasm ``loop`` whatever its trip count (never unrolled), the
  scalar module validates without SIMD, and the golden WAT of one small loop.

The runner helpers are ``test_wasm_backend``'s (``_check`` compares with ``kera.interp``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from loopgraphs import GRAPHS
from test_wasm_backend import TARGETS, Array, Case, _backend, _check, _random_specials

from kera.backends.wasm import compile_functions, emit, emit_wat
from kera.dtypes import DType
from kera.interp import interpret
from kera.ir import Function, FunctionBuilder, Node, loop, loop_body, start_vector
from kera.ops import Op

pytestmark = pytest.mark.toolchain

F32, F64, I32, I64, U32, BOOL = DType.F32, DType.F64, DType.I32, DType.I64, DType.U32, DType.BOOL


def _inputs(fn: Function, seed: int, n: int = 48) -> dict[str, Array]:
    """Half the cases special values of each dtype (NaN payloads, infinities, integer
    extremes), half plain finite values of spread magnitudes: order-sensitive sums show."""
    rng = np.random.default_rng(seed)
    out: dict[str, Array] = {}
    for p in fn.params:
        dt, shape = p.dtype, p.shape
        special = _random_specials(rng, dt, (n // 2, *shape))
        if dt.is_float:
            plain = rng.standard_normal((n - n // 2, *shape)) * 10.0 ** rng.integers(-3, 4, shape)
            plain = plain.astype(dt.np)
        else:
            plain = _random_specials(rng, dt, (n - n // 2, *shape))
        out[str(p.attr("name"))] = np.concatenate([special, plain])
    return out


def _cases(fns: list[Function]) -> list[Case]:
    return [(fn, _inputs(fn, seed)) for seed, fn in enumerate(fns)]


# ----------------------------------------------------------------------------- edge graphs


def _starts(*scalars: Node) -> Node:
    return start_vector(list(scalars))


def one_trip() -> Function:
    """trips = 1: the body runs once; its index is a carried result (read through memory)."""
    b = FunctionBuilder("one_trip")
    x = b.param("x", F32, [5])
    k = b.param("k", I32)
    s, i = loop(7, 1, [x, k], lambda i, c: [b.op("mul", c[0], c[0]), i])
    return b.build(s, i)


def nested3() -> Function:
    """Three loops deep; each level captures the indices of the levels above it and reads a
    row at the middle index."""
    b = FunctionBuilder("nested3")
    x = b.param("x", F32, [3, 6])
    m = b.param("m", F32, [6])

    def level1(i: Node, c: list[Node]) -> list[Node]:
        fi = b.op("broadcast", b.op("convert", i, to=F32), shape=[6])

        def level2(j: Node, d: list[Node]) -> list[Node]:
            row = b.op("dynamic_slice", x, _starts(j, b.const(0, I32)), size=[1, 6])
            r = b.op("reshape", row, shape=[6])

            def level3(k: Node, e: list[Node]) -> list[Node]:
                fk = b.op("broadcast", b.op("convert", b.op("sub", k, i), to=F32), shape=[6])
                return [b.op("add", b.op("mul", e[0], m), b.op("add", fk, b.op("mul", r, fi)))]

            return list(loop(-1, 3, [d[0]], level3))

        return list(loop(0, 4, [b.op("add", c[0], fi)], level2))

    return b.build(*loop(2, 3, [m], level1))


def chained() -> Function:
    """A loop's two results feed a second loop: one as its initial value, one captured."""
    b = FunctionBuilder("chained")
    x = b.param("x", F64, [7])
    y = b.param("y", F64, [7])
    a, c = loop(0, 5, [x, y], lambda i, s: [b.op("add", s[0], s[1]), b.op("mul", s[1], s[0])])
    (r,) = loop(0, 4, [a], lambda i, s: [b.op("sub", b.op("mul", s[0], c), c)])
    return b.build(r, a)


def bool_update() -> Function:
    """A carried bool[11] updated by dynamic_update_slice at data-dependent starts, and a bool
    dynamic_slice read back from it each trip."""
    b = FunctionBuilder("bool_update")
    m = b.param("m", BOOL, [11])
    at = b.param("at", I32, [9])
    pat = b.param("pat", BOOL, [3])

    def body(i: Node, c: list[Node]) -> list[Node]:
        mask, seen = c
        one = b.op("dynamic_slice", at, _starts(i), size=[1])
        where = b.op("reshape", one, shape=[])
        got = b.op("dynamic_slice", mask, _starts(where), size=[3])
        flipped = b.op("xor", got, pat)
        return [b.op("dynamic_update_slice", mask, flipped, _starts(where)), b.op("or", seen, got)]

    mask, seen = loop(0, 9, [m, b.op("slice", m, start=[0], stop=[3])], body)
    return b.build(mask, seen)


def ragged() -> Function:
    """Carried values longer than one SIMD step and not a multiple of it (f32[13], f64[7],
    i64[5], bool[6]) updated from each other's previous values."""
    b = FunctionBuilder("ragged")
    a = b.param("a", F32, [13])
    d = b.param("d", F64, [7])
    q = b.param("q", I64, [5])
    f = b.param("f", BOOL, [6])

    def body(i: Node, c: list[Node]) -> list[Node]:
        x, y, z, w = c
        head = b.op("convert", b.op("slice", x, start=[0], stop=[7]), to=F64)
        na = b.op("sub", b.op("mul", x, b.const(1.5, F32, [13])), b.op("neg", x))
        ny = b.op("fma", y, head, b.op("sqrt", b.op("abs", y)))
        tail = b.op("convert", b.op("slice", y, start=[0], stop=[5]), to=I64)
        nz = b.op("xor", b.op("shl", z, b.const(3, I64, [5])), tail)
        nw = b.op(
            "ne", w, b.op("lt", b.op("slice", x, start=[0], stop=[6]), b.const(0.0, F32, [6]))
        )
        return [na, ny, nz, nw]

    return b.build(*loop(0, 6, [a, d, q, f], body))


def body_shapes() -> Function:
    """A body returning a capture, a constant, one value twice and a reduction's result; a
    body reading its index through memory (broadcast) and by value (convert); siblings of one
    loop used apart."""
    b = FunctionBuilder("body_shapes")
    x = b.param("x", I32, [4, 3])
    cap = b.op("mul", b.param("y", I32, [3]), b.const(3, I32, [3]))

    def body(i: Node, c: list[Node]) -> list[Node]:
        acc, _, _, _, _ = c
        spread = b.op("broadcast", i, shape=[3])
        total = b.op("sum", b.op("add", x, b.op("broadcast", acc, shape=[4, 3])), axis=0)
        nxt = b.op("add", total, b.op("mul", spread, b.op("broadcast", i, shape=[3])))
        return [nxt, cap, b.const(-5, I32, [3]), nxt, b.op("convert", i, to=F32)]

    zero = b.const(0, I32, [3])
    acc, kept, five, twice, fi = loop(-2, 5, [zero, zero, zero, zero, b.const(0.0, F32)], body)
    return b.build(twice, kept, five, fi, acc)


def index_extremes() -> Function:
    """The index at INT32_MIN and up to INT32_MAX (the increment after the last trip wraps)."""
    b = FunctionBuilder("index_extremes")
    x = b.param("x", I64, [2])
    (lo,) = loop(-(2**31), 3, [x], lambda i, c: [b.op("add", c[0], b.op("broadcast",
                 b.op("convert", i, to=I64), shape=[2]))])  # fmt: skip
    (hi,) = loop(2**31 - 2, 2, [lo], lambda i, c: [b.op("sub", c[0], b.op("broadcast",
                 b.op("convert", i, to=I64), shape=[2]))])  # fmt: skip
    return b.build(lo, hi)


def dynamic_3d() -> Function:
    """3-D windows: an axis the window spans (start always 0), a size-1 axis, a constant start
    beside parameter starts, and an update of the whole operand."""
    b = FunctionBuilder("dynamic_3d")
    x = b.param("x", U32, [3, 4, 5])
    v = b.param("v", U32, [3, 1, 2])
    r, c = b.param("r", I32), b.param("c", I32)
    win = b.op("dynamic_slice", x, _starts(r, b.const(-9, I32), c), size=[3, 2, 4])
    upd = b.op("dynamic_update_slice", x, v, _starts(c, r, r))
    whole = b.op("dynamic_update_slice", v, v, _starts(r, c, c))
    return b.build(win, upd, whole)


def shared_body() -> Function:
    """Two loops with the same (interned) body on different initial values."""
    b = FunctionBuilder("shared_body")
    x = b.param("x", F32, [5])
    y = b.param("y", F32, [5])

    def body(i: Node, c: list[Node]) -> list[Node]:
        return [b.op("add", b.op("mul", c[0], c[0]), b.const(0.25, F32, [5]))]

    (p,) = loop(0, 3, [x], body)
    (q,) = loop(0, 3, [y], body)
    return b.build(p, q)


def swap_pair() -> Function:
    """Carried values returned in swapped places (one copied as is) and a Fibonacci pair:
    every next value comes from the previous iteration, none from this one's writes."""
    b = FunctionBuilder("swap_pair")
    a = b.param("a", U32, [6])
    c = b.param("c", U32, [6])
    p, q = loop(0, 5, [a, c], lambda i, s: [s[1], s[0]])
    f, g = loop(0, 9, [a, c], lambda i, s: [s[1], b.op("add", s[0], s[1])])
    return b.build(p, q, f, g)


EDGES: dict[str, Callable[[], Function]] = {
    f.__name__: f
    for f in (
        one_trip,
        nested3,
        chained,
        bool_update,
        ragged,
        body_shapes,
        index_extremes,
        dynamic_3d,
        shared_body,
        swap_pair,
    )
}


@pytest.fixture(scope="module")
def loop_cases() -> list[Case]:
    return _cases([f() for f in GRAPHS.values()])


@pytest.fixture(scope="module")
def edge_cases() -> list[Case]:
    return _cases([f() for f in EDGES.values()])


@pytest.mark.parametrize("target", TARGETS)
def test_loopgraphs_agree_with_the_reference(target: str, loop_cases: list[Case]) -> None:
    _check(target, loop_cases)


@pytest.mark.parametrize("target", TARGETS)
def test_edge_graphs_agree_with_the_reference(target: str, edge_cases: list[Case]) -> None:
    _check(target, edge_cases)


@pytest.mark.parametrize(
    "flags", [("--liftoff-only",), ("--no-liftoff",)], ids=["liftoff", "turbofan"]
)
def test_both_v8_compilers(
    flags: tuple[str, ...], loop_cases: list[Case], edge_cases: list[Case]
) -> None:
    from keracheck.targets.wasm import WasmNodeBackend

    _backend("wasm-node")
    _check("wasm-node", loop_cases + edge_cases, WasmNodeBackend(flags))


def test_inputs_make_accumulation_order_observable(loop_cases: list[Case]) -> None:
    """The f32 sums of serial_sum differ from a pairwise (numpy) sum on some case, so a lowering
    that vectorised or reassociated across iterations would be caught."""
    fn, inputs = next(c for c in loop_cases if c[0].name == "serial_sum")
    want = interpret(fn, inputs)[0]
    x = inputs["x"]
    finite = np.isfinite(x).all(axis=1)
    with np.errstate(over="ignore", invalid="ignore"):
        pairwise = np.sum(x[finite], axis=1, dtype=np.float32)
    assert finite.any()
    assert (want[finite].view(np.uint32) != pairwise.view(np.uint32)).any()


def test_cases_cover_the_new_ops(loop_cases: list[Case], edge_cases: list[Case]) -> None:
    """Loops, dynamic slices and updates appear here, bodies included (test_wasm_backend
    covers every other op)."""

    def ops(fn: Function) -> set[Op]:
        found = {n.op for n in fn.nodes()}
        for n in fn.nodes():
            if n.op is Op.LOOP:
                found |= ops(loop_body(n))
        return found

    used = set().union(*(ops(fn) for fn, _ in loop_cases + edge_cases))
    assert used >= {Op.LOOP, Op.DYNAMIC_SLICE, Op.DYNAMIC_UPDATE_SLICE}
    nested = [fn for fn, _ in edge_cases if fn.depth >= 3]
    assert nested, "a case nests loops three deep"


def test_loops_are_not_unrolled() -> None:
    """The module of a loop does not grow with its trip count: one wasm loop per loop."""

    def acc(trips: int) -> Function:
        b = FunctionBuilder("acc")
        x = b.param("x", F32, [4])
        (s,) = loop(0, trips, [x], lambda i, c: [b.op("add", c[0], x)])
        return b.build(s)

    for simd in (False, True):
        small, large = emit(acc(2), simd), emit(acc(1 << 20), simd)
        assert abs(len(large) - len(small)) <= 4  # the trip count's LEB128 only
    text = emit_wat(acc(1000))
    assert "i32.const 1000" in text and "br_if 0" in text


def test_loop_modules_validate_without_simd() -> None:
    wasmtime = pytest.importorskip("wasmtime")
    fns = [f() for f in (*GRAPHS.values(), *EDGES.values())]
    cfg = wasmtime.Config()
    cfg.wasm_simd = False
    cfg.wasm_relaxed_simd = False
    wasmtime.Module.validate(wasmtime.Engine(cfg), emit(fns))


def golden_loop() -> Function:
    """``for i in 0..3 with (s = x) { s * a + f32(i) }`` over f32[4]."""
    b = FunctionBuilder("loop_axpy")
    x, a = b.param("x", F32, [4]), b.param("a", F32, [4])

    def body(i: Node, c: list[Node]) -> list[Node]:
        fi = b.op("broadcast", b.op("convert", i, to=F32), shape=[4])
        return [b.op("add", b.op("mul", c[0], a), fi)]

    return b.build(*loop(0, 3, [x], body))


@pytest.mark.parametrize("simd", [False, True], ids=["scalar", "simd"])
def test_golden_loop_wat(simd: bool, golden: Callable[[str, str], None]) -> None:
    """The emitted text of one small loop; regenerate with KERA_UPDATE_GOLDEN=1."""
    text = emit_wat(golden_loop(), simd=simd)
    golden(f"wasm/loop_axpy{'.simd' if simd else ''}.wat", text)
    wasmtime = pytest.importorskip("wasmtime")
    assert wasmtime.wat2wasm(text) == compile_functions(golden_loop(), simd).wasm
