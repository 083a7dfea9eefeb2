"""The bundled corpus: it compiles, every case says what it checks, and it covers every
op x dtype combination the contract's typing rules allow."""

from __future__ import annotations

import re
from itertools import product
from pathlib import Path

import pytest

from kera import frontend
from kera.dtypes import DType
from kera.ir import Function
from kera.ops import (
    BINARY,
    MOVEMENT,
    REDUCE,
    UNARY,
    AttrValue,
    Op,
    TensorType,
    TypeRuleError,
    infer,
)

CORPUS = Path(__file__).parents[2] / "corpora"


def corpus_functions() -> list[tuple[Path, Function]]:
    out = []
    for path in sorted(CORPUS.rglob("*.kera")):
        if "regressions" in path.parts:
            continue
        res = frontend.compile_source(path.read_text(encoding="utf-8"), str(path))
        assert res.ok and res.graph is not None, frontend.render_diagnostics(
            res.diagnostics, path.read_text(encoding="utf-8"), str(path)
        )
        out += [(path, f) for f in res.graph.functions.values()]
    return out


def test_at_least_60_cases_each_with_a_comment() -> None:
    fns = corpus_functions()
    assert len(fns) >= 60
    for path in sorted(CORPUS.glob("*.kera")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            if line.startswith("export fn"):
                assert i > 0 and lines[i - 1].startswith("//"), (
                    f"{path.name}:{i + 1} has no comment"
                )


def _valid(op: Op, types: list[TensorType], attrs: dict[str, AttrValue]) -> bool:
    try:
        infer(op, types, attrs)
    except TypeRuleError:
        return False
    return True


def required() -> set[tuple[str, str]]:
    req: set[tuple[str, str]] = set()
    for dt in DType:
        s, v, m = TensorType(dt), TensorType(dt, (2,)), TensorType(dt, (2, 2))
        checks: dict[Op, tuple[list[TensorType], dict[str, AttrValue]]] = {
            **{op: ([s], {}) for op in UNARY},
            **{op: ([s, s], {}) for op in BINARY},
            Op.FMA: ([s, s, s], {}),
            Op.SELECT: ([TensorType(DType.BOOL), s, s], {}),
            **{op: ([v], {"axis": 0}) for op in REDUCE},
            Op.DOT: ([v, v], {}),
            Op.MATMUL: ([m, m], {}),
            Op.BROADCAST: ([s], {"shape": (2,)}),
            Op.RESHAPE: ([m], {"shape": (4,)}),
            Op.TRANSPOSE: ([m], {"perm": (1, 0)}),
            Op.SLICE: ([v], {"start": (0,), "stop": (1,)}),
            Op.CONCAT: ([v, v], {"axis": 0}),
            Op.IOTA: ([], {"shape": (2,), "axis": 0, "to": dt}),
        }
        for op, (types, attrs) in checks.items():
            if _valid(op, types, attrs):
                req.add((op.value, dt.value))
    for src, dst in product(DType, DType):
        for op in (Op.CONVERT, Op.BITCAST):
            if _valid(op, [TensorType(src)], {"to": dst}):
                req.add((op.value, f"{src}->{dst}"))
    assert {Op(op) for op, _ in req} >= MOVEMENT
    return req


def covered(fns: list[tuple[Path, Function]]) -> set[tuple[str, str]]:
    got: set[tuple[str, str]] = set()
    for _, fn in fns:
        for n in fn.nodes():
            if n.op in (Op.CONVERT, Op.BITCAST):
                got.add((n.op.value, f"{n.inputs[0].dtype}->{n.dtype}"))
            elif n.op is Op.SELECT:
                got.add((n.op.value, n.inputs[1].dtype.value))
            elif n.inputs:
                got.add((n.op.value, n.inputs[0].dtype.value))
            else:
                got.add((n.op.value, n.dtype.value))
    return got


def test_every_op_and_dtype_is_covered() -> None:
    missing = sorted(required() - covered(corpus_functions()))
    assert not missing, f"the corpus lacks {len(missing)} op x dtype cases: {missing}"


@pytest.mark.parametrize("length", [1, 3, 5, 17, 100])
def test_reductions_of_odd_lengths(length: int) -> None:
    lengths = set()
    for _, fn in corpus_functions():
        for n in fn.nodes():
            if n.op in REDUCE or n.op is Op.DOT:
                axis = n.attrs.get("axis", 0)
                assert isinstance(axis, int)
                lengths.add(n.inputs[0].shape[axis])
    assert length in lengths


def test_names_are_unique_per_file() -> None:
    for path in sorted(CORPUS.glob("*.kera")):
        names = re.findall(r"^export fn (\w+)", path.read_text(encoding="utf-8"), re.M)
        assert len(names) == len(set(names)), path


def test_corpus_is_formatted() -> None:
    for path in sorted(CORPUS.rglob("*.kera")):
        text = path.read_text(encoding="utf-8")
        assert frontend.format_source(text) == text, f"{path}: run kerac fmt"
