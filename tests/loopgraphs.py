"""Hand-built graphs with loops and dynamic indexing, shared by every back end's tests.

Each entry builds one exported function with ``kera.ir`` directly (no front end), so a back
end can be tested on loops before the language has them.  Between them they pin what a
lowering gets wrong first: several carried values updated "at once" (double buffering),
captured values, nested loops, a negative ``lo``, the index used as data, bool and 64-bit
carried values, clamped dynamic indices from parameters (the input generator's special values
include ``INT32_MIN``/``INT32_MAX``), and accumulation whose order is observable (f32 sums).

``GRAPHS`` maps a name to a zero-argument builder; ``graph(name)`` wraps one in a ``Graph``.
"""

from __future__ import annotations

from collections.abc import Callable

from kera.dtypes import DType
from kera.ir import Function, FunctionBuilder, Graph, Node, loop, make_node, start_vector

I32 = DType.I32


def _i32(b: FunctionBuilder, value: int) -> Node:
    return b.const(value, I32)


def _starts(*scalars: Node) -> Node:
    """An i32[len] start vector from i32 scalars."""
    return start_vector(list(scalars))


def _elem(x: Node, i: Node) -> Node:
    """``x[i]`` of a vector, as a scalar (dynamic, clamped)."""
    one = make_node("dynamic_slice", [x, _starts(i)], {"size": [1]})
    return make_node("reshape", [one], {"shape": []})


def verlet() -> Function:
    """Two carried values updated from each other's *previous* value: a lowering that writes
    x before computing v from it fails."""
    b = FunctionBuilder("verlet")
    x0, v0 = b.param("x0", DType.F32, [64]), b.param("v0", DType.F32, [64])
    dt = b.param("dt", DType.F32)

    def body(i: Node, c: list[Node]) -> list[Node]:
        x, v = c
        d = b.op("broadcast", dt, shape=[64])
        return [b.op("add", x, b.op("mul", v, d)), b.op("add", v, b.op("mul", b.op("neg", x), d))]

    x, v = loop(0, 100, [x0, v0], body)
    return b.build(x, v)


def running_max() -> Function:
    """``for i in 0..16 with (m = x[0]) { max(m, x[i]) }``: a row read at the index."""
    b = FunctionBuilder("running_max")
    x = b.param("x", DType.F32, [16, 8])
    first = b.op("reshape", b.op("slice", x, start=[0, 0], stop=[1, 8]), shape=[8])

    def body(i: Node, c: list[Node]) -> list[Node]:
        row = b.op("dynamic_slice", x, _starts(i, _i32(b, 0)), size=[1, 8])
        return [b.op("max", c[0], b.op("reshape", row, shape=[8]))]

    return b.build(*loop(0, 16, [first], body))


def scatter_hist() -> Function:
    """A histogram by dynamic update: indices from a parameter, clamped into 0..15."""
    b = FunctionBuilder("scatter_hist")
    idx = b.param("idx", I32, [64])
    zero = b.op("broadcast", _i32(b, 0), shape=[16])

    def body(k: Node, c: list[Node]) -> list[Node]:
        h = c[0]
        at = _elem(idx, k)
        bumped = b.op("add", _elem(h, at), _i32(b, 1))
        return [b.op("dynamic_update_slice", h, b.op("reshape", bumped, shape=[1]), _starts(at))]

    return b.build(*loop(0, 64, [zero], body))


def nested_sum() -> Function:
    """Loops nested two deep; the inner one uses the outer index (a capture) and its own."""
    b = FunctionBuilder("nested_sum")
    x = b.param("x", DType.F32, [4])

    def outer(i: Node, c: list[Node]) -> list[Node]:
        fi = b.op("broadcast", b.op("convert", i, to=DType.F32), shape=[4])

        def inner(j: Node, d: list[Node]) -> list[Node]:
            fj = b.op("broadcast", b.op("convert", j, to=DType.F32), shape=[4])
            return [b.op("add", b.op("mul", d[0], fi), fj)]

        return list(loop(1, 4, [b.op("add", c[0], x)], inner))

    return b.build(*loop(0, 3, [x], outer))


def serial_sum() -> Function:
    """Naive and Kahan-compensated f32 sums of 256 values, element by element: the order of
    accumulation is observable in the bits (a vectorised or tree sum differs)."""
    b = FunctionBuilder("serial_sum")
    x = b.param("x", DType.F32, [256])
    zero = b.const(0.0, DType.F32)

    def body(i: Node, c: list[Node]) -> list[Node]:
        s, k, comp = c
        xi = _elem(x, i)
        y = b.op("sub", xi, comp)
        t = b.op("add", k, y)
        return [b.op("add", s, xi), t, b.op("sub", b.op("sub", t, k), y)]

    s, k, _ = loop(0, 256, [zero, zero, zero], body)
    return b.build(s, k)


def index_as_data() -> Function:
    """A negative ``lo``, the index converted to f64 and multiplied in, one trip of a second
    loop; and a carried value returned unchanged."""
    b = FunctionBuilder("index_as_data")
    a = b.param("a", DType.F64, [3])

    def body(i: Node, c: list[Node]) -> list[Node]:
        fi = b.op("broadcast", b.op("convert", i, to=DType.F64), shape=[3])
        return [b.op("fma", c[0], fi, a), c[1]]

    acc, same = loop(-3, 7, [a, b.op("neg", a)], body)
    (once,) = loop(5, 1, [acc], lambda i, c: [b.op("mul", c[0], c[0])])
    return b.build(once, same)


def int_streams() -> Function:
    """u32 LCG and i64 xorshift streams written element by element, and a bool toggled each
    trip: integer wrap-around, shifts and bool carried values."""
    b = FunctionBuilder("int_streams")
    seed = b.param("seed", DType.U32)
    s64 = b.param("s64", DType.I64)
    out = b.op("broadcast", b.const(0, DType.U32), shape=[32])
    flag = b.const(True, DType.BOOL)

    def body(i: Node, c: list[Node]) -> list[Node]:
        x, buf, s, f = c
        nx = b.op(
            "add", b.op("mul", x, b.const(1664525, DType.U32)), b.const(1013904223, DType.U32)
        )
        nbuf = b.op("dynamic_update_slice", buf, b.op("reshape", nx, shape=[1]), _starts(i))
        s1 = b.op("xor", s, b.op("shl", s, b.const(13, DType.I64)))
        s2 = b.op("xor", s1, b.op("shr", s1, b.const(7, DType.I64)))
        s3 = b.op("xor", s2, b.op("shl", s2, b.const(17, DType.I64)))
        return [nx, nbuf, s3, b.op("not", f)]

    x, buf, s, f = loop(0, 32, [seed, out, s64, flag], body)
    return b.build(x, buf, s, f)


def dynamic_2d() -> Function:
    """dynamic_slice and dynamic_update_slice of a 2-D value at start indices taken straight
    from parameters (any i32, clamped), no loop."""
    b = FunctionBuilder("dynamic_2d")
    x = b.param("x", DType.F32, [6, 5])
    v = b.param("v", DType.F32, [2, 3])
    r, c = b.param("r", I32), b.param("c", I32)
    win = b.op("dynamic_slice", x, _starts(r, c), size=[3, 2])
    upd = b.op("dynamic_update_slice", x, v, _starts(c, r))
    return b.build(win, upd)


def dynamic_bool() -> Function:
    """Dynamic indexing of bool and i64 values (every dtype moves unchanged)."""
    b = FunctionBuilder("dynamic_bool")
    m = b.param("m", DType.BOOL, [8])
    w = b.param("w", DType.I64, [8])
    at = b.param("at", I32)
    got = b.op("dynamic_slice", m, _starts(at), size=[3])
    put = b.op("dynamic_update_slice", w, b.op("slice", w, start=[5], stop=[8]), _starts(at))
    return b.build(got, put)


GRAPHS: dict[str, Callable[[], Function]] = {
    f.__name__: f
    for f in (
        verlet,
        running_max,
        scatter_hist,
        nested_sum,
        serial_sum,
        index_as_data,
        int_streams,
        dynamic_2d,
        dynamic_bool,
    )
}
#: the graphs with a loop (the others use dynamic indexing only)
LOOPS = [n for n in GRAPHS if n not in ("dynamic_2d", "dynamic_bool")]


def graph(name: str) -> Graph:
    return Graph([GRAPHS[name]()])


if __name__ == "__main__":  # python tests/loopgraphs.py DIR: one .keg per graph, for keracheck run
    import sys
    from pathlib import Path

    from kera import keg

    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for name in GRAPHS:
        keg.dump(graph(name), str(out / f"{name}.keg"))
