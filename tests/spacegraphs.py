"""Hand-built graphs with memory spaces and transfers, shared by every back end's tests (as
``callgraphs`` is for calls).

Each entry builds one exported function with ``kera.ir`` directly.  Between them they pin what a
lowering of ``transfer`` or of a parameter's space gets wrong first: a round trip host -> device
-> host whose bits must come back unchanged (NaN payloads and -0.0 included: ``transfer`` is
the identity on bits), parameters in device, pinned and unified memory, a transfer inside a
loop body (performed once per trip), a transfer inside a callee (performed where the call is),
two identical transfers that must both stay (effects are never merged), a transfer whose value
is not used (effects are never dropped), and a bool and an i64 moved (byte-sized and 8-byte
elements).

``GRAPHS`` maps a name to a zero-argument builder; ``graph(name)`` wraps one in a ``Graph``.
``TRANSFERS`` gives, per graph, the transfers it performs when run once, as
``{"from->to": bytes}`` per element of a batch row (what ``ptx-emu`` must count).
"""

from __future__ import annotations

from collections.abc import Callable

from kera.dtypes import DType
from kera.ir import (
    Body,
    Function,
    Graph,
    Node,
    TensorType,
    call,
    callee,
    const,
    loop,
    param,
    transfer,
)
from kera.ir import make_node as mk

F32, F64, I32, I64, BOOL = DType.F32, DType.F64, DType.I32, DType.I64, DType.BOOL


def round_trip() -> Function:
    """``x`` to the device, doubled there, back to the host: ``transfer`` twice around an op."""
    x = param(0, "x", F32, [8])
    d = transfer(x, "device", 0)
    twice = mk("add", [d, d])
    back = transfer(twice, "host", 1, source="device")
    shared = transfer(x, "unified", 2)
    return Function("round_trip", [x], [back, shared], [d, back, shared])


def spaces_params() -> Function:
    """Parameters in device, pinned and unified memory combined (no transfer): a lowering
    must read each from where it lives, bits unchanged."""
    d = param(0, "d", F64, [4], "device")
    p = param(1, "p", F64, [4], "pinned")
    u = param(2, "u", F64, [4], "unified")
    return Function("spaces_params", [d, p, u], [mk("sub", [mk("mul", [d, p]), u]), u])


def identical_transfers() -> Function:
    """The same value moved twice to the same space, one result unused: two effects, both
    kept (a lowering or pass that merges or drops one performs fewer transfers)."""
    x = param(0, "x", I64, [3])
    a = transfer(x, "device", 0)
    b = transfer(x, "device", 1)
    unused = transfer(x, "pinned", 2)
    return Function("identical_transfers", [x], [mk("xor", [a, b])], [a, b, unused])


def loop_transfer() -> Function:
    """A transfer inside a loop body: the carried value goes to the device and back every trip
    (6 trips, 2 transfers each)."""
    x = param(0, "x", F32, [4])

    def body(i: Node, carried: list[Node]) -> Body:
        on = transfer(carried[0], "device", 0, source="host")
        step = mk("mul", [on, mk("broadcast", [const(1.5, F32)], {"shape": [4]})])
        back = transfer(step, "host", 1, source="device")
        return Body([back], [on, back])

    (out,) = loop(0, 6, [x], body, seq=0)
    return Function("loop_transfer", [x], [out], [out])


def callee_transfer() -> Function:
    """A callee that moves its parameter to the device and returns it and its negation, called
    twice: each call performs the callee's transfer (two in all, in call order)."""
    g = callee(
        "to_device",
        [TensorType(F32, (4,))],
        lambda p: _moved(p[0]),
    )
    x = param(0, "x", F32, [4])
    y = param(1, "y", F32, [4])
    a, na = call(g, [x], seq=0)
    b, _nb = call(g, [y], seq=1)
    return Function("callee_transfer", [x, y], [mk("sub", [a, b]), na], [a, b])


def _moved(v: Node) -> Body:
    d = transfer(v, "device", 0)
    return Body([d, mk("neg", [d])], [d])


def bool_and_int() -> Function:
    """A bool and an i32 moved to unified memory and compared: 1-byte and 4-byte elements."""
    m = param(0, "m", BOOL, [5])
    k = param(1, "k", I32, [5], "pinned")
    mu = transfer(m, "unified", 0)
    ku = transfer(k, "unified", 1)
    return Function("bool_and_int", [m, k], [mk("select", [mu, ku, mk("neg", [ku])]), mu], [mu, ku])


def golden_transfer() -> Function:
    """The golden graph of every back end: ``x`` to the device, negated there, back to the
    host (two transfers, one op between them)."""
    x = param(0, "x", F32, [4])
    d = transfer(x, "device", 0)
    back = transfer(mk("neg", [d]), "host", 1, source="device")
    return Function("moved", [x], [back], [d, back])


GRAPHS: dict[str, Callable[[], Function]] = {
    "round_trip": round_trip,
    "spaces_params": spaces_params,
    "identical_transfers": identical_transfers,
    "loop_transfer": loop_transfer,
    "callee_transfer": callee_transfer,
    "bool_and_int": bool_and_int,
}

#: bytes moved per batch row by each graph's explicit transfers, by direction
TRANSFERS: dict[str, dict[str, int]] = {
    "round_trip": {"host->device": 32, "device->host": 32, "host->unified": 32},
    "spaces_params": {},
    "identical_transfers": {"host->device": 48, "host->pinned": 24},
    "loop_transfer": {"host->device": 6 * 16, "device->host": 6 * 16},
    "callee_transfer": {"host->device": 32},
    "bool_and_int": {"host->unified": 5, "pinned->unified": 20},
}


def graph(name: str) -> Graph:
    return Graph([GRAPHS[name]()])
