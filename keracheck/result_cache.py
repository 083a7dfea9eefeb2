"""The result cache of ``keracheck run`` and the digests its keys are made of.

Outputs are cached by (fingerprint, target, plugin spec and source, target versions, input
digests, digest of the kera/keracheck sources).  See :class:`ResultCache` for why an entry is
trusted only when it proves itself.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kera import version
from kera.ir import Function
from keracheck import inputs as inputs_mod
from keracheck.worker import JobResult

Array = np.ndarray[Any, Any]


def source_digest() -> str:
    """Digest of the kera, kera_hdl and keracheck sources (``kera.version``): any code change,
    RTL cores included, invalidates cached results."""
    return version.source_digest()


def result_key(
    fingerprint: str,
    inputs: Mapping[str, Array],
    target: str,
    versions: Mapping[str, str],
    spec: str,
) -> str:
    """The key of one (case, target) result: what it depends on, hashed.  The result cache
    and the run journal (``keracheck.journal``) both key on it."""
    h = hashlib.sha256()
    for part in (
        fingerprint,
        target,
        spec,
        plugin_digest(spec),
        json.dumps(dict(versions), sort_keys=True),
        source_digest(),
    ):
        h.update(part.encode() + b"\0")
    for name in sorted(inputs):
        h.update(name.encode() + b"\0" + inputs_mod.digest(inputs[name]).encode())
    return h.hexdigest()


class ResultCache:
    """Outputs cached by (fingerprint, target, target version, plugin source, inputs, source
    digest).

    An entry is trusted only when it proves itself: it carries an HMAC-SHA256, under a key
    kept beside the cache (``.key``, mode 0600, made on first use), of its cache key, its
    metadata and every output's dtype, shape and bytes, and its outputs must have exactly the
    dtypes and shapes the function's results need for the case's rows.  Anything else — a
    flipped byte, a truncated or empty file, bad metadata, an entry written by someone without
    the key, outputs of the wrong shape — is a miss: the case runs again and the entry is
    rewritten.  Writes go to a unique temporary name and are renamed into place, so two
    writers of one key never leave a half-written entry.  A cache that cannot be read or
    written only costs speed.
    """

    def __init__(self, root: str) -> None:
        self.root = Path(root)
        self._secret: bytes | None = None

    def secret(self) -> bytes | None:
        if self._secret is None:
            self._secret = _cache_secret(self.root)
        return self._secret

    def key(
        self,
        fingerprint: str,
        inputs: Mapping[str, Array],
        target: str,
        versions: Mapping[str, str],
        spec: str,
    ) -> str:
        return result_key(fingerprint, inputs, target, versions, spec)

    def _path(self, key: str) -> Path:
        return self.root / f"{key[:2]}/{key}.npz"

    def _mac(self, key: str, meta: Mapping[str, Any], outs: Sequence[Array]) -> str | None:
        secret = self.secret()
        if secret is None:
            return None
        m = hmac.new(secret, b"keracheck-result/v2\0" + key.encode() + b"\0", "sha256")
        m.update(json.dumps(dict(meta), sort_keys=True).encode() + b"\0")
        for a in outs:
            m.update(f"{a.dtype.str}{list(a.shape)}\0".encode())
            m.update(np.ascontiguousarray(a).tobytes())
        return m.hexdigest()

    def get(
        self, key: str, fn: Function | None = None, rows: int | None = None
    ) -> JobResult | None:
        """The entry of ``key`` if it is intact and authentic (and, given ``fn`` and ``rows``,
        shaped like ``fn``'s results); else None."""
        try:
            with open(self._path(key), "rb") as f, np.load(f, allow_pickle=False) as z:
                meta = json.loads(bytes(z["meta"]).decode())
                mac = bytes(z["mac"]).decode()
                outs = [z[f"out{k}"] for k in range(int(meta["count"]))]
            want = self._mac(key, meta, outs)
            if want is None or not hmac.compare_digest(mac, want):
                return None
            if fn is not None and not _shaped_like(fn, outs, rows):
                return None
            return JobResult(
                "ok", outputs=[outs], loaded=meta["loaded"], artifacts=dict(meta["artifacts"])
            )
        except Exception:  # any damage at all is a miss, never an abort
            return None

    def put(self, key: str, res: JobResult) -> None:
        if res.status != "ok" or len(res.outputs) != 1:
            return
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            meta = {"count": len(res.outputs[0]), "loaded": res.loaded, "artifacts": res.artifacts}
            mac = self._mac(key, meta, res.outputs[0])
            if mac is None:
                return
            arrays = {f"out{k}": a for k, a in enumerate(res.outputs[0])}
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{key[:16]}-", suffix=".npz")
            try:
                with os.fdopen(fd, "wb") as f:
                    np.savez(
                        f,
                        meta=np.frombuffer(json.dumps(meta).encode(), np.uint8),
                        mac=np.frombuffer(mac.encode(), np.uint8),
                        **arrays,  # type: ignore[arg-type]
                    )
                os.replace(tmp, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except OSError:
            pass  # a cache that cannot be written only costs speed


def _shaped_like(fn: Function, outs: Sequence[Array], rows: int | None) -> bool:
    if len(outs) != len(fn.results):
        return False
    for a, r in zip(outs, fn.results, strict=True):
        if a.dtype != r.dtype.np or a.shape[1:] != r.shape or a.ndim != len(r.shape) + 1:
            return False
        if rows is not None and a.shape[0] != rows:
            return False
    return True


def _cache_secret(root: Path) -> bytes | None:
    """The cache's HMAC key: read, or made once (0600, O_EXCL so concurrent first runs agree)."""
    path = root / ".key"
    try:
        root.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "wb") as f:
                f.write(os.urandom(32).hex().encode())
        for _ in range(50):  # another process may be between creating and writing it
            data = path.read_bytes().strip()
            if len(data) == 64:
                return bytes.fromhex(data.decode())
            time.sleep(0.01)
    except (OSError, ValueError):
        pass
    return None


_PLUGIN_DIGESTS: dict[str, str] = {}


def plugin_digest(spec: str) -> str:
    """Digest of the source a plugin spec runs (a ``file.py`` or the module's file or package),
    so editing a plugin invalidates its cached results even if its ``versions()`` does not
    change.  Built-in targets are covered by :func:`source_digest`."""
    if spec in _PLUGIN_DIGESTS:
        return _PLUGIN_DIGESTS[spec]
    mod, _, _ = spec.rpartition(":")
    digest = ""
    try:
        if mod.endswith(".py"):
            files = [Path(mod)]
        elif mod.split(".")[0] in ("keracheck", "kera"):
            files = []
        else:
            import importlib.util

            found = importlib.util.find_spec(mod)
            origin = Path(found.origin) if found and found.origin else None
            if origin is None:
                files = []
            elif origin.name == "__init__.py":
                files = sorted(origin.parent.rglob("*.py"))
            else:
                files = [origin]
        h = hashlib.sha256()
        for f in files:
            h.update(str(f).encode() + b"\0" + f.read_bytes())
        digest = h.hexdigest() if files else ""
    except Exception:
        digest = "unreadable"
    _PLUGIN_DIGESTS[spec] = digest
    return digest


def default_cache_dir() -> str:
    base = os.environ.get("KERACHECK_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "keracheck"
    )
    return os.path.join(base, "results")
