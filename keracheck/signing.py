"""Signed keracheck reports: Ed25519 keys, DSSE envelopes, in-toto Statements.

Keys
    ``keygen(out_dir)`` writes ``keracheck.key`` (PKCS#8 PEM, mode 0600, encrypted with the
    password held in the environment variable named by ``password_env`` when given) and
    ``keracheck.pub`` (SubjectPublicKeyInfo PEM).  The key id is the lowercase hex SHA-256 of
    the public key's SPKI DER bytes.  ``load_private_key`` also takes ``env://VAR``: the PEM
    itself held in an environment variable (a CI secret).  Every key problem raises
    :class:`KeyFileError` naming the file and what is wrong.

DSSE (secure-systems-lab/dsse protocol v1, written here, ~40 lines)
    ``PAE(type, body) = "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body`` with LEN the ASCII
    decimal byte length.  The signature is Ed25519 over PAE(payloadType, payload bytes).
    Envelope: ``{"payload": b64(payload), "payloadType": "application/vnd.in-toto+json",
    "signatures": [{"keyid": hex, "sig": b64(sig)}]}``.  Readers accept standard and URL-safe
    base64, padded or not, but only canonical encodings (the unused low bits of the last
    character must be zero), so no two strings decode to the same bytes.  ``keyid`` is a hint.

Statements (in-toto Statement v1)
    One per case, predicateType :data:`PREDICATE_TYPE`, subject ``<path>:<function>`` with the
    digests ``sha3_256`` (the graph fingerprint) and ``sha256`` of the same ``.keg`` bytes.  One
    run summary, predicateType :data:`RUN_PREDICATE_TYPE`, whose subjects are every case's
    ``.keg`` and whose predicate lists the SHA-256 of every case payload in file order: the
    bundle format itself is not authenticated, the summary binds it (no line can be dropped,
    reordered or replayed from another report).  Schema: ``schemas/predicate-v1.json``.

Report file (``*.intoto.jsonl``)
    One envelope per line, cases first, the run summary last; each line is the envelope
    serialised as JSON with sorted keys, no spaces, ASCII only, ending in ``\\n``.  Payloads are
    serialised the same way.  ``verify_report`` insists on that exact form, checks the key id,
    every signature, the payload type, the statements and the summary binding, so any one-bit
    change anywhere in the file fails with the line number and the check that broke.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://kera.dev/attestation/determinism/v1"
RUN_PREDICATE_TYPE = "https://kera.dev/attestation/determinism-run/v1"
KEY_FILE = "keracheck.key"
PUB_FILE = "keracheck.pub"
PASSWORD_ENV = "KERACHECK_KEY_PASSWORD"
ENV_KEY_PREFIX = "env://"

JSON = dict[str, Any]
KegLookup = Callable[[str], bytes | None]


class KeyFileError(Exception):
    """A key file (or ``env://`` key) is missing, unreadable, of the wrong kind or locked."""

    def __init__(self, path: str | os.PathLike[str], problem: str) -> None:
        super().__init__(f"{os.fspath(path)}: {problem}")
        self.path = os.fspath(path)
        self.problem = problem


class EnvelopeError(Exception):
    """A DSSE envelope is malformed or no signature in it verifies."""


# --------------------------------------------------------------------------------------- keys


def keyid(public_key: Ed25519PublicKey) -> str:
    """Lowercase hex SHA-256 of the key's SubjectPublicKeyInfo DER bytes."""
    der = public_key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return hashlib.sha256(der).hexdigest()


def _password(path: str | os.PathLike[str], password_env: str | None) -> bytes | None:
    if password_env is None:
        return None
    value = os.environ.get(password_env)
    if not value:
        raise KeyFileError(path, f"password variable {password_env} is not set or empty")
    return value.encode()


def _write_new(path: Path, data: bytes, mode: int) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    fd = os.open(path, flags, mode)
    try:
        os.fchmod(fd, mode)
        os.write(fd, data)
    finally:
        os.close(fd)


def keygen(
    out_dir: str | os.PathLike[str], password_env: str | None = None, *, force: bool = False
) -> tuple[Path, Path]:
    """Write a new Ed25519 key pair into ``out_dir``; returns (private key path, public path)."""
    out = Path(out_dir)
    key_path, pub_path = out / KEY_FILE, out / PUB_FILE
    password = _password(key_path, password_env)
    encryption: serialization.KeySerializationEncryption = serialization.NoEncryption()
    if password is not None:
        encryption = serialization.BestAvailableEncryption(password)
    key = Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    )
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    for path in (key_path, pub_path):
        if path.exists() and not force:
            raise KeyFileError(path, "already exists; refusing to overwrite a key (delete it)")
    out.mkdir(parents=True, exist_ok=True)
    _write_new(key_path, private_pem, stat.S_IRUSR | stat.S_IWUSR)
    _write_new(pub_path, public_pem, 0o644)
    return key_path, pub_path


def _read_key_bytes(path: str | os.PathLike[str]) -> bytes:
    text = os.fspath(path)
    if text.startswith(ENV_KEY_PREFIX):
        value = os.environ.get(text[len(ENV_KEY_PREFIX) :])
        if not value:
            raise KeyFileError(path, "environment variable is not set or empty")
        return value.encode()
    try:
        return Path(text).read_bytes()
    except FileNotFoundError:
        raise KeyFileError(path, "no such file") from None
    except OSError as exc:
        raise KeyFileError(path, f"cannot read: {exc.strerror}") from None


def _locked_problem(message: str, password_env: str | None) -> str:
    if "not encrypted" in message:
        return f"the key is not encrypted, but a password was given in {password_env}"
    return (
        "the key is encrypted: put its password in an environment variable and name it "
        f"(e.g. {PASSWORD_ENV})"
    )


def load_private_key(
    path: str | os.PathLike[str], password_env: str | None = None
) -> Ed25519PrivateKey:
    """Load a PKCS#8 PEM Ed25519 private key from a file or ``env://VAR``."""
    data = _read_key_bytes(path)
    password = _password(path, password_env)
    try:
        key = serialization.load_pem_private_key(data, password)
    except TypeError as exc:
        raise KeyFileError(path, _locked_problem(str(exc), password_env)) from None
    except (ValueError, UnsupportedAlgorithm):
        problem = "not a PEM private key" if password is None else "wrong password or not a key"
        raise KeyFileError(path, problem) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError(path, f"not an Ed25519 key ({type(key).__name__})")
    return key


def load_signing_key(source: str | os.PathLike[str]) -> Ed25519PrivateKey:
    """The CLI's ``--key``: a file or ``env://VAR``, unlocked by $KERACHECK_KEY_PASSWORD if set."""
    return load_private_key(source, PASSWORD_ENV if os.environ.get(PASSWORD_ENV) else None)


def load_public_key(path: str | os.PathLike[str]) -> Ed25519PublicKey:
    """Load an SPKI PEM Ed25519 public key (``keracheck.pub``)."""
    data = _read_key_bytes(path)
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, UnsupportedAlgorithm):
        raise KeyFileError(path, "not a PEM public key") from None
    if not isinstance(key, Ed25519PublicKey):
        raise KeyFileError(path, f"not an Ed25519 public key ({type(key).__name__})")
    return key


# --------------------------------------------------------------------------------------- DSSE


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding of (payload type, payload)."""
    type_bytes = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(type_bytes), type_bytes, len(payload), payload)


def canonical_json(value: Any) -> bytes:
    """The one serialisation used for payloads and report lines: sorted, compact, ASCII."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return text.encode("ascii")


def b64decode(text: str) -> bytes:
    """Strict base64: standard or URL-safe alphabet, padding optional, canonical bits only."""
    if not isinstance(text, str) or not text.isascii():
        raise EnvelopeError("base64 value is not an ASCII string")
    bare = text.rstrip("=")
    padding = -len(bare) % 4
    if len(text) - len(bare) not in (0, padding):
        raise EnvelopeError("invalid base64 padding")
    padded = bare.translate(str.maketrans("-_", "+/")) + "=" * padding
    try:
        data = base64.b64decode(padded, validate=True)
    except binascii.Error as exc:
        raise EnvelopeError(f"invalid base64 ({exc})") from None
    if base64.b64encode(data).decode() != padded:
        raise EnvelopeError("non-canonical base64 (stray bits in the last character)")
    return data


def sign_payload(payload: bytes, key: Ed25519PrivateKey, payload_type: str = PAYLOAD_TYPE) -> JSON:
    """A DSSE envelope with one Ed25519 signature over PAE(payload_type, payload)."""
    signature = key.sign(pae(payload_type, payload))
    return {
        "payload": base64.b64encode(payload).decode(),
        "payloadType": payload_type,
        "signatures": [
            {"keyid": keyid(key.public_key()), "sig": base64.b64encode(signature).decode()}
        ],
    }


def sign_envelope(statement: Mapping[str, Any], key: Ed25519PrivateKey) -> JSON:
    """Sign an in-toto Statement (serialised with :func:`canonical_json`)."""
    return sign_payload(canonical_json(statement), key)


def _signatures(envelope: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    signatures = envelope.get("signatures")
    if not isinstance(signatures, list) or not signatures:
        raise EnvelopeError("envelope has no signatures")
    if not all(isinstance(s, dict) and isinstance(s.get("sig"), str) for s in signatures):
        raise EnvelopeError("a signature entry lacks a string 'sig'")
    return signatures


def _verifying_signature(
    envelope: Mapping[str, Any], public_key: Ed25519PublicKey
) -> tuple[bytes, Mapping[str, Any]]:
    payload_type, payload_b64 = envelope.get("payloadType"), envelope.get("payload")
    if not isinstance(payload_type, str) or not isinstance(payload_b64, str):
        raise EnvelopeError("envelope lacks a string 'payload' or 'payloadType'")
    payload = b64decode(payload_b64)
    message = pae(payload_type, payload)
    own = keyid(public_key)
    # keyid only orders the attempts: a hint, never a reason to trust or skip a signature.
    candidates = sorted(_signatures(envelope), key=lambda s: s.get("keyid") != own)
    for signature in candidates:
        try:
            public_key.verify(b64decode(signature["sig"]), message)
        except (InvalidSignature, EnvelopeError):
            continue
        return payload, signature
    raise EnvelopeError(f"no signature verifies with key {own} ({len(candidates)} tried)")


def verify_envelope(envelope: Mapping[str, Any], public_key: Ed25519PublicKey) -> bytes:
    """Check a DSSE envelope; returns the authenticated payload bytes or raises EnvelopeError."""
    payload, _ = _verifying_signature(envelope, public_key)
    return payload


# ---------------------------------------------------------------------------------- statements

_RESULT_OF_VERDICT = {
    "agree": "PASSED",
    "diverge": "FAILED",
    "error": "FAILED",
    "skipped": "WARNED",
}


def case_result(case: Mapping[str, Any]) -> str:
    """PASSED | WARNED | FAILED (in-toto Test Result words); all-baselined divergence -> WARNED."""
    divergences = case.get("divergences") or []
    if (
        case["verdict"] == "diverge"
        and divergences
        and all(d.get("baselined") for d in divergences)
    ):
        return "WARNED"
    return _RESULT_OF_VERDICT[case["verdict"]]


def subject_for_case(case: Mapping[str, Any], keg_name: str | None = None) -> JSON:
    """The ResourceDescriptor of a case's ``.keg``: both digests, named ``<path>:<function>``."""
    keg = case["keg"]
    return {
        "name": keg_name or f"{case['path']}:{case['function']}",
        "digest": {"sha3_256": keg["sha3_256"], "sha256": keg["sha256"]},
    }


def _target_record(result: Mapping[str, Any]) -> JSON:
    outputs = [
        {k: o[k] for k in ("index", "dtype", "shape")} | {"digest": {"sha256": o["sha256"]}}
        for o in result.get("outputs") or []
    ]
    artifacts = [
        {"name": name, "digest": {"sha256": digest}}
        for name, digest in sorted((result.get("artifacts") or {}).items())
    ]
    return {
        "status": result["status"],
        "message": result.get("message"),
        "loadedFingerprint": result.get("loadedFingerprint"),
        "outputs": outputs,
        "artifacts": artifacts,
    }


def _toolchains(case: Mapping[str, Any], run: Mapping[str, Any]) -> JSON:
    versions = {t["id"]: t.get("versions") or {} for t in run.get("targets") or []}
    return {target: versions.get(target, {}) for target in sorted(case["targets"])}


def _inputs_record(inputs: Mapping[str, Any]) -> JSON:
    digests = inputs.get("digests") or {}
    return {
        "seed": inputs.get("seed"),
        "n": inputs.get("n"),
        "source": inputs.get("source"),
        "digests": {name: {"sha256": digests[name]} for name in sorted(digests)},
    }


def statement_for_case(
    case: Mapping[str, Any], run: Mapping[str, Any], keg_name: str | None = None
) -> JSON:
    """The in-toto Statement v1 attesting one case (see schemas/predicate-v1.json)."""
    info = run.get("run") or {}
    predicate = {
        "fingerprint": case["fingerprint"],
        "verdict": case["verdict"],
        "result": case_result(case),
        "targets": {t: _target_record(r) for t, r in sorted(case["targets"].items())},
        "toolchains": _toolchains(case, run),
        "inputs": _inputs_record(case.get("inputs") or {}),
        "divergences": list(case.get("divergences") or []),
        "repro": case.get("repro"),
        "tool": dict(run.get("tool") or {}),
        "startedOn": info.get("startedOn"),
        "finishedOn": info.get("finishedOn"),
    }
    return {
        "_type": STATEMENT_TYPE,
        "subject": [subject_for_case(case, keg_name)],
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate,
    }


def run_result(run: Mapping[str, Any]) -> str:
    """The run's PASSED | WARNED | FAILED: the worst of its cases (PASSED when there are none)."""
    order = ("PASSED", "WARNED", "FAILED")
    results = [case_result(c) for c in run.get("cases") or []]
    return max(results, key=order.index, default="PASSED")


def statement_for_run(run: Mapping[str, Any], case_payloads: Sequence[bytes]) -> JSON:
    """The run-summary Statement; ``case_payloads`` are the case payload bytes, in file order."""
    cases = run.get("cases") or []
    if len(case_payloads) != len(cases):
        raise ValueError(f"{len(case_payloads)} case payloads for {len(cases)} cases")
    listed = [
        {
            "name": subject_for_case(case)["name"],
            "fingerprint": case["fingerprint"],
            "verdict": case["verdict"],
            "statement": {"sha256": hashlib.sha256(payload).hexdigest()},
        }
        for case, payload in zip(cases, case_payloads, strict=True)
    ]
    predicate = {
        "result": run_result(run),
        "summary": dict(run.get("summary") or {}),
        "run": dict(run.get("run") or {}),
        "tool": dict(run.get("tool") or {}),
        "targets": [dict(t) for t in run.get("targets") or []],
        "cases": listed,
    }
    return {
        "_type": STATEMENT_TYPE,
        "subject": [subject_for_case(case) for case in cases],
        "predicateType": RUN_PREDICATE_TYPE,
        "predicate": predicate,
    }


# ------------------------------------------------------------------------------------- reports


def report_bytes(run: Mapping[str, Any], key: Ed25519PrivateKey) -> bytes:
    """The signed ``.intoto.jsonl`` bytes: one envelope per case, then the run summary."""
    payloads = [canonical_json(statement_for_case(c, run)) for c in run.get("cases") or []]
    summary = canonical_json(statement_for_run(run, payloads))
    envelopes = [sign_payload(p, key) for p in [*payloads, summary]]
    return b"".join(canonical_json(e) + b"\n" for e in envelopes)


def write_report(
    path: str | os.PathLike[str], run: Mapping[str, Any], key: Ed25519PrivateKey
) -> Path:
    """Write the signed report atomically (temporary file, then rename); returns the path."""
    from kera import files

    target = Path(path)
    files.write_atomic(target, report_bytes(run, key))
    return target


@dataclass
class VerifiedCase:
    """One case statement whose signature verified: its line, subject name and predicate."""

    line: int
    name: str
    predicate: JSON


@dataclass
class ReportVerification:
    """Outcome of :func:`verify_report`; ``ok`` only when ``errors`` is empty."""

    path: str
    keyid: str
    envelopes: int = 0
    errors: list[str] = field(default_factory=list)
    cases: list[VerifiedCase] = field(default_factory=list)
    summary: JSON | None = None
    kegs_checked: list[str] = field(default_factory=list)
    kegs_unavailable: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors and self.summary is not None

    def describe(self) -> str:
        """A few lines for a terminal: the verdict first, then every error."""
        if self.ok:
            head = f"VERIFIED {self.path}: {self.envelopes} envelopes signed by key {self.keyid}"
            kegs = f"; .keg digests re-checked: {len(self.kegs_checked)}"
            return head + kegs + f", unavailable: {len(self.kegs_unavailable)}"
        lines = [f"FAILED {self.path} (key {self.keyid}):"]
        return "\n".join([*lines, *(f"  {e}" for e in self.errors)])


def _parse_line(raw: bytes) -> JSON:
    try:
        envelope = json.loads(raw)
    except RecursionError:
        raise EnvelopeError("not JSON (nested too deeply)") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise EnvelopeError(f"not JSON ({exc})") from None
    if not isinstance(envelope, dict):
        raise EnvelopeError("not a JSON object")
    if set(envelope) != {"payload", "payloadType", "signatures"}:
        raise EnvelopeError(f"envelope keys are {sorted(envelope)}")
    if canonical_json(envelope) != raw:
        raise EnvelopeError("not in canonical form (sorted keys, no spaces, ASCII)")
    return envelope


def _statement(payload: bytes) -> JSON:
    try:
        statement = json.loads(payload)
    except RecursionError:
        raise EnvelopeError("payload is not JSON (nested too deeply)") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise EnvelopeError(f"payload is not JSON ({exc})") from None
    if not isinstance(statement, dict) or statement.get("_type") != STATEMENT_TYPE:
        raise EnvelopeError(f"payload is not an in-toto Statement v1 ({STATEMENT_TYPE})")
    subjects = statement.get("subject")
    if not isinstance(subjects, list) or not all(_is_subject(s) for s in subjects):
        raise EnvelopeError("statement subjects lack a name or sha3_256/sha256 digests")
    if statement.get("predicateType") not in (PREDICATE_TYPE, RUN_PREDICATE_TYPE):
        raise EnvelopeError(f"unknown predicateType {statement.get('predicateType')!r}")
    if not isinstance(statement.get("predicate"), dict):
        raise EnvelopeError("statement has no predicate object")
    return statement


def _is_subject(subject: Any) -> bool:
    if not isinstance(subject, dict) or not isinstance(subject.get("name"), str):
        return False
    digest = subject.get("digest")
    return isinstance(digest, dict) and {"sha3_256", "sha256"} <= set(digest)


def _open_envelope(raw: bytes, public_key: Ed25519PublicKey) -> tuple[bytes, JSON]:
    envelope = _parse_line(raw)
    if envelope["payloadType"] != PAYLOAD_TYPE:
        raise EnvelopeError(f"payloadType is {envelope['payloadType']!r}, not {PAYLOAD_TYPE}")
    payload, signature = _verifying_signature(envelope, public_key)
    if signature.get("keyid") != keyid(public_key):
        # Hint only for trust, but our own reports carry it exactly: a changed byte is tampering.
        raise EnvelopeError(f"signature keyid {signature.get('keyid')!r} is not the key's id")
    return payload, _statement(payload)


def _check_kegs(
    result: ReportVerification, number: int, statement: JSON, keg_lookup: KegLookup
) -> None:
    for subject in statement["subject"]:
        name = subject["name"]
        data = keg_lookup(name)
        if data is None:
            result.kegs_unavailable.append(name)
            continue
        for algorithm in ("sha3_256", "sha256"):
            actual = hashlib.new(algorithm, data).hexdigest()
            if actual != subject["digest"][algorithm]:
                result.errors.append(
                    f"line {number}: subject {name}: {algorithm} of the .keg is {actual}, "
                    f"the report says {subject['digest'][algorithm]}"
                )
        result.kegs_checked.append(name)


def _check_binding(result: ReportVerification, payloads: list[tuple[int, bytes, JSON]]) -> None:
    runs = [p for p in payloads if p[2]["predicateType"] == RUN_PREDICATE_TYPE]
    if len(runs) != 1 or runs[0] is not payloads[-1]:
        result.errors.append("report: expected exactly one run summary, on the last line")
        return
    number, _, summary = runs[0]
    listed = summary["predicate"].get("cases")
    cases = payloads[:-1]
    if not isinstance(listed, list) or len(listed) != len(cases):
        count = len(listed) if isinstance(listed, list) else "no"
        result.errors.append(
            f"line {number}: summary lists {count} cases, the file has {len(cases)}"
        )
        return
    for entry, (line, payload, statement) in zip(listed, cases, strict=True):
        digest = hashlib.sha256(payload).hexdigest()
        if not isinstance(entry, dict) or entry.get("statement") != {"sha256": digest}:
            result.errors.append(f"line {line}: statement is not the one the summary lists")
        elif statement["subject"] and entry.get("name") != statement["subject"][0]["name"]:
            result.errors.append(f"line {line}: subject name differs from the summary's")
    if not result.errors:
        result.summary = summary["predicate"]


def verify_report_bytes(
    data: bytes,
    public_key: Ed25519PublicKey,
    keg_lookup: KegLookup | None = None,
    path: str = "<report>",
) -> ReportVerification:
    """Verify a report held in memory; see :func:`verify_report`."""
    result = ReportVerification(path=path, keyid=keyid(public_key))
    if not data.endswith(b"\n"):
        result.errors.append("report: empty or does not end with a newline")
        return result
    payloads: list[tuple[int, bytes, JSON]] = []
    for number, raw in enumerate(data[:-1].split(b"\n"), start=1):
        result.envelopes += 1
        try:
            payload, statement = _open_envelope(raw, public_key)
        except EnvelopeError as exc:
            result.errors.append(f"line {number}: {exc}")
            continue
        payloads.append((number, payload, statement))
        if keg_lookup is not None:
            _check_kegs(result, number, statement, keg_lookup)
    if result.errors:
        return result
    _check_binding(result, payloads)
    result.cases = [
        VerifiedCase(line, s["subject"][0]["name"], s["predicate"]) for line, _, s in payloads[:-1]
    ]
    return result


def verify_report(
    path: str | os.PathLike[str],
    public_key: Ed25519PublicKey,
    keg_lookup: KegLookup | None = None,
) -> ReportVerification:
    """Verify every envelope of a ``.intoto.jsonl`` report signed by ``public_key``.

    ``keg_lookup(subject_name)`` may return the ``.keg`` bytes a subject names (``<path>:<fn>``)
    so both digests are recomputed; ``None`` means "not available here" and is listed, not
    failed.  The result is never an exception: read ``ok``, ``errors`` and ``describe()``.
    """
    from kera import files

    try:  # a regular file of bounded size: a FIFO or /dev/zero is refused, not read forever
        data = files.read_bytes(os.fspath(path))
    except files.LoadError as exc:
        result = ReportVerification(path=os.fspath(path), keyid=keyid(public_key))
        result.errors.append(
            f"report: cannot read ({str(exc).removeprefix(os.fspath(path) + ': ')})"
        )
        return result
    return verify_report_bytes(data, public_key, keg_lookup, os.fspath(path))
