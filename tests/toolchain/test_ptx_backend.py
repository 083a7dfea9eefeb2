"""The PTX back end: ptx-emu agrees with the reference interpreter bit for bit on every
contract op x dtype over special values, under the hardware and the adversarial NaN policy;
ptxas accepts every emitted module; golden PTX for small graphs.  Loops and dynamic indexing
(``tests/loopgraphs.py``) are run in ``test_ptx_loops.py``.

The emulator part needs no external tool; the ptxas part is skipped when ptxas is missing.
Set ``KERA_UPDATE_GOLDEN=1`` to rewrite the golden files after an intended codegen change.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from callgraphs import GRAPHS as CALL_GRAPHS
from loopgraphs import GRAPHS
from spacegraphs import GRAPHS as SPACE_GRAPHS

from kera.backends.ptx import SUPPORTED, emit, emit_graph, kernel_name
from kera.dtypes import DType
from kera.interp import interpret
from kera.ir import Function, FunctionBuilder, Graph
from kera.ops import BINARY, UNARY, Op, TypeRuleError
from keracheck.runners.ptxas import Ptxas
from keracheck.targets.ptx import PtxEmuAdversarialBackend, PtxEmuBackend

Array = np.ndarray[Any, Any]

F32_SPECIALS = [
    0x00000000, 0x80000000, 0x3F800000, 0xBF800000, 0x3FC00000, 0xC0200000, 0x40200000,
    0x00000001, 0x807FFFFF, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000,
    0x7FC00000, 0x7FC12345, 0xFFC00001, 0x7F800001, 0x4B800001, 0x4F32D05E, 0xCF32D05E,
]  # fmt: skip
F64_SPECIALS = [
    0x0, 1 << 63, 0x3FF0000000000000, 0xBFF0000000000000, 0x3FF8000000000000,
    0xC004000000000000, 0x0000000000000001, 0x800FFFFFFFFFFFFF, 0x0010000000000000,
    0x7FEFFFFFFFFFFFFF, 0x7FF0000000000000, 0xFFF0000000000000, 0x7FF8000000000000,
    0x7FF8000000012345, 0xFFF8000000000001, 0x7FF0000000000001, 0x43E0000000000000,
    0xC3E0000000000001, 0x41EFFFFFFFE00000, 0x4340000000000001,
]  # fmt: skip


def specials(dt: DType) -> Array:
    """Special values of a dtype (NaN payloads, +-0, subnormals, extremes, shift amounts)."""
    if dt is DType.F32:
        return np.array(F32_SPECIALS, dtype=np.uint32).view(np.float32)
    if dt is DType.F64:
        return np.array(F64_SPECIALS, dtype=np.uint64).view(np.float64)
    if dt is DType.BOOL:
        return np.array([False, True])
    ints = [0, 1, 2, 3, 7, 31, 32, 33, 63, 64, 100, dt.max, dt.max - 1, dt.min, dt.min + 1]
    if dt.is_signed:
        ints += [-1, -2, -7, -32, -100]
    return np.array(sorted(set(ints)), dtype=dt.np)


def grid(dt: DType, arity: int) -> list[Array]:
    """Every combination of special values, one combination per batch row."""
    vals = specials(dt)
    if arity == 3:
        vals = vals[:: max(1, len(vals) // 9)]
    cols = list(zip(*itertools.product(vals, repeat=arity), strict=True))
    return [np.array(c, dtype=dt.np) for c in cols]


def build(name: str, op: Op, dtypes: list[DType], **attrs: Any) -> Function | None:
    """The function ``op(x0, x1, ...)``, or None where the typing rules reject the dtypes."""
    b = FunctionBuilder(name)
    params = [b.param(f"x{i}", dt) for i, dt in enumerate(dtypes)]
    try:
        return b.build(b.op(op, *params, **attrs))
    except TypeRuleError:
        return None


ALL = list(DType)


def elementwise_cases() -> Iterator[tuple[str, Function, dict[str, Array]]]:
    for op in sorted(UNARY | BINARY, key=str):
        arity = 1 if op in UNARY else 2
        for dt in ALL:
            fn = build(f"{op}_{dt}", op, [dt] * arity)
            if fn is not None:
                yield fn.name, fn, dict(zip(("x0", "x1"), grid(dt, arity), strict=False))
    for dt in (DType.F32, DType.F64):
        fn = build(f"fma_{dt}", Op.FMA, [dt] * 3)
        assert fn is not None
        yield fn.name, fn, dict(zip(("x0", "x1", "x2"), grid(dt, 3), strict=True))
    for dt in ALL:
        fn = build(f"select_{dt}", Op.SELECT, [DType.BOOL, dt, dt])
        assert fn is not None
        a, b = grid(dt, 2)
        cond = np.arange(len(a)) % 3 == 0
        yield fn.name, fn, {"x0": cond, "x1": a, "x2": b}
    for src, dst in itertools.product(ALL, ALL):
        for op in (Op.CONVERT, Op.BITCAST):
            fn = build(f"{op}_{src}_{dst}", op, [src], to=dst)
            if fn is not None:
                yield fn.name, fn, {"x0": specials(src)}


def vector_fn(name: str, dt: DType, shape: list[int], make: Any) -> Function | None:
    b = FunctionBuilder(name)
    x = b.param("x0", dt, shape)
    y = b.param("x1", dt, shape)
    try:
        return b.build(*make(b, x, y))
    except TypeRuleError:
        return None


def structural_cases() -> Iterator[tuple[str, Function, dict[str, Array]]]:
    rng = np.random.default_rng(0)
    makers = {
        "reduce": ([2, 3], lambda b, x, y: [b.op(op, x, axis=ax) for op in ("sum", "prod", "amin", "amax") for ax in (0, 1)]),
        "reduce5": ([5], lambda b, x, y: [b.op(op, x, axis=0) for op in ("sum", "prod", "amin", "amax")]),
        "reduce1": ([1], lambda b, x, y: [b.op("sum", x, axis=0), b.op("amax", y, axis=0)]),
        "dot": ([3], lambda b, x, y: [b.op("dot", x, y)]),
        "matmul": ([2, 2], lambda b, x, y: [b.op("matmul", x, y)]),
        "movement": ([2, 3], lambda b, x, y: [
            b.op("transpose", x, perm=(1, 0)),
            b.op("reshape", y, shape=(3, 2)),
            b.op("slice", x, start=(0, 1), stop=(2, 3)),
            b.op("concat", x, y, axis=1),
            b.op("broadcast", b.op("slice", x, start=(0, 0), stop=(1, 3)), shape=(4, 2, 3)),
        ]),
        "leaves": ([3], lambda b, x, y: [
            b.op("add", x, b.op("convert", b.op("iota", shape=(3,), axis=0, to=DType.I64), to=x.dtype))
            if x.dtype is not DType.BOOL else x,
            b.op("mul", x, b.const(np.array([2, 3, 5]).astype(x.dtype.np), x.dtype, [3]))
            if x.dtype is not DType.BOOL else x,
        ]),
    }  # fmt: skip
    for (kind, (shape, make)), dt in itertools.product(makers.items(), ALL):
        fn = vector_fn(f"{kind}_{dt}", dt, shape, make)
        if fn is None:
            continue
        vals = specials(dt)
        size = int(np.prod(shape))
        pick = rng.integers(0, len(vals), size=(96, 2, size))
        pick[:48] %= max(1, len(vals) // 2)  # half the rows without the NaN/extreme tail
        xs = vals[pick].reshape(96, 2, *shape)
        yield fn.name, fn, {"x0": xs[:, 0].copy(), "x1": xs[:, 1].copy()}


CASES = list(elementwise_cases()) + list(structural_cases())


def bits_equal(a: Array, b: Array) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def test_every_contract_op_is_lowered() -> None:
    names = {str(op) for op in Op} - SUPPORTED
    assert not names, f"ops without a PTX lowering: {sorted(names)}"
    covered = {node.op.value for _, fn, _ in CASES for node in fn.nodes()}
    covered |= {op.value for make in GRAPHS.values() for op in make().ops_used()}  # loops
    covered |= {op.value for make in CALL_GRAPHS.values() for op in make().ops_used()}  # calls
    covered |= {op.value for make in SPACE_GRAPHS.values() for op in make().ops_used()}  # moves
    assert covered == {str(op) for op in Op}


@pytest.mark.parametrize(
    "backend", [PtxEmuBackend(), PtxEmuAdversarialBackend()], ids=lambda b: b.name
)
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_ptx_emu_matches_reference(
    case: tuple[str, Function, dict[str, Array]], backend: PtxEmuBackend
) -> None:
    _, fn, inputs = case
    want = interpret(fn, inputs)
    got = backend.run(fn, inputs)
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        if not bits_equal(g, w):
            bad = np.nonzero(
                (g != w)
                if g.dtype.kind != "f"
                else (g.view(f"u{g.itemsize}") != w.view(f"u{w.itemsize}"))
            )
            row = int(bad[0][0])
            args = {name: v[row] for name, v in inputs.items()}
            pytest.fail(
                f"result {k} differs at row {row}: inputs {args}, got {g[row]!r}, want {w[row]!r}"
            )


@pytest.mark.toolchain
def test_ptxas_accepts_every_emitted_module() -> None:
    ptxas = Ptxas()
    reason = ptxas.available()
    if reason is not None:
        pytest.skip(reason)
    module = emit_graph(Graph([fn for _, fn, _ in CASES]))
    result = ptxas.assemble(module)
    assert result.cubin[:4] == b"\x7fELF"
    for bad in (
        ".approx",
        ".ftz",
        "atom.",
        " mul.f",
        " add.f",
        " sub.f",
        "fma.f",
        "neg.f",
        "abs.f",
    ):
        assert bad not in module, bad


def golden_graphs() -> dict[str, Function]:
    b = FunctionBuilder("saxpy")
    a, x, y = b.param("a", DType.F32), b.param("x", DType.F32, [4]), b.param("y", DType.F32, [4])
    saxpy = b.build(b.op("add", b.op("mul", b.op("broadcast", a, shape=(4,)), x), y))
    b = FunctionBuilder("int_ops")
    p, q = b.param("p", DType.I32, [2]), b.param("q", DType.I32, [2])
    int_ops = b.build(b.op("div", p, q), b.op("shl", p, q), b.op("convert", p, to=DType.BOOL))
    b = FunctionBuilder("minsum")
    v = b.param("v", DType.F64, [3])
    minsum = b.build(b.op("amin", v, axis=0), b.op("convert", b.op("sum", v, axis=0), to=DType.I64))
    return {"saxpy": saxpy, "int_ops": int_ops, "minsum": minsum}


@pytest.mark.parametrize("name", sorted(golden_graphs()))
def test_golden_ptx(name: str, golden: Callable[[str, str], None]) -> None:
    golden(f"ptx/{name}.ptx", emit(golden_graphs()[name]))


CORPORA = Path(__file__).resolve().parents[2] / "corpora"


def corpus_functions() -> list[tuple[str, Function]]:
    from keracheck.collect import compile_file

    out = []
    for path in sorted(CORPORA.glob("*.kera")):
        for fn in compile_file(str(path)).functions.values():
            out.append((f"{path.stem}:{fn.name}", fn))
    return out


def test_ptx_emu_agrees_with_ref_on_the_corpus() -> None:
    from keracheck import inputs as inputs_mod

    functions = corpus_functions()
    if not functions:
        pytest.skip("corpora/ has no .kera files yet")
    for name, fn in functions:
        xs = inputs_mod.generate(fn, 64, 0)
        want = interpret(fn, xs, batch=None if fn.params else 1)
        got = PtxEmuAdversarialBackend().run(fn, xs)
        assert all(bits_equal(g, w) for g, w in zip(got, want, strict=True)), name


@pytest.mark.toolchain
def test_ptxas_accepts_the_corpus() -> None:
    ptxas = Ptxas()
    reason = ptxas.available()
    if reason is not None:
        pytest.skip(reason)
    from keracheck.collect import compile_file

    paths = sorted(CORPORA.glob("*.kera"))
    if not paths:
        pytest.skip("corpora/ has no .kera files yet")
    for path in paths:  # one module per file: function names are unique within a file
        result = ptxas.assemble(emit_graph(compile_file(str(path))))
        assert result.cubin[:4] == b"\x7fELF", path


def test_ptx_gpu_reports_why_it_is_unavailable() -> None:
    from keracheck.target import BackendError
    from keracheck.targets.ptx import PtxGpuBackend

    gpu = PtxGpuBackend()
    reason = gpu.available()
    if reason is None:
        pytest.skip("a GPU is usable here: scripts/gpu-check exercises ptx-gpu")
    assert "cuda-bindings" in reason or "driver" in reason or "GPU" in reason
    _, fn, inputs = CASES[0]
    with pytest.raises(BackendError, match="ptx-gpu unavailable"):
        gpu.run(fn, inputs)


# ptxas implements these IEEE-exact ops with FFMA/DFMA and MUFU seeds; other kernels must
# contain neither (a contraction or an approximation would show up as one).
SASS_EXEMPT = {"fma", "div", "rem", "sqrt"}


@pytest.mark.toolchain
def test_sass_has_no_fused_or_approximate_instructions() -> None:
    from keracheck.runners.nvdisasm import Nvdisasm, kernels, lint

    ptxas, nvdisasm = Ptxas(), Nvdisasm()
    for tool in (ptxas, nvdisasm):
        reason = tool.available()
        if reason is not None:
            pytest.skip(reason)
    fns = {kernel_name(fn): fn for _, fn, _ in CASES}
    sass = kernels(
        nvdisasm.disassemble(ptxas.assemble(emit_graph(Graph(list(fns.values())))).cubin)
    )
    assert set(sass) == set(fns)
    found = {}
    for name, opcodes in sass.items():
        exempt = any(node.op.value in SASS_EXEMPT for node in fns[name].nodes())
        bad = lint(opcodes, exempt)
        if bad:
            found[name] = bad
    assert not found, f"fused or MUFU instructions the graph did not ask for: {found}"
    mul_add = sass[kernel_name(next(fn for n, fn, _ in CASES if n == "dot_f32"))]
    assert "FMUL" in mul_add and "FADD" in mul_add  # products and sums stay separate
