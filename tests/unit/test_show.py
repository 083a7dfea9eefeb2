"""`keracheck show`: a saved JSON run renders in every format exactly as `run --format` did
(timestamps aside), with the run's exit code; bad files are clear usage errors.  Signed
reports: tests/unit/test_output_formats.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from keracheck.cli import FORMATS, main

PLUGINS = Path(__file__).parent / "plugins" / "fake_targets.py"
SOURCE = "export fn mins(x: f32[8], y: f32[8]) -> f32[8] { min(x, y) }\n"
STAMP = re.compile(
    r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ|\"seconds\": [0-9.e-]+|(seconds|time)=\"[0-9.e-]+\""
)


def _run(tmp_path: Path, fmt: str, out: Path) -> int:
    src = tmp_path / "case.kera"
    src.write_text(SOURCE)
    args = ["run", str(src), "--targets", "ref", "--backend-plugin", f"{PLUGINS}:Minss"]
    return main([*args, "-q", "--no-cache", "--format", fmt, "--output", str(out)])


@pytest.mark.parametrize("fmt", FORMATS)
def test_show_renders_like_run(fmt: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.chdir(tmp_path)
    saved = tmp_path / "run.json"
    assert _run(tmp_path, "json", saved) == 1  # Minss diverges
    direct = tmp_path / f"direct.{fmt}"
    assert _run(tmp_path, fmt, direct) == 1
    shown = tmp_path / f"shown.{fmt}"
    assert main(["show", str(saved), "--format", fmt, "--output", str(shown)]) == 1
    assert STAMP.sub("T", shown.read_text()) == STAMP.sub("T", direct.read_text())


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{not json", "run.json:1:2: not JSON"),
        (b"[1, 2]", "not a keracheck run"),
        (b'{"schemaVersion": 1, "summary": {}}', "not a keracheck run: no tool, run, targets"),
        (b"[" * 100_000, "not JSON"),
        (b'{"payloadType": "x"}\n', "run.json (read without a key):\n  line 1: envelope keys are"),
        (b'{"payloadType": "x"}', "run.json (read without a key):\n  report: empty or does not"),
    ],
)
def test_show_refuses_what_is_not_a_run(
    content: bytes, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "run.json"
    bad.write_bytes(content)
    assert main(["show", str(bad)]) == 2
    assert message in capsys.readouterr().err
