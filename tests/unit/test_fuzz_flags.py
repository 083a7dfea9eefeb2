"""``keracheck fuzz`` flags: every one has help text, and the stop and isolation flags reach
the campaign's options (issue 23)."""

from __future__ import annotations

import argparse

import pytest

from keracheck import cli
from keracheck.fuzz import UsageError, options


def _fuzz_parser() -> argparse.ArgumentParser:
    sub = next(a for a in cli.parser()._actions if isinstance(a, argparse._SubParsersAction))
    parser = sub.choices["fuzz"]
    assert isinstance(parser, argparse.ArgumentParser)
    return parser


def test_every_fuzz_option_has_help() -> None:
    actions = [a for a in _fuzz_parser()._actions if a.option_strings != ["-h", "--help"]]
    missing = [a.option_strings[0] for a in actions if not (a.help or "").strip()]
    assert not missing, f"fuzz options without help: {missing}"
    flags = {s for a in actions for s in a.option_strings}
    assert {"--targets", "--backend-plugin", "--max-examples", "--seed", "--out"} <= flags
    assert {"--format", "--until-first", "--max-findings", "--in-process"} <= flags


def _args(*argv: str) -> argparse.Namespace:
    return cli.parser().parse_args(["fuzz", *argv])


@pytest.mark.parametrize(
    ("argv", "most", "isolate"),
    [
        ([], None, True),
        (["--until-first"], 1, True),
        (["--max-findings", "3"], 3, True),
        (["--until-first", "--max-findings", "1", "--in-process"], 1, False),
    ],
)
def test_stop_and_isolation_flags(argv: list[str], most: int | None, isolate: bool) -> None:
    opts = options(_args(*argv))
    assert opts.max_findings == most and opts.isolate is isolate


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--until-first", "--max-findings", "2"], "--until-first is --max-findings 1"),
        (["--max-findings", "0"], "--max-findings must be at least 1"),
    ],
)
def test_bad_stop_flags_are_usage_errors(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        options(_args(*argv))
