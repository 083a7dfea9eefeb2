"""The .keg codec: exact round trip, canonical form, and precise errors on bad files."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from kera import keg
from kera.dtypes import DType
from kera.ir import FunctionBuilder, Graph, IRError, param
from kera.keg import KegError, dumps, loads


def sample_graph() -> Graph:
    b = FunctionBuilder("stats")
    x = b.param("x", DType.F32, [4, 5])
    nan = np.array([0x7FC00001, 0x80000000], np.uint32).view(np.float32)
    c = b.op("broadcast", b.const(nan, DType.F32, [2]), shape=[4, 2])
    s = b.op("concat", b.op("slice", x, start=[0, 0], stop=[4, 3]), c, axis=1)
    f1 = b.build(b.op("sum", s, axis=1), b.op("amax", x, axis=0))
    g = FunctionBuilder("ints")
    i = g.param("i", DType.I64, [3])
    sh = g.op("shl", i, g.op("iota", shape=[3], axis=0, to=DType.I64))
    flag = g.op("lt", sh, g.const(0, DType.I64, [3]))
    f2 = g.build(g.op("select", flag, sh, i), g.op("convert", i, to=DType.BOOL))
    return Graph([f1, f2])


def test_round_trip_is_exact() -> None:
    g = sample_graph()
    data = dumps(g)
    g2 = loads(data)
    assert dumps(g2) == data
    assert [f.fingerprint for f in g2.functions.values()] == [
        f.fingerprint for f in g.functions.values()
    ]
    assert list(g2.functions) == ["stats", "ints"]
    assert data[:4] == b"KEG\0"


def test_every_truncation_is_a_keg_error() -> None:
    data = dumps(sample_graph())
    for cut in range(len(data)):
        with pytest.raises(KegError):
            loads(data[:cut])


def test_every_single_byte_flip_is_rejected_or_exact() -> None:
    data = dumps(sample_graph())
    for i in range(len(data)):
        bad = bytearray(data)
        bad[i] ^= 0x01
        try:
            g = loads(bytes(bad))
        except KegError as e:
            assert e.offset >= 0 and e.section
        else:  # a flip that still decodes must be a canonical, different graph
            assert dumps(g) == bytes(bad)


def test_fingerprint_mismatch_is_reported() -> None:
    data = bytearray(dumps(sample_graph()))
    # the last 32 bytes are the second export's stored fingerprint
    data[-1] ^= 0xFF
    with pytest.raises(KegError, match="stored fingerprint") as e:
        loads(bytes(data))
    assert e.value.section == "exports"


def test_huge_counts_do_not_allocate() -> None:
    data = bytearray(dumps(sample_graph()))
    _, strings_offset, _ = struct.unpack_from("<IQQ", data, keg.HEADER)
    data[strings_offset : strings_offset + 4] = struct.pack("<I", 0xFFFFFFFF)
    with pytest.raises(KegError, match="does not fit") as e:
        loads(bytes(data))
    assert e.value.section == "strings" and e.value.offset == strings_offset


def test_bad_magic_and_version() -> None:
    data = dumps(sample_graph())
    with pytest.raises(KegError, match="magic"):
        loads(b"XEG\0" + data[4:])
    with pytest.raises(KegError, match="version"):
        loads(data[:4] + struct.pack("<H", 99) + data[6:])


def test_type_mismatch_in_node_is_caught() -> None:
    b = FunctionBuilder("f")
    x = b.param("x", DType.I32)
    data = dumps(Graph([b.build(b.op("add", x, x))]))
    # the TYPES section holds i32 (code 2) for both nodes; forge the node type to u32 (code 4)
    _, types_offset, _ = struct.unpack_from("<IQQ", data, keg.HEADER + 20)
    forged = bytearray(data)
    assert forged[types_offset + 4] == DType.I32.code
    forged[types_offset + 4] = DType.U32.code
    with pytest.raises(KegError):
        loads(bytes(forged))


def rebuild(data: bytes, section: int, body: bytes) -> bytes:
    """A .keg with one section's body replaced and the section table fixed up."""
    bodies = []
    for i in range(len(keg.SECTIONS)):
        _, off, length = struct.unpack_from("<IQQ", data, keg.HEADER + 20 * i)
        bodies.append(data[off : off + length])
    bodies[section] = body
    out = bytearray(data[: keg.HEADER])
    offset = keg.HEADER + keg.TABLE
    for i, b in enumerate(bodies):
        out += struct.pack("<IQQ", i + 1, offset, len(b))
        offset += len(b)
    return bytes(out) + b"".join(bodies)


def test_repeated_node_records_are_rejected() -> None:
    b = FunctionBuilder("c")
    data = dumps(Graph([b.build(b.const(np.arange(4, dtype=np.int32), DType.I32, [4]))]))
    nodes_ix = keg.SECTIONS.index("nodes")
    _, off, length = struct.unpack_from("<IQQ", data, keg.HEADER + 20 * nodes_ix)
    (count,) = struct.unpack_from("<I", data, off)
    record = data[off + 4 : off + length]
    assert count == 1
    forged = rebuild(data, nodes_ix, struct.pack("<I", 2) + record + record)
    with pytest.raises(KegError, match="repeats an earlier node") as e:
        loads(forged)
    assert e.value.section == "nodes"


def test_bool_parameter_index_is_rejected() -> None:
    with pytest.raises(IRError, match="non-negative integer"):
        param(True, "x", DType.I32)


def test_two_equal_callees_are_one_region_and_one_attribute_set() -> None:
    from kera import ir
    from kera.frontend import compile_source

    src = """fn h1(x: f32) -> f32 { x * 2.0 }
fn h2(x: f32) -> f32 { x * 2.0 }
export fn f(a: f32, b: f32) -> f32 { h1(a) + h2(b) }
"""
    graph = compile_source(src).graph
    assert graph is not None
    calls = [n for n in graph.functions["f"].nodes() if n.op == "call"]
    assert calls[0].attr("body") is not calls[1].attr("body")  # equal bodies, two objects
    data = dumps(graph)
    del graph, calls
    ir.sweep()  # the loader must build every node itself
    assert dumps(loads(data)) == data  # was "not in canonical form": a set per body object
