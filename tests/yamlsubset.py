"""A strict reader of the YAML that GitHub Actions files use, for the tests of ``action.yml``
and of the workflow in ``docs/ci-github-actions.md`` (PyYAML is not a dependency).

The subset: block mappings and sequences by indentation (a sequence may sit at its key's
indentation), ``- key: value`` items, plain, single- and double-quoted scalars, ``|``/``|-``
literal and ``>``/``>-`` folded block scalars, flow sequences of scalars (``[a, b]``), and
``#`` comments.  Scalars stay strings (``true`` is ``"true"``); an empty value is None.
Anything outside the subset -- tabs, anchors, flow mappings, a plain scalar holding ``": "``,
a bad indentation -- raises :class:`YamlError` with the line number, so a test never reads a
file differently from GitHub without failing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

KEY = re.compile(r"""^(?P<key>[A-Za-z0-9_.$-]+|"[^"]*"|'[^']*'):(?:[ ]+(?P<rest>.*)|$)""")
BLOCK = {"|": ("\n", True), "|-": ("\n", False), ">": (" ", True), ">-": (" ", False)}


class YamlError(ValueError):
    """A line the subset does not read."""


@dataclass
class _Line:
    number: int  # 1-based
    indent: int
    text: str  # without the indentation


def load(text: str) -> Any:
    """The document ``text`` as dicts, lists, strings and None."""
    raw = text.splitlines()
    for i, line in enumerate(raw, 1):
        if "\t" in line[: len(line) - len(line.lstrip())]:
            raise YamlError(f"line {i}: a tab in the indentation")
    reader = _Reader(raw)
    first = reader.peek()
    if first is None:
        return None
    value = reader.block(first.indent)
    left = reader.peek()
    if left is not None:
        raise YamlError(f"line {left.number}: unexpected indentation")
    return value


class _Reader:
    def __init__(self, raw: list[str]) -> None:
        self.raw = raw
        self.pos = 0
        self.pending: _Line | None = None  # the mapping that starts on a '- ' line

    def peek(self) -> _Line | None:
        """The next line with content (comments and blank lines skipped)."""
        if self.pending is not None:
            return self.pending
        while self.pos < len(self.raw):
            line = self.raw[self.pos]
            body = line.lstrip(" ")
            if body and not body.startswith("#"):
                return _Line(self.pos + 1, len(line) - len(body), body.rstrip())
            self.pos += 1
        return None

    def take(self) -> _Line:
        line = self.peek()
        assert line is not None
        if self.pending is not None:
            self.pending = None
        else:
            self.pos += 1
        return line

    def block(self, indent: int) -> Any:
        line = self.peek()
        assert line is not None
        if _is_item(line.text):
            return self.sequence(indent)
        return self.mapping(indent)

    def sequence(self, indent: int) -> list[Any]:
        out: list[Any] = []
        while (line := self.peek()) is not None and line.indent == indent and _is_item(line.text):
            self.take()
            rest = line.text[1:].lstrip(" ")
            if not rest:
                nxt = self.peek()
                out.append(self.block(nxt.indent) if nxt and nxt.indent > indent else None)
            elif KEY.match(rest):
                self.pending = _Line(line.number, indent + len(line.text) - len(rest), rest)
                out.append(self.mapping(self.pending.indent))
            else:
                out.append(_scalar(rest, line.number))
        return out

    def mapping(self, indent: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        while (line := self.peek()) is not None and line.indent == indent:
            if _is_item(line.text):
                raise YamlError(f"line {line.number}: a sequence item inside a mapping")
            self.take()
            m = KEY.match(line.text)
            if m is None:
                raise YamlError(f"line {line.number}: expected 'key: value', got {line.text!r}")
            key = _unquote(m["key"])
            if key in out:
                raise YamlError(f"line {line.number}: key {key!r} given twice")
            out[key] = self.value(m["rest"], indent, line.number)
        line = self.peek()
        if line is not None and line.indent > indent:
            raise YamlError(f"line {line.number}: unexpected indentation")
        return out

    def value(self, rest: str | None, indent: int, number: int) -> Any:
        rest = _strip_comment(rest or "")
        if rest in BLOCK:
            return self.block_scalar(rest, indent)
        if rest:
            return _scalar(rest, number)
        nxt = self.peek()
        if nxt is None:
            return None
        if nxt.indent > indent or (nxt.indent == indent and _is_item(nxt.text)):
            return self.block(nxt.indent)
        return None

    def block_scalar(self, style: str, indent: int) -> str:
        lines: list[str] = []
        own: int | None = None
        while self.pos < len(self.raw):
            line = self.raw[self.pos]
            body = line.lstrip(" ")
            depth = len(line) - len(body)
            if body and depth <= indent:
                break
            if body and own is None:
                own = depth
            lines.append(line[own:] if body and own is not None else "")
            self.pos += 1
        while lines and not lines[-1]:
            lines.pop()
        joiner, keep_newline = BLOCK[style]
        text = joiner.join(lines) if joiner == "\n" else _fold(lines)
        return text + ("\n" if keep_newline and text else "")


def _is_item(text: str) -> bool:
    return text == "-" or text.startswith("- ")


def _fold(lines: list[str]) -> str:
    """Folded style: lines join with a space, an empty line is a newline."""
    out = ""
    for line in lines:
        if not line:
            out += "\n"
        elif out and not out.endswith("\n"):
            out += " " + line
        else:
            out += line
    return out


def _strip_comment(text: str) -> str:
    """``value  # comment`` -> ``value`` (a ``#`` inside quotes is kept)."""
    quote = ""
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'" and (i == 0 or text[i - 1] == " "):
            quote = ch
        elif ch == "#" and (i == 0 or text[i - 1] == " "):
            return text[:i].rstrip()
    return text.rstrip()


def _scalar(text: str, number: int) -> Any:
    text = _strip_comment(text)
    if text in ("", "~", "null"):
        return None
    if text[0] in "\"'":
        if len(text) < 2 or text[-1] != text[0]:
            raise YamlError(f"line {number}: unterminated quoted scalar {text!r}")
        return _unquote(text)
    if text.startswith("["):
        if not text.endswith("]"):
            raise YamlError(f"line {number}: a flow sequence on one line only")
        return [_scalar(part.strip(), number) for part in text[1:-1].split(",") if part.strip()]
    if text[0] in "{&*!%@`|>" or ": " in text:
        raise YamlError(f"line {number}: outside the YAML subset: {text!r}")
    return text


def _unquote(text: str) -> str:
    if text[:1] == "'":
        return text[1:-1].replace("''", "'")
    if text[:1] == '"':
        body = text[1:-1]
        return re.sub(r'\\(["\\n])', lambda m: "\n" if m[1] == "n" else m[1], body)
    return text
