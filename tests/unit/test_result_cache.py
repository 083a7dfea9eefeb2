"""The result cache: a corrupt or poisoned entry is a miss (never an abort, never a changed
verdict); concurrent writers never leave an unreadable entry; editing a plugin invalidates it."""

from __future__ import annotations

import json
import multiprocessing as mp
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kera import keg
from kera.dtypes import DType
from kera.ir import FunctionBuilder, Graph
from keracheck.cli import main
from keracheck.harness import ResultCache, plugin_digest
from keracheck.worker import JobResult

PLUGINS = Path(__file__).parent / "plugins" / "fake_targets.py"


def corpus(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    b = FunctionBuilder("mins")
    x, y = b.param("x", DType.F32, [4]), b.param("y", DType.F32, [4])
    keg.dump(Graph([b.build(b.op("min", x, y))]), str(root / "a.keg"))
    return root


def run(tmp_path: Path, cache: Path, plugin: Path = PLUGINS) -> tuple[int, dict[str, Any]]:
    out = tmp_path / "out.json"
    args = ["run", str(corpus(tmp_path / "c")), "--targets", "ref", "-q", "--inputs", "16"]
    args += ["--backend-plugin", f"{plugin}:Clone", "--format", "json", "--output", str(out)]
    code = main(args)
    return code, json.loads(out.read_text())


def entries(cache: Path) -> list[Path]:
    return sorted(cache.glob("??/*.npz"))


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KERACHECK_CACHE", str(tmp_path / "kc"))
    return tmp_path / "kc" / "results"


def _flip(p: Path) -> None:
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0x40
    p.write_bytes(bytes(data))


def _to_directory(p: Path) -> None:
    p.unlink()
    p.mkdir()


DAMAGE: dict[str, Callable[[Path], object]] = {
    "flipped": _flip,
    "truncated": lambda p: p.write_bytes(p.read_bytes()[:100]),
    "empty": lambda p: p.write_bytes(b""),
    "directory": _to_directory,
    "garbage": lambda p: p.write_bytes(b"PK\x03\x04" + b"\xff" * 64),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_entry_is_a_miss_and_is_rewritten(
    damage: str, tmp_path: Path, cache: Path
) -> None:
    code, doc = run(tmp_path, cache)
    assert code == 0 and len(entries(cache)) == 2
    for p in entries(cache):
        DAMAGE[damage](p)
    code, again = run(tmp_path, cache)
    assert code == 0 and again["summary"] == doc["summary"]
    if damage != "directory":  # a directory in the way cannot be replaced; that only costs speed
        assert all(ResultCache(str(cache)).get(p.stem) is not None for p in entries(cache))


def test_a_poisoned_entry_never_changes_a_verdict(tmp_path: Path, cache: Path) -> None:
    """Valid npz files with the same wrong bits for both targets, as an attacker without the
    cache key would write them: they must not make the run agree on wrong digests."""
    code, doc = run(tmp_path, cache)
    assert code == 0
    truth = doc["cases"][0]["targets"]["ref"]["outputs"][0]["sha256"]
    for p in entries(cache):
        with np.load(p) as z:
            meta = z["meta"]
            mac = z["mac"]
        poison = np.full((16, 4), 7.0, np.float32)
        np.savez(p, meta=meta, mac=mac, out0=poison)
    code, again = run(tmp_path, cache)
    assert code == 0
    for t in ("ref", "clone"):
        assert again["cases"][0]["targets"][t]["outputs"][0]["sha256"] == truth


def test_outputs_of_the_wrong_shape_are_a_miss(tmp_path: Path) -> None:
    rc = ResultCache(str(tmp_path))
    b = FunctionBuilder("f")
    fn = b.build(b.op("neg", b.param("x", DType.F32, [4])))
    rc.put("ab" * 32, JobResult("ok", outputs=[[np.zeros((3, 4), np.float32)]], loaded="x"))
    assert rc.get("ab" * 32) is not None
    assert rc.get("ab" * 32, fn, 3) is not None
    assert rc.get("ab" * 32, fn, 5) is None  # rows differ
    rc.put("cd" * 32, JobResult("ok", outputs=[[np.zeros((3, 5), np.float32)]], loaded="x"))
    assert rc.get("cd" * 32, fn, 3) is None  # element shape differs
    other = ResultCache(str(tmp_path / "elsewhere"))  # another key: entries are not authentic
    shutil.copytree(tmp_path / "ab", tmp_path / "elsewhere" / "ab")
    assert other.get("ab" * 32) is None


def _hammer(root: str, key: str, seed: int, rounds: int) -> int:
    rc = ResultCache(root)
    bad = 0
    rng = np.random.default_rng(seed)
    for _ in range(rounds):
        out = rng.standard_normal((64, 256)).astype(np.float32)
        rc.put(key, JobResult("ok", outputs=[[out]], loaded="x"))
        got = rc.get(key)
        if got is None or got.outputs[0][0].shape != (64, 256):
            bad += 1
    return bad


def test_concurrent_writers_and_readers_never_see_a_broken_entry(tmp_path: Path) -> None:
    root, key = str(tmp_path), "ef" * 32
    ResultCache(root).secret()  # the key exists before the writers start
    # spawn, not fork: forking the test process (which may hold other threads' locks) can hang
    # a child for ever; the bounded wait turns any hang into a failure.
    ctx = mp.get_context("spawn")
    with ctx.Pool(4) as pool:
        bad = pool.starmap_async(_hammer, [(root, key, s, 60) for s in range(4)]).get(timeout=300)
    assert sum(bad) == 0
    assert not [p for p in (tmp_path / "ef").iterdir() if p.name.startswith(".")]  # no temps


def test_editing_a_plugin_invalidates_its_results(tmp_path: Path) -> None:
    plugin = tmp_path / "p.py"
    shutil.copy(PLUGINS, plugin)
    first = plugin_digest(f"{plugin}:Clone")
    assert first and plugin_digest("keracheck.targets.ref:RefBackend") == ""
    from keracheck import result_cache

    result_cache._PLUGIN_DIGESTS.clear()
    plugin.write_text(plugin.read_text() + "\n# edited\n")
    assert plugin_digest(f"{plugin}:Clone") != first


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not on PATH: apt-get install gcc")
def test_a_truncated_compiled_library_is_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from keracheck.runners.sealed import intact
    from keracheck.targets.cpu import CpuTarget

    monkeypatch.setenv("KERACHECK_CACHE", str(tmp_path))
    b = FunctionBuilder("f")
    fn = b.build(b.op("neg", b.param("x", DType.F32, [4])))
    target = CpuTarget("scalar")
    lib = target.build([fn])
    size = lib.stat().st_size
    lib.write_bytes(lib.read_bytes()[: size // 2])
    assert not intact(lib)
    again = target.build([fn])
    assert again == lib and intact(lib) and lib.stat().st_size == size
