"""The pytest plugin: the assert_deterministic fixture and --keracheck-report, run in a
sub-session with pytester so that a failing determinism check is seen as a user would see it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

PLUGINS = str(Path(__file__).parent / "plugins" / "fake_targets.py")

TESTS = f'''
import pytest

SOURCE = """
export fn f(a: f32[4], b: f32[4]) -> f32[4] {{ min(a, b) }}
"""

def test_agrees(assert_deterministic):
    cases = assert_deterministic("export fn g(x: i32[3]) -> i32[3] {{ x * x }}", targets=["ref"])
    assert len(cases) == 1 and cases[0]["function"] == "g"

def test_planted_divergence(assert_deterministic, monkeypatch):
    import keracheck.harness as h
    real = h.select_targets
    def with_plugin(opts):
        opts.plugins = {{"minss": "{PLUGINS}:Minss"}}
        return real(opts)
    monkeypatch.setattr(h, "select_targets", with_plugin)
    assert_deterministic(SOURCE, targets=["ref"])
'''


def test_fixture_passes_and_fails(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user=TESTS)
    report = pytester.path / "kc.json"
    result = pytester.runpytest_subprocess(f"--keracheck-report={report}", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*DIVERGE*", "*ref vs minss*"])
    doc = json.loads(report.read_text())
    assert doc["schemaVersion"] == 1
    assert {c["function"] for c in doc["cases"]} == {"g", "f"}


def test_a_wrong_path_is_a_clear_failure(tmp_path: Path) -> None:
    """A path that does not exist is reported as one, not compiled as Kera source."""
    from keracheck.harness import check_deterministic

    cases, failure = check_deterministic("corpora/no_such_case.kera", ["ref"], None, 4, 0)
    assert cases == [] and failure == (
        "corpora/no_such_case.kera: no such file (a path was given, not source)"
    )
    cases, failure = check_deterministic(tmp_path / "missing.keg", ["ref"], None, 4, 0)
    assert cases == [] and failure is not None and "missing.keg: no such file" in failure
    bad = tmp_path / "bad.kera"
    bad.write_text("export fn f(x: f32) -> f32 { y }\n")
    cases, failure = check_deterministic(str(bad), ["ref"], None, 4, 0)
    assert cases == [] and failure is not None and "unknown name 'y'" in failure
