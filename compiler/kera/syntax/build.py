"""Expression checking and graph building: the typed view -> ``kera.ir`` functions.

Checking and building are one pass: every operation is built with ``kera.ir.make_node``, whose
typing rule (``kera.ops.infer``) is the only one; a :class:`TypeRuleError` becomes a diagnostic
with its own code (E02xx) and the span of the offending expression, and the expression's value
becomes *poison* (None), which silences every check that depends on it.

Values of expressions:

* a ``Node`` (typed);
* a :class:`Deferred` — an unsuffixed literal, or an arithmetic expression made only of them,
  whose dtype is not known yet.  It takes the dtype its context needs (the other operand, a
  ``let`` or parameter or result type, the target of ``as``) when it meets one, and ``i32`` or
  ``f32`` otherwise (comparisons, reductions, data movement...).  A let-bound literal stays
  deferred, like a Go constant, so ``let h = 0.5;`` works with f32 and f64 alike;
* a :class:`Tup` — the value of ``(a, b)`` or of a call returning a tuple; it can be returned,
  bound with ``let``, taken apart with ``.0`` or ``let (a, b) = ..``, and chosen by ``if``.
  Tuples may nest inside a function body (``((a, b), c)``), up to :data:`MAX_TUPLE_DEPTH`
  levels, but not in a result or an argument;
* None — poison.

Scalar operands of an elementwise operation with a tensor operand are broadcast with an
explicit ``broadcast`` node; a deferred literal reaching a tensor-typed ``let``, parameter or
result is built as a scalar constant and broadcast.  ``-`` directly before a number literal is
part of the literal (``-2147483648`` is an ``i32``; ``-0.0`` has its sign bit set).

A call to a user function is a ``call`` node per result (``kera.ir.call``) holding the callee
as a region: the callee's body is evaluated once, on parameters named ``_0``, ``_1``, ... by
position (``Builder.callee``), whatever the arguments, so an export's graph, and its
fingerprint, covers its callees by construction, and renaming a callee's parameter changes
nothing.  The ``inline`` pass (``-O1`` and up) expands calls; ``-O0`` keeps them.  A call to a
function that is already being evaluated is recursion: reported once per call site (E0105)
with the chain of calls, and poison.

``if c { a } else { b }`` is ``select(c, a, b)``: every branch is evaluated, and tuple-valued
branches are selected element by element.  ``x[..]`` with static items is a ``slice`` and a
``reshape`` (``kera.syntax.indexing``); a dynamic item (an integer scalar expression) adds a
``dynamic_slice``.  Every start vector of a dynamic op is ``kera.ir.start_vector`` of the
scalars (``reshape`` and ``concat``, zeros as one constant): the one form that keracheck's
source printer reads back.

``for i in LO..HI with (c = init, ...) { body }`` is built by ``kera.ir.loop``: the body block
is evaluated ONCE (so it is charged once against the ``expansion`` budget, whatever the trip
count), with the index and the carried names bound to the loop's placeholders and every outer
name visible as it is (``kera.ir.loop`` captures what the body uses).  Evaluating a body runs
a nested driver, so loops nest on the Python stack — at most ``MAX_LOOP_DEPTH`` deep, which
is checked first (E0316).  Zero trips give the initial values, after the body is checked on
placeholders that are then dropped.

Evaluation is iterative: expression handlers are generators that yield their sub-expressions
to one driver loop, so neither deep expression trees nor long call chains use the Python stack.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Generator, Sequence
from typing import Any

import numpy as np

from kera import limits
from kera.dtypes import DType
from kera.ir import (
    Body,
    Function,
    IRError,
    Node,
    const_bytes,
    make_node,
    param,
    param_space,
    start_vector,
)
from kera.ir import call as ir_call
from kera.ir import loop as ir_loop
from kera.ir import transfer as ir_transfer
from kera.ops import (
    ARITY,
    FLOAT_ONLY,
    MAX_LOOP_DEPTH,
    MAX_TRIPS,
    SPACES,
    AttrValue,
    Op,
    TensorType,
    TypeRuleError,
)
from kera.syntax import indexing, literals
from kera.syntax.builtins import (
    BINARY_OPS,
    BUILTIN_NAMES,
    DYNAMIC_BUILTINS,
    ELEMENTWISE_BUILTINS,
    MATH_BUILTINS,
    OTHER_BUILTINS,
    PREFIX_OPS,
    ElemOp,
)
from kera.syntax.check import (
    DTYPES,
    SPACE_NAMES,
    Reporter,
    Signature,
    no_ref,
    reserved,
    resolve_type,
    type_space,
)
from kera.syntax.kinds import SyntaxKind
from kera.syntax.ownership import (
    ASSIGNABLE,
    BORROWED,
    Borrow,
    Log,
    Slot,
    called_names,
    combine,
    updated_names,
)
from kera.syntax.tree import (
    ArrayExpr,
    AssignStmt,
    BinExpr,
    Block,
    CallExpr,
    CastExpr,
    ExprStmt,
    FieldExpr,
    ForExpr,
    IfExpr,
    IndexExpr,
    Kwarg,
    LetStmt,
    Literal,
    LoopVar,
    Name,
    NameRef,
    ParenExpr,
    PrefixExpr,
    Range,
    RefExpr,
    SyntaxNode,
    SyntaxToken,
    TensorTypeNode,
    TupleExpr,
    TuplePat,
)

K = SyntaxKind
Span = tuple[int, int]


class _Budget(Exception):
    """A budget of :mod:`kera.limits` ran out while evaluating one function."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


NUMBERS = (K.INT_NUMBER, K.FLOAT_NUMBER)
#: how deep tuple values may nest; walks over them recurse on it
MAX_TUPLE_DEPTH = 100
#: ``if`` is ``select`` with the branches' dtype shared and scalars broadcast
SELECT = ELEMENTWISE_BUILTINS["select"]
#: an index item that is not a literal: evaluated, then built as a dynamic index
_DYNAMIC = indexing.Item(None, None, True, "", (0, 0))
#: a dynamic item's axis as the static plan sees it: kept whole (the dynamic_slice picks one)
_WHOLE = indexing.Item(None, None, False, "..", (0, 0))
_I32_RANGE = (-(1 << 31), 1 << 31)  # a loop index's values: LO >= -2^31, HI <= 2^31
#: an index of another integer dtype saturated to i32's range before ``convert`` (which wraps)
_SATURATE: dict[DType, tuple[tuple[Op, int], ...]] = {
    DType.I64: ((Op.MAX, -(1 << 31)), (Op.MIN, (1 << 31) - 1)),
    DType.U32: ((Op.MIN, (1 << 31) - 1),),
    DType.U64: ((Op.MIN, (1 << 31) - 1),),
}
#: builtins whose operands share one dtype without broadcasting
UNIFIED_BUILTINS = frozenset({Op.DOT, Op.MATMUL, Op.CONCAT})


class Deferred:
    """An untyped literal expression: a literal leaf (``lit``) or an elementwise op whose
    dtype-carrying operands are deferred (others, like select's condition, may be nodes).
    ``materialize`` gives it a dtype."""

    __slots__ = ("args", "is_float", "lit", "op", "span")

    def __init__(
        self,
        span: Span,
        lit: literals.Literal | None = None,
        op: ElemOp | None = None,
        args: tuple[Deferred | Node, ...] = (),
    ) -> None:
        self.span = span
        self.lit = lit
        self.op = op
        self.args = args
        self.is_float: bool = (
            lit.is_float
            if lit is not None
            else (op is not None and op.op in FLOAT_ONLY)  # sqrt(2) is an f32 by default
            or any(isinstance(a, Deferred) and a.is_float for a in args)
        )

    @property
    def default(self) -> DType:
        return DType.F32 if self.is_float else DType.I32


def _operand_dtypes(d: Deferred, dtype: DType) -> list[tuple[Deferred | Node, DType]]:
    """Each operand of a deferred op with the dtype it takes when the op has ``dtype``."""
    assert d.op is not None
    positions = d.op.dtype_args or range(len(d.args))
    return [
        (a, dtype if i in positions or not isinstance(a, Deferred) else a.default)
        for i, a in enumerate(d.args)
    ]


class Tup:
    """The value of a tuple expression: two or more items, which may be tuples themselves
    (``depth`` is 1 for a tuple of tensors)."""

    __slots__ = ("depth", "items")

    def __init__(self, items: tuple[Node | Deferred | Tup, ...]) -> None:
        self.items = items
        self.depth: int = 1 + max((v.depth for v in items if isinstance(v, Tup)), default=0)


class _Args:
    """A call's positional argument nodes, their modes ("", "&", "&mut") and the slots of
    the names they are (None for other expressions)."""

    __slots__ = ("modes", "nodes", "slots")

    def __init__(self, nodes: list[SyntaxNode], modes: list[str], slots: list[Slot | None]):
        self.nodes = nodes
        self.modes = modes
        self.slots = slots


class _BodyFailed(Exception):
    """A loop body had an error (reported): stops ``kera.ir.loop`` from building the loop."""


class _Loop:
    """What evaluating one loop's body needs: its syntax and the environment around it."""

    __slots__ = ("body", "carried", "env", "index")

    def __init__(self, index: Name, carried: list[LoopVar], body: Block, env: Env) -> None:
        self.index = index
        self.carried = carried
        self.body = body
        self.env = env

    def names(self) -> list[SyntaxToken | None]:
        """The index's and the carried values' name tokens, in order."""
        return [self.index.ident(), *(v.name() for v in self.carried)]

    def var_names(self) -> list[str]:
        return [t.text if t is not None else "?" for t in self.names()[1:]]


def _param_spans(sig: Signature) -> list[Span]:
    """Where each parameter's name is written (for "bound here" notes)."""
    out: list[Span] = []
    for p in sig.fn.params():
        tok = p.name()
        if tok is not None:
            out.append(tok.span)
    return out if len(out) == len(sig.params) else [sig.fn.span] * len(sig.params)


def _branch_span(node: SyntaxNode) -> Span:
    """An else part's value: a block's last expression, or a whole else-if."""
    return _span_of(node) if isinstance(node, Block) else node.span


def _span_of(body: Block) -> Span:
    """The span of a block's value (its last expression)."""
    items = body.items()
    return items[-1].span if items else body.span


def _value_spans(body: Block, k: int) -> list[Span]:
    """Where to point for each of the k values a loop body gives: the elements of a tuple
    expression written as the body's value, else the value as a whole."""
    items = body.items()
    last: SyntaxNode | None = items[-1] if items else None
    while isinstance(last, ParenExpr):
        last = last.inner()
    if k > 1 and isinstance(last, TupleExpr) and len(last.elements()) == k:
        return [e.span for e in last.elements()]
    return [_span_of(body)] * k


def describe(value: Node | Deferred | Tup) -> str:
    """A value's type as messages name it: ``f32[4]``, ``a tuple of 2``, ``a literal``."""
    if isinstance(value, Tup):
        return f"a tuple of {len(value.items)}"
    if isinstance(value, Deferred):
        return "a float literal" if value.is_float else "an integer literal"
    return str(value.type)


Value = Node | Deferred | Tup | None
_VALUES = (Node, Deferred, Tup)
Env = dict[str, Slot]
#: the value of a block that ends with a statement (the body of a function without a result
#: type): an empty tuple, which no operation accepts
NOTHING = Tup(())
_STATEMENT_KINDS = frozenset({K.LET_STMT, K.ASSIGN_STMT, K.EXPR_STMT})
#: an argument's mode: "" (a value), "&" (a borrow), "&mut" (an in-out buffer)
_MODE_WORDS = {"": "a value", "&": "a borrow ('&')", "&mut": "a '&mut' buffer"}
Request = tuple[SyntaxNode | None, Env]  # None: a part a syntax error left missing
Handler = Generator[Request, Value, Value]


class _Pending:
    """Builder.leaf's answer for an expression the driver evaluates."""


PENDING = _Pending()
_LEAVES = frozenset({K.NAME_REF, K.LITERAL})


class _NotStatic:
    """static_int's answer for an expression that is not an integer literal."""


NOT_STATIC = _NotStatic()


def static_int(node: SyntaxNode) -> int | _NotStatic | None:
    """The value of an unsuffixed integer literal, optionally negated (``2``, ``-1``);
    :data:`NOT_STATIC` for any other expression; None for a literal the lexer reported."""
    negate = isinstance(node, PrefixExpr) and node.op() == K.MINUS
    inner = node.operand() if isinstance(node, PrefixExpr) and negate else node
    if not isinstance(inner, Literal) or inner.tok_kind() != K.INT_NUMBER:
        return NOT_STATIC
    lit = literals.parse(inner.tok_text())
    if lit is None:
        return None
    if lit.suffix is not None:
        return NOT_STATIC
    return -lit.num if negate else lit.num


def _short(text: str) -> str:
    """An item's source as a message quotes it (a literal may have 100,000 digits)."""
    text = " ".join(text.split())
    return text if len(text) <= 24 else text[:20] + "..."


def _normalize_axis(attrs: dict[str, AttrValue], nodes: list[Node]) -> dict[str, AttrValue]:
    """``axis = -1`` counts from the end: rank + axis, the rank being the first operand's (or,
    for ``iota``, its ``shape``'s).  An axis still out of range is left for the typing rule to
    report as written."""
    axis = attrs.get("axis")
    if not isinstance(axis, int) or isinstance(axis, bool) or axis >= 0:
        return attrs
    shape = nodes[0].shape if nodes else attrs.get("shape")
    if not isinstance(shape, tuple) or axis + len(shape) < 0:
        return attrs
    return {**attrs, "axis": axis + len(shape)}


def _expansion_message(budget: int) -> str:
    return (
        f"this function expands to more than {budget:,} expressions through its calls "
        f"(counting each call as its callee's body; {limits.hint('expansion')})"
    )


_UNKNOWN = object()  # Builder.space: not known without looking at the operands


def _own_space(node: Node) -> object:
    """A node's space when it does not depend on its operands, else :data:`_UNKNOWN`."""
    op = node.op
    if op is Op.PARAM:
        return param_space(node)
    if op is Op.CONST or op is Op.IOTA:
        return None
    if op is Op.TRANSFER:
        return node.attr("to")
    return _UNKNOWN


class Builder:
    """Evaluates function bodies to IR nodes, reporting into ``r``."""

    def __init__(self, sigs: dict[str, Signature], r: Reporter) -> None:
        self.sigs = sigs
        self.r = r
        self.callees: dict[str, Function | None] = {}  # each called function, built once
        self.consts: dict[tuple[literals.Literal, DType], Node] = {}
        self.active: list[str] = []  # the functions being expanded, outermost first
        self.active_set: set[str] = set()  # the same, for O(1) recursion checks
        self.steps = 0  # expressions evaluated for the current function (kera.limits)
        self.limits = limits.current()
        self.recursion_sites: set[Span] = set()
        self.expanded: set[str] = set()  # functions whose body some call has evaluated
        self.loop_depth = 0  # loop bodies being evaluated (nested drivers on the stack)
        self.check_serial = 0  # names the placeholders of a loop body that is only checked
        #: node hash -> (span of the expression that first built it, the enclosing let's
        #: pattern): a side table, off (None) unless a caller sets it to {} (keracheck's
        #: localisation of a divergence); positions are not part of any node or hash
        self.spans: dict[bytes, tuple[Span, str | None]] | None = None
        self.lets: list[str] = []  # patterns of the lets being evaluated (only with spans)
        # memory spaces, ownership and effects (kera.syntax.ownership)
        data = r.index.data
        #: whether spaces can differ at all: a source without '@' and without a transfer has
        #: every value in host (or none), so no op needs its spaces looked at
        self.check_spaces = b"@" in data or b"transfer" in data
        self.spaces: dict[bytes, str | None] = {}  # node hash -> its space (None: literals)
        self.log = Log()
        self.borrows: list[Borrow] = []  # the live borrow bindings, innermost last
        self.events = 0  # a clock for reads and conflicts of borrows (E0407)
        self.regions: list[list[Node]] = []  # effect roots of the regions being built
        self.stmt_calls: set[Span] = set()  # the calls written as statements
        self.effect_reported: set[tuple[str, str]] = set()  # (function, effect): once each
        self.operand_spans: list[Span] | None = None  # the operands of the op being built
        self.unit_bodies: set[Span] = set()  # bodies of functions without a result type
        self.may_mutate = b"mut" in data  # assignable names exist only with `let mut`, `&mut`
        self.has_refs = b"&" in data  # a `&` before a type is possible
        self.any_effects = b"transfer" in data or any(s.effects for s in sigs.values())

    # ------------------------------------------------------------------ driver
    def run(self, node: SyntaxNode | None, env: Env) -> Value:
        first = self.start(node, env)
        if first is None or isinstance(first, _VALUES):
            return first
        stack: list[Handler] = [first]
        send: Value = None
        while True:
            try:
                child, child_env = stack[-1].send(send)
            except StopIteration as stop:
                stack.pop()
                send = stop.value
                if not stack:
                    return send
                continue
            self.steps += 1  # charge(), inline: once per expression
            if self.steps > self.limits.expansion:
                raise _Budget("E0111", _expansion_message(self.limits.expansion))
            started = self.start(child, child_env)
            if started is None or isinstance(started, _VALUES):
                send = started
            else:
                stack.append(started)
                send = None

    def start(self, node: SyntaxNode | None, env: Env) -> Value | Handler:
        if node is None:
            return None
        kind = node.green.kind
        if kind == K.NAME_REF:
            assert isinstance(node, NameRef)
            return self.name(node, env)
        if kind == K.LITERAL:
            assert isinstance(node, Literal)
            return self.literal(node, False, node.span)
        if kind == K.PAREN_EXPR:
            inner: SyntaxNode | None = node
            while isinstance(inner, ParenExpr):
                inner = inner.inner()
            return self.start(inner, env)  # once: inner is no ParenExpr
        handler = _HANDLERS.get(kind)
        if handler is not None:
            return handler(self, node, env)
        if isinstance(node, ArrayExpr):
            return self.r.error(
                "E0306", "a list like [4, 4] is only allowed as an attribute value", node.span
            )
        return None  # an ERROR node: the parser has reported it

    # ------------------------------------------------------------------ leaves
    def literal(self, node: Literal, negate: bool, span: Span) -> Value:
        kind = node.tok_kind()
        if kind == K.TRUE_KW or kind == K.FALSE_KW:
            return const_bytes(b"\x01" if kind == K.TRUE_KW else b"\x00", DType.BOOL, ())
        lit = literals.parse(node.tok_text())
        if lit is None:
            return None  # malformed: the lexer has reported it
        if negate:
            lit = lit.negate()
        if lit.suffix is not None:
            return self.const(lit, lit.suffix, span)
        return Deferred(span, lit=lit)

    def const(self, lit: literals.Literal, dtype: DType, span: Span) -> Node | None:
        """The scalar constant of ``lit`` in ``dtype`` (cached), or an E0301/E0302 at span."""
        node = self.consts.get((lit, dtype))
        if node is not None:
            return node
        try:
            node = const_bytes(literals.encode(lit, dtype), dtype, ())
        except literals.LiteralError as e:
            return self.r.error(e.code, e.message, span)
        self.consts[lit, dtype] = node
        return node

    def name(self, node: NameRef, env: Env) -> Value:
        name = node.name()
        slot = env.get(name)
        if slot is not None:
            if slot.moved is not None:
                return self.use_after_move(slot, node.span)
            if slot.kind == "borrow":
                self.read_borrow(slot, node.span)
            return slot.value
        tok = node.ident()
        if name in DTYPES:
            return self.r.error("E0305", f"'{name}' is a type, not a value", tok.span)
        if name == "_":
            return self.r.error("E0101", "'_' binds nothing, so it cannot be read", tok.span)
        if name in BUILTIN_NAMES or name in self.sigs:
            return self.r.error("E0101", f"'{name}' is a function; call it: {name}(...)", tok.span)
        hint = difflib.get_close_matches(name, list(env), 1)
        more = f"; did you mean '{hint[0]}'?" if hint else ""
        return self.r.error("E0101", f"unknown name '{name}'{more}", tok.span)

    # -------------------------------------------------------------- statements
    def block(self, node: Block, env: Env) -> Handler:
        scope = dict(env)
        value: Value = None
        live = len(self.borrows)
        kind: int = K.BLOCK
        for item in node.items():
            kind = item.green.kind
            if kind == K.LET_STMT:
                assert isinstance(item, LetStmt)
                yield from self.let(item, scope)
                value = None
            elif kind == K.ASSIGN_STMT:
                assert isinstance(item, AssignStmt)
                yield from self.assign(item, scope)
                value = None
            elif kind == K.EXPR_STMT:
                assert isinstance(item, ExprStmt)
                yield from self.call_stmt(item, scope)
                value = None
            else:
                value = yield item, scope
        del self.borrows[live:]  # the block's borrow bindings end with it
        if (kind in _STATEMENT_KINDS or kind == K.BLOCK) and node.span in self.unit_bodies:
            return NOTHING  # the body of a function without a result type (maybe empty)
        return value

    def let(self, node: LetStmt, scope: Env) -> Generator[Request, Value, None]:
        pattern, tnode, init = node.parts()
        if self.spans is not None:
            self.lets.append(_short(pattern.text()) if pattern is not None else "_")
        target_slot: Slot | None = None
        if isinstance(init, RefExpr):
            value, target_slot = yield from self.borrow_init(init, scope)
        else:
            value = (yield init, scope) if init is not None else None
        if self.has_refs:
            no_ref(node, self.r, "a let binding")
        if tnode is not None and isinstance(pattern, TuplePat):
            self.r.error(
                "E0309",
                "a tuple pattern has no type annotation: its names take the value's types",
                tnode.span,
            )
        elif tnode is not None:
            target = self.annotation(tnode)
            space = type_space(tnode, self.r) if self.check_spaces else None
            value = self.coerce(value, target, init.span if init else node.span, space)
        if isinstance(pattern, TuplePat):
            self.destructure(pattern, value, scope)
        elif pattern is not None:
            mut = self.may_mutate and node.is_mut()
            kind = "mut" if mut else "borrow" if target_slot is not None else "let"
            if kind == "mut" and isinstance(value, Deferred):
                value = self.materialize(value, value.default)
            slot = self.bind(pattern.ident(), value, scope, set(), kind)
            if slot is not None and kind == "mut":
                self.make_cell(slot)
            if slot is not None and target_slot is not None and init is not None:
                self.borrows.append(Borrow(slot, target_slot, init.span, self.loop_depth))
        if self.spans is not None:
            self.lets.pop()

    def note(self, node: Node, span: Span) -> Node:
        """Record where ``node`` was built (when ``spans`` is on), and the same place for the
        nodes made for it that have none yet (a math function's expansion, a start vector).
        The first place wins: nodes are interned, so a repeated expression is one node."""
        spans = self.spans
        if spans is None:
            return node
        where = (span, self.lets[-1] if self.lets else None)
        stack = [node]
        while stack:
            n = stack.pop()
            if n.hash not in spans:
                spans[n.hash] = where
                stack.extend(n.inputs)
        return node

    def bind(
        self,
        tok: SyntaxToken | None,
        value: Value,
        scope: Env,
        seen: set[str],
        kind: str = "let",
    ) -> Slot | None:
        """Bind one name of a pattern (``_`` binds nothing); the new slot."""
        if tok is None or tok.text == "_":
            return None
        why = reserved(tok.text)
        if why:
            self.r.error("E0106", f"{why} and cannot name a variable", tok.span)
        elif tok.text in seen:
            self.r.error("E0310", f"'{tok.text}' is bound twice in this pattern", tok.span)
        seen.add(tok.text)
        slot = scope[tok.text] = Slot(tok.text, value, kind, tok.span, self.loop_depth)
        return slot

    def make_cell(self, slot: Slot) -> None:
        """An assignable slot keeps its first value's type and space."""
        if isinstance(slot.value, Node):
            slot.type = slot.value.type
            slot.space = self.space(slot.value)

    # ------------------------------------------------- ownership (kera.syntax.ownership)
    def use_after_move(self, slot: Slot, span: Span) -> Any:
        """E0401: a name read after ``transfer`` moved it (poison, so nothing cascades)."""
        assert slot.moved is not None
        return self.r.error(
            "E0401",
            f"use of '{slot.name}' after it was moved",
            span,
            notes=((slot.moved, f"'{slot.name}' moved here"),),
            hint=f"transfer a copy to keep '{slot.name}': "
            f"transfer(copy({slot.name}), to = {slot.moved_to})",
        )

    def read_borrow(self, slot: Slot, span: Span) -> None:
        """A read of a borrow binding: report the conflicts seen since it was taken (E0406:
        the borrow is used after its owner changed), and note the read for E0407."""
        self.events += 1
        for b in self.borrows:
            if b.slot is not slot:
                continue
            b.reads.append((self.events, span))
            for _, what, where in b.conflicts:
                self.r.error(
                    "E0406",
                    f"cannot {what} '{b.target.name}' while it is borrowed",
                    where,
                    notes=(
                        (b.span, f"'{b.target.name}' borrowed here"),
                        (span, "the borrow is used later here"),
                    ),
                    hint=f"use '{slot.name}' before this, or borrow after it",
                )
            b.conflicts.clear()

    def conflict(self, slot: Slot | None, what: str, span: Span) -> None:
        """An assignment, ``&mut`` or move of ``slot``: pending on its live borrows."""
        if slot is None or not self.borrows:
            return
        self.events += 1
        for b in self.borrows:
            if b.target is slot:
                b.conflicts.append((self.events, what, span))

    def stray_borrow(self, node: RefExpr, env: Env) -> Any:
        """E0408: ``&x`` where it is neither a call argument nor a let's value."""
        return self.r.error(
            "E0408",
            "a borrow '&x' is only a call argument or the value of a let",
            node.span,
            hint="write the value itself, or bind the borrow: let r = &x;",
        )

    def borrow_init(
        self, init: RefExpr, scope: Env
    ) -> Generator[Request, Value, tuple[Value, Slot | None]]:
        """``let r = &x;``: x's value and slot (a borrow of an expression is its value)."""
        if init.is_mut():
            self.r.error(
                "E0408",
                "a '&mut' borrow is only a call argument",
                init.span,
                hint="assign the buffer instead: b = expr;",
            )
            return None, None
        operand = init.operand()
        value = yield operand, scope
        slot = scope.get(operand.name()) if isinstance(operand, NameRef) else None
        return value, slot

    def assign(self, node: AssignStmt, scope: Env) -> Generator[Request, Value, None]:
        """``b = expr;``: a new value for a ``&mut`` parameter or a ``let mut`` name."""
        tok, vnode = node.target(), node.value()
        value = (yield vnode, scope) if vnode is not None else None
        if tok is None or vnode is None:
            return
        slot = scope.get(tok.text)
        if slot is None:
            self.r.error("E0101", f"unknown name '{tok.text}'", tok.span)
            return
        if slot.kind not in ASSIGNABLE:
            self.r.error(
                "E0404",
                f"'{tok.text}' cannot be assigned: only '&mut' parameters and 'let mut' names can",
                tok.span,
                notes=((slot.span, f"'{tok.text}' is bound here"),),
                hint=f"bind a new value with let {tok.text} = ...; or declare it "
                f"let mut {tok.text} = ...;",
            )
            return
        new = self.coerce(value, slot.type, vnode.span, slot.space)
        self.conflict(slot, "assign", tok.span)
        if new is not None:
            slot.moved = None  # a new value: usable again
            self.log.set(slot, new)

    def call_stmt(self, node: ExprStmt, scope: Env) -> Generator[Request, Value, None]:
        """``f(&mut b);``: a call whose value is dropped (checked in :meth:`call`)."""
        call = node.call()
        if call is None:
            return
        self.stmt_calls.add(call.span)
        yield call, scope

    def move(self, operand: SyntaxNode | None, env: Env, to: str, span: Span) -> bool:
        """``transfer`` of a name moves it: E0403 out of a borrow, E0402 inside a loop body
        of a name bound outside it.  False after an error."""
        while isinstance(operand, ParenExpr):
            operand = operand.inner()
        if not isinstance(operand, NameRef):
            return True
        slot = env.get(operand.name())
        if slot is None or slot.moved is not None:
            return True  # reported where it was read
        name = slot.name
        copy_hint = f"transfer a copy: transfer(copy({name}), to = {to})"
        if slot.kind in BORROWED:
            return (
                self.r.error(
                    "E0403",
                    f"cannot move '{name}' out of a borrow: it belongs to the caller",
                    operand.span,
                    notes=((slot.span, f"'{name}' is borrowed here"),),
                    hint=copy_hint,
                )
                or False
            )
        if slot.level < self.loop_depth:
            return (
                self.r.error(
                    "E0402",
                    f"'{name}' is bound outside this loop and moved inside it: the next "
                    "iteration would use a moved value",
                    operand.span,
                    notes=((slot.span, f"'{name}' is bound here, outside the loop"),),
                    hint=copy_hint,
                )
                or False
            )
        self.conflict(slot, "move", operand.span)
        slot.moved, slot.moved_to = operand.span, to
        self.log.moves.append(slot)
        return True

    # ------------------------------------------------------------------ spaces
    def space(self, node: Node) -> str | None:
        """Where ``node`` lives (None: literals only, which adapt): a parameter's space, a
        transfer's ``to``, the recorded space of a loop's or call's result, else what
        :func:`combine` makes of the operands (walked iteratively, memoised by hash)."""
        memo = self.spaces
        got = memo.get(node.hash, _UNKNOWN)
        if got is not _UNKNOWN:
            return got  # type: ignore[return-value]
        stack = [node]
        while stack:
            n = stack[-1]
            if n.hash in memo:
                stack.pop()
                continue
            own = _own_space(n)
            if own is not _UNKNOWN:
                memo[n.hash] = own  # type: ignore[assignment]
                stack.pop()
                continue
            missing = [i for i in n.inputs if i.hash not in memo]
            if missing:
                stack.extend(missing)
                continue
            memo[n.hash] = combine(memo[i.hash] for i in n.inputs)[0]
            stack.pop()
        return memo[node.hash]

    def check_op_spaces(self, op: Op, nodes: list[Node], span: Span) -> bool:
        """E0121: the operands of one op in incompatible spaces; the hint names the
        transfer that makes them agree (the first operand's space wins)."""
        spaces = [self.space(n) for n in nodes]
        if combine(spaces)[1]:
            return True
        kinds = ["host" if sp == "pinned" else sp for sp in spaces if sp not in (None, "unified")]
        want = max(kinds, key=kinds.count)  # the space most operands are in (the first on a tie)
        first = want
        k = next(
            i
            for i, sp in enumerate(spaces)
            if sp is not None and sp != "unified" and combine([want, sp])[1] is False
        )
        spans = self.operand_spans
        where = spans[k] if spans is not None and len(spans) == len(nodes) else span
        text = self.source_text(where) if where != span else "..."
        return (
            self.r.error(
                "E0121",
                f"{op.value} needs operands in one memory space, got {first} and {spaces[k]}",
                span,
                notes=((where, f"this is in {spaces[k]}"),) if where != span else (),
                hint=f"insert a transfer: transfer({text}, to = {want})",
            )
            or False
        )

    def source_text(self, span: Span) -> str:
        return _short(self.r.index.data[span[0] : span[1]].decode("utf-8", "replace"))

    # ----------------------------------------------------------------- effects
    def need_effects(
        self, effects: tuple[str, ...], span: Span, callee: Signature | None = None
    ) -> bool:
        """E0125 (once per function and effect): an effect the enclosing function does
        not declare."""
        cur = self.sigs.get(self.active[-1]) if self.active else None
        if cur is None:
            return True
        missing = [e for e in effects if e not in cur.effects]
        if not missing:
            return True
        todo = [e for e in missing if (cur.name, e) not in self.effect_reported]
        self.effect_reported.update((cur.name, e) for e in missing)
        if not todo:
            return False
        clause = ", ".join(sorted({*cur.effects, *missing}))
        what = f"calling '{callee.name}'" if callee is not None else "transfer"
        notes: tuple[tuple[Span, str], ...] = ()
        if callee is not None and callee.effects_span is not None:
            notes = ((callee.effects_span, f"'{callee.name}' declares its effects here"),)
        return (
            self.r.error(
                "E0125",
                f"{what} has the effect {', '.join(todo)}, which '{cur.name}' does not declare",
                span,
                notes=notes,
                hint=f"declare it: add effects({clause}) after the result type of '{cur.name}'",
            )
            or False
        )

    def transfer(
        self, node: CallExpr, args: list[SyntaxNode], values: list[Value], env: Env
    ) -> Value:
        """``transfer(x, to = SPACE)``: the op ``transfer`` (an effect, numbered in program
        order); a name given as ``x`` is moved."""
        kwargs = node.args().keywords() if node.args() is not None else []  # type: ignore[union-attr]
        if len(values) != 1:
            return self.r.error("E0204", f"transfer takes 1 operand, got {len(values)}", node.span)
        to = self.transfer_target(node, kwargs)
        value = values[0]
        if to is None or value is None:
            return None
        if isinstance(value, Tup):
            return self.r.error("E0307", "transfer takes a tensor, not a tuple", node.span)
        x = self.materialize(value, value.default) if isinstance(value, Deferred) else value
        if x is None:
            return None
        source = self.space(x) or "host"
        if source == to:
            return self.r.error(
                "E0126",
                f"this value is in {to} already: nothing to transfer",
                node.span,
                hint="remove the transfer, or transfer to another space",
            )
        if not self.need_effects(("transfer",), node.span):
            return None
        if not self.move(args[0], env, to, node.span):
            return None
        region = self.regions[-1]
        try:
            out = ir_transfer(x, to, len(region), source)
        except TypeRuleError as e:
            return self.r.error(e.code, e.message, node.span)
        region.append(out)
        self.spaces[out.hash] = to
        return self.note(out, node.span)

    def transfer_target(self, node: CallExpr, kwargs: list[Kwarg]) -> str | None:
        """The ``to = SPACE`` of a transfer (E0213 missing, E0212 another keyword, E0126
        not a space)."""
        for kw in kwargs:
            tok = kw.name()
            if tok is not None and tok.text != "to":
                return self.r.error("E0212", f"transfer takes no attribute '{tok.text}'", kw.span)
        target = next((kw for kw in kwargs if (t := kw.name()) and t.text == "to"), None)
        if target is None:
            return self.r.error(
                "E0213", "transfer needs the attribute 'to' (a memory space)", node.span
            )
        value = target.value()
        if not isinstance(value, NameRef) or value.name() not in SPACES:
            return self.r.error(
                "E0126",
                f"'to' is a memory space: {SPACE_NAMES}",
                value.span if value is not None else target.span,
            )
        return value.name()

    def destructure(self, pattern: TuplePat, value: Value, scope: Env) -> None:
        """``let (a, (b, _)) = value;``, walked with an explicit stack in source order.  After
        a mismatch the names of that part are bound to poison, so uses stay silent."""
        seen: set[str] = set()
        stack: list[tuple[Name | TuplePat, Value]] = [(pattern, value)]
        while stack:
            part, v = stack.pop()
            if isinstance(part, Name):
                self.bind(part.ident(), v, scope, seen)
                continue
            parts = part.elements()
            if not parts:
                continue  # `()`: the parser has reported it
            if len(parts) == 1:  # (a) and (a,) are a, as a one-element tuple is its element
                stack.append((parts[0], v))
                continue
            items = self.unpack(part, v, len(parts))
            stack.extend(reversed(list(zip(parts, items, strict=True))))

    def unpack(self, pattern: TuplePat, value: Value, n: int) -> list[Value]:
        if isinstance(value, Tup) and len(value.items) == n:
            return list(value.items)
        if value is not None:
            found = (
                f"a tuple of {len(value.items)}"
                if isinstance(value, Tup)
                else f"{describe(value)}, not a tuple"
            )
            self.r.error(
                "E0310",
                f"this pattern takes apart a tuple of {n}, but the value is {found}",
                pattern.span,
            )
        return [None] * n

    def annotation(self, tnode: SyntaxNode) -> TensorType | None:
        t = resolve_type(tnode, self.r)
        if isinstance(t, list):
            return self.r.error("E0309", "a let binding has one type, not a tuple", tnode.span)
        return t

    # ------------------------------------------------------------- expressions
    def prefix(self, node: PrefixExpr, env: Env) -> Handler:
        op, operand = node.op(), node.operand()
        if op == K.MINUS and isinstance(operand, Literal) and operand.tok_kind() in NUMBERS:
            return self.literal(operand, True, node.span)  # -1 is one literal, not neg(1)
        value = yield operand, env
        return self.elementwise(PREFIX_OPS[op], [value], node.span)

    def binary(self, node: BinExpr, env: Env) -> Handler:
        lhs, rhs = node.operands()
        a = self.leaf(lhs, env)
        if isinstance(a, _Pending):
            a = yield lhs, env
        b = self.leaf(rhs, env)
        if isinstance(b, _Pending):
            b = yield rhs, env
        if lhs is None or rhs is None:
            return None
        if not self.check_spaces:
            return self.elementwise(BINARY_OPS[node.op_kind()], [a, b], node.span)
        self.operand_spans = [lhs.span, rhs.span]
        try:
            return self.elementwise(BINARY_OPS[node.op_kind()], [a, b], node.span)
        finally:
            self.operand_spans = None

    def cast(self, node: CastExpr, env: Env) -> Handler:
        value = yield node.operand(), env
        target = self.cast_target(node.type())
        if value is None or target is None:
            return None
        if isinstance(value, Tup):
            return self.r.error("E0307", "a tuple cannot be converted with 'as'", node.span)
        if isinstance(value, Deferred):
            return self.materialize(value, target)
        if value.dtype is target:
            return value
        return self.make(Op.CONVERT, [value], {"to": target}, node.span)

    def cast_target(self, tnode: SyntaxNode | None) -> DType | None:
        if not isinstance(tnode, TensorTypeNode):
            if tnode is not None:
                self.r.error(
                    "E0308", "'as' converts to a dtype such as f32, not a tuple", tnode.span
                )
            return None
        tok = tnode.dtype()
        if tok is None:
            return None
        if tnode.dims() is not None:
            return self.r.error(
                "E0308",
                "'as' changes the dtype only; use reshape or broadcast for shapes",
                tnode.span,
            )
        dtype = DTYPES.get(tok.text)
        if dtype is None:
            self.r.error("E0110", f"unknown type '{tok.text}'", tok.span)
        return dtype

    def tuple_(self, node: TupleExpr, env: Env) -> Handler:
        items: list[Value] = []
        for element in node.elements():
            items.append((yield element, env))
        if not items:
            return self.r.error("E0307", "the empty tuple () has no value", node.span)
        if any(v is None for v in items):
            return None
        if len(items) == 1:
            return items[0]
        value = Tup(tuple(v for v in items if isinstance(v, _VALUES)))
        if value.depth > MAX_TUPLE_DEPTH:
            return self.r.error("E0307", f"tuples nest at most {MAX_TUPLE_DEPTH} deep", node.span)
        return value

    def field(self, node: FieldExpr, env: Env) -> Handler:
        base = yield node.base(), env
        tok = node.index()
        if base is None or tok is None:
            return None
        if not isinstance(base, Tup):
            what = "a literal" if isinstance(base, Deferred) else str(base.type)
            return self.r.error("E0307", f"'.{tok.text}' needs a tuple, found {what}", node.span)
        index = int(tok.text) if tok.text.isdigit() and len(tok.text) < 10 else len(base.items)
        if index >= len(base.items):
            return self.r.error(
                "E0307", f"tuple of {len(base.items)} has no field .{tok.text}", tok.span
            )
        return base.items[index]

    # ------------------------------------------------------------------ if
    def if_(self, node: IfExpr, env: Env) -> Handler:
        """``if c { a } else { b }`` is ``select(c, a, b)``: all three are evaluated (an
        else-if chain nests: the else part is the next IfExpr)."""
        parts = node.parts()
        if parts is None:
            return None  # a part is missing: the parser has reported it
        cond_node, then_node, else_node = parts
        cond = yield cond_node, env
        mark = self.log.mark()
        a = yield then_node, env
        then_cells, then_moves = self.log.undo(mark)
        b = yield else_node, env
        else_cells, else_moves = self.log.undo(mark)
        test = cond if isinstance(cond, Node) and cond.dtype is DType.BOOL else None
        self.merge_branches(test, then_cells, else_cells, node.span)
        for slot, where, to in [*then_moves, *else_moves]:
            if slot.moved is None:  # a move in either branch counts after the if
                slot.moved, slot.moved_to = where, to
                self.log.moves.append(slot)
        if cond is None or a is None or b is None:
            return None
        if not isinstance(cond, Node) or cond.dtype is not DType.BOOL:
            return self.r.error(
                "E0311",
                f"the condition of an if must be bool, found {describe(cond)}",
                cond_node.span,
            )
        if self.check_spaces:
            self.operand_spans = [cond_node.span, _branch_span(then_node), _branch_span(else_node)]
        try:
            return self.choose(cond, a, b, (node.span, cond_node.span), {})
        finally:
            self.operand_spans = None

    def merge_branches(
        self,
        cond: Node | None,
        then_cells: dict[Slot, Any],
        else_cells: dict[Slot, Any],
        span: Span,
    ) -> None:
        """A buffer an if's branch updated is ``select(c, then value, else value)`` after
        it (the branch that leaves it alone gives its value before the if)."""
        for slot in [*then_cells, *(c for c in else_cells if c not in then_cells)]:
            t = then_cells.get(slot, slot.value)
            e = else_cells.get(slot, slot.value)
            if cond is None or not isinstance(t, Node) or not isinstance(e, Node):
                self.log.set(slot, None)
            else:
                self.log.set(slot, t if t is e else self.select(cond, t, e, (span, span)))

    def choose(
        self,
        cond: Node,
        a: Node | Deferred | Tup,
        b: Node | Deferred | Tup,
        spans: tuple[Span, Span],
        memo: dict[tuple[int, int], Value],
    ) -> Value:
        """``select(cond, a, b)``, tuples element by element (recursion is bounded by
        :data:`MAX_TUPLE_DEPTH`; ``memo`` keeps shared sub-tuples from being walked twice).
        ``spans`` are the if's and its condition's."""
        if not isinstance(a, Tup) and not isinstance(b, Tup):
            return self.select(cond, a, b, spans)
        if not isinstance(a, Tup) or not isinstance(b, Tup) or len(a.items) != len(b.items):
            return self.branch_mismatch(a, b, spans[0])
        key = (id(a), id(b))
        if key not in memo:
            self.charge()
            items = [
                self.choose(cond, x, y, spans, memo) for x, y in zip(a.items, b.items, strict=True)
            ]
            ok = [v for v in items if isinstance(v, _VALUES)]
            memo[key] = Tup(tuple(ok)) if len(ok) == len(items) else None
        return memo[key]

    def select(
        self, cond: Node, a: Node | Deferred, b: Node | Deferred, spans: tuple[Span, Span]
    ) -> Value:
        """One element of an if: the branches share a dtype and a shape, or one of them is a
        scalar (broadcast); the condition is a scalar or has the result's shape."""
        nodes = [v for v in (a, b) if isinstance(v, Node)]
        shapes = {n.shape for n in nodes if n.shape}
        if len({n.dtype for n in nodes}) > 1 or len(shapes) > 1:
            return self.branch_mismatch(a, b, spans[0])
        if cond.shape and shapes and shapes != {cond.shape}:
            return self.r.error(
                "E0311",
                f"the condition of an if is {cond.type} but the branches are "
                f"{nodes[0].dtype}{list(shapes.pop())}: a condition is a bool scalar or has "
                "the branches' shape",
                spans[1],
            )
        return self.elementwise(SELECT, [cond, a, b], spans[0])

    def branch_mismatch(
        self, a: Node | Deferred | Tup, b: Node | Deferred | Tup, span: Span
    ) -> Any:
        return self.r.error(
            "E0312",
            f"the branches of an if have different types: {describe(a)} and {describe(b)}",
            span,
        )

    def leaf(self, node: SyntaxNode | None, env: Env) -> Value | _Pending:
        """The value of a name, a literal or a part a syntax error left missing, evaluated
        here as the driver would evaluate it (charged first, then started); :data:`PENDING`
        for any other expression, which the handler yields to the driver instead."""
        if node is not None and node.green.kind not in _LEAVES:
            return PENDING
        self.charge()
        value = self.start(node, env)
        assert value is None or isinstance(value, _VALUES)  # a leaf starts no handler
        return value

    def charge(self) -> None:
        """Count one expression against the ``expansion`` budget."""
        self.steps += 1
        if self.steps > self.limits.expansion:
            raise _Budget("E0111", _expansion_message(self.limits.expansion))

    # ---------------------------------------------------------------- index
    def index(self, node: IndexExpr, env: Env) -> Handler:
        """``x[item, ...]``: static items are a ``slice`` and a ``reshape``; a computed item
        (an integer scalar) is evaluated and read with a ``dynamic_slice``."""
        base = yield node.base(), env
        items: list[indexing.Item | Node | None] = []
        for item in node.items():
            static = self.index_item(item)
            if static is _DYNAMIC:
                value = yield item, env
                items.append(self.index_scalar(value, item.span, "a dynamic index"))
                continue
            items.append(static)
        ok = [i for i in items if i is not None]
        if not items or node.token(K.L_BRACK) is None or base is None or len(ok) != len(items):
            return None
        target = self.indexable(base, len(items), node.span)
        if target is None:
            return None
        statics = [i for i in ok if isinstance(i, indexing.Item)]
        if len(statics) == len(ok):
            return self.lower_index(target, statics, node.span)
        return self.lower_dynamic_index(target, ok, node.span)

    def index_item(self, item: SyntaxNode) -> indexing.Item | None:
        """The static item of ``item``, :data:`_DYNAMIC` for a computed index, or None after
        an error."""
        if item.kind == K.ERROR:
            return None
        text = _short(item.text())
        if isinstance(item, Range):
            lo_node, hi_node = item.ends()
            lo, hi = self.range_end(lo_node), self.range_end(hi_node)
            if isinstance(lo, _NotStatic) or isinstance(hi, _NotStatic):
                return None
            return indexing.Item(lo, hi, False, text, item.span)
        k = static_int(item)
        if isinstance(k, _NotStatic):
            return _DYNAMIC
        return None if k is None else indexing.Item(k, None, True, text, item.span)

    def range_end(self, node: SyntaxNode | None) -> int | _NotStatic | None:
        """A range end: its value, None when omitted, :data:`NOT_STATIC` after an error."""
        if node is None:
            return None
        k = static_int(node)
        if isinstance(k, _NotStatic):
            self.r.error("E0313", "a range end is an integer literal such as 2 or -1", node.span)
        return NOT_STATIC if k is None else k

    def index_scalar(self, value: Value, span: Span, what: str) -> Node | None:
        """A dynamic index or start index as an ``i32`` scalar, or E0320 when it is not an
        integer scalar.  Other integer dtypes are saturated to i32's range (``min``/``max``
        in their own dtype, then ``convert``, which would wrap): exact, since every dimension
        is below 2^24 and the op clamps the start into range anyway."""
        if value is None:
            return None
        if isinstance(value, Deferred) and not value.is_float:
            return self.materialize(value, DType.I32)
        if not isinstance(value, Node) or not value.dtype.is_int or value.shape:
            return self.r.error(
                "E0320",
                f"{what} is an integer scalar (i32, i64, u32 or u64), found {describe(value)}",
                span,
            )
        node: Node | None = value
        for op, bound in _SATURATE.get(value.dtype, ()):
            limit = const_bytes(np.array(bound, value.dtype.np).tobytes(), value.dtype, ())
            node = self.make(op, [node, limit], {}, span) if node is not None else None
        if node is None or node.dtype is DType.I32:
            return node
        return self.make(Op.CONVERT, [node], {"to": DType.I32}, span)

    def lower_dynamic_index(
        self, x: Node, items: list[indexing.Item | Node], span: Span
    ) -> Node | None:
        """``x[items]`` with dynamic items: the static items' ``slice`` (dynamic axes kept
        whole), a ``dynamic_slice`` of size 1 on the dynamic axes, and a ``reshape`` that drops
        the indexed axes (static and dynamic)."""
        rank = len(x.shape)
        statics = [i if isinstance(i, indexing.Item) else _WHOLE for i in items]
        try:
            plan = indexing.plan(x.shape, statics, str(x.type))
        except indexing.IndexingError as e:
            return self.r.error("E0313", e.message, e.span)
        node: Node | None = x
        if plan.slices(x.shape):
            node = self.make(Op.SLICE, [x], {"start": plan.start, "stop": plan.stop}, span)
        padded: list[indexing.Item | Node | None] = [*items, *[None] * (rank - len(items))]
        starts = [i if isinstance(i, Node) else None for i in padded]
        sliced = [b - a for a, b in zip(plan.start, plan.stop, strict=True)]
        size = tuple(1 if isinstance(i, Node) else d for i, d in zip(padded, sliced, strict=True))
        kept = tuple(
            d
            for i, d in zip(padded, sliced, strict=True)
            if not isinstance(i, Node) and not (i is not None and i.drops)
        )
        if node is None:
            return None
        node = self.make(Op.DYNAMIC_SLICE, [node, start_vector(starts)], {"size": size}, span)
        if node is None:
            return None
        return self.make(Op.RESHAPE, [node], {"shape": kept}, span)

    def indexable(self, base: Node | Deferred | Tup, n: int, span: Span) -> Node | None:
        """``base`` when it is a tensor with at least ``n`` axes."""
        if isinstance(base, Tup):
            return self.r.error(
                "E0313",
                f"only a tensor can be indexed, found {describe(base)} "
                "(take a tuple apart with .0 or let (a, b) = ...)",
                span,
            )
        if isinstance(base, Deferred) or not base.shape:
            return self.r.error(
                "E0313", f"{describe(base)} is a scalar: it has no axes to index", span
            )
        rank = len(base.shape)
        if n > rank:
            axes = "1 axis" if rank == 1 else f"{rank} axes"
            return self.r.error("E0313", f"{base.type} has {axes}, but {n} items index it", span)
        return base

    def lower_index(self, x: Node, items: list[indexing.Item], span: Span) -> Node | None:
        try:
            plan = indexing.plan(x.shape, items, str(x.type))
        except indexing.IndexingError as e:
            return self.r.error("E0313", e.message, e.span)
        node: Node | None = x
        if plan.slices(x.shape):
            node = self.make(Op.SLICE, [x], {"start": plan.start, "stop": plan.stop}, span)
        if node is not None and plan.reshapes():
            node = self.make(Op.RESHAPE, [node], {"shape": plan.shape}, span)
        return node

    # ------------------------------------------------------------------ for
    def for_(self, node: ForExpr, env: Env) -> Handler:
        """``for i in LO..HI with (c = init, ...) { body }``: the carried values after the last
        iteration (one value, or a tuple of them).  The initial values are evaluated here, in
        order; the body once, inside ``kera.ir.loop`` (see the module doc)."""
        parts = node.parts()
        if parts is None:
            return None  # a part is missing: the parser has reported it
        index, bounds_node, carried, body = parts
        bounds = self.loop_bounds(bounds_node)
        inits: list[Node | None] = []
        for var in carried:
            init = var.init()
            assert init is not None
            inits.append(self.carried_init((yield init, env), init.span))
        names_ok = self.loop_names(index, carried)
        if self.loop_depth >= MAX_LOOP_DEPTH:
            kw = node.token(K.FOR_KW)
            return self.r.error(
                "E0316",
                f"loops nest more than {MAX_LOOP_DEPTH} deep here (bodies included through "
                "calls); move the inner loop out, or merge two loops into one",
                kw.span if kw is not None else node.span,
            )
        spec = _Loop(index, carried, body, env)
        ok = [n for n in inits if n is not None]
        if bounds is None or not names_ok or len(ok) != len(inits) or bounds[1] == 0:
            out = self.check_body(spec, inits)
            if out is None or bounds is None or not names_ok or len(ok) != len(inits):
                return None
            return ok[0] if len(ok) == 1 else Tup(tuple(ok))  # zero trips: the initial values
        return self.build_loop(spec, bounds, ok, node.span)

    def build_loop(
        self, spec: _Loop, bounds: tuple[int, int], inits: list[Node], span: Span
    ) -> Value:
        """The loop's nodes.  Buffers the body updates (``&mut`` parameters, ``let mut``
        names) are carried after the written carried values; a body that may have effects
        makes an effectful loop, numbered in the enclosing region."""
        cells = self.loop_cells(spec)
        if any(not isinstance(c.value, Node) for c in cells):
            return None  # a buffer poisoned by an earlier error
        every = [*inits, *(c.value for c in cells)]
        effects = self.loop_effects(spec.body)
        k = len(inits)
        body_fn = self.loop_body_fn(spec, cells, every, effects)
        region = self.regions[-1]
        try:
            nodes = ir_loop(bounds[0], bounds[1], every, body_fn, len(region) if effects else None)
        except _BodyFailed:
            return None  # reported where it failed
        except TypeRuleError as e:
            return self.r.error(e.code, e.message, span)
        except IRError as e:  # a body over the function_elements budget
            return self.r.error("E0216", str(e), span)
        if effects:
            region.append(nodes[0])
        for n, init in zip(nodes, every, strict=True):
            self.note(n, span)
            if self.check_spaces:
                self.spaces[n.hash] = self.space(init)
        for c, n in zip(cells, nodes[k:], strict=True):
            self.log.set(c, n)
        nodes = nodes[:k]
        return nodes[0] if len(nodes) == 1 else Tup(tuple(nodes))

    def loop_body_fn(
        self, spec: _Loop, cells: list[Slot], every: list[Node], effects: tuple[str, ...]
    ) -> Callable[[Node, list[Node]], list[Node] | Body]:
        """What ``kera.ir.loop`` calls to build the body: the buffers are bound to their
        placeholders while it is evaluated (and put back after); their values at its end are
        the next carried values after the written ones."""
        k = len(every) - len(cells)

        def body_fn(i: Node, carried: list[Node]) -> list[Node] | Body:
            if self.check_spaces:
                self.spaces[i.hash] = None  # the index is a counter: it has no space
                for h, init in zip(carried, every, strict=True):
                    self.spaces[h.hash] = self.space(init)
            mark = self.log.mark()
            for c, h in zip(cells, carried[k:], strict=True):
                self.log.set(c, h)
            self.regions.append([])
            clock = self.events
            try:
                out = self.body_value(spec, i, list(carried[:k]))
                nexts = [c.value for c in cells]
                self.loop_borrows(cells, clock)
            finally:
                roots = self.regions.pop()
                self.log.undo(mark)
            if out is None or any(not isinstance(n, Node) for n in nexts):
                raise _BodyFailed
            results = [*out, *(n for n in nexts if isinstance(n, Node))]
            return Body(results, roots, effects) if effects else results

        return body_fn

    def loop_cells(self, spec: _Loop) -> list[Slot]:
        """The buffers a loop body updates, in the order they were bound."""
        if not self.may_mutate:
            return []
        names = updated_names(spec.body.green)
        found = [spec.env[n] for n in names if n in spec.env]
        return sorted((s for s in found if s.kind in ASSIGNABLE), key=lambda s: s.span)

    def loop_effects(self, body: Block) -> tuple[str, ...]:
        """The effects a loop body may have: ``transfer`` if it transfers, and the declared
        effects of the functions it calls."""
        if not self.any_effects:
            return ()
        out: set[str] = set()
        for name in called_names(body.green):
            if name == "transfer":
                out.add("transfer")
            elif name in self.sigs:
                out.update(self.sigs[name].effects)
        cur = self.sigs.get(self.active[-1]) if self.active else None
        allowed = set(cur.effects) if cur is not None else set()
        return tuple(sorted(out & allowed))  # an undeclared one is reported at its use

    def loop_borrows(self, cells: list[Slot], clock: int) -> None:
        """E0407: a borrow taken before the loop, of a buffer the body updates, read in the
        body before the update (so, in the next iteration, after it)."""
        for b in self.borrows:
            if b.target not in cells:
                continue
            reads = [r for r in b.reads if r[0] > clock]
            later = [c for c in b.conflicts if c[0] > clock]
            if reads and later and reads[0][0] < later[0][0]:
                self.r.error(
                    "E0407",
                    f"'{b.target.name}' is updated in this loop while a borrow of it taken "
                    "before the loop is read in the body: the borrow would outlive the value "
                    "it borrows into the next iteration",
                    later[0][2],
                    notes=(
                        (b.span, f"'{b.target.name}' borrowed here"),
                        (reads[0][1], "used in the next iteration here"),
                    ),
                    hint=f"take the borrow inside the loop body: let r = &{b.target.name};",
                )

    def check_body(self, spec: _Loop, inits: list[Node | None]) -> list[Node] | None:
        """Check a body that builds no loop (zero trips, or an error before it): on fresh
        placeholders of the index's and carried values' types, then dropped."""
        self.check_serial += 1
        tag = f"__check{self.check_serial}_"
        i = param(0, tag + "i", DType.I32)
        carried = [
            None if n is None else param(1 + k, f"{tag}{k}", n.dtype, n.shape)
            for k, n in enumerate(inits)
        ]
        if self.check_spaces:
            self.spaces[i.hash] = None
            for h, init in zip(carried, inits, strict=True):
                if h is not None and init is not None:
                    self.spaces[h.hash] = self.space(init)
        mark = self.log.mark()
        self.regions.append([])
        try:
            return self.body_value(spec, i, carried)
        finally:
            self.regions.pop()
            self.log.undo(mark)

    def body_value(self, spec: _Loop, i: Node, carried: list[Node | None]) -> list[Node] | None:
        """Evaluate the body with the index and carried names bound (a nested driver); the
        next carried values, checked against the carried types."""
        scope = dict(spec.env)
        for tok, bound in zip(spec.names(), [i, *carried], strict=True):
            if tok is not None and tok.text != "_" and reserved(tok.text) is None:
                scope[tok.text] = Slot(tok.text, bound, "let", tok.span, self.loop_depth + 1)
        self.loop_depth += 1
        try:
            value = self.run(spec.body, scope)
        finally:
            self.loop_depth -= 1
        types = [n.type for n in carried if n is not None]
        if value is None or len(types) != len(carried):
            return None
        return self.next_carried(spec, value, types)

    def next_carried(
        self, spec: _Loop, value: Node | Deferred | Tup, types: list[TensorType]
    ) -> list[Node] | None:
        """The body's value as the k next carried values: one value for k = 1, else a tuple of
        k (E0318), each of its carried value's type (E0317; literals adapt)."""
        k = len(types)
        spans = _value_spans(spec.body, k)
        if (k == 1) == isinstance(value, Tup) or (isinstance(value, Tup) and len(value.items) != k):
            names = ", ".join(f"'{n}'" for n in spec.var_names())
            many = f"{k} values ({names})" if k > 1 else f"one value ({names})"
            return self.r.error(
                "E0318",
                f"the loop carries {many}, but its body gives {describe(value)}",
                spans[0] if k == 1 else _span_of(spec.body),
            )
        items = value.items if isinstance(value, Tup) else (value,)
        out = [
            self.carry(v, t, name, span)
            for v, t, name, span in zip(items, types, spec.var_names(), spans, strict=True)
        ]
        ok = [n for n in out if n is not None]
        return ok if len(ok) == len(out) else None

    def carry(
        self, value: Node | Deferred | Tup, t: TensorType, name: str, span: Span
    ) -> Node | None:
        """One next carried value: the carried value's type exactly (E0317)."""
        if isinstance(value, Deferred):
            return self.coerce(value, t, span)
        if isinstance(value, Node) and value.type == t:
            return value
        return self.r.error(
            "E0317",
            f"the loop body gives {describe(value)} for the carried value '{name}', which is "
            f"{t}: a carried value keeps its initial value's type",
            span,
        )

    def loop_bounds(self, bounds: Range) -> tuple[int, int] | None:
        """(LO, trips) of ``LO..HI``, or None after reporting: the ends are integer literals
        (E0315), ``LO <= HI``, the index fits in ``i32`` (E0315), and at most ``MAX_TRIPS``
        trips (E0316).  Messages quote the source, never a (maybe huge) number."""
        lo_node, hi_node = bounds.ends()
        ends: list[int | None] = []
        for end in (lo_node, hi_node):
            if end is None:
                return None  # the parser has reported it
            k = static_int(end)
            if isinstance(k, _NotStatic):
                self.r.error(
                    "E0315",
                    "a loop bound is an integer literal such as 0 or -4: the trip count is "
                    "static (index a value with the loop index instead)",
                    end.span,
                )
                k = None
            ends.append(k)
        lo, hi = ends
        if lo is None or hi is None:
            return None
        text = _short(bounds.text())
        if hi < lo:
            return self.r.error(
                "E0315",
                f"the loop range {text} is reversed: write it as LO..HI with LO <= HI",
                bounds.span,
            )
        if lo < _I32_RANGE[0] or hi > _I32_RANGE[1]:
            return self.r.error(
                "E0315",
                f"the loop range {text} leaves i32: the index runs from -2147483648 to 2147483647",
                bounds.span,
            )
        if hi - lo > MAX_TRIPS:
            return self.r.error(
                "E0316", f"the loop {text} runs more than {MAX_TRIPS:,} times", bounds.span
            )
        return lo, hi - lo

    def loop_names(self, index: Name, carried: list[LoopVar]) -> bool:
        """Check the index and carried names: no type name (E0106), none twice (E0319; ``_``
        binds nothing and may repeat)."""
        ok = True
        seen: set[str] = set()
        for tok in [index.ident(), *(v.name() for v in carried)]:
            if tok is None or tok.text == "_":
                continue
            why = reserved(tok.text)
            if why:
                self.r.error("E0106", f"{why} and cannot name a variable", tok.span)
                ok = False
            elif tok.text in seen:
                self.r.error(
                    "E0319",
                    f"'{tok.text}' is bound twice in this loop: the index and the carried "
                    "values need distinct names",
                    tok.span,
                )
                ok = False
            seen.add(tok.text)
        return ok

    def carried_init(self, value: Value, span: Span) -> Node | None:
        """An initial value as a tensor: a literal takes its default type (i32 or f32)."""
        if isinstance(value, Tup):
            return self.r.error(
                "E0307", "a carried value is a tensor, not a tuple (carry each part)", span
            )
        if isinstance(value, Deferred):
            return self.materialize(value, value.default)
        return value

    # ------------------------------------------------------------------- calls
    def call(self, node: CallExpr, env: Env) -> Handler:
        callee = node.callee()
        args = node.args()
        if not isinstance(callee, NameRef):
            if callee is not None:
                self.r.error("E0107", "only functions can be called, by name", callee.span)
            return None
        if args is None:
            return None
        name = callee.name()
        positional, keywords, every = args.split()
        values: list[Value] = []
        modes: list[str] = []
        slots: list[Slot | None] = []
        for a in positional:
            target = a.operand() if isinstance(a, RefExpr) else a
            modes.append("" if not isinstance(a, RefExpr) else "&mut" if a.is_mut() else "&")
            slots.append(env.get(target.name()) if isinstance(target, NameRef) else None)
            value = self.leaf(target, env)
            values.append((yield target, env) if isinstance(value, _Pending) else value)
        if not self.args_in_order(every):
            return None
        stmt = node.span in self.stmt_calls
        if name in self.sigs:
            sig = self.sigs[name]
            args_of = _Args(positional, modes, slots)
            return (yield from self.call_user(sig, node, values, keywords, args_of, stmt))
        if name in BUILTIN_NAMES:
            if stmt or any(modes):
                return self.builtin_misuse(name, node, positional, modes, stmt)
            if name == "transfer":
                return self.transfer(node, positional, values, env)
            if name == "copy":
                return self.copy(node, values)
            if not self.check_spaces:
                return self.call_builtin(name, node, values, keywords)
            self.operand_spans = [a.span for a in positional]
            try:
                return self.call_builtin(name, node, values, keywords)
            finally:
                self.operand_spans = None
        known = [*self.sigs, *BUILTIN_NAMES]
        hint = difflib.get_close_matches(name, known, 1)
        more = f"; did you mean '{hint[0]}'?" if hint else ""
        return self.r.error("E0102", f"unknown function '{name}'{more}", callee.span)

    def builtin_misuse(
        self, name: str, node: CallExpr, args: list[SyntaxNode], modes: list[str], stmt: bool
    ) -> Any:
        """A builtin given a borrow (E0409), or called as a statement (E0410)."""
        if stmt:
            return self.r.error(
                "E0410",
                f"this call of '{name}' is a statement, but it has no effect: its value "
                "would be lost",
                node.span,
                hint="bind its value with let",
            )
        k = next(i for i, m in enumerate(modes) if m)
        return self.r.error(
            "E0409",
            f"'{name}' takes values, not borrows",
            args[k].span,
            hint="write the value without '&'",
        )

    def copy(self, node: CallExpr, values: list[Value]) -> Value:
        """``copy(x)``: x's value (no node); a transfer of it moves nothing."""
        if len(values) != 1:
            return self.r.error("E0204", f"copy takes 1 operand, got {len(values)}", node.span)
        return values[0]

    def args_in_order(self, nodes: list[SyntaxNode]) -> bool:
        seen_kw = False
        for n in nodes:
            if isinstance(n, Kwarg):
                seen_kw = True
            elif seen_kw and n.kind != K.ERROR:
                self.r.error(
                    "E0109", "a positional argument cannot follow a keyword argument", n.span
                )
                return False
        return True

    def call_user(
        self,
        sig: Signature,
        node: CallExpr,
        values: list[Value],
        kwargs: list[Kwarg],
        args_of: _Args,
        stmt: bool,
    ) -> Handler:
        if kwargs:
            return self.r.error(
                "E0109", f"'{sig.name}' takes positional arguments only", kwargs[0].span
            )
        if len(values) != len(sig.params):
            n = len(sig.params)
            return self.r.error(
                "E0108",
                f"'{sig.name}' takes {n} argument{'s' if n != 1 else ''}, got {len(values)}",
                node.span,
            )
        spans = [a.span for a in args_of.nodes]
        spaces = sig.param_spaces if self.check_spaces else [None] * len(values)
        nodes = [
            self.coerce(v, t, span, sp)
            for v, (_, t), span, sp in zip(values, sig.params, spans, spaces, strict=True)
        ]
        if not self.check_modes(sig, node, args_of, stmt):
            return None
        if not sig.ok or sig.body is None:
            return None
        if sig.name in self.active_set:
            return self.recursion(sig.name, node)
        if len(self.active) >= self.limits.call_depth:
            callee = node.callee()
            return self.r.error(
                "E0112",
                f"calls nest more than {self.limits.call_depth:,} deep here "
                f"({limits.hint('call_depth')})",
                callee.span if callee is not None else node.span,
            )
        bound = [n for n in nodes if n is not None]
        if len(bound) != len(nodes):
            return None
        if sig.name not in self.callees:
            self.callees[sig.name] = yield from self.callee(sig, node)
        fn = self.callees[sig.name]
        if fn is None:
            return None
        if sig.effects and not self.need_effects(sig.effects, node.span, sig):
            return None
        return self.call_node(sig, fn, bound, node, args_of, stmt)

    def call_node(
        self,
        sig: Signature,
        fn: Function,
        bound: list[Node],
        node: CallExpr,
        args_of: _Args,
        stmt: bool,
    ) -> Value:
        """The ``call`` nodes (numbered in program order when the callee has effects); the
        callee's ``&mut`` results become the new values of the caller's buffers."""
        region = self.regions[-1]
        result = ir_call(fn, bound, len(region) if fn.declared else None)
        if fn.declared:
            region.append(result[0])
        n = len(sig.results or ())
        for made, sp in zip(
            result, [*sig.result_spaces, *(sig.param_spaces[i] for i in sig.inouts)], strict=False
        ):
            self.note(made, node.span)
            self.spaces[made.hash] = sp
        for k, slot in zip(sig.inouts, result[n:], strict=True):
            cell = args_of.slots[k]
            if cell is not None:
                self.log.set(cell, slot)
        if n == 0:
            return NOTHING if stmt else None
        return result[0] if n == 1 else Tup(tuple(result[:n]))

    def check_modes(self, sig: Signature, node: CallExpr, a: _Args, stmt: bool) -> bool:
        """Argument modes against the parameters' (E0409), aliasing within the call (E0405,
        E0406), a call statement with an effect (E0410), a result-less call used as a value
        (E0128).  Records the ``&mut`` arguments as conflicts of live borrows."""
        ok = True
        for k, (pname, _) in enumerate(sig.params):
            ok = self.check_mode(sig, pname, sig.modes[k], a, k) and ok
        if not ok:
            return False
        for k in sig.inouts:
            if not self.check_alias(a, k):
                return False
        for k in sig.inouts:
            self.conflict(a.slots[k], "borrow mutably", a.nodes[k].span)
        if stmt and not sig.inouts and not sig.effects:
            return (
                self.r.error(
                    "E0410",
                    f"this call of '{sig.name}' is a statement, but '{sig.name}' has no '&mut' "
                    "parameter and no effect: its value would be lost",
                    node.span,
                    hint="bind its value with let",
                )
                or False
            )
        if sig.no_result and not stmt:
            return (
                self.r.error(
                    "E0128",
                    f"'{sig.name}' has no result: it only updates its '&mut' buffers",
                    node.span,
                    hint=f"call it as a statement: {self.source_text(node.span)};",
                )
                or False
            )
        return True

    def check_mode(self, sig: Signature, pname: str, want: str, a: _Args, k: int) -> bool:
        have, slot, arg = a.modes[k], a.slots[k], a.nodes[k]
        target = arg.operand() if isinstance(arg, RefExpr) else arg
        text = self.source_text(target.span) if target is not None else "x"
        if want == "&" and have == "" and slot is not None and slot.kind in ("ref", "borrow"):
            return True  # a borrow passed on
        if have != want:
            fix = {"": text, "&": f"&{text}", "&mut": f"&mut {text}"}[want]
            return (
                self.r.error(
                    "E0409",
                    f"parameter '{pname}' of '{sig.name}' takes {_MODE_WORDS[want]}, "
                    f"found {_MODE_WORDS[have]}",
                    arg.span,
                    hint=f"write {fix}",
                )
                or False
            )
        if want == "&mut" and (slot is None or slot.kind not in ASSIGNABLE):
            notes = ((slot.span, f"'{slot.name}' is bound here"),) if slot is not None else ()
            return (
                self.r.error(
                    "E0409",
                    f"'&mut' needs a '&mut' parameter or a 'let mut' name, found {text}",
                    arg.span,
                    notes=notes,
                    hint=f"bind it first: let mut b = {text}; then pass &mut b",
                )
                or False
            )
        return True

    def check_alias(self, a: _Args, k: int) -> bool:
        """The ``&mut`` argument k aliases no other argument (E0405 another ``&mut``, E0406
        a borrow or a read of the same value)."""
        slot = a.slots[k]
        for j, other in enumerate(a.slots):
            if j == k or other is not slot or slot is None:
                continue
            if a.modes[j] == "&mut":
                if j > k:
                    continue  # reported from the first one
                return (
                    self.r.error(
                        "E0405",
                        f"'{slot.name}' is borrowed mutably twice in this call",
                        a.nodes[k].span,
                        notes=((a.nodes[j].span, "first mutable borrow here"),),
                        hint=f"pass a copy to one of them: let mut c = {slot.name};",
                    )
                    or False
                )
            return (
                self.r.error(
                    "E0406",
                    f"'{slot.name}' is borrowed mutably while this call also reads it",
                    a.nodes[k].span,
                    notes=((a.nodes[j].span, f"'{slot.name}' borrowed here"),),
                    hint=f"read a copy: let c = {slot.name}; then pass c",
                )
                or False
            )
        return True

    def callee(self, sig: Signature, node: CallExpr) -> Generator[Request, Value, Function | None]:
        """``sig``'s body evaluated once on parameters ``_0``, ``_1``, ... (whatever the
        arguments): the function every ``call`` of it holds, or None when it has errors."""
        types = [t for _, t in sig.params]
        if any(t is None for t in types):
            return None
        params = [
            param(i, f"_{i}", t.dtype, t.shape, sp)
            for i, (t, sp) in enumerate(zip(types, sig.param_spaces, strict=True))
            if t
        ]
        env = self.param_slots(sig, params)
        body = sig.body
        assert body is not None
        self.active.append(sig.name)
        self.active_set.add(sig.name)
        self.expanded.add(sig.name)
        self.regions.append([])
        borrows, self.borrows = self.borrows, []
        if sig.no_result:
            self.unit_bodies.add(body.span)
        value = yield body, env
        self.borrows = borrows
        effects = self.regions.pop()
        self.active_set.discard(self.active.pop())
        results = self.results(value, sig, env)
        if results is None:
            return None
        try:
            return Function(sig.name, params, results, effects, sig.effects)
        except IRError as e:
            if "expansion budget" in str(e):
                raise _Budget("E0111", _expansion_message(self.limits.expansion)) from None
            return self.r.error("E0216", str(e), node.span)

    def recursion(self, name: str, node: CallExpr) -> Any:
        """Report a call to a function that is being expanded (once per call site)."""
        callee = node.callee()
        span = callee.span if callee is not None else node.span
        if span in self.recursion_sites:
            return None
        self.recursion_sites.add(span)
        cycle = [*self.active[self.active.index(name) :], name]
        if len(cycle) > 7:
            cycle = [*cycle[:3], f"... {len(cycle) - 6} more ...", *cycle[-3:]]
        chain = " -> ".join(cycle)
        return self.r.error("E0105", f"recursive call ({chain}); Kera has no recursion", span)

    def call_builtin(
        self, name: str, node: CallExpr, values: list[Value], kwargs: list[Kwarg]
    ) -> Value:
        attrs = self.attrs(kwargs)
        if attrs is None or any(v is None for v in values):
            return None
        for v in values:
            if isinstance(v, Tup):
                return self.r.error("E0307", f"{name} takes tensors, not a tuple", node.span)
        if name in ELEMENTWISE_BUILTINS or name in MATH_BUILTINS:
            arity = 1 if name in MATH_BUILTINS else ARITY[ELEMENTWISE_BUILTINS[name].op]
            if len(values) != arity:
                return self.r.error(
                    "E0204", f"{name} takes {arity} operands, got {len(values)}", node.span
                )
            if attrs:
                first = next(iter(attrs))
                return self.r.error(
                    "E0212",
                    f"{name} takes no attribute '{first}'",
                    self.kw_span(kwargs, first, node.span),
                )
        if name in ELEMENTWISE_BUILTINS:
            return self.elementwise(ELEMENTWISE_BUILTINS[name], values, node.span)
        if name in MATH_BUILTINS:
            return self.math(name, values[0], node.span)
        if name in DYNAMIC_BUILTINS:
            return self.dynamic_builtin(name, node, values, attrs, kwargs)
        op = OTHER_BUILTINS[name]
        if len(values) != ARITY[op]:
            return self.r.error(
                "E0204", f"{name} takes {ARITY[op]} operands, got {len(values)}", node.span
            )
        nodes = self.materialize_all(values, unify=op in UNIFIED_BUILTINS)
        if nodes is None:
            return None
        return self.make(op, nodes, _normalize_axis(attrs, nodes), node.span, kwargs)

    def dynamic_builtin(
        self,
        name: str,
        node: CallExpr,
        values: list[Value],
        attrs: dict[str, AttrValue],
        kwargs: list[Kwarg],
    ) -> Value:
        """``dynamic_slice(x, i0, .., size = [..])`` and ``dynamic_update_slice(x, v, i0, ..)``:
        the scalar start indices (fewer than the rank: the rest start at 0) become the op's
        ``i32[rank]`` start vector; a ``v`` of lower rank gets unit axes prepended."""
        op = DYNAMIC_BUILTINS[name]
        first = ARITY[op] - 1  # the start vector is the op's last operand
        if len(values) < first:
            what = "x" if first == 1 else "x, v"
            return self.r.error(
                "E0204", f"{name} takes {what} and start indices, got {len(values)}", node.span
            )
        x = self.materialize_all(values[:1], unify=False)
        if x is None:
            return None
        rank = len(x[0].shape)
        if rank == 0:
            return self.r.error(
                "E0218", f"{name} needs an operand of rank >= 1, got {x[0].type}", node.span
            )
        args = node.args()
        spans = [a.span for a in args.positional()] if args is not None else []
        starts = values[first:]
        if len(starts) > rank:
            return self.r.error(
                "E0320",
                f"{name} of {x[0].type} takes at most {rank} start "
                f"ind{'ex' if rank == 1 else 'ices'}, got {len(starts)}",
                spans[first + rank] if len(spans) > first + rank else node.span,
            )
        idx = [
            self.index_scalar(v, sp, "a start index")
            for v, sp in zip(starts, spans[first:], strict=True)
        ]
        starts_ok = [i for i in idx if i is not None]
        if len(starts_ok) != len(idx):
            return None
        vec = start_vector([*starts_ok, *[None] * (rank - len(idx))])
        operands = [x[0]]
        if op is Op.DYNAMIC_UPDATE_SLICE:
            v = self.update_value(values[1], x[0], node.span)
            if v is None:
                return None
            operands.append(v)
        return self.make(op, [*operands, vec], attrs, node.span, kwargs)

    def update_value(self, value: Value, x: Node, span: Span) -> Node | None:
        """The ``v`` of ``dynamic_update_slice``: a literal takes x's dtype; a lower rank is
        read with unit axes prepended (a scalar writes one element)."""
        if isinstance(value, Deferred):
            value = self.materialize(value, x.dtype)
        if not isinstance(value, Node):
            return None
        missing = len(x.shape) - len(value.shape)
        if missing <= 0:
            return value
        return self.make(Op.RESHAPE, [value], {"shape": (1,) * missing + value.shape}, span)

    def math(self, name: str, value: Value, span: Span) -> Value:
        fn = MATH_BUILTINS[name]
        node = self.materialize(value, DType.F32) if isinstance(value, Deferred) else value
        if not isinstance(node, Node):
            return None
        try:
            return self.note(fn(node), span)
        except TypeRuleError as e:
            return self.r.error(e.code, e.message, span)

    def attrs(self, kwargs: list[Kwarg]) -> dict[str, AttrValue] | None:
        out: dict[str, AttrValue] = {}
        ok = True
        for kw in kwargs:
            tok = kw.name()
            value = self.attr_value(kw.value())
            if tok is None or value is None:
                ok = False
                continue
            if tok.text in out:
                self.r.error("E0109", f"argument '{tok.text}' is given twice", kw.span)
                ok = False
            out[tok.text] = value
        return out if ok else None

    def attr_value(self, node: SyntaxNode | None) -> AttrValue | None:
        """An attribute from its syntax: an integer, a list of integers or a dtype name."""
        if node is None:
            return None
        if isinstance(node, ArrayExpr):
            items = [self.attr_int(e) for e in node.elements()]
            if any(i is None for i in items):
                return None
            return tuple(i for i in items if i is not None)
        if isinstance(node, NameRef) and node.name() in DTYPES:
            return DTYPES[node.name()]
        return self.attr_int(node)

    def attr_int(self, node: SyntaxNode) -> int | None:
        negate = isinstance(node, PrefixExpr) and node.op() == K.MINUS
        inner = node.operand() if isinstance(node, PrefixExpr) and negate else node
        if isinstance(inner, Literal) and inner.tok_kind() == K.INT_NUMBER:
            lit = literals.parse(inner.tok_text())
            if lit is None:
                return None
            if lit.suffix is None:
                return -lit.num if negate else lit.num
        return self.r.error(
            "E0214",
            "an attribute is an integer, a list of integers like [4, 4], or a dtype like f32",
            node.span,
        )

    @staticmethod
    def kw_span(kwargs: list[Kwarg], name: str, default: Span) -> Span:
        for kw in kwargs:
            tok = kw.name()
            if tok is not None and tok.text == name:
                return kw.span
        return default

    # ----------------------------------------------------------------- typing
    def elementwise(self, eop: ElemOp, values: list[Value], span: Span) -> Value:
        if None in values:  # values are compared by identity: none defines __eq__
            return None
        for v in values:
            if type(v) is Tup:
                return self.r.error("E0307", f"'{eop.symbol}' takes tensors, not a tuple", span)
        positions = eop.dtype_args or range(len(values))
        concrete = None
        for i in positions:
            if type(values[i]) is Node:
                concrete = values[i]
                break
        if concrete is None:
            if eop.deferrable:
                args = tuple(v for v in values if isinstance(v, Node | Deferred))
                return Deferred(span, op=eop, args=args)
            dtype = DType.F32 if any(values[i].is_float for i in positions) else DType.I32  # type: ignore[union-attr]
        else:
            assert isinstance(concrete, Node)
            dtype = concrete.dtype
        nodes: list[Node] = []
        for i, v in enumerate(values):
            if isinstance(v, Deferred):
                n = self.materialize(v, dtype if i in positions else v.default)
                if n is None:
                    return None
                nodes.append(n)
            else:
                assert isinstance(v, Node)
                nodes.append(v)
        return self.apply(eop, nodes, span)

    def apply(self, eop: ElemOp, nodes: list[Node], span: Span) -> Node | None:
        if eop.needs == "bool" and any(n.dtype is not DType.BOOL for n in nodes):
            found = next(n.dtype for n in nodes if n.dtype is not DType.BOOL)
            alt = {"&&": "&", "||": "|", "!": "~"}[eop.symbol]
            what = "a bool operand" if len(nodes) == 1 else "bool operands"
            return self.r.error(
                "E0304", f"'{eop.symbol}' needs {what}, found {found} (for bits use '{alt}')", span
            )
        if eop.needs == "int" and nodes[0].dtype is DType.BOOL:
            return self.r.error("E0304", "'~' is bitwise not on integers; use '!' on bool", span)
        shape: tuple[int, ...] = ()
        for n in nodes:
            if n.type.shape:
                shape = n.type.shape
                break
        if shape:
            wide = []
            for n in nodes:
                if not n.shape:
                    b = self.make(Op.BROADCAST, [n], {"shape": shape}, span)
                    if b is None:
                        return None
                    n = b
                wide.append(n)
            nodes = wide
        return self.make(eop.op, nodes, {}, span)

    def materialize(self, value: Deferred, dtype: DType) -> Node | None:
        """Build a deferred literal expression with ``dtype`` (post-order, iterative)."""
        done: dict[tuple[int, DType], Node | None] = {}
        stack: list[tuple[Deferred, DType, bool]] = [(value, dtype, False)]
        while stack:
            d, dt, expanded = stack.pop()
            if (id(d), dt) in done:
                continue
            if d.lit is not None:
                done[id(d), dt] = self.const(d.lit, dt, d.span)
                continue
            assert d.op is not None
            wants = _operand_dtypes(d, dt)
            if not expanded:
                stack.append((d, dt, True))
                stack.extend((a, t, False) for a, t in wants if isinstance(a, Deferred))
                continue
            args = [a if isinstance(a, Node) else done[id(a), t] for a, t in wants]
            ok = [a for a in args if a is not None]
            done[id(d), dt] = self.apply(d.op, ok, d.span) if len(ok) == len(args) else None
        return done[id(value), dtype]

    def materialize_all(self, values: list[Value], unify: bool) -> list[Node] | None:
        concrete = next((v for v in values if isinstance(v, Node)), None)
        out: list[Node] = []
        for v in values:
            if isinstance(v, Deferred):
                dtype = concrete.dtype if unify and concrete is not None else v.default
                n = self.materialize(v, dtype)
                if n is None:
                    return None
                out.append(n)
            elif isinstance(v, Node):
                out.append(v)
            else:
                return None
        return out

    def make(
        self,
        op: Op,
        nodes: list[Node],
        attrs: dict[str, AttrValue],
        span: Span,
        kwargs: list[Kwarg] | None = None,
    ) -> Node | None:
        if self.check_spaces and len(nodes) > 1 and not self.check_op_spaces(op, nodes, span):
            return None
        try:
            node = make_node(op, nodes, attrs)
            return node if self.spans is None else self.note(node, span)
        except TypeRuleError as e:
            return self.r.error(e.code, e.message, self.error_span(e.message, kwargs, span))
        except IRError as e:
            return self.r.error("E0214", str(e), self.error_span(str(e), kwargs, span))

    def error_span(self, message: str, kwargs: list[Kwarg] | None, span: Span) -> Span:
        """Point at the keyword argument an error message names, else at the expression."""
        for kw in kwargs or []:
            tok = kw.name()
            if tok is not None and (f"'{tok.text}'" in message or message.startswith(tok.text)):
                return kw.span
        if kwargs and message.startswith("axis"):
            return self.kw_span(kwargs, "axis", span)
        return span

    def coerce(
        self, value: Value, target: TensorType | None, span: Span, space: str | None = None
    ) -> Node | None:
        """``value`` as a ``target`` (a let, parameter or result type) in ``space`` (None:
        any); literals adapt."""
        if value is None or target is None:
            return None
        if isinstance(value, Tup):
            if value is NOTHING:
                return self.r.error("E0128", f"expected {target}, found no value", span)
            return self.r.error("E0307", f"expected {target}, found a tuple", span)
        if isinstance(value, Deferred):
            node = self.materialize(value, target.dtype)
            if node is None or node.type == target:
                return node
            return self.make(Op.BROADCAST, [node], {"shape": target.shape}, span)
        if value.type != target:
            return self.r.error("E0303", f"expected {target}, found {value.type}", span)
        if space is not None and self.check_spaces:
            have = self.space(value)
            if have is not None and have != space:
                return self.r.error(
                    "E0122",
                    f"expected {target} @{space}, found {value.type} @{have}",
                    span,
                    hint=f"insert a transfer: transfer({self.source_text(span)}, to = {space})",
                )
        return value

    def results(self, value: Value, sig: Signature, env: Env) -> list[Node] | None:
        """The function's result nodes: ``value`` checked against the declared result type,
        then each ``&mut`` parameter's last value (docs/language.md)."""
        declared = self.declared_results(value, sig)
        if declared is None:
            return None
        names = [sig.params[k][0] for k in sig.inouts]
        buffers = [env[n].value if n in env else None for n in names]
        if any(not isinstance(b, Node) for b in buffers):
            return None
        return [*declared, *(b for b in buffers if isinstance(b, Node))]

    def declared_results(self, value: Value, sig: Signature) -> list[Node] | None:
        body = sig.body
        types = sig.results
        if body is None or types is None or value is None:
            return None
        items = body.items()
        span = items[-1].span if items else body.span
        if sig.no_result:
            if value is NOTHING:
                return []
            return self.r.error(
                "E0128",
                f"'{sig.name}' has no result type, but its body ends with a value",
                span,
                hint="end the body with a statement, or declare the result: -> T",
            )
        spaces = sig.result_spaces if self.check_spaces else [None] * len(types)
        if len(types) == 1:
            one = self.coerce(value, types[0], span, spaces[0])
            return None if one is None else [one]
        if not isinstance(value, Tup) or len(value.items) != len(types):
            what = f"{len(value.items)} values" if isinstance(value, Tup) else "one value"
            return self.r.error(
                "E0307", f"'{sig.name}' returns {len(types)} values, found {what}", span
            )
        out = [
            self.coerce(v, t, span, sp) for v, t, sp in zip(value.items, types, spaces, strict=True)
        ]
        return [n for n in out if n is not None] if all(n is not None for n in out) else None

    def param_slots(self, sig: Signature, params: Sequence[Node | None]) -> Env:
        """The slots of a function's parameters: a value, a borrow (``&``, kind ``ref``) or
        an in-out buffer (``&mut``, kind ``inout``, assignable with its type and space)."""
        env: Env = {}
        kinds = {"": "let", "&": "ref", "&mut": "inout"}
        for (name, t), p, mode, sp, tok in zip(
            sig.params, params, sig.modes, sig.param_spaces, _param_spans(sig), strict=True
        ):
            slot = env[name] = Slot(name, p, kinds[mode], tok, self.loop_depth)
            if mode == "&mut":
                slot.type, slot.space = t, sp
        return env

    # ---------------------------------------------------------------- functions
    def function(self, sig: Signature) -> Function | None:
        """Check ``sig``'s body with its own parameters; the IR function of a valid export."""
        params: list[Node] = []
        made: list[Node | None] = []
        for i, ((name, t), sp) in enumerate(zip(sig.params, sig.param_spaces, strict=True)):
            try:
                p = param(i, name, t.dtype, t.shape, sp) if t is not None else None
            except IRError:  # a name the lexer has reported (E0006)
                p = None
            made.append(p)
            if p is not None:
                params.append(p)
        env = self.param_slots(sig, made)
        body = sig.body
        if body is None:
            return None
        self.active = [sig.name]
        self.active_set = {sig.name}
        self.steps = 0
        self.lets = []
        self.regions = [[]]
        self.borrows = []
        self.loop_depth = 0
        if sig.no_result:
            self.unit_bodies.add(body.span)
        try:
            value = self.run(body, env)
        except _Budget as e:
            self.active, self.active_set = [], set()
            return self.r.error(e.code, e.message, sig.fn.span)
        results = self.results(value, sig, env)
        if results is None or not sig.ok or len(params) != len(sig.params) or not sig.export:
            return None  # non-exported functions are only checked here, and inlined at calls
        try:
            return Function(sig.name, params, results, self.regions[0], sig.effects)
        except IRError as e:
            code = "E0216" if "function_elements" in str(e) else "E0309"
            return self.r.error(code, str(e), sig.fn.span)


#: node kind -> the Builder method that evaluates it (plain functions, not bound methods:
#: a table of bound methods held by the builder would make every builder, and all it holds,
#: a reference cycle that only the cyclic GC frees)
_HANDLERS: dict[int, Callable[[Builder, Any, Env], Handler]] = {
    K.BLOCK: Builder.block,
    K.BIN_EXPR: Builder.binary,
    K.PREFIX_EXPR: Builder.prefix,
    K.CAST_EXPR: Builder.cast,
    K.CALL_EXPR: Builder.call,
    K.TUPLE_EXPR: Builder.tuple_,
    K.FIELD_EXPR: Builder.field,
    K.IF_EXPR: Builder.if_,
    K.INDEX_EXPR: Builder.index,
    K.FOR_EXPR: Builder.for_,
    K.REF_EXPR: Builder.stray_borrow,
}
