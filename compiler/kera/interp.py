"""The reference interpreter: the executable form of the contract and the oracle.

``interpret(fn, inputs)`` runs a function on a batch of N input vectors at once (every array
has a leading axis N), dispatching each node to ``kera.semantics.SEMANTICS``.  ``overrides``
maps op names to replacement functions with the same signature ``f(node, *operands)``, so a
user can model a target that deviates from the contract in a few lines, e.g.::

    interpret(fn, xs, overrides={"min": lambda node, a, b: np.where(a < b, a, b)})
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from kera.ir import Function, Node, loop_body, loop_group
from kera.ops import Op
from kera.semantics import LEAVES, SEMANTICS

Array = np.ndarray[Any, Any]
Override = Callable[..., Array]


class InputError(ValueError):
    """Inputs that do not match the function's parameters (name, dtype or shape)."""


def batch_size(fn: Function, inputs: Mapping[str, Array]) -> int:
    sizes = set()
    for p in fn.params:
        name = str(p.attr("name"))
        if name not in inputs:
            raise InputError(f"missing input for parameter '{name}' of '{fn.name}'")
        a = np.asarray(inputs[name])
        if a.dtype != p.dtype.np:
            raise InputError(f"input '{name}' has dtype {a.dtype}, expected {p.dtype}")
        if a.ndim < 1 or a.shape[1:] != p.shape:
            raise InputError(
                f"input '{name}' has shape {a.shape}, expected (N, {', '.join(map(str, p.shape))})"
            )
        sizes.add(a.shape[0])
    if len(sizes) > 1:
        raise InputError(f"inputs of '{fn.name}' have different batch sizes {sorted(sizes)}")
    return sizes.pop() if sizes else 1


def interpret(
    fn: Function,
    inputs: Mapping[str, Array],
    overrides: Mapping[str, Override] | None = None,
    batch: int | None = None,
) -> list[Array]:
    """Run ``fn`` on a batch; returns one array (N, *shape) per result."""
    n = batch_size(fn, inputs) if fn.params or batch is None else batch
    table: dict[Op, Override] = dict(SEMANTICS)
    for name, f in (overrides or {}).items():
        table[Op(name)] = f
    return _run(fn, inputs, table, n)


def _run(
    fn: Function, inputs: Mapping[str, Array], table: Mapping[Op, Override], n: int
) -> list[Array]:
    env: dict[int, Array] = {}
    regions: dict[tuple[Any, ...], list[Array]] = {}
    for node in fn.nodes():
        if node.op in REGIONS:
            key = loop_group(node)
            if key not in regions:
                operands = [env[id(i)] for i in node.inputs]
                regions[key] = REGIONS[node.op](node, operands, table, n)
            env[id(node)] = regions[key][node.int_attr("result")]
        else:
            env[id(node)] = _eval(node, env, inputs, table, n)
    return [env[id(r)] for r in fn.results]


def _loop(node: Node, operands: list[Array], table: Mapping[Op, Override], n: int) -> list[Array]:
    """Every carried value after the last iteration: iterations run in order, each a whole
    evaluation of the body on the previous iteration's values (``docs/semantics.md``, Loops)."""
    body = loop_body(node)
    lo, trips = node.int_attr("lo"), node.int_attr("trips")
    k = len(body.results)
    names = body.param_names()
    carried, captured = operands[:k], operands[k:]
    for i in range(lo, lo + trips):
        index = np.full((n,), i, dtype=np.int32)
        carried = _run(body, dict(zip(names, [index, *carried, *captured], strict=True)), table, n)
    return carried


def _call(node: Node, operands: list[Array], table: Mapping[Op, Override], n: int) -> list[Array]:
    """Every result of the callee, run once on the operands (``docs/semantics.md``, Calls)."""
    body = loop_body(node)
    return _run(body, dict(zip(body.param_names(), operands, strict=True)), table, n)


#: how the interpreter runs each op that holds a region
REGIONS = {Op.LOOP: _loop, Op.CALL: _call}


def _eval(
    node: Node,
    env: Mapping[int, Array],
    inputs: Mapping[str, Array],
    table: Mapping[Op, Override],
    n: int,
) -> Array:
    if node.op is Op.PARAM:
        return np.asarray(inputs[str(node.attr("name"))])
    if node.op in table and node.op not in LEAVES:
        out = table[node.op](node, *(env[id(i)] for i in node.inputs))
    else:
        out = table[node.op](node, n) if node.op in table else LEAVES[node.op](node, n)
    if out.dtype != node.dtype.np or out.shape != (n, *node.shape):
        raise AssertionError(
            f"{node.op} produced {out.dtype}{list(out.shape)}, "
            f"expected {node.dtype}{[n, *node.shape]}"
        )
    return out
