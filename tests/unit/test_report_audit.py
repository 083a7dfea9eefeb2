"""The audit log in signed reports: a real run's chain verifies and ``keracheck verify`` prints
the capabilities granted; a chain changed inside a (re-)signed report is detected and named by
``verify`` and ``audit show``; a ring that overwrote entries still verifies."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from keracheck import signing
from keracheck.cli import main

SOURCE = "export fn twice(x: f32[4]) -> f32[4] {\n    x + x\n}\n"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "a.kera").write_text(SOURCE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KERACHECK_CACHE", str(tmp_path / "cache"))
    assert main(["keygen", "--out", "keys"]) == 0
    return tmp_path


def signed_run(project: Path, *extra: str) -> Path:
    report = project / "run.intoto.jsonl"
    args = ["run", "corpus", "--targets", "ref", "-q", "--inputs", "4", "--report", str(report)]
    code = main(
        [*args, "--key", "keys/keracheck.key", "--output-format", "html=out/run.html", *extra]
    )
    assert code == 0
    return report


def summary_of(report: Path) -> dict[str, Any]:
    last = json.loads(report.read_bytes().splitlines()[-1])
    predicate: dict[str, Any] = json.loads(base64.b64decode(last["payload"]))["predicate"]
    return predicate


def test_a_real_run_records_its_capabilities_and_events(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = signed_run(project)
    audit = summary_of(report)["audit"]
    kinds = [e["kind"] for e in audit["entries"]]
    assert kinds[0] == "start" and kinds[-1] == "report"
    assert {"grant", "use", "key", "written", "sandbox"} <= set(kinds)
    (written,) = [e["data"] for e in audit["entries"] if e["kind"] == "written"]
    html = (project / "out" / "run.html").read_bytes()
    assert written["sha256"] == hashlib.sha256(html).hexdigest() and written["format"] == "html"
    (key,) = [e["data"] for e in audit["entries"] if e["kind"] == "key"]
    pub = signing.load_public_key(project / "keys" / "keracheck.pub")
    assert key["keyid"] == signing.keyid(pub)
    capsys.readouterr()
    assert main(["verify", str(report), "--key", "keys/keracheck.pub"]) == 0
    out = capsys.readouterr().out
    assert "capabilities granted when this report was made:" in out
    assert f"write {project / 'out' / 'run.html'} (command line: --output-format)" in out
    assert "toolchain ref (command line: --targets)" in out
    assert "network: never" in out and "audit log: chain verified" in out


def test_the_summary_predicate_matches_its_schema(project: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    from test_formats import schema_validator

    validator = schema_validator(jsonschema, "predicate-v1.json", "#/$defs/runPredicate")
    validator.validate(summary_of(signed_run(project)))


def test_audit_show_renders_the_log(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = signed_run(project)
    capsys.readouterr()
    assert main(["audit", "show", str(report), "--key", "keys/keracheck.pub"]) == 0
    out = capsys.readouterr().out
    assert "capabilities granted:" in out and "chain verified: head seq" in out
    assert main(["audit", "show", str(report), "--format", "json", "--output", "audit.json"]) == 0
    assert "signatures not checked" in capsys.readouterr().err
    shown = json.loads((project / "audit.json").read_text())
    assert shown["verified"] is True and shown["log"] == summary_of(report)["audit"]


def resign(report: Path, change: Callable[[dict[str, Any]], object]) -> None:
    """Change the summary's audit log and sign the summary again with the same key, as a
    keracheck that lied about its log could: the signature holds, the chain must not."""
    lines = report.read_bytes().splitlines()
    statement = json.loads(base64.b64decode(json.loads(lines[-1])["payload"]))
    change(statement["predicate"]["audit"])
    key = signing.load_private_key(report.parent / "keys" / "keracheck.key")
    envelope = signing.sign_payload(signing.payload_json(statement), key)
    lines[-1] = signing.canonical_json(envelope)
    report.write_bytes(b"\n".join(lines) + b"\n")


TAMPER: dict[str, tuple[Callable[[dict[str, Any]], object], str]] = {
    "a grant widened": (
        lambda a: a["entries"][1]["data"].update(scope="/"),
        "entry 1 (seq 1, grant): hash mismatch",
    ),
    "an entry dropped": (lambda a: a["entries"].pop(3), "seq 3 missing"),
    "entries reordered": (
        lambda a: a["entries"].insert(4, a["entries"].pop(3)),
        "comes after seq 4 (reordered)",
    ),
    "an entry duplicated": (lambda a: a["entries"].insert(2, a["entries"][2]), "is duplicated"),
    "the front cut": (lambda a: a["entries"].pop(0), "does not follow the checkpoint"),
}


@pytest.mark.parametrize("how", list(TAMPER))
def test_a_changed_chain_fails_verify_and_audit_show(
    how: str, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = signed_run(project)
    change, named = TAMPER[how]
    resign(report, change)
    capsys.readouterr()
    assert main(["verify", str(report), "--key", "keys/keracheck.pub"]) == 1
    out = capsys.readouterr().out
    assert "FAILED" in out and named in out and "audit log: chain BROKEN" in out
    assert main(["audit", "show", str(report), "--key", "keys/keracheck.pub"]) == 1
    out = capsys.readouterr().out
    assert "CHAIN BROKEN:" in out and named in out
    assert main(["show", str(report), "--key", "keys/keracheck.pub"]) == 2  # refused, not shown


def test_a_small_ring_overwrites_and_still_verifies(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "pyproject.toml").write_text(
        textwrap.dedent(
            """\
            [tool.keracheck]
            [tool.keracheck.policy]
            audit-capacity = 16
            """
        )
    )
    report = signed_run(project, "--output-format", "json=out/run.json")
    audit = summary_of(report)["audit"]
    assert audit["capacity"] == 16 and len(audit["entries"]) == 16
    assert audit["checkpoint"]["seq"] == audit["entries"][0]["seq"] - 1
    capsys.readouterr()
    assert main(["verify", str(report), "--key", "keys/keracheck.pub"]) == 0
    out = capsys.readouterr().out
    assert "older ones overwritten (checkpoint)" in out and "chain verified" in out
    resign(report, lambda a: a["entries"].pop(0))  # truncated past the checkpoint
    assert main(["verify", str(report), "--key", "keys/keracheck.pub"]) == 1
    assert "truncated past the checkpoint" in capsys.readouterr().out


def test_a_report_without_an_audit_log_still_verifies_and_says_so(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = signed_run(project)
    lines = report.read_bytes().splitlines()
    statement = json.loads(base64.b64decode(json.loads(lines[-1])["payload"]))
    del statement["predicate"]["audit"]
    key = signing.load_private_key(project / "keys" / "keracheck.key")
    lines[-1] = signing.canonical_json(signing.sign_payload(signing.payload_json(statement), key))
    report.write_bytes(b"\n".join(lines) + b"\n")
    capsys.readouterr()
    assert main(["verify", str(report), "--key", "keys/keracheck.pub"]) == 0
    assert "audit log: none" in capsys.readouterr().out
    assert main(["audit", "show", str(report)]) == 2
    assert "carries no audit log" in capsys.readouterr().err


DOCS = Path(__file__).resolve().parents[2] / "docs"


def docs_block(page: str, heading: str) -> str:
    text = (DOCS / page).read_text()
    match = re.search(r"```python\n(.*?)```", text[text.index(heading) :], re.S)
    assert match is not None, heading
    return match.group(1)


def test_the_offline_chain_check_in_the_docs_verifies_and_rejects(project: Path) -> None:
    script = project / "check_audit.py"
    script.write_text(docs_block("reports.md", "### The audit log"))
    report = signed_run(project)

    def check() -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, str(script), str(report)]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)

    done = check()
    assert done.returncode == 0, done.stderr
    assert "CHAIN VERIFIED" in done.stdout and "granted: toolchain ref" in done.stdout
    resign(report, lambda a: a["entries"][2]["data"].update(scope="/"))
    done = check()
    assert done.returncode == 1 and "BROKEN at seq 2" in done.stderr


def test_the_python_example_of_the_security_page_runs(project: Path) -> None:
    (project / "corpora").mkdir()
    (project / "corpora" / "b.kera").write_text(SOURCE)
    script = project / "example.py"
    script.write_text(docs_block("security.md", "From Python"))
    done = subprocess.run(
        [sys.executable, str(script)], cwd=project, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "toolchain ref" in done.stdout and "chain verified" in done.stdout
