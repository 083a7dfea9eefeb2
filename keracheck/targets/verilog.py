"""Targets ``verilog`` (cocotb 2.x + Icarus) and ``verilog-verilator`` (plain test bench).

Both simulate the datapaths of :mod:`kera.backends.verilog` (one top module per distinct
function, named ``kera_f<first 20 hex digits of the fingerprint>``) and must give identical bits.
A batch of cases becomes one simulation: every distinct function is instantiated once, and
each case is a segment of input vectors streamed into its design, one vector per clock.

* ``verilog-verilator``: a generated plain-Verilog test bench (:func:`render_testbench`) reads
  a plan (``plan.txt``: design and vector count per segment) and the vectors (``in.bin``: per
  vector, each input port's bus big-endian, padded to whole bytes, as ``$fread`` wants them),
  and writes each design's results with ``$fwrite`` (``out_<j>.hex``: per vector one line, one
  ``%h`` field per result port).  Built with ``verilator --binary``, cached by content under
  ``$KERACHECK_CACHE`` (or ``~/.cache/keracheck``).  The same bench runs in Icarus
  (:func:`run_plain` with ``simulator="icarus"``), the fast Icarus path for large batches.
* ``verilog``: the designs sit in a wrapper whose ports are ``d<j>_<port>``; a cocotb test
  (:func:`cocotb_stream`, run by ``cocotb_tools.runner`` on Icarus) drives each segment's
  vectors one per falling edge and samples results when ``valid_out`` is high.

Both check the latency they observe (first ``valid_in`` to first ``valid_out``) against the
schedule the emitter reports, and fail the batch when they differ.  Bus layout: element e of a
port occupies bits ``[e*w +: w]`` (see :mod:`kera.backends.verilog`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from kera.backends.verilog import (
    SUPPORTED_OPS,
    Port,
    VerilogDesign,
    VerilogEmitError,
    VerilogSizeError,
    emit,
)
from kera.dtypes import DType
from kera.interp import InputError, batch_size
from kera.ir import Function
from kera_hdl import rtl_sources  # type: ignore[import-not-found, unused-ignore]
from keracheck import probe
from keracheck.backend import API_VERSION, Array, BackendError, Inputs, Outputs
from keracheck.runners.iverilog import Iverilog
from keracheck.runners.sealed import intact, seal
from keracheck.runners.verilator import INSTALL as INSTALL_VERILATOR
from keracheck.runners.verilator import Verilator, cache_root
from keracheck.runners.yosys import Resources, Yosys

MAX_SEGMENTS = 4096
QUICK_BUILD_VECTORS = 200_000  # up to this many vectors a -O0 C++ build wins overall
CORES_PER_SIM = 2_000  # bounds Verilator's memory and build time per simulation
COCOTB_INSTALL = "pip install cocotb==2.1.0 (or: pip install -e '.[targets]')"
JOB_ENV = "KERACHECK_COCOTB_JOB"
OUT_ENV = "KERACHECK_COCOTB_OUT"


# ---------------------------------------------------------------------------- bus packing


def _nbytes(bits: int) -> int:
    return (bits + 7) // 8


def pack_port(port: Port, values: Array) -> np.ndarray[Any, np.dtype[np.uint8]]:
    """(N, *shape) values -> (N, bytes) little-endian bus bytes (element 0 lowest)."""
    n = values.shape[0]
    flat = np.ascontiguousarray(values).reshape(n, -1)
    if port.dtype is DType.BOOL:
        return np.packbits(flat.astype(np.uint8), axis=1, bitorder="little")
    return flat.astype(port.dtype.np).view(np.uint8).reshape(n, -1)


def unpack_port(port: Port, bus: np.ndarray[Any, np.dtype[np.uint8]]) -> Array:
    """(N, bytes) little-endian bus bytes -> (N, *shape) values of the port's dtype."""
    n = bus.shape[0]
    count = port.width // port.elem_width
    if port.dtype is DType.BOOL:
        bits = np.unpackbits(bus, axis=1, bitorder="little")[:, :count]
        return bits.astype(np.bool_).reshape((n, *port.shape))
    data = np.ascontiguousarray(bus[:, : count * port.dtype.nbytes])
    return data.view(port.dtype.np).reshape((n, *port.shape))


def parse_hex_fields(
    data: bytes, widths: Sequence[int]
) -> list[np.ndarray[Any, np.dtype[np.uint8]]]:
    """Lines of space-separated ``%h`` fields of the given bit widths -> per field (N, bytes)
    little-endian bus bytes.  Raises BackendError on x/z digits or a malformed file."""
    digits = [math.ceil(w / 4) for w in widths]
    line = sum(digits) + len(digits)
    if len(data) % line:
        raise BackendError("simulation output is truncated or malformed")
    raw = np.frombuffer(data, np.uint8).reshape(-1, line)
    out, pos = [], 0
    for w, nd in zip(widths, digits, strict=True):
        field = raw[:, pos : pos + nd]
        pos += nd + 1
        val = np.where(field >= ord("a"), field - (ord("a") - 10), field - ord("0")).astype(
            np.int16
        )
        if ((val < 0) | (val > 15)).any():
            raise BackendError("simulation output holds x/z bits (an undriven or unknown value)")
        if nd % 2:
            val = np.concatenate([np.zeros((len(val), 1), np.int16), val], axis=1)
        be = (val[:, 0::2] << 4 | val[:, 1::2]).astype(np.uint8)
        out.append(np.ascontiguousarray(be[:, ::-1][:, : _nbytes(w)]))
    return out


# ---------------------------------------------------------------------------- the batch


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


# ---------------------------------------------------------------------------- plain test bench


def _design_block(j: int, d: VerilogDesign) -> str:
    lines = [f"    // design {j}: {d.function} ({d.top}, latency {d.latency})"]
    lines.append(f"    wire vin_{j} = valid & (cur == {j});")
    conns = [".clk(clk)", ".rst(rst)", f".valid_in(vin_{j})"]
    for k, p in enumerate(d.inputs):
        lines.append(f"    reg [{p.width - 1}:0] in_{j}_{k} = {p.width}'d0;")
        conns.append(f".{p.name}(in_{j}_{k})")
    lines.append(f"    wire vout_{j};")
    conns.append(f".valid_out(vout_{j})")
    for k, p in enumerate(d.outputs):
        lines.append(f"    wire [{p.width - 1}:0] out_{j}_{k};")
        conns.append(f".{p.name}(out_{j}_{k})")
    lines.append(f"    {d.top} u_{j} ({', '.join(conns)});")
    lines.append(f"    integer fo_{j}, lin_{j}, lout_{j};")
    lines.append(
        f"    always @(posedge clk) begin if (vin_{j} && lin_{j} < 0) lin_{j} <= cyc; "
        f"if (vout_{j} && lout_{j} < 0) lout_{j} <= cyc; end"
    )
    fields = [hex_chunks(f"out_{j}_{k}", p.width) for k, p in enumerate(d.outputs)]
    fmt = " ".join("%h" * len(f) for f in fields)
    outs = ", ".join(arg for f in fields for arg in f)
    lines.append(f'    always @(negedge clk) if (vout_{j}) $fwrite(fo_{j}, "{fmt}\\n", {outs});')
    return "\n".join(lines) + "\n"


#: Verilator refuses a $display-like argument wider than this (VL_VALUE_STRING_MAX_WIDTH)
DISPLAY_MAX_BITS = 8192


def hex_chunks(bus: str, width: int) -> list[str]:
    """``%h`` arguments that print ``bus`` as one hex field: slices of at most
    :data:`DISPLAY_MAX_BITS`, most significant first; every slice but the first is a whole
    number of hex digits wide, so their digits join to exactly what ``%h`` of the bus prints."""
    if width <= DISPLAY_MAX_BITS:
        return [bus]
    top = width % DISPLAY_MAX_BITS or DISPLAY_MAX_BITS
    cuts = [width - top, *range(width - top - DISPLAY_MAX_BITS, -1, -DISPLAY_MAX_BITS)]
    bounds = [width, *cuts]
    return [f"{bus}[{hi - 1}:{lo}]" for hi, lo in itertools.pairwise(bounds)]


def _read_case(j: int, d: VerilogDesign) -> str:
    reads = []
    for k, p in enumerate(d.inputs):
        nb = _nbytes(p.width)
        reads.append(
            f'rd = $fread(t_{j}_{k}, fin); if (rd != {nb}) begin $display("short read"); '
            f"$finish; end in_{j}_{k} = t_{j}_{k}[{p.width - 1}:0];"
        )
    return f"                    {j}: begin {' '.join(reads)} end\n"


def render_testbench(designs: Sequence[VerilogDesign]) -> str:
    """The plain batch test bench ``kera_tb`` for ``designs`` (design j selected by code j)."""
    temps = "".join(
        f"    reg [{_nbytes(p.width) * 8 - 1}:0] t_{j}_{k};\n"
        for j, d in enumerate(designs)
        for k, p in enumerate(d.inputs)
    )
    opens = "".join(
        f'        fo_{j} = $fopen("out_{j}.hex", "w"); lin_{j} = -1; lout_{j} = -1;\n'
        for j in range(len(designs))
    )
    closes = "".join(
        f'        $fwrite(flat, "%0d %0d\\n", {j}, lout_{j} < 0 ? -1 : lout_{j} - lin_{j});\n'
        f"        $fclose(fo_{j});\n"
        for j in range(len(designs))
    )
    cases = "".join(_read_case(j, d) for j, d in enumerate(designs))
    blocks = "".join(_design_block(j, d) for j, d in enumerate(designs))
    drain = max(d.latency for d in designs) + 4
    return f"""// Generated by keracheck.targets.verilog: plain batch test bench
`timescale 1ns/1ps
module kera_tb;
    reg clk = 1'b0;
    reg rst = 1'b1;
    reg valid = 1'b0;
    integer cur = -1;
    integer cyc = 0;
    integer fin, fplan, flat, nseg, s, k, rd, a_d, a_n;
    integer seg_d [0:{MAX_SEGMENTS - 1}];
    integer seg_n [0:{MAX_SEGMENTS - 1}];
{temps}    always #5 clk = ~clk;
    always @(posedge clk) cyc <= cyc + 1;

{blocks}
    initial begin
        fplan = $fopen("plan.txt", "r");
        fin = $fopen("in.bin", "rb");
{opens}        nseg = 0;
        while ($fscanf(fplan, "%d %d\\n", a_d, a_n) == 2) begin
            seg_d[nseg] = a_d; seg_n[nseg] = a_n; nseg = nseg + 1;
        end
        repeat (3) @(negedge clk);
        rst = 1'b0;
        for (s = 0; s < nseg; s = s + 1) begin
            for (k = 0; k < seg_n[s]; k = k + 1) begin
                @(negedge clk);
                cur = seg_d[s];
                case (seg_d[s])
{cases}                    default: ;
                endcase
                valid = 1'b1;
            end
        end
        @(negedge clk);
        valid = 1'b0;
        repeat ({drain}) @(negedge clk);
        flat = $fopen("lat.txt", "w");
{closes}        $fclose(flat);
        $finish;
    end
endmodule
"""


def _write_design_files(work: Path, batch: Batch) -> list[Path]:
    files = []
    for d in batch.designs:
        path = work / f"{d.top}.v"
        path.write_text(d.text)
        files.append(path)
    return files


def _collect(work: Path, batch: Batch) -> list[Outputs]:
    per_design = []
    for j, d in enumerate(batch.designs):
        data = (work / f"out_{j}.hex").read_bytes()
        per_design.append(parse_hex_fields(data, [p.width for p in d.outputs]))
    _check_latency(batch, _read_latencies(work / "lat.txt"))
    return batch.split(per_design)


def _read_latencies(path: Path) -> dict[int, int]:
    lat = {}
    for line in path.read_text().splitlines():
        j, v = line.split()
        lat[int(j)] = int(v)
    return lat


def _check_latency(batch: Batch, observed: dict[int, int]) -> None:
    used = {j for j, _, _, n in batch.segments if n > 0}
    for j in sorted(used):
        d = batch.designs[j]
        if observed.get(j) != d.latency:
            raise BackendError(
                f"{d.function}: observed latency {observed.get(j)} clocks, "
                f"the emitter's schedule says {d.latency}"
            )


def run_plain(
    cases: Sequence[tuple[Function, Inputs]],
    simulator: str = "verilator",
    cache: Path | None = None,
) -> list[Outputs]:
    """Run cases through the plain test bench in Verilator (cached build) or Icarus."""
    batch = Batch.of(cases)
    with tempfile.TemporaryDirectory(prefix="keracheck-verilog-") as tmp:
        work = Path(tmp)
        tb = work / "kera_tb.v"
        tb.write_text(render_testbench(batch.designs))
        sources = [tb, *_write_design_files(work, batch), *rtl_sources()]
        (work / "plan.txt").write_text(batch.plan())
        (work / "in.bin").write_bytes(batch.input_bytes())
        if simulator == "verilator":
            vectors = sum(n for *_, n in batch.segments)
            quick = "-O0" if vectors <= QUICK_BUILD_VECTORS else None
            exe = Verilator().build(sources, "kera_tb", cache=cache, cxx_opt=quick)
            Verilator().run(exe, cwd=work)
        else:
            image = Iverilog().compile(sources, "kera_tb", work / "tb.vvp")
            Iverilog().run(image, cwd=work)
        return _collect(work, batch)


# ---------------------------------------------------------------------------- cocotb


def render_wrapper(designs: Sequence[VerilogDesign]) -> str:
    """``kera_cocotb_top``: every design with its ports renamed ``d<j>_<port>``."""
    ports = ["    input  wire clk", "    input  wire rst"]
    body = []
    for j, d in enumerate(designs):
        ports.append(f"    input  wire d{j}_valid_in")
        ports += [f"    input  wire [{p.width - 1}:0] d{j}_{p.name}" for p in d.inputs]
        ports.append(f"    output wire d{j}_valid_out")
        ports += [f"    output wire [{p.width - 1}:0] d{j}_{p.name}" for p in d.outputs]
        conns = [
            ".clk(clk)",
            ".rst(rst)",
            f".valid_in(d{j}_valid_in)",
            f".valid_out(d{j}_valid_out)",
        ]
        conns += [f".{p.name}(d{j}_{p.name})" for p in (*d.inputs, *d.outputs)]
        body.append(f"    {d.top} u_{j} ({', '.join(conns)});")
    return "\n".join(
        [
            "`timescale 1ns/1ps",
            "module kera_cocotb_top (",
            ",\n".join(ports),
            ");",
            *body,
            "endmodule",
            "",
        ]
    )


COCOTB_TEST = '''"""cocotb entry point generated by keracheck.targets.verilog."""

import cocotb

from keracheck.targets.verilog import cocotb_stream


@cocotb.test()
async def stream(dut):
    await cocotb_stream(dut)
'''


def _job(batch: Batch) -> dict[str, Any]:
    segs = []
    for j, fn, inputs, n in batch.segments:
        d = batch.designs[j]
        cols = [
            [
                int.from_bytes(row.tobytes(), "little")
                for row in pack_port(port, np.asarray(inputs[str(p.attr("name"))]))
            ]
            for port, p in zip(d.inputs, fn.params, strict=True)
        ]
        vectors = [[f"{c[i]:x}" for c in cols] for i in range(n)]
        segs.append({"design": j, "vectors": vectors})
    designs = [
        {
            "inputs": [p.name for p in d.inputs],
            "outputs": [p.name for p in d.outputs],
            "latency": d.latency,
        }
        for d in batch.designs
    ]
    return {"designs": designs, "segments": segs}


async def cocotb_stream(dut: Any) -> None:
    """The cocotb test: stream every segment through its design, one vector per clock.

    Reads the job (``$KERACHECK_COCOTB_JOB``), writes per segment the results (hex per result
    port and vector) and the observed latency to ``$KERACHECK_COCOTB_OUT``.
    """
    from cocotb.clock import Clock
    from cocotb.triggers import FallingEdge

    job = json.loads(Path(os.environ[JOB_ENV]).read_text())
    Clock(dut.clk, 10, unit="ns").start()
    for j in range(len(job["designs"])):
        getattr(dut, f"d{j}_valid_in").value = 0
    dut.rst.value = 1
    for _ in range(3):
        await FallingEdge(dut.clk)
    dut.rst.value = 0
    results = []
    for seg in job["segments"]:
        results.append(await _stream_segment(dut, job["designs"][seg["design"]], seg, FallingEdge))
    Path(os.environ[OUT_ENV]).write_text(json.dumps(results))


async def _stream_segment(
    dut: Any, design: dict[str, Any], seg: dict[str, Any], edge: Any
) -> dict[str, Any]:
    j, vectors = seg["design"], seg["vectors"]
    valid_in = getattr(dut, f"d{j}_valid_in")
    valid_out = getattr(dut, f"d{j}_valid_out")
    ins = [getattr(dut, f"d{j}_{name}") for name in design["inputs"]]
    outs = [getattr(dut, f"d{j}_{name}") for name in design["outputs"]]
    got: list[list[str]] = []
    first_in = first_out = None
    cycle = 0
    limit = len(vectors) + design["latency"] + 16
    while len(got) < len(vectors) and cycle < limit:
        if str(valid_out.value) == "1":
            first_out = cycle if first_out is None else first_out
            got.append([f"{_sampled(o):x}" for o in outs])
        if cycle < len(vectors):
            for sig, v in zip(ins, vectors[cycle], strict=True):
                sig.value = int(v, 16)
            valid_in.value = 1
            first_in = cycle if first_in is None else first_in
        else:
            valid_in.value = 0
        await edge(dut.clk)
        cycle += 1
    valid_in.value = 0
    latency = None if first_out is None or first_in is None else first_out - first_in
    return {"outputs": got, "latency": latency}


def _sampled(signal: Any) -> int:
    """A port's value as an unsigned int (1-bit ports are Logic, wider ones LogicArray);
    x or z bits raise ValueError, which fails the test."""
    return int(str(signal.value), 2)


def run_cocotb(
    cases: Sequence[tuple[Function, Inputs]], cache: Path | None = None
) -> list[Outputs]:
    """Run cases through the cocotb wrapper on Icarus (the build is cached by content)."""
    from cocotb_tools.check_results import get_results
    from cocotb_tools.runner import get_runner

    batch = Batch.of(cases)
    with tempfile.TemporaryDirectory(prefix="keracheck-cocotb-") as tmp:
        work = Path(tmp)
        top = work / "kera_cocotb_top.v"
        top.write_text(render_wrapper(batch.designs))
        sources = [top, *_write_design_files(work, batch), *rtl_sources()]
        build = _cocotb_build_dir(sources, cache)
        vvp = build / "sim.vvp"
        if vvp.with_name("sim.vvp.sha256").exists() and not intact(vvp):
            shutil.rmtree(build, ignore_errors=True)  # a damaged image is rebuilt, not reused
        runner = get_runner("icarus")
        runner.build(
            sources=sources,
            hdl_toplevel="kera_cocotb_top",
            build_dir=build,
            timescale=("1ns", "1ps"),
            log_file=work / "build.log",
        )
        if not intact(vvp):
            seal(vvp)
        (work / "kera_cocotb_test.py").write_text(COCOTB_TEST)
        (work / "job.json").write_text(json.dumps(_job(batch)))
        env = {JOB_ENV: str(work / "job.json"), OUT_ENV: str(work / "out.json")}
        try:
            xml = runner.test(
                test_module="kera_cocotb_test",
                hdl_toplevel="kera_cocotb_top",
                build_dir=build,
                test_dir=work,
                extra_env=env,
                log_file=work / "sim.log",
                results_xml=str(work / "results.xml"),
            )
            failed = get_results(Path(xml))[1]
        except SystemExit:  # the runner exits when a test fails
            failed = 1
        if failed or not (work / "out.json").is_file():
            log = (work / "sim.log").read_text(errors="replace")[-3000:]
            raise BackendError(f"cocotb test failed:\n{log}")
        return _cocotb_outputs(batch, json.loads((work / "out.json").read_text()))


def _cocotb_build_dir(sources: Sequence[Path], cache: Path | None) -> Path:
    h = hashlib.sha256(b"keracheck-cocotb-icarus-v1\0")
    for src in sorted(sources, key=lambda p: p.name):
        h.update(src.name.encode() + b"\0" + src.read_bytes() + b"\0")
    return (cache or cache_root()) / "cocotb" / h.hexdigest()[:32]


def _cocotb_outputs(batch: Batch, results: list[dict[str, Any]]) -> list[Outputs]:
    cases: list[Outputs] = []
    for (j, _, _, n), res in zip(batch.segments, results, strict=True):
        d = batch.designs[j]
        if len(res["outputs"]) != n:
            raise BackendError(f"{d.function}: {len(res['outputs'])} results for {n} vectors")
        if n and res["latency"] != d.latency:
            raise BackendError(
                f"{d.function}: observed latency {res['latency']} clocks, "
                f"the emitter's schedule says {d.latency}"
            )
        outs = []
        for k, port in enumerate(d.outputs):
            nb = _nbytes(port.width)
            rows = [int(v[k], 16).to_bytes(nb, "little") for v in res["outputs"]]
            bus = np.frombuffer(b"".join(rows), np.uint8).reshape(n, nb)
            outs.append(unpack_port(port, bus))
        cases.append(outs)
    return cases


# ---------------------------------------------------------------------------- targets


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


def resource_estimate(fn: Function, family: str = "ice40") -> Resources:
    """Yosys synthesis estimate (cells, LUTs, FFs) of fn's datapath; BackendError if yosys is
    missing or fails."""
    d = design_of(fn)
    with tempfile.TemporaryDirectory(prefix="keracheck-yosys-") as tmp:
        path = Path(tmp) / f"{d.top}.v"
        path.write_text(d.text)
        return Yosys().estimate([path, *rtl_sources()], d.top, family=family)


class _VerilogTarget:
    """Shared part: op coverage, artifacts, batching and per-case error isolation."""

    name: ClassVar[str]
    api_version = API_VERSION

    def supported_ops(self) -> frozenset[str]:
        return SUPPORTED_OPS

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
    """``verilog-verilator``: the plain test bench built with ``verilator --binary``."""

    name = "verilog-verilator"

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

    def _simulate(self, cases: Sequence[tuple[Function, Inputs]]) -> list[Outputs]:
        return run_cocotb(cases)


TARGETS: dict[str, Callable[[], _VerilogTarget]] = {
    "verilog": CocotbTarget,
    "verilog-verilator": VerilatorTarget,
}


def clear_memo() -> None:
    """Forget memoised designs (tests)."""
    _DESIGNS.clear()


__all__ = [
    "Batch",
    "CocotbTarget",
    "VerilatorTarget",
    "cocotb_stream",
    "render_testbench",
    "render_wrapper",
    "resource_estimate",
    "run_cocotb",
    "run_plain",
]
