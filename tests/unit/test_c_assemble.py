"""A batch split over several compilers (issue 20): ``c.bodies`` emits each entry point once and
``c.assemble`` makes the translation unit of any subset of them, the same text byte for byte
as ``c.emit`` of that subset, at every ISA level; ``cpu.balance`` splits by weight.  No
compiler runs here (``tests/toolchain/test_c_backend.py`` builds a split batch)."""

from __future__ import annotations

import pytest

from kera.backends import c
from kera.dtypes import DType
from kera.ir import Function, FunctionBuilder
from keracheck.targets.cpu import balance, build_cost


def _fns() -> dict[str, Function]:
    out = {}
    for k, (dt, shape) in enumerate([(DType.F32, [3]), (DType.I64, [2, 2]), (DType.BOOL, [])]):
        b = FunctionBuilder(f"f{k}")
        x = b.param("x", dt, shape)
        y = b.op("max" if dt is not DType.BOOL else "and", x, x)
        out[f"f{k}"] = b.build(y, b.op("eq", x, y))
    return out


@pytest.mark.parametrize("isa", sorted(c.ISAS))
def test_assembled_units_are_emits_text(isa: str) -> None:
    fns = _fns()
    made = c.bodies(fns, isa)
    for keys in (["f0", "f1", "f2"], ["f2", "f0"], ["f1"]):
        sub = {k: fns[k] for k in keys}
        want = c.emit(sub, isa=isa)
        got = c.assemble(sub, made, isa=isa)
        assert got.files() == want.files() and got.symbols == want.symbols


def test_balance_splits_by_weight_and_keeps_the_order() -> None:
    w = {"a": 1.0, "b": 9.0, "c": 1.0, "d": 1.0, "e": 1.0, "f": 4.0}
    parts = balance(w, 2)
    assert sorted(parts) == [["a", "c", "d", "e", "f"], ["b"]]
    assert balance(w, 2) == parts  # the same split every time
    assert sorted(x for p in balance(w, 4) for x in p) == sorted(w)
    assert balance({"a": 1.0}, 3) == [["a"]]  # no empty parts
    assert build_cost("x" * 20) == 2 * build_cost("x" * 10) > 0  # linear in the C text
