"""Human summary of a run: a cases x targets table, then every divergence and error.

The report is first built as a list of blocks (a styled line, or a table with a header row),
then written either as plain aligned text (files, pipes, CI logs) or through ``rich`` with
colours (``terminal=True``; the caller decides, e.g. ``sys.stdout.isatty()`` and no
``NO_COLOR``).  Both carry the same words.

Each finding starts a line as compilers and linters print them, ``path:line:col: KC001 ...``
(the case's ``export fn``; a ``.keg`` case has no source, so its lines start ``path: ``),
so editors and terminals jump to it; a localised divergence adds a line naming its first
diverging node and where the source built it.  Each divergence shows its mismatch table:
index, hex bits per target, decimal value per target, sign|exponent|mantissa per target, class,
ulp distance, and each input's element at that index (``name[i, j]=`` when a broadcast input
was read at another index).
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from keracheck.formats import (
    RULES,
    MismatchRow,
    Run,
    case_label,
    column_targets,
    differing_positions,
    first_node_text,
    location,
    mismatch_rows,
    mismatch_summary,
    no_source_note,
    pair_text,
    printable,
    rule_for,
    run_notes,
    summary_line,
    target_cell,
)

# cell or heading word -> rich style (plain output ignores it)
STYLES = {
    "ok": "green",
    "agree": "green",
    "PASSED": "bold green",
    "DIFF": "bold red",
    "ERROR": "bold red",
    "diverge": "bold red",
    "error": "bold red",
    "FAILED": "bold red",
    "baselined": "yellow",
    "skipped": "yellow",
    "unsupported": "dim",
    "unavailable": "dim",
}


@dataclass
class Line:
    text: str
    style: str = ""
    indent: int = 0


@dataclass
class Grid:
    header: list[str]
    rows: list[list[str]] = field(default_factory=list)
    indent: int = 2
    # column groups compared per row; rich highlights the characters where they differ
    groups: list[list[int]] = field(default_factory=list)


Block = Line | Grid


def _header(run: Run) -> list[Block]:
    tool, info = run.get("tool") or {}, run.get("run") or {}
    exit_code = (run.get("summary") or {}).get("exitCode")
    style = "bold green" if exit_code == 0 else "bold red"
    blocks: list[Block] = [
        Line(f"keracheck {tool.get('version', '')}: {summary_line(run)}", style),
        Line(
            f"run: {printable(info.get('command', ''))} | seed {info.get('seed')}, {info.get('inputs')} "
            f"inputs, repeat {info.get('repeat', 1)} | {info.get('startedOn', '')}",
            "dim",
        ),
    ]
    for note in run_notes(run):
        where = f"{printable(note.path)}: " if note.path else ""
        text = note.text.replace(note.path, printable(note.path)) if note.path else note.text
        style = "bold red" if note.level == "error" else "yellow"
        blocks.append(Line(f"{note.level}: {where}{text}", style))
    for target in run.get("targets") or []:
        if not target.get("available", True):
            fix = f" (fix: {target['fix']})" if target.get("fix") else ""
            blocks.append(Line(f"unavailable: {target['id']}: {target.get('reason')}{fix}", "dim"))
    return blocks


def _case_table(run: Run) -> Grid:
    targets = column_targets(run)
    grid = Grid(["case", *targets, "verdict"], indent=0)
    for case in run.get("cases") or []:
        cells = [target_cell(case, t) for t in targets]
        grid.rows.append([case_label(case), *cells, case["verdict"]])
    return grid


def _divergence_blocks(
    divergence: Mapping[str, Any], case: Mapping[str, Any] | None = None
) -> list[Block]:
    """The finding line (``path:line:col: KC001 ...`` when the case is given), the first
    diverging node, and the mismatch table."""
    note = (
        " [baselined: {}]".format(divergence.get("reason") or "")
        if divergence.get("baselined")
        else ""
    )
    text = f"{pair_text(divergence)}, {mismatch_summary(divergence)}{note}"
    if case is None:
        blocks: list[Block] = [Line(text, indent=2)]
    else:
        rule = rule_for(divergence)
        blocks = [Line(f"{location(case)}: {rule} {RULES[rule].name}: {text}")]
        node = first_node_text(case, divergence)
        blocks += [Line(node, indent=2)] if node else []
    rows = mismatch_rows(divergence)
    return [*blocks, _mismatch_grid(rows)] if rows else blocks


def _mismatch_grid(rows: Sequence[MismatchRow]) -> Grid:
    targets = list(rows[0].bits)
    n = len(targets)
    header = [
        "index",
        *targets,
        *(f"{t} value" for t in targets),
        *(f"{t} s|exp|mantissa" for t in targets),
        "class",
        "ulp",
    ]
    with_inputs = any(row.inputs for row in rows)
    header += ["inputs"] if with_inputs else []
    fields = list(range(1 + 2 * n, 1 + 3 * n))
    grid = Grid(header, indent=4, groups=[list(range(1, 1 + n)), fields])
    for row in rows:
        bits = [row.bits.get(t, "") for t in targets]
        values = [row.values.get(t, "") for t in targets]
        fields_ = [row.fields.get(t, "") for t in targets]
        cells = [row.index, *bits, *values, *fields_, row.klass, row.ulp]
        grid.rows.append(cells + ([row.inputs_text] if with_inputs else []))
    return grid


def _case_blocks(case: Mapping[str, Any]) -> list[Block]:
    verdict = case["verdict"]
    if verdict in ("agree", "skipped") and not case.get("divergences"):
        return []
    blocks: list[Block] = [
        Line(""),
        Line(f"{verdict.upper()} {case_label(case)}", STYLES.get(verdict, "bold")),
    ]
    missing = no_source_note(case)
    blocks += [Line(f"({missing})", "dim", indent=2)] if missing else []
    for divergence in case.get("divergences") or []:
        blocks += _divergence_blocks(divergence, case)
    for target, result in sorted(case["targets"].items()):
        if result["status"] == "error":
            message = f"KC003 {RULES['KC003'].name}: {target}: {result.get('message')}"
            blocks.append(Line(f"{location(case)}: {message}", "red"))
    if case.get("repro"):
        blocks.append(Line(f"repro: {case['repro']}", "dim", indent=2))
    return blocks


def divergence_text(divergence: Mapping[str, Any], case: Mapping[str, Any] | None = None) -> str:
    """One divergence as plain text: the mismatch summary line (``path:line:col: KC00x ...``
    and the first diverging node when the case is given) and its table."""
    return render_plain(_divergence_blocks(divergence, case))


def blocks(run: Run) -> list[Block]:
    """The whole report as lines and tables, in order."""
    out: list[Block] = [*_header(run), Line(""), _case_table(run)]
    for case in run.get("cases") or []:
        out += _case_blocks(case)
    return out


def _plain_grid(grid: Grid) -> list[str]:
    widths = [max(len(r[i]) for r in [grid.header, *grid.rows]) for i in range(len(grid.header))]
    rule = ["-" * w for w in widths]
    pad = " " * grid.indent
    return [
        pad + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in [grid.header, rule, *grid.rows]
    ]


def render_plain(items: Sequence[Block]) -> str:
    lines: list[str] = []
    for item in items:
        if isinstance(item, Grid):
            lines += _plain_grid(item)
        else:
            lines += [(" " * item.indent + part).rstrip() for part in _wrapped(item)]
    return "\n".join(lines) + "\n"


def _wrapped(item: Line) -> list[str]:
    """A line's text split at embedded newlines, continuation lines indented two more."""
    first, *rest = item.text.split("\n")
    return [first, *("  " + part for part in rest)]


def _rich_row(grid: Grid, row: list[str]) -> list[Text]:
    cells = [Text(cell, style=STYLES.get(cell, "")) for cell in row]
    for group in grid.groups:
        for position in differing_positions([row[i] for i in group]):
            for i in group:
                cells[i].stylize("bold red", position, position + 1)
    return cells


def _rich_grid(grid: Grid) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold", padding=(0, 1))
    for name in grid.header:
        table.add_column(name, overflow="fold")
    for row in grid.rows:
        table.add_row(*_rich_row(grid, row))
    return table


def render_rich(items: Sequence[Block], width: int) -> str:
    buffer = io.StringIO()
    console = Console(  # rich honours width under TERM=dumb only when height is given too
        file=buffer,
        force_terminal=True,
        width=width,
        height=100,
        color_system="standard",
        highlight=False,
    )
    for item in items:
        if isinstance(item, Grid):
            console.print(Padding(_rich_grid(item), (0, 0, 0, item.indent)))
        else:
            text = "\n".join(" " * item.indent + part for part in _wrapped(item))
            console.print(Text(text, style=item.style))
    return buffer.getvalue()


def render(run: Run, *, terminal: bool = False, width: int = 120) -> str:
    """Plain text, or rich-coloured text (ANSI escapes) when ``terminal`` is true."""
    items = blocks(run)
    return render_rich(items, width) if terminal else render_plain(items)
