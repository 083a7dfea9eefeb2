"""Collecting cases: the exported functions under the given paths, each with its inputs.

A *case* is one exported function of a corpus file (``.kera`` source or ``.keg`` graph), keyed
by its fingerprint, path and name.  Each case is compiled once to the canonical ``.keg`` bytes
of a single-export graph, which every target consumes.  Its inputs come from a companion
``<file>.inputs.npz`` when there is one, else are generated from the run's seed and profile
(:mod:`keracheck.inputs`).  A file that cannot be read or compiled, or whose inputs cannot be
loaded, becomes an error entry of the run; the other files are still collected.

A ``.kera`` case also records where its ``export fn`` starts (``Case.source``, from parsing the
file again: :func:`export_positions`) and keeps the source bytes (``Case.text``), from which
:mod:`keracheck.localise` finds the positions of nodes when a divergence is localised.  A
``.keg`` case has neither: a graph carries no source positions.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kera import keg
from kera.files import LoadError, load_graph, read_bytes
from kera.ir import Function, Graph
from keracheck import inputs as inputs_mod
from keracheck import security
from keracheck.options import Options
from keracheck.select import node_ids

Array = np.ndarray[Any, Any]


@dataclass(frozen=True)
class Place:
    """A source position: 1-based line and character column (as diagnostics print them),
    and the pattern of the ``let`` around it, when there is one."""

    line: int
    column: int
    let: str | None = None


@dataclass
class Case:
    """One exported function, its single-export ``.keg`` bytes and its input vectors; for a
    ``.kera`` case, where its ``export fn`` starts and the source bytes."""

    path: str
    function: str
    fn: Function
    keg_bytes: bytes
    inputs: dict[str, Array]
    input_source: str
    source: Place | None = None
    text: bytes | None = None

    @property
    def fingerprint(self) -> str:
        return self.fn.fingerprint

    @property
    def key(self) -> str:
        return f"{self.fingerprint}:{self.path}:{self.function}"


@dataclass
class Collected:
    """The cases found, and the errors met finding them (each with its path and message)."""

    cases: list[Case]
    errors: list[dict[str, str]]


def iter_files(paths: Sequence[str]) -> Iterable[tuple[str, str | None]]:
    """(file, error) for every .kera/.keg file under paths (recursive, sorted)."""
    for p in paths:
        path = Path(p)
        if path.is_dir():
            for f in sorted(path.rglob("*")):
                if f.is_file() and f.suffix in (".kera", ".keg"):
                    yield str(f), None
        elif path.is_file() and path.suffix in (".kera", ".keg"):
            yield str(path), None
        elif path.is_file():
            yield str(path), f"{path}: not a Kera file (expected a .kera source or a .keg graph)"
        elif path.exists():
            yield str(path), f"{path}: not a regular file (a FIFO or device?)"
        else:
            yield str(path), f"{path}: no such file or directory"


#: diagnostics shown per file in a run's report (the rest are counted; kerac check lists all)
MAX_DIAGNOSTICS = 20


def compile_file(path: str) -> Graph:
    """The graph of a .kera or .keg file; raises ValueError with a located message."""
    try:
        return load_graph(path, max_diagnostics=MAX_DIAGNOSTICS)
    except LoadError as e:
        raise ValueError(e.diagnostics.rstrip() or str(e)) from None


def export_positions(text: bytes) -> dict[str, Place]:
    """Where each exported function starts (its first token, ``export``), by name; the first
    definition of a name, as the checker keeps it.  Parsing only: nothing is built."""
    from kera import frontend
    from kera.syntax.diagnostics import LineIndex

    syntax = frontend.parse_source(text)
    index = LineIndex(syntax.tokens.data)
    seen: set[str] = set()
    out: dict[str, Place] = {}
    for fn in syntax.root.fns():
        tok = fn.name()
        if tok is None or tok.text in seen:
            continue
        seen.add(tok.text)
        if fn.is_export():
            out[tok.text] = Place(*index.position(fn.span[0]))
    return out


def source_of(path: str) -> tuple[bytes | None, dict[str, Place]]:
    """The source bytes of a ``.kera`` file and its exports' positions; (None, {}) for a
    ``.keg`` (or a file that can no longer be read: positions are an extra, never an error)."""
    if path.endswith(".keg"):
        return None, {}
    try:
        text = read_bytes(path)
    except LoadError:
        return None, {}
    if text[:4] == keg.MAGIC:
        return None, {}
    return text, export_positions(text)


def companion_npz(path: str) -> str:
    p = Path(path)
    return str(p.with_name(p.name.removesuffix(p.suffix) + ".inputs.npz"))


def make_case(path: str, fn: Function, opts: Options, npz: str | None = None) -> Case:
    keg_bytes = keg.dumps(Graph([fn]))
    given = inputs_mod.load_npz(npz, fn.name, fn) if npz and os.path.exists(npz) else None
    if given is not None:
        inputs_mod.check_budget(fn, next(iter(given.values())).shape[0] if given else 1, str(npz))
        return Case(path, fn.name, fn, keg_bytes, given, "npz")
    inputs_mod.check_budget(fn, opts.n, path)
    return Case(
        path,
        fn.name,
        fn,
        keg_bytes,
        inputs_mod.generate(fn, opts.n, opts.seed, opts.input_profile),
        "generated",
    )


def collect(paths: Sequence[str], opts: Options) -> Collected:
    """The cases under ``paths`` (files, directories, or ``file::function`` node ids), those
    ``opts.keyword`` selects."""
    cases: list[Case] = []
    errors: list[dict[str, str]] = []
    seen: set[str] = set()
    plain, wanted = node_ids(list(paths))
    for path, err in iter_files(plain):
        err = err or _denied(path)
        if err:
            errors.append({"path": path, "message": err})
            continue
        try:
            graph = compile_file(path)
        except ValueError as e:
            errors.append({"path": path, "message": str(e)})
            continue
        only = wanted.get(path)
        text, where = source_of(path)
        for name in sorted((only or set()) - set(graph.functions)):
            have = ", ".join(graph.functions) or "none"
            errors.append(
                {"path": path, "message": f"{path}: no exported function '{name}' (has: {have})"}
            )
        for fn in graph.functions.values():
            if (only is None or fn.name in only) and _selected(opts, f"{path}::{fn.name}"):
                case = _case_or_error(path, fn, opts, errors)
                if case is not None and case.key not in seen:
                    seen.add(case.key)
                    case.source, case.text = where.get(fn.name), text
                    cases.append(case)
    return Collected(cases, errors)


def _denied(path: str) -> str | None:
    """Why ``path`` may not be read (the SecurityManager's denial: a symlink out of the
    granted corpus, a path a restricting policy leaves out), else None."""
    try:
        security.check_read(path)
    except security.CapabilityDenied as e:
        return f"{path}: {e}"
    return None


def _selected(opts: Options, node_id: str) -> bool:
    return opts.keyword is None or opts.keyword(node_id)


def _case_or_error(
    path: str, fn: Function, opts: Options, errors: list[dict[str, str]]
) -> Case | None:
    npz = companion_npz(path)
    denied = _denied(npz) if os.path.exists(npz) else None
    if denied:
        errors.append({"path": npz, "message": denied})
        return None
    try:
        return make_case(path, fn, opts, npz)
    except inputs_mod.InputFileError as e:
        errors.append({"path": path, "message": str(e)})
    except MemoryError:
        errors.append(
            {"path": path, "message": f"{path}: '{fn.name}': out of memory for its inputs"}
        )
    return None
