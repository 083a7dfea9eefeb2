"""`kill -9` of keracheck in the middle of a target's phase leaves none of its processes
behind: workers lead their own process groups and kill them when their parent dies, so the
compilers, simulators and emulators they started die too."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.toolchain

PLUGIN = Path(__file__).parent.parent / "unit" / "plugins" / "fake_targets.py"
CORPUS = Path(__file__).parent.parent.parent / "corpora"

TOOLS = {
    "sleeper": None,
    "ref": None,
    "ptx-emu": None,
    "cpu": "gcc",
    "cpu-aarch64": "aarch64-linux-gnu-gcc",
    "wasm-node": "node",
    "verilog": "iverilog",
    "verilog-verilator": "verilator",
}
#: targets whose phase is short with 64 rows get more, so that the kill lands inside it
ROWS = {"ref": 20000, "ptx-emu": 20000, "wasm-node": 20000}


def tagged(tag: str) -> list[str]:
    """Live (non-zombie) processes whose environment carries ``tag``."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes()
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if tag.encode() in env and stat.rpartition(")")[2].split()[0] != "Z":
            found.append(f"{pid} {Path(f'/proc/{pid}/cmdline').read_bytes()[:80]!r}")
    return found


def in_phase(tag: str, proc: subprocess.Popen[str], tool: bool) -> list[str]:
    """Wait (polling, while the run lives) until the phase has something running besides the
    run's own process: for a target with a tool, a process that is neither Python nor the
    sandbox's bwrap (so a compiler, a simulator, an emulator or the built program); otherwise
    any worker.  A fixed sleep was not enough: on a fast machine the cpu phase is over in
    under two seconds."""
    while proc.poll() is None:
        found = []
        for line in tagged(tag):
            pid, _, cmd = line.partition(" ")
            argv0 = cmd.split("\\x00")[0].rpartition("/")[2]
            if int(pid) != proc.pid and not (tool and argv0.startswith(("python", "bwrap"))):
                found.append(line)
        if found:
            return found
        time.sleep(0.01)
    return []


@pytest.mark.parametrize("target", list(TOOLS))
def test_kill_9_leaves_no_process_behind(target: str, tmp_path: Path) -> None:
    tool = TOOLS[target]
    if tool is not None and shutil.which(tool) is None:
        pytest.skip(f"{tool} not on PATH (scripts/setup installs it)")
    tag = f"KERACHECK_ORPHAN_TEST={uuid.uuid4().hex}"
    env = dict(os.environ, KERACHECK_CACHE=str(tmp_path / "cache"))
    env[tag.split("=")[0]] = tag.split("=")[1]
    targets = (
        "ref,sleeper" if target == "sleeper" else "ref" if target == "ref" else f"ref,{target}"
    )
    argv = [sys.executable, "-m", "keracheck.cli", "run", str(CORPUS), "--targets", targets]
    argv += ["--no-cache", "--jobs", "1", "--format", "json", "--output", str(tmp_path / "o")]
    argv += ["--inputs", str(ROWS.get(target, 64)), "--limit", "input_bytes=100000000000"]
    if target == "sleeper":
        argv += ["--backend-plugin", f"{PLUGIN}:Sleeper"]
    proc = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    try:
        deadline = time.monotonic() + 120
        for line in proc.stderr:
            if f"] {target}: started" in line or time.monotonic() > deadline:
                break
        else:
            pytest.fail(f"{target} never started (exit {proc.wait()})")
        running = in_phase(tag.split("=")[1], proc, tool is not None)
        assert running, f"{target}'s phase ended before any of its processes could be seen"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:  # a failed check must not leave the run (or its pipe) to the next test
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()
    left: list[str] = []
    for _ in range(50):
        left = tagged(tag.split("=")[1])
        if not left:
            break
        time.sleep(0.2)
    for line in left:  # do not leave them to the next test either
        os.kill(int(line.split()[0]), signal.SIGKILL)
    assert not left, f"left running after kill -9: {left}"
