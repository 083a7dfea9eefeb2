"""The audit log: a thread-safe, fixed-capacity ring buffer of hash-chained entries.

Each entry is ``(seq, time, kind, data)`` and its hash::

    hash(n) = SHA-256( "keracheck-audit/v1\\0" || hash(n-1) || canonical_json([seq, time, kind, data]) )

with ``hash(-1)`` 32 zero bytes (the genesis), ``seq`` counting from 0, ``time`` an RFC 3339
UTC string with milliseconds, ``kind`` a word of :data:`KINDS` and ``data`` a JSON object;
``canonical_json`` is sorted keys, no spaces, ASCII.  When the ring is full, recording an
entry drops the oldest and keeps a *checkpoint* of it: its ``seq`` and ``hash``, the chain head
as it was at that point.  The retained entries then chain from the checkpoint, so a verifier
knows how many entries went and that none of the kept ones was removed, changed or moved:

* a changed bit in an entry (or a stored hash) breaks that entry's hash, or the next one's;
* a dropped entry leaves a gap in ``seq`` (at the front: the first ``seq`` no longer follows
  the checkpoint; at the end: the last entry is not the recorded ``head``);
* a duplicated or reordered entry repeats or inverts ``seq``.

:meth:`AuditLog.snapshot` is the JSON form that goes into a signed report (the report's
signature covers the checkpoint); :func:`verify_log` checks one and names each problem.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

FORMAT = "keracheck-audit/v1"
DOMAIN = b"keracheck-audit/v1\0"
GENESIS = bytes(32)
DEFAULT_CAPACITY = 4096

#: entry kinds, and what each records (docs/security.md lists them too)
KINDS: dict[str, str] = {
    "start": "the command and the policy's origin, first of every log",
    "grant": "a capability granted at start-up: kind, scope, source",
    "deny": "a capability check that failed: kind, scope, the message",
    "use": "the first use of a grant: kind, scope asked for, the grant that covered it",
    "plugin": "a plugin loaded: spec, and the target id it registered",
    "key": "the signing key used: its source and key id",
    "sandbox": "the sandbox the run's targets ran in: mode and set-up",
    "violation": "a sandbox violation reported for a case and target",
    "journal": "a run resumed from its journal: results taken, results computed",
    "written": "a rendering written: path, format, SHA-256 and size of its bytes",
    "report": "a signed report about to be written: path, key id, statements",
}


def canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def entry_hash(prev: bytes, seq: int, time: str, kind: str, data: Mapping[str, Any]) -> bytes:
    return hashlib.sha256(DOMAIN + prev + canonical([seq, time, kind, dict(data)])).digest()


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


@dataclass(frozen=True)
class Entry:
    seq: int
    time: str
    kind: str
    data: Mapping[str, Any]
    hash: bytes

    def record(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "time": self.time,
            "kind": self.kind,
            "data": dict(self.data),
            "hash": self.hash.hex(),
        }


class AuditLog:
    """Hash-chained entries in a ring of ``capacity``; every method is thread-safe."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError(f"audit log capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self._ring: deque[Entry] = deque(maxlen=capacity)
        self._head = GENESIS
        self._next = 0
        self._checkpoint: tuple[int, bytes] | None = None
        self._lock = threading.Lock()

    def record(self, kind: str, data: Mapping[str, Any]) -> Entry:
        """Append an entry (``data`` must be JSON); the oldest goes when the ring is full."""
        if kind not in KINDS:
            raise ValueError(f"unknown audit entry kind {kind!r}")
        payload = json.loads(canonical(dict(data)))  # a private copy, JSON-checked
        with self._lock:
            seq, time = self._next, _now()
            entry = Entry(
                seq, time, kind, payload, entry_hash(self._head, seq, time, kind, payload)
            )
            if len(self._ring) == self.capacity:
                oldest = self._ring[0]
                self._checkpoint = (oldest.seq, oldest.hash)
            self._ring.append(entry)
            self._head, self._next = entry.hash, seq + 1
            return entry

    def entries(self) -> list[Entry]:
        with self._lock:
            return list(self._ring)

    def snapshot(self, grants: Sequence[Mapping[str, str]] = ()) -> dict[str, Any]:
        """The JSON form of the log (retained entries, checkpoint, head), with the policy's
        ``grants`` beside it so a reader sees them even after the ring dropped their entries."""
        with self._lock:
            entries = [e.record() for e in self._ring]
            checkpoint = self._checkpoint
            head = {"seq": self._next - 1, "hash": self._head.hex()} if self._next else None
        return {
            "format": FORMAT,
            "algorithm": "sha256",
            "capacity": self.capacity,
            "checkpoint": None
            if checkpoint is None
            else {"seq": checkpoint[0], "hash": checkpoint[1].hex()},
            "head": head,
            "grants": [dict(g) for g in grants],
            "entries": entries,
        }


# ------------------------------------------------------------------------------ verification


@dataclass
class LogVerdict:
    """What :func:`verify_log` found: ``problems`` empty when the chain verifies."""

    problems: list[str] = field(default_factory=list)
    entries: list[dict[str, Any]] = field(default_factory=list)
    grants: list[dict[str, Any]] = field(default_factory=list)
    dropped: int = 0  # entries overwritten by the ring (before the checkpoint)

    @property
    def ok(self) -> bool:
        return not self.problems


def _is_hex(value: Any, size: int = 64) -> bool:
    return (
        isinstance(value, str)
        and len(value) == size
        and all(c in "0123456789abcdef" for c in value)
    )


def _shape_problem(log: Any) -> str | None:
    """Why ``log`` is not an audit snapshot at all, else None."""
    if not isinstance(log, dict) or log.get("format") != FORMAT:
        return f"not a {FORMAT} log"
    if not isinstance(log.get("entries"), list) or not isinstance(log.get("capacity"), int):
        return "no entries list or capacity"
    for k, e in enumerate(log["entries"]):
        if not (
            isinstance(e, dict)
            and type(e.get("seq")) is int
            and isinstance(e.get("time"), str)
            and isinstance(e.get("kind"), str)
            and isinstance(e.get("data"), dict)
            and _is_hex(e.get("hash"))
        ):
            return f"entry {k} lacks seq, time, kind, data or a hex hash"
    grants = log.get("grants")
    if not isinstance(grants, list) or not all(
        isinstance(g, dict) and all(isinstance(g.get(k), str) for k in ("kind", "scope", "source"))
        for g in grants
    ):
        return "grants is not a list of {kind, scope, source}"
    for name in ("checkpoint", "head"):
        mark = log.get(name)
        if mark is not None and not (
            isinstance(mark, dict) and type(mark.get("seq")) is int and _is_hex(mark.get("hash"))
        ):
            return f"{name} is not {{seq, hash}}"
    return None


def _order_problems(seqs: Sequence[int], first: int) -> list[str]:
    """Duplicated, reordered and missing sequence numbers (``first``: the expected first)."""
    problems: list[str] = []
    seen: set[int] = set()
    for k, s in enumerate(seqs):
        if s in seen:
            problems.append(f"entry {k}: seq {s} is duplicated")
        elif k and s < seqs[k - 1]:
            problems.append(f"entry {k}: seq {s} comes after seq {seqs[k - 1]} (reordered)")
        seen.add(s)
    if seqs and seqs[0] != first:
        problems.append(
            f"entry 0: seq {seqs[0]} does not follow the checkpoint (expected seq {first}): "
            "entries were dropped from the front (truncated past the checkpoint)"
            if seqs[0] > first
            else f"entry 0: seq {seqs[0]} is before the checkpoint (expected seq {first})"
        )
    missing = sorted(set(range(seqs[0], max(seqs) + 1)) - seen) if seqs else []
    if missing:
        problems.append(f"seq {_ranges(missing)} missing: entries were dropped")
    return problems


def _ranges(nums: Sequence[int]) -> str:
    spans: list[str] = []
    start = prev = nums[0]
    for n in [*nums[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        spans.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ", ".join(spans)


def _chain_problems(entries: Sequence[Mapping[str, Any]], prev: bytes, first: int) -> list[str]:
    """Every entry whose hash is not what its content and its predecessor's hash give."""
    problems: list[str] = []
    expect_seq = first
    for k, e in enumerate(entries):
        if e["seq"] == expect_seq:
            want = entry_hash(prev, e["seq"], e["time"], e["kind"], e["data"])
            if want.hex() != e["hash"]:
                problems.append(
                    f"entry {k} (seq {e['seq']}, {e['kind']}): hash mismatch: the entry, or the "
                    "hash of the one before it, was changed"
                )
        prev, expect_seq = bytes.fromhex(e["hash"]), e["seq"] + 1
    return problems


def _grant_problems(
    grants: Sequence[Mapping[str, Any]], entries: Sequence[Mapping[str, Any]]
) -> list[str]:
    """The grants listed beside the chain must be those its ``grant`` entries record (all of
    them, or the last ones when the ring overwrote the first)."""
    recorded = [dict(e["data"]) for e in entries if e["kind"] == "grant"]
    tail = [dict(g) for g in grants[len(grants) - len(recorded) :]] if recorded else []
    if len(recorded) > len(grants) or tail != recorded:
        return ["the grants listed are not those the chain's grant entries record"]
    overwritten = entries[0]["seq"] > 0 if entries else False
    if not overwritten and len(recorded) != len(grants):
        return ["the grants listed are not those the chain's grant entries record"]
    return []


def verify_log(log: Any) -> LogVerdict:
    """Check an audit snapshot: shape, capacity, sequence (no duplicate, reorder or gap, the
    first entry following the checkpoint, the last being the head) and every hash."""
    problem = _shape_problem(log)
    if problem is not None:
        return LogVerdict([f"audit log: {problem}"])
    entries: list[dict[str, Any]] = log["entries"]
    checkpoint, head = log.get("checkpoint"), log.get("head")
    first = checkpoint["seq"] + 1 if checkpoint else 0
    prev = bytes.fromhex(checkpoint["hash"]) if checkpoint else GENESIS
    verdict = LogVerdict(entries=entries, grants=list(log.get("grants") or []), dropped=first)
    if len(entries) > log["capacity"]:
        verdict.problems.append(f"{len(entries)} entries in a ring of {log['capacity']}")
    seqs = [e["seq"] for e in entries]
    verdict.problems += _order_problems(seqs, first)
    verdict.problems += _chain_problems(entries, prev, first)
    verdict.problems += _grant_problems(verdict.grants, entries)
    last = entries[-1] if entries else None
    if head is None and last is not None:
        verdict.problems.append("the log has entries but no head")
    elif head is not None and (
        last is None or (last["seq"], last["hash"]) != (head["seq"], head["hash"])
    ):
        at = f"seq {last['seq']}" if last else "no entry"
        verdict.problems.append(
            f"the log ends at {at} but its head is seq {head['seq']}: entries were dropped "
            "from the end, or the last was changed"
        )
    verdict.problems = [f"audit log: {p}" for p in verdict.problems]
    return verdict


# ------------------------------------------------------------------------------ rendering


def describe(data: Mapping[str, Any]) -> str:
    """An entry's data as ``key=value`` words, for a terminal."""
    return " ".join(f"{k}={v}" for k, v in data.items())


def render(log: Mapping[str, Any], verdict: LogVerdict) -> str:
    """The log as text: the grants, then one line per entry, then the verdict."""
    lines = ["capabilities granted:"]
    lines += [f"  {g['kind']:<9} {g['scope']}  ({g['source']})" for g in verdict.grants]
    lines.append("  network   never")
    cp = log.get("checkpoint")
    lines.append(
        f"audit log: {len(verdict.entries)} entries kept of {log.get('capacity')}"
        + (
            f"; checkpoint seq {cp['seq']} {cp['hash'][:16]} ({verdict.dropped} older entries "
            "overwritten)"
            if cp
            else "; nothing overwritten"
        )
    )
    for e in verdict.entries:
        lines.append(
            f"  {e['seq']:>5}  {e['time']}  {e['kind']:<9} {str(e['hash'])[:12]}  {describe(e['data'])}"
        )
    if verdict.ok:
        head = log.get("head") or {}
        lines.append(f"chain verified: head seq {head.get('seq')} {str(head.get('hash'))[:16]}")
    else:
        lines += ["CHAIN BROKEN:", *(f"  {p}" for p in verdict.problems)]
    return "\n".join(lines)
