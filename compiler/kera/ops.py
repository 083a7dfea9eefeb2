"""The op enum of the Kera contract, its property sets, and its typing rules.

One enum names every operation; the sets beside it give properties; :func:`infer` is the one
typing rule used by the graph builder, the .keg loader (as a verifier) and the front end (which
turns :class:`TypeRuleError` into diagnostics).  The meaning of each op, bit for bit, is in
``kera.semantics`` and ``docs/semantics.md``.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kera import limits
from kera.dtypes import DType

Shape = tuple[int, ...]


class Region:
    """What a typing rule needs of a region held in an attribute (a loop's body): its
    parameter and result nodes.  ``kera.ir.Function`` is the one implementation; the base lives
    here so that the typing rules and the attribute schema can name it without importing the
    IR."""

    __slots__ = ()
    params: tuple[Any, ...]
    results: tuple[Any, ...]
    region_hash: bytes
    #: the effectful nodes, in program order, and the declared effect names (sorted)
    effects: tuple[Any, ...]
    declared: tuple[str, ...]


AttrValue = int | bool | str | DType | tuple[int, ...] | bytes | Region
MAX_RANK = 4
MAX_DIM = 1 << 24


class Op(enum.StrEnum):
    PARAM = "param"
    CONST = "const"
    # unary elementwise
    NEG = "neg"
    ABS = "abs"
    NOT = "not"
    SQRT = "sqrt"
    FLOOR = "floor"
    CEIL = "ceil"
    TRUNC = "trunc"
    ROUND = "round"
    # binary elementwise
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    REM = "rem"
    MIN = "min"
    MAX = "max"
    COPYSIGN = "copysign"
    AND = "and"
    OR = "or"
    XOR = "xor"
    SHL = "shl"
    SHR = "shr"
    EQ = "eq"
    NE = "ne"
    LT = "lt"
    LE = "le"
    GT = "gt"
    GE = "ge"
    # ternary elementwise
    FMA = "fma"
    SELECT = "select"
    # conversions
    CONVERT = "convert"
    BITCAST = "bitcast"
    # reductions
    SUM = "sum"
    PROD = "prod"
    AMIN = "amin"
    AMAX = "amax"
    DOT = "dot"
    MATMUL = "matmul"
    # data movement
    BROADCAST = "broadcast"
    RESHAPE = "reshape"
    TRANSPOSE = "transpose"
    SLICE = "slice"
    CONCAT = "concat"
    IOTA = "iota"
    # dynamic indexing (start indices are data, clamped into range)
    DYNAMIC_SLICE = "dynamic_slice"
    DYNAMIC_UPDATE_SLICE = "dynamic_update_slice"
    # memory spaces (an effect: moves a value; the identity on its bits)
    TRANSFER = "transfer"
    # structured control flow
    LOOP = "loop"
    CALL = "call"


UNARY = frozenset({Op.NEG, Op.ABS, Op.NOT, Op.SQRT, Op.FLOOR, Op.CEIL, Op.TRUNC, Op.ROUND})
BINARY_ARITH = frozenset({Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.REM, Op.MIN, Op.MAX, Op.COPYSIGN})
BITWISE = frozenset({Op.AND, Op.OR, Op.XOR, Op.SHL, Op.SHR})
COMPARE = frozenset({Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE})
BINARY = BINARY_ARITH | BITWISE | COMPARE
ELEMENTWISE = UNARY | BINARY | {Op.FMA, Op.SELECT, Op.CONVERT, Op.BITCAST}
REDUCE = frozenset({Op.SUM, Op.PROD, Op.AMIN, Op.AMAX})

#: the binary op each step of a reduction's tree applies (``docs/semantics.md``, Reductions);
#: ``dot`` and ``matmul`` sum their products with the same tree
REDUCE_STEP: dict[Op, Op] = {
    Op.SUM: Op.ADD,
    Op.PROD: Op.MUL,
    Op.AMIN: Op.MIN,
    Op.AMAX: Op.MAX,
    Op.DOT: Op.ADD,
    Op.MATMUL: Op.ADD,
}


def reduce_identity(op: Op, dtype: DType) -> int | float:
    """The value a reduction's tree is padded with: ``-0.0``/``0`` for sums (``-0.0`` keeps a
    sum of ``-0.0`` negative), ``1`` for products, ``+inf``/MAX for ``amin``, ``-inf``/MIN for
    ``amax``."""
    base = Op.SUM if op in (Op.DOT, Op.MATMUL) else op
    if base is Op.SUM:
        return -0.0 if dtype.is_float else 0
    if base is Op.PROD:
        return 1
    if base is Op.AMIN:
        return math.inf if dtype.is_float else dtype.max
    if base is Op.AMAX:
        return -math.inf if dtype.is_float else dtype.min
    raise ValueError(f"{op} is not a reduction")


def reduce_identity_bits(op: Op, dtype: DType) -> int:
    """:func:`reduce_identity` as the dtype's bit pattern (an unsigned integer)."""
    value = np.array(reduce_identity(op, dtype), dtype=dtype.np)
    return int(value.view(dtype.uint))


MOVEMENT = frozenset({Op.BROADCAST, Op.RESHAPE, Op.TRANSPOSE, Op.SLICE, Op.CONCAT, Op.IOTA})
DYNAMIC = frozenset({Op.DYNAMIC_SLICE, Op.DYNAMIC_UPDATE_SLICE})
#: ops whose attributes hold a region (a body run by the op), always in the attribute ``body``
REGION_OPS = frozenset({Op.LOOP, Op.CALL})


class Space(enum.StrEnum):
    """A memory space a value can live in (``docs/semantics.md``, Memory spaces and effects);
    its value is its source spelling (``@device``).  Attributes hold the plain string
    (``kera.ir`` converts a member), so a graph encodes the same whichever was given.  A
    parameter records its space in the attribute ``space`` only when it is not ``host``, so a
    graph without spaces encodes (and fingerprints) exactly as before spaces existed."""

    HOST = "host"
    DEVICE = "device"
    PINNED = "pinned"
    UNIFIED = "unified"


SPACES: tuple[str, ...] = tuple(s.value for s in Space)
DEFAULT_SPACE = Space.HOST.value
#: the effect each effectful op has; a ``loop`` or ``call`` whose region declares effects has
#: them too (:func:`effect_of`).  Effectful nodes carry ``seq``, their position in their
#: function's program order, and are that function's effect roots.
EFFECTS: dict[Op, str] = {Op.TRANSFER: "transfer"}
#: the effect names a function may declare
EFFECT_NAMES = frozenset(EFFECTS.values())
#: the most iterations of one loop, and the deepest nesting of loops
MAX_TRIPS = 1 << 24
MAX_LOOP_DEPTH = 8
COMMUTATIVE = frozenset({Op.ADD, Op.MUL, Op.MIN, Op.MAX, Op.AND, Op.OR, Op.XOR, Op.EQ, Op.NE})
LEAVES = frozenset({Op.PARAM, Op.CONST, Op.IOTA})
#: ops that exist only on floats / only on ints (and bool where noted)
FLOAT_ONLY = frozenset({Op.SQRT, Op.FLOOR, Op.CEIL, Op.TRUNC, Op.ROUND, Op.COPYSIGN, Op.FMA})
INT_ONLY = frozenset({Op.SHL, Op.SHR, Op.REM})
BOOL_OK = frozenset({Op.NOT, Op.AND, Op.OR, Op.XOR, Op.EQ, Op.NE, Op.SELECT})

ARITY: dict[Op, int] = {
    **dict.fromkeys(UNARY, 1),
    **dict.fromkeys(BINARY, 2),
    **dict.fromkeys(REDUCE, 1),
    Op.PARAM: 0,
    Op.CONST: 0,
    Op.IOTA: 0,
    Op.FMA: 3,
    Op.SELECT: 3,
    Op.CONVERT: 1,
    Op.BITCAST: 1,
    Op.DOT: 2,
    Op.MATMUL: 2,
    Op.BROADCAST: 1,
    Op.RESHAPE: 1,
    Op.TRANSPOSE: 1,
    Op.SLICE: 1,
    Op.CONCAT: 2,
    Op.DYNAMIC_SLICE: 2,
    Op.DYNAMIC_UPDATE_SLICE: 3,
    Op.TRANSFER: 1,
}
#: ops with any number of operands (their typing rule checks them against the attributes)
VARIADIC = frozenset({Op.LOOP, Op.CALL})

#: attribute schema per op: name -> python type of the value
ATTRS: dict[Op, dict[str, type]] = {
    Op.PARAM: {"index": int, "name": str},
    Op.CONST: {"value": bytes},
    Op.CONVERT: {"to": DType},
    Op.BITCAST: {"to": DType},
    **{op: {"axis": int} for op in REDUCE},
    Op.BROADCAST: {"shape": tuple},
    Op.RESHAPE: {"shape": tuple},
    Op.TRANSPOSE: {"perm": tuple},
    Op.SLICE: {"start": tuple, "stop": tuple},
    Op.CONCAT: {"axis": int},
    Op.IOTA: {"shape": tuple, "axis": int, "to": DType},
    Op.DYNAMIC_SLICE: {"size": tuple},
    Op.LOOP: {"lo": int, "trips": int, "result": int, "body": Region},
    Op.CALL: {"result": int, "body": Region},
    Op.TRANSFER: {"from": str, "to": str, "seq": int},
}
#: attributes an op may have but need not: a parameter's space (absent: host); the ``seq`` of a
#: loop or call whose region declares effects (required then, refused otherwise)
OPTIONAL_ATTRS: dict[Op, dict[str, type]] = {
    Op.PARAM: {"space": str},
    Op.LOOP: {"seq": int},
    Op.CALL: {"seq": int},
}


@dataclass(frozen=True, slots=True)
class TensorType:
    dtype: DType
    shape: Shape = ()

    def __str__(self) -> str:
        if not self.shape:
            return str(self.dtype)
        return f"{self.dtype}[{', '.join(map(str, self.shape))}]"

    @property
    def size(self) -> int:
        return math.prod(self.shape)  # in C: Function sums it over every node


class TypeRuleError(Exception):
    """An op applied to operands or attributes its typing rule rejects.

    ``code`` is a stable diagnostic code (``E02xx``) the front end reports as is.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _fail(code: str, message: str) -> TypeRuleError:
    return TypeRuleError(code, message)


def check_shape(shape: object, what: str = "shape") -> Shape:
    if not isinstance(shape, tuple) or not all(
        isinstance(d, int) and not isinstance(d, bool) for d in shape
    ):
        raise _fail("E0210", f"{what} must be a list of integers")
    if len(shape) > MAX_RANK:
        raise _fail(
            "E0211", f"{what} {list(shape)} has rank {len(shape)}; the maximum is {MAX_RANK}"
        )
    n = 1
    for d in shape:
        if not 1 <= d <= MAX_DIM:
            raise _fail("E0211", f"{what} {list(shape)} has a dimension outside 1..{MAX_DIM}")
        n *= d
    cap = limits.current().elements
    if n > cap:
        raise _fail(
            "E0215",
            f"{what} {list(shape)} has {n:,} elements; the limit is {cap:,} per value "
            f"({limits.hint('elements')})",
        )
    return shape


def _check_attrs(op: Op, attrs: Mapping[str, AttrValue]) -> None:
    schema = ATTRS.get(op, {})
    optional = OPTIONAL_ATTRS.get(op, {})
    for name in attrs:
        if name not in schema and name not in optional:
            raise _fail("E0212", f"{op} takes no attribute '{name}'")
    for name, ty in [*schema.items(), *optional.items()]:
        if name not in attrs:
            if name in schema:
                raise _fail("E0213", f"{op} needs the attribute '{name}'")
            continue
        v = attrs[name]
        ok = isinstance(v, ty) and not (ty is int and isinstance(v, bool))
        if not ok:
            raise _fail("E0214", f"attribute '{name}' of {op} must be {ty.__name__}")


def check_space(space: object, what: str = "space") -> str:
    """``space`` if it names a memory space (:data:`SPACES`), else a TypeRuleError."""
    if isinstance(space, str) and space in SPACES:
        return space
    shown = repr(space)[:40]
    raise _fail("E0219", f"{what} {shown} is not a memory space ({', '.join(SPACES)})")


def _check_seq(op: Op, attrs: Mapping[str, AttrValue], effectful: bool) -> None:
    """An effectful node has a ``seq`` >= 0; a pure loop or call has none."""
    seq = attrs.get("seq")
    if effectful and seq is None:
        raise _fail("E0219", f"an effectful {op} needs its 'seq' (program order)")
    if not effectful and seq is not None:
        raise _fail("E0219", f"a {op} of a region without effects takes no 'seq'")
    if isinstance(seq, int) and seq < 0:
        raise _fail("E0219", f"the 'seq' of {op} must be >= 0, got {seq}")


def _axis(axis: object, rank: int, op: Op) -> int:
    assert isinstance(axis, int)
    if not 0 <= axis < rank:
        raise _fail("E0207", f"axis {axis} of {op} is out of range for rank {rank}")
    return axis


def _same(op: Op, types: Sequence[TensorType]) -> None:
    a = types[0]
    for b in types[1:]:
        if a.dtype != b.dtype:
            raise _fail("E0201", f"{op} needs operands of one dtype, got {a.dtype} and {b.dtype}")
        if a.shape != b.shape:
            raise _fail(
                "E0202",
                f"{op} needs operands of one shape, got {a} and {b}"
                + broadcast_hint(a.shape, b.shape),
            )


def _dtype_ok(op: Op, dt: DType) -> None:
    if op in FLOAT_ONLY and not dt.is_float:
        raise _fail("E0203", f"{op} is defined on f32 and f64, not {dt}")
    if op in INT_ONLY and not dt.is_int:
        raise _fail("E0203", f"{op} is defined on integers, not {dt}")
    if dt is DType.BOOL and op not in BOOL_OK:
        raise _fail("E0203", f"{op} is not defined on bool")
    if op in (Op.AND, Op.OR, Op.XOR, Op.NOT) and dt.is_float:
        raise _fail("E0203", f"{op} is not defined on {dt}")


def _convertible(src: DType, dst: DType) -> bool:
    return not ((src is DType.BOOL and dst.is_float) or (dst is DType.BOOL and src.is_float))


def infer(op: Op, inputs: Sequence[TensorType], attrs: Mapping[str, AttrValue]) -> TensorType:
    """The result type of ``op`` on ``inputs`` with ``attrs``, or :class:`TypeRuleError`."""
    if op not in VARIADIC and len(inputs) != ARITY[op]:
        raise _fail("E0204", f"{op} takes {ARITY[op]} operands, got {len(inputs)}")
    _check_attrs(op, attrs)
    rule = _RULES.get(op)
    if rule is not None:
        return rule(op, inputs, attrs)
    if op in UNARY or op in BINARY_ARITH or op in BITWISE or op is Op.FMA:
        _same(op, inputs)
        _dtype_ok(op, inputs[0].dtype)
        return inputs[0]
    if op in COMPARE:
        _same(op, inputs)
        _dtype_ok(op, inputs[0].dtype)
        return TensorType(DType.BOOL, inputs[0].shape)
    raise AssertionError(f"no typing rule for {op}")


def _param(op: Op, ins: Sequence[TensorType], attrs: Mapping[str, AttrValue]) -> TensorType:
    raise AssertionError("param types are given, not inferred")


def _select(op: Op, ins: Sequence[TensorType], attrs: Mapping[str, AttrValue]) -> TensorType:
    c, a, b = ins
    if c.dtype is not DType.BOOL:
        raise _fail("E0205", f"the condition of select must be bool, got {c.dtype}")
    _same(op, [a, b])
    if c.shape != a.shape:
        raise _fail("E0202", f"select needs a condition of shape {a.shape}, got {c}")
    return a


def _convert(op: Op, ins: Sequence[TensorType], attrs: Mapping[str, AttrValue]) -> TensorType:
    src, dst = ins[0].dtype, attrs["to"]
    assert isinstance(dst, DType)
    if src == dst:
        # `as` to the same type is a no-op in the language and has no node: one meaning only
        raise _fail("E0206", f"conversion from {src} to itself (the front end drops it)")
    if not _convertible(src, dst):
        raise _fail("E0206", f"no conversion from {src} to {dst} (compare with 0.0 instead)")
    return TensorType(dst, ins[0].shape)


def _bitcast(op: Op, ins: Sequence[TensorType], attrs: Mapping[str, AttrValue]) -> TensorType:
    src, dst = ins[0].dtype, attrs["to"]
    assert isinstance(dst, DType)
    if DType.BOOL in (src, dst) or src.bits != dst.bits:
        raise _fail("E0206", f"bitcast needs types of one width (not bool): {src} to {dst}")
    return TensorType(dst, ins[0].shape)


def _reduce(op: Op, ins: Sequence[TensorType], attrs: Mapping[str, AttrValue]) -> TensorType:
    t = ins[0]
    if t.dtype is DType.BOOL:
        raise _fail("E0203", f"{op} is not defined on bool")
    axis = _axis(attrs["axis"], len(t.shape), op)
    return TensorType(t.dtype, t.shape[:axis] + t.shape[axis + 1 :])


def _dot(op: Op, ins: Sequence[TensorType], attrs: Mapping[str, AttrValue]) -> TensorType:
    a, b = ins
    if a.dtype != b.dtype or a.dtype is DType.BOOL:
        raise _fail("E0201", f"dot needs two numeric operands of one dtype, got {a} and {b}")
    if len(a.shape) != 1 or a.shape != b.shape:
        raise _fail("E0202", f"dot needs two vectors of one length, got {a} and {b}")
    return TensorType(a.dtype, ())


def _matmul(op: Op, ins: Sequence[TensorType], attrs: Mapping[str, AttrValue]) -> TensorType:
    a, b = ins
    if a.dtype != b.dtype or a.dtype is DType.BOOL:
        raise _fail("E0201", f"matmul needs two numeric operands of one dtype, got {a} and {b}")
    if len(a.shape) != 2 or len(b.shape) != 2 or a.shape[1] != b.shape[0]:
        raise _fail("E0202", f"matmul needs T[m,k] and T[k,n], got {a} and {b}")
    return TensorType(a.dtype, (a.shape[0], b.shape[1]))


def broadcasts(src: Shape, dst: Shape) -> bool:
    """The trailing-dimension rule: align the shapes at the right; each dimension of ``src``
    must equal ``dst``'s or be 1, and ``src`` may have fewer dimensions."""
    return len(src) <= len(dst) and all(
        s in (1, d) for s, d in zip(reversed(src), reversed(dst), strict=False)
    )


def _leading_reshape(src: Shape, dst: Shape) -> Shape | None:
    """``src`` padded with trailing 1s so it broadcasts to ``dst`` along its leading axes (a
    [4] against [4, 8] is reshaped to [4, 1]), if that works."""
    if len(src) >= len(dst):
        return None
    padded = (*src, *([1] * (len(dst) - len(src))))
    return padded if broadcasts(padded, dst) else None


def broadcast_hint(a: Shape, b: Shape) -> str:
    """How to make one operand the other's shape, for the diagnostics of shape mismatches."""
    small, big = (a, b) if len(a) < len(b) or (len(a) == len(b) and a < b) else (b, a)
    target = list(big)
    if broadcasts(small, big):
        return (
            f"; only scalars broadcast implicitly: write broadcast(..., shape = {target}) "
            f"for the {list(small)} operand"
        )
    pad = _leading_reshape(small, big)
    if pad is not None:
        return (
            f"; broadcasting aligns trailing dimensions, so reshape the {list(small)} operand "
            f"first: broadcast(reshape(..., shape = {list(pad)}), shape = {target})"
        )
    return ""


def _broadcast(op: Op, ins: Sequence[TensorType], attrs: Mapping[str, AttrValue]) -> TensorType:
    t, shape = ins[0], check_shape(attrs["shape"])
    if len(t.shape) > len(shape):
        raise _fail("E0208", f"cannot broadcast {t} to rank {len(shape)}")
    if not broadcasts(t.shape, shape):
        pad = _leading_reshape(t.shape, shape)
        hint = (
            f" (trailing dimensions must match or be 1: reshape to {list(pad)} first)"
            if pad is not None
            else " (trailing dimensions must match or be 1)"
        )
        raise _fail("E0208", f"cannot broadcast {t} to shape {list(shape)}{hint}")
    return TensorType(t.dtype, shape)


def _reshape(op: Op, ins: Sequence[TensorType], attrs: Mapping[str, AttrValue]) -> TensorType:
    t, shape = ins[0], check_shape(attrs["shape"])
    out = TensorType(t.dtype, shape)
    if out.size != t.size:
        raise _fail("E0208", f"cannot reshape {t} ({t.size} elements) to {list(shape)}")
    return out


def _transpose(op: Op, ins: Sequence[TensorType], attrs: Mapping[str, AttrValue]) -> TensorType:
    t, perm = ins[0], attrs["perm"]
    assert isinstance(perm, tuple)
    if sorted(perm) != list(range(len(t.shape))):
        raise _fail("E0208", f"perm {list(perm)} is not a permutation of the axes of {t}")
    return TensorType(t.dtype, tuple(t.shape[p] for p in perm))


def _slice(op: Op, ins: Sequence[TensorType], attrs: Mapping[str, AttrValue]) -> TensorType:
    t, start, stop = ins[0], attrs["start"], attrs["stop"]
    assert isinstance(start, tuple) and isinstance(stop, tuple)
    if len(start) != len(t.shape) or len(stop) != len(t.shape):
        raise _fail("E0208", f"slice of {t} needs start and stop of length {len(t.shape)}")
    for a, b, d in zip(start, stop, t.shape, strict=True):
        if not (isinstance(a, int) and isinstance(b, int) and 0 <= a < b <= d):
            raise _fail("E0208", f"slice {list(start)}..{list(stop)} is out of bounds for {t}")
    return TensorType(t.dtype, tuple(b - a for a, b in zip(start, stop, strict=True)))


def _concat(op: Op, ins: Sequence[TensorType], attrs: Mapping[str, AttrValue]) -> TensorType:
    a, b = ins
    axis = _axis(attrs["axis"], len(a.shape), op)
    if a.dtype != b.dtype:
        raise _fail("E0201", f"concat needs one dtype, got {a.dtype} and {b.dtype}")
    other = [d for i, d in enumerate(a.shape) if i != axis]
    if len(a.shape) != len(b.shape) or other != [d for i, d in enumerate(b.shape) if i != axis]:
        raise _fail("E0202", f"concat along axis {axis} needs matching shapes, got {a} and {b}")
    shape = list(a.shape)
    shape[axis] += b.shape[axis]
    return TensorType(a.dtype, check_shape(tuple(shape)))


def _iota(op: Op, ins: Sequence[TensorType], attrs: Mapping[str, AttrValue]) -> TensorType:
    shape, to = check_shape(attrs["shape"]), attrs["to"]
    assert isinstance(to, DType)
    if len(shape) == 0:
        raise _fail("E0208", "iota needs a shape of rank >= 1")
    _axis(attrs["axis"], len(shape), op)
    if to is DType.BOOL:
        raise _fail("E0203", "iota is not defined on bool")
    return TensorType(to, shape)


def _const(op: Op, ins: Sequence[TensorType], attrs: Mapping[str, AttrValue]) -> TensorType:
    raise AssertionError("const types are given, not inferred")


def _start_indices(op: Op, x: TensorType, idx: TensorType) -> None:
    if len(x.shape) == 0:
        raise _fail("E0218", f"{op} needs an operand of rank >= 1, got {x}")
    if idx.dtype is not DType.I32 or idx.shape != (len(x.shape),):
        raise _fail(
            "E0218", f"{op} of {x} needs start indices of type i32[{len(x.shape)}], got {idx}"
        )


def _dynamic_slice(op: Op, ins: Sequence[TensorType], attrs: Mapping[str, AttrValue]) -> TensorType:
    x, idx = ins
    _start_indices(op, x, idx)
    size = check_shape(attrs["size"], "size")
    if len(size) != len(x.shape) or any(s > d for s, d in zip(size, x.shape, strict=True)):
        raise _fail("E0218", f"dynamic_slice size {list(size)} does not fit in {x}")
    return TensorType(x.dtype, size)


def _dynamic_update_slice(
    op: Op, ins: Sequence[TensorType], attrs: Mapping[str, AttrValue]
) -> TensorType:
    x, v, idx = ins
    _start_indices(op, x, idx)
    if v.dtype != x.dtype:
        raise _fail("E0201", f"dynamic_update_slice needs one dtype, got {x.dtype} and {v.dtype}")
    if len(v.shape) != len(x.shape) or any(a > b for a, b in zip(v.shape, x.shape, strict=True)):
        raise _fail("E0218", f"dynamic_update_slice cannot write {v} into {x}")
    return x


def _loop(op: Op, ins: Sequence[TensorType], attrs: Mapping[str, AttrValue]) -> TensorType:
    lo, trips, result, body = attrs["lo"], attrs["trips"], attrs["result"], attrs["body"]
    assert isinstance(lo, int) and isinstance(trips, int) and isinstance(result, int)
    assert isinstance(body, Region)
    _check_seq(op, attrs, bool(body.declared))
    if not 1 <= trips <= MAX_TRIPS:
        raise _fail("E0217", f"a loop runs 1..{MAX_TRIPS} times, not {trips}")
    if not (lo >= -(1 << 31) and lo + trips - 1 < (1 << 31)):
        raise _fail("E0217", f"the loop index {lo}..{lo + trips} does not fit in i32")
    params = [p.type for p in body.params]
    carried = [r.type for r in body.results]
    if not params or params[0] != TensorType(DType.I32):
        raise _fail("E0217", "a loop body's first parameter is its index, an i32 scalar")
    if any(p.attr("name") != f"_{i}" for i, p in enumerate(body.params)):
        raise _fail("E0217", "a loop body's parameters are named _0, _1, ... by position")
    if params[1:] != list(ins) or params[1 : 1 + len(carried)] != carried:
        shown = ", ".join(map(str, params[1:]))
        raise _fail(
            "E0217",
            f"a loop's operands ({', '.join(map(str, ins))}) must match its body's parameters "
            f"after the index ({shown}), the first {len(carried)} being the carried values "
            f"({', '.join(map(str, carried))})",
        )
    if not 0 <= result < len(carried):
        raise _fail("E0217", f"loop result {result} is not one of its {len(carried)} values")
    return carried[result]


def _transfer(op: Op, ins: Sequence[TensorType], attrs: Mapping[str, AttrValue]) -> TensorType:
    src, dst = check_space(attrs["from"], "from"), check_space(attrs["to"], "to")
    if src == dst:
        raise _fail("E0219", f"a transfer from {src} to itself (it moves nothing)")
    _check_seq(op, attrs, True)
    return ins[0]


def _call(op: Op, ins: Sequence[TensorType], attrs: Mapping[str, AttrValue]) -> TensorType:
    result, body = attrs["result"], attrs["body"]
    assert isinstance(result, int) and isinstance(body, Region)
    _check_seq(op, attrs, bool(body.declared))
    params = [p.type for p in body.params]
    if any(p.attr("name") != f"_{i}" for i, p in enumerate(body.params)):
        raise _fail("E0217", "a callee's parameters are named _0, _1, ... by position")
    if params != list(ins):
        raise _fail(
            "E0217",
            f"a call's operands ({', '.join(map(str, ins))}) must match its callee's "
            f"parameters ({', '.join(map(str, params))})",
        )
    if not 0 <= result < len(body.results):
        raise _fail("E0217", f"call result {result} is not one of its {len(body.results)} values")
    return body.results[result].type


_RULES = {
    Op.PARAM: _param,
    Op.CONST: _const,
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
    Op.CALL: _call,
    Op.TRANSFER: _transfer,
}


def effect_of(op: Op, attrs: Mapping[str, AttrValue]) -> tuple[str, ...]:
    """The effects a node with ``op`` and ``attrs`` has (empty: it is pure): its op's
    (:data:`EFFECTS`), or the declared effects of the region a loop or call runs."""
    name = EFFECTS.get(op)
    if name is not None:
        return (name,)
    if op in REGION_OPS:
        body = attrs["body"]
        assert isinstance(body, Region)
        return body.declared
    return ()
