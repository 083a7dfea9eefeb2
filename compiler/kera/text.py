"""The canonical, diffable text form of a graph (``kerac show``).

One block per exported function; nodes are numbered in canonical order (``Function.nodes``)::

    export fn saxpy(a: f32, x: f32[8]) -> (f32[8])
      ; fingerprint 3f2a...
      %0 = param a : f32
      %1 = broadcast %0 {shape=[8]} : f32[8]
      %2 = const [0x3fc00000] : f32          ; 1.5
      return %1

Constants print their exact bits in hex (one word per element), so NaN payloads and -0.0 are
visible; scalar float constants add their decimal value in a comment.  A loop's body prints
as ``body=^<region hash prefix>``; each distinct body follows its function as a ``region``
block of the same form (nested bodies after their parents)::

      %3 = loop %0 %2 {body=^5d0c41e2a9b7, lo=0, result=0, trips=8} : f32[4]
      return %3
      region ^5d0c41e2a9b7(_0: i32, _1: f32[4], _2: f32[4]) -> (f32[4])
        %0 = param _1 : f32[4]
        ...

A parameter outside host memory shows its space (``%0 = param x @device : f32[8]``,
``x: f32[8] @device`` in the signature); a function with effects declares them after its
results (``effects(transfer)``) and lists its effect roots, in program order, after its
``return`` (``effects %1, %4``).  The text depends only on
the graph's content, which makes it suitable for golden tests.
"""

from __future__ import annotations

from kera.dtypes import DType
from kera.ir import Function, Graph, Node, const_value, param_space
from kera.ops import DEFAULT_SPACE, AttrValue, Op, Region


def _attr(v: AttrValue) -> str:
    if isinstance(v, Region):
        return "^" + v.region_hash.hex()[:12]
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, tuple):
        return "[" + ", ".join(map(str, v)) + "]"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, bytes):
        return "0x" + v.hex()
    return str(v)


def const_text(node: Node) -> str:
    v = const_value(node)
    if node.dtype is DType.BOOL:
        words = ["1" if x else "0" for x in v.reshape(-1)]
    else:
        width = node.dtype.nbytes * 2
        words = [f"0x{int(x):0{width}x}" for x in v.view(node.dtype.uint).reshape(-1)]
    text = "[" + ", ".join(words) + "]"
    if node.dtype.is_float and not node.shape:
        text += f"  ; {float(v)!r}"
    elif node.dtype.is_int and not node.shape:
        text += f"  ; {int(v)}"
    return text


def function_text(fn: Function, source: str | None = None) -> str:
    """The canonical text of ``fn`` and its loop bodies; ``source``: its fingerprint before
    optimisation."""
    sig = ", ".join(
        f"{name}: {p.type}{_space(p)}" for name, p in zip(fn.param_names(), fn.params, strict=True)
    )
    res = ", ".join(str(r.type) for r in fn.results)
    lines = [
        f"export fn {fn.name}({sig}) -> ({res}){_declared(fn)}",
        f"  ; fingerprint {fn.fingerprint}",
    ]
    if source is not None:
        lines.append(f"  ; source fingerprint {source}")
    lines += _nodes_text(fn, "  ")
    for body in fn.regions()[1:]:
        sig = ", ".join(f"{p.attr('name')!s}: {p.type}{_space(p)}" for p in body.params)
        res = ", ".join(str(r.type) for r in body.results)
        lines.append(f"  region {_attr(body)}({sig}) -> ({res}){_declared(body)}")
        lines += _nodes_text(body, "    ")
    return "\n".join(lines)


def _nodes_text(fn: Function, indent: str) -> list[str]:
    num: dict[int, int] = {}
    lines = []
    for n in fn.nodes():
        i = num[id(n)] = len(num)
        if n.op is Op.PARAM:
            body = f"param {n.attr('name')!s}{_space(n)}"
        elif n.op is Op.CONST:
            lines.append(f"{indent}%{i} = const : {n.type} {const_text(n)}")
            continue
        else:
            args = " ".join(f"%{num[id(x)]}" for x in n.inputs)
            attrs = ", ".join(f"{k}={_attr(v)}" for k, v in n.attr_items)
            body = " ".join(filter(None, [n.op.value, args, "{" + attrs + "}" if attrs else ""]))
        lines.append(f"{indent}%{i} = {body} : {n.type}")
    lines.append(f"{indent}return " + ", ".join(f"%{num[id(r)]}" for r in fn.results))
    if fn.effects:
        lines.append(f"{indent}effects " + ", ".join(f"%{num[id(e)]}" for e in fn.effects))
    return lines


def _space(p: Node) -> str:
    """`` @<space>`` for a parameter outside host memory, else nothing."""
    space = param_space(p)
    return "" if space == DEFAULT_SPACE else f" @{space}"


def _declared(fn: Function) -> str:
    return f" effects({', '.join(fn.declared)})" if fn.declared else ""


def graph_text(graph: Graph) -> str:
    if graph.provenance is None:
        return "\n\n".join(function_text(f) for f in graph.functions.values()) + "\n"
    source = graph.source_fingerprints()
    head = "; optimised by " + (", ".join(graph.provenance.pipeline) or "no passes") + "\n"
    body = "\n\n".join(function_text(f, source[n]) for n, f in graph.functions.items())
    return head + body + "\n"
