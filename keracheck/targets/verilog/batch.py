"""A batch of cases as one simulation: distinct designs, one input segment per case.

Every distinct function is emitted once (memoised by fingerprint, top module
``kera_f<first 20 hex digits of the fingerprint>``) and instantiated once; each case is a
segment of input vectors, and a design's segments are streamed into it back to back, one
vector per clock (per ``ready`` with loops), every design at the same time.  :func:`chunks`
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

MAX_SEGMENTS = 4096  # cases per simulation
CORES_PER_SIM = 2_000  # bounds Verilator's memory and build time per simulation
#: below this much simulation work (core-clocks, :func:`work`) a batch is one part
SPLIT_WORK = 1_000_000


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

    def counts(self) -> list[int]:
        """Vectors per design: its segments' together, in segment order."""
        n = [0] * len(self.designs)
        for j, _, _, rows in self.segments:
            n[j] += rows
        return n

    def design_inputs(self) -> list[bytes]:
        """Per design, its vectors (its segments' in order): per vector each input port's bus
        big-endian, padded to whole bytes, ports in order (what ``$fread`` reads)."""
        per: list[list[bytes]] = [[] for _ in self.designs]
        for j, fn, inputs, _ in self.segments:
            d = self.designs[j]
            cols = [
                pack_port(port, np.asarray(inputs[str(p.attr("name"))]))[:, ::-1]
                for port, p in zip(d.inputs, fn.params, strict=True)
            ]
            if cols:
                per[j].append(np.concatenate(cols, axis=1).tobytes())
        return [b"".join(chunks) for chunks in per]

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


def work(fn: Function, inputs: Inputs) -> int:
    """A case's simulation work in core-clocks: the clocks its design runs (vectors x
    interval, plus its latency) times its core instances (at least one); 0 when it cannot
    be emitted or its inputs are wrong (it fails on its own)."""
    try:
        d, n = design_of(fn), _check_inputs(fn, inputs)
    except BackendError:
        return 0
    return (n * d.interval + d.latency) * max(1, sum(d.cores.values()))


def balance(cases: Sequence[tuple[Function, Inputs]], parts: int) -> list[list[int]]:
    """Case indices in at most ``parts`` groups of about equal simulation work, to simulate
    side by side: the cases of one function stay together (its design is instantiated once
    per simulation), the heaviest function goes to the lightest group, and each group keeps
    input order.  One group when the whole is under :data:`SPLIT_WORK`."""
    by_fn: dict[str, list[int]] = {}
    for i, (fn, _) in enumerate(cases):
        by_fn.setdefault(fn.fingerprint, []).append(i)
    weight = {fp: sum(work(*cases[i]) for i in idx) for fp, idx in by_fn.items()}
    if parts < 2 or sum(weight.values()) < SPLIT_WORK:
        return [list(range(len(cases)))] if cases else []
    groups: list[list[int]] = [[] for _ in range(parts)]
    load = [0] * parts
    for fp in sorted(by_fn, key=lambda f: -weight[f]):
        k = load.index(min(load))
        groups[k] += by_fn[fp]
        load[k] += weight[fp]
    return [sorted(g) for g in groups if g]
