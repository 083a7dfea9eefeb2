"""The invariant validator, run by the pass manager before and after every pass.

A pass that breaks the IR must fail loudly, naming itself, the node and the invariant; a
silently wrong graph would be lowered to every target and agree with itself everywhere.
Invariants, each a function below (the order they are checked in):

``region``      the function's name is an identifier; parameters are ``param`` nodes numbered
                0..n-1 with distinct names; there is at least one result; the stored region
                hash recomputes from the parameters and results
``order``       the stored node list is the canonical order of the results (``topo_order``)
``acyclic``     every input of a node comes before it in that order (a cycle cannot)
``inputs``      every input is a node of this function; every ``param`` reached is declared
``hash``        every node's stored hash recomputes from its op, type, inputs and attributes
``interned``    every node is the one live node with its hash (content = identity, so common
                subexpressions are merged)
``type``        every node's type re-infers with ``kera.ops.infer`` (leaves: a constant holds
                exactly its type's bytes)
``results``     every result is a node of the function
``body``        every loop's body and every callee is itself a region meeting all of the
                above (checked once per distinct body, recursively); the loop's or call's own
                ``type`` check covers how the body's parameters and results match its operands
``effects``     (the pass manager, between a pass's input and output) the function's
                :func:`effect_trace` is unchanged: no effect dropped, merged, added or
                reordered, calls counted by their callee's effects (``inline`` expands them)
                and the declared effects the same.  The region-level effect rules (roots in
                ``seq`` order, every effectful node a root or a sibling of one) are checked
                by ``Function`` itself, so a graph breaking them cannot be built at all.

Incremental validation (what the pass manager does after the first, full one):
``validate(fn, known)`` takes the nodes an earlier call vouched for (it returns them) and
checks ``hash``, ``interned``, ``type`` and the ``acyclic`` position only for the nodes not in
``known``, the ones a pass created; ``region``, ``order``, the ``inputs`` and parameter checks,
``results`` and every body's region-level checks still run in full.  A known node cannot have
changed: nodes are immutable (``Node.__setattr__`` refuses), so their content, hash and
interning are what was checked; the node-level checks are local to a node (its op, type,
inputs' types and attributes), and its inputs are known nodes too (they were checked with
it), so a cycle can only run through new nodes.  What this leaves to the first, full call is
a node changed behind ``Node.__setattr__``'s back (``object.__setattr__``), which only a test
corrupting a graph on purpose does; such a node in the input is caught there.  ``known`` holds
the nodes themselves (not their ids), so none of them can die and hand its id to a new node.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence, Set
from typing import Any

from kera.ir import (
    Function,
    IRError,
    Node,
    check_name,
    interned,
    loop_body,
    node_hash,
    region_hash,
    topo_order,
)
from kera.ops import REGION_OPS, Op, TensorType, TypeRuleError, infer


class InvariantError(Exception):
    """A graph that breaks an IR invariant: which one, where, and after which pass."""

    def __init__(self, invariant: str, message: str, node: Node | None = None) -> None:
        self.invariant = invariant
        self.node = node
        self.where = ""
        super().__init__(message)

    def __str__(self) -> str:
        at = f" at {_describe(self.node)}" if self.node is not None else ""
        return f"{self.where}invariant '{self.invariant}' broken{at}: {self.args[0]}"


def _describe(node: Node) -> str:
    return f"{node.op} {node.type} #{node.hash.hex()[:12]}"


Nodes = Sequence[Node] | None  # the nodes whose own invariants to check; None: all of them


def _region(fn: Function, new: Nodes = None) -> None:
    try:
        check_name(fn.name, "function")
    except IRError as e:
        raise InvariantError("region", str(e)) from None
    if not fn.results:
        raise InvariantError("region", f"function '{fn.name}' has no results")
    names = set()
    for i, p in enumerate(fn.params):
        if p.op is not Op.PARAM or p.attr("index") != i:
            raise InvariantError("region", f"parameter {i} is not param node #{i}", p)
        names.add(p.attr("name"))
    if len(names) != len(fn.params):
        raise InvariantError("region", "duplicate parameter names")
    if region_hash(fn.params, fn.results, fn.effects, fn.declared) != fn.region_hash:
        raise InvariantError("region", "the stored region hash does not recompute")


def _order(fn: Function, new: Nodes = None) -> None:
    # List equality compares identical items without calling ``__eq__`` and nodes have none of
    # their own, so this is "the same nodes in the same order", at C speed.
    if fn.nodes() != topo_order([*fn.effects, *fn.results] if fn.effects else fn.results):
        raise InvariantError("order", "the stored node list is not the canonical order")


def _edges(fn: Function, new: Nodes = None) -> None:
    nodes = fn.nodes()
    position = {node: i for i, node in enumerate(nodes)}  # nodes hash by identity
    declared = set(fn.params)
    param = Op.PARAM
    for node in nodes:  # every node: the parameters declared may be other ones than before
        if node.op is param and node not in declared:
            raise InvariantError("inputs", "uses a parameter the function does not declare", node)
    for i, node in enumerate(nodes) if new is None else [(position[n], n) for n in new]:
        for x in node.inputs:
            at = position.get(x)
            if at is None:
                raise InvariantError("inputs", f"input {_describe(x)} is not in the function", node)
            if at >= i:
                raise InvariantError("acyclic", f"input {_describe(x)} does not come first", node)


def _hashes(fn: Function, new: Nodes = None) -> None:
    for node in fn.nodes() if new is None else new:
        if node_hash(node.op, node.type, node.inputs, node.attr_items) != node.hash:
            raise InvariantError("hash", "the stored hash does not recompute", node)
        if interned(node.hash) is not node:
            raise InvariantError("interned", "another live node has this content", node)


def _types(fn: Function, new: Nodes = None) -> None:
    # Type inference is a function of the op, the operand types and the attributes (and the
    # limits, fixed during one call), and a graph repeats few such combinations: each is
    # inferred once per call.  Attribute values are keyed with their Python types, as 1 and
    # True, or DType.F32 and "f32", are equal but do not type-check alike.  A loop (whose
    # body attribute would keep the key alive) is inferred each time.
    memo: dict[tuple[Any, ...], TensorType] = {}
    for node in fn.nodes() if new is None else new:
        op = node.op
        if op is Op.CONST:
            data = node.attr("value")
            if not isinstance(data, bytes) or len(data) != node.type.size * node.dtype.nbytes:
                raise InvariantError(
                    "type", f"a constant of type {node.type} has wrong bytes", node
                )
            continue
        if op is Op.PARAM:
            continue
        items = node.attr_items
        types = [x.type for x in node.inputs]
        # a type by its fields: a ``TensorType``'s own ``__hash__`` is a Python-level call
        key = (op, items, *[type(v) for _, v in items], *[(t.dtype, t.shape) for t in types])
        t = memo.get(key) if op not in REGION_OPS else None
        if t is None:
            try:
                t = infer(op, types, node.attrs)
            except TypeRuleError as e:
                raise InvariantError("type", f"does not type-check: {e}", node) from None
            if op not in REGION_OPS:
                memo[key] = t
        if t is not node.type and t != node.type:
            raise InvariantError("type", f"re-infers as {t}, stored {node.type}", node)


#: one entry of an effect trace: (op, attributes other than seq/result/body, operand types);
#: a loop's entry ends with its body's trace
Trace = tuple[Any, ...]


def effect_trace(fn: Function, _memo: dict[bytes, Trace] | None = None) -> Trace:
    """What a pass must keep of ``fn``'s effects: its declared effects and, in program order,
    each effect root as (op, attributes but ``seq``, operand types); a call stands for its
    callee's effects in order (so inlining keeps the trace), a loop for one entry holding its
    body's trace (run ``trips`` times).  Operand *nodes* are not compared: a pass may rewrite
    what computes them (with the same bits), but not the effect itself."""
    if not fn.declared:
        return ()
    memo = {} if _memo is None else _memo
    known = memo.get(fn.region_hash)
    if known is not None:
        return known
    entries: list[Any] = []
    for e in fn.effects:
        if e.op is Op.CALL:
            entries += effect_trace(loop_body(e), memo)[1:]
            continue
        attrs = tuple((k, v) for k, v in e.attr_items if k not in _NOT_TRACED)
        entry: tuple[Any, ...] = (e.op.value, attrs, tuple(str(x.type) for x in e.inputs))
        if e.op is Op.LOOP:
            entry += (effect_trace(loop_body(e), memo),)
        entries.append(entry)
    out = (fn.declared, *entries)
    memo[fn.region_hash] = out
    return out


_NOT_TRACED = frozenset({"seq", "result", "body"})


def _results(fn: Function, new: Nodes = None) -> None:
    members = set(fn.nodes())
    for r in fn.results:
        if r not in members:
            raise InvariantError("results", "a result is not a node of the function", r)


CHECKS: tuple[Callable[[Function, Nodes], None], ...] = (
    _region,
    _order,
    _edges,
    _hashes,
    _types,
    _results,
)


def validate(
    fn: Function, known: Set[Node] = frozenset(), _seen: set[bytes] | None = None
) -> set[Node]:
    """Raise :class:`InvariantError` on the first broken invariant of ``fn`` or of a loop body
    in it; return the nodes of ``fn`` and of its bodies, all now known to be valid.

    ``known``: nodes an earlier call returned, whose own invariants are not checked again (see
    the module docstring); empty (the default), every node is checked."""
    nodes = fn.nodes()
    new = None if not known else [n for n in nodes if n not in known]
    for check in CHECKS:
        check(fn, new)
    valid = set(nodes)
    seen = set() if _seen is None else _seen
    for node in nodes:
        if node.op not in REGION_OPS:
            continue
        body = loop_body(node)
        if body.region_hash in seen:
            continue
        seen.add(body.region_hash)
        try:
            valid |= validate(body, known, seen)
        except InvariantError as e:
            where = f"in the body of {_describe(node)}: "
            raise InvariantError("body", where + str(e), e.node) from None
    return valid
