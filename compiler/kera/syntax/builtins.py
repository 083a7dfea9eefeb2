"""The front end's builtins and operators: one table each, and the names derived from them.

``check`` (which names are taken) and ``build`` (what a call or operator builds) both read
these tables, so a builtin is added in exactly one place.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kera import mathlib
from kera.ir import Node
from kera.ops import Op
from kera.syntax.kinds import SyntaxKind as K


@dataclass(frozen=True, slots=True)
class ElemOp:
    """A front-end elementwise operation: the contract op plus the front end's own rules."""

    op: Op
    symbol: str
    deferrable: bool = True  # result dtype = operand dtype, so literals may stay untyped
    needs: str = ""  # "bool": operands must be bool; "int": must not be bool (for '~')
    dtype_args: tuple[int, ...] | None = None  # operands that share one dtype (None = all)


def _e(op: Op, symbol: str, **kw: Any) -> ElemOp:
    return ElemOp(op, symbol, **kw)


BINARY_OPS: dict[int, ElemOp] = {
    K.PLUS: _e(Op.ADD, "+"),
    K.MINUS: _e(Op.SUB, "-"),
    K.STAR: _e(Op.MUL, "*"),
    K.SLASH: _e(Op.DIV, "/"),
    K.PERCENT: _e(Op.REM, "%"),
    K.AMP: _e(Op.AND, "&"),
    K.PIPE: _e(Op.OR, "|"),
    K.CARET: _e(Op.XOR, "^"),
    K.SHL: _e(Op.SHL, "<<"),
    K.SHR: _e(Op.SHR, ">>"),
    K.AMP2: _e(Op.AND, "&&", deferrable=False, needs="bool"),  # not short-circuit: pure data
    K.PIPE2: _e(Op.OR, "||", deferrable=False, needs="bool"),
    K.EQ2: _e(Op.EQ, "==", deferrable=False),
    K.NEQ: _e(Op.NE, "!=", deferrable=False),
    K.LT: _e(Op.LT, "<", deferrable=False),
    K.LTEQ: _e(Op.LE, "<=", deferrable=False),
    K.GT: _e(Op.GT, ">", deferrable=False),
    K.GTEQ: _e(Op.GE, ">=", deferrable=False),
}
PREFIX_OPS: dict[int, ElemOp] = {
    K.MINUS: _e(Op.NEG, "-"),
    K.TILDE: _e(Op.NOT, "~", needs="int"),
    K.BANG: _e(Op.NOT, "!", deferrable=False, needs="bool"),
}
ELEMENTWISE_BUILTINS: dict[str, ElemOp] = {
    **{name: _e(Op(name), name) for name in ("abs", "sqrt", "floor", "ceil", "trunc", "round")},
    **{name: _e(Op(name), name) for name in ("min", "max", "copysign", "fma")},
    "select": _e(Op.SELECT, "select", dtype_args=(1, 2)),
}
OTHER_BUILTINS: dict[str, Op] = {
    op.value: op
    for op in (
        *(Op.BITCAST, Op.SUM, Op.PROD, Op.AMIN, Op.AMAX, Op.DOT, Op.MATMUL, Op.BROADCAST),
        *(Op.RESHAPE, Op.TRANSPOSE, Op.SLICE, Op.CONCAT, Op.IOTA),
    )
}
#: dynamic indexing: start indices are scalar operands, assembled into the op's ``i32[rank]``
#: start vector by the front end (``kera.syntax.build``, ``dynamic_builtin``)
DYNAMIC_BUILTINS: dict[str, Op] = {
    "dynamic_slice": Op.DYNAMIC_SLICE,  # (x, i0, i1, ..., size = [..])
    "dynamic_update_slice": Op.DYNAMIC_UPDATE_SLICE,  # (x, v, i0, i1, ...)
}
#: expanded by kera.mathlib into contract ops (they are not IR ops)
MATH_BUILTINS: dict[str, Callable[[Node], Node]] = {
    "exp": mathlib.exp,
    "log": mathlib.log,
    "tanh": mathlib.tanh,
    "sigmoid": mathlib.sigmoid,
}

#: memory spaces and ownership (``kera.syntax.build``): ``transfer(x, to = device)`` is the
#: contract op ``transfer`` (an effect; it moves ``x``), ``copy(x)`` is ``x`` (no node: it
#: only keeps ``x`` usable after a transfer of the copy)
OWNERSHIP_BUILTINS = frozenset({"transfer", "copy"})

#: every name a call can use for a builtin (so no user function or variable may take it)
BUILTIN_NAMES = frozenset(
    {*ELEMENTWISE_BUILTINS, *OTHER_BUILTINS, *MATH_BUILTINS, *DYNAMIC_BUILTINS} | OWNERSHIP_BUILTINS
)
