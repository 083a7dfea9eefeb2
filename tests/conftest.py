"""Shared test configuration: Hypothesis profiles ("ci" is derandomised and bounded)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

GOLDEN = Path(__file__).parent / "golden"


@pytest.fixture
def golden() -> Callable[[str, str], None]:
    """``golden(relative_path, text)``: compare ``text`` with ``tests/golden/<relative_path>``;
    with ``KERA_UPDATE_GOLDEN=1`` write it instead (review the diff, then commit)."""

    def check(relative: str, text: str) -> None:
        path = GOLDEN / relative
        if os.environ.get("KERA_UPDATE_GOLDEN") == "1":
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        if not path.exists():
            pytest.fail(f"missing golden file {path}; run with KERA_UPDATE_GOLDEN=1")
        assert text == path.read_text(), f"{relative} changed; KERA_UPDATE_GOLDEN=1 regenerates it"

    return check


settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))
