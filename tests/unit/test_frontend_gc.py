"""The front end and the cyclic GC: what a compile leaves for collections to walk.

See docs/architecture.md ("Speed of the core and the front end"): a compile makes no cyclic
garbage, and a big source's objects go straight to the oldest generation.  These are about
objects, never about time.
"""

from __future__ import annotations

import gc
import subprocess
import sys
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from kera import frontend
from kera.frontend import compile_source

CORPORA = Path(__file__).resolve().parents[2] / "corpora"


@pytest.fixture
def gc_enabled() -> Iterator[None]:
    """The GC on, as a program has it (whatever the test runner left)."""
    was = gc.isenabled()
    gc.enable()
    try:
        yield
    finally:
        if not was:
            gc.disable()


@pytest.mark.parametrize("name", ["calls.kera", "control.kera", "spaces.kera"])
def test_a_compile_leaves_no_cyclic_garbage(name: str) -> None:
    """Everything a compile drops is freed by reference counting; nothing waits for the GC
    (a builder holding bound methods of itself once made each compile a cycle)."""
    data = (CORPORA / name).read_bytes()
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        result = compile_source(data, name)
        assert gc.collect() == 0
    finally:
        if was:
            gc.enable()
    assert result.ok


def _big_source() -> bytes:
    data = (CORPORA / "calls.kera").read_bytes()
    return data * (frontend.PROMOTE_BYTES // len(data) + 1)


def _generation_of(obj: object) -> int | None:
    for gen in range(3):
        if any(o is obj for o in gc.get_objects(generation=gen)):
            return gen
    return None


def test_a_big_compile_goes_to_the_oldest_generation(gc_enabled: None) -> None:
    big = _big_source()
    result = compile_source(big, "big.kera")
    assert result.diagnostics  # the functions are defined many times: E0103
    assert _generation_of(result.tree) == 2
    assert gc.get_freeze_count() == 0


def test_a_small_compile_stays_young(gc_enabled: None) -> None:
    data = (CORPORA / "calls.kera").read_bytes()
    assert len(data) < frontend.PROMOTE_BYTES
    gc.collect()
    result = compile_source(data, "calls.kera")
    assert _generation_of(result.tree) in (0, 1)


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_the_callers_young_garbage_is_not_promoted(gc_enabled: None) -> None:
    """A big compile promotes what is alive, not the caller's young cyclic garbage: that is
    collected first, so it does not wait for a full collection (or the interpreter's exit,
    where objects with finalisers -- a wasmtime engine's -- may find their modules gone)."""
    gc.collect()
    dropped = _Cycle()
    alive = weakref.ref(dropped)
    del dropped
    assert alive() is not None  # a cycle: only the GC frees it
    compile_source(_big_source(), "big.kera")
    assert alive() is None


def test_the_callers_frozen_objects_stay_frozen(gc_enabled: None) -> None:
    """A process that froze objects (the language server) keeps them frozen."""
    held = [object()]
    gc.freeze()
    try:
        assert _generation_of(held) is None  # frozen: in no generation
        result = compile_source(_big_source(), "big.kera")
        assert _generation_of(held) is None
        assert _generation_of(result.tree) in (0, 1)  # not promoted either
    finally:
        gc.unfreeze()


def test_the_benchmark_runs_as_documented() -> None:
    """``bench/bench_frontend.py`` (bench/README.md), on a small source: every stage line,
    the GC-on line last (figures only: nothing here looks at times)."""
    bench = Path(__file__).resolve().parents[2] / "bench" / "bench_frontend.py"
    out = subprocess.run(
        [sys.executable, str(bench), "--lines", "200", "--repeat", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.splitlines()
    names = [line.split(":")[0].strip() for line in out[1:]]
    assert names == ["lex", "parse", "lex+parse+tree", "check+build", "total", "total, GC on"]
    assert all("lines/s" in line for line in out[1:])
