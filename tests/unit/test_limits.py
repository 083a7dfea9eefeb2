"""Budgets (kera.limits): each reproducer of a compile bomb or a resource blow-up is a clear
diagnostic or input error with its limit, and the rest of a run is kept."""

from __future__ import annotations

import io
import json
import os
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kera import limits
from kera.cli import main as kerac
from kera.frontend import compile_source
from keracheck.cli import main as keracheck


@pytest.fixture(autouse=True)
def default_limits() -> Iterator[None]:
    saved, env = limits.current(), os.environ.get(limits.ENV)
    limits.set_limits(limits.Limits())
    yield
    limits.set_limits(saved)
    if env is None:
        os.environ.pop(limits.ENV, None)
    else:
        os.environ[limits.ENV] = env


def codes(src: str) -> list[str]:
    return [d.code for d in compile_source(src).diagnostics]


def tree_bomb(depth: int) -> str:
    """~1 KB of source whose helpers each call the previous one twice: 2^depth copies."""
    fns = ["fn g0(x: f32) -> f32 { x }"]
    fns += [f"fn g{j}(x: f32) -> f32 {{ g{j - 1}(x * 2.0) + g{j - 1}(x * 3.0) }}" for j in range(1, depth + 1)]  # fmt: skip
    return "\n".join([*fns, f"export fn f(x: f32) -> f32 {{ g{depth}(x) }}"])


def chain(n: int) -> str:
    fns = ["fn g0(x: f32) -> f32 { x }"]
    fns += [f"fn g{j}(x: f32) -> f32 {{ g{j - 1}(x) + 1.0 }}" for j in range(1, n + 1)]
    return "\n".join([*fns, f"export fn f(x: f32) -> f32 {{ g{n}(x) }}"])


def test_an_exponential_call_tree_stops_at_the_expansion_budget() -> None:
    src = tree_bomb(21)
    assert len(src) < 1300
    diags = compile_source(src).diagnostics
    assert [d.code for d in diags] == ["E0111"]
    assert "200,000" in diags[0].message and "--limit expansion=" in diags[0].message
    assert codes(tree_bomb(8)) == []  # 256 copies is fine


def test_a_deep_call_chain_stops_at_the_depth_limit_and_a_raised_limit_compiles_it() -> None:
    assert codes(chain(10_500)) == ["E0112"]
    limits.configure(["call_depth=20000"])
    res = compile_source(chain(10_500))
    assert res.ok and res.graph is not None


def test_a_huge_literal_is_one_diagnostic() -> None:
    src = "export fn f(x: f32) -> f32 { x + " + "1" * 10_000_000 + ".0 }"
    diags = compile_source(src).diagnostics
    assert [d.code for d in diags] == ["E0005"]
    assert "100,000" in diags[0].message


def test_values_and_functions_have_element_budgets() -> None:
    big = "export fn f(x: f32[16777216, 16777216]) -> f32 { sum(sum(x, axis = 1), axis = 0) }"
    assert codes(big) == ["E0215"]
    body = "let a = x * x; let b = a + x; let c = b * a; let d = c - b; let e = d * c; e"
    fn = f"export fn g(x: f32[8192, 8192]) -> f32[8192, 8192] {{ {body} }}"
    assert codes(fn) == []
    limits.configure(["function_elements=100000000"])
    assert codes(fn) == ["E0216"]


def test_bad_limit_settings_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(limits.LimitError, match="NAME one of"):
        limits.configure(["nonsense=1"])
    with pytest.raises(limits.LimitError, match="integer"):
        limits.configure(["elements=lots"])
    with pytest.raises(limits.LimitError, match="at least 1"):
        limits.configure(["elements=0"])
    assert kerac(["--limit", "elements", "check", "x.kera"]) == 2
    assert "NAME=VALUE" in capsys.readouterr().err


def test_non_regular_files_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "pipe.kera"
    os.mkfifo(fifo)
    assert kerac(["check", str(fifo)]) == 2
    assert kerac(["check", "/dev/zero"]) == 2
    err = capsys.readouterr().err
    assert "pipe.kera: not a regular file" in err and "/dev/zero: not a regular file" in err


def test_oversized_files_are_refused_before_reading(tmp_path: Path) -> None:
    big = tmp_path / "big.keg"
    with open(big, "wb") as f:
        f.truncate(3 << 30)  # sparse: 3 GiB that would take seconds and gigabytes to read
    src = tmp_path / "ok.kera"
    src.write_text("export fn f(x: f32[4]) -> f32[4] { x + x }\n")
    code, doc = run_doc(tmp_path, big, src)
    assert code == 2 and doc["summary"]["cases"] == 1  # the rest ran
    assert "bytes is more than the limit" in doc["errors"][0]["message"]


def run_doc(
    tmp_path: Path, *paths: Path, extra: tuple[str, ...] = ()
) -> tuple[int, dict[str, Any]]:
    out = tmp_path / "out.json"
    args = ["run", *map(str, paths), "--targets", "ref", "-q", "--no-cache", *extra]
    code = keracheck([*args, "--format", "json", "--output", str(out)])
    return code, json.loads(out.read_text())


def test_a_huge_parameter_is_an_input_error_and_the_run_goes_on(tmp_path: Path) -> None:
    big = tmp_path / "a_big.kera"
    big.write_text("export fn f(x: f32[4096, 4096]) -> f32[4096, 4096] { x + x }\n")
    ok = tmp_path / "b_ok.kera"
    ok.write_text("export fn g(x: f32[4]) -> f32[4] { x * x }\n")
    code, doc = run_doc(tmp_path, big, ok)
    assert code == 2
    assert doc["summary"]["cases"] == 1 and doc["summary"]["agree"] == 0
    (err,) = doc["errors"]
    assert "a_big.kera" in err["message"] and "input_bytes" in err["message"]


def _npy_header(shape: tuple[int, ...]) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": "<f4", "fortran_order": False, "shape": shape}
    )
    return buf.getvalue()  # magic and header, no data


def test_an_npz_claiming_2_to_the_40_rows_is_an_input_error(tmp_path: Path) -> None:
    src = tmp_path / "c.kera"
    src.write_text("export fn f(x: f32[4]) -> f32[4] { x + x }\n")
    npz = tmp_path / "c.inputs.npz"
    with zipfile.ZipFile(npz, "w") as z:
        z.writestr("f.x.npy", _npy_header((1 << 40, 4)))
    assert npz.stat().st_size < 400
    code, doc = run_doc(tmp_path, src)
    assert code == 2
    assert "claims shape" in doc["errors"][0]["message"]


def test_a_zip_bomb_npz_is_refused_before_it_inflates(tmp_path: Path) -> None:
    src = tmp_path / "c.kera"
    src.write_text("export fn f(x: f32[4]) -> f32[4] { x + x }\n")
    npz = tmp_path / "c.inputs.npz"
    rows = np.zeros((1 << 20, 4), np.float32)  # 16 MiB of zeros, ~16 KiB deflated
    buf = io.BytesIO()
    np.save(buf, rows)
    with zipfile.ZipFile(npz, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("f.x.npy", buf.getvalue())
    assert npz.stat().st_size < 100_000
    code, doc = run_doc(tmp_path, src, extra=("--limit", "input_bytes=1000000"))
    assert code == 2
    assert "uncompressed" in doc["errors"][0]["message"]


@pytest.mark.parametrize("value", ["nan", "-5", "0", "inf"])
def test_bad_timeouts_are_usage_errors(value: str, tmp_path: Path) -> None:
    src = tmp_path / "c.kera"
    src.write_text("export fn f(x: f32[4]) -> f32[4] { x + x }\n")
    assert keracheck(["run", str(src), "--targets", "ref", f"--timeout={value}", "-q"]) == 2


def test_verify_survives_deeply_nested_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from keracheck import signing

    signing.keygen(str(tmp_path / "keys"), None)
    report = tmp_path / "r.intoto.jsonl"
    report.write_bytes(b"[" * 100_000 + b"\n")
    code = keracheck(["verify", str(report), "--key", str(tmp_path / "keys" / "keracheck.pub")])
    assert code == 1
    assert "nested too deeply" in capsys.readouterr().out
