"""Where in an output the bits differ: the ``elements`` record of a divergence.

:mod:`keracheck.compare` keeps the counts, the classes and the first
:data:`~keracheck.compare.MAX_EXAMPLES` mismatches of a divergence, which is what the text
formats print.  The HTML report also draws every divergence (a heatmap over the element grid
and a per-bit strip) and lists more of its mismatches, so the document adds, per element-wise
divergence, a bounded summary of all of them::

    "elements": {
      "dtype": "f32", "shape": [64, 4, 6],
      "grid": [256, 6],        # the 2-D view: rows = every axis but the last, flattened
                               # in C order; columns = the last axis (rank 1: one row)
      "bin": [4, 1],           # grid rows and columns per heatmap cell (1 = not binned)
      "counts": [[0, 2, ...]], # mismatching elements per cell, at most MAP_ROWS x MAP_COLS
      "bitCounts": [3, 0, ...],# per bit, most significant first: mismatches differing there
      "names": ["ref", "cpu"], # whose bits ``list`` holds (the names of ``examples`` bits)
      "list": [[17, "ulp(1)", "0x3f800000", "0x3f800001"], ...],
      "listCap": 256           # ``list``: the first LIST_CAP mismatches in C order
    }

Its size is bounded whatever the output's size (at most 8,192 cells and 256 rows), so a run of
large outputs that differ everywhere still gives a JSON document of reasonable size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from kera.dtypes import from_numpy
from keracheck import compare

Array = np.ndarray[Any, Any]

MAP_ROWS = 128  # heatmap cells down: taller grids are binned (the input vectors x rows)
MAP_COLS = 64  # heatmap cells across: wider grids are binned
LIST_CAP = 256  # mismatches listed per divergence (the HTML report's full table)


def grid_shape(shape: Sequence[int]) -> tuple[int, int]:
    """The 2-D view of an output: ``(rows, columns)``; the last axis is the columns."""
    if not shape:
        return 1, 1
    return math.prod(shape[:-1]), int(shape[-1])


def _counts(flat: Array, rows: int, cols: int) -> tuple[tuple[int, int], list[list[int]]]:
    """Mismatches per heatmap cell, binning so there are at most MAP_ROWS x MAP_COLS cells."""
    bin_rows, bin_cols = -(-rows // MAP_ROWS), -(-cols // MAP_COLS)
    cell_rows, cell_cols = -(-rows // bin_rows), -(-cols // bin_cols)
    r, c = np.divmod(flat, cols)
    cells = np.bincount(
        (r // bin_rows) * cell_cols + c // bin_cols, minlength=cell_rows * cell_cols
    )
    return (bin_rows, bin_cols), cells.reshape(cell_rows, cell_cols).tolist()


def _bit_counts(xor: Array) -> list[int]:
    """Per bit position, most significant first: how many of the patterns have it set."""
    nbytes = xor.dtype.itemsize
    big_endian = xor.astype(f">u{nbytes}").view(np.uint8).reshape(-1, nbytes)
    return [int(n) for n in np.unpackbits(big_endian, axis=1).sum(axis=0, dtype=np.int64)]


def element_detail(a: Array, b: Array, names: tuple[str, str]) -> dict[str, Any] | None:
    """The ``elements`` record of two same-shape outputs (None when they agree bit for bit)."""
    nbytes = a.dtype.itemsize
    ua = np.ascontiguousarray(a).view(f"<u{nbytes}").reshape(-1)
    ub = np.ascontiguousarray(b).view(f"<u{nbytes}").reshape(-1)
    xor = ua ^ ub
    flat = np.flatnonzero(xor)
    if len(flat) == 0:
        return None
    rows, cols = grid_shape(a.shape)
    binning, counts = _counts(flat, rows, cols)
    is_float = a.dtype.kind == "f"
    listed = []
    for i in flat[:LIST_CAP].tolist():
        x, y = int(ua[i]), int(ub[i])
        klass = compare.classify_float(x, y, nbytes) if is_float else "int"
        listed.append([i, klass, f"0x{x:0{2 * nbytes}x}", f"0x{y:0{2 * nbytes}x}"])
    return {
        "dtype": from_numpy(a.dtype).value,
        "shape": [int(n) for n in a.shape],
        "grid": [rows, cols],
        "bin": list(binning),
        "counts": counts,
        "bitCounts": _bit_counts(xor[flat]),
        "names": list(names),
        "list": listed,
        "listCap": LIST_CAP,
    }


def divergences(
    a: Sequence[Array], b: Sequence[Array], names: tuple[str, str], pair: tuple[str, str], kind: str
) -> list[dict[str, Any]]:
    """:func:`keracheck.compare.divergences` with each element-wise record's ``elements``."""
    found = compare.divergences(a, b, names, pair, kind)
    for record in found:
        x, y = a[record["output"]], b[record["output"]]
        if x.shape == y.shape and x.dtype == y.dtype:
            record["elements"] = element_detail(x, y, names)
    return found
