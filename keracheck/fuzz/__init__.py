"""``keracheck fuzz``: Hypothesis-generated graphs, checked bit for bit against ``ref`` on every
selected target; each new divergence signature is shrunk to a minimal graph and saved as a
reproducer.

``main(args)`` takes the ``fuzz`` namespace of ``keracheck.cli.parser()``: ``targets`` (comma
list; ``ref`` is always added: it is the oracle), ``backend_plugin`` (list of specs),
``max_examples``, ``budget`` (wall-clock seconds, shrinking included), ``seed``, ``out``
(reproducer folder) and ``format`` (``text`` or ``json``); optional attributes ``policy``
(comma list, ``all`` or ``none``: the generation policies), ``shrink_seconds`` (the cap on one
shrink), ``until_first`` and ``max_findings`` (stop once that many signatures are saved) and
``in_process`` (targets in this process: ``Options.isolate`` off) are used when present.
Without ``--max-examples`` and ``--budget`` it stops after :data:`DEFAULT_EXAMPLES` examples.

Exit codes: 0 no divergence found; 1 at least one divergence (each signature saved under
``--out``); 2 a usage error (unknown target or policy, bad plugin, bad limits).  Progress
(examples, graphs/s, signatures, shrink progress) goes to stderr, with rich when stderr is a
terminal; the result goes to stdout as text or JSON (``engine.Campaign.document``).

Modules: ``strategies`` (graph strategies), ``policies`` (generation biases), ``oracle``
(targets, comparison, signatures), ``workers`` (a warm worker process per target), ``engine``
(searches, shrinking, budgets), ``reduce`` (cone, cut, rows, shapes and values of a reproducer),
``reproduce`` (reproducer files), ``to_kera`` (graph -> source).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from keracheck.fuzz import policies as policies_mod
from keracheck.fuzz.engine import Campaign, Options
from keracheck.targets import Target

DEFAULT_EXAMPLES = 100
EXIT_OK, EXIT_FOUND, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    pass


def _err(msg: str) -> None:
    print(f"keracheck: {msg}", file=sys.stderr)


def select_targets(
    ids: list[str] | None, plugin_specs: list[str]
) -> tuple[list[Target], list[str]]:
    """(available targets, ref first; notes on unavailable ones).  Raises UsageError."""
    from keracheck.targets import TargetError, default_ids, known_specs, load_plugin, resolve_all

    specs = known_specs()
    plugins: dict[str, str] = {}
    for spec in plugin_specs:
        try:
            tid, s = load_plugin(spec)
        except TargetError as e:
            raise UsageError(str(e)) from None
        plugins[tid] = s
    wanted = ids if ids else default_ids(specs)
    order = list(dict.fromkeys(["ref", *wanted, *plugins]))
    every = {**specs, **plugins}
    unknown = [t for t in order if t not in every]
    if unknown:
        from keracheck.harness import unknown_target

        raise UsageError(unknown_target(unknown[0], every))
    resolved = resolve_all([(t, every[t]) for t in order])
    notes = [f"{t.id}: unavailable: {t.reason}" for t in resolved if not t.available]
    return [t for t in resolved if t.available], notes


def _max_findings(args: argparse.Namespace) -> int | None:
    most = getattr(args, "max_findings", None)
    if getattr(args, "until_first", False):
        if most not in (None, 1):
            raise UsageError("--until-first is --max-findings 1: give one of them")
        return 1
    if most is not None and most < 1:
        raise UsageError("--max-findings must be at least 1")
    return most


def options(args: argparse.Namespace) -> Options:
    max_examples = getattr(args, "max_examples", None)
    budget = getattr(args, "budget", None)
    if max_examples is not None and max_examples < 1:
        raise UsageError("--max-examples must be at least 1")
    max_findings = _max_findings(args)
    if budget is not None and not budget > 0:
        raise UsageError("--budget must be a positive number of seconds")
    if max_examples is None and budget is None:
        max_examples = DEFAULT_EXAMPLES
    shrink = getattr(args, "shrink_seconds", None)
    if shrink is not None and not shrink > 0:
        raise UsageError("--shrink-seconds must be a positive number of seconds")
    try:
        pols = policies_mod.parse(getattr(args, "policy", None))
    except policies_mod.PolicyError as e:
        raise UsageError(str(e)) from None
    from keracheck.opt_levels import LevelError, load_pass_plugins, parse_levels

    pass_plugins = tuple(getattr(args, "pass_plugin", None) or ())
    try:
        levels = parse_levels(getattr(args, "opt_levels", None) or "0")
        load_pass_plugins(pass_plugins)
    except LevelError as e:
        raise UsageError(str(e)) from None
    if pass_plugins and levels == (0,):
        raise UsageError("--pass-plugin needs --opt-levels with a level above 0 (e.g. 0,2)")
    return Options(
        opt_levels=levels,
        pass_plugins=pass_plugins,
        max_examples=max_examples,
        budget=budget,
        max_findings=max_findings,
        isolate=not getattr(args, "in_process", False),
        seed=int(getattr(args, "seed", 0) or 0),
        out=getattr(args, "out", None) or "corpora/regressions",
        policies=pols,
        shrink_seconds=Options.shrink_seconds if shrink is None else float(shrink),
        command="keracheck fuzz " + " ".join(sys.argv[2:])
        if sys.argv[1:2] == ["fuzz"]
        else "keracheck fuzz",
    )


def main(args: argparse.Namespace) -> int:
    try:
        opts = options(args)
        ids = [t.strip() for t in args.targets.split(",") if t.strip()] if args.targets else None
        targets, notes = select_targets(ids, list(getattr(args, "backend_plugin", None) or []))
    except UsageError as e:
        _err(str(e))
        return EXIT_USAGE
    for note in notes:
        _err(note)
    # Hypothesis keeps a cache of constants it found in the source; keep it out of the cwd
    os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", _storage())
    with Display(_interactive()) as display:
        opts.progress = display.update
        campaign = Campaign(targets, opts).run()
    doc = campaign.document()
    doc["unavailable"] = notes
    sys.stdout.write(render(doc, getattr(args, "format", "text")))
    if getattr(args, "outputs", None):  # --output-format, checked by the CLI before the run
        from keracheck import outputs

        outputs.write(args.outputs, lambda fmt: render(doc, fmt))
    return int(doc["exitCode"])


def render(doc: dict[str, Any], fmt: str) -> str:
    """The campaign's result as ``text`` or ``json``."""
    return json.dumps(doc, indent=2) + "\n" if fmt == "json" else text_report(doc)


# ------------------------------------------------------------------------------ output


def text_report(doc: dict[str, Any]) -> str:
    s = doc["stats"]
    rate = s["graphsPerSecond"] or 0.0
    lines = [
        f"keracheck fuzz: {s['examples']} examples, {s['graphs']} graphs ({s['uniqueGraphs']} "
        f"distinct, {rate:.1f} graphs/s) against {', '.join(doc['targets'])} in "
        f"{s['seconds']:.1f} s: generating {s['generateSeconds']:.1f} s, shrinking "
        f"{s['shrinkSeconds']:.1f} s, reducing {s['reduceSeconds']:.1f} s"
    ]
    if s["stopReason"] == "findings" and s["maxFindings"] is not None:
        n = s["maxFindings"]
        lines.append(f"stopped after {n} saved signature{'s' if n != 1 else ''}")
    sigs = doc["signatures"]
    if not sigs:
        lines.append("no divergence found")
    else:
        lines.append(f"{len(sigs)} divergence signature{'s' if len(sigs) != 1 else ''}:")
        width = max(len(x["signature"]) for x in sigs)
        for x in sigs:
            where = x["reproducer"] or "(not saved)"
            ops = f"{x['opsAfter']} op{'s' if x['opsAfter'] != 1 else ''}"
            lines.append(f"  {x['signature']:<{width}}  {x['count']:>5} hits  {ops:>6}  {where}")
    if s["interrupted"]:
        lines.append("interrupted: the reproducers of signatures not yet shrunk were not saved")
    coverage = doc.get("coverage")
    if coverage and coverage.get("text"):
        lines += ["", str(coverage["text"]).rstrip()]
    return "\n".join(lines) + "\n"


def _storage() -> str:
    base = os.environ.get("KERACHECK_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "keracheck"
    )
    return os.path.join(base, "hypothesis")


def _interactive() -> bool:
    return sys.stderr.isatty() and not os.environ.get("CI") and not os.environ.get("NO_COLOR")


class Display:
    """Progress on stderr: a rich status line when interactive, else one line per event."""

    def __init__(self, live: bool) -> None:
        self.live = live
        self.status: Any = None
        self.last = 0.0
        self.phase = ""

    def __enter__(self) -> Display:
        if self.live:
            from rich.console import Console

            self.status = Console(stderr=True).status("starting")
            self.status.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.status is not None:
            self.status.stop()

    def update(self, c: Campaign) -> None:
        s = c.stats
        if not self.live:
            self._event(c)
            return
        now = time.monotonic()
        if now - self.last < 0.2 and s.phase == self.phase:
            return
        self.last, self.phase = now, s.phase
        rate = s.graphs / s.generate_seconds if s.generate_seconds > 0 else 0.0
        line = (
            f"{s.examples} examples · {s.graphs} graphs · {rate:.1f} graphs/s · "
            f"{len(c.findings)} signatures"
        )
        if s.phase == "shrinking":
            line += f" · shrinking {s.current}: {s.shrink_calls} calls, best {s.shrink_ops} ops"
        elif s.phase == "reducing":
            line += f" · reducing {s.current}"
        self.status.update(line)

    def _event(self, c: Campaign) -> None:
        s = c.stats
        if s.phase == self.phase:
            return
        self.phase = s.phase
        if s.phase == "shrinking":
            print(f"  found {s.current} at example {s.examples}; shrinking", file=sys.stderr)
