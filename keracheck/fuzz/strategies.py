"""Hypothesis strategies for valid, well-typed Kera graphs, built to shrink well.

Encoding.  A graph is drawn as a policy bit mask (``policies``), then a sequence of *steps* in
topological order, each in a span of its own, then a *focus* (below).  A step draws:

1. an op, from the allowed set in :data:`OP_ORDER` (simplest first), or a math-library call
   (``calls.NAMES``, after every op), weighted by the profile; choice 0 *skips* the step;
2. its *anchor* (first) operand in one choice: a fresh parameter of each type the op accepts
   (f32 scalars first), a fresh constant (its type drawn next), or an earlier value it accepts
   (most recent first) -- a fresh parameter costs no more choices than a reused value, so the
   shrinker can swap a computed operand for a parameter;
3. its other operands: a fresh parameter, a fresh constant, or an earlier value of exactly the
   type they need; a few policy hooks may instead make an operand a chosen constant (a shift
   amount past the width, a divisor of 0 or -1) or the cancelling twin of a product;
4. its attributes (axis, shape, perm, start/stop, target dtype), each an index into the valid
   choices.

Constants are scalars; a tensor constant is ``broadcast(scalar)``, and a NaN constant with a
payload other than the canonical one is ``bitcast(<uint constant>)`` -- exactly what Kera source
can spell, so every generated graph prints as source (``to_kera``) with the same fingerprint.
The function's results are its *sinks*: every op node no other node uses.

Calls.  A call step (``exp``, ``log`` ...) draws its argument like any anchor (a constant one
comes from the function's thresholds, ``calls.edges``) and adds the library's whole expansion
at once: one step is one call, so the shrinker keeps a call whole or deletes it, and the call
counts as one op (:func:`op_count`).  A call is offered only when every op of its expansion is
allowed.

Focus (coverage-guided choice).  Each graph ends with one *focus*: none, or a :class:`Combo` --
a step kind with the dtype of its first operand (and the target dtype of a ``convert`` or
``bitcast``) from the table :func:`combos` -- which adds one more step of exactly that
combination on fresh leaves (its own parameters, special constants).  Alone, a strategy draws
the focus like any choice (a quarter of the graphs have one).  In a campaign, a ``Focus``
(``coverage.Coverage``) picks it -- a combination not yet exercised -- from a seeded random
generator, which also makes the focus step's choices; every value is *recorded* as the choice
that draws it, so the graph replays (and shrinks: to no focus, or to the focus alone) from its
choices without the campaign's state.  Hypothesis sees only the seed (one draw of fixed range
after the steps) and nothing it draws later depends on the focus: were the range or the sequel
of a draw to depend on the campaign's state, it would report a flaky strategy.

Continuation ("another step?") is a weighted choice whose smallest value means *stop*; every
later index is read relative to the values that exist, so any edited choice sequence still
builds a valid graph.  Every weighted choice (:func:`choose`) shrinks toward its first entry,
and every table here lists the simplest entry first (f32 before other dtypes, scalars before
tensors, ``add`` before ``fma``, a parameter before a constant, ``0`` before other constants).
No strategy draws a size and then loops.

Every primitive choice of a graph is recorded (:class:`Drawn`), so a graph found in a batch
can be replayed -- and shrunk -- on its own (``engine``).
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cache, partial
from typing import Any, Literal, NamedTuple, Protocol

import numpy as np
from hypothesis import strategies as st

from kera.dtypes import CANONICAL_NAN, DType
from kera.ir import (
    Function,
    Node,
    call,
    callee,
    const,
    loop,
    loop_body,
    loop_group,
    make_node,
    param,
    start_vector,
    transfer,
)
from kera.ops import (
    ARITY,
    BINARY_ARITH,
    BITWISE,
    REDUCE,
    REGION_OPS,
    Op,
    TensorType,
    TypeRuleError,
    infer,
)
from keracheck.fuzz import calls
from keracheck.fuzz.policies import Profile, profile

Shape = tuple[int, ...]
Draw = Callable[[st.SearchStrategy[Any]], Any]
#: what a step makes: an op, or a call of the math library by name
Step = Op | str

#: dtypes, simplest first (the shrinker moves fresh leaves toward f32)
DTYPES: tuple[DType, ...] = (
    DType.F32,
    DType.I32,
    DType.F64,
    DType.I64,
    DType.U32,
    DType.U64,
    DType.BOOL,
)
#: ops a step can draw, simplest first
OP_ORDER: tuple[Op, ...] = (
    *(Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.MIN, Op.MAX, Op.NEG, Op.ABS, Op.SQRT),
    *(Op.FLOOR, Op.CEIL, Op.TRUNC, Op.ROUND, Op.COPYSIGN, Op.FMA, Op.REM),
    *(Op.AND, Op.OR, Op.XOR, Op.NOT, Op.SHL, Op.SHR),
    *(Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE, Op.SELECT, Op.CONVERT, Op.BITCAST),
    *(Op.SUM, Op.PROD, Op.AMIN, Op.AMAX, Op.DOT, Op.MATMUL),
    *(Op.BROADCAST, Op.RESHAPE, Op.TRANSPOSE, Op.SLICE, Op.CONCAT, Op.IOTA),
    *(Op.DYNAMIC_SLICE, Op.DYNAMIC_UPDATE_SLICE, Op.LOOP, Op.CALL, Op.TRANSFER),
)
#: where a transfer step moves a value (and then back to the host: :func:`_transfer`)
MOVE_SPACES = ("device", "unified", "pinned")
LEAF_OPS = frozenset({Op.PARAM, Op.CONST})
#: weight of "skip this step" (choice 0): rare when generating; the shrinker deletes a step
#: by zeroing its span, which makes it a skip
SKIP_WEIGHT = 1
#: weight of "no focus" per combination (a strategy alone focuses a quarter of its graphs)
NO_FOCUS_WEIGHT = 3
#: marker returned by GraphBuilder.pick for "a fresh parameter"
_PARAM = param(0, "fresh", DType.BOOL)
#: no generated value holds more elements than this (targets such as HDL simulators are slow);
#: the opt-in large-tensors policy raises it (``Profile.max_elements``)
MAX_ELEMENTS = 256
MAX_GEN_RANK = 3

# Special constants as bit patterns, simplest first: 0, 1, -1, 2, 0.5, -0, ±inf, ±NaN, NaN
# payloads and signalling NaNs, subnormals, normal limits, conversion limits.
_F32_SPECIALS = (
    0x00000000, 0x3F800000, 0xBF800000, 0x40000000, 0x3F000000, 0x80000000, 0x7F800000,
    0xFF800000, 0x7FC00000, 0xFFC00000, 0x7FC00001, 0x7F800001, 0xFFA00001, 0x00000001,
    0x807FFFFF, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x4F000000, 0xCF000000, 0x4F800000,
    0x5F000000, 0x5F800000, 0x33800000,
)  # fmt: skip
_F64_SPECIALS = (
    0x0000000000000000, 0x3FF0000000000000, 0xBFF0000000000000, 0x4000000000000000,
    0x3FE0000000000000, 0x8000000000000000, 0x7FF0000000000000, 0xFFF0000000000000,
    0x7FF8000000000000, 0xFFF8000000000000, 0x7FF8000000000001, 0x7FF0000000000001,
    0xFFF4000000000001, 0x0000000000000001, 0x800FFFFFFFFFFFFF, 0x0010000000000000,
    0x7FEFFFFFFFFFFFFF, 0xFFEFFFFFFFFFFFFF, 0x41E0000000000000, 0xC1E0000000000000,
    0x41F0000000000000, 0x43E0000000000000, 0xC3E0000000000000, 0x43F0000000000000,
    0x36A0000000000000, 0x3810000000000000,
)  # fmt: skip
# Rounding ties: halves for round/floor/ceil; values halfway between two floats of the
# narrower type for conversions (2^24 + 1 to f32, 1 + 2^-24 from f64 to f32, 2^53 + 1 to f64).
_F32_TIES = (0x3F000000, 0x3FC00000, 0x40200000, 0xBF000000, 0xC0200000, 0x4B000001, 0x3EFFFFFF)
_F64_TIES = (
    0x3FE0000000000000, 0x3FF8000000000000, 0x4004000000000000, 0xC004000000000000,
    0x3FF0000010000000, 0x4170000001000000, 0x4330000000000001, 0x36A8000000000000,
)  # fmt: skip
_INT_TIES = (16777217, 16777219, -16777217, 9007199254740993, 2**63 + 2**10 + 1)
FLOAT_SPECIALS = {DType.F32: _F32_SPECIALS, DType.F64: _F64_SPECIALS}
FLOAT_WIDTH: dict[DType, Literal[32, 64]] = {DType.F32: 32, DType.F64: 64}
FLOAT_TIES = {DType.F32: _F32_TIES, DType.F64: _F64_TIES}


def int_specials(dt: DType) -> tuple[int, ...]:
    """Special integers of a dtype, simplest first: 0, ±1, 2, the limits, shift widths."""
    w = dt.bits
    vals: tuple[int, ...] = (0, 1, -1, 2, dt.min, dt.max, dt.min + 1, dt.max - 1, w - 1, w, w + 1)
    vals += (2 * w,)
    vals += (-2, 1 << (w // 2), (1 << (w - 1)) - 1, 0x5555555555555555)
    return tuple(_wrap(v, dt) for v in vals)


def shift_amounts(dt: DType) -> tuple[int, ...]:
    """Shift amounts at or past the width (reduced mod width by the contract), and all ones."""
    w = dt.bits
    return tuple(_wrap(v, dt) for v in (w, w + 1, 2 * w, w - 1, -1, dt.max, 3 * w + 5))


def _wrap(v: int, dt: DType) -> int:
    """v as a value of the integer dtype dt (two's complement wrap)."""
    v &= (1 << dt.bits) - 1
    if dt.is_signed and v >> (dt.bits - 1):
        v -= 1 << dt.bits
    return v


@cache
def _integers(n: int) -> st.SearchStrategy[int]:
    """integers(1, n), built once per bound; callers subtract one to get an index 0 .. n-1.

    The offset keeps Hypothesis's one_of re-randomising shrink pass (it probes every small
    integer choice with minimum 0 and re-draws what follows, one test run per probe) off
    these choices: on a batch of graphs it would cost thousands of runs.  The greedy passes
    still lower each choice toward 0."""
    s = st.integers(1, n)
    _BOUNDS[id(s)] = n
    return s


def choice_value(weights: Sequence[int], index: int) -> int:
    """The primitive value :func:`choose` draws when it returns ``index``: recorded in place
    of a draw, it replays as that choice."""
    return 1 + sum(weights[:index])


def choose(draw: Draw, weights: Sequence[int]) -> int:
    """An index drawn with the given weights; it shrinks toward the first positive weight.

    With one positive weight nothing is drawn, so a policy that is off costs no choice."""
    total = sum(weights)
    if total <= 0:
        raise ValueError("choose needs a positive weight")
    if max(weights) == total:
        return next(i for i, w in enumerate(weights) if w)
    r: int = draw(_integers(total)) - 1
    for i, w in enumerate(weights):
        if r < w:
            return i
        r -= w
    raise AssertionError("unreachable")


def uniform(draw: Draw, n: int) -> int:
    return choose(draw, [1] * n)


# ------------------------------------------------------------------------------ typing tables


@cache
def elementwise_dtypes(op: Op) -> tuple[DType, ...]:
    """The dtypes an elementwise op accepts, asked of the one typing rule."""
    out = []
    for dt in DTYPES:
        t = TensorType(dt, ())
        try:
            infer(op, [t] * ARITY[op], {})
        except TypeRuleError:
            continue
        out.append(dt)
    return tuple(out)


@cache
def convert_targets(src: DType) -> tuple[DType, ...]:
    out = []
    for dt in DTYPES:
        try:
            infer(Op.CONVERT, [TensorType(src, ())], {"to": dt})
        except TypeRuleError:
            continue
        out.append(dt)
    return tuple(out)


@cache
def reshape_targets(size: int) -> tuple[Shape, ...]:
    """Every shape of rank <= 3 with ``size`` elements, lowest rank first."""
    out: list[Shape] = [(size,)] + ([()] if size == 1 else [])
    divisors = [d for d in range(1, size + 1) if size % d == 0]
    out += [(a, size // a) for a in divisors]
    out += [(a, b, size // (a * b)) for a in divisors for b in divisors if size % (a * b) == 0]
    return tuple(out)


def _size(shape: Shape) -> int:
    return math.prod(shape)


def op_count(fn: Function) -> int:
    """Nodes that are operations (not parameters or constants); a math-library call counts
    as one op, its expansion as none, and so does a dynamic op with the start vector it is
    called with; a loop or a call counts as one op (however many results) plus the ops of its
    body (a callee's each time it is called)."""
    n, groups = 0, set()
    units = calls.analyse(fn)
    hidden = calls.start_internals(units.nodes)  # spelled by the dynamic op's own call
    for node in units.nodes:
        if id(node) in hidden:
            continue
        if node.op in REGION_OPS:
            key = loop_group(node)
            if key not in groups:
                groups.add(key)
                n += 1 + op_count(loop_body(node))
        elif node.op not in LEAF_OPS:
            n += 1
    return n


# ------------------------------------------------------------------------------ steps and combos


def _all(op: Step) -> tuple[DType, ...]:
    return DTYPES


def _numeric(op: Step) -> tuple[DType, ...]:
    return DTYPES[:-1]


def _elementwise_dtypes(op: Step) -> tuple[DType, ...]:
    assert isinstance(op, Op)
    return elementwise_dtypes(op)


def _call_dtypes(name: Step) -> tuple[DType, ...]:
    assert isinstance(name, str)
    return tuple(d for d in DTYPES if d in calls.accepts(name))


#: the dtypes a step's first operand may take (iota: its ``to``); default: what the typing
#: rule accepts for an elementwise op
_STEP_DTYPES: dict[Op, Callable[[Step], tuple[DType, ...]]] = {
    **dict.fromkeys((Op.SELECT, Op.CONVERT), _all),
    **dict.fromkeys((Op.BROADCAST, Op.RESHAPE, Op.TRANSPOSE, Op.SLICE, Op.CONCAT), _all),
    **dict.fromkeys((Op.DYNAMIC_SLICE, Op.DYNAMIC_UPDATE_SLICE, Op.LOOP, Op.CALL), _all),
    Op.TRANSFER: _all,
    **dict.fromkeys((Op.BITCAST, Op.DOT, Op.MATMUL, Op.IOTA, *REDUCE), _numeric),
}


def step_dtypes(step: Step) -> tuple[DType, ...]:
    if isinstance(step, Op):
        return _STEP_DTYPES.get(step, _elementwise_dtypes)(step)
    return _call_dtypes(step)


@cache
def bitcast_targets(src: DType) -> tuple[DType, ...]:
    return tuple(d for d in DTYPES[:-1] if d.bits == src.bits and d is not src)


#: steps whose combination includes a target dtype (the row names the source)
_TARGETS: dict[Op, Callable[[DType], tuple[DType, ...]]] = {
    Op.CONVERT: convert_targets,
    Op.BITCAST: bitcast_targets,
}


class Combo(NamedTuple):
    """What coverage counts: a step kind, the dtype of its first operand (iota: its result,
    select: its values), and for convert and bitcast the target dtype.  (A tuple: counting
    hashes one per node of every graph.)"""

    step: Step
    dtype: DType
    to: DType | None = None

    @property
    def row(self) -> str:
        """Table row: the op or call, with the source dtype of a conversion."""
        return f"{self.step} {self.dtype}" if self.to is not None else str(self.step)

    @property
    def column(self) -> str:
        return str(self.to if self.to is not None else self.dtype)


def step_combos(step: Step) -> tuple[Combo, ...]:
    dts = step_dtypes(step)
    targets = _TARGETS.get(step) if isinstance(step, Op) else None
    if targets is None:
        return tuple(Combo(step, d) for d in dts)
    return tuple(Combo(step, d, to) for d in dts for to in targets(d))


def allowed_steps(ops: frozenset[Op], prof: Profile) -> list[Step]:
    """The steps of ``ops`` with a positive weight: ops simplest first, then calls whose whole
    expansion ``ops`` allows."""
    steps: list[Step] = [op for op in OP_ORDER if op in ops and prof.op_weights.get(op, 0) > 0]
    for region in (Op.LOOP, Op.CALL):
        if not ops & set(_BODY_OPS) and region in steps:
            steps.remove(region)  # a body needs an op to compute its results with
    steps += [
        name
        for name in calls.NAMES
        if prof.call_weights.get(name, 0) > 0 and calls.contract_ops(name) <= ops
    ]
    return steps


@cache
def combos(ops: frozenset[Op]) -> tuple[Combo, ...]:
    """Every combination the steps of ``ops`` can make (the focus table; the coverage table)."""
    return tuple(c for s in allowed_steps(ops, profile(())) for c in step_combos(s))


#: node ops whose combination's dtype is the result's, not the first operand's
_RESULT_DTYPE = frozenset({Op.SELECT, Op.IOTA})


def combo_of(units: calls.Units, node: Node) -> Combo:
    """The combination a visible, non-leaf node exercises."""
    c = units.call(node)
    if c is not None:
        return Combo(c.name, c.arg.dtype)
    if node.op in _TARGETS:
        return Combo(node.op, node.inputs[0].dtype, node.dtype)
    if node.op in _RESULT_DTYPE or not node.inputs:
        return Combo(node.op, node.dtype)
    return Combo(node.op, node.inputs[0].dtype)


def graph_combos(fn: Function) -> set[Combo]:
    """The combinations fn exercises (each once)."""
    units = calls.analyse(fn)
    return {combo_of(units, n) for n in units.nodes if n.op not in LEAF_OPS}


class Focus(Protocol):
    """Picks a graph's focus in a campaign: 0 for none, else 1 + an index into ``table``."""

    def focus(self, rng: random.Random, table: tuple[Combo, ...]) -> int: ...


#: the bound n of each ``_integers(n)`` strategy, by id: what a seeded draw needs to know
_BOUNDS: dict[int, int] = {}


def seeded(rng: random.Random) -> Draw:
    """A draw from ``rng`` for the strategies a focus step uses (``_integers`` only: its
    profile has no plain constants), with the distribution of a uniform choice."""

    def draw(strategy: st.SearchStrategy[Any]) -> Any:
        n = _BOUNDS.get(id(strategy))
        if n is None:
            raise TypeError(f"a seeded draw cannot make {strategy!r}")
        return rng.randint(1, n)

    return draw


# ------------------------------------------------------------------------------ one graph

Accept = Callable[[TensorType], bool]


def _small(t: TensorType, limit: int = MAX_ELEMENTS) -> bool:
    return _size(t.shape) <= limit and len(t.shape) <= MAX_GEN_RANK


class GraphBuilder:
    """The state of one graph being drawn: parameters, values in creation order, uses."""

    def __init__(self, draw: Draw, ops: frozenset[Op], prof: Profile) -> None:
        self.hypothesis_draw = draw  # the draw of the innermost strategy being drawn
        self.choices: list[Any] = []  # every primitive choice made, in order
        self.ops = ops
        self.p = prof
        self.params: list[Node] = []
        self.values: list[Node] = []
        self.known: set[int] = set()
        self.used: set[int] = set()
        self.only: Combo | None = None  # the focus, while its step draws
        self.effects: list[Node] = []  # the transfers made, in program order (seq = index)
        self.set_profile(prof)

    def set_profile(self, prof: Profile) -> None:
        self.p = prof
        self.steps = allowed_steps(self.ops, prof)
        if not self.steps:
            raise ValueError("no op to generate: the allowed op set is empty")

    def draw_focus(self, picker: Focus | None) -> None:
        """The graph's focus and its step: drawn, or (with ``picker``) made from a seeded
        generator and recorded as if drawn."""
        table = combos(self.ops)
        if not table:
            return
        weights = [NO_FOCUS_WEIGHT * len(table), *([1] * len(table))]
        if picker is None:
            k = choose(self.draw, weights)
            draw = self.hypothesis_draw
        else:
            rng = random.Random(self.hypothesis_draw(st.integers(0, 2**64 - 1)))
            k = picker.focus(rng, table)
            self.choices.append(choice_value(weights, k))
            draw = seeded(rng)
        if k:
            self.add_focus(table[k - 1], draw)

    def add_focus(self, combo: Combo, draw: Draw) -> None:
        """One step of exactly ``combo`` on fresh leaves (a builder with no earlier values,
        numbering parameters on and recording its choices here); no special constant pools
        need plain values, so a seeded draw can make every choice."""
        sub = GraphBuilder(draw, self.ops, replace(self.p, plain_weight=0))
        sub.params, sub.choices, sub.only = self.params, self.choices, combo
        sub.effects = self.effects
        _generate(sub, combo.step)
        for v in sub.values:
            if id(v) not in self.known:
                self.known.add(id(v))
                self.values.append(v)
        self.used |= sub.used

    # -- bookkeeping

    def draw(self, strategy: st.SearchStrategy[Any]) -> Any:
        """Draw one primitive choice (an integer or a float) and record it."""
        value = self.hypothesis_draw(strategy)
        self.choices.append(value)
        return value

    def record(self, node: Node, operands: Sequence[Node] | None = None) -> Node:
        """Add a value (operands: what it uses, default its inputs; a call uses its argument)."""
        if id(node) not in self.known:
            self.known.add(id(node))
            self.values.append(node)
        self.used.update(id(i) for i in (node.inputs if operands is None else operands))
        return node

    def build(self, op: Op, inputs: Sequence[Node], **attrs: Any) -> Node:
        return self.record(make_node(op, inputs, attrs))

    def ops_so_far(self) -> int:
        return sum(1 for v in self.values if v.op not in LEAF_OPS)

    def function(self, name: str) -> Function:
        sinks = [v for v in self.values if v.op not in LEAF_OPS and id(v) not in self.used]
        return Function(name, self.params, sinks, self.effects)

    # -- leaves

    def new_param(self, t: TensorType) -> Node:
        k = len(self.params)
        p = param(k, f"p{k}", t.dtype, t.shape)
        self.params.append(p)
        return self.record(p)

    def constant(self, t: TensorType, pool: Sequence[int] | Sequence[float] | None = None) -> Node:
        scalar = self.scalar(t.dtype, pool)
        if not t.shape:
            return scalar
        if Op.BROADCAST not in self.ops:
            return self.new_param(t)
        return self.build(Op.BROADCAST, [scalar], shape=t.shape)

    def scalar(self, dt: DType, pool: Sequence[int] | Sequence[float] | None = None) -> Node:
        if pool is not None:
            return self.record(const(pool[uniform(self.draw, len(pool))], dt))
        if dt is DType.BOOL:
            return self.record(const(uniform(self.draw, 2) == 1, dt))
        if dt.is_float:
            return self.float_const(dt)
        kind = choose(self.draw, [self.p.special_weight, self.p.plain_weight, self.p.tie_weight])
        if kind == 1:
            return self.record(const(self.draw(st.integers(dt.min, dt.max)), dt))
        vals = int_specials(dt) if kind == 0 else tuple(_wrap(v, dt) for v in _INT_TIES)
        return self.record(const(vals[uniform(self.draw, len(vals))], dt))

    def float_const(self, dt: DType) -> Node:
        kind = choose(self.draw, [self.p.special_weight, self.p.plain_weight, self.p.tie_weight])
        if kind == 1:
            v = self.draw(st.floats(width=FLOAT_WIDTH[dt], allow_nan=False))
            return self.record(const(v, dt))
        pool = FLOAT_SPECIALS[dt] if kind == 0 else FLOAT_TIES[dt]
        return self.float_bits(dt, pool[uniform(self.draw, len(pool))])

    def float_bits(self, dt: DType, bits: int) -> Node:
        """A float constant with exact bits; a NaN payload is bitcast from an integer."""
        value = np.array([bits], dtype=dt.uint).view(dt.np).reshape(())
        magnitude = bits & ~(1 << (dt.bits - 1))
        if not np.isnan(value) or magnitude == CANONICAL_NAN[dt]:
            return self.record(const(value, dt))
        if Op.BITCAST not in self.ops:
            return self.record(const(np.array(np.nan, dtype=dt.np), dt))
        uint = DType.U32 if dt is DType.F32 else DType.U64
        return self.build(Op.BITCAST, [self.record(const(bits, uint))], to=dt)

    # -- operands

    def pick(self, cands: Sequence[Node]) -> Node | None:
        """One choice: a fresh parameter (0), a fresh constant (1), or cands[k - 2] (most recent
        first); None asks the caller for a constant of the type it needs."""
        fresh = self.p.fresh_weight
        weights = [fresh * self.p.param_weight, fresh * self.p.const_weight]
        weights += [
            self.p.reuse_weight + (self.p.recent_weight if i == 0 else 0) for i in range(len(cands))
        ]
        k = choose(self.draw, weights)
        return cands[k - 2] if k >= 2 else (_PARAM if k == 0 else None)

    def operand(self, t: TensorType, other: Node | None = None) -> Node:
        """An operand of type t; ``other`` (the anchor) stays a candidate but is not the
        favoured most recent one, so ``x op x`` is possible without being the rule."""
        cands = [v for v in reversed(self.values) if v.type == t and v is not other]
        if other is not None and other.type == t:
            cands.append(other)
        return self.fresh(t, self.pick(cands))

    def fresh(self, t: TensorType, picked: Node | None) -> Node:
        if picked is _PARAM:
            return self.new_param(t)
        return self.constant(t) if picked is None else picked

    def anchor(
        self,
        accept: Accept,
        dtypes: Sequence[DType] = DTYPES,
        pool: Callable[[DType], Sequence[float]] | None = None,
    ) -> Node:
        """The first operand of a step, in one choice: a fresh parameter of each accepted type
        (f32 scalars first), a fresh constant (its type drawn next; from ``pool`` when given),
        or an earlier value it accepts.  A fresh parameter costs no more choices than a reused
        value, so the shrinker can swap a computed operand for a parameter and then delete the
        step that made it.  A focus step takes only the focus dtype."""
        if self.only is not None and self.only.dtype in dtypes:
            dtypes = (self.only.dtype,)
        types = _fresh_types(accept, tuple(dtypes), self.p.shapes)
        cands = [
            v
            for v in reversed(self.values)
            if v.dtype in dtypes and _small(v.type, self.p.max_elements) and accept(v.type)
        ]
        n, fresh = len(types), self.p.fresh_weight
        weights = [fresh * self.p.param_weight] * n + [fresh * self.p.const_weight * n]
        weights += [
            n * (self.p.reuse_weight + (self.p.recent_weight if i == 0 else 0))
            for i in range(len(cands))
        ]
        k = choose(self.draw, weights)
        if k < n:
            return self.new_param(types[k])
        if k == n:
            t = types[uniform(self.draw, n)]
            return self.constant(t, None if pool is None else pool(t.dtype))
        return cands[k - n - 1]

    def target(self, tos: Sequence[DType], want: DType | None) -> DType:
        """The target dtype of a convert, bitcast or iota: ``want`` (the focus's) if allowed."""
        if want is not None and want in tos:
            return want
        return tos[uniform(self.draw, len(tos))]

    @property
    def focus_to(self) -> DType | None:
        return self.only.to if self.only is not None else None

    # -- steps

    def step_weight(self, step: Step) -> int:
        if isinstance(step, Op):
            return self.p.op_weights[step]
        return self.p.call_weights[step]

    def step(self) -> Node | None:
        """One step; None when it is skipped."""
        k = choose(self.draw, [SKIP_WEIGHT, *(self.step_weight(s) for s in self.steps)])
        if k == 0:
            return None
        return _generate(self, self.steps[k - 1])


@st.composite
def _step(draw: Draw, g: GraphBuilder) -> Node | None:
    """A step in a span of its own (Hypothesis's span passes work on whole steps)."""
    g.hypothesis_draw = draw
    return g.step()


@cache
def _fresh_types(
    accept: Accept, dtypes: tuple[DType, ...], shapes: tuple[Shape, ...]
) -> tuple[TensorType, ...]:
    return tuple(t for dt in dtypes for s in shapes if accept(t := TensorType(dt, s)))


# what each kind of step accepts as its first operand (module-level, so _fresh_types caches)


def _any(t: TensorType) -> bool:
    return True


def _vector(t: TensorType) -> bool:
    return len(t.shape) == 1


def _matrix(t: TensorType) -> bool:
    return len(t.shape) == 2


def _tensor(t: TensorType) -> bool:
    return len(t.shape) >= 1


def _rank2_up(t: TensorType) -> bool:
    return len(t.shape) >= 2


def _broadcastable(t: TensorType) -> bool:
    return len(t.shape) < MAX_GEN_RANK


@cache
def _doublable(limit: int) -> Accept:
    """Accepts a tensor that two of can be concatenated within ``limit`` elements (one function
    per limit, so _fresh_types caches)."""

    def accept(t: TensorType) -> bool:
        return len(t.shape) >= 1 and 2 * _size(t.shape) <= limit

    return accept


def _elementwise(g: GraphBuilder, op: Op) -> Node:
    x = g.anchor(_any, step_dtypes(op))
    if op in (Op.SHL, Op.SHR) and choose(g.draw, [1, g.p.shift_weight]):
        return g.build(op, [x, g.constant(x.type, shift_amounts(x.dtype))])
    if op in (Op.DIV, Op.REM) and x.dtype.is_int and choose(g.draw, [1, g.p.divisor_weight]):
        return g.build(op, [x, g.constant(x.type, (0, _wrap(-1, x.dtype)))])
    rest = [g.operand(x.type, x) for _ in range(1, ARITY[op])]
    return g.build(op, [x, *rest])


def _additive(g: GraphBuilder, op: Op) -> Node:
    """add/sub; the cancellation policy makes the first operand a product p = x * y and the
    second either anything or p's twin (p - p, p + -p): a fused (fma) target then returns
    the product's rounding error where the contract gives a rounded sum or zero."""
    x = g.anchor(_any, step_dtypes(op))
    if not choose(g.draw, [1, g.p.cancel_weight]) or Op.MUL not in g.ops:
        return g.build(op, [x, g.operand(x.type, x)])
    p = g.build(Op.MUL, [x, g.operand(x.type, x)])
    if uniform(g.draw, 2) == 0:
        return g.build(op, [p, g.operand(p.type, p)])
    twin = p if op is Op.SUB or Op.NEG not in g.ops else g.build(Op.NEG, [p])
    return g.build(op, [p, twin])


def _fma(g: GraphBuilder, op: Op) -> Node:
    """fma(x, y, c); the cancellation policy makes c = -(x * y), so the exact result is the
    product's rounding error (zero when the target computes it unfused)."""
    x = g.anchor(_any, step_dtypes(op))
    y = g.operand(x.type, x)
    if choose(g.draw, [1, g.p.cancel_weight]) and {Op.MUL, Op.NEG} <= g.ops:
        c = g.build(Op.NEG, [g.build(Op.MUL, [x, y])])
    else:
        c = g.operand(x.type, x)
    return g.build(op, [x, y, c])


def _select(g: GraphBuilder, op: Op) -> Node:
    x = g.anchor(_any, step_dtypes(op))
    cond = g.operand(TensorType(DType.BOOL, x.shape))
    return g.build(op, [cond, x, g.operand(x.type, x)])


def _convert(g: GraphBuilder, op: Op) -> Node:
    x = g.anchor(_any, step_dtypes(op))
    return g.build(op, [x], to=g.target(convert_targets(x.dtype), g.focus_to))


def _bitcast(g: GraphBuilder, op: Op) -> Node:
    x = g.anchor(_any, step_dtypes(op))
    return g.build(op, [x], to=g.target(bitcast_targets(x.dtype), g.focus_to))


def _reduce(g: GraphBuilder, op: Op) -> Node:
    x = g.anchor(_tensor, step_dtypes(op))
    return g.build(op, [x], axis=uniform(g.draw, len(x.shape)))


def _dot(g: GraphBuilder, op: Op) -> Node:
    x = g.anchor(_vector, step_dtypes(op))
    return g.build(op, [x, g.operand(x.type, x)])


def _matmul(g: GraphBuilder, op: Op) -> Node:
    x = g.anchor(_matrix, step_dtypes(op))
    k = x.shape[1]
    most = g.p.max_elements
    ns = [d for d in g.p.dims if k * d <= most and x.shape[0] * d <= most]
    n = ns[uniform(g.draw, len(ns))]
    return g.build(op, [x, g.operand(TensorType(x.dtype, (k, n)))])


def _broadcast_targets(shape: Shape, dims: Sequence[int], most: int) -> list[Shape]:
    out = [(d, *shape) for d in dims]
    for axis, size in enumerate(shape):
        if size == 1:
            out += [(*shape[:axis], d, *shape[axis + 1 :]) for d in dims if d != 1]
    return [s for s in out if _size(s) <= most]


def _broadcast(g: GraphBuilder, op: Op) -> Node:
    x = g.anchor(_broadcastable, step_dtypes(op))
    targets = _broadcast_targets(x.shape, g.p.dims, g.p.max_elements)
    return g.build(op, [x], shape=targets[uniform(g.draw, len(targets))])


def _reshape(g: GraphBuilder, op: Op) -> Node:
    x = g.anchor(_any, step_dtypes(op))
    targets = reshape_targets(_size(x.shape))
    return g.build(op, [x], shape=targets[uniform(g.draw, len(targets))])


def _transpose(g: GraphBuilder, op: Op) -> Node:
    x = g.anchor(_rank2_up, step_dtypes(op))
    perms = list(itertools.permutations(range(len(x.shape))))
    return g.build(op, [x], perm=perms[uniform(g.draw, len(perms))])


def _slice(g: GraphBuilder, op: Op) -> Node:
    x = g.anchor(_tensor, step_dtypes(op))
    start, stop = [], []
    for d in x.shape:
        a = uniform(g.draw, d)
        start.append(a)
        stop.append(a + 1 + uniform(g.draw, d - a))
    return g.build(op, [x], start=tuple(start), stop=tuple(stop))


def _concat(g: GraphBuilder, op: Op) -> Node:
    x = g.anchor(_doublable(g.p.max_elements), step_dtypes(op))
    axis = uniform(g.draw, len(x.shape))
    rest = _size(x.shape) // x.shape[axis]
    fits = [d for d in g.p.dims if rest * (x.shape[axis] + d) <= g.p.max_elements]
    sizes = [x.shape[axis], *fits]
    d = sizes[uniform(g.draw, len(sizes))]
    other = TensorType(x.dtype, (*x.shape[:axis], d, *x.shape[axis + 1 :]))
    return g.build(op, [x, g.operand(other)], axis=axis)


def _iota(g: GraphBuilder, op: Op) -> Node:
    shapes = [s for s in g.p.shapes if len(s) >= 1]
    shape = shapes[uniform(g.draw, len(shapes))]
    to = g.target(step_dtypes(op), g.only.dtype if g.only is not None else None)
    return g.build(op, [], shape=shape, axis=uniform(g.draw, len(shape)), to=to)


def _starts(g: GraphBuilder, rank: int) -> tuple[Node, list[Node]]:
    """A start vector: i32 scalar operands for the first 1..rank axes (a fresh parameter gets
    the input generator's specials, INT32_MIN and INT32_MAX among them), 0 for the rest --
    what ``dynamic_slice(x, i0, i1, size = ...)`` spells; and those scalars."""
    scalars = [g.operand(TensorType(DType.I32)) for _ in range(1 + uniform(g.draw, rank))]
    return start_vector([*scalars, *[None] * (rank - len(scalars))]), scalars


def _dynamic_slice(g: GraphBuilder, op: Op) -> Node:
    x = g.anchor(_tensor, step_dtypes(op))
    size = tuple(1 + uniform(g.draw, d) for d in x.shape)
    vector, scalars = _starts(g, len(x.shape))
    return g.record(make_node(op, [x, vector], {"size": size}), [x, *scalars])


def _dynamic_update_slice(g: GraphBuilder, op: Op) -> Node:
    x = g.anchor(_tensor, step_dtypes(op))
    window = TensorType(x.dtype, tuple(1 + uniform(g.draw, d) for d in x.shape))
    v = g.operand(window, x)
    vector, scalars = _starts(g, len(x.shape))
    return g.record(make_node(op, [x, v, vector]), [x, v, *scalars])


#: trip counts and first indices of a generated loop, simplest first
TRIPS: tuple[int, ...] = (1, 2, 3, 4, 5, 8, 16, 33)
TRIP_WEIGHTS: tuple[int, ...] = (4, 4, 3, 3, 2, 2, 1, 1)
LOS: tuple[int, ...] = (0, -2, 3)
#: how a body combines a carried value: ops of two operands of its type
_BODY_OPS: tuple[Op, ...] = tuple(op for op in OP_ORDER if op in BINARY_ARITH | BITWISE)


def _body_term(g: GraphBuilder, c: Node, i: Node, others: list[Node], trips: int) -> Node:
    """The second operand of a carried value's update: an outer value (captured), the row of
    a fresh ``T[trips, ...]`` parameter at the index (``x[i]``: a carried accumulation), the
    other carried value, or the index itself as data."""
    row_ok = {Op.DYNAMIC_SLICE, Op.RESHAPE} <= g.ops and len(c.shape) < MAX_GEN_RANK
    row_ok = row_ok and trips * _size(c.shape) <= g.p.max_elements
    index_ok = c.dtype is DType.I32 or (
        Op.CONVERT in g.ops and c.dtype in convert_targets(DType.I32)
    )
    index_ok = index_ok and (not c.shape or Op.BROADCAST in g.ops)
    others = [o for o in others if o.type == c.type]
    kind = choose(g.draw, [2, 3 if row_ok else 0, 1 if others else 0, 1 if index_ok else 0])
    if kind == 0:
        return g.operand(c.type, c)
    if kind == 1:
        xs = g.new_param(TensorType(c.dtype, (trips, *c.shape)))
        vector = start_vector([i, *[None] * len(c.shape)])
        row = make_node(Op.DYNAMIC_SLICE, [xs, vector], {"size": (1, *c.shape)})
        return make_node(Op.RESHAPE, [row], {"shape": c.shape})
    if kind == 2:
        return others[uniform(g.draw, len(others))]
    value = i if c.dtype is DType.I32 else make_node(Op.CONVERT, [i], {"to": c.dtype})
    return make_node(Op.BROADCAST, [value], {"shape": c.shape}) if c.shape else value


def _loop(g: GraphBuilder, op: Op) -> Node:
    """``for i in lo..lo+trips with (c0 = a[, c1 = b]) { (c0 op t0[, c1 op t1]) }``: one or
    two carried values, each updated by an op with a term of :func:`_body_term`."""
    dtypes = [d for d in step_dtypes(op) if _body_ops(g, d)]
    c0 = g.anchor(_any, dtypes)
    inits = [c0] + ([g.operand(c0.type, c0)] if choose(g.draw, [3, 1]) else [])
    trips = TRIPS[choose(g.draw, TRIP_WEIGHTS)]
    lo = LOS[choose(g.draw, [6, 1, 1])]
    before = len(g.values)

    def body(i: Node, carried: list[Node]) -> list[Node]:
        out = []
        for c in carried:
            ops = _body_ops(g, c.dtype)
            term = _body_term(g, c, i, [o for o in carried if o is not c], trips)
            out.append(make_node(ops[uniform(g.draw, len(ops))], [c, term]))
        return out

    nodes = loop(lo, trips, inits, body)
    g.used.update(id(v) for v in g.values[before:])  # made for the body: not results
    for n in nodes:
        g.record(n)
    return nodes[0]


def _call_op(g: GraphBuilder, op: Op) -> Node:
    """``h(a[, b])`` of a callee with one or two results, each an op of its parameters; half
    the time called a second time with the operands swapped (parameters bound per call)."""
    dtypes = [d for d in step_dtypes(op) if _body_ops(g, d)]
    a = g.anchor(_any, dtypes)
    args = [a] + ([g.operand(a.type, a)] if choose(g.draw, [1, 3]) else [])
    ops = _body_ops(g, a.dtype)
    picks = [ops[uniform(g.draw, len(ops))] for _ in range(1 + choose(g.draw, [3, 1]))]

    def body(ps: list[Node]) -> list[Node]:
        return [make_node(o, [ps[0], ps[-1 - k % len(ps)]]) for k, o in enumerate(picks)]

    fn = callee("h", [x.type for x in args], body)
    nodes = [g.record(n) for n in call(fn, args)]
    if len(args) == 2 and choose(g.draw, [1, 1]):
        nodes = [g.record(n) for n in call(fn, args[::-1])]
    return nodes[0]


def _transfer(g: GraphBuilder, op: Op) -> Node:
    """``transfer(transfer(x, to = S), to = host)``: a host value moved to the device, unified
    or pinned memory and back, two effects in program order.  Every other value of a fuzzed
    graph lives on the host, so the round trip's result can meet any of them (the language's
    one-space rule, ``docs/language.md``); the value in ``S`` is not offered to later steps."""
    x = g.anchor(_any, step_dtypes(op))
    space = MOVE_SPACES[uniform(g.draw, len(MOVE_SPACES))]
    there = transfer(x, space, len(g.effects), source="host")
    g.effects.append(there)
    back = transfer(there, "host", len(g.effects), source=space)
    g.effects.append(back)
    g.used.update((id(x), id(there)))
    return g.record(back)


def _body_ops(g: GraphBuilder, dt: DType) -> list[Op]:
    return [op for op in _BODY_OPS if op in g.ops and dt in elementwise_dtypes(op)]


def _call(g: GraphBuilder, name: str) -> Node:
    """One math-library call, expanded whole; a constant argument is one of its thresholds."""
    x = g.anchor(_any, step_dtypes(name), partial(calls.edges, name))
    return g.record(calls.expand(name, x), [x])


_GENERATORS: dict[Op, Callable[[GraphBuilder, Op], Node]] = {
    **dict.fromkeys(OP_ORDER, _elementwise),
    Op.ADD: _additive,
    Op.SUB: _additive,
    Op.FMA: _fma,
    Op.SELECT: _select,
    Op.CONVERT: _convert,
    Op.BITCAST: _bitcast,
    **dict.fromkeys(REDUCE, _reduce),
    Op.DOT: _dot,
    Op.MATMUL: _matmul,
    Op.BROADCAST: _broadcast,
    Op.RESHAPE: _reshape,
    Op.TRANSPOSE: _transpose,
    Op.SLICE: _slice,
    Op.CONCAT: _concat,
    Op.IOTA: _iota,
    Op.DYNAMIC_SLICE: _dynamic_slice,
    Op.DYNAMIC_UPDATE_SLICE: _dynamic_update_slice,
    Op.LOOP: _loop,
    Op.CALL: _call_op,
    Op.TRANSFER: _transfer,
}


def _generate(g: GraphBuilder, step: Step) -> Node:
    if isinstance(step, Op):
        return _GENERATORS[step](g, step)
    return _call(g, step)


@dataclass(frozen=True)
class Drawn:
    """A drawn graph (None when every step was skipped) and the choices that drew it: replaying
    them through :func:`recorded_graphs` (e.g. from a Hypothesis example database) draws the
    same graph."""

    fn: Function | None
    choices: tuple[Any, ...]


def draw_graph(
    draw: Draw,
    ops: frozenset[Op],
    policies: Sequence[str],
    name: str = "fuzz",
    focus: Focus | None = None,
) -> Drawn:
    g = GraphBuilder(draw, ops, profile(()))
    mask = g.draw(_integers(1 << len(policies))) - 1 if policies else 0
    g.set_profile(profile([p for i, p in enumerate(policies) if mask >> i & 1]))
    draw(_step(g))
    steps = 1
    while steps < 2 * g.p.max_ops and g.ops_so_far() < g.p.max_ops:
        g.hypothesis_draw = draw
        if not choose(g.draw, [g.p.stop_weight, g.p.go_weight]):
            break
        draw(_step(g))
        steps += 1
    g.hypothesis_draw = draw
    g.draw_focus(focus)
    return Drawn(g.function(name) if g.ops_so_far() else None, tuple(g.choices))


def as_ops(ops: Sequence[str | Op] | frozenset[str] | frozenset[Op] | None) -> frozenset[Op]:
    """The op set a strategy may use (None: every op)."""
    if ops is None:
        return frozenset(Op)
    return frozenset(Op(o) for o in ops)


def recorded_graphs(
    ops: Sequence[str | Op] | frozenset[str] | frozenset[Op] | None = None,
    policies: Sequence[str] = (),
    focus: Focus | None = None,
) -> st.SearchStrategy[Drawn]:
    """One graph over ``ops`` (default: all) with the named policies switchable, and its
    choices; ``focus`` (a campaign's coverage) picks each graph's focus.  Its choices replay
    the same graph without ``focus``."""
    allowed, pols = as_ops(ops), tuple(policies)
    return st.composite(lambda draw: draw_graph(draw, allowed, pols, focus=focus))()


def graphs(
    ops: Sequence[str | Op] | frozenset[str] | frozenset[Op] | None = None,
    policies: Sequence[str] = (),
) -> st.SearchStrategy[Function | None]:
    """One valid graph, or None when every step was skipped (a shrinker's way to delete it)."""
    return recorded_graphs(ops, policies).map(_fn)


def _fn(d: Drawn) -> Function | None:
    return d.fn


def batches(
    ops: Sequence[str | Op] | frozenset[str] | frozenset[Op] | None = None,
    policies: Sequence[str] = (),
    size: int = 24,
    focus: Focus | None = None,
) -> st.SearchStrategy[list[Drawn]]:
    """A batch of ``size`` distinct graphs run together (fewer when some are empty), each with
    its own choices so that one of them can be shrunk alone.

    Drawn as a unique list: Hypothesis's generation-time mutator copies spans between places
    with the same label, which would turn most examples into copies of earlier batches (two of
    every three graphs drawn repeated one already seen); it leaves the inside of a unique
    collection alone.  The batch is never shrunk as a whole, so its size is fixed."""
    one = recorded_graphs(ops, policies, focus)
    drawn = st.lists(one, min_size=size, max_size=size, unique_by=_identity)
    return drawn.map(_non_empty)


def _identity(d: Drawn) -> object:
    return d.fn.fingerprint if d.fn is not None else id(d)


def _non_empty(drawn: list[Drawn]) -> list[Drawn]:
    return [d for d in drawn if d.fn is not None]
