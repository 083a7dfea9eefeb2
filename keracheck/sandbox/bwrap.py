"""The bubblewrap command line of a sandbox: namespaces, the file-system view, the environment.

A sandboxed process sees (``docs/security.md``, "What a worker sees")::

    /usr /bin /sbin /lib* /etc /opt      read-only (secrets under /etc masked, below)
    the Python installation, sys.path, keracheck's packages, plugin files   read-only
    /sys/devices/system/cpu              read-only (CPU count and features)
    /dev                                 a minimal devfs (null, zero, urandom, tty, shm ...)
    /proc                                its own pid namespace's
    /tmp                                 the private scratch directory, writable
    the build caches of its kind         writable (policy.py)
    everything else                      absent; the root is remounted read-only

and runs in new user, pid, network, ipc and uts namespaces (no network at all: only a
loopback that is down), in a session of its own, with every capability dropped, no way to
create further user namespaces, and killed with everything it started when keracheck dies
(``--die-with-parent``).  Masked files (the signing key, ``/etc/shadow`` ...) are replaced by an
empty file of mode 000, so reading one fails with ``PermissionError`` and can be named.  The
environment is cleared and only an allow-list is passed (no ``KERACHECK_KEY``, no tokens).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache

INSTALL = "apt-get install bubblewrap"

#: system directories bound read-only when they exist
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt")

#: read-only extras that exist on most machines and that tools read
SYSTEM_EXTRAS = ("/sys/devices/system/cpu",)

#: secrets of the system image: masked files and hidden directories
MASKED_FILES = ("/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-", "/etc/sudoers")
HIDDEN_DIRS = ("/etc/ssh", "/etc/ssl/private", "/etc/sudoers.d")

#: size of the empty tmpfs over the home directory (tools may write dot files there)
HOME_TMPFS_BYTES = 64 << 20

#: GPU device nodes passed through for ptx-gpu (absent ones are skipped)
GPU_DEVICES = (
    "/dev/nvidiactl",
    "/dev/nvidia-uvm",
    "/dev/nvidia-uvm-tools",
    "/dev/nvidia-modeset",
    *(f"/dev/nvidia{i}" for i in range(16)),
)

#: environment passed into a sandbox: exact names, and prefixes
ENV_NAMES = frozenset(
    {
        "PATH", "LANG", "LANGUAGE", "TZ", "TERM", "SOURCE_DATE_EPOCH", "VIRTUAL_ENV",
        "LD_LIBRARY_PATH", "PYTHONHASHSEED", "PYTHONWARNINGS", "PYTHONFAULTHANDLER",
        "PYTHONDEVMODE", "NO_COLOR", "CI",
    }
)  # fmt: skip
ENV_PREFIXES = (
    "LC_", "KERACHECK_", "KERA_", "OMP_", "OPENBLAS_", "MKL_", "CUDA_", "NVIDIA_", "COCOTB_",
    "COVERAGE_", "HYPOTHESIS_",
)  # fmt: skip
#: never passed, whatever the prefix: key material and credentials
ENV_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")


@dataclass(frozen=True)
class View:
    """Everything that makes one sandbox's command line; equal views share a sandbox."""

    read_only: tuple[str, ...]  # host paths bound at the same path
    writable: tuple[str, ...]  # host directories bound read-write at the same path
    scratch: str  # host directory bound read-write at /tmp
    masked: tuple[str, ...]  # files replaced by an unreadable empty file
    mask_file: str  # that file (mode 000)
    env: tuple[tuple[str, str], ...]
    cwd: str = "/tmp"
    home: str | None = None  # hidden under an empty tmpfs (what is bound inside it shows)
    devices: tuple[str, ...] = ()
    extra_read_only: tuple[str, ...] = field(default=SYSTEM_EXTRAS)


def argv(view: View, seccomp_fd: int | None) -> list[str]:
    """``bwrap ... --`` for ``view`` (the command follows)."""
    out = [
        bwrap_path() or "bwrap",
        "--unshare-user",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--hostname",
        "keracheck-sandbox",
    ]
    out += [arg for _, op in sorted(_mounts(view), key=_depth) for arg in op]
    if view.home is not None and _home_tmpfs(view.home):  # after the binds beneath it
        out += ["--remount-ro", view.home]
    out += ["--remount-ro", "/", "--clearenv"]
    for name, value in view.env:
        out += ["--setenv", name, value]
    out += ["--chdir", view.cwd]
    if seccomp_fd is not None:
        out += ["--seccomp", str(seccomp_fd)]
    return [*out, "--"]


Mount = tuple[str, list[str]]  # (where, bwrap arguments)


def _depth(m: Mount) -> int:
    """Mounts are made parents first (a stable sort keeps the order of equals): a directory
    bound inside the home directory lands on its tmpfs, a masked file on its directory."""
    return m[0].rstrip("/").count("/")


def _home_tmpfs(home: str) -> bool:
    """The home directory gets an empty tmpfs unless it is / or holds /tmp."""
    return bool(home) and home != "/" and not _under_any("/tmp", [home])


def _mounts(view: View) -> list[Mount]:
    out: list[Mount] = []
    for path in SYSTEM:  # merged /usr: /bin -> usr/bin stays a link
        if os.path.islink(path):
            out.append((path, ["--symlink", os.readlink(path), path]))
        else:
            out.append((path, ["--ro-bind-try", path, path]))
    out += [(p, ["--ro-bind-try", p, p]) for p in view.extra_read_only]
    out += [("/dev", ["--dev", "/dev"]), ("/proc", ["--proc", "/proc"])]
    out += [(d, ["--dev-bind-try", d, d]) for d in view.devices]
    out.append(("/tmp", ["--bind", view.scratch, "/tmp"]))
    if view.home is not None and _home_tmpfs(view.home):  # before equal-depth binds
        out.append((view.home, ["--size", str(HOME_TMPFS_BYTES), "--tmpfs", view.home]))
    for path in view.read_only:
        if not _under_any("/tmp", [path]):  # never over the scratch directory
            out.append((path, ["--ro-bind-try", path, path]))
    out += [(p, ["--bind", p, p]) for p in view.writable]
    for path in HIDDEN_DIRS:
        if os.path.isdir(path):
            out.append((path, ["--tmpfs", path, "--remount-ro", path]))
    bound = (*SYSTEM, *view.read_only, *view.writable)
    for path in (*MASKED_FILES, *view.masked):
        if os.path.isfile(path) and _under_any(path, bound):  # else it is not there to see
            out.append((path, ["--ro-bind", view.mask_file, path]))
    return out


def _under_any(path: str, roots: Iterable[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def environment(
    source: Mapping[str, str], setting: Mapping[str, str], secret_names: Sequence[str] = ()
) -> tuple[tuple[str, str], ...]:
    """The allow-listed part of ``source`` (never a name with a secret word, nor one of
    ``secret_names``), then ``setting``; sorted, so equal environments give equal views."""
    keep: dict[str, str] = {}
    for name, value in source.items():
        if name in secret_names or any(w in name.upper() for w in ENV_SECRET_WORDS):
            continue
        if name in ENV_NAMES or name.startswith(ENV_PREFIXES):
            keep[name] = value
    keep.update(setting)
    return tuple(sorted(keep.items()))


@cache
def bwrap_path() -> str | None:
    return shutil.which("bwrap")


@cache
def problem() -> str | None:
    """None when bubblewrap can make a sandbox here, else why not and what to do."""
    exe = bwrap_path()
    if exe is None:
        return f"bubblewrap (bwrap) is not installed: {INSTALL}"
    probe = [
        exe,
        "--unshare-user",
        "--unshare-pid",
        "--unshare-net",
        "--die-with-parent",
        "--ro-bind",
        "/",
        "/",
        "--proc",
        "/proc",
        "--",
        "true",
    ]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"bwrap cannot run ({e})"
    if done.returncode != 0:
        first = (done.stderr.strip().splitlines() or ["no message"])[0]
        return (
            f"bwrap cannot create namespaces here ({first}): unprivileged user namespaces "
            "are off; enable them (sysctl -w kernel.unprivileged_userns_clone=1, or on Ubuntu "
            "24.04 sysctl -w kernel.apparmor_restrict_unprivileged_userns=0)"
        )
    return None


def version() -> str:
    exe = bwrap_path()
    if exe is None:
        return "unavailable"
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return out.stdout.strip() or "unknown"
