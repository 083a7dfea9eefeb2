"""One self-contained HTML page for auditors: no scripts, no fonts, no network.

Layout, top to bottom:

1. signature banner, saying only what is true of this page: ``verified`` (green: the signed
   report was checked, with the key id, the number of envelopes and any failures), ``signed``
   (blue: a signed report was written for this run but this page is not it and checked
   nothing), ``unsigned`` (grey) or ``failed`` (red), and the command that verifies the signed
   report offline;
2. the run's own failure, input errors and stale baseline entries, the summary counts, the run
   (command, seed, inputs, times) and every target with its toolchain versions or the reason
   it was unavailable;
3. an index of the cases that need attention, worst first (unbaselined divergence, error,
   baselined), each linking to its section; the agreeing and the skipped cases follow as compact
   tables folded in ``<details>``, so a page of 1,000 cases stays readable;
4. one section per diverging or failing case: the function's source (read from the file the
   case names when the page is rendered; the ``export fn`` line and the first diverging node's
   line marked), fingerprint and ``.keg`` digests, per-target status and output digests, then
   every divergence with its pictures (:mod:`keracheck.formats.svg`: a heatmap of where in the
   output the bits differ, a histogram of classes and ulp distances, a strip of which bits
   differ), its first mismatches (index, hex bits and value per target, sign|exponent|mantissa
   with the differing bits highlighted, class, ulp), the rest of the kept mismatches in a
   folded table, and the repro command.

Everything user-supplied is escaped; CSS and SVG are inline; a Content-Security-Policy meta tag
forbids any load, so the file shows the same offline, months later.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from keracheck.formats import (
    ULP_DETAIL,
    ULP_RANGES,
    Run,
    blamed,
    case_label,
    classes_text,
    column_targets,
    differing_positions,
    mismatch_rows,
    mismatch_summary,
    pair_text,
    run_notes,
    summary_line,
    svg,
    target_cell,
)

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1180px;padding:0 16px 40px;
color:#1d232a;background:#fff}
code,.mono,pre{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12.5px}
.sig{margin:0 -16px 16px;padding:12px 16px;font-weight:600;border-bottom:2px solid}
.sig-verified{background:#e6f6ea;border-color:#2e8b47;color:#17592b}
.sig-signed{background:#e8f0fb;border-color:#3b6fb6;color:#1f4575}
.sig-unsigned{background:#f1f2f4;border-color:#9aa1a9;color:#3c434b}
.sig-failed{background:#fdecea;border-color:#c62828;color:#8e1b1b}
.sig p,.sig ul{margin:4px 0 0;font-weight:400}
table{border-collapse:collapse;margin:8px 0 16px}
th,td{border:1px solid #d5d9de;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f5f6f8}
.ok,.agree{color:#17692f}.DIFF,.ERROR,.diverge,.error{color:#b3261e;font-weight:700}
.baselined,.skipped{color:#8a6100}.unsupported,.unavailable,.na{color:#6b7280}
section{border-top:1px solid #d5d9de;margin-top:24px}
.d{background:#ffd5d2;color:#8e1b1b;font-weight:700}
.counts td{text-align:right;min-width:64px}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px}dt{color:#555}dd{margin:0}
details{margin:8px 0 16px}summary{cursor:pointer;font-weight:600}
.compact td{padding:1px 6px}
.top{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);gap:0 24px}
.src figcaption{color:#555;margin-bottom:2px}
.src pre{margin:0;padding:6px 0;background:#f7f8fa;border:1px solid #d5d9de;overflow-x:auto}
.src pre>span{display:block;padding:0 8px;white-space:pre}
dd code{word-break:break-all}
.src .hl{background:#fff3c4}.src .ln{color:#8a9099;user-select:none}
.figs{display:flex;flex-wrap:wrap;gap:12px 28px;align-items:flex-start;margin:8px 0}
figure{margin:0}figcaption{font-size:12px;color:#555;max-width:640px}
.scroll{overflow-x:auto}
td:first-child{white-space:nowrap}
.node{margin:4px 0}
"""
CSP = "default-src 'none'; style-src 'unsafe-inline'"
SIGNATURE_WORDS = {
    "verified": "Signature verified",
    "signed": "Signed report (not verified on this page)",
    "unsigned": "Unsigned report",
    "failed": "Signature verification FAILED",
}
_SEVERITY = {"DIFF": 0, "ERROR": 1, "skipped": 2, "baselined": 3}
SOURCE_LINES = 60  # most lines of a function's source shown
SOURCE_BYTES = 4 << 20  # a larger "source file" is not read
COMMENT_LINES = 8  # comment lines shown above an ``export fn``
TITLE_CHARS = 200  # a status message longer than this is not repeated in a tooltip

#: the fields of one element's bits, most significant first, per dtype (bit strip)
BIT_FIELDS: dict[str, tuple[tuple[str, int], ...]] = {
    "f32": (("sign", 1), ("exponent", 8), ("mantissa", 23)),
    "f64": (("sign", 1), ("exponent", 11), ("mantissa", 52)),
    "i32": (("sign", 1), ("value", 31)),  # two's complement: the top bit is the sign
    "i64": (("sign", 1), ("value", 63)),
    "u32": (("value", 32),),
    "u64": (("value", 64),),
    "bool": (("byte", 8),),
}
#: bar colours of the class histogram; ulp ranges go from light (1 ulp) to dark (>= 65536)
CLASS_COLOURS = {
    "nan-payload": "#7b4fa0",  # NaN classes: purple
    "nan-vs-value": "#a2479a",
    "signed-zero": "#d08a1e",  # zero and subnormal handling: amber
    "subnormal-flush": "#b8641a",
    "int": "#6b7280",
    "shape-or-dtype": "#6b7280",
}
ULP_COLOURS = ("#9ecae1", "#6baed6", "#4292c6", "#2171b5", "#08306b")  # one per ULP_RANGES


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _anchor(case: Mapping[str, Any]) -> str:
    return "case-" + esc(case["fingerprint"])


# ------------------------------------------------------------------------------------- banner


def _signature(signature: Mapping[str, Any] | None) -> str:
    info = dict(signature or {"status": "unsigned"})
    status = str(info.get("status", "unsigned"))
    if status not in SIGNATURE_WORDS:
        raise ValueError(f"signature status {status!r}; expected one of {list(SIGNATURE_WORDS)}")
    parts = [f'<header class="sig sig-{status}" id="signature">{SIGNATURE_WORDS[status]}']
    if info.get("keyid"):
        parts.append(f" &middot; key <code>{esc(info['keyid'])}</code>")
    if info.get("envelopes") is not None:
        parts.append(f" &middot; {esc(info['envelopes'])} envelopes")
    if status == "unsigned" and not info.get("detail"):
        info["detail"] = (
            "No signed report was written for this run (keracheck run --report FILE --key KEY "
            "writes one); nothing on this page is signed."
        )
    if info.get("detail"):
        parts.append(f"<p>{esc(info['detail'])}</p>")
    failures = [f"<li>{esc(f)}</li>" for f in info.get("failures") or []]
    if failures:
        parts.append(f"<ul>{''.join(failures)}</ul>")
    report = info.get("report")
    if report:
        command = f"keracheck verify {report} --key {info.get('pubkey') or 'keracheck.pub'}"
        parts.append(f"<p>Verify offline: <code>{esc(command)}</code></p>")
    return "".join(parts) + "</header>"


# ----------------------------------------------------------------------------------- overview


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], cls: str = "") -> str:
    """A table from pre-escaped cell HTML."""
    head = "".join(f"<th>{h}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    attr = f' class="{cls}"' if cls else ""
    return f"<table{attr}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cell(word: str) -> str:
    return f'<span class="{esc(word)}">{esc(word)}</span>'


def _dl(items: Sequence[tuple[str, Any]]) -> str:
    rows = "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in items)
    return f"<dl>{rows}</dl>"


def _overview(run: Run) -> str:
    summary, info = run.get("summary") or {}, run.get("run") or {}
    words = ("cases", "agree", "diverge", "error", "skipped", "baselined", "exitCode")
    counts = _table([esc(w) for w in words], [[esc(summary.get(w, "")) for w in words]], "counts")
    facts = [
        (k, f"<code>{esc(info[k])}</code>")
        for k in ("command", "seed", "inputs", "repeat", "startedOn", "finishedOn")
        if info.get(k) is not None
    ]
    return f"<p>{esc(summary_line(run))}</p>{_notes(run)}{counts}{_dl(facts)}{_targets(run)}"


def _notes(run: Run) -> str:
    items = "".join(
        f'<li><span class="{"error" if n.level == "error" else "baselined"}">{esc(n.level)}</span> '
        f"{esc(n.path + ': ' if n.path else '')}{esc(n.text)}</li>"
        for n in run_notes(run)
    )
    return f"<ul>{items}</ul>" if items else ""


def _targets(run: Run) -> str:
    rows = []
    for target in run.get("targets") or []:
        versions = ", ".join(f"{k} {v}" for k, v in sorted((target.get("versions") or {}).items()))
        state = "available" if target.get("available") else "unavailable"
        note = str(target.get("reason") or "")
        if target.get("fix"):
            note += f" (fix: {target['fix']})"
        rows.append([esc(target["id"]), _cell(state), esc(versions), esc(note)])
    return _table(["target", "state", "toolchain", "reason / fix"], rows) if rows else ""


# -------------------------------------------------------------------------------------- index


def _severity(case: Mapping[str, Any], targets: Sequence[str]) -> int:
    cells = [target_cell(case, t) for t in targets] + [case["verdict"]]
    return min((_SEVERITY.get(c, 4) for c in cells), default=4)


def _needs_section(case: Mapping[str, Any]) -> bool:
    """Diverging and failing cases get a section; agreeing and skipped ones a compact row."""
    return case["verdict"] not in ("agree", "skipped")


def _compact_cell(case: Mapping[str, Any], target: str) -> str:
    word = target_cell(case, target)
    message = str((case["targets"].get(target) or {}).get("message") or "")
    title = f' title="{esc(message)}"' if message and len(message) <= TITLE_CHARS else ""
    return f'<td class="{esc(word)}"{title}>{esc(word)}</td>'


def _folded(cases: Sequence[Mapping[str, Any]], targets: Sequence[str], what: str) -> str:
    """The cases as one compact table (a row each, anchored) inside a closed ``<details>``."""
    if not cases:
        return ""
    head = "".join(f"<th>{esc(t)}</th>" for t in ["case", *targets])
    rows = "".join(
        f'<tr id="{_anchor(c)}"><td class="mono" title="{esc(c["fingerprint"])}">'
        f"{esc(case_label(c))}</td>{''.join(_compact_cell(c, t) for t in targets)}</tr>"
        for c in cases
    )
    return (
        f'<details class="folded {what}"><summary>{len(cases):,} {what} '
        f"{'case' if len(cases) == 1 else 'cases'}</summary>"
        f'<table class="compact"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'
        "</details>"
    )


def _index(run: Run) -> str:
    targets = column_targets(run)
    cases = run.get("cases") or []
    shown = sorted((c for c in cases if _needs_section(c)), key=lambda c: _severity(c, targets))
    rows = [
        [f'<a href="#{_anchor(c)}" class="mono">{esc(case_label(c))}</a>']
        + [_cell(target_cell(c, t)) for t in targets]
        + [_cell(c["verdict"])]
        for c in shown
    ]
    table = _table(["case", *map(esc, targets), "verdict"], rows) if rows else ""
    if not rows:
        table = "<p>No case diverges or fails.</p>"
    agree = [c for c in cases if c["verdict"] == "agree"]
    skipped = [c for c in cases if c["verdict"] == "skipped"]
    return (
        "<h2>Cases</h2>"
        + table
        + _folded(agree, targets, "agreeing")
        + _folded(skipped, targets, "skipped")
    )


# ------------------------------------------------------------------------------------- source


def _function_end(lines: Sequence[str], start: int) -> int:
    """The index of the line that closes the function opened at ``lines[start]``: braces are
    counted outside ``//`` and ``/* */`` comments (Kera has no string literals)."""
    depth, opened, block = 0, False, False
    for k in range(start, min(len(lines), start + SOURCE_LINES)):
        code = lines[k]
        if block:
            if "*/" not in code:
                continue
            code, block = code.split("*/", 1)[1], False
        code = re.sub(r"/\*.*?\*/", "", code.split("//", 1)[0])
        if "/*" in code:
            code, block = code.split("/*", 1)[0], True
        depth += code.count("{") - code.count("}")
        opened = opened or "{" in code
        if opened and depth <= 0:
            return k
    return min(len(lines), start + SOURCE_LINES) - 1


def function_source(path: str, line: int, function: str) -> list[tuple[int, str]] | None:
    """The numbered lines of ``export fn function`` at ``path:line`` (its comment lines above
    included), or None when the file is not here, is not a ``.kera`` file, or no longer has
    that function on that line -- so a hand-made run document cannot put other files into
    the page."""
    file = Path(path)
    try:
        if file.suffix != ".kera" or not file.is_file() or file.stat().st_size > SOURCE_BYTES:
            return None
        lines = file.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    if not 1 <= line <= len(lines):
        return None
    if not re.search(rf"\bexport\s+fn\s+{re.escape(function)}\b", lines[line - 1]):
        return None
    first = line - 1
    while (
        first > 0 and line - first <= COMMENT_LINES and lines[first - 1].lstrip().startswith("//")
    ):
        first -= 1
    last = _function_end(lines, line - 1)
    return [(k + 1, lines[k]) for k in range(first, last + 1)]


def _location(case: Mapping[str, Any]) -> tuple[str, int, int] | None:
    source = case.get("source")
    if not isinstance(source, Mapping):
        return None
    line, col = source.get("line"), source.get("column", source.get("col", 1))
    if not isinstance(line, int) or not isinstance(col, int):
        return None
    return str(source.get("path") or case["path"]), line, col


def _node_lines(case: Mapping[str, Any]) -> dict[int, str]:
    """Source lines of the divergences' first diverging nodes, with what to say about them."""
    marks: dict[int, str] = {}
    for d in case.get("divergences") or []:
        node = d.get("firstNode")
        if isinstance(node, Mapping) and isinstance(node.get("line"), int):
            marks.setdefault(node["line"], f"first diverging node ({pair_text(d)})")
    return marks


def _source_line(number: int, text: str, mark: str | None) -> str:
    """One listing line; a marked one (the ``export fn``, a first diverging node) is
    highlighted and says why when hovered."""
    attrs = f' class="hl" title="{esc(mark)}"' if mark else ""
    return f'<span{attrs}><span class="ln">{number:>4}  </span>{esc(text)}</span>'


def _source(case: Mapping[str, Any]) -> str:
    where = _location(case)
    if where is None:
        return ""
    path, line, col = where
    place = f"{path}:{line}:{col}"
    lines = function_source(path, line, str(case["function"]))
    if lines is None:
        return f'<p class="na">source {esc(place)}: not readable where this page was rendered</p>'
    marks = {line: "export fn", **_node_lines(case)}
    body = "".join(_source_line(n, text, marks.get(n)) for n, text in lines)
    return (
        f'<figure class="src"><figcaption><code>{esc(place)}</code> (as on disk when this page '
        f"was rendered)</figcaption><pre>{body}</pre></figure>"
    )


# --------------------------------------------------------------------------------- mismatches


def highlight(values: Mapping[str, str]) -> dict[str, str]:
    """Escape each value, wrapping characters where the values differ in ``<span class=d>``."""
    positions = differing_positions(list(values.values()))
    out = {}
    for key, value in values.items():
        chars = [
            f'<span class="d">{esc(c)}</span>' if i in positions else esc(c)
            for i, c in enumerate(value)
        ]
        out[key] = "".join(chars)
    return out


_NUMPY_DTYPES = {"f32": ">f4", "f64": ">f8", "i32": ">i4", "i64": ">i8", "u32": ">u4", "u64": ">u8"}


def decimal(bits: str, dtype: str | None) -> str:
    """The value of one element's hex bits: shortest round-trip decimal for floats (``nan``,
    ``-0.0``, ``inf`` as such), the integer for ints, true/false for bool; ``""`` when the
    dtype is unknown or the bits do not fit it."""
    try:
        raw = bytes.fromhex(bits.removeprefix("0x"))
    except ValueError:
        return ""
    if dtype == "bool":
        return "true" if any(raw) else "false"
    code = _NUMPY_DTYPES.get(str(dtype))
    if code is None or len(raw) != np.dtype(code).itemsize:
        return ""
    value = np.frombuffer(raw, dtype=code)[0]
    return str(value.item() if code[1] in "iu" else value)  # numpy's str: shortest round trip


def _output_dtype(case: Mapping[str, Any], divergence: Mapping[str, Any]) -> str | None:
    elements = divergence.get("elements")
    if isinstance(elements, Mapping) and elements.get("dtype"):
        return str(elements["dtype"])
    for target in divergence.get("targets") or []:
        for output in (case["targets"].get(target) or {}).get("outputs") or []:
            if output.get("index") == divergence.get("output"):
                return str(output.get("dtype"))
    return None


def _input_text(name: str, value: Any) -> str:
    """``x[3, 1] = 1.5 (0x3fc00000)`` from the run's ``{index, value, hex}`` record."""
    if not isinstance(value, Mapping):
        return f"{esc(name)} = <code>{esc(value)}</code>"
    index = value.get("index")
    at = esc(list(index)[1:]) if isinstance(index, list) and len(index) > 1 else ""
    hex_part = f" ({esc(value['hex'])})" if value.get("hex") else ""
    return f"{esc(name)}{at} = <code>{esc(value.get('value', ''))}{hex_part}</code>"


def _inputs_text(inputs: Any) -> str:
    if not isinstance(inputs, Mapping):
        return esc(inputs) if inputs is not None else ""
    return "<br>".join(_input_text(str(k), v) for k, v in inputs.items())


def _values(
    example: Mapping[str, Any], bits: Mapping[str, str], dtype: str | None
) -> dict[str, str]:
    given = example.get("values")
    if isinstance(given, Mapping):
        return {t: str(given.get(t, "")) for t in bits}
    return {t: decimal(b, dtype) for t, b in bits.items()}


def _mismatch_table(case: Mapping[str, Any], divergence: Mapping[str, Any]) -> str:
    """The recorded example mismatches, with the input values where the run recorded them."""
    rows, examples = mismatch_rows(divergence), divergence.get("examples") or []
    if not rows:
        return ""
    targets, dtype = list(rows[0].bits), _output_dtype(case, divergence)
    with_inputs = any(e.get("inputs") for e in examples)
    body = []
    for row, example in zip(rows, examples, strict=False):
        bits, fields = highlight(row.bits), highlight(row.fields)
        values = _values(example, row.bits, dtype)
        cells = [esc(row.index)] + [f'<span class="mono">{bits[t]}</span>' for t in targets]
        cells += [f'<span class="mono">{esc(values.get(t, ""))}</span>' for t in targets]
        cells += [f'<span class="mono">{fields[t]}</span>' for t in targets]
        cells += [esc(row.klass), esc(row.ulp)]
        body.append(cells + ([_inputs_text(example.get("inputs"))] if with_inputs else []))
    header = _mismatch_header(targets) + (["inputs at this element"] if with_inputs else [])
    return f'<div class="scroll">{_table(header, body)}</div>'


def _mismatch_header(targets: Sequence[str]) -> list[str]:
    return [
        "index",
        *map(esc, targets),
        *(f"{esc(t)} value" for t in targets),
        *(f"{esc(t)} sign|exponent|mantissa" for t in targets),
        "class",
        "ulp",
    ]


def _listed_row(entry: Sequence[Any], names: Sequence[str], elements: Mapping[str, Any]) -> str:
    """One kept mismatch as a table row: index, hex bits and value per name, class, ulp."""
    flat, klass = int(entry[0]), str(entry[1])
    raw = {n: str(b) for n, b in zip(names, entry[2:4], strict=True)}
    dtype, bits = str(elements.get("dtype")), highlight(raw)
    mono = [bits[n] for n in names] + [esc(decimal(raw[n], dtype)) for n in names]
    ulp = klass[4:-1] if klass.startswith("ulp(") else "-"
    return (
        f"<tr><td>{esc(svg.unravel(flat, elements.get('shape') or []))}</td>"
        + "".join(f'<td class="mono">{cell}</td>' for cell in mono)
        + f"<td>{esc(klass)}</td><td>{esc(ulp)}</td></tr>"
    )


def _more_mismatches(divergence: Mapping[str, Any], elements: Mapping[str, Any]) -> str:
    """The kept mismatches after the examples, folded; then how many were not kept."""
    listed, names = list(elements.get("list") or []), [str(n) for n in elements["names"]]
    skip = min(len(divergence.get("examples") or []), len(listed))
    rest, mismatched = listed[skip:], int(divergence["mismatched"])
    untold = mismatched - len(listed)
    cap = elements.get("listCap", len(listed))
    tail = (
        f"<p>{untold:,} more mismatching elements are not listed: the report keeps the first "
        f"{esc(cap)} per output (the pictures above count all {mismatched:,}).</p>"
        if untold > 0
        else ""
    )
    if not rest:
        return tail
    span = f"{skip + 1}\u2013{len(listed)}" if len(listed) > skip + 1 else str(len(listed))
    header = ["index", *map(esc, names), *(f"{esc(n)} value" for n in names), "class", "ulp"]
    head = "".join(f"<th>{h}</th>" for h in header)
    rows = "".join(_listed_row(e, names, elements) for e in rest)
    table = f'<table class="compact"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'

    summary = f"Mismatching elements {span} of {mismatched:,}"
    return (
        f'<details class="more"><summary>{esc(summary)}</summary>'
        f'<div class="scroll">{table}</div>{tail}</details>'
    )


# ----------------------------------------------------------------------------------- pictures


def class_bars(classes: Mapping[str, int]) -> list[tuple[str, int, str]]:
    """Histogram bars: each non-ulp class, then the ulp distances -- each one when there are
    at most ULP_DETAIL distinct distances, else summed into ULP_RANGES like the text report
    (all five ranges, so the axis reads the same for every divergence)."""
    ulps = {
        int(k[4:-1]): n for k, n in classes.items() if k.startswith("ulp(") and k[4:-1].isdigit()
    }
    bars = [
        (name, int(n), CLASS_COLOURS.get(name, "#6b7280"))
        for name, n in sorted(classes.items())
        if not name.startswith("ulp(")
    ]

    def colour(d: int) -> str:
        i = next(k for k, (lo, hi) in enumerate(ULP_RANGES) if d >= lo and (hi is None or d <= hi))
        return ULP_COLOURS[i]

    if len(ulps) <= ULP_DETAIL:
        return bars + [(f"ulp({d})", int(n), colour(d)) for d, n in sorted(ulps.items())]
    for k, (lo, hi) in enumerate(ULP_RANGES):
        n = sum(c for d, c in ulps.items() if d >= lo and (hi is None or d <= hi))
        label = str(lo) if lo == hi else f">={lo}" if hi is None else f"{lo}-{hi}"
        bars.append((f"ulp({label})", int(n), ULP_COLOURS[k]))
    return bars


def _grid_words(shape: Sequence[int], vectors: int | None) -> str:
    """What the heatmap's rows and columns are, in words."""
    dims = [int(n) for n in shape]
    batch = " (axis 0: the input vector)" if vectors and dims and dims[0] == vectors else ""
    if len(dims) <= 1:
        return f"one row of {dims[0] if dims else 1} elements{batch}"
    product = " \u00d7 ".join(map(str, dims[:-1]))
    axes = "axis 0" if len(dims) == 2 else f"axes 0\u2013{len(dims) - 2} flattened ({product})"
    return f"rows: {axes}{batch}; columns: axis {len(dims) - 1} ({dims[-1]})"


def _heatmap_figure(elements: Mapping[str, Any], vectors: int | None, label: str) -> str:
    grid, binning = elements["grid"], elements["bin"]
    picture = svg.heatmap(elements["counts"], grid, binning, elements["shape"], label)
    how = (
        f"binned: each cell is {binning[0]} \u00d7 {binning[1]} elements (rows \u00d7 columns), "
        "shaded by the share that differ"
        if binning[0] > 1 or binning[1] > 1
        else "each cell is one element"
    )
    words = _grid_words(elements["shape"], vectors)
    caption = f"Where the bits differ, {grid[0]:,} \u00d7 {grid[1]:,} grid; {words}; {how}."
    return f'<figure class="heatmap">{picture}<figcaption>{esc(caption)}</figcaption></figure>'


def _histogram_figure(divergence: Mapping[str, Any], label: str) -> str:
    bars = class_bars(divergence.get("classes") or {})
    total = int(divergence.get("mismatched") or 0)
    caption = f"The {total:,} mismatching elements by class and ulp distance."
    picture = svg.histogram(bars, label)
    return f'<figure class="histogram">{picture}<figcaption>{esc(caption)}</figcaption></figure>'


def _bits_figure(elements: Mapping[str, Any], total: int, label: str) -> str:
    counts = [int(n) for n in elements["bitCounts"]]
    fields = BIT_FIELDS.get(str(elements.get("dtype")), (("bits", len(counts)),))
    picture = svg.bit_strip(counts, fields, total, label)
    top = next((k for k, n in enumerate(counts) if n), None)
    highest = ""
    if top is not None:
        where = svg.field_of(fields, top)
        highest = f" The highest differing bit is bit {len(counts) - 1 - top} ({where})."
    caption = (
        f"Which bits differ, most significant first: bar and shade give how many of the "
        f"{total:,} mismatching elements differ in each bit.{highest}"
    )
    return f'<figure class="bits">{picture}<figcaption>{esc(caption)}</figcaption></figure>'


def _picture(draw: Callable[..., str], *args: Any) -> str:
    """One figure; a malformed record (a hand-edited run document) says so instead."""
    try:
        return draw(*args)
    except (KeyError, IndexError, TypeError, ValueError) as e:
        return f'<p class="na">picture not drawn: the record is malformed ({esc(e)})</p>'


def _figures(case: Mapping[str, Any], divergence: Mapping[str, Any]) -> str:
    if not divergence.get("classes"):
        return ""
    name = f"{pair_text(divergence)}, output {divergence['output']}"
    figures = [_picture(_histogram_figure, divergence, f"mismatch classes of {name}")]
    elements = divergence.get("elements")
    if isinstance(elements, Mapping):
        vectors = (case.get("inputs") or {}).get("n")
        total = int(divergence["mismatched"])
        figures.insert(
            0, _picture(_heatmap_figure, elements, vectors, f"mismatch heatmap of {name}")
        )
        figures.append(_picture(_bits_figure, elements, total, f"differing bits of {name}"))
    return f'<div class="figs">{"".join(figures)}</div>'


# -------------------------------------------------------------------------------------- cases


def _first_node(divergence: Mapping[str, Any]) -> str:
    """``First diverging node: sum (node 1, f32) at line 13, column 6 (let y); there: ulp(1)
    14`` -- or the run's note on why it names none."""
    node = divergence.get("firstNode")
    if not isinstance(node, Mapping):
        note = divergence.get("firstNodeNote")
        return f'<p class="node na">No first diverging node: {esc(note)}</p>' if note else ""
    text = f"<code>{esc(node.get('op', '?'))}</code> (node {esc(node.get('index', '?'))}"
    text += f", {esc(node['type'])})" if node.get("type") else ")"
    if node.get("line") is not None:
        text += f" at line {esc(node['line'])}, column {esc(node.get('column', '?'))}"
    if node.get("let"):
        text += f" (<code>let {esc(node['let'])}</code>)"
    if isinstance(node.get("classes"), Mapping):
        text += f"; there: {esc(classes_text(node))}"
    return f'<p class="node">First diverging node: {text}</p>'


def _divergence(case: Mapping[str, Any], divergence: Mapping[str, Any]) -> str:
    note = ""
    if divergence.get("baselined"):
        note = f' <span class="baselined">baselined: {esc(divergence.get("reason") or "")}</span>'
    head = f"<h4>{esc(pair_text(divergence))}: {esc(mismatch_summary(divergence))}{note}</h4>"
    elements = divergence.get("elements")
    more = _picture(_more_mismatches, divergence, elements) if isinstance(elements, Mapping) else ""
    return (
        f'<div class="divergence">{head}{_first_node(divergence)}{_figures(case, divergence)}'
        f"{_mismatch_table(case, divergence)}{more}</div>"
    )


def _target_rows(case: Mapping[str, Any]) -> list[list[str]]:
    rows = []
    for target, result in case["targets"].items():
        outputs = "<br>".join(
            f"#{esc(o['index'])} {esc(o['dtype'])}{esc(list(o['shape']))} "
            f'<code title="{esc(o["sha256"])}">{esc(str(o["sha256"])[:16])}</code>'
            for o in result.get("outputs") or []
        )
        message = esc(result.get("message") or "").replace("\n", "<br>")
        rows.append([esc(target), _cell(target_cell(case, target)), outputs, message])
    return rows


def _case_section(case: Mapping[str, Any]) -> str:
    keg, inputs = case.get("keg") or {}, case.get("inputs") or {}
    facts = [
        ("fingerprint (sha3_256)", f"<code>{esc(case['fingerprint'])}</code>"),
        ("keg sha256", f"<code>{esc(keg.get('sha256', ''))}</code>"),
        (
            "inputs",
            esc(f"{inputs.get('n')} vectors, seed {inputs.get('seed')}, {inputs.get('source')}"),
        ),
    ]
    divergences = "".join(_divergence(case, d) for d in case.get("divergences") or [])
    repro = f"<p>Repro: <code>{esc(case['repro'])}</code></p>" if case.get("repro") else ""
    blame = sorted({t for d in case.get("divergences") or [] for t in blamed(d)})
    title = f"{_cell(case['verdict'])} <span class=mono>{esc(case_label(case))}</span>"
    if blame:
        title += f" &middot; {esc(', '.join(blame))}"
    status = _table(["target", "status", "outputs (sha256)", "message"], _target_rows(case))
    source = _source(case)
    top = (
        f'<div class="top"><div>{_dl(facts)}{status}</div>{source}</div>'
        if source
        else _dl(facts) + status
    )
    return f'<section id="{_anchor(case)}"><h3>{title}</h3>{top}{divergences}{repro}</section>'


def render(run: Run, *, signature: Mapping[str, Any] | None = None) -> str:
    """The page.  ``signature``: ``{"status": "verified"|"signed"|"unsigned"|"failed",
    "keyid": hex, "envelopes": count checked, "failures": [text], "detail": text, "report":
    report file name, "pubkey": public key file name}``; all but ``status`` optional; None
    means unsigned.  ``signed``: a signed report was written for this run, but this page is
    not it and verified nothing."""
    version = (run.get("tool") or {}).get("version", "")
    exit_code = (run.get("summary") or {}).get("exitCode", "")
    sections = "".join(_case_section(c) for c in run.get("cases") or [] if _needs_section(c))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>keracheck report (exit {esc(exit_code)})</title><style>{CSS}</style></head>"
        f"<body>{_signature(signature)}<h1>keracheck {esc(version)}</h1>"
        f"{_overview(run)}{_index(run)}{sections}</body></html>\n"
    )
