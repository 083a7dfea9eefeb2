"""Availability probes (keracheck.probe): a toolchain on PATH that cannot build is unavailable,
with the tool's first error line and the fix, before any case runs; passes are cached."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from keracheck import probe
from keracheck.cli import main
from keracheck.targets.cpu import QemuTarget

HEADER_ERROR = (
    "/usr/include/stdint.h:26:10: fatal error: bits/libc-header-start.h: No such file or directory"
)


def _script(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


@pytest.fixture
def broken_cross(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A PATH whose aarch64 cross gcc is installed but lacks its libc headers (the state
    `apt-get install --no-install-recommends gcc-aarch64-linux-gnu` leaves), and a qemu."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _script(
        bin_dir / "aarch64-linux-gnu-gcc",
        'case "$1" in -dumpfullversion) echo 12.2.0;; -dumpmachine) echo aarch64-linux-gnu;;\n'
        f'*) echo "In file included from x.c:1:" >&2; echo "{HEADER_ERROR}" >&2; exit 1;; esac\n',
    )
    _script(bin_dir / "qemu-aarch64", 'echo "qemu-aarch64 version 7.2.0"\n')
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("KERACHECK_CACHE", str(tmp_path / "cache"))
    probe.forget()
    yield tmp_path
    probe.forget()


def test_a_cross_compiler_without_libc_headers_is_unavailable(broken_cross: Path) -> None:
    reason = QemuTarget("aarch64").available()
    assert reason is not None
    assert HEADER_ERROR in reason  # the compiler's first error line
    assert reason.endswith(
        ": apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user"
    )
    assert not (broken_cross / "cache" / "probes").exists()  # failures are not cached on disk


def test_run_reports_the_broken_target_unavailable_before_any_case(
    broken_cross: Path, tmp_path: Path
) -> None:
    src = tmp_path / "a.kera"
    src.write_text("export fn f(x: f32[4]) -> f32[4] { x + x }\n")
    out = tmp_path / "out.json"
    code = main(
        ["run", str(src), "--targets", "ref,cpu-aarch64", "--format", "json", "--output", str(out)]
    )
    doc = json.loads(out.read_text())
    target = next(t for t in doc["targets"] if t["id"] == "cpu-aarch64")
    assert not target["available"] and HEADER_ERROR in target["reason"]
    assert target["fix"] == "apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user"
    assert doc["cases"][0]["targets"]["cpu-aarch64"]["status"] == "unavailable"
    assert doc["summary"]["error"] == 0 and code == 0  # ref alone: nothing errors
    assert doc["cases"][0]["verdict"] == "skipped"


def test_required_broken_target_exits_4(broken_cross: Path, tmp_path: Path) -> None:
    src = tmp_path / "a.kera"
    src.write_text("export fn f(x: f32[4]) -> f32[4] { x + x }\n")
    code = main(["run", str(src), "--targets", "ref", "--require", "cpu-aarch64", "-q"])
    assert code == 4


def test_a_pass_is_cached_per_identity_and_a_failure_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KERACHECK_CACHE", str(tmp_path))
    probe.forget()
    calls: list[str] = []

    def ok() -> None:
        calls.append("ok")

    def bad() -> None:
        calls.append("bad")
        raise RuntimeError("tool failed (exit 1):\nnote: first\nfoo.c:1: error: it broke\nmore")

    assert probe.proven("t", ["v1"], ok, "t cannot build", "apt-get install t") is None
    probe.forget()  # a new process: only the marker on disk remains
    assert probe.proven("t", ["v1"], ok, "t cannot build", "apt-get install t") is None
    assert calls == ["ok"]
    assert probe.proven("t", ["v2"], ok, "t cannot build", "apt-get install t") is None
    assert calls == ["ok", "ok"]  # a new toolchain version is probed again
    reason = probe.proven("u", ["v1"], bad, "u cannot build", "apt-get install u")
    assert reason == "u cannot build (foo.c:1: error: it broke): apt-get install u"
    probe.forget()
    assert probe.proven("u", ["v1"], bad, "u cannot build", "apt-get install u") == reason
    assert calls == ["ok", "ok", "bad", "bad"]
    probe.forget()


def test_first_error_line() -> None:
    assert probe.first_error_line("a\nb: Error here\nc: error") == "b: Error here"
    assert probe.first_error_line("\n  just this\nand that") == "just this"
    assert probe.first_error_line("") == "no output"
