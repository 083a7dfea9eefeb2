"""``keracheck fuzz --scheduler``: a campaign sharded over two Dask workers, stopped and resumed
from its checkpoint, finds planted bugs of the quality suite (``tests/quality/planted.py``)
with each divergence signature saved once."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from keracheck.cli import parser
from keracheck.distributed import fuzz as dfuzz

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("distributed") is None,
    reason="Dask is not installed: pip install 'keracheck[distributed]'",
)
sys.path.insert(0, str(ROOT / "tests/quality"))
import planted  # noqa: E402

PLANTED = str(ROOT / "tests/quality/planted.py")
#: planted targets found within a few examples (median 3 in the quality suite)
BUGS = (planted.Minss, planted.UnmaskedShift, planted.CvtIndefinite)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """A ``local:2`` cluster for the module (closed after it)."""
    from keracheck import distributed

    with distributed.connect("local:2") as c:
        yield c


def _fuzz(cluster: Any, tmp_path: Path, examples: int, capsys: Any) -> dict[str, Any]:
    argv = ["fuzz", "--targets", "ref", "--in-process", "--format", "json"]
    for cls in BUGS:
        argv += ["--backend-plugin", f"{PLANTED}:{cls.__name__}"]
    argv += ["--max-examples", str(examples), "--shard-examples", "2"]
    argv += ["--scheduler", "local:2", "--checkpoint", str(tmp_path / "ck")]
    argv += ["--out", str(tmp_path / "out"), "--policy", "none"]
    args = parser().parse_args(argv)
    args.outputs = []
    assert dfuzz.main(args, cluster) == 1
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


def test_a_stopped_campaign_resumes_and_finds_the_planted_bugs(
    cluster: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = _fuzz(cluster, tmp_path, 4, capsys)  # stops after shards 0 and 1
    assert first["distributed"]["shardsDone"] == [0, 1]
    kept = {s["signature"]: s["count"] for s in first["signatures"]}
    second = _fuzz(cluster, tmp_path, 8, capsys)  # continues with shards 2 and 3
    d = second["distributed"]
    assert d["shardsResumed"] == 2 and d["shardsDone"] == [0, 1, 2, 3]
    ran = [s["index"] for s in d["shards"]]
    assert set(ran[:2]) == {0, 1} and sorted(ran) == [0, 1, 2, 3]  # none run twice
    assert {s["seed"] for s in d["shards"]} == {0, 1, 2, 3}
    sigs = {s["signature"]: s for s in second["signatures"]}
    assert len(sigs) == len(second["signatures"])  # each signature once
    for text, count in kept.items():  # every finding kept, counts only grow
        assert sigs[text]["count"] >= count
    for cls in BUGS:
        ops, klass, minimal = planted.PLANTED[cls]
        hits = [
            s for s in sigs.values()
            if s["targets"] == ["ref", cls.name] and s["op"] in ops and s["class"] == klass
        ]  # fmt: skip
        assert hits, f"{cls.name} not found: {sorted(sigs)}"
        assert hits[0]["opsAfter"] == minimal and Path(hits[0]["reproducer"]).is_file()
    reproducers = [s["reproducer"] for s in sigs.values()]
    assert len(set(reproducers)) == len(reproducers)
    assert second["stats"]["examples"] == 8


def test_another_campaigns_checkpoint_is_refused(cluster: Any, tmp_path: Path) -> None:
    dfuzz.save(str(tmp_path), dfuzz.State("0" * 64))
    with pytest.raises(dfuzz.CheckpointError, match="another campaign"):
        dfuzz.load(str(tmp_path), "1" * 64)


def test_a_checkpoint_without_a_scheduler_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from keracheck.cli import main

    assert main(["fuzz", "--targets", "ref", "--checkpoint", "ck", "--max-examples", "1"]) == 2
    assert "--checkpoint keeps a sharded campaign: it needs --scheduler" in capsys.readouterr().err
