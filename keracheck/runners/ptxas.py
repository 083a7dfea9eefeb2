"""ptxas runner: assemble PTX text into a cubin (no GPU needed) — our PTX validity gate.

:class:`Ptxas` is the only entry point: :meth:`Ptxas.available` (PATH check, never raises),
:meth:`Ptxas.version`, :meth:`Ptxas.argv` and :meth:`Ptxas.assemble`.  A rejected module raises
:class:`PtxasError` (a :class:`keracheck.target.BackendError`) whose message lists each ptxas
diagnostic with the PTX line it names, quoted from the text that was assembled::

    ptxas rejected the module (exit 255):
      line 20: error: Unknown symbol '%f99'
          add.rn.f32 %f2, %f1, %f99;

``--verbose`` output (registers, spills, compile time) is returned in :attr:`PtxasResult.log`;
its format changes between CUDA releases, so it is kept as text, not parsed.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from keracheck.runners.nvidia import find_tool
from keracheck.target import BackendError

INSTALL = "ptxas not found: pip install nvidia-cuda-nvcc (or put the CUDA toolkit's ptxas on PATH)"
_DIAGNOSTIC = re.compile(r"^ptxas [^,]*, line (\d+); (error|warning)\s*: (.*)$")


@dataclass(frozen=True)
class Diagnostic:
    """One ptxas message about a PTX line."""

    line: int
    severity: str
    message: str
    source: str


@dataclass(frozen=True)
class PtxasResult:
    """An assembled module: the cubin bytes, ptxas' ``--verbose`` log and the wall time."""

    cubin: bytes
    log: str
    seconds: float


class PtxasError(BackendError):
    """ptxas rejected a module; :attr:`diagnostics` holds each message with its PTX line."""

    def __init__(self, returncode: int, output: str, diagnostics: Sequence[Diagnostic]):
        self.returncode = returncode
        self.output = output
        self.diagnostics = tuple(diagnostics)
        lines = [f"ptxas rejected the module (exit {returncode}):"]
        for d in self.diagnostics:
            lines.append(f"  line {d.line}: {d.severity}: {d.message}")
            if d.source.strip():
                lines.append(f"      {d.source.strip()}")
        rest = [ln for ln in output.splitlines() if not _DIAGNOSTIC.match(ln) and ln.strip()]
        lines += [f"  {ln}" for ln in rest]
        super().__init__("\n".join(lines))


def diagnostics(output: str, ptx: str) -> list[Diagnostic]:
    """ptxas' ``line N; error : ...`` messages, each with line N of ``ptx``."""
    source = ptx.splitlines()
    found = []
    for raw in output.splitlines():
        m = _DIAGNOSTIC.match(raw.strip())
        if m is None:
            continue
        line = int(m.group(1))
        text = source[line - 1] if 0 < line <= len(source) else ""
        found.append(Diagnostic(line, m.group(2), m.group(3).strip(), text))
    return found


class Ptxas:
    """NVIDIA's PTX assembler (any CUDA 11+ release)."""

    name = "ptxas"

    def __init__(self, executable: str = "ptxas", arch: str = "sm_90", timeout: float = 120):
        self.executable = find_tool(executable) or executable
        self.arch = arch
        self.timeout = timeout

    def available(self) -> str | None:
        """None when ptxas is on PATH, else the reason and what fixes it."""
        return None if find_tool(self.executable) else INSTALL

    def version(self) -> str:
        """The release from ``ptxas --version`` (e.g. ``13.0.88``), or ``unknown``."""
        self._require()
        proc = subprocess.run(
            [self.executable, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
        m = re.search(r"\bV(\d+\.\d+\.\d+)", proc.stdout)
        return m.group(1) if m else "unknown"

    def argv(
        self, ptx: Path, cubin: Path, arch: str | None = None, extra: Sequence[str] = ()
    ) -> list[str]:
        """Command line assembling ``ptx`` into ``cubin`` for ``arch`` (verbose log on)."""
        return [
            self.executable,
            f"-arch={arch or self.arch}",
            "--verbose",
            *extra,
            str(ptx),
            "-o",
            str(cubin),
        ]

    def assemble(
        self, ptx: str, *, arch: str | None = None, extra_args: Sequence[str] = ()
    ) -> PtxasResult:
        """Assemble PTX text.  Raises :class:`PtxasError` with the diagnostics on rejection,
        :class:`BackendError` when ptxas is missing or times out."""
        self._require()
        with tempfile.TemporaryDirectory(prefix="kera-ptxas-") as tmp:
            src, out = Path(tmp) / "module.ptx", Path(tmp) / "module.cubin"
            src.write_text(ptx)
            start = time.perf_counter()
            try:
                proc = subprocess.run(
                    self.argv(src, out, arch, extra_args),
                    capture_output=True,
                    text=True,
                    timeout=self.timeout,
                    check=False,
                )
            except subprocess.TimeoutExpired as err:
                raise BackendError(f"ptxas timed out after {self.timeout} s") from err
            seconds = time.perf_counter() - start
            output = proc.stdout + proc.stderr
            if proc.returncode != 0 or not out.exists():
                raise PtxasError(proc.returncode, output, diagnostics(output, ptx))
            return PtxasResult(out.read_bytes(), output, seconds)

    def _require(self) -> None:
        reason = self.available()
        if reason is not None:
            raise BackendError(reason)
