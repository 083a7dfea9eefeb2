"""Capabilities and the audit log of keracheck's own process (docs/security.md).

* :mod:`~keracheck.security.capabilities`: capability kinds, grants, the immutable
  :class:`Policy` and its :class:`PolicyBuilder`, :class:`CapabilityDenied`.
* :mod:`~keracheck.security.manager`: the :class:`SecurityManager` (default deny), the
  installed-manager stack the call sites ask (:func:`check`), the network audit hook.
* :mod:`~keracheck.security.audit`: the hash-chained ring-buffer audit log, its
  verification and rendering.
* :mod:`~keracheck.security.startup`: the grants a command line or a library run asks for,
  within ``[tool.keracheck.policy]``.

Callers import from this package; the names below are its public interface.
"""

from __future__ import annotations

from keracheck.security.audit import (
    DEFAULT_CAPACITY,
    KINDS,
    AuditLog,
    Entry,
    LogVerdict,
    render,
    verify_log,
)
from keracheck.security.capabilities import (
    CapabilityDenied,
    Grant,
    Kind,
    Policy,
    PolicyBuilder,
    PolicyError,
)
from keracheck.security.manager import (
    SecurityManager,
    check,
    current,
    installed,
    note,
    note_sandbox,
)


def check_read(path: str) -> None:
    check(Kind.READ, path)


def check_write(path: str) -> None:
    check(Kind.WRITE, path)


def check_key(source: str) -> None:
    check(Kind.KEY, source)


def check_plugin(spec: str) -> None:
    check(Kind.PLUGIN, spec)


def check_target(target_id: str, spec: str) -> None:
    """Running a target: a built-in one needs its toolchain granted, any other is a plugin."""
    from keracheck.targets import is_builtin

    if is_builtin(spec):
        check(Kind.TOOLCHAIN, target_id)
    else:
        check(Kind.PLUGIN, spec)


__all__ = [
    "DEFAULT_CAPACITY",
    "KINDS",
    "AuditLog",
    "CapabilityDenied",
    "Entry",
    "Grant",
    "Kind",
    "LogVerdict",
    "Policy",
    "PolicyBuilder",
    "PolicyError",
    "SecurityManager",
    "check",
    "check_key",
    "check_plugin",
    "check_read",
    "check_target",
    "check_write",
    "current",
    "installed",
    "note",
    "note_sandbox",
    "render",
    "verify_log",
]
