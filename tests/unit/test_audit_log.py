"""The audit log (keracheck.security.audit): hash-chained entries in a ring; any changed bit,
dropped, duplicated or reordered entry, or a truncation past the checkpoint is detected and
named; overwriting the oldest keeps the chain verifiable; concurrent writers keep it whole."""

from __future__ import annotations

import copy
import json
import re
import threading
from typing import Any

import pytest

from keracheck.security import AuditLog, verify_log
from keracheck.security.audit import GENESIS, entry_hash


def filled(n: int, capacity: int = 64) -> AuditLog:
    log = AuditLog(capacity)
    for k in range(n):
        log.record("use", {"kind": "read", "scope": f"/corpus/{k}.kera", "n": k})
    return log


def problems(snapshot: Any) -> list[str]:
    return verify_log(snapshot).problems


def test_a_fresh_log_verifies_and_chains_from_the_genesis() -> None:
    grant = {"kind": "read", "scope": "/corpus", "source": "test"}
    log = AuditLog(64)
    log.record("grant", grant)
    for k in range(4):
        log.record("use", {"kind": "read", "scope": f"/corpus/{k}.kera"})
    snap = log.snapshot([grant])
    assert problems(snap) == []
    first = snap["entries"][0]
    want = entry_hash(GENESIS, 0, first["time"], first["kind"], first["data"])
    assert want.hex() == first["hash"]
    assert snap["head"] == {"seq": 4, "hash": snap["entries"][-1]["hash"]}
    assert snap["checkpoint"] is None
    assert verify_log(snap).grants == [grant]


def test_the_grants_listed_must_be_those_the_chain_records() -> None:
    grant = {"kind": "write", "scope": "/out", "source": "test"}
    log = AuditLog(64)
    log.record("grant", grant)
    snap = log.snapshot([grant])
    assert problems(snap) == []
    wider = copy.deepcopy(snap)
    wider["grants"][0]["scope"] = "/"
    more = copy.deepcopy(snap)
    more["grants"].append({"kind": "key", "scope": "/k", "source": "test"})
    for bad in (wider, more):
        assert any("grants listed are not those" in p for p in problems(bad))


def test_the_empty_log_verifies() -> None:
    snap = AuditLog(4).snapshot()
    assert snap["entries"] == [] and snap["head"] is None and problems(snap) == []


def test_unknown_kinds_and_non_json_data_are_refused() -> None:
    log = AuditLog(4)
    with pytest.raises(ValueError, match="unknown audit entry kind"):
        log.record("whatever", {})
    with pytest.raises(TypeError):
        log.record("use", {"x": object()})


def test_every_one_bit_change_of_an_entry_is_detected() -> None:
    """Flip each bit of the serialised entries in turn: the result is not JSON, or the log
    does not verify."""
    snap = filled(3).snapshot()
    text = json.dumps(snap, sort_keys=True, separators=(",", ":")).encode()
    start = text.index(b'"entries":')
    undetected = []
    for pos in range(start, len(text)):
        for bit in range(8):
            changed = bytearray(text)
            changed[pos] ^= 1 << bit
            try:
                tampered = json.loads(bytes(changed))
            except (ValueError, UnicodeDecodeError):
                continue
            if tampered != snap and not problems(tampered):
                undetected.append((pos, bit))
    assert undetected == []


TAMPER = {
    "changed data": lambda s: s["entries"][2]["data"].update(scope="/home/user/.ssh/id_rsa"),
    "changed kind": lambda s: s["entries"][2].update(kind="grant"),
    "changed time": lambda s: s["entries"][2].update(time="2020-01-01T00:00:00.000Z"),
    "changed hash": lambda s: s["entries"][2].update(hash="0" * 64),
    "dropped": lambda s: s["entries"].pop(2),
    "duplicated": lambda s: s["entries"].insert(3, copy.deepcopy(s["entries"][2])),
    "reordered": lambda s: s["entries"].insert(3, s["entries"].pop(2)),
    "dropped from the end": lambda s: s["entries"].pop(),
    "dropped from the front": lambda s: s["entries"].pop(0),
}

NAMED = {
    "changed data": "entry 2 (seq 2, use): hash mismatch",
    "changed kind": "entry 2 (seq 2, grant): hash mismatch",
    "changed time": "entry 2 (seq 2, use): hash mismatch",
    "changed hash": "entry 2 (seq 2, use): hash mismatch",
    "dropped": "seq 2 missing: entries were dropped",
    "duplicated": "entry 3: seq 2 is duplicated",
    "reordered": "entry 3: seq 2 comes after seq 3 (reordered)",
    "dropped from the end": "the log ends at seq 4 but its head is seq 5",
    "dropped from the front": "entry 0: seq 1 does not follow the checkpoint",
}


@pytest.mark.parametrize("how", list(TAMPER))
def test_tampering_is_detected_and_named(how: str) -> None:
    snap = filled(6).snapshot()
    TAMPER[how](snap)
    found = problems(snap)
    assert found, how
    assert any(NAMED[how] in p for p in found), found


def test_the_ring_keeps_a_checkpoint_and_still_verifies() -> None:
    log = filled(50, capacity=8)
    snap = log.snapshot()
    assert [e["seq"] for e in snap["entries"]] == list(range(42, 50))
    assert snap["checkpoint"]["seq"] == 41
    verdict = verify_log(snap)
    assert verdict.ok and verdict.dropped == 42
    # the checkpoint is the hash the first kept entry chains from
    first = snap["entries"][0]
    prev = bytes.fromhex(snap["checkpoint"]["hash"])
    assert entry_hash(prev, 42, first["time"], first["kind"], first["data"]).hex() == first["hash"]


def test_truncating_past_the_checkpoint_is_detected() -> None:
    snap = filled(50, capacity=8).snapshot()
    del snap["entries"][:3]  # entries 42-44 gone, the checkpoint still says 41
    assert any("truncated past the checkpoint" in p for p in problems(snap))
    snap = filled(50, capacity=8).snapshot()
    snap["checkpoint"]["hash"] = "f" * 64  # a forged checkpoint breaks the first link
    assert any("entry 0 (seq 42" in p for p in problems(snap))
    snap = filled(50, capacity=8).snapshot()
    snap["checkpoint"] = None  # hiding that anything was overwritten
    assert any("does not follow the checkpoint" in p for p in problems(snap))


def test_more_entries_than_the_capacity_is_detected() -> None:
    snap = filled(10, capacity=16).snapshot()
    snap["capacity"] = 4
    assert any("10 entries in a ring of 4" in p for p in problems(snap))


@pytest.mark.parametrize("capacity", [100_000, 64])
def test_concurrent_writers_keep_one_unbroken_chain(capacity: int) -> None:
    log = AuditLog(capacity)
    threads, per = 8, 400

    def write(t: int) -> None:
        for k in range(per):
            log.record("use", {"thread": t, "k": k})

    workers = [threading.Thread(target=write, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    snap = log.snapshot()
    assert problems(snap) == []
    seqs = [e["seq"] for e in snap["entries"]]
    assert seqs == list(range(threads * per - len(seqs), threads * per))
    if capacity > threads * per:  # nothing overwritten: every write of every thread is there
        assert sorted((e["data"]["thread"], e["data"]["k"]) for e in snap["entries"]) == [
            (t, k) for t in range(threads) for k in range(per)
        ]


def test_malformed_logs_are_problems_not_exceptions() -> None:
    bad: Any
    for bad in (None, [], {"format": "other"}, {"format": "keracheck-audit/v1"}):
        assert problems(bad)
    snap = filled(2).snapshot()
    snap["entries"][1]["seq"] = "1"
    assert any("entry 1 lacks" in p for p in problems(snap))
    snap = filled(2).snapshot()
    snap["head"] = {"seq": 1}
    assert any("head is not" in p for p in problems(snap))


def test_the_docs_and_the_schema_list_every_entry_kind() -> None:
    from pathlib import Path

    from keracheck.security import KINDS

    root = Path(__file__).resolve().parents[2]
    page = (root / "docs" / "security.md").read_text()
    table = page[page.index("The kinds recorded:") : page.index("The signed report carries")]
    documented = re.findall(r"^\| `([a-z]+)` \|", table, re.M)
    assert documented == list(KINDS)
    schema = json.loads((root / "keracheck" / "schemas" / "predicate-v1.json").read_text())
    entry = schema["$defs"]["auditLog"]["properties"]["entries"]["items"]
    assert entry["properties"]["kind"]["enum"] == list(KINDS)
