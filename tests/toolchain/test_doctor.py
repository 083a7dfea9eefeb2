"""`keracheck doctor`: every target's state, versions and fix, and a smoke case on each
available one; a target that is available but cannot run the smoke case fails the doctor."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from keracheck.cli import main

pytestmark = pytest.mark.toolchain

PLUGINS = Path(__file__).parent.parent / "unit" / "plugins" / "fake_targets.py"


def doctor(
    capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, dict[str, dict[str, object]]]:
    code = main(["doctor", "--format", "json", *extra])
    rows = json.loads(capsys.readouterr().out)["targets"]
    return code, {r["id"]: r for r in rows}


def test_doctor_smoke_runs_every_available_target(capsys: pytest.CaptureFixture[str]) -> None:
    code, rows = doctor(capsys)
    assert code == 0 and "ref" in rows
    for tid, row in rows.items():
        if row["available"]:
            assert str(row["smoke"]).startswith("ok ("), (tid, row["smoke"])
            assert row["versions"], tid
        else:
            assert row["smoke"] == "unavailable" and row["reason"], tid


def test_a_target_that_fails_its_smoke_case_fails_the_doctor(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, rows = doctor(capsys, "--backend-plugin", f"{PLUGINS}:Broken")
    assert code == 3
    assert str(rows["broken"]["smoke"]).startswith("SMOKE FAILED: error")
