"""Running one target on a batch of cases in a separate process, with a time limit.

The parent sends (target spec, cases) to a fresh process (forked by a forkserver); the child loads every case
from its ``.keg`` bytes (recording the fingerprint it actually loaded), runs the batch through
``run_many`` when the back end has it (one toolchain call for many graphs) or ``run`` per case,
and sends back per-case results.  A crash, a hang past the limit or a broken pipe only costs
that batch: the parent then re-runs each case alone, so one bad case is an ``error`` for that
case and target and every other case still gets its result.

With the sandbox on (``keracheck.sandbox``, the default) that process is a child of a batch
server inside a bubblewrap sandbox, under seccomp and rlimits, instead of a forkserver child;
the protocol, the time limit and the messages are the same, and what the sandbox stopped is
named in the message and in ``JobResult.violation``.
"""

from __future__ import annotations

import contextlib
import hashlib
import multiprocessing as mp
import os
import select
import signal
import threading
import time
import traceback
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from keracheck import sandbox
from keracheck.sandbox import explain

Array = np.ndarray[Any, Any]


@dataclass
class Job:
    key: str  # case key (fingerprint:function path)
    keg: bytes
    function: str
    inputs: dict[str, Array]
    #: the function itself, when the caller has it (the fuzzer): it travels pickled (nodes
    #: re-interned, ~4x cheaper than loading and verifying ``.keg`` bytes) and ``keg`` is unused
    fn: Any = None
    #: whether to record the emitted code's digests (``JobResult.artifacts``, for reports); the
    #: fuzzer reads none of them, and emitting them again costs ~1.2 ms per graph and target
    artifacts: bool = True


@dataclass
class JobResult:
    status: str  # ok | error
    message: str | None = None
    outputs: list[list[Array]] = field(default_factory=list)  # per repeat, per result
    loaded: str | None = None
    seconds: float = 0.0
    artifacts: dict[str, str] = field(default_factory=dict)
    traceback: str | None = None  # where a target's exception came from (its last frames)
    violation: str | None = None  # what the sandbox stopped (keracheck.sandbox.explain), if any


def _artifacts(backend: Any, fn: Any) -> dict[str, str]:
    get = getattr(backend, "artifacts", None)
    if get is None:
        return {}
    try:
        arts = get(fn)
    except Exception:
        return {}
    return {
        name: hashlib.sha256(data if isinstance(data, bytes) else str(data).encode()).hexdigest()
        for name, data in arts.items()
    }


def _check_outputs(fn: Any, outs: Any, n: int) -> list[Array]:
    if not isinstance(outs, list | tuple) or len(outs) != len(fn.results):
        raise TypeError(
            f"back end returned {type(outs).__name__}, expected {len(fn.results)} arrays"
        )
    checked = []
    for k, (o, r) in enumerate(zip(outs, fn.results, strict=True)):
        a = np.asarray(o)
        if a.dtype != r.dtype.np or a.shape != (n, *r.shape):
            raise TypeError(
                f"result {k}: back end returned {a.dtype}{list(a.shape)}, "
                f"expected {r.dtype}{[n, *r.shape]}"
            )
        checked.append(np.ascontiguousarray(a))
    return checked


#: back ends instantiated in this process, by (spec, stamp of a plugin file)
_BACKENDS: dict[tuple[str, tuple[int, int] | None], Any] = {}


def backend_for(spec: str) -> Any:
    """The back end ``spec`` names, instantiated once per process: a ``file.py`` plugin's
    module runs once (its module state survives), and a process forked after this call (the
    fuzzer's warm workers fork one child per batch) inherits the instance instead of loading
    the file again.  A plugin file edited since is loaded again."""
    from keracheck.targets import instantiate

    key = (spec, _stamp(spec))
    if key not in _BACKENDS:
        _BACKENDS[key] = instantiate(spec)
    return _BACKENDS[key]


def _stamp(spec: str) -> tuple[int, int] | None:
    path = spec.rpartition(":")[0]
    if not path.endswith(".py"):
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


def execute(spec: str, jobs: list[Job], repeat: int) -> dict[str, JobResult]:
    """Run jobs in this process (the child's body; also usable in-process for tests)."""
    from kera import keg

    backend = backend_for(spec)
    results: dict[str, JobResult] = {}
    loaded = []
    for job in jobs:
        try:
            fn = job.fn if job.fn is not None else keg.loads(job.keg).functions[job.function]
        except Exception as e:
            results[job.key] = JobResult("error", f"cannot load case: {e}")
            continue
        n = next(iter(job.inputs.values())).shape[0] if job.inputs else 1
        loaded.append((job, fn, n))
        arts = _artifacts(backend, fn) if job.artifacts else {}
        results[job.key] = JobResult("ok", loaded=fn.fingerprint, artifacts=arts)
    run_many = getattr(backend, "run_many", None)
    for _ in range(repeat):
        if run_many is not None and len(loaded) > 1:
            t0 = time.perf_counter()
            try:
                many = run_many([(fn, job.inputs) for job, fn, _ in loaded])
            except Exception as e:
                many = [e] * len(loaded)
            share = (time.perf_counter() - t0) / max(1, len(loaded))
            for (job, fn, n), out in zip(loaded, many, strict=True):
                _record(results[job.key], fn, n, out, share)
        else:
            for job, fn, n in loaded:
                t0 = time.perf_counter()
                result: Any
                try:
                    result = backend.run(fn, job.inputs)
                except Exception as e:
                    result = e
                _record(results[job.key], fn, n, result, time.perf_counter() - t0)
    return results


def _record(res: JobResult, fn: Any, n: int, out: Any, seconds: float) -> None:
    res.seconds += seconds
    if res.status != "ok":
        return
    if isinstance(out, BaseException):
        res.status, res.message = "error", _describe(out)
        if sandbox.inside():
            res.message, res.violation = explain.describe(out, res.message)
        res.traceback = _frames(out)
        return
    try:
        res.outputs.append(_check_outputs(fn, out, n))
    except TypeError as e:
        res.status, res.message = "error", str(e)


def _frames(e: BaseException) -> str | None:
    """The last frames of an exception's traceback (None when it was never raised)."""
    if e.__traceback__ is None:
        return None
    text = "".join(traceback.format_exception(type(e), e, e.__traceback__, limit=-8))
    return text if len(text) < 8000 else "... " + text[-8000:]


def _describe(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}"
    return text if len(text) < 4000 else text[:4000] + " ..."


# ------------------------------------------------------------------------------ containment
#
# Every worker leads a process group of its own, so that killing the group also kills every
# compiler, simulator, emulator and engine it started; a watchdog thread in the worker kills
# the group when the worker's parent dies (keracheck killed with SIGKILL takes the forkserver
# with it, which re-parents the worker); and keracheck kills the groups of its live workers on
# SIGTERM, SIGINT and timeouts.  No process of a run outlives it.

_LIVE: set[int] = set()  # worker pids (= their process group ids) of this process
_LIVE_LOCK = threading.Lock()


def contain_child(keracheck_pid: int) -> None:
    """In a worker child: become a process-group leader, and kill the group as soon as the
    keracheck process ``keracheck_pid`` ends, however it ends.  (Waiting for the parent to go
    is not enough: a forkserver outlives a killed keracheck while its children hold their
    copy of its liveness pipe.)  Inside a sandbox keracheck's pid is not visible, and not
    needed: the sandbox dies with keracheck (``--die-with-parent``, its pid namespace)."""
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)
    if sandbox.inside():
        return
    try:
        pidfd = os.pidfd_open(keracheck_pid)
    except OSError:  # already gone
        os.killpg(os.getpgid(0), signal.SIGKILL)
        return

    def watch() -> None:
        select.select([pidfd], [], [])  # readable once that process has exited
        os.killpg(os.getpgid(0), signal.SIGKILL)

    threading.Thread(target=watch, name="keracheck-orphan-watch", daemon=True).start()


def kill_group(pid: int) -> None:
    """Kill a worker and everything it started (its process group; the worker alone if it has
    not become a group leader yet)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def track(pid: int, live: bool) -> None:
    with _LIVE_LOCK:
        (_LIVE.add if live else _LIVE.discard)(pid)


def kill_all() -> None:
    """Kill every live worker group of this process (on SIGTERM/SIGINT)."""
    with _LIVE_LOCK:
        pids = list(_LIVE)
    for pid in pids:
        kill_group(pid)


def _child(conn: Connection, spec: str, jobs: list[Job], repeat: int, owner: int) -> None:
    contain_child(owner)
    try:
        conn.send(("ok", execute(spec, jobs, repeat)))
    except BaseException as e:
        conn.send(("fail", f"{_describe(e)}\n{traceback.format_exc(limit=5)}"))
    finally:
        conn.close()


def run_isolated(spec: str, jobs: list[Job], repeat: int, timeout: float) -> dict[str, JobResult]:
    """Run a batch in a child process; on crash or timeout, retry each case alone."""
    outcome = _run(spec, jobs, repeat, timeout * len(jobs) * repeat + 2.0)
    if isinstance(outcome, dict):
        return _noted(spec, outcome)
    if len(jobs) == 1:
        return _noted(spec, {jobs[0].key: _failed(outcome)})
    results: dict[str, JobResult] = {}
    for job in jobs:
        one = _run(spec, [job], repeat, timeout * repeat + 2.0)
        results[job.key] = one[job.key] if isinstance(one, dict) else _failed(one)
    return _noted(spec, results)


Outcome = dict[str, JobResult] | str | sandbox.Failure  # results, or why there are none


def _run(spec: str, jobs: list[Job], repeat: int, limit: float) -> Outcome:
    """One batch in a sandboxed server's child (the sandbox on), or a forkserver child."""
    if sandbox.enabled() and not sandbox.inside():
        from keracheck.sandbox import launch

        try:
            return launch.run_batch(spec, jobs, repeat, limit)
        except sandbox.Unavailable as e:
            return str(e)
    return _spawn(spec, jobs, repeat, limit)


def _failed(outcome: str | sandbox.Failure) -> JobResult:
    if isinstance(outcome, str):
        return JobResult("error", outcome)
    return JobResult("error", outcome.message, violation=outcome.violation)


def _noted(spec: str, results: dict[str, JobResult]) -> dict[str, JobResult]:
    """Record every violation of a batch's results (``keracheck.sandbox``)."""
    for key, res in results.items():
        if res.violation is not None:
            sandbox.record_violation(sandbox.Violation(spec, key, res.violation, res.message or ""))
    return results


_PRELOAD = ["numpy", "kera.interp", "kera.keg", "keracheck.worker", "keracheck.targets"]


def _context() -> mp.context.ForkServerContext:
    """forkserver: each batch gets a fresh process forked from a server that has numpy and kera
    imported already (milliseconds instead of a new interpreter per batch), without forking
    the harness's own threads."""
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(_PRELOAD)
    return ctx


def _spawn(spec: str, jobs: list[Job], repeat: int, limit: float) -> dict[str, JobResult] | str:
    ctx = _context()
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, spec, jobs, repeat, os.getpid()), daemon=True)
    proc.start()
    assert proc.pid is not None
    track(proc.pid, True)
    child.close()
    try:
        if not parent.poll(limit):
            return f"timed out after {limit:.0f} s"
        kind, payload = parent.recv()
    except (EOFError, OSError):
        proc.join(5)
        return f"target process crashed (exit code {proc.exitcode})"
    finally:
        kill_group(proc.pid)  # also whatever it started and left running
        proc.join(5)
        track(proc.pid, False)
        parent.close()
    if kind != "ok":
        return f"target process failed: {payload}"
    assert isinstance(payload, dict)
    return payload
