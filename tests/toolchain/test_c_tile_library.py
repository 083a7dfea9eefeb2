"""The C targets' tile library on real compilers (issue 20, ``kera.backends.c.tiles``).

A unit built by ``cpu``/``cpu:<isa>``/``cpu-aarch64``/``cpu-riscv64`` declares its tile helpers
and links one object holding all of them, built once per compiler, ISA level, flags and kind
and cached by content.  The bits must be those of a self-contained unit (``tiles=False``), on
the corpus and on fuzzed graphs, compared byte for byte; the library is built once and reused,
a damaged cached one is rebuilt, concurrent builders compile it once, and a library gcc
rejects is a BackendError for every case of the batch, not a traceback or a bisection storm.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings

from kera import frontend
from kera.backends import c
from kera.backends.c import tiles
from kera.dtypes import DType
from kera.ir import Function, FunctionBuilder
from keracheck import inputs
from keracheck.fuzz import policies
from keracheck.fuzz.strategies import Drawn, batches
from keracheck.runners import gcc
from keracheck.target import BackendError, Inputs, Outputs
from keracheck.targets.cpu import CpuTarget, QemuTarget

pytestmark = pytest.mark.toolchain

TARGETS = ["cpu:scalar", "cpu:sse2", "cpu:avx2", "cpu:avx512", "cpu-aarch64", "cpu-riscv64"]
CORPUS = Path(__file__).parents[2] / "corpora"


def make_target(name: str, tiles: bool = True) -> CpuTarget | QemuTarget:
    if name.startswith("cpu-"):
        return QemuTarget(name[4:], tiles=tiles)
    return CpuTarget(name.partition(":")[2] or None, tiles=tiles)


def usable(name: str, tiles: bool = True) -> CpuTarget | QemuTarget:
    t = make_target(name, tiles)
    reason = t.available()
    if reason is not None:
        pytest.skip(f"{name} unavailable: {reason}")
    return t


@cache
def corpus() -> tuple[Function, ...]:
    fns: dict[str, Function] = {}
    for path in sorted(CORPUS.rglob("*.kera")):
        graph = frontend.compile_source(path.read_text(encoding="utf-8"), str(path)).graph
        assert graph is not None
        fns |= {fn.fingerprint: fn for fn in graph.functions.values()}
    return tuple(fns.values())


@cache
def fuzzed(count: int) -> tuple[Function, ...]:
    """The graphs of the first ``count`` batches a seed-0 fuzz campaign draws."""
    out: list[Function] = []

    @settings(database=None, deadline=None, max_examples=count, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @seed(0)
    @given(batches(c.SUPPORTED, policies.DEFAULT))
    def draw(batch: list[Drawn]) -> None:
        out.extend(d.fn for d in batch if d.fn is not None)

    draw()
    return tuple(out)


def same_bytes(fns: tuple[Function, ...], with_lib: Any, alone: Any) -> None:
    """Every case run by both targets: the same outputs, byte for byte (or both an error)."""
    cases: list[tuple[Function, Inputs]] = [(fn, inputs.generate(fn, 7, 1)) for fn in fns]
    got: list[Outputs | Exception] = with_lib.run_many(cases)
    want: list[Outputs | Exception] = alone.run_many(cases)
    bad = []
    for (fn, _), g, w in zip(cases, got, want, strict=True):
        if isinstance(g, Exception) or isinstance(w, Exception):
            if not (isinstance(g, Exception) and isinstance(w, Exception)):
                bad.append(f"{fn.name}: {g!r} with the library, {w!r} without")
            continue
        for k, (a, b) in enumerate(zip(g, w, strict=True)):
            if a.dtype != b.dtype or a.shape != b.shape or a.tobytes() != b.tobytes():
                bad.append(f"{fn.name} result {k} differs")
    assert not bad, "\n".join(bad[:20])
    assert sum(not isinstance(g, Exception) for g in got) >= len(cases) // 2


class Spy:
    """Counts gcc calls (and can slow them down): library compiles and unit builds apart."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, delay: float = 0.0) -> None:
        self.library: list[list[str]] = []
        self.units: list[list[str]] = []
        self.lock = threading.Lock()
        real: Callable[[list[str], float], None] = gcc._compile

        def spy(argv: list[str], timeout: float) -> None:
            with self.lock:
                is_lib = any(a.endswith(f"{tiles.NAME}.c") for a in argv)
                (self.library if is_lib else self.units).append(argv)
            time.sleep(delay)
            real(argv, timeout)

        monkeypatch.setattr(gcc, "_compile", spy)


def _plus(k: int, dt: DType = DType.I32) -> Function:
    b = FunctionBuilder(f"plus{k}")
    x = b.param("x", dt, [3])
    return b.build(b.op("mul", b.op("add", x, b.const(k, dt, [3])), x))


def _run_plus(t: CpuTarget | QemuTarget, ks: range) -> None:
    x = np.arange(12, dtype=np.int32).reshape(4, 3)
    for k, out in zip(ks, t.run_many([(_plus(k), {"x": x}) for k in ks]), strict=True):
        assert not isinstance(out, Exception), out
        assert np.array_equal(out[0], (x + k) * x)


# ------------------------------------------------------------------------------ the bits


@pytest.mark.parametrize("target", TARGETS)
def test_the_corpus_has_the_same_bits_with_and_without_the_library(target: str) -> None:
    same_bytes(corpus(), usable(target), usable(target, tiles=False))


@pytest.mark.parametrize("target", ["cpu", "cpu:scalar", "cpu-aarch64"])
def test_fuzzed_graphs_have_the_same_bits_with_and_without_the_library(target: str) -> None:
    same_bytes(fuzzed(3), usable(target), usable(target, tiles=False))


def test_units_link_the_library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The units declare the helpers (none defined) and link tiles.o; ``tiles=False`` and
    ``artifacts()`` are self-contained."""
    monkeypatch.setenv("KERACHECK_CACHE", str(tmp_path))
    t = usable("cpu:scalar")
    spy = Spy(monkeypatch)
    _run_plus(t, range(2))
    (argv,) = spy.units
    assert argv[-2].endswith("tiles.o") and argv[-1] == "-lm"
    unit = (Path(argv[-3]).parent.parent / "kera.c").read_text()
    assert 'extern __attribute__((visibility("hidden"))) void k_add_i32_n(' in unit
    assert "static K_NOINLINE void k_add_i32_n(" not in unit
    assert "static K_NOINLINE void k_add_i32_n(" in t.artifacts(_plus(0))["plus0.c"]
    alone = usable("cpu:scalar", tiles=False)
    _run_plus(alone, range(2, 4))
    assert not spy.units[-1][-2].endswith("tiles.o")


# ------------------------------------------------------------------------------ the cache


def test_the_library_is_built_once_and_reused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KERACHECK_CACHE", str(tmp_path))
    t = usable("cpu:scalar")
    spy = Spy(monkeypatch)
    _run_plus(t, range(0))  # nothing to build: no library either
    assert spy.library == []
    t._tile_library()
    assert len(spy.library) == 1
    spy.library.clear()
    _run_plus(t, range(3))
    _run_plus(t, range(3, 20))  # a second batch, in two parts at two CPUs or more
    _run_plus(CpuTarget("scalar"), range(20, 22))  # another target object (a new worker)
    assert spy.library == [] and len(spy.units) >= 3
    assert len({argv[-2] for argv in spy.units}) == 1  # one tiles.o, linked by every unit
    monkeypatch.setenv("KERACHECK_CACHE", str(tmp_path / "cold"))
    _run_plus(t, range(22, 24))
    assert len(spy.library) == 1  # a cold cache builds it, once


def test_a_damaged_library_is_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERACHECK_CACHE", str(tmp_path))
    t = usable("cpu:scalar")
    _run_plus(t, range(2))
    (obj,) = tmp_path.glob("c/*/tiles.o")
    good = obj.read_bytes()
    obj.write_bytes(good[: len(good) // 2])  # truncated: a killed copy, a full disk
    spy = Spy(monkeypatch)
    _run_plus(t, range(2, 4))
    assert len(spy.library) == 1 and obj.read_bytes() == good  # rebuilt, the same bytes
    _run_plus(t, range(4, 6))
    assert len(spy.library) == 1


def test_concurrent_builders_compile_the_library_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = usable("cpu:scalar")
    monkeypatch.setenv("KERACHECK_CACHE", str(tmp_path))
    spy = Spy(monkeypatch, delay=0.3)  # a slow compile: the others arrive while it runs
    got: list[Any] = []

    def build() -> None:
        got.append(t._tile_library())

    threads = [threading.Thread(target=build) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(spy.library) == 1 and len(got) == 4
    assert len({g[0] for g in got}) == 1 and all(g[0].is_file() for g in got)


def test_a_library_gcc_rejects_is_every_cases_backend_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KERACHECK_CACHE", str(tmp_path))
    t = usable("cpu:scalar")  # proven with the real library
    lib = tiles.library("scalar")
    broken = tiles.Library(lib.isa, lib.c + "\n#error the library is broken\n", lib.helpers)
    monkeypatch.setattr(tiles, "library", lambda isa: broken)
    spy = Spy(monkeypatch)
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    outs = t.run_many([(_plus(k), {"x": x}) for k in range(14)])
    for out in outs:
        assert isinstance(out, BackendError), out
        assert "tile library" in str(out) and "the library is broken" in str(out)
    assert len(spy.library) == 1 and spy.units == []  # no unit built, no bisection
    with pytest.raises(BackendError, match="tile library"):
        t.build([_plus(0)])
    _run_plus(usable("cpu:scalar", tiles=False), range(2))  # self-contained units still build
