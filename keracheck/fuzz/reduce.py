"""After the shrinker: cut a divergence down to its culprit, then to as few rows, elements and
as simple values as still show it.

Hypothesis shrinks the graph (fewest choices: steps, then simplest ops, types and values), but
it cannot delete a step that a later step uses, nor replace a computed operand by a parameter
(that takes more choices), and it never sees the input rows.  Five oracle-verified steps finish
the job, in this order (:data:`OP_STEPS`, then :data:`ELEMENT_STEPS`):

1. **cone**: the function truncated at the culprit node, keeping only the parameters it uses,
   renumbered ``p0, p1, ...`` in canonical order (inputs carried over by name);
2. **cut**: an operand subgraph of the culprit replaced by a parameter fed with the values
   ``ref`` computes for it (C-Reduce's "replace an expression by its value"; a math-library
   call is cut whole or not at all, ``calls.Units``); every candidate
   cut is checked in one batch per target, the smallest graph that keeps the signature wins,
   and this repeats until no cut keeps it (a hidden fma needs its ``mul`` and survives);
3. **rows**: the fewest input rows that keep the signature, for every class, ``error``
   included: each row alone (rows on which the culprit shows the class while its operands
   agree first; :data:`ROW_CHUNK` cases per oracle batch), then windows of
   :data:`ROW_WINDOWS` consecutive rows (a SIMD tail needs several rows);
4. **shapes**: the smallest dimensions that keep the signature.  A dimension size ``n`` of the
   parameters is replaced by each of :data:`DIM_SIZES` below it, smallest first, everywhere in
   the graph (parameter shapes and ``shape`` attributes, so ``broadcast`` and ``iota`` follow;
   a graph the type rules reject, say a ``reshape`` whose sizes no longer match, is skipped);
   the inputs keep ``k`` of the ``n`` elements along each such axis (windows, a prefix with a
   suffix, seeded random picks; :func:`_picks`), every pick tried as one row of one case (the
   culprit's row analysis tells which show the class) -- so ``sum`` over ``f32[129]`` becomes
   ``sum`` over ``f32[3]`` when three of its elements still diverge.  Largest sizes first,
   until no size shrinks;
5. **values**: each input element replaced, where the signature survives, by the simplest of
   ``0, 1, -1, 2, 0.5`` (``false`` for bools) that comes before it; the candidates are rows of
   one batch (separate cases for an ``error``, which fails a case as a whole), the accepted
   changes are applied together and verified.

Each step checks its result with the oracle (signature included) and keeps its input when the
check fails, so the result always shows the signature.  Steps 3-5 work on elements, so
``reduce(..., max_ops=k)`` stops after step 2 when the graph still has more than ``k`` ops (the
engine then shrinks it with Hypothesis and reduces the smaller graph).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from kera.ir import Function, IRError, Node, make_node, param, topo_order
from kera.ops import Op, TypeRuleError
from keracheck.fuzz import calls
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
Step = Callable[[Oracle, Divergence], Divergence]
SIMPLE_FLOATS = (0.0, 1.0, -1.0, 2.0, 0.5)
SIMPLE_INTS = (0, 1, -1, 2)
ROUNDS = 3
#: candidate cases per oracle batch in the rows step (and the most kept from a row analysis)
ROW_CHUNK = 16
#: row windows tried when no row alone keeps the signature
ROW_WINDOWS = (2, 3, 4, 8, 16, 32)
#: sizes a dimension is cut to, smallest first (the aim: at most 8 elements per input)
DIM_SIZES = (1, 2, 3, 4, 6, 8, 16, 32, 64, 128)
#: element picks tried for one dimension size (rows of one case)
MAX_PICKS = 128
#: dimension cuts accepted at most (each makes one size smaller)
MAX_DIM_CUTS = 12
#: value trials judged as separate cases (error signatures), at most
MAX_TRIAL_CASES = 64


def reduce(oracle: Oracle, div: Divergence, max_ops: int | None = None) -> Divergence:
    for step in OP_STEPS:
        div = step(oracle, div)
    if max_ops is not None and op_count(div.fn) > max_ops:
        return div
    for step in ELEMENT_STEPS:
        div = step(oracle, div)
    return div


def _confirm(oracle: Oracle, cases: list[Case], div: Divergence) -> list[Divergence]:
    """The divergences with div's signature the oracle sees on cases (one batch), in the
    order of the cases."""
    if not cases:
        return []
    found = oracle.check_cases(cases, targets=[div.signature.target])
    return [d for d in found if d.signature == div.signature]


def _rowwise(div: Divergence) -> bool:
    """Whether a row analysis (``node_rows``) tells the rows apart: not for a failure, which
    fails the case as a whole."""
    return div.signature.cls != "error" and div.signature.target != REF


def _good_rows(oracle: Oracle, case: Case, div: Divergence, node: Node) -> list[bool] | None:
    """For each row of case (a variant of div's): does it show the signature's class at
    ``node`` alone?  None when the rows cannot be told apart."""
    if not _rowwise(div):
        return None
    try:
        return node_rows(oracle, case, div.signature, node)
    except ValueError:  # a result went missing (a cache cleared under us): no analysis
        return None


# ------------------------------------------------------------------------------ ops


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
        visible = calls.analyse(div.fn).nodes  # never inside a math-library call
        inner = [n for n in visible if n.op not in LEAVES and n is not div.node]
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


# ------------------------------------------------------------------------------ rows


def _with_rows(case: Case, rows: Sequence[int]) -> Case:
    return Case(case.fn, {k: v[list(rows)] for k, v in case.inputs.items()})


def fewer_rows(oracle: Oracle, div: Divergence) -> Divergence:
    """The first candidate row set that keeps the signature: single rows (those the row
    analysis marks first), then windows of consecutive rows."""
    n = div.case.rows
    if n <= 1:
        return div
    ok = _good_rows(oracle, div.case, div, div.node)
    order = sorted(range(n), key=lambda r: not ok[r]) if ok else list(range(n))
    singles = [[r] for r in order]
    windows = [list(range(a, a + w)) for w in ROW_WINDOWS if w < n for a in range(0, n - w + 1, w)]
    for k in range(0, len(singles) + len(windows), ROW_CHUNK):
        chunk = (singles + windows)[k : k + ROW_CHUNK]
        found = _confirm(oracle, [_with_rows(div.case, rows) for rows in chunk], div)
        if found:
            return found[0]
    return div


# ------------------------------------------------------------------------------ shapes


def smaller_shapes(oracle: Oracle, div: Divergence) -> Divergence:
    for _ in range(MAX_DIM_CUTS):
        better = _cut_a_dim(oracle, div)
        if better is None:
            break
        div = better
    return div


def _cut_a_dim(oracle: Oracle, div: Divergence) -> Divergence | None:
    """div with one dimension size made smaller (the largest size that shrinks, to the
    smallest size that keeps the signature), or None."""
    for size in sorted(_dims(div.node), reverse=True):
        for to in (k for k in DIM_SIZES if k < size):
            found = _resized(oracle, div, size, to)
            if found is not None:
                return found
    return None


def _dims(root: Node) -> set[int]:
    """Dimension sizes above 1 of the parameters and ``shape`` attributes under root."""
    sizes: set[int] = set()
    for n in topo_order([root]):
        shape = n.shape if n.op is Op.PARAM else n.attrs.get("shape", ())
        assert isinstance(shape, tuple)
        sizes |= {d for d in shape if isinstance(d, int) and d > 1}
    return sizes


def _resize(shape: tuple[Any, ...], size: int, to: int) -> tuple[Any, ...]:
    return tuple(to if d == size else d for d in shape)


def _resized_fn(root: Node, size: int, to: int) -> tuple[Function, list[str]] | None:
    """The cone of root with every dimension ``size`` of its parameters and ``shape``
    attributes made ``to`` (parameters renumbered p0, p1, ...), and the old name of each new
    parameter; None when the type rules reject it."""
    new: dict[int, Node] = {}
    params: list[Node] = []
    names: list[str] = []
    try:
        for n in topo_order([root]):
            if n.op is Op.PARAM:
                k = len(params)
                params.append(param(k, f"p{k}", n.dtype, _resize(n.shape, size, to)))
                names.append(str(n.attr("name")))
                new[id(n)] = params[-1]
            elif n.op is Op.CONST:
                new[id(n)] = n  # scalars: the strategy broadcasts tensor constants
            else:
                attrs = n.attrs
                shape = attrs.get("shape")
                if isinstance(shape, tuple):
                    attrs["shape"] = _resize(shape, size, to)
                new[id(n)] = make_node(n.op, [new[id(i)] for i in n.inputs], attrs)
        return Function("fuzz", params, [new[id(root)]]), names
    except (TypeRuleError, IRError):
        return None


Pick = tuple[tuple[int, ...], ...]  # indices kept along the 1st, 2nd ... axis of one size


def _picks(size: int, to: int, axes: int, most: int, seed: str) -> list[Pick]:
    """At most ``most`` ways to keep ``to`` of ``size`` indices along each of ``axes`` axes
    (the k-th axis of that size of every parameter shares the k-th index list), in order:
    windows of ``to`` consecutive indices, then the complements of windows of ``size - to``
    (a prefix and a suffix), both the same on every axis, then seeded random subsets drawn
    per axis (a sum's order-dependent rounding needs elements that are seldom neighbours, an
    element-wise bug one element off the diagonal); indices ascending, so order is kept."""
    gap = size - to
    lists = [tuple(range(a, a + to)) for a in range(gap + 1)]
    lists += [(*range(a), *range(a + gap, size)) for a in range(to + 1)]
    picks = [(ix,) * axes for ix in lists]
    rng = np.random.default_rng(list(hashlib.sha256(seed.encode()).digest()))
    for _ in range(most):
        picks.append(
            tuple(tuple(sorted(rng.choice(size, to, replace=False).tolist())) for _ in range(axes))
        )
    unique = list(dict.fromkeys(picks))
    if len(unique) <= most:
        return unique
    step = len(unique) / most  # spread over the families, the first of each kept
    return [unique[int(i * step)] for i in range(most)]


def _kept(
    div: Divergence, fn: Function, names: list[str], size: int, picks: list[Pick]
) -> dict[str, Array]:
    """Inputs of fn: each old input keeping the picked indices along its axes of ``size``,
    one pick after another along the rows."""
    out: dict[str, Array] = {}
    for p, old in zip(fn.params, names, strict=True):
        parts = []
        for pick in picks:
            arr = div.case.inputs[old]
            axes = [a for a, d in enumerate(arr.shape[1:], start=1) if d == size]
            for axis, ix in zip(axes, pick, strict=False):
                arr = np.take(arr, ix, axis=axis)
            parts.append(arr)
        out[str(p.attr("name"))] = np.ascontiguousarray(np.concatenate(parts))
    return out


def _resized(oracle: Oracle, div: Divergence, size: int, to: int) -> Divergence | None:
    """div with dimension ``size`` made ``to``, on the first pick of elements that keeps the
    signature."""
    built = _resized_fn(div.node, size, to)
    if built is None:
        return None
    fn, names = built
    axes = max((sum(1 for d in p.shape if d == size) for p in div.fn.params), default=0)
    by_rows = div.case.rows == 1 and _rowwise(div)  # every pick a row of one case
    seed = f"{div.case.key}/{size}/{to}"
    picks = _picks(size, to, axes, MAX_PICKS if by_rows else ROW_CHUNK, seed)
    if by_rows:
        ok = _good_rows(oracle, Case(fn, _kept(div, fn, names, size, picks)), div, fn.results[0])
        picks = [k for k, good in zip(picks, ok or [False] * len(picks), strict=True) if good]
    cases = [Case(fn, _kept(div, fn, names, size, [k])) for k in picks[:ROW_CHUNK]]
    found = _confirm(oracle, cases, div)
    return found[0] if found else None


# ------------------------------------------------------------------------------ values


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


Trial = tuple[str, int, Any]  # (input name, flat element index, simpler value)


def _changed(base: Mapping[str, Array], changes: Mapping[tuple[str, int], Any]) -> dict[str, Array]:
    inputs = {name: arr.copy() for name, arr in base.items()}
    for (name, j), c in changes.items():
        inputs[name].reshape(-1)[j] = c
    return inputs


def _judge_trials(oracle: Oracle, div: Divergence, trials: list[Trial]) -> list[bool]:
    """For each trial: does div's case with that one change keep the signature?"""
    base = div.case.inputs
    if not _rowwise(div):  # a failure: each trial a case of its own
        cases = [Case(div.fn, _changed(base, {(n, j): c})) for n, j, c in trials]
        keys = {d.case.key for d in _confirm(oracle, cases[:MAX_TRIAL_CASES], div)}
        return [c.key in keys for c in cases]
    batch = {name: np.repeat(arr, len(trials), axis=0) for name, arr in base.items()}
    for row, (name, j, c) in enumerate(trials):
        batch[name].reshape(len(trials), -1)[row, j] = c  # a view: np.repeat's copy is contiguous
    return node_rows(oracle, Case(div.fn, batch), div.signature, div.node)


def _round(oracle: Oracle, div: Divergence) -> Divergence | None:
    """One pass over every input element; None when no element got simpler."""
    base = div.case.inputs
    trials: list[Trial] = []
    for name, arr in base.items():
        flat = arr.reshape(-1)
        for j in range(flat.size):
            trials += [(name, j, c) for c in _simpler(flat[j], arr.dtype)]
    if not trials:
        return None
    ok = _judge_trials(oracle, div, trials)
    chosen: dict[tuple[str, int], Any] = {}
    for (name, j, c), good in zip(trials, ok, strict=True):
        if good:
            chosen.setdefault((name, j), c)
    if not chosen:
        return None
    for changes in (chosen, dict([next(iter(chosen.items()))])):
        found = _confirm(oracle, [Case(div.fn, _changed(base, changes))], div)
        if found:
            return found[0]
    return None


#: the steps that remove ops, then those that make the inputs smaller and simpler
OP_STEPS: tuple[Step, ...] = (cone, cut)
ELEMENT_STEPS: tuple[Step, ...] = (fewer_rows, smaller_shapes, simple_values)
