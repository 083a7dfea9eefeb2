"""``kill -9`` a corpus run, then run it again: the final JSON is the uninterrupted run's
(timestamps and timings aside), the rerun takes every journaled result and computes only what
had not finished, and says so; a corrupted journal record is computed again; two runs sharing
a cache at the same time both finish and leave it intact."""

from __future__ import annotations

import functools
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from keracheck import journal as jr
from keracheck.result_cache import ResultCache

ROOT = Path(__file__).parent.parent.parent
FILES = ["bitwise.kera"]  # 6 cases: a small corpus subset
TARGETS = "ref,cpu"
ARGS = ["--jobs", "1", "--inputs", "16", "--no-cache", "--format", "json", "--output", "run.json"]

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="cpu needs gcc")


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache for the module (probes and builds stay warm; --no-cache leaves results out)."""
    return tmp_path_factory.mktemp("cache")


def workdir(root: Path, files: list[str] = FILES) -> Path:
    (root / "corpus").mkdir(parents=True)
    for name in files:
        shutil.copy(ROOT / "corpora" / name, root / "corpus" / name)
    return root


def command(targets: str = TARGETS, extra: list[str] | None = None) -> list[str]:
    return [
        sys.executable,
        "-m",
        "keracheck.cli",
        "run",
        "corpus",
        "--targets",
        targets,
        *ARGS,
        *(extra or []),
    ]


def env(cache: Path) -> dict[str, str]:
    return dict(os.environ, KERACHECK_CACHE=str(cache), NO_COLOR="1")


def run(
    cwd: Path, cache: Path, targets: str = TARGETS, extra: list[str] | None = None
) -> tuple[int, str]:
    done = subprocess.run(
        command(targets, extra),
        cwd=cwd,
        env=env(cache),
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.returncode, done.stderr


def normalised(path: Path) -> dict[str, Any]:
    """The run document without what differs between two runs of the same command."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: strip(v)
                for k, v in value.items()
                if k not in ("startedOn", "finishedOn", "seconds")
            }
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    result: dict[str, Any] = strip(json.loads(path.read_text()))
    return result


def journal_dir(cache: Path) -> Path:
    return Path(cache) / "journal"


def kill_when(
    cwd: Path,
    cache: Path,
    ready: Callable[[Path, str | None], bool],
    targets: str = TARGETS,
    extra: list[str] | None = None,
) -> int:
    """Start the run, SIGKILL it once ``ready(journal dir, run key)`` holds (or it ends);
    returns how many results its journal holds afterwards."""
    folder = journal_dir(cache)
    folder.mkdir(parents=True, exist_ok=True)
    before = set(folder.glob("*.lock"))
    proc = subprocess.Popen(
        command(targets, extra),
        cwd=cwd,
        env=env(cache),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    key = None
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        new = set(folder.glob("*.lock")) - before
        key = key or (next(iter(new)).stem if new else None)
        if ready(folder, key):
            break
        time.sleep(0.005)
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    new = set(folder.glob("*.lock")) - before
    key = key or (next(iter(new)).stem if new else None)
    return len(jr.read_records(str(folder), key)) if key else 0


def records_at_least(n: int) -> Callable[[Path, str | None], bool]:
    return lambda folder, key: key is not None and len(jr.read_records(str(folder), key)) >= n


def past(at: float, folder: Path, key: str | None) -> bool:
    return time.monotonic() >= at


def started(folder: Path, key: str | None) -> bool:
    return key is not None


def counts(stderr: str) -> tuple[int, int]:
    """(results taken from the journal, results computed) as the rerun prints them."""
    computed = sum(int(n) for n in re.findall(r": started, (\d+) cases to build and run", stderr))
    said = re.search(
        r"resumed from the journal: (\d+) results taken from it, (\d+) computed", stderr
    )
    taken = int(said[1]) if said else 0
    if said:
        assert int(said[2]) == computed
    return taken, computed


@pytest.fixture(scope="module")
def reference(cache: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    cwd = workdir(tmp_path_factory.mktemp("uninterrupted"))
    code, err = run(cwd, cache)
    assert code == 0, err
    return normalised(cwd / "run.json")


POINTS = {
    "journal opened": started,  # before (or as) the first batch returns
    "after ref": records_at_least(6),  # ref's batch journaled, cpu's running
    "after both": records_at_least(12),  # every batch journaled, the run still comparing
}
TOTAL = 12  # 6 cases x 2 targets


@pytest.mark.parametrize("point", list(POINTS))
def test_a_killed_run_resumes_to_the_same_json(
    point: str, cache: Path, reference: dict[str, Any], tmp_path: Path
) -> None:
    cwd = workdir(tmp_path)
    finished = kill_when(cwd, cache, POINTS[point])
    code, err = run(cwd, cache)
    assert code == 0, err
    assert normalised(cwd / "run.json") == reference
    taken, computed = counts(err)
    assert (taken, computed) == (finished, TOTAL - finished), err
    assert not list(journal_dir(cache).glob("*.jnl")), "a finished run deletes its journal"


def test_a_corrupted_journal_record_is_computed_again(
    cache: Path, reference: dict[str, Any], tmp_path: Path
) -> None:
    cwd = workdir(tmp_path)
    finished = kill_when(cwd, cache, records_at_least(6))
    assert finished >= 6
    (jnl,) = journal_dir(cache).glob("*.jnl")
    data = bytearray(jnl.read_bytes())
    data[len(data) // 3] ^= 0x10  # one flipped bit inside some record
    jnl.write_bytes(bytes(data))
    left = len(jr.read_records(str(jnl.parent), jnl.stem))
    assert left == finished - 1
    code, err = run(cwd, cache)
    assert code == 0, err
    assert "1 damaged records skipped" in err
    assert normalised(cwd / "run.json") == reference
    assert counts(err) == (left, TOTAL - left)


def test_no_resume_discards_the_journal(cache: Path, tmp_path: Path) -> None:
    cwd = workdir(tmp_path)
    assert kill_when(cwd, cache, records_at_least(6)) >= 6
    code, err = run(cwd, cache, extra=["--no-resume"])
    assert code == 0, err
    assert counts(err) == (0, TOTAL)


def test_two_concurrent_runs_share_a_cache_safely(tmp_path: Path) -> None:
    cache = tmp_path / "shared"
    cwd = workdir(tmp_path / "w")
    cmd = [a for a in command() if a != "--no-cache"]  # both read and write the result cache
    procs = [
        subprocess.Popen(
            [*cmd[:-1], f"run{k}.json"], cwd=cwd, env=env(cache), stderr=subprocess.PIPE, text=True
        )
        for k in range(2)
    ]
    errs = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errs
    docs = [normalised(cwd / f"run{k}.json") for k in range(2)]
    for doc in docs:
        doc["run"].pop("command")  # names its own --output
    assert docs[0] == docs[1]
    entries = sorted((cache / "results").glob("??/*.npz"))
    assert len(entries) == TOTAL
    rc = ResultCache(str(cache / "results"))
    assert all(rc.get(p.stem) is not None for p in entries), "every entry is intact"
    assert not list((cache / "journal").glob("*.jnl"))


@pytest.mark.slow
def test_kill_at_ten_random_points(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The issue's check: ten random kill times over a larger run (three targets, both
    optimisation levels), each followed by a rerun that must match the uninterrupted run."""
    cache = tmp_path / "cache"
    files = ["bitwise.kera", "int_arith.kera", "float_arith.kera"]
    targets = "ref,cpu,wasm"
    extra = ["--opt-levels", "0,2"]
    ref_dir = workdir(tmp_path / "reference", files)
    t0 = time.monotonic()
    code, err = run(ref_dir, cache, targets, extra)
    span = time.monotonic() - t0
    assert code == 0, err
    want = normalised(ref_dir / "run.json")
    rng = random.Random(10)
    for k in range(10):
        cwd = workdir(tmp_path / f"kill{k}", files)
        at = time.monotonic() + rng.uniform(0.0, span)
        finished = kill_when(cwd, cache, functools.partial(past, at), targets, extra)
        code, err = run(cwd, cache, targets, extra)
        assert code == 0, err
        assert normalised(cwd / "run.json") == want, k
        taken, _ = counts(err)
        assert taken == finished, (k, err)
