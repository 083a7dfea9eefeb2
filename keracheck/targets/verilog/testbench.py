"""The plain-Verilog batch test bench (target ``verilog-verilator``, and Icarus for speed).

:func:`render_testbench` generates ``kera_tb``, which reads a plan (``plan.txt``: design and
vector count per segment) and the vectors (``in.bin``: per vector, each input port's bus
big-endian, padded to whole bytes, as ``$fread`` wants them), and writes each design's results
with ``$fwrite`` (``out_<j>.hex``: per vector one line, one ``%h`` field per result port) and
the latency it observed (``lat.txt``: design and clocks from first ``valid_in`` to first
``valid_out``).  Vectors go one per clock; a design with loops (``interval`` > 1) has a
``ready`` output, and when the batch holds one the bench presents each vector only on a clock
where its design is ready (a valid/ready handshake: the vector is taken on a rising edge with
``valid_in & ready``).  :func:`run_plain` builds it with ``verilator --binary`` (cached by content
under ``$KERACHECK_CACHE`` or ``~/.cache/keracheck``) or compiles it with Icarus, runs it, and
fails the batch when an observed latency differs from the emitter's schedule.
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
from keracheck.targets.verilog.batch import MAX_SEGMENTS, Batch
from keracheck.targets.verilog.bus import nbytes, parse_hex_fields

QUICK_BUILD_VECTORS = 200_000  # up to this many vectors a -O0 C++ build wins overall

#: Verilator refuses a $display-like argument wider than this (VL_VALUE_STRING_MAX_WIDTH)
DISPLAY_MAX_BITS = 8192


def _design_block(j: int, d: VerilogDesign) -> str:
    lines = [f"    // design {j}: {d.function} ({d.top}, latency {d.latency})"]
    lines.append(f"    wire vin_{j} = valid & (cur == {j});")
    conns = [".clk(clk)", ".rst(rst)", f".valid_in(vin_{j})"]
    for k, p in enumerate(d.inputs):
        lines.append(f"    reg [{p.width - 1}:0] in_{j}_{k} = {p.width}'d0;")
        conns.append(f".{p.name}(in_{j}_{k})")
    if d.interval > 1:
        lines.append(f"    wire rdy_{j};")
        conns.append(f".ready(rdy_{j})")
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
        nb = nbytes(p.width)
        reads.append(
            f'rd = $fread(t_{j}_{k}, fin); if (rd != {nb}) begin $display("short read"); '
            f"$finish; end in_{j}_{k} = t_{j}_{k}[{p.width - 1}:0];"
        )
    return f"                    {j}: begin {' '.join(reads)} end\n"


def render_testbench(designs: Sequence[VerilogDesign]) -> str:
    """The plain batch test bench ``kera_tb`` for ``designs`` (design j selected by code j)."""
    temps = "".join(
        f"    reg [{nbytes(p.width) * 8 - 1}:0] t_{j}_{k};\n"
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
    wait = ""
    if any(d.interval > 1 for d in designs):
        rdy = [f"rdy_{j}" if d.interval > 1 else "1'b1" for j, d in enumerate(designs)]
        blocks += (
            f"    wire [{len(designs) - 1}:0] rdy = {{{', '.join(reversed(rdy))}}};"
            "  // rdy[j]: design j takes a vector\n"
        )
        wait = "                while (!rdy[seg_d[s]]) begin valid = 1'b0; @(negedge clk); end\n"
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
{wait}                cur = seg_d[s];
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
        sources = [tb, *batch.write_design_files(work), *rtl_sources()]
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
