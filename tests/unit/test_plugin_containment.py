"""A plugin that crashes or hangs in its import, available(), supported_ops(), versions() or
declines() makes that plugin unavailable (or declines nothing) with the reason: keracheck itself
never crashes or hangs, and every other target still runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from keracheck import plugin_host
from keracheck.cli import main

HERE = Path(__file__).parent / "plugins"
HOSTILE = HERE / "hostile_plugins.py"
SOURCE = "export fn f(x: f32[4], y: f32[4]) -> f32[4] { min(x, y) * x }\n"


@pytest.fixture(autouse=True)
def short_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plugin_host, "AVAILABLE_TIMEOUT", 2.0)
    monkeypatch.setattr(plugin_host, "CALL_TIMEOUT", 2.0)


def run(tmp_path: Path, cls: str) -> tuple[int, dict[str, Any]]:
    src = tmp_path / "a.kera"
    src.write_text(SOURCE)
    out = tmp_path / "out.json"
    flags = ["-q", "--no-cache", "--format", "json", "--output", str(out)]
    code = main(
        ["run", str(src), "--targets", "ref", "--backend-plugin", f"{HOSTILE}:{cls}", *flags]
    )
    return code, json.loads(out.read_text())


@pytest.mark.parametrize(
    ("cls", "reason"),
    [
        ("SegvAvailable", "available() crashed the plugin process (exit code -11)"),
        ("HangAvailable", "available() did not return within 2 s"),
        ("SegvOps", "supported_ops() crashed the plugin process (exit code -11)"),
        ("RaisingOps", "supported_ops() raised RuntimeError: no idea"),
    ],
)
def test_a_failing_plugin_is_unavailable_and_the_run_goes_on(
    cls: str, reason: str, tmp_path: Path
) -> None:
    code, doc = run(tmp_path, cls)
    (target,) = [t for t in doc["targets"] if t["id"] != "ref"]
    assert not target["available"] and reason in target["reason"]
    assert doc["cases"][0]["targets"]["ref"]["status"] == "ok"
    assert code == 0


def test_a_hanging_versions_is_recorded_and_the_plugin_still_runs(tmp_path: Path) -> None:
    code, doc = run(tmp_path, "HangVersions")
    target = next(t for t in doc["targets"] if t["id"] == "hang-versions")
    assert target["available"] and "did not return" in target["versions"]["error"]
    assert code == 0 and doc["cases"][0]["verdict"] == "agree"


@pytest.mark.parametrize("cls", ["SegvDeclines", "HangDeclines"])
def test_a_failing_declines_declines_nothing(cls: str, tmp_path: Path) -> None:
    code, doc = run(tmp_path, cls)
    assert code == 0 and doc["cases"][0]["verdict"] == "agree"


def test_targets_lists_a_crashing_plugin_as_unavailable(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["targets", "--backend-plugin", f"{HOSTILE}:SegvAvailable"])
    out = capsys.readouterr().out
    assert code == 0
    assert "segv-available" in out and "crashed the plugin process" in out
    assert "ref " in out  # the built-in targets are listed as usual


def test_a_plugin_whose_import_crashes_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["targets", "--backend-plugin", f"{HERE / 'segv_on_import.py'}:Never"])
    assert code == 2
    assert "crashed the plugin process (exit code -11)" in capsys.readouterr().err
