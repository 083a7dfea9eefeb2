"""The cocotb bench (target ``verilog``): cocotb 2.x driving Icarus Verilog.

The designs sit in a wrapper, ``kera_cocotb_top`` (:func:`render_wrapper`), which gives design
``j`` (signals ``d<j>_*``) a small synchronous driver and monitor of its own:

* ``d<j>_vec``: its input vectors, one word each (input port 0 in the low bits), and ``d<j>_n``,
  their count -- both written by cocotb through VPI before the run starts;
* the driver: on each falling edge of its clock after reset, the next vector if the design is
  ready (a design with loops has a ``ready`` output: the valid/ready handshake of
  :mod:`kera.backends.verilog`; without loops it takes one per clock), so vectors go in as
  fast as the design takes them;
* the monitor, on rising edges: the clock each vector is taken (``d<j>_acc``), each result and
  the clock it comes (``d<j>_res``, ``d<j>_got``), the results counted (``d<j>_recv``, past the
  vector count too) and the clocks after reset on which ``valid_out`` or ``ready`` is x/z
  (``d<j>_unknown``);
* its own clock, ``clk & d<j>_run``, on from reset until ``LATENCY + DRAIN`` clocks after its
  last vector (``d<j>_run`` changes on a falling edge only, while the clock is low, so the
  gated clock never glitches; a result past the expected ones within the drain is counted):
  all designs stream at once, and a finished one costs Icarus nothing while the others run.

cocotb generates the clock (its C++ clock driver: no Python per cycle), writes the vectors,
raises ``start``, waits for ``done`` (or a clock budget), and reads everything back through
VPI -- Python runs once per simulation, not once per clock.  The generated test module
(:data:`COCOTB_TEST`) calls :func:`cocotb_stream`, which reads the job
(``$KERACHECK_COCOTB_JOB``) and writes what it read back to ``$KERACHECK_COCOTB_OUT``;
:func:`run_cocotb` builds the wrapper once per content (cached, the image sealed) and checks,
per design, what the plain bench of :mod:`.testbench` does not (see
``docs/verilog-backend.md``, "How to run"): every vector taken and every result's latency (not
only the first's), the clocks between two vectors taken (the design's interval: the ready
handshake's timing), no result without a vector, and no unknown ``valid_out``/``ready``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kera.backends.verilog import Port, VerilogDesign
from kera.ir import Function
from kera_hdl import rtl_sources  # type: ignore[import-not-found, unused-ignore]
from keracheck.runners.sealed import intact, seal
from keracheck.runners.verilator import cache_root
from keracheck.target import BackendError, Inputs, Outputs
from keracheck.targets.verilog.batch import Batch
from keracheck.targets.verilog.bus import nbytes, pack_port

COCOTB_INSTALL = "pip install cocotb==2.1.0 (or: pip install -e '.[targets]')"
JOB_ENV = "KERACHECK_COCOTB_JOB"
OUT_ENV = "KERACHECK_COCOTB_OUT"

#: clocks a design's clock keeps running after its last vector, past its latency
DRAIN = 4
#: clocks of reset after ``start``, and of slack in the budget of a whole run
RESET, SLACK = 3, 64
PERIOD_NS = 10


def depth_bits(vectors: int) -> int:
    """Address bits of a design's memories: at least 1, enough for ``vectors`` words (the
    depth is a power of two, so one build serves every vector count up to it)."""
    return max(1, (max(vectors, 1) - 1).bit_length())


def _width(ports: Sequence[Port]) -> int:
    return max(1, sum(p.width for p in ports))


def _slices(ports: Sequence[Port]) -> list[str]:
    """``[hi:lo]`` of each port in its design's memory word (port 0 lowest)."""
    out, lo = [], 0
    for p in ports:
        out.append(f"[{lo + p.width - 1}:{lo}]")
        lo += p.width
    return out


def _signals(j: int, d: VerilogDesign, aw: int) -> list[str]:
    iw, ow, top = _width(d.inputs), _width(d.outputs), (1 << aw) - 1
    ready = "" if d.interval > 1 else " = 1'b1"  # a design without loops takes every clock
    return [
        f"    // design {j}: {d.function} ({d.top}, latency {d.latency}, interval {d.interval})",
        "    // verilator lint_off UNDRIVEN",
        "    // verilator lint_off UNUSED",
        f"    reg  [{iw - 1}:0] d{j}_vec [0:{top}];  // input vectors (cocotb writes them)",
        f"    reg  [{ow - 1}:0] d{j}_res [0:{top}];  // results in order (cocotb reads them)",
        f"    reg  [31:0] d{j}_acc [0:{top}];  // the clock each vector was taken",
        f"    reg  [31:0] d{j}_got [0:{top}];  // the clock each result came",
        f"    reg  [31:0] d{j}_n;  // vectors to stream (cocotb writes it)",
        "    // verilator lint_on UNUSED",
        "    // verilator lint_on UNDRIVEN",
        f"    reg  [31:0] d{j}_sent = 32'd0;",
        f"    reg  [31:0] d{j}_taken = 32'd0;",
        f"    reg  [31:0] d{j}_recv = 32'd0;",
        f"    reg  [31:0] d{j}_unknown = 32'd0;",
        f"    reg  [31:0] d{j}_tail = 32'd0;",
        f"    reg  d{j}_run = 1'b1;",
        f"    wire d{j}_clk = clk & d{j}_run;",
        f"    reg  d{j}_valid_in = 1'b0;",
        f"    reg  [{iw - 1}:0] d{j}_x = {iw}'d0;",
        f"    wire d{j}_ready{ready};",
        f"    wire d{j}_valid_out;",
        f"    wire [{ow - 1}:0] d{j}_y;",
    ]


def _instance(j: int, d: VerilogDesign) -> str:
    conns = [f".clk(d{j}_clk)", ".rst(rst)", f".valid_in(d{j}_valid_in)"]
    conns += [f".{p.name}(d{j}_x{s})" for p, s in zip(d.inputs, _slices(d.inputs), strict=True)]
    conns += [f".ready(d{j}_ready)"] if d.interval > 1 else []
    conns += [f".valid_out(d{j}_valid_out)"]
    conns += [f".{p.name}(d{j}_y{s})" for p, s in zip(d.outputs, _slices(d.outputs), strict=True)]
    return f"    {d.top} u_{j} ({', '.join(conns)});"


def _driver(j: int, d: VerilogDesign, aw: int) -> list[str]:
    """The falling-edge driver and the rising-edge monitor of design j."""
    p = f"d{j}_"
    sent, taken, recv = (f"{p}{k}[{aw - 1}:0]" for k in ("sent", "taken", "recv"))
    full = f"32'd{1 << aw}"
    return [
        f"    always @(negedge {p}clk) if (!rst) begin",
        f"        if ({p}sent < {p}n && {p}ready) begin",
        f"            {p}x <= {p}vec[{sent}]; {p}valid_in <= 1'b1; {p}sent <= {p}sent + 32'd1;",
        "        end else begin",
        f"            {p}valid_in <= 1'b0;",
        f"            if ({p}sent == {p}n) {p}tail <= {p}tail + 32'd1;",
        f"            if ({p}tail == 32'd{d.latency + DRAIN}) {p}run <= 1'b0;",
        "        end",
        "    end",
        f"    always @(posedge {p}clk) if (!rst) begin",
        f"        if ({p}valid_in && {p}ready) begin",
        f"            if ({p}taken < {full}) {p}acc[{taken}] <= cyc;",
        f"            {p}taken <= {p}taken + 32'd1;",
        "        end",
        f"        if ({p}valid_out === 1'b1) begin",
        f"            if ({p}recv < {full}) begin {p}res[{recv}] <= {p}y; {p}got[{recv}] <= cyc; end",
        f"            {p}recv <= {p}recv + 32'd1;",
        "        end",
        f"        if (({p}valid_out !== 1'b0 && {p}valid_out !== 1'b1) ||",
        f"            ({p}ready !== 1'b0 && {p}ready !== 1'b1)) {p}unknown <= {p}unknown + 32'd1;",
        "    end",
    ]


def render_wrapper(designs: Sequence[VerilogDesign], vectors: Sequence[int] = ()) -> str:
    """``kera_cocotb_top``: every design with its driver and monitor (module docstring); design
    j's memories hold ``vectors[j]`` words rounded up to a power of two (default 2)."""
    counts = [*vectors, *[0] * (len(designs) - len(vectors))]
    body: list[str] = []
    for j, (d, n) in enumerate(zip(designs, counts, strict=True)):
        aw = depth_bits(n)
        body += [*_signals(j, d, aw), _instance(j, d), *_driver(j, d, aw), ""]
    running = " | ".join(f"d{j}_run" for j in range(len(designs))) or "1'b0"
    return "\n".join(
        [
            "// Generated by keracheck.targets.verilog: the cocotb bench (driven by cocotb_stream)",
            "`timescale 1ns/1ps",
            "module kera_cocotb_top (",
            "    input  wire clk,  // cocotb's clock",
            "    output reg  done = 1'b0  // every design streamed and drained",
            ");",
            "    reg  start = 1'b0;  // cocotb: the vectors are loaded",
            "    reg  rst = 1'b1;",
            "    reg  [1:0] resets = 2'd0;",
            "    reg  [31:0] cyc = 32'd0;",
            "    always @(posedge clk) cyc <= cyc + 32'd1;",
            "    always @(negedge clk) if (start) begin",
            f"        if (resets != 2'd{RESET}) resets <= resets + 2'd1; else rst <= 1'b0;",
            "    end",
            "",
            *body,
            f"    always @(negedge clk) done <= !rst && !({running});",
            "endmodule",
            "",
        ]
    )


#: the test module cocotb imports; it names the package, which re-exports cocotb_stream
COCOTB_TEST = '''"""cocotb entry point generated by keracheck.targets.verilog."""

import cocotb

from keracheck.targets.verilog import cocotb_stream


@cocotb.test()
async def stream(dut):
    await cocotb_stream(dut)
'''


def _words(ports: Sequence[Port], columns: Sequence[np.ndarray[Any, Any]], n: int) -> list[str]:
    """Per vector, its memory word in hex: port k's bus at bit offset sum(widths before k)."""
    words = [0] * n
    shift = 0
    for port, col in zip(ports, columns, strict=True):
        for i, row in enumerate(pack_port(port, col)):
            words[i] |= int.from_bytes(row.tobytes(), "little") << shift
        shift += port.width
    return [f"{w:x}" for w in words]


def _job(batch: Batch) -> dict[str, Any]:
    vectors: list[list[str]] = [[] for _ in batch.designs]
    for j, fn, inputs, n in batch.segments:
        d = batch.designs[j]
        cols = [np.asarray(inputs[str(p.attr("name"))]) for p in fn.params]
        vectors[j] += _words(d.inputs, cols, n)
    designs = [
        {"vectors": v, "latency": d.latency, "interval": d.interval}
        for d, v in zip(batch.designs, vectors, strict=True)
    ]
    clocks = max(
        (
            len(v) * d.interval + d.latency + DRAIN
            for d, v in zip(batch.designs, vectors, strict=True)
        ),
        default=0,
    )
    return {"designs": designs, "clocks": RESET + clocks + SLACK}


async def cocotb_stream(dut: Any) -> None:
    """The cocotb test: load every design's vectors, run until ``done`` (or the clock budget),
    read back results, clocks and counts (module docstring)."""
    from cocotb.clock import Clock
    from cocotb.triggers import First, RisingEdge, Timer

    job = json.loads(Path(os.environ[JOB_ENV]).read_text())
    Clock(dut.clk, PERIOD_NS, unit="ns", impl="gpi").start()
    for j, d in enumerate(job["designs"]):
        getattr(dut, f"d{j}_n").value = len(d["vectors"])
        mem = getattr(dut, f"d{j}_vec")
        for i, word in enumerate(d["vectors"]):
            mem[i].value = int(word, 16)
    dut.start.value = 1
    await First(RisingEdge(dut.done), Timer(job["clocks"] * PERIOD_NS, unit="ns"))
    out = [_read_back(dut, j, len(d["vectors"])) for j, d in enumerate(job["designs"])]
    Path(os.environ[OUT_ENV]).write_text(json.dumps({"done": str(dut.done.value), "designs": out}))


def _read_back(dut: Any, j: int, n: int) -> dict[str, Any]:
    """Design j's counts, and per result received (up to n) its word and clocks, as the
    simulator's binary strings (x/z kept: :func:`check_design` judges them)."""
    count = {k: str(getattr(dut, f"d{j}_{k}").value) for k in ("taken", "recv", "unknown")}
    recv = int(count["recv"], 2) if set(count["recv"]) <= {"0", "1"} else 0
    mems = {k: getattr(dut, f"d{j}_{k}") for k in ("res", "acc", "got")}
    taken = int(count["taken"], 2) if set(count["taken"]) <= {"0", "1"} else 0
    rows = {k: [str(m[i].value) for i in range(min(recv, taken, n))] for k, m in mems.items()}
    return {**count, **rows}


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
        top.write_text(render_wrapper(batch.designs, batch.counts()))
        sources = [top, *batch.write_design_files(work), *rtl_sources()]
        build = _cocotb_build_dir(sources, cache)
        vvp = build / "sim.vvp"
        runner = get_runner("icarus")
        with _build_lock(build):  # pieces of one case may share an image: built once
            if vvp.with_name("sim.vvp.sha256").exists() and not intact(vvp):
                shutil.rmtree(build, ignore_errors=True)  # a damaged image is rebuilt
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
        return cocotb_outputs(batch, json.loads((work / "out.json").read_text()))


_LOCKS: dict[Path, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def _build_lock(build: Path) -> threading.Lock:
    """One lock per build directory: simulations run side by side in threads
    (``CocotbTarget.run_many``), and two with the same sources -- equal pieces of one long
    case -- must not build into the same directory at once."""
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(build, threading.Lock())


def _cocotb_build_dir(sources: Sequence[Path], cache: Path | None) -> Path:
    h = hashlib.sha256(b"keracheck-cocotb-icarus-v2\0")
    for src in sorted(sources, key=lambda p: p.name):
        h.update(src.name.encode() + b"\0" + src.read_bytes() + b"\0")
    return (cache or cache_root()) / "cocotb" / h.hexdigest()[:32]


def _number(bits: str, what: str) -> int:
    if not bits or not set(bits) <= {"0", "1"}:
        raise BackendError(f"{what} holds x/z bits (an undriven or unknown value)")
    return int(bits, 2)


def _numbers(rows: Sequence[str], what: str) -> list[int]:
    return [_number(bits, f"{what} {i}") for i, bits in enumerate(rows)]


def check_design(d: VerilogDesign, n: int, got: dict[str, Any]) -> list[int]:
    """Design d's read-back (:func:`cocotb_stream`) for n vectors -> its result words;
    BackendError naming the first protocol property that fails."""
    counts = {k: _number(got[k], f"{d.function}: {k}") for k in ("unknown", "taken", "recv")}
    failures = (
        (counts["unknown"] > 0 and n > 0, f"valid_out or ready x/z on {counts['unknown']} clocks"),
        (counts["taken"] != n, f"{counts['taken']} of {n} vectors taken (ready never came back)"),
        (counts["recv"] != n, f"{counts['recv']} results for {n} vectors"),
    )
    for failed, why in failures:
        if failed:
            raise BackendError(f"{d.function}: {why}")
    taken = _numbers(got["acc"], f"{d.function}: the clock of vector")
    came = _numbers(got["got"], f"{d.function}: the clock of result")
    _check_timing(d, taken, came)
    return _numbers(got["res"], f"{d.function}: result")


def _check_timing(d: VerilogDesign, taken: Sequence[int], came: Sequence[int]) -> None:
    """Every result ``LATENCY`` clocks after its vector; vectors ``interval`` clocks apart (the
    driver offers the next one as soon as ``ready`` is up, so this times the handshake)."""
    for i, (a, b) in enumerate(zip(taken, came, strict=True)):
        if b - a != d.latency:
            raise BackendError(
                f"{d.function}: observed latency {b - a} clocks (vector {i}), "
                f"the emitter's schedule says {d.latency}"
            )
    for i, (a, b) in enumerate(itertools.pairwise(taken), start=1):
        if b - a != d.interval:
            raise BackendError(
                f"{d.function}: vector {i} taken {b - a} clocks after vector {i - 1}, "
                f"the design's interval is {d.interval}"
            )


def cocotb_outputs(batch: Batch, results: dict[str, Any]) -> list[Outputs]:
    """Check every design's read-back (:func:`check_design`) and split the results per case."""
    per_design = []
    for d, n, got in zip(batch.designs, batch.counts(), results["designs"], strict=True):
        words = check_design(d, n, got)
        cols, shift = [], 0
        for port in d.outputs:
            nb, mask = nbytes(port.width), (1 << port.width) - 1
            rows = b"".join(((w >> shift) & mask).to_bytes(nb, "little") for w in words)
            cols.append(np.frombuffer(rows, np.uint8).reshape(len(words), nb))
            shift += port.width
        per_design.append(cols)
    return batch.split(per_design)
