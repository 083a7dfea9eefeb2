"""How a ``keracheck fuzz`` campaign stops and how it loads plugins (issue 23): ``--until-first``
and ``--max-findings`` stop at a shrunk, saved finding; ``--budget`` bounds the shrinks too; a
``file.py`` plugin's module runs once per process, not once per batch, in worker processes and
with ``--in-process``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kera import keg
from kera.dtypes import DType
from kera.ir import FunctionBuilder, Graph
from keracheck.fuzz import engine, select_targets
from keracheck.fuzz.engine import Campaign, Options
from keracheck.worker import Job, execute

ROOT = Path(__file__).resolve().parents[2]
PLANTED = str(ROOT / "tests/quality/planted.py")


def keracheck(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "keracheck.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "NO_COLOR": "1"},
    )


def _campaign(cls: str, out: Path, **kw: Any) -> Campaign:
    targets, _ = select_targets(["ref"], [f"{PLANTED}:{cls}"])
    return Campaign(targets, Options(seed=0, out=str(out), isolate=False, **kw)).run()


def test_max_findings_1_stops_at_the_first_shrunk_finding(tmp_path: Path) -> None:
    """--until-first: the batch that shows the first signature is the last one generated, and
    the campaign ends once that signature is reduced and saved (other signatures of the same
    batch are counted, not saved)."""
    campaign = _campaign("Minss", tmp_path, max_examples=300, max_findings=1)
    saved = [f for f in campaign.findings.values() if f.final is not None]
    assert len(saved) == 1 and campaign.stopped == "findings"
    (f,) = saved
    assert campaign.stats.examples == f.first_example < 300
    assert f.ops_after == 1 and f.reproducer is not None and Path(f.reproducer).is_file()
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".kera") == [
        f"{f.fingerprint}.kera"
    ]
    doc = campaign.document()
    assert doc["stats"]["stopReason"] == "findings" and doc["stats"]["maxFindings"] == 1


def test_max_findings_n_saves_n(tmp_path: Path) -> None:
    campaign = _campaign("X86DefaultNan", tmp_path, max_examples=300, max_findings=2)
    assert sum(1 for f in campaign.findings.values() if f.final) == 2
    assert campaign.stopped == "findings"


def test_the_budget_caps_every_shrink(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With every finding shrunk by Hypothesis (QUICK_OPS 0) and shrinks of up to 60 s, each
    shrink gets at most what the budget has left; the time split adds up to the whole."""
    monkeypatch.setattr(engine, "QUICK_OPS", 0)
    limits: list[float] = []
    shrink = Campaign._shrink

    def spy(self: Campaign, *args: Any) -> Any:
        limits.append(args[-1])
        return shrink(self, *args)

    monkeypatch.setattr(Campaign, "_shrink", spy)
    campaign = _campaign("Minss", tmp_path, budget=2.0, shrink_seconds=60.0)
    s = campaign.document()["stats"]
    assert campaign.stopped == "budget" and s["budget"] == 2.0
    assert limits and all(0 < limit <= 2.0 for limit in limits)
    parts = s["generateSeconds"] + s["shrinkSeconds"] + s["reduceSeconds"]
    assert parts <= s["seconds"] + 1e-3


def test_until_first_end_to_end(tmp_path: Path) -> None:
    res = keracheck(
        "fuzz", "--targets", "ref", "--backend-plugin", f"{PLANTED}:Minss", "--until-first",
        "--max-examples", "50", "--format", "json", "--out", str(tmp_path / "out"), cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 1, res.stderr
    doc = json.loads(res.stdout)
    saved = [s for s in doc["signatures"] if s["reproducer"]]
    assert len(saved) == 1 and saved[0]["opsAfter"] == 1
    assert doc["stats"]["stopReason"] == "findings"
    text = keracheck(
        "fuzz", "--targets", "ref", "--backend-plugin", f"{PLANTED}:Minss", "--until-first",
        "--max-examples", "50", "--out", str(tmp_path / "out"), cwd=tmp_path,
    )  # fmt: skip
    assert "stopped after 1 saved signature" in text.stdout
    assert "generating" in text.stdout and "reducing" in text.stdout


COUNTING = """
import os
from kera.interp import interpret
from kera.ops import Op

LOG = {log!r}
with open(LOG, "a") as f:
    f.write(f"import {{os.getpid()}}\\n")
BATCHES = []  # module state: survives from batch to batch


class Counted:
    name = "counted"
    api_version = 1

    def available(self):
        return None

    def supported_ops(self):
        return frozenset(op.value for op in Op)

    def run(self, fn, inputs):
        return interpret(fn, inputs)

    def run_many(self, cases):
        BATCHES.append(len(cases))
        with open(LOG, "a") as f:
            f.write(f"batch {{os.getpid()}} {{len(BATCHES)}}\\n")
        return [self.run(fn, xs) for fn, xs in cases]
"""


@pytest.mark.parametrize("in_process", [False, True], ids=["workers", "in-process"])
def test_a_plugin_module_runs_once_per_process(tmp_path: Path, in_process: bool) -> None:
    """Once in its plugin host, once where the cases run (the warm worker, or keracheck with
    --in-process); every batch then runs in that process and sees the module state of the
    batches before it."""
    log = tmp_path / "log.txt"
    plugin = tmp_path / "counting.py"
    plugin.write_text(COUNTING.format(log=str(log)))
    flags = ["--in-process"] if in_process else []
    flags += ["--sandbox", "off"]  # the plugin logs to tmp_path, which a sandbox keeps it from
    res = keracheck(
        "fuzz", "--targets", "ref", "--backend-plugin", f"{plugin}:Counted", "--max-examples",
        "10", "--out", str(tmp_path / "out"), *flags, cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    lines = [ln.split() for ln in log.read_text().splitlines()]
    imports = [int(ln[1]) for ln in lines if ln[0] == "import"]
    batches = [(int(ln[1]), int(ln[2])) for ln in lines if ln[0] == "batch"]
    assert len(imports) == len(set(imports)) == 2, lines
    assert len(batches) >= 10
    runner = {pid for pid, _ in batches}
    assert len(runner) == 1 and runner <= set(imports)
    assert [n for _, n in batches] == list(range(1, len(batches) + 1))  # state survived


def test_a_job_may_carry_its_function() -> None:
    """``Job.fn``: the function travels as itself (pickled to a worker) instead of as .keg
    bytes; the results and the recorded fingerprint are those of the .keg path."""
    b = FunctionBuilder("f")
    x = b.param("x", DType.F32, [3])
    fn = b.build(b.op("neg", b.op("sqrt", x)))
    xs = {"x": np.arange(6, dtype=np.float32).reshape(2, 3)}
    spec = f"{ROOT / 'tests/unit/plugins/fake_targets.py'}:Clone"
    by_keg = execute(spec, [Job("k", keg.dumps(Graph([fn])), "f", xs)], 1)["k"]
    by_fn = execute(spec, [Job("k", b"", "f", xs, fn=fn)], 1)["k"]
    assert by_keg.status == by_fn.status == "ok" and by_keg.loaded == by_fn.loaded
    assert by_keg.outputs[0][0].tobytes() == by_fn.outputs[0][0].tobytes()


def test_a_fuzz_job_records_no_artifacts() -> None:
    """``Job.artifacts``: a report's case records the digests of the emitted code; the fuzzer's
    jobs skip them (it reads none), and their outputs are the same bits."""
    b = FunctionBuilder("f")
    x = b.param("x", DType.F32, [4])
    fn = b.build(b.op("neg", b.op("sqrt", x)))
    xs = {"x": np.arange(8, dtype=np.float32).reshape(2, 4)}
    spec = "keracheck.targets.wasm:WasmBackend"
    full = execute(spec, [Job("k", b"", "f", xs, fn=fn)], 1)["k"]
    lean = execute(spec, [Job("k", b"", "f", xs, fn=fn, artifacts=False)], 1)["k"]
    assert full.status == lean.status == "ok", (full.message, lean.message)
    assert full.artifacts and lean.artifacts == {}
    assert full.outputs[0][0].tobytes() == lean.outputs[0][0].tobytes()
