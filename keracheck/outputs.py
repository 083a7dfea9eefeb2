"""Where a run's renderings go, and reading a saved run back to render it again.

``--output-format FMT=PATH`` (repeatable; ``output-formats`` in ``[tool.keracheck]``) writes
the run in several formats from one run.  :func:`parse` checks every spec before anything
runs — a known format, a path, a folder keracheck can create a file in (made when missing), no
path named twice — so a typo costs seconds, not a corpus run; :func:`write` writes each
atomically (``kera.files.write_atomic``: a reader sees the old file or the complete new one).

:func:`load` reads what ``keracheck show`` renders: a run saved with ``--format json``, or a
signed report (``.intoto.jsonl``), whose run document is rebuilt from its statements
(:func:`keracheck.signing.run_from_statements`): with a public key every signature is
verified first; without one, everything but the signatures is checked (canonical envelopes,
statements, the summary binding every line) and the page says the report was not verified.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kera import files
from keracheck import security


class OutputError(ValueError):
    """A bad ``--output-format`` spec, or a saved run that cannot be read (exit 2)."""


@dataclass(frozen=True)
class Output:
    fmt: str
    path: str


def parse(specs: Sequence[str], formats: Sequence[str], taken: Sequence[str] = ()) -> list[Output]:
    """``FMT=PATH`` specs, each checked; ``taken``: paths the command writes anyway
    (``--output``, ``--report``)."""
    outputs: list[Output] = []
    seen = {os.path.abspath(p) for p in taken if p}
    for spec in specs:
        fmt, sep, path = str(spec).partition("=")
        if not sep or not path:
            raise OutputError(
                f"--output-format {spec!r}: expected FMT=PATH, e.g. html=out/run.html"
            )
        if fmt not in formats:
            raise OutputError(
                f"--output-format {spec!r}: unknown format '{fmt}' (choose from {', '.join(formats)})"
            )
        where = os.path.abspath(path)
        if where in seen:
            raise OutputError(f"--output-format {spec!r}: {path} is written twice")
        seen.add(where)
        check_writable(path, spec)
        outputs.append(Output(fmt, path))
    return outputs


def check_writable(path: str, spec: str) -> None:
    """Make sure a file can be written at ``path`` the way :func:`write` will (a temporary file
    in its folder, then a rename); the folder is created when missing."""
    if os.path.isdir(path):
        raise OutputError(f"--output-format {spec!r}: {path} is a directory")
    try:
        security.check_write(path)
    except security.CapabilityDenied as e:
        raise OutputError(f"--output-format {spec!r}: {e}") from None
    folder = os.path.dirname(path) or "."
    try:
        os.makedirs(folder, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".keracheck-probe.")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise OutputError(
            f"--output-format {spec!r}: cannot write in {folder}: {e.strerror or e}"
        ) from None


def write(outputs: Sequence[Output], render: Callable[[str], str]) -> None:
    """Render and write each output atomically; OutputError naming the file on failure."""
    for out in outputs:
        write_one(out.path, render(out.fmt), out.fmt)


def write_one(path: str, text: str, fmt: str) -> None:
    """Write one rendering atomically, once the SecurityManager grants it; the audit log
    records its path, format and digest (so a signed report names the files of its run)."""
    try:
        security.check_write(path)
    except security.CapabilityDenied as e:
        raise OutputError(str(e)) from None
    data = text.encode("utf-8")
    try:
        files.write_atomic(path, data)
    except OSError as e:
        raise OutputError(f"{path}: cannot write: {e.strerror or e}") from None
    security.note("written", written(path, fmt, data))


def written(path: str, fmt: str, data: bytes) -> dict[str, Any]:
    """The audit record of a written file."""
    return {
        "path": os.path.abspath(path),
        "format": fmt,
        "sha256": hashlib.sha256(data).hexdigest(),
        "bytes": len(data),
    }


# ------------------------------------------------------------------------------ reading back

#: the fields of a saved run document (``keracheck/schemas/run-v1.json``)
RUN_FIELDS = ("schemaVersion", "tool", "run", "summary", "targets", "errors", "cases")


@dataclass
class Saved:
    """A run read back: its document, the HTML signature banner that is true of it, and notes
    for stderr (what an older signed report did not record, unchecked signatures)."""

    doc: dict[str, Any]
    signature: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)


def load(path: str, pubkey: str | None = None) -> Saved:
    """A saved JSON run or a signed report, told apart by content (a report's first line is a
    DSSE envelope)."""
    try:
        data = files.read_bytes(path)
    except files.LoadError as e:
        raise OutputError(str(e)) from None
    if _is_report(data):
        return load_report(path, data, pubkey)
    if pubkey is not None:
        raise OutputError(f"{path}: --key is for signed reports; this is not one")
    return Saved(load_run(path, data))


def _is_report(data: bytes) -> bool:
    try:
        first = json.loads(data.split(b"\n", 1)[0])
    except (ValueError, RecursionError):
        return False
    return isinstance(first, dict) and "payloadType" in first


def load_run(path: str, data: bytes) -> dict[str, Any]:
    """A saved ``keracheck run --format json`` document; OutputError naming the file and the
    position or the missing part when it is not one."""
    from keracheck.document import SCHEMA_VERSION

    try:
        doc = json.loads(data)
    except json.JSONDecodeError as e:
        raise OutputError(f"{path}:{e.lineno}:{e.colno}: not JSON: {e.msg}") from None
    except (RecursionError, UnicodeDecodeError) as e:
        raise OutputError(f"{path}: not JSON ({type(e).__name__})") from None
    if not isinstance(doc, dict) or doc.get("schemaVersion") != SCHEMA_VERSION:
        raise OutputError(f"{path}: not a keracheck run (a JSON object with schemaVersion 1)")
    missing = [k for k in RUN_FIELDS if k not in doc]
    if missing:
        raise OutputError(f"{path}: not a keracheck run: no {', '.join(missing)}")
    return doc


def load_report(path: str, data: bytes, pubkey: str | None) -> Saved:
    """The run a signed report records; verified with ``pubkey`` when given (a report that does
    not verify is refused), else read with every check but the signatures."""
    from keracheck import signing

    key = None
    if pubkey is not None:
        try:
            key = signing.load_public_key(pubkey)
        except signing.KeyFileError as e:
            raise OutputError(str(e)) from None
    result = signing.verify_report_bytes(data, key, None, path)
    if not result.ok:
        raise OutputError(result.describe())
    assert result.summary is not None
    cases = [({"name": c.name, "digest": c.digest}, c.predicate) for c in result.cases]
    doc, missing = signing.run_from_statements(cases, result.summary)
    notes = []
    if missing:
        notes.append(
            f"{path}: written by an older keracheck; it does not record {', '.join(missing)}, "
            "so what is rendered lacks them"
        )
    if key is None:
        notes.append(
            f"{path}: signatures not checked (give --key PUB to verify them); "
            f"the envelopes claim key {result.keyid}"
        )
    return Saved(doc, signed_banner(path, result.keyid, result, pubkey), notes)


def signed_banner(
    report: str, keyid: str, result: Any = None, pubkey: str | None = None
) -> dict[str, Any]:
    """The HTML signature banner of a run whose signed report is ``report``: ``verified`` when
    ``result`` checked its signatures with ``pubkey``, else ``signed`` (the page verified
    nothing).  ``keracheck run --report`` and ``keracheck show REPORT`` without a key give
    the same banner, so the two pages are the same bytes."""
    if result is not None and result.signatures_checked:
        return {
            "status": "verified",
            "keyid": keyid,
            "envelopes": result.envelopes,
            "detail": f"Every signature of {report} was verified with {pubkey} when this page "
            "was rendered; the page itself carries no signature.",
            "report": report,
            "pubkey": pubkey,
        }
    return {
        "status": "signed",
        "keyid": keyid,
        "detail": f"This run's signed report was written to {report}; the page itself "
        "carries no signature. Verify the report, not the page:",
        "report": report,
    }
