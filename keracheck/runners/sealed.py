"""Checksums for cached build artifacts (a shared object, a static executable, a simulator).

A build cache hit used to be ``artifact.exists()``: a truncated ``lib.so`` (a full disk, a
killed copy, a flipped bit) was then loaded or run on every later run and never repaired.
:func:`seal` writes ``<artifact>.sha256`` beside a freshly built artifact; :func:`intact` is
true only when both are there and agree, so a damaged artifact is a miss and is rebuilt.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path


def digest(path: Path) -> str:
    """The SHA-256 of ``path``'s bytes (hex)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _seal_path(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def seal(path: Path) -> None:
    """Record ``path``'s digest beside it (temporary name, then rename)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-", suffix=".sha256")
    with os.fdopen(fd, "w") as f:
        f.write(digest(path) + "\n")
    os.replace(tmp, _seal_path(path))


def intact(path: Path) -> bool:
    """True when ``path`` exists and matches its recorded digest."""
    try:
        return _seal_path(path).read_text().strip() == digest(path)
    except OSError:
        return False
