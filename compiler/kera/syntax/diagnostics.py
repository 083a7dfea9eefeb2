"""Diagnostics: a stable code, a message and a byte span, rendered with the source line.

Spans are byte offsets into the UTF-8 source, ``start <= end`` (an empty span points between
two bytes, e.g. where a missing ``;`` belongs).  Rendering turns them into
``file:line:col: error[E0xxx]: message`` with 1-based lines and 1-based *character* columns,
followed by the source line and a caret line under the span (clipped to the first line)::

    saxpy.kera:2:14: error[E0201]: add needs operands of one dtype, got f32 and i32
        2 |     let y = a + 1i32;
          |             ^^^^^^^^

Codes: ``E00xx`` syntax (lexer, parser), ``E01xx`` names and items, ``E02xx`` typing rules of
``kera.ops`` reported as they are, ``E03xx`` front-end typing (literals, coercions, tuples,
destructuring, ``if``, indexing, loops), ``E012x`` memory spaces and effects, ``E04xx``
ownership and borrows.  A diagnostic may carry *notes* (secondary spans with a label, such as
"moved here") and a *hint* (the fix), rendered after the primary span::

    f.kera:3:5: error[E0401]: use of 'x' after it was moved
     3 |     x + d
       |     ^
    f.kera:2:22: note: 'x' moved here
     2 |     let d = transfer(x, to = device);
       |                      ^
      = help: transfer a copy to keep 'x': transfer(copy(x), to = device)

The table with one line per code is in ``docs/language.md``.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Note:
    """A secondary span of a diagnostic and what it shows there ("moved here")."""

    start: int
    end: int
    message: str


@dataclass(frozen=True, slots=True)
class Diagnostic:
    code: str
    message: str
    start: int
    end: int
    notes: tuple[Note, ...] = ()
    hint: str = ""  # the fix, in words or as code to write

    def key(self) -> tuple[int, int, str, str]:
        return (self.start, self.end, self.code, self.message)


def encode_source(text: str | bytes) -> bytes:
    """The UTF-8 bytes of a source text (lone surrogates pass through as their bytes)."""
    if isinstance(text, bytes):
        return text
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def decode_source(data: bytes) -> str:
    """Inverse of :func:`encode_source` for the bytes it produced."""
    try:
        return data.decode("utf-8", "surrogateescape")
    except UnicodeDecodeError:
        return data.decode("utf-8", "surrogatepass")


class LineIndex:
    """Byte offset -> (line, character column), both 1-based."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.starts = [0]
        i = data.find(b"\n")
        while i >= 0:
            self.starts.append(i + 1)
            i = data.find(b"\n", i + 1)

    def line_of(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset) - 1

    def line_bytes(self, line: int) -> bytes:
        start = self.starts[line]
        end = self.starts[line + 1] - 1 if line + 1 < len(self.starts) else len(self.data)
        return self.data[start:end].rstrip(b"\r")

    def position(self, offset: int) -> tuple[int, int]:
        offset = max(0, min(offset, len(self.data)))
        line = self.line_of(offset)
        prefix = self.data[self.starts[line] : offset]
        return line + 1, len(prefix.decode("utf-8", "replace")) + 1


def _caret_line(line: str, col: int, width: int) -> str:
    pad = "".join("\t" if ch == "\t" else " " for ch in line[: col - 1])
    return pad + "^" * max(1, min(width, len(line) - (col - 1)))


def _excerpt(start: int, end: int, index: LineIndex, path: str, head: str) -> str:
    line, col = index.position(start)
    text = index.line_bytes(line - 1).decode("utf-8", "replace")
    end_line, end_col = index.position(end)
    width = end_col - col if end_line == line else len(text) - (col - 1)
    gutter = " " * len(str(line))
    return (
        f"{path}:{line}:{col}: {head}\n"
        f" {line} | {text}\n"
        f" {gutter} | {_caret_line(text, col, width)}\n"
    )


def render(diag: Diagnostic, index: LineIndex, path: str) -> str:
    out = _excerpt(diag.start, diag.end, index, path, f"error[{diag.code}]: {diag.message}")
    for note in diag.notes:
        out += _excerpt(note.start, note.end, index, path, f"note: {note.message}")
    return out + (f"  = help: {diag.hint}\n" if diag.hint else "")


def render_all(diags: Iterable[Diagnostic], source: str | bytes, path: str) -> str:
    index = LineIndex(encode_source(source))
    return "".join(render(d, index, path) for d in diags)


def sort_unique(diags: Iterable[Diagnostic]) -> list[Diagnostic]:
    """Diagnostics in source order, exact duplicates (same code, span, message) removed."""
    seen: dict[tuple[int, int, str, str], Diagnostic] = {}
    for d in diags:
        seen.setdefault(d.key(), d)
    return [seen[k] for k in sorted(seen)]
