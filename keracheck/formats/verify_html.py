"""The page of ``keracheck verify REPORT --key PUB --format html``: what was verified, then the
run the report records.

The banner is the verification's outcome, nothing more: the key id the signatures were checked
with, how many envelopes, the ``.keg`` digests re-checked (and those not available here), the
``--rerun`` outcome when asked, and every failure.  A report that verifies is rendered below
the banner as ``keracheck run --format html`` renders a run (:func:`keracheck.formats.html.render`
with a ``verified`` signature); one that does not shows the failures only — its contents are
not authenticated, so the page does not show them as if they were.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from keracheck.formats import html


def banner(
    result: Any, report: str, pubkey: str, rerun: Sequence[str] = (), rerun_ok: bool = True
) -> dict[str, Any]:
    """The signature banner (``html.render``'s ``signature``) of a verification result
    (:class:`keracheck.signing.ReportVerification`) and the ``--rerun`` lines."""
    kegs = (
        f".keg digests re-checked against the sources here: {len(result.kegs_checked)}, "
        f"not available here: {len(result.kegs_unavailable)}."
    )
    failures = list(result.errors)
    if result.ok:
        detail = f"Every signature of {report} verified with {pubkey}. {kegs}"
    else:
        detail = f"{report} does not verify with {pubkey}; its contents are not shown."
    if rerun:
        lines = [line.strip() for line in rerun]
        failures += [line for line in lines if _failed(line)]
        same = sum(line.startswith("rerun ") for line in lines)
        skipped = sum(line.startswith("not re-run ") for line in lines)
        detail += f" Rerun: {same} recorded outputs reproduce here, {skipped} not re-run here."
    return {
        "status": "verified" if result.ok and rerun_ok else "failed",
        "keyid": result.keyid,
        "envelopes": result.envelopes,
        "failures": failures,
        "detail": detail,
        "report": report,
        "pubkey": pubkey,
    }


def _failed(line: str) -> bool:
    """A ``--rerun`` line that fails the verification (they are written in capitals)."""
    return line.strip().split(" ", 1)[0] in ("RERUN", "NOT")


def render(
    result: Any,
    run: Mapping[str, Any] | None,
    report: str,
    pubkey: str,
    rerun: Sequence[str] = (),
    rerun_ok: bool = True,
) -> str:
    """The page: the run under a ``verified`` banner, or a ``failed`` banner alone."""
    signature = banner(result, report, pubkey, rerun, rerun_ok)
    if run is not None and result.ok:
        return html.render(run, signature=signature)
    return _failure_page(signature)


def _failure_page(signature: Mapping[str, Any]) -> str:
    items = "".join(f"<li>{html.esc(f)}</li>" for f in signature["failures"])
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{html.CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>keracheck verify: FAILED</title><style>{html.CSS}</style></head><body>"
        f'<header class="sig sig-failed" id="signature">{html.SIGNATURE_WORDS["failed"]}'
        f" &middot; key <code>{html.esc(signature['keyid'])}</code>"
        f" &middot; {html.esc(signature['envelopes'])} envelopes"
        f"<p>{html.esc(signature['detail'])}</p><ul>{items}</ul></header>"
        "<h1>keracheck verify</h1><p>Nothing of the report is shown: it did not verify, so "
        "none of it can be trusted. Each line above names the check that failed.</p>"
        "</body></html>\n"
    )
