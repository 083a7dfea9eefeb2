"""Loading a graph from a file: a ``.keg`` artifact or ``.kera`` source, told apart by the
suffix or the ``KEG\\0`` magic.  Every failure is one :class:`LoadError` whose message names the
file and the position (byte offset, section, or line:col through the rendered diagnostics)."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile

from kera import keg, limits
from kera.ir import Graph


class LoadError(ValueError):
    """A file that cannot be read, decoded, parsed or checked.

    ``diagnostics`` holds the rendered compiler diagnostics (``file:line:col`` with caret
    lines) when the source has errors, else it is empty."""

    def __init__(self, message: str, diagnostics: str = "", count: int = 0) -> None:
        super().__init__(message)
        self.diagnostics = diagnostics
        self.count = count


def read_bytes(path: str, cap: int | None = None) -> bytes:
    """The bytes of a regular file of at most ``cap`` bytes (default: the larger of the source
    and ``.keg`` limits of :mod:`kera.limits`).  The size is checked with ``stat`` before
    anything is read, and a FIFO, device or directory is refused (``/dev/zero`` or a pipe
    would otherwise be read forever)."""
    lim = limits.current()
    cap = max(lim.source_bytes, lim.keg_bytes) if cap is None else cap
    try:
        with open(path, "rb", opener=_open_nonblocking) as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise LoadError(f"{path}: not a regular file (a directory, FIFO or device)")
            if st.st_size > cap:
                raise LoadError(_too_big(path, st.st_size, cap))
            data = f.read(cap + 1)
    except OSError as e:
        raise LoadError(f"{path}: cannot read: {e.strerror or e}") from None
    if len(data) > cap:  # it grew while being read
        raise LoadError(_too_big(path, len(data), cap))
    return data


def write_atomic(path: str | os.PathLike[str], data: str | bytes) -> None:
    """Write ``path`` so that a reader (or a kill at any moment) sees either its old content
    or all of the new: a unique temporary file in the same folder, flushed, then renamed."""
    target = os.fspath(path)
    folder = os.path.dirname(target) or "."
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(target)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        if os.path.exists(target):
            os.chmod(tmp, stat.S_IMODE(os.stat(target).st_mode))
        else:
            mask = os.umask(0)
            os.umask(mask)
            os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _open_nonblocking(path: str, flags: int) -> int:
    # O_NONBLOCK: opening a FIFO with no writer returns at once (then fstat refuses it)
    return os.open(path, flags | os.O_NONBLOCK)


def _too_big(path: str, size: int, cap: int) -> str:
    return f"{path}: {size:,} bytes is more than the limit of {cap:,} bytes for an input file"


def load_graph(path: str, max_diagnostics: int | None = None) -> Graph:
    """The graph of a ``.keg`` or ``.kera`` file; LoadError otherwise.  With
    ``max_diagnostics``, only that many diagnostics are rendered, then a line with the count of
    the rest (``LoadError.count`` is always the full count)."""
    data = read_bytes(path)
    lim = limits.current()
    if path.endswith(".keg") or data[:4] == keg.MAGIC:
        if len(data) > lim.keg_bytes:
            raise LoadError(
                f"{path}: a .keg of {len(data):,} bytes; the limit is {lim.keg_bytes:,} "
                f"({limits.hint('keg_bytes')})"
            )
        try:
            return keg.loads(data)
        except keg.KegError as e:
            raise LoadError(f"{path}: invalid .keg: {e}") from None
    from kera import frontend

    if len(data) > lim.source_bytes:
        raise LoadError(
            f"{path}: Kera source of {len(data):,} bytes; the limit is {lim.source_bytes:,} "
            f"({limits.hint('source_bytes')})"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise LoadError(f"{path}: byte {e.start}: invalid UTF-8 (Kera source is UTF-8)") from None
    result = frontend.compile_source(text, path)
    if result.graph is None or not result.ok:
        n = len(result.diagnostics)
        shown = result.diagnostics[:max_diagnostics] if max_diagnostics else result.diagnostics
        rendered = frontend.render_diagnostics(shown, text, path)
        if len(shown) < n:
            rendered += f"{path}: ... and {n - len(shown)} more (kerac check {path} lists all)\n"
        raise LoadError(f"{path}: {n} error(s)", rendered, n)
    return result.graph
