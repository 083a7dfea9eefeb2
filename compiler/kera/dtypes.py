"""Element types of the Kera contract.

Each dtype has a stable one-byte code used by the canonical encodings (node hashes and .keg
files); the codes never change meaning.  ``bool`` is one byte per element (0 or 1).
"""

from __future__ import annotations

import enum
from typing import Any

import numpy
import numpy as np


class DType(enum.StrEnum):
    BOOL = "bool"
    I32 = "i32"
    I64 = "i64"
    U32 = "u32"
    U64 = "u64"
    F32 = "f32"
    F64 = "f64"

    @property
    def code(self) -> int:
        return _CODES[self]

    @property
    def np(self) -> numpy.dtype[Any]:
        return _NP[self]

    @property
    def bits(self) -> int:
        return 8 if self is DType.BOOL else int(self.value[1:])

    @property
    def nbytes(self) -> int:
        return self.bits // 8

    @property
    def is_float(self) -> bool:
        return self in (DType.F32, DType.F64)

    @property
    def is_int(self) -> bool:
        return self in (DType.I32, DType.I64, DType.U32, DType.U64)

    @property
    def is_signed(self) -> bool:
        return self in (DType.I32, DType.I64)

    @property
    def uint(self) -> numpy.dtype[Any]:
        """The unsigned integer numpy dtype of the same width (for viewing bits)."""
        return np.dtype(f"<u{self.nbytes}")

    # ---- the float format (IEEE 754 binary32/binary64); floats only
    @property
    def mant_bits(self) -> int:
        """Stored fraction bits (23, 52)."""
        return _FLOAT_FORMAT[self][1]

    @property
    def exp_bits(self) -> int:
        """Exponent field bits (8, 11)."""
        return _FLOAT_FORMAT[self][0]

    @property
    def sign_mask(self) -> int:
        return 1 << (self.bits - 1)

    @property
    def exp_mask(self) -> int:
        """The exponent field in place (0x7F800000, 0x7FF0000000000000)."""
        return ((1 << self.exp_bits) - 1) << self.mant_bits

    @property
    def canonical_nan(self) -> int:
        """The contract's one NaN: the positive quiet NaN with an empty payload."""
        return CANONICAL_NAN[self]

    @property
    def min(self) -> int:
        return -(1 << (self.bits - 1)) if self.is_signed else 0

    @property
    def max(self) -> int:
        if self is DType.BOOL:
            return 1
        return (1 << (self.bits - 1)) - 1 if self.is_signed else (1 << self.bits) - 1


_CODES = {
    DType.BOOL: 1,
    DType.I32: 2,
    DType.I64: 3,
    DType.U32: 4,
    DType.U64: 5,
    DType.F32: 6,
    DType.F64: 7,
}
BY_CODE = {code: dt for dt, code in _CODES.items()}
_NP: dict[DType, np.dtype[Any]] = {
    DType.BOOL: np.dtype(np.bool_),
    DType.I32: np.dtype("<i4"),
    DType.I64: np.dtype("<i8"),
    DType.U32: np.dtype("<u4"),
    DType.U64: np.dtype("<u8"),
    DType.F32: np.dtype("<f4"),
    DType.F64: np.dtype("<f8"),
}

#: exponent and fraction widths of the float dtypes
_FLOAT_FORMAT = {DType.F32: (8, 23), DType.F64: (11, 52)}

#: Canonical quiet NaN bit patterns of the contract: exponent all ones, the quiet bit, no payload.
CANONICAL_NAN = {dt: (((1 << e) - 1) << m) | (1 << (m - 1)) for dt, (e, m) in _FLOAT_FORMAT.items()}


def from_numpy(dt: np.dtype[Any]) -> DType:
    for k, v in _NP.items():
        if v == dt:
            return k
    raise ValueError(f"no Kera dtype for numpy dtype {dt}")
