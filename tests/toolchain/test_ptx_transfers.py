"""Memory spaces and transfers on the PTX back end (``docs/ptx-backend.md``, Memory spaces).

* every graph of ``tests/spacegraphs.py`` on ``ptx-emu`` (hardware and adversarial NaN
  policies) at ``-O0`` and ``-O2``, bit for bit against kera.interp;
* the emulator performs the transfers: the bytes each graph's transfers store into their
  staging buffers, per direction, are exactly ``spacegraphs.TRANSFERS`` times the rows (a
  transfer in a loop body once per trip, one in a callee once per call, equal transfers each);
  host parameters are copied to the device at the kernel boundary and results back, counted;
* the address spaces are separate: a kernel given a host pointer is refused with a clear
  error, while device, unified and pinned pointers are read;
* a kernel without transfers has the ABI and text it had before (the goldens); the golden
  text of one small transfer; ``ptxas`` accepts every module (when it is on PATH).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from spacegraphs import GRAPHS, TRANSFERS, golden_transfer

from kera.backends.ptx import emit, emit_graph, emit_slots
from kera.interp import interpret
from kera.ir import Graph
from kera.passes import optimize, pipeline
from keracheck.inputs import generate
from keracheck.ptx_emu import GlobalMemory, PtxExecutionError, load, parse
from keracheck.runners.ptxas import Ptxas
from keracheck.target import BackendError
from keracheck.targets.ptx import PtxEmuAdversarialBackend, PtxEmuBackend

ROWS = 40


def _same(got: list[Any], want: list[Any]) -> bool:
    return all(g.tobytes() == w.tobytes() for g, w in zip(got, want, strict=True))


@pytest.mark.parametrize("backend", [PtxEmuBackend(), PtxEmuAdversarialBackend()], ids=str)
@pytest.mark.parametrize("name", list(GRAPHS))
def test_ptx_emu_agrees_with_ref_and_performs_the_transfers(
    name: str, backend: PtxEmuBackend
) -> None:
    fn = GRAPHS[name]()
    xs = generate(fn, ROWS, 5)
    want = interpret(fn, xs)
    expected = {k: v * ROWS for k, v in TRANSFERS[name].items()}
    for level, graph in (("-O0", fn), ("-O2", optimize(fn, pipeline(2)).function)):
        assert _same(backend.run(graph, xs), want), f"{name} {level}"
        assert backend.traffic["transfers"] == expected, f"{name} {level}"


def test_the_kernel_boundary_copies_host_parameters_only() -> None:
    """spaces_params: device, pinned and unified parameters are read where they live (no copy
    in); round_trip: its host parameter is copied in; both copy their results out."""
    backend = PtxEmuBackend()
    fn = GRAPHS["spaces_params"]()
    backend.run(fn, generate(fn, ROWS, 1))
    assert backend.traffic["boundary"] == {"device->host": 2 * ROWS * 4 * 8}
    fn = GRAPHS["round_trip"]()
    backend.run(fn, generate(fn, ROWS, 1))
    assert backend.traffic["boundary"] == {"host->device": ROWS * 32, "device->host": 2 * ROWS * 32}


def test_a_kernel_reading_host_memory_is_refused() -> None:
    """The same kernel given a host pointer for its parameter faults (the launcher must copy
    host data to the device first), given a device, unified or pinned pointer it runs."""
    fn = GRAPHS["spaces_params"]()
    program = load(parse(emit(fn)), "kera_spaces_params")
    data = np.arange(16, dtype=np.float64).reshape(4, 4)
    for space in ("device", "unified", "pinned"):
        mem = GlobalMemory()
        args = [mem.upload(data, space) for _ in range(3)]
        outs = [mem.alloc(data.nbytes) for _ in range(2)]
        program.launch([*args, *outs, 4], grid=1, block=4, memory=mem)
        assert mem.download(outs[1], np.float64, 16).tobytes() == data.tobytes()
    mem = GlobalMemory()
    args = [mem.upload(data, "host"), mem.upload(data), mem.upload(data)]
    outs = [mem.alloc(data.nbytes) for _ in range(2)]
    with pytest.raises(PtxExecutionError, match="dereferences host memory"):
        program.launch([*args, *outs, 4], grid=1, block=4, memory=mem)


def test_a_launcher_error_is_a_backend_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A launcher that forgot the boundary copy (host data straight to the kernel) gets the
    emulator's refusal as a BackendError naming the fault."""
    import keracheck.targets.ptx as ptx_target

    monkeypatch.setattr(ptx_target, "_place", lambda mem, space, a: mem.upload(a, "host"))
    fn = GRAPHS["round_trip"]()
    with pytest.raises(BackendError, match="host memory"):
        PtxEmuBackend().run(fn, generate(fn, 4, 0))


def test_each_transfer_has_a_staging_buffer_in_its_space() -> None:
    """One ``xfer`` parameter per transfer the kernel performs: equal transfers two, a loop
    body's once (run every trip), a callee's once per call; a move to the host goes through
    mapped pinned memory; a kernel without transfers has none."""
    spaces = {
        name: [(s.source, s.dest, s.space) for s in emit_slots(make())[1]]
        for name, make in GRAPHS.items()
    }
    assert spaces["identical_transfers"] == [
        ("host", "device", "device"),
        ("host", "device", "device"),
        ("host", "pinned", "pinned"),
    ]
    assert spaces["loop_transfer"] == [("host", "device", "device"), ("device", "host", "pinned")]
    assert len(spaces["callee_transfer"]) == 2
    assert spaces["spaces_params"] == []
    assert "xfer" not in emit(GRAPHS["spaces_params"]())


@pytest.mark.toolchain
def test_ptxas_accepts_every_transfer_module() -> None:
    ptxas = Ptxas()
    reason = ptxas.available()
    if reason is not None:
        pytest.skip(reason)
    module = emit_graph(Graph([make() for make in GRAPHS.values()]))
    assert ptxas.assemble(module).cubin[:4] == b"\x7fELF"


def test_golden_ptx_transfer(golden: Callable[[str, str], None]) -> None:
    golden("ptx/transfer_moved.ptx", emit(golden_transfer()))
