"""What a build of Kera is: the package version and a digest of its sources.

The digest says exactly which code ran (an editable install changes without a new version):
``kerac --version`` and ``keracheck --version`` print it, and keracheck's result cache keys on
it, so any code change, RTL cores included, invalidates cached results.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

#: file kinds whose bytes define behaviour: Python, RTL, the Node runner, C and headers
SOURCE_SUFFIXES = (".py", ".v", ".mjs", ".c", ".h")


def package_version() -> str:
    try:
        return importlib.metadata.version("kera")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


def digest_of(packages: tuple[ModuleType, ...]) -> str:
    h = hashlib.sha256()
    for pkg in packages:
        root = Path(pkg.__file__ or ".").parent
        h.update(pkg.__name__.encode() + b"\0")
        for f in sorted(root.rglob("*")):
            if f.suffix in SOURCE_SUFFIXES and f.is_file():
                h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


@cache
def source_digest(with_checker: bool = True) -> str:
    """SHA-256 over the sources of kera, kera_hdl (the RTL cores) and, by default, keracheck."""
    import kera
    import kera_hdl  # type: ignore[import-not-found, unused-ignore]

    packages: tuple[ModuleType, ...] = (kera, kera_hdl)
    if with_checker:
        import keracheck

        packages += (keracheck,)
    return digest_of(packages)


def describe(program: str) -> str:
    """``<program> <version> (source <first 12 hex digits of the digest>)``."""
    return f"{program} {package_version()} (source {source_digest()[:12]})"


def version_action(program: str) -> type[argparse.Action]:
    """An argparse action for ``--version`` that computes the digest only when asked."""

    class _Version(argparse.Action):
        def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
            kwargs.setdefault("help", "print the version and the source digest, then exit")
            super().__init__(option_strings, dest, nargs=0, **kwargs)

        def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
            print(describe(program))
            parser.exit()

    return _Version
