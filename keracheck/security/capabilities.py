"""Capabilities: what keracheck's own process may do, granted up front, everything else denied.

A :class:`Grant` is one capability token: a :class:`Kind` and a scope.  Scopes are normalised
once, so a check compares strings:

========== ======================================== =============================================
kind       scope                                    a grant covers
========== ======================================== =============================================
read       absolute real path (symlinks resolved)   that path and everything under it
write      absolute real path (symlinks resolved)   that path and everything under it
key        a private key: its real path, or env://V that key source only
toolchain  a built-in target id (``cpu``, ``wasm``)  running that target (every opt level of it)
plugin     ``/real/path/file.py:Attr`` or ``mod:a``  loading and running that plugin
network    never granted                             nothing: keracheck works offline
========== ======================================== =============================================

A :class:`Policy` is an immutable set of grants plus, per kind, whether a declared policy
(``[tool.keracheck.policy]``) *restricts* it: a restricted kind's grants are exactly the
policy's, and the command line cannot widen them.  :class:`PolicyBuilder` makes one.  A
denied check raises :class:`CapabilityDenied`, whose message names the capability and how
to grant it (the CLI's exit 2).
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import NoReturn


class Kind(enum.Enum):
    READ = "read"
    WRITE = "write"
    KEY = "key"
    TOOLCHAIN = "toolchain"
    PLUGIN = "plugin"
    NETWORK = "network"


#: kinds whose scope is a path, and which grant everything under it
PATH_KINDS = frozenset({Kind.READ, Kind.WRITE})

#: kind -> (its key in [tool.keracheck.policy], how the command line asks for it)
HOW_TO_GRANT: dict[Kind, tuple[str, str]] = {
    Kind.READ: ("read", "give it as a PATH argument (or --baseline FILE)"),
    Kind.WRITE: ("write", "name it with --output, --output-format, --report or --dump-outputs"),
    Kind.KEY: ("keys", "pass it with --key"),
    Kind.TOOLCHAIN: ("toolchains", "select the target with --targets"),
    Kind.PLUGIN: ("plugins", "name it with --backend-plugin or --pass-plugin"),
    Kind.NETWORK: ("network", "it is never granted: keracheck and its targets work offline"),
}


class PolicyError(ValueError):
    """A policy that cannot be built (a bad ``[tool.keracheck.policy]``, a network grant)."""


class CapabilityDenied(PermissionError):
    """A privileged action without a grant (exit 2); the message says how to grant it."""

    def __init__(self, kind: Kind, scope: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.scope = scope

    def __str__(self) -> str:
        return str(self.args[0])


def real_path(path: str | os.PathLike[str]) -> str:
    """The scope of a path: absolute, ``~`` expanded, symlinks resolved (the file need not
    exist: what does not is taken as written under the real path of what does)."""
    return os.path.realpath(os.path.expanduser(os.fspath(path)))


def plugin_scope(spec: str) -> str:
    """A plugin spec as a scope: ``file.py:Attr`` with the file's real path; ``mod:attr`` as is."""
    mod, sep, attr = spec.rpartition(":")
    if sep and mod.endswith(".py"):
        return f"{real_path(mod)}:{attr}"
    return spec


def key_scope(source: str | os.PathLike[str]) -> str:
    text = os.fspath(source)
    return text if text.startswith("env://") else real_path(text)


def toolchain_scope(target_id: str) -> str:
    """``cpu@O2`` runs the ``cpu`` toolchain: a level variant needs its target's grant."""
    base, sep, level = target_id.rpartition("@O")
    return base if sep and level.isdigit() else target_id


#: kind -> how a scope of that kind is normalised
NORMALISE: dict[Kind, Callable[[str], str]] = {
    Kind.READ: real_path,
    Kind.WRITE: real_path,
    Kind.KEY: key_scope,
    Kind.TOOLCHAIN: toolchain_scope,
    Kind.PLUGIN: plugin_scope,
    Kind.NETWORK: str,
}


def normalise(kind: Kind, scope: str) -> str:
    return NORMALISE[kind](scope)


@dataclass(frozen=True)
class Grant:
    """One capability token: ``kind`` over ``scope`` (normalised), and where it came from
    (``command line: --output``, ``policy: /x/pyproject.toml``, ``state: cache (...)``)."""

    kind: Kind
    scope: str
    source: str

    def covers(self, kind: Kind, scope: str) -> bool:
        if kind is not self.kind:
            return False
        if kind in PATH_KINDS:
            return scope == self.scope or scope.startswith(self.scope.rstrip("/") + "/")
        return scope == self.scope

    def record(self) -> dict[str, str]:
        return {"kind": self.kind.value, "scope": self.scope, "source": self.source}


@dataclass(frozen=True)
class Policy:
    """Grants, and the kinds a declared policy restricts (kind -> where it is declared)."""

    grants: tuple[Grant, ...] = ()
    restricted: Mapping[Kind, str] = field(default_factory=dict)

    def covering(self, kind: Kind, scope: str) -> Grant | None:
        """The first grant that covers (kind, normalised scope), else None."""
        return next((g for g in self.grants if g.covers(kind, scope)), None)

    def denial(self, kind: Kind, scope: str) -> str:
        """The message of a denied (kind, scope): what is missing and how to grant it."""
        key, flag = HOW_TO_GRANT[kind]
        head = f"capability denied: {kind.value} {scope!r} is not granted"
        it = "it (or a folder above it)" if kind in PATH_KINDS else "it"
        if kind is Kind.NETWORK:
            return f"{head}; {flag}"
        if kind in self.restricted:
            have = [g.scope for g in self.grants if g.kind is kind]
            return (
                f"{head}: the policy in {self.restricted[kind]} lists the only {kind.value} "
                f"grants ({', '.join(have) or 'none'}); add {it} to {key} = [...] in "
                "[tool.keracheck.policy] there"
            )
        return (
            f"{head}: keracheck grants only what the command line names; {flag}, or add "
            f"{it} to {key} = [...] in [tool.keracheck.policy]"
        )


class PolicyBuilder:
    """Declares grants up front and builds an immutable :class:`Policy`.

    ``PolicyBuilder().read("corpora/").write("out/").toolchain("ref", "cpu").build()``; a
    kind can be ``restrict``-ed (its grants are then exactly those given with ``source`` of
    the declaring policy, and :meth:`request` of anything else is refused).  ``network()``
    raises: the network is never granted.
    """

    def __init__(self) -> None:
        self._grants: dict[tuple[Kind, str], Grant] = {}
        self._restricted: dict[Kind, str] = {}
        self.refused: list[tuple[Kind, str, str]] = []  # (kind, scope, requested by)

    def grant(self, kind: Kind, scopes: Iterable[str], source: str = "api") -> PolicyBuilder:
        if kind is Kind.NETWORK:
            self.network()
        for scope in scopes:
            norm = normalise(kind, scope)
            self._grants.setdefault((kind, norm), Grant(kind, norm, source))
        return self

    def read(self, *paths: str, source: str = "api") -> PolicyBuilder:
        return self.grant(Kind.READ, paths, source)

    def write(self, *paths: str, source: str = "api") -> PolicyBuilder:
        return self.grant(Kind.WRITE, paths, source)

    def key(self, *sources: str, source: str = "api") -> PolicyBuilder:
        return self.grant(Kind.KEY, sources, source)

    def toolchain(self, *target_ids: str, source: str = "api") -> PolicyBuilder:
        return self.grant(Kind.TOOLCHAIN, target_ids, source)

    def plugin(self, *specs: str, source: str = "api") -> PolicyBuilder:
        return self.grant(Kind.PLUGIN, specs, source)

    def network(self) -> NoReturn:
        raise PolicyError("the network is never granted: keracheck and its targets work offline")

    def restrict(self, kind: Kind, origin: str) -> PolicyBuilder:
        """From now on ``kind``'s grants are only those declared by ``origin`` (a policy)."""
        self._restricted[kind] = origin
        return self

    def request(self, kind: Kind, scopes: Iterable[str], source: str) -> PolicyBuilder:
        """What the command line asks for: granted, unless ``kind`` is restricted and no
        declared grant covers it (then it is kept in :attr:`refused`)."""
        for scope in scopes:
            norm = normalise(kind, scope)
            if kind not in self._restricted:
                self.grant(kind, [scope], source)
            elif not any(g.covers(kind, norm) for g in self._grants.values()):
                self.refused.append((kind, norm, source))
        return self

    def build(self) -> Policy:
        return Policy(tuple(self._grants.values()), dict(self._restricted))
