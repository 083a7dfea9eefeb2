"""Back ends with one planted deviation each, taken from the divergence catalog
(``../shared/reference/divergence-catalog.md``), built on the reference interpreter.

Each is the contract except for a few lines in ``kera.interp``'s override table (or, for the
hidden fma, a rewrite of the graph before interpreting; for the host libm, the math-library
calls computed by numpy): exactly how a team would model a target that deviates and check that
``keracheck fuzz`` catches it.  Load one with
``--backend-plugin tests/quality/planted.py:Minss``.  ``PLANTED`` lists every class with the
signature the fuzzer must report and the op count of the minimal graph it must shrink to.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from kera.dtypes import DType
from kera.interp import interpret
from kera.ir import Function, Node, const, loop_body, make_node, param, topo_order
from kera.ops import Op
from kera.passes.rewrite import rewrite
from kera.semantics import SEMANTICS, bits, canon, float_to_int
from keracheck.fuzz import calls

Array = np.ndarray[Any, Any]
Override = Callable[..., Array]
ALL_OPS = frozenset(o.value for o in Op)
FLOAT_ARITH = ("add", "sub", "mul", "div", "sqrt", "fma")


class Planted:
    """The reference interpreter with ``overrides`` (and an optional graph rewrite)."""

    api_version = 1
    name: ClassVar[str] = "planted"
    overrides: ClassVar[dict[str, Override]] = {}

    def available(self) -> str | None:
        return None

    def supported_ops(self) -> frozenset[str]:
        return ALL_OPS

    def rewrite(self, fn: Function) -> Function:
        return fn

    def run(self, fn: Function, inputs: dict[str, Array]) -> list[Array]:
        return interpret(self.rewrite(fn), inputs, overrides=self.overrides)


def _contract(op: str) -> Override:
    return SEMANTICS[Op(op)]


def _is_float(a: Array) -> bool:
    return a.dtype.kind == "f"


# ------------------------------------------------------------------------- x86 MINSS / MAXSS


def _minss(node: Node, a: Array, b: Array) -> Array:
    return np.where(a < b, a, b)  # NaN in either operand, or equal values: the second operand


def _maxss(node: Node, a: Array, b: Array) -> Array:
    return np.where(a > b, a, b)


class Minss(Planted):
    """x86 MINSS/MAXSS (``a < b ? a : b``): NaN and ±0 come from the second operand."""

    name = "planted-minss"
    overrides: ClassVar[dict[str, Override]] = {"min": _minss, "max": _maxss}


# ------------------------------------------------------------------------- hidden contraction


def _contract_mul_add(fn: Function) -> Function:
    """add(mul(a, b), c) and add(c, mul(a, b)) on floats become fma(a, b, c)."""
    new: dict[int, Node] = {}
    for n in fn.nodes():
        if n.op in (Op.PARAM, Op.CONST):
            new[id(n)] = n
            continue
        ins = [new[id(i)] for i in n.inputs]
        muls = [k for k, i in enumerate(n.inputs) if i.op is Op.MUL]
        if n.op is Op.ADD and n.dtype.is_float and muls:
            m = n.inputs[muls[0]]
            other = ins[1 - muls[0]]
            new[id(n)] = make_node(Op.FMA, [new[id(m.inputs[0])], new[id(m.inputs[1])], other])
        else:
            new[id(n)] = make_node(n.op, ins, n.attrs)
    return Function(fn.name, fn.params, [new[id(r)] for r in fn.results])


class FmaContraction(Planted):
    """gcc's default -ffp-contract=fast on an FMA machine: ``a*b + c`` fused, one rounding."""

    name = "planted-fma"

    def rewrite(self, fn: Function) -> Function:
        return _contract_mul_add(fn)


# ------------------------------------------------------------------------- x86 default NaN


def _negative_nan(op: str) -> Override:
    def impl(node: Node, *args: Array) -> Array:
        out = _contract(op)(node, *args)
        if not _is_float(out) or not np.isnan(out).any():
            return out
        out = out.copy()
        sign = np.dtype(f"<u{out.dtype.itemsize}").type(1 << (8 * out.dtype.itemsize - 1))
        b = bits(out)
        b[np.isnan(out)] |= sign  # the x86 "QNaN floating-point indefinite" 0xFFC00000
        return out

    return impl


class X86DefaultNan(Planted):
    """SSE arithmetic producing the negative default NaN 0xFFC00000 / 0xFFF8000000000000."""

    name = "planted-x86-nan"
    overrides: ClassVar[dict[str, Override]] = {op: _negative_nan(op) for op in FLOAT_ARITH}


# ------------------------------------------------------------------------- float -> int


def _cvtt(node: Node, x: Array) -> Array:
    """CVTTSS2SI: NaN and out-of-range give the "integer indefinite" INT_MIN."""
    to = node.attr("to")
    assert isinstance(to, DType)
    if not _is_float(x) or to not in (DType.I32, DType.I64):
        return _contract("convert")(node, x)
    out = float_to_int(x, to)
    with np.errstate(all="ignore"):
        t = np.trunc(x)
        bad = np.isnan(x) | (t >= 2.0 ** (to.bits - 1)) | (t < -(2.0 ** (to.bits - 1)))
    out[bad] = to.min
    return out


class CvtIndefinite(Planted):
    """x86 ``(int)NaN`` and ``(int)1e10f`` = 0x80000000 instead of saturating with NaN -> 0."""

    name = "planted-cvt"
    overrides: ClassVar[dict[str, Override]] = {"convert": _cvtt}


# ------------------------------------------------------------------------- shifts


def _unmasked_shr(node: Node, a: Array, s: Array) -> Array:
    """Shift amounts not reduced mod the width: >= width gives 0, or sign fill when signed."""
    width = a.dtype.itemsize * 8
    big = s.astype(np.uint64) >= width  # the amount as unsigned, like SSE PSRAD/PSRLD
    out = _contract("shr")(node, a, np.where(big, 0, s).astype(a.dtype))
    fill = (a >> a.dtype.type(width - 1)) if a.dtype.kind == "i" else np.zeros_like(a)
    return np.where(big, fill, out)


def _clamped_shl(node: Node, a: Array, s: Array) -> Array:
    """PTX ``shl``: amounts above the width are clamped to it, so the result is 0."""
    width = a.dtype.itemsize * 8
    big = s.astype(np.uint64) >= width
    out = _contract("shl")(node, a, np.where(big, 0, s).astype(a.dtype))
    return np.where(big, a.dtype.type(0), out)


class UnmaskedShift(Planted):
    """SSE/Verilog right shifts: the amount is not masked, >= width shifts everything out."""

    name = "planted-shr"
    overrides: ClassVar[dict[str, Override]] = {"shr": _unmasked_shr}


class PtxShlClamp(Planted):
    """PTX ``shl.b32``: shift amounts clamped to the width instead of masked."""

    name = "planted-shl"
    overrides: ClassVar[dict[str, Override]] = {"shl": _clamped_shl}


# ------------------------------------------------------------------------- flush to zero


def _ftz(op: str) -> Override:
    def impl(node: Node, *args: Array) -> Array:
        out = _contract(op)(node, *args)
        if not _is_float(out):
            return out
        tiny = np.finfo(out.dtype).tiny
        with np.errstate(all="ignore"):
            flush = (out != 0) & (np.abs(out) < tiny)
        return np.where(flush, np.copysign(out.dtype.type(0), out), out)

    return impl


class FlushToZero(Planted):
    """MXCSR.FTZ / PTX ``.ftz``: subnormal results of arithmetic become ±0."""

    name = "planted-ftz"
    overrides: ClassVar[dict[str, Override]] = {op: _ftz(op) for op in FLOAT_ARITH}


# ------------------------------------------------------------------------- reductions


def _axis_last(node: Node, x: Array) -> Array:
    axis = node.attr("axis")
    assert isinstance(axis, int)
    return np.moveaxis(x, axis + 1, -1)


def _sequential_sum(node: Node, x: Array) -> Array:
    """((x0 + x1) + x2) + ...: the loop a compiler emits, not the contract's tree."""
    if not _is_float(x):
        return _contract("sum")(node, x)
    x = _axis_last(node, x)
    acc = np.full(x.shape[:-1], -0.0, dtype=x.dtype)
    with np.errstate(all="ignore"):
        for k in range(x.shape[-1]):
            acc = acc + x[..., k]
    return canon(acc)


def _tree(x: Array, pad: float, step: Callable[[Array, Array], Array]) -> Array:
    n = x.shape[-1]
    p = 1 << (n - 1).bit_length()
    if p > n:
        x = np.concatenate([x, np.full((*x.shape[:-1], p - n), pad, dtype=x.dtype)], axis=-1)
    with np.errstate(all="ignore"):
        while p > 1:
            p //= 2
            x = step(x[..., :p], x[..., p : 2 * p])
    return canon(x[..., 0])


def _plus_zero_sum(node: Node, x: Array) -> Array:
    """The contract's tree, padded with +0.0: a sum of only -0.0 comes out +0.0."""
    if not _is_float(x):
        return _contract("sum")(node, x)
    return _tree(_axis_last(node, x), 0.0, np.add)


def _nan_dropping(op: str) -> Override:
    def impl(node: Node, x: Array) -> Array:
        if not _is_float(x):
            return _contract(op)(node, x)
        pad, step = (-np.inf, np.fmax) if op == "amax" else (np.inf, np.fmin)
        return _tree(_axis_last(node, x), pad, step)

    return impl


class SequentialSum(Planted):
    """A sum reduced left to right instead of the contract's pairwise tree."""

    name = "planted-seqsum"
    overrides: ClassVar[dict[str, Override]] = {"sum": _sequential_sum}


class PlusZeroIdentity(Planted):
    """A sum tree padded with +0.0 instead of -0.0."""

    name = "planted-plus-zero"
    overrides: ClassVar[dict[str, Override]] = {"sum": _plus_zero_sum}


class NanDroppingReduce(Planted):
    """MAXPS/MINPS-style reductions (``fmax``): a NaN element is dropped, not propagated."""

    name = "planted-maxps"
    overrides: ClassVar[dict[str, Override]] = {
        "amax": _nan_dropping("amax"),
        "amin": _nan_dropping("amin"),
    }


# ------------------------------------------------------------------------- integer division


def _trapping(op: str) -> Override:
    def impl(node: Node, a: Array, b: Array) -> Array:
        if a.dtype.kind in "iu" and (b == 0).any():
            raise ZeroDivisionError(f"SIGFPE: integer {op} by zero")
        return _contract(op)(node, a, b)

    return impl


class DivZeroTrap(Planted):
    """x86 IDIV: ``x / 0`` and ``x % 0`` trap (SIGFPE) instead of giving 0 and x."""

    name = "planted-divtrap"
    overrides: ClassVar[dict[str, Override]] = {"div": _trapping("div"), "rem": _trapping("rem")}


# ------------------------------------------------------------------------- sign ops


def _canonicalising_neg(node: Node, a: Array) -> Array:
    out = _contract("neg")(node, a)
    return canon(out) if _is_float(out) else out


class NegCanonicalises(Planted):
    """PTX ``neg.f32`` on a NaN ("unspecified NaN"): the payload is lost."""

    name = "planted-neg"
    overrides: ClassVar[dict[str, Override]] = {"neg": _canonicalising_neg}


def _u32_via_i64(node: Node, x: Array) -> Array:
    to = node.attr("to")
    if not _is_float(x) or to is not DType.U32:
        return _contract("convert")(node, x)
    wide = float_to_int(x, DType.I64)
    return wide.astype(np.uint32)  # gcc on x86-64: (uint32_t)(int64_t)x, wrapping


class U32ViaI64(Planted):
    """gcc's x86-64 float -> u32: through a 64-bit conversion, so -1.0 gives 0xFFFFFFFF."""

    name = "planted-u32"
    overrides: ClassVar[dict[str, Override]] = {"convert": _u32_via_i64}


# ------------------------------------------------------------------------- host libm


def _with_calls_as_params(fn: Function, done: dict[int, Node]) -> list[Node]:
    """fn's results rebuilt with each node in ``done`` (by id) replaced by its parameter."""
    new: dict[int, Node] = {}
    for n in topo_order(fn.results, set(done)):
        if id(n) in done:
            new[id(n)] = done[id(n)]
        elif n.op in (Op.PARAM, Op.CONST):
            new[id(n)] = n
        else:
            new[id(n)] = make_node(n.op, [new[id(i)] for i in n.inputs], n.attrs)
    return [new[id(r)] for r in fn.results]


class HostLibm(Planted):
    """A target that computes the math library's functions with the host libm (numpy's
    ``np.exp`` ...) on the call's argument instead of the contract's algorithm: each call,
    innermost first, is replaced by a parameter holding the host's result."""

    functions: ClassVar[dict[str, Callable[[Array], Array]]] = {}

    def run(self, fn: Function, inputs: dict[str, Array]) -> list[Array]:
        found = [c for c in calls.analyse(fn).calls.values() if c.name in self.functions]
        values = dict(inputs)
        params = list(fn.params)
        done: dict[int, Node] = {}
        for c in sorted(found, key=lambda c: len(topo_order([c.result]))):
            probe = Function(
                fn.name, params, _with_calls_as_params(Function("arg", params, [c.arg]), done)
            )
            (x,) = interpret(probe, values)
            with np.errstate(all="ignore"):
                y = self.functions[c.name](x)
            name = f"libm{len(params)}"
            params.append(param(len(params), name, c.result.dtype, c.result.shape))
            values[name], done[id(c.result)] = y, params[-1]
        return interpret(Function(fn.name, params, _with_calls_as_params(fn, done)), values)


class HostExp(HostLibm):
    """f32/f64 ``exp`` by the host libm (the catalog's libm rows: 1-2 ulp apart)."""

    name = "planted-libm-exp"
    functions: ClassVar[dict[str, Callable[[Array], Array]]] = {"exp": np.exp}


class HostTanh(HostLibm):
    name = "planted-libm-tanh"
    functions: ClassVar[dict[str, Callable[[Array], Array]]] = {"tanh": np.tanh}


class HostLog(HostLibm):
    name = "planted-libm-log"
    functions: ClassVar[dict[str, Callable[[Array], Array]]] = {"log": np.log}


#: class -> (ops the signature may name, its class, op count of the minimal graph)
# ------------------------------------------------------------------------- reversed loops


def _flip_index(node: Node) -> Node | None:
    """A loop whose body sees the index ``2*lo + trips - 1 - i`` for ``i``: its iterations run
    last to first."""
    if node.op is not Op.LOOP:
        return None
    body = loop_body(node)
    lo, trips = node.int_attr("lo"), node.int_attr("trips")
    i = body.params[0]
    flipped = make_node("sub", [const(2 * lo + trips - 1, DType.I32), i])
    new: dict[int, Node] = {id(i): flipped}
    for n in body.nodes():
        if id(n) not in new:
            ins = tuple(new.get(id(x), x) for x in n.inputs)
            new[id(n)] = n if ins == n.inputs else Node(n.op, n.type, ins, n.attr_items)
    flipped_body = Function("body", body.params, [new.get(id(r), r) for r in body.results])
    items = tuple((k, flipped_body if k == "body" else v) for k, v in node.attr_items)
    return Node(node.op, node.type, node.inputs, items)


class ReversedLoops(Planted):
    """Runs every loop's iterations from last to first (a loop-reversal "optimisation", or a
    GPU that assigns iterations to lanes in reverse): the same values meet in another order,
    so an order-sensitive carried accumulation (``s + x[i]`` in f32) rounds differently."""

    name = "planted-reversed-loops"

    def rewrite(self, fn: Function) -> Function:
        return rewrite(fn, _flip_index)[0]


PLANTED: dict[type[Planted], tuple[frozenset[str], str, int]] = {
    Minss: (frozenset({"min", "max"}), "nan-vs-value", 1),
    FmaContraction: (frozenset({"add"}), "ulp", 2),
    X86DefaultNan: (frozenset(FLOAT_ARITH), "nan-payload", 1),
    CvtIndefinite: (frozenset({"convert"}), "int", 1),
    UnmaskedShift: (frozenset({"shr"}), "int", 1),
    PtxShlClamp: (frozenset({"shl"}), "int", 1),
    FlushToZero: (frozenset(FLOAT_ARITH), "subnormal-flush", 1),
    SequentialSum: (frozenset({"sum"}), "ulp", 1),
    PlusZeroIdentity: (frozenset({"sum"}), "signed-zero", 1),
    NanDroppingReduce: (frozenset({"amax", "amin"}), "nan-vs-value", 1),
    DivZeroTrap: (frozenset({"div", "rem"}), "error", 1),
    NegCanonicalises: (frozenset({"neg"}), "nan-payload", 1),
    U32ViaI64: (frozenset({"convert"}), "int", 1),
    HostExp: (frozenset({"exp"}), "ulp", 1),
    HostTanh: (frozenset({"tanh"}), "ulp", 1),
    HostLog: (frozenset({"log"}), "ulp", 1),
    ReversedLoops: (frozenset({"loop"}), "ulp", 4),
}
#: the planted host-libm targets (each shrinks to one call)
LIBM: tuple[type[HostLibm], ...] = (HostExp, HostTanh, HostLog)


class CrashOnSqrt(Planted):
    """Not a catalog entry: the target process dies (``_exit``) on a graph that returns the
    sqrt of a parameter, to check that the fuzzer isolates crashes (the other cases of the
    batch still get their results) and still names the op."""

    name = "planted-crash"

    def run(self, fn: Function, inputs: dict[str, Array]) -> list[Array]:
        if any(r.op is Op.SQRT and r.inputs[0].op is Op.PARAM for r in fn.results):
            os._exit(9)
        return super().run(fn, inputs)
