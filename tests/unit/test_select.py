"""Choosing cases: -k expressions and path::function node ids."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from keracheck.cli import main
from keracheck.select import SelectError, keyword_matcher, split_node_id

SOURCE = (
    "export fn soft_f32(x: f32[4]) -> f32[4] { x + x }\n"
    "export fn soft_f64(x: f64[4]) -> f64[4] { x * x }\n"
    "export fn hard_i32(x: i32[4]) -> i32[4] { x / (x + 3) }\n"
)


@pytest.mark.parametrize(
    ("expr", "chosen"),
    [
        ("soft", {"soft_f32", "soft_f64"}),
        ("SOFT and not f64", {"soft_f32"}),
        ("hard or f64", {"soft_f64", "hard_i32"}),
        ("not (soft or hard)", set()),
        ("b.kera", set()),
        ("a.kera and (f32 or i32)", {"soft_f32", "hard_i32"}),
    ],
)
def test_keyword_expressions(expr: str, chosen: set[str]) -> None:
    names = ["soft_f32", "soft_f64", "hard_i32"]
    match = keyword_matcher(expr)
    assert {n for n in names if match(f"dir/a.kera::{n}")} == chosen


@pytest.mark.parametrize("expr", ["", "a and", "(a", "a b", "or a", ")"])
def test_malformed_expressions_are_errors(expr: str) -> None:
    with pytest.raises(SelectError):
        keyword_matcher(expr)


def test_node_ids() -> None:
    assert split_node_id("c/a.kera::f") == ("c/a.kera", "f")
    assert split_node_id("c/a.kera") == ("c/a.kera", None)


def functions(tmp_path: Path, *args: str) -> tuple[int, list[str], list[str]]:
    out = tmp_path / "o.json"
    code = main(["run", *args, "--targets", "ref", "-q", "--no-cache", "--format", "json", "--output", str(out)])  # fmt: skip
    doc = json.loads(out.read_text())
    return code, sorted(c["function"] for c in doc["cases"]), [e["message"] for e in doc["errors"]]


def test_run_selects_by_k_and_node_id(tmp_path: Path) -> None:
    src = tmp_path / "a.kera"
    src.write_text(SOURCE)
    assert functions(tmp_path, str(src), "-k", "soft and not f64")[1] == ["soft_f32"]
    assert functions(tmp_path, f"{src}::hard_i32")[1] == ["hard_i32"]
    both = functions(tmp_path, f"{src}::hard_i32", f"{src}::soft_f64")[1]
    assert both == ["hard_i32", "soft_f64"]
    code, chosen, errors = functions(tmp_path, f"{src}::nope")
    assert code == 2 and chosen == []
    assert errors == [f"{src}: no exported function 'nope' (has: soft_f32, soft_f64, hard_i32)"]
    assert main(["run", str(src), "-k", "a and", "-q"]) == 2


def test_last_failed_reruns_what_did_not_agree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    plugins = Path(__file__).parent / "plugins" / "fake_targets.py"
    src = tmp_path / "a.kera"
    src.write_text(
        "export fn mins(x: f32[8], y: f32[8]) -> f32[8] { min(x, y) }\n"
        "export fn adds(x: f32[8], y: f32[8]) -> f32[8] { x + y }\n"
    )
    minss = ["--backend-plugin", f"{plugins}:Minss"]
    out = tmp_path / "o.json"

    def run(*extra: str) -> tuple[int, list[str]]:
        code = main(["run", str(src), "--targets", "ref", *minss, "-q", "--no-cache", *extra,
                     "--format", "json", "--output", str(out)])  # fmt: skip
        return code, sorted(c["function"] for c in json.loads(out.read_text())["cases"])

    assert run("--lf") == (1, ["adds", "mins"])  # nothing recorded: every case
    recorded = json.loads((tmp_path / ".keracheck" / "lastfailed.json").read_text())
    assert recorded["nodeIds"] == [f"{src}::mins"]  # Minss diverges on min only
    assert run("--lf") == (1, ["mins"])
    assert run("--lf", "-k", "adds") == (5, [])  # both filters apply: nothing to run
