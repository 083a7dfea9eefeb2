"""SARIF 2.1.0 for code-scanning tools (GitHub's ``upload-sarif`` among them).

One run whose driver lists the four stable rules (KC001 bit divergence, KC002 NaN-payload or
signed-zero only, KC003 target error, KC004 nondeterministic, KC005 opt-level), and one result per finding:

* ``locations[0]``: the corpus file (relative URI, percent-encoded, base ``%SRCROOT%``), with
  a region at the case's ``export fn`` (``case["source"]``: ``startLine``, ``startColumn``; no
  region for a ``.keg`` case, which has no source), plus the function as a logical location;
* ``relatedLocations``: the first diverging node of a localised divergence, at the expression
  that built it (``divergence["firstNode"]``), with a message naming its op;
* ``partialFingerprints["keracheck/v1"]``: ``<fingerprint>:<a>:<b>:<output>`` for divergences,
  ``<fingerprint>:<target>:error`` for errors, so an alert survives renames and line moves;
* a baselined divergence stays in the log with level ``note`` and an external suppression
  carrying the baseline's reason;
* ``properties``: the numbers behind the message (classes, max ulp, counts, repro command);
* input errors, stale baseline entries and the run's own failure are
  ``toolExecutionNotifications`` of the invocation, not results.

SARIF is an extra output for dashboards; the exit code is the gate.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from keracheck.formats import (
    RULES,
    Finding,
    Note,
    Run,
    findings,
    first_node_text,
    run_notes,
    source,
)

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
RULE_IDS = list(RULES)


def _rule(rule_id: str) -> dict[str, Any]:
    rule = RULES[rule_id]
    return {
        "id": rule.id,
        "name": rule.title,
        "shortDescription": {"text": rule.name},
        "fullDescription": {"text": rule.description},
        "help": {"text": f"{rule.description} Run the repro command of the result to see it."},
        "defaultConfiguration": {"level": "error"},
        "properties": {"tags": ["determinism", "keracheck"], "precision": "very-high"},
    }


def artifact_uri(path: str) -> str:
    """A corpus path as a relative URI reference (``a:b,c.kera`` -> ``a%3Ab%2Cc.kera``)."""
    return quote(path.replace("\\", "/"), safe="/")


def _physical(path: str, line: int | None, column: int | None) -> dict[str, Any]:
    physical: dict[str, Any] = {
        "artifactLocation": {"uri": artifact_uri(path), "uriBaseId": "%SRCROOT%"}
    }
    if line:
        physical["region"] = {"startLine": line, "startColumn": column or 1}
    return physical


def _location(finding: Finding) -> dict[str, Any]:
    case = finding.case
    path, line, column = source(case) or (case["path"], None, None)
    return {
        "physicalLocation": _physical(path, line, column),
        "logicalLocations": [{"name": case["function"], "kind": "function"}],
    }


def _related(finding: Finding) -> list[dict[str, Any]]:
    """The first diverging node, where the source built it (none when not localised)."""
    node = (finding.divergence or {}).get("firstNode")
    if not isinstance(node, Mapping) or not node.get("line"):
        return []
    path = (source(finding.case) or (finding.case["path"],))[0]
    text = first_node_text(finding.case, finding.divergence or {}) or ""
    physical = _physical(path, int(node["line"]), int(node.get("column") or 1))
    return [{"id": 1, "physicalLocation": physical, "message": {"text": text}}]


def _properties(finding: Finding) -> dict[str, Any]:
    divergence = finding.divergence or {}
    keys = ("mismatched", "total", "classes", "maxUlp", "kind", "firstNode")
    return {
        "fingerprint": finding.case["fingerprint"],
        "targets": list(finding.targets),
        "output": finding.output,
        "repro": finding.case.get("repro"),
        **{k: divergence[k] for k in keys if k in divergence},
    }


def _result(finding: Finding) -> dict[str, Any]:
    result: dict[str, Any] = {
        "ruleId": finding.rule,
        "ruleIndex": RULE_IDS.index(finding.rule),
        "level": "note" if finding.baselined else "error",
        "message": {"text": finding.message},
        "locations": [_location(finding)],
        "partialFingerprints": {"keracheck/v1": finding.partial_fingerprint},
        "properties": _properties(finding),
    }
    related = _related(finding)
    if related:
        result["relatedLocations"] = related
    if finding.baselined:
        reason = finding.reason or "accepted in the keracheck baseline"
        result["suppressions"] = [{"kind": "external", "justification": reason}]
    return result


def _notification(note: Note) -> dict[str, Any]:
    notification: dict[str, Any] = {"level": note.level, "message": {"text": note.text}}
    if note.path:
        location = {"artifactLocation": {"uri": artifact_uri(note.path), "uriBaseId": "%SRCROOT%"}}
        notification["locations"] = [{"physicalLocation": location}]
    return notification


def _invocation(run: Run) -> dict[str, Any]:
    info, summary = run.get("run") or {}, run.get("summary") or {}
    exit_code = summary.get("exitCode")
    # 0 and 1 are verdicts, and so is 3 when targets crashed; else the run did not complete
    crashed = exit_code == 3 and bool(summary.get("error"))
    invocation: dict[str, Any] = {
        "executionSuccessful": exit_code in (0, 1) or crashed,
        "commandLine": info.get("command", ""),
    }
    notifications = [_notification(n) for n in run_notes(run)]
    if notifications:
        invocation["toolExecutionNotifications"] = notifications
    optional = {"exitCode": exit_code, "startTimeUtc": info.get("startedOn")}
    optional["endTimeUtc"] = info.get("finishedOn")
    return invocation | {k: v for k, v in optional.items() if v is not None}


def document(run: Run, *, category: str | None = None) -> dict[str, Any]:
    """The SARIF log as a dict; ``category`` tells several uploads of one repository apart."""
    tool = run.get("tool") or {}
    sarif_run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "keracheck",
                "version": str(tool.get("version", "")),
                "rules": [_rule(rule_id) for rule_id in RULE_IDS],
            }
        },
        "invocations": [_invocation(run)],
        "results": [_result(f) for f in findings(run)],
        "properties": {"summary": dict(run.get("summary") or {})},
    }
    if category:
        sarif_run["automationDetails"] = {"id": f"{category}/"}
    return {"$schema": SCHEMA, "version": "2.1.0", "runs": [sarif_run]}


def render(run: Run, *, category: str | None = None) -> str:
    """The SARIF log as indented JSON text."""
    return json.dumps(document(run, category=category), indent=2) + "\n"
