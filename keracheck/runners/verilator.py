"""Verilator runner: lint (``--lint-only -Wall``) and batch simulation binaries.

:class:`Verilator` holds the PATH check, the argv builders and the steps.  Builds are cached by
content: :meth:`Verilator.build` hashes the Verilator version, the argv template and every
source file's bytes, and reuses ``<cache>/verilator/<hash>/sim`` when it exists, so one design
is compiled once per machine (the cache root is ``$KERACHECK_CACHE`` or
``~/.cache/keracheck``).  A failing step raises :class:`keracheck.target.BackendError` with
Verilator's messages.  Debian's Verilator 5.006 is the reference version; ``--timing`` is
passed because test benches use delays.

A build is two steps, both timed by ``bench/bench_mainjob.py``: *verilate* (Verilog -> C++, one
process) and *make* (the C++ compiled and linked, ``-j`` jobs).  What keeps a cold build short,
each measured on the loop corpus (985 core instances, 27 designs) on 2 cores, CPU seconds:

* Verilator's own default optimisation, not ``-O3``: ``-O3`` inlines every core into its user
  and the model's C++ grows from 36 MB to 45 MB (verilate 23 -> 19 s, make 62 -> 46 s at
  ``--output-split`` 400k; the simulation is as fast);
* ``--output-split`` :data:`OUTPUT_SPLIT` statements per file instead of 20k: each of the C++
  files includes the model's headers again (make 152 s at 20k, 99 s at 100k, 40 s at 400k);
* the Verilator runtime (``verilated.o``, ``verilated_timing.o``, ``verilated_threads.o``:
  6 s) compiled once per machine, toolchain and flags and copied into every later build
  (``<cache>/verilator/runtime-<hash>/``), where make finds it up to date;
* ccache, when it is on PATH (``OBJCACHE=ccache``; not required);
* the C++ optimisation level chosen by the caller from the work to simulate (``cxx_opt``);
* the clocked cores compiled once per machine and linked in as objects (``objects``: see
  :mod:`keracheck.targets.verilog.corelib`), which keeps most of the C++ out of the build.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from keracheck.runners.sealed import intact, seal
from keracheck.runners.tool import first_line, run_tool
from keracheck.target import BackendError

INSTALL = "apt-get install verilator"
EXE = "sim"
#: statements per generated C++ file (Verilator's default is 20,000; see the module docstring)
OUTPUT_SPLIT = 400_000
#: a seeded runtime object is dated this long after the newest file of its model directory
SEED_AFTER_NS = 1_000_000


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

    def verilate_argv(self, sources: Sequence[Path], top: str, mdir: Path) -> list[str]:
        """``verilator --cc --exe --main``: the C++ model of ``sources`` rooted at ``top`` and
        its makefile ``mdir/V<top>.mk``, which builds ``mdir/sim`` (object files among the
        sources are linked in)."""
        argv = ["verilator", "--cc", "--exe", "--main", "--timing"]
        argv += ["--top-module", top, "--Mdir", str(mdir), "-o", EXE, "-Wno-fatal"]
        argv += ["-Wno-lint", "-Wno-style", "--x-assign", "0", "--x-initial", "0"]
        argv += ["--output-split", str(OUTPUT_SPLIT)]
        return argv + [str(s) for s in sources]

    def make_argv(
        self, mdir: Path, top: str, jobs: int = 2, cxx_opt: str | None = None
    ) -> list[str]:
        """``make`` of a verilated model.  ``cxx_opt`` (e.g. ``"-O0"``) overrides the C++
        optimisation level (Verilator's default is ``-Os``): generated models of many core
        instances are large, and ``-O0`` builds them about twice as fast, which pays off
        unless the simulation is long (the caller decides)."""
        argv = ["make", "-j", str(jobs), "-C", str(mdir), "-f", f"V{top}.mk"]
        if cxx_opt:
            argv += [f"OPT_FAST={cxx_opt}", f"OPT_SLOW={cxx_opt}", f"OPT_GLOBAL={cxx_opt}"]
        if shutil.which("ccache"):
            argv.append("OBJCACHE=ccache")
        return argv

    def build(
        self,
        sources: Sequence[Path],
        top: str,
        cache: Path | None = None,
        jobs: int | None = None,
        cxx_opt: str | None = None,
        objects: Sequence[Path] = (),
    ) -> Path:
        """Build (or reuse from the cache) a simulation binary; returns its path.  ``objects``
        (compiled core libraries) are linked in and are part of the cache key."""
        self._require()
        root = (cache or cache_root()) / "verilator"
        mdir = root / self.build_key([*sources, *objects], top, cxx_opt)
        exe = mdir / EXE
        if intact(exe):
            return exe
        tmp = mdir.with_name(mdir.name + f".tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        try:
            _run(self.verilate_argv([*sources, *objects], top, tmp), cwd=tmp, timeout=3600)
            runtime = root / f"runtime-{self.runtime_key(top, cxx_opt)}"
            names = _runtime_objects(tmp / f"V{top}_classes.mk")
            _seed_runtime(runtime, tmp, names)
            _run(
                self.make_argv(tmp, top, jobs or os.cpu_count() or 2, cxx_opt),
                cwd=tmp,
                timeout=3600,
            )
            _keep_runtime(runtime, tmp, names)
            seal(tmp / EXE)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        shutil.rmtree(mdir, ignore_errors=True)
        os.replace(tmp, mdir)
        return exe

    def build_key(self, sources: Sequence[Path], top: str, cxx_opt: str | None = None) -> str:
        """Content hash of everything that determines a build."""
        h = hashlib.sha256(b"keracheck-verilator-build-v2\0")
        h.update(self.version().encode() + b"\0")
        h.update("\0".join(self.verilate_argv([], top, Path("M"))).encode() + b"\0")
        h.update("\0".join(self.make_argv(Path("M"), top, 1, cxx_opt)).encode() + b"\0")
        for src in sorted(sources, key=lambda p: p.name):
            h.update(src.name.encode() + b"\0" + src.read_bytes() + b"\0")
        return h.hexdigest()[:32]

    def runtime_key(self, top: str, cxx_opt: str | None) -> str:
        """What the runtime objects depend on: Verilator, the C++ compiler, the flags (the
        same for every model built with the same argv template and ``cxx_opt``)."""
        h = hashlib.sha256(b"keracheck-verilator-runtime-v1\0")
        h.update(self.version().encode() + b"\0" + first_line(["g++", "--version"]).encode())
        h.update("\0".join(self.verilate_argv([], "T", Path("M"))).encode() + b"\0")
        h.update("\0".join(self.make_argv(Path("M"), "T", 1, cxx_opt)).encode())
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


def _runtime_objects(classes_mk: Path) -> list[str]:
    """The runtime's object files a model links (``VM_GLOBAL_FAST``/``VM_GLOBAL_SLOW`` of its
    ``V<top>_classes.mk``): the part of a build that is the same for every model."""
    names: list[str] = []
    text = classes_mk.read_text() if classes_mk.is_file() else ""
    for block in re.findall(r"^VM_GLOBAL_(?:FAST|SLOW) \+= \\\n((?:\t\S+ \\\n)*)", text, re.M):
        names += [f"{name}.o" for name in re.findall(r"\t(\S+) \\", block)]
    return names


def _seed_runtime(runtime: Path, mdir: Path, names: Sequence[str]) -> None:
    """Copy the cached runtime objects into a fresh model directory, dated just after the
    newest file Verilator wrote there (the objects depend on the model's makefile), so make
    finds them up to date and skips them; a damaged one is left out (make compiles it)."""
    after = max((p.stat().st_mtime_ns for p in mdir.iterdir()), default=0) + SEED_AFTER_NS
    for name in names:
        if intact(runtime / name):
            shutil.copyfile(runtime / name, mdir / name)
            os.utime(mdir / name, ns=(after, after))


def _keep_runtime(runtime: Path, mdir: Path, names: Sequence[str]) -> None:
    """After a build: keep its runtime objects for later builds (once; a concurrent build
    that got there first wins)."""
    if not names or all(intact(runtime / n) for n in names):
        return
    tmp = runtime.with_name(runtime.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for name in names:
        shutil.copy2(mdir / name, tmp / name)
        seal(tmp / name)
    shutil.rmtree(runtime, ignore_errors=True)
    try:
        os.replace(tmp, runtime)
    except OSError:  # another build kept it meanwhile
        shutil.rmtree(tmp, ignore_errors=True)
