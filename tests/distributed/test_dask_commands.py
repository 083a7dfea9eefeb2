"""A scheduler and a worker started as their own processes by Dask's commands
(``dask scheduler``, ``dask worker``) on localhost, as on several machines: ``keracheck run
--scheduler tcp://127.0.0.1:PORT`` gives the local run's report, and the processes are torn
down (their process groups killed) whatever the test does."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("distributed") is None,
    reason="Dask is not installed: pip install 'keracheck[distributed]'",
)
#: what a run on Dask may differ in from the local run (as in test_dask_run.py)
VOLATILE = ("startedOn", "finishedOn", "seconds", "command", "distributed")


def stripped(doc: Any) -> Any:
    if isinstance(doc, dict):
        return {k: stripped(v) for k, v in doc.items() if k not in VOLATILE}
    if isinstance(doc, list):
        return [stripped(v) for v in doc]
    return doc


DASK = Path(sys.executable).with_name("dask")
CORPUS = ROOT / "corpora/programs.kera"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def scheduler() -> Iterator[str]:
    """tcp://127.0.0.1:PORT of a ``dask scheduler`` with one ``dask worker`` connected."""
    if not DASK.exists():
        pytest.skip(f"no {DASK}: pip install 'keracheck[distributed]'")
    address = f"tcp://127.0.0.1:{_free_port()}"
    port = address.rsplit(":", 1)[1]
    env = {**os.environ, "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
    logs = subprocess.DEVNULL
    started = [
        subprocess.Popen(
            [str(DASK), "scheduler", "--host", "127.0.0.1", "--port", port, "--no-dashboard"],
            stdout=logs, stderr=logs, start_new_session=True, env=env,
        ),
        subprocess.Popen(
            [str(DASK), "worker", address, "--nthreads", "1", "--name", "w0", "--no-dashboard"],
            stdout=logs, stderr=logs, start_new_session=True, env=env,
        ),
    ]  # fmt: skip
    try:
        from distributed import Client

        with Client(address, timeout=60) as client:  # type: ignore[no-untyped-call]
            client.wait_for_workers(1, timeout=60)
        yield address
    finally:
        for proc in started:  # the worker's nanny and its worker process too
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def test_a_run_on_dask_worker_processes_equals_the_local_run(
    scheduler: str, tmp_path: Path
) -> None:
    out = {}
    for name, extra in (("local", []), ("dask", ["--scheduler", scheduler])):
        path = tmp_path / f"{name}.json"
        cmd = [sys.executable, "-m", "keracheck.cli", "run", str(CORPUS), "--targets", "ref"]
        cmd += ["-q", "--no-cache", "--format", "json", "--output", str(path), *extra]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        out[name] = json.loads(path.read_text())
    assert stripped(out["dask"]) == stripped(out["local"])
    assert out["dask"]["distributed"]["workers"] == {"w0": ["ref"]}
