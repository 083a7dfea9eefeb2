"""The workflow written out in ``docs/ci-github-actions.md`` ("Without the action"): its gate
and verify steps run here under ``bash -e`` as the runner runs them, in a small project with the
documented layout (``corpora/``, ``reports/keracheck.pub``, the key as a secret), and produce
the reports it promises from one run, with the build cache in the folder the cache step saves.
The project's ``[tool.keracheck]`` keeps the run to ``ref`` and ``cpu`` (the workflow requires
both), so this needs gcc."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from yamlsubset import load

pytestmark = pytest.mark.toolchain

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "ci-github-actions.md"
BIN = Path(sys.executable).parent


def written_out() -> dict[str, Any]:
    """The documented workflow that runs keracheck itself (not through ``uses:``)."""
    flows = [load(b) for b in re.findall(r"```yaml\n(.*?)```", DOCS.read_text(), re.S)]
    (flow,) = [f for f in flows if "keracheck run" in json.dumps(f)]
    return flow


def named(flow: dict[str, Any], name: str) -> dict[str, Any]:
    (job,) = flow["jobs"].values()
    (step,) = [s for s in job["steps"] if s.get("name") == name]
    return step


def fill(value: str, known: dict[str, str]) -> str:
    def one(m: re.Match[str]) -> str:
        assert m[1] in known, f"the test does not know the expression {m[1]!r}"
        return known[m[1]]

    return re.sub(r"\$\{\{\s*([^}]+?)\s*\}\}", one, value)


def test_the_documented_gate_runs_once_and_writes_every_report(tmp_path: Path) -> None:
    from keracheck.targets.cpu import CpuTarget

    reason = CpuTarget(None).available()
    if reason is not None:
        pytest.skip(f"cpu unavailable: {reason}")
    ws = tmp_path / "workspace"
    (ws / "corpora").mkdir(parents=True)
    (ws / "corpora" / "mins.kera").write_text(
        "export fn mins(x: f32[8], y: f32[8]) -> f32[8] { min(x, y) }\n"
    )
    (ws / "pyproject.toml").write_text('[tool.keracheck]\ntargets = ["ref", "cpu"]\ninputs = 16\n')
    env0 = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "KERACHECK"))}
    env0 |= {"PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "NO_COLOR": "1"}
    subprocess.run(
        ["keracheck", "keygen", "--out", str(ws / "reports")], env=env0, check=True,
        capture_output=True,
    )  # fmt: skip
    key = (ws / "reports" / "keracheck.key").read_text()
    (ws / "reports" / "keracheck.key").unlink()  # only the public key is committed
    known = {
        "github.workspace": str(ws),
        "secrets.KERACHECK_KEY": key,
        "secrets.KERACHECK_KEY_PASSWORD": "",
    }
    flow = written_out()
    summary = tmp_path / "summary.md"
    env0 |= {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)}
    for name in ("Determinism gate", "Verify the signed report"):
        step = named(flow, name)
        env = env0 | {k: fill(v, known) for k, v in (step.get("env") or {}).items()}
        proc = subprocess.run(
            ["bash", "-e", "-c", step["run"]], cwd=ws, env=env, capture_output=True, text=True,
            check=False,
        )  # fmt: skip
        assert proc.returncode == 0, (name, proc.stdout[-1500:], proc.stderr[-1500:])
    out = ws / "out"
    doc = json.loads((out / "run.json").read_text())
    assert doc["run"]["repeat"] == 2 and doc["run"]["targets"] == ["ref", "cpu"]
    assert [c["verdict"] for c in doc["cases"]] == ["agree"]
    assert json.loads((out / "keracheck.sarif").read_text())["version"] == "2.1.0"
    assert "<html" in (out / "keracheck.html").read_text()
    assert (out / "keracheck.intoto.jsonl").stat().st_size > 0
    assert "keracheck" in summary.read_text()  # --format github wrote the job summary
    cache = named(flow, "Cache builds")["with"]["path"]
    gate_env = named(flow, "Determinism gate")["env"]
    assert fill(gate_env["KERACHECK_CACHE"], known) == str(ws / cache)
    assert any((ws / cache).iterdir())  # the builds went where the cache step saves
