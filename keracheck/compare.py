"""Bitwise comparison of target outputs and classification of every differing element.

Two outputs agree iff their raw bytes are identical.  Each differing element gets one class:

* ``nan-payload`` — both are NaN, with different bits (sign, quiet bit or payload);
* ``nan-vs-value`` — one is NaN, the other is not;
* ``signed-zero`` — +0 against -0;
* ``subnormal-flush`` — a subnormal against a zero (a flush-to-zero target);
* ``ulp(k)`` — two other floats, k units in the last place apart (bits mapped to an ordered
  integer line, so the distance across zero counts both sides);
* ``int`` — integers or bools that differ.

Each example element also carries its value in decimal per target (:func:`decimal`): the
shortest text that reads back to the same float of its dtype (``0.1``, ``-0.0``, ``nan``,
``-inf``; a NaN's sign and payload are in the hex), an integer as written, a bool as
``true``/``false``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

Array = np.ndarray[Any, Any]
LAYOUT = {4: (8, 23), 8: (11, 52)}
MAX_EXAMPLES = 8


def _ordered(x: int, width: int) -> int:
    """A float bit pattern as an integer ordered like the floats (-0 just below +0)."""
    mag = x & ((1 << (width - 1)) - 1)
    return -mag - 1 if x >> (width - 1) else mag


def fields(bits: int, nbytes: int) -> str:
    """``sign|exponent|mantissa`` of a float bit pattern."""
    ew, _ = LAYOUT[nbytes]
    b = format(bits, f"0{8 * nbytes}b")
    return f"{b[0]}|{b[1 : 1 + ew]}|{b[1 + ew :]}"


def decimal(value: np.generic) -> str:
    """An element's value as text: shortest round-trip repr for floats (numpy's, per dtype),
    the integer for ints, ``true``/``false`` for bools."""
    if isinstance(value, np.bool_ | bool):
        return "true" if value else "false"
    if isinstance(value, np.floating):
        return str(value)
    return str(int(value))


def hex_bits(value: np.generic) -> str:
    """An element's raw bits as the examples write them (``0x3f800000``; a bool ``0x01``)."""
    nbytes = value.dtype.itemsize
    return f"0x{int(np.asarray(value).view(f'<u{nbytes}')):0{2 * nbytes}x}"


def classify_float(x: int, y: int, nbytes: int) -> str:
    """The class of one differing pair of float bit patterns of the given width."""
    ew, mw = LAYOUT[nbytes]
    width = 8 * nbytes
    mant, exp_all = (1 << mw) - 1, ((1 << ew) - 1) << mw

    def nan(v: int) -> bool:
        return (v & exp_all) == exp_all and (v & mant) != 0

    def zero(v: int) -> bool:
        return (v & ((1 << (width - 1)) - 1)) == 0

    def subnormal(v: int) -> bool:
        return (v & exp_all) == 0 and (v & mant) != 0

    if nan(x) and nan(y):
        return "nan-payload"
    if nan(x) or nan(y):
        return "nan-vs-value"
    if zero(x) and zero(y):
        return "signed-zero"
    if (zero(x) and subnormal(y)) or (subnormal(x) and zero(y)):
        return "subnormal-flush"
    return f"ulp({abs(_ordered(x, width) - _ordered(y, width))})"


def diff_outputs(
    a: Array, b: Array, names: tuple[str, str], max_examples: int = MAX_EXAMPLES
) -> dict[str, Any] | None:
    """None when a and b are bit-identical, else the divergence record (counts, classes, examples)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return {
            "mismatched": int(max(a.size, b.size)),
            "total": int(max(a.size, b.size)),
            "classes": {"shape-or-dtype": 1},
            "maxUlp": None,
            "examples": [],
            "message": f"{names[0]} gave {a.dtype}{list(a.shape)}, {names[1]} gave {b.dtype}{list(b.shape)}",
        }
    nbytes = a.dtype.itemsize
    ua = np.ascontiguousarray(a).view(f"<u{nbytes}").reshape(-1)
    ub = np.ascontiguousarray(b).view(f"<u{nbytes}").reshape(-1)
    idx = np.nonzero(ua != ub)[0]
    if len(idx) == 0:
        return None
    is_float = a.dtype.kind == "f"
    pairs = zip(ua[idx].tolist(), ub[idx].tolist(), strict=True)
    classes = [classify_float(x, y, nbytes) if is_float else "int" for x, y in pairs]
    ulps = [int(c[4:-1]) for c in classes if c.startswith("ulp(")]
    examples = []
    for j, flat in enumerate(idx[:max_examples]):
        x, y = int(ua[flat]), int(ub[flat])
        ex: dict[str, Any] = {
            "index": [int(v) for v in np.unravel_index(int(flat), a.shape)],
            "class": classes[j],
            "bits": {names[0]: f"0x{x:0{2 * nbytes}x}", names[1]: f"0x{y:0{2 * nbytes}x}"},
            "values": {
                names[0]: decimal(a.flat[int(flat)]),
                names[1]: decimal(b.flat[int(flat)]),
            },
        }
        if is_float:
            ex["fields"] = {names[0]: fields(x, nbytes), names[1]: fields(y, nbytes)}
        examples.append(ex)
    return {
        "mismatched": len(idx),
        "total": int(a.size),
        "classes": dict(sorted(Counter(classes).items())),
        "maxUlp": max(ulps) if ulps else None,
        "examples": examples,
    }


def divergences(
    a: Sequence[Array], b: Sequence[Array], names: tuple[str, str], pair: tuple[str, str], kind: str
) -> list[dict[str, Any]]:
    """One divergence record per output that differs in bits (``kind``: diverge,
    nondeterministic or opt-level; ``pair``: the targets it is between)."""
    out = []
    for k, (x, y) in enumerate(zip(a, b, strict=True)):
        d = diff_outputs(x, y, names)
        if d is not None:
            out.append(
                {
                    "targets": list(pair),
                    "output": k,
                    "kind": kind,
                    "baselined": False,
                    "reason": None,
                    **d,
                }
            )
    return out
