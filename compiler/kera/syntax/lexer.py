r"""The lossless lexer: UTF-8 bytes -> tokens covering every byte, trivia included.

``lex(data)`` returns :class:`Tokens`: parallel lists ``kinds`` and ``starts`` (byte offsets;
``starts`` has one extra entry, ``len(data)``, so token ``i`` is ``data[starts[i]:starts[i+1]]``).
Concatenating the tokens gives back the input, byte for byte, for any input.

Token rules (longest match, first rule wins):

* whitespace ``[ \t\r\n]+``; ``// ...`` to the end of the line; ``/* ... */`` (not nested);
* identifiers ``[A-Za-z_][A-Za-z0-9_]*``; keywords ``fn export let as true false if else for in
  with``; the words ``inf`` and ``nan`` are float literals;
* numbers: one token for ``0x``/``0b`` literals or a decimal with optional ``.digits`` and
  exponent, plus any identifier characters stuck to it (the suffix) — so ``1.5f64``,
  ``0xffu32``, and also the malformed ``1e`` or ``3u8``, are each one token; malformed ones
  are reported here (E0003 malformed number, E0004 bad suffix) and keep their number kind.
  Hex literals take integer suffixes only (``0x1f32`` is the integer 0x1f32).  Digits directly
  after a single ``.`` lex as a bare integer (a field number), so ``t.0.1`` is two field
  accesses; digits after ``..`` are an ordinary number, so ``2..6u32`` is ``2``, ``..``,
  ``6u32``.  A number never ends in ``.`` (``1.`` is not a float), so ``1..5`` is ``1``,
  ``..``, ``5``;
* punctuation, two-character operators first (``-> << >> == != <= >= && || ..``), and ``@``
  (before a memory space);
* anything else is an error token: a run of such bytes becomes one ``ERROR_TOKEN`` and one
  E0001 diagnostic (a valid multi-byte UTF-8 character is named, invalid UTF-8 is shown as
  bytes).  An unterminated ``/*`` comment runs to the end of the input and is reported (E0002).
  Comments must be valid UTF-8 (E0001 otherwise).

Lexing never fails and never stops early: every error is a token plus a diagnostic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import accumulate

from kera import limits
from kera.ir import NAME_MAX
from kera.syntax.diagnostics import Diagnostic
from kera.syntax.kinds import KEYWORDS, PUNCT, SyntaxKind

K = SyntaxKind

#: the token rules in order (the first that matches wins), one regex group each
_RULES: list[bytes] = [
    rb"[ \t\r\n]+",  # 1 whitespace
    rb"[A-Za-z_][A-Za-z0-9_]*",  # 2 identifier or keyword
    rb"->|<<|>>|==|!=|<=|>=|&&|\|\||\.\.|[(){}\[\],;:.=+\-*%&|^~!<>@]",  # 3 punctuation
    rb"(?<=\.)(?<!\.\.)[0-9]+",  # 4 field number after one '.'
    rb"0[xXbBoO][0-9A-Za-z_]*",  # 5 radix number (+suffix)
    rb"[0-9][0-9A-Za-z_]*(?:(?<=[eE])[+-][0-9][0-9A-Za-z_]*)?"
    rb"(?:\.[0-9][0-9A-Za-z_]*(?:(?<=[eE])[+-][0-9][0-9A-Za-z_]*)?)?",  # 6 decimal (+suffix)
    rb"//[^\n]*",  # 7 line comment
    rb"/\*.*?(?:\*/|\Z)",  # 8 block comment
    rb"/",  # 9 slash
    rb"[^\t\r\n !%&(->@-\[\]^_a-~]+",  # 10 error run
    rb".",  # 11 anything else (defensive)
]
_TOKEN = re.compile(b"|".join(b"(" + rule + b")" for rule in _RULES), re.DOTALL)
#: the same tokens without groups: ``findall`` gives their texts (see lex)
_TOKEN_TEXT = re.compile(b"|".join(b"(?:" + rule + b")" for rule in _RULES), re.DOTALL)
# No token pattern repeats a group: re keeps backtracking state per iteration of a repeated
# group (~140 bytes per character), so `(?:[eE][+-][0-9]|[0-9A-Za-z_])*` made a 10 MB literal
# take 3 GB, and the old comment and error-run forms did the same for comments and stray bytes.
# A number is a run of one class with at most one "e+"/"e-" per part, taken by a lookbehind
# (a second sign starts a new token: "1e+5e-6" is the malformed "1e+5e", "-", "6"); a comment is a lazy run
# to the first "*/" (or the end); an error run is one class (printable ASCII except
# " # $ ' ? \ `, and the whitespace the lexer accepts, excluded).  Possessive `*+` would also
# do, but CPython 3.11.2 — Debian 12's Python — mis-matches possessive groups.
_WS, _IDENT, _PUNCT, _FIELD, _RADIX, _DEC, _LINE, _BLOCK, _SLASH, _ERR = range(1, 11)

_SUFFIXES = ("i32", "i64", "u32", "u64", "f32", "f64")
_INT_SUFFIX = r"(?P<suffix>[A-Za-z_][A-Za-z0-9_]*)?"
_VALID_RADIX = re.compile(
    rb"0(?:[xX]_*[0-9a-fA-F][0-9a-fA-F_]*|[bB]_*[01][01_]*)(?P<suffix>[A-Za-z_][A-Za-z0-9_]*)?"
)
_VALID_DEC = re.compile(
    rb"[0-9][0-9_]*(?P<frac>\.[0-9][0-9_]*)?(?P<exp>[eE][+-]?_*[0-9][0-9_]*)?"
    rb"(?P<suffix>[A-Za-z_][A-Za-z0-9_]*)?"
)


@dataclass(slots=True)
class Tokens:
    """Every token of a source, trivia included, as parallel lists (see the module doc)."""

    data: bytes
    kinds: list[int] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    #: every token's bytes, when the lexer had them at hand and each text has one kind (a
    #: source without lexical errors); empty otherwise
    texts: list[bytes] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.kinds)

    def text(self, i: int) -> bytes:
        return self.data[self.starts[i] : self.starts[i + 1]]


def lex(data: bytes) -> Tokens:
    """The tokens of ``data``.  Most sources have no lexical error, and a token's kind then
    depends on its text alone, so the texts are found in one ``findall`` and each distinct
    text is classified once; a source where any text would be reported (or could depend on
    its context) is lexed token by token instead, which gives the same tokens."""
    return _lex_clean(data) or _lex_each(data)


def _lex_clean(data: bytes) -> Tokens | None:
    texts = _TOKEN_TEXT.findall(data)
    kind_of: dict[bytes, int] = {}
    for text in set(texts):
        kind = _clean_kind(text)
        if kind is None:
            return None
        kind_of[text] = kind
    starts = list(accumulate(map(len, texts), initial=0))
    if starts[-1] != len(data):  # every byte is in a token (the last rule takes any byte)
        return None
    return Tokens(data, list(map(kind_of.__getitem__, texts)), starts, texts=texts)


def _clean_kind(text: bytes) -> int | None:
    """The kind of a token with this text wherever it stands, or None when lexing it would
    report something (or its kind could depend on what comes before it)."""
    m = _TOKEN.match(text)
    if m is None or m.end() != len(text):
        return None
    g = m.lastindex
    if g == _WS:
        return int(K.WHITESPACE)
    if g == _IDENT:
        return None if len(text) > NAME_MAX else KEYWORDS.get(text, int(K.IDENT))
    if g == _PUNCT:
        return PUNCT[text]
    diags: list[Diagnostic] = []
    kind = _rare(g, text, 0, diags)  # a field number (rule 4) is an ordinary integer here
    return None if diags else kind


def _lex_each(data: bytes) -> Tokens:
    toks = Tokens(data)
    kinds, starts, diags = toks.kinds, toks.starts, toks.diagnostics
    kw_get, punct = KEYWORDS.get, PUNCT
    ident, ws = int(K.IDENT), int(K.WHITESPACE)
    for m in _TOKEN.finditer(data):
        g = m.lastindex
        starts.append(m.start())
        if g == _WS:
            kinds.append(ws)
        elif g == _IDENT:
            kinds.append(kw_get(m.group(), ident))
            if m.end() - m.start() > NAME_MAX:
                diags.append(
                    Diagnostic(
                        "E0006",
                        f"identifier of {m.end() - m.start():,} characters; "
                        f"names are at most {NAME_MAX}",
                        m.start(),
                        m.end(),
                    )
                )
        elif g == _PUNCT:
            kinds.append(punct[m.group()])
        else:
            kinds.append(_rare(g, m.group(), m.start(), diags))
    starts.append(len(data))
    return toks


def _rare(group: int | None, text: bytes, start: int, diags: list[Diagnostic]) -> int:
    if group == _FIELD:
        return K.INT_NUMBER
    if group == _RADIX:
        return _check_number(_VALID_RADIX.fullmatch(text), text, start, diags, False)
    if group == _DEC:
        return _check_number(_VALID_DEC.fullmatch(text), text, start, diags, True)
    if group == _LINE:
        _check_utf8(text, start, diags)
        return K.LINE_COMMENT
    if group == _BLOCK:
        if len(text) < 4 or not text.endswith(b"*/"):
            diags.append(Diagnostic("E0002", "unterminated block comment", start, start + 2))
        _check_utf8(text, start, diags)
        return K.BLOCK_COMMENT
    if group == _SLASH:
        return K.SLASH
    diags.append(Diagnostic("E0001", _bad_bytes_message(text), start, start + len(text)))
    return K.ERROR_TOKEN


def _check_number(
    m: re.Match[bytes] | None, text: bytes, start: int, diags: list[Diagnostic], decimal: bool
) -> int:
    end = start + len(text)
    limit = limits.current().literal_chars
    if len(text) > limit:
        diags.append(
            Diagnostic(
                "E0005",
                f"number literal of {len(text):,} characters; the limit is {limit:,} "
                f"({limits.hint('literal_chars')})",
                start,
                end,
            )
        )
        return K.INT_NUMBER
    if m is None:
        diags.append(Diagnostic("E0003", f"malformed number literal '{text.decode()}'", start, end))
        return K.INT_NUMBER
    is_float = decimal and (m.group("frac") is not None or m.group("exp") is not None)
    suffix = (m.group("suffix") or b"").decode()
    if suffix and suffix not in _SUFFIXES:
        diags.append(
            Diagnostic(
                "E0004",
                f"invalid suffix '{suffix}' on number literal "
                "(expected i32, i64, u32, u64, f32 or f64)",
                start,
                end,
            )
        )
    elif suffix and suffix[0] == "f" and not decimal:
        diags.append(Diagnostic("E0004", "a hex or binary literal cannot be a float", start, end))
    elif suffix and suffix[0] != "f" and is_float:
        diags.append(
            Diagnostic("E0004", f"a float literal cannot take the suffix '{suffix}'", start, end)
        )
    return K.FLOAT_NUMBER if is_float or suffix in ("f32", "f64") else K.INT_NUMBER


def _check_utf8(text: bytes, start: int, diags: list[Diagnostic]) -> None:
    if text.isascii():
        return
    try:
        text.decode("utf-8")
    except UnicodeDecodeError as e:
        diags.append(
            Diagnostic("E0001", "invalid UTF-8 in a comment", start + e.start, start + e.end)
        )


def _bad_bytes_message(text: bytes) -> str:
    try:
        chars = text.decode("utf-8")
    except UnicodeDecodeError:
        shown = " ".join(f"0x{b:02x}" for b in text[:8]) + (" ..." if len(text) > 8 else "")
        return f"invalid UTF-8 bytes {shown}"
    shown = "".join(c if c.isprintable() else f"\\u{{{ord(c):x}}}" for c in chars[:8])
    many = "s" if len(chars) > 1 else ""
    return f"unexpected character{many} '{shown}'" + (" ..." if len(chars) > 8 else "")
