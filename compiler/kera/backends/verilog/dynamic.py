"""Dynamic indexing: ``dynamic_slice`` and ``dynamic_update_slice`` as clamps and muxes.

The start index of each axis is run-time data (an i32 element).  It is first clamped into
``[0, dim - window]`` by a combinational net (a signed 32-bit compare, so every i32 value,
``INT32_MIN`` and ``INT32_MAX`` included, is safe; ``docs/semantics.md``), as narrow as that
range needs.  Each output element is then one registered mux (latency 1) over the source
elements it can take, selected by the clamped starts:

* ``dynamic_slice``: ``out[o] = x[s + o]``, one candidate per possible clamped start ``s``;
* ``dynamic_update_slice``: ``out[e] = v[e - s]`` for the starts whose window covers ``e``,
  else ``x[e]``.

An axis whose window spans the whole dimension (clamped start always 0), or whose start is a
constant (clamped at emit time with ``kera.semantics.clamped_starts``, the interpreter's own
rule), selects nothing: with no run-time axis left, the op is plain wiring (latency 0).

Clamping a constant start is not constant folding (the back end folds nothing; that is the
``fold`` pass): no op's value is computed, only which wires a known address selects, as a
static ``slice`` would.  It is structural: without it a constant start would build a clamp
and a mux over every position the start cannot take.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from math import prod

import numpy as np

from kera.backends.verilog.netlist import Elems, Netlist, width
from kera.ir import Node
from kera.semantics import clamped_starts

Combo = tuple[int, ...]


@dataclass(frozen=True)
class _Axis:
    """One axis of a start vector: the clamped starts it may take, and the net selecting
    among them (None when there is one value)."""

    values: range
    net: int | None
    bits: int = 0  # width of net


def _axis(nl: Netlist, start: int, dim: int, size: int) -> _Axis:
    hi = dim - size
    if hi == 0:
        return _Axis(range(1), None)
    if nl.is_const(start):  # address arithmetic on a known start, not a fold (see above)
        bits = nl.cells[start].value
        raw = np.array([[bits]], dtype=np.uint32).view(np.int32)
        at = int(clamped_starts(raw, [dim], [size])[0, 0])
        return _Axis(range(at, at + 1), None)
    w = hi.bit_length()
    text = f"@0[31] ? {w}'d0 : ($signed(@0) > 32'sd{hi}) ? {w}'d{hi} : @0[{w - 1}:0]"
    return _Axis(range(hi + 1), nl.expr(text, w, [start], latency=0), w)


def _axes(nl: Netlist, starts: Elems, dims: Sequence[int], sizes: Sequence[int]) -> list[_Axis]:
    return [_axis(nl, s, d, z) for s, d, z in zip(starts, dims, sizes, strict=True)]


def _mux(
    nl: Netlist, w: int, axes: list[_Axis], cases: list[tuple[Combo, int]], default: int | None
) -> int:
    """One registered mux: the net of the first case whose clamped starts equal the selecting
    nets', else ``default`` (the last case when there is none)."""
    nets = {net for _, net in cases} | ({default} if default is not None else set())
    if len(nets) == 1:
        return nets.pop()  # every start picks the same element (one start, or a fixed axis)
    sel = [(d, a) for d, a in enumerate(axes) if a.net is not None]
    ops = [a.net for _, a in sel if a.net is not None]
    slot: dict[int, int] = {}

    def ref(net: int) -> str:
        if net not in slot:
            slot[net] = len(ops)
            ops.append(net)
        return f"@{slot[net]}"

    if default is None:
        *cases, (_, default) = cases
    terms = []
    for combo, net in cases:
        cond = " && ".join(f"@{k} == {a.bits}'d{combo[d]}" for k, (d, a) in enumerate(sel))
        terms.append(f"({cond}) ? {ref(net)} : ")
    return nl.expr("".join(terms) + ref(default), w, ops)


def _index(shape: Sequence[int], at: Sequence[int]) -> int:
    return int(np.ravel_multi_index(tuple(at), tuple(shape)))


def dynamic_slice(nl: Netlist, node: Node, ins: list[Elems]) -> Elems:
    (x, starts), shape = ins, node.inputs[0].shape
    size = node.type.shape
    axes = _axes(nl, starts, shape, size)
    combos = list(itertools.product(*(a.values for a in axes)))
    w = width(node.dtype)
    out = []
    for o in itertools.product(*(range(n) for n in size)):
        cases = [(s, x[_index(shape, [a + b for a, b in zip(s, o, strict=True)])]) for s in combos]
        out.append(_mux(nl, w, axes, cases, None))
    return out


def dynamic_update_slice(nl: Netlist, node: Node, ins: list[Elems]) -> Elems:
    (x, v, starts), shape = ins, node.type.shape
    size = node.inputs[1].shape
    axes = _axes(nl, starts, shape, size)
    combos = list(itertools.product(*(a.values for a in axes)))
    w = width(node.dtype)
    out = []
    for e in itertools.product(*(range(n) for n in shape)):
        cases = [(s, v[_index(size, off)]) for s in combos if _inside(off := _minus(e, s), size)]
        outside = len(cases) < len(combos)
        out.append(_mux(nl, w, axes, cases, x[_index(shape, e)] if outside else None))
    assert len(out) == prod(shape)
    return out


def _minus(e: Combo, s: Combo) -> Combo:
    return tuple(a - b for a, b in zip(e, s, strict=True))


def _inside(off: Combo, size: Sequence[int]) -> bool:
    return all(0 <= k < n for k, n in zip(off, size, strict=True))
