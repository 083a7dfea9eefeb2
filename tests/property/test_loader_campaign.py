"""The hostile-input campaign of keracheck.campaigns at a CI-sized count: mutated .keg files
and Kera sources from the bundled corpus never escape the loader's own errors and never take
long.  The long run (10^6 inputs per loader) is `scripts/fuzz-loaders` (see tests/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from keracheck import campaigns

CORPUS = Path(__file__).parent.parent.parent / "corpora"
COUNTS = {"keg": 5000, "kera": 300}


@pytest.mark.parametrize("loader", list(COUNTS))
def test_loader_campaign_finds_nothing(loader: str) -> None:
    for name, seeds, mutator, check in campaigns.campaigns(CORPUS):
        if name == loader:
            tally = campaigns.run(name, seeds, mutator, check, COUNTS[name], seed=7)
            assert tally.inputs == COUNTS[name]
            assert not tally.findings, [(f.problem, f.data[:200]) for f in tally.findings[:3]]
            assert tally.rejected > 0
