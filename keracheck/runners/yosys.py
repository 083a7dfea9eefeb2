"""Yosys runner: synthesis-based resource estimates (cells, LUTs, flip-flops) of a design.

:meth:`Yosys.estimate` writes a small script (``read_verilog``, ``chparam``, then either
``synth_ice40`` or a generic ``synth`` followed by ``abc -lut 4``), runs ``yosys -q -s`` and
parses the JSON written by ``stat -json``.  The counts are of the flattened top module:

* ``ice40``: LUTs are ``SB_LUT4``, flip-flops every ``SB_DFF*``, carries ``SB_CARRY``, DSPs
  ``SB_MAC16`` (``synth_ice40 -dsp`` maps multipliers to them).
* ``generic``: LUTs are ``$lut`` (4 inputs), flip-flops every ``$_*DFF*`` / ``$dff``-like cell.

A failing run raises :class:`keracheck.target.BackendError` with yosys's messages.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from keracheck.runners.tool import run_tool
from keracheck.target import BackendError

INSTALL = "apt-get install yosys"
FAMILIES = ("ice40", "generic")


@dataclass(frozen=True)
class Resources:
    """Cell counts of one synthesised design."""

    family: str
    cells: int
    luts: int
    ffs: int
    carries: int = 0
    dsps: int = 0
    by_type: Mapping[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        return {
            "family": self.family,
            "cells": self.cells,
            "luts": self.luts,
            "ffs": self.ffs,
            "carries": self.carries,
            "dsps": self.dsps,
            "by_type": dict(self.by_type),
        }


class Yosys:
    """Yosys 0.2x on PATH."""

    name = "yosys"

    def available(self) -> str | None:
        """None when ``yosys`` is on PATH, else the reason and the install command."""
        return None if shutil.which("yosys") else f"yosys not on PATH: {INSTALL}"

    def version(self) -> str:
        """``yosys -V`` ("Yosys 0.23 (git sha1 7ce5011c24b)")."""
        proc = subprocess.run(
            ["yosys", "-V"], capture_output=True, text=True, timeout=30, check=False
        )
        return proc.stdout.strip() or "unknown"

    def script(
        self,
        sources: Sequence[Path],
        top: str,
        stat_json: Path,
        params: Mapping[str, int] | None = None,
        family: str = "ice40",
    ) -> str:
        """The yosys script that synthesises ``top`` and writes ``stat -json`` output."""
        if family not in FAMILIES:
            raise ValueError(f"unknown family {family!r}; valid: {', '.join(FAMILIES)}")
        lines = ["read_verilog " + " ".join(str(s) for s in sources)]
        if params:
            sets = " ".join(f"-set {k} {v}" for k, v in params.items())
            lines.append(f"chparam {sets} {top}")
        if family == "ice40":
            lines.append(f"synth_ice40 -dsp -top {top}")
        else:
            lines += [f"synth -flatten -top {top}", "abc -lut 4", "opt_clean"]
        lines.append(f"tee -q -o {stat_json} stat -json")
        return "\n".join(lines) + "\n"

    def argv(self, script: Path) -> list[str]:
        return ["yosys", "-q", "-s", str(script)]

    def estimate(
        self,
        sources: Sequence[Path],
        top: str,
        params: Mapping[str, int] | None = None,
        family: str = "ice40",
        timeout: float = 1800,
    ) -> Resources:
        """Synthesise and count; raises BackendError when yosys fails or is missing."""
        reason = self.available()
        if reason:
            raise BackendError(f"unavailable: {reason}")
        with tempfile.TemporaryDirectory(prefix="keracheck-yosys-") as tmp:
            stat = Path(tmp) / "stat.json"
            script = Path(tmp) / "synth.ys"
            script.write_text(self.script(sources, top, stat, params, family))
            _run(self.argv(script), timeout)
            return parse_stat(json.loads(stat.read_text()), family)


def parse_stat(stat: Mapping[str, object], family: str) -> Resources:
    """Resources from yosys ``stat -json`` output (the ``design`` totals)."""
    design = stat.get("design")
    if not isinstance(design, dict):
        raise BackendError("yosys stat output has no design totals")
    by_type = {str(k): int(v) for k, v in design.get("num_cells_by_type", {}).items()}
    lut_cell = "SB_LUT4" if family == "ice40" else "$lut"
    return Resources(
        family=family,
        cells=int(design.get("num_cells", 0)),
        luts=by_type.get(lut_cell, 0),
        ffs=sum(n for t, n in by_type.items() if "DFF" in t.upper()),
        carries=by_type.get("SB_CARRY", 0),
        dsps=by_type.get("SB_MAC16", 0),
        by_type=by_type,
    )


def _run(argv: list[str], timeout: float) -> None:
    run_tool(argv, timeout, name="yosys")
