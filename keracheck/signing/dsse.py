"""DSSE envelopes (secure-systems-lab/dsse protocol v1, written here in ~40 lines).

``PAE(type, body) = "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body`` with LEN the ASCII
decimal byte length.  The signature is Ed25519 over PAE(payloadType, payload bytes).
Envelope: ``{"payload": b64(payload), "payloadType": "application/vnd.in-toto+json",
"signatures": [{"keyid": hex, "sig": b64(sig)}]}``.  Readers accept standard and URL-safe
base64, padded or not, but only canonical encodings (the unused low bits of the last character
must be zero), so no two strings decode to the same bytes.  ``keyid`` is a hint.

Envelopes and report lines are serialised one way only (:func:`canonical_json`): sorted keys,
no spaces, ASCII.  Signatures cover the payload bytes as they are: a verifier never
re-serialises a payload (keracheck's report payloads keep the statement's key order,
``report.payload_json``).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from keracheck.signing.keys import keyid

PAYLOAD_TYPE = "application/vnd.in-toto+json"

JSON = dict[str, Any]


class EnvelopeError(Exception):
    """A DSSE envelope is malformed or no signature in it verifies."""


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


def verifying_signature(
    envelope: Mapping[str, Any], public_key: Ed25519PublicKey
) -> tuple[bytes, Mapping[str, Any]]:
    """(payload bytes, the signature entry that verifies); raises EnvelopeError if none does."""
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
    payload, _ = verifying_signature(envelope, public_key)
    return payload
