"""Optimisation levels in a run: the same case at ``-O0`` and ``-O2`` must give the same bits.

``--opt-levels 0,2`` runs every selected target at each level listed: level 0 is the case's
graph as the front end built it, any other level the graph after that level's pipeline
(``kera.passes.pipeline``, followed by the ``--pass-plugin`` passes).  Target ``T`` at level
``L > 0`` is reported as its own column, ``T@OL`` (one build and one run of the optimised
``.keg``).  A bit difference between ``T@OL`` and ``T`` is a divergence of kind ``opt-level``
(rule KC005) naming the pass that introduced it: the pipeline's intermediate graphs (one after
every pass run, in order) run on ``T`` in one batch, and the first whose outputs differ from
level 0 names the pass.

Without ``--opt-levels`` the targets run at level 0 (the corpus is written to exercise each
target's lowering of every op, which folding would remove), and the reference interpreter
alone checks ``-O0`` against ``-O2`` (with the plugin passes) in this process, which is
cheap: the main job always proves that the default optimisation keeps the bits.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from kera import keg, passes
from kera.interp import interpret
from kera.ir import Function, Graph
from keracheck.collect import Case
from keracheck.compare import diff_outputs, divergences

Array = np.ndarray[Any, Any]
LEVEL_SEP = "@O"
REF_CHECK_LEVEL = 2


class LevelError(ValueError):
    """An unusable ``--opt-levels`` value or ``--pass-plugin`` (a usage error)."""


def parse_levels(value: str | Sequence[int]) -> tuple[int, ...]:
    """``"0,2"`` (or ``[0, 2]`` from the config) -> ``(0, 2)``: known levels, 0 first."""
    items = value.split(",") if isinstance(value, str) else list(value)
    levels: list[int] = []
    for item in items:
        text = str(item).strip()
        if text not in ("0", "1", "2"):
            raise LevelError(f"opt-levels: '{text}' is not an optimisation level (0, 1 or 2)")
        levels.append(int(text))
    if not levels:
        raise LevelError("opt-levels: give at least one level, e.g. --opt-levels 0,2")
    return tuple(sorted(set(levels)))


def load_pass_plugins(specs: Sequence[str]) -> list[passes.Pass]:
    try:
        return [passes.load_plugin(s) for s in specs]
    except passes.PassSpecError as e:
        raise LevelError(str(e)) from None


def level_id(tid: str, level: int) -> str:
    return tid if level == 0 else f"{tid}{LEVEL_SEP}{level}"


def split_id(tid: str) -> tuple[str, int]:
    """``"cpu@O2"`` -> ``("cpu", 2)``; a plain id is level 0."""
    base, sep, level = tid.rpartition(LEVEL_SEP)
    return (base, int(level)) if sep and level.isdigit() else (tid, 0)


@dataclass
class Optimised:
    """The cases of one level: optimised case per source case key, and failures."""

    level: int
    cases: dict[str, Case]  # source case key -> the case with the optimised graph
    errors: dict[str, str]  # source case key -> why the pipeline failed on it


def optimise_cases(cases: Sequence[Case], level: int, extra: Sequence[passes.Pass]) -> Optimised:
    pipeline = passes.pipeline(level, extra)
    out = Optimised(level, {}, {})
    for case in cases:
        try:
            fn = passes.optimize(case.fn, pipeline).function
        except passes.PassError as e:
            out.errors[case.key] = f"optimiser: {e}"
            continue
        graph = Graph([fn]).with_provenance(Graph([case.fn]), passes.pipeline_id(pipeline))
        out.cases[case.key] = replace(case, fn=fn, keg_bytes=keg.dumps(graph))
    return out


def steps(fn: Function, pipeline: Sequence[passes.Pass]) -> list[tuple[str, Function]]:
    """The graph after every pass run of ``pipeline``, in order (pass name, function)."""
    seen: list[tuple[str, Function]] = []
    passes.PassManager(pipeline, after=lambda p, f: seen.append((p.name, f))).run(fn)
    return seen


def first_differing(
    want: Sequence[Array], candidates: Sequence[tuple[str, Sequence[Array] | None]]
) -> str | None:
    """The name of the first candidate whose outputs differ in bits from ``want``."""
    for name, got in candidates:
        if got is None or any(
            diff_outputs(w, g, ("a", "b")) is not None for w, g in zip(want, got, strict=True)
        ):
            return name
    return None


def culprit(
    fn: Function,
    want: Sequence[Array],
    pipeline: Sequence[passes.Pass],
    run_all: Callable[[list[Function]], list[Sequence[Array] | None]],
) -> str | None:
    """The pass whose output first changes the bits ``fn`` gives at level 0 (``want``), with
    every intermediate graph run by ``run_all`` in one batch."""
    trail = steps(fn, pipeline)
    changed = [(name, f) for name, f in trail if f is not fn]
    if not changed:
        return None
    outs = run_all([f for _, f in changed])
    return first_differing(want, [(name, o) for (name, _), o in zip(changed, outs, strict=True)])


def ref_check(
    case: Case, extra: Sequence[passes.Pass], base: Sequence[Array] | None = None
) -> list[dict[str, Any]]:
    """``-O0`` against ``-O2`` on the reference interpreter, in this process: the
    ``opt-level`` divergences (none when they agree), each naming the culprit pass.  ``base``:
    the ``-O0`` outputs when the ``ref`` target already computed them."""
    pipeline = passes.pipeline(REF_CHECK_LEVEL, extra)
    if base is None:
        base = interpret(case.fn, case.inputs)
    try:
        opt = passes.optimize(case.fn, pipeline).function
    except passes.PassError as e:
        return [_optimiser_error(str(e))]
    got = interpret(opt, case.inputs)
    names = (level_id("ref", 0), level_id("ref", REF_CHECK_LEVEL))
    found = opt_level_divergences(base, got, names)
    if found:
        name = culprit(case.fn, base, pipeline, lambda fs: [interpret(f, case.inputs) for f in fs])
        for d in found:
            d["pass"] = name
    return found


def opt_level_divergences(
    base: Sequence[Array], got: Sequence[Array], names: tuple[str, str]
) -> list[dict[str, Any]]:
    return [{**d, "pass": None} for d in divergences(base, got, names, names, "opt-level")]


def _optimiser_error(message: str) -> dict[str, Any]:
    return {
        "targets": [level_id("ref", REF_CHECK_LEVEL)],
        "output": 0,
        "kind": "opt-level",
        "baselined": False,
        "reason": None,
        "pass": None,
        "mismatched": 0,
        "total": 0,
        "classes": {"shape-or-dtype": 1},
        "maxUlp": None,
        "message": message,
        "examples": [],
    }


def levels_of(targets: Mapping[str, Any]) -> dict[str, list[int]]:
    """Base target id -> the levels present among ``targets``' ids."""
    out: dict[str, list[int]] = {}
    for tid in targets:
        base, level = split_id(tid)
        out.setdefault(base, []).append(level)
    return out
