"""Icarus Verilog runner: ``iverilog`` compiles a design to a ``vvp`` image, ``vvp`` runs it.

:class:`Iverilog` is the only entry point: :meth:`Iverilog.available` (PATH check, never
raises), argv builders (:meth:`Iverilog.compile_argv`, :meth:`Iverilog.run_argv`) and the two
steps (:meth:`Iverilog.compile`, :meth:`Iverilog.run`).  A failing step raises
:class:`keracheck.target.BackendError` carrying the tool's own output.  Sources are compiled
as Verilog-2005 (``-g2005``) unless told otherwise; parameters of the top module are set with
``-P``.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from keracheck.runners.tool import run_tool
from keracheck.target import BackendError

INSTALL = "apt-get install iverilog"


class Iverilog:
    """Icarus Verilog 11+ (``iverilog`` and ``vvp``)."""

    name = "iverilog"

    def available(self) -> str | None:
        """None when both tools are on PATH, else the reason and the install command."""
        for tool in ("iverilog", "vvp"):
            if shutil.which(tool) is None:
                return f"{tool} not on PATH: {INSTALL}"
        return None

    def version(self) -> str:
        """First line of ``iverilog -V`` ("Icarus Verilog version 11.0 (stable) ()")."""
        out = _run(["iverilog", "-V"], cwd=None, timeout=30, check=False)
        return out.splitlines()[0].strip() if out else "unknown"

    def compile_argv(
        self,
        sources: Sequence[Path],
        top: str,
        image: Path,
        params: Mapping[str, int] | None = None,
        generation: str = "2005",
    ) -> list[str]:
        """Command line that compiles ``sources`` with ``top`` as root into ``image``."""
        argv = ["iverilog", f"-g{generation}", "-s", top, "-o", str(image)]
        argv += [f"-P{top}.{name}={value}" for name, value in (params or {}).items()]
        return argv + [str(s) for s in sources]

    def run_argv(self, image: Path, plusargs: Mapping[str, str | int] | None = None) -> list[str]:
        """Command line that runs a compiled image; ``plusargs`` become ``+NAME=VALUE``."""
        return ["vvp", "-n", str(image)] + [f"+{k}={v}" for k, v in (plusargs or {}).items()]

    def compile(
        self,
        sources: Sequence[Path],
        top: str,
        image: Path,
        params: Mapping[str, int] | None = None,
        timeout: float = 600,
    ) -> Path:
        """Compile; returns ``image``.  Raises BackendError with iverilog's messages."""
        self._require()
        _run(self.compile_argv(sources, top, image, params), cwd=None, timeout=timeout)
        return image

    def run(
        self,
        image: Path,
        cwd: Path,
        plusargs: Mapping[str, str | int] | None = None,
        timeout: float = 3600,
    ) -> str:
        """Run a compiled image in ``cwd``; returns its standard output."""
        self._require()
        return _run(self.run_argv(image, plusargs), cwd=cwd, timeout=timeout)

    def _require(self) -> None:
        reason = self.available()
        if reason:
            raise BackendError(f"unavailable: {reason}")


def _run(argv: list[str], cwd: Path | None, timeout: float, check: bool = True) -> str:
    return run_tool(argv, timeout, cwd=cwd, check=check)
