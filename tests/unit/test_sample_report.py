"""The signed sample report shipped in reports/ verifies against the shipped public key and the
corpus as it is now (signatures and every .keg digest) — so an auditor can try it at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from keracheck.cli import main

ROOT = Path(__file__).parents[2]


def test_shipped_sample_report_verifies(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(ROOT)
    code = main(["verify", "reports/corpus.intoto.jsonl", "--key", "reports/keracheck.pub"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "VERIFIED" in out and "unavailable: 0" in out
