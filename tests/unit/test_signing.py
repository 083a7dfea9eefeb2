"""Keys, DSSE envelopes, statements and signed reports (keracheck.signing)."""

from __future__ import annotations

import base64
import copy
import functools
import hashlib
import json
import re
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given
from hypothesis import strategies as st
from test_formats import sample_run, schema_validator

from keracheck import signing
from keracheck.signing import (
    EnvelopeError,
    KeyFileError,
    keygen,
    load_private_key,
    load_public_key,
    pae,
    report_bytes,
    sign_envelope,
    statement_for_case,
    statement_for_run,
    verify_envelope,
    verify_report,
    verify_report_bytes,
    write_report,
)


@functools.cache
def fixed_key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(bytes(range(32)))


def small_run() -> dict[str, Any]:
    run = sample_run()
    run["cases"] = run["cases"][:1]
    run["summary"] |= {"cases": 1, "diverge": 0, "error": 0, "exitCode": 0}
    return run


@functools.cache
def small_report() -> bytes:
    return report_bytes(small_run(), fixed_key())


@functools.cache
def full_report() -> bytes:
    return report_bytes(sample_run(), fixed_key())


def flip(data: bytes, bit: int) -> bytes:
    changed = bytearray(data)
    changed[bit // 8] ^= 1 << (bit % 8)
    return bytes(changed)


# ------------------------------------------------------------------------------------------ DSSE


def test_pae_spec_vector() -> None:
    expected = b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    assert pae("http://example.com/HelloWorld", b"hello world") == expected


def test_pae_counts_bytes_not_characters() -> None:
    assert pae("t", "é".encode()) == b"DSSEv1 1 t 2 \xc3\xa9"


def test_envelope_round_trip_and_layout() -> None:
    statement = {"_type": signing.STATEMENT_TYPE, "subject": [], "predicate": {"x": 1}}
    envelope = sign_envelope(statement, fixed_key())
    assert envelope["payloadType"] == "application/vnd.in-toto+json"
    (signature,) = envelope["signatures"]
    der = (
        fixed_key()
        .public_key()
        .public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    assert signature["keyid"] == hashlib.sha256(der).hexdigest()
    assert len(base64.b64decode(signature["sig"])) == 64
    payload = verify_envelope(envelope, fixed_key().public_key())
    assert json.loads(payload) == statement


def test_envelope_accepts_url_safe_unpadded_base64() -> None:
    envelope = sign_envelope({"a": "??>>"}, fixed_key())  # payload base64 has + or /

    def urlsafe(text: str) -> str:
        return base64.urlsafe_b64encode(base64.b64decode(text)).decode().rstrip("=")

    converted = copy.deepcopy(envelope)
    converted["payload"] = urlsafe(envelope["payload"])
    converted["signatures"][0]["sig"] = urlsafe(envelope["signatures"][0]["sig"])
    assert converted["payload"] != envelope["payload"]
    assert verify_envelope(converted, fixed_key().public_key()) == b'{"a":"??>>"}'


def test_b64decode_rejects_stray_bits_and_bad_padding() -> None:
    assert signing.b64decode("QQ==") == b"A"
    assert signing.b64decode("QQ") == b"A"
    with pytest.raises(EnvelopeError, match="non-canonical"):
        signing.b64decode("QR==")
    with pytest.raises(EnvelopeError, match="padding"):
        signing.b64decode("QQ=")
    with pytest.raises(EnvelopeError, match="invalid base64"):
        signing.b64decode("Q!==")


def test_wrong_key_fails() -> None:
    envelope = sign_envelope({"a": 1}, fixed_key())
    other = Ed25519PrivateKey.generate().public_key()
    with pytest.raises(EnvelopeError, match="no signature verifies"):
        verify_envelope(envelope, other)


def test_keyid_is_only_a_hint() -> None:
    envelope = sign_envelope({"a": 1}, fixed_key())
    stranger = sign_envelope({"a": 1}, Ed25519PrivateKey.generate())["signatures"][0]
    envelope["signatures"][0]["keyid"] = "not-the-id"
    envelope["signatures"].insert(0, stranger)
    assert verify_envelope(envelope, fixed_key().public_key()) == b'{"a":1}'


def test_changed_payload_type_fails() -> None:
    envelope = sign_envelope({"a": 1}, fixed_key())
    envelope["payloadType"] = "application/json"
    with pytest.raises(EnvelopeError):
        verify_envelope(envelope, fixed_key().public_key())


# ------------------------------------------------------------------------------------------ keys


def test_keygen_writes_private_0600_and_public(tmp_path: Path) -> None:
    key_path, pub_path = keygen(tmp_path / "keys")
    assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
    assert key_path.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    assert pub_path.read_bytes().startswith(b"-----BEGIN PUBLIC KEY-----")
    key, pub = load_private_key(key_path), load_public_key(pub_path)
    envelope = sign_envelope({"a": 1}, key)
    assert verify_envelope(envelope, pub) == b'{"a":1}'


def test_keygen_refuses_to_overwrite(tmp_path: Path) -> None:
    key_path, _ = keygen(tmp_path)
    before = key_path.read_bytes()
    with pytest.raises(KeyFileError, match="already exists"):
        keygen(tmp_path)
    assert key_path.read_bytes() == before
    keygen(tmp_path, force=True)
    assert key_path.read_bytes() != before


def test_encrypted_key_with_password_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERACHECK_KEY_PASSWORD", "correct horse")
    key_path, pub_path = keygen(tmp_path, "KERACHECK_KEY_PASSWORD")
    assert key_path.read_bytes().startswith(b"-----BEGIN ENCRYPTED PRIVATE KEY-----")
    key = load_private_key(key_path, "KERACHECK_KEY_PASSWORD")
    assert signing.keyid(key.public_key()) == signing.keyid(load_public_key(pub_path))
    with pytest.raises(KeyFileError, match="the key is encrypted"):
        load_private_key(key_path)
    monkeypatch.setenv("KERACHECK_KEY_PASSWORD", "wrong")
    with pytest.raises(KeyFileError, match="wrong password"):
        load_private_key(key_path, "KERACHECK_KEY_PASSWORD")
    monkeypatch.delenv("KERACHECK_KEY_PASSWORD")
    with pytest.raises(KeyFileError, match="KERACHECK_KEY_PASSWORD is not set"):
        load_private_key(key_path, "KERACHECK_KEY_PASSWORD")


def test_signing_key_uses_the_password_variable_only_when_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain, _ = keygen(tmp_path / "plain")
    monkeypatch.setenv("KERACHECK_KEY_PASSWORD", "pw")
    locked, _ = keygen(tmp_path / "locked", "KERACHECK_KEY_PASSWORD")
    assert isinstance(signing.load_signing_key(locked), Ed25519PrivateKey)
    monkeypatch.setenv("KERACHECK_KEY_PASSWORD", "")
    assert isinstance(signing.load_signing_key(plain), Ed25519PrivateKey)
    with pytest.raises(KeyFileError, match="the key is encrypted"):
        signing.load_signing_key(locked)


def test_password_for_a_plain_key_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key_path, _ = keygen(tmp_path)
    monkeypatch.setenv("PW", "x")
    with pytest.raises(KeyFileError, match="not encrypted, but a password was given in PW"):
        load_private_key(key_path, "PW")


def test_key_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key_path, pub_path = keygen(tmp_path)
    monkeypatch.setenv("KERACHECK_KEY", key_path.read_text())
    key = load_private_key("env://KERACHECK_KEY")
    assert signing.keyid(key.public_key()) == signing.keyid(load_public_key(pub_path))
    with pytest.raises(KeyFileError, match="env://MISSING: environment variable is not set"):
        load_private_key("env://MISSING")


def test_key_errors_name_the_file_and_the_problem(tmp_path: Path) -> None:
    with pytest.raises(KeyFileError, match=r"nope\.key: no such file") as info:
        load_private_key(tmp_path / "nope.key")
    assert info.value.path == str(tmp_path / "nope.key") and info.value.problem == "no such file"
    junk = tmp_path / "junk.pub"
    junk.write_text("hello\n")
    with pytest.raises(KeyFileError, match=r"junk\.pub: not a PEM public key"):
        load_public_key(junk)
    with pytest.raises(KeyFileError, match="not a PEM private key"):
        load_private_key(junk)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    ec_pem = tmp_path / "ec.key"
    ec_pem.write_bytes(
        ec_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    with pytest.raises(KeyFileError, match="not an Ed25519 key"):
        load_private_key(ec_pem)
    _, pub_path = keygen(tmp_path)
    with pytest.raises(KeyFileError, match="not a PEM private key"):
        load_private_key(pub_path)


# ------------------------------------------------------------------------------------ statements


def test_case_statement() -> None:
    run = sample_run()
    case = run["cases"][2]
    statement = statement_for_case(case, run)
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["predicateType"] == "https://kera.dev/attestation/determinism/v1"
    (subject,) = statement["subject"]
    assert subject["name"] == f"{case['path']}:{case['function']}"
    assert subject["digest"] == {
        "sha3_256": case["keg"]["sha3_256"],
        "sha256": case["keg"]["sha256"],
    }
    predicate = statement["predicate"]
    assert (predicate["verdict"], predicate["result"]) == ("error", "FAILED")
    assert predicate["toolchains"] == {"cpu": {"gcc": "14.2.0"}, "ref": {"numpy": "2.4.6"}}
    cpu = predicate["targets"]["cpu"]
    assert cpu["artifacts"] == [
        {"name": "main.c", "digest": {"sha256": case["targets"]["cpu"]["artifacts"]["main.c"]}}
    ]
    assert (
        predicate["targets"]["ref"]["outputs"][0]["digest"]["sha256"]
        == case["targets"]["ref"]["outputs"][0]["sha256"]
    )
    assert predicate["inputs"]["digests"]["x"] == {"sha256": case["inputs"]["digests"]["x"]}
    assert predicate["repro"] == case["repro"]
    assert predicate["startedOn"] == "2026-12-02T12:00:00Z"
    assert statement_for_case(case, run, "x.keg")["subject"][0]["name"] == "x.keg"


@pytest.mark.parametrize(
    ("verdict", "baselined", "result"),
    [
        ("agree", False, "PASSED"),
        ("diverge", False, "FAILED"),
        ("diverge", True, "WARNED"),
        ("skipped", False, "WARNED"),
        ("error", False, "FAILED"),
    ],
)
def test_result_words(verdict: str, baselined: bool, result: str) -> None:
    case = sample_run()["cases"][1] | {"verdict": verdict}
    case["divergences"][0]["baselined"] = baselined
    assert signing.case_result(case) == result


def test_run_statement_lists_every_case() -> None:
    run = sample_run()
    payloads = [b"one", b"two", b"three"]
    statement = statement_for_run(run, payloads)
    assert statement["predicateType"] == signing.RUN_PREDICATE_TYPE
    assert [s["digest"]["sha3_256"] for s in statement["subject"]] == [
        c["fingerprint"] for c in run["cases"]
    ]
    listed = statement["predicate"]["cases"]
    assert listed[1]["statement"] == {"sha256": hashlib.sha256(b"two").hexdigest()}
    assert statement["predicate"]["result"] == "FAILED"
    assert statement["predicate"]["summary"]["exitCode"] == 3
    with pytest.raises(ValueError, match="2 case payloads for 3 cases"):
        statement_for_run(run, payloads[:2])


def test_predicates_match_schema() -> None:
    jsonschema = pytest.importorskip(
        "jsonschema", reason="jsonschema not installed: pip install jsonschema"
    )
    case_validator = schema_validator(jsonschema, "predicate-v1.json")
    run_validator = schema_validator(jsonschema, "predicate-v1.json", "#/$defs/runPredicate")
    run = sample_run()
    for case in run["cases"]:
        case_validator.validate(statement_for_case(case, run)["predicate"])
    run_validator.validate(statement_for_run(run, [b""] * 3)["predicate"])
    broken = statement_for_case(run["cases"][0], run)["predicate"] | {"result": "OK"}
    assert not case_validator.is_valid(broken)


# --------------------------------------------------------------------------------------- reports


def test_report_round_trip(tmp_path: Path) -> None:
    run = sample_run()
    path = write_report(tmp_path / "run.intoto.jsonl", run, fixed_key())
    lines = path.read_bytes().splitlines()
    assert len(lines) == 4
    result = verify_report(path, fixed_key().public_key())
    assert result.ok, result.errors
    assert [c.name for c in result.cases] == [f"{c['path']}:{c['function']}" for c in run["cases"]]
    assert result.cases[1].predicate["divergences"][0]["classes"] == {"nan-payload": 1, "ulp(1)": 2}
    assert result.summary is not None and result.summary["summary"]["exitCode"] == 3
    assert result.describe().startswith("VERIFIED ")
    assert not (tmp_path / "run.intoto.jsonl.tmp").exists()


def test_report_is_deterministic() -> None:
    assert report_bytes(sample_run(), fixed_key()) == full_report()


def test_report_with_wrong_key_fails() -> None:
    result = verify_report_bytes(small_report(), Ed25519PrivateKey.generate().public_key())
    assert not result.ok
    assert result.errors[0].startswith("line 1: no signature verifies with key")
    assert result.describe().startswith("FAILED <report>")


def test_keg_digests_are_rechecked() -> None:
    run = sample_run()
    kegs = {
        f"{c['path']}:{c['function']}": name.encode()
        for c, name in zip(run["cases"], ["agree", "diverge", "error"], strict=True)
    }
    result = verify_report_bytes(full_report(), fixed_key().public_key(), kegs.get)
    assert result.ok, result.errors
    assert len(result.kegs_checked) == 6  # three case lines, three subjects of the summary
    kegs["corpora/nan.kera:div_f32"] = b"diverge!"
    result = verify_report_bytes(full_report(), fixed_key().public_key(), kegs.get)
    assert not result.ok
    assert result.errors[0].startswith(
        "line 2: subject corpora/nan.kera:div_f32: sha3_256 of the .keg is"
    )
    del kegs["corpora/nan.kera:div_f32"]
    result = verify_report_bytes(full_report(), fixed_key().public_key(), kegs.get)
    assert result.ok and "corpora/nan.kera:div_f32" in result.kegs_unavailable


def test_every_byte_flipped_fails() -> None:
    data = small_report()
    public = fixed_key().public_key()
    for position in range(len(data)):
        bit = position * 8 + position % 8  # each byte once, every bit position in turn
        result = verify_report_bytes(flip(data, bit), public)
        assert not result.ok, f"flipping bit {bit % 8} of byte {position} went unnoticed"
        assert result.errors[0].startswith(("line ", "report: "))


@given(st.integers(min_value=0))
def test_any_bit_flip_fails(seed: int) -> None:
    data = full_report()
    bit = seed % (len(data) * 8)
    assert not verify_report_bytes(flip(data, bit), fixed_key().public_key()).ok


def test_tamper_messages_are_precise() -> None:
    data = small_report()
    line1, line2 = data.splitlines()
    envelope = json.loads(line1)
    statement = json.loads(base64.b64decode(envelope["payload"]))
    statement["predicate"]["verdict"] = "diverge"
    envelope["payload"] = base64.b64encode(signing.canonical_json(statement)).decode()
    forged = signing.canonical_json(envelope) + b"\n" + line2 + b"\n"
    result = verify_report_bytes(forged, fixed_key().public_key())
    assert result.errors == [f"line 1: no signature verifies with key {result.keyid} (1 tried)"]
    spaced = json.dumps(json.loads(line1)).encode() + b"\n" + line2 + b"\n"
    assert (
        "line 1: not in canonical form"
        in verify_report_bytes(spaced, fixed_key().public_key()).errors[0]
    )
    renamed = line1.replace(b'"keyid":"', b'"keyid":"0') + b"\n" + line2 + b"\n"
    assert "is not the key's id" in verify_report_bytes(renamed, fixed_key().public_key()).errors[0]
    assert verify_report_bytes(data[:-1], fixed_key().public_key()).errors == [
        "report: empty or does not end with a newline"
    ]


def test_dropped_reordered_and_replayed_lines_fail() -> None:
    public = fixed_key().public_key()
    lines = full_report().splitlines(keepends=True)
    dropped = verify_report_bytes(b"".join([lines[0], *lines[2:]]), public)
    assert dropped.errors == ["line 3: summary lists 3 cases, the file has 2"]
    swapped = verify_report_bytes(b"".join([lines[1], lines[0], *lines[2:]]), public)
    assert swapped.errors[0] == "line 1: statement is not the one the summary lists"
    no_summary = verify_report_bytes(b"".join(lines[:-1]), public)
    assert no_summary.errors == ["report: expected exactly one run summary, on the last line"]
    other = sample_run()
    other["run"]["startedOn"] = "2027-01-01T00:00:00Z"
    replayed = report_bytes(other, fixed_key()).splitlines(keepends=True)[0]
    mixed = verify_report_bytes(b"".join([replayed, *lines[1:]]), public)
    assert mixed.errors == ["line 1: statement is not the one the summary lists"]


def test_unreadable_report(tmp_path: Path) -> None:
    result = verify_report(tmp_path / "missing.intoto.jsonl", fixed_key().public_key())
    assert not result.ok and result.errors[0].startswith("report: cannot read")


DOCS = Path(__file__).resolve().parents[2] / "docs" / "reports.md"


def test_standalone_script_in_the_docs_verifies_and_rejects(tmp_path: Path) -> None:
    text = DOCS.read_text()
    section = text[text.index("### Verifying without keracheck") :]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None
    script = tmp_path / "verify_report.py"
    script.write_text(match.group(1))
    pub = tmp_path / "keracheck.pub"
    pub.write_bytes(
        fixed_key()
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    report, keg = tmp_path / "run.intoto.jsonl", tmp_path / "div.keg"
    report.write_bytes(full_report())
    keg.write_bytes(b"diverge")

    def run() -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, str(script), str(report), str(pub), str(keg)]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)

    done = run()
    assert done.returncode == 0, done.stderr
    assert f"{keg}: is corpora/nan.kera:div_f32" in done.stdout
    assert done.stdout.endswith("VERIFIED: FAILED 3 cases\n")
    lines = full_report().splitlines(keepends=True)
    envelope = json.loads(lines[1])
    statement = json.loads(base64.b64decode(envelope["payload"]))
    statement["predicate"]["result"] = "PASSED"
    envelope["payload"] = base64.b64encode(signing.canonical_json(statement)).decode()
    report.write_bytes(lines[0] + signing.canonical_json(envelope) + b"\n" + b"".join(lines[2:]))
    done = run()
    assert done.returncode == 1 and "FAILED: line 2" in done.stderr
    report.write_bytes(b"".join([lines[0], *lines[2:]]))
    done = run()
    assert done.returncode == 1 and "does not list exactly these" in done.stderr
