"""Memory spaces and transfers on the C back end, bit for bit against kera.interp.

* every graph of ``tests/spacegraphs.py`` on every CPU target the host can run
  (``cpu:scalar``/``sse2``/``avx2``/``avx512``, ``cpu-aarch64`` and ``cpu-riscv64`` under
  qemu-user), at ``-O0`` (effectful calls kept) and ``-O2`` (inlined), one batch per target, on
  keracheck's generated inputs with NaN payloads of both signs (quiet and signalling) put in:
  C has one memory space, so a transfer is a copy with the same bits and a parameter's space
  changes nothing;
* the code shape (no tool needed): each transfer is a copy of its own (two equal transfers are
  two copies, an unused one is still made); a graph without transfers emits what it did
  before (the existing goldens); the golden C of one small transfer
  (``tests/golden/c/transfers/``; ``KERA_UPDATE_GOLDEN=1`` regenerates).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from spacegraphs import GRAPHS, golden_transfer
from test_c_backend import TARGETS, mismatches, usable

from kera.backends import c
from kera.backends.c.emit import parts
from kera.interp import interpret
from kera.ir import Function
from kera.ops import Op
from kera.passes import optimize, pipeline
from keracheck.inputs import generate

Array = np.ndarray[Any, Any]
GOLDEN = Path(__file__).parents[1] / "golden"
ROWS = 37  # a partial block on every lane count


def with_payloads(fn: Function, seed: int) -> dict[str, Array]:
    """keracheck's inputs, every f32 parameter's first elements NaNs with payloads."""
    ins = generate(fn, ROWS, seed=seed)
    for p in fn.params:
        name = str(p.attr("name"))
        if p.dtype.np == np.float32 and p.shape:
            x = ins[name].view(np.uint32).copy()
            x[::2, 0] = 0x7FC12345
            x[1::2, 0] = 0xFF812345  # signalling: a copy through x87 would quiet it
            ins[name] = x.view(np.float32)
    return ins


Case = tuple[str, Function, dict[str, Array], list[Array]]


@pytest.fixture(scope="module")
def cases() -> list[Case]:
    out = []
    for seed, (name, make) in enumerate(GRAPHS.items()):
        fn = make()
        ins = with_payloads(fn, seed)
        want = interpret(fn, ins)
        out += [
            (name, fn, ins, want),
            (f"{name}@O2", optimize(fn, pipeline(2)).function, ins, want),
        ]
    return out


@pytest.mark.toolchain
@pytest.mark.parametrize("target", TARGETS)
def test_transfers_agree_with_the_interpreter(target: str, cases: list[Case]) -> None:
    got = usable(target).run_many([(fn, ins) for _, fn, ins, _ in cases])
    bad = [
        m
        for (name, fn, ins, want), g in zip(cases, got, strict=True)
        for m in mismatches(name, fn, ins, g, want)
    ]
    assert not bad, f"{len(bad)} mismatches on {target}:\n" + "\n".join(bad[:40])


def test_payloads_reach_the_results(cases: list[Case]) -> None:
    """round_trip returns its unified copy of x: the payloads put in come out as they are."""
    (want,) = [w for name, _, _, w in cases if name == "round_trip"]
    assert {0x7FC12345, 0xFF812345} <= set(want[1].view(np.uint32)[:, 0].tolist())


def test_each_transfer_is_a_copy_of_its_own() -> None:
    """identical_transfers: three transfers of one value (two equal, one unused), three copies."""
    fn = GRAPHS["identical_transfers"]()
    assert sum(n.op is Op.TRANSFER for n in fn.nodes()) == 3
    text = c.emit([fn], isa="scalar").c
    body = text[text.index("int kera_identical_transfers(") :]
    assert len(re.findall(r"/\* \S+ = transfer\(", body)) == 3


def test_golden_transfer(golden: Callable[[str, str], None]) -> None:
    """The whole .c of one small transfer round trip at the scalar level, the prelude by
    reference (``tests/golden/c/prelude.scalar.c``)."""
    p = parts([golden_transfer()], isa="scalar", name="moved")
    assert p.prelude == (GOLDEN / "c" / "prelude.scalar.c").read_text()
    helpers = [f"/* ---- {k} */\n{t}" for k, t in p.helpers.items()]
    text = "\n".join([p.banner, "/* golden: prelude.scalar.c */", *helpers, *p.functions.values()])
    golden("c/transfers/moved.scalar.c", text)
