"""Deterministic, special-value-biased input vectors, and companion ``.inputs.npz`` files.

Generation: one ``numpy.random.Generator(PCG64(SeedSequence(...)))`` per parameter, seeded from
(seed, case fingerprint, parameter name) through SHA-256, so the same seed gives the same bits on
every machine and platform (PCG64 and these draws are platform independent), and adding a case
never changes another case's inputs.  Each element is, with roughly equal odds, a special value
of its dtype, a random bit pattern, or a "plain" value of moderate magnitude:

* floats: ±0, ±inf, the canonical NaN, non-canonical NaNs (negative, payloads, signalling),
  the smallest and largest subnormals, the smallest normal, the largest finite, ±1, 0.5, 1.5,
  2.5 (rounding ties), 2**24 + 1 / 2**53 + 1 (conversion ties);
* integers: 0, ±1, MIN, MIN + 1, MAX, MAX - 1, -2, shift amounts width - 1, width, width + 1,
  2 * width, and powers of two;
* bool: random.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from collections.abc import Mapping
from typing import Any

import numpy as np

from kera import limits
from kera.dtypes import DType
from kera.files import write_atomic
from kera.ir import Function

Array = np.ndarray[Any, Any]


class InputFileError(ValueError):
    """A companion .inputs.npz that cannot be used (unreadable, wrong names, dtypes or shapes)."""


FLOAT_SPECIALS = {
    DType.F32: [
        0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7FC12345,
        0x7F800001, 0xFFA00001, 0x00000001, 0x807FFFFF, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF,
        0x3F800000, 0xBF800000, 0x3F000000, 0x3FC00000, 0x40200000, 0x4B800001, 0xCB000001,
        0x5F000000, 0x4F000000, 0xCF000000,
    ],
    DType.F64: [
        0x0000000000000000, 0x8000000000000000, 0x7FF0000000000000, 0xFFF0000000000000,
        0x7FF8000000000000, 0xFFF8000000000000, 0x7FF8000000012345, 0x7FF0000000000001,
        0x0000000000000001, 0x800FFFFFFFFFFFFF, 0x0010000000000000, 0x7FEFFFFFFFFFFFFF,
        0x3FF0000000000000, 0xBFF0000000000000, 0x3FE0000000000000, 0x3FF8000000000000,
        0x4004000000000000, 0x4340000000000001, 0x43E0000000000000, 0xC3E0000000000000,
        0x41E0000000000000, 0xC1E0000000000000,
    ],
}  # fmt: skip


def int_specials(dt: DType) -> list[int]:
    w = dt.bits
    vals = [0, 1, -1, -2, dt.min, dt.min + 1, dt.max, dt.max - 1, w - 1, w, w + 1, 2 * w, 7]
    vals += [1 << k for k in (8, 16, w // 2, w - 2)]
    return [v & ((1 << w) - 1) for v in vals]  # as unsigned bit patterns


def _rng(seed: int, fingerprint: str, name: str) -> np.random.Generator:
    digest = hashlib.sha256(f"keracheck-inputs/v1\0{seed}\0{fingerprint}\0{name}".encode()).digest()
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(list(digest))))


#: input profiles: which kinds of value an element may be (see :func:`generate_param`)
PROFILES = ("special", "finite", "normal", "mixed")


def generate_param(
    rng: np.random.Generator, dtype: DType, shape: tuple[int, ...], profile: str = "special"
) -> Array:
    """Values of one parameter.  Profiles: ``special`` (the default: a third each special
    values, random bit patterns and plain values — the bias that finds divergences), ``finite``
    (the same with every NaN and infinity replaced by a plain value), ``normal`` (plain values
    only: floats of realistic magnitude, integers in -100..100, as a program would see), and
    ``mixed`` (a sixth special, a sixth random bits, two thirds plain)."""
    out = _special(rng, dtype, shape)
    if profile == "special" or dtype is DType.BOOL:
        return out
    plain = _plain(rng, dtype, shape)
    if profile == "normal":
        return plain
    if profile == "finite":
        return out if not dtype.is_float else np.where(np.isfinite(out), out, plain)
    if profile == "mixed":
        return np.where(rng.integers(0, 3, shape) == 0, out, plain)
    raise ValueError(f"unknown input profile '{profile}' (choose from {', '.join(PROFILES)})")


def _plain(rng: np.random.Generator, dtype: DType, shape: tuple[int, ...]) -> Array:
    if dtype.is_float:
        return (rng.standard_normal(shape) * np.exp2(rng.integers(-6, 7, shape))).astype(dtype.np)
    return rng.integers(-100, 101, shape).astype(np.int64).astype(dtype.uint).view(dtype.np)


def _special(rng: np.random.Generator, dtype: DType, shape: tuple[int, ...]) -> Array:
    if dtype is DType.BOOL:
        return rng.integers(0, 2, shape, dtype=np.uint8).astype(np.bool_)
    u = dtype.uint
    raw = rng.integers(0, 2**63, shape, dtype=np.uint64) ^ (
        rng.integers(0, 2, shape, dtype=np.uint64) << np.uint64(63)
    )
    bits = raw.astype(u)  # truncating to the width keeps the pattern uniform
    specials = FLOAT_SPECIALS[dtype] if dtype.is_float else int_specials(dtype)
    pick = np.array(specials, dtype=u)[rng.integers(0, len(specials), shape)]
    plain_bits = _plain(rng, dtype, shape).view(u)  # drawn here, in this order, as always
    kind = rng.integers(0, 3, shape)
    out = np.where(kind == 0, pick, np.where(kind == 1, bits, plain_bits)).astype(u)
    return out.view(dtype.np)


def generate(fn: Function, n: int, seed: int, profile: str = "special") -> dict[str, Array]:
    check_budget(fn, n, "generated inputs")
    return {
        str(p.attr("name")): generate_param(
            _rng(seed, fn.fingerprint, str(p.attr("name"))), p.dtype, (n, *p.shape), profile
        )
        for p in fn.params
    }


def load_npz(path: str, function: str, fn: Function) -> dict[str, Array] | None:
    """Arrays ``<function>.<param>`` for ``fn`` from a companion npz; None if it has none.

    Nothing is decompressed before it is known to be what ``fn`` needs: each member's declared
    size is checked against the input budget (:mod:`kera.limits`, ``input_bytes``; zipfile
    never inflates past the declared size), and each ``.npy`` header's dtype and shape against
    the parameter before its data is read — a 300-byte file claiming 2^40 rows, or a zip bomb,
    is an input error, not an allocation.  Raises InputFileError naming the file, the array
    and what was expected.
    """
    cap = limits.current().input_bytes
    try:
        with zipfile.ZipFile(path) as z:
            members = {n.removesuffix(".npy"): n for n in z.namelist()}
            wanted = {f"{function}.{name}" for name in fn.param_names()}
            if not wanted & set(members):
                return None
            out: dict[str, Array] = {}
            sizes = set()
            total = 0
            for p in fn.params:
                key = f"{function}.{p.attr('name')!s}"
                if key not in members:
                    raise InputFileError(
                        f"{path}: has inputs for '{function}' but no array '{key}'"
                    )
                info = z.getinfo(members[key])
                total += info.file_size
                if total > cap:
                    raise InputFileError(
                        f"{path}: arrays for '{function}' hold {total:,} bytes or more "
                        f"uncompressed; the limit is {cap:,} ({limits.hint('input_bytes')})"
                    )
                a = _read_member(z, members[key], info.file_size, path, key, p)
                sizes.add(a.shape[0])
                out[str(p.attr("name"))] = a
    except (OSError, zipfile.BadZipFile, ValueError, EOFError) as e:
        if isinstance(e, InputFileError):
            raise
        raise InputFileError(f"{path}: not a readable .npz file ({e})") from None
    if len(sizes) > 1:
        raise InputFileError(
            f"{path}: arrays for '{function}' have different batch sizes {sorted(sizes)}"
        )
    return out


def _read_member(
    z: zipfile.ZipFile, member: str, stored: int, path: str, key: str, p: Any
) -> Array:
    """One ``.npy`` member, its header checked against parameter ``p`` before its data."""
    fmt = np.lib.format
    with z.open(member) as f:
        try:
            version = fmt.read_magic(f)
            header = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
            shape, _, dtype = header(f)
        except ValueError as e:
            raise InputFileError(f"{path}: array '{key}' cannot be read ({e})") from None
    if dtype != p.dtype.np:
        raise InputFileError(f"{path}: array '{key}' has dtype {dtype}, expected {p.dtype}")
    if len(shape) != len(p.shape) + 1 or tuple(shape[1:]) != p.shape or shape[0] < 1:
        want = ", ".join(["N", *map(str, p.shape)])
        raise InputFileError(f"{path}: array '{key}' has shape {shape}, expected ({want})")
    need = int(np.prod(shape, dtype=object)) * dtype.itemsize
    if need > stored:
        raise InputFileError(
            f"{path}: array '{key}' claims shape {shape} ({need:,} bytes) but holds {stored:,}"
        )
    with z.open(member) as f:
        try:
            a = fmt.read_array(f, allow_pickle=False)
        except ValueError as e:
            raise InputFileError(f"{path}: array '{key}' cannot be read ({e})") from None
    return np.ascontiguousarray(a)


def check_budget(fn: Function, n: int, what: str) -> None:
    """InputFileError unless ``n`` rows of ``fn``'s inputs and outputs fit the input budget."""
    cap = limits.current().input_bytes
    need = n * sum(v.type.size * v.dtype.nbytes for v in (*fn.params, *fn.results))
    if need > cap:
        raise InputFileError(
            f"{what}: {n} rows of '{fn.name}' need {need:,} bytes of inputs and outputs; "
            f"the limit is {cap:,} ({limits.hint('input_bytes')})"
        )


def digest(a: Array) -> str:
    """SHA-256 of an array's raw little-endian bytes (C order)."""
    arr = np.ascontiguousarray(a)
    if arr.dtype.byteorder == ">":
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    return hashlib.sha256(arr.tobytes()).hexdigest()


def save_npz(path: str, arrays: Mapping[str, Array]) -> None:
    buf = io.BytesIO()
    np.savez(buf, **dict(arrays))  # type: ignore[arg-type]
    write_atomic(path, buf.getvalue())
