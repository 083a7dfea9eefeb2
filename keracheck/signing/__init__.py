"""Signed keracheck reports: Ed25519 keys, DSSE envelopes, in-toto Statements.

One module per concept, each with its encoding in its docstring:

* :mod:`~keracheck.signing.keys`: key pairs on disk or in ``env://VAR``, the key id.
* :mod:`~keracheck.signing.dsse`: DSSE v1 envelopes (PAE, strict base64, canonical JSON).
* :mod:`~keracheck.signing.statement`: the in-toto Statements of a run (per case and summary).
* :mod:`~keracheck.signing.report`: the ``*.intoto.jsonl`` file, written and verified.

Callers import from this package; the names below are its public interface.
"""

from __future__ import annotations

from keracheck.signing.dsse import (
    JSON,
    PAYLOAD_TYPE,
    EnvelopeError,
    b64decode,
    canonical_json,
    pae,
    sign_envelope,
    sign_payload,
    verify_envelope,
    verifying_signature,
)
from keracheck.signing.keys import (
    ENV_KEY_PREFIX,
    KEY_FILE,
    PASSWORD_ENV,
    PUB_FILE,
    KeyFileError,
    keygen,
    keyid,
    load_private_key,
    load_public_key,
    load_signing_key,
)
from keracheck.signing.report import (
    KegLookup,
    ReportVerification,
    VerifiedCase,
    payload_json,
    report_bytes,
    verify_report,
    verify_report_bytes,
    write_report,
)
from keracheck.signing.statement import (
    PREDICATE_TYPE,
    RUN_PREDICATE_TYPE,
    STATEMENT_TYPE,
    case_result,
    parse_statement,
    run_from_statements,
    run_result,
    statement_for_case,
    statement_for_run,
    subject_for_case,
)

__all__ = [
    "ENV_KEY_PREFIX",
    "JSON",
    "KEY_FILE",
    "PASSWORD_ENV",
    "PAYLOAD_TYPE",
    "PREDICATE_TYPE",
    "PUB_FILE",
    "RUN_PREDICATE_TYPE",
    "STATEMENT_TYPE",
    "EnvelopeError",
    "KegLookup",
    "KeyFileError",
    "ReportVerification",
    "VerifiedCase",
    "b64decode",
    "canonical_json",
    "case_result",
    "keygen",
    "keyid",
    "load_private_key",
    "load_public_key",
    "load_signing_key",
    "pae",
    "parse_statement",
    "payload_json",
    "report_bytes",
    "run_from_statements",
    "run_result",
    "sign_envelope",
    "sign_payload",
    "statement_for_case",
    "statement_for_run",
    "subject_for_case",
    "verify_envelope",
    "verify_report",
    "verify_report_bytes",
    "verifying_signature",
    "write_report",
]
