"""Cross-target verdicts for the code lenses: a background ``keracheck run``, cached.

:class:`Checker` runs ``keracheck run FILE --targets T --format json --output OUT -q`` on a copy
of the document (in a private temporary folder, named like the document, so the report's
paths and positions are the document's), reads the JSON run document (``docs/reports.md``) and
keeps one :class:`Verdict` per (fingerprint, targets, extra arguments).  Since the fingerprint
is a property of meaning, a verdict stays valid through any edit that keeps it (comments,
formatting, renaming a ``let``), and a function is only run again when its meaning changed.

A run is an asyncio task around one process group: :meth:`Checker.cancel` (the server calls it
on every edit) kills the group and its children, so no stale run outlives the text it was
started for.  A divergence keeps its records: the first diverging node's line and column
(1-based, in characters, as diagnostics count them) is where the server puts its diagnostic.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_TARGETS = "ref,cpu,wasm"


def default_command() -> list[str]:
    """``keracheck`` beside this Python (a virtual environment's), else the one on PATH."""
    here = Path(sys.executable).parent / "keracheck"
    if here.exists():
        return [str(here)]
    found = shutil.which("keracheck")
    return [found] if found else [sys.executable, "-m", "keracheck.cli"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """What one ``keracheck run`` said about one export."""

    fingerprint: str
    function: str
    verdict: str  # agree, diverge, error, skipped (keracheck's case verdicts)
    ok_targets: tuple[str, ...]  # targets that ran it
    other_targets: tuple[tuple[str, str], ...]  # (target, status) of those that did not
    divergences: tuple[Mapping[str, Any], ...] = ()
    errors: tuple[tuple[str, str], ...] = ()  # (target, message)
    text: bytes = b""  # the source that was run (positions refer to it)

    def title(self) -> str:
        """The lens text after the fingerprint."""
        if self.verdict == "diverge" and self.divergences:
            pairs = sorted({" vs ".join(d.get("targets", [])) for d in self.divergences})
            return "diverges: " + "; ".join(pairs)
        if self.errors:
            return "error on " + ", ".join(t for t, _ in self.errors)
        text = "agrees on " + ", ".join(self.ok_targets) if self.ok_targets else "not run"
        if self.other_targets:
            text += " (" + ", ".join(f"{t} {s}" for t, s in self.other_targets) + ")"
        return text


@dataclass(slots=True)
class RunOutcome:
    verdicts: list[Verdict] = field(default_factory=list)
    message: str | None = None  # why nothing came back (keracheck failed, bad output)


def verdicts_of(doc: Mapping[str, Any], text: bytes) -> list[Verdict]:
    """One verdict per case of a run document."""
    out: list[Verdict] = []
    for case in doc.get("cases", []):
        results: Mapping[str, Mapping[str, Any]] = case.get("targets", {})
        ok = tuple(t for t, r in results.items() if r.get("status") == "ok")
        other = tuple((t, str(r.get("status"))) for t, r in results.items() if t not in ok)
        errors = tuple(
            (t, str(r.get("message") or "error"))
            for t, r in results.items()
            if r.get("status") == "error"
        )
        out.append(
            Verdict(
                str(case.get("fingerprint", "")),
                str(case.get("function", "")),
                str(case.get("verdict", "")),
                ok,
                tuple(o for o in other if o[1] != "error"),
                tuple(d for d in case.get("divergences", []) if not d.get("baselined")),
                errors,
                text,
            )
        )
    return out


def divergence_message(d: Mapping[str, Any]) -> str:
    """``ref vs cpu, output 0: 17/256 elements differ (6.64%); first differing node: %2 mul
    (let b), f32[4]`` (keracheck's own wording, ``keracheck.formats``)."""
    from keracheck.formats import mismatch_summary, pair_text

    text = f"{pair_text(d)}, {mismatch_summary(d)}"
    node = d.get("firstNode")
    if isinstance(node, Mapping):
        let = f" (let {node['let']})" if node.get("let") else ""
        text += f"; first differing node: %{node.get('index')} {node.get('op')}{let}, {node.get('type')}"
    elif d.get("firstNodeNote"):
        text += f"; first differing node: {d['firstNodeNote']}"
    return text


def divergence_rule(d: Mapping[str, Any]) -> str:
    from keracheck.formats import rule_for

    return rule_for(d)


class Checker:
    """Runs keracheck in the background and keeps its verdicts (see the module doc)."""

    def __init__(
        self,
        command: Sequence[str] | None = None,
        targets: str = DEFAULT_TARGETS,
        args: Sequence[str] = (),
        cwd: str | None = None,
    ) -> None:
        self.command = list(command) if command else default_command()
        self.targets = targets
        self.args = list(args)
        self.cwd = cwd
        self.cache: dict[tuple[str, str, tuple[str, ...]], Verdict] = {}
        self.latest: dict[str, Verdict] = {}  # fingerprint -> its last verdict, any targets
        self.tasks: dict[str, asyncio.Task[RunOutcome]] = {}
        self.running_targets: dict[str, str] = {}  # uri -> the targets of its run in flight

    def key(self, fingerprint: str, targets: str | None = None) -> tuple[str, str, tuple[str, ...]]:
        return fingerprint, targets or self.targets, tuple(self.args)

    def known(self, fingerprint: str, targets: str | None = None) -> Verdict | None:
        return self.cache.get(self.key(fingerprint, targets))

    def running(self, uri: str) -> bool:
        task = self.tasks.get(uri)
        return task is not None and not task.done()

    def cancel(self, uri: str) -> None:
        task = self.tasks.pop(uri, None)
        if task is not None and not task.done():
            task.cancel()

    def start(
        self, uri: str, name: str, text: bytes, targets: str | None = None
    ) -> asyncio.Task[RunOutcome]:
        """Run keracheck on ``text`` (cancelling this document's run in flight)."""
        self.cancel(uri)
        task = asyncio.get_running_loop().create_task(self._run(name, text, targets))
        self.tasks[uri] = task
        self.running_targets[uri] = targets or self.targets
        return task

    async def _run(self, name: str, text: bytes, targets: str | None) -> RunOutcome:
        chosen = targets or self.targets
        with tempfile.TemporaryDirectory(prefix="kerac-lsp-") as tmp:
            source = Path(tmp) / (Path(name).name or "document.kera")
            source.write_bytes(text)
            out = Path(tmp) / "run.json"
            argv = [*self.command, "run", str(source), "--format", "json", "--output", str(out)]
            argv += ["-q", *(["--targets", chosen] if chosen != "all" else []), *self.args]
            code, stderr = await _spawn(argv, self.cwd or tmp)
            try:
                doc = json.loads(out.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                tail = stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
                return RunOutcome(message=f"keracheck exited {code}: " + " / ".join(tail))
        verdicts = verdicts_of(doc, text)
        for v in verdicts:
            self.cache[self.key(v.fingerprint, chosen)] = v
            self.latest[v.fingerprint] = v
        return RunOutcome(verdicts)


async def _spawn(argv: list[str], cwd: str) -> tuple[int, bytes]:
    """Run ``argv`` in a process group of its own; on cancellation, kill the whole group."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    try:
        _, stderr = await proc.communicate()
    except asyncio.CancelledError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            await proc.wait()
        raise
    return proc.returncode or 0, stderr
