"""Availability probes: a target that builds code proves it can, once per machine and toolchain.

A compiler on PATH is not a working toolchain: a cross gcc without its libc headers, a
Verilator without ``g++`` or ``make``, an Icarus without cocotb's VPI library all pass a PATH
check and then fail on every case.  So the ``available()`` of each such target runs the real
pipeline once on :func:`probe_case` (a two-op function on two rows): emit, build, and for the
qemu and simulator targets run.  A pass is remembered as an empty marker file under
``<cache>/probes/`` keyed by the probe version, the target, the machine and the toolchain
identity the target passes in (compiler path and version, flags ...), so later runs only
``stat`` it.  A failure is never remembered on disk (installing the missing package fixes the
target on the next run) but is memoised for the life of the process.

The reason a failed probe gives is one line: what failed, the tool's first error line, and the
command that fixes it — e.g. ``aarch64-linux-gnu-gcc cannot build a test program
(/usr/include/stdint.h:26:10: fatal error: bits/libc-header-start.h: No such file or
directory): apt-get install libc6-dev-arm64-cross``.
"""

from __future__ import annotations

import hashlib
import os
import platform
import tempfile
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from kera.ir import Function
from keracheck.runners.gcc import cache_root

#: bump when the probe program or what a pass means changes (old markers are then ignored)
PROBE_VERSION = "1"

PROBE_SOURCE = "export fn keracheck_probe(x: f32[4], y: f32[4]) -> f32[4] { x * y + y }\n"

_memo: dict[str, str | None] = {}


@cache
def probe_function() -> Function:
    from kera import frontend

    res = frontend.compile_source(PROBE_SOURCE, "<probe>")
    assert res.graph is not None and res.ok, res.diagnostics
    return res.graph.functions["keracheck_probe"]


def probe_case() -> tuple[Function, dict[str, np.ndarray[Any, Any]]]:
    """The probe function and two rows of inputs (exact in f32, no NaN)."""
    x = np.array([[1.5, -2.0, 0.25, 3.0], [0.0, -0.5, 8.0, 1e-3]], dtype=np.float32)
    y = np.array([[2.0, 0.5, -4.0, 1.0], [7.0, 2.5, 0.125, -6.0]], dtype=np.float32)
    return probe_function(), {"x": x, "y": y}


@cache
def _machine() -> str:
    try:
        mid = Path("/etc/machine-id").read_text().strip()
    except OSError:
        mid = ""
    return f"{platform.node()} {mid}"


def first_error_line(text: str) -> str:
    """The first line of a tool's output that says 'error' (else its first non-empty line)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if "error" in ln.lower():
            return ln[:300]
    return (lines[0] if lines else "no output")[:300]


def proven(
    target: str, identity: Sequence[str], attempt: Callable[[], None], what: str, fix: str
) -> str | None:
    """None when ``attempt()`` passed here for this identity (now or on an earlier run), else
    ``"<what> (<first error line>): <fix>"``.  ``attempt`` raises on any failure."""
    h = hashlib.sha256()
    for part in (PROBE_VERSION, target, _machine(), *identity):
        h.update(part.encode() + b"\0")
    key = h.hexdigest()
    if key in _memo:
        return _memo[key]
    marker = cache_root() / "probes" / key
    if marker.is_file():
        _memo[key] = None
        return None
    try:
        attempt()
    except Exception as e:
        reason = f"{what} ({first_error_line(str(e)) or type(e).__name__}): {fix}"
        _memo[key] = reason
        return reason
    _memo[key] = None
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=marker.parent, prefix=".probe-")
        with os.fdopen(fd, "w") as f:
            f.write(f"{target}\n" + "\n".join(identity) + "\n")
        os.replace(tmp, marker)
    except OSError:
        pass  # an unwritable cache only means probing again next time
    return None


def forget() -> None:
    """Drop the in-process memo (tests)."""
    _memo.clear()
