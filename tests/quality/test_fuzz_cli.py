"""``keracheck fuzz`` end to end: exit codes, JSON output, reproducers that ``keracheck run``
replays, crash isolation in the warm worker processes, usage errors, reproducer merging."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kera.dtypes import DType
from kera.ir import FunctionBuilder
from keracheck.fuzz import calls, reproduce, select_targets
from keracheck.fuzz.engine import Campaign, Options
from keracheck.fuzz.oracle import Case, Divergence, Signature

ROOT = Path(__file__).resolve().parents[2]
PLANTED = str(ROOT / "tests/quality/planted.py")
FAKES = str(ROOT / "tests/unit/plugins/fake_targets.py")


def keracheck(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "keracheck.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "NO_COLOR": "1"},
    )


def fuzz_json(tmp: Path, *args: str) -> tuple[int, dict[str, Any]]:
    res = keracheck("fuzz", "--format", "json", "--out", str(tmp / "out"), *args, cwd=tmp)
    assert res.returncode in (0, 1), res.stderr
    return res.returncode, json.loads(res.stdout)


def test_planted_minss_end_to_end(tmp_path: Path) -> None:
    spec = f"{PLANTED}:Minss"
    code, doc = fuzz_json(
        tmp_path, "--targets", "ref", "--backend-plugin", spec, "--max-examples", "2"
    )
    assert code == 1 and doc["exitCode"] == 1
    assert doc["targets"] == ["ref", "planted-minss"]
    assert doc["stats"]["examples"] == 2 and doc["stats"]["graphs"] > 2
    assert doc["signatures"]
    for s in doc["signatures"]:
        # min/max, or a math-library call whose expansion uses them (exp clamps its argument)
        inner = calls.contract_ops(s["op"]) if s["op"] in calls.NAMES else {s["op"]}
        assert s["targets"] == ["ref", "planted-minss"] and {str(o) for o in inner} & {"min", "max"}
        assert s["count"] >= 1 and s["opsAfter"] == 1
        assert Path(s["reproducer"]).is_file() and Path(s["inputs"]).is_file()
    path = doc["signatures"][0]["reproducer"]
    replay = keracheck(
        "run", path, "--targets", "ref,planted-minss", "--backend-plugin", spec, "--no-cache",
        "--format", "json", cwd=tmp_path,
    )  # fmt: skip
    assert replay.returncode == 1, replay.stderr
    case = json.loads(replay.stdout)["cases"][0]
    assert case["verdict"] == "diverge" and case["inputs"]["source"] == "npz"


def test_a_faithful_target_finds_nothing(tmp_path: Path) -> None:
    code, doc = fuzz_json(
        tmp_path, "--targets", "ref", "--backend-plugin", f"{FAKES}:Clone", "--max-examples", "15"
    )
    assert code == 0 and doc["signatures"] == [] and doc["stats"]["examples"] == 15
    assert not (tmp_path / "out").exists()
    text = keracheck(
        "fuzz", "--targets", "ref", "--backend-plugin", f"{FAKES}:Clone", "--budget", "1",
        cwd=tmp_path,
    )  # fmt: skip
    assert text.returncode == 0 and "no divergence found" in text.stdout


def test_a_crashing_target_is_isolated_and_named(tmp_path: Path) -> None:
    targets, _ = select_targets(["ref"], [f"{PLANTED}:CrashOnSqrt"])
    opts = Options(max_examples=20, out=str(tmp_path), shrink_seconds=3.0)  # isolated workers
    campaign = Campaign(targets, opts).run()
    (f,) = campaign.findings.values()
    assert (f.signature.op, f.signature.cls, f.ops_after) == ("sqrt", "error", 1)
    assert "target process crashed (exit code 9)" in f.example
    others = campaign.stats.unique - f.count  # the other cases of crashed batches ran
    assert others > 0 and campaign.oracle.runners["planted-crash"].cases_run > f.count


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--targets", "ref,nosuch"], "unknown target 'nosuch'"),
        (["--max-examples", "0"], "--max-examples must be at least 1"),
        (["--budget", "-1"], "--budget must be a positive"),
        (["--backend-plugin", "nosuch.py:X"], "does not exist"),
    ],
)
def test_usage_errors_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    res = keracheck("fuzz", *args, cwd=tmp_path)
    assert res.returncode == 2
    assert message in res.stderr


def _divergence(cls: str, row: float) -> Divergence:
    b = FunctionBuilder("fuzz")
    x = b.param("p0", DType.F32)
    node = b.op("min", x, x)
    fn = b.build(node)
    case = Case(fn, {"p0": np.array([row], dtype=np.float32)})
    return Divergence(Signature("ref", "t", "min", cls), case, node, {"examples": []})


def test_a_second_signature_on_the_same_graph_is_merged(tmp_path: Path) -> None:
    first = reproduce.write(tmp_path, _divergence("nan-payload", np.nan), ["found: one"])
    second = reproduce.write(tmp_path, _divergence("signed-zero", -0.0), ["found: two"])
    assert first.path == second.path and second.rows == 2
    text = Path(second.path).read_text(encoding="utf-8")
    assert "// signature: ref|t min nan-payload" in text
    assert "// signature: ref|t min signed-zero" in text
    again = reproduce.write(tmp_path, _divergence("signed-zero", -0.0), ["found: three"])
    assert again.rows == 2  # a row already present is kept once
    assert Path(again.path).read_text(encoding="utf-8").count("signed-zero") == 1


def test_a_declined_graph_is_not_a_divergence(tmp_path: Path) -> None:
    """Backend.declines: the fuzzer does not count a graph past a target's documented limit
    (only min deviates on this target, and it declines every min), and keracheck run reports
    the case unsupported, not an error; a hook that raises declines nothing."""
    code, doc = fuzz_json(
        tmp_path, "--targets", "ref", "--backend-plugin", f"{FAKES}:MinssDeclinesMin",
        "--max-examples", "10",
    )  # fmt: skip
    assert code == 0 and doc["signatures"] == []
    src = tmp_path / "m.kera"
    src.write_text("export fn m(a: f32[4], b: f32[4]) -> f32[4] { min(a, b) }\n")
    res = keracheck(
        "run", str(src), "--targets", "ref,minss-declines,minss-broken-declines",
        "--backend-plugin", f"{FAKES}:MinssDeclinesMin",
        "--backend-plugin", f"{FAKES}:MinssBrokenDeclines", "--no-cache", "--format", "json",
        cwd=tmp_path,
    )  # fmt: skip
    case = json.loads(res.stdout)["cases"][0]
    declined = case["targets"]["minss-declines"]
    assert declined["status"] == "unsupported" and "documented limits" in declined["message"]
    assert case["targets"]["minss-broken-declines"]["status"] == "ok"
    assert case["verdict"] == "diverge" and res.returncode == 1  # the broken hook's min bug
