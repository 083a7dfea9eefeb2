"""Syntax kinds: one integer enum for every token and node of the Kera grammar.

Tokens and nodes share one numbering (as in rust-analyzer's ``SyntaxKind``) so a green tree is
a tree of ``(kind, ...)`` records with no second type tag.  The values are internal to one
process (trees are never serialised), so adding a kind is free.
"""

from __future__ import annotations

import enum


class SyntaxKind(enum.IntEnum):
    # trivia: kept in the tree, skipped by the parser
    WHITESPACE = 0
    LINE_COMMENT = 1
    BLOCK_COMMENT = 2
    ERROR_TOKEN = 3  # bytes the lexer could not make sense of (reported by the lexer)
    # tokens
    IDENT = 4
    INT_NUMBER = 5
    FLOAT_NUMBER = 6  # includes the words inf and nan
    FN_KW = 7
    EXPORT_KW = 8
    LET_KW = 9
    AS_KW = 10
    TRUE_KW = 11
    FALSE_KW = 12
    L_PAREN = 13
    R_PAREN = 14
    L_BRACE = 15
    R_BRACE = 16
    L_BRACK = 17
    R_BRACK = 18
    COMMA = 19
    SEMI = 20
    COLON = 21
    ARROW = 22
    DOT = 23
    EQ = 24
    PLUS = 25
    MINUS = 26
    STAR = 27
    SLASH = 28
    PERCENT = 29
    AMP = 30
    PIPE = 31
    CARET = 32
    TILDE = 33
    BANG = 34
    SHL = 35
    SHR = 36
    EQ2 = 37
    NEQ = 38
    LT = 39
    LTEQ = 40
    GT = 41
    GTEQ = 42
    AMP2 = 43
    PIPE2 = 44
    EOF = 45
    IF_KW = 46
    ELSE_KW = 47
    DOTDOT = 48  # `..` of a range in an index, or of a loop's bounds
    FOR_KW = 49
    # nodes
    SOURCE_FILE = 50
    FN_DEF = 51
    NAME = 52
    PARAM_LIST = 53
    PARAM = 54
    RET_TYPE = 55
    TENSOR_TYPE = 56
    DIMS = 57
    TUPLE_TYPE = 58
    BLOCK = 59
    LET_STMT = 60
    LITERAL = 61
    NAME_REF = 62
    PAREN_EXPR = 63
    TUPLE_EXPR = 64
    ARRAY_EXPR = 65
    PREFIX_EXPR = 66
    BIN_EXPR = 67
    CAST_EXPR = 68
    CALL_EXPR = 69
    ARG_LIST = 70
    KWARG = 71
    FIELD_EXPR = 72
    ERROR = 73
    TOMBSTONE = 74  # an abandoned parser marker; never reaches a tree
    TUPLE_PAT = 75  # `(a, (b, _))` after `let`
    IF_EXPR = 76  # `if c { .. } else ..`: the else part is a BLOCK or another IF_EXPR
    INDEX_EXPR = 77  # `x[item, ..]`
    RANGE = 78  # `a..b`, `a..`, `..b`, `..`: an index item, or a loop's bounds (not an expression)
    FOR_EXPR = 79  # `for i in LO..HI with (c = init, ..) { body }`
    LOOP_VARS = 80  # `(c = init, ..)` after `with`
    LOOP_VAR = 81  # `c = init`, one carried value
    IN_KW = 82
    WITH_KW = 83
    # memory spaces, ownership and effects (docs/language.md)
    AT = 84  # `@` before a memory space
    SPACE = 85  # `@device` after a tensor type's dtype and shape
    REF_MODE = 86  # `&` or `&mut` before a parameter's type
    REF_EXPR = 87  # `&x`, `&mut x`: a borrow (a call argument, or a let's value)
    ASSIGN_STMT = 88  # `b = expr;` for a `&mut` parameter or a `let mut` name
    EXPR_STMT = 89  # `f(&mut b);`: a call with an effect, as a statement
    EFFECTS = 90  # `effects(transfer)` after a function's result type


K = SyntaxKind
TRIVIA = frozenset({K.WHITESPACE, K.LINE_COMMENT, K.BLOCK_COMMENT, K.ERROR_TOKEN})

KEYWORDS: dict[bytes, SyntaxKind] = {
    b"fn": K.FN_KW,
    b"export": K.EXPORT_KW,
    b"let": K.LET_KW,
    b"as": K.AS_KW,
    b"true": K.TRUE_KW,
    b"false": K.FALSE_KW,
    b"if": K.IF_KW,
    b"else": K.ELSE_KW,
    b"for": K.FOR_KW,
    b"in": K.IN_KW,
    b"with": K.WITH_KW,
    b"inf": K.FLOAT_NUMBER,
    b"nan": K.FLOAT_NUMBER,
}

PUNCT: dict[bytes, SyntaxKind] = {
    b"(": K.L_PAREN,
    b")": K.R_PAREN,
    b"{": K.L_BRACE,
    b"}": K.R_BRACE,
    b"[": K.L_BRACK,
    b"]": K.R_BRACK,
    b",": K.COMMA,
    b";": K.SEMI,
    b":": K.COLON,
    b"->": K.ARROW,
    b"..": K.DOTDOT,
    b".": K.DOT,
    b"=": K.EQ,
    b"+": K.PLUS,
    b"-": K.MINUS,
    b"*": K.STAR,
    b"/": K.SLASH,
    b"%": K.PERCENT,
    b"&": K.AMP,
    b"|": K.PIPE,
    b"^": K.CARET,
    b"~": K.TILDE,
    b"!": K.BANG,
    b"<<": K.SHL,
    b">>": K.SHR,
    b"==": K.EQ2,
    b"!=": K.NEQ,
    b"<": K.LT,
    b"<=": K.LTEQ,
    b">": K.GT,
    b">=": K.GTEQ,
    b"&&": K.AMP2,
    b"||": K.PIPE2,
    b"@": K.AT,
}
TEXT_OF: dict[SyntaxKind, str] = {
    **{k: t.decode() for t, k in PUNCT.items()},
    **{k: t.decode() for t, k in KEYWORDS.items() if k is not K.FLOAT_NUMBER},
}

EXPRS = frozenset(
    {
        K.LITERAL,
        K.NAME_REF,
        K.PAREN_EXPR,
        K.TUPLE_EXPR,
        K.ARRAY_EXPR,
        K.BLOCK,
        K.PREFIX_EXPR,
        K.BIN_EXPR,
        K.CAST_EXPR,
        K.CALL_EXPR,
        K.FIELD_EXPR,
        K.IF_EXPR,
        K.INDEX_EXPR,
        K.FOR_EXPR,
        K.REF_EXPR,
    }
)


def describe(kind: int, text: str = "") -> str:
    """How an error message names a token: ``'}'``, ``identifier 'x'``, ``end of file``."""
    if kind == K.EOF:
        return "end of file"
    if kind == K.IDENT:
        return f"identifier '{text}'"
    if kind in (K.INT_NUMBER, K.FLOAT_NUMBER):
        return f"number '{text}'"
    if kind in TEXT_OF:
        return f"'{TEXT_OF[SyntaxKind(kind)]}'"
    return SyntaxKind(kind).name.lower()
