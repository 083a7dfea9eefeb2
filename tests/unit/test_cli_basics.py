"""Small things people meet first: --version, did-you-mean for targets, files that are not Kera."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

import kera_hdl
from kera import version
from kera.cli import main as kerac
from keracheck.cli import main as keracheck


@pytest.mark.parametrize(("cli", "name"), [(kerac, "kerac"), (keracheck, "keracheck")])
def test_version_names_the_package_and_the_source(
    cli: Callable[[list[str]], int], name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code: int | str | None
    try:
        code = cli(["--version"])
    except SystemExit as e:  # kerac lets argparse exit; keracheck returns the code
        code = e.code
    assert code == 0
    out = capsys.readouterr().out.strip()
    assert re.fullmatch(rf"{name} \S+ \(source [0-9a-f]{{12}}\)", out), out
    assert version.source_digest().startswith(out[-13:-1])


def test_the_source_digest_covers_the_rtl_cores() -> None:
    """Cached Verilog results must not survive a change to a core."""
    rtl = Path(kera_hdl.__file__).parent
    assert any(rtl.rglob("*.v"))
    with_rtl = version.digest_of((kera_hdl,))
    assert with_rtl != version.digest_of(())


def test_unknown_target_suggests_the_closest(tmp_path: Path) -> None:
    src = tmp_path / "a.kera"
    src.write_text("export fn f(x: f32[4]) -> f32[4] { x + x }\n")
    out = tmp_path / "o.json"
    code = keracheck(["run", str(src), "--targets", "ref,cpux", "-q", "--format", "json", "--output", str(out)])  # fmt: skip
    assert code == 2
    messages = [e["message"] for e in json.loads(out.read_text())["errors"]]
    assert "unknown target 'cpux'; did you mean 'cpu'? (see 'keracheck targets')" in messages


def test_a_named_file_that_is_not_kera_is_an_input_error(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("export fn f(x: f32) -> f32 { x }\n")
    out = tmp_path / "o.json"
    code = keracheck(["run", str(notes), "--targets", "ref", "-q", "--format", "json", "--output", str(out)])  # fmt: skip
    doc = json.loads(out.read_text())
    assert code == 2 and doc["summary"]["cases"] == 0
    assert (
        "not a Kera file (expected a .kera source or a .keg graph)" in doc["errors"][0]["message"]
    )


def test_diagnostics_per_file_are_capped_in_a_run(tmp_path: Path) -> None:
    src = tmp_path / "many.kera"
    src.write_text("\n".join(f"export fn f{i}(x: f32) -> f32 {{ y{i} }}" for i in range(30)))
    out = tmp_path / "o.json"
    code = keracheck(["run", str(src), "--targets", "ref", "-q", "--format", "json", "--output", str(out)])  # fmt: skip
    (err,) = json.loads(out.read_text())["errors"]
    assert code == 2 and err["message"].count("error[E0101]") == 20
    assert f"... and 10 more (kerac check {src} lists all)" in err["message"]


def test_target_errors_keep_their_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plugins = Path(__file__).parent / "plugins" / "fake_targets.py"
    src = tmp_path / "a.kera"
    src.write_text("export fn f(x: f32[4]) -> f32[4] { x + x }\n")
    out = tmp_path / "o.json"
    args = ["run", str(src), "--targets", "ref", "--backend-plugin", f"{plugins}:Broken"]
    code = keracheck([*args, "-q", "-v", "--no-cache", "--format", "json", "--output", str(out)])
    entry = json.loads(out.read_text())["cases"][0]["targets"]["broken"]
    assert code == 3 and entry["status"] == "error"
    assert "fake_targets.py" in entry["traceback"] and "cannot run anything" in entry["traceback"]
    err = capsys.readouterr().err
    assert "traceback of broken on" in err and "raise RuntimeError" in err


def test_the_html_of_a_signed_run_says_it_is_signed(tmp_path: Path) -> None:
    src = tmp_path / "a.kera"
    src.write_text("export fn f(x: f32[4]) -> f32[4] { x + x }\n")
    assert keracheck(["keygen", "--out", str(tmp_path / "keys")]) == 0
    report, page = tmp_path / "r.intoto.jsonl", tmp_path / "run.html"
    code = keracheck(["run", str(src), "--targets", "ref", "-q", "--no-cache", "--format", "html",
                      "--output", str(page), "--report", str(report),
                      "--key", str(tmp_path / "keys" / "keracheck.key")])  # fmt: skip
    text = page.read_text()
    assert code == 0 and "Unsigned report" not in text
    assert "Signed report (not verified on this page)" in text
    assert f"keracheck verify {report}" in text
