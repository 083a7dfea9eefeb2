"""Reproducer files: ``<fingerprint>.kera`` and ``<fingerprint>.inputs.npz`` in the out folder.

``<fingerprint>`` is the reduced function's fingerprint (64 hex digits).  The ``.kera`` file is
the function printed by ``to_kera`` and exported as ``fuzz_<first 12 digits>``, after a comment
header of ``// key: value`` lines::

    // keracheck fuzz reproducer
    // signature: ref|cpu min nan-vs-value
    // targets: ref, cpu, wasm (cpu differs from ref)
    // found: seed 0, example 12 (3.1 s), 5 hits; shrunk from 14 to 1 ops in 2.0 s
    // inputs: <fingerprint>.inputs.npz, 1 row; output 0 [0]: ref 0x7fc00000, cpu 0x3f800000
    // reproduce: keracheck run corpora/regressions/<fingerprint>.kera --targets ref,cpu

The ``.inputs.npz`` holds one array ``fuzz_<12>.<param>`` of shape ``(rows, *param shape)`` per
parameter, which ``keracheck run`` uses instead of generated inputs (none is written for a
function without parameters).  When the printed source
does not compile back to the same fingerprint (a graph Kera source cannot spell), the graph is
saved as ``<fingerprint>.keg`` instead and the header goes only to the JSON output.

A second signature that reduces to the same graph is merged into the existing files: its
``signature:`` line is added and its input rows are appended (rows already present are kept
once).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kera import keg
from kera.files import write_atomic
from kera.ir import Function, Graph
from keracheck import inputs as inputs_mod
from keracheck.fuzz import to_kera
from keracheck.fuzz.oracle import Divergence

Array = np.ndarray[Any, Any]


@dataclass
class Written:
    path: str
    inputs: str | None  # None: the function has no parameters
    fingerprint: str
    rows: int
    source: bool  # False: saved as .keg (no source form)


def function_name(fn: Function) -> str:
    return f"fuzz_{fn.fingerprint[:12]}"


def error_summary(message: str) -> str:
    """The most telling line of an error: its last line (a cause), without a "1: " index."""
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    if not lines:
        return "no message"
    last = re.sub(r"^\d+:\s*", "", lines[-1])
    return (last if last == lines[0] else f"{lines[0]} ... {last}")[:200]


def example_text(div: Divergence) -> str:
    """One differing element of the culprit: where, and the bits each side gave."""
    d = div.detail
    if "message" in d:
        return f"{div.signature.target} fails: {error_summary(str(d['message']))}"
    for ex in d.get("examples", [])[:1]:
        bits = ", ".join(f"{k} {v}" for k, v in ex["bits"].items())
        return f"{ex['class']} at {ex['index']}: {bits}"
    return ""


def _signatures(path: Path) -> list[str]:
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    return [ln[3:] for ln in lines if ln.startswith("// signature:")]


def _merged_rows(path: Path, name: str, fn: Function, new: dict[str, Array]) -> dict[str, Array]:
    """Existing rows of the npz at path, then the new rows not already there."""
    if not path.exists():
        return new
    try:
        old = inputs_mod.load_npz(str(path), name, fn)
    except inputs_mod.InputFileError:
        old = None
    if not old:
        return new
    have = {_row_key(old, r) for r in range(_rows(old))}
    keep = [r for r in range(_rows(new)) if _row_key(new, r) not in have]
    return {k: np.concatenate([old[k], new[k][keep]]) for k in new}


def _rows(arrays: dict[str, Array]) -> int:
    return int(next(iter(arrays.values())).shape[0]) if arrays else 1


def _row_key(arrays: dict[str, Array], r: int) -> bytes:
    return b"".join(arrays[k][r].tobytes() for k in sorted(arrays))


def write(out: Path, div: Divergence, header: Sequence[str]) -> Written:
    """Write (or merge into) the reproducer of div; header lines go after the first line."""
    fn = div.fn
    fp = fn.fingerprint
    name = function_name(fn)
    out.mkdir(parents=True, exist_ok=True)
    kera_path, npz_path = out / f"{fp}.kera", out / f"{fp}.inputs.npz"
    sig_line = f"signature: {div.signature}"
    sigs = [s for s in _signatures(kera_path) if s != sig_line]
    lines = ["keracheck fuzz reproducer", *sigs, sig_line, *header]
    try:
        text = to_kera.render(fn, name, lines)
        problem = to_kera.roundtrip(fn, text)
    except to_kera.PrintError as e:
        problem = str(e)
    arrays = _merged_rows(npz_path, name, fn, dict(div.case.inputs))
    if problem is None:
        write_atomic(kera_path, text)
        path = kera_path
    else:
        path = out / f"{fp}.keg"
        keg.dump(Graph([Function(name, fn.params, fn.results)]), str(path))
    if arrays:  # a function without parameters runs once and needs no inputs
        inputs_mod.save_npz(str(npz_path), {f"{name}.{k}": v for k, v in arrays.items()})
    where = str(npz_path) if arrays else None
    return Written(str(path), where, fp, _rows(arrays), problem is None)
