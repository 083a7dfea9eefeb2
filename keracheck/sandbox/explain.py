"""Naming what a sandboxed worker ran into, for the report.

The kernel enforces; this module only recognises the marks enforcement leaves, so that a target
error says why (``docs/security.md``, "Violations"):

=============== =========================================================== =================
kind            the mark                                                    message begins
=============== =========================================================== =================
network         PermissionError from ``socket()`` (seccomp EACCES), or no   sandbox: network
                route (the empty network namespace)                         access denied
hidden-path     a masked file (EACCES) or a path under the home directory   sandbox: ... is
                (absent)                                                    hidden
read-only       EROFS: a write outside the scratch directory                sandbox: write
                                                                            outside ...
address-space   MemoryError under RLIMIT_AS                                 sandbox: address-
                                                                            space limit
file-size       EFBIG (Python ignores SIGXFSZ), or death by SIGXFSZ         ... file-size limit
process-count   EAGAIN from fork, or the server's count past the limit      ... process-count
cpu-time        death by SIGXCPU (RLIMIT_CPU)                               killed: CPU-time
seccomp         death by SIGSYS (a call the filter kills)                   seccomp: killed
=============== =========================================================== =================
"""

from __future__ import annotations

import errno
import os
import signal
import traceback
from dataclasses import dataclass, field
from types import TracebackType

from keracheck.sandbox.policy import GIB, Limits

Named = tuple[str, str]  # (violation kind, message prefix)


@dataclass
class Context:
    """What the explaining process knows of its sandbox (set by the entry point)."""

    limits: Limits | None = None
    masked: tuple[str, ...] = ()
    home: str | None = None
    cpu_seconds: int | None = None
    extra: dict[str, str] = field(default_factory=dict)


CONTEXT = Context()


def size(n: int | None) -> str:
    if n is None:
        return "unlimited"
    return f"{n / GIB:g} GiB" if n >= GIB else f"{n >> 20} MiB"


def _chain(e: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    cur: BaseException | None = e
    while cur is not None and cur not in out and len(out) < 6:
        out.append(cur)
        cur = cur.__cause__ or cur.__context__
    return out


def _frames(tb: TracebackType | None) -> list[str]:
    names = []
    while tb is not None:
        names.append(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    return names


def _in_socket(e: BaseException) -> bool:
    return any(os.path.basename(f) == "socket.py" for f in _frames(e.__traceback__))


def _forking(e: BaseException) -> bool:
    """Whether ``e`` came from starting a process (os.fork, subprocess), not from I/O."""
    frames = traceback.extract_tb(e.__traceback__)
    if any(os.path.basename(f.filename) == "subprocess.py" for f in frames):
        return True
    return bool(frames) and "fork" in (frames[-1].line or "")


def _under(path: str, root: str | None) -> bool:
    if not root:
        return False
    root = root.rstrip("/")
    return path == root or path.startswith(root + "/")


def _os_error(e: OSError) -> Named | None:
    name = e.filename if isinstance(e.filename, str) else None
    if name is not None:
        path = os.path.abspath(name)
        if e.errno in (errno.EACCES, errno.EPERM) and path in CONTEXT.masked:
            return "hidden-path", f"sandbox: {path} is hidden (a secret keracheck masks)"
        if e.errno == errno.ENOENT and _under(path, CONTEXT.home):
            return "hidden-path", f"sandbox: the home directory is hidden ({path})"
        if e.errno == errno.EROFS:
            return "read-only", f"sandbox: write outside the scratch directory denied ({path})"
    if e.errno == errno.EFBIG:
        limit = size(CONTEXT.limits.file_size) if CONTEXT.limits else "the limit"
        return "file-size", f"sandbox: file-size limit ({limit}) reached"
    if e.errno in (errno.ENETUNREACH, errno.ENETDOWN, errno.EADDRNOTAVAIL) or (
        e.errno in (errno.EACCES, errno.EPERM) and _in_socket(e)
    ):
        return "network", "sandbox: network access denied"
    if e.errno == errno.EAGAIN and _forking(e):
        return "process-count", "sandbox: process-count limit reached (fork failed)"
    return None


def exception(e: BaseException) -> Named | None:
    """(kind, message prefix) when ``e`` (or what caused it) is the sandbox refusing."""
    for cur in _chain(e):
        if isinstance(cur, MemoryError):
            limit = size(CONTEXT.limits.address_space) if CONTEXT.limits else "the limit"
            return "address-space", f"sandbox: address-space limit ({limit}) reached"
        if isinstance(cur, OSError):
            named = _os_error(cur)
            if named is not None:
                return named
    return None


def describe(e: BaseException, plain: str) -> tuple[str, str | None]:
    """(message, violation kind or None) for a target's exception; ``plain`` is the message
    it gets outside a sandbox."""
    named = exception(e)
    if named is None:
        return plain, None
    return f"{named[1]}: {plain}", named[0]


def exit_status(code: int | None) -> Named | None:
    """(kind, message prefix) when a batch process's exit status is the sandbox's doing."""
    if code is None or code >= 0:
        return None
    sig = -code
    if sig == signal.SIGSYS:
        return "seccomp", (
            "seccomp: killed by the syscall filter (a system call no worker may make: ptrace, "
            "mount, bpf, kexec, module loading, ...)"
        )
    if sig == signal.SIGXCPU:
        cpu = f"{CONTEXT.cpu_seconds} s" if CONTEXT.cpu_seconds else "the limit"
        return "cpu-time", f"killed: CPU-time limit ({cpu})"
    if sig == signal.SIGXFSZ:
        limit = size(CONTEXT.limits.file_size) if CONTEXT.limits else "the limit"
        return "file-size", f"killed: file-size limit ({limit})"
    return None


def crashed(code: int | None) -> tuple[str, str | None]:
    """The message of a batch process that died without answering, and its violation."""
    plain = f"target process crashed (exit code {code})"
    named = exit_status(code)
    if named is None:
        return plain, None
    return f"{named[1]}: {plain}", named[0]
