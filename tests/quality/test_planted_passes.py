"""Unsafe optimisation passes, planted as pass plugins (``planted_passes.py``), must be caught.

* by the fuzzer, ``-O0`` against ``-O2`` (``keracheck fuzz --opt-levels 0,2 --pass-plugin``):
  within a fixed example budget, shrunk to at most 4 ops, with the culprit pass named in the
  reproducer's header, and the reproducer's printed command showing the divergence again;
* by the main job over the corpus (``keracheck run corpora/ --pass-plugin``, targets ``ref``):
  the in-process ``-O0``/``-O2`` check on the reference interpreter reports an ``opt-level``
  divergence naming the pass.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from keracheck import harness
from keracheck.fuzz import select_targets
from keracheck.fuzz.engine import Campaign, Finding, Options
from keracheck.options import Options as RunOptions

sys.path.insert(0, str(Path(__file__).parent))
import planted_passes

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = str(Path(__file__).parent / "planted_passes.py")
BUDGET = 200  # examples (batches of ~24 graphs)


@pytest.mark.parametrize("cls", list(planted_passes.PLANTED), ids=lambda c: c.__name__)
def test_fuzzer_catches_and_shrinks_an_unsafe_pass(
    cls: type[planted_passes.Planted], tmp_path: Path
) -> None:
    ops, most_ops = planted_passes.PLANTED[cls]
    spec = f"{PLUGIN}:{cls.__name__}"
    targets, notes = select_targets(["ref"], [])
    assert not notes

    def until(f: Finding) -> bool:  # a math-library call around the op may be found first
        return f.signature.target == "ref@O2" and f.signature.op in ops and f.ops_after <= most_ops

    opts = Options(
        max_examples=BUDGET,
        seed=0,
        out=str(tmp_path),
        isolate=False,
        until=until,
        opt_levels=(0, 2),
        pass_plugins=(spec,),
    )
    campaign = Campaign(targets, opts).run()
    hits = [f for f in campaign.findings.values() if until(f) and f.final is not None]
    assert hits, f"not caught in {BUDGET} examples: {[str(s) for s in campaign.findings]}"
    f = hits[0]
    assert f.reproducer is not None
    text = Path(f.reproducer).read_text(encoding="utf-8")
    assert f"// pass: {cls.name} (the first pass whose output changes the bits)" in text
    command = next(x for x in text.splitlines() if x.startswith("// reproduce: "))
    argv = shlex.split(command.removeprefix("// reproduce: "))
    assert argv[:2] == ["keracheck", "run"] and "--opt-levels" in argv
    replay = subprocess.run(
        [sys.executable, "-m", "keracheck.cli", *argv[1:], "-q", "--no-cache"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert replay.returncode == 1, replay.stderr
    assert f"changed by pass '{cls.name}'" in replay.stdout


@pytest.mark.parametrize("cls", list(planted_passes.PLANTED), ids=lambda c: c.__name__)
def test_main_job_catches_an_unsafe_pass(cls: type[planted_passes.Planted]) -> None:
    opts = RunOptions(targets=["ref"], cache_dir=None, pass_plugins=[f"{PLUGIN}:{cls.__name__}"])
    doc, code = harness.run([str(ROOT / "corpora")], opts)
    assert code == 1
    found = [d for c in doc["cases"] for d in c["divergences"] if d["kind"] == "opt-level"]
    assert found and all(d["targets"] == ["ref", "ref@O2"] for d in found)
    assert {d["pass"] for d in found} == {cls.name}


def test_the_default_pipeline_keeps_the_corpus_bits() -> None:
    doc, code = harness.run([str(ROOT / "corpora")], RunOptions(targets=["ref"], cache_dir=None))
    assert not [d for c in doc["cases"] for d in c["divergences"]]
    assert code in (0,)
