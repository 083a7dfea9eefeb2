"""Hostile-input campaigns: long randomized runs against every loader (``scripts/fuzz-loaders``).

Each campaign mutates valid inputs (the bundled corpus compiled to ``.keg``, its ``.kera``
sources, a signed report) with byte-level edits — bit flips, random bytes, inserted and deleted
runs, u32 fields set to 0 / 1 / 2^31 / 2^32-1, truncation, duplication — plus source-level
edits (deep nesting, hostile names, long literals, call chains) and feeds each to the loader.
The oracle is the documented contract: the loader returns a valid result or raises its own
error type (``KegError`` with an in-range offset, front-end diagnostics, a FAILED report);
anything else — another exception, or an input that takes longer than ``slow_s`` — is a
finding.  The CI test runs a bounded count; the long run (10^6 inputs per loader) is
``scripts/fuzz-loaders 1000000``.
"""

from __future__ import annotations

import random
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kera import keg
from kera.ir import Graph

Mutator = Callable[[random.Random, bytes], bytes]


@dataclass
class Finding:
    loader: str
    data: bytes
    problem: str


@dataclass
class Tally:
    loader: str
    inputs: int = 0
    accepted: int = 0
    rejected: int = 0
    seconds: float = 0.0
    slowest: float = 0.0
    findings: list[Finding] = field(default_factory=list)

    def line(self) -> str:
        rate = self.inputs / self.seconds if self.seconds else 0.0
        return (
            f"{self.loader}: {self.inputs} inputs, {self.accepted} accepted, {self.rejected} "
            f"rejected with the loader's own error, {len(self.findings)} findings; "
            f"{rate:,.0f} inputs/s, slowest {self.slowest * 1000:.1f} ms"
        )


def _u32(rng: random.Random) -> bytes:
    return rng.choice([0, 1, 2**31, 2**32 - 1, rng.getrandbits(32)]).to_bytes(4, "little")


def mutate(rng: random.Random, data: bytes) -> bytes:
    """1-4 byte-level edits of ``data``."""
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        if not b:
            b += rng.randbytes(rng.randint(1, 16))
            continue
        i = rng.randrange(len(b))
        kind = rng.randrange(8)
        if kind == 0:
            b[i] ^= 1 << rng.randrange(8)
        elif kind == 1:
            b[i] = rng.randrange(256)
        elif kind == 2:
            b[i:i] = rng.randbytes(rng.randint(1, 8))
        elif kind == 3:
            del b[i : i + rng.randint(1, 8)]
        elif kind == 4:
            b[i & ~3 : (i & ~3) + 4] = _u32(rng)
        elif kind == 5:
            del b[i:]
        elif kind == 6:
            j = rng.randrange(len(b))
            b[i:i] = b[min(i, j) : max(i, j)][:4096]
        else:
            b[i : i + 1] = b"\x00" if rng.random() < 0.5 else b"\xff"
    return bytes(b)


_SOURCE_SNIPPETS = [
    b"(" * 200,
    b"{ let x = 1; " * 50,
    b"x" * 5000,
    b"9" * 3000,
    b"0x" + b"f" * 500,
    b"1e99999999999",
    b"fn g(x: f32) -> f32 { g(x) }\n",
    b"*/\\\n/",
    b"\xff\xfe",
    b"f32[16777216, 16777216]",
    b"reshape(x, shape = [" + b"1, " * 50 + b"1])",
]


def mutate_source(rng: random.Random, data: bytes) -> bytes:
    if rng.random() < 0.5:
        return mutate(rng, data)
    b = bytearray(data)
    i = rng.randrange(len(b) + 1)
    b[i:i] = rng.choice(_SOURCE_SNIPPETS)
    return bytes(b)


def corpus_kegs(root: Path) -> list[bytes]:
    from kera import frontend

    out: list[bytes] = []
    for f in sorted(root.rglob("*.kera")):
        res = frontend.compile_source(f.read_bytes(), str(f))
        if res.graph is not None and res.ok:
            out.extend(keg.dumps(Graph([fn])) for fn in res.graph.functions.values())
    return out


Check = Callable[[bytes], tuple[bool, str | None]]  # (accepted, problem or None)


def check_keg(data: bytes) -> tuple[bool, str | None]:
    try:
        g = keg.loads(data)
    except keg.KegError as e:
        if not 0 <= e.offset <= len(data):
            return False, f"KegError offset {e.offset} outside the file of {len(data)} bytes"
        return False, None
    if keg.dumps(g) != data:
        return True, "accepted a file that is not the canonical encoding of its graph"
    for fn in g.functions.values():
        if not all(n.isidentifier() and n.isascii() for n in [fn.name, *fn.param_names()]):
            return True, "accepted a name that is not an identifier"
    return True, None


def check_source(data: bytes) -> tuple[bool, str | None]:
    from kera import frontend

    res = frontend.compile_source(data, "<fuzz>")
    if res.ok and res.graph is None:
        return False, "no graph and no diagnostics"
    for d in res.diagnostics:
        if not 0 <= d.start <= d.end <= len(data):
            return False, f"diagnostic {d.code} span {d.start}..{d.end} outside the source"
    return res.ok, None


def run(
    loader: str,
    seeds: list[bytes],
    mutator: Mutator,
    check: Check,
    count: int,
    seed: int = 0,
    slow_s: float = 2.0,
    progress: Callable[[Tally], None] | None = None,
) -> Tally:
    rng = random.Random(seed)
    tally = Tally(loader)
    started = time.perf_counter()
    for k in range(count):
        data = mutator(rng, rng.choice(seeds))
        t0 = time.perf_counter()
        accepted = False
        try:
            accepted, problem = check(data)
        except Exception:
            problem = "uncaught " + traceback.format_exc(limit=3).strip().splitlines()[-1]
        dt = time.perf_counter() - t0
        tally.inputs += 1
        tally.slowest = max(tally.slowest, dt)
        if problem is None and dt > slow_s:
            problem = f"took {dt:.1f} s"
        if problem is not None:
            tally.findings.append(Finding(loader, data, problem))
        elif accepted:
            tally.accepted += 1
        else:
            tally.rejected += 1
        if progress and k and k % 50_000 == 0:
            tally.seconds = time.perf_counter() - started
            progress(tally)
    tally.seconds = time.perf_counter() - started
    return tally


def campaigns(corpus: Path) -> Iterator[tuple[str, list[bytes], Mutator, Check]]:
    sources = [f.read_bytes() for f in sorted(corpus.rglob("*.kera"))]
    yield "keg", corpus_kegs(corpus), mutate, check_keg
    yield "kera", sources, mutate_source, check_source
