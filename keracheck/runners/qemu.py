"""qemu-user runner: run a foreign-architecture Linux executable on this host.

:class:`Qemu` wraps ``qemu-<arch>`` (Debian package ``qemu-user``).  binfmt_misc is not assumed
to be registered, so the emulator is always called explicitly; the binaries we run are static,
so no ``-L`` sysroot is needed.  A non-zero exit or a timeout raises
:class:`keracheck.target.BackendError` with the program's stderr.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from keracheck.runners.tool import first_line, run_tool
from keracheck.target import BackendError

INSTALL = "apt-get install qemu-user"


class Qemu:
    """``qemu-<arch>`` user-mode emulation (arch: aarch64, riscv64 ...)."""

    def __init__(self, arch: str) -> None:
        self.arch = arch
        self.exe = f"qemu-{arch}"
        self.name = self.exe

    def available(self) -> str | None:
        if shutil.which(self.exe) is None:
            return f"{self.exe} not on PATH: {INSTALL}"
        return None

    def version(self) -> str:
        """First line of ``qemu-<arch> --version``."""
        return _version(self.exe)

    def argv(self, binary: Path, args: Sequence[str]) -> list[str]:
        return [self.exe, str(binary), *args]

    def run(self, binary: Path, args: Sequence[str], timeout: float = 600) -> str:
        """Run ``binary args`` under the emulator; returns its standard output."""
        reason = self.available()
        if reason is not None:
            raise BackendError(reason)
        return run_tool(
            self.argv(binary, args), timeout, name=f"{self.exe} {binary.name}", stderr_only=True
        )


@cache
def _version(exe: str) -> str:
    return first_line([exe, "--version"])
