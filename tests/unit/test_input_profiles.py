"""Input profiles: special (the default, unchanged), finite, normal, mixed — for every dtype of
the corpus, recorded in the run and carried by the repro command."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kera import frontend
from kera.dtypes import DType
from keracheck import inputs
from keracheck.cli import main

CORPUS = Path(__file__).parent.parent.parent / "corpora"


def corpus_inputs(profile: str) -> list[tuple[DType, np.ndarray]]:
    out = []
    for f in sorted(CORPUS.rglob("*.kera")):
        graph = frontend.compile_source(f.read_text(), str(f)).graph
        assert graph is not None
        for fn in graph.functions.values():
            arrays = inputs.generate(fn, 256, 5, profile)
            out += [(p.dtype, arrays[str(p.attr("name"))]) for p in fn.params]
    return out


def test_finite_has_no_nan_or_infinity() -> None:
    floats = [a for dt, a in corpus_inputs("finite") if dt.is_float]
    assert floats and all(np.isfinite(a).all() for a in floats)
    specials = [a for dt, a in corpus_inputs("special") if dt.is_float]
    assert any(not np.isfinite(a).all() for a in specials)  # the default keeps them


def test_normal_is_realistic() -> None:
    for dt, a in corpus_inputs("normal"):
        if dt.is_float:
            assert np.isfinite(a).all() and np.abs(a).max() < 2**12
            assert (a != 0).mean() > 0.99  # no specials, so zeros are rare
        elif dt.is_int:  # -100..100, wrapped into the unsigned types: signed view of the bits
            signed = a.view(f"<i{dt.nbytes}")
            assert signed.min() >= -100 and signed.max() <= 100, dt


def test_mixed_is_mostly_plain_with_some_specials() -> None:
    floats = np.concatenate([a.ravel() for dt, a in corpus_inputs("mixed") if dt is DType.F32])
    share = 1 - np.isfinite(floats).mean()
    assert 0 < share < 0.1  # special picks include NaN/inf, a sixth of a third of them or so


def test_unknown_profile() -> None:
    with pytest.raises(ValueError, match="unknown input profile"):
        inputs.generate_param(np.random.default_rng(0), DType.F32, (2,), "weird")


def test_the_profile_is_recorded_and_reproduced(tmp_path: Path) -> None:
    src = tmp_path / "a.kera"
    src.write_text("export fn f(x: f32[8]) -> f32[8] { x * x }\n")
    out = tmp_path / "o.json"
    code = main(["run", str(src), "--targets", "ref", "--input-profile", "finite", "-q",
                 "--no-cache", "--format", "json", "--output", str(out)])  # fmt: skip
    case = json.loads(out.read_text())["cases"][0]
    assert code == 0 and case["inputs"]["profile"] == "finite"
    assert "--input-profile finite" in case["repro"]
