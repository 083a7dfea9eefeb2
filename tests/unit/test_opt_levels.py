"""``keracheck run --opt-levels`` and ``--pass-plugin``: level variants as columns, the
``opt-level`` divergence (rule KC005) naming the culprit pass found by running every
intermediate graph on the same target, usage errors, repro commands, and the report schema."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from keracheck import harness
from keracheck.formats import render, rule_for
from keracheck.opt_levels import LevelError, level_id, parse_levels, split_id
from keracheck.options import Options

ROOT = Path(__file__).resolve().parents[2]
FAKES = str(ROOT / "tests/unit/plugins/fake_targets.py")
PLANTED = str(ROOT / "tests/quality/planted_passes.py")
SRC = """\
export fn f(a: f32[4], b: f32[4]) -> f32[4] {
    (a + b) + 0.1
}
export fn g(x: i32[4]) -> i32[4] {
    (x + 0i32) * 3i32
}
"""


@pytest.fixture
def src(tmp_path: Path) -> Path:
    p = tmp_path / "p.kera"
    p.write_text(SRC)
    return p


def _run(src: Path, **kw: Any) -> tuple[dict[str, Any], int]:
    plugins = {"clone": f"{FAKES}:Clone"}
    opts = Options(targets=["ref", "clone"], plugins=plugins, cache_dir=None, **kw)
    return harness.run([str(src)], opts)


def test_levels_parse() -> None:
    assert parse_levels("2,0") == (0, 2) and parse_levels([0, 1]) == (0, 1)
    with pytest.raises(LevelError, match="'3' is not an optimisation level"):
        parse_levels("0,3")
    assert level_id("cpu", 0) == "cpu" and level_id("cpu", 2) == "cpu@O2"
    assert split_id("cpu:avx2@O2") == ("cpu:avx2", 2) and split_id("ref") == ("ref", 0)


def test_every_target_at_every_level_agrees(src: Path) -> None:
    doc, code = _run(src, opt_levels=(0, 2))
    assert code == 0, render("text", doc)
    case = doc["cases"][0]
    assert list(case["targets"]) == ["ref", "clone", "ref@O2", "clone@O2"]
    assert all(t["status"] == "ok" for t in case["targets"].values())
    assert [t["id"] for t in doc["targets"]][-2:] == ["ref@O2", "clone@O2"]


def test_an_unsafe_pass_is_an_opt_level_divergence_with_its_culprit(src: Path) -> None:
    doc, code = _run(src, opt_levels=(0, 2), pass_plugins=[f"{PLANTED}:Reassociate"], n=256, seed=3)
    assert code == 1
    f = next(c for c in doc["cases"] if c["function"] == "f")
    kinds = {(tuple(d["targets"]), d["kind"], d.get("pass")) for d in f["divergences"]}
    assert (("ref", "ref@O2"), "opt-level", "planted-reassociate") in kinds
    assert (("clone", "clone@O2"), "opt-level", "planted-reassociate") in kinds
    assert all(rule_for(d) == "KC005" for d in f["divergences"])
    assert "--opt-levels 0,2" in f["repro"] and "--pass-plugin" in f["repro"]
    text = render("text", doc)
    assert "clone vs clone@O2 (changed by pass 'planted-reassociate')" in text
    sarif = json.loads(render("sarif", doc))
    assert "KC005" in {r["ruleId"] for r in sarif["runs"][0]["results"]}
    import jsonschema
    from test_formats import schema_validator

    schema_validator(jsonschema, "run-v1.json").validate(doc)


def test_without_levels_ref_checks_o0_against_o2_in_process(src: Path) -> None:
    doc, code = _run(src, pass_plugins=[f"{PLANTED}:Reassociate"], n=256, seed=3)
    assert code == 1
    assert list(doc["cases"][0]["targets"]) == ["ref", "clone"]  # no extra columns
    f = next(c for c in doc["cases"] if c["function"] == "f")
    (d,) = {json.dumps(x["targets"]): x for x in f["divergences"]}.values()
    assert d["targets"] == ["ref", "ref@O2"] and d["pass"] == "planted-reassociate"
    clean, code = _run(src)
    assert code == 0 and not any(c["divergences"] for c in clean["cases"])


def test_cli_usage_errors(src: Path, tmp_path: Path) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "keracheck.cli", *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
        )

    bad = cli("run", str(src), "--targets", "ref", "--opt-levels", "0,5")
    assert bad.returncode == 2 and "'5' is not an optimisation level" in bad.stderr
    missing = cli("run", str(src), "--targets", "ref", "--pass-plugin", "nowhere.py:X")
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    fuzz = cli("fuzz", "--targets", "ref", "--pass-plugin", f"{PLANTED}:Reassociate")
    assert fuzz.returncode == 2 and "--pass-plugin needs --opt-levels" in fuzz.stderr
