"""The Verilog back end (kera.backends.verilog) and its targets against the reference interpreter.

* Every contract op x dtype, on special-value inputs (signed zeros, subnormals, extremes,
  infinities, NaNs with payloads, integer MIN/MAX/0/-1, ties), runs through both targets --
  ``verilog-verilator`` (plain test bench, Verilator) and ``verilog`` (cocotb + Icarus) -- plus
  the plain test bench on Icarus, and must equal ``kera.interp.interpret`` bit for bit.  Ops are
  grouped per dtype into a few functions with many results, so one simulation covers them all;
  each target also checks the latency it observes against the emitter's schedule.
* A golden text test pins the emitted Verilog of one small function.
* ``verilator --lint-only -Wall`` is clean for every emitted design.
"""

from __future__ import annotations

import itertools
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kera import passes
from kera.backends.verilog import SUPPORTED, VerilogEmitError, emit
from kera.dtypes import DType
from kera.interp import interpret
from kera.ir import Function, FunctionBuilder, const
from kera.ops import BOOL_OK, DYNAMIC, FLOAT_ONLY, INT_ONLY, REGION_OPS, Op
from kera_hdl import rtl_sources
from keracheck.target import Backend
from keracheck.targets.verilog import (
    DISPLAY_MAX_BITS,
    CocotbTarget,
    VerilatorTarget,
    chunks,
    design_of,
    hex_chunks,
    render_wrapper,
    run_plain,
)

pytestmark = pytest.mark.toolchain

FLOATS = (DType.F32, DType.F64)
INTS = (DType.I32, DType.I64, DType.U32, DType.U64)
ALL = (DType.BOOL, *INTS, *FLOATS)


# ---------------------------------------------------------------------------- special values


def specials(dt: DType) -> np.ndarray[Any, Any]:
    if dt is DType.BOOL:
        return np.array([False, True])
    if dt.is_int:
        vals = [0, 1, 2, 3, 7, dt.max, dt.max - 1, dt.min, dt.min + 1, 1 << (dt.bits - 2), 255]
        vals += [-1, -2, -7] if dt.is_signed else [dt.max // 2, dt.max // 2 + 1]
        return np.array(vals, dtype=object).astype(dt.np)
    f = dt.np.type
    fvals = [0.0, -0.0, 1.0, -1.0, 0.5, 1.5, 2.5, -2.5, 3.0, 1e10, -1e-3, 2.0**31, 2.0**63, 2.0**64]
    fvals += [np.inf, -np.inf, np.finfo(f).max, -np.finfo(f).max, np.finfo(f).smallest_subnormal]
    fvals += [-np.finfo(f).smallest_subnormal, np.finfo(f).smallest_normal]
    arr = np.array(fvals, dtype=dt.np)
    u = dt.uint.type
    nans = (
        [0x7FC00000, 0xFFC00001, 0x7F800001]
        if dt is DType.F32
        else [
            0x7FF8000000000000,
            0xFFF8000000000123,
            0x7FF0000000000001,
        ]
    )
    return np.concatenate([arr, np.array(nans, dtype=u).view(dt.np)])


def pairs(dt: DType) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    s = specials(dt)
    idx = np.array(list(itertools.product(range(len(s)), repeat=2)))
    return s[idx[:, 0]], s[idx[:, 1]]


def picks(dt: DType, n: int, shape: tuple[int, ...], seed: int) -> np.ndarray[Any, Any]:
    s = specials(dt)
    rng = np.random.default_rng(seed)
    return s[rng.integers(0, len(s), (n, *shape))]


# ---------------------------------------------------------------------------- the op matrix


Case = tuple[str, Function, dict[str, np.ndarray[Any, Any]], Sequence[str]]


def _ok(op: Op, dt: DType) -> bool:
    if op in FLOAT_ONLY and not dt.is_float:
        return False
    if op in INT_ONLY and not dt.is_int:
        return False
    if dt is DType.BOOL and op not in BOOL_OK:
        return False
    return not (op in (Op.AND, Op.OR, Op.XOR, Op.NOT) and dt.is_float)


UNARY = (Op.NEG, Op.ABS, Op.NOT, Op.SQRT, Op.FLOOR, Op.CEIL, Op.TRUNC, Op.ROUND)
BINARY: tuple[Op, ...]
BINARY = (Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.REM, Op.MIN, Op.MAX, Op.COPYSIGN, Op.AND, Op.OR)
BINARY += (Op.XOR, Op.SHL, Op.SHR, Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE)


def _unary(dt: DType) -> Case:
    b = FunctionBuilder(f"unary_{dt}")
    x = b.param("x", dt)
    ops = [op for op in UNARY if _ok(op, dt)]
    return f"unary {dt}", b.build(*(b.op(op, x) for op in ops)), {"x": specials(dt)}, ops


def _binary(dt: DType) -> Case:
    b = FunctionBuilder(f"binary_{dt}")
    x, y = b.param("x", dt), b.param("y", dt)
    ops = [op for op in BINARY if _ok(op, dt)]
    xs, ys = pairs(dt)
    return f"binary {dt}", b.build(*(b.op(op, x, y) for op in ops)), {"x": xs, "y": ys}, ops


def _ternary(dt: DType) -> Case:
    b = FunctionBuilder(f"ternary_{dt}")
    c, x, y, z = b.param("c", DType.BOOL), b.param("x", dt), b.param("y", dt), b.param("z", dt)
    results, labels = [b.op(Op.SELECT, c, x, y)], ["select"]
    if dt.is_float:
        results.append(b.op(Op.FMA, x, y, z))
        labels.append("fma")
    n = 600
    inputs = {"c": picks(DType.BOOL, n, (), 1)}
    inputs |= {k: picks(dt, n, (), i + 2) for i, k in enumerate("xyz")}
    return f"ternary {dt}", b.build(*results), inputs, labels


def _convert(dt: DType) -> Case:
    b = FunctionBuilder(f"convert_{dt}")
    x = b.param("x", dt)
    results, labels = [], []
    for to in ALL:
        if to is dt or (DType.BOOL in (dt, to) and (dt.is_float or to.is_float)):
            continue
        results.append(b.op(Op.CONVERT, x, to=to))
        labels.append(f"convert to {to}")
    for to in ALL:
        if to is not dt and DType.BOOL not in (dt, to) and to.bits == dt.bits:
            results.append(b.op(Op.BITCAST, x, to=to))
            labels.append(f"bitcast to {to}")
    return f"convert {dt}", b.build(*results), {"x": specials(dt)}, labels


def _reduce(dt: DType) -> Case:
    b = FunctionBuilder(f"reduce_{dt}")
    v5, v1, m = b.param("v5", dt, [5]), b.param("v1", dt, [1]), b.param("m", dt, [2, 3])
    k = b.param("k", dt, [3, 2])
    results, labels = [], []
    for op in (Op.SUM, Op.PROD, Op.AMIN, Op.AMAX):
        for name, node, axis in (("v5", v5, 0), ("v1", v1, 0), ("m/0", m, 0), ("m/1", m, 1)):
            results.append(b.op(op, node, axis=axis))
            labels.append(f"{op} {name}")
    results += [b.op(Op.DOT, v5, v5), b.op(Op.MATMUL, m, k)]
    labels += ["dot", "matmul"]
    n = 300
    shapes = {"v5": (5,), "v1": (1,), "m": (2, 3), "k": (3, 2)}
    inputs = {name: picks(dt, n, shape, i + 10) for i, (name, shape) in enumerate(shapes.items())}
    return f"reduce {dt}", b.build(*results), inputs, labels


def _movement(dt: DType) -> Case:
    b = FunctionBuilder(f"movement_{dt}")
    m, v = b.param("m", dt, [2, 3]), b.param("v", dt, [3])
    results = [
        b.op(Op.BROADCAST, v, shape=[2, 3]),
        b.op(Op.RESHAPE, m, shape=[3, 2]),
        b.op(Op.TRANSPOSE, m, perm=[1, 0]),
        b.op(Op.SLICE, m, start=[0, 1], stop=[2, 3]),
        b.op(Op.CONCAT, m, b.op(Op.BROADCAST, v, shape=[1, 3]), axis=0),
        b.op(Op.IOTA, shape=[2, 3], axis=1, to=dt) if dt is not DType.BOOL else v,
    ]
    labels = ["broadcast", "reshape", "transpose", "slice", "concat", "iota"]
    n = 40
    inputs = {"m": picks(dt, n, (2, 3), 20), "v": picks(dt, n, (3,), 21)}
    return f"movement {dt}", b.build(*results), inputs, labels


def _constants() -> Case:
    """Constants: NaN payloads move through sign ops and select, become canonical in
    arithmetic; folded constant ops agree with the interpreter."""
    b = FunctionBuilder("constants")
    x = b.param("x", DType.F32)
    payload = const(np.array(0xFFC00123, dtype=np.uint32).view(np.float32), DType.F32)
    two = const(2.0, DType.F32)
    i7 = const(7, DType.I32)
    results = [
        b.op(Op.NEG, payload),
        b.op(Op.ADD, x, payload),
        b.op(Op.SELECT, b.op(Op.LT, x, two), payload, x),
        b.op(Op.MUL, two, two),
        b.op(Op.DIV, i7, const(0, DType.I32)),
        b.op(Op.COPYSIGN, payload, x),
    ]
    labels = ["neg const", "add const", "select const", "folded mul", "folded div", "copysign"]
    return "constants", b.build(*results), {"x": specials(DType.F32)}, labels


def op_cases() -> list[Case]:
    cases = []
    for dt in ALL:
        cases += [_unary(dt), _binary(dt), _ternary(dt), _convert(dt), _movement(dt)]
        if dt is not DType.BOOL:
            cases.append(_reduce(dt))
    return [*cases, _constants()]


def _covered(cases: list[Case]) -> set[str]:
    seen: set[str] = set()
    for _, fn, _, _ in cases:
        seen |= {str(n.op) for n in fn.nodes()}
    return seen


# ---------------------------------------------------------------------------- checks


def _bits(a: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return a if a.dtype == np.bool_ else a.view(f"<u{a.dtype.itemsize}")


def _compare(cases: list[Case], outs: list[Any]) -> list[str]:
    problems = []
    for (name, fn, inputs, labels), got in zip(cases, outs, strict=True):
        if isinstance(got, Exception):
            problems.append(f"{name}: {got}")
            continue
        want = interpret(fn, inputs)
        for label, g, w in zip(labels, got, want, strict=True):
            if g.dtype != w.dtype or g.shape != w.shape:
                problems.append(f"{name} {label}: {g.dtype}{g.shape} vs {w.dtype}{w.shape}")
                continue
            bad = np.nonzero((_bits(g) != _bits(w)).reshape(len(g), -1).any(axis=1))[0]
            if len(bad):
                i = int(bad[0])
                args = {k: v[i].tolist() for k, v in inputs.items()}
                problems.append(
                    f"{name} {label}: {len(bad)} of {len(g)} vectors differ; first {args}: "
                    f"got {_bits(g)[i].tolist()} want {_bits(w)[i].tolist()}"
                )
    return problems


@pytest.fixture(scope="module")
def cases() -> list[Case]:
    return op_cases()


def test_every_contract_op_is_supported() -> None:
    assert {op.value for op in Op} <= SUPPORTED


def test_op_matrix_covers_every_op(cases: list[Case]) -> None:
    """Every op but loops, calls and dynamic indexing, which test_verilog_loops.py and
    test_verilog_calls.py cover, and transfers (test_verilog_transfers.py)."""
    assert _covered(cases) == {op.value for op in set(Op) - DYNAMIC - REGION_OPS - {Op.TRANSFER}}


def test_targets_implement_the_backend_protocol() -> None:
    for target in (CocotbTarget(), VerilatorTarget()):
        assert isinstance(target, Backend)
        assert target.supported_ops() >= {op.value for op in Op}


def _need(target: Any) -> None:
    reason = target.available()
    if reason:
        pytest.skip(reason)


def test_verilator_matches_interpreter(cases: list[Case]) -> None:
    target = VerilatorTarget()
    _need(target)
    outs = target.run_many([(fn, inputs) for _, fn, inputs, _ in cases])
    problems = _compare(cases, outs)
    assert not problems, "\n".join(problems)


def test_cocotb_icarus_matches_interpreter(cases: list[Case]) -> None:
    target = CocotbTarget()
    _need(target)
    outs = target.run_many([(fn, inputs) for _, fn, inputs, _ in cases])
    problems = _compare(cases, outs)
    assert not problems, "\n".join(problems)


def test_plain_bench_on_icarus_matches_interpreter(cases: list[Case]) -> None:
    from keracheck.runners.iverilog import Iverilog

    if reason := Iverilog().available():
        pytest.skip(reason)
    some = [c for c in cases if c[0].startswith(("binary f64", "reduce i64", "convert f32"))]
    outs = run_plain([(fn, inputs) for _, fn, inputs, _ in some], "icarus")
    problems = _compare(some, list(outs))
    assert not problems, "\n".join(problems)


def test_emitted_designs_lint_clean(cases: list[Case], tmp_path: Path) -> None:
    from keracheck.runners.verilator import Verilator

    _need(Verilator())
    designs = [design_of(fn) for _, fn, _, _ in cases]
    files = []
    for d in designs:
        files.append(tmp_path / f"{d.top}.v")
        files[-1].write_text(d.text)
    for d, path in zip(designs, files, strict=True):
        text = Verilator().lint([path, *rtl_sources()], d.top)
        assert not text, f"{d.function}:\n{text}"
    wrapper = tmp_path / "kera_cocotb_top.v"
    wrapper.write_text(render_wrapper(designs))
    assert not Verilator().lint([wrapper, *files, *rtl_sources()], "kera_cocotb_top")


# ---------------------------------------------------------------------------- golden text


GOLDEN = """
// Generated by kerac (Verilog back end); cores from kera_hdl
`default_nettype none
module kera_golden (
    input  wire clk,
    input  wire rst,
    input  wire valid_in,
    input  wire [63:0] p0_a,
    input  wire [31:0] p1_s,
    output wire valid_out,
    output wire [31:0] r0,
    output wire [0:0] r1
);
    localparam LATENCY = 4;
    reg [LATENCY-1:0] vpipe;  // vpipe[i]: valid_in delayed i + 1 clocks
    always @(posedge clk) vpipe <= rst ? {LATENCY{1'b0}} : {vpipe[2:0], valid_in};
    wire [LATENCY:0] vat = {vpipe, valid_in};  // vat[t]: valid of the vector at cycle t
    assign valid_out = vat[LATENCY];
    wire [31:0] n0 = p0_a[31:0];
    wire [31:0] n1 = p0_a[63:32];
    wire [31:0] n2;
    wire v2;
    wire [31:0] n3 = p1_s[31:0];
    wire [31:0] n4;
    wire v4;
    wire [0:0] c5_eq;
    wire [0:0] c5_ne;
    wire [0:0] c5;
    wire [0:0] c5_le;
    wire [0:0] c5_gt;
    wire [0:0] c5_ge;
    reg [0:0] n5;
    wire [31:0] n3_d2;
    wire [0:0] n5_d3;
    kf_fadd #(.EW(8), .MW(23), .SUB(0)) cell2 (.clk(clk), .rst(rst), .valid_in(vat[0]), .a(n0), .b(n1), .y(n2), .valid_out(v2));
    kf_fmul #(.EW(8), .MW(23)) cell4 (.clk(clk), .rst(rst), .valid_in(vat[2]), .a(n2), .b(n3_d2), .y(n4), .valid_out(v4));
    kf_fcmp #(.EW(8), .MW(23)) cell5 (.a(n0), .b(n1), .eq(c5_eq), .ne(c5_ne), .lt(c5), .le(c5_le), .gt(c5_gt), .ge(c5_ge));
    always @(posedge clk) n5 <= c5;
    kf_pipe #(.W(32), .N(2)) dly3_2 (.clk(clk), .d(n3), .q(n3_d2));
    kf_pipe #(.W(1), .N(3)) dly5_3 (.clk(clk), .d(n5), .q(n5_d3));
    assign r0 = {n4};
    assign r1 = {n5_d3};
`ifdef VERILATOR  // lint only: Icarus need not evaluate it
    wire unused_ok = ^{1'b0, v2, v4, c5_eq, c5_ne, c5_le, c5_gt, c5_ge, vat, p0_a, p1_s};  // lint: nets read in part
`endif
endmodule
`default_nettype wire
"""


def _golden_fn() -> Function:
    b = FunctionBuilder("golden")
    a, s = b.param("a", DType.F32, [2]), b.param("s", DType.F32)
    x0 = b.op(Op.RESHAPE, b.op(Op.SLICE, a, start=[0], stop=[1]), shape=[])
    x1 = b.op(Op.RESHAPE, b.op(Op.SLICE, a, start=[1], stop=[2]), shape=[])
    return b.build(b.op(Op.MUL, b.op(Op.ADD, x0, x1), s), b.op(Op.LT, x0, x1))


def test_golden_text() -> None:
    d = emit(_golden_fn())
    assert d.text.strip() == textwrap.dedent(GOLDEN).strip()
    assert d.latency == 4
    assert d.cores == {
        "kf_fadd(EW=8,MW=23,SUB=0)": 1,
        "kf_fcmp(EW=8,MW=23)": 1,
        "kf_fmul(EW=8,MW=23)": 1,
    }


def _constants_fn() -> Function:
    """``x * (2.0 + 3.0)`` and ``7 / 2``: a float and an integer op on constants only."""
    b = FunctionBuilder("consts")
    x = b.param("x", DType.F32, [2])
    two, three = (b.op(Op.BROADCAST, const(v, DType.F32), shape=[2]) for v in (2.0, 3.0))
    q = b.op(Op.DIV, const(7, DType.I32), const(2, DType.I32))
    return b.build(b.op(Op.MUL, x, b.op(Op.ADD, two, three)), q)


def test_the_emitter_folds_nothing(tmp_path: Path) -> None:
    """Folding is the ``fold`` pass's: at -O0 every op on constants is built (cores fed by
    constant cells), and the design lints clean; after -O2 the constant sum and quotient are
    gone and only the products are left."""
    fn = _constants_fn()
    d = emit(fn)
    assert d.cores == {
        "kf_fadd(EW=8,MW=23,SUB=0)": 2,
        "kf_fmul(EW=8,MW=23)": 2,
        "kf_idiv(W=32,SIGNED=1,REM=0)": 1,
    }
    assert emit(passes.optimize(fn, passes.pipeline(2)).function).cores == {
        "kf_fmul(EW=8,MW=23)": 2
    }
    from keracheck.runners.verilator import Verilator

    _need(Verilator())
    path = tmp_path / f"{d.top}.v"
    path.write_text(d.text)
    assert not Verilator().lint([path, *rtl_sources()], d.top)


def test_size_limit() -> None:
    b = FunctionBuilder("big")
    x = b.param("x", DType.F32, [30, 30])
    with pytest.raises(VerilogEmitError, match="core instances"):
        emit(b.build(b.op(Op.MATMUL, x, x)))


def test_targets_decline_what_is_past_the_size_limit() -> None:
    """Past MAX_CORES is a documented limit: declined (reported unsupported), not an error."""
    b = FunctionBuilder("big")
    x = b.param("x", DType.F32, [30, 30])
    big = b.build(b.op(Op.MATMUL, x, x))
    small = FunctionBuilder("small")
    y = small.param("y", DType.F32, [4])
    for target in (VerilatorTarget(), CocotbTarget()):
        reason = target.declines(big)
        assert reason is not None and "core instances" in reason
        assert target.declines(small.build(small.op(Op.ADD, y, y))) is None


def test_chunks_bound_simulation_size_and_isolate_errors() -> None:
    def fn_with(n: int, op: Op) -> Function:
        b = FunctionBuilder(str(op))
        x = b.param("x", DType.F32, [n])
        return b.build(b.op(op, x, x))

    big = FunctionBuilder("too_big")
    x = big.param("x", DType.F32, [30, 30])
    too_big = big.build(big.op(Op.MATMUL, x, x))
    a, b = fn_with(1200, Op.MUL), fn_with(1200, Op.ADD)
    groups = chunks([(a, {}), (a, {}), (too_big, {}), (b, {}), (a, {})])
    # a is counted once per group; a + b exceed CORES_PER_SIM; the failing case stands alone
    assert groups == [[0, 1], [2], [3], [4]]


def test_resource_estimate() -> None:
    from keracheck.runners.yosys import Yosys

    _need(Yosys())
    b = FunctionBuilder("res")
    fn = b.build(b.op(Op.ADD, b.param("x", DType.I32), b.param("y", DType.I32)))
    res = VerilatorTarget().resources(fn)
    luts, carries = res["luts"], res["carries"]
    assert isinstance(luts, int) and isinstance(carries, int), res
    # 32 result flip-flops plus the valid bit; a 32-bit adder needs LUTs and a carry chain
    assert res["ffs"] == 33 and luts >= 32 and carries >= 31


def test_write_emits_designs_library_and_schedule(tmp_path: Path) -> None:
    from kera.backends.verilog import write
    from kera.ir import Graph

    write(Graph([_golden_fn()]), str(tmp_path))
    assert (tmp_path / "kera_golden.v").read_text() == emit(_golden_fn()).text
    assert sorted(p.name for p in (tmp_path / "rtl").iterdir()) == [p.name for p in rtl_sources()]
    assert '"latency": 4' in (tmp_path / "schedule.json").read_text()


def test_schedule_report() -> None:
    rep = emit(_golden_fn()).report()
    assert rep["latency"] == 4 and rep["core_instances"] == 3
    assert [p["port"] for p in rep["inputs"]] == ["p0_a", "p1_s"]


def testhex_chunks_print_like_one_field() -> None:
    for width in (1, 64, 8192, 8193, 8256, 16384, 20001):
        bus = int.from_bytes(np.random.default_rng(width).bytes(width // 8 + 1)) % (1 << width)
        parts = hex_chunks("o", width)
        digits = ""
        for part in parts:
            hi, lo = (width - 1, 0) if part == "o" else map(int, part[2:-1].split(":"))
            assert hi - lo + 1 <= DISPLAY_MAX_BITS
            n = hi - lo + 1
            digits += f"{(bus >> lo) & ((1 << n) - 1):0{-(-n // 4)}x}"  # what %h prints
        assert digits == f"{bus:0{-(-width // 4)}x}", width


@pytest.mark.parametrize("target", ["verilog-verilator", "verilog", "icarus-plain"])
def test_buses_wider_than_the_display_limit(target: str) -> None:
    """A port over 8192 bits (f64[129]): Verilator refuses so wide a $fwrite argument, so the
    bench prints it in slices (a fuzzer-found case failed to build before)."""
    b = FunctionBuilder("wide")
    x = b.param("x", DType.F64, [129])
    fn = b.build(b.op(Op.BROADCAST, x, shape=(1, 129)))
    rng = np.random.default_rng(3)
    inputs = {"x": rng.integers(0, 1 << 63, (5, 129), dtype=np.uint64).view(np.float64)}
    case: Case = ("wide", fn, inputs, ["out"])
    if target == "icarus-plain":
        from keracheck.runners.iverilog import Iverilog

        if reason := Iverilog().available():
            pytest.skip(reason)
        outs: list[Any] = list(run_plain([(fn, inputs)], "icarus"))
    else:
        backend = VerilatorTarget() if target == "verilog-verilator" else CocotbTarget()
        _need(backend)
        outs = backend.run_many([(fn, inputs)])
    problems = _compare([case], outs)
    assert not problems, "\n".join(problems)
