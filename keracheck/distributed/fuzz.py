"""``keracheck fuzz --scheduler``: a campaign sharded by seed ranges over Dask workers, with a
checkpoint to resume from.

Shards.  Shard ``k`` of a campaign with seed ``S`` is the local campaign
(``keracheck.fuzz.engine.Campaign``) with seed :func:`shard_seed` ``(S, k) = S * STRIDE + k``
and ``--shard-examples`` examples: campaign ``S`` owns the seeds ``[S * STRIDE, (S + 1) *
STRIDE)`` and walks them in order, so shard ``k`` draws the same graphs and inputs wherever
and whenever it runs (``keracheck fuzz --seed S*STRIDE+k --max-examples E`` replays it).  A
shard runs whole on one worker that has every target of the campaign -- discovery, the
Hypothesis shrink and the reductions, so shrinking runs on a worker that has the diverging
target -- in the way a local campaign runs (each target in its warm worker process under the
sandbox, or with ``--in-process`` in the worker's own process).

Deduplication.  The signatures already found go out with each shard: there they are counted,
not shrunk again.  Back here each shard's findings are merged by signature (counts added);
the first shard to bring a signature back has its reproducer written under ``--out``, with the
header its worker wrote (its seed, its example), so every signature is saved once.

Checkpoint.  With ``--checkpoint DIR``, ``DIR/campaign.json`` is rewritten atomically after
every finished shard: the campaign's key (targets and their specs, seed, policies, levels,
batch size, inputs, shard size), the shards done, every signature with its count and
reproducer, and the summed figures.  Run the same command again and it continues: the shards
done are not run again, the next ones follow in seed order, and every finding is kept.  A stop
(Ctrl-C, ``kill``, a lost machine) costs only the shards in flight.  ``--max-examples`` is the
campaign's total, so a resumed campaign may be given a larger one to go further; ``--budget``
is each invocation's own.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import queue
import sys
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kera import files

#: seeds per campaign seed: shard k of campaign S has seed S * STRIDE + k
STRIDE = 1_000_003
#: examples (batches of graphs) per shard, by default
SHARD_EXAMPLES = 10
CHECKPOINT = "campaign.json"
VERSION = 1


class CheckpointError(Exception):
    """A checkpoint that cannot be used (another campaign's, or damaged): exit 2."""


def shard_seed(seed: int, index: int) -> int:
    return seed * STRIDE + index


@dataclass
class Shard:
    """What a worker needs to run one shard (picklable)."""

    index: int
    seed: int
    examples: int
    specs: dict[str, str]  # target id -> spec, ref first
    known: list[Any]  # signatures already found: counted, not shrunk again
    options: dict[str, Any]  # engine Options fields besides seed and examples
    out: str  # where the reproducers will be written (for the header's paths)


@dataclass
class Found:
    """A signature a shard shrank: its figures and the reproducer's divergence and header."""

    signature: Any
    figures: dict[str, Any]  # engine.finding_document of it
    divergence: Any
    header: list[str]


@dataclass
class ShardResult:
    index: int
    seed: int
    worker: str
    stats: dict[str, Any]
    counts: dict[str, int]  # signature text -> hits in this shard
    found: list[Found] = field(default_factory=list)


def run_shard(shard: Shard, worker: str) -> ShardResult:
    """Run ``shard`` here (on a Dask worker) as a local campaign."""
    from hypothesis.errors import HypothesisDeprecationWarning

    from keracheck.fuzz.engine import Campaign, Finding, Options
    from keracheck.targets import resolve_all

    targets = resolve_all(list(shard.specs.items()))
    missing = [f"{t.id}: {t.reason}" for t in targets if not t.available]
    if missing:
        raise RuntimeError("this worker lacks targets: " + "; ".join(missing))
    opts = Options(seed=shard.seed, max_examples=shard.examples, out=None, **shard.options)
    campaign = Campaign(targets, opts)
    for sig in shard.known:  # counted here, shrunk by the shard that found it first
        campaign.findings[sig] = Finding(sig)
    with warnings.catch_warnings():  # as the CLI runs a campaign: its generator's notes unshown
        warnings.simplefilter("ignore", HypothesisDeprecationWarning)
        campaign.run()
    campaign.opts.out = shard.out  # the header names the files the coordinator will write
    doc = campaign.document()
    found = [
        Found(f.signature, _figures(f), f.final, campaign.header(f))
        for f in campaign.findings.values()
        if f.final is not None
    ]
    counts = {str(s): f.count for s, f in campaign.findings.items() if f.count}
    return ShardResult(shard.index, shard.seed, worker, doc["stats"], counts, found)


def _figures(f: Any) -> dict[str, Any]:
    from keracheck.fuzz.engine import finding_document

    return finding_document(f)


# ------------------------------------------------------------------------------ the checkpoint


@dataclass
class State:
    """A campaign's progress: what the checkpoint holds."""

    key: str
    done: list[int] = field(default_factory=list)
    signatures: dict[str, dict[str, Any]] = field(default_factory=dict)  # text -> document
    stats: dict[str, float] = field(default_factory=dict)
    shards: list[dict[str, Any]] = field(default_factory=list)  # index, seed, worker, counts

    def next_indices(self, running: set[int]) -> Any:
        k = 0
        while True:
            if k not in self.done and k not in running:
                yield k
            k += 1


#: engine options that change what a shard finds (the rest -- the command line, time limits --
#: may differ between the runs of one campaign)
KEYED = ("policies", "batch_size", "inputs", "opt_levels", "pass_plugins", "reduce")


def campaign_key(specs: dict[str, str], opts: dict[str, Any], seed: int, shard: int) -> str:
    keyed = {name: opts.get(name) for name in KEYED}
    body = json.dumps([specs, keyed, seed, shard], sort_keys=True, default=str)
    return hashlib.sha256(b"keracheck-fuzz-campaign\0" + body.encode()).hexdigest()


def load(folder: str | None, key: str) -> State:
    """The checkpoint in ``folder`` (a fresh state when there is none)."""
    if folder is None:
        return State(key)
    path = Path(folder) / CHECKPOINT
    if not path.exists():
        return State(key)
    try:
        data = json.loads(path.read_text())
        state = State(data["key"], data["done"], data["signatures"], data["stats"], data["shards"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise CheckpointError(f"{path}: not a keracheck fuzz checkpoint ({e})") from None
    if state.key != key:
        raise CheckpointError(
            f"{path}: the checkpoint of another campaign (other targets, seed, policies, "
            "levels or shard size); give another --checkpoint folder, or the same flags"
        )
    return state


def save(folder: str | None, state: State) -> None:
    if folder is None:
        return
    Path(folder).mkdir(parents=True, exist_ok=True)
    body = json.dumps({"version": VERSION, **asdict(state)}, indent=1, sort_keys=True)
    files.write_atomic(Path(folder) / CHECKPOINT, body.encode())


# ------------------------------------------------------------------------------ the coordinator


@dataclass
class Plan:
    """A distributed campaign: its targets, options and limits."""

    specs: dict[str, str]
    options: dict[str, Any]
    seed: int
    shard_examples: int
    max_examples: int | None
    budget: float | None
    max_findings: int | None
    out: str | None
    checkpoint: str | None
    command: str

    def shards_total(self) -> int | None:
        if self.max_examples is None:
            return None
        return math.ceil(self.max_examples / self.shard_examples)


def run_campaign(cluster: Any, plan: Plan, progress: Any = None) -> dict[str, Any]:
    """Run (or resume) the campaign on ``cluster``; the campaign document."""
    from keracheck.distributed.probe import resource

    key = campaign_key(plan.specs, plan.options, plan.seed, plan.shard_examples)
    state = load(plan.checkpoint, key)
    resumed = len(state.done)
    eligible = [
        w for w, rep in cluster.reports.items() if all(rep[t][0] is None for t in plan.specs)
    ]
    need = {} if len(eligible) == cluster.worker_count() else {resource(t): 1.0 for t in plan.specs}
    total = plan.shards_total()
    inbox: queue.Queue[tuple[int, str, Any]] = queue.Queue()
    running: dict[int, int] = {}  # request id -> shard index
    started = time.monotonic()
    stop = ""

    def submit() -> bool:
        k = next(state.next_indices(set(running.values())))
        if total is not None and k >= total:
            return False
        shard = Shard(
            k,
            shard_seed(plan.seed, k),
            plan.shard_examples,
            plan.specs,
            [_signature(s) for s in state.signatures],
            plan.options,
            plan.out or ".",
        )
        running[cluster.submit("run_shard", (shard,), need, inbox)] = k
        return True

    try:
        while True:
            stop = stop or _stop(plan, state, started)
            while not stop and len(running) < max(1, len(eligible)) and submit():
                pass
            if not running:
                stop = stop or "examples"
                break
            bid, kind, payload = inbox.get()
            k = running.pop(bid)
            if kind != "ok":
                raise CheckpointError(f"shard {k} failed on Dask: {payload}")
            _merge(state, payload, plan)
            save(plan.checkpoint, state)
            if progress is not None:
                progress(
                    f"shard {k} (seed {payload.seed}) on worker {payload.worker}: "
                    f"{payload.stats['examples']} examples, "
                    f"{len(state.signatures)} signatures so far"
                )
    except KeyboardInterrupt:
        stop = "interrupted"
    return document(plan, state, stop, resumed, time.monotonic() - started, cluster)


def _stop(plan: Plan, state: State, started: float) -> str:
    """Why no further shard is started ("" to go on)."""
    if plan.max_findings is not None and len(state.signatures) >= plan.max_findings:
        return "findings"
    if plan.budget is not None and time.monotonic() - started >= plan.budget:
        return "budget"
    return ""


def _signature(text: str) -> Any:
    from keracheck.fuzz.oracle import Signature

    pair, op, cls = text.split(" ")
    base, target = pair.split("|")
    return Signature(base, target, op, cls)


SUMMED = (
    "examples", "graphs", "uniqueGraphs", "ops", "runs",
    "generateSeconds", "shrinkSeconds", "reduceSeconds",
)  # fmt: skip


def _merge(state: State, result: ShardResult, plan: Plan) -> None:
    """A finished shard into the state: figures summed, signatures merged, new reproducers
    written."""
    from keracheck.fuzz import reproduce

    for name in SUMMED:
        state.stats[name] = state.stats.get(name, 0) + (result.stats.get(name) or 0)
    for found in result.found:
        text = str(found.signature)
        if text in state.signatures:
            continue
        doc = dict(found.figures, count=0, shard=result.index, seed=result.seed)
        if plan.out is not None:
            w = reproduce.write(Path(plan.out), found.divergence, found.header)
            doc.update(reproducer=w.path, inputs=w.inputs, rows=w.rows)
        state.signatures[text] = doc
    for text, count in result.counts.items():
        if text in state.signatures:
            state.signatures[text]["count"] += count
    state.done.append(result.index)
    state.shards.append(
        {"index": result.index, "seed": result.seed, "worker": result.worker, "hits": result.counts}
    )


def document(
    plan: Plan, state: State, stop: str, resumed: int, seconds: float, cluster: Any
) -> dict[str, Any]:
    """The campaign document (the keys of a local campaign's, ``keracheck.fuzz.render``)."""
    s = state.stats
    gen = s.get("generateSeconds", 0.0)
    return {
        "schemaVersion": 1,
        "command": plan.command,
        "seed": plan.seed,
        "targets": list(plan.specs),
        "policies": list(plan.options.get("policies", ())),
        "stats": {
            **{name: s.get(name, 0) for name in SUMMED},
            "seconds": round(seconds, 3),
            "budget": plan.budget,
            "maxFindings": plan.max_findings,
            "stopReason": stop,
            "graphsPerSecond": round(s.get("graphs", 0) / gen, 2) if gen > 0 else None,
            "interrupted": stop == "interrupted",
        },
        "signatures": sorted(state.signatures.values(), key=lambda d: d["signature"]),
        "distributed": {
            "scheduler": str(cluster.address),
            "checkpoint": plan.checkpoint,
            "shardExamples": plan.shard_examples,
            "shardsDone": sorted(state.done),
            "shardsResumed": resumed,
            "shards": state.shards,
        },
        "exitCode": 1 if state.signatures else 0,
    }


# ------------------------------------------------------------------------------ the command


def main(args: argparse.Namespace, cluster: Any) -> int:
    """``keracheck fuzz --scheduler ...`` (the CLI has connected ``cluster``)."""
    from keracheck import fuzz

    try:
        opts = fuzz.options(args)
        ids = [t.strip() for t in args.targets.split(",") if t.strip()] if args.targets else None
        targets, notes = fuzz.select_targets(ids, list(getattr(args, "backend_plugin", None) or []))
    except fuzz.UsageError as e:
        raise CheckpointError(str(e)) from None
    for note in notes:
        print(f"keracheck: {note}", file=sys.stderr)
    specs = {t.id: t.spec for t in targets}
    cluster.install(specs)
    lacking = {t: cluster.reason(t) for t in specs if cluster.reason(t)}
    if lacking or not any(
        all(rep[t][0] is None for t in specs) for rep in cluster.reports.values()
    ):
        why = "; ".join(f"{t}: {r}" for t, r in lacking.items()) or "no worker has them all"
        raise CheckpointError(f"no Dask worker has every target of the campaign ({why})")
    os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", fuzz._storage())
    plan = Plan(
        specs,
        _engine_options(opts),
        opts.seed,
        int(getattr(args, "shard_examples", None) or SHARD_EXAMPLES),
        opts.max_examples,
        opts.budget,
        opts.max_findings,
        opts.out,
        getattr(args, "checkpoint", None),
        opts.command,
    )
    doc = run_campaign(cluster, plan, _say)
    doc["unavailable"] = notes
    sys.stdout.write(fuzz.render(doc, getattr(args, "format", "text")))
    if getattr(args, "outputs", None):
        from keracheck import outputs

        outputs.write(args.outputs, lambda fmt: fuzz.render(doc, fmt))
    return int(doc["exitCode"])


def _say(message: str) -> None:
    print(f"keracheck: {message}", file=sys.stderr, flush=True)


#: the engine Options a shard takes from the command (seed and examples are the shard's)
ENGINE_FIELDS = (
    "policies", "batch_size", "inputs", "shrink_seconds", "timeout", "isolate", "reduce",
    "command", "opt_levels", "pass_plugins",
)  # fmt: skip


def _engine_options(opts: Any) -> dict[str, Any]:
    return {name: getattr(opts, name) for name in ENGINE_FIELDS}
