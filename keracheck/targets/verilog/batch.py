"""A batch of cases as one simulation: distinct designs, one input segment per case.

Every distinct function is emitted once (memoised by fingerprint, top module
``kera_f<first 20 hex digits of the fingerprint>``) and instantiated once; each case is a
segment of input vectors, and a design's segments are streamed into it back to back, one
vector per clock (per ``ready`` with loops), every design at the same time.  :func:`chunks`
bounds a simulation by core instances (:data:`CORES_PER_SIM`) and segments
(:data:`MAX_SEGMENTS`, the size of the test bench's plan arrays).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
#: below this much simulation work (:func:`work`; ~3 s of Icarus per million) a batch is one part
SPLIT_WORK = 10_000_000
#: one core evaluation against one core-clock of idle clocking, in Icarus: verlet's fmul/fadd
#: take ~20-30 us per evaluation, its 256 cores ~0.5 ms per clock with nothing changing
EVAL_WEIGHT = 16
#: compiling and loading one core instance, once per design and simulation, in the same units:
#: transcendental.kera's 3,168 instances take ~5 s of iverilog and ~10 s of vvp over very
#: few clocks (~4.8 ms each); left out, the part holding it ran alone for its last 14 s
ELAB_WEIGHT = 1_600


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
    """A case's simulation work: core-clocks (the clocks its design runs, vectors x interval
    plus its latency, times its core instances, at least one: every core's registers are
    clocked on every clock) plus :data:`EVAL_WEIGHT` per core evaluation (once per vector for
    a core outside loops, once per trip for one in a top-level loop's body).  Core-clocks
    alone misjudged loop designs: rnn_cell (8 trips of a 94-clock body) and verlet (100 trips
    of 4) weigh about the same in core-clocks, but verlet took ~3x the CPU.  0 when the case
    cannot be emitted or its inputs are wrong (it fails on its own)."""
    try:
        d, n = design_of(fn), _check_inputs(fn, inputs)
    except BackendError:
        return 0
    cores = sum(d.cores.values())
    in_loops = sum(int(lp["core_instances"]) for lp in d.loops)
    evals = cores - in_loops + sum(int(lp["trips"]) * int(lp["core_instances"]) for lp in d.loops)
    return (n * d.interval + d.latency) * max(1, cores) + EVAL_WEIGHT * n * evals


def weights(
    cases: Sequence[tuple[Function, Inputs]], groups: Mapping[str, Sequence[int]]
) -> dict[str, int]:
    """Each group's work in one simulation: its cases' :func:`work` plus, once (the design is
    elaborated once per simulation), :data:`ELAB_WEIGHT` per core instance of its design."""
    return {
        key: sum(work(*cases[i]) for i in idx) + elaboration(cases[idx[0]][0])
        for key, idx in groups.items()
    }


def elaboration(fn: Function) -> int:
    """Compiling and loading ``fn``'s design, in :func:`work`'s units (0 when it cannot be
    emitted: it fails on its own)."""
    try:
        d = design_of(fn)
    except BackendError:
        return 0
    return ELAB_WEIGHT * max(1, sum(d.cores.values()))


def balance(
    cases: Sequence[tuple[Function, Inputs]], parts: int, keys: Sequence[str] | None = None
) -> list[list[int]]:
    """Case indices in at most ``parts`` groups of about equal simulation work, to simulate
    side by side: the cases of one function stay together (its design is instantiated once
    per simulation), the heaviest function goes to the lightest group, and each group keeps
    input order.  One group when the whole is under :data:`SPLIT_WORK`.  ``keys`` (one per
    case; default: the function's fingerprint) says which cases stay together: the pieces of
    one case cut by :func:`split_heavy` get keys of their own so that they can be apart."""
    by_fn: dict[str, list[int]] = {}
    for i, (fn, _) in enumerate(cases):
        by_fn.setdefault(keys[i] if keys else fn.fingerprint, []).append(i)
    weight = weights(cases, by_fn)
    if parts < 2 or sum(weight.values()) < SPLIT_WORK:
        return [list(range(len(cases)))] if cases else []
    groups: list[list[int]] = [[] for _ in range(parts)]
    load = [0] * parts
    for fp in sorted(by_fn, key=lambda f: -weight[f]):
        k = load.index(min(load))
        groups[k] += by_fn[fp]
        load[k] += weight[fp]
    return [sorted(g) for g in groups if g]


@dataclass(frozen=True)
class Piece:
    """Case ``case``, or (``span`` set) its vectors ``span[0]`` to ``span[1]`` (exclusive),
    the ``part``-th piece of it."""

    case: int
    part: int = 0
    span: tuple[int, int] | None = None


def split_heavy(cases: Sequence[tuple[Function, Inputs]], parts: int) -> list[Piece]:
    """The cases cut into pieces of their vectors where one case alone is more than a
    ``parts``-th of the whole simulation work (a loop design simulates for ~``interval``
    clocks per vector, so one case can be most of a batch): such a case becomes up to
    ``parts`` pieces of about equal size, which :func:`balance` may place in different
    simulations (each elaborates the design once more, seconds against minutes of
    simulation).  Every other case is one piece.  Nothing is cut under :data:`SPLIT_WORK`."""
    each = [work(fn, inputs) for fn, inputs in cases]
    total = sum(each)
    share = max(1, total // max(1, parts))
    out: list[Piece] = []
    for i, ((fn, inputs), w) in enumerate(zip(cases, each, strict=True)):
        n = batch_size(fn, inputs) if w and fn.params else 1  # w > 0: the inputs are good
        k = min(parts, n, -(-w // share)) if parts > 1 and total >= SPLIT_WORK else 1
        if k < 2:
            out.append(Piece(i))
            continue
        cuts = [n * j // k for j in range(k + 1)]
        out += [Piece(i, j, (cuts[j], cuts[j + 1])) for j in range(k)]
    return out


def piece_case(cases: Sequence[tuple[Function, Inputs]], p: Piece) -> tuple[Function, Inputs]:
    """The case of piece ``p``: its function and its slice of the case's input vectors."""
    fn, inputs = cases[p.case]
    if p.span is None:
        return fn, inputs
    lo, hi = p.span
    return fn, {name: np.asarray(a)[lo:hi] for name, a in inputs.items()}


def join_pieces(
    cases: int, pieces: Sequence[Piece], results: Sequence[Outputs | Exception]
) -> list[Outputs | Exception]:
    """Each case's outputs from its pieces' (in vector order); a piece's error is its case's."""
    per: list[list[Outputs | Exception]] = [[] for _ in range(cases)]
    for p, res in sorted(zip(pieces, results, strict=True), key=lambda x: (x[0].case, x[0].part)):
        per[p.case].append(res)
    return [_join(rs) for rs in per]


def _join(results: list[Outputs | Exception]) -> Outputs | Exception:
    errors = [r for r in results if isinstance(r, Exception)]
    if errors or len(results) == 1:
        return errors[0] if errors else results[0]
    outs = [r for r in results if not isinstance(r, Exception)]
    return [np.concatenate([o[k] for o in outs]) for k in range(len(outs[0]))]
