"""The pytest plugin: the assert_deterministic fixture, its plugins (arguments and ini options),
its exit-2 input errors, the test node id in --keracheck-report, and repro commands that run as
printed -- each run in a sub-session with pytester, so a failing check is seen as a user sees it."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

pytest_plugins = ["pytester"]

PLUGINS = Path(__file__).parent / "plugins" / "fake_targets.py"
MINSS = f"{PLUGINS}:Minss"
PLANTED_PASSES = Path(__file__).parents[1] / "quality" / "planted_passes.py"

TESTS = f'''
import numpy as np

SOURCE = """
export fn f(a: f32[4], b: f32[4]) -> f32[4] {{ min(a, b) }}
"""

def test_agrees(assert_deterministic):
    cases = assert_deterministic("export fn g(x: i32[3]) -> i32[3] {{ x * x }}", targets=["ref"])
    assert len(cases) == 1 and cases[0]["function"] == "g"

def test_planted_divergence(assert_deterministic):
    assert_deterministic(SOURCE, targets=["ref"], backend_plugins=["{MINSS}"])

def test_wrong_inputs(assert_deterministic):
    good = np.zeros((3, 4), np.float32)
    assert_deterministic(
        SOURCE, targets=["ref"], inputs={{"a": np.zeros((3, 2), np.float32), "b": good, "c": 1}}
    )

def test_wrong_dtype(assert_deterministic):
    assert_deterministic(SOURCE, targets=["ref"], inputs={{"a": np.zeros((3, 4)), "f.b": np.zeros((3, 4), np.float32)}})

def test_bad_plugin_spec(assert_deterministic):
    assert_deterministic(SOURCE, targets=["ref"], backend_plugins=["no_such_file.py:X"])

def test_missing_path(assert_deterministic):
    assert_deterministic("corpora/no_such_case.kera", targets=["ref"])

def test_missing_keg(assert_deterministic, tmp_path):
    assert_deterministic(tmp_path / "missing.keg", targets=["ref"])

def test_compile_error(assert_deterministic):
    assert_deterministic("export fn f(x: f32) -> f32 {{ y }}\\n", targets=["ref"])
'''


def test_fixture_passes_fails_and_reports_node_ids(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user=TESTS)
    report = pytester.path / "kc.json"
    result = pytester.runpytest_subprocess(f"--keracheck-report={report}", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=7)
    result.stdout.fnmatch_lines(
        [
            "*_ test_planted_divergence _*",
            "keracheck: a new divergence (exit 1 in keracheck run)",
            "*ref vs minss*",
            "*_ test_wrong_inputs _*",
            "keracheck: a usage or input error (exit 2 in keracheck run)",
            "  inputs given to assert_deterministic: 'f': input 'a' has shape (3, 2),"
            " expected (N, 4)",
            "  inputs given to assert_deterministic: 'c' names no parameter of 'f'",
            "*_ test_wrong_dtype _*",
            "keracheck: a usage or input error (exit 2 in keracheck run)",
            "*'f': input 'a' has dtype float64, expected f32",
            "*_ test_bad_plugin_spec _*",
            "keracheck: a usage or input error (exit 2 in keracheck run)",
            "  plugin file 'no_such_file.py' does not exist",
            "*_ test_missing_path _*",
            "keracheck: a usage or input error (exit 2 in keracheck run)",
            "  corpora/no_such_case.kera: no such file (a path was given, not source)",
            "*_ test_missing_keg _*",
            "  */missing.keg: no such file (a path was given, not source)",
            "*_ test_compile_error _*",
            "keracheck: a usage or input error (exit 2 in keracheck run)",
            "  .keracheck/pytest/*.kera:1:*unknown name 'y'*",
        ]
    )
    assert "Traceback" not in result.stdout.str() and "InputError" not in result.stdout.str()
    doc = json.loads(report.read_text())
    assert doc["schemaVersion"] == 1 and doc["summary"]["exitCode"] == 1
    assert {c["function"]: c["nodeId"] for c in doc["cases"]} == {
        "g": "test_user.py::test_agrees",
        "f": "test_user.py::test_planted_divergence",
    }
    assert [e["nodeId"] for e in doc["errors"]] == [
        "test_user.py::test_wrong_inputs",
        "test_user.py::test_wrong_inputs",
        "test_user.py::test_wrong_dtype",
        "test_user.py::test_bad_plugin_spec",
        "test_user.py::test_missing_path",
        "test_user.py::test_missing_keg",
        "test_user.py::test_compile_error",
    ]
    assert doc["summary"]["inputErrors"] == 7
    assert shlex.split(doc["run"]["command"])[0] == "pytest"
    assert f"--keracheck-report={report}" in shlex.split(doc["run"]["command"])
    jsonschema = pytest.importorskip("jsonschema", reason="pip install jsonschema")
    from test_formats import schema_validator

    schema_validator(jsonschema, "run-v1.json").validate(doc)


REPRO_TESTS = """
import numpy as np
from kera import frontend

SOURCE = "export fn mins(x: f32[8], y: f32[8]) -> f32[8] { min(x, y) }\\n"

def test_generated_inputs(assert_deterministic):
    assert_deterministic(SOURCE, targets=["ref"], seed=5, n=16)

def test_given_inputs(assert_deterministic):
    x = np.array([[0.0, -0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]], np.float32)
    assert_deterministic(SOURCE, targets=["ref"], inputs={"x": -x, "mins.y": x})

def test_a_graph(assert_deterministic):
    graph = frontend.compile_source(SOURCE).graph
    assert_deterministic(graph, targets=["ref"], input_profile="mixed")

def test_a_file_of_the_project(assert_deterministic):
    assert_deterministic("kernels/mins.kera", targets=["ref"])

def test_a_pass_plugin(assert_deterministic):
    source = "export fn addz(x: f32[8]) -> f32[8] { x + 0.0 }\\n"
    assert_deterministic(source, targets=["ref"], pass_plugins=["PASS_SPEC"])
""".replace("PASS_SPEC", f"{PLANTED_PASSES}:AddZero")


def test_printed_repro_commands_run_as_printed(pytester: pytest.Pytester) -> None:
    """Source text, given inputs, a Graph object, a project file and a pass plugin, with the
    back-end plugin from the ini file (a path relative to it): each failure prints a repro
    command, and that command, run as printed in the same folder, reproduces the divergence
    on the same inputs."""
    plugins = pytester.mkdir("plugins")
    (plugins / "fake_targets.py").write_text(PLUGINS.read_text())
    kernels = pytester.mkdir("kernels")
    (kernels / "mins.kera").write_text(
        "export fn mins(x: f32[8], y: f32[8]) -> f32[8] { min(x, y) }\n"
    )
    pytester.makeini("[pytest]\nkeracheck_backend_plugins = plugins/fake_targets.py:Minss\n")
    pytester.makepyfile(test_repro=REPRO_TESTS)
    report = pytester.path / "kc.json"
    result = pytester.runpytest_subprocess(f"--keracheck-report={report}", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=5)
    doc = json.loads(report.read_text())
    assert len(doc["cases"]) == 5 and {c["verdict"] for c in doc["cases"]} == {"diverge"}
    spec = f"{pytester.path / 'plugins' / 'fake_targets.py'}:Minss"
    with ThreadPoolExecutor(max_workers=len(doc["cases"])) as pool:  # subprocesses
        reruns = list(pool.map(lambda c: _run_as_printed(c["repro"], pytester.path), doc["cases"]))
    for case, (code, again) in zip(doc["cases"], reruns, strict=True):
        command = case["repro"]
        assert f"repro: {command}" in result.stdout.str()
        assert spec in command, command
        assert code == 1, (case["nodeId"], command, again)
        (case2,) = again["cases"]
        assert case2["verdict"] == "diverge"
        assert case2["inputs"]["digests"] == case["inputs"]["digests"], case["nodeId"]
    given = next(c for c in doc["cases"] if c["nodeId"].endswith("test_given_inputs"))
    assert given["inputs"]["source"] == "npz" and "--seed" not in given["repro"]
    graph = next(c for c in doc["cases"] if c["nodeId"].endswith("test_a_graph"))
    assert "--input-profile mixed" in graph["repro"] and ".keg " in graph["repro"]
    own = next(c for c in doc["cases"] if c["nodeId"].endswith("test_a_file_of_the_project"))
    assert own["path"] == "kernels/mins.kera"  # the user's own file, not a copy
    planted = next(c for c in doc["cases"] if c["function"] == "addz")
    assert planted["divergences"][0]["kind"] == "opt-level"
    assert f"--pass-plugin {PLANTED_PASSES}:AddZero" in planted["repro"]
    assert (pytester.path / ".keracheck" / "pytest" / ".gitignore").read_text() == "*\n"


def _run_as_printed(command: str, cwd: Path) -> tuple[int, dict[str, Any]]:
    """Run a printed ``keracheck ...`` command with this interpreter's keracheck, asking for
    JSON so the verdict can be read."""
    argv = shlex.split(command)
    assert argv[0] == "keracheck"
    proc = subprocess.run(
        [sys.executable, "-m", "keracheck.cli", *argv[1:], "--format", "json"],
        cwd=cwd, capture_output=True, text=True, env=dict(os.environ, NO_COLOR="1"), check=False,
    )  # fmt: skip
    return proc.returncode, json.loads(proc.stdout)


def test_a_case_that_cannot_be_written_is_an_input_error(pytester: pytest.Pytester) -> None:
    """The case file cannot be written (here a file stands where its folder goes): exit 2
    with the reason, not a traceback."""
    (pytester.path / ".keracheck").mkdir()
    (pytester.path / ".keracheck" / "pytest").write_text("not a folder")
    pytester.makepyfile(
        test_w="def test_w(assert_deterministic):\n"
        '    assert_deterministic("export fn g(x: i32) -> i32 { x }", targets=["ref"])\n'
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "keracheck: a usage or input error (exit 2 in keracheck run)",
            "  */.keracheck/pytest: cannot write the case: *",
        ]
    )
    assert "Traceback" not in result.stdout.str()
