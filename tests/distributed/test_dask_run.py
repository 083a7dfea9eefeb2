"""``keracheck run --scheduler``: on a real ``LocalCluster``, the run document equals the local
pool's (timings, the command line and the ``distributed`` object aside), batches go only to
workers that have the target, a worker killed mid-batch loses nothing, and a case that keeps
killing its workers is an ``error`` with the reason, not an endless retry."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from keracheck import harness, sandbox
from keracheck.cli import main
from keracheck.distributed import SchedulerError
from keracheck.distributed import cluster as cluster_mod
from keracheck.options import Options

ROOT = Path(__file__).resolve().parents[2]
needs_dask = pytest.mark.skipif(
    importlib.util.find_spec("distributed") is None,
    reason="Dask is not installed: pip install 'keracheck[distributed]'",
)
#: the fields of a run document that may differ between a local and a distributed run
VOLATILE = ("startedOn", "finishedOn", "seconds", "command", "distributed")


def stripped(doc: Any) -> Any:
    """``doc`` without its timings, command line and worker names (``VOLATILE``)."""
    if isinstance(doc, dict):
        return {k: stripped(v) for k, v in doc.items() if k not in VOLATILE}
    if isinstance(doc, list):
        return [stripped(v) for v in doc]
    return doc


pytestmark = needs_dask
KILLERS = ROOT / "tests/distributed/killers.py"
CORPUS = ROOT / "corpora/programs.kera"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """A ``local:2`` cluster for the module (closed after it)."""
    from keracheck import distributed

    with distributed.connect("local:2") as c:
        yield c


@pytest.fixture
def sandbox_off() -> Iterator[None]:
    """Targets run unsandboxed for the test (a planted case must see its Dask worker)."""
    sandbox.configure("off")
    try:
        yield
    finally:
        sandbox.configure("on")


KILL_SOURCE = "\n".join(
    [
        *(f"export fn ok{k}(x: f32[4]) -> f32[4] {{ x * {k}.0 + x }}" for k in range(6)),
        "export fn kill_once(x: f32[4]) -> f32[4] { x - x * 2.0 }",
        "export fn kill_always(x: f32[4]) -> f32[4] { x * x }",
    ]
)


def _run(paths: list[str], **kw: Any) -> dict[str, Any]:
    opts = Options(cache_dir=None, jobs=2, localise=False, **kw)
    doc, _ = harness.run(paths, opts)
    return doc


def test_a_target_no_worker_has_is_unavailable_with_the_reason(cluster: Any) -> None:
    cluster.install({"ref": "keracheck.targets.ref:RefBackend"})
    assert cluster.reason("nope") is not None
    from keracheck.targets import Target

    fake = Target("gone", "x:y", object(), None)  # type: ignore[arg-type]
    (placed,) = cluster.place([fake])
    assert not placed.available
    assert placed.reason.startswith("no Dask worker has it: ")


def test_a_killed_worker_loses_nothing_and_a_killer_case_is_an_error(
    sandbox_off: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kill_once kills the worker that first runs its batch: the batch runs again elsewhere.
    kill_always kills every worker that runs it: its batch is cut into single cases, and the
    case alone is an error naming why; every other case gets the local pool's result."""
    (tmp_path / "kills").mkdir()
    monkeypatch.setenv("KERACHECK_TEST_KILL_DIR", str(tmp_path / "kills"))
    src = tmp_path / "killers.kera"
    src.write_text(KILL_SOURCE + "\n")
    plugin = {"killer": f"{KILLERS}:Killer"}
    from keracheck import distributed

    # a cluster of its own, started after the kill folder is set: its workers' environment is
    # copied when they start (so is a forkserver's, which is why the module's cluster won't do)
    with distributed.connect("local:2") as cluster:
        remote = _run([str(src)], targets=["ref"], plugins=plugin, sandbox="off", scheduler=cluster)
    assert (tmp_path / "kills" / "kill_once").exists()  # the remote run planted the kill
    local = _run([str(src)], targets=["ref"], plugins=plugin, sandbox="off")
    by_name = {c["function"]: c for c in remote["cases"]}
    bad = by_name.pop("kill_always")["targets"]["killer"]
    assert bad["status"] == "error" and "kills the worker process" in bad["message"]
    want = {c["function"]: c for c in stripped(local)["cases"]}
    for name, case in by_name.items():
        assert stripped(case) == want[name], name
    assert remote["distributed"]["splitAfterWorkerDeaths"] >= 1
    assert len(remote["distributed"]["killedWorkers"]) == 1
    assert (tmp_path / "kills" / "kill_once").exists()


@pytest.mark.parametrize(
    "value",
    ["local:0", "local:x", "tcp://", "tcp://host", "tcp://host:99999", "udp://h:1", "localhost"],
)
def test_malformed_scheduler_values_are_usage_errors(value: str) -> None:
    with pytest.raises(SchedulerError, match="--scheduler"):
        cluster_mod.parse(value)


def test_bad_scheduler_is_exit_2_with_a_clear_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Malformed, then a port nothing listens on: exit 2, one line, no traceback."""
    code = main(["run", str(CORPUS), "--targets", "ref", "-q", "--scheduler", "tcp:/x"])
    err = capsys.readouterr().err
    assert code == 2 and "is not local:N" in err and "Traceback" not in err
    code = main(["run", str(CORPUS), "--targets", "ref", "-q", "--scheduler", _dead_port()])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "dask scheduler" in err and "cannot connect" in err


def _dead_port() -> str:
    import socket

    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"tcp://127.0.0.1:{port}"


def test_the_cli_run_with_local_2_equals_the_local_run(tmp_path: Path) -> None:
    """The command of the issue, ``keracheck run ... --scheduler local:2``, as printed in the
    docs: its JSON equals the local run's."""
    out = {}
    for name, extra in (("local", []), ("dask", ["--scheduler", "local:2"])):
        path = tmp_path / f"{name}.json"
        args = ["run", str(CORPUS), "--targets", "ref,wasm", "--no-cache", "-q"]
        code = main([*args, "--format", "json", "--output", str(path), *extra])
        assert code == 0
        out[name] = json.loads(path.read_text())
    assert stripped(out["dask"]) == stripped(out["local"])
    assert out["dask"]["summary"]["agree"] == 8
    dist = out["dask"]["distributed"]
    assert dist["scheduler"] == "local:2" and dist["workers"] == {
        "0": ["ref", "wasm"],
        "1": ["ref", "wasm"],
    }
    assert sum(dist["placed"]["ref"].values()) == 8
    for case in out["dask"]["cases"]:  # each worker loaded the .keg it was sent
        for entry in case["targets"].values():
            assert entry["loadedFingerprint"] == case["fingerprint"]


def test_without_a_scheduler_dask_is_not_imported(tmp_path: Path) -> None:
    """The embedded default needs no Dask: a local run imports none of it."""
    code = (
        "import sys; from keracheck.cli import main; "
        f"code = main(['run', {str(CORPUS)!r}, '--targets', 'ref', '-q', '--no-cache']); "
        "print(code, sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert done.stdout.strip().splitlines()[-1] == "0 []", done.stderr
