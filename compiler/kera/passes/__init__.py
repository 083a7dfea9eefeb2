"""Optimisation passes over the graph IR, run by a validating pass manager.

One registry of named passes (``PASSES``); each is a small module whose docstring states its
rewrite and why it keeps every bit of the contract (``docs/passes.md``).  ``pipeline(level)``
gives a level's passes: ``-O0`` none (the graph exactly as the front end built it, calls
kept), ``-O1`` ``inline, fold, cse``, ``-O2`` ``inline, fold, simplify, cse`` (the default of
``kerac build``), each run to a fixed point.  Third-party passes come from the ``kera.passes`` entry-point group or
``load_plugin("module:attr" | "file.py:attr")`` and run after the built-in ones at ``-O1`` and
above, so that a team can test its own rewrite with ``keracheck --pass-plugin``.

Common subexpressions and dead code need no pass: nodes are interned (identical content is one
node) and a function holds only what its results reach; ``cse`` adds what interning cannot see
(commutative operand order).  Elementwise fusion is not a pass: see ``docs/passes.md``.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from kera.ir import Function, Graph
from kera.passes import cse, fold, inline, simplify
from kera.passes.manager import Outcome, Pass, PassError, PassManager, PassStat
from kera.passes.validate import InvariantError, validate
from kera.plugins import PluginSpecError, import_attr, instance

ENTRY_POINT_GROUP = "kera.passes"


def _builtin(module: ModuleType) -> Pass:
    doc = (module.__doc__ or "").strip()
    return Pass(module.NAME, module.VERSION, module.run, doc, getattr(module, "IDEMPOTENT", False))


PASSES: dict[str, Pass] = {p.name: p for p in map(_builtin, (inline, fold, cse, simplify))}

LEVELS: dict[int, tuple[str, ...]] = {
    0: (),
    1: ("inline", "fold", "cse"),
    2: ("inline", "fold", "simplify", "cse"),
}
DEFAULT_LEVEL = 2


class PassSpecError(ValueError):
    """An unknown pass name or a pass plugin that cannot be loaded."""


def as_pass(obj: Any, where: str) -> Pass:
    """A :class:`Pass` from a plugin object: a ``Pass``, a class or factory returning one, or
    anything with ``name``/``NAME``, ``version``/``VERSION`` and ``run(fn)``."""
    if isinstance(obj, Pass):
        return obj
    obj = instance(obj)
    if isinstance(obj, Pass):
        return obj
    name = getattr(obj, "name", getattr(obj, "NAME", None))
    version = getattr(obj, "version", getattr(obj, "VERSION", 1))
    run = getattr(obj, "run", None)
    if not isinstance(name, str) or not callable(run) or not isinstance(version, int):
        raise PassSpecError(f"{where}: not a pass (needs a str name, an int version and run(fn))")
    return Pass(name, version, run, (getattr(obj, "__doc__", "") or "").strip())


def load_plugin(spec: str) -> Pass:
    """``module:attr`` or ``path/file.py:attr`` -> a :class:`Pass`."""
    try:
        obj = import_attr(spec)
    except PluginSpecError as e:
        raise PassSpecError(f"pass plugin: {e}") from None
    return as_pass(obj, spec)


def entry_point_passes() -> dict[str, Pass]:
    """Passes installed under the ``kera.passes`` entry-point group."""
    out: dict[str, Pass] = {}
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        p = as_pass(ep.load(), f"entry point {ep.name}")
        out[p.name] = p
    return out


def resolve(names: Sequence[str]) -> list[Pass]:
    """Passes by name: built-in, then installed plugins."""
    known = dict(PASSES)
    if any(n not in known for n in names):
        known.update(entry_point_passes())
    unknown = [n for n in names if n not in known]
    if unknown:
        raise PassSpecError(
            f"unknown pass {', '.join(map(repr, unknown))}; known: {', '.join(sorted(known))}"
        )
    return [known[n] for n in names]


def pipeline(level: int, extra: Sequence[Pass] = ()) -> list[Pass]:
    """The passes of ``-O<level>``, then ``extra`` (plugins) when the level is not 0."""
    if level not in LEVELS:
        raise PassSpecError(f"unknown optimisation level {level}; choose one of 0, 1, 2")
    return [*resolve(LEVELS[level]), *(extra if level else ())]


def pipeline_id(passes: Sequence[Pass]) -> list[str]:
    """How a pipeline is recorded: ``name@version`` per pass, in order."""
    return [f"{p.name}@{p.version}" for p in passes]


def optimize(fn: Function, passes: Sequence[Pass]) -> Outcome:
    return PassManager(passes).run(fn)


def optimize_graph(graph: Graph, passes: Sequence[Pass]) -> tuple[Graph, list[Outcome]]:
    return PassManager(passes).run_graph(graph)


__all__ = [
    "DEFAULT_LEVEL",
    "LEVELS",
    "PASSES",
    "InvariantError",
    "Outcome",
    "Pass",
    "PassError",
    "PassManager",
    "PassSpecError",
    "PassStat",
    "as_pass",
    "load_plugin",
    "optimize",
    "optimize_graph",
    "pipeline",
    "pipeline_id",
    "resolve",
    "validate",
]
