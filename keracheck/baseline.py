"""Baselines: divergences accepted on purpose, each with the reason it is accepted.

A baseline file is JSON ``{"schemaVersion": 1, "entries": [...]}``; an entry names a
divergence by (fingerprint, target pair, output index) and carries a ``reason``.  A run marks
every divergence an entry matches ``baselined`` (it no longer fails the run) and reports the
entries that matched nothing as stale.  ``keracheck baseline`` writes one from a run's
divergences (:func:`baseline_from`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def baseline_key(fp: str, pair: Sequence[str], output: int) -> str:
    return f"{fp}:{pair[0]}:{pair[1]}:{output}"


def apply_baseline(
    case_docs: list[dict[str, Any]], baseline: Mapping[str, Any] | None
) -> list[dict[str, Any]]:
    """Mark baselined divergences; return the baseline entries that matched nothing (stale)."""
    if not baseline:
        return []
    entries = {
        baseline_key(e["fingerprint"], e["targets"], e["output"]): e for e in baseline["entries"]
    }
    used: set[str] = set()
    for c in case_docs:
        for d in c["divergences"]:
            k = baseline_key(c["fingerprint"], d["targets"], d["output"])
            if k in entries:
                d["baselined"] = True
                d["reason"] = entries[k].get("reason")
                used.add(k)
    return [e for k, e in entries.items() if k not in used]


def baseline_from(doc: Mapping[str, Any], reason: str) -> dict[str, Any]:
    entries = [
        {
            "fingerprint": c["fingerprint"],
            "path": c["path"],
            "function": c["function"],
            "targets": d["targets"],
            "output": d["output"],
            "classes": d["classes"],
            "reason": reason,
        }
        for c in doc["cases"]
        for d in c["divergences"]
    ]
    return {"schemaVersion": 1, "entries": entries}


class BaselineError(ValueError):
    pass


def load_baseline(path: str) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise BaselineError(f"{path}: cannot read baseline: {e.strerror or e}") from None
    except json.JSONDecodeError as e:
        raise BaselineError(f"{path}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from None
    except (RecursionError, UnicodeDecodeError) as e:
        raise BaselineError(f"{path}: invalid JSON ({type(e).__name__})") from None
    if (
        not isinstance(data, dict)
        or data.get("schemaVersion") != 1
        or not isinstance(data.get("entries"), list)
    ):
        raise BaselineError(f"{path}: not a keracheck baseline (schemaVersion 1 with 'entries')")
    for i, entry in enumerate(data["entries"]):
        ok = isinstance(entry, dict) and isinstance(entry.get("fingerprint"), str)
        ok = ok and isinstance(entry.get("targets"), list) and len(entry["targets"]) == 2
        ok = ok and isinstance(entry.get("output"), int) and isinstance(entry.get("reason"), str)
        if not ok:
            raise BaselineError(
                f"{path}: entry {i} needs fingerprint, targets [a, b], output and reason"
            )
    return data
