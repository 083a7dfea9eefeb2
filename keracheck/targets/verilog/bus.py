"""Bus packing between numpy arrays and the Verilog designs' ports.

Element e of a port occupies bits ``[e*w +: w]`` (see :mod:`kera.backends.verilog`); as bytes,
a bus is little-endian (element 0 lowest), a BOOL port one bit per element.  Simulations print
buses as ``%h`` fields (most significant digit first), which :func:`parse_hex_fields` reads
back into the same little-endian bytes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from kera.backends.verilog import Port
from kera.dtypes import DType
from keracheck.target import Array, BackendError


def nbytes(bits: int) -> int:
    """Whole bytes holding a bus of ``bits`` bits."""
    return (bits + 7) // 8


def pack_port(port: Port, values: Array) -> np.ndarray[Any, np.dtype[np.uint8]]:
    """(N, *shape) values -> (N, bytes) little-endian bus bytes (element 0 lowest)."""
    n = values.shape[0]
    flat = np.ascontiguousarray(values).reshape(n, -1)
    if port.dtype is DType.BOOL:
        return np.packbits(flat.astype(np.uint8), axis=1, bitorder="little")
    return flat.astype(port.dtype.np).view(np.uint8).reshape(n, -1)


def unpack_port(port: Port, bus: np.ndarray[Any, np.dtype[np.uint8]]) -> Array:
    """(N, bytes) little-endian bus bytes -> (N, *shape) values of the port's dtype."""
    n = bus.shape[0]
    count = port.width // port.elem_width
    if port.dtype is DType.BOOL:
        bits = np.unpackbits(bus, axis=1, bitorder="little")[:, :count]
        return bits.astype(np.bool_).reshape((n, *port.shape))
    data = np.ascontiguousarray(bus[:, : count * port.dtype.nbytes])
    return data.view(port.dtype.np).reshape((n, *port.shape))


def parse_hex_fields(
    data: bytes, widths: Sequence[int]
) -> list[np.ndarray[Any, np.dtype[np.uint8]]]:
    """Lines of space-separated ``%h`` fields of the given bit widths -> per field (N, bytes)
    little-endian bus bytes.  Raises BackendError on x/z digits or a malformed file."""
    digits = [math.ceil(w / 4) for w in widths]
    line = sum(digits) + len(digits)
    if len(data) % line:
        raise BackendError("simulation output is truncated or malformed")
    raw = np.frombuffer(data, np.uint8).reshape(-1, line)
    out, pos = [], 0
    for w, nd in zip(widths, digits, strict=True):
        field = raw[:, pos : pos + nd]
        pos += nd + 1
        val = np.where(field >= ord("a"), field - (ord("a") - 10), field - ord("0")).astype(
            np.int16
        )
        if ((val < 0) | (val > 15)).any():
            raise BackendError("simulation output holds x/z bits (an undriven or unknown value)")
        if nd % 2:
            val = np.concatenate([np.zeros((len(val), 1), np.int16), val], axis=1)
        be = (val[:, 0::2] << 4 | val[:, 1::2]).astype(np.uint8)
        out.append(np.ascontiguousarray(be[:, ::-1][:, : nbytes(w)]))
    return out
