"""Hostile back ends (tests/unit/plugins/sandbox_hostile.py) against the sandbox: each attack
on the case ``bad`` is contained — the action fails or its process is killed — the plugin's
other cases and the ``ref`` target keep their results, and the report names what happened, in
the target's message and in ``sandbox.violations`` of the run document.

Needs bubblewrap (``apt-get install bubblewrap``; scripts/setup installs it).  The limits are
made small so that each run takes a second or two."""

from __future__ import annotations

import dataclasses
import json
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from keracheck.cli import main
from keracheck.sandbox import bwrap, policy

pytestmark = pytest.mark.skipif(
    bwrap.problem() is not None, reason=f"{bwrap.problem()} (scripts/setup installs it)"
)

PLUGIN = Path(__file__).parent / "plugins" / "sandbox_hostile.py"
SOURCE = """\
export fn good1(x: f32[4], y: f32[4]) -> f32[4] { x * y + y }
export fn bad(x: f32[4], y: f32[4]) -> f32[4] { x - y }
export fn good2(x: f32[4]) -> f32[4] { x + x }
"""

#: plugin class -> (what the message of ``bad`` says, the violation kind or None)
ATTACKS: dict[str, tuple[str, str | None]] = {
    "ReadSsh": ("sandbox: the home directory is hidden", "hidden-path"),
    "ReadKey": ("is hidden (a secret keracheck masks)", "hidden-path"),
    "ReadEnv": ("KERACHECK_KEY is not in this environment", None),
    "WriteOutside": ("sandbox: write outside the scratch directory denied", "read-only"),
    "Connect": ("sandbox: network access denied", "network"),
    "ForkBomb": ("killed: process-count limit (16 processes in the sandbox)", "process-count"),
    "Allocate": ("sandbox: address-space limit (4 GiB) reached: MemoryError", "address-space"),
    "Spin": ("timed out after", "time-limit"),
    "ExitMidBatch": ("target process crashed (exit code 3)", None),
    "Segfault": ("target process crashed (exit code -11)", None),
    "Ptrace": ("seccomp: killed by the syscall filter", "seccomp"),
    "KillAll": ("PermissionError: [Errno 1] Operation not permitted", None),
    "ForgeAnswer": ("no socket to keracheck in this process", None),
}


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """A plugin folder holding the plugin, a signing key and the home directory (all bound
    into the sandbox or under it, so only the sandbox stands between them and the plugin), a
    listening TCP port, and small limits."""
    folder = tmp_path / "plugins"
    home = folder / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    shutil.copy(PLUGIN, folder / PLUGIN.name)
    assert main(["keygen", "--out", str(folder)]) == 0
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.2)
    env = {
        "HOME": str(home),
        "KERACHECK_CACHE": str(tmp_path / "cache"),
        "KERACHECK_TEST_SIGNER": str(folder / "keracheck.key"),
        "KERACHECK_TEST_OUTSIDE": str(folder / "owned.txt"),
        "KERACHECK_TEST_PORT": str(listener.getsockname()[1]),
        "KERACHECK_KEY": "-----BEGIN PRIVATE KEY----- (a secret the sandbox must not pass)",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    small = dataclasses.replace(
        policy.LIMITS["plugin"], address_space=4 * policy.GIB, processes=16, tasks=96
    )
    monkeypatch.setitem(policy.LIMITS, "plugin", small)
    yield {"folder": folder, "listener": listener, "tmp": tmp_path}
    listener.close()


def run(world: dict[str, Any], cls: str, *flags: str) -> tuple[int, dict[str, Any]]:
    tmp, folder = world["tmp"], world["folder"]
    src = tmp / "a.kera"
    src.write_text(SOURCE)
    out = tmp / "out.json"
    plugin = f"{folder / PLUGIN.name}:{cls}"
    argv = ["run", str(src), "--targets", "ref", "--backend-plugin", plugin, "--no-cache", "-q"]
    timeout = "0.2" if cls == "Spin" else "0.5"  # a spin costs its limit twice: batch, alone
    code = main([*argv, "--timeout", timeout, "--format", "json", "--output", str(out), *flags])
    return code, json.loads(out.read_text())


@pytest.mark.parametrize("cls", list(ATTACKS))
def test_each_attack_is_contained_and_named(world: dict[str, Any], cls: str) -> None:
    says, kind = ATTACKS[cls]
    flags = ["--report", str(world["tmp"] / "r.intoto.jsonl"), "--key"] if cls == "ReadKey" else []
    flags += [str(world["folder"] / "keracheck.key")] if flags else []
    code, doc = run(world, cls, *flags)
    tid = next(t["id"] for t in doc["targets"] if t["id"] != "ref")
    results = {c["function"]: c["targets"] for c in doc["cases"]}
    for good in ("good1", "good2"):  # the plugin's other cases keep their results
        assert results[good][tid]["status"] == "ok", results[good][tid]
    for case in results.values():  # and so does every other target
        assert case["ref"]["status"] == "ok"
    bad = results["bad"][tid]
    assert bad["status"] == "error" and says in bad["message"], bad
    assert code == 3  # a target error
    violations = doc["sandbox"].get("violations", [])
    if kind is None:
        assert not violations
    else:
        assert [(v["target"], v["kind"]) for v in violations] == [(tid, kind)]
        assert violations[0]["case"].endswith(":bad") and says in violations[0]["message"]


def test_the_attacks_left_no_trace(world: dict[str, Any]) -> None:
    """What WriteOutside and Connect tried did not happen outside the sandbox."""
    run(world, "WriteOutside")
    run(world, "Connect")
    assert not (world["folder"] / "owned.txt").exists()
    with pytest.raises(TimeoutError):
        world["listener"].accept()


def test_a_plugin_host_is_sandboxed_too(world: dict[str, Any]) -> None:
    code, doc = run(world, "NetInAvailable")
    target = next(t for t in doc["targets"] if t["id"] == "net-in-available")
    assert not target["available"] and "Permission denied" in target["reason"]
    assert code == 0  # ref still ran and agreed with itself
