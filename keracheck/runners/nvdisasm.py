"""nvdisasm runner: cubin -> SASS text, and the SASS lint of the PTX back end.

:class:`Nvdisasm` finds ``nvdisasm`` on PATH or inside NVIDIA's pip package
``nvidia-cuda-nvdisasm`` (``site-packages/nvidia/cu*/bin/nvdisasm``); :meth:`available`
never raises.  :func:`kernels` splits ``nvdisasm -c`` output into one list of instructions
per kernel, each as its opcode with modifiers (``FFMA``, ``MUFU.RCP``, ``FADD.FTZ`` ...).

:func:`lint` is the SASS check of issue 7: a kernel must contain no fused multiply-add
(``FFMA``/``DFMA``) the graph did not ask for and no special-function unit
(``MUFU``) instruction — those are approximations or contractions.  ptxas legitimately uses
both to implement the IEEE-exact ``div.rn``, ``sqrt.rn``, integer division and ``fma.rn``, so
the caller says whether the graph has such ops (``exempt``).
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

from keracheck.runners.nvidia import find_tool
from keracheck.target import BackendError

INSTALL = "nvdisasm not found: pip install nvidia-cuda-nvdisasm (or put CUDA's nvdisasm on PATH)"
_SECTION = re.compile(r"^\s*\.section\s+\.text\.([A-Za-z_$][\w$]*)")
_INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")
# f32/f64 fused multiply-adds.  HFMA2 is left out: we emit no f16 arithmetic, and ptxas uses
# ``HFMA2.MMA Rd, -RZ, RZ, c, c`` as a constant move in kernels without any float op.
FUSED = ("FFMA", "DFMA")
SPECIAL = ("MUFU",)


class Nvdisasm:
    """NVIDIA's SASS disassembler."""

    name = "nvdisasm"

    def path(self) -> str | None:
        return find_tool("nvdisasm")

    def available(self) -> str | None:
        return None if self.path() else INSTALL

    def disassemble(self, cubin: bytes) -> str:
        """``nvdisasm -c`` of a cubin (code sections only)."""
        exe = self.path()
        if exe is None:
            raise BackendError(INSTALL)
        with tempfile.TemporaryDirectory(prefix="kera-sass-") as tmp:
            path = Path(tmp) / "module.cubin"
            path.write_bytes(cubin)
            proc = subprocess.run(
                [exe, "-c", str(path)], capture_output=True, text=True, timeout=120, check=False
            )
        if proc.returncode != 0:
            raise BackendError(f"nvdisasm failed (exit {proc.returncode}): {proc.stderr.strip()}")
        return proc.stdout


def kernels(sass: str) -> dict[str, list[str]]:
    """Instruction opcodes (with modifiers) of each kernel in ``nvdisasm -c`` output."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in sass.splitlines():
        section = _SECTION.match(line)
        if section:
            current = out.setdefault(section.group(1), [])
            continue
        ins = _INSTRUCTION.match(line)
        if ins and current is not None:
            current.append(ins.group(1))
    return out


def lint(opcodes: list[str], exempt: bool) -> list[str]:
    """Fused multiply-adds and MUFU instructions in a kernel; none are allowed unless the
    graph asked for an fma or for ops ptxas implements with them (``exempt``)."""
    if exempt:
        return []
    return sorted({op for op in opcodes if op.split(".")[0] in FUSED + SPECIAL})
