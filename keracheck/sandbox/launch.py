"""Starting, pooling and stopping sandboxes (keracheck's side).

A :class:`Sandboxed` is one ``bwrap ... -- python -c BOOT`` process: the *server* of
:mod:`keracheck.sandbox.entry`, spoken to over a Unix socket pair with ``multiprocessing``'s
framing, one request at a time (:meth:`Sandboxed.request`).  It does two things:

* batches (:func:`run_batch`, ``keracheck run``): each in a fresh child it forks, under the
  batch's limits; the answer is the results or why there are none;
* long-lived children (:func:`spawn`): a plugin's host (``keracheck.plugin_host``) or the
  fuzzer's warm worker (``keracheck.fuzz.workers``), forked with the pipes keracheck passes
  over the socket (SCM_RIGHTS) and then spoken to directly (:class:`Child`).

Servers are pooled by their :class:`Plan` (everything that makes a sandbox but its scratch
directory) and kept for the next command in the same process, so the ~0.3 s of starting
Python with numpy is paid once per kind of worker, not per batch, host or campaign; forking a
child of a warm server takes milliseconds.  A server with live children is pinned in the pool.

Why a spawner thread: ``--die-with-parent`` is ``PR_SET_PDEATHSIG``, which fires when the
*thread* that forked bwrap ends; the harness starts targets from short-lived pool threads, so
every sandbox is started by one long-lived daemon thread instead.

Where keracheck runs as root, ``RLIMIT_NPROC`` is not enforced (the kernel exempts uid 0), so
each sandbox is also put in a pids cgroup of its own when the machine has a writable pids
controller (cgroup v1 ``pids`` or v2 with ``pids`` enabled at the root); the batch server's
process watch (:mod:`.entry`) names a fork bomb in every case.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import queue
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import asdict, dataclass
from functools import cache
from multiprocessing.connection import Connection
from multiprocessing.reduction import sendfds
from pathlib import Path
from typing import Any

from keracheck import sandbox
from keracheck.sandbox import Failure, bwrap, policy, seccomp
from keracheck.sandbox.policy import Limits

#: what runs first inside: keracheck's sys.path, then the server (its socket's fd follows)
BOOT = (
    "import sys,json;sys.path[:]=json.loads(sys.argv[1]);"
    "from keracheck.sandbox.entry import main;main(int(sys.argv[2]))"
)

#: seconds keracheck waits past a batch's limit for the server's own verdict
GRACE = 15.0

_PACKAGES = ("kera", "keracheck", "kera_hdl")


class Duplex:
    """Two one-way pipes as one connection (the ``multiprocessing`` framing on each)."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self._r = Connection(read_fd, writable=False)
        self._w = Connection(write_fd, readable=False)

    def send(self, obj: Any) -> None:
        self._w.send(obj)

    def recv(self) -> Any:
        return self._r.recv()

    def poll(self, timeout: float | None = 0.0) -> bool:
        return self._r.poll(timeout)

    def close(self) -> None:
        for c in (self._w, self._r):
            with contextlib.suppress(OSError):
                c.close()


# ------------------------------------------------------------------------------ plans


@dataclass(frozen=True)
class Plan:
    """A sandbox but its scratch directory: equal plans may share a batch server."""

    kind: str  # builtin | plugin
    spec: str | None  # the plugin's, for a plugin sandbox
    read_only: tuple[str, ...]
    writable: tuple[str, ...]
    masked: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    devices: tuple[str, ...]
    home: str


def _real(paths: Sequence[str]) -> tuple[str, ...]:
    out: dict[str, None] = {}
    for p in paths:
        if p and os.path.isabs(p) and os.path.exists(p):
            out[os.path.realpath(p)] = None
    return tuple(out)


def _path_dirs(home: str) -> list[str]:
    """PATH directories to bind (tools on PATH under the home directory stay visible), never
    the home directory itself, an ancestor of it, or a relative entry."""
    keep = []
    for d in os.environ.get("PATH", "").split(os.pathsep):
        if not os.path.isabs(d) or not os.path.isdir(d):
            continue
        real = os.path.realpath(d)
        if real == "/" or home == real or home.startswith(real.rstrip("/") + "/"):
            continue
        keep.append(d)
    return keep


def _code_dirs() -> list[str]:
    """The Python installation, sys.path and keracheck's own packages."""
    dirs = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    dirs.append(os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))))
    home = os.path.realpath(os.path.expanduser("~"))
    dirs += [p for p in sys.path if os.path.isabs(p) and os.path.realpath(p) != home]
    for name in _PACKAGES:
        mod = sys.modules.get(name) or __import__(name)
        if getattr(mod, "__file__", None):
            dirs.append(os.path.dirname(str(mod.__file__)))
    return dirs


def _keys(dirs: Sequence[str]) -> list[str]:
    """Key files (``*.key``, as ``keracheck keygen`` writes them) up to two levels down in the
    bound project and plugin folders (not the system's, not the Python installation): a
    folder that keeps a signing key shows it to nobody, whether or not this run signs."""
    skip = (sys.base_prefix, sys.prefix, *bwrap.SYSTEM, "/usr")
    scratch = os.path.realpath(tempfile.gettempdir())  # never bound (the sandbox's /tmp)
    found: list[str] = []
    for d in dict.fromkeys(dirs):
        real = os.path.realpath(d)
        if real in ("/", scratch) or any(real == p or real.startswith(p + "/") for p in skip):
            continue
        for pattern in ("*.key", "*/*.key"):
            with contextlib.suppress(OSError):  # a folder that changes under the glob
                found += (os.path.realpath(str(f)) for f in Path(d).glob(pattern) if f.is_file())
    return found


def cache_root() -> str:
    from keracheck.runners.gcc import cache_root as root

    return str(root())


def plugin_cache(spec: str) -> str:
    """A plugin's own writable cache: ``$KERACHECK_CACHE/plugins/<digest of its spec>``."""
    h = hashlib.sha256(absolute_spec(spec).encode()).hexdigest()[:16]
    return os.path.join(cache_root(), "plugins", h)


def absolute_spec(spec: str) -> str:
    """``spec`` with a relative plugin file made absolute (the sandbox's cwd is /tmp)."""
    mod, sep, attr = spec.rpartition(":")
    if sep and mod.endswith(".py") and not os.path.isabs(mod):
        return f"{os.path.abspath(mod)}:{attr}"
    return spec


def plan_for(kind: str, spec: str | None = None) -> Plan:
    home = os.path.expanduser("~")
    root = cache_root()
    code = _code_dirs()
    read_only = [*code, *_path_dirs(home)]
    if kind == "builtin":
        writable = [os.path.join(root, d) for d in policy.BUILD_CACHES]
        read_only.append(os.path.join(root, "probes"))
        cache_env = root
    else:
        assert spec is not None
        writable = [plugin_cache(spec)]
        cache_env = writable[0]
        mod = absolute_spec(spec).rpartition(":")[0]
        if mod.endswith(".py"):  # its folder (siblings, data), but never the whole home
            folder = os.path.dirname(mod)
            code.append(mod if os.path.realpath(folder) == os.path.realpath(home) else folder)
            read_only.append(code[-1])
    for d in writable:
        os.makedirs(d, exist_ok=True)
    files, env_names = sandbox.secrets()
    setting = {
        "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1"),  # idle threads
        "HOME": home,
        "TMPDIR": "/tmp",
        "KERACHECK_CACHE": cache_env,
        sandbox.INSIDE_ENV: "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    gpu = [d for d in bwrap.GPU_DEVICES if os.path.exists(d)] if kind == "builtin" else []
    if gpu:
        read_only += ["/sys", "/dev/nvidia-caps"]
    return Plan(
        kind=kind,
        spec=absolute_spec(spec) if spec and kind == "plugin" else None,
        read_only=_real(read_only),
        writable=_real(writable),
        masked=tuple(dict.fromkeys([*(os.path.realpath(f) for f in files), *_keys(code)])),
        env=bwrap.environment(os.environ, setting, env_names),
        devices=tuple(gpu),
        home=home,
    )


def kind_of(spec: str) -> str:
    from keracheck.targets import is_builtin

    return "builtin" if is_builtin(spec) else "plugin"


# ------------------------------------------------------------------------------ cgroups


@cache
def _pids_cgroup_root() -> str | None:
    """A directory where keracheck may make pids cgroups (root, a writable controller)."""
    if os.geteuid() != 0:
        return None
    for path in ("/sys/fs/cgroup/pids", "/sys/fs/cgroup"):
        try:
            if path.endswith("pids") and os.path.isfile(os.path.join(path, "cgroup.procs")):
                pass
            elif "pids" not in Path(path, "cgroup.subtree_control").read_text().split():
                continue
            probe = tempfile.mkdtemp(prefix="keracheck-probe-", dir=path)
            ok = os.path.isfile(os.path.join(probe, "pids.max"))
            os.rmdir(probe)
            if ok:
                return path
        except OSError:
            continue
    return None


def _make_cgroup(tasks: int) -> str | None:
    root = _pids_cgroup_root()
    if root is None:
        return None
    _remove_stale_cgroups(root)
    try:
        path = tempfile.mkdtemp(prefix=f"keracheck-{os.getpid()}-", dir=root)
        Path(path, "pids.max").write_text(f"{tasks}\n")
    except OSError:
        return None
    return path


def _remove_cgroup(path: str, seconds: float = 10.0) -> bool:
    """Remove a sandbox's cgroup once its last process is gone (the kernel reaps a killed
    namespace asynchronously); False when it is still busy after ``seconds``."""
    for _ in range(max(1, int(seconds / 0.02))):
        try:
            os.rmdir(path)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            threading.Event().wait(0.02)
    return False


def _remove_stale_cgroups(root: str) -> None:
    """Cgroups of keracheck processes that died without removing theirs (kill -9): empty
    ones go (a non-empty one fails to be removed and stays)."""
    for entry in os.scandir(root):
        name = entry.name
        if not name.startswith("keracheck-") or not entry.is_dir():
            continue
        pid = name.split("-")[1]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            with contextlib.suppress(OSError):
                os.rmdir(entry.path)


# ------------------------------------------------------------------------------ spawning

_SPAWN: queue.Queue[tuple[Callable[[], subprocess.Popen[bytes]], Future[Any]]] = queue.Queue()
_SPAWNER_LOCK = threading.Lock()
_spawner: threading.Thread | None = None


def _spawn_loop() -> None:
    while True:
        fn, fut = _SPAWN.get()
        try:
            fut.set_result(fn())
        except BaseException as e:
            fut.set_exception(e)


def _spawn(fn: Callable[[], subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    """Run ``fn`` (a Popen) on the long-lived spawner thread (module docstring)."""
    global _spawner
    with _SPAWNER_LOCK:
        if _spawner is None or not _spawner.is_alive():
            _spawner = threading.Thread(target=_spawn_loop, name="keracheck-sandbox", daemon=True)
            _spawner.start()
    fut: Future[Any] = Future()
    _SPAWN.put((fn, fut))
    proc: subprocess.Popen[bytes] = fut.result()
    return proc


def mechanisms() -> list[str]:
    """What contains a worker on this machine."""
    out = [
        "bubblewrap",
        "user-namespace",
        "pid-namespace",
        "network-namespace",
        "ipc-namespace",
        "uts-namespace",
        "read-only-system",
        "private-scratch",
        "no-home",
        "masked-secrets",
        "clean-environment",
        "no-capabilities",
        "seccomp",
        "rlimits",
        "process-watch",
    ]
    if _pids_cgroup_root() is not None:
        out.append("pids-cgroup")
    return out


def _remove_stale_dirs() -> None:
    """Scratch directories of keracheck processes that died without removing theirs."""
    for entry in Path(tempfile.gettempdir()).glob("keracheck-sandbox-*-*"):
        pid = entry.name.split("-")[2]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            shutil.rmtree(entry, ignore_errors=True)


class Sandboxed:
    """One sandbox: bwrap and the server inside it (module docstring).  Requests are made
    one at a time (:meth:`request` holds a lock); ``children`` counts the long-lived
    processes (plugin hosts, warm workers) it runs for keracheck, which pin it in the pool."""

    def __init__(self, plan: Plan, limits: Limits) -> None:
        self.plan = plan
        self.proc: subprocess.Popen[bytes] | None = None
        self.conn: Connection | None = None
        self.children = 0
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        _remove_stale_dirs()
        self._dir = tempfile.mkdtemp(prefix=f"keracheck-sandbox-{os.getpid()}-")
        self._cgroup = _make_cgroup(limits.tasks)
        try:
            self._start(limits)
        except BaseException:
            self.close()
            raise

    def _view(self) -> bwrap.View:
        scratch = os.path.join(self._dir, "scratch")
        mask = os.path.join(self._dir, "masked")
        os.mkdir(scratch)
        Path(mask).touch(mode=0o000)
        os.chmod(mask, 0)
        return bwrap.View(
            read_only=self.plan.read_only,
            writable=self.plan.writable,
            scratch=scratch,
            masked=self.plan.masked,
            mask_file=mask,
            env=self.plan.env,
            devices=self.plan.devices,
            home=self.plan.home,
        )

    def _start(self, limits: Limits) -> None:
        filt_r, filt_w = os.pipe()
        os.write(filt_w, seccomp.program(seccomp.WORKER))
        os.close(filt_w)
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        cmd = [*bwrap.argv(self._view(), filt_r), sys.executable, "-c", BOOT]
        cmd += [json.dumps([p for p in sys.path if p]), str(theirs.fileno())]
        if self._cgroup is not None:
            procs = os.path.join(self._cgroup, "cgroup.procs")
            cmd = ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', procs, *cmd]
        fds = [filt_r, theirs.fileno()]
        try:
            self.proc = _spawn(
                lambda: subprocess.Popen(
                    cmd, pass_fds=fds, stdin=subprocess.DEVNULL, start_new_session=True
                )
            )
        finally:
            os.close(filt_r)
            theirs.close()
        from keracheck.worker import track

        track(self.proc.pid, True)
        _LIVE.add(self)
        self._sock = mine
        self.conn = Connection(os.dup(mine.fileno()))
        self.conn.send({"masked": list(self.plan.masked), "home": self.plan.home})
        mechanisms_here = [*mechanisms(), *(["pids-cgroup"] if self._cgroup else [])]
        sandbox.record_setup(
            sandbox.Record(
                kind=self.plan.kind,
                role="server",
                spec=self.plan.spec,
                mechanisms=list(dict.fromkeys(mechanisms_here)),
                limits=asdict(limits),
            )
        )

    def request(self, message: Any, timeout: float, fds: Sequence[int] = ()) -> Any:
        """The server's answer to ``message`` (``fds`` travel with it); EOFError when the
        server is gone, TimeoutError past ``timeout``."""
        with self._lock:
            if self.conn is None or self._sock is None:
                raise EOFError("the sandbox is closed")
            try:
                self.conn.send(message)
                if fds:
                    sendfds(self._sock, list(fds))
                if not self.conn.poll(timeout):
                    raise TimeoutError(f"no answer within {timeout:g} s")
                return self.conn.recv()
            except OSError as e:
                raise EOFError(str(e)) from None

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    def is_alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None and self.conn is not None

    @property
    def exitcode(self) -> int | None:
        """The server's exit status (bwrap's 128 + N for a signal becomes -N, as for
        ``multiprocessing``), None while it runs."""
        code = None if self.proc is None else self.proc.poll()
        if code is not None and 128 < code <= 128 + 64:
            return -(code - 128)
        return code

    def join(self, timeout: float | None = None) -> None:
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout)

    def close(self) -> None:
        """Stop the sandbox and everything in it, and remove its directories."""
        from keracheck.worker import kill_group, track

        for c in (self.conn, self._sock):
            if c is not None:
                with contextlib.suppress(OSError):
                    c.close()
        self.conn, self._sock = None, None
        if self.proc is not None:
            kill_group(self.proc.pid)  # bwrap; --die-with-parent takes the namespace with it
            self.join(5)
            track(self.proc.pid, False)
        _LIVE.discard(self)
        if self._cgroup is not None and not _remove_cgroup(self._cgroup, 0.5):
            # not empty yet (a fork bomb being reaped): remove it later, without waiting here
            threading.Thread(target=_remove_cgroup, args=(self._cgroup,), daemon=True).start()
        self._cgroup = None
        shutil.rmtree(self._dir, ignore_errors=True)


#: every sandbox not yet closed (closed at exit, so none outlives keracheck's interpreter)
_LIVE: weakref.WeakSet[Sandboxed] = weakref.WeakSet()


# ------------------------------------------------------------------------------ the pool

#: idle servers, oldest first; a command reuses those of its plan and leaves them for the
#: next command in this process (tests, the pytest plugin), up to MAX_IDLE unpinned ones
_IDLE: list[Sandboxed] = []
_POOL_LOCK = threading.Lock()
MAX_IDLE = 4


def _acquire(plan: Plan) -> Sandboxed:
    with _POOL_LOCK:
        mine = [sb for sb in _IDLE if sb.plan == plan]
        for sb in mine:
            _IDLE.remove(sb)
        dead = [sb for sb in mine if not sb.is_alive()]
        ready = [sb for sb in mine if sb.is_alive()]
        _IDLE.extend(ready[1:])
    for sb in dead:
        sb.close()
    if ready:
        return ready[0]
    sandbox.require()
    return Sandboxed(plan, policy.LIMITS[plan.kind])


def _release(sb: Sandboxed) -> None:
    with _POOL_LOCK:
        _IDLE.append(sb)
        unpinned = [s for s in _IDLE if s.children == 0]
        surplus = unpinned[: max(0, len(unpinned) - MAX_IDLE)]
        for old in surplus:
            _IDLE.remove(old)
    for old in surplus:
        old.close()


def prewarm(kind: str = "builtin") -> None:
    """Start a server of ``kind`` in the background, for the batches to come (the ~0.3 s of
    its Python start then overlaps collecting and compiling the cases)."""
    if not sandbox.enabled() or sandbox.problem() is not None:
        return
    plan = plan_for(kind)
    with _POOL_LOCK:
        if any(sb.plan == plan for sb in _IDLE):
            return

    def start() -> None:
        with contextlib.suppress(Exception):  # the batch then starts its own
            _release(Sandboxed(plan, policy.LIMITS[kind]))

    threading.Thread(target=start, name="keracheck-sandbox-prewarm", daemon=True).start()


def close_all() -> None:
    """Stop every sandbox of this process (at exit)."""
    with _POOL_LOCK:
        _IDLE.clear()
    for sb in list(_LIVE):
        sb.close()


atexit.register(close_all)


# ------------------------------------------------------------------------------ children


class Child:
    """A long-lived process a server forked for keracheck (a plugin host, a warm worker),
    spoken to through its own pipes; the parts of ``multiprocessing.Process`` callers use."""

    def __init__(self, server: Sandboxed, pid: int, conn: Duplex) -> None:
        self.server = server
        self.pid = pid  # in the sandbox's pid namespace: only the server signals it
        self.conn: Duplex | None = conn
        self._code: int | None = None
        self._gone = False

    @property
    def exitcode(self) -> int | None:
        if self._code is None and not self._gone:
            self.join(0)
        return self._code

    def is_alive(self) -> bool:
        return not self._gone and self.exitcode is None and self.server.is_alive()

    def join(self, timeout: float | None = None) -> None:
        """Wait up to ``timeout`` seconds for it to end, and learn its exit status."""
        if self._gone or self._code is not None:
            return
        try:
            _, code = self.server.request(("wait", self.pid, timeout or 0.0), (timeout or 0) + 30)
        except (EOFError, TimeoutError):
            self._gone = True  # its sandbox is gone, and it with it
            return
        self._code = code

    def close(self) -> None:
        """Kill it and everything it started (its process group, by the server)."""
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        if not self._gone:
            with contextlib.suppress(EOFError, TimeoutError):
                _, code = self.server.request(("kill", self.pid), 30)
                self._code = self._code if self._code is not None else code
            self._gone = True
            with _POOL_LOCK:
                self.server.children -= 1


def spawn(kind: str, role: str, spec: str | None, init: dict[str, Any], limits: Limits) -> Child:
    """``role`` (host | warm) forked by a server of ``kind`` (started if none is idle), under
    ``limits``; raises :class:`sandbox.Unavailable` when no sandbox can be made here."""
    sandbox.require()
    plan = plan_for(kind, spec)
    for attempt in range(2):  # an idle server may have died since: then a fresh one
        sb = _acquire(plan)
        to_child, from_parent = os.pipe()
        to_parent, from_child = os.pipe()
        try:
            reply = sb.request(("spawn", role, init, limits), 30, fds=[to_child, from_child])
        except (EOFError, TimeoutError):
            sb.close()
            for fd in (to_child, from_parent, to_parent, from_child):
                os.close(fd)
            if attempt:
                raise
            continue
        finally:
            with contextlib.suppress(OSError):
                os.close(to_child)
                os.close(from_child)
        with _POOL_LOCK:
            sb.children += 1
        _release(sb)
        return Child(sb, int(reply[1]), Duplex(to_parent, from_parent))
    raise AssertionError("unreachable")


def run_batch(spec: str, jobs: list[Any], repeat: int, limit: float) -> dict[str, Any] | Failure:
    """Run a batch in a fresh child of a sandboxed server: its results, or why there are
    none (the messages of ``keracheck.worker``, prefixed by what the sandbox did)."""
    kind = kind_of(spec)
    limits = policy.limits_for(kind, spec)
    sb = _acquire(plan_for(kind, spec))
    try:
        reply = sb.request(
            ("batch", absolute_spec(spec), jobs, repeat, limit, limits), limit + GRACE
        )
    except TimeoutError:
        sb.close()
        return Failure(f"timed out after {limit:.0f} s", "time-limit")
    except EOFError:
        sb.join(5)
        code = sb.exitcode
        sb.close()
        return Failure(f"target process crashed (exit code {code}): its sandbox stopped")
    if reply[0] == "fail" and reply[2] in policy.RETIRE:
        sb.close()  # the server retired (policy.RETIRE): the namespace goes with bwrap
    else:
        _release(sb)
    if reply[0] == "ok":
        results: dict[str, Any] = reply[1]
        return results
    return Failure(reply[1], reply[2])
