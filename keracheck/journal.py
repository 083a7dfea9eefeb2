"""The run journal: results kept as they finish, so a killed run resumes where it stopped.

``keracheck run`` appends each (case, target) result to a journal the moment the target's
batch returns (one worker call: a target's cases at one optimisation level), under
``<cache>/journal/<run key>.jnl``, the run key being a digest of the run's arguments
(:func:`run_key`).  A run that finishes deletes its journal; a run killed (``kill -9``, a CI
timeout, OOM) leaves it, and the same command run again takes every result it holds instead
of computing it, and says how many.  Each record is keyed like the result cache (fingerprint,
inputs, target, versions, plugin source, source digest), so a case edited between the two runs
is computed again, never taken.

Record layout (little-endian)::

    record := "KJR1" | u32 body length | HMAC-SHA256(secret, "keracheck-journal/v1\\0" || body) | body
    body   := u32 meta length | meta (JSON) | the output arrays' raw bytes, in order
    meta   := {"key": str, <JobResult fields but outputs>..., "outputs": [[[dtype, shape], ...] per repeat]}

The secret is the journal folder's ``.key`` (as the result cache's: mode 0600, made once).
Reading never trusts a record it cannot prove: a torn tail (a kill in the middle of a write),
a flipped bit, a record from someone without the secret, an array whose size disagrees with
its meta, or a non-numeric dtype is skipped (the reader resynchronises at the next magic), and
that result is computed again.  Before appending, a journal with any such damage is rewritten
with its valid records only (temporary file, fsync, rename), so new records never follow
garbage.

Durability: a batch's records go to the file with one ``write`` on an ``O_APPEND`` descriptor,
then ``fsync``, before the run uses them; a kill of the process cannot lose a record once
``write`` returned (the kernel holds it), and ``fsync`` makes it survive a power loss or an OS
crash too.  Concurrency: a run holds an exclusive ``flock`` on ``<run key>.lock`` while it
journals; a second run with the same arguments at the same time runs without a journal (and
says so) rather than share one.  Runs with other arguments have other journals; the result
cache beside them is safe to share (atomic renames).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import hmac
import json
import os
import struct
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from keracheck.result_cache import _cache_secret, default_cache_dir
from keracheck.worker import JobResult

Array = np.ndarray[Any, Any]

MAGIC = b"KJR1"
HEADER = struct.Struct("<4sI32s")
META = struct.Struct("<I")
DOMAIN = b"keracheck-journal/v1\0"
#: a body larger than this is damage, not a record (u32 lengths; outputs are budgeted far lower)
MAX_BODY = (1 << 32) - 1
#: unfinished journals older than this are removed when a journal is opened
STALE_SECONDS = 30 * 24 * 3600
#: numpy dtype kinds a journal may hold (booleans, integers, floats): never objects
DTYPE_KINDS = frozenset("biuf")


#: JobResult fields a record must carry with these types (others travel as they are)
FIELD_TYPES: dict[str, type | tuple[type, ...]] = {
    "status": str,
    "message": (str, type(None)),
    "loaded": (str, type(None)),
    "seconds": (int, float),
    "artifacts": dict,
    "traceback": (str, type(None)),
}


class JournalError(ValueError):
    """A record that cannot be decoded (its offset and what is wrong)."""


def default_journal_dir() -> str:
    return str(Path(default_cache_dir()).parent / "journal")


def run_key(parts: Mapping[str, Any]) -> str:
    """The journal's name: a digest of the run's arguments (canonical JSON)."""
    text = json.dumps(dict(parts), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(b"keracheck-run/v1\0" + text.encode()).hexdigest()[:32]


# ------------------------------------------------------------------------------ encoding


def _mac(secret: bytes, body: bytes) -> bytes:
    return hmac.new(secret, DOMAIN + body, "sha256").digest()


def _meta(key: str, res: JobResult) -> dict[str, Any]:
    meta: dict[str, Any] = {"key": key}
    for f in dataclasses.fields(JobResult):
        if f.name != "outputs":
            meta[f.name] = getattr(res, f.name)
    meta["outputs"] = [[[a.dtype.str, list(a.shape)] for a in rep] for rep in res.outputs]
    return meta


def encode(secret: bytes, key: str, res: JobResult) -> bytes:
    """One record for ``res`` under ``key``."""
    meta = json.dumps(_meta(key, res), separators=(",", ":")).encode()
    arrays = b"".join(np.ascontiguousarray(a).tobytes() for rep in res.outputs for a in rep)
    body = META.pack(len(meta)) + meta + arrays
    return HEADER.pack(MAGIC, len(body), _mac(secret, body)) + body


def _array(spec: Any, body: bytes, at: int) -> tuple[Array, int]:
    """One output array of a body, its size checked against the body before it is read."""
    dtype_str, shape = spec
    dtype = np.dtype(str(dtype_str))
    if dtype.kind not in DTYPE_KINDS or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise JournalError(f"bad output {spec!r}")
    size = dtype.itemsize * int(np.prod(shape, dtype=np.int64))
    if at + size > len(body):
        raise JournalError(f"output {spec!r} runs past the record")
    return np.frombuffer(body, dtype, size // dtype.itemsize, at).reshape(shape).copy(), at + size


def decode_body(body: bytes) -> tuple[str, JobResult]:
    """(key, result) of an authenticated body; JournalError when its content is inconsistent."""
    if len(body) < META.size:
        raise JournalError("body shorter than its meta length")
    (size,) = META.unpack_from(body)
    at = META.size + size
    if at > len(body):
        raise JournalError("meta runs past the record")
    try:
        meta = json.loads(body[META.size : at])
        known = {f.name for f in dataclasses.fields(JobResult)} - {"outputs"}
        fields = {k: v for k, v in meta.items() if k in known}
        outputs: list[list[Array]] = []
        for rep in meta["outputs"]:
            arrays = []
            for spec in rep:
                a, at = _array(spec, body, at)
                arrays.append(a)
            outputs.append(arrays)
        key = meta["key"]
        bad = [
            k for k, v in fields.items() if k in FIELD_TYPES and not isinstance(v, FIELD_TYPES[k])
        ]
        if not isinstance(key, str) or bad or fields.get("status") not in ("ok", "error"):
            raise JournalError(f"bad meta fields: {', '.join(bad) or 'key or status'}")
        res = JobResult(**fields, outputs=outputs)
    except JournalError:
        raise
    except (ValueError, TypeError, KeyError) as e:
        raise JournalError(f"bad meta: {type(e).__name__}: {e}") from None
    if at != len(body):
        raise JournalError(f"{len(body) - at} bytes after the last output")
    return key, res


def decode_all(secret: bytes, data: bytes) -> tuple[list[tuple[str, JobResult, bytes]], int]:
    """Every valid record of a journal's bytes as (key, result, its raw bytes), and how many
    damaged stretches were skipped (torn, changed, foreign or inconsistent records)."""
    records: list[tuple[str, JobResult, bytes]] = []
    damaged, pos = 0, 0
    while pos < len(data):
        end = _record_end(secret, data, pos)
        if end is not None:
            try:
                key, res = decode_body(data[pos + HEADER.size : end])
            except JournalError:
                end = None
            else:
                records.append((key, res, data[pos:end]))
                pos = end
                continue
        damaged += 1
        nxt = data.find(MAGIC, pos + 1)
        if nxt < 0:
            break
        pos = nxt
    return records, damaged


def _record_end(secret: bytes, data: bytes, pos: int) -> int | None:
    """The end of the authentic record at ``pos``, else None."""
    if pos + HEADER.size > len(data):
        return None
    magic, size, mac = HEADER.unpack_from(data, pos)
    end = pos + HEADER.size + size
    if magic != MAGIC or size > MAX_BODY or end > len(data):
        return None
    if not hmac.compare_digest(mac, _mac(secret, data[pos + HEADER.size : end])):
        return None
    return end


# ------------------------------------------------------------------------------ the journal


class Journal:
    """An open journal: the records of the interrupted run it resumes, and the appends of
    this one.  Thread-safe (targets run in threads).  Open with :func:`open_journal`."""

    def __init__(
        self,
        path: Path,
        secret: bytes,
        lock_fd: int,
        records: Mapping[str, JobResult],
        damaged: int,
    ) -> None:
        self.path = path
        self._secret = secret
        self._lock_fd = lock_fd
        self._records = dict(records)
        self.found = len(records)
        self.damaged = damaged
        self.taken = 0
        self.computed = 0
        self._fd: int | None = None
        self._lock = threading.Lock()

    def take(
        self, key: str, accept: Callable[[JobResult], bool] = lambda r: True
    ) -> JobResult | None:
        """The journaled result of ``key`` when ``accept`` takes it (then counted as taken),
        else None (the result is computed again)."""
        with self._lock:
            res = self._records.get(key)
            if res is None or not accept(res):
                return None
            self.taken += 1
            return res

    def append(self, items: Sequence[tuple[str, JobResult]]) -> None:
        """Journal a finished batch: one write, then fsync."""
        if not items:
            return
        data = b"".join(encode(self._secret, key, res) for key, res in items)
        with self._lock:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                _fsync_dir(self.path.parent)
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
            os.fsync(self._fd)
            self.computed += len(items)

    def close(self, finished: bool) -> None:
        """Release the journal; a finished run deletes it, an interrupted one keeps it."""
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            if finished:
                with contextlib.suppress(OSError):
                    os.unlink(self.path)
            if self._lock_fd >= 0:
                os.close(self._lock_fd)  # releases the flock
                self._lock_fd = -1


def open_journal(root: str, key: str, fresh: bool = False) -> Journal | str:
    """The journal of run ``key`` under ``root``, locked for this run, its valid records
    loaded (``fresh``: discarded instead); a string says why there is none (the folder
    cannot be written, or another run with these arguments holds it)."""
    folder = Path(root)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        secret = _cache_secret(folder)
        if secret is None:
            return f"{folder}: cannot make the journal's key"
        lock_fd = os.open(folder / f"{key}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as e:
        return f"{folder}: cannot write: {e.strerror or e}"
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(lock_fd)
        return "another run with the same arguments is journaling; this one is not journaled"
    path = folder / f"{key}.jnl"
    try:
        _prune(folder, path)
        records, damaged = _load(path, secret, fresh)
    except OSError as e:
        os.close(lock_fd)
        return f"{path}: cannot read or rewrite: {e.strerror or e}"
    return Journal(path, secret, lock_fd, {k: r for k, r, _ in records}, damaged)


def _load(path: Path, secret: bytes, fresh: bool) -> tuple[list[tuple[str, JobResult, bytes]], int]:
    """The valid records of ``path``; a damaged file is rewritten with only those."""
    if fresh:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return [], 0
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return [], 0
    records, damaged = decode_all(secret, data)
    if damaged:
        _rewrite(path, b"".join(raw for _, _, raw in records))
    return records, damaged


def _rewrite(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    """Make a new or renamed entry of ``folder`` durable (best effort)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _prune(folder: Path, keep: Path) -> None:
    """Remove unfinished journals nobody resumed for :data:`STALE_SECONDS`."""
    cutoff = time.time() - STALE_SECONDS
    for old in folder.glob("*.jnl"):
        with contextlib.suppress(OSError):
            if old != keep and old.stat().st_mtime < cutoff:
                old.unlink()


def read_records(root: str, key: str) -> list[tuple[str, JobResult]]:
    """The valid records of a journal, read without locking or repairing it (for tests and
    tools watching a run)."""
    folder = Path(root)
    secret = _cache_secret(folder)
    try:
        data = (folder / f"{key}.jnl").read_bytes()
    except FileNotFoundError:
        return []
    if secret is None:
        return []
    return [(k, r) for k, r, _ in decode_all(secret, data)[0]]
