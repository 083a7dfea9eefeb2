"""Inline SVG pictures for the HTML report: pure functions from numbers to SVG text.

* :func:`heatmap`: where in an output's element grid the bits differ (rows x columns; a
  reduction that goes wrong shows as whole rows, a bad lane as a column);
* :func:`histogram`: how many mismatches fall in each class or range of ulp distances;
* :func:`bit_strip`: per bit of the element (sign | exponent | mantissa), how many mismatching
  elements differ there -- rounding noise sits in the low mantissa, a sign or NaN-payload
  difference at the top.

Each returns one ``<svg>`` element with explicit ``width``/``height``, ``role="img"``, an
``aria-label`` and a ``<title>``; every piece of text in it is escaped.  There is no
``xmlns`` (HTML parses inline SVG without one, and the page must name no URL), no script, no
font and no reference outside the element, so the report stays one self-contained file under
its Content-Security-Policy.  Hovering a cell or a bar shows its exact numbers (``<title>``
tooltips, which need no script).
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import Any

FONT = 'font-family="system-ui,sans-serif" font-size="10"'
AGREE = "#e9ecf0"  # cells where nothing differs
INK = "#3c434b"
# shades from "a few differ" to "all differ": light to dark red
LIGHT, DARK = (252, 205, 190), (165, 15, 21)

HEAT_WIDTH, HEAT_HEIGHT = 640, 384  # the largest heatmap plot area, in px
CELL_MIN, CELL_MAX = 3, 28  # px per heatmap cell along either axis
BAR_WIDTH = 320  # the longest histogram bar, px
BAR_ROW = 18  # px per histogram row
STRIP_WIDTH = 704  # the widest bit strip, px


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def shade(fraction: float) -> str:
    """The fill for a share of differing elements in (0, 1]: light red to dark red; a share of
    0 is :data:`AGREE`.  The lightest shade is kept well visible against AGREE."""
    if fraction <= 0:
        return AGREE
    t = 0.2 + 0.8 * min(1.0, fraction)
    rgb = (round(lo + (hi - lo) * t) for lo, hi in zip(LIGHT, DARK, strict=True))
    return "#" + "".join(f"{c:02x}" for c in rgb)


def _svg(width: float, height: float, label: str, body: str) -> str:
    return (
        f'<svg class="pic" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-label="{esc(label)}">'
        f"<title>{esc(label)}</title>{body}</svg>"
    )


def _rect(x: float, y: float, w: float, h: float, fill: str, tip: str = "") -> str:
    title = f"<title>{esc(tip)}</title>" if tip else ""
    close = f">{title}</rect>" if title else "/>"
    return f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" fill="{fill}"{close}'


def _text(x: float, y: float, text: str, anchor: str = "start", extra: str = "") -> str:
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" fill="{INK}" {FONT}{extra}>'
        f"{esc(text)}</text>"
    )


def _span(lo: int, hi: int) -> str:
    return str(lo) if lo == hi else f"{lo}\u2013{hi}"


# ------------------------------------------------------------------------------------ heatmap


def unravel(flat: int, shape: Sequence[int]) -> list[int]:
    """The multi-index of a C-order flat index (numpy's ``unravel_index``, for one index)."""
    index = []
    for n in reversed(shape):
        flat, i = divmod(flat, max(1, n))
        index.append(i)
    return index[::-1]


def _ticks(cells: int, px: float, spacing: float) -> list[int]:
    """Cell numbers to label along an axis: 0, every ``step`` cells, and the last one."""
    step = max(1, math.ceil(spacing / px))
    for nice in (1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000):
        if nice >= step:
            step = nice
            break
    marks = list(range(0, cells, step))
    if cells - 1 - marks[-1] >= step / 2:
        marks.append(cells - 1)
    elif marks[-1] != cells - 1 and len(marks) > 1:
        marks[-1] = cells - 1
    return marks


class Grid:
    """A heatmap's geometry: grid rows/columns, binning, and the cells' pixel sizes."""

    def __init__(
        self, counts: Sequence[Sequence[int]], grid: Sequence[int], binning: Sequence[int]
    ):
        self.rows, self.cols = (int(n) for n in grid)
        self.bin_rows, self.bin_cols = (int(n) for n in binning)
        if self.rows < 1 or self.cols < 1 or self.bin_rows < 1 or self.bin_cols < 1:
            raise ValueError(f"heatmap grid {list(grid)} / bin {list(binning)} must be positive")
        self.n_rows, self.n_cols = -(-self.rows // self.bin_rows), -(-self.cols // self.bin_cols)
        if len(counts) != self.n_rows or any(len(row) != self.n_cols for row in counts):
            raise ValueError(
                f"heatmap counts are not {self.n_rows} x {self.n_cols} cells "
                f"(grid {self.rows} x {self.cols} in bins of {self.bin_rows} x {self.bin_cols})"
            )
        self.w = min(CELL_MAX, max(CELL_MIN, HEAT_WIDTH / self.n_cols))
        self.h = min(CELL_MAX, max(CELL_MIN, HEAT_HEIGHT / self.n_rows))

    @property
    def binned(self) -> bool:
        return self.bin_rows > 1 or self.bin_cols > 1

    def row_span(self, i: int) -> tuple[int, int]:
        return i * self.bin_rows, min(self.rows, (i + 1) * self.bin_rows) - 1

    def col_span(self, j: int) -> tuple[int, int]:
        return j * self.bin_cols, min(self.cols, (j + 1) * self.bin_cols) - 1

    def capacity(self, i: int, j: int) -> int:
        (r0, r1), (c0, c1) = self.row_span(i), self.col_span(j)
        return (r1 - r0 + 1) * (c1 - c0 + 1)


def _runs(row: Sequence[int], grid: Grid, i: int) -> list[tuple[int, int, int, int]]:
    """Maximal runs of equal cells in one row of cells: (first, last, count, capacity)."""
    runs: list[tuple[int, int, int, int]] = []
    for j, n in enumerate(row):
        cap = grid.capacity(i, j)
        if runs and runs[-1][1] == j - 1 and runs[-1][2:] == (n, cap):
            runs[-1] = (runs[-1][0], j, n, cap)
        else:
            runs.append((j, j, n, cap))
    return [r for r in runs if r[2] > 0]


def _cell_tip(grid: Grid, i: int, run: tuple[int, int, int, int], shape: Sequence[int]) -> str:
    first, last, count, cap = run
    rows, cols = _span(*grid.row_span(i)), _span(grid.col_span(first)[0], grid.col_span(last)[1])
    if grid.binned:
        each = " each" if first != last else ""
        return f"rows {rows}, columns {cols}: {count} of {cap} elements differ{each}"
    if first == last and shape:
        index = unravel(grid.row_span(i)[0] * grid.cols + first, shape)
        return f"element {index} (row {rows}, column {cols}) differs"
    return f"row {rows}, columns {cols}: every element differs"


def heatmap(
    counts: Sequence[Sequence[int]],
    grid: Sequence[int],
    binning: Sequence[int] = (1, 1),
    shape: Sequence[int] = (),
    label: str = "mismatch heatmap",
) -> str:
    """Cells of a ``rows x columns`` element grid (``grid``), each ``binning`` = (rows,
    columns) of elements, shaded by the share of their elements that differ; ``counts`` holds
    the mismatches per cell.  ``shape``: the output's shape, for element indices in tooltips.
    Raises ValueError when ``counts`` does not fit ``grid``/``binning``."""
    g = Grid(counts, grid, binning)
    left = 10 + 6.2 * len(str(g.rows - 1))
    top, plot_w, plot_h = 14.0, g.n_cols * g.w, g.n_rows * g.h
    parts = [_rect(left, top, plot_w, plot_h, AGREE)]
    for i, row in enumerate(counts):
        for run in _runs(row, g, i):
            x, w = left + run[0] * g.w, (run[1] - run[0] + 1) * g.w
            parts.append(
                _rect(x, top + i * g.h, w, g.h, shade(run[2] / run[3]), _cell_tip(g, i, run, shape))
            )
    parts += _separators(g, left, top)
    parts += _axis_labels(g, left, top)
    legend_y = top + plot_h + 16
    parts.append(_heat_legend(left, legend_y, g.binned))
    width = max(left + plot_w + 8, left + 300)
    return _svg(width, legend_y + 8, label, "".join(parts))


def _separators(g: Grid, left: float, top: float) -> list[str]:
    """White lines between cells when cells are large enough to tell apart."""
    lines = []
    if g.w >= 8:
        lines += [
            f"M{left + j * g.w:.1f} {top:.1f}v{g.n_rows * g.h:.1f}" for j in range(1, g.n_cols)
        ]
    if g.h >= 8:
        lines += [
            f"M{left:.1f} {top + i * g.h:.1f}h{g.n_cols * g.w:.1f}" for i in range(1, g.n_rows)
        ]
    return [f'<path d="{"".join(lines)}" stroke="#fff" stroke-width="1"/>'] if lines else []


def _axis_labels(g: Grid, left: float, top: float) -> list[str]:
    out = []
    for i in _ticks(g.n_rows, g.h, 14) if g.n_rows > 1 else []:
        y = top + (i + 0.5) * g.h + 3.5
        out.append(_text(left - 4, y, str(g.row_span(i)[0]), "end"))
    for j in _ticks(g.n_cols, g.w, 24):
        out.append(_text(left + (j + 0.5) * g.w, top - 4, str(g.col_span(j)[0]), "middle"))
    return out


def _heat_legend(x: float, y: float, binned: bool) -> str:
    if not binned:
        return (
            _rect(x, y - 8, 10, 10, shade(1.0))
            + _text(x + 14, y, "differs")
            + _rect(x + 64, y - 8, 10, 10, AGREE)
            + _text(x + 78, y, "agrees")
        )
    shares = (0.0, 0.01, 1 / 3, 2 / 3, 1.0)  # none, a few, ..., all of the cell
    swatches = "".join(_rect(x + 10 * k, y - 8, 10, 10, shade(s)) for k, s in enumerate(shares))
    text = "share of a cell's elements that differ: none, a few \u2026 all"
    return swatches + _text(x + 10 * len(shares) + 6, y, text)


# ---------------------------------------------------------------------------------- histogram


def histogram(bars: Sequence[tuple[str, int, str]], label: str = "mismatch classes") -> str:
    """Horizontal bars, one per ``(label, count, colour)``, longest = largest count; the count
    is written after each bar, so a bar of 1 next to one of 10,000 still reads exactly."""
    if not bars:
        raise ValueError("a histogram needs at least one bar")
    most = max(1, max(n for _, n, _ in bars))
    left = 8 + 6.2 * max(len(name) for name, _, _ in bars)
    parts = []
    for k, (name, n, colour) in enumerate(bars):
        y = 4 + k * BAR_ROW
        w = 0 if n <= 0 else max(2.0, BAR_WIDTH * n / most)
        parts.append(_text(left - 6, y + 12, name, "end"))
        parts.append(_rect(left, y + 2, w, BAR_ROW - 5, colour, f"{name}: {n:,}"))
        parts.append(_text(left + w + 4, y + 12, f"{n:,}"))
    width = left + BAR_WIDTH + 8 + 7 * len(f"{most:,}")
    return _svg(width, 8 + len(bars) * BAR_ROW, label, "".join(parts))


# ---------------------------------------------------------------------------------- bit strip

FIELD_FILLS = ("#dbe4f3", "#e3efdc", "#f4ead6", "#ece0f0")  # one band colour per field


def bit_strip(
    bit_counts: Sequence[int],
    fields: Sequence[tuple[str, int]],
    total: int,
    label: str = "differing bits",
) -> str:
    """One column per bit, most significant first, grouped into ``fields`` (name, width)
    e.g. sign | exponent | mantissa; each column's bar height and shade give how many of the
    ``total`` mismatching elements differ in that bit.  ValueError when the widths do not add
    up to ``len(bit_counts)``."""
    nbits = len(bit_counts)
    if nbits == 0 or sum(w for _, w in fields) != nbits:
        raise ValueError(f"bit fields {list(fields)} do not cover {nbits} bits")
    cw = min(24.0, max(8.0, STRIP_WIDTH / nbits))
    left, bar_h, strip_y = 4.0, 30.0, 36.0
    parts = []
    for k, n in enumerate(bit_counts):
        x, share = left + k * cw, n / total if total else 0.0
        tip = f"bit {nbits - 1 - k} ({field_of(fields, k)}): differs in {n:,} of {total:,}"
        if n:
            h = max(2.0, bar_h * share)
            parts.append(_rect(x + 1, strip_y - 2 - h, cw - 2, h, shade(1.0)))
        parts.append(_rect(x, strip_y, cw, 18, shade(share), tip))
    parts.append(
        f'<path d="{"".join(f"M{left + k * cw:.1f} {strip_y:.1f}v18" for k in range(1, nbits))}"'
        ' stroke="#fff" stroke-width="1"/>'
    )
    parts += _field_bands(fields, left, cw, strip_y + 18, nbits)
    return _svg(left + nbits * cw + 4, strip_y + 50, label, "".join(parts))


def field_of(fields: Sequence[tuple[str, int]], k: int) -> str:
    """``exponent bit 3``: the field of column ``k`` (0 = most significant) and the bit's
    place within it (0 = the field's least significant)."""
    start = 0
    for name, width in fields:
        if k < start + width:
            return name if width == 1 else f"{name} bit {start + width - 1 - k}"
        start += width
    raise ValueError(f"bit column {k} is outside the fields")


def _field_bands(
    fields: Sequence[tuple[str, int]], left: float, cw: float, y: float, nbits: int
) -> list[str]:
    """Under the strip: a coloured band per field with its name, then the number of each
    field's most significant bit (where it does not crowd the previous one) and bit 0."""
    out, start, last_label = [], 0, -100.0
    for f, (name, width) in enumerate(fields):
        x, w = left + start * cw, width * cw
        out.append(_rect(x, y + 2, w, 14, FIELD_FILLS[f % len(FIELD_FILLS)]))
        text = name if 6.2 * len(name) + 4 <= w else name[0]
        out.append(_text(x + w / 2, y + 13, text, "middle"))
        if x + cw / 2 - last_label >= 18:
            out.append(_text(x + cw / 2, y + 28, str(nbits - 1 - start), "middle"))
            last_label = x + cw / 2
        if f:
            out.append(f'<path d="M{x:.1f} {y - 20:.1f}v36" stroke="{INK}" stroke-width="1"/>')
        start += width
    out.append(_text(left + (nbits - 0.5) * cw, y + 28, "0", "middle"))
    return out
