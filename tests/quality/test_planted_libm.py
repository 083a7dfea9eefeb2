"""Planted host-libm back ends (``planted.HostExp``, ``HostTanh``, ``HostLog``): a target that
computes a math-library call with numpy's ``np.exp`` ... instead of the contract's algorithm must
be caught within a fixed example budget and reduced to one call of that function on at most
4 input elements, its signature naming the call (``exp``), not one of its ~40 inner ops.

Generated graphs hold calls as units (``keracheck.fuzz.calls``), their parameters get inputs
from the function's interesting ranges, and the campaign's coverage focus makes sure each
(function, dtype) is exercised early; the issue's aim is "within 30 s", which these tests do
not assert (times depend on the machine): the budget is in examples.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kera import mathlib
from kera.dtypes import DType
from kera.ir import Function, make_node, param
from keracheck.fuzz import calls, select_targets
from keracheck.fuzz.engine import Campaign, Finding, Options
from keracheck.fuzz.oracle import Oracle
from keracheck.targets import Target

sys.path.insert(0, str(Path(__file__).parent))
import planted

PLUGIN = str(Path(__file__).parent / "planted.py")
BUDGET = 100  # examples (batches of ~24 graphs)
MOST_ELEMENTS = 4


def _targets(cls: type[planted.Planted]) -> list[Target]:
    targets, notes = select_targets(["ref"], [f"{PLUGIN}:{cls.__name__}"])
    assert not notes and [t.id for t in targets] == ["ref", cls.name]
    return targets


@pytest.mark.parametrize("cls", planted.LIBM, ids=lambda c: c.__name__)
def test_host_libm_is_caught_and_reduced_to_one_call(
    cls: type[planted.HostLibm], tmp_path: Path
) -> None:
    (name,) = cls.functions
    ops, klass, _ = planted.PLANTED[cls]

    def until(f: Finding) -> bool:
        return f.signature.op in ops and f.signature.cls == klass

    opts = Options(max_examples=BUDGET, seed=0, out=str(tmp_path), isolate=False, until=until)
    campaign = Campaign(_targets(cls), opts).run()
    hits = [f for f in campaign.findings.values() if until(f) and f.final is not None]
    assert hits, f"not caught in {BUDGET} examples; found {[str(s) for s in campaign.findings]}"
    f = hits[0]
    assert f.final is not None and f.reproducer is not None
    fn = f.final.fn
    (call,) = calls.analyse(fn).calls.values()
    assert call.name == name and fn.results == (call.result,) and f.ops_after == 1
    elements = f.final.case.rows * sum(p.type.size for p in fn.params)
    assert 1 <= elements <= MOST_ELEMENTS, f"{f.final.case.rows} rows of {fn.params}"
    text = Path(f.reproducer).read_text(encoding="utf-8")
    assert f"= {name}(p0);" in text and text.count("let ") == 1, text


def test_the_culprit_is_the_call_not_an_inner_op() -> None:
    """exp(p0) + p1: the add agrees once exp's result does, so the call is the culprit."""
    p0, p1 = param(0, "p0", DType.F32, (2,)), param(1, "p1", DType.F32, (2,))
    e = mathlib.exp(p0)
    fn = Function("f", [p0, p1], [make_node("add", [e, p1])])
    oracle = Oracle(_targets(planted.HostExp), isolate=False)
    try:
        found = oracle.check([fn])
    finally:
        oracle.close()
    assert found and {d.signature.op for d in found} == {"exp"}
    assert all(d.node is e for d in found)
    assert "ulp" in {d.signature.cls for d in found}
