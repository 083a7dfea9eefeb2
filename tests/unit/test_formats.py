"""Report formats on one sample run: an agreeing, a diverging (NaN payload + 1 ulp) and an
erroring case, plus an unavailable target.  ``sample_run`` is also used by test_signing.py and
tests/toolchain/test_html_chromium.py."""

from __future__ import annotations

import copy
import hashlib
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from keracheck.formats import (
    FORMATS,
    findings,
    float_fields,
    github,
    html,
    mismatch_rows,
    render,
    rule_for,
    sarif,
    text,
)

SCHEMAS = Path(__file__).resolve().parents[2] / "keracheck" / "schemas"
ERROR_PATH = "corpora/odd,dir/a:b%.kera"
ERROR_MESSAGE = "gcc failed: 100% broken\nline 2, col 3 <&>"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _ok(seed: str, loaded: str) -> dict[str, Any]:
    return {
        "status": "ok",
        "message": None,
        "loadedFingerprint": loaded,
        "seconds": 0.01,
        "outputs": [{"index": 0, "dtype": "f32", "shape": [64, 8], "sha256": _sha(seed)}],
        "artifacts": {},
    }


def _error(loaded: str) -> dict[str, Any]:
    return {
        "status": "error",
        "message": ERROR_MESSAGE,
        "loadedFingerprint": None,
        "seconds": 0.5,
        "outputs": [],
        "artifacts": {"main.c": _sha("int main;")},
    }


def _case(name: str, path: str, function: str, verdict: str) -> dict[str, Any]:
    keg = name.encode()
    fp = hashlib.sha3_256(keg).hexdigest()
    return {
        "fingerprint": fp,
        "path": path,
        "function": function,
        "source": {"path": path, "line": 12, "column": 1},
        "verdict": verdict,
        "keg": {"sha3_256": fp, "sha256": hashlib.sha256(keg).hexdigest(), "size": len(keg)},
        "inputs": {"seed": 0, "n": 64, "source": "generated", "digests": {"x": _sha("x")}},
        "targets": {"ref": _ok(name, fp), "cpu": _ok(name, fp)},
        "divergences": [],
        "repro": f"keracheck repro {fp} --targets ref,cpu",
    }


NAN_EXAMPLE: dict[str, Any] = {
    "index": [5, 2],
    "class": "nan-payload",
    "bits": {"ref": "0x7fc00000", "cpu": "0xffc00000"},
    "fields": {
        "ref": "0|11111111|10000000000000000000000",
        "cpu": "1|11111111|10000000000000000000000",
    },
}
ULP_EXAMPLE: dict[str, Any] = {
    "index": [7, 0],
    "class": "ulp(1)",
    "bits": {"ref": "0x3f800000", "cpu": "0x3f800001"},
}


def divergence(**changes: Any) -> dict[str, Any]:
    record = {
        "targets": ["ref", "cpu"],
        "output": 0,
        "mismatched": 3,
        "total": 512,
        "classes": {"nan-payload": 1, "ulp(1)": 2},
        "maxUlp": 1,
        "kind": "diverge",
        "baselined": False,
        "reason": None,
        "examples": [copy.deepcopy(NAN_EXAMPLE), copy.deepcopy(ULP_EXAMPLE)],
    }
    return record | changes


def sample_run() -> dict[str, Any]:
    """Three cases (agree, diverge, error) on ref and cpu; ptx-gpu unavailable."""
    agree = _case("agree", "corpora/arith.kera", "add_f32", "agree")
    diverge = _case("diverge", "corpora/nan.kera", "div_f32", "diverge")
    diverge["targets"]["cpu"] = _ok("diverge-cpu", diverge["fingerprint"])
    diverge["divergences"] = [divergence()]
    error = _case("error", ERROR_PATH, "crash", "error")
    error["targets"]["cpu"] = _error(error["fingerprint"])
    return {
        "schemaVersion": 1,
        "tool": {"name": "keracheck", "version": "0.1.0"},
        "run": {
            "startedOn": "2026-12-02T12:00:00Z",
            "finishedOn": "2026-12-02T12:00:05Z",
            "seed": 0,
            "inputs": 64,
            "targets": ["ref", "cpu"],
            "repeat": 1,
            "command": "keracheck run corpora/",
        },
        "summary": {
            "cases": 3,
            "agree": 1,
            "diverge": 1,
            "error": 1,
            "skipped": 0,
            "baselined": 0,
            "exitCode": 3,
        },
        "targets": [
            {
                "id": "ref",
                "available": True,
                "reason": None,
                "fix": None,
                "versions": {"numpy": "2.4.6"},
            },
            {
                "id": "cpu",
                "available": True,
                "reason": None,
                "fix": None,
                "versions": {"gcc": "14.2.0"},
            },
            {
                "id": "ptx-gpu",
                "available": False,
                "reason": "no CUDA driver",
                "fix": "install the NVIDIA driver",
                "versions": {},
            },
        ],
        "cases": [agree, diverge, error],
    }


def many_findings_run(n: int) -> dict[str, Any]:
    run = sample_run()
    template = run["cases"][1]
    run["cases"] = []
    for i in range(n):
        case = copy.deepcopy(template)
        case["fingerprint"] = hashlib.sha3_256(b"%d" % i).hexdigest()
        case["function"] = f"f{i}"
        run["cases"].append(case)
    return run


# ------------------------------------------------------------------------------------- shared


def test_every_format_renders_to_text() -> None:
    run = sample_run()
    for fmt in FORMATS:
        kwargs = {"step_summary": None} if fmt == "github" else {}
        out = render(fmt, run, **kwargs)
        assert isinstance(out, str) and out.endswith("\n"), fmt


def test_unknown_format_names_the_choices() -> None:
    with pytest.raises(ValueError, match="choose one of text, json, junit"):
        render("yaml", sample_run())


def test_unknown_option_is_an_error() -> None:
    with pytest.raises(TypeError):
        render("text", sample_run(), colour=True)


def test_json_round_trips() -> None:
    run = sample_run()
    assert json.loads(render("json", run)) == run


@pytest.mark.parametrize(
    ("classes", "kind", "rule"),
    [
        ({"nan-payload": 1, "ulp(1)": 2}, "diverge", "KC001"),
        ({"nan-payload": 2}, "diverge", "KC002"),
        ({"nan-payload": 1, "signed-zero": 1}, "diverge", "KC002"),
        ({"signed-zero": 1}, "nondeterministic", "KC004"),
        ({"subnormal-flush": 1}, "diverge", "KC001"),
        ({"int": 4}, "diverge", "KC001"),
    ],
)
def test_rule_ids(classes: dict[str, int], kind: str, rule: str) -> None:
    assert rule_for(divergence(classes=classes, kind=kind)) == rule


def test_findings_are_divergences_then_errors_in_case_order() -> None:
    found = findings(sample_run())
    assert [f.rule for f in found] == ["KC001", "KC003"]
    assert found[0].partial_fingerprint.endswith(":ref:cpu:0")
    assert found[1].partial_fingerprint.endswith(":cpu:error")


@pytest.mark.parametrize(
    ("bits", "fields"),
    [
        ("0x7fc00000", "0|11111111|10000000000000000000000"),
        ("0x80000001", "1|00000000|00000000000000000000001"),
        ("0x7ff8000000000001", "0|11111111111|" + "1" + "0" * 50 + "1"),
        ("0x3c00", "0|01111|0000000000"),
        ("0x7", ""),
    ],
)
def test_float_fields(bits: str, fields: str) -> None:
    assert float_fields(bits) == fields


def test_mismatch_rows_fill_fields_and_ulp() -> None:
    rows = mismatch_rows(divergence())
    assert rows[0].fields["cpu"] == NAN_EXAMPLE["fields"]["cpu"]
    assert rows[0].ulp == "-"
    assert rows[1].fields["cpu"] == "0|01111111|00000000000000000000001"  # computed from bits
    assert rows[1].ulp == "1"


# ---------------------------------------------------------------------------------------- text


def test_text_plain_has_table_and_mismatches() -> None:
    out = render("text", sample_run())
    assert "\x1b[" not in out
    assert re.search(r"corpora/nan\.kera:div_f32\s+ok\s+DIFF\s+diverge", out)
    assert re.search(r"crash\s+ok\s+ERROR\s+error", out)
    assert "unavailable: ptx-gpu: no CUDA driver (fix: install the NVIDIA driver)" in out
    row = re.search(
        r"\[5, 2\]\s+0x7fc00000\s+0xffc00000\s+nan\s+nan\s+0\|11111111\|1\d+\s+1\|11111111\|", out
    )
    assert row is not None
    assert re.search(r"\[7, 0\].*ulp\(1\)\s+1$", out, re.M)
    assert "\n  line 2, col 3" in out  # continuation of a multi-line message stays indented


def test_text_terminal_uses_rich_colours() -> None:
    out = render("text", sample_run(), terminal=True, width=200)
    assert "\x1b[1;31mDIFF" in out
    assert "0x\x1b[1;31mf\x1b[0m" in out  # the differing hex digit is highlighted
    plain = re.sub(r"\x1b\[[0-9;]*m", "", out)
    assert "0xffc00000" in plain and "1|11111111|10000000000000000000000" in plain


def test_text_of_an_agreeing_run_has_no_sections() -> None:
    run = sample_run()
    run["cases"] = run["cases"][:1]
    out = render("text", run)
    assert "DIVERGE" not in out and "ERROR" not in out and "add_f32" in out


def test_divergence_text_marks_baselined() -> None:
    out = text.divergence_text(divergence(baselined=True, reason="known wasm NaN issue"))
    assert "[baselined: known wasm NaN issue]" in out


# --------------------------------------------------------------------------------------- junit


def test_junit_parses_and_has_one_testcase_per_case_and_target() -> None:
    root = ET.fromstring(render("junit", sample_run()))
    suite = root.find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    assert len(cases) == 6
    assert {c.get("classname") for c in cases} == {"keracheck.ref", "keracheck.cpu"}
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("6", "1", "1")
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["seed"] == "0" and properties["exitCode"] == "3"


def _testcase(root: ET.Element, classname: str, name_part: str) -> ET.Element:
    for case in root.iter("testcase"):
        if case.get("classname") == classname and name_part in (case.get("name") or ""):
            return case
    raise AssertionError(f"no testcase {classname} {name_part}")


def test_junit_failure_error_and_pass() -> None:
    root = ET.fromstring(render("junit", sample_run()))
    failing = _testcase(root, "keracheck.cpu", "div_f32")
    failure = failing.find("failure")
    assert failure is not None and failure.get("type") == "KC001"
    assert "3/512" in (failure.get("message") or "")
    assert "0xffc00000" in (failure.text or "") and "keracheck repro" in (failure.text or "")
    assert re.fullmatch(r"[0-9a-f]{12} corpora/nan\.kera:div_f32", failing.get("name") or "")
    assert list(_testcase(root, "keracheck.ref", "div_f32")) == []  # the oracle is not blamed
    error = _testcase(root, "keracheck.cpu", "crash").find("error")
    assert error is not None and error.get("message") == "gcc failed: 100% broken"
    assert ERROR_MESSAGE in (error.text or "")


def test_junit_skipped_baselined_and_control_characters() -> None:
    run = sample_run()
    run["cases"][0]["targets"]["cpu"] = {"status": "unsupported", "message": "no fma\x1b[0m"}
    run["cases"][1]["divergences"][0] |= {"baselined": True, "reason": "accepted"}
    root = ET.fromstring(render("junit", run))
    skipped = _testcase(root, "keracheck.cpu", "add_f32").find("skipped")
    assert skipped is not None and skipped.get("message") == "no fma\\x1b[0m"
    baselined = _testcase(root, "keracheck.cpu", "div_f32")
    assert baselined.find("failure") is None
    assert "baselined (accepted)" in (baselined.findtext("system-out") or "")


# --------------------------------------------------------------------------------------- sarif


def test_sarif_required_fields() -> None:
    log = json.loads(render("sarif", sample_run()))
    assert log["version"] == "2.1.0" and log["$schema"].endswith("sarif-2.1.0.json")
    (run,) = log["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "keracheck"
    assert [r["id"] for r in driver["rules"]] == ["KC001", "KC002", "KC003", "KC004", "KC005"]
    assert all(
        r["shortDescription"]["text"] and r["fullDescription"]["text"] for r in driver["rules"]
    )
    for result in run["results"]:
        assert driver["rules"][result["ruleIndex"]]["id"] == result["ruleId"]
        assert result["message"]["text"]
        assert result["level"] == "error"
        location = result["locations"][0]["physicalLocation"]
        assert location["artifactLocation"]["uriBaseId"] == "%SRCROOT%"
        assert location["region"]["startLine"] >= 1
    divergence_result, error_result = run["results"]
    fp = sample_run()["cases"][1]["fingerprint"]
    assert divergence_result["partialFingerprints"] == {"keracheck/v1": f"{fp}:ref:cpu:0"}
    assert divergence_result["properties"]["maxUlp"] == 1
    uri = error_result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri == "corpora/odd%2Cdir/a%3Ab%25.kera"
    assert run["invocations"][0]["exitCode"] == 3


def test_sarif_baselined_is_a_suppressed_note_and_category_is_kept() -> None:
    run = sample_run()
    run["cases"][1]["divergences"][0] |= {"baselined": True, "reason": "tracked in #12"}
    log = sarif.document(run, category="nightly")
    result = log["runs"][0]["results"][0]
    assert result["level"] == "note"
    assert result["suppressions"] == [{"kind": "external", "justification": "tracked in #12"}]
    assert log["runs"][0]["automationDetails"] == {"id": "nightly/"}


# -------------------------------------------------------------------------------------- github


def test_github_property_and_data_escaping() -> None:
    assert github.escape_property("a%b\r\nc:d,e") == "a%25b%0D%0Ac%3Ad%2Ce"
    assert github.escape_data("a%b\r\nc:d,e") == "a%25b%0D%0Ac:d,e"


def test_github_annotations() -> None:
    out = render("github", sample_run(), step_summary=None)
    lines = out.splitlines()
    errors = [line for line in lines if line.startswith("::error ")]
    assert len(errors) == 2
    assert errors[0].startswith(
        "::error file=corpora/nan.kera,line=12,col=1,title=KC001 bit-divergence%3A ref"
    )
    assert errors[1].startswith("::error file=corpora/odd%2Cdir/a%3Ab%25.kera,line=12,col=1,")
    message = errors[1].split("::", 2)[2]
    assert "100%25 broken%0Aline 2, col 3" in message and "\n" not in message
    assert lines[-1].startswith("keracheck: 3 cases")


def test_github_caps_annotations_and_writes_full_summary(tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    run = many_findings_run(14)
    out = github.render(run, step_summary=summary)
    assert sum(line.startswith("::error") for line in out.splitlines()) == 10
    assert "4 more errors; see the job summary" in out
    written = summary.read_text()
    assert written.startswith("earlier step\n## keracheck 0.1.0")
    assert written.count("| KC001 |") == 14
    assert "`0\\|11111111\\|10000000000000000000000`" in written


def test_github_summary_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    summary = tmp_path / "step.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    render("github", sample_run())
    assert "### Mismatches" in summary.read_text()
    monkeypatch.delenv("GITHUB_STEP_SUMMARY")
    render("github", sample_run())  # no variable, nothing written, no error


def test_github_baselined_findings_are_not_annotated() -> None:
    run = sample_run()
    run["cases"][1]["divergences"][0] |= {"baselined": True, "reason": "ok"}
    out = render("github", run, step_summary=None)
    assert "KC001" not in out and "KC003" in out


def test_github_summary_is_cut_at_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(github, "SUMMARY_LIMIT", 3000)
    out = github.markdown(many_findings_run(20))
    assert len(out.encode()) < 3200 and "1 MiB limit" in out


# ---------------------------------------------------------------------------------------- html


def test_html_is_self_contained() -> None:
    page = render("html", sample_run())
    assert page.startswith("<!DOCTYPE html>")
    assert "http://" not in page and "https://" not in page
    assert not re.search(r"<(script|link|img|iframe|object)\b", page)
    assert "url(" not in page and "@import" not in page
    assert all(href.startswith("#") for href in re.findall(r'href="([^"]*)"', page))
    assert "Content-Security-Policy" in page


def test_html_escapes_and_highlights() -> None:
    page = render("html", sample_run())
    assert "line 2, col 3 &lt;&amp;&gt;" in page and "<&>" not in page
    # sign bit differs for the NaN example, last mantissa bit for the ulp example
    assert '<span class="d">0</span>|11111111|1' in page
    assert '<span class="d">1</span>|11111111|1' in page
    assert '0|01111111|0000000000000000000000<span class="d">1</span>' in page
    assert page.count("<section") == 2  # the agreeing case is a row in a folded table


@pytest.mark.parametrize("status", ["verified", "unsigned", "failed"])
def test_html_signature_banner(status: str) -> None:
    signature = {"status": status, "keyid": "ab" * 32, "report": "run.intoto.jsonl"}
    page = html.render(sample_run(), signature=signature)
    top = page[: page.index("<h1>")]
    assert f"sig-{status}" in top and "ab" * 32 in top
    assert "keracheck verify run.intoto.jsonl --key keracheck.pub" in top


def test_html_default_is_unsigned_and_bad_status_is_refused() -> None:
    assert "Unsigned report" in html.render(sample_run())
    with pytest.raises(ValueError, match="signature status"):
        html.render(sample_run(), signature={"status": "maybe"})


def test_html_index_lists_worst_first() -> None:
    page = html.render(sample_run())
    index = page[page.index("<h2>Cases</h2>") :]
    assert index.index("div_f32") < index.index("crash") < index.index("add_f32")


# ------------------------------------------------------------------------------------- schemas


def test_sample_run_matches_run_schema() -> None:
    jsonschema = pytest.importorskip(
        "jsonschema", reason="jsonschema not installed: pip install jsonschema"
    )
    validator = schema_validator(jsonschema, "run-v1.json")
    validator.validate(sample_run())
    validator.validate(_noted_run())
    broken = sample_run()
    broken["cases"][0]["verdict"] = "fine"
    assert not validator.is_valid(broken)
    broken = sample_run()
    broken["cases"][1]["divergences"][0]["classes"] = {"ulp": 2}  # must be ulp(k)
    assert not validator.is_valid(broken)


def schema_validator(jsonschema: Any, name: str, fragment: str = "") -> Any:
    """A draft 2020-12 validator for one of keracheck's schemas, with both registered."""
    from referencing import Registry, Resource

    resources = [Resource.from_contents(json.loads(p.read_text())) for p in SCHEMAS.glob("*.json")]
    registry: Registry[Any] = Registry()
    for resource in resources:
        jsonschema.Draft202012Validator.check_schema(resource.contents)
        uri = resource.id()
        assert uri is not None, f"schema without $id: {resource.contents}"
        registry = registry.with_resource(uri, resource)
    root = json.loads((SCHEMAS / name).read_text())
    schema = {"$ref": root["$id"] + fragment} if fragment else root
    return jsonschema.Draft202012Validator(schema, registry=registry)


def _edge_run() -> dict[str, Any]:
    """A skipped case (only ref could run) and a nondeterministic one without examples."""
    run = sample_run()
    skipped = run["cases"][0] | {"verdict": "skipped"}
    skipped["targets"] = {"ref": skipped["targets"]["ref"], "cpu": {"status": "unavailable"}}
    flaky = copy.deepcopy(run["cases"][1])
    flaky["divergences"] = [
        divergence(targets=["cpu"], kind="nondeterministic", classes={"ulp(3)": 1}, examples=[])
    ]
    run["cases"] = [skipped, flaky]
    return run


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_handles_empty_skipped_and_nondeterministic(fmt: str) -> None:
    kwargs: dict[str, Any] = {"step_summary": None} if fmt == "github" else {}
    empty = sample_run() | {"cases": []}
    assert render(fmt, empty, **kwargs)
    out = render(fmt, _edge_run(), **kwargs)
    if fmt == "sarif":
        (result,) = json.loads(out)["runs"][0]["results"]
        assert result["ruleId"] == "KC004"
        assert result["partialFingerprints"]["keracheck/v1"].endswith(":cpu:cpu:0")
    if fmt == "junit":
        root = ET.fromstring(out)
        assert _testcase(root, "keracheck.cpu", "add_f32").find("skipped") is not None
        failure = _testcase(root, "keracheck.cpu", "div_f32").find("failure")
        assert failure is not None and failure.get("type") == "KC004"
    if fmt == "text":
        assert "cpu (repeats), output 0: 3/512 elements differ" in out


def _noted_run() -> dict[str, Any]:
    """An input error, a stale baseline entry and the run's own failure message."""
    run = sample_run()
    run["errors"] = [{"path": "corpora/bad,1.kera", "message": "line 3: expected ')'"}]
    run["staleBaseline"] = [
        {
            "fingerprint": "f" * 64,
            "path": "corpora/old.kera",
            "function": "g",
            "targets": ["ref", "wasm"],
            "output": 1,
            "classes": {"nan-payload": 1},
            "reason": "wasm NaN bits",
        }
    ]
    run["summary"] |= {"message": "required target 'ptx-gpu' is unavailable: no CUDA driver"}
    return run


def test_run_notes_reach_every_format() -> None:
    run = _noted_run()
    out = render("text", run)
    assert "error: corpora/bad,1.kera: input error: line 3: expected ')'" in out
    assert "warning: corpora/old.kera: stale baseline entry ffffffffffff:ref:wasm:1" in out
    assert "error: required target 'ptx-gpu' is unavailable" in out
    lines = render("github", run, step_summary=None).splitlines()
    assert lines[0].startswith("::error title=keracheck required target 'ptx-gpu' is unavailable::")
    assert lines[1].startswith("::error file=corpora/bad%2C1.kera,title=keracheck input error::")
    assert any(line.startswith("::warning file=corpora/old.kera,") for line in lines)
    assert "stale baseline entry" in github.markdown(run)
    root = ET.fromstring(render("junit", run))
    inputs = [c for c in root.iter("testcase") if c.get("classname") == "keracheck.inputs"]
    assert [c.get("name") for c in inputs] == ["run", "corpora/bad,1.kera"]
    suite = root.find("testsuite")
    assert suite is not None and suite.get("errors") == "3"
    notes = json.loads(render("sarif", run))["runs"][0]["invocations"][0]
    levels = [n["level"] for n in notes["toolExecutionNotifications"]]
    assert levels == ["error", "error", "warning"]
    page = render("html", run)
    assert "input error: line 3: expected &#x27;)&#x27;" in page


def test_many_ulp_distances_are_summed_into_ranges() -> None:
    from keracheck.formats import classes_text

    few = {"classes": {"nan-payload": 1, "ulp(1)": 2, "ulp(7)": 1}}
    assert classes_text(few) == "nan-payload 1, ulp(1) 2, ulp(7) 1"
    spread = {f"ulp({d})": 1 for d in (1, 2, 3, 300, 70_000, 3_180_751_948)}
    text = classes_text({"classes": {"signed-zero": 2, **spread}})
    assert text == "signed-zero 2, ulp(1) 1, ulp(2-15) 2, ulp(256-65535) 1, ulp(>=65536) 2"
