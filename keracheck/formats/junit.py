"""JUnit XML (xunit2, pytest's ``junit_family`` default): one testcase per case x target.

Layout::

    <testsuites name="keracheck" tests= failures= errors= skipped= time=>
      <testsuite name="keracheck" ... timestamp=>
        <properties><property name="seed" value="0"/> ...</properties>   (suite level only)
        <testcase classname="keracheck.<target>" name="<fp12> <path>:<function>" time="s">
          <failure type="KC001" message="<summary>">path:line:col: KC001 ..., the first
                    diverging node, mismatch tables + repro</failure>
          | <error type="KC003" message="<first line>">message + repro</error>
          | <skipped type="unsupported" message="..."/>
          | <system-out>baselined divergences, with their reasons</system-out>

Input errors and the run's own failure (a required target unavailable) are testcases of
classname ``keracheck.inputs`` with an ``<error type="input">``.  A target fails a case when a divergence that is not baselined is blamed on it (the reference
``ref`` is never blamed for disagreeing with another target).  Text that XML 1.0 cannot hold
(control characters from a compiler's output) is written as ``\\xNN``.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from typing import Any

from keracheck.formats import (
    RULES,
    Note,
    Run,
    blamed,
    case_label,
    column_targets,
    mismatch_summary,
    rule_for,
    run_notes,
)
from keracheck.formats.text import divergence_text

_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(value: Any) -> str:
    """``value`` as a string XML 1.0 can carry (forbidden characters become ``\\xNN``)."""
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}", str(value))


def _repro(case: Mapping[str, Any]) -> str:
    return f"repro: {case['repro']}\n" if case.get("repro") else ""


def _outcome(case: Mapping[str, Any], target: str) -> ET.Element | None:
    result = case["targets"][target]
    status = result["status"]
    if status == "error":
        message = xml_text(result.get("message") or "target failed")
        element = ET.Element("error", type="KC003", message=message.split("\n")[0])
        element.text = f"{message}\n{_repro(case)}"
        return element
    if status != "ok":
        return ET.Element("skipped", type=status, message=xml_text(result.get("message") or status))
    failing = [
        d for d in case.get("divergences") or [] if target in blamed(d) and not d.get("baselined")
    ]
    if not failing:
        return None
    first = failing[0]
    element = ET.Element("failure", type=rule_for(first))
    element.set("message", f"{RULES[rule_for(first)].name}: {mismatch_summary(first)}")
    body = "".join(divergence_text(d, case) for d in failing)
    element.text = xml_text(body + _repro(case))
    return element


def _baselined_note(case: Mapping[str, Any], target: str) -> str:
    notes = [
        f"baselined ({d.get('reason') or 'no reason given'}): {mismatch_summary(d)}\n"
        for d in case.get("divergences") or []
        if target in blamed(d) and d.get("baselined")
    ]
    return xml_text("".join(notes))


def _testcase(case: Mapping[str, Any], target: str) -> ET.Element:
    seconds = float(case["targets"][target].get("seconds") or 0.0)
    element = ET.Element(
        "testcase",
        classname=f"keracheck.{target}",
        name=xml_text(case_label(case)),
        time=f"{seconds:.3f}",
    )
    outcome = _outcome(case, target)
    if outcome is not None:
        element.append(outcome)
    note = _baselined_note(case, target)
    if note:
        ET.SubElement(element, "system-out").text = note
    return element


def _note_testcase(note: Note) -> ET.Element:
    """An input error as a failed-to-collect test, as pytest reports a collection error."""
    element = ET.Element(
        "testcase", classname="keracheck.inputs", name=xml_text(note.path or "run")
    )
    error = ET.SubElement(
        element, "error", type="input", message=xml_text(note.text.split("\n")[0])
    )
    error.text = xml_text(note.text)
    return element


def _properties(run: Run) -> ET.Element:
    info, tool = run.get("run") or {}, run.get("tool") or {}
    values = {
        "keracheck.version": tool.get("version"),
        "command": info.get("command"),
        "seed": info.get("seed"),
        "inputs": info.get("inputs"),
        "repeat": info.get("repeat"),
        "targets": ",".join(info.get("targets") or []),
        "exitCode": (run.get("summary") or {}).get("exitCode"),
    }
    properties = ET.Element("properties")
    for name, value in values.items():
        if value is not None:
            ET.SubElement(properties, "property", name=name, value=xml_text(value))
    return properties


def _count(cases: list[ET.Element], tag: str) -> str:
    return str(sum(1 for c in cases if c.find(tag) is not None))


def render(run: Run) -> str:
    """The whole run as one xunit2 document (UTF-8 XML with a declaration)."""
    order = column_targets(run)
    cases = [
        _testcase(case, target)
        for case in run.get("cases") or []
        for target in order
        if target in case["targets"]
    ]
    cases += [_note_testcase(n) for n in run_notes(run) if n.level == "error"]
    seconds = sum(float(c.get("time") or 0) for c in cases)
    counts = {
        "tests": str(len(cases)),
        "failures": _count(cases, "failure"),
        "errors": _count(cases, "error"),
        "skipped": _count(cases, "skipped"),
        "time": f"{seconds:.3f}",
    }
    root = ET.Element("testsuites", {"name": "keracheck", **counts})
    started = (run.get("run") or {}).get("startedOn") or ""
    suite = ET.SubElement(root, "testsuite", {"name": "keracheck", "timestamp": started, **counts})
    suite.append(_properties(run))
    suite.extend(cases)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
