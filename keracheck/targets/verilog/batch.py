"""A batch of cases as one simulation: distinct designs, one input segment per case.

Every distinct function is emitted once (memoised by fingerprint, top module
``kera_f<first 20 hex digits of the fingerprint>``) and instantiated once; each case is a
segment of input vectors streamed into its design, one vector per clock.  :func:`chunks`
bounds a simulation by core instances (:data:`CORES_PER_SIM`) and segments
(:data:`MAX_SEGMENTS`, the size of the test bench's plan arrays).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kera.backends.verilog import VerilogDesign, VerilogEmitError, emit
from kera.interp import InputError, batch_size
from kera.ir import Function
from keracheck.target import BackendError, Inputs, Outputs
from keracheck.targets.verilog.bus import pack_port, unpack_port

MAX_SEGMENTS = 4096
CORES_PER_SIM = 2_000  # bounds Verilator's memory and build time per simulation


def _check_inputs(fn: Function, inputs: Inputs) -> int:
    try:
        return batch_size(fn, inputs)
    except InputError as e:
        raise BackendError(str(e)) from e


@dataclass
class Batch:
    """Distinct designs of a list of cases, and each case's segment."""

    designs: list[VerilogDesign]
    segments: list[tuple[int, Function, Inputs, int]]  # (design index, fn, inputs, N)

    @classmethod
    def of(cls, cases: Sequence[tuple[Function, Inputs]]) -> Batch:
        by_fp: dict[str, int] = {}
        designs: list[VerilogDesign] = []
        segments = []
        for fn, inputs in cases:
            n = _check_inputs(fn, inputs)
            if fn.fingerprint not in by_fp:
                by_fp[fn.fingerprint] = len(designs)
                designs.append(design_of(fn))
            segments.append((by_fp[fn.fingerprint], fn, inputs, n))
        return cls(designs, segments)

    def input_bytes(self) -> bytes:
        chunks = []
        for j, fn, inputs, _ in self.segments:
            d = self.designs[j]
            cols = [
                pack_port(port, np.asarray(inputs[str(p.attr("name"))]))[:, ::-1]
                for port, p in zip(d.inputs, fn.params, strict=True)
            ]
            if cols:
                chunks.append(np.concatenate(cols, axis=1).tobytes())
        return b"".join(chunks)

    def plan(self) -> str:
        return "".join(f"{j} {n}\n" for j, _, _, n in self.segments)

    def split(self, per_design: list[list[np.ndarray[Any, Any]]]) -> list[Outputs]:
        """Per-design result bytes (in segment order) -> per-case outputs."""
        pos = [0] * len(self.designs)
        cases: list[Outputs] = []
        for j, _, _, n in self.segments:
            d, a = self.designs[j], pos[j]
            cases.append(
                [unpack_port(port, per_design[j][k][a : a + n]) for k, port in enumerate(d.outputs)]
            )
            pos[j] = a + n
        return cases

    def write_design_files(self, work: Path) -> list[Path]:
        """Each design's Verilog as ``<top>.v`` in ``work``; returns the paths."""
        files = []
        for d in self.designs:
            path = work / f"{d.top}.v"
            path.write_text(d.text)
            files.append(path)
        return files


_DESIGNS: dict[str, VerilogDesign] = {}


def top_name(fn: Function) -> str:
    return "kera_f" + fn.fingerprint[:20]


def design_of(fn: Function) -> VerilogDesign:
    """The emitted design of fn (memoised by fingerprint); BackendError if it cannot lower."""
    if fn.fingerprint not in _DESIGNS:
        try:
            _DESIGNS[fn.fingerprint] = emit(fn, top=top_name(fn))
        except VerilogEmitError as e:
            raise BackendError(str(e)) from e
    return _DESIGNS[fn.fingerprint]


def clear_memo() -> None:
    """Forget memoised designs (tests)."""
    _DESIGNS.clear()


def chunks(cases: Sequence[tuple[Function, Inputs]]) -> list[list[int]]:
    """Case indices grouped into simulations of at most :data:`CORES_PER_SIM` core instances
    (distinct designs counted once) and :data:`MAX_SEGMENTS` segments, in input order.  A case
    that cannot be emitted gets a chunk of its own (its error is reported for it alone)."""
    groups: list[list[int]] = []
    seen: set[str] = set()
    load = CORES_PER_SIM + 1
    for i, (fn, _) in enumerate(cases):
        try:
            cost = 0 if fn.fingerprint in seen else sum(design_of(fn).cores.values())
        except BackendError:
            groups.append([i])
            load = CORES_PER_SIM + 1  # the next case starts a new group
            continue
        if load + cost > CORES_PER_SIM or len(groups[-1]) >= MAX_SEGMENTS:
            groups.append([])
            seen, load = set(), 0
            cost = sum(design_of(fn).cores.values())
        groups[-1].append(i)
        seen.add(fn.fingerprint)
        load += cost
    return [g for g in groups if g]
