"""Divergences the fuzzer found in our own back ends that are not fixed yet.

Each reproducer lives in tests/regressions/ (not corpora/, so the main job stays a gate on what
is fixed).  The tests are strict xfails: they fail loudly the moment a fix lands, and the
reproducer then moves to corpora/regressions/.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from keracheck.cli import main

HERE = Path(__file__).parents[1] / "regressions"


@pytest.mark.xfail(
    strict=True,
    reason="wasm back end traps (out of bounds memory access) when a computed f64[129] is "
    "broadcast to [1, 129] for 64 rows; found by keracheck fuzz, seed 0; not fixed yet",
)
def test_wasm_broadcast_of_computed_tensor(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    src = str(HERE / "wasm_broadcast_scratch.kera")
    main(
        [
            "run",
            src,
            "--targets",
            "ref,wasm",
            "--no-cache",
            "--format",
            "json",
            "--output",
            str(out),
        ]
    )
    doc = json.loads(out.read_text())
    assert doc["cases"][0]["verdict"] == "agree", doc["cases"][0]["targets"]["wasm"].get("message")
