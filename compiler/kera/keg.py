"""``.keg``: the binary graph artifact.  ``dumps``/``loads`` are an exact pair.

Byte layout (little-endian; full description in docs/keg-format.md)::

    header   0  4  magic b"KEG\\0"
             4  2  u16 format version: 1 (as built), 2 (optimised: has PROVENANCE)
             6  2  u16 section count (6 in version 1, 7 in version 2)
             8  8  u64 reserved, zero
    table   16 20*c per section: u32 kind, u64 offset, u64 length
                 kinds 1..c in order, contiguous, first at 16 + 20*c, last ending at the file end
    1 STRINGS  u32 n; n x (u32 len, UTF-8 bytes)
    2 TYPES    u32 n; n x (u8 dtype code, u8 rank, rank x u32 dim)
    3 ATTRS    u32 n; n x attribute set: u32 m; m x (u32 key string, u8 tag, payload)
               tags: 1 i64 | 2 u8 bool | 3 u32 string | 4 u8 dtype | 5 u32 k, k x i64 |
                     6 u32 k, k bytes | 7 u32 region (a loop's body)
    4 NODES    u32 n; n x (u32 opcode string, u32 type, u32 attribute set, u32 k,
                           k x u32 input node index, each < this node's index)
    5 REGIONS  u32 n; n x (u32 p, p x u32 param node, u32 r, r x u32 result node
                           [, u32 e, e x u32 effect root node, u32 d, d x u32 effect name
                              string])      -- present iff bit 31 of r is set (r's count is
                                               the low 31 bits): a region with effects
               loop bodies and exported functions, in the order their last node is written
               (a body's nodes come before the loop node that holds it)
    6 EXPORTS  u32 n; n x (u32 name string, u32 region, 32-byte fingerprint)
    7 PROVENANCE (version 2) u32 p; p x (u32 len, UTF-8 "pass@version");
               u32 n (= exports); n x 32-byte source fingerprint (before any pass)

Every table is deduplicated and ordered by first use in the canonical node order, so a graph
has exactly one encoding: ``loads`` rejects any file that ``dumps`` would not write byte for
byte, and any stored fingerprint that differs from the recomputed one.  The loader checks every
length against the bytes left before it allocates, every index against its table, and
re-verifies every node's type with the typing rules; all failures are :class:`KegError`
naming the section and byte offset.
"""

from __future__ import annotations

import gc
import struct
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from kera.dtypes import BY_CODE, DType
from kera.ir import (
    AttrTag,
    Function,
    Graph,
    IRError,
    Node,
    Provenance,
    canonical_type,
    check_name,
    enc_attr_value,
    infer_type,
    normalize_attrs,
)
from kera.ops import (
    ATTRS,
    DEFAULT_SPACE,
    OPTIONAL_ATTRS,
    REGION_OPS,
    SPACES,
    AttrValue,
    Op,
    Region,
    TensorType,
    TypeRuleError,
    check_shape,
)

MAGIC = b"KEG\0"
VERSION = 1  # a graph as the front end built it
VERSION_OPTIMISED = 2  # the same, plus a PROVENANCE section (an optimised graph)
SECTIONS = ("strings", "types", "attrs", "nodes", "regions", "exports")
SECTIONS_V2 = (*SECTIONS, "provenance")
HEADER = 16
TABLE = 20 * len(SECTIONS)
MAX_FILE = 1 << 31

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


class KegError(Exception):
    """A .keg file that is truncated, corrupted, non-canonical or inconsistent."""

    def __init__(self, section: str, offset: int, message: str) -> None:
        super().__init__(f"{section} section, byte {offset}: {message}")
        self.section = section
        self.offset = offset
        self.message = message


# ------------------------------------------------------------------------------ writing


class _Table(Generic[K]):
    def __init__(self) -> None:
        self.index: dict[K, int] = {}

    def get(self, key: K) -> int:
        i = self.index.get(key)
        if i is None:
            i = self.index[key] = len(self.index)
        return i


def _u32(x: int) -> bytes:
    return struct.pack("<I", x)


class _Writer:
    """The tables of one ``dumps``, filled in canonical order (first use).

    The per-node lookups go by identity first (an op, a type object, an attribute tuple seen
    before) and fall back to the value tables, which decide the indices: every node of the
    graph is alive during the call, so ids are stable."""

    def __init__(self) -> None:
        self.strings: _Table[str] = _Table()
        self.types: _Table[TensorType] = _Table()
        self.attrsets: _Table[tuple[tuple[tuple[str, object], ...], tuple[type, ...]]] = _Table()
        self.node_ix: dict[int, int] = {}
        self.region_ix: dict[bytes, int] = {}  # loop bodies, by region hash: one per body
        self.n_regions = 0
        self.nodes = bytearray()
        self.regions = bytearray()
        self.attr_bytes: list[bytes] = []
        self.op_ix: dict[Op, int] = {}  # op -> its name's string index
        self.type_ix: dict[int, int] = {}  # id(type) -> its type index
        self.attr_ix: dict[int, int] = {}  # id(attribute tuple) -> its attribute set index

    def payload(self, v: AttrValue) -> bytes:
        if isinstance(v, Region):
            return bytes([AttrTag.REGION]) + _u32(self.region_ix[v.region_hash])
        return _attr_payload(v, self.strings)

    def attrset(self, items: tuple[tuple[str, AttrValue], ...]) -> int:
        # keyed by the value types too, so that 1 and True (or a dtype and its name) differ;
        # a region by its hash, as it is written: two equal bodies are one region
        key = (_by_region_hash(items), tuple([type(v) for _, v in items]))
        i = self.attrsets.index.get(key)
        if i is None:  # first use: its strings enter the table now, in canonical order
            keys = [(self.strings.get(k), self.payload(v)) for k, v in items]
            i = self.attrsets.get(key)
            self.attr_bytes.append(_u32(len(keys)) + b"".join(_u32(k) + p for k, p in keys))
        return i

    def record(self, n: Node) -> bytes:
        """The NODES record of ``n`` (its inputs already written), entering its op name, type
        and attribute set in the tables on first use, in that order."""
        op_ix = self.op_ix.get(n.op)
        if op_ix is None:
            op_ix = self.op_ix[n.op] = self.strings.get(n.op.value)
        t_ix = self.type_ix.get(id(n.type))
        if t_ix is None:
            t_ix = self.type_ix[id(n.type)] = self.types.get(n.type)
        a_ix = self.attr_ix.get(id(n.attr_items))
        if a_ix is None:
            a_ix = self.attr_ix[id(n.attr_items)] = self.attrset(n.attr_items)
        node_ix, ins = self.node_ix, n.inputs
        k = len(ins)
        if k == 0:
            return _RECORDS[0](op_ix, t_ix, a_ix, 0)
        if k == 1:
            return _RECORDS[1](op_ix, t_ix, a_ix, 1, node_ix[id(ins[0])])
        if k == 2:
            return _RECORDS[2](op_ix, t_ix, a_ix, 2, node_ix[id(ins[0])], node_ix[id(ins[1])])
        pack = _RECORDS[k] if k < len(_RECORDS) else struct.Struct(f"<{4 + k}I").pack
        return pack(op_ix, t_ix, a_ix, k, *[node_ix[id(i)] for i in ins])

    def region(self, fn: Function) -> int:
        """Write ``fn``'s nodes (loop bodies first, depth-first: nesting is at most
        ``MAX_LOOP_DEPTH`` deep), then ``fn`` itself; its index in REGIONS."""
        node_ix, out, region_ops = self.node_ix, self.nodes, REGION_OPS
        for n in fn.record_order():
            if id(n) in node_ix:
                continue
            if n.op in region_ops:
                body = n.attr("body")
                assert isinstance(body, Function)
                if body.region_hash not in self.region_ix:
                    self.region_ix[body.region_hash] = self.region(body)
            out += self.record(n)
            node_ix[id(n)] = len(node_ix)
        self.regions += _u32(len(fn.params)) + b"".join(_u32(node_ix[id(p)]) for p in fn.params)
        has_effects = bool(fn.effects or fn.declared)
        flag = _EFFECTS_FLAG if has_effects else 0
        self.regions += _u32(len(fn.results) | flag)
        self.regions += b"".join(_u32(node_ix[id(x)]) for x in fn.results)
        if has_effects:
            self.regions += _u32(len(fn.effects))
            self.regions += b"".join(_u32(node_ix[id(x)]) for x in fn.effects)
            self.regions += _u32(len(fn.declared))
            self.regions += b"".join(_u32(self.strings.get(d)) for d in fn.declared)
        self.n_regions += 1
        return self.n_regions - 1


def _by_region_hash(items: tuple[tuple[str, AttrValue], ...]) -> tuple[tuple[str, object], ...]:
    """``items`` with each region (a ``Function``, equal to another only if it is the same
    object) replaced by its region hash."""
    if not any(isinstance(v, Region) for _, v in items):
        return items
    return tuple((k, (v.region_hash,) if isinstance(v, Region) else v) for k, v in items)


#: bit 31 of a REGIONS record's result count: effect roots and declared effects follow
_EFFECTS_FLAG = 1 << 31

#: the NODES record packers by input count: (opcode, type, attribute set, k, k inputs)
_RECORDS = [struct.Struct(f"<{4 + k}I").pack for k in range(8)]


def dumps(graph: Graph) -> bytes:
    w = _Writer()
    exports = bytearray()
    for name, fn in graph.functions.items():
        r = w.region(fn)  # first: the export's name enters the string table after its nodes
        exports += _u32(w.strings.get(name)) + _u32(r) + fn.region_hash
    strings, types, attr_bytes, node_ix = w.strings, w.types, w.attr_bytes, w.node_ix
    sections = [
        _u32(len(strings.index))
        + b"".join(_u32(len(b)) + b for b in (s.encode("utf-8") for s in strings.index)),
        _u32(len(types.index))
        + b"".join(
            bytes([t.dtype.code, len(t.shape)]) + b"".join(_u32(d) for d in t.shape)
            for t in types.index
        ),
        _u32(len(attr_bytes)) + b"".join(attr_bytes),
        _u32(len(node_ix)) + bytes(w.nodes),
        _u32(w.n_regions) + bytes(w.regions),
        _u32(len(graph.functions)) + bytes(exports),
    ]
    version = VERSION
    if graph.provenance is not None:
        version = VERSION_OPTIMISED
        sections.append(_provenance_bytes(graph.provenance))
    out = bytearray(MAGIC + struct.pack("<HHQ", version, len(sections), 0))
    offset = HEADER + 20 * len(sections)
    for kind, body in enumerate(sections, start=1):
        out += struct.pack("<IQQ", kind, offset, len(body))
        offset += len(body)
    for body in sections:
        out += body
    return bytes(out)


def _provenance_bytes(prov: Provenance) -> bytes:
    names = [p.encode("utf-8") for p in prov.pipeline]
    return (
        _u32(len(names))
        + b"".join(_u32(len(b)) + b for b in names)
        + _u32(len(prov.source))
        + b"".join(prov.source)
    )


def _attr_payload(v: AttrValue, strings: _Table[str]) -> bytes:
    return enc_attr_value(v, lambda s: _u32(strings.get(s)))


# ------------------------------------------------------------------------------ reading


class _Reader:
    """Bounds-checked cursor over one section; every failure is a KegError."""

    def __init__(self, data: bytes, section: str, start: int, end: int) -> None:
        self.data, self.section, self.pos, self.end = data, section, start, end

    def fail(self, message: str, at: int | None = None) -> KegError:
        return KegError(self.section, self.pos if at is None else at, message)

    def take(self, n: int, what: str) -> bytes:
        if n > self.end - self.pos:
            raise self.fail(f"truncated: {what} needs {n} bytes, {self.end - self.pos} left")
        b = self.data[self.pos : self.pos + n]
        self.pos += n
        return b

    def u8(self, what: str) -> int:
        return self.take(1, what)[0]

    def u32(self, what: str) -> int:
        return int.from_bytes(self.take(4, what), "little")

    def i64(self, what: str) -> int:
        return int.from_bytes(self.take(8, what), "little", signed=True)

    def count(self, what: str, min_record: int) -> int:
        at = self.pos
        n = self.u32(f"{what} count")
        if n * min_record > self.end - self.pos:
            raise self.fail(
                f"{what} count {n} does not fit in the {self.end - self.pos} bytes left", at
            )
        return n

    def index(self, what: str, size: int) -> int:
        at = self.pos
        i = self.u32(what)
        if i >= size:
            raise self.fail(f"{what} {i} out of range (table has {size})", at)
        return i

    def done(self) -> None:
        if self.pos != self.end:
            raise self.fail(f"{self.end - self.pos} unexpected bytes at the end of the section")


def _items(r: _Reader, what: str, min_record: int, read: Callable[[int], T]) -> list[T]:
    return [read(i) for i in range(r.count(what, min_record))]


def loads(data: bytes) -> Graph:
    """Parse and verify a .keg file; raise KegError on anything wrong with it."""
    enabled = gc.isenabled()
    gc.disable()  # every object built here stays alive: cyclic GC passes are pure cost
    try:
        return _loads(data)
    finally:
        if enabled:
            gc.enable()


def _loads(data: bytes) -> Graph:
    if len(data) > MAX_FILE:
        raise KegError("header", 0, f"file of {len(data)} bytes exceeds the {MAX_FILE}-byte limit")
    bounds = _header(data)
    names = SECTIONS_V2 if len(bounds) == len(SECTIONS_V2) else SECTIONS
    rd = {name: _Reader(data, name, a, b) for name, (a, b) in zip(names, bounds, strict=True)}
    strings = _strings(rd["strings"])
    types = _types(rd["types"])
    attrs = _attrsets(rd["attrs"], strings)
    spans = _regions(rd["regions"], _node_count(rd["nodes"]), strings)
    nodes, bodies = _nodes(rd["nodes"], strings, types, attrs, spans)
    regions = [
        ([nodes[j] for j in ps], [nodes[j] for j in rs], [nodes[j] for j in es], ds)
        for ps, rs, es, ds in spans
    ]
    graph = _exports(rd["exports"], strings, regions, bodies)
    if "provenance" in rd:
        graph = _provenance(rd["provenance"], graph)
    canonical = dumps(graph)
    if canonical != data:
        at = next(
            (i for i, (a, b) in enumerate(zip(canonical, data, strict=False)) if a != b), None
        )
        at = min(len(canonical), len(data)) if at is None else at
        raise KegError(_section_at(bounds, at), at, "file is not in canonical form")
    return graph


def _section_at(bounds: list[tuple[int, int]], at: int) -> str:
    for name, (a, b) in zip(SECTIONS_V2, bounds, strict=False):
        if a <= at < b:
            return name
    return "header"


def _header(data: bytes) -> list[tuple[int, int]]:
    if len(data) < HEADER + TABLE:
        raise KegError(
            "header", len(data), f"truncated: a .keg file has at least {HEADER + TABLE} bytes"
        )
    if data[:4] != MAGIC:
        raise KegError("header", 0, f"bad magic {data[:4]!r}, expected {MAGIC!r} (not a .keg file)")
    version, count, reserved = struct.unpack_from("<HHQ", data, 4)
    names = {VERSION: SECTIONS, VERSION_OPTIMISED: SECTIONS_V2}.get(version)
    if names is None:
        raise KegError(
            "header",
            4,
            f"format version {version} is not supported (expected {VERSION} or "
            f"{VERSION_OPTIMISED})",
        )
    if count != len(names):
        raise KegError(
            "header", 6, f"section count {count}, expected {len(names)} for version {version}"
        )
    if len(data) < HEADER + 20 * count:
        raise KegError("header", len(data), "truncated: the section table is cut short")
    if reserved != 0:
        raise KegError("header", 8, "reserved bytes are not zero")
    bounds = []
    expect = HEADER + 20 * count
    for i, name in enumerate(names):
        at = HEADER + 20 * i
        kind, offset, length = struct.unpack_from("<IQQ", data, at)
        if kind != i + 1:
            raise KegError("header", at, f"section {i} has kind {kind}, expected {i + 1} ({name})")
        if offset != expect or length > len(data) - offset:
            raise KegError("header", at + 4, f"{name} section at {offset}+{length} is out of place")
        bounds.append((offset, offset + length))
        expect = offset + length
    if expect != len(data):
        raise KegError("header", expect, f"{len(data) - expect} bytes after the last section")
    return bounds


def _utf8_items(r: _Reader, what: str) -> list[str]:
    """A count, then that many (u32 byte length, UTF-8 bytes) strings."""

    def one(i: int) -> str:
        at = r.pos
        raw = r.take(r.u32(f"{what} length"), f"{what} bytes")
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise r.fail(f"{what} {i} is not valid UTF-8", at) from None

    return _items(r, what, 4, one)


def _strings(r: _Reader) -> list[str]:
    out = _utf8_items(r, "string")
    r.done()
    return out


def _types(r: _Reader) -> list[TensorType]:
    def one(i: int) -> TensorType:
        at = r.pos
        code, rank = r.u8("dtype"), r.u8("rank")
        if code not in BY_CODE:
            raise r.fail(f"type {i} has unknown dtype code {code}", at)
        dims = tuple(r.u32("dimension") for _ in range(min(rank, 5)))
        try:
            return canonical_type(TensorType(BY_CODE[code], check_shape(dims)))
        except TypeRuleError as e:
            raise r.fail(f"type {i}: {e.message}", at) from None

    out = _items(r, "type", 2, one)
    r.done()
    return out


def _attr_value(r: _Reader, strings: list[str]) -> AttrValue:
    at = r.pos
    tag = r.u8("attribute tag")
    if tag == AttrTag.INT:
        return r.i64("integer attribute")
    if tag == AttrTag.BOOL:
        b = r.u8("bool attribute")
        if b > 1:
            raise r.fail(f"bool attribute byte {b} is not 0 or 1", at + 1)
        return bool(b)
    if tag == AttrTag.STR:
        return strings[r.index("string attribute", len(strings))]
    if tag == AttrTag.DTYPE:
        code = r.u8("dtype attribute")
        if code not in BY_CODE:
            raise r.fail(f"unknown dtype code {code}", at + 1)
        return BY_CODE[code]
    if tag == AttrTag.INTS:
        return tuple(r.i64("integer list element") for _ in range(r.count("integer list", 8)))
    if tag == AttrTag.BYTES:
        return r.take(r.u32("byte string length"), "byte string")
    if tag == AttrTag.REGION:
        return _RegionRef(r.u32("region index"))
    raise r.fail(f"unknown attribute tag {tag}", at)


class _RegionRef(Region):
    """A region attribute as read: an index into REGIONS, resolved when the node is built
    (every node of the region must come before the node that holds it)."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index


def _attrsets(r: _Reader, strings: list[str]) -> list[tuple[tuple[str, AttrValue], ...]]:
    def one(i: int) -> tuple[tuple[str, AttrValue], ...]:
        at = r.pos
        items = []
        for _ in range(r.count("attribute", 6)):
            key = strings[r.index("attribute key", len(strings))]
            items.append((key, _attr_value(r, strings)))
        try:
            norm = normalize_attrs(dict(items))
        except IRError as e:
            raise r.fail(f"attribute set {i}: {e}", at) from None
        if tuple(items) != norm:
            raise r.fail(f"attribute set {i} is not sorted by key or has duplicate keys", at)
        return norm

    out = _items(r, "attribute set", 4, one)
    r.done()
    return out


def _node_count(r: _Reader) -> int:
    """The NODES section's count, read ahead (the region table is checked against it)."""
    ahead = _Reader(r.data, r.section, r.pos, r.end)
    return ahead.count("node", 16)


def _nodes(
    r: _Reader,
    strings: list[str],
    types: list[TensorType],
    attrs: list[tuple[tuple[str, AttrValue], ...]],
    spans: list[_Span],
) -> tuple[list[Node], dict[int, Function]]:
    nodes: list[Node] = []
    bodies = _Bodies(spans, nodes)
    seen: set[tuple[int, ...]] = set()
    budget = [16 * len(r.data) + (1 << 20)]  # bytes of attributes hashed, at most

    data, header = r.data, struct.Struct("<IIII").unpack_from
    n_strings, n_types, n_attrs = len(strings), len(types), len(attrs)
    ops = [_OPS.get(s) for s in strings]

    def fields(i: int) -> tuple[Op, int, int, int, tuple[int, ...]]:
        """The record's fields: one unpack when it is well formed, else field by field (the
        slow path names the first bad field)."""
        at = r.pos
        if r.end - at >= 16:
            op_ix, t_ix, a_ix, n_in = header(data, at)
            end = at + 16 + 4 * n_in
            if op_ix < n_strings and t_ix < n_types and a_ix < n_attrs and end <= r.end:
                unpack = _INPUTS[n_in] if n_in < len(_INPUTS) else struct.Struct(f"<{n_in}I")
                in_ix = unpack.unpack_from(data, at + 16)
                fast_op = ops[op_ix]
                if fast_op is not None and (not in_ix or max(in_ix) < i):
                    r.pos = end
                    return fast_op, op_ix, t_ix, a_ix, in_ix
        op_ix = r.index("opcode", n_strings)
        name = strings[op_ix]
        if name not in Op._value2member_map_:
            raise r.fail(f"node {i} has unknown opcode {name[:40]!r}", at)
        op = Op(name)
        t_ix = r.index("node type", n_types)
        a_ix = r.index("attribute set", n_attrs)
        in_ix = tuple(r.index("input node", i) for _ in range(r.count("input", 4)))
        return op, op_ix, t_ix, a_ix, in_ix

    blobs, refs = _attr_facts(attrs)
    node_at = nodes.__getitem__

    def one(i: int) -> Node:
        at = r.pos
        op, op_ix, t_ix, a_ix, in_ix = fields(i)
        key = (op_ix, t_ix, a_ix, *in_ix)
        if key in seen:  # a canonical file never repeats a node; repeats would be re-hashed
            raise r.fail(f"node {i} repeats an earlier node", at)
        seen.add(key)
        t, items = types[t_ix], attrs[a_ix]
        budget[0] -= blobs[a_ix]
        if budget[0] < 0:
            raise r.fail(
                "attribute data is referenced far more often than a canonical file allows", at
            )
        ins = tuple(map(node_at, in_ix))
        try:
            items = bodies.resolve(items, i) if refs[a_ix] else items
            _verify(op, t, ins, items)
        except (TypeRuleError, IRError) as e:
            raise r.fail(f"node {i} ({op}): {e}", at) from None
        return Node(op, t, ins, items)

    for i in range(r.count("node", 16)):
        nodes.append(one(i))
    r.done()
    return nodes, bodies.built


_OPS: dict[str, Op] = {op.value: op for op in Op}
_LEAF_OPS = frozenset({Op.PARAM, Op.CONST})  # their types and attributes are checked as given
_INPUTS = [struct.Struct(f"<{k}I") for k in range(8)]  # a record's input indices, by count


def _attr_facts(attrs: list[tuple[tuple[str, AttrValue], ...]]) -> tuple[list[int], list[bool]]:
    """Per attribute set: the bytes of its constant data (charged to the budget each time a
    node names it), and whether it holds a region (resolved when a node is built)."""
    blobs = [sum(len(v) for _, v in items if isinstance(v, bytes)) for items in attrs]
    refs = [any(isinstance(v, _RegionRef) for _, v in items) for items in attrs]
    return blobs, refs


class _Bodies:
    """Loop bodies as the nodes are read: region ``k`` becomes a ``Function`` the first time a
    node names it, from nodes that must all come before that node."""

    def __init__(self, spans: list[_Span], nodes: list[Node]) -> None:
        self.spans, self.nodes = spans, nodes
        self.built: dict[int, Function] = {}

    def body(self, ref: _RegionRef, i: int) -> Function:
        k = ref.index
        if k >= len(self.spans):
            raise IRError(f"region {k} out of range (table has {len(self.spans)})")
        if k not in self.built:
            ps, rs, es, ds = self.spans[k]
            if any(j >= i for j in (*ps, *rs, *es)):
                raise IRError(f"region {k} uses nodes written after the loop")
            nodes = self.nodes
            self.built[k] = Function(
                "body",
                [nodes[j] for j in ps],
                [nodes[j] for j in rs],
                [nodes[j] for j in es],
                ds,
            )
        return self.built[k]

    def resolve(
        self, items: tuple[tuple[str, AttrValue], ...], i: int
    ) -> tuple[tuple[str, AttrValue], ...]:
        if not any(isinstance(v, _RegionRef) for _, v in items):
            return items
        return tuple((k, self.body(v, i) if isinstance(v, _RegionRef) else v) for k, v in items)


def _verify(
    op: Op, t: TensorType, ins: tuple[Node, ...], items: tuple[tuple[str, AttrValue], ...]
) -> None:
    if op in _LEAF_OPS:
        _verify_leaf(op, t, ins, dict(items))
        return
    inferred = infer_type(op, ins, items)
    if inferred is not t and inferred != t:
        raise IRError(f"stored type {t} differs from the inferred {inferred}")


def _verify_leaf(op: Op, t: TensorType, ins: tuple[Node, ...], attrs: dict[str, AttrValue]) -> None:
    schema = {**ATTRS[op], **{k: v for k, v in OPTIONAL_ATTRS.get(op, {}).items() if k in attrs}}
    if set(attrs) != set(schema) or not all(
        isinstance(attrs[k], v) and not isinstance(attrs[k], bool) for k, v in schema.items()
    ):
        raise IRError(f"attributes must be exactly {sorted(schema)}")
    if ins:
        raise IRError("takes no operands")
    if op is Op.PARAM:
        check_name(attrs["name"], "parameter")
        space = attrs.get("space", DEFAULT_SPACE)
        if "space" in attrs and (space not in SPACES or space == DEFAULT_SPACE):
            shown = repr(space)[:40]
            raise IRError(
                f"parameter space {shown} is not one of {', '.join(SPACES[1:])} "
                "(host is recorded by leaving the attribute out)"
            )
    if op is Op.CONST:
        value = attrs["value"]
        assert isinstance(value, bytes)
        if len(value) != t.size * t.dtype.nbytes:
            raise IRError(f"constant of type {t} has {len(value)} bytes")
        if t.dtype is DType.BOOL and value.translate(None, b"\x00\x01"):
            raise IRError("a bool constant holds only bytes 0 and 1")


#: a region as read: parameter, result and effect root node indices, declared effect names
_Span = tuple[list[int], list[int], list[int], list[str]]


def _regions(r: _Reader, n_nodes: int, strings: list[str]) -> list[_Span]:
    """Each region's parameter, result and effect root node indices (checked against the
    node count) and declared effect names."""

    def one(i: int) -> _Span:
        params = [r.index("param node", n_nodes) for _ in range(r.count("param", 4))]
        at = r.pos
        raw = r.u32("result count")
        n = raw & ~_EFFECTS_FLAG
        if 4 * n > r.end - r.pos:
            raise r.fail(f"result count {n} does not fit in the {r.end - r.pos} bytes left", at)
        results = [r.index("result node", n_nodes) for _ in range(n)]
        if not raw & _EFFECTS_FLAG:
            return params, results, [], []
        effects = [r.index("effect node", n_nodes) for _ in range(r.count("effect", 4))]
        declared = [
            strings[r.index("effect name", len(strings))] for _ in range(r.count("effect name", 4))
        ]
        if not effects and not declared:
            raise r.fail(f"region {i} is flagged with effects but has none", at)
        return params, results, effects, declared

    out = _items(r, "region", 8, one)
    r.done()
    return out


def _exports(
    r: _Reader,
    strings: list[str],
    regions: list[tuple[list[Node], list[Node], list[Node], list[str]]],
    bodies: dict[int, Function],
) -> Graph:
    fns = []
    for i in range(r.count("export", 40)):
        at = r.pos
        name = strings[r.index("export name", len(strings))]
        ix = r.index("region", len(regions))
        if ix in bodies:
            raise r.fail(f"export {i}: region {ix} is a loop body", at + 4)
        params, results, effects, declared = regions[ix]
        stored = r.take(32, "fingerprint")
        try:
            fn = Function(name, params, results, effects, declared)
        except IRError as e:
            raise r.fail(f"export {i}: {e}", at) from None
        if fn.region_hash != stored:
            raise r.fail(
                f"export '{name}': stored fingerprint {stored.hex()} does not match the "
                f"recomputed {fn.fingerprint}",
                at + 8,
            )
        fns.append(fn)
    r.done()
    try:
        return Graph(fns)
    except IRError as e:
        raise r.fail(str(e)) from None


def _provenance(r: _Reader, graph: Graph) -> Graph:
    pipeline = tuple(_utf8_items(r, "pass name"))
    at = r.pos
    if r.u32("source fingerprint count") != len(graph.functions):
        raise r.fail(f"needs one source fingerprint per export ({len(graph.functions)})", at)
    source = tuple(r.take(32, "source fingerprint") for _ in graph.functions)
    r.done()
    return Graph(graph.functions.values(), Provenance(pipeline, source))


def load(path: str) -> Graph:
    with open(path, "rb") as f:
        return loads(f.read())


def dump(graph: Graph, path: str) -> None:
    from kera.files import write_atomic

    write_atomic(path, dumps(graph))
