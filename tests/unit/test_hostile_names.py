"""Hostile names: a `.keg` whose export or parameter names would break out of an emitted
artifact (a C comment, a PTX or Verilog identifier, a WASM export, a cocotb script, a report) is
refused when it is loaded, with a KegError naming the record; and hostile file paths, which no
loader can refuse, are escaped by every report format."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kera.ir
from kera import keg
from kera.dtypes import DType
from kera.ir import FunctionBuilder, Graph
from keracheck.cli import main
from keracheck.formats import render

# the reproducer of the injection (a C header comment closed by `*\` newline `/`), then
# terminators, quotes and control characters of each target language and report format
INJECTION = "f *\\\n/ __attribute__((constructor)) static void evil(void) { __builtin_trap(); } /*"
HOSTILE = [
    INJECTION,
    "x*/int evil;/*",
    "a\nb",
    "a\rb",
    'q"uote',
    "q'uote",
    "back\\slash",
    "nul\0byte",
    "ünïcode",
    "x" * 10_000,
    "</script><script>alert(1)</script>",
    "::error::forged",
    '$display("x"); $finish;',
    "a b",
    "",
    "1x",
    "%0A",
]


def hostile_keg(monkeypatch: pytest.MonkeyPatch, fn_name: str, param_name: str) -> bytes:
    """A .keg an attacker would write: well-formed, correct fingerprints, hostile names (made
    with the IR's name check switched off, as a hand-written file would be)."""
    with monkeypatch.context() as m:
        m.setattr(kera.ir, "check_name", lambda name, what: name)
        b = FunctionBuilder(fn_name)
        x = b.param(param_name, DType.F32, [4])
        return keg.dumps(Graph([b.build(b.op("add", x, x))]))


@pytest.mark.parametrize("name", HOSTILE, ids=range(len(HOSTILE)))
@pytest.mark.parametrize("where", ["export", "param"])
def test_the_loader_refuses_hostile_names(
    name: str, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = hostile_keg(monkeypatch, *((name, "x") if where == "export" else ("f", name)))
    with pytest.raises(keg.KegError, match="not an identifier") as e:
        keg.loads(data)
    text = str(e.value)
    assert ("exports section" if where == "export" else "nodes section") in text
    assert "\n" not in text and len(text) < 400  # the name is shown quoted and cut


def test_the_injection_never_reaches_a_compiler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    evil = tmp_path / "evil.keg"
    evil.write_bytes(hostile_keg(monkeypatch, INJECTION, "x"))
    out = tmp_path / "out.json"
    flags = ["--format", "json", "-q", "--output", str(out), "--no-cache"]
    code = main(["run", str(evil), "--targets", "ref,cpu", *flags])
    doc = json.loads(out.read_text())
    assert code == 2 and doc["summary"]["cases"] == 0
    (err,) = doc["errors"]
    assert "invalid .keg" in err["message"] and "not an identifier" in err["message"]


@settings(max_examples=200)
@given(st.text(min_size=0, max_size=300))
def test_any_name_is_an_identifier_or_refused(name: str) -> None:
    try:
        kera.ir.check_name(name, "function")
    except kera.ir.IRError:
        return
    assert name.isascii() and name.isidentifier() and len(name) <= kera.ir.NAME_MAX


HOSTILE_PATHS = [
    "corpora/</td><script>alert(1)</script>.kera",
    "corpora/a\n::error::forged.kera",
    "corpora/q\"uote's & <b>.kera",
    "corpora/nul\x00.kera",
    "corpora/comma,colon:percent%0A.kera",
]


@pytest.mark.parametrize("path", HOSTILE_PATHS, ids=range(len(HOSTILE_PATHS)))
def test_report_formats_escape_hostile_paths(path: str) -> None:
    from test_formats import sample_run  # a run with a divergence and an error

    run = sample_run()
    for case in run["cases"]:
        case["path"] = path
    run["errors"] = [{"path": path, "message": f"{path}: input error"}]
    assert json.loads(render("json", run))["cases"][0]["path"] == path
    sarif = json.loads(render("sarif", run))
    assert sarif["runs"][0]["results"]
    junit = ET.fromstring(render("junit", run).replace("\x00", ""))
    assert junit.tag in ("testsuites", "testsuite")
    page = render("html", run)
    assert "<script>alert(1)" not in page and "<b>.kera" not in page
    for line in render("github", run).splitlines():
        assert not line.startswith("::error::forged")
    for line in render("text", run).splitlines():
        assert not line.startswith("::error::forged")


@given(st.text(alphabet=st.sampled_from(["*", "/", "\\", "\n", "\r", "a", " "]), max_size=40))
def test_c_comments_cannot_be_closed_from_inside(text: str) -> None:
    """The C back end's second line of defence: what it puts in a comment cannot end it, even
    through backslash-newline line splicing."""
    from kera.backends.c.emit import comment

    body = comment(text)
    spliced = ("/* " + body + " */").replace("\\\n", "")
    assert spliced.count("*/") == 1 and spliced.endswith("*/")
    assert "\n" not in body and "\\" not in body
