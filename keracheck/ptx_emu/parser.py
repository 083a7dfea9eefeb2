"""PTX text -> :class:`Module`: the module-level subset the emulator reads.

Accepted shape (everything else is refused with :class:`PtxUnsupportedError`)::

    .version X.Y
    .target sm_NN
    .address_size 64
    [.visible] .entry NAME ( .param .TYPE NAME, ... ) {
        .reg .TYPE %a, %b<N>;          // %b<N> declares %b0 .. %b(N-1)
        LABEL:
        [@[!]%p] opcode.mod.mod  operand, ...;
    }

Operands: registers (``%r1``, special registers such as ``%tid.x``), ``!%p`` (negated
predicate), ``%p|%q`` (setp's pair), ``_`` (sink), immediates (decimal, ``0x`` hex, ``0f``/``0d``
hex floats), memory ``[%rd1]``, ``[%rd1+8]``, ``[param]``, and labels (for ``bra``).  Comments
(``//`` and ``/* */``) are stripped; line numbers always refer to the original text.

The parser checks syntax only; instruction names, modifiers, types and operand kinds are
checked when a kernel is compiled (:mod:`keracheck.ptx_emu.isa`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from keracheck.ptx_emu.errors import PtxSyntaxError, PtxUnsupportedError

REG_TYPES = frozenset(
    {"pred", "b16", "u16", "s16", "b32", "u32", "s32", "f32", "b64", "u64", "s64", "f64"}
)
PARAM_TYPES = frozenset({"b32", "u32", "s32", "f32", "b64", "u64", "s64", "f64"})


@dataclass(frozen=True, slots=True)
class Reg:
    """A register operand; ``negated`` only for predicates (``!%p``)."""

    name: str
    negated: bool = False


@dataclass(frozen=True, slots=True)
class RegPair:
    """``p|q``: setp's two predicate destinations (either may be the sink ``_``)."""

    first: str
    second: str


@dataclass(frozen=True, slots=True)
class Imm:
    """An immediate as written (``-1``, ``0x10``, ``0f3F800000``, ``0d...``)."""

    text: str


@dataclass(frozen=True, slots=True)
class Mem:
    """A memory operand ``[base+offset]``; base is a register or a kernel parameter."""

    base: str
    offset: int


@dataclass(frozen=True, slots=True)
class Label:
    """A branch target."""

    name: str


Operand = Reg | RegPair | Imm | Mem | Label


@dataclass(frozen=True, slots=True)
class Instruction:
    """One statement: ``[@guard] opcode.mods operands``; ``line`` is 1-based."""

    line: int
    source: str
    opcode: str
    mods: tuple[str, ...]
    operands: tuple[Operand, ...]
    guard: Reg | None


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    type: str


@dataclass(frozen=True)
class Kernel:
    """One ``.entry``: parameters, register declarations, body and label -> body index."""

    name: str
    line: int
    params: tuple[Param, ...]
    regs: Mapping[str, str]
    body: tuple[Instruction, ...]
    labels: Mapping[str, int]


@dataclass(frozen=True)
class Module:
    """A parsed PTX module."""

    version: str
    target: str
    address_size: int
    kernels: Mapping[str, Kernel]


_TOKEN = re.compile(
    r"""
    (?P<fhex>0[fF][0-9a-fA-F]{8}|0[dD][0-9a-fA-F]{16})(?![\w.])
  | (?P<hex>0[xX][0-9a-fA-F]+U?)(?![\w.])
  | (?P<dfloat>\d+\.\d+)(?![\w.])
  | (?P<dec>\d+U?)(?![\w.])
  | (?P<ident>[%$_a-zA-Z][\w$]*(?:\.[\w$]+)*)
  | (?P<directive>\.[a-zA-Z_]\w*)
  | (?P<punct>[;,{}()\[\]@!:+\-|<>])
  | (?P<space>\s+)
    """,
    re.VERBOSE,
)


class Token(NamedTuple):
    kind: str
    text: str
    line: int


def strip_comments(text: str) -> str:
    """Blank out ``//`` and ``/* */`` comments, keeping every newline (line numbers hold)."""

    def blank(m: re.Match[str]) -> str:
        return re.sub(r"[^\n]", " ", m.group(0))

    return re.sub(r"//[^\n]*|/\*.*?\*/", blank, text, flags=re.DOTALL)


def tokenize(text: str, lines: list[str]) -> list[Token]:
    """Split comment-free PTX into tokens with their line numbers (no token spans lines)."""
    tokens: list[Token] = []
    for number, line in enumerate(text.split("\n"), start=1):
        pos = 0
        for m in _TOKEN.finditer(line):
            if m.start() != pos:
                break
            pos = m.end()
            kind = m.lastgroup or ""
            if kind != "space":
                tokens.append(Token(kind, m.group(0), number))
        if pos != len(line):
            raise PtxSyntaxError(f"unexpected character {line[pos]!r}", number, _src(lines, number))
    return tokens


def _src(lines: list[str], line: int) -> str:
    return lines[line - 1] if 0 < line <= len(lines) else ""


class _Parser:
    """Recursive descent over the token list (one method per construct)."""

    def __init__(self, tokens: list[Token], lines: list[str]) -> None:
        self.toks = tokens
        self.lines = lines
        self.i = 0

    # -- token helpers ---------------------------------------------------------------------
    def peek(self, k: int = 0) -> Token | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def next(self, what: str) -> Token:
        tok = self.peek()
        if tok is None:
            last = self.toks[-1].line if self.toks else 0
            raise PtxSyntaxError(f"unexpected end of text, expected {what}", last)
        self.i += 1
        return tok

    def expect(self, text: str) -> Token:
        tok = self.next(repr(text))
        if tok.text != text:
            self.fail(f"expected {text!r}, found {tok.text!r}", tok)
        return tok

    def accept(self, text: str) -> bool:
        tok = self.peek()
        if tok is not None and tok.text == text:
            self.i += 1
            return True
        return False

    def fail(self, message: str, tok: Token) -> None:
        raise PtxSyntaxError(message, tok.line, _src(self.lines, tok.line))

    def refuse(self, message: str, tok: Token) -> None:
        raise PtxUnsupportedError(message, tok.line, _src(self.lines, tok.line))

    def ident(self, what: str) -> Token:
        tok = self.next(what)
        if tok.kind != "ident":
            self.fail(f"expected {what}, found {tok.text!r}", tok)
        return tok

    # -- module ----------------------------------------------------------------------------
    def module(self) -> Module:
        version, target, address_size = "", "", 0
        kernels: dict[str, Kernel] = {}
        while (tok := self.peek()) is not None:
            if tok.text == ".version":
                self.i += 1
                version = self.next("a version number").text
            elif tok.text == ".target":
                self.i += 1
                target = self.target()
            elif tok.text == ".address_size":
                self.i += 1
                address_size = self.address_size()
            elif tok.text in (".visible", ".entry"):
                kernel = self.kernel()
                if kernel.name in kernels:
                    self.fail(f"kernel {kernel.name!r} defined twice", tok)
                kernels[kernel.name] = kernel
            else:
                self.refuse(f"module-level statement {tok.text!r} is outside the subset", tok)
        if not version or not target or address_size != 64:
            raise PtxSyntaxError("module needs .version, .target and .address_size 64")
        return Module(version, target, address_size, kernels)

    def target(self) -> str:
        tok = self.ident("a target name")
        if not re.fullmatch(r"sm_\d+[a-z]?", tok.text):
            self.refuse(f"target {tok.text!r} is outside the subset (sm_NN only)", tok)
        if self.accept(","):
            self.refuse("target options are outside the subset", tok)
        return tok.text

    def address_size(self) -> int:
        tok = self.next("64")
        if tok.text != "64":
            self.refuse("only .address_size 64 is supported", tok)
        return 64

    # -- kernel ----------------------------------------------------------------------------
    def kernel(self) -> Kernel:
        self.accept(".visible")
        start = self.expect(".entry")
        name = self.ident("a kernel name").text
        params = self.params()
        tok = self.peek()
        if tok is not None and tok.kind == "directive":
            self.refuse(f"kernel directive {tok.text!r} is outside the subset", tok)
        self.expect("{")
        regs: dict[str, str] = {}
        body: list[Instruction] = []
        labels: dict[str, int] = {}
        while not self.accept("}"):
            self.statement(regs, body, labels)
        return Kernel(name, start.line, tuple(params), regs, tuple(body), labels)

    def params(self) -> list[Param]:
        self.expect("(")
        params: list[Param] = []
        if self.accept(")"):
            return params
        while True:
            self.expect(".param")
            tok = self.next("a parameter type")
            ty = tok.text.lstrip(".")
            if tok.kind != "directive" or ty not in PARAM_TYPES:
                self.refuse(f"parameter type {tok.text!r} is outside the subset", tok)
            name = self.ident("a parameter name").text
            if any(p.name == name for p in params):
                self.fail(f"parameter {name!r} declared twice", tok)
            params.append(Param(name, ty))
            if self.accept(")"):
                return params
            self.expect(",")

    def statement(
        self, regs: dict[str, str], body: list[Instruction], labels: dict[str, int]
    ) -> None:
        tok = self.next("a statement")
        if tok.text == ".reg":
            self.reg_decl(regs, tok)
        elif tok.kind == "directive":
            self.refuse(f"directive {tok.text!r} is outside the subset", tok)
        elif tok.text == "{":
            self.refuse("nested scopes are outside the subset", tok)
        elif tok.kind == "ident" and self.accept(":"):
            if tok.text in labels:
                self.fail(f"label {tok.text!r} defined twice", tok)
            labels[tok.text] = len(body)
        elif tok.text == "@" or tok.kind == "ident":
            self.i -= 1
            body.append(self.instruction())
        else:
            self.fail(f"unexpected {tok.text!r}", tok)

    def reg_decl(self, regs: dict[str, str], start: Token) -> None:
        tok = self.next("a register type")
        ty = tok.text.lstrip(".")
        if tok.kind != "directive" or ty not in REG_TYPES:
            self.refuse(f"register type {tok.text!r} is outside the subset", tok)
        while True:
            name_tok = self.ident("a register name")
            names = [name_tok.text]
            if self.accept("<"):
                count = self.next("a register count")
                if count.kind != "dec":
                    self.fail("expected a register count", count)
                names = [f"{name_tok.text}{k}" for k in range(int(count.text))]
                self.expect(">")
            for name in names:
                if name in regs:
                    self.fail(f"register {name!r} declared twice", name_tok)
                regs[name] = ty
            if self.accept(";"):
                return
            self.expect(",")

    # -- instructions ----------------------------------------------------------------------
    def instruction(self) -> Instruction:
        guard: Reg | None = None
        if self.accept("@"):
            negated = self.accept("!")
            guard = Reg(self.ident("a guard predicate").text, negated)
        head = self.ident("an instruction")
        opcode, *mods = head.text.split(".")
        operands: list[Operand] = []
        if not self.accept(";"):
            while True:
                operands.append(self.operand(opcode))
                if self.accept(";"):
                    break
                self.expect(",")
        return Instruction(
            head.line, _src(self.lines, head.line), opcode, tuple(mods), tuple(operands), guard
        )

    def operand(self, opcode: str) -> Operand:
        tok = self.next("an operand")
        if tok.text == "[":
            return self.memory()
        if tok.text == "{":
            self.refuse("vector operands are outside the subset", tok)
        if tok.text == "!":
            return Reg(self.ident("a predicate").text, negated=True)
        if tok.text == "-":
            num = self.next("a number")
            if num.kind not in ("dec", "hex"):
                self.fail("expected an integer after '-'", num)
            return Imm("-" + num.text)
        if tok.kind in ("dec", "hex", "fhex", "dfloat"):
            return Imm(tok.text)
        if tok.kind != "ident":
            self.fail(f"unexpected operand {tok.text!r}", tok)
        if opcode == "bra":
            return Label(tok.text)
        if self.accept("|"):
            return RegPair(tok.text, self.ident("a predicate").text)
        return Reg(tok.text)

    def memory(self) -> Mem:
        base = self.ident("an address register or parameter")
        offset = 0
        if self.accept("+"):
            sign = -1 if self.accept("-") else 1
            offset = sign * self.integer()
        elif self.accept("-"):
            offset = -self.integer()
        self.expect("]")
        return Mem(base.text, offset)

    def integer(self) -> int:
        tok = self.next("an integer")
        if tok.kind not in ("dec", "hex"):
            self.fail("expected an integer offset", tok)
        return int(tok.text.rstrip("U"), 0)


def parse(text: str) -> Module:
    """Parse PTX text into a :class:`Module` (syntax only; see the module docstring)."""
    lines = text.splitlines()
    tokens = tokenize(strip_comments(text), lines)
    return _Parser(tokens, lines).module()
