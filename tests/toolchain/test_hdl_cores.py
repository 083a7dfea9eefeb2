"""The RTL cores (hdl_sim/rtl, package kera_hdl) against SoftFloat, bit for bit.

Three suites (f32, f64, int) each build one batch test bench (hdl_vectors.render_testbench)
that instantiates every core of the suite; vectors stream through it segment by segment.

* Verilator (``--binary``): at least 100k edge-biased vectors per core, i.e. per op and width
  (``KERA_HDL_VECTORS`` changes it), results bit-equal to SoftFloat under the contract's rules,
  observed latencies equal to the latency table of kera_hdl and to each core's LATENCY.
* Icarus: the same suites on 500 vectors per core (the simulator the cocotb flow uses).
* Lint: ``verilator --lint-only -Wall`` is clean for every core and parameterisation used.
* slow: exhaustive sweeps of the unary f32 cores (2**32 inputs each, in chunks) against numpy,
  whose f32 sqrt/floor/ceil/trunc/rint and float64 conversions are exact on x86-64.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import softfloatpy as sf
from hdl_vectors import (
    F32,
    SUITES,
    U64,
    CoreTest,
    Segment,
    float_suite,
    read_outputs,
    render_testbench,
    write_inputs,
)

from kera_hdl import CORES, rtl_sources
from keracheck.runners.iverilog import Iverilog
from keracheck.runners.verilator import Verilator

N = int(os.environ.get("KERA_HDL_VECTORS", "100000"))
N_ICARUS = 500

pytestmark = pytest.mark.toolchain


@pytest.fixture(autouse=True)
def _rne() -> None:
    sf.set_rounding_mode(sf.RoundingMode.NEAR_EVEN)


def _need(tool: Iverilog | Verilator) -> None:
    reason = tool.available()
    if reason:
        pytest.skip(reason)


def _vectors(tests: list[CoreTest], n: int) -> list[tuple[Any, ...]]:
    return [t.vectors(n) for t in tests]


def _check(tests: list[CoreTest], vectors: list[tuple[Any, ...]], outs: list[Any]) -> list[str]:
    failures = []
    for t, ops, got in zip(tests, vectors, outs, strict=True):
        want = t.oracle(*ops)
        if len(got) != len(want):
            failures.append(f"{t.name}: {len(got)} results for {len(want)} vectors")
            continue
        bad = np.nonzero(got != want)[0]
        for i in bad[:3]:
            args = ", ".join(f"{int(o[i]):#x}" for o in ops)
            failures.append(f"{t.name}({args}) = {int(got[i]):#x}, want {int(want[i]):#x}")
        if len(bad) > 3:
            failures.append(f"{t.name}: {len(bad)} of {len(want)} differ")
    return failures


def _latencies(tests: list[CoreTest], lat: dict[int, int]) -> list[str]:
    bad = []
    for j, t in enumerate(tests):
        if lat.get(j) != t.latency:
            bad.append(f"{t.name}: observed latency {lat.get(j)}, table says {t.latency}")
    return bad


def _simulate(sim: str, tests: list[CoreTest], segments: list[Segment], work: Path) -> Any:
    tb = work / "tb.v"
    tb.write_text(render_testbench(tests))
    write_inputs(work, tests, segments)
    sources = [tb, *rtl_sources()]
    if sim == "verilator":
        exe = Verilator().build(sources, "tb", cache=work / "cache")
        Verilator().run(exe, cwd=work)
    else:
        image = Iverilog().compile(sources, "tb", work / "tb.vvp")
        Iverilog().run(image, cwd=work)
    return read_outputs(work, tests)


def _run_suite(sim: str, suite: str, n: int, work: Path) -> None:
    tests = SUITES[suite]()
    vectors = _vectors(tests, n)
    segments = [Segment(j, ops) for j, ops in enumerate(vectors)]
    outs, lat = _simulate(sim, tests, segments, work)
    problems = _latencies(tests, lat) + _check(tests, vectors, outs)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("suite", sorted(SUITES))
def test_cores_verilator(suite: str, tmp_path: Path) -> None:
    _need(Verilator())
    _run_suite("verilator", suite, N, tmp_path)


@pytest.mark.parametrize("suite", sorted(SUITES))
def test_cores_icarus(suite: str, tmp_path: Path) -> None:
    _need(Iverilog())
    _run_suite("icarus", suite, N_ICARUS, tmp_path)


def test_latency_localparams_match_table() -> None:
    """Every clocked core, and only those, states LATENCY in its source; its valid line is
    built from it, so the simulated latency checks compare kera_hdl.CORES with it."""
    for core in CORES.values():
        src = next(p for p in rtl_sources() if p.stem == core.module).read_text()
        found = re.search(r"localparam LATENCY = ([^;]+);", src)
        assert (found is not None) == core.clocked, core.module


def test_lint_clean() -> None:
    """verilator --lint-only -Wall is silent for every parameterisation the suites use."""
    _need(Verilator())
    seen: set[tuple[str, tuple[tuple[str, int], ...]]] = set()
    problems = []
    for suite in SUITES.values():
        for t in suite():
            key = (t.module, tuple(sorted(t.params.items())))
            if key in seen:
                continue
            seen.add(key)
            text = Verilator().lint(rtl_sources(), t.module, t.params)
            if text:
                problems.append(f"{t.module} {t.params}:\n{text}")
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------- exhaustive (slow)

CHUNK = 1 << 24
# KERA_HDL_EXHAUSTIVE_CHUNKS=k runs k chunks spread evenly over the 2**32 inputs (a sample)
CHUNKS = int(os.environ.get("KERA_HDL_EXHAUSTIVE_CHUNKS", str((1 << 32) // CHUNK)))


def _np_unary(name: str, x: Any) -> Any:
    """numpy reference for the unary f32 cores (exact on x86-64), contract NaN rules applied."""
    f = x.view(np.float32)
    with np.errstate(all="ignore"):
        if name in ("sqrt", "floor", "ceil", "trunc", "round"):
            fn = {
                "sqrt": np.sqrt,
                "floor": np.floor,
                "ceil": np.ceil,
                "trunc": np.trunc,
                "round": np.rint,
            }[name]
            return F32.canon(fn(f).view(np.uint32).astype(U64))
        if name == "to_f64":
            d = f.astype(np.float64).view(np.uint64)
            return np.where(np.isnan(f), U64(0x7FF8000000000000), d).astype(U64)
        bits = int(name[-2:])
        signed = name[3] == "i"
        t = np.trunc(f.astype(np.float64))
        hi = 2.0 ** (bits - 1 if signed else bits)
        lo = -(2.0 ** (bits - 1)) if signed else 0.0
        clipped = np.clip(np.nan_to_num(t, nan=0.0), lo, hi)
        top = U64((1 << (bits - 1 if signed else bits)) - 1)
        mask = U64((1 << bits) - 1) if bits < 64 else U64(2**64 - 1)
        vals = np.where(clipped >= hi, 0.0, clipped)
        conv = vals.astype(np.int64).astype(U64) if signed else vals.astype(U64)
        return (np.where(clipped >= hi, top, conv) & mask).astype(U64)


UNARY_F32 = [
    "sqrt",
    "floor",
    "ceil",
    "trunc",
    "round",
    "to_i32",
    "to_i64",
    "to_u32",
    "to_u64",
    "to_f64",
    "neg",
    "abs",
]


@pytest.mark.slow
@pytest.mark.timeout(0)  # hours by design; no per-test limit
@pytest.mark.parametrize("name", UNARY_F32)
def test_exhaustive_unary_f32(name: str, tmp_path: Path) -> None:
    """All 2**32 inputs of one unary f32 core (Verilator), in chunks of 2**24."""
    _need(Verilator())
    tests = [t for t in float_suite(F32) if t.name == f"f32.{name.replace('_u', '_ui')}"]
    assert len(tests) == 1
    step = (1 << 32) // CHUNKS // CHUNK * CHUNK
    for start in range(0, CHUNKS * step, step):
        outs, _ = _simulate("verilator", tests, [Segment(0, count=CHUNK, start=start)], tmp_path)
        x = np.arange(start, start + CHUNK, dtype=U64)
        if name == "neg":
            want = x ^ U64(0x80000000)
        elif name == "abs":
            want = x & U64(0x7FFFFFFF)
        else:
            want = _np_unary(name, x.astype(np.uint32))
        bad = np.nonzero(outs[0] != want)[0]
        assert not len(bad), (
            f"f32.{name}: {len(bad)} differ in chunk {start:#x}; first "
            f"{int(x[bad[0]]):#x} -> {int(outs[0][bad[0]]):#x}, want {int(want[bad[0]]):#x}"
        )
