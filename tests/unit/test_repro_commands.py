"""Every printed repro command runs as printed and reproduces its case's verdict: it carries
the targets that ran (the failing one included), the plugins, the seed and the input count."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from keracheck.cli import main

PLUGINS = Path(__file__).parent / "plugins" / "fake_targets.py"
SOURCE = "export fn mins(x: f32[8], y: f32[8]) -> f32[8] { min(x, y) }\n"


def run_doc(tmp_path: Path, *args: str) -> tuple[int, dict[str, Any]]:
    out = tmp_path / "o.json"
    code = main(["run", *args, "-q", "--no-cache", "--format", "json", "--output", str(out)])
    return code, json.loads(out.read_text())


def rerun(command: str, cwd: Path) -> tuple[int, str]:
    argv = shlex.split(command)
    assert argv[:2] == ["keracheck", "repro"]
    env = dict(os.environ, NO_COLOR="1")
    proc = subprocess.run(
        [sys.executable, "-m", "keracheck.cli", *argv[1:], "--format", "json"],
        cwd=cwd, capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    return proc.returncode, proc.stdout


@pytest.mark.parametrize(
    ("plugin", "extra", "verdict", "code"),
    [
        ("Minss", ("--seed", "7", "--inputs", "40"), "diverge", 1),  # a plugin that diverges
        ("Clone", ("--seed", "3"), "agree", 0),
        ("Broken", (), "error", 3),  # the failing target must be in the command
    ],
)
def test_printed_repro_reproduces_the_verdict(
    plugin: str, extra: tuple[str, ...], verdict: str, code: int, tmp_path: Path
) -> None:
    src = tmp_path / "case.kera"
    src.write_text(SOURCE)
    spec = f"{PLUGINS}:{plugin}"
    got, doc = run_doc(tmp_path, str(src), "--targets", "ref", "--backend-plugin", spec, *extra)
    (case,) = doc["cases"]
    assert case["verdict"] == verdict and got == code
    command = case["repro"]
    assert spec in command and "--targets" in command
    if "--seed" in extra:
        assert f"--seed {extra[1]}" in command
    again, out = rerun(command, tmp_path)
    assert again == code, (command, out[-500:])
    (case2,) = json.loads(out)["cases"]
    assert case2["verdict"] == verdict
    assert case2["inputs"]["digests"] == case["inputs"]["digests"]


def test_repro_with_a_companion_npz(tmp_path: Path) -> None:
    import numpy as np

    src = tmp_path / "case.kera"
    src.write_text(SOURCE)
    x = np.array([[0.0, -0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]], np.float32)
    # Any: numpy's stub would match a dict of arrays against savez's allow_pickle: bool
    arrays: dict[str, Any] = {"mins.x": -x, "mins.y": x}
    np.savez(tmp_path / "case.inputs.npz", **arrays)
    spec = f"{PLUGINS}:Minss"
    got, doc = run_doc(tmp_path, str(src), "--targets", "ref", "--backend-plugin", spec)
    (case,) = doc["cases"]
    assert case["inputs"]["source"] == "npz" and "--seed" not in case["repro"]
    again, out = rerun(case["repro"], tmp_path)
    assert again == got
    assert json.loads(out)["cases"][0]["inputs"]["digests"] == case["inputs"]["digests"]
