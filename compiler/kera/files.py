"""Loading a graph from a file: a ``.keg`` artifact or ``.kera`` source, told apart by the
suffix or the ``KEG\\0`` magic.  Every failure is one :class:`LoadError` whose message names the
file and the position (byte offset, section, or line:col through the rendered diagnostics)."""

from __future__ import annotations

from pathlib import Path

from kera import keg
from kera.ir import Graph


class LoadError(ValueError):
    """A file that cannot be read, decoded, parsed or checked.

    ``diagnostics`` holds the rendered compiler diagnostics (``file:line:col`` with caret
    lines) when the source has errors, else it is empty."""

    def __init__(self, message: str, diagnostics: str = "", count: int = 0) -> None:
        super().__init__(message)
        self.diagnostics = diagnostics
        self.count = count


def read_bytes(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise LoadError(f"{path}: cannot read: {e.strerror or e}") from None


def load_graph(path: str) -> Graph:
    data = read_bytes(path)
    if path.endswith(".keg") or data[:4] == keg.MAGIC:
        try:
            return keg.loads(data)
        except keg.KegError as e:
            raise LoadError(f"{path}: invalid .keg: {e}") from None
    from kera import frontend

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise LoadError(f"{path}: byte {e.start}: invalid UTF-8 (Kera source is UTF-8)") from None
    result = frontend.compile_source(text, path)
    if result.graph is None or not result.ok:
        rendered = frontend.render_diagnostics(result.diagnostics, text, path)
        n = len(result.diagnostics)
        raise LoadError(f"{path}: {n} error(s)", rendered, n)
    return result.graph
