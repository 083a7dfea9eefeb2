"""pytest plugin (entry point ``pytest11``): gate determinism inside a user's own test suite.

* fixture ``assert_deterministic(source_or_graph, targets=None, inputs=None, n=64, seed=0, *,
  backend_plugins=(), pass_plugins=(), input_profile="special")``: compiles Kera source text,
  a ``.kera``/``.keg`` path, a ``kera.ir.Graph`` or a ``kera.ir.Function``, runs every exported
  function on the targets (default: every available target) and fails the test with the
  verdict, its exit code as ``keracheck run`` gives it, and the report when any two targets
  disagree bit for bit, a target fails, or the input is wrong (exit 2: a bad path, a syntax
  error, inputs of the wrong name, dtype or shape, a bad plugin spec).
* ini options ``keracheck_backend_plugins`` and ``keracheck_pass_plugins`` (one spec a line,
  ``module:attr`` or ``file.py:attr``, a relative file taken from the ini file's folder): the
  ``--backend-plugin``/``--pass-plugin`` of every check in the session, before the fixture's own.
* option ``--keracheck-report=PATH``: every case checked through the fixture, and every input
  error, is written to PATH as a keracheck JSON run at the end of the session, each with the
  ``nodeId`` of the test that checked it.

Every case runs from a file, so that its printed repro command runs as printed: source text,
a graph, or a path given with explicit ``inputs`` is written to ``.keracheck/pytest/`` under
the rootdir, named by the digest of its bytes and inputs, the inputs beside it as the companion
``<name>.inputs.npz`` that ``keracheck repro`` reads.

Imports of the harness are lazy so that merely having keracheck installed costs pytest nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

#: what each exit code of ``keracheck run`` means, as the failure's first line says it
VERDICTS = {
    1: "a new divergence",
    2: "a usage or input error",
    3: "a target crashed or failed",
    4: "a required target is unavailable",
    5: "nothing to run",
}
#: where the source of each case is written (under the rootdir), so its repro command runs
WORKDIR = Path(".keracheck") / "pytest"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("keracheck")
    group.addoption(
        "--keracheck-report",
        default=None,
        metavar="PATH",
        help="write the cases checked by assert_deterministic to PATH (keracheck JSON report)",
    )
    parser.addini(
        "keracheck_backend_plugins",
        "back-end plugins (module:attr or file.py:attr, one a line) of every "
        "assert_deterministic check, as keracheck run --backend-plugin",
        type="linelist",
        default=[],
    )
    parser.addini(
        "keracheck_pass_plugins",
        "optimisation-pass plugins (one a line) of every assert_deterministic check, as "
        "keracheck run --pass-plugin",
        type="linelist",
        default=[],
    )


@dataclass
class _Session:
    """What the session's checks share: the records for the report and loaded plugin ids."""

    workdir: Path
    cases: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, str]] = field(default_factory=list)
    plugin_ids: dict[str, str] = field(default_factory=dict)  # spec -> target id


_SESSION_KEY = pytest.StashKey[_Session]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_SESSION_KEY] = _Session(config.rootpath / WORKDIR)


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(_SESSION_KEY, None)
    if session is None:
        return
    if session.plugin_ids:
        from keracheck.targets import close_hosts

        close_hosts()
    path = config.getoption("--keracheck-report", default=None)
    if path:
        from kera.files import write_atomic

        write_atomic(path, json.dumps(_report(session, config), indent=2))


def _report(session: _Session, config: pytest.Config) -> dict[str, Any]:
    """The session's cases and input errors as one keracheck run document."""
    from keracheck.document import document, exit_code, utc_now
    from keracheck.options import Options

    opts = Options(command=shlex.join(["pytest", *config.invocation_params.args]))
    doc = document(session.cases, [], opts, utc_now(), session.errors, [])
    doc["run"]["targets"] = sorted({t for c in session.cases for t in c["targets"]})
    doc["summary"]["exitCode"] = exit_code(doc)
    return doc


@pytest.fixture
def assert_deterministic(
    request: pytest.FixtureRequest,
) -> Iterator[Callable[..., list[dict[str, Any]]]]:
    config = request.config
    session = config.stash[_SESSION_KEY]
    ini_dir = config.inipath.parent if config.inipath else config.rootpath
    ini_backends = [_anchored(s, ini_dir) for s in config.getini("keracheck_backend_plugins")]
    ini_passes = [_anchored(s, ini_dir) for s in config.getini("keracheck_pass_plugins")]
    node_id = request.node.nodeid

    def check(
        source_or_graph: Any,
        targets: list[str] | None = None,
        inputs: Mapping[str, Any] | None = None,
        n: int = 64,
        seed: int = 0,
        *,
        backend_plugins: Sequence[str] = (),
        pass_plugins: Sequence[str] = (),
        input_profile: str = "special",
    ) -> list[dict[str, Any]]:
        """Check every export of ``source_or_graph``; fail the test unless all agree."""
        settings = _Settings(
            targets, n, seed, [*ini_backends, *backend_plugins], [*ini_passes, *pass_plugins],
            input_profile,
        )  # fmt: skip
        doc, code = _check(session, node_id, source_or_graph, inputs, settings)
        session.cases.extend(doc["cases"])
        session.errors.extend(doc["errors"])
        if code:
            pytest.fail(_failure(doc, code), pytrace=False)
        return list(doc["cases"])

    yield check


@dataclass
class _Settings:
    """The fixture's arguments that become the run's options."""

    targets: list[str] | None
    n: int
    seed: int
    backend_plugins: list[str]
    pass_plugins: list[str]
    input_profile: str


def _anchored(spec: str, base: Path) -> str:
    """A ``file.py:attr`` spec of an ini file, its relative file taken from the ini's folder
    (pytest can be started anywhere under the rootdir); other specs unchanged."""
    mod, sep, attr = spec.rpartition(":")
    if not sep or not mod.endswith(".py") or os.path.isabs(mod):
        return spec
    return f"{base / mod}:{attr}"


def _check(
    session: _Session,
    node_id: str,
    source_or_graph: Any,
    inputs: Mapping[str, Any] | None,
    settings: _Settings,
) -> tuple[dict[str, Any], int]:
    """(the run document, its exit code): a usage error stops before anything runs."""
    from keracheck.document import EXIT_USAGE
    from keracheck.harness import run_cases

    try:
        opts = _options(session, node_id, settings)
        collected = _collect(session, source_or_graph, inputs, opts)
    except _UsageError as e:
        return _errors_only(node_id, [{"path": "", "message": str(e)}]), EXIT_USAGE
    doc, code = run_cases(collected, opts)
    for case in doc["cases"]:
        case["nodeId"] = node_id
    for error in doc["errors"]:
        error["nodeId"] = node_id
    return doc, code


class _UsageError(Exception):
    """A bad argument of the fixture (a plugin spec, a profile): exit 2, nothing runs."""


def _options(session: _Session, node_id: str, s: _Settings) -> Any:
    from keracheck.inputs import PROFILES
    from keracheck.opt_levels import LevelError, load_pass_plugins
    from keracheck.options import Options

    if s.input_profile not in PROFILES:
        raise _UsageError(
            f"input_profile must be one of {', '.join(PROFILES)}, got {s.input_profile!r}"
        )
    try:
        load_pass_plugins(s.pass_plugins)
    except LevelError as e:
        raise _UsageError(str(e)) from None
    plugins = {_plugin_id(session, spec): spec for spec in s.backend_plugins}
    return Options(
        targets=s.targets,
        plugins=plugins,
        n=s.n,
        seed=s.seed,
        jobs=2,
        input_profile=s.input_profile,
        pass_plugins=s.pass_plugins,
        command=f"pytest {node_id}",
    )


def _plugin_id(session: _Session, spec: str) -> str:
    """The target id of a back-end plugin, loaded (in its contained host) once a session."""
    from keracheck.targets import TargetError, load_plugin

    if spec not in session.plugin_ids:
        try:
            session.plugin_ids[spec] = load_plugin(spec)[0]
        except TargetError as e:
            raise _UsageError(str(e)) from None
    return session.plugin_ids[spec]


def _errors_only(node_id: str, errors: list[dict[str, str]]) -> dict[str, Any]:
    from keracheck.document import EXIT_USAGE, document, utc_now
    from keracheck.options import Options

    doc = document([], [], Options(command=f"pytest {node_id}"), utc_now(), errors, [])
    for error in doc["errors"]:
        error["nodeId"] = node_id
    doc["summary"]["exitCode"] = EXIT_USAGE
    return doc


# ------------------------------------------------------------------------------ the case file


def _collect(session: _Session, obj: Any, inputs: Mapping[str, Any] | None, opts: Any) -> Any:
    """The cases of ``obj`` as ``keracheck run FILE`` collects them, from a file that its
    repro command can name: the user's own file, or one written under the workdir."""
    from keracheck.collect import Collected, collect

    given = _user_path(obj)
    if given is not None and not os.path.isfile(given):
        message = f"{given}: no such file (a path was given, not source)"
        return Collected([], [{"path": given, "message": message}])
    if given is not None and inputs is None:
        return collect([given], opts)
    arrays = _arrays(inputs)
    try:
        data, suffix = (Path(given).read_bytes(), Path(given).suffix) if given else _bytes_of(obj)
        path = _write_case(session.workdir, data, suffix, arrays)
        errors = _write_inputs(path, arrays) if arrays is not None else []
    except OSError as e:  # a read-only checkout, a full disk: an input error, not a traceback
        where = os.fspath(session.workdir)
        return Collected([], [{"path": where, "message": f"{where}: cannot write the case: {e}"}])
    return Collected([], errors) if errors else collect([path], opts)


def _user_path(obj: Any) -> str | None:
    """The path ``obj`` names, or None when it is source text or a graph: a path-like, or a
    one-line string ending in ``.kera``/``.keg``."""
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    if isinstance(obj, str) and "\n" not in obj and obj.endswith((".kera", ".keg")):
        return obj
    return None


def _bytes_of(obj: Any) -> tuple[bytes, str]:
    """(file bytes, suffix) of source text, a Graph or a Function."""
    from kera import keg
    from kera.ir import Function, Graph

    if isinstance(obj, Function):
        return keg.dumps(Graph([obj])), ".keg"
    if isinstance(obj, Graph):
        return keg.dumps(obj), ".keg"
    text = obj.decode() if isinstance(obj, bytes) else str(obj)
    return text.encode(), ".kera"


def _arrays(inputs: Mapping[str, Any] | None) -> dict[str, Any] | None:
    import numpy as np

    if inputs is None:
        return None
    return {str(k): np.asarray(v) for k, v in inputs.items()}


def _write_case(workdir: Path, data: bytes, suffix: str, arrays: Mapping[str, Any] | None) -> str:
    """Write the case's bytes under ``workdir`` as ``<digest><suffix>`` (the digest covers the
    inputs too, so two checks of one source with other inputs get two files); the path is
    relative to the current folder when it is under it, as a person would type it."""
    from kera.files import write_atomic

    h = hashlib.sha256(data)
    for key, a in sorted((arrays or {}).items()):
        h.update(f"\0{key}\0{a.dtype.str}\0{a.shape}\0".encode())
        h.update(a.tobytes())
    workdir.mkdir(parents=True, exist_ok=True)
    ignore = workdir / ".gitignore"
    if not ignore.exists():  # generated files: never committed by accident
        write_atomic(ignore, "*\n")
    path = workdir / f"{h.hexdigest()[:16]}{suffix}"
    write_atomic(path, data)
    rel = os.path.relpath(path)
    return path.as_posix() if rel.startswith("..") else Path(rel).as_posix()


def _write_inputs(path: str, arrays: Mapping[str, Any]) -> list[dict[str, str]]:
    """Check the given inputs against every export of ``path`` and write them as its companion
    npz; the input errors instead (exit 2) when any is wrong.  A key is ``param`` (every
    export that has it) or ``function.param``."""
    from keracheck.collect import companion_npz, compile_file
    from keracheck.inputs import save_npz

    try:
        graph = compile_file(path)
    except ValueError:
        return []  # collection reports the compile error itself
    per_fn, errors = _split_inputs(graph, arrays)
    if errors:
        return [
            {"path": path, "message": f"inputs given to assert_deterministic: {m}"} for m in errors
        ]
    save_npz(
        companion_npz(path), {f"{f}.{k}": a for f, got in per_fn.items() for k, a in got.items()}
    )
    return []


def _split_inputs(
    graph: Any, arrays: Mapping[str, Any]
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """(inputs per export, errors): every key must name a parameter, every parameter of every
    export must get an array of its dtype and shape (``(N, *shape)``), one N per export."""
    from kera.interp import InputError, batch_size

    fns = graph.functions
    used: set[str] = set()
    per_fn: dict[str, dict[str, Any]] = {}
    errors: list[str] = []
    for name, fn in fns.items():
        params = fn.param_names()
        # key -> parameter: plain keys first, so that 'function.param' wins over 'param'
        keys = {k: k for k in arrays if k in params}
        keys |= {k: k.removeprefix(name + ".") for k in arrays if k.startswith(name + ".")}
        mine = {p: arrays[k] for k, p in keys.items() if p in params}
        used |= {k for k, p in keys.items() if p in params}
        try:
            batch_size(fn, mine)
        except InputError as e:
            errors.append(f"'{name}': {e}")
        per_fn[name] = mine
    for key in sorted(set(arrays) - used):
        errors.append(f"'{key}' names no parameter of {', '.join(map(repr, fns)) or 'any export'}")
    return per_fn, errors


# ------------------------------------------------------------------------------ the failure


def _failure(doc: Mapping[str, Any], code: int) -> str:
    """The failure text: the verdict with its exit code, the input errors, then the report."""
    from keracheck.formats import render

    lines = [f"keracheck: {VERDICTS.get(code, 'failed')} (exit {code} in keracheck run)"]
    lines += ["  " + e["message"].replace("\n", "\n  ") for e in doc["errors"]]
    if doc["cases"]:
        lines.append(render("text", doc))
    return "\n".join(lines)
