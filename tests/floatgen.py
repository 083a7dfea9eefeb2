"""Edge-biased IEEE-754 operand generators for oracle tests (TestFloat-style, ours).

Vectors mix: uniformly random bit patterns; exponent edges (0, 1, bias-1, bias, bias+1, max-1,
max) with edge mantissas (0, 1, all ones, half, half±1); subnormals; ±0, ±inf; quiet and
signalling NaNs with payloads and both signs; and, for binary ops, partners chosen to make
ties, cancellation, overflow and underflow to the subnormal range likely.
"""

from __future__ import annotations

from typing import Any

import numpy as np

Array = np.ndarray[Any, Any]

LAYOUT = {32: (8, 23), 64: (11, 52)}


def _u(bits: int) -> Any:
    return np.uint32 if bits == 32 else np.uint64


def edge_bits(rng: np.random.Generator, n: int, bits: int) -> Array:
    """n float bit patterns of the given width, biased to the edges."""
    ew, mw = LAYOUT[bits]
    u = _u(bits)
    emax = (1 << ew) - 1
    bias = emax >> 1
    exps = np.array(
        [0, 1, 2, bias - 2, bias - 1, bias, bias + 1, bias + 2, emax - 2, emax - 1, emax]
    )
    mants = np.array(
        [
            0,
            1,
            2,
            (1 << mw) - 1,
            (1 << mw) - 2,
            1 << (mw - 1),
            (1 << (mw - 1)) + 1,
            (1 << (mw - 1)) - 1,
        ],
        dtype=np.uint64,
    )
    kind = rng.integers(0, 4, n)
    sign = rng.integers(0, 2, n).astype(np.uint64)
    rand_bits = rng.integers(0, 1 << 63, n, dtype=np.uint64) ^ (
        rng.integers(0, 2, n, dtype=np.uint64) << np.uint64(63)
    )
    e = np.where(
        kind == 1, exps[rng.integers(0, len(exps), n)], rng.integers(0, emax + 1, n)
    ).astype(np.uint64)
    e = np.where(kind == 2, rng.integers(0, 4, n), e).astype(np.uint64)  # subnormal / tiny
    m = np.where(
        rng.integers(0, 2, n) == 0,
        mants[rng.integers(0, len(mants), n)],
        rng.integers(0, 1 << 62, n, dtype=np.uint64) & np.uint64((1 << mw) - 1),
    ).astype(np.uint64)
    built = (sign << np.uint64(bits - 1)) | (e << np.uint64(mw)) | m
    out = np.where(
        kind == 0, rand_bits & np.uint64((1 << bits) - 1) if bits == 32 else rand_bits, built
    )
    return out.astype(u)


def partner_bits(rng: np.random.Generator, a: Array, bits: int) -> Array:
    """Partners for binary ops: near-equal (ties/cancellation), negated, or independent edges."""
    n = len(a)
    u = _u(bits)
    b = edge_bits(rng, n, bits)
    kind = rng.integers(0, 4, n)
    near = a + rng.integers(-3, 4, n).astype(u)  # same exponent, nearby mantissa
    neg = a ^ u(1 << (bits - 1))
    neg_near = neg + rng.integers(-2, 3, n).astype(u)
    return np.where(kind == 0, near, np.where(kind == 1, neg_near, b)).astype(u)


def as_float(bits_arr: Array, bits: int) -> Array:
    return bits_arr.view(np.float32 if bits == 32 else np.float64)
