"""The plain-Verilog batch test bench (target ``verilog-verilator``, and Icarus for speed).

:func:`render_testbench` generates ``kera_tb``.  Every design has a driver of its own, and all
of them stream at once: design ``j`` reads its vector count from line ``j`` of ``plan.txt``
and its vectors from ``in_<j>.bin`` (per vector, each input port's bus big-endian, padded to
whole bytes, as ``$fread`` wants them; :func:`write_inputs` writes both), presents one vector
per falling edge -- for a design with loops (``interval`` > 1, a ``ready`` output) only on an
edge where it is ready, a valid/ready handshake: the vector is taken on a rising edge with
``valid_in & ready`` -- and writes its results with ``$fwrite`` (``out_<j>.hex``: per vector one
line, one ``%h`` field per result port).  At the end the bench writes the latency each design
showed (``lat.txt``: design and clocks from first ``valid_in`` to first ``valid_out``).

Each design runs on a clock of its own, ``clk & run_<j>``: on through reset, its vectors and a
drain of ``LATENCY + 4`` clocks after the last one (a result past the expected ones shows up
as a count mismatch), then held low, so a finished design costs the simulators nothing while
the long ones (a loop takes one vector per run of the loop) go on; ``run_<j>`` changes only on
a falling edge, while the clock is low, so the gated clock never glitches.  Simulated time is
the longest design's, not the sum of all.

:func:`run_plain` builds the bench with Verilator (cached by content under ``$KERACHECK_CACHE``
or ``~/.cache/keracheck``; the clocked cores linked in as libraries built once per machine,
:mod:`.corelib`) or compiles it with Icarus, runs it, and fails the batch when an observed
latency differs from the emitter's schedule.
"""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import Sequence
from pathlib import Path

from kera.backends.verilog import VerilogDesign
from kera.ir import Function
from kera_hdl import rtl_sources  # type: ignore[import-not-found, unused-ignore]
from keracheck.runners.iverilog import Iverilog
from keracheck.runners.verilator import Verilator
from keracheck.target import BackendError, Inputs, Outputs
from keracheck.targets.verilog import corelib
from keracheck.targets.verilog.batch import Batch
from keracheck.targets.verilog.bus import nbytes, parse_hex_fields

#: up to this many clocks per core instance a -O0 C++ build wins overall (build + simulation):
#: on bench_verilog's 50-op graph (44 cores) -O0 builds in 3.8 s CPU against 13.4 s and
#: simulates at 534 ns per core-clock against 62 ns, even at ~460k clocks (for a design
#: without loops a clock is a vector, hence the name)
QUICK_BUILD_VECTORS = 400_000

#: Verilator refuses a $display-like argument wider than this (VL_VALUE_STRING_MAX_WIDTH)
DISPLAY_MAX_BITS = 8192

#: clocks a design's clock keeps running after its last vector, past its latency
DRAIN = 4


def _ports(j: int, d: VerilogDesign) -> tuple[list[str], list[str]]:
    """(declarations, instance) of design j: its gated clock, inputs, outputs, handshake."""
    lines = [
        f"    reg run_{j} = 1'b1;  // its clock runs from reset until its results are out",
        f"    wire clk_{j} = clk & run_{j};",
        f"    reg vin_{j} = 1'b0;",
    ]
    conns = [f".clk(clk_{j})", ".rst(rst)", f".valid_in(vin_{j})"]
    for k, p in enumerate(d.inputs):
        lines.append(f"    reg [{p.width - 1}:0] in_{j}_{k} = {p.width}'d0;")
        lines.append(f"    reg [{nbytes(p.width) * 8 - 1}:0] t_{j}_{k};")
        conns.append(f".{p.name}(in_{j}_{k})")
    if d.interval > 1:
        lines.append(f"    wire rdy_{j};")
        conns.append(f".ready(rdy_{j})")
    lines.append(f"    wire vout_{j};")
    conns.append(f".valid_out(vout_{j})")
    for k, p in enumerate(d.outputs):
        lines.append(f"    wire [{p.width - 1}:0] out_{j}_{k};")
        conns.append(f".{p.name}(out_{j}_{k})")
    return lines, conns


def _design_block(j: int, d: VerilogDesign) -> str:
    """Design j, its monitors (first accepted vector, first result, every result) and its
    driver (``in_<j>.bin`` -> its inputs, one vector per ready falling edge)."""
    lines, conns = _ports(j, d)
    lines.insert(0, f"    // design {j}: {d.function} ({d.top}, latency {d.latency})")
    lines.append(f"    {d.top} u_{j} ({', '.join(conns)});")
    lines.append(f"    integer n_{j}, k_{j}, rd_{j}, fin_{j}, fo_{j}, lin_{j}, lout_{j};")
    lines.append(f"    reg done_{j} = 1'b0;")
    lines.append(
        f"    always @(posedge clk_{j}) begin if (vin_{j} && lin_{j} < 0) lin_{j} <= cyc; "
        f"if (vout_{j} && lout_{j} < 0) lout_{j} <= cyc; end"
    )
    fields = [hex_chunks(f"out_{j}_{k}", p.width) for k, p in enumerate(d.outputs)]
    fmt = " ".join("%h" * len(f) for f in fields)
    outs = ", ".join(arg for f in fields for arg in f)
    lines.append(
        f'    always @(negedge clk_{j}) if (vout_{j}) $fwrite(fo_{j}, "{fmt}\\n", {outs});'
    )
    wait = (
        f"            while (!rdy_{j}) begin vin_{j} = 1'b0; @(negedge clk); end\n"
        if d.interval > 1
        else ""
    )
    lines.append(
        f"""    initial begin
        lin_{j} = -1; lout_{j} = -1;
        fin_{j} = $fopen("in_{j}.bin", "rb");
        fo_{j} = $fopen("out_{j}.hex", "w");
        @(negedge rst);
        for (k_{j} = 0; k_{j} < n_{j}; k_{j} = k_{j} + 1) begin
            @(negedge clk);
{wait}            {_reads(j, d)}
            vin_{j} = 1'b1;
        end
        @(negedge clk);
        vin_{j} = 1'b0;
        repeat ({d.latency + DRAIN}) @(negedge clk);
        run_{j} = 1'b0;
        done_{j} = 1'b1;
    end"""
    )
    return "\n".join(lines) + "\n"


def _reads(j: int, d: VerilogDesign) -> str:
    reads = []
    for k, p in enumerate(d.inputs):
        nb = nbytes(p.width)
        reads.append(
            f'rd_{j} = $fread(t_{j}_{k}, fin_{j}); if (rd_{j} != {nb}) begin $display("short '
            f'read"); $finish; end in_{j}_{k} = t_{j}_{k}[{p.width - 1}:0];'
        )
    return " ".join(reads)


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


def render_testbench(designs: Sequence[VerilogDesign]) -> str:
    """The plain batch test bench ``kera_tb`` for ``designs`` (design j reads line j of
    ``plan.txt`` and ``in_<j>.bin``)."""
    counts = "".join(
        f'        if ($fscanf(fplan, "%d\\n", n_{j}) != 1) begin $display("bad plan"); $finish; end\n'
        for j in range(len(designs))
    )
    closes = "".join(
        f'        $fwrite(flat, "%0d %0d\\n", {j}, lout_{j} < 0 ? -1 : lout_{j} - lin_{j});\n'
        f"        $fclose(fo_{j}); $fclose(fin_{j});\n"
        for j in range(len(designs))
    )
    blocks = "".join(_design_block(j, d) for j, d in enumerate(designs))
    done = ", ".join(f"done_{j}" for j in reversed(range(len(designs))))
    return f"""// Generated by keracheck.targets.verilog: plain batch test bench
`timescale 1ns/1ps
module kera_tb;
    reg clk = 1'b0;
    reg rst = 1'b1;
    integer cyc = 0;
    integer fplan, flat;
    always #5 clk = ~clk;
    always @(posedge clk) cyc <= cyc + 1;

{blocks}
    wire [{len(designs) - 1}:0] done = {{{done}}};  // done[j]: design j drained, clock off

    initial begin
        fplan = $fopen("plan.txt", "r");
{counts}        $fclose(fplan);
        repeat (3) @(negedge clk);
        rst = 1'b0;
        while (done != {{{len(designs)}{{1'b1}}}}) @(negedge clk);
        flat = $fopen("lat.txt", "w");
{closes}        $fclose(flat);
        $finish;
    end
endmodule
"""


def write_inputs(work: Path, batch: Batch) -> None:
    """The bench's input files in ``work``: ``plan.txt`` (vectors per design, one line each)
    and ``in_<j>.bin`` (design j's vectors)."""
    (work / "plan.txt").write_text("".join(f"{n}\n" for n in batch.counts()))
    for j, data in enumerate(batch.design_inputs()):
        (work / f"in_{j}.bin").write_bytes(data)


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


def clocks_per_core(batch: Batch) -> float:
    """The simulation's work: clocks each design runs (vectors x interval, plus its latency),
    weighted by its core instances (a design of none counts as one), per core instance."""
    weights = [max(1, sum(d.cores.values())) for d in batch.designs]
    clocks = [
        n * d.interval + d.latency for d, n in zip(batch.designs, batch.counts(), strict=True)
    ]
    return sum(c * w for c, w in zip(clocks, weights, strict=True)) / max(1, sum(weights))


def cxx_opt(batch: Batch) -> str | None:
    """``-O0`` for Verilator's C++ when the simulation is short (:data:`QUICK_BUILD_VECTORS`
    clocks per core instance or fewer), else Verilator's default (optimised)."""
    return "-O0" if clocks_per_core(batch) <= QUICK_BUILD_VECTORS else None


def prepare(
    cases: Sequence[tuple[Function, Inputs]], cache: Path | None = None, core_libs: bool = True
) -> None:
    """Build (into the cache) the Verilator bench of a batch, without running it: the target
    builds its chunks side by side before simulating them one after another."""
    batch = Batch.of(cases)
    with tempfile.TemporaryDirectory(prefix="keracheck-verilog-") as tmp:
        _verilator_build(Path(tmp), batch, cache, core_libs)


def _bench_sources(work: Path, batch: Batch) -> list[Path]:
    """Write the bench and the designs into ``work``; the bench's and the designs' sources."""
    tb = work / "kera_tb.v"
    tb.write_text(render_testbench(batch.designs))
    return [tb, *batch.write_design_files(work)]


def _verilator_build(work: Path, batch: Batch, cache: Path | None, core_libs: bool) -> Path:
    """The bench's simulation binary (cached): with ``core_libs`` the clocked cores are
    linked in as libraries compiled once per machine at Verilator's default optimisation
    (:mod:`.corelib`) and the rest, wiring and glue, is compiled at ``-O0`` (the cores are
    where a simulation spends its time); else all flat, at :func:`cxx_opt`'s level."""
    if core_libs:
        cores, objects = corelib.sources(batch.designs, work, cache)
        opt: str | None = "-O0"
    else:
        cores, objects, opt = rtl_sources(), [], cxx_opt(batch)
    return Verilator().build(
        [*_bench_sources(work, batch), *cores],
        "kera_tb",
        cache=cache,
        cxx_opt=opt,
        objects=objects,
    )


def run_plain(
    cases: Sequence[tuple[Function, Inputs]],
    simulator: str = "verilator",
    cache: Path | None = None,
    core_libs: bool = True,
) -> list[Outputs]:
    """Run cases through the plain test bench in Verilator (cached build; ``core_libs``: the
    clocked cores linked in as per-machine libraries, :mod:`.corelib`) or Icarus."""
    batch = Batch.of(cases)
    with tempfile.TemporaryDirectory(prefix="keracheck-verilog-") as tmp:
        work = Path(tmp)
        write_inputs(work, batch)
        if simulator == "verilator":
            exe = _verilator_build(work, batch, cache, core_libs)
            Verilator().run(exe, cwd=work)
        else:
            sources = [*_bench_sources(work, batch), *rtl_sources()]
            image = Iverilog().compile(sources, "kera_tb", work / "tb.vvp")
            Iverilog().run(image, cwd=work)
        return _collect(work, batch)
