"""GitHub Actions output: ``::error`` annotations plus a Markdown job summary.

``render`` returns the lines to print on stdout:

* at most :data:`MAX_ANNOTATIONS` (10, GitHub's per-step limit for errors) lines
  ``::error file=<path>,line=<l>,col=<c>,title=<rule and targets>::<message>`` (line and col:
  the case's ``export fn``; none for a ``.keg`` case; the message names the first diverging
  node and its source position when the divergence was localised): first the run's own
  failure and input errors, then one per finding that is not baselined; stale baseline entries
  become (at most 10) ``::warning`` lines.  Property values escape ``% \\r \\n : ,`` as
  ``%25 %0D %0A %3A %2C``; the message escapes ``% \\r \\n`` (the rules of actions/toolkit's
  ``issueCommand``);
* a plain line saying how many findings did not fit, then the one-line run summary.

The full Markdown report (counts, the cases x targets table, every finding, every mismatch
table) is appended to the file named by ``$GITHUB_STEP_SUMMARY`` when that variable is set, or
to ``step_summary`` when given.  GitHub shows at most 1 MiB per step; a longer summary is cut
at a case boundary with a note.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from keracheck.formats import (
    Finding,
    Note,
    Run,
    case_label,
    column_targets,
    findings,
    first_node_text,
    location,
    mismatch_rows,
    mismatch_summary,
    pair_text,
    run_notes,
    source,
    summary_line,
    target_cell,
)

MAX_ANNOTATIONS = 10
SUMMARY_LIMIT = 1024 * 1024 - 4096  # GitHub's 1 MiB cap, less room for the truncation note
_DATA_ESCAPES = {"%": "%25", "\r": "%0D", "\n": "%0A"}
_PROPERTY_ESCAPES = _DATA_ESCAPES | {":": "%3A", ",": "%2C"}


class _Env(enum.Enum):
    FROM_ENV = "GITHUB_STEP_SUMMARY"


FROM_ENV = _Env.FROM_ENV


def _escape(text: str, table: Mapping[str, str]) -> str:
    return "".join(table.get(char, char) for char in text)


def escape_data(text: str) -> str:
    """Escape an annotation message (``% \\r \\n``)."""
    return _escape(text, _DATA_ESCAPES)


def escape_property(text: str) -> str:
    """Escape an annotation property value (``% \\r \\n : ,``)."""
    return _escape(text, _PROPERTY_ESCAPES)


def annotation(finding: Finding) -> str:
    """One ``::error`` workflow command for a finding."""
    where = source(finding.case)
    if where is None:
        place = f"file={escape_property(str(finding.case['path']))}"
    else:
        path, line, column = where
        place = f"file={escape_property(path)},line={line},col={column}"
    title = escape_property(finding.title)
    return f"::error {place},title={title}::{escape_data(finding.message)}"


def note_annotation(note: Note) -> str:
    """A ``::error`` or ``::warning`` command for a run note (file only when it names one)."""
    where = f"file={escape_property(note.path)}," if note.path else ""
    title = escape_property("keracheck " + note.text.split(":")[0])
    return f"::{note.level} {where}title={title}::{escape_data(note.text)}"


def _cell(value: Any) -> str:
    """A Markdown table cell: pipes escaped, newlines as <br>, HTML specials neutralised."""
    text = str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("|", "\\|").replace("\r", "").replace("\n", "<br>")


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(_cell(h) for h in header) + " |"]
    lines.append("|" + "---|" * len(header))
    return lines + ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]


def _cases_table(run: Run) -> list[str]:
    targets = column_targets(run)
    rows = [
        [case_label(c), *(target_cell(c, t) for t in targets), c["verdict"]]
        for c in run.get("cases") or []
    ]
    return _table(["case", *targets, "verdict"], rows)


def _findings_table(found: list[Finding]) -> list[str]:
    rows = [
        [
            f.rule,
            case_label(f.case),
            " vs ".join(f.targets),
            "yes" if f.baselined else "",
            f.message,
        ]
        for f in found
    ]
    return _table(["rule", "case", "targets", "baselined", "details"], rows)


def _code(values: Mapping[str, str], keys: list[str]) -> list[str]:
    return [f"`{values[k]}`" if values[k] else "" for k in keys]


def _divergence_section(case: Mapping[str, Any], divergence: Mapping[str, Any]) -> list[str]:
    rows = mismatch_rows(divergence)
    summary = f"{pair_text(divergence)}, {mismatch_summary(divergence)}"
    head = [_cell(f"**{case_label(case)}** (`{location(case)}`): {summary}"), ""]
    node = first_node_text(case, divergence)
    head += [_cell(node), ""] if node else []
    if not rows:
        return head
    targets = list(rows[0].bits)
    header = [
        "index",
        *targets,
        *(f"{t} value" for t in targets),
        *(f"{t} s|exp|mantissa" for t in targets),
        "class",
        "ulp",
        "inputs",
    ]
    table_rows = [
        [
            r.index,
            *(f"`{r.bits[t]}`" for t in targets),
            *(r.values.get(t, "") for t in targets),
            *_code(r.fields, targets),
            r.klass,
            r.ulp,
            r.inputs_text,
        ]
        for r in rows
    ]
    return [*head, *_table(header, table_rows), ""]


def markdown(run: Run) -> str:
    """The full job summary in GitHub-flavoured Markdown."""
    found = findings(run)
    version = (run.get("tool") or {}).get("version", "")
    parts = [f"## keracheck {version}", "", summary_line(run), ""]
    parts += [
        f"- **{n.level}**: {_cell(n.path + ': ' if n.path else '')}{_cell(n.text)}"
        for n in run_notes(run)
    ]
    parts += ["", *_cases_table(run), ""]
    if found:
        parts += ["### Findings", "", *_findings_table(found), ""]
    sections: list[str] = []
    for case in run.get("cases") or []:
        for divergence in case.get("divergences") or []:
            sections += _divergence_section(case, divergence)
    if sections:
        parts += ["### Mismatches", "", *sections]
    return _truncate("\n".join(parts) + "\n")


def _truncate(text: str) -> str:
    data = text.encode()
    if len(data) <= SUMMARY_LIMIT:
        return text
    cut = data[:SUMMARY_LIMIT].decode(errors="ignore")
    cut = cut[: cut.rfind("\n**")] if "\n**" in cut else cut
    return cut + "\n\n_Summary cut at GitHub's 1 MiB limit; the full report is the artifact._\n"


def _summary_path(step_summary: str | os.PathLike[str] | _Env | None) -> Path | None:
    if isinstance(step_summary, _Env):
        value = os.environ.get(step_summary.value)
        return Path(value) if value else None
    return None if step_summary is None else Path(step_summary)


def render(
    run: Run,
    *,
    step_summary: str | os.PathLike[str] | _Env | None = FROM_ENV,
    limit: int = MAX_ANNOTATIONS,
) -> str:
    """Annotation lines for stdout; also appends :func:`markdown` to the step summary file."""
    path = _summary_path(step_summary)
    if path is not None:
        with path.open("a", encoding="utf-8") as handle:
            handle.write(markdown(run))
    notes = run_notes(run)
    errors = [note_annotation(n) for n in notes if n.level == "error"]
    errors += [annotation(f) for f in findings(run) if not f.baselined]
    warnings = [note_annotation(n) for n in notes if n.level == "warning"]
    lines = errors[:limit] + warnings[:limit]
    if len(errors) > limit:
        lines.append(f"keracheck: {len(errors) - limit} more errors; see the job summary")
    lines.append(f"keracheck: {summary_line(run)}")
    return "\n".join(lines) + "\n"
