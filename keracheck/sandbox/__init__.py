"""Every process that runs generated or third-party code runs contained (``docs/security.md``).

keracheck's own process compiles cases, compares outputs and signs reports; it never runs a
target.  Targets run in *workers*: with the sandbox on (the default) each worker is a process
inside a bubblewrap sandbox (:mod:`.bwrap`: user, pid, network, ipc and uts namespaces, a
read-only view of the system, a private writable scratch directory, no home directory, no
signing key), under a seccomp filter (:mod:`.seccomp`) and resource limits per worker kind
(:mod:`.policy`); the compilers, emulators, simulators and engines a worker starts inherit all
of it.  :mod:`.launch` starts and pools the sandboxes, :mod:`.entry` is what runs inside, and
:mod:`.explain` names what a worker ran into ("sandbox: network access denied").

Module state is the process's sandbox *mode*: ``on`` (the default; :func:`require` raises
:class:`Unavailable` with the install command when this machine cannot sandbox) or ``off``
(``--sandbox=off``: workers are plain forked processes, as before, and the run records it).
:func:`configure` sets it, with the secrets to hide (the ``--key`` file, an ``env://`` key's
variable).  Every sandbox set-up and every violation is kept as a :class:`Record` /
:class:`Violation` for the run document and for whoever subscribes (:func:`subscribe`: the
audit log).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

MODES = ("on", "off")

#: set inside a sandbox (by the launcher): code can tell it runs contained
INSIDE_ENV = "KERACHECK_SANDBOXED"

OFF_WARNING = (
    "WARNING: --sandbox=off: targets and plugins run with your full rights (files, network, "
    "the signing key); use it only for code you trust. The run records it."
)


class Unavailable(Exception):
    """The sandbox is on but this machine cannot make one (the message says how to fix it)."""


@dataclass
class Record:
    """One sandbox set up: what contains it.  ``kind``: builtin | plugin; ``role``: server
    (batches), host (a plugin's calls) or warm (the fuzzer's worker)."""

    kind: str
    role: str
    spec: str | None
    mechanisms: list[str]
    limits: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Violation:
    """A worker ran into the sandbox: ``kind`` names what (network, hidden-path, read-only,
    address-space, file-size, cpu-time, process-count, seccomp, time-limit)."""

    spec: str
    case: str | None
    kind: str
    message: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Failure:
    """Why a sandboxed batch has no results: the message for each of its cases, and the
    violation (a kind of :class:`Violation`) when the sandbox stopped it."""

    message: str
    violation: str | None = None


@dataclass
class _State:
    mode: str = "on"
    secret_files: tuple[str, ...] = ()
    secret_env: tuple[str, ...] = ()
    records: list[Record] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    listeners: list[Callable[[str, Any], None]] = field(default_factory=list)


_STATE = _State()
_LOCK = threading.Lock()


def configure(mode: str, secret_files: Sequence[str] = (), secret_env: Sequence[str] = ()) -> None:
    """Set the mode and the secrets to hide from workers (paths are made absolute)."""
    if mode not in MODES:
        raise ValueError(f"sandbox mode must be one of {', '.join(MODES)}, got {mode!r}")
    _STATE.mode = mode
    _STATE.secret_files = tuple(os.path.realpath(p) for p in secret_files)
    _STATE.secret_env = tuple(secret_env)


def mode() -> str:
    return _STATE.mode


def enabled() -> bool:
    return _STATE.mode == "on"


def secrets() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(secret files, secret environment variable names) to hide from workers."""
    return _STATE.secret_files, _STATE.secret_env


def inside() -> bool:
    """True in a process that runs inside a keracheck sandbox."""
    return os.environ.get(INSIDE_ENV) == "1"


def problem() -> str | None:
    """None when this machine can sandbox workers, else why not and the fix."""
    from keracheck.sandbox import bwrap, seccomp

    reason = bwrap.problem()
    if reason is not None:
        return reason
    if seccomp.machine() not in seccomp.ARCHES:
        return f"no seccomp policy for {seccomp.machine()} (x86_64 and aarch64 have one)"
    return None


def require() -> None:
    """Raise :class:`Unavailable` when the sandbox is on and cannot be made here."""
    if not enabled():
        return
    reason = problem()
    if reason is not None:
        raise Unavailable(
            f"cannot sandbox the workers: {reason}; or run with --sandbox=off "
            "(unsafe: targets and plugins then run with your full rights)"
        )


def mechanisms() -> list[str]:
    """What the sandbox applies here (the run document's ``sandbox.mechanisms``)."""
    if not enabled():
        return []
    from keracheck.sandbox import launch

    return launch.mechanisms()


# ------------------------------------------------------------------------------ records


def subscribe(listener: Callable[[str, Any], None]) -> None:
    """Call ``listener("setup", Record)`` for each sandbox started and
    ``listener("violation", Violation)`` for each violation, from now on."""
    with _LOCK:
        _STATE.listeners.append(listener)


def _emit(kind: str, item: Any) -> None:
    with _LOCK:
        (_STATE.records if kind == "setup" else _STATE.violations).append(item)
        listeners = list(_STATE.listeners)
    for listener in listeners:
        listener(kind, item)


def record_setup(record: Record) -> None:
    _emit("setup", record)


def record_violation(violation: Violation) -> None:
    _emit("violation", violation)


def mark() -> tuple[int, int]:
    """Where the records stand now; :func:`summary` reports what came after."""
    with _LOCK:
        return len(_STATE.records), len(_STATE.violations)


def summary(since: tuple[int, int] = (0, 0), ids: dict[str, str] | None = None) -> dict[str, Any]:
    """The run document's ``sandbox`` object: mode, mechanisms, and the violations since
    ``since`` (``ids``: target spec -> id, to name targets as the report does)."""
    with _LOCK:
        violations = list(_STATE.violations[since[1] :])
    out: dict[str, Any] = {"mode": mode(), "mechanisms": mechanisms()}
    if violations:
        names = ids or {}
        out["violations"] = [
            {
                "target": names.get(v.spec, v.spec),
                "case": v.case,
                "kind": v.kind,
                "message": v.message,
            }
            for v in violations
        ]
    return out


__all__ = [
    "INSIDE_ENV",
    "MODES",
    "OFF_WARNING",
    "Failure",
    "Record",
    "Unavailable",
    "Violation",
    "configure",
    "enabled",
    "inside",
    "mark",
    "mechanisms",
    "mode",
    "problem",
    "record_setup",
    "record_violation",
    "require",
    "secrets",
    "subscribe",
    "summary",
]
