"""Every target `keracheck targets` calls available really builds and runs a program here.

This is the test that would have caught the fresh-machine failure (a cross gcc on PATH without
its libc headers: "available", then an error on every case): it runs one small program through
`keracheck run` on every target that reports itself available, ISA variants included, and
requires each to return the reference's bits.  Targets that are unavailable are listed in the
skip reason of the companion test, with their fix command, so a local run shows what is missing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from keracheck.cli import main
from keracheck.targets import known_specs, resolve_all

pytestmark = pytest.mark.toolchain

SOURCE = """
export fn tiny(x: f32[8], y: f32[8], k: i32[8]) -> (f32[8], i32[8]) {
    (min(x * y + y, x), k / (k + 3))
}
"""


def test_every_available_target_runs_a_program(tmp_path: Path) -> None:
    targets = resolve_all(list(known_specs().items()))
    available = [t.id for t in targets if t.available]
    assert "ref" in available
    src = tmp_path / "tiny.kera"
    src.write_text(SOURCE)
    out = tmp_path / "out.json"
    flags = ["--no-cache", "-q", "--format", "json", "--output", str(out), "--inputs", "16"]
    code = main(["run", str(src), "--targets", ",".join(available), *flags])
    doc = json.loads(out.read_text())
    (case,) = doc["cases"]
    bad = {
        tid: f"{e['status']}: {e.get('message')}"
        for tid, e in case["targets"].items()
        if e["status"] != "ok"
    }
    assert not bad, f"targets that said they were available but did not run: {bad}"
    assert case["verdict"] == "agree" and code == 0, case["divergences"]


def test_unavailable_targets_name_their_fix() -> None:
    missing = [t for t in resolve_all(list(known_specs().items())) if not t.available]
    for t in missing:
        assert t.reason and ":" in t.reason, t
    if missing:
        pytest.skip("unavailable here: " + "; ".join(f"{t.id}: {t.reason}" for t in missing))
