"""Memory spaces and transfers on the WASM back end (``wasm``, ``wasm-simd``, ``wasm-node``),
bit for bit against kera.interp.

* every graph of ``tests/spacegraphs.py`` at ``-O0`` and ``-O2`` (inlined), one batch per
  target, on inputs with special values (NaN payloads, infinities, integer extremes): WASM has
  one linear memory, so a transfer is a ``memory.copy`` of the value's bytes into an array of
  its own, and a parameter's space changes nothing;
* the code shape (no tool needed): one copy per transfer (equal ones and an unused one
  included); the golden text of one small transfer (``KERA_UPDATE_GOLDEN=1`` regenerates).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from spacegraphs import GRAPHS, golden_transfer
from test_wasm_backend import TARGETS, Case, _backend, _describe
from test_wasm_loops import _inputs

from kera.backends.wasm import compile_functions, emit_wat
from kera.interp import interpret
from kera.passes import optimize, pipeline


@pytest.fixture(scope="module")
def cases() -> list[Case]:
    """Each graph at -O0 then at -O2, on the same inputs."""
    out: list[Case] = []
    for seed, make in enumerate(GRAPHS.values()):
        fn = make()
        ins = _inputs(fn, seed)
        out += [(fn, ins), (optimize(fn, pipeline(2)).function, ins)]
    return out


@pytest.mark.toolchain
@pytest.mark.parametrize("target", TARGETS)
def test_transfers_agree_with_the_reference(target: str, cases: list[Case]) -> None:
    got = _backend(target).run_many(cases)
    problems: list[str] = []
    for (fn, ins), g in zip(cases, got, strict=True):
        want = interpret(fn, ins)
        text = f"{fn.name}: {g}" if isinstance(g, Exception) else _describe(fn, ins, g, want)
        if text:
            problems.append(text)
    assert not problems, f"{len(problems)} problems on {target}:\n" + "\n".join(problems[:20])


@pytest.mark.parametrize("simd", [False, True], ids=["scalar", "simd"])
def test_each_transfer_is_a_copy(simd: bool) -> None:
    """identical_transfers: three transfers, three ``memory.copy``; a graph with none, none."""
    assert emit_wat(GRAPHS["identical_transfers"](), simd=simd).count("memory.copy") == 3
    assert "memory.copy" not in emit_wat(GRAPHS["spaces_params"](), simd=simd)


@pytest.mark.parametrize("simd", [False, True], ids=["scalar", "simd"])
def test_golden_transfer_wat(simd: bool, golden: Callable[[str, str], None]) -> None:
    text = emit_wat(golden_transfer(), simd=simd)
    golden(f"wasm/transfer_moved{'.simd' if simd else ''}.wat", text)
    wasmtime = pytest.importorskip("wasmtime")
    assert wasmtime.wat2wasm(text) == compile_functions(golden_transfer(), simd).wasm


def test_inputs_hold_payloads(cases: list[Case]) -> None:
    """The inputs carry NaNs with payloads (what a copy through float registers could lose)."""
    x: Any = cases[0][1]["x"]
    bits = np.asarray(x).view(np.uint32)
    nan = (bits & 0x7F800000) == 0x7F800000
    assert ((bits & 0x007FFFFF) != 0)[nan].any()
