"""Number literals: exact values from their text, and their bits in a given dtype.

A literal's text (validated by the lexer) denotes an exact value: an integer, or a rational
for decimal floats, or ``inf``/``nan``; ``neg`` records a folded unary minus (so ``-0.0`` and
``-nan`` keep their sign bit, exactly as ``neg`` would set it).  :func:`encode` gives the
little-endian bytes of that value in a dtype, or raises :class:`LiteralError`:

* integer dtypes: integer literals whose value is in the type's range (hex and binary
  literals too: ``0xffffffff`` is not an ``i32``; write ``0xffffffffu32`` and ``bitcast``);
  float literals are an error;
* float dtypes: the value rounded once, to nearest-even, from the exact decimal (``0.1`` as
  ``f32`` is the f32 nearest to 1/10, not a rounded f64); a finite value that rounds to
  infinity is an error (write ``inf``); ``nan`` is the canonical quiet NaN; integer literals
  are allowed and rounded the same way;
* ``bool``: no number literal has type bool.

Decimal strings of any length are handled without huge integers: at most 800 significant
digits are kept plus a sticky digit (768 suffice to decide every f64 rounding), and decimal
exponents beyond +-400 saturate to overflow or to zero.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from kera import limits
from kera.dtypes import CANONICAL_NAN, DType

SUFFIX_DTYPES = {s: DType(s) for s in ("i32", "i64", "u32", "u64", "f32", "f64")}
_DIGITS = 800
_EXP_LIMIT = 400
#: dtype -> (significand bits incl. the hidden one, minimum normal exponent, maximum exponent)
_FLOAT = {DType.F32: (24, -126, 127), DType.F64: (53, -1022, 1023)}
_DEC = re.compile(r"([0-9_]+)(?:\.([0-9_]+))?(?:[eE]([+-]?)([0-9_]+))?")


@dataclass(frozen=True, slots=True)
class Literal:
    """An exact literal value.  ``special`` is "", "inf" or "nan"; a finite value is
    ``num / den`` (``den`` 1 for integer literals); ``neg`` is the sign."""

    is_float: bool
    num: int = 0
    den: int = 1
    special: str = ""
    neg: bool = False
    suffix: DType | None = None

    def negate(self) -> Literal:
        return Literal(self.is_float, self.num, self.den, self.special, not self.neg, self.suffix)

    def show(self, text: str) -> str:
        return ("-" if self.neg else "") + text


@functools.lru_cache(maxsize=4096)
def parse(text: str) -> Literal | None:
    """The value of a literal token's text; None if the lexer already reported it malformed
    (or too long: E0005)."""
    if len(text) > limits.current().literal_chars:
        return None
    if text in ("inf", "nan"):
        return Literal(True, special=text)
    suffix = None
    if text[-3:] in SUFFIX_DTYPES and not (text[:2] in ("0x", "0X") and text[-3] == "f"):
        suffix = SUFFIX_DTYPES[text[-3:]]
        text = text[:-3]
    if text[:2].lower() in ("0x", "0b"):
        digits = text[2:].replace("_", "")
        if not digits or len(digits) > 70:
            return None if not digits else Literal(False, 1 << 300, suffix=suffix)
        try:
            return Literal(False, int(digits, 16 if text[1] in "xX" else 2), suffix=suffix)
        except ValueError:
            return None
    m = _DEC.fullmatch(text)
    if m is None:
        return None
    whole, frac, sign, exp = m.groups()
    is_float = frac is not None or exp is not None or (suffix is not None and suffix.is_float)
    return _decimal(whole, frac or "", sign, exp or "0", is_float, suffix)


def _decimal(
    whole: str, frac: str, sign: str, exp: str, is_float: bool, s: DType | None
) -> Literal:
    digits = (whole + frac).replace("_", "").lstrip("0")
    exp_digits = exp.replace("_", "").lstrip("0") or "0"
    if not digits:
        return Literal(is_float, 0, 1, suffix=s)
    if len(exp_digits) > 6:
        e10 = 10**7
    else:
        e10 = int(exp_digits)
    e10 = (-e10 if sign == "-" else e10) - len(frac.replace("_", ""))
    if len(digits) > _DIGITS:  # keep 800 digits and a sticky 1 for anything dropped
        dropped = digits[_DIGITS:].strip("0")
        e10 += len(digits) - _DIGITS - 1
        digits = digits[:_DIGITS] + ("1" if dropped else "0")
    scale = len(digits) + e10  # the value is in [10^(scale-1), 10^scale)
    if scale > _EXP_LIMIT:
        return Literal(is_float, 10 ** (_EXP_LIMIT + 1), 1, suffix=s)  # out of every range
    if scale < -_EXP_LIMIT:
        return Literal(is_float, 1, 10 ** (_EXP_LIMIT + 1), suffix=s)  # rounds to zero
    if e10 >= 0:
        return Literal(is_float, int(digits) * 10**e10, 1, suffix=s)
    return Literal(is_float, int(digits), 10**-e10, suffix=s)


def round_float(num: int, den: int, dtype: DType) -> int | None:
    """The bits of the positive rational num/den rounded to nearest-even in ``dtype``; None
    when it rounds to infinity."""
    mant, emin, emax = _FLOAT[dtype]
    if num == 0:
        return 0
    e = num.bit_length() - den.bit_length()
    if (num << max(0, -e)) < (den << max(0, e)):
        e -= 1  # now 2^e <= num/den < 2^(e+1)
    e = max(e, emin)
    shift = e - (mant - 1)  # value = m * 2^shift with m < 2^mant
    n, d = (num, den << shift) if shift >= 0 else (num << -shift, den)
    m, r = divmod(n, d)
    if 2 * r > d or (2 * r == d and m & 1):
        m += 1
    if m == 1 << mant:
        m >>= 1
        e += 1
    if e > emax:
        return None
    if m < 1 << (mant - 1):  # subnormal (e == emin)
        return m
    return ((e + (1 << (dtype.bits - mant - 1)) - 1) << (mant - 1)) | (m - (1 << (mant - 1)))


class LiteralError(Exception):
    """A literal with no value in the requested dtype: ``code`` E0301 (out of range) or
    E0302 (wrong kind of literal for the dtype)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def encode(lit: Literal, dtype: DType) -> bytes:
    """The literal's little-endian bytes in ``dtype``; raises :class:`LiteralError`."""
    if dtype is DType.BOOL:
        raise LiteralError("E0302", "a number literal cannot be a bool (write true or false)")
    if dtype.is_int:
        return _encode_int(lit, dtype)
    return _encode_float(lit, dtype)


def _encode_int(lit: Literal, dtype: DType) -> bytes:
    if lit.is_float:
        raise LiteralError("E0302", f"a float literal cannot have the integer type {dtype}")
    value = -lit.num if lit.neg else lit.num
    if not dtype.min <= value <= dtype.max:
        raise LiteralError("E0301", f"literal out of range for {dtype} ({dtype.min}..{dtype.max})")
    return (value & ((1 << dtype.bits) - 1)).to_bytes(dtype.nbytes, "little")


def _encode_float(lit: Literal, dtype: DType) -> bytes:
    sign = (1 << (dtype.bits - 1)) if lit.neg else 0
    mant = _FLOAT[dtype][0]
    if lit.special == "nan":
        bits = CANONICAL_NAN[dtype] | sign
    elif lit.special == "inf":
        bits = sign | (((1 << (dtype.bits - mant)) - 1) << (mant - 1))
    else:
        rounded = round_float(lit.num, lit.den, dtype)
        if rounded is None:
            raise LiteralError("E0301", f"literal out of range for {dtype} (it rounds to infinity)")
        bits = sign | rounded
    return bits.to_bytes(dtype.nbytes, "little")
