"""Positions: byte offsets into the UTF-8 source <-> LSP positions (line, UTF-16 unit).

The front end counts in bytes (every span is a byte range of the UTF-8 encoding); the protocol
counts lines and UTF-16 code units within a line.  :class:`LineMap` converts both ways for one
text; it is rebuilt per document version (a ``find`` per line), and converting one position
decodes only the bytes of its line.  A position past the end of a line clamps to the line's
end, and one inside a character (the second half of a surrogate pair, or inside a multi-byte
UTF-8 sequence) to that character's start, so no client position makes a conversion fail.
"""

from __future__ import annotations

import bisect

UTF8, UTF16, UTF32 = "utf-8", "utf-16", "utf-32"  # the protocol's position encodings


def units(text: str, encoding: str = UTF16) -> int:
    """Code units of ``text`` in a position encoding (UTF-16: a character above U+FFFF is
    two; UTF-32: one per character; UTF-8: its bytes)."""
    if encoding == UTF32:
        return len(text)
    if encoding == UTF8:
        return len(text.encode("utf-8", "surrogateescape"))
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _char_units(ch: str, encoding: str) -> int:
    if encoding == UTF32:
        return 1
    if encoding == UTF8:
        return len(ch.encode("utf-8", "surrogateescape"))
    return 2 if ord(ch) > 0xFFFF else 1


def line_starts(data: bytes) -> list[int]:
    starts = [0]
    find, append = data.find, starts.append
    i = find(b"\n")
    while i >= 0:
        append(i + 1)
        i = find(b"\n", i + 1)
    return starts


class LineMap:
    """Line starts of a UTF-8 source, and conversions between offsets and positions in one
    of the protocol's position encodings (UTF-16 unless the client chose another)."""

    def __init__(self, data: bytes, encoding: str = UTF16, starts: list[int] | None = None) -> None:
        self.data = data
        self.encoding = encoding
        self.starts = starts if starts is not None else line_starts(data)

    def edited(self, start: int, end: int, text: bytes) -> LineMap:
        """The map of the text after ``data[start:end] = text`` (line starts shifted, not
        searched again)."""
        data = self.data[:start] + text + self.data[end:]
        old = self.starts
        lo, hi = bisect.bisect_right(old, start), bisect.bisect_right(old, end)
        delta = len(text) - (end - start)
        inner = [start + i + 1 for i, b in enumerate(text) if b == 0x0A]
        return LineMap(data, self.encoding, [*old[:lo], *inner, *(s + delta for s in old[hi:])])

    def line_of(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset) - 1

    def line_end(self, line: int) -> int:
        """The offset of the end of ``line``, before its newline."""
        if line + 1 < len(self.starts):
            return self.starts[line + 1] - 1
        return len(self.data)

    def position(self, offset: int) -> tuple[int, int]:
        """(line, UTF-16 character), both 0-based, of a byte offset."""
        offset = max(0, min(offset, len(self.data)))
        line = self.line_of(offset)
        prefix = self.data[self.starts[line] : offset]
        if prefix.isascii() or self.encoding == UTF8:
            return line, len(prefix)
        return line, units(prefix.decode("utf-8", "surrogateescape"), self.encoding)

    def offset(self, line: int, character: int) -> int:
        """The byte offset of an LSP position (clamped into the text)."""
        if line < 0:
            return 0
        if line >= len(self.starts):
            return len(self.data)
        start, end = self.starts[line], self.line_end(line)
        raw = self.data[start:end]
        if raw.isascii():
            return start + min(max(character, 0), len(raw))
        seen = 0
        pos = start
        for ch in raw.decode("utf-8", "surrogateescape"):
            width = _char_units(ch, self.encoding)
            if seen + width > character:
                break
            seen += width
            pos += len(ch.encode("utf-8", "surrogateescape"))
        return pos

    def char_column(self, line: int, column: int) -> int:
        """The byte offset of a 1-based line and 1-based *character* column (how compiler
        diagnostics and keracheck reports count), clamped into the line."""
        if not 1 <= line <= len(self.starts):
            return len(self.data)
        start, end = self.starts[line - 1], self.line_end(line - 1)
        chars = self.data[start:end].decode("utf-8", "surrogateescape")[: max(column - 1, 0)]
        return start + len(chars.encode("utf-8", "surrogateescape"))
