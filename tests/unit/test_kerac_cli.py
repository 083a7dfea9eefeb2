"""kerac end to end: every subcommand, and clear errors with documented exit codes."""

from __future__ import annotations

from pathlib import Path

import pytest

from kera.cli import main

SRC = """// a small program
export fn saxpy(a: f32, x: f32[8], y: f32[8]) -> f32[8] {
    let ax = a * x;
    ax + y
}

export fn bits() -> f32 {
    bitcast(0x7fc00001u32, to = f32)
}
"""


@pytest.fixture
def src(tmp_path: Path) -> Path:
    p = tmp_path / "p.kera"
    p.write_text(SRC)
    return p


def test_build_and_fingerprint_agree(
    src: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "p.keg"
    assert main(["build", str(src), "-o", str(out)]) == 0
    assert main(["fingerprint", str(src), str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4
    by_fn: dict[str, set[str]] = {}
    for line in lines:
        fp, where, *source = line.split("  ")
        assert len(fp) == 64
        # an optimised .keg (-O2, the default) names the source fingerprint it came from
        if where.startswith(str(out)):
            assert source and source[0].startswith("(source ")
            fp = source[0].removeprefix("(source ").rstrip(")")
        by_fn.setdefault(where.rsplit(":", 1)[1], set()).add(fp)
    assert all(len(fps) == 1 for fps in by_fn.values())  # .kera and .keg agree


def test_show_prints_the_canonical_text(src: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(src)]) == 0
    out = capsys.readouterr().out
    assert "export fn saxpy(a: f32, x: f32[8], y: f32[8]) -> (f32[8])" in out
    assert "const : u32 [0x7fc00001]" in out


def test_syntax_errors_are_located(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.kera"
    bad.write_text("export fn f(x: f32) -> f32 {\n    x +\n}\n")
    assert main(["check", str(bad)]) == 1
    err = capsys.readouterr().err
    assert f"{bad}:2:8: error[E0010]: expected an expression" in err and "^" in err


def test_type_errors_are_located(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "t.kera"
    bad.write_text("export fn f(x: f32, y: i32) -> f32 {\n    x + y\n}\n")
    assert main(["check", str(bad)]) == 1
    assert f"{bad}:2:5: error[E0201]" in capsys.readouterr().err


def test_missing_and_undecodable_files_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", str(tmp_path / "nope.kera")]) == 2
    assert "cannot read" in capsys.readouterr().err
    raw = tmp_path / "latin1.kera"
    raw.write_bytes(b"export fn f() -> f32 { 1.0 } // caf\xe9\n")
    assert main(["check", str(raw)]) == 2
    assert "byte 35: invalid UTF-8" in capsys.readouterr().err


def test_corrupt_keg_names_section_and_offset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    k = tmp_path / "x.keg"
    k.write_bytes(b"KEG\0" + b"\x01\x00\x06\x00" + b"\0" * 8)
    assert main(["show", str(k)]) == 2
    assert "invalid .keg: header section, byte" in capsys.readouterr().err


def test_fmt_check_and_rewrite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "u.kera"
    p.write_text("export fn f(x:f32)->f32{x*2.0}\n")
    assert main(["fmt", "--check", str(p)]) == 1
    assert main(["fmt", str(p)]) == 0
    assert main(["fmt", "--check", str(p)]) == 0
    broken = tmp_path / "b.kera"
    broken.write_text("export fn f(x: f32) -> f32 { (x }\n")
    assert main(["fmt", "--check", str(broken)]) == 1
    assert "syntax error" in capsys.readouterr().err


def test_emit_unknown_target_is_a_usage_error(
    src: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["emit", "--target", "z80", str(src)]) == 2
    assert "unknown target 'z80'" in capsys.readouterr().err


def test_emit_wat(src: Path, tmp_path: Path) -> None:
    out = tmp_path / "p.wat"
    assert main(["emit", "--target", "wat", str(src), "-o", str(out)]) == 0
    assert out.read_text().startswith("(module")
