"""Memory of a long fuzz campaign stays bounded (issue 20, aim 5).

* ``oracle.Bounded``, the oracle's caches (results per target, generated cases, verdicts):
  past its entry or byte bound the oldest half goes, newer entries stay, and its byte count
  follows what it holds.
* An oracle whose caches are far smaller than the graphs checked still answers every check
  right (a result evicted is computed again), and its caches stay within their bounds.
* A campaign runs discovery runs of at most ``engine.RUN_EXAMPLES`` examples (Hypothesis keeps
  every example of a run in memory) and goes on with the next run, to ``max_examples``.
* ``bench/bench_scale.py``'s copies of a corpus file rename the parameters (a function without
  any gets an unused one), compile, and have fingerprints of their own.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kera.dtypes import DType
from kera.ir import Function, FunctionBuilder
from keracheck.collect import compile_file
from keracheck.fuzz import engine, oracle, select_targets
from keracheck.fuzz.engine import Campaign, Options
from keracheck.fuzz.oracle import Bounded, Oracle

ROOT = Path(__file__).resolve().parents[2]


def test_bounded_drops_the_oldest_half_past_its_entry_bound() -> None:
    b: Bounded[int, bytes] = Bounded(len, entries=10, max_bytes=1 << 30)
    for i in range(11):
        b[i] = b"x" * 8
    assert len(b) == 5 and b.evicted == 6
    assert [i in b for i in range(11)] == [False] * 6 + [True] * 5
    assert b.get(10) == b"x" * 8 and b.get(0) is None
    assert b.bytes == 5 * (8 + oracle.ENTRY_BYTES)


def test_bounded_drops_the_oldest_past_its_byte_bound_and_counts_replacements() -> None:
    per = 1000 + oracle.ENTRY_BYTES
    b: Bounded[str, bytes] = Bounded(len, entries=1000, max_bytes=4 * per)
    for k in "abcd":
        b[k] = b"y" * 1000
    b["a"] = b"z" * 1000  # replacing an entry does not count it twice
    assert b.bytes == 4 * per and len(b) == 4
    b["e"] = b"y" * 1000
    assert b.bytes <= 2 * per and "e" in b and "a" in b and "b" not in b


def _adder(k: int) -> Function:
    b = FunctionBuilder(f"f{k}")
    x = b.param("x", DType.I32, [4])
    return b.build(b.op("add", x, b.const(k, DType.I32, [4])))


def test_an_oracle_with_tiny_caches_still_answers_right(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(oracle, "MAX_ENTRIES", 6)
    targets, _ = select_targets(["ref"], [])
    o = Oracle(targets, n_inputs=8, isolate=False)
    try:
        fns = [_adder(k) for k in range(20)]
        for fn in fns:
            assert o.check([fn]) == []
        for fn in fns[:3]:  # long evicted: run again, same answer
            case = o.case(fn)
            (got,) = o.runners["ref"].run([case])
            assert not isinstance(got, str) and got is not None
            x = case.inputs["x"]
            np.testing.assert_array_equal(got[0], x + np.int32(int(fn.name[1:])))
        for table in (o.cases, o.verdicts, o.runners["ref"].cache):
            assert len(table) <= 6 and table.evicted > 0
    finally:
        o.close()


def test_a_campaign_goes_on_past_a_discovery_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "RUN_EXAMPLES", 2)
    targets, _ = select_targets(["ref"], [])
    opts = Options(max_examples=5, seed=0, out=None, isolate=False, batch_size=3, inputs=8)
    c = Campaign(targets, opts).run()
    assert c.stats.examples == 5 and c.stats.runs == 3
    assert c.stopped == "examples"


def test_bench_scale_copies_are_new_functions(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "bench"))  # bench_scale imports bench_memory beside it
    try:
        spec = importlib.util.spec_from_file_location("bench_scale", ROOT / "bench/bench_scale.py")
        assert spec is not None and spec.loader is not None
        bench_scale: Any = importlib.util.module_from_spec(spec)
        sys.modules["bench_scale"] = bench_scale  # its dataclasses look their module up
        spec.loader.exec_module(bench_scale)
    finally:
        sys.path.remove(str(ROOT / "bench"))
        sys.modules.pop("bench_scale", None)
    src = tmp_path / "src" / "a.kera"
    src.parent.mkdir()
    src.write_text(
        "export fn f(a: f32[2], b: f32[2]) -> f32[2] {\n    a + b\n}\n\n"
        "export fn g() -> i32 {\n    1i32\n}\n"
    )
    assert "a_s1: f32[2], b_s1: f32[2]" in bench_scale.renamed_source(src.read_text(), "_s1")
    cases = bench_scale.make_corpus([str(src.parent)], 3, tmp_path / "out")
    assert cases == 6
    prints = {
        fn.fingerprint
        for j in range(3)
        for fn in compile_file(str(tmp_path / "out" / f"copy{j:03d}" / "a.kera")).functions.values()
    }
    assert len(prints) == 6
