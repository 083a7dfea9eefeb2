"""``keracheck``: run every target, compare bit for bit, sign and verify reports.

Exit codes (every subcommand): 0 success / all agree; 1 a new divergence (``run``), or a report
that fails verification (``verify``); 2 usage, configuration or input error; 3 internal error or
target crash; 4 a required target is unavailable; 5 nothing to run.  Bad input never produces a
traceback: errors go to stderr as ``keracheck: <file>: <message>``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from keracheck import config as config_mod
from keracheck import harness, security
from keracheck import outputs as outputs_mod
from keracheck.baseline import BaselineError, baseline_from, load_baseline
from keracheck.collect import Case, Collected, collect, companion_npz, compile_file, make_case
from keracheck.document import (
    EXIT_CRASH,
    EXIT_DIVERGE,
    EXIT_OK,
    EXIT_USAGE,
    fix_hint,
)
from keracheck.options import Options

FORMATS = ("text", "json", "junit", "sarif", "github", "html")


class UsageError(Exception):
    pass


def _csv(v: str | None) -> list[str] | None:
    return None if v is None else [t.strip() for t in v.split(",") if t.strip()]


def _interactive() -> bool:
    return sys.stderr.isatty() and not os.environ.get("CI") and not os.environ.get("NO_COLOR")


_PROGRESS_LOCK = threading.Lock()


def _progress(msg: str) -> None:
    """One progress line on stderr, whole: targets report from several threads at once."""
    with _PROGRESS_LOCK:
        sys.stderr.write(f"keracheck: {msg}\n")
        sys.stderr.flush()


def _err(msg: str) -> None:
    print(f"keracheck: {msg}", file=sys.stderr)


def build_options(args: argparse.Namespace, conf: dict[str, Any]) -> Options:
    from keracheck.targets import TargetError, load_plugin

    def pick(name: str, default: Any) -> Any:
        v = getattr(args, name, None)
        return v if v is not None else conf.get(name, default)

    mode = _sandbox_mode(args, conf)  # before any plugin host starts
    plugins: dict[str, str] = {}
    for spec in [*(conf.get("backend_plugins") or []), *(args.backend_plugin or [])]:
        security.check_plugin(spec)
        try:
            tid, s = load_plugin(spec)
        except TargetError as e:
            raise UsageError(str(e)) from None
        plugins[tid] = s
        security.note("plugin", {"spec": spec, "target": tid})
    targets = _csv(args.targets) if args.targets else conf.get("targets")
    require = _csv(args.require) if getattr(args, "require", None) else conf.get("require", [])
    for name in ("inputs", "repeat", "jobs"):
        if not isinstance(pick(name, 1), int) or pick(name, 1) < 1:
            raise UsageError(f"--{name} must be an integer of at least 1")
    timeout = pick("timeout", 120.0)
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or not 0 < timeout <= 86400
    ):
        raise UsageError(f"--timeout must be a number of seconds in (0, 86400], got {timeout!r}")
    baseline = None
    bpath = pick("baseline", None)
    if bpath:
        try:
            baseline = load_baseline(bpath)
        except BaselineError as e:
            raise UsageError(str(e)) from None
    keyword = _keyword(args)
    profile = pick("input_profile", "special")
    from keracheck.inputs import PROFILES

    if profile not in PROFILES:
        raise UsageError(f"input-profile must be one of {', '.join(PROFILES)}, got {profile!r}")
    from keracheck.opt_levels import LevelError, load_pass_plugins, parse_levels

    pass_plugins = [*(conf.get("pass_plugins") or []), *(getattr(args, "pass_plugin", None) or [])]
    for spec in pass_plugins:  # a pass runs in keracheck's own process
        security.check_plugin(spec)
    try:
        levels = parse_levels(pick("opt_levels", "0"))
        load_pass_plugins(pass_plugins)  # a bad spec is a usage error now, not mid-run
    except LevelError as e:
        raise UsageError(str(e)) from None
    return Options(
        opt_levels=levels,
        pass_plugins=pass_plugins,
        localise=not getattr(args, "no_localise", False),
        input_profile=profile,
        keyword=keyword,
        targets=targets,
        require=require or [],
        plugins=plugins,
        n=pick("inputs", 64),
        seed=pick("seed", 0),
        repeat=pick("repeat", 1),
        jobs=pick("jobs", os.cpu_count() or 2),
        timeout=float(timeout),
        baseline=baseline,
        dump_outputs=getattr(args, "dump_outputs", None),
        cache_dir=None
        if getattr(args, "no_cache", False) or pick("repeat", 1) > 1
        else harness.default_cache_dir(),
        command="keracheck " + " ".join(sys.argv[1:]) if sys.argv[1:] else "keracheck run",
        progress=None if getattr(args, "quiet", False) else _progress,
        sandbox=mode,
    )


def _sandbox_mode(args: argparse.Namespace, conf: dict[str, Any], warm: bool = True) -> str:
    """``--sandbox`` over ``[tool.keracheck] sandbox``, set for this process before any
    plugin loads, with the key to hide from workers; ``off`` warns loudly, ``on`` on a machine
    that cannot sandbox is a usage error (exit 2) naming the fix (docs/security.md)."""
    from keracheck import sandbox

    mode = getattr(args, "sandbox", None) or conf.get("sandbox", "on")
    key = getattr(args, "key", None) or ""
    env_key = key.removeprefix("env://") if key.startswith("env://") else None
    sandbox.configure(mode, [key] if key and env_key is None else [], [env_key] if env_key else [])
    if mode == "off":
        _err(sandbox.OFF_WARNING)
        return mode
    try:
        sandbox.require()
    except sandbox.Unavailable as e:
        raise UsageError(str(e)) from None
    from keracheck.sandbox import launch

    if warm:
        launch.prewarm()  # the first batch server starts while the cases compile
    return mode


def _keyword(args: argparse.Namespace) -> Callable[[str], bool] | None:
    """-k and --lf as one predicate over node ids (None: every case)."""
    from keracheck.select import SelectError, keyword_matcher, load_last_failed

    preds: list[Callable[[str], bool]] = []
    if getattr(args, "keyword", None):
        try:
            preds.append(keyword_matcher(args.keyword))
        except SelectError as e:
            raise UsageError(str(e)) from None
    if getattr(args, "last_failed", False):
        failed = load_last_failed()
        if failed:
            _progress(f"--lf: running the {len(failed)} cases that did not agree last time")
            preds.append(failed.__contains__)
        else:
            _progress("--lf: no failed cases recorded; running every case")
    if not preds:
        return None
    return lambda nid: all(p(nid) for p in preds)


def emit(text: str, output: str | None, fmt: str = "text") -> None:
    """``text`` to ``output`` (atomically, granted and audited: ``outputs.write_one``), else
    to stdout."""
    if output:
        try:
            outputs_mod.write_one(output, text, fmt)
        except outputs_mod.OutputError as e:
            raise UsageError(str(e)) from None
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")


def summarize(doc: dict[str, Any]) -> None:
    s = doc["summary"]
    from keracheck.formats import printable

    for e in doc["errors"]:
        path, message = e["path"], e["message"].replace(e["path"], printable(e["path"]))
        _err(message if message.startswith(printable(path)) else f"{printable(path)}: {message}")
    for e in doc.get("staleBaseline", []):
        _err(
            f"stale baseline entry (no longer diverges): {e['fingerprint'][:12]} {e['targets']} output {e['output']}"
        )
    line = (
        f"{s['cases']} cases: {s['agree']} agree, {s['diverge']} diverge, {s['error']} error, "
        f"{s['skipped']} skipped, {s['baselined']} baselined divergences, "
        f"{s['inputErrors']} input errors -> exit {s['exitCode']}"
    )
    if _interactive():
        from rich.console import Console
        from rich.table import Table

        table = Table(title="keracheck targets")
        for col in ("target", "status"):
            table.add_column(col)
        for t in doc["targets"]:
            table.add_row(t["id"], "available" if t["available"] else f"unavailable: {t['reason']}")
        Console(stderr=True).print(table)
    print(line, file=sys.stderr)


def cmd_run(args: argparse.Namespace) -> int:
    conf, _ = config_mod.load()
    with _managed(args, conf) as manager:
        return _run(args, conf, manager)


def _run(args: argparse.Namespace, conf: dict[str, Any], manager: Any) -> int:
    from keracheck.journal import default_journal_dir

    opts = build_options(args, conf)
    opts.journal_dir, opts.resume = default_journal_dir(), not args.no_resume
    fmt = args.format or conf.get("format", "text")
    if fmt not in FORMATS:
        raise UsageError(f"unknown format '{fmt}' (choose from {', '.join(FORMATS)})")
    specs = args.output_format if args.output_format is not None else conf.get("output_formats")
    outputs = _output_specs(specs or [], FORMATS, [args.output, args.report])
    if args.report and not args.key:
        raise UsageError("--report needs --key PATH (create one with 'keracheck keygen --out DIR')")
    with _display(args, opts), _scheduler(args) as cluster:
        opts.scheduler = cluster
        doc, code = harness.run(args.paths, opts)
    if "message" in doc["summary"]:
        _err(doc["summary"]["message"])
    from keracheck.select import save_last_failed

    save_last_failed(doc["cases"])
    from keracheck import signing

    security.note_sandbox(doc)
    key, signature = None, None
    if args.report:
        try:
            key = signing.load_signing_key(args.key)
        except signing.KeyFileError as e:
            raise UsageError(str(e)) from None
        signature = outputs_mod.signed_banner(args.report, signing.keyid(key.public_key()))
    render_all(doc, fmt, args.output, outputs, signature)
    if key is not None:  # last, so its audit log names every file this run wrote
        _sign(args.report, doc, key, manager)
    summarize(doc)
    if getattr(args, "verbose", False):
        print_tracebacks(doc)
    return code


@contextlib.contextmanager
def _scheduler(args: argparse.Namespace) -> Iterator[Any]:
    """The Dask cluster ``--scheduler`` names, connected for the length of the command and
    closed after it (``keracheck.distributed``); None without the flag: the local pool, and
    no Dask imported.  A malformed or unreachable scheduler is a usage error (exit 2)."""
    text = getattr(args, "scheduler", None)
    if not text:
        yield None
        return
    from keracheck import distributed

    try:
        cluster = distributed.connect(text)
    except distributed.SchedulerError as e:
        raise UsageError(str(e)) from None
    with cluster:
        yield cluster


def _sign(path: str, doc: dict[str, Any], key: Any, manager: Any) -> None:
    """Write the signed report, its audit log ending with the entry that says so."""
    from keracheck import signing

    statements = len(doc["cases"]) + 1
    keyid = signing.keyid(key.public_key())
    manager.note(
        "report", {"path": os.path.abspath(path), "keyid": keyid, "statements": statements}
    )
    try:
        signing.write_report(path, doc, key, manager.snapshot())
    except OSError as e:
        raise UsageError(f"{path}: cannot write report: {e.strerror or e}") from None


@contextlib.contextmanager
def _managed(args: argparse.Namespace, conf: dict[str, Any]) -> Iterator[Any]:
    """The command under a SecurityManager granting what its command line asks for, within
    ``[tool.keracheck.policy]`` (a refused request: exit 2 before anything runs)."""
    from keracheck.security.startup import for_command

    with security.installed(for_command(args, conf)) as manager:
        yield manager


def print_tracebacks(doc: dict[str, Any]) -> None:
    from keracheck.formats import case_label

    for case in doc["cases"]:
        for tid, entry in case["targets"].items():
            if entry.get("traceback"):
                print(f"traceback of {tid} on {case_label(case)}:", file=sys.stderr)
                print(entry["traceback"].rstrip(), file=sys.stderr)


def _display(args: argparse.Namespace, opts: Options) -> Any:
    """The progress display on stderr for the run (a live board on a terminal, lines
    otherwise; nothing with -q); it becomes ``opts.progress`` while the run lasts."""
    import contextlib

    from keracheck import progress

    if getattr(args, "quiet", False):
        return contextlib.nullcontext()
    shown = progress.reporter(sys.stderr, opts.heartbeat, jobs=opts.jobs)
    opts.progress = shown
    return shown


def _output_specs(
    specs: Sequence[str], formats: Sequence[str], taken: Sequence[str | None]
) -> list[Any]:
    """``--output-format FMT=PATH`` specs, checked before anything runs (exit 2 when bad);
    ``taken``: the other files this command writes (``--output``, ``--report``)."""
    try:
        return outputs_mod.parse(specs, formats, [t for t in taken if t])
    except outputs_mod.OutputError as e:
        raise UsageError(str(e)) from None


def render_all(
    doc: dict[str, Any],
    fmt: str,
    output: str | None,
    outputs: Sequence[Any],
    signature: dict[str, Any] | None = None,
) -> None:
    """The run in ``fmt`` to ``output`` (stdout when None), then each ``--output-format`` file.
    HTML gets the signature banner; the GitHub step summary is appended once, by the first
    ``github`` rendering."""
    from keracheck.formats import render

    summary = {"written": False}

    def one(f: str) -> str:
        extra: dict[str, Any] = {"signature": signature} if f == "html" and signature else {}
        if f == "github" and summary["written"]:
            extra["step_summary"] = None
        summary["written"] |= f == "github"
        return render(f, doc, **extra)

    emit(one(fmt), output, fmt)
    try:
        outputs_mod.write(outputs, one)
    except outputs_mod.OutputError as e:
        raise UsageError(str(e)) from None


def cmd_show(args: argparse.Namespace) -> int:
    """Render a saved JSON run or a signed report in any format without running anything; the
    exit code is the run's own, so a saved run can gate a later CI step."""
    outputs = _output_specs(args.output_format or [], FORMATS, [args.output])
    try:
        saved = outputs_mod.load(args.file, args.key)
    except outputs_mod.OutputError as e:
        raise UsageError(str(e)) from None
    for note in saved.notes:
        _err(note)
    try:
        render_all(saved.doc, args.format, args.output, outputs, saved.signature)
    except (KeyError, TypeError, ValueError) as e:
        raise UsageError(f"{args.file}: cannot render as {args.format}: {e!r}") from None
    code = saved.doc["summary"].get("exitCode")
    return int(code) if isinstance(code, int) else EXIT_OK


def _all_targets(args: argparse.Namespace) -> list[Any]:
    """Every known target and each --backend-plugin, resolved (probed) side by side."""
    from keracheck.targets import TargetError, known_specs, load_plugin, resolve_all

    specs = known_specs()
    for spec in args.backend_plugin or []:
        try:
            tid, s = load_plugin(spec)
        except TargetError as e:
            raise UsageError(str(e)) from None
        specs[tid] = s
    return resolve_all(list(specs.items()))


def cmd_targets(args: argparse.Namespace) -> int:
    rows: list[dict[str, Any]] = []
    for t in _all_targets(args):
        tid, spec = t.id, t.spec
        ops = sorted(t.backend.supported_ops()) if t.backend is not None else []
        rows.append(
            {
                "id": tid,
                "available": t.available,
                "reason": t.reason,
                "fix": fix_hint(t.reason),
                "plugin": spec,
                "supportedOps": len(ops),
            }
        )
    if args.format == "json":
        emit(json.dumps({"schemaVersion": 1, "targets": rows}, indent=2), None)
    else:
        width = max(len(r["id"]) for r in rows)
        for r in rows:
            state = "available" if r["available"] else f"unavailable: {r['reason']}"
            emit(f"{r['id']:<{width}}  {state}", None)
    return EXIT_OK


def cmd_doctor(args: argparse.Namespace) -> int:
    """Every target: available or why not (and the fix), its tool versions, and a smoke case —
    the probe function run through the real harness with a 10 s limit — on each available one.
    Exit 0 when every available target passes its smoke case, 3 when one does not."""
    from kera import keg
    from kera.ir import Graph
    from keracheck import probe
    from keracheck.targets import known_specs

    targets = _all_targets(args)
    ready = [t.id for t in targets if t.available]
    fn, inputs = probe.probe_case()
    opts = Options(targets=ready, timeout=10.0, cache_dir=None, jobs=os.cpu_count() or 2)
    known = known_specs()  # built-in and installed targets; the rest came from --backend-plugin
    opts.plugins = {t.id: t.spec for t in targets if t.id not in known}
    case = Case("<smoke>", fn.name, fn, keg.dumps(Graph([fn])), inputs, "given")
    doc, _ = harness.run_cases(Collected([case], []), opts) if ready else ({}, 0)
    smoke = doc["cases"][0]["targets"] if doc.get("cases") else {}
    rows: list[dict[str, Any]] = []
    failed = 0
    for t in targets:
        entry = smoke.get(t.id, {})
        if not t.available:
            state = "unavailable"
        elif entry.get("status") == "ok":
            state = f"ok ({entry.get('seconds', 0):.2f} s)"
        else:
            failed += 1
            state = f"SMOKE FAILED: {entry.get('status')}: {entry.get('message')}"
        rows.append(
            {
                "id": t.id,
                "available": t.available,
                "smoke": state,
                "reason": t.reason,
                "fix": fix_hint(t.reason),
                "versions": harness._versions(t) if t.available else {},
            }
        )
    if args.format == "json":
        emit(json.dumps({"schemaVersion": 1, "targets": rows}, indent=2), None)
    else:
        width = max(len(r["id"]) for r in rows)
        for r in rows:
            versions = ", ".join(f"{k} {v}" for k, v in r["versions"].items())
            emit(f"{r['id']:<{width}}  {r['smoke']:<16}  {versions or r['reason']}", None)
            if r["fix"]:
                emit(f"{'':<{width}}  fix: {r['fix']}", None)
    return EXIT_CRASH if failed else EXIT_OK


def cmd_keygen(args: argparse.Namespace) -> int:
    from keracheck import signing

    try:
        key, pub = signing.keygen(args.out, args.password_env, force=args.force)
    except signing.KeyFileError as e:
        raise UsageError(str(e)) from None
    except OSError as e:
        raise UsageError(f"{args.out}: cannot write keys: {e.strerror or e}") from None
    print(f"private key: {key} (mode 0600)\npublic key:  {pub}")
    return EXIT_OK


def _keg_lookup(name: str) -> bytes | None:
    """The .keg bytes a report subject names (``<path>:<function>``), rebuilt from the file."""
    path, _, function = name.rpartition(":")
    if not path or not os.path.exists(path):
        return None
    try:
        graph = compile_file(path)
    except ValueError:
        return None
    if function not in graph.functions:
        return None
    from kera import keg
    from kera.ir import Graph

    return keg.dumps(Graph([graph.functions[function]]))


def cmd_verify(args: argparse.Namespace) -> int:
    from keracheck import signing

    try:
        pub = signing.load_public_key(args.key)
    except signing.KeyFileError as e:
        raise UsageError(str(e)) from None
    if not os.path.exists(args.file):
        raise UsageError(f"{args.file}: no such report")
    result = signing.verify_report(args.file, pub, _keg_lookup)
    ok = result.ok
    lines = [result.describe()]
    # the signatures held: what its audit log says (the capabilities granted, the chain)
    audit = result.audit_lines() if result.summary is not None else []
    if ok and args.rerun:
        from keracheck.targets import TargetError, load_plugin

        try:
            plugins = dict(load_plugin(spec) for spec in args.backend_plugin or [])
        except TargetError as e:
            raise UsageError(str(e)) from None
        ok, more = rerun_report(result, plugins)
        lines += more
    if args.format == "html":
        _verify_page(args, result, lines[1:], ok)
    lines[1:1] = audit
    print("\n".join(lines), file=sys.stdout if args.format == "text" else sys.stderr)
    return EXIT_OK if ok else EXIT_DIVERGE


def _verify_page(args: argparse.Namespace, result: Any, rerun: list[str], ok: bool) -> None:
    """``verify --format html``: the banner says what was verified; the run follows when the
    report verified."""
    from keracheck import signing
    from keracheck.formats import verify_html

    run = None
    if result.ok:
        cases = [({"name": c.name, "digest": c.digest}, c.predicate) for c in result.cases]
        run, _ = signing.run_from_statements(cases, result.summary)
    emit(verify_html.render(result, run, args.file, args.key, rerun, ok), args.output)


def rerun_report(result: Any, plugins: dict[str, str]) -> tuple[bool, list[str]]:
    """Re-execute each verified case (never from the result cache) and compare the recorded
    output digests; fails when nothing could be re-run."""
    ok, lines = True, []
    reproduced = 0
    for vc in result.cases:
        pred = vc.predicate
        path, _, function = vc.name.rpartition(":")
        try:
            graph = compile_file(path)
            fn = graph.functions[function]
        except (ValueError, KeyError) as e:
            ok = False
            lines.append(f"  RERUN {vc.name}: cannot rebuild the case: {e}")
            continue
        inputs = pred.get("inputs", {})
        opts = Options(
            targets=[t for t, r in pred.get("targets", {}).items() if r.get("status") == "ok"],
            n=int(inputs.get("n", 64)),
            seed=int(inputs.get("seed", 0)),
            cache_dir=None,
            plugins=plugins,
        )
        case = make_case(path, fn, opts, companion_npz(path))
        doc, _ = harness.run_cases(Collected([case], []), opts)
        got = doc["cases"][0]["targets"] if doc["cases"] else {}
        for tid, rec in pred.get("targets", {}).items():
            want = [o["digest"]["sha256"] for o in rec.get("outputs", [])]
            now = got.get(tid, {"status": "unavailable", "message": "unknown target here"})
            have = [o["sha256"] for o in now.get("outputs", [])]
            if want and now["status"] != "ok":
                lines.append(
                    f"  not re-run {vc.name} on {tid}: {now['status']}: {now.get('message')}"
                )
            elif want and want != have:
                ok = False
                lines.append(f"  RERUN {vc.name} on {tid}: outputs differ from the report")
            elif want:
                reproduced += 1
                lines.append(f"  rerun {vc.name} on {tid}: outputs reproduce")
    if reproduced == 0:
        ok = False
        lines.append(
            "  NOT VERIFIED BY RERUN: no recorded output was re-run here (no recorded target is "
            "available, or the cases could not be rebuilt); see 'keracheck targets'"
        )
    return ok, lines


def cmd_audit(args: argparse.Namespace) -> int:
    """``keracheck audit show REPORT``: the capabilities granted, every entry kept, and the
    chain's verdict.  Exit 0 when the report (signatures, with --key) and the chain verify,
    1 when not, 2 when the file is not a signed report or carries no audit log."""
    from keracheck import signing

    pub = None
    if args.key:
        try:
            pub = signing.load_public_key(args.key)
        except signing.KeyFileError as e:
            raise UsageError(str(e)) from None
    if not os.path.exists(args.file):
        raise UsageError(f"{args.file}: no such report")
    result = signing.verify_report(args.file, pub)
    if result.summary is None:  # unreadable, or a signature or the binding failed
        print(result.describe(), file=sys.stderr)
        return EXIT_DIVERGE
    log, verdict = result.summary.get("audit"), result.audit
    if log is None or verdict is None:
        raise UsageError(
            f"{args.file}: the report carries no audit log (written by a keracheck that did "
            "not record one)"
        )
    if pub is None:
        _err(f"{args.file}: signatures not checked (give --key PUB to verify them)")
    if args.format == "json":
        body = {"verified": verdict.ok, "problems": verdict.problems, "log": log}
        emit(json.dumps(body, indent=2), args.output, "json")
    else:
        emit(security.render(log, verdict), args.output)
    return EXIT_OK if result.ok else EXIT_DIVERGE


def cmd_repro(args: argparse.Namespace) -> int:
    conf, _ = config_mod.load()
    with _managed(args, conf):
        return _repro(args, conf)


def _repro(args: argparse.Namespace, conf: dict[str, Any]) -> int:
    opts = build_options(args, conf)
    opts.cache_dir = None
    collected = collect(args.paths or ["corpora"], opts)
    key = args.case
    if os.path.exists(key):
        collected = collect([key], opts)
        chosen = collected.cases
    else:
        chosen = [c for c in collected.cases if c.fingerprint.startswith(key.lower())]
    if not chosen:
        raise UsageError(
            f"no case matches '{key}' (give a fingerprint prefix and the paths to search, or a file)"
        )
    doc, code = harness.run_cases(
        Collected(chosen, collected.errors if os.path.exists(key) else []), opts
    )
    from keracheck.formats import render

    emit(render(args.format or "text", doc), None)
    return code


def cmd_baseline(args: argparse.Namespace) -> int:
    conf, _ = config_mod.load()
    conf.pop("baseline", None)
    args.baseline = None
    with _managed(args, conf):
        opts = build_options(args, conf)
        doc, code = harness.run(args.paths, opts)
        base = baseline_from(doc, args.reason)
        out = args.output or ".keracheck/baseline.json"
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        emit(json.dumps(base, indent=2) + "\n", out, "baseline")
    print(f"wrote {len(base['entries'])} baseline entries to {out}", file=sys.stderr)
    return EXIT_USAGE if doc["errors"] else (EXIT_CRASH if code == EXIT_CRASH else EXIT_OK)


def cmd_fuzz(args: argparse.Namespace) -> int:
    try:
        from keracheck import fuzz
    except ModuleNotFoundError:
        raise UsageError("the fuzzer is not installed in this build") from None
    args.outputs = _output_specs(args.output_format or [], ("text", "json"), [])
    mode = _sandbox_mode(args, config_mod.load()[0], warm=False)  # fuzz: a worker per target
    if mode == "on" and getattr(args, "in_process", False):
        _err("WARNING: --in-process: targets run in keracheck's own process, outside the sandbox")
    if getattr(args, "checkpoint", None) and not args.scheduler:
        raise UsageError("--checkpoint keeps a sharded campaign: it needs --scheduler")
    try:
        code: int = _fuzz_on(args) if args.scheduler else fuzz.main(args)
    except outputs_mod.OutputError as e:
        raise UsageError(str(e)) from None
    return code


def _fuzz_on(args: argparse.Namespace) -> int:
    """``keracheck fuzz --scheduler``: the campaign sharded over Dask workers."""
    from keracheck.distributed import fuzz as dfuzz

    if args.shard_examples is not None and args.shard_examples < 1:
        raise UsageError("--shard-examples must be at least 1")
    with _scheduler(args) as cluster:
        try:
            return dfuzz.main(args, cluster)
        except dfuzz.CheckpointError as e:
            raise UsageError(str(e)) from None


def _run_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--targets", help="comma-separated target ids (default: every available target)")
    p.add_argument("--require", help="comma-separated targets that must be available (else exit 4)")
    p.add_argument("--inputs", type=int, help="generated input vectors per case (default 64)")
    p.add_argument("--seed", type=int, help="seed of the input generator (default 0)")
    p.add_argument(
        "--input-profile",
        choices=("special", "finite", "normal", "mixed"),
        help="generated values: special (default: biased to edge cases), finite (no NaN/inf), "
        "normal (realistic magnitudes only), mixed",
    )
    p.add_argument(
        "--repeat", type=int, help="run each target K times; differences are 'nondeterministic'"
    )
    p.add_argument("--jobs", type=int, help="targets run in parallel (default: CPU count)")
    p.add_argument(
        "--timeout", type=float, help="seconds per case and target before it is an error"
    )
    p.add_argument(
        "--backend-plugin", action="append", metavar="SPEC", help="module:attr or file.py:Class"
    )
    p.add_argument("--baseline", help="accepted divergences (JSON from 'keracheck baseline write')")
    p.add_argument(
        "--opt-levels",
        metavar="LEVELS",
        help="run every target at each optimisation level, e.g. 0,2 (default: targets at 0, and "
        "ref checks -O0 against -O2); a difference between levels is an 'opt-level' divergence",
    )
    p.add_argument(
        "--pass-plugin",
        action="append",
        metavar="SPEC",
        help="an optimisation pass (module:attr or file.py:attr) run after the built-in ones",
    )
    p.add_argument(
        "--lf",
        "--last-failed",
        dest="last_failed",
        action="store_true",
        help="run only the cases that diverged or errored last time (all when none did)",
    )
    p.add_argument(
        "-k",
        dest="keyword",
        metavar="EXPR",
        help="run the cases whose node id (path::function) matches EXPR: words with and/or/not",
    )
    p.add_argument("--no-cache", action="store_true", help="do not reuse cached target results")
    p.add_argument(
        "--no-localise",
        action="store_true",
        help="do not name each new divergence's first diverging node (that runs the function "
        "truncated at its nodes on the diverging target and ref: one batch each)",
    )
    p.add_argument(
        "-q", "--quiet", action="store_true", help="no progress lines on stderr (errors only)"
    )
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="also print the traceback of every target error on stderr",
    )
    p.add_argument("--sandbox", **SANDBOX_FLAG)
    _limit_flag(p)


#: ``--scheduler`` of run and fuzz (docs/distributed.md)
SCHEDULER_FLAG: dict[str, Any] = {
    "metavar": "local:N|tcp://HOST:PORT",
    "help": "run on a Dask cluster: local:N starts one of N worker processes here, "
    "tcp://HOST:PORT connects to a running 'dask scheduler' (default: this machine's "
    "process pool, no Dask)",
}


#: ``--sandbox`` of run, repro, baseline write and fuzz (docs/security.md)
SANDBOX_FLAG: dict[str, Any] = {
    "choices": ("on", "off"),
    "help": "on (default): targets and plugins run in a sandbox (namespaces without network, "
    "read-only system, no home directory or signing key, seccomp, rlimits); off: with your "
    "full rights (loud, and recorded in the run)",
}


def _output_format_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--output-format",
        action="append",
        metavar="FMT=PATH",
        help="also write the result as FMT to PATH, atomically (repeatable: several reports "
        "from one run); checked before anything runs",
    )


def _limit_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--limit",
        action="append",
        metavar="NAME=VALUE",
        help="raise or lower a budget of kera.limits (e.g. input_bytes=4294967296)",
    )


#: ``keracheck fuzz`` flags (besides ``--limit``): flag -> argparse keywords, help for each
FUZZ_FLAGS: dict[str, dict[str, Any]] = {
    "--targets": {
        "metavar": "IDS",
        "help": "comma list of target ids checked against ref (always added: it is the oracle); "
        "default: every built-in and installed target but ISA variants (see 'keracheck targets')",
    },
    "--backend-plugin": {
        "action": "append",
        "metavar": "SPEC",
        "help": "a target under development, module:attr or path/to/file.py:Class, checked "
        "against ref with --targets (repeatable); see docs/plugins.md",
    },
    "--max-examples": {
        "type": int,
        "metavar": "N",
        "help": "stop after N examples (batches of 24 graphs); without it and --budget, 100",
    },
    "--budget": {
        "type": float,
        "metavar": "SECONDS",
        "help": "stop after this many seconds of wall-clock time, shrinking and reducing "
        "included (the split is reported); a shrink never runs past it",
    },
    "--until-first": {
        "action": "store_true",
        "help": "stop once the first divergence signature is shrunk and saved (--max-findings 1)",
    },
    "--max-findings": {
        "type": int,
        "metavar": "N",
        "help": "stop once N divergence signatures are shrunk and saved",
    },
    "--seed": {
        "type": int,
        "default": 0,
        "metavar": "N",
        "help": "campaign seed (default 0): the same seed, targets and flags draw the same "
        "graphs and inputs",
    },
    "--out": {
        "default": "corpora/regressions",
        "metavar": "DIR",
        "help": "folder for reproducers, <fingerprint>.kera and <fingerprint>.inputs.npz per "
        "signature (default corpora/regressions); 'keracheck run' replays them",
    },
    "--format": {
        "choices": ("text", "json"),
        "default": "text",
        "help": "the result on stdout: a summary, or the JSON document with every signature "
        "and the time split (default text); progress goes to stderr",
    },
    "--output-format": {
        "action": "append",
        "metavar": "FMT=PATH",
        "help": "also write the result as FMT (text or json) to PATH, atomically (repeatable); "
        "checked before the campaign starts",
    },
    "--policy": {
        "help": "generation policies: comma list, 'all' (every one, large-tensors too) or "
        "'none'; default: all but large-tensors",
    },
    "--shrink-seconds": {
        "type": float,
        "metavar": "SECONDS",
        "help": "cap on one Hypothesis shrink (default 60; never past --budget)",
    },
    "--in-process": {
        "action": "store_true",
        "help": "run every target's cases in keracheck's own process, not in a worker process "
        "per target: to debug a plugin's run() (breakpoints, profilers), or for one that cannot "
        "be forked; a crash or hang of a target then stops keracheck",
    },
    "--opt-levels": {
        "metavar": "LEVELS",
        "help": "also run every target at these optimisation levels (e.g. 0,2): T@O2 must give "
        "the bits of ref, so an unsafe pass is found and shrunk like a back-end bug",
    },
    "--pass-plugin": {
        "action": "append",
        "metavar": "SPEC",
        "help": "an optimisation pass (module:attr or file.py:attr) to fuzz with --opt-levels",
    },
    "--sandbox": {
        "choices": ("on", "off"),
        "help": "on (default): targets and plugins run sandboxed (docs/security.md); off: with "
        "your full rights, loudly (--in-process runs targets in keracheck's own process: off)",
    },
    "--scheduler": {
        "metavar": "local:N|tcp://HOST:PORT",
        "help": "shard the campaign by seed ranges over a Dask cluster (docs/distributed.md): "
        "local:N starts one of N worker processes here, tcp://HOST:PORT connects to one",
    },
    "--checkpoint": {
        "metavar": "DIR",
        "help": "with --scheduler: keep the campaign's progress in DIR; the same command run "
        "again continues its seed sequence and keeps every finding",
    },
    "--shard-examples": {
        "type": int,
        "metavar": "N",
        "help": "with --scheduler: examples per shard (default 10)",
    },
}


def _fuzz_flags(f: argparse.ArgumentParser) -> None:
    for flag, kw in FUZZ_FLAGS.items():
        f.add_argument(flag, **kw)
    _limit_flag(f)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="keracheck", description="Bit-exact cross-target checking of Kera graphs."
    )
    from kera.version import version_action

    p.add_argument("--version", action=version_action("keracheck"))
    sub = p.add_subparsers(dest="command", required=True)
    commands: list[tuple[str, str, Callable[[argparse.Namespace], int]]] = [
        ("run", "run cases on every target and compare bit for bit", cmd_run),
        ("targets", "list targets and whether they are available", cmd_targets),
        ("doctor", "every target's state, tool versions, fix, and a smoke run", cmd_doctor),
        ("show", "render a saved run or signed report in any format, running nothing", cmd_show),
        ("keygen", "create an Ed25519 key pair for signed reports", cmd_keygen),
        ("verify", "verify a signed report (.intoto.jsonl)", cmd_verify),
        ("repro", "re-run one case and show its divergence", cmd_repro),
        ("baseline", "write a baseline of the current divergences", cmd_baseline),
        ("fuzz", "generate graphs and hunt for divergences", cmd_fuzz),
        ("audit", "the audit log of a signed report: capabilities, events, chain", cmd_audit),
    ]
    sp: dict[str, argparse.ArgumentParser] = {}
    for name, help_text, fn in commands:
        sp[name] = sub.add_parser(name, help=help_text)
        sp[name].set_defaults(func=fn)
    r = sp["run"]
    r.add_argument("paths", nargs="+", help=".kera/.keg files or directories")
    _run_flags(r)
    r.add_argument("--scheduler", **SCHEDULER_FLAG)
    r.add_argument("--format", choices=FORMATS)
    r.add_argument("--output", help="write the formatted result here instead of stdout")
    _output_format_flag(r)
    r.add_argument("--dump-outputs", metavar="DIR", help="save inputs and outputs as .npy files")
    r.add_argument("--report", metavar="FILE", help="write a signed in-toto report (.intoto.jsonl)")
    r.add_argument(
        "--key",
        help="private key for --report: a file or env://VAR (unlocked by $KERACHECK_KEY_PASSWORD)",
    )
    r.add_argument(
        "--no-resume",
        action="store_true",
        help="discard the journal of an interrupted run with these arguments and start over "
        "(default: take every result it holds)",
    )
    sh = sp["show"]
    sh.add_argument(
        "file",
        help="a run saved with 'keracheck run ... --format json --output FILE', or a signed "
        "report (.intoto.jsonl)",
    )
    sh.add_argument("--format", choices=FORMATS, default="text")
    sh.add_argument("--output", help="write here instead of stdout")
    _output_format_flag(sh)
    sh.add_argument(
        "--key", help="public key: verify a signed report's signatures before rendering it"
    )
    for name in ("targets", "doctor"):
        sp[name].add_argument("--format", choices=("text", "json"), default="text")
        sp[name].add_argument("--backend-plugin", action="append", metavar="SPEC")
    k = sp["keygen"]
    k.add_argument("--out", required=True, help="directory for keracheck.key and keracheck.pub")
    k.add_argument("--password-env", metavar="VAR", help="encrypt the key with the password in VAR")
    k.add_argument("--force", action="store_true", help="overwrite existing keys")
    v = sp["verify"]
    v.add_argument("file")
    v.add_argument("--key", required=True, help="public key (keracheck.pub)")
    v.add_argument(
        "--rerun", action="store_true", help="re-execute cases and compare output digests"
    )
    v.add_argument("--backend-plugin", action="append", metavar="SPEC", help="targets for --rerun")
    v.add_argument(
        "--format",
        choices=("text", "html"),
        default="text",
        help="html: a page whose banner says what was verified (key id, envelopes, failures), "
        "then the run the report records; the text verdict then goes to stderr",
    )
    v.add_argument("--output", help="write the page here instead of stdout")
    rp = sp["repro"]
    rp.add_argument("case", help="fingerprint (or prefix) or a .kera/.keg file")
    rp.add_argument("paths", nargs="*", help="where to look for the fingerprint (default corpora/)")
    _run_flags(rp)
    rp.add_argument("--format", choices=FORMATS)
    b = sp["baseline"]
    b_sub = b.add_subparsers(dest="action", required=True)
    bw = b_sub.add_parser("write", help="run and record every divergence as accepted")
    bw.add_argument("paths", nargs="+")
    bw.add_argument("--output", help="baseline file (default .keracheck/baseline.json)")
    bw.add_argument("--reason", required=True, help="why these divergences are accepted")
    _run_flags(bw)
    _fuzz_flags(sp["fuzz"])
    au = sp["audit"].add_subparsers(dest="action", required=True)
    ash = au.add_parser("show", help="render a signed report's audit log and check its chain")
    ash.add_argument("file", help="a signed report (.intoto.jsonl)")
    ash.add_argument("--key", help="public key: verify the report's signatures first")
    ash.add_argument("--format", choices=("text", "json"), default="text")
    ash.add_argument("--output", help="write here instead of stdout")
    return p


def _on_signal(signum: int, frame: object) -> None:
    """SIGTERM (a CI timeout, ``kill``): kill every worker group — compilers, simulators,
    emulators included — and exit at once with 128 + the signal number."""
    from keracheck import worker

    worker.kill_all()
    print(f"keracheck: stopped by signal {signum}", file=sys.stderr, flush=True)
    os._exit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    import signal

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_signal)
    try:
        args = parser().parse_args(argv)
    except SystemExit as e:  # argparse already printed the usage error
        return EXIT_USAGE if e.code not in (0, None) else EXIT_OK
    try:
        from kera import limits

        try:
            limits.check_env()
            limits.configure(getattr(args, "limit", None) or [])
        except limits.LimitError as e:
            raise UsageError(str(e)) from None
        code: int = args.func(args)
        return code
    except (
        UsageError,
        config_mod.ConfigError,
        security.CapabilityDenied,
        security.PolicyError,
    ) as e:
        _err(str(e))
        return EXIT_USAGE
    except KeyboardInterrupt:
        from keracheck import worker

        worker.kill_all()  # Ctrl-C: nothing keracheck started may keep running
        return 130
    except Exception as e:
        import traceback

        _err(f"internal error: {type(e).__name__}: {e}")
        if os.environ.get("KERACHECK_DEBUG"):
            traceback.print_exc()
        return EXIT_CRASH
    finally:
        from keracheck.targets import close_hosts

        close_hosts()
        from keracheck import sandbox

        sandbox.configure("on")  # the default again for the next command in this process


if __name__ == "__main__":
    sys.exit(main())
