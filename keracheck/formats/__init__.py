"""Report formats for a keracheck run-result dict.

``render(fmt, run, **opts) -> str`` is the one entry point; :data:`FORMATS` names the formats.
``run`` is the dict ``keracheck run --format json`` prints (schema: ``schemas/run-v1.json``).
The format modules (text, junit, sarif, github, html) each expose ``render(run, **opts)`` and
share what lives here:

* rule ids, stable across releases: KC001 bit divergence, KC002 divergence in NaN payloads or
  the sign of zero only, KC003 target error, KC004 nondeterministic (repeats of one target
  differ), KC005 opt-level (one target at two optimisation levels differs);
* findings: one per divergence (baselined ones flagged) and one per target error, in case
  order, each with a title, a one-line message and the SARIF partial fingerprint
  ``<fingerprint>:<a>:<b>:<output>`` (``<fingerprint>:<target>:error`` for errors);
* locations: a finding points at its case's ``export fn`` (``case["source"]``: path, line,
  column; None for a ``.keg`` case, which has no source), written ``path:line:col`` as
  compilers and linters do; a divergence also names its first diverging node
  (``divergence["firstNode"]``, :mod:`keracheck.localise`) and the source position of the
  expression that built it;
* mismatch rows: index, hex bits, decimal value and sign|exponent|mantissa fields per target,
  class, ulp, and each input's element at that index;
* run notes: the run's own failure (``summary.message``), input errors (``errors``: a file
  that could not be read, compiled or fed) and stale baseline entries (``staleBaseline``).

The reference interpreter (target ``ref``) is the oracle: a divergence between ``ref`` and
``x`` is blamed on ``x``; between two other targets on both.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

FORMATS = ("text", "json", "junit", "sarif", "github", "html")
REFERENCE = "ref"
Run = Mapping[str, Any]


@dataclass(frozen=True)
class Rule:
    """A stable finding kind (SARIF rule, annotation title prefix, JUnit failure type)."""

    id: str
    name: str  # kebab-case, shown to people
    title: str  # PascalCase, SARIF's rule name
    description: str


RULES = {
    "KC001": Rule(
        "KC001",
        "bit-divergence",
        "BitDivergence",
        "Targets produced different bits for one output.",
    ),
    "KC002": Rule(
        "KC002",
        "nan-payload-or-signed-zero",
        "NanPayloadOrSignedZero",
        "Targets differ only in NaN payloads/signs or in the sign of zero.",
    ),
    "KC003": Rule(
        "KC003", "target-error", "TargetError", "A target failed to build or run the case."
    ),
    "KC004": Rule(
        "KC004",
        "nondeterministic",
        "Nondeterministic",
        "Repeated runs of one target gave different bits.",
    ),
    "KC005": Rule(
        "KC005",
        "opt-level",
        "OptLevelDivergence",
        "One target gave different bits at two optimisation levels (a pass changed the bits).",
    ),
}
_QUIET_CLASSES = frozenset({"nan-payload", "signed-zero"})  # KC002 when nothing else differs


def rule_for(divergence: Mapping[str, Any]) -> str:
    """The rule id of one divergence record."""
    if divergence.get("kind") == "nondeterministic":
        return "KC004"
    if divergence.get("kind") == "opt-level":
        return "KC005"
    classes = set(divergence.get("classes") or {})
    return "KC002" if classes and classes <= _QUIET_CLASSES else "KC001"


def blamed(divergence: Mapping[str, Any]) -> tuple[str, ...]:
    """The targets a divergence counts against (everyone but the oracle, when it is present)."""
    targets = tuple(dict.fromkeys(divergence["targets"]))
    if divergence.get("kind") == "opt-level":
        return targets[-1:]  # the optimised level; its level-0 self is the witness
    others = tuple(t for t in targets if t != REFERENCE)
    return others or targets


def short_fp(case: Mapping[str, Any]) -> str:
    return str(case["fingerprint"])[:12]


def printable(text: object) -> str:
    """``text`` with control characters shown as escapes (``\\n``, ``\\x00`` ...), so a file
    name cannot start a new line of a report or carry terminal escapes."""
    s = str(text)
    if s.isprintable():
        return s
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in s)


def case_name(case: Mapping[str, Any]) -> str:
    return f"{printable(case['path'])}:{case['function']}"


def case_label(case: Mapping[str, Any]) -> str:
    """``<fp12> <path>:<function>``: the JUnit test name and the heading of a case everywhere."""
    return f"{short_fp(case)} {case_name(case)}"


def source(case: Mapping[str, Any]) -> tuple[str, int, int] | None:
    """(path, line, column) of the case's ``export fn``; None without a source (``.keg``)."""
    where = case.get("source")
    if not isinstance(where, Mapping) or not where.get("line"):
        return None
    return str(where.get("path") or case["path"]), int(where["line"]), int(where.get("column") or 1)


def no_source_note(case: Mapping[str, Any]) -> str | None:
    """Why a case records no source position (None when it has one, or when its document
    predates ``source``)."""
    if "source" not in case or source(case) is not None:
        return None
    if str(case["path"]).endswith(".keg"):
        return "a .keg graph has no source positions"
    return "no source positions"


def location(case: Mapping[str, Any]) -> str:
    """``path:line:col`` of the case's ``export fn``, or the bare path without a source."""
    where = source(case)
    if where is None:
        return printable(case["path"])
    path, line, column = where
    return f"{printable(path)}:{line}:{column}"


def node_location(case: Mapping[str, Any], node: Mapping[str, Any]) -> str | None:
    """``path:line:col`` where the source built a first diverging node, when known."""
    if not node.get("line"):
        return None
    path = (source(case) or (case["path"],))[0]
    return f"{printable(path)}:{node['line']}:{node.get('column') or 1}"


def first_node_text(case: Mapping[str, Any], divergence: Mapping[str, Any]) -> str | None:
    """``first differing node: %2 min (let m) at f.kera:9:13, f32[4]``, the note saying why
    none is named, or None when the divergence was not localised."""
    node = divergence.get("firstNode")
    if not isinstance(node, Mapping):
        note = divergence.get("firstNodeNote")
        return f"first differing node: {note}" if note else None
    text = f"first differing node: %{node.get('index')} {node.get('op')}"
    if node.get("let"):
        text += f" (let {node['let']})"
    where = node_location(case, node)
    text += f" at {where}" if where else f" ({no_source_note(case) or 'no source position'})"
    text += f", {node.get('type')}"
    classes = classes_text(node)
    return f"{text}; {classes}" if classes else text


#: ulp distances shown as ranges when a divergence has more than ULP_DETAIL distinct ones:
#: one rounding, a few, many, and a different computation altogether
ULP_RANGES: tuple[tuple[int, int | None], ...] = (
    (1, 1),
    (2, 15),
    (16, 255),
    (256, 65535),
    (65536, None),
)
ULP_DETAIL = 4


def classes_text(divergence: Mapping[str, Any]) -> str:
    """Class counts, e.g. ``nan-payload 1, ulp(1) 2``; many distinct ulp distances (the report
    keeps each) are summed into ranges, ``ulp(2-15) 7, ulp(>=65536) 40``."""
    classes = divergence.get("classes") or {}
    ulps = {
        int(k[4:-1]): n for k, n in classes.items() if k.startswith("ulp(") and k[4:-1].isdigit()
    }
    if len(ulps) <= ULP_DETAIL:
        return ", ".join(f"{name} {count}" for name, count in sorted(classes.items()))
    parts = [
        f"{name} {count}" for name, count in sorted(classes.items()) if not name.startswith("ulp(")
    ]
    for lo, hi in ULP_RANGES:
        n = sum(c for d, c in ulps.items() if d >= lo and (hi is None or d <= hi))
        label = str(lo) if lo == hi else f">={lo}" if hi is None else f"{lo}-{hi}"
        parts += [f"ulp({label}) {n}"] if n else []
    return ", ".join(parts)


def pair_text(divergence: Mapping[str, Any]) -> str:
    targets = list(divergence["targets"])
    if divergence.get("kind") == "nondeterministic" and len(set(targets)) == 1:
        return f"{targets[0]} (repeats)"
    text = " vs ".join(targets)
    if divergence.get("kind") == "opt-level":
        culprit = divergence.get("pass")
        text += f" (changed by pass '{culprit}')" if culprit else " (optimisation levels)"
    return text


def mismatch_summary(divergence: Mapping[str, Any]) -> str:
    """``output 0: 3/512 elements differ (0.59%), max ulp 1; nan-payload 1, ulp(1) 2``."""
    mismatched, total = divergence["mismatched"], divergence["total"]
    share = 100.0 * mismatched / total if total else 0.0
    text = f"output {divergence['output']}: {mismatched}/{total} elements differ ({share:.2f}%)"
    if divergence.get("maxUlp") is not None:
        text += f", max ulp {divergence['maxUlp']}"
    classes = classes_text(divergence)
    text = f"{text}; {classes}" if classes else text
    return f"{text} ({divergence['message']})" if divergence.get("message") else text


@dataclass(frozen=True)
class Finding:
    """One thing to report: a divergence or a target error of one case."""

    rule: str
    case: Mapping[str, Any]
    targets: tuple[str, ...]
    output: int | None
    title: str
    message: str
    partial_fingerprint: str
    baselined: bool = False
    reason: str | None = None
    divergence: Mapping[str, Any] | None = None


def _divergence_finding(case: Mapping[str, Any], divergence: Mapping[str, Any]) -> Finding:
    rule = rule_for(divergence)
    targets = tuple(divergence["targets"])
    # a one-target record (nondeterminism) reads as the pair (t, t)
    fingerprint = f"{case['fingerprint']}:{targets[0]}:{targets[-1]}:{divergence['output']}"
    message = f"{case_name(case)} {pair_text(divergence)}, {mismatch_summary(divergence)}"
    first = (divergence.get("examples") or [None])[0]
    if first is not None:
        values = first.get("values") or {}
        bits = " ".join(
            f"{t} {b}" + (f" ({values[t]})" if t in values else "")
            for t, b in first["bits"].items()
        )
        message += f". First at {list(first['index'])}: {bits}"
    node = first_node_text(case, divergence)
    if node:
        message += f". {node[0].upper()}{node[1:]}"
    if case.get("repro"):
        message += f". Repro: {case['repro']}"
    return Finding(
        rule=rule,
        case=case,
        targets=targets,
        output=divergence["output"],
        title=f"{rule} {RULES[rule].name}: {pair_text(divergence)}",
        message=message,
        partial_fingerprint=fingerprint,
        baselined=bool(divergence.get("baselined")),
        reason=divergence.get("reason"),
        divergence=divergence,
    )


def _error_finding(case: Mapping[str, Any], target: str, result: Mapping[str, Any]) -> Finding:
    message = f"{case_name(case)} on {target}: {result.get('message') or 'failed'}"
    if case.get("repro"):
        message += f". Repro: {case['repro']}"
    return Finding(
        rule="KC003",
        case=case,
        targets=(target,),
        output=None,
        title=f"KC003 target-error: {target}",
        message=message,
        partial_fingerprint=f"{case['fingerprint']}:{target}:error",
    )


def findings(run: Run) -> list[Finding]:
    """Every divergence and target error of the run, case by case, in run order."""
    found: list[Finding] = []
    for case in run.get("cases") or []:
        found += [_divergence_finding(case, d) for d in case.get("divergences") or []]
        for target, result in sorted(case["targets"].items()):
            if result["status"] == "error":
                found.append(_error_finding(case, target, result))
    return found


@dataclass(frozen=True)
class Note:
    """A run-level message: the run's own failure, an input error or a stale baseline entry."""

    level: str  # "error" | "warning"
    path: str
    text: str


def run_notes(run: Run) -> list[Note]:
    """Messages that belong to no case: ``summary.message``, ``errors``, ``staleBaseline``."""
    notes = []
    message = (run.get("summary") or {}).get("message")
    if message:
        notes.append(Note("error", "", str(message)))
    for error in run.get("errors") or []:
        notes.append(
            Note("error", str(error.get("path") or ""), f"input error: {error['message']}")
        )
    for entry in run.get("staleBaseline") or []:
        key = ":".join([str(entry["fingerprint"])[:12], *entry["targets"], str(entry["output"])])
        reason = entry.get("reason") or "no reason"
        text = f"stale baseline entry {key} ({reason}): that divergence no longer occurs"
        notes.append(Note("warning", str(entry.get("path") or ""), text))
    return notes


# ------------------------------------------------------------------------- bit-level mismatches

# hex digits of the bit pattern -> (exponent bits, mantissa bits) of the IEEE format
_FLOAT_LAYOUT = {4: (5, 10), 8: (8, 23), 16: (11, 52)}


def float_fields(bits: str) -> str:
    """``0x7fc00000`` -> ``0|11111111|10000000000000000000000`` (f16/f32/f64 by width)."""
    digits = bits.removeprefix("0x")
    if len(digits) not in _FLOAT_LAYOUT:
        return ""
    exponent, _ = _FLOAT_LAYOUT[len(digits)]
    binary = format(int(digits, 16), f"0{4 * len(digits)}b")
    return f"{binary[0]}|{binary[1 : 1 + exponent]}|{binary[1 + exponent :]}"


def differing_positions(values: Sequence[str]) -> set[int]:
    """Character positions where the given equal-length strings do not all agree."""
    if len({len(v) for v in values}) != 1:
        return set(range(max((len(v) for v in values), default=0)))
    return {i for i, chars in enumerate(zip(*values, strict=True)) if len(set(chars)) > 1}


@dataclass(frozen=True)
class MismatchRow:
    """One example element: its index; per target, hex bits, decimal value and IEEE fields;
    and per input, the element at that index (``{name: {index, hex, value}}``)."""

    index: str
    bits: dict[str, str]
    fields: dict[str, str]
    klass: str
    ulp: str
    values: dict[str, str] = field(default_factory=dict)
    inputs: dict[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def inputs_text(self) -> str:
        """``x=0x7fc00000 (nan), s[5]=0x3f800000 (1.0)``: an input read at another index
        than the output element's (broadcast) names its own index."""
        parts = []
        for name, element in self.inputs.items():
            at = str(list(element.get("index") or []))
            label = name if at == self.index else f"{name}{at}"
            parts.append(f"{label}={element.get('hex')} ({element.get('value')})")
        return ", ".join(parts)


def _ulp(example: Mapping[str, Any]) -> str:
    if example.get("ulp") is not None:
        return str(example["ulp"])
    klass = str(example.get("class", ""))
    return klass[4:-1] if klass.startswith("ulp(") and klass.endswith(")") else "-"


def _fields(example: Mapping[str, Any], target: str, bits: str) -> str:
    if example.get("class") == "int":
        return ""
    given = (example.get("fields") or {}).get(target)
    return str(given) if given else float_fields(bits)


def float_value(bits: str) -> str:
    """``0x3f800000`` -> ``1.0``: the decimal of an f16/f32/f64 bit pattern (by width), for
    documents written before examples carried their values; "" for another width."""
    digits = bits.removeprefix("0x")
    kind = {4: "f2", 8: "f4", 16: "f8"}.get(len(digits))
    if kind is None:
        return ""
    raw = np.array([int(digits, 16)], dtype=f"<u{len(digits) // 2}")
    return str(raw.view(f"<{kind}")[0])


def _values(example: Mapping[str, Any], bits: Mapping[str, str]) -> dict[str, str]:
    given = example.get("values") or {}
    if given or example.get("class") == "int":  # an int's signedness is not in its bits
        return {t: str(v) for t, v in given.items()}
    return {t: float_value(b) for t, b in bits.items()}


def mismatch_rows(divergence: Mapping[str, Any]) -> list[MismatchRow]:
    """The recorded example mismatches of one divergence, ready for a table."""
    rows = []
    for example in divergence.get("examples") or []:
        bits = {t: str(b) for t, b in example["bits"].items()}
        rows.append(
            MismatchRow(
                index=str(list(example["index"])),
                bits=bits,
                fields={t: _fields(example, t, b) for t, b in bits.items()},
                klass=str(example.get("class", "")),
                ulp=_ulp(example),
                values=_values(example, bits),
                inputs=dict(example.get("inputs") or {}),
            )
        )
    return rows


def column_targets(run: Run) -> list[str]:
    """Target ids in run order, then any a case mentions that the run header did not."""
    ordered = list((run.get("run") or {}).get("targets") or [])
    for case in run.get("cases") or []:
        ordered += [t for t in case["targets"] if t not in ordered]
    return ordered


def target_cell(case: Mapping[str, Any], target: str) -> str:
    """Short status of one case on one target: ok, DIFF, baselined, ERROR, unsupported, ..."""
    result = case["targets"].get(target)
    if result is None:
        return "-"
    if result["status"] != "ok":
        return "ERROR" if result["status"] == "error" else str(result["status"])
    divergences = [d for d in case.get("divergences") or [] if target in blamed(d)]
    if any(not d.get("baselined") for d in divergences):
        return "DIFF"
    return "baselined" if divergences else "ok"


def summary_line(run: Run) -> str:
    s = run.get("summary") or {}
    words = ("agree", "diverge", "error", "skipped", "baselined")
    counts = ", ".join(f"{s.get(w, 0)} {w}" for w in words)
    return f"{s.get('cases', 0)} cases: {counts} (exit {s.get('exitCode', '?')})"


# ------------------------------------------------------------------------------------ dispatch


def _json(run: Run, *, indent: int | None = 2) -> str:
    return json.dumps(run, indent=indent) + "\n"


def _renderer(fmt: str) -> Callable[..., str]:
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if fmt == "json":
        return _json
    renderer: Callable[..., str] = importlib.import_module(f"keracheck.formats.{fmt}").render
    return renderer


def render(fmt: str, run: Run, **opts: Any) -> str:
    """Render a run-result dict in one of :data:`FORMATS`; options are the format's own.

    text: ``terminal`` (bool, rich colours), ``width``.  json: ``indent`` (None: one line).  github: ``step_summary`` (a path, or
    None; defaults to ``$GITHUB_STEP_SUMMARY``).  html: ``signature`` (see ``html.render``).
    """
    return _renderer(fmt)(run, **opts)
