"""The grants of a command, made at start-up: what its command line (or its Options) asks for,
within ``[tool.keracheck.policy]``.

Default: every path, output, key, target and plugin the command names is granted, as is
keracheck's own state (the cache folder, ``.keracheck/``), and nothing else.  A kind the
policy lists (``read``, ``write``, ``keys``, ``toolchains``, ``plugins``) is *restricted*: its
grants are exactly the policy's, and a command-line request it does not cover is refused
before anything runs (``CapabilityDenied``, exit 2).  ``audit-capacity`` sizes the audit log.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from keracheck.security.audit import DEFAULT_CAPACITY, AuditLog
from keracheck.security.capabilities import CapabilityDenied, Kind, PolicyBuilder
from keracheck.security.manager import SecurityManager

#: policy key -> the kind it grants (config.py checks the table's types)
POLICY_KINDS = {
    "read": Kind.READ,
    "write": Kind.WRITE,
    "keys": Kind.KEY,
    "toolchains": Kind.TOOLCHAIN,
    "plugins": Kind.PLUGIN,
}


def _csv(value: Any) -> list[str]:
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else value
    return [str(v).strip() for v in items if str(v).strip()]


def _given(*values: Any) -> list[str]:
    return [str(v) for v in values if v]


def corpus_paths(paths: Iterable[str]) -> list[str]:
    """The files and folders of PATH arguments (``file::function`` node ids too), each file
    with its companion ``.inputs.npz``."""
    from keracheck.collect import companion_npz
    from keracheck.select import split_node_id

    out: list[str] = []
    for arg in paths:
        path, _ = split_node_id(arg)
        out.append(path)
        if not os.path.isdir(path):
            out.append(companion_npz(path))
    return out


def _corpus(args: argparse.Namespace, conf: Mapping[str, Any]) -> list[str]:
    paths = list(getattr(args, "paths", None) or [])
    case = getattr(args, "case", None)
    if case is not None:  # repro: a file, or a fingerprint looked up under PATHS (corpora/)
        paths = paths or ["corpora"]
        paths += [case] if os.path.exists(case) else []
    return corpus_paths(paths)


def _format_paths(args: argparse.Namespace, conf: Mapping[str, Any]) -> list[str]:
    specs = getattr(args, "output_format", None)
    if specs is None and hasattr(args, "output_format"):
        specs = conf.get("output_formats")
    return [s.partition("=")[2] for s in specs or [] if "=" in s]


def target_ids(args: argparse.Namespace, conf: Mapping[str, Any]) -> list[str]:
    """The targets a command selects: --targets (or the config's, or every default one) and
    --require."""
    from keracheck.targets import default_ids, known_specs

    chosen = _csv(getattr(args, "targets", None)) or _csv(conf.get("targets"))
    chosen = chosen or default_ids(known_specs())
    return list(
        dict.fromkeys([*chosen, *_csv(getattr(args, "require", None) or conf.get("require"))])
    )


def _toolchains(args: argparse.Namespace, conf: Mapping[str, Any]) -> list[str]:
    from keracheck.targets import is_builtin, known_specs

    specs = known_specs()
    return [t for t in target_ids(args, conf) if t not in specs or is_builtin(specs[t])]


def _installed_plugins(args: argparse.Namespace, conf: Mapping[str, Any]) -> list[str]:
    """Installed (entry-point) targets selected by id: third-party code, so plugins."""
    from keracheck.targets import is_builtin, known_specs

    specs = known_specs()
    return [specs[t] for t in target_ids(args, conf) if t in specs and not is_builtin(specs[t])]


def _baseline_output(args: argparse.Namespace) -> list[str]:
    return _given(getattr(args, "output", None) or ".keracheck/baseline.json")


def _output(args: argparse.Namespace, conf: Mapping[str, Any]) -> list[str]:
    if getattr(args, "command", None) == "baseline":
        return _baseline_output(args)
    return _given(getattr(args, "output", None))


Request = Callable[[argparse.Namespace, Mapping[str, Any]], list[str]]

#: what a command line asks for: (kind, the flag that asks, how to read it)
REQUESTS: tuple[tuple[Kind, str, Request], ...] = (
    (Kind.READ, "PATH", _corpus),
    (
        Kind.READ,
        "--baseline",
        lambda a, c: _given(getattr(a, "baseline", None) or c.get("baseline")),
    ),
    (Kind.WRITE, "--output", _output),
    (Kind.WRITE, "--output-format", _format_paths),
    (Kind.WRITE, "--report", lambda a, c: _given(getattr(a, "report", None))),
    (Kind.WRITE, "--dump-outputs", lambda a, c: _given(getattr(a, "dump_outputs", None))),
    (Kind.KEY, "--key", lambda a, c: _given(getattr(a, "key", None))),
    (Kind.TOOLCHAIN, "--targets", _toolchains),
    (Kind.PLUGIN, "--targets", _installed_plugins),
    (
        Kind.PLUGIN,
        "--backend-plugin",
        lambda a, c: [*_csv(c.get("backend_plugins")), *(getattr(a, "backend_plugin", None) or [])],
    ),
    (
        Kind.PLUGIN,
        "--pass-plugin",
        lambda a, c: [*_csv(c.get("pass_plugins")), *(getattr(a, "pass_plugin", None) or [])],
    ),
)


def state_dirs() -> list[tuple[str, str]]:
    """keracheck's own state, always granted: (folder, what it holds)."""
    from keracheck.result_cache import default_cache_dir

    return [
        (str(Path(default_cache_dir()).parent), "cache (results, builds, probes, journals)"),
        (".keracheck", ".keracheck (last failed cases, timings, baselines)"),
    ]


def _builder(conf: Mapping[str, Any]) -> tuple[PolicyBuilder, str]:
    """A builder holding the declared policy's grants, its kinds restricted; and its origin."""
    builder = PolicyBuilder()
    table: Mapping[str, Any] = conf.get("policy") or {}
    origin = str(table.get("path") or "")
    for key, kind in POLICY_KINDS.items():
        if key in table:
            builder.grant(kind, table[key], f"policy: {origin}")
            builder.restrict(kind, origin)
    for folder, what in state_dirs():
        builder.read(folder, source=f"state: {what}")
        builder.write(folder, source=f"state: {what}")
    return builder, origin


def _manager(builder: PolicyBuilder, conf: Mapping[str, Any], origin: str) -> SecurityManager:
    """The manager of the built policy; the refused requests are recorded, then raised."""
    capacity = int((conf.get("policy") or {}).get("audit_capacity", DEFAULT_CAPACITY))
    manager = SecurityManager(builder.build(), AuditLog(capacity), origin or "command line")
    if builder.refused:
        messages = []
        for kind, scope, flag in builder.refused:
            message = f"{flag}: {manager.policy.denial(kind, scope)}"
            manager.note("deny", {"kind": kind.value, "scope": scope, "message": message})
            messages.append(message)
        kind, scope, _ = builder.refused[0]
        raise CapabilityDenied(kind, scope, "\n".join(messages))
    return manager


def for_command(args: argparse.Namespace, conf: Mapping[str, Any]) -> SecurityManager:
    """The manager of a CLI command: its command line's requests within the policy."""
    builder, origin = _builder(conf)
    for kind, flag, read in REQUESTS:
        builder.request(kind, read(args, conf), f"command line: {flag}")
    return _manager(builder, conf, origin)


def for_options(opts: Any, paths: Sequence[str] = ()) -> SecurityManager:
    """The manager of a library run (``harness.run``/``run_cases`` with none installed):
    what its Options and paths ask for, with keracheck's state; no policy table."""
    builder, origin = _builder({})
    source = "options"
    builder.request(Kind.READ, corpus_paths(paths), source)
    args = argparse.Namespace(targets=opts.targets, require=opts.require)
    builder.request(Kind.TOOLCHAIN, _toolchains(args, {}), source)
    builder.request(Kind.PLUGIN, [*_installed_plugins(args, {}), *opts.plugins.values()], source)
    builder.request(Kind.PLUGIN, opts.pass_plugins, source)
    builder.request(Kind.WRITE, _given(opts.dump_outputs), source)
    for extra in (opts.cache_dir, getattr(opts, "journal_dir", None)):
        builder.request(Kind.WRITE, _given(extra), source)
        builder.request(Kind.READ, _given(extra), source)
    return _manager(builder, {}, origin or "options")
