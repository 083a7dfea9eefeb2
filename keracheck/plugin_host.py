"""Third-party back ends never run in keracheck's own process.

A plugin's ``run`` was always isolated in a worker, but its import, ``available()``,
``supported_ops()``, ``versions()`` and ``declines()`` ran in keracheck itself: a segfault there
killed keracheck (exit 139, no output) and a hang hung ``run`` and ``targets`` forever.  Now a
plugin lives in a *host* process (forked from the forkserver, contained like every worker:
its own process group, killed when keracheck ends) and keracheck talks to it through a pipe.
Every call has a time limit; a call that crashes the host, hangs past its limit or raises
becomes a :class:`PluginCallError` whose message names the method and what happened, and the
host is started again for the next call.  :class:`ContainedBackend` is the back-end object
keracheck holds for a plugin: it answers from what the host reported and forwards
``declines``; ``run`` happens only in workers (``keracheck.worker``), as before.

Built-in targets (``keracheck.targets.BUILTIN``) are keracheck's own code and stay in-process.

With the sandbox on (the default) the host is forked by the server of the plugin's bubblewrap
sandbox (``keracheck.sandbox``: no network, no home directory, no signing key, a scratch
directory and a cache of its own, seccomp, rlimits) instead of by the forkserver.
"""

from __future__ import annotations

import os
from multiprocessing.connection import Connection
from typing import Any

from keracheck.target import BackendError, Inputs, Outputs, cost

#: seconds a plugin's available() may take (it may build a probe), and any other call
AVAILABLE_TIMEOUT = 120.0
CALL_TIMEOUT = 30.0


class PluginCallError(Exception):
    """A plugin call that raised, crashed its host process or ran past its time limit."""


def _describe(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}"
    return text if len(text) < 2000 else text[:2000] + " ..."


def _serve(conn: Connection, spec: str, owner: int) -> None:
    """The host process (a forkserver child, the sandbox off): contained, then :func:`serve`."""
    from keracheck.worker import contain_child

    contain_child(owner)
    serve(conn, spec)


def serve(conn: Any, spec: str) -> None:
    """Instantiate the plugin, then answer calls until the pipe closes."""
    from kera import keg
    from keracheck.targets import instantiate

    try:
        backend = instantiate(spec)
        info = {
            "name": str(backend.name),
            "api_version": backend.api_version,
            "declines": getattr(backend, "declines", None) is not None,
            "cost": cost(backend),
        }
        conn.send(("ok", info))
    except BaseException as e:
        conn.send(("error", str(e) if type(e).__name__ == "TargetError" else _describe(e)))
        return
    while True:
        try:
            method, args = conn.recv()
        except (EOFError, OSError):
            return
        try:
            if method == "declines":
                fn = keg.loads(args[0]).functions[args[1]]
                hook = getattr(backend, "declines", None)
                reply: Any = None if hook is None else hook(fn)
                reply = None if reply is None else str(reply)
            elif method == "versions":
                get = getattr(backend, "versions", None)
                reply = {} if get is None else {str(k): str(v) for k, v in get().items()}
            elif method == "supported_ops":
                reply = sorted(str(o) for o in backend.supported_ops())
            elif method == "available":
                reason = backend.available()
                reply = None if reason is None else str(reason)
            else:
                raise ValueError(f"unknown method {method!r}")
            conn.send(("ok", reply))
        except BaseException as e:
            conn.send(("error", _describe(e)))


class PluginHost:
    """One plugin in a contained process of its own, restarted after a failed call."""

    def __init__(self, spec: str) -> None:
        self.spec = spec
        self.proc: Any = None
        self.conn: Any = None  # a Connection, or a sandbox's Duplex
        self.info: dict[str, Any] = {}

    def _start(self) -> None:
        from keracheck import sandbox

        if sandbox.enabled():
            self._start_sandboxed()
            return
        from keracheck.worker import _context, track

        ctx = _context()
        parent, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, self.spec, os.getpid()), daemon=True)
        self.proc.start()
        track(self.proc.pid, True)
        child.close()
        self.conn = parent
        self.info = self._receive("loading the plugin", CALL_TIMEOUT)

    def _start_sandboxed(self) -> None:
        from keracheck import sandbox
        from keracheck.sandbox import launch, policy

        try:
            init = {"spec": launch.absolute_spec(self.spec)}
            limits = policy.limits_for("plugin", self.spec)
            self.proc = launch.spawn("plugin", "host", self.spec, init, limits)
        except sandbox.Unavailable as e:
            raise PluginCallError(str(e)) from None
        self.conn = self.proc.conn
        self.info = self._receive("loading the plugin", CALL_TIMEOUT)

    def _receive(self, what: str, timeout: float) -> Any:
        assert self.conn is not None
        try:
            if not self.conn.poll(timeout):
                self.close()
                raise PluginCallError(f"{what} did not return within {timeout:g} s")
            kind, payload = self.conn.recv()
        except (EOFError, OSError):
            code = self._exit_code()
            self.close()
            raise PluginCallError(f"{what} crashed the plugin process (exit code {code})") from None
        if kind != "ok":
            if what == "loading the plugin":
                self.close()
            raise PluginCallError(
                str(payload) if what == "loading the plugin" else f"{what} raised {payload}"
            )
        return payload

    def _exit_code(self) -> int | None:
        if self.proc is None:
            return None
        self.proc.join(2)
        return self.proc.exitcode

    def call(self, method: str, *args: Any, timeout: float | None = None) -> Any:
        timeout = CALL_TIMEOUT if timeout is None else timeout
        if self.conn is None:
            self._start()
        assert self.conn is not None
        try:
            self.conn.send((method, args))
        except OSError:
            self.close()
            raise PluginCallError(f"{method}() could not reach the plugin process") from None
        return self._receive(f"{method}()", timeout)

    def close(self) -> None:
        from keracheck.worker import kill_group, track

        if self.conn is not None:
            self.conn.close()
            self.conn = None
        if self.proc is not None:
            if hasattr(self.proc, "server"):  # a sandbox's child: its server kills it
                self.proc.close()
            else:
                kill_group(self.proc.pid)
                self.proc.join(5)
                track(self.proc.pid, False)
            self.proc = None


class ContainedBackend:
    """The back end keracheck holds for a plugin: everything it knows came from the host."""

    def __init__(self, spec: str) -> None:
        """Load the plugin in its host; raises PluginCallError if it cannot be loaded."""
        self.spec = spec
        self.host = PluginHost(spec)
        self.host._start()
        self.name = str(self.host.info["name"])
        self.api_version = self.host.info["api_version"]
        self.cost = float(self.host.info.get("cost", 1))  # the scheduling hint, checked there
        self._reason: str | None = None
        self._ops: frozenset[str] = frozenset()
        self._versions: dict[str, str] = {}
        self._declines: dict[str, str | None] = {}
        self._declines_broken = False
        self._has_declines = bool(self.host.info.get("declines", True))
        try:
            self._reason = self.host.call("available", timeout=AVAILABLE_TIMEOUT)
            if self._reason is None:
                self._ops = frozenset(self.host.call("supported_ops"))
        except PluginCallError as e:
            self._reason = str(e)
        try:
            self._versions = self.host.call("versions")
        except PluginCallError as e:
            self._versions = {"error": str(e)}

    def available(self) -> str | None:
        return self._reason

    def supported_ops(self) -> frozenset[str]:
        return self._ops

    def versions(self) -> dict[str, str]:
        return dict(self._versions)

    def declines(self, fn: Any) -> str | None:
        """The plugin's ``declines(fn)``, asked in its host; a hook that fails once declines
        nothing from then on (the run then shows what is wrong), so a hanging hook costs one
        time limit, not one per case."""
        if self._declines_broken or not self._has_declines:  # no hook: no round trip per case
            return None
        if fn.fingerprint not in self._declines:
            from kera import keg
            from kera.ir import Graph

            try:
                reason = self.host.call("declines", keg.dumps(Graph([fn])), fn.name)
            except PluginCallError:
                self._declines_broken = True
                return None
            self._declines[fn.fingerprint] = reason
        return self._declines[fn.fingerprint]

    def run(self, fn: Any, inputs: Inputs) -> Outputs:
        raise BackendError(f"plugin '{self.spec}' runs only in a worker process")

    def close(self) -> None:
        self.host.close()


def contained(spec: str) -> ContainedBackend:
    """A plugin loaded in its own host; PluginCallError when loading it fails."""
    return ContainedBackend(spec)


__all__ = ["AVAILABLE_TIMEOUT", "CALL_TIMEOUT", "ContainedBackend", "PluginCallError", "contained"]
