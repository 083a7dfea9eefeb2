"""The SecurityManager: the default-deny gate at every privileged action of keracheck itself.

keracheck's own process reads corpora, writes reports, reads the signing key, runs target
toolchains and loads plugins; each call site asks :func:`check` first (``collect`` for reads,
``outputs``/``cli``/``harness``/``signing`` for writes, ``signing.keys`` for the key,
``harness`` where targets are selected and run, ``cli``/``harness`` where plugins load).  The
answer comes from the installed manager's :class:`~keracheck.security.capabilities.Policy`;
a denial is recorded in the audit log and raised as ``CapabilityDenied``.

A manager is *installed* for the length of a command (``keracheck run``, ``repro``,
``baseline write``) or of a library run (:func:`keracheck.harness.run` installs one built from
its Options when none is): the stack below is process-wide, since targets run in threads.
Outside any installed manager the checks pass (plain library calls: the caller's own code with
the caller's rights).  Code that keracheck executes elsewhere -- generated binaries,
simulators, plugins -- runs in worker processes under the sandbox, not under this gate.

The network is never granted, and that is enforced, not only asked: while a manager is
installed, a Python audit hook (PEP 578) refuses ``socket.connect``/``bind``/``sendto`` on
any address family but ``AF_UNIX`` (local IPC: the forkserver, worker pipes) and every name
lookup, in any thread of keracheck's process.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from keracheck.security.audit import AuditLog
from keracheck.security.capabilities import CapabilityDenied, Grant, Kind, Policy, normalise


class SecurityManager:
    """Checks capabilities against ``policy`` and records grants, first uses and denials in
    ``audit``.  Thread-safe (the audit log is; the set of used grants has its own lock)."""

    def __init__(self, policy: Policy, audit: AuditLog | None = None, origin: str = "api") -> None:
        self.policy = policy
        self.audit = audit or AuditLog()
        self._used: set[Grant] = set()
        self._lock = threading.Lock()
        self.audit.record("start", {"argv": list(sys.argv), "policy": origin})
        for g in policy.grants:
            self.audit.record("grant", g.record())

    def check(self, kind: Kind, scope: str) -> Grant:
        """The grant covering (kind, scope); else the denial is recorded and raised."""
        norm = normalise(kind, scope)
        grant = self.policy.covering(kind, norm)
        if grant is None:
            message = self.policy.denial(kind, norm)
            self.audit.record("deny", {"kind": kind.value, "scope": norm, "message": message})
            raise CapabilityDenied(kind, norm, message)
        with self._lock:
            first = grant not in self._used
            self._used.add(grant)
        if first:
            self.audit.record("use", {"kind": kind.value, "scope": norm, "grant": grant.scope})
        return grant

    def note(self, kind: str, data: Mapping[str, Any]) -> None:
        self.audit.record(kind, data)

    def grants(self) -> list[dict[str, str]]:
        return [g.record() for g in self.policy.grants]

    def snapshot(self) -> dict[str, Any]:
        """The audit log as it goes into a signed report (with the grants beside it)."""
        return self.audit.snapshot(self.grants())


_STACK: list[SecurityManager] = []
_STACK_LOCK = threading.Lock()


def current() -> SecurityManager | None:
    """The installed manager (the innermost), or None outside any."""
    return _STACK[-1] if _STACK else None


@contextlib.contextmanager
def installed(manager: SecurityManager) -> Iterator[SecurityManager]:
    """Install ``manager`` for the block (nested installs stack; the innermost answers)."""
    _ensure_hook()
    with _STACK_LOCK:
        _STACK.append(manager)
    try:
        yield manager
    finally:
        with _STACK_LOCK:
            _STACK.remove(manager)


def check(kind: Kind, scope: str) -> None:
    """Ask the installed manager; passes when none is installed."""
    manager = current()
    if manager is not None:
        manager.check(kind, scope)


def note(kind: str, data: Mapping[str, Any]) -> None:
    """Record an audit entry in the installed manager's log (nothing when none is)."""
    manager = current()
    if manager is not None:
        manager.note(kind, data)


# ------------------------------------------------------------------------------ the network

#: audit events that reach the network when their address family is not AF_UNIX
_SOCKET_EVENTS = frozenset({"socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg"})
#: audit events that are name lookups (DNS): always the network
_LOOKUP_EVENTS = frozenset(
    {"socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr", "socket.getnameinfo"}
)
_HOOKED = False
_IN_HOOK = threading.local()


def _network_target(event: str, args: tuple[Any, ...]) -> str | None:
    """What a socket audit event would reach over the network, or None (local IPC, or not a
    network event at all)."""
    if event in _LOOKUP_EVENTS:
        return f"name lookup {args[0]!r}"
    if event not in _SOCKET_EVENTS:
        return None
    sock = args[0]
    family = getattr(sock, "family", None)
    if family == socket.AF_UNIX:
        return None
    return f"{getattr(family, 'name', family)} {args[1]!r}"


def _audit_hook(event: str, args: tuple[Any, ...]) -> None:
    if not _STACK or not event.startswith("socket.") or getattr(_IN_HOOK, "busy", False):
        return
    where = _network_target(event, args)
    if where is None:
        return
    _IN_HOOK.busy = True
    try:
        check(Kind.NETWORK, where)
    finally:
        _IN_HOOK.busy = False


def _ensure_hook() -> None:
    """Add the audit hook and the sandbox listener once per process (neither can be removed;
    both are idle while no manager is installed)."""
    global _HOOKED
    with _STACK_LOCK:
        if not _HOOKED:
            sys.addaudithook(_audit_hook)
            _subscribe_sandbox()
            _HOOKED = True


# ------------------------------------------------------------------------------ the sandbox

#: the sandbox's record kinds -> the audit log's
_SANDBOX_KINDS = {"setup": "sandbox", "violation": "violation"}


def _sandbox_event(kind: str, item: Any) -> None:
    """A sandbox set up or a violation (``keracheck.sandbox.subscribe``), into the log."""
    to_json = getattr(item, "to_json", None)
    data = to_json() if to_json is not None else {"detail": str(item)}
    note(_SANDBOX_KINDS.get(kind, "sandbox"), {"event": kind, **data})


def _subscribe_sandbox() -> None:
    try:
        from keracheck import sandbox
    except ImportError:  # a build without the sandbox: the run document still says its mode
        return
    subscribe = getattr(sandbox, "subscribe", None)
    if subscribe is not None:
        subscribe(_sandbox_event)


def note_sandbox(doc: Mapping[str, Any]) -> None:
    """The sandbox a finished run ran in, from its run document's ``sandbox`` object (mode,
    mechanisms, violations counted; each violation was logged as it happened)."""
    record = doc.get("sandbox") or (doc.get("run") or {}).get("sandbox")
    if not isinstance(record, dict):
        note("sandbox", {"event": "run", "mode": "not recorded"})
        return
    violations = record.get("violations") or []
    summary = {k: v for k, v in record.items() if k != "violations"}
    note("sandbox", {"event": "run", **summary, "violations": len(violations)})
