"""Signed report files (``*.intoto.jsonl``): write one, verify one.

One envelope per line, cases first, the run summary last; each line is the envelope serialised
with :func:`~keracheck.signing.dsse.canonical_json` and ends in ``\\n``.  ``verify_report``
insists on that exact form, checks the key id, every signature, the payload type, the
statements and the summary binding, so any one-bit change anywhere in the file fails with the
line number and the check that broke.

Payloads are the statements as compact ASCII JSON in the order the statement builder writes
them (so the same run gives the same bytes, and a report rebuilds the run document with its
key order: :func:`~keracheck.signing.statement.run_from_statements`); the envelopes around them
are canonical.  Reading a report without a public key (:func:`verify_report` with ``None``)
checks everything but the signatures, and says so.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from keracheck.security.audit import LogVerdict, verify_log
from keracheck.signing.dsse import (
    JSON,
    PAYLOAD_TYPE,
    EnvelopeError,
    b64decode,
    canonical_json,
    sign_payload,
    verifying_signature,
)
from keracheck.signing.keys import keyid
from keracheck.signing.statement import (
    RUN_PREDICATE_TYPE,
    parse_statement,
    statement_for_case,
    statement_for_run,
)

KegLookup = Callable[[str], bytes | None]


def payload_json(statement: Mapping[str, Any]) -> bytes:
    """A statement's payload bytes: compact, ASCII, keys in the statement's own order."""
    text = json.dumps(statement, separators=(",", ":"), ensure_ascii=True)
    return text.encode("ascii")


def report_bytes(
    run: Mapping[str, Any], key: Ed25519PrivateKey, audit: Mapping[str, Any] | None = None
) -> bytes:
    """The signed ``.intoto.jsonl`` bytes: one envelope per case, then the run summary
    (carrying ``audit``, the run's audit log, when given)."""
    payloads = [payload_json(statement_for_case(c, run)) for c in run.get("cases") or []]
    summary = payload_json(statement_for_run(run, payloads, audit))
    envelopes = [sign_payload(p, key) for p in [*payloads, summary]]
    return b"".join(canonical_json(e) + b"\n" for e in envelopes)


def write_report(
    path: str | os.PathLike[str],
    run: Mapping[str, Any],
    key: Ed25519PrivateKey,
    audit: Mapping[str, Any] | None = None,
) -> Path:
    """Write the signed report atomically (temporary file, then rename); returns the path.
    Writing it needs the ``write`` capability of ``path`` (``keracheck.security``)."""
    from kera import files
    from keracheck import security

    security.check_write(os.fspath(path))
    target = Path(path)
    files.write_atomic(target, report_bytes(run, key, audit))
    return target


@dataclass
class VerifiedCase:
    """One case statement whose signature verified: its line, subject name and predicate,
    and the subject's digests (the ``.keg``'s sha3_256 and sha256)."""

    line: int
    name: str
    predicate: JSON
    digest: JSON = field(default_factory=dict)


@dataclass
class ReportVerification:
    """Outcome of :func:`verify_report`; ``ok`` only when ``errors`` is empty.  Read without a
    public key, ``signatures_checked`` is False and ``keyid`` is the key id the envelopes
    claim (a hint, unverified)."""

    path: str
    keyid: str
    signatures_checked: bool = True
    envelopes: int = 0
    errors: list[str] = field(default_factory=list)
    cases: list[VerifiedCase] = field(default_factory=list)
    summary: JSON | None = None
    kegs_checked: list[str] = field(default_factory=list)
    kegs_unavailable: list[str] = field(default_factory=list)
    audit: LogVerdict | None = None  # the summary's audit log, checked (None: it has none)

    @property
    def ok(self) -> bool:
        return not self.errors and self.summary is not None

    def audit_lines(self) -> list[str]:
        """What the report's audit log says, for a terminal: the capabilities granted when
        the report was made, and whether the chain verified."""
        if self.audit is None:
            return ["  audit log: none (written by a keracheck that did not record one)"]
        lines = ["  capabilities granted when this report was made:"]
        lines += [
            f"    {g.get('kind')} {g.get('scope')} ({g.get('source')})" for g in self.audit.grants
        ]
        lines.append("    network: never")
        kept, dropped = len(self.audit.entries), self.audit.dropped
        state = "verified" if self.audit.ok else "BROKEN"
        lines.append(
            f"  audit log: chain {state}: {kept} entries kept"
            + (f", {dropped} older ones overwritten (checkpoint)" if dropped else "")
            + f", {sum(1 for e in self.audit.entries if e['kind'] == 'deny')} denials"
        )
        return lines

    def describe(self) -> str:
        """A few lines for a terminal: the verdict first, then every error."""
        if self.ok and not self.signatures_checked:
            return (
                f"READ {self.path}: {self.envelopes} envelopes, well formed and bound by the run "
                f"summary; signatures NOT checked (no public key given; they claim key {self.keyid})"
            )
        if self.ok:
            head = f"VERIFIED {self.path}: {self.envelopes} envelopes signed by key {self.keyid}"
            kegs = f"; .keg digests re-checked: {len(self.kegs_checked)}"
            return head + kegs + f", unavailable: {len(self.kegs_unavailable)}"
        how = f"key {self.keyid}" if self.signatures_checked else "read without a key"
        lines = [f"FAILED {self.path} ({how}):"]
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


def _claimed_keyid(envelope: JSON) -> str:
    signatures = envelope.get("signatures")
    first = signatures[0] if isinstance(signatures, list) and signatures else {}
    return str(first.get("keyid", "")) if isinstance(first, dict) else ""


def _open_envelope(raw: bytes, public_key: Ed25519PublicKey | None) -> tuple[bytes, JSON, str]:
    """(payload, statement, key id); without a key, the payload unchecked and the claimed id."""
    envelope = _parse_line(raw)
    if envelope["payloadType"] != PAYLOAD_TYPE:
        raise EnvelopeError(f"payloadType is {envelope['payloadType']!r}, not {PAYLOAD_TYPE}")
    if public_key is None:
        if not isinstance(envelope["payload"], str):
            raise EnvelopeError("envelope lacks a string 'payload'")
        payload = b64decode(envelope["payload"])
        return payload, parse_statement(payload), _claimed_keyid(envelope)
    payload, signature = verifying_signature(envelope, public_key)
    if signature.get("keyid") != keyid(public_key):
        # Hint only for trust, but our own reports carry it exactly: a changed byte is tampering.
        raise EnvelopeError(f"signature keyid {signature.get('keyid')!r} is not the key's id")
    return payload, parse_statement(payload), keyid(public_key)


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
    public_key: Ed25519PublicKey | None,
    keg_lookup: KegLookup | None = None,
    path: str = "<report>",
) -> ReportVerification:
    """Verify a report held in memory; see :func:`verify_report`."""
    result = ReportVerification(
        path, keyid(public_key) if public_key else "", public_key is not None
    )
    if not data.endswith(b"\n"):
        result.errors.append("report: empty or does not end with a newline")
        return result
    payloads: list[tuple[int, bytes, JSON]] = []
    for number, raw in enumerate(data[:-1].split(b"\n"), start=1):
        result.envelopes += 1
        try:
            payload, statement, claimed = _open_envelope(raw, public_key)
        except EnvelopeError as exc:
            result.errors.append(f"line {number}: {exc}")
            continue
        result.keyid = result.keyid or claimed
        payloads.append((number, payload, statement))
        if keg_lookup is not None:
            _check_kegs(result, number, statement, keg_lookup)
    if result.errors:
        return result
    _check_binding(result, payloads)
    if result.summary is not None and "audit" in result.summary:
        result.audit = verify_log(result.summary["audit"])
        result.errors += result.audit.problems
    result.cases = [
        VerifiedCase(line, s["subject"][0]["name"], s["predicate"], s["subject"][0]["digest"])
        for line, _, s in payloads[:-1]
    ]
    return result


def verify_report(
    path: str | os.PathLike[str],
    public_key: Ed25519PublicKey | None,
    keg_lookup: KegLookup | None = None,
) -> ReportVerification:
    """Verify every envelope of a ``.intoto.jsonl`` report signed by ``public_key`` (``None``:
    every check but the signatures; ``signatures_checked`` is then False).

    ``keg_lookup(subject_name)`` may return the ``.keg`` bytes a subject names (``<path>:<fn>``)
    so both digests are recomputed; ``None`` means "not available here" and is listed, not
    failed.  The result is never an exception: read ``ok``, ``errors`` and ``describe()``.
    """
    from kera import files

    try:  # a regular file of bounded size: a FIFO or /dev/zero is refused, not read forever
        data = files.read_bytes(os.fspath(path))
    except files.LoadError as exc:
        result = ReportVerification(os.fspath(path), keyid(public_key) if public_key else "")
        result.errors.append(
            f"report: cannot read ({str(exc).removeprefix(os.fspath(path) + ': ')})"
        )
        return result
    return verify_report_bytes(data, public_key, keg_lookup, os.fspath(path))
