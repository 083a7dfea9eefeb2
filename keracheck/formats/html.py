"""One self-contained HTML page for auditors: no scripts, no fonts, no network.

Layout, top to bottom:

1. signature banner: ``verified`` (green), ``unsigned`` (grey) or ``failed`` (red), the key id
   and the command that verifies the signed report offline;
2. the run's own failure, input errors and stale baseline entries, the summary counts, the run (command, seed, inputs, times) and every target with its
   toolchain versions or the reason it was unavailable;
3. an index of cases x targets, worst first (unbaselined divergence, error, skipped,
   baselined, agree), each row linking to its section;
4. one section per case: fingerprint and ``.keg`` digests, per-target status and output
   digests, every divergence with its mismatch table (index, hex bits per target,
   sign|exponent|mantissa per target with the differing bits highlighted, class, ulp) and the
   repro command.

Everything user-supplied is escaped; CSS is inline; a Content-Security-Policy meta tag forbids
any load, so the file shows the same offline, months later.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from keracheck.formats import (
    Run,
    blamed,
    case_label,
    column_targets,
    differing_positions,
    mismatch_rows,
    mismatch_summary,
    pair_text,
    run_notes,
    summary_line,
    target_cell,
)

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1180px;padding:0 16px 40px;
color:#1d232a;background:#fff}
code,.mono{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12.5px}
.sig{margin:0 -16px 16px;padding:12px 16px;font-weight:600;border-bottom:2px solid}
.sig-verified{background:#e6f6ea;border-color:#2e8b47;color:#17592b}
.sig-unsigned{background:#f1f2f4;border-color:#9aa1a9;color:#3c434b}
.sig-failed{background:#fdecea;border-color:#c62828;color:#8e1b1b}
.sig p{margin:4px 0 0;font-weight:400}
table{border-collapse:collapse;margin:8px 0 16px}
th,td{border:1px solid #d5d9de;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f5f6f8}
.ok,.agree{color:#17692f}.DIFF,.ERROR,.diverge,.error{color:#b3261e;font-weight:700}
.baselined,.skipped{color:#8a6100}.unsupported,.unavailable,.na{color:#6b7280}
section{border-top:1px solid #d5d9de;margin-top:24px}
.d{background:#ffd5d2;color:#8e1b1b;font-weight:700}
.counts td{text-align:right;min-width:64px}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px}dt{color:#555}dd{margin:0}
"""
CSP = "default-src 'none'; style-src 'unsafe-inline'"
SIGNATURE_WORDS = {
    "verified": "Signature verified",
    "signed": "Signed report (not verified on this page)",
    "unsigned": "Unsigned report",
    "failed": "Signature verification FAILED",
}
_SEVERITY = {"DIFF": 0, "ERROR": 1, "skipped": 2, "baselined": 3}


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _anchor(case: Mapping[str, Any]) -> str:
    return "case-" + esc(case["fingerprint"])


def _signature(signature: Mapping[str, Any] | None) -> str:
    info = dict(signature or {"status": "unsigned"})
    status = str(info.get("status", "unsigned"))
    if status not in SIGNATURE_WORDS:
        raise ValueError(f"signature status {status!r}; expected one of {list(SIGNATURE_WORDS)}")
    parts = [f'<header class="sig sig-{status}">{SIGNATURE_WORDS[status]}']
    if info.get("keyid"):
        parts.append(f" &middot; key <code>{esc(info['keyid'])}</code>")
    if info.get("detail"):
        parts.append(f"<p>{esc(info['detail'])}</p>")
    report = info.get("report")
    if report:
        command = f"keracheck verify {report} --key {info.get('pubkey') or 'keracheck.pub'}"
        parts.append(f"<p>Verify offline: <code>{esc(command)}</code></p>")
    return "".join(parts) + "</header>"


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


def _severity(case: Mapping[str, Any], targets: Sequence[str]) -> int:
    cells = [target_cell(case, t) for t in targets] + [case["verdict"]]
    return min((_SEVERITY.get(c, 4) for c in cells), default=4)


def _index(run: Run) -> str:
    targets = column_targets(run)
    cases = sorted(run.get("cases") or [], key=lambda c: _severity(c, targets))
    rows = [
        [f'<a href="#{_anchor(c)}" class="mono">{esc(case_label(c))}</a>']
        + [_cell(target_cell(c, t)) for t in targets]
        + [_cell(c["verdict"])]
        for c in cases
    ]
    return "<h2>Cases</h2>" + _table(["case", *map(esc, targets), "verdict"], rows)


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


def _mismatch_table(divergence: Mapping[str, Any]) -> str:
    rows = mismatch_rows(divergence)
    if not rows:
        return ""
    targets = list(rows[0].bits)
    header = ["index", *map(esc, targets), *(f"{esc(t)} sign|exponent|mantissa" for t in targets)]
    body = []
    for row in rows:
        bits, fields = highlight(row.bits), highlight(row.fields)
        body.append(
            [esc(row.index)]
            + [f'<span class="mono">{bits[t]}</span>' for t in targets]
            + [f'<span class="mono">{fields[t]}</span>' for t in targets]
            + [esc(row.klass), esc(row.ulp)]
        )
    return _table([*header, "class", "ulp"], body)


def _divergence(divergence: Mapping[str, Any]) -> str:
    note = ""
    if divergence.get("baselined"):
        note = f' <span class="baselined">baselined: {esc(divergence.get("reason") or "")}</span>'
    head = f"<h4>{esc(pair_text(divergence))}: {esc(mismatch_summary(divergence))}{note}</h4>"
    return head + _mismatch_table(divergence)


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
    divergences = "".join(_divergence(d) for d in case.get("divergences") or [])
    repro = f"<p>Repro: <code>{esc(case['repro'])}</code></p>" if case.get("repro") else ""
    blame = sorted({t for d in case.get("divergences") or [] for t in blamed(d)})
    title = f"{_cell(case['verdict'])} <span class=mono>{esc(case_label(case))}</span>"
    if blame:
        title += f" &middot; {esc(', '.join(blame))}"
    return (
        f'<section id="{_anchor(case)}"><h3>{title}</h3>{_dl(facts)}'
        + _table(["target", "status", "outputs (sha256)", "message"], _target_rows(case))
        + f"{divergences}{repro}</section>"
    )


def render(run: Run, *, signature: Mapping[str, Any] | None = None) -> str:
    """The page.  ``signature``: ``{"status": "verified"|"unsigned"|"failed", "keyid": hex,
    "detail": text, "report": report file name, "pubkey": public key file name}``; all but
    ``status`` optional; None means unsigned."""
    version = (run.get("tool") or {}).get("version", "")
    exit_code = (run.get("summary") or {}).get("exitCode", "")
    sections = "".join(_case_section(c) for c in run.get("cases") or [])
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>keracheck report (exit {esc(exit_code)})</title><style>{CSS}</style></head>"
        f"<body>{_signature(signature)}<h1>keracheck {esc(version)}</h1>"
        f"{_overview(run)}{_index(run)}{sections}</body></html>\n"
    )
