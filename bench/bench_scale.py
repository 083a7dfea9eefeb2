"""The main job as the corpus grows (issue 20, aim 4): ``keracheck run`` on the corpus at 1x,
10x and 100x its size, cases/s and peak memory.

    .venv/bin/python bench/bench_scale.py [--scales 1,10,100] [--targets ref,cpu,wasm,ptx-emu]
                                          [--inputs 64] [--paths corpora] [--keep DIR]

The corpus at ``k``x is ``k`` copies of every ``.kera`` file under ``--paths`` (with its
``.inputs.npz``): copy 0 as it is, copy ``j`` with every parameter of every function renamed
``<name>_s<j>`` in its text (and in the companion's array names), so each copy's functions have
fingerprints of their own and every target builds and runs every case (a copy with the same
fingerprint would be built once per batch).  The generated files are checked: each compiles,
and every case's fingerprint is new.

Each scale runs ``keracheck run DIR --targets T --no-cache`` as a subprocess with an empty
build cache (``KERACHECK_CACHE`` in a fresh folder: every gcc build is real): wall time (on a
shared machine, compare the scales of one run), the set-up before the first target starts, each
target's seconds (its progress lines), peak RSS of keracheck's process and of its process tree
(``bench_memory.Sampler``), the verdicts.  Cases/s must not fall as the corpus grows; a fixed
per-run cost is allowed, so the script fits ``seconds = fixed + cases / rate`` over the scales
and prints both.  Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_memory import ROOT, Sampler, header  # type: ignore[import-not-found]

from keracheck.collect import compile_file

STARTED = re.compile(r"(?P<tid>[\w:.-]+): started\b")
FINISHED = re.compile(r"(?P<tid>[\w:.-]+): finished in (?P<s>[\d.]+) s")
#: a function header: ``fn name(params)``; params are ``name: type`` (types hold no ':')
HEADER = re.compile(r"\bfn\s+\w+\s*\((?P<params>[^)]*)\)")
PARAM = re.compile(r"(?P<name>[A-Za-z_]\w*)\s*:")


def renamed_source(text: str, suffix: str) -> str:
    """``text`` with every function's parameters renamed ``<name><suffix>`` from its header
    to the next function's header (the body's uses with them); a function without parameters
    gets an unused one, ``unused<suffix>: i32``."""
    heads = list(HEADER.finditer(text))
    out = [text[: heads[0].start()] if heads else text]
    for i, h in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        part = text[h.start() : end]
        names = {m["name"] for m in PARAM.finditer(h["params"])}
        for name in names:
            part = re.sub(rf"\b{re.escape(name)}\b", name + suffix, part)
        if not names:  # nothing to rename: an unused parameter makes the function new
            at = h.end("params") - h.start()
            part = f"{part[:at]}unused{suffix}: i32{part[at:]}"
        out.append(part)
    return "".join(out)


def renamed_npz(src: Path, dst: Path, suffix: str) -> None:
    """A companion's arrays ``<function>.<param>`` renamed ``<function>.<param><suffix>``."""
    with np.load(src) as z:
        arrays = {(k + suffix if "." in k else k): z[k] for k in z.files}
    with dst.open("wb") as f:
        np.savez(f, **arrays)


def sources(paths: list[str]) -> list[tuple[Path, Path]]:
    """(file, its path in a copy) of every ``.kera`` file under paths."""
    out = []
    for p in map(Path, paths):
        files = sorted(p.rglob("*.kera")) if p.is_dir() else [p]
        out += [(f, f.relative_to(p) if p.is_dir() else Path(f.name)) for f in files]
    return out


def write_copy(src: Path, out: Path, j: int) -> None:
    """Copy j of src (and its companion) at out: j > 0 renames the parameters."""
    out.parent.mkdir(parents=True, exist_ok=True)
    suffix = f"_s{j}"
    text = src.read_text()
    out.write_text(renamed_source(text, suffix) if j else text)
    npz = src.with_name(src.name.removesuffix(".kera") + ".inputs.npz")
    if npz.exists():
        target = out.with_name(out.name.removesuffix(".kera") + ".inputs.npz")
        if j:
            renamed_npz(npz, target, suffix)
        else:
            shutil.copyfile(npz, target)


def make_corpus(paths: list[str], scale: int, dest: Path) -> int:
    """Write the corpus at ``scale``x under dest (checked: every file compiles, and no case of
    a copy has the fingerprint of a case of an earlier copy); returns its number of cases."""
    earlier: set[str] = set()
    cases = 0
    for j in range(scale):
        mine: set[str] = set()
        for src, rel in sources(paths):
            out = dest / f"copy{j:03d}" / rel
            write_copy(src, out, j)
            for fn in compile_file(str(out)).functions.values():
                if fn.fingerprint in earlier:
                    raise SystemExit(f"{out}: '{fn.name}' has the fingerprint of an earlier copy")
                mine.add(fn.fingerprint)
                cases += 1
        earlier |= mine
    return cases


@dataclass
class Run:
    scale: int
    cases: int
    wall: float = 0.0
    setup: float = 0.0
    targets: dict[str, float] = field(default_factory=dict)
    peak_main: int = 0
    peak_tree: int = 0
    summary: dict[str, Any] = field(default_factory=dict)
    exit_code: int = 0


def run_scale(corpus: Path, scale: int, cases: int, args: argparse.Namespace, tmp: Path) -> Run:
    env = {**os.environ, "KERACHECK_CACHE": str(tmp / f"cache{scale}"), "NO_COLOR": "1"}
    env.pop("CI", None)
    out = tmp / f"run{scale}.json"
    argv = [sys.executable, "-m", "keracheck.cli", "run", str(corpus), "--targets", args.targets]
    argv += ["--no-cache", "--inputs", str(args.inputs), "--format", "json", "--output", str(out)]
    r = Run(scale, cases)
    started: dict[str, float] = {}
    t0 = time.monotonic()
    proc = subprocess.Popen(
        argv, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    sampler = Sampler(proc.pid, 0.5)

    def watch() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            now = time.monotonic() - t0
            if m := STARTED.search(line):
                started.setdefault(m["tid"], now)
            if m := FINISHED.search(line):
                r.targets[m["tid"]] = float(m["s"])

    reader = threading.Thread(target=watch, daemon=True)
    reader.start()
    r.exit_code = proc.wait()
    reader.join()
    sampler.stop()
    r.wall = time.monotonic() - t0
    r.setup = min(started.values(), default=0.0)
    r.peak_main, r.peak_tree = sampler.peak_main, sampler.peak_tree
    try:
        r.summary = json.loads(out.read_text()).get("summary", {})
    except (OSError, ValueError):
        r.summary = {}
    return r


def fit(runs: list[Run], attr: str) -> tuple[float, float]:
    """Least squares ``seconds = fixed + cases / rate``: (fixed seconds, rate cases/s)."""
    if len(runs) < 2:
        return 0.0, 0.0
    x = np.array([r.cases for r in runs], dtype=float)
    y = np.array([getattr(r, attr) for r in runs], dtype=float)
    slope, fixed = np.polyfit(x, y, 1)
    return float(fixed), float(1 / slope) if slope > 0 else float("inf")


def report(r: Run) -> None:
    per = ", ".join(f"{t} {s:.1f}" for t, s in sorted(r.targets.items()))
    verdicts = {k: v for k, v in r.summary.items() if isinstance(v, int) and v}
    print(
        f"{r.scale:4}x {r.cases:6} cases  wall {r.wall:7.1f} s ({r.cases / r.wall:6.1f} cases/s)  "
        f"set-up {r.setup:5.1f} s  "
        f"peak RSS keracheck {r.peak_main / 1024:5.0f} MiB, tree {r.peak_tree / 1024:5.0f} MiB  "
        f"exit {r.exit_code}"
    )
    print(f"      targets (s): {per}")
    print(f"      verdicts: {verdicts}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scales", default="1,10,100")
    p.add_argument("--targets", default="ref,cpu,wasm,ptx-emu")
    p.add_argument("--inputs", type=int, default=64)
    p.add_argument("--paths", nargs="*", default=["corpora"])
    p.add_argument("--keep", default=None, help="write the corpora here and keep them")
    args = p.parse_args()
    header()
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as t:
        tmp = Path(args.keep or t)
        for scale in (int(s) for s in args.scales.split(",")):
            corpus = tmp / f"corpus{scale}x"
            t0 = time.monotonic()
            cases = make_corpus(args.paths, scale, corpus)
            print(f"{scale}x corpus: {cases} cases written in {time.monotonic() - t0:.1f} s")
            runs.append(run_scale(corpus, scale, cases, args, tmp))
            report(runs[-1])
    if len(runs) > 1:
        fixed, rate = fit(runs, "wall")
        print(f"fit: {fixed:.1f} s per run + {rate:.1f} cases/s")


if __name__ == "__main__":
    main()
