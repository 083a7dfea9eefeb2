"""The WebAssembly back end against the reference interpreter, bit for bit, on all three targets.

* every elementwise contract op x dtype (and every convert/bitcast pair) on all combinations
  of special values (signed zeros, subnormals, extremes, infinities, NaNs with payloads and
  both signs, integer MIN/MAX/-1, shift amounts around the width, conversion boundaries);
* reductions, dot, matmul and data movement over shapes that hit padding, the SIMD tail and
  length 1; multi-node graphs (groups, reshape views, constants, repeated results);
* module validation, NaN-canonicalisation off in the engine, golden WAT.

One module per target run holds every function (``run_many``), so each target is started once.
"""

from __future__ import annotations

import importlib
import itertools
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from kera.backends.wasm import compile_functions, emit, emit_wat
from kera.backends.wasm.encode import (
    Export,
    ExportKind,
    Func,
    FuncType,
    Module,
    ValType,
    encode,
    f32c,
    ins,
    op,
)
from kera.dtypes import DType
from kera.interp import interpret
from kera.ir import Function, FunctionBuilder
from kera.ops import BINARY, DYNAMIC, REGION_OPS, UNARY, Op, TypeRuleError
from keracheck.runners.wasmtime_run import WasmtimeRunner
from keracheck.targets.wasm import WasmBackend, WasmNodeBackend, WasmSimdBackend

pytestmark = pytest.mark.toolchain

Array = np.ndarray[Any, Any]
Case = tuple[Function, dict[str, Array]]
TARGETS = {"wasm": WasmBackend, "wasm-simd": WasmSimdBackend, "wasm-node": WasmNodeBackend}
DTYPES = list(DType)
NUMERIC = [DType.F32, DType.F64, DType.I32, DType.I64, DType.U32, DType.U64]


def specials(dt: DType) -> Array:
    """Edge values of dt as an array of dt (NaNs by bit pattern)."""
    if dt is DType.BOOL:
        return np.array([False, True])
    if dt.is_float:
        fi = np.finfo(dt.np)
        vals = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 3.7, -3.7, np.inf, -np.inf,
                2.0**31, -(2.0**31), 2.0**31 - 128, 2.0**32, 2.0**63, -(2.0**63), 2.0**64, 1e10,
                -1e10, 4294967295.0, float(fi.tiny), -float(fi.tiny), float(fi.max),
                -float(fi.max), float(fi.smallest_subnormal), -float(fi.smallest_subnormal)]  # fmt: skip
        nans = (
            [0x7FC00000, 0xFFC00000, 0x7FA00001, 0x7FC12345]
            if dt.bits == 32
            else [0x7FF8000000000000, 0xFFF8000000000000, 0x7FF4000000000001, 0x7FF8000000012345]
        )
        with np.errstate(over="ignore"):
            floats = np.array(vals, dtype=dt.np)
        return np.concatenate([floats, np.array(nans, dtype=dt.uint).view(dt.np)])
    ints = [0, 1, -1, 2, -2, 7, 31, 32, 33, 63, 64, 65, dt.min, dt.max, dt.min + 1, dt.max - 1,
            12345, -98765]  # fmt: skip
    return np.array([v & ((1 << dt.bits) - 1) for v in ints], dtype=dt.uint).view(dt.np)


def grid(dts: list[DType]) -> list[Array]:
    """Every combination of the special values of each operand's dtype."""
    sp = [specials(dt) for dt in dts]
    idx = np.array(list(itertools.product(*(range(len(s)) for s in sp))))
    return [s[idx[:, k]] for k, s in enumerate(sp)]


def elementwise_cases() -> list[Case]:
    out: list[Case] = []
    for name in sorted(UNARY | BINARY):
        for dt in DTYPES:
            if name == "rem" and dt.is_float:
                continue  # no float rem in the contract (the interpreter rejects it too)
            arity = 1 if name in UNARY else 2
            b = FunctionBuilder(f"{name}_{dt}")
            ps = [b.param(f"x{i}", dt) for i in range(arity)]
            try:
                fn = b.build(b.op(name, *ps))
            except TypeRuleError:
                continue
            out.append(
                (fn, dict(zip([f"x{i}" for i in range(arity)], grid([dt] * arity), strict=True)))
            )
    for src, dst, cast in itertools.product(DTYPES, DTYPES, ("convert", "bitcast")):
        b = FunctionBuilder(f"{cast}_{src}_{dst}")
        x = b.param("x", src)
        try:
            fn = b.build(b.op(cast, x, to=dst))
        except TypeRuleError:
            continue
        out.append((fn, {"x": specials(src)}))
    for dt in (DType.F32, DType.F64):
        b = FunctionBuilder(f"fma_{dt}")
        ps = [b.param(f"x{i}", dt) for i in range(3)]
        out.append(
            (b.build(b.op("fma", *ps)), dict(zip(["x0", "x1", "x2"], grid([dt] * 3), strict=True)))
        )
    for dt in DTYPES:
        b = FunctionBuilder(f"select_{dt}")
        c, x, y = b.param("c", DType.BOOL), b.param("x", dt), b.param("y", dt)
        out.append(
            (
                b.build(b.op("select", c, x, y)),
                dict(zip("cxy", grid([DType.BOOL, dt, dt]), strict=True)),
            )
        )
    return out


def _random_specials(rng: np.random.Generator, dt: DType, shape: tuple[int, ...]) -> Array:
    sp = specials(dt)
    mixed = np.concatenate([sp, rng.standard_normal(len(sp)).astype(dt.np)]) if dt.is_float else sp
    return mixed[rng.integers(0, len(mixed), shape)]


def structural_cases() -> list[Case]:
    rng = np.random.default_rng(6)
    out: list[Case] = []

    def add(name: str, params: list[tuple[str, DType, tuple[int, ...]]], build: Any) -> None:
        b = FunctionBuilder(name)
        ps = [b.param(p, dt, shape) for p, dt, shape in params]
        fn = b.build(*build(b, *ps))
        n = int(rng.integers(5, 40))
        out.append((fn, {p: _random_specials(rng, dt, (n, *shape)) for p, dt, shape in params}))

    for dt, rop in itertools.product(NUMERIC, ("sum", "prod", "amin", "amax")):
        for shape, axis in [((1,), 0), ((3,), 0), ((8,), 0), ((37,), 0), ((2, 3), 0), ((4, 9), 1),
                            ((3, 1, 4), 2), ((3, 5, 2), 1)]:  # fmt: skip
            add(f"{rop}_{dt}_{len(shape)}_{axis}_{shape[axis]}", [("x", dt, shape)],
                lambda b, x, rop=rop, axis=axis: [b.op(rop, x, axis=axis)])  # fmt: skip
    for dt in NUMERIC:
        for k in (1, 3, 8, 13):
            add(
                f"dot_{dt}_{k}",
                [("a", dt, (k,)), ("b", dt, (k,))],
                lambda b, x, y: [b.op("dot", x, y)],
            )
        for m, k, n in ((1, 1, 1), (2, 3, 4), (3, 8, 2), (5, 6, 7)):
            add(f"matmul_{dt}_{m}{k}{n}", [("a", dt, (m, k)), ("b", dt, (k, n))],
                lambda b, x, y: [b.op("matmul", x, y)])  # fmt: skip
    for dt in (DType.F32, DType.F64, DType.BOOL, DType.U64):
        add(f"bcast_{dt}", [("s", dt, ()), ("v", dt, (3,)), ("c", dt, (2, 1))],
            lambda b, s, v, c: [b.op("broadcast", s, shape=[4]), b.op("broadcast", v, shape=[2, 3]),
                                b.op("broadcast", c, shape=[2, 5]), b.op("broadcast", s, shape=[])])  # fmt: skip
        add(f"transpose_{dt}", [("x", dt, (2, 3)), ("y", dt, (2, 3, 4))],
            lambda b, x, y: [b.op("transpose", x, perm=[1, 0]), b.op("transpose", y, perm=[2, 0, 1])])  # fmt: skip
        add(f"slice_{dt}", [("x", dt, (5,)), ("y", dt, (3, 4))],
            lambda b, x, y: [b.op("slice", x, start=[1], stop=[4]),
                             b.op("slice", y, start=[1, 1], stop=[3, 3])])  # fmt: skip
        add(f"concat_{dt}", [("x", dt, (2,)), ("y", dt, (3,)), ("p", dt, (2, 3)), ("q", dt, (2, 1))],
            lambda b, x, y, p, q: [b.op("concat", x, y, axis=0), b.op("concat", p, q, axis=1)])  # fmt: skip
    add("graph_groups", [("x", DType.F32, (2, 3)), ("y", DType.F32, (6,))], _graph_groups)
    add("graph_consts", [("x", DType.F64, (4,)), ("k", DType.I32, (4,))], _graph_consts)
    add("graph_results", [("x", DType.I64, (3,))], _graph_results)
    return out


def _graph_groups(b: FunctionBuilder, x: Any, y: Any) -> list[Any]:
    """Values crossing groups, a reshape view between them, a reduction in the middle."""
    s = b.op("mul", x, x)
    r = b.op("reshape", s, shape=[6])
    t = b.op("add", r, y)
    total = b.op("sum", s, axis=1)
    column = b.op("reshape", total, shape=[2, 1])
    back = b.op("sub", b.op("broadcast", column, shape=[2, 3]), s)
    return [t, back, b.op("gt", t, b.op("reshape", back, shape=[6]))]


def _graph_consts(b: FunctionBuilder, x: Any, k: Any) -> list[Any]:
    """Uniform and non-uniform constants, iota, and constants read through memory."""
    two = b.const(2.0, DType.F64, [4])
    ramp = b.const(np.array([0.5, -0.0, np.inf, 3.0]), DType.F64, [4])
    idx = b.op("iota", shape=[4], axis=0, to=DType.I32)
    y = b.op("fma", x, two, ramp)
    z = b.op("add", k, idx)
    return [y, z, b.op("sum", ramp, axis=0), b.op("concat", ramp, x, axis=0)]


def _graph_results(b: FunctionBuilder, x: Any) -> list[Any]:
    """A parameter, a constant and one value twice, as results."""
    c = b.const(np.array([1, 2, 3]), DType.I64, [3])
    d = b.op("shl", x, c)
    return [x, c, d, d, b.const(7, DType.I64, [3])]


def _same(got: Array, want: Array) -> bool:
    if got.dtype != want.dtype or got.shape != want.shape:
        return False
    if want.dtype == np.bool_:
        return bool(np.array_equal(got, want))
    u = f"<u{want.dtype.itemsize}"
    return bool(np.array_equal(got.view(u), want.view(u)))


def _describe(fn: Function, inputs: dict[str, Array], got: list[Array], want: list[Array]) -> str:
    for j, (g, w) in enumerate(zip(got, want, strict=True)):
        if _same(g, w):
            continue
        if g.shape != w.shape or g.dtype != w.dtype:
            return f"{fn.name} result {j}: {g.dtype}{g.shape} != {w.dtype}{w.shape}"
        u = np.bool_ if w.dtype == np.bool_ else f"<u{w.dtype.itemsize}"
        diff = (g.view(u) != w.view(u)).reshape(len(g), -1).any(axis=1)
        i = int(np.nonzero(diff)[0][0])
        case = {k: v[i].tolist() for k, v in inputs.items()}
        return f"{fn.name} result {j} case {case}: got {g[i].tolist()} want {w[i].tolist()}"
    return ""


def _backend(target: str) -> Any:
    backend = TARGETS[target]()
    reason = backend.available()
    if reason:
        pytest.skip(reason)
    return backend


def _check(target: str, cases: list[Case], backend: Any = None) -> None:
    results = (backend or _backend(target)).run_many(cases)
    problems = []
    for (fn, inputs), got in zip(cases, results, strict=True):
        if isinstance(got, Exception):
            problems.append(f"{fn.name}: {got}")
            continue
        text = _describe(fn, inputs, got, interpret(fn, inputs))
        if text:
            problems.append(text)
    assert not problems, f"{len(problems)} of {len(cases)} functions differ:\n" + "\n".join(
        problems[:20]
    )


@pytest.fixture(scope="module")
def elementwise() -> list[Case]:
    return elementwise_cases()


@pytest.fixture(scope="module")
def structural() -> list[Case]:
    return structural_cases()


@pytest.mark.parametrize("target", TARGETS)
def test_every_elementwise_op_and_dtype(target: str, elementwise: list[Case]) -> None:
    _check(target, elementwise)


@pytest.mark.parametrize("target", TARGETS)
def test_reductions_movement_and_graphs(target: str, structural: list[Case]) -> None:
    _check(target, structural)


@pytest.mark.parametrize(
    "flags", [("--liftoff-only",), ("--no-liftoff",)], ids=["liftoff", "turbofan"]
)
def test_both_v8_compilers(
    flags: tuple[str, ...], elementwise: list[Case], structural: list[Case]
) -> None:
    """V8 compiles wasm with Liftoff, then TurboFan: each one alone must agree too."""
    _backend("wasm-node")
    _check("wasm-node", elementwise + structural, WasmNodeBackend(flags))


def test_case_set_covers_every_op(elementwise: list[Case], structural: list[Case]) -> None:
    """Every op but loops, calls and dynamic indexing, which test_wasm_loops.py and
    test_wasm_calls.py cover (bodies too), and transfers (test_wasm_transfers.py)."""
    used = {n.op for fn, _ in elementwise + structural for n in fn.nodes()}
    assert used == set(Op) - DYNAMIC - REGION_OPS - {Op.TRANSFER}


def test_modules_validate_and_carry_no_relaxed_simd(elementwise: list[Case]) -> None:
    wasmtime = pytest.importorskip("wasmtime")
    fns = [fn for fn, _ in elementwise]
    for simd in (False, True):
        wasm = emit(fns, simd=simd)
        cfg = wasmtime.Config()
        cfg.wasm_relaxed_simd = False
        wasmtime.Module.validate(wasmtime.Engine(cfg), wasm)
        if not simd:
            cfg2 = wasmtime.Config()
            cfg2.wasm_simd = False
            cfg2.wasm_relaxed_simd = False
            wasmtime.Module.validate(wasmtime.Engine(cfg2), wasm)  # scalar: no v128 at all


def test_engine_does_not_canonicalise_for_us() -> None:
    """A raw f32.add on a NaN keeps its payload in our engine: our canon is what is tested."""
    wasmtime = pytest.importorskip("wasmtime")
    body = (*op("f32.add", f32c(0xFFC12345), f32c(0x3F800000)), ins("i32.reinterpret_f32"))
    f = Func(FuncType((), (ValType.I32,)), (), tuple(body), "f")
    wasm = encode(Module(funcs=(f,), exports=(Export("f", ExportKind.FUNC, 0),)))
    runner = WasmtimeRunner()
    store = wasmtime.Store(runner.engine)
    got = wasmtime.Instance(store, runner.module(wasm), []).exports(store)["f"](store)
    assert got & 0xFFFFFFFF == 0xFFC12345


GOLDEN_GRAPHS = ["saxpy", "minmax_f64", "sum_i32"]


def golden_fn(name: str) -> Function:
    b = FunctionBuilder(name)
    if name == "saxpy":
        a, x, y = (
            b.param("a", DType.F32),
            b.param("x", DType.F32, [4]),
            b.param("y", DType.F32, [4]),
        )
        return b.build(b.op("add", b.op("mul", b.op("broadcast", a, shape=[4]), x), y))
    if name == "minmax_f64":
        x, y = b.param("x", DType.F64), b.param("y", DType.F64)
        return b.build(b.op("min", x, y), b.op("convert", b.op("max", x, y), to=DType.I32))
    x = b.param("x", DType.I32, [3])
    return b.build(b.op("sum", b.op("div", x, x), axis=0))


@pytest.mark.parametrize("simd", [False, True], ids=["scalar", "simd"])
@pytest.mark.parametrize("name", GOLDEN_GRAPHS)
def test_golden_wat(name: str, simd: bool, golden: Callable[[str, str], None]) -> None:
    """The emitted text for a few small graphs; regenerate with KERA_UPDATE_GOLDEN=1."""
    text = emit_wat(golden_fn(name), simd=simd)
    golden(f"wasm/{name}{'.simd' if simd else ''}.wat", text)
    wasmtime = pytest.importorskip("wasmtime")
    assert wasmtime.wat2wasm(text) == compile_functions(golden_fn(name), simd).wasm


# ----------------------------------------------------------------------------- random graphs

RANDOM_GRAPHS = int(os.environ.get("KERA_WASM_RANDOM_GRAPHS", "80"))
SHAPES = [(), (4,), (5,), (2, 3), (3, 1), (1, 6)]
UNARY_OPS = sorted(UNARY)
BINARY_OPS = sorted(BINARY)


def _try(b: FunctionBuilder, name: str, *args: Any, **attrs: Any) -> Any:
    try:
        return b.op(name, *args, **attrs)
    except TypeRuleError:
        return None


def _grow(rng: np.random.Generator, b: FunctionBuilder, pool: list[Any]) -> Any:
    """One new node on random operands from the pool (None when the pick does not type)."""
    recent = int(rng.integers(max(0, len(pool) - 3), len(pool)))  # chains, mostly
    x = pool[recent if rng.random() < 0.7 else int(rng.integers(len(pool)))]
    same = [p for p in pool if p.type == x.type]
    y = same[int(rng.integers(len(same)))]
    kind = int(rng.integers(10))
    if kind <= 2:
        return _try(b, BINARY_OPS[int(rng.integers(len(BINARY_OPS)))], x, y)
    if kind == 3:
        return _try(b, UNARY_OPS[int(rng.integers(len(UNARY_OPS)))], x)
    if kind == 4:
        return _try(b, "convert", x, to=DTYPES[int(rng.integers(len(DTYPES)))])
    if kind == 5 and x.shape:
        return _try(b, ["sum", "prod", "amin", "amax"][int(rng.integers(4))], x,
                    axis=int(rng.integers(len(x.shape))))  # fmt: skip
    if kind == 6:
        return _try(b, "reshape", x, shape=[int(np.prod(x.shape))])
    if kind == 7 and not x.shape:
        return _try(b, "broadcast", x, shape=list(SHAPES[1 + int(rng.integers(len(SHAPES) - 1))]))
    if kind == 7 and len(x.shape) == 2:
        return _try(b, "transpose", x, perm=[1, 0])
    if kind == 8 and x.shape:
        return _try(b, "concat", x, y, axis=0)
    if kind == 9 and len(x.shape) == 1:
        return _try(b, "dot", x, y)
    if kind == 9 and x.dtype.is_float:
        c = b.const(rng.standard_normal(x.shape or (1,)).reshape(x.shape), x.dtype, x.shape)
        return _try(b, "fma", x, y, c)
    return _try(b, "select", _try(b, "lt", x, y), x, y) if x.dtype is not DType.BOOL else None


def random_cases(count: int, seed: int) -> list[Case]:
    rng = np.random.default_rng(seed)
    out: list[Case] = []
    for g in range(count):
        b = FunctionBuilder(f"random_{g}")
        params = []
        for k in range(int(rng.integers(1, 4))):
            dt = DTYPES[int(rng.integers(1, len(DTYPES)))]
            params.append(b.param(f"p{k}", dt, SHAPES[int(rng.integers(len(SHAPES)))]))
        pool = list(params)
        for _ in range(int(rng.integers(4, 24))):
            node = _grow(rng, b, pool)
            if node is not None and int(np.prod(node.shape)) <= 64:
                pool.append(node)
        picks = rng.choice(len(pool), size=min(len(pool), int(rng.integers(0, 3))), replace=False)
        fn = b.build(*(pool[int(i)] for i in sorted(picks)), pool[-1])
        n = int(rng.integers(1, 24))
        inputs = {
            str(p.attr("name")): _random_specials(rng, p.dtype, (n, *p.shape)) for p in params
        }
        out.append((fn, inputs))
    return out


@pytest.mark.parametrize("target", TARGETS)
def test_random_graphs(target: str) -> None:
    """Random DAGs (groups, views, reductions, conversions, constants) against the reference."""
    _check(target, random_cases(RANDOM_GRAPHS, seed=11))


def _constants_fn() -> Function:
    """A transpose of a non-uniform constant and a literal (``broadcast`` of a scalar)."""
    b = FunctionBuilder("consts")
    x = b.param("x", DType.I32, [3, 2])
    table = b.const(np.arange(6, dtype=np.int32).reshape(2, 3), DType.I32, (2, 3))
    two = b.op("broadcast", b.const(np.int32(2), DType.I32, ()), shape=[3, 2])
    return b.build(b.op("add", b.op("transpose", table, perm=[1, 0]), b.op("mul", x, two)))


@pytest.mark.parametrize("target", TARGETS)
def test_movement_over_constants_runs_at_run_time(target: str) -> None:
    """The emitter materialises constants but folds nothing (that is the ``fold`` pass's):
    the data segment holds the constant's own bytes, transposed at run time, and the literal
    is an immediate with no data of its own."""
    fn = _constants_fn()
    data = [d.data for d in compile_functions(fn).module.data]
    assert data == [np.arange(6, dtype="<i4").tobytes()]
    rng = np.random.default_rng(3)
    _check(target, [(fn, {"x": _random_specials(rng, DType.I32, (9, 3, 2))})])


SCRATCH_HEAVY = """
// the sum is kept in scratch, which lies after the output: 64 rows x 8 KB of it
export fn spill(a: f64[1000], b: f64[1000]) -> f64[1, 1000] { broadcast(a + b, shape = [1, 1000]) }
// rem of broadcast i64 by a broadcast zero: both broadcasts materialise in scratch
export fn rem0(a: i64[1, 5]) -> i64[16, 1, 5] {
    broadcast(a, shape = [16, 1, 5]) % broadcast(0i64, shape = [16, 1, 5])
}
// a matmul of a reduced constant beside a concat
export fn mm(a: f64[2, 17], b: i64[16]) -> (f64[2, 17], i64[32]) {
    (matmul(sum(broadcast(0.0f64, shape = [2, 2, 2]), axis = 0), a), concat(b, b, axis = 0))
}
"""


@pytest.mark.parametrize("target", TARGETS)
def test_scratch_past_the_last_page(target: str) -> None:
    """The memory is grown to cover each call's scratch, not only its inputs and outputs (a
    fuzzer finding: the kernel trapped once scratch crossed the last page the buffers needed)."""
    from kera.frontend import compile_source

    res = compile_source(SCRATCH_HEAVY, "<scratch>")
    assert res.graph is not None
    rng = np.random.default_rng(5)
    cases: list[Case] = []
    for fn in res.graph.functions.values():
        inputs = {
            str(p.attr("name")): _random_specials(rng, p.dtype, (64, *p.shape)) for p in fn.params
        }
        cases.append((fn, inputs))
    _check(target, cases)


@pytest.mark.parametrize("target", ["wasm", "wasm-simd"])
def test_a_function_that_does_not_lower_fails_alone(
    target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``run_many`` emits a batch's module once, without checking each function first; when
    that module fails to emit, each function is checked alone: the one the back end cannot
    lower gets its error, every other case (a repeat of the failing function included) still
    runs, in the module of those that emit.  ``sqrt`` stands for an op the back end lacks."""
    wasm_emit = importlib.import_module("kera.backends.wasm.emit")  # the name is a function too
    monkeypatch.setattr(wasm_emit, "SUPPORTED", wasm_emit.SUPPORTED - {Op.SQRT})
    bad = FunctionBuilder("bad")
    x = bad.param("x", DType.F32, [3])
    bad_fn = bad.build(bad.op("sqrt", x))
    good_fn = _constants_fn()
    rng = np.random.default_rng(4)
    good = (good_fn, {"x": _random_specials(rng, DType.I32, (5, 3, 2))})
    failing = (bad_fn, {"x": _random_specials(rng, DType.F32, (5, 3))})
    results = TARGETS[target]().run_many([failing, good, failing])
    assert [type(r).__name__ for r in (results[0], results[2])] == ["BackendError"] * 2
    assert "does not lower 'sqrt'" in str(results[0])
    assert not isinstance(results[1], Exception)
    want = interpret(good_fn, good[1])
    assert [o.tobytes() for o in results[1]] == [np.asarray(w).tobytes() for w in want]


def test_live_runners_are_closed_at_exit_while_wasmtime_still_exists() -> None:
    """A runner still alive at exit (a cached back end holds one) is closed by an ``atexit``
    hook; left to the interpreter's teardown, its engine's finaliser ran after wasmtime's
    bindings were gone and printed "Exception ignored in: Managed.__del__" after pytest's
    summary.  Run in a child, which has its own exit."""
    pytest.importorskip("wasmtime")
    script = (
        "import atexit\n"
        "from kera.backends.wasm.encode import Func, FuncType, Module, encode\n"
        "from keracheck.runners.wasmtime_run import WasmtimeRunner\n"
        "runner = WasmtimeRunner()\n"
        "runner.module(encode(Module(funcs=(Func(FuncType((), ()), (), ()),))))\n"
        "handles = [runner.engine, *runner._modules.values()]\n"
        "atexit._run_exitfuncs()\n"
        "for handle in handles:\n"
        "    try:\n"
        "        handle.ptr()\n"
        "    except ValueError:\n"
        "        continue\n"
        "    raise SystemExit('still open: ' + type(handle).__name__)\n"
        "print('closed')\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout == "closed\n", proc.stderr
    assert "Exception ignored" not in proc.stderr, proc.stderr
