"""Verilator runner: lint (``--lint-only -Wall``) and batch simulation binaries (``--binary``).

:class:`Verilator` holds the PATH check, the argv builders and the steps.  Builds are cached by
content: :meth:`Verilator.build` hashes the Verilator version, the argv template and every
source file's bytes, and reuses ``<cache>/verilator/<hash>/sim`` when it exists, so one design
is compiled once per machine (the cache root is ``$KERACHECK_CACHE`` or
``~/.cache/keracheck``).  A failing step raises :class:`keracheck.target.BackendError` with
Verilator's messages.  Debian's Verilator 5.006 is the reference version; ``--timing`` is
passed because test benches use delays.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from keracheck.runners.sealed import intact, seal
from keracheck.runners.tool import run_tool
from keracheck.target import BackendError

INSTALL = "apt-get install verilator"
EXE = "sim"


def cache_root() -> Path:
    """``$KERACHECK_CACHE`` or ``~/.cache/keracheck``."""
    env = os.environ.get("KERACHECK_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "keracheck"


class Verilator:
    """Verilator 5 (``verilator`` on PATH, plus a C++ compiler and make for builds)."""

    name = "verilator"

    def available(self) -> str | None:
        """None when the tools are on PATH, else the reason and the install command."""
        for tool, fix in (("verilator", INSTALL), ("make", "apt-get install make")):
            if shutil.which(tool) is None:
                return f"{tool} not on PATH: {fix}"
        if shutil.which("g++") is None and shutil.which("clang++") is None:
            return "no C++ compiler on PATH: apt-get install g++"
        return None

    def version(self) -> str:
        """``verilator --version`` ("Verilator 5.006 2023-01-22 rev (Debian 5.006-3)")."""
        return _run(["verilator", "--version"], cwd=None, timeout=30, check=False).strip()

    def lint_argv(
        self, sources: Sequence[Path], top: str, params: Mapping[str, int] | None = None
    ) -> list[str]:
        """``verilator --lint-only -Wall`` of ``sources`` rooted at ``top``."""
        argv = ["verilator", "--lint-only", "-Wall", "--top-module", top]
        argv += [f"-G{name}={value}" for name, value in (params or {}).items()]
        return argv + [str(s) for s in sources]

    def lint(
        self, sources: Sequence[Path], top: str, params: Mapping[str, int] | None = None
    ) -> str:
        """Lint; returns the diagnostics, "" when clean (every warning is reported)."""
        self._require()
        proc = subprocess.run(
            self.lint_argv(sources, top, params),
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        text = (proc.stdout + proc.stderr).strip()
        return text if (proc.returncode != 0 or text) else ""

    def binary_argv(
        self,
        sources: Sequence[Path],
        top: str,
        mdir: Path,
        jobs: int = 2,
        cxx_opt: str | None = None,
    ) -> list[str]:
        """``verilator --binary`` building ``mdir/sim`` from ``sources`` rooted at ``top``.

        ``cxx_opt`` (e.g. ``"-O0"``) overrides the C++ optimisation level: generated models
        of many core instances are large, and ``-O0`` builds about 40% faster, which pays off
        for small batches.
        """
        argv = ["verilator", "--binary", "--timing", "-O3", "-j", str(jobs)]
        argv += ["--top-module", top, "--Mdir", str(mdir), "-o", EXE, "-Wno-fatal"]
        argv += ["-Wno-lint", "-Wno-style", "--x-assign", "0", "--x-initial", "0"]
        if cxx_opt:
            argv += ["-MAKEFLAGS", f"OPT_FAST={cxx_opt} OPT_SLOW={cxx_opt} OPT_GLOBAL={cxx_opt}"]
        return argv + [str(s) for s in sources]

    def build(
        self,
        sources: Sequence[Path],
        top: str,
        cache: Path | None = None,
        jobs: int = 2,
        cxx_opt: str | None = None,
    ) -> Path:
        """Build (or reuse from the cache) a simulation binary; returns its path."""
        self._require()
        mdir = (cache or cache_root()) / "verilator" / self.build_key(sources, top, cxx_opt)
        exe = mdir / EXE
        if intact(exe):
            return exe
        tmp = mdir.with_name(mdir.name + f".tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        _run(self.binary_argv(sources, top, tmp, jobs, cxx_opt), cwd=tmp, timeout=3600)
        seal(tmp / EXE)
        shutil.rmtree(mdir, ignore_errors=True)
        os.replace(tmp, mdir)
        return exe

    def build_key(self, sources: Sequence[Path], top: str, cxx_opt: str | None = None) -> str:
        """Content hash of everything that determines a build."""
        h = hashlib.sha256(b"keracheck-verilator-build-v1\0")
        h.update(self.version().encode() + b"\0")
        h.update("\0".join(self.binary_argv([], top, Path("M"), cxx_opt=cxx_opt)).encode() + b"\0")
        for src in sorted(sources, key=lambda p: p.name):
            h.update(src.name.encode() + b"\0" + src.read_bytes() + b"\0")
        return h.hexdigest()[:32]

    def run(
        self,
        exe: Path,
        cwd: Path,
        plusargs: Mapping[str, str | int] | None = None,
        timeout: float = 3600,
    ) -> str:
        """Run a built simulation in ``cwd``; returns its standard output."""
        argv = [str(exe)] + [f"+{k}={v}" for k, v in (plusargs or {}).items()]
        return _run(argv, cwd=cwd, timeout=timeout)

    def _require(self) -> None:
        reason = self.available()
        if reason:
            raise BackendError(f"unavailable: {reason}")


def _run(argv: list[str], cwd: Path | None, timeout: float, check: bool = True) -> str:
    return run_tool(argv, timeout, cwd=cwd, check=check)
