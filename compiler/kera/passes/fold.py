"""``fold``: an op whose operands are all constants becomes the constant it computes.

Rewrite: ``op(const a, const b, ...) -> const(SEMANTICS[op](a, b, ...))``.

Why it is bit-exact: the value is computed by ``kera.semantics.SEMANTICS``, the contract's own
table (the reference interpreter's), never by host floats or Python arithmetic, so the folded
constant holds exactly the bits every target must produce for that node -- canonical NaNs,
signed zeros and the fixed reduction tree included.  The math library (``exp``, ``log``,
``tanh``...) is an expansion into contract ops, so it folds op by op through the same table.

Representation: a result whose elements all have the same bits becomes ``broadcast`` of a
scalar constant (the form the front end gives a scalar operand), not a table of copies, so
folding never makes emitted code bigger than the graph it came from; a broadcast of a constant
is itself already folded and counts as a constant operand.  Limits: any other result of more
than ``MAX_ELEMENTS`` elements is folded only when it is no larger than its constant operands
together (an ``iota`` operand counts for nothing: it is not stored); ``iota`` is a leaf, not a
constant, and stays as it is, but an op over iotas and constants folds.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kera.ir import Function, Node, const_bytes, const_value, make_node
from kera.ops import EFFECTS, LEAVES, Op
from kera.passes.rewrite import rewrite
from kera.semantics import LEAVES as LEAF_VALUES
from kera.semantics import SEMANTICS

NAME = "fold"
VERSION = 2  # 2: an op over iota operands folds too
#: a folded result is a constant or a broadcast of one, which fold leaves as they are, and every
#: other node was already offered with its operands folded: a second run changes nothing
#: (``Pass.idempotent``)
IDEMPOTENT = True

#: non-uniform results up to this many elements are always folded
MAX_ELEMENTS = 1024
#: results of more elements are never computed here (the limit on work done while compiling)
HARD_LIMIT = 1 << 16


def constant_value(node: Node) -> np.ndarray[Any, Any] | None:
    """The value of a constant or a broadcast of one (exact bits), else None."""
    if node.op is Op.CONST:
        return const_value(node)
    if node.op is Op.BROADCAST and node.inputs[0].op is Op.CONST:
        x = const_value(node.inputs[0])[np.newaxis]
        return SEMANTICS[Op.BROADCAST](node, x)[0]
    return None


def _constant(value: np.ndarray[Any, Any], node: Node) -> Node:
    """``value`` as a constant of ``node``'s type: a broadcast scalar when it is uniform."""
    flat = np.ascontiguousarray(value, dtype=node.dtype.np).reshape(-1)
    raw = flat.view(np.uint8).reshape(flat.size, node.dtype.nbytes)
    if node.shape and flat.size and bool((raw == raw[0]).all()):
        scalar = const_bytes(raw[0].tobytes(), node.dtype, ())
        return make_node(Op.BROADCAST, [scalar], {"shape": list(node.shape)})
    return const_bytes(flat.tobytes(), node.dtype, node.shape)


def _operand_value(node: Node) -> np.ndarray[Any, Any] | None:
    """An operand's value known while compiling: a constant (:func:`constant_value`), or an
    ``iota``, whose values come from the contract's own leaf table (``kera.semantics.LEAVES``,
    the interpreter's); the iota itself stays a leaf.  An op over iotas (``iota == iota``)
    folds like one over constants: the back ends fold nothing (``docs/passes.md``).  An iota
    is not stored, so one over ``HARD_LIMIT`` elements is never computed (``sum`` of a huge
    iota would be)."""
    if node.op is Op.IOTA:
        return LEAF_VALUES[Op.IOTA](node, 1)[0] if node.type.size <= HARD_LIMIT else None
    return constant_value(node)


def _has_value(node: Node) -> bool:
    """Whether :func:`_operand_value` may give ``node`` a value (by its op alone)."""
    op = node.op
    return op is Op.CONST or op is Op.IOTA or (op is Op.BROADCAST and node.inputs[0].op is Op.CONST)


def fold_node(node: Node) -> Node | None:
    if node.op in LEAVES or not node.inputs or node.op not in SEMANTICS:
        return None  # a loop is not folded (its body runs trips times: not a cheap constant)
    if node.op in EFFECTS:
        return None  # an effect is performed, never computed away (rewrite never offers one)
    if node.op is Op.BROADCAST and node.inputs[0].op is Op.CONST:
        return None  # already the folded form of a uniform constant
    size = node.type.size
    if size > HARD_LIMIT:
        return None
    if not all([_has_value(x) for x in node.inputs]):
        return None  # the common case, decided before any operand's value is computed
    values = [_operand_value(x) for x in node.inputs]
    if any(v is None for v in values):
        return None
    args = [np.array(v)[np.newaxis] for v in values]  # a batch of one (copies: writable)
    out = SEMANTICS[node.op](node, *args)[0]
    folded = _constant(out, node)
    operands = sum(x.type.size for x in node.inputs if x.op is Op.CONST)
    if folded.op is Op.CONST and size > MAX_ELEMENTS and size > operands:
        return None
    return folded


def run(fn: Function) -> tuple[Function, int]:
    return rewrite(fn, fold_node)
