"""Render once (issue 22): ``--output-format FMT=PATH`` writes several reports from one run;
``keracheck show`` renders a saved run or a signed report into every format, the same bytes
the run wrote; ``keracheck verify --format html`` says what was verified.  Bad specs are
usage errors (exit 2) found before anything runs."""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from keracheck import harness, signing
from keracheck.cli import FORMATS, main

PLUGINS = Path(__file__).parent / "plugins" / "fake_targets.py"
SOURCE = (
    "export fn mins(x: f32[8], y: f32[8]) -> f32[8] { min(x, y) }\n"
    "export fn adds(x: f32[4]) -> f32[4] { x + x }\n"
)
TARGETS = ("Minss", "Broken", "NoMin", "Missing")  # diverges, raises, unsupported, unavailable


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One run of every outcome (agree, diverge, target error with traceback, unsupported,
    unavailable, an input error, a stale baseline entry) written in every format at once, as
    JSON, and as a signed report."""
    root = tmp_path_factory.mktemp("render-once")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        mp.delenv("GITHUB_STEP_SUMMARY", raising=False)
        (root / "case.kera").write_text(SOURCE)
        (root / "bad.kera").write_text("export fn broken(\n")
        stale = {"fingerprint": "0" * 64, "targets": ["ref", "minss"], "output": 0}
        (root / "base.json").write_text(
            json.dumps({"schemaVersion": 1, "entries": [stale | {"reason": "gone"}]})
        )
        assert main(["keygen", "--out", "keys"]) == 0
        argv = ["run", "case.kera", "bad.kera", "--targets", "ref", "--baseline", "base.json"]
        argv += [a for t in TARGETS for a in ("--backend-plugin", f"{PLUGINS}:{t}")]
        argv += ["-q", "--no-cache", "--format", "json", "--output", "run.json"]
        argv += ["--report", "run.intoto.jsonl", "--key", "keys/keracheck.key"]
        argv += [a for f in FORMATS for a in ("--output-format", f"{f}=out/run.{f}")]
        assert main(argv) == 1  # minss diverges
        yield root


def test_one_run_writes_every_format(saved: Path) -> None:
    assert sorted(p.name for p in (saved / "out").iterdir()) == sorted(f"run.{f}" for f in FORMATS)
    assert (saved / "out" / "run.json").read_bytes() == (saved / "run.json").read_bytes()
    doc = json.loads((saved / "run.json").read_text())
    statuses = {e["status"] for c in doc["cases"] for e in c["targets"].values()}
    assert statuses == {"ok", "error", "unsupported", "unavailable"}
    assert doc["errors"] and doc["staleBaseline"]
    assert any("traceback" in e for c in doc["cases"] for e in c["targets"].values())
    assert not [p for p in (saved / "out").iterdir() if p.name.startswith(".")]  # no temporaries


@pytest.mark.parametrize("fmt", FORMATS)
def test_show_renders_a_signed_report_as_the_run_did(
    fmt: str, saved: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(saved)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    shown = saved / f"shown-report.{fmt}"
    assert main(["show", "run.intoto.jsonl", "--format", fmt, "--output", str(shown)]) == 1
    assert shown.read_bytes() == (saved / "out" / f"run.{fmt}").read_bytes()


@pytest.mark.parametrize("fmt", [f for f in FORMATS if f != "html"])  # html: the banner differs
def test_show_renders_a_saved_run_as_the_run_did(
    fmt: str, saved: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(saved)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    shown = saved / f"shown-json.{fmt}"
    assert main(["show", "run.json", "--format", fmt, "--output", str(shown)]) == 1
    assert shown.read_bytes() == (saved / "out" / f"run.{fmt}").read_bytes()


def test_show_writes_several_formats_too(
    saved: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(saved)
    argv = ["show", "run.intoto.jsonl", "--format", "text"]
    argv += [
        "--output-format",
        f"sarif={tmp_path}/a.sarif",
        "--output-format",
        f"junit={tmp_path}/a.xml",
    ]
    assert main(argv) == 1
    assert capsys.readouterr().out == (saved / "out" / "run.text").read_text()
    assert (tmp_path / "a.sarif").read_bytes() == (saved / "out" / "run.sarif").read_bytes()
    assert (tmp_path / "a.xml").read_bytes() == (saved / "out" / "run.junit").read_bytes()


def test_show_says_whether_the_report_was_verified(
    saved: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(saved)
    page = tmp_path / "p.html"
    assert main(["show", "run.intoto.jsonl", "--format", "html", "--output", str(page)]) == 1
    assert "signatures not checked (give --key PUB" in capsys.readouterr().err
    assert 'class="sig sig-signed"' in page.read_text()
    argv = ["show", "run.intoto.jsonl", "--key", "keys/keracheck.pub", "--format", "html"]
    assert main([*argv, "--output", str(page)]) == 1
    assert capsys.readouterr().err == ""
    text = page.read_text()
    keyid = signing.keyid(signing.load_public_key("keys/keracheck.pub"))
    assert 'class="sig sig-verified"' in text and keyid in text
    assert main(_verify_command(text)) == 0


def _tampered(saved: Path, tmp_path: Path) -> Path:
    lines = (saved / "run.intoto.jsonl").read_bytes().splitlines(keepends=True)
    envelope = json.loads(lines[0])
    payload = base64.b64decode(envelope["payload"]).replace(b'"agree"', b'"AGREE"', 1)
    payload = payload.replace(b'"diverge"', b'"agree"', 1)
    envelope["payload"] = base64.b64encode(payload).decode()
    bad = tmp_path / "bad.intoto.jsonl"
    bad.write_bytes(signing.canonical_json(envelope) + b"\n" + b"".join(lines[1:]))
    return bad


def test_show_refuses_a_report_that_does_not_hold_together(
    saved: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(saved)
    bad = _tampered(saved, tmp_path)
    assert main(["show", str(bad), "--key", "keys/keracheck.pub"]) == 2
    assert "line 1: no signature verifies" in capsys.readouterr().err
    assert main(["show", str(bad)]) == 2  # no key: the summary's binding still catches it
    assert "line 1: statement is not the one the summary lists" in capsys.readouterr().err
    assert main(["show", "run.json", "--key", "keys/keracheck.pub"]) == 2
    assert "--key is for signed reports" in capsys.readouterr().err


def _old_style(saved: Path, tmp_path: Path) -> Path:
    """The report as a keracheck before render-once wrote it: sorted payloads, without the
    fields added so that a report rebuilds its run exactly."""
    key = signing.load_private_key(str(saved / "keys" / "keracheck.key"))
    lines = (saved / "run.intoto.jsonl").read_bytes().splitlines()
    statements = [json.loads(base64.b64decode(json.loads(line)["payload"])) for line in lines]
    for s in statements[:-1]:
        p = s["predicate"]
        for k in ("kegSize", "source"):
            p.pop(k, None)
        p["inputs"].pop("profile", None)
        for record in p["targets"].values():
            record.pop("seconds", None)
            record.pop("traceback", None)
    summary = statements[-1]["predicate"]
    del summary["errors"], summary["staleBaseline"]
    payloads = [signing.canonical_json(s) for s in statements[:-1]]
    for entry, payload in zip(summary["cases"], payloads, strict=True):
        entry["statement"] = {"sha256": hashlib.sha256(payload).hexdigest()}
    payloads.append(signing.canonical_json(statements[-1]))
    old = tmp_path / "old.intoto.jsonl"
    old.write_bytes(
        b"".join(signing.canonical_json(signing.sign_payload(p, key)) + b"\n" for p in payloads)
    )
    return old


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_older_report_renders_what_it_holds(
    fmt: str,
    saved: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(saved)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    old = _old_style(saved, tmp_path)
    assert main(["show", str(old), "--key", "keys/keracheck.pub", "--format", fmt]) == 1
    captured = capsys.readouterr()
    assert (
        "written by an older keracheck; it does not record .keg sizes, input errors" in captured.err
    )
    assert "minss" in captured.out


def test_report_predicates_match_the_schema(saved: Path) -> None:
    jsonschema = pytest.importorskip(
        "jsonschema", reason="jsonschema not installed: pip install jsonschema"
    )
    from test_formats import schema_validator

    case = schema_validator(jsonschema, "predicate-v1.json")
    run = schema_validator(jsonschema, "predicate-v1.json", "#/$defs/runPredicate")
    lines = (saved / "run.intoto.jsonl").read_bytes().splitlines()
    statements = [json.loads(base64.b64decode(json.loads(line)["payload"])) for line in lines]
    for statement in statements[:-1]:
        case.validate(statement["predicate"])
        assert "seconds" in statement["predicate"]["targets"]["ref"]
    run.validate(statements[-1]["predicate"])


def _verify_command(page: str) -> list[str]:
    """The 'Verify offline' command a page prints, as argv for main()."""
    found = re.search(r"Verify offline: <code>(.*?)</code>", page)
    assert found, "the page prints no verify command"
    argv = shlex.split(html.unescape(found[1]))
    assert argv[0] == "keracheck"
    return argv[1:]


def test_verify_html_banner_says_what_was_verified(
    saved: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(saved)
    page = tmp_path / "v.html"
    argv = ["verify", "run.intoto.jsonl", "--key", "keys/keracheck.pub", "--format", "html"]
    assert main([*argv, "--output", str(page)]) == 0
    assert capsys.readouterr().err.startswith("VERIFIED run.intoto.jsonl: 3 envelopes")
    text = page.read_text()
    keyid = signing.keyid(signing.load_public_key("keys/keracheck.pub"))
    assert 'class="sig sig-verified"' in text and keyid in text and "3 envelopes" in text
    assert "case.kera" in text and "minss" in text  # the run itself follows
    assert main(_verify_command(text)) == 0  # the command the page prints runs as printed
    plugins = [a for t in ("Minss", "NoMin") for a in ("--backend-plugin", f"{PLUGINS}:{t}")]
    assert main([*argv, "--rerun", *plugins, "--output", str(page)]) == 0
    assert "Rerun: 5 recorded outputs reproduce here, 0 not re-run here." in page.read_text()
    assert main([*argv[:1], str(_tampered(saved, tmp_path)), *argv[2:], "--output", str(page)]) == 1
    text = page.read_text()
    assert 'class="sig sig-failed"' in text and "line 1: no signature verifies" in text
    assert "case.kera" not in text  # nothing unauthenticated is shown


def _no_run(*_: Any) -> Any:
    raise AssertionError("the run started although an output spec is bad")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("bogus=x.txt", "unknown format 'bogus' (choose from text, json"),
        ("html", "expected FMT=PATH"),
        ("html=", "expected FMT=PATH"),
        ("html={tmp}", "is a directory"),
        ("html={tmp}/afile/x.html", "cannot write in"),
        ("json={tmp}/out.json", "is written twice"),
    ],
)
def test_bad_output_specs_are_usage_errors_before_the_run(
    spec: str,
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(harness, "run", _no_run)
    (tmp_path / "afile").write_text("")
    argv = ["run", "x.kera", "--output", str(tmp_path / "out.json")]
    assert main([*argv, "--output-format", spec.format(tmp=tmp_path)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_output_formats_from_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.kera").write_text("export fn f(x: i32[4]) -> i32[4] { x + x }\n")
    config = '[tool.keracheck]\ntargets = ["ref"]\noutput-formats = ["sarif=reports/c.sarif"]\n'
    (tmp_path / "pyproject.toml").write_text(config)
    assert main(["run", "c.kera", "-q", "--no-cache"]) == 0
    assert json.loads((tmp_path / "reports" / "c.sarif").read_text())["version"] == "2.1.0"
    (tmp_path / "reports" / "c.sarif").unlink()
    assert main(["run", "c.kera", "-q", "--no-cache", "--output-format", "json=c.json"]) == 0
    assert (tmp_path / "c.json").exists() and not (tmp_path / "reports" / "c.sarif").exists()
    (tmp_path / "pyproject.toml").write_text('[tool.keracheck]\noutput-formats = "sarif=x"\n')
    assert main(["run", "c.kera", "-q"]) == 2
    assert "'output-formats' has the wrong type" in capsys.readouterr().err


def test_fuzz_writes_its_result_in_several_formats(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["fuzz", "--output-format", "html=x.html"]) == 2
    assert "unknown format 'html' (choose from text, json)" in capsys.readouterr().err
    argv = ["fuzz", "--targets", "ref", "--max-examples", "1", "--out", "regs"]
    argv += ["--output-format", "json=o/f.json", "--output-format", "text=o/f.txt"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "o" / "f.txt").read_text() == out
    assert json.loads((tmp_path / "o" / "f.json").read_text())["exitCode"] == 0
