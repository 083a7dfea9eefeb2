"""Generation policies: switchable biases of the graph strategy, after YARPGen.

A :class:`Profile` holds every weight the strategy in ``keracheck.fuzz.strategies`` draws with:
op weights, math-library call weights (by function name), leaf kinds, operand reuse, constant
pools, graph length and shapes.  A *policy* is
a named function ``Profile -> Profile`` that skews some of those weights so that a class of
divergence becomes likely: special constants, shift amounts at or past the width, ``MIN / -1``
and division by zero, rounding ties, cancellation (``x*y - x*y`` exposes a hidden fma), long
reductions, deep elementwise chains, constant leaves.

Which policies act is itself drawn, per graph, from the enabled set (YARPGen applies its
policies to randomly chosen regions the same way): one bit mask at the start of a graph, which
the shrinker lowers toward "no policy" when the divergence does not need them.  Policies only move probabilities, never validity: every profile generates well-typed
graphs, and a graph drawn under one profile is a graph another profile could draw.

Weights are small integers; a weight of 0 removes a choice.  The *first* entry of every weighted
choice is the simplest one, and the shrinker moves toward it (see ``strategies.choose``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from kera.ops import COMPARE, MOVEMENT, REDUCE, UNARY, Op
from keracheck.fuzz.calls import NAMES as CALLS

Shape = tuple[int, ...]

#: fresh shapes, simplest first: scalars, odd and power-of-two vectors, small matrices, rank 3
SHAPES: tuple[Shape, ...] = (
    (),
    (1,),
    (2,),
    (3,),
    (4,),
    (5,),
    (7,),
    (8,),
    (16,),
    (17,),
    (2, 3),
    (3, 2),
    (4, 4),
    (2, 1),
    (1, 5),
    (2, 2, 2),
    (3, 1, 2),
)
#: long axes for the long-reductions policy: past a power of two, at one, and far from one
LONG_SHAPES: tuple[Shape, ...] = ((33,), (64,), (100,), (4, 33), (31, 3), (129,))
#: lengths of new axes (broadcast, concat, matmul's n)
DIMS: tuple[int, ...] = (1, 2, 3, 4, 5, 7, 8, 16, 17)
LONG_DIMS: tuple[int, ...] = (33, 64, 100)


def _base_op_weights() -> dict[Op, int]:
    w = dict.fromkeys(Op, 2)
    for op in (Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.MIN, Op.MAX):
        w[op] = 4  # the arithmetic every back end lowers differently
    for op in UNARY | COMPARE:
        w[op] = 2
    for op in MOVEMENT:
        w[op] = 1
    w[Op.DOT] = w[Op.MATMUL] = 1
    w[Op.LOOP] = w[Op.CALL] = w[Op.DYNAMIC_SLICE] = w[Op.DYNAMIC_UPDATE_SLICE] = 1
    del w[Op.PARAM], w[Op.CONST]  # leaves are drawn as operands, never as steps
    return w


def _base_call_weights() -> dict[str, int]:
    # a call is 40-100 contract ops, so calls are rarer than ops (about one graph in four has
    # one); coverage-guided focus makes sure each (function, dtype) is exercised
    return dict.fromkeys(CALLS, 1)


@dataclass(frozen=True)
class Profile:
    """Every weight the graph strategy draws with (see the module docstring)."""

    op_weights: Mapping[Op, int] = field(default_factory=_base_op_weights)
    call_weights: Mapping[str, int] = field(default_factory=_base_call_weights)  # by name
    param_weight: int = 3  # a fresh leaf is a new parameter ...
    const_weight: int = 1  # ... or a constant
    fresh_weight: int = 1  # an operand is a fresh leaf ...
    reuse_weight: int = 2  # ... or any earlier value of its type ...
    recent_weight: int = 6  # ... with this extra weight on the most recent one
    special_weight: int = 1  # a constant comes from the special pool ...
    plain_weight: int = 2  # ... or is any value of its dtype
    tie_weight: int = 0  # ... or a rounding tie
    stop_weight: int = 1  # after each step: stop ...
    go_weight: int = 3  # ... or draw another step
    max_ops: int = 12
    shapes: tuple[Shape, ...] = SHAPES
    dims: tuple[int, ...] = DIMS
    shift_weight: int = 0  # a shift amount is a constant at or past the width
    divisor_weight: int = 0  # an integer divisor is the constant 0 or -1
    cancel_weight: int = 0  # add/sub cancel their first operand (x - x, x + -x)
    max_elements: int = 256  # no value holds more elements

    def scaled(self, ops: frozenset[Op] | set[Op], factor: int) -> dict[Op, int]:
        return {op: w * factor if op in ops else w for op, w in self.op_weights.items()}


@dataclass(frozen=True)
class Policy:
    name: str
    doc: str
    apply: Callable[[Profile], Profile]
    default: bool = True  # in the default set (off: only when named, or with 'all')


def _specials(p: Profile) -> Profile:
    return replace(p, special_weight=6, plain_weight=1, const_weight=2)


def _shift(p: Profile) -> Profile:
    return replace(p, shift_weight=3, op_weights=p.scaled({Op.SHL, Op.SHR}, 4))


def _division(p: Profile) -> Profile:
    return replace(p, divisor_weight=3, op_weights=p.scaled({Op.DIV, Op.REM}, 3))


def _ties(p: Profile) -> Profile:
    rounding = {Op.ROUND, Op.FLOOR, Op.CEIL, Op.TRUNC, Op.CONVERT}
    return replace(p, tie_weight=6, op_weights=p.scaled(rounding, 3))


def _cancellation(p: Profile) -> Profile:
    arith = {Op.ADD, Op.SUB, Op.MUL, Op.FMA}
    return replace(p, cancel_weight=3, op_weights=p.scaled(arith, 2))


def _long_reductions(p: Profile) -> Profile:
    return replace(
        p,
        shapes=p.shapes + LONG_SHAPES,
        dims=p.dims + LONG_DIMS,
        op_weights=p.scaled(REDUCE | {Op.DOT, Op.MATMUL}, 4),
    )


def _deep_chains(p: Profile) -> Profile:
    elementwise = UNARY | {Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.MIN, Op.MAX, Op.FMA}
    return replace(
        p,
        recent_weight=12,
        fresh_weight=1,
        go_weight=12,
        max_ops=40,
        op_weights=p.scaled(elementwise, 3),
    )


def _loops(p: Profile) -> Profile:
    return replace(
        p,
        op_weights=p.scaled({Op.LOOP}, 6)
        | {o: 3 for o in (Op.DYNAMIC_SLICE, Op.DYNAMIC_UPDATE_SLICE)},
    )


def _const_leaves(p: Profile) -> Profile:
    return replace(p, const_weight=p.param_weight * 2)


#: shapes and axis lengths of the large-tensors policy: past the C back end's 16 KiB stack
#: tiles and the wasm module's first 64 KiB page at every lane count
LARGE_SHAPES: tuple[Shape, ...] = ((1000,), (64, 33), (3, 700), (2, 2048), (4096,))
LARGE_DIMS: tuple[int, ...] = (129, 1000)


def _large_tensors(p: Profile) -> Profile:
    return replace(
        p,
        shapes=p.shapes + LARGE_SHAPES,
        dims=p.dims + LARGE_DIMS,
        max_elements=4096,
        op_weights=p.scaled(MOVEMENT | {Op.DOT, Op.MATMUL}, 2),
    )


POLICIES: dict[str, Policy] = {
    p.name: p
    for p in (
        Policy("specials", "constants from the special pool (NaN payloads, ±0, subnormals, MIN/MAX)", _specials),
        Policy("shift-overflow", "shift amounts at or past the width (w, w+1, 2w, all ones)", _shift),
        Policy("min-div", "integer division by the constants 0 and -1 (MIN / -1, x / 0, x % 0)", _division),
        Policy("ties", "rounding ties (0.5, 2.5, 2^24+1 ...) and rounding/conversion ops", _ties),
        Policy("cancellation", "x - x and x + -x after products: exposes hidden fma contraction", _cancellation),
        Policy("long-reductions", "long and odd reduction axes (33, 100, 129), more reductions", _long_reductions),
        Policy("deep-chains", "long chains of elementwise ops, each on the previous value", _deep_chains),
        Policy("loops", "loops carrying accumulations over rows read at the index, and dynamic indexing", _loops),
        Policy("const-leaves", "most leaves constant (YARPGen's all/half-constant subtrees)", _const_leaves),
        Policy("large-tensors", "values of up to 4096 elements: the back ends' arena, scratch and memory-growth paths (opt-in: slow on HDL targets)", _large_tensors, default=False),
    )
}  # fmt: skip
#: the policies a campaign uses when none are named
DEFAULT: tuple[str, ...] = tuple(name for name, p in POLICIES.items() if p.default)


class PolicyError(ValueError):
    """An unknown policy name (a usage error)."""


def parse(names: str | None) -> tuple[str, ...]:
    """Policy names from ``a,b`` (None: the default set; 'all': every policy, the opt-in ones
    too; 'none': no policy)."""
    if names is None:
        return DEFAULT
    if names.strip() == "all":
        return tuple(POLICIES)
    if names.strip() == "none":
        return ()
    out = tuple(n.strip() for n in names.split(",") if n.strip())
    unknown = [n for n in out if n not in POLICIES]
    if unknown:
        raise PolicyError(
            f"unknown policy '{unknown[0]}' (choose from {', '.join(POLICIES)}, all, none)"
        )
    return out


def profile(active: tuple[str, ...] | list[str]) -> Profile:
    """The base profile with the named policies applied, in POLICIES order."""
    p = Profile()
    for name in POLICIES:
        if name in active:
            p = POLICIES[name].apply(p)
    return p
