"""After the shrinker: cut a divergence down to its culprit, one input row and simple values.

Hypothesis shrinks the graph (fewest choices: steps, then simplest ops, types and values), but
it cannot delete a step that a later step uses, nor replace a computed operand by a parameter
(that takes more choices).  Four cheap, oracle-verified steps finish the job:

1. **cone**: the function truncated at the culprit node, keeping only the parameters it uses,
   renumbered ``p0, p1, ...`` in canonical order (inputs carried over by name);
2. **cut**: an operand subgraph of the culprit replaced by a parameter fed with the values
   ``ref`` computes for it (C-Reduce's "replace an expression by its value"); every candidate
   cut is checked in one batch per target, the smallest graph that keeps the signature wins,
   and this repeats until no cut keeps it (a hidden fma needs its ``mul`` and survives);
3. **row**: one input row on which the culprit shows the signature's class while its operands
   agree (else every row is kept: some divergences need several rows, e.g. a SIMD tail);
4. **values**: each input element replaced, where the signature survives, by the simplest of
   ``0, 1, -1, 2, 0.5`` (``false`` for bools) that comes before it; the candidates are rows of
   one batch, the accepted changes are applied together and verified.

Each step checks its result with the oracle (signature included) and keeps its input when the
check fails, so the result always shows the signature.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from kera.ir import Function, Node, make_node, param, topo_order
from kera.ops import Op
from keracheck.fuzz.oracle import (
    LEAVES,
    REF,
    Case,
    Divergence,
    Oracle,
    node_rows,
    truncated,
)
from keracheck.fuzz.strategies import op_count

Array = np.ndarray[Any, Any]
SIMPLE_FLOATS = (0.0, 1.0, -1.0, 2.0, 0.5)
SIMPLE_INTS = (0, 1, -1, 2)
ROUNDS = 3


def reduce(oracle: Oracle, div: Divergence) -> Divergence:
    for step in (cone, cut, one_row, simple_values):
        div = step(oracle, div)
    return div


def _confirm(oracle: Oracle, cases: list[Case], div: Divergence) -> list[Divergence]:
    """The divergences with div's signature the oracle sees on cases (one batch)."""
    found = oracle.check_cases(cases, targets=[div.signature.target])
    return [d for d in found if d.signature == div.signature]


def rebuild(div: Divergence, cuts: Mapping[int, Array]) -> Case:
    """The cone of div's culprit, each node in ``cuts`` (by id) replaced by a parameter fed the
    given values; parameters renumbered p0, p1, ... in canonical order."""
    new: dict[int, Node] = {}
    params: list[Node] = []
    inputs: dict[str, Array] = {}
    for n in topo_order([div.node], set(cuts)):
        if n.op is Op.PARAM or id(n) in cuts:
            k = len(params)
            params.append(param(k, f"p{k}", n.dtype, n.shape))
            inputs[f"p{k}"] = cuts[id(n)] if id(n) in cuts else div.case.inputs[str(n.attr("name"))]
            new[id(n)] = params[-1]
        elif n.op is Op.CONST:
            new[id(n)] = n
        else:
            new[id(n)] = make_node(n.op, [new[id(i)] for i in n.inputs], n.attrs)
    return Case(Function("fuzz", params, [new[id(div.node)]]), inputs)


def cone(oracle: Oracle, div: Divergence) -> Divergence:
    case = rebuild(div, {})
    if case.key == div.case.key:
        return div
    found = _confirm(oracle, [case], div)
    return found[0] if found else div


def cut(oracle: Oracle, div: Divergence) -> Divergence:
    while True:
        inner = [n for n in topo_order([div.node]) if n.op not in LEAVES and n is not div.node]
        if not inner:
            return div
        subs = [Case(truncated(div.fn, n), div.case.inputs) for n in inner]
        values = oracle.runners[REF].run(subs)
        cases = [
            rebuild(div, {id(n): v[0]})
            for n, v in zip(inner, values, strict=True)
            if isinstance(v, list)
        ]
        found = _confirm(oracle, cases, div)
        best = min(found, key=lambda d: (op_count(d.fn), len(d.fn.nodes())), default=None)
        if best is None or op_count(best.fn) >= op_count(div.fn):
            return div
        div = best


def one_row(oracle: Oracle, div: Divergence) -> Divergence:
    if div.case.rows <= 1:
        return div
    good = [r for r, ok in enumerate(node_rows(oracle, div.case, div.signature, div.node)) if ok]
    for r in good[:3]:
        rows = {k: v[r : r + 1] for k, v in div.case.inputs.items()}
        found = _confirm(oracle, [Case(div.fn, rows)], div)
        if found:
            return found[0]
    return div


def _simpler(value: Any, dtype: np.dtype[Any]) -> list[Any]:
    """Simple values that come before ``value`` (all of them when value is not simple)."""
    if dtype == np.bool_:
        return [False] if bool(value) else []
    pool = SIMPLE_FLOATS if dtype.kind == "f" else SIMPLE_INTS
    cands = [dtype.type(v) for v in pool if dtype.kind != "u" or v >= 0]
    bits = np.array(value, dtype=dtype).tobytes()
    for i, c in enumerate(cands):
        if np.array(c, dtype=dtype).tobytes() == bits:
            return cands[:i]
    return cands


def simple_values(oracle: Oracle, div: Divergence) -> Divergence:
    if div.case.rows != 1:
        return div
    for _ in range(ROUNDS):
        better = _round(oracle, div)
        if better is None:
            break
        div = better
    return div


def _round(oracle: Oracle, div: Divergence) -> Divergence | None:
    """One pass over every input element; None when no element got simpler."""
    base = div.case.inputs
    trials: list[tuple[str, int, Any]] = []
    for name, arr in base.items():
        flat = arr.reshape(-1)
        for j in range(flat.size):
            trials += [(name, j, c) for c in _simpler(flat[j], arr.dtype)]
    if not trials:
        return None
    batch = {name: np.repeat(arr, len(trials), axis=0) for name, arr in base.items()}
    for row, (name, j, c) in enumerate(trials):
        batch[name].reshape(len(trials), -1)[row, j] = c  # a view: np.repeat's copy is contiguous
    ok = node_rows(oracle, Case(div.fn, batch), div.signature, div.node)
    chosen: dict[tuple[str, int], Any] = {}
    for (name, j, c), good in zip(trials, ok, strict=True):
        if good:
            chosen.setdefault((name, j), c)
    if not chosen:
        return None
    for changes in (chosen, dict([next(iter(chosen.items()))])):
        inputs = {name: arr.copy() for name, arr in base.items()}
        for (name, j), c in changes.items():
            inputs[name].reshape(-1)[j] = c
        found = _confirm(oracle, [Case(div.fn, inputs)], div)
        if found:
            return found[0]
    return None
