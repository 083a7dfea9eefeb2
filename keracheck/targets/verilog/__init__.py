"""Targets ``verilog`` (cocotb 2.x + Icarus) and ``verilog-verilator`` (plain test bench).

Both simulate the datapaths of :mod:`kera.backends.verilog` and must give identical bits.  A
batch of cases becomes one simulation (:mod:`.batch`); the targets differ only in the bench
that drives it:

* ``verilog-verilator``: the generated plain-Verilog test bench (:mod:`.testbench`), built with
  ``verilator --binary``; the same bench runs in Icarus (:func:`run_plain` with
  ``simulator="icarus"``), the fast Icarus path for large batches.
* ``verilog``: a wrapper driven by a cocotb test on Icarus (:mod:`.cocotb_bench`).

Both check the latency they observe (first ``valid_in`` to first ``valid_out``) against the
schedule the emitter reports, and fail the batch when they differ.  Bus layout: :mod:`.bus`.

This module holds the target classes; it re-exports the names callers used when it was one
file (and ``cocotb_stream``, which the generated cocotb test imports from here).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

from kera.backends.verilog import SUPPORTED, VerilogDesign, VerilogSizeError
from kera.ir import Function
from kera_hdl import rtl_sources  # type: ignore[import-not-found, unused-ignore]
from keracheck import probe
from keracheck.runners.iverilog import Iverilog
from keracheck.runners.verilator import INSTALL as INSTALL_VERILATOR
from keracheck.runners.verilator import Verilator
from keracheck.runners.yosys import Resources, Yosys
from keracheck.target import API_VERSION, BackendError, Inputs, Outputs
from keracheck.targets.verilog import corelib
from keracheck.targets.verilog.batch import (
    CORES_PER_SIM,
    MAX_SEGMENTS,
    SPLIT_WORK,
    Batch,
    balance,
    chunks,
    clear_memo,
    design_of,
    join_pieces,
    piece_case,
    split_heavy,
    top_name,
)
from keracheck.targets.verilog.bus import pack_port, parse_hex_fields, unpack_port
from keracheck.targets.verilog.cocotb_bench import (
    COCOTB_INSTALL,
    COCOTB_TEST,
    JOB_ENV,
    OUT_ENV,
    check_design,
    cocotb_outputs,
    cocotb_stream,
    render_wrapper,
    run_cocotb,
)
from keracheck.targets.verilog.testbench import (
    DISPLAY_MAX_BITS,
    QUICK_BUILD_VECTORS,
    hex_chunks,
    prepare,
    render_testbench,
    run_plain,
    write_inputs,
)


def resource_estimate(fn: Function, family: str = "ice40") -> Resources:
    """Yosys synthesis estimate (cells, LUTs, FFs) of fn's datapath; BackendError if yosys is
    missing or fails."""
    d = design_of(fn)
    with tempfile.TemporaryDirectory(prefix="keracheck-yosys-") as tmp:
        path = Path(tmp) / f"{d.top}.v"
        path.write_text(d.text)
        return Yosys().estimate([path, *rtl_sources()], d.top, family=family)


def _designs(cases: Sequence[tuple[Function, Inputs]]) -> list[VerilogDesign]:
    """The designs of the cases that can be emitted (the others fail on their own)."""
    designs: dict[str, VerilogDesign] = {}
    for fn, _ in cases:
        with contextlib.suppress(BackendError):
            designs.setdefault(fn.fingerprint, design_of(fn))
    return list(designs.values())


class _VerilogTarget:
    """Shared part: op coverage, artifacts, batching and per-case error isolation."""

    name: ClassVar[str]
    api_version = API_VERSION

    def supported_ops(self) -> frozenset[str]:
        return SUPPORTED

    def declines(self, fn: Function) -> str | None:
        """Past the emitter's size limit (``MAX_CORES`` core instances): a documented limit of
        the target, reported ``unsupported`` rather than ``error``."""
        try:
            design_of(fn)
        except BackendError as e:
            if isinstance(e.__cause__, VerilogSizeError):
                return str(e)
        return None

    def run(self, fn: Function, inputs: Inputs) -> Outputs:
        return self._simulate([(fn, inputs)])[0]

    def run_many(self, cases: Sequence[tuple[Function, Inputs]]) -> list[Outputs | Exception]:
        """Few simulations for all cases (see :func:`chunks`); a failing one is rerun case by
        case, so one bad case never loses the others."""
        results: list[Outputs | Exception | None] = [None] * len(cases)
        for idx in chunks(cases):
            for i, res in zip(idx, self._run_chunk([cases[i] for i in idx]), strict=True):
                results[i] = res
        return [r if r is not None else BackendError("case not run") for r in results]

    def _run_chunk(self, cases: Sequence[tuple[Function, Inputs]]) -> list[Outputs | Exception]:
        try:
            return list(self._simulate(cases))
        except Exception:
            if len(cases) == 1:
                raise
        alone: list[Outputs | Exception] = []
        for case in cases:
            try:
                alone.append(self._simulate([case])[0])
            except Exception as e:
                alone.append(e)
        return alone

    def artifacts(self, fn: Function) -> dict[str, str]:
        d = design_of(fn)
        return {f"{d.top}.v": d.text, "schedule.json": json.dumps(d.report(), sort_keys=True)}

    def schedule(self, fn: Function) -> dict[str, Any]:
        """The emitter's schedule report (latency, cores) for fn."""
        return design_of(fn).report()

    def resources(self, fn: Function, family: str = "ice40") -> dict[str, object]:
        """Yosys resource estimate of fn's datapath, as a report entry."""
        return resource_estimate(fn, family).as_dict()

    def _simulate(self, cases: Sequence[tuple[Function, Inputs]]) -> list[Outputs]:
        raise NotImplementedError

    def versions(self) -> dict[str, str]:
        raise NotImplementedError

    def _probe(self, tool: str, fix: str) -> str | None:
        """Simulate the probe function once per machine and toolchain (:mod:`keracheck.probe`)."""

        def attempt() -> None:
            self._simulate([probe.probe_case()])

        identity = sorted(f"{k}={v}" for k, v in self.versions().items())
        return probe.proven(
            self.name, identity, attempt, f"{tool} cannot simulate a test design", fix
        )


class VerilatorTarget(_VerilogTarget):
    """``verilog-verilator``: the plain test bench built with Verilator."""

    name = "verilog-verilator"
    cost = 300  # per case, ref = 1: C++ builds and simulation (the harness starts it early)

    def run_many(self, cases: Sequence[tuple[Function, Inputs]]) -> list[Outputs | Exception]:
        """Build every chunk's simulation first, side by side (one Verilator build is one
        process verilating, then make: running two overlaps them on the CPUs), then simulate
        as :class:`_VerilogTarget` does, every build now a cache hit."""
        groups = [[cases[i] for i in idx] for idx in chunks(cases)]
        with contextlib.suppress(Exception):  # a library that fails is reported by its chunk
            corelib.ensure(corelib.libs_of(_designs(cases)))
        if len(groups) > 1:
            with ThreadPoolExecutor(min(len(groups), os.cpu_count() or 1)) as pool:
                for done in [pool.submit(prepare, group) for group in groups]:
                    with contextlib.suppress(Exception):  # reported when its chunk runs
                        done.result()
        return super().run_many(cases)

    def available(self) -> str | None:
        fix = f"{INSTALL_VERILATOR} g++ make"
        return Verilator().available() or self._probe("verilator", fix)

    def versions(self) -> dict[str, str]:
        return {"verilator": Verilator().version()}

    def _simulate(self, cases: Sequence[tuple[Function, Inputs]]) -> list[Outputs]:
        return run_plain(cases, "verilator")


class CocotbTarget(_VerilogTarget):
    """``verilog``: cocotb 2.x driving Icarus Verilog."""

    name = "verilog"
    cost = 500  # per case, ref = 1: Icarus elaboration and event-driven simulation

    def available(self) -> str | None:
        reason = Iverilog().available()
        if reason:
            return reason
        try:
            import cocotb
            import cocotb_tools.runner  # noqa: F401
        except ImportError as e:
            return f"python package cocotb not importable ({e}): {COCOTB_INSTALL}"
        if not cocotb.__version__.startswith("2."):
            return f"cocotb {cocotb.__version__} found, 2.x needed: {COCOTB_INSTALL}"
        return self._probe("iverilog/cocotb", f"apt-get install iverilog; {COCOTB_INSTALL}")

    def versions(self) -> dict[str, str]:
        import cocotb

        return {"iverilog": Iverilog().version(), "cocotb": cocotb.__version__}

    def run_many(self, cases: Sequence[tuple[Function, Inputs]]) -> list[Outputs | Exception]:
        """Icarus simulates on one CPU: a batch of much work (a loop design takes a vector
        per run of its loop) is split by :func:`balance` into one part per CPU, simulated side
        by side, each as :class:`_VerilogTarget` runs a batch.  A case that is more than a
        CPU's share of the work (one long loop design) is first cut into pieces of its
        vectors (:func:`split_heavy`), so that it does not leave the other CPUs idle."""
        cpus = os.cpu_count() or 1
        pieces = split_heavy(cases, cpus)
        sub = [piece_case(cases, p) for p in pieces]
        parts = balance(
            sub, cpus, [f"{sub[k][0].fingerprint}/{p.part}" for k, p in enumerate(pieces)]
        )
        if len(parts) < 2:
            return super().run_many(cases)
        whole = super().run_many
        results: list[Outputs | Exception] = [BackendError("case not run")] * len(sub)
        with ThreadPoolExecutor(len(parts)) as pool:
            done = pool.map(lambda p: whole([sub[i] for i in p]), parts)
            for idx, outs in zip(parts, done, strict=True):
                for i, res in zip(idx, outs, strict=True):
                    results[i] = res
        return join_pieces(len(cases), pieces, results)

    def _simulate(self, cases: Sequence[tuple[Function, Inputs]]) -> list[Outputs]:
        return run_cocotb(cases)


TARGETS: dict[str, Callable[[], _VerilogTarget]] = {
    "verilog": CocotbTarget,
    "verilog-verilator": VerilatorTarget,
}


__all__ = [
    "COCOTB_INSTALL",
    "COCOTB_TEST",
    "CORES_PER_SIM",
    "DISPLAY_MAX_BITS",
    "JOB_ENV",
    "MAX_SEGMENTS",
    "OUT_ENV",
    "QUICK_BUILD_VECTORS",
    "SPLIT_WORK",
    "TARGETS",
    "Batch",
    "CocotbTarget",
    "VerilatorTarget",
    "balance",
    "check_design",
    "chunks",
    "clear_memo",
    "cocotb_outputs",
    "cocotb_stream",
    "design_of",
    "hex_chunks",
    "pack_port",
    "parse_hex_fields",
    "render_testbench",
    "render_wrapper",
    "resource_estimate",
    "run_cocotb",
    "run_plain",
    "top_name",
    "unpack_port",
    "write_inputs",
]
