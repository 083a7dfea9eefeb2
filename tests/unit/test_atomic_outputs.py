"""Files keracheck writes are all-or-nothing, and `verify --rerun` never passes on nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kera.files import write_atomic
from keracheck.cli import main

PLUGINS = Path(__file__).parent / "plugins" / "fake_targets.py"
SOURCE = "export fn f(x: f32[64]) -> f32[64] { x * x + x }\nexport fn g(x: i32[8]) -> i32[8] { x / (x + 3) }\n"  # fmt: skip


def test_write_atomic_keeps_mode_and_leaves_no_temporary(tmp_path: Path) -> None:
    p = tmp_path / "out.json"
    write_atomic(p, "old")
    os.chmod(p, 0o640)
    write_atomic(p, b"new")
    assert p.read_text() == "new" and (p.stat().st_mode & 0o777) == 0o640
    assert [q.name for q in tmp_path.iterdir()] == ["out.json"]


def test_output_is_old_or_complete_when_killed(tmp_path: Path) -> None:
    src = tmp_path / "a.kera"
    src.write_text(SOURCE)
    out = tmp_path / "out.json"
    out.write_text("OLD")
    argv = [sys.executable, "-m", "keracheck.cli", "run", str(src), "--targets", "ref"]
    argv += ["--format", "json", "--output", str(out), "--no-cache", "-q", "--inputs", "4096"]
    t0 = time.monotonic()
    subprocess.run(argv, check=True, capture_output=True)
    full = time.monotonic() - t0
    seen = set()
    for k in range(12):
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(full * (0.5 + k / 12))  # kills spread around the moment of writing
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        text = out.read_text()
        if text == "OLD":
            seen.add("old")
        else:
            assert json.loads(text)["summary"]["cases"] == 2
            seen.add("new")
            out.write_text("OLD")
    assert seen  # every state seen was the old file or a complete new one


def test_verify_rerun_fails_when_nothing_was_rerun(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "a.kera"
    src.write_text(SOURCE)
    keys = tmp_path / "keys"
    assert main(["keygen", "--out", str(keys)]) == 0
    report = tmp_path / "r.intoto.jsonl"
    clone = ["--backend-plugin", f"{PLUGINS}:Clone"]
    args = ["run", str(src), "--targets", "clone", *clone, "--no-cache", "-q"]
    assert main([*args, "--report", str(report), "--key", str(keys / "keracheck.key")]) == 0
    capsys.readouterr()
    pub = str(keys / "keracheck.pub")
    assert main(["verify", str(report), "--key", pub, "--rerun"]) == 1  # clone is not here
    assert "NOT VERIFIED BY RERUN" in capsys.readouterr().out
    assert main(["verify", str(report), "--key", pub, "--rerun", *clone]) == 0
