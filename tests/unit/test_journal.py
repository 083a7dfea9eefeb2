"""The run journal (keracheck.journal): records round-trip; a torn, changed, foreign or
inconsistent record is never trusted (it is skipped, the journal is repaired, the result is
computed again); a journal is held by one run at a time."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import numpy as np
import pytest

from keracheck import journal as jr
from keracheck.worker import JobResult

SECRET = bytes(range(32))


def ok(seed: int, repeats: int = 1) -> JobResult:
    rng = np.random.default_rng(seed)
    outs = [rng.standard_normal((4, 3)).astype(np.float32), (rng.integers(0, 2, 4) > 0)]
    return JobResult(
        "ok",
        outputs=[outs] * repeats,
        loaded=f"{seed:064x}",
        seconds=0.25,
        artifacts={"kernel.c": "ab" * 32},
    )


def err(seed: int) -> JobResult:
    return JobResult("error", f"timed out after {seed} s", seconds=float(seed), traceback="tb")


def same(a: JobResult, b: JobResult) -> bool:
    if (a.status, a.message, a.loaded, a.seconds, a.artifacts, a.traceback) != (
        b.status,
        b.message,
        b.loaded,
        b.seconds,
        b.artifacts,
        b.traceback,
    ):
        return False
    pairs = [
        (x, y)
        for ra, rb in zip(a.outputs, b.outputs, strict=True)
        for x, y in zip(ra, rb, strict=True)
    ]
    return len(a.outputs) == len(b.outputs) and all(
        x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes() for x, y in pairs
    )


RESULTS = {"k0": ok(0), "k1": err(7), "k2": ok(2, repeats=3), "k3": JobResult("ok", outputs=[[]])}


def stream() -> bytes:
    return b"".join(jr.encode(SECRET, k, r) for k, r in RESULTS.items())


def test_records_round_trip() -> None:
    records, damaged = jr.decode_all(SECRET, stream())
    assert damaged == 0
    assert [k for k, _, _ in records] == list(RESULTS)
    for k, res, _ in records:
        assert same(res, RESULTS[k]), k


def test_a_torn_tail_is_never_trusted() -> None:
    data = stream()
    last = len(jr.encode(SECRET, "k3", RESULTS["k3"]))
    for cut in range(len(data) - last, len(data)):
        records, damaged = jr.decode_all(SECRET, data[:cut])
        assert [k for k, _, _ in records] == ["k0", "k1", "k2"], cut
        assert damaged == (1 if cut > len(data) - last else 0)


def test_a_changed_record_is_skipped_and_the_rest_are_kept() -> None:
    data = stream()
    first = len(jr.encode(SECRET, "k0", RESULTS["k0"]))
    for pos in range(0, first, 7):  # every 7th byte of the first record, each bit
        for bit in range(8):
            changed = bytearray(data)
            changed[pos] ^= 1 << bit
            records, damaged = jr.decode_all(SECRET, bytes(changed))
            assert [k for k, _, _ in records] == ["k1", "k2", "k3"], (pos, bit)
            assert damaged >= 1


def test_a_record_without_the_secret_is_not_trusted() -> None:
    records, damaged = jr.decode_all(b"\1" * 32, stream())
    assert records == [] and damaged >= 1


def _forged(meta: dict[str, object], tail: bytes = b"") -> bytes:
    body = jr.META.pack(len(json.dumps(meta))) + json.dumps(meta).encode() + tail
    return jr.HEADER.pack(jr.MAGIC, len(body), jr._mac(SECRET, body)) + body


@pytest.mark.parametrize(
    "meta,tail",
    [
        ({"key": "x", "status": "ok", "outputs": [[["|O", [2]]]]}, b"\0" * 16),  # an object dtype
        ({"key": "x", "status": "ok", "outputs": [[["<f4", [1000]]]]}, b"\0" * 8),  # too short
        ({"key": "x", "status": "ok", "outputs": [[["<f4", [-1]]]]}, b""),  # a negative shape
        ({"key": "x", "status": "ok", "outputs": [[["<f4", [1]]]]}, b"\0" * 9),  # bytes left over
        ({"status": "ok", "outputs": []}, b""),  # no key
        ({"key": "x", "status": "ok", "outputs": [], "bogus": 1}, b"x"),  # bytes left over
        ({"key": "x", "status": "ok", "outputs": [], "message": 3}, b""),  # a wrong type
        ({"key": "x", "status": "maybe", "outputs": []}, b""),  # an unknown status
        ({"key": 5, "status": "ok", "outputs": []}, b""),  # a key that is not a string
    ],
)
def test_an_authentic_but_inconsistent_record_is_skipped(
    meta: dict[str, object], tail: bytes
) -> None:
    good = jr.encode(SECRET, "k0", RESULTS["k0"])
    records, damaged = jr.decode_all(SECRET, _forged(meta, tail) + good)
    assert [k for k, _, _ in records] == ["k0"] and damaged == 1


def test_a_length_past_the_end_is_damage_not_an_allocation() -> None:
    header = jr.HEADER.pack(jr.MAGIC, 0xFFFFFFF0, b"\0" * 32)
    records, damaged = jr.decode_all(SECRET, header + jr.encode(SECRET, "k1", RESULTS["k1"]))
    assert [k for k, _, _ in records] == ["k1"] and damaged == 1


def test_open_append_resume_and_finish(tmp_path: Path) -> None:
    j = jr.open_journal(str(tmp_path), "run1")
    assert isinstance(j, jr.Journal) and j.found == 0
    j.append([("k0", RESULTS["k0"]), ("k1", RESULTS["k1"])])
    j.append([("k2", RESULTS["k2"])])
    j.close(finished=False)  # a killed run leaves its journal
    again = jr.open_journal(str(tmp_path), "run1")
    assert isinstance(again, jr.Journal) and again.found == 3
    taken = again.take("k2")
    assert taken is not None and same(taken, RESULTS["k2"])
    assert again.take("k0", accept=lambda r: False) is None  # refused: computed again
    assert again.take("nope") is None and again.taken == 1
    again.close(finished=True)
    assert not (tmp_path / "run1.jnl").exists()
    fresh = jr.open_journal(str(tmp_path), "run1")
    assert isinstance(fresh, jr.Journal) and fresh.found == 0
    fresh.close(finished=True)


def test_a_damaged_journal_is_repaired_before_appending(tmp_path: Path) -> None:
    j = jr.open_journal(str(tmp_path), "r")
    assert isinstance(j, jr.Journal)
    j.append([("k0", RESULTS["k0"]), ("k1", RESULTS["k1"])])
    j.close(finished=False)
    path = tmp_path / "r.jnl"
    whole = path.read_bytes()
    path.write_bytes(whole + jr.encode(SECRET, "k2", RESULTS["k2"])[:-5])  # a torn append
    resumed = jr.open_journal(str(tmp_path), "r")
    assert isinstance(resumed, jr.Journal) and (resumed.found, resumed.damaged) == (2, 1)
    assert path.read_bytes() == whole  # only the valid records are left
    resumed.append([("k3", RESULTS["k3"])])
    resumed.close(finished=False)
    assert [k for k, _ in jr.read_records(str(tmp_path), "r")] == ["k0", "k1", "k3"]


def test_the_fresh_flag_discards_an_old_journal(tmp_path: Path) -> None:
    j = jr.open_journal(str(tmp_path), "r")
    assert isinstance(j, jr.Journal)
    j.append([("k0", RESULTS["k0"])])
    j.close(finished=False)
    fresh = jr.open_journal(str(tmp_path), "r", fresh=True)
    assert isinstance(fresh, jr.Journal) and fresh.found == 0
    fresh.close(finished=False)


def test_one_run_at_a_time_holds_a_journal(tmp_path: Path) -> None:
    first = jr.open_journal(str(tmp_path), "same")
    assert isinstance(first, jr.Journal)
    second = jr.open_journal(str(tmp_path), "same")
    assert isinstance(second, str) and "another run with the same arguments" in second
    other = jr.open_journal(str(tmp_path), "other")
    assert isinstance(other, jr.Journal)
    first.close(finished=True)
    other.close(finished=True)
    third = jr.open_journal(str(tmp_path), "same")
    assert isinstance(third, jr.Journal)
    third.close(finished=True)


def test_an_unwritable_folder_means_no_journal(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    got = jr.open_journal(str(blocker / "journal"), "r")
    assert isinstance(got, str) and "cannot" in got


def test_the_run_key_is_a_digest_of_the_arguments() -> None:
    a = jr.run_key({"targets": ["ref", "cpu"], "seed": 0})
    assert a == jr.run_key({"seed": 0, "targets": ["ref", "cpu"]})
    assert a != jr.run_key({"targets": ["ref", "cpu"], "seed": 1})


def test_the_record_layout_is_as_documented() -> None:
    rec = jr.encode(SECRET, "k1", RESULTS["k1"])
    magic, size, mac = struct.unpack_from("<4sI32s", rec)
    assert magic == b"KJR1" and size == len(rec) - 40
    body = rec[40:]
    assert mac == jr._mac(SECRET, body)
    (meta_len,) = struct.unpack_from("<I", body)
    meta = json.loads(body[4 : 4 + meta_len])
    assert meta["key"] == "k1" and meta["status"] == "error" and meta["outputs"] == []
    assert os.path.basename(jr.default_journal_dir()) == "journal"
