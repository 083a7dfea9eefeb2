"""Node.js (V8) runner: the same ``.wasm`` bytes as wasmtime, executed by a second engine.

All jobs of one :meth:`NodeWasmRunner.run_jobs` call go to one ``node`` process running
``wasm_node_runner.mjs`` (beside this file); modules, inputs and outputs travel as files in a
temporary folder (the layout is documented at the top of the script).  Missing ``node`` makes
the runner unavailable with the reason; a job that traps or fails to compile becomes a
:class:`~keracheck.target.BackendError` for that job only.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from keracheck.runners.tool import run_tool
from keracheck.runners.wasm_job import Bytes, JobResult, WasmJob, as_bytes
from keracheck.target import BackendError

SCRIPT = Path(__file__).with_name("wasm_node_runner.mjs")
INSTALL = "apt-get install nodejs"  # Node >= 16 for WebAssembly SIMD; Debian 12 has 18


def node_path() -> str | None:
    return shutil.which("node")


def available() -> str | None:
    """None when Node can run modules here, else the reason and the fix."""
    if node_path() is None:
        return f"node not on PATH: {INSTALL}"
    if not SCRIPT.is_file():
        return f"runner script missing: {SCRIPT}"
    return None


def version() -> str:
    node = node_path()
    if node is None:
        return "unavailable"
    done = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30)
    return done.stdout.strip() or "unknown"


class NodeWasmRunner:
    """Batches jobs into one ``node`` process; ``node_args`` are extra V8 flags."""

    name = "node"

    def __init__(self, node_args: Sequence[str] = (), timeout_s: float = 600.0) -> None:
        reason = available()
        if reason:
            raise BackendError(reason)
        self.node = node_path() or "node"
        self.node_args = list(node_args)
        self.timeout_s = timeout_s

    def run_jobs(self, jobs: Sequence[WasmJob]) -> list[JobResult]:
        if not jobs:
            return []
        with tempfile.TemporaryDirectory(prefix="kera-node-") as tmp:
            folder = Path(tmp)
            spec = {"jobs": [_write_job(folder, k, job) for k, job in enumerate(jobs)]}
            (folder / "spec.json").write_text(json.dumps(spec))
            self._run_node(folder / "spec.json")
            status = json.loads((folder / "results.json").read_text())
            if len(status) != len(jobs):
                raise BackendError(f"node reported {len(status)} results for {len(jobs)} jobs")
            pairs = enumerate(zip(jobs, status, strict=True))
            return [_collect(folder, k, job, st) for k, (job, st) in pairs]

    def _run_node(self, spec: Path) -> None:
        argv = [self.node, *self.node_args, str(SCRIPT), str(spec)]
        run_tool(argv, self.timeout_s, name="node", stderr_only=True)


def _write_job(folder: Path, k: int, job: WasmJob) -> dict[str, object]:
    (folder / f"j{k}.wasm").write_bytes(job.wasm)
    writes, pos, blobs = [], 0, []
    for off, arr in job.writes:
        raw = as_bytes(arr)
        writes.append([off, pos, int(raw.size)])
        blobs.append(raw)
        pos += raw.size
    with (folder / f"j{k}.in").open("wb") as f:
        for raw in blobs:
            f.write(raw.data)
    return {
        "wasm": f"j{k}.wasm",
        "input": f"j{k}.in",
        "output": f"j{k}.out",
        "memory": job.memory,
        "writes": writes,
        "calls": [[name, list(args)] for name, args in job.calls],
        "reads": [list(r) for r in job.reads],
        "pages": job.pages_needed(),
    }


def _collect(folder: Path, k: int, job: WasmJob, status: dict[str, object]) -> JobResult:
    if not status.get("ok"):
        return BackendError(f"node: {status.get('error', 'unknown error')}")
    raw = np.fromfile(folder / f"j{k}.out", dtype=np.uint8)
    out: list[Bytes] = []
    pos = 0
    for _, n in job.reads:
        out.append(raw[pos : pos + n])
        pos += n
    return out
