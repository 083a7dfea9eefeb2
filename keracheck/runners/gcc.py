"""gcc (native or cross) runner: PATH check, argv builder and a content-addressed build cache.

:class:`Gcc` wraps one compiler driver (``gcc``, ``aarch64-linux-gnu-gcc`` ...).  :meth:`Gcc.build`
compiles a set of source files into a shared object or a static executable and caches it under
``$KERACHECK_CACHE`` (default ``~/.cache/keracheck``) as ``c/<sha256>/``, where the hash covers
the compiler's identity (path, ``-dumpfullversion``, ``-dumpmachine``), the kind of artifact, every
flag and every source file's name and bytes.  A hit skips the compiler.  Artifacts are written to
a temporary name and renamed into place, so concurrent builds of one hash are safe.  A failing
compile raises :class:`keracheck.target.BackendError` carrying gcc's own diagnostics.

:meth:`Gcc.build_object` compiles one source into an object for builds of one kind to link
(``link=``), cached the same way (``c/<sha256>/<stem>.o``); it is built under a lock, so
concurrent builders (threads or processes) compile it once.  A build that links objects hashes
their bytes too.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Literal

from keracheck.runners.sealed import digest, intact, seal
from keracheck.runners.tool import run_tool
from keracheck.target import BackendError

Kind = Literal["shared", "static"]
_KIND_FLAGS: dict[str, tuple[str, ...]] = {
    "shared": ("-shared", "-fPIC"),
    "static": ("-static",),
}
_ARTIFACT = {"shared": "lib.so", "static": "prog"}


def cache_root() -> Path:
    """Where compiled artifacts are kept: $KERACHECK_CACHE or ~/.cache/keracheck."""
    env = os.environ.get("KERACHECK_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "keracheck"


class Gcc:
    """One gcc driver; ``apt`` names the Debian package that provides it."""

    def __init__(self, exe: str = "gcc", apt: str = "gcc") -> None:
        self.exe = exe
        self.apt = apt
        self.name = exe

    def available(self) -> str | None:
        """None when the driver is on PATH, else the reason and the install command."""
        if shutil.which(self.exe) is None:
            return f"{self.exe} not on PATH: apt-get install {self.apt}"
        return None

    def path(self) -> str:
        """The driver's resolved path ("" when it is not on PATH)."""
        return shutil.which(self.exe) or ""

    def version(self) -> str:
        """``<full version> <target triple>``, e.g. ``12.2.0 x86_64-linux-gnu``."""
        return _identity(self.exe)

    def argv(
        self,
        sources: Sequence[Path],
        output: Path,
        flags: Sequence[str],
        kind: Kind,
        link: Sequence[Path] = (),
    ) -> list[str]:
        """The compile-and-link command line (objects to link after the sources, ``-lm``
        last)."""
        return [
            self.exe,
            *flags,
            *_KIND_FLAGS[kind],
            "-o",
            str(output),
            *map(str, sources),
            *map(str, link),
            "-lm",
        ]

    def _key(self, kind: str, flags: Sequence[str]) -> hashlib._Hash:
        h = hashlib.sha256()
        for part in (self.exe, self.version(), kind, *flags):
            h.update(part.encode() + b"\0")
        return h

    def build(
        self,
        files: Mapping[str, str],
        flags: Sequence[str],
        kind: Kind,
        timeout: float = 600,
        link: Sequence[Path] = (),
    ) -> Path:
        """Compile the ``.c`` files of ``files`` (name -> text; headers beside them) and link
        them with the objects ``link`` (from :meth:`build_object`); returns the cached
        artifact's path."""
        reason = self.available()
        if reason is not None:
            raise BackendError(reason)
        h = self._key(kind, flags)
        for name in sorted(files):
            h.update(name.encode() + b"\0" + files[name].encode() + b"\0")
        for obj in link:  # what is linked, by content
            h.update(obj.name.encode() + b"\0" + digest(obj).encode() + b"\0")
        out_dir = cache_root() / "c" / h.hexdigest()
        artifact = out_dir / _ARTIFACT[kind]
        if intact(artifact):
            return artifact
        out_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
            work = Path(tmp)
            for name, text in files.items():
                (work / name).write_text(text)
            sources = [work / n for n in sorted(files) if n.endswith(".c")]
            _compile(self.argv(sources, work / "out", flags, kind, link), timeout)
            for name, text in files.items():  # keep the sources beside the artifact
                (out_dir / name).write_text(text)
            built = work / _ARTIFACT[kind]
            os.replace(work / "out", built)
            _publish(built, artifact)
        return artifact

    def build_object(
        self, name: str, text: str, flags: Sequence[str], kind: Kind, timeout: float = 600
    ) -> Path:
        """Compile the self-contained source ``name`` (``.c``) into an object that builds of
        ``kind`` link (position-independent for a shared object); returns the cached object's
        path (``<stem>.o``, the source beside it).  Cached by content like :meth:`build`, and
        built under a lock on its cache folder: concurrent callers wait for one compile, and a
        reader never sees a partial object (sealed, then renamed into place)."""
        reason = self.available()
        if reason is not None:
            raise BackendError(reason)
        pic = ("-fPIC",) if kind == "shared" else ()
        h = self._key(f"object {kind}", [*flags, *pic])
        h.update(name.encode() + b"\0" + text.encode() + b"\0")
        out_dir = cache_root() / "c" / h.hexdigest()
        obj = out_dir / (Path(name).stem + ".o")
        if intact(obj):
            return obj
        out_dir.mkdir(parents=True, exist_ok=True)
        with open(out_dir / ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
            if intact(obj):  # another builder finished it while this one waited
                return obj
            with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
                work = Path(tmp)
                (work / name).write_text(text)
                argv = [self.exe, *flags, *pic, "-c", "-o", str(work / obj.name), str(work / name)]
                _compile(argv, timeout)
                (out_dir / name).write_text(text)
                _publish(work / obj.name, obj)
        return obj


def _publish(built: Path, dest: Path) -> None:
    """Move ``built`` to ``dest`` sealed: its digest first, then the file, each renamed into
    place, so a reader never trusts a partial one."""
    seal(built)
    os.replace(built.with_name(f"{built.name}.sha256"), dest.with_name(f"{dest.name}.sha256"))
    os.replace(built, dest)


def _compile(argv: list[str], timeout: float) -> None:
    run_tool(argv, timeout, name=argv[0])


@cache
def _identity(exe: str) -> str:
    parts = []
    for flag in ("-dumpfullversion", "-dumpmachine"):
        try:
            proc = subprocess.run(
                [exe, flag], capture_output=True, text=True, timeout=30, check=False
            )
        except OSError:
            return "unknown"
        parts.append(proc.stdout.strip() or "unknown")
    return " ".join(parts)
