"""Running an external tool: one place for the time limit, the exit status and the tail of its
output in the error, so every runner reports failures the same way::

    verilator failed (exit 1):
    %Error: kera_top.v:12:3: syntax error ...
    iverilog timed out after 600 s
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

from keracheck.target import BackendError

TAIL = 4000  # characters of the tool's output kept in an error


def run_tool(
    argv: Sequence[str],
    timeout: float,
    *,
    cwd: Path | None = None,
    check: bool = True,
    name: str | None = None,
    stderr_only: bool = False,
) -> str:
    """Run ``argv`` and return its standard output; a time-out, or (with ``check``) a non-zero
    exit, raises BackendError naming the tool (``name`` or the program's file name) with the
    tail of its output (stderr alone with ``stderr_only``)."""
    who = name or Path(argv[0]).name
    try:
        proc = subprocess.run(
            list(argv), cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        raise BackendError(f"{who} timed out after {timeout:g} s") from None
    if check and proc.returncode != 0:
        text = proc.stderr if stderr_only else proc.stdout + proc.stderr
        raise BackendError(f"{who} failed (exit {proc.returncode}):\n{text.strip()[-TAIL:]}")
    return proc.stdout


def first_line(argv: Sequence[str], timeout: float = 30) -> str:
    """The first line a version query prints (``unknown`` if it cannot run)."""
    try:
        out = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=timeout, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    lines = out.strip().splitlines()
    return lines[0].strip() if lines else "unknown"
