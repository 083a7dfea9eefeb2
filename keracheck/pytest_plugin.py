"""pytest plugin (entry point ``pytest11``): gate determinism inside a user's own test suite.

* fixture ``assert_deterministic(source_or_graph, targets=None, inputs=None, n=64, seed=0)``:
  compiles Kera source text, a ``.kera``/``.keg`` path, a ``kera.ir.Graph`` or a
  ``kera.ir.Function``, runs every exported function on the targets (default: every available
  target) and fails the test with the mismatch table when any two disagree bit for bit.
* option ``--keracheck-report=PATH``: every case checked through the fixture is written to PATH as
  a keracheck JSON report at the end of the session.

Imports of the harness are lazy so that merely having keracheck installed costs pytest nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("keracheck")
    group.addoption(
        "--keracheck-report",
        default=None,
        metavar="PATH",
        help="write the cases checked by assert_deterministic to PATH (keracheck JSON report)",
    )


_CASES_KEY = pytest.StashKey[list[dict[str, Any]]]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_CASES_KEY] = []


def pytest_unconfigure(config: pytest.Config) -> None:
    path = config.getoption("--keracheck-report", default=None)
    cases = config.stash.get(_CASES_KEY, [])
    if path:
        from kera.files import write_atomic
        from keracheck.document import summary_document

        write_atomic(path, json.dumps(summary_document(cases, targets=[], options={}), indent=2))


@pytest.fixture
def assert_deterministic(
    request: pytest.FixtureRequest,
) -> Iterator[Callable[..., list[dict[str, Any]]]]:
    from keracheck.harness import check_deterministic

    recorded = request.config.stash[_CASES_KEY]

    def check(
        source_or_graph: Any,
        targets: list[str] | None = None,
        inputs: dict[str, Any] | None = None,
        n: int = 64,
        seed: int = 0,
    ) -> list[dict[str, Any]]:
        cases, failure = check_deterministic(source_or_graph, targets, inputs, n, seed)
        recorded.extend(cases)
        if failure:
            pytest.fail(failure, pytrace=False)
        return cases

    yield check
