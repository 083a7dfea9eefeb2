"""Math-library calls in fuzzed graphs: found in any function, handled as one unit each.

The functions of ``kera.mathlib`` (:data:`NAMES`, read from ``mathlib.FUNCTIONS``: ``exp log tanh
sigmoid`` today) are not IR ops: a call expands its argument into 40-100 contract ops.  To the
fuzzer a call is still *one* thing -- one generation step, one printed ``exp(x)``, one culprit
named ``exp`` -- because a half-expanded call is neither a simpler program nor something a
back-end author can act on.

Finding calls.  A call in a function is a node ``r`` and an argument ``x`` with
``r is FUNCTIONS[name](x)``: nodes are interned, so expanding ``x`` again returns the very nodes
the front end (or the generator) built, and nothing about calls needs to be stored in the graph.
Expanding a node costs ~1 ms, so a cheap test comes first: the expansion's *probes* -- the
nodes that take the argument directly and otherwise only constants, e.g. ``max(x, -104.0)`` for
f32 ``exp`` -- must all be among the argument's users (:func:`_probes`, from the expansion of a
scalar; a shaped argument's constants are broadcast scalars).  Expansions are cached
(:func:`expand`), so finding the calls the generator just made costs no second expansion, and
the result of :func:`analyse` is cached by region hash.

Units.  :class:`Units` lists a function's *visible* nodes: those reachable from the results
when a call is entered only through its argument.  The other nodes of a call's expansion are
*hidden*: printed as part of the call, never observed alone by localisation, not counted as
ops.  A hidden node that the rest of the graph also uses is visible (it is an op of its own).

Interesting inputs.  :data:`RANGES` gives, per function, the bands where a libm differs from
another: exp's overflow and underflow thresholds, log near 0 and near 1, tanh and sigmoid at
large ``|x|``.  Every band is computed from the dtype's limits (``numpy.finfo``), not copied
from ``kera.mathlib``'s constants; a function the table does not know gets :func:`_default`.
The oracle's fuzzing inputs draw half their rows of a call's parameter from these bands
(:func:`sample`), and a call's constant argument comes from :func:`edges`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from kera import mathlib
from kera.dtypes import DType
from kera.ir import Function, Node, param, start_pieces, topo_order
from kera.ops import DYNAMIC, Op, TypeRuleError

Array = np.ndarray[Any, Any]
LEAF_OPS = frozenset({Op.PARAM, Op.CONST})

#: the math-library functions, in the library's order
NAMES: tuple[str, ...] = tuple(mathlib.FUNCTIONS)


_EXPANDED: dict[tuple[str, bytes], Node] = {}
_EXPANDED_MAX = 1024


def expand(name: str, x: Node) -> Node:
    """The call ``name(x)`` as contract ops: the same nodes the front end builds (cached)."""
    key = (name, x.hash)
    node = _EXPANDED.get(key)
    if node is None:
        if len(_EXPANDED) >= _EXPANDED_MAX:
            _EXPANDED.clear()
        node = _EXPANDED[key] = mathlib.FUNCTIONS[name](x)
    return node


@cache
def accepts(name: str) -> tuple[DType, ...]:
    """The dtypes ``name`` takes, asked of the library itself (it raises on the others)."""
    out = []
    for dt in DType:
        try:
            expand(name, param(0, "x", dt))
        except TypeRuleError:
            continue
        out.append(dt)
    return tuple(out)


@cache
def contract_ops(name: str) -> frozenset[Op]:
    """Every op the expansion of ``name`` uses, over its dtypes, scalar and shaped: a call is
    generated only for targets that lower all of them."""
    ops: set[Op] = set()
    for dt in accepts(name):
        for shape in ((), (2,)):
            ops |= {n.op for n in topo_order([expand(name, param(0, "x", dt, shape))])}
    return frozenset(ops - LEAF_OPS)


# ------------------------------------------------------------------------------ finding calls

#: a node of an expansion that takes the argument directly: its op and, per input, None for
#: the argument or the bytes of a scalar constant
_Probe = tuple[Op, tuple[bytes | None, ...]]


@cache
def _probes(name: str, dt: DType) -> tuple[_Probe, ...]:
    """The nodes of ``name``'s expansion of a scalar ``dt`` that take the argument and
    otherwise only constants: every call of ``name`` has a user of its argument like each."""
    x = param(0, "x", dt)
    nodes = topo_order([expand(name, x)])
    return tuple(
        (n.op, tuple(None if i is x else _scalar(i) for i in n.inputs))
        for n in nodes
        if x in n.inputs and all(i is x or i.op is Op.CONST for i in n.inputs)
    )


def _scalar(n: Node) -> bytes | None:
    """The bytes of a scalar constant, or of the scalar a constant is broadcast from."""
    if n.op is Op.BROADCAST:
        n = n.inputs[0]
    if n.op is not Op.CONST or n.shape:
        return None
    value = n.attr("value")
    assert isinstance(value, bytes)
    return value


def _probed(probe: _Probe, x: Node, users: list[Node]) -> bool:
    op, ins = probe
    return any(
        u.op is op
        and len(u.inputs) == len(ins)
        and all(
            i is x if b is None else _scalar(i) == b for i, b in zip(u.inputs, ins, strict=True)
        )
        for u in users
    )


@dataclass(frozen=True)
class Call:
    """``result is expand(name, arg)``."""

    name: str
    arg: Node
    result: Node


def _find(nodes: list[Node]) -> dict[int, Call]:
    """Every call among nodes, by id of its result."""
    present = {id(n) for n in nodes}
    users: dict[int, list[Node]] = {}
    for n in nodes:
        for i in n.inputs:
            users.setdefault(id(i), []).append(n)
    found: dict[int, Call] = {}
    for x in nodes:
        used_by = users.get(id(x))
        if not used_by or not x.dtype.is_float:
            continue
        user_ops = {u.op for u in used_by}
        for name in NAMES:
            if x.dtype not in accepts(name):
                continue
            probes = _probes(name, x.dtype)
            if not all(p[0] in user_ops for p in probes):
                continue
            if not all(_probed(p, x, used_by) for p in probes):
                continue
            r = expand(name, x)
            if id(r) in present:
                found[id(r)] = Call(name, x, r)
    return found


class Units:
    """A function seen with each call as one unit (see the module docstring)."""

    def __init__(self, fn: Function) -> None:
        nodes = fn.nodes()
        self.calls = _find(nodes)
        seen: set[int] = set()
        stack = list(fn.results)
        while stack:
            n = stack.pop()
            if id(n) not in seen:
                seen.add(id(n))
                stack.extend(self.operands(n))
        #: the visible nodes, in the function's canonical order
        self.nodes = [n for n in nodes if id(n) in seen]
        self.hidden = frozenset(id(n) for n in nodes) - seen

    def call(self, node: Node) -> Call | None:
        return self.calls.get(id(node))

    def operands(self, node: Node) -> tuple[Node, ...]:
        """A call's argument; any other node's inputs."""
        c = self.calls.get(id(node))
        return (c.arg,) if c is not None else node.inputs

    def op_name(self, node: Node) -> str:
        """The call's function name, or the node's op."""
        c = self.calls.get(id(node))
        return c.name if c is not None else node.op.value

    def op_count(self) -> int:
        """Visible operations: a call counts as one."""
        return sum(1 for n in self.nodes if n.op not in LEAF_OPS)


_CACHE: dict[bytes, Units] = {}
_CACHE_MAX = 4096


def analyse(fn: Function) -> Units:
    """fn's units (cached by region hash: the same hash is the same nodes)."""
    units = _CACHE.get(fn.region_hash)
    if units is None:
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.clear()
        units = _CACHE[fn.region_hash] = Units(fn)
    return units


# ------------------------------------------------------------------------------ interesting inputs


@dataclass(frozen=True)
class Band:
    """Values in [lo, hi] (0 < lo for a log-scale band), both signs when symmetric."""

    lo: float
    hi: float
    log_scale: bool = False
    symmetric: bool = False

    def at(self, u: Array) -> Array:
        """The band's values at uniform u in [0, 1) (float64)."""
        if not self.log_scale:
            return self.lo + u * (self.hi - self.lo)
        a, b = math.log(self.lo), math.log(self.hi)
        return np.clip(np.exp(a + u * (b - a)), self.lo, self.hi)


@dataclass(frozen=True)
class Limits:
    """A float dtype's limits, as the bands need them (float64)."""

    ln_max: float  # exp overflows past it
    ln_tiny: float  # exp's result is subnormal below it
    ln_sub: float  # exp's result rounds to 0 below it (give or take half an ulp)
    eps: float  # 1 + eps is the next float after 1
    tiny: float  # smallest normal
    sub: float  # smallest subnormal
    max: float

    @classmethod
    def of(cls, dt: DType) -> Limits:
        f = np.finfo(dt.np)
        tiny, sub, top = float(f.tiny), float(f.smallest_subnormal), float(f.max)
        return cls(math.log(top), math.log(tiny), math.log(sub), float(f.eps), tiny, sub, top)

    @property
    def tanh_sat(self) -> float:
        """tanh(x) rounds to 1 past it: 1 - tanh(x) ~ 2 e**-2x < eps / 4."""
        return 0.5 * math.log(8 / self.eps)

    @property
    def sigmoid_sat(self) -> float:
        """sigmoid(x) rounds to 1 past it: e**-x < eps / 4."""
        return math.log(4 / self.eps)


@dataclass(frozen=True)
class Ranges:
    bands: tuple[Band, ...]
    edges: tuple[float, ...]  # the thresholds themselves: a call's constant argument


def _exp(m: Limits) -> Ranges:
    return Ranges(
        (
            Band(-m.ln_max, m.ln_max),  # every finite, non-zero result
            Band(m.ln_max - 1, m.ln_max + 1),  # overflow to inf
            Band(m.ln_sub - 1, m.ln_tiny + 1),  # subnormal results, underflow to 0
            Band(m.eps * m.eps, m.eps, log_scale=True, symmetric=True),  # e**x ~ 1 + x
        ),
        (m.ln_max, m.ln_tiny, m.ln_sub, -m.ln_max),
    )


def _log(m: Limits) -> Ranges:
    return Ranges(
        (
            Band(1 - 1 / 16, 1 + 1 / 16),  # near 1: the result cancels
            Band(m.sub, 4 * m.tiny, log_scale=True),  # subnormal and tiny arguments
            Band(m.sub, m.max, log_scale=True),  # every positive float
            Band(0.5, 2.0),  # the reduction's [sqrt(1/2), sqrt(2)) and its edges
        ),
        (1.0, m.tiny, m.sub, m.max, math.sqrt(0.5), math.sqrt(2.0)),
    )


def _tanh(m: Limits) -> Ranges:
    sat = m.tanh_sat
    return Ranges(
        (
            Band(0, sat),  # below saturation
            Band(sat / 2, 2 * sat, symmetric=True),  # large |x|: near and past saturation
            Band(m.eps, 1, log_scale=True, symmetric=True),  # small |x|: tanh(x) ~ x
            Band(-sat, 0),
        ),
        (sat, -sat, math.sqrt(m.eps), 1.0),
    )


def _sigmoid(m: Limits) -> Ranges:
    sat = m.sigmoid_sat
    return Ranges(
        (
            Band(-sat, sat),
            Band(sat / 2, 2 * sat, symmetric=True),  # large |x|: 1 - e**-x, and e**x
            Band(m.ln_sub - 1, m.ln_tiny + 1),  # subnormal results, underflow to 0
        ),
        (sat, -sat, m.ln_tiny, m.ln_sub),
    )


def _default(m: Limits) -> Ranges:
    """A function the table does not know: the exp-safe range and small |x|."""
    return Ranges(
        (Band(-m.ln_max, m.ln_max), Band(m.eps, 1, log_scale=True, symmetric=True)),
        (1.0, -1.0, m.ln_max),
    )


#: the interesting arguments of each function (see the module docstring)
RANGES: dict[str, Callable[[Limits], Ranges]] = {
    "exp": _exp,
    "log": _log,
    "tanh": _tanh,
    "sigmoid": _sigmoid,
}


@cache
def ranges(name: str, dt: DType) -> Ranges:
    return RANGES.get(name, _default)(Limits.of(dt))


#: special arguments every call's constant may take, beside its thresholds
_SPECIALS = (0.0, -0.0, math.inf, -math.inf, math.nan)


@cache
def edges(name: str, dt: DType) -> tuple[float, ...]:
    """Constants for a call's argument: its thresholds, then ±0, ±inf and NaN."""
    return (*ranges(name, dt).edges, *_SPECIALS)


def sample(rng: np.random.Generator, name: str, dt: DType, shape: tuple[int, ...]) -> Array:
    """Values of ``shape`` from ``name``'s bands (each element from a band drawn uniformly)."""
    bands = ranges(name, dt).bands
    which = rng.integers(0, len(bands), shape)
    u = rng.random(shape)
    sign = np.where(rng.integers(0, 2, shape) == 1, -1.0, 1.0)
    out = np.zeros(shape)
    for k, band in enumerate(bands):
        at = which == k
        vals = band.at(u[at])
        out[at] = vals * sign[at] if band.symmetric else vals
    with np.errstate(over="ignore"):
        return out.astype(dt.np)


def bias_inputs(fn: Function, inputs: dict[str, Array], rows: range, seed: bytes) -> None:
    """Overwrite every other row in ``rows`` of each parameter that is a call's argument with
    values from the call's bands (in place; a parameter of several calls takes turns)."""
    by_param: dict[str, list[str]] = {}
    for c in analyse(fn).calls.values():
        if c.arg.op is Op.PARAM:
            by_param.setdefault(str(c.arg.attr("name")), []).append(c.name)
    if not by_param:
        return
    rng = np.random.default_rng(list(seed))
    for p in fn.params:
        name = str(p.attr("name"))
        fns = by_param.get(name, [])
        for k, r in enumerate(rows[::2] if fns else ()):
            inputs[name][r] = sample(rng, fns[k % len(fns)], p.dtype, p.shape)


def start_internals(nodes: Sequence[Node]) -> set[int]:
    """Nodes that only assemble start vectors (reshapes of the scalars, zero constants,
    concats): the dynamic op's source spelling makes them, so they are not printed."""
    internal: set[int] = set()
    for n in nodes:
        if n.op in DYNAMIC and start_pieces(n.inputs[-1]) is not None:
            stack = [n.inputs[-1]]
            while stack:
                x = stack.pop()
                if x.op in (Op.CONCAT, Op.RESHAPE, Op.CONST) and id(x) not in internal:
                    internal.add(id(x))
                    stack.extend(x.inputs if x.op is Op.CONCAT else ())
    used = {
        id(x)
        for n in nodes
        if id(n) not in internal
        for x in (n.inputs[:-1] if n.op in DYNAMIC else n.inputs)
    }
    return internal - used
