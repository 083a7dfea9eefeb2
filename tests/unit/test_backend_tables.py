"""Each back end's one lowering table covers every op of the contract: an op is lowered by a
row of the back end's ``LOWER`` table, or by the shared structure every back end derives its
structural ops from, or it is named in the back end's ``UNSUPPORTED`` with the reason; and
``SUPPORTED`` (what ``keracheck`` targets report) is derived from exactly those, never a list
kept by hand.  (``docs/architecture.md``: "How to change one op on every back end".)"""

from __future__ import annotations

from types import ModuleType

import pytest

import kera.backends.c as c
import kera.backends.ptx as ptx
import kera.backends.verilog as verilog
import kera.backends.wasm as wasm
from kera.backends.elementmaps import STRUCTURAL
from kera.ops import ELEMENTWISE, LEAVES, Op

BACKENDS: dict[str, ModuleType] = {"c": c, "wasm": wasm, "ptx": ptx, "verilog": verilog}


def _supported(mod: ModuleType) -> set[Op]:
    return {Op(str(x)) for x in mod.SUPPORTED}


@pytest.mark.parametrize("name", list(BACKENDS))
def test_every_op_is_lowered_or_named_unsupported(name: str) -> None:
    mod = BACKENDS[name]
    unsupported = dict(getattr(mod, "UNSUPPORTED", {}))
    assert all(isinstance(why, str) and why for why in unsupported.values())
    assert set(Op) - _supported(mod) == set(unsupported)


@pytest.mark.parametrize("name", list(BACKENDS))
def test_every_elementwise_op_has_a_lower_row(name: str) -> None:
    """Elementwise ops are lowered by the table, one row each (changing ``min`` is one row)."""
    lower = set(BACKENDS[name].LOWER)
    assert lower >= ELEMENTWISE, sorted(ELEMENTWISE - lower)


@pytest.mark.parametrize("name", ["ptx", "verilog"])
def test_unrolling_back_ends_derive_structure(name: str) -> None:
    """PTX and Verilog lower only elementwise ops element by element; reductions, dot, matmul
    and data movement come from ``elementmaps`` (one implementation of the contract's tree);
    ops lowered a whole node at a time (PTX: loops and dynamic indexing) are the keys of the
    back end's ``NODES`` table, where it has one."""
    mod = BACKENDS[name]
    whole = set(getattr(mod, "NODES", {}))
    assert set(mod.LOWER) == set(ELEMENTWISE)
    assert _supported(mod) == set(mod.LOWER) | set(STRUCTURAL) | set(LEAVES) | whole


def test_table_driven_back_ends_have_a_row_for_every_op() -> None:
    assert set(c.LOWER) == set(Op) - set(c.UNSUPPORTED)  # reshape: an alias; loop: a region
    assert set(wasm.LOWER) == set(ELEMENTWISE)
