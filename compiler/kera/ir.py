"""The content-addressed graph IR: interned nodes, functions (regions) and graphs.

Canonical encodings (all integers little-endian; ``str`` is a u32 byte length then UTF-8)::

    type   = u8 dtype code, u8 rank, rank x u32 dim
    attr   = str key, u8 tag, payload       tags: 1 int (i64) | 2 bool (u8 0/1) | 3 str |
                                               4 dtype (u8 code) | 5 ints (u32 n, n x i64) |
                                               6 bytes (u32 n, n bytes) |
                                               7 region (its 32-byte region hash)
    node   = u16 schema version (1), str opcode, u32 n_outputs (1), type per output,
             u32 n_inputs, 32-byte input node hash per input (ordered),
             u32 n_attrs, attr per entry, sorted by key bytes (keys unique)
    region = u32 n_params, 32-byte param node hash each, u32 n_results, 32-byte hash each
             [, u32 n_effects, 32-byte effect root hash each (program order),
                u32 n_declared, str effect name each (sorted)]    -- only when either is non-empty
    graph  = u32 n_exports, per export: str name, 32-byte region hash (in export order)

Hashes are SHA3-256 over a domain prefix and the canonical bytes: ``kera/type\\0``,
``kera/node\\0``, ``kera/region\\0``, ``kera/graph\\0`` — four distinct namespaces.  A float
constant is its raw bytes, so NaN payloads and -0.0 are kept.  The *fingerprint* of an exported
function is its region hash: it covers every node the results depend on (callees are inlined
by the front end), parameter names and types included, and not the function's own name.

A ``loop`` node holds its body, a region, in its ``body`` attribute, so the body's region hash
is part of the loop node's hash.  A body's parameters are the index, the carried values and the
values it captures, named ``_0``, ``_1``, ... by position (:func:`loop` builds them): renaming
a loop's index or carried names in the source does not change a fingerprint, while changing
the trip count, an initial value or one op of the body does.

Memory spaces and effects (``docs/semantics.md``, Memory spaces and effects): a parameter not
in ``host`` memory has the attribute ``space``; an effectful node (a ``transfer``, or a
``loop``/``call`` whose region declares effects) has ``seq``, its position in its function's
program order, so two equal transfers are two nodes.  A function holds its effect roots (one
node per effect, in ``seq`` order: a loop's or call's root is its ``result`` 0 node) and its
declared effect names; both enter its region hash only when either is non-empty, so a graph
without spaces or effects hashes exactly as before they existed.

Nodes are immutable and interned: building a node identical to a live one returns that node
(common subexpressions are merged by construction), and node identity is content identity.
"""

from __future__ import annotations

import enum
import functools
import hashlib
import math
import re
import struct
import sys
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kera import limits
from kera.dtypes import BY_CODE, DType
from kera.ops import (
    DEFAULT_SPACE,
    EFFECT_NAMES,
    EFFECTS,
    MAX_LOOP_DEPTH,
    REGION_OPS,
    AttrValue,
    Op,
    Region,
    Shape,
    TensorType,
    TypeRuleError,
    check_shape,
    check_space,
    effect_of,
    infer,
)

SCHEMA_VERSION = 1
DOMAIN_TYPE = b"kera/type\0"
DOMAIN_NODE = b"kera/node\0"
DOMAIN_REGION = b"kera/region\0"
DOMAIN_GRAPH = b"kera/graph\0"

_u8 = struct.Struct("<B").pack
_u16 = struct.Struct("<H").pack
_u32 = struct.Struct("<I").pack
_i64 = struct.Struct("<q").pack


class IRError(Exception):
    """A graph that breaks an IR invariant (bad op, attribute, type or structure)."""


#: longest function or parameter name (front-end identifiers are far shorter)
NAME_MAX = 255
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def check_name(name: object, what: str) -> str:
    """``name`` if it is an ASCII identifier of at most :data:`NAME_MAX` characters, else an
    IRError.  Names reach every emitted artifact (C, PTX, WASM exports, Verilog, test
    benches, reports), so the IR admits only names that are safe in all of them by
    construction; a hostile ``.keg`` is refused here, not escaped later."""
    if isinstance(name, str) and len(name) <= NAME_MAX and _NAME.match(name):
        return name
    shown = repr(name[:40]) + ("..." if len(name) > 40 else "") if isinstance(name, str) else "?"
    raise IRError(
        f"{what} name {shown} is not an identifier "
        f"([A-Za-z_][A-Za-z0-9_]*, at most {NAME_MAX} characters)"
    )


def enc_str(s: str) -> bytes:
    b = s.encode("utf-8")
    return _u32(len(b)) + b


def enc_type(t: TensorType) -> bytes:
    return _u8(t.dtype.code) + _u8(len(t.shape)) + b"".join(_u32(d) for d in t.shape)


def type_hash(t: TensorType) -> bytes:
    """Types match iff these hashes are equal."""
    return hashlib.sha3_256(DOMAIN_TYPE + enc_type(t)).digest()


class AttrTag(enum.IntEnum):
    """The tag byte of an attribute value, in node encodings and in ``.keg`` files."""

    INT = 1
    BOOL = 2
    STR = 3
    DTYPE = 4
    INTS = 5
    BYTES = 6
    REGION = 7


def enc_attr_value(v: AttrValue, string: Callable[[str], bytes] = enc_str) -> bytes:
    """Tag byte and payload; ``string`` encodes a string (inline here, a string-table index in
    a ``.keg``)."""
    if isinstance(v, bool):  # before int: bool is an int subclass
        return _u8(AttrTag.BOOL) + _u8(int(v))
    if isinstance(v, int):
        return _u8(AttrTag.INT) + _i64(v)
    if isinstance(v, DType):  # before str: DType is a str enum
        return _u8(AttrTag.DTYPE) + _u8(v.code)
    if isinstance(v, str):
        return _u8(AttrTag.STR) + string(v)
    if isinstance(v, tuple):
        return _u8(AttrTag.INTS) + _u32(len(v)) + b"".join(_i64(x) for x in v)
    if isinstance(v, bytes):
        return _u8(AttrTag.BYTES) + _u32(len(v)) + v
    if isinstance(v, Region):
        return _u8(AttrTag.REGION) + v.region_hash
    raise IRError(f"attribute value {v!r} has no canonical encoding")


def normalize_attrs(attrs: Mapping[str, Any]) -> tuple[tuple[str, AttrValue], ...]:
    """Attributes as a key-sorted tuple, lists turned into tuples of int."""
    if len(attrs) == 1:  # the common case, without the sort (same result as below)
        for k, v in attrs.items():
            one = _one_attr(k, v)
            if one is not None:
                return one
    out: list[tuple[str, AttrValue]] = []
    for k in sorted(attrs, key=lambda s: s.encode("utf-8")):
        v = attrs[k]
        if isinstance(v, list | tuple):
            v = tuple(v)
            if not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
                raise IRError(f"attribute '{k}' must be a list of integers")
            if not all(-(1 << 63) <= x < (1 << 63) for x in v):
                raise IRError(f"attribute '{k}' has an element outside i64")
        elif isinstance(v, int) and not isinstance(v, bool) and not -(1 << 63) <= v < (1 << 63):
            raise IRError(f"attribute '{k}' = {v} does not fit in i64")
        elif isinstance(v, enum.Enum) and not isinstance(v, DType):
            v = v.value  # a Space member is its string: one encoding, one attribute type
        elif not isinstance(v, bool | int | str | DType | bytes | Region):
            raise IRError(f"attribute '{k}' has unsupported value {v!r}")
        out.append((k, v))
    return tuple(out)


_I64_MIN, _I64_END = -(1 << 63), 1 << 63
_PLAIN = frozenset({str, DType, bool, bytes})


def _one_attr(k: str, v: Any) -> tuple[tuple[str, AttrValue], ...] | None:
    """``((k, v),)`` for one attribute of an exact type that needs no conversion or a list of
    in-range ints; None for anything else (the general loop decides, errors included)."""
    tv = type(v)
    if type(k) is not str:
        return None
    if tv is int:
        return ((k, v),) if _I64_MIN <= v < _I64_END else None
    if tv in _PLAIN:
        return ((k, v),)
    if tv is list or tv is tuple:
        t = tuple(v)
        for x in t:
            if type(x) is not int or not _I64_MIN <= x < _I64_END:
                return None
        return ((k, t),)
    return None


# Encoding pieces that repeat on every node are computed once.  The canonical bytes are
# exactly those described in the module docstring; these caches only avoid re-encoding.
_NODE_PREFIX = {op: DOMAIN_NODE + _u16(SCHEMA_VERSION) + enc_str(op.value) + _u32(1) for op in Op}
_N_INPUTS = [_u32(n) for n in range(8)]  # u32 n_inputs for the usual counts


def _attr_bytes(items: tuple[tuple[str, AttrValue], ...]) -> bytes:
    if not items:
        return b"\0\0\0\0"
    if len(items) == 1 and items[0][0] == "value":  # a constant: large, seldom repeated
        v = items[0][1]
        if type(v) is bytes:
            return _VALUE_BYTES + _u32(len(v)) + v
        return _u32(1) + _VALUE_KEY + enc_attr_value(v)
    # keyed by the value types too: 1 == True and DType.F32 == "f32" must not share an entry
    return _small_attr_bytes(items, tuple([type(v) for _, v in items]))


_VALUE_KEY = enc_str("value")
_VALUE_BYTES = _u32(1) + _VALUE_KEY + _u8(AttrTag.BYTES)  # the prefix of a constant's attrs


@functools.lru_cache(maxsize=8192)
def _small_attr_bytes(items: tuple[tuple[str, AttrValue], ...], types: tuple[type, ...]) -> bytes:
    """Attributes other than a constant's value (axes, shapes, dtypes): few distinct ones."""
    return _u32(len(items)) + b"".join(enc_str(k) + enc_attr_value(v) for k, v in items)


# Interning.  The table holds its nodes strongly; a node that only the table holds (its
# reference count says so) is *unheld*: lookups never return it (building its content again
# makes a fresh node in its place), exactly as if it had been dropped when it was let go, and
# a sweep drops it for good.  A weak reference per node would drop it at once, but it is one
# more object per node for the cyclic GC to walk, and the costliest kind to walk: with weak
# references, full collections took a third of the time of building a large graph.  Nodes
# form no reference cycles (inputs are built first, nothing refers back), so reference counts
# are exact.  A sweep runs when the table has
# doubled since the last one (amortised: one check per node built) and when functions holding
# many nodes are freed (``Function.__del__``), so a dropped graph's memory goes soon after it;
# ``sweep()`` runs one now.

#: hash -> the node with that hash (identity = content)
_INTERNED: dict[bytes, Node] = {}
_SWEEP_MIN = 1 << 15
_SWEEP_AT = [_SWEEP_MIN]  # sweep when the table reaches this size
_FREED = [0]  # nodes of the functions freed since the last sweep (an upper bound of the dead)
_SWEEPING = [False]


def _unheld() -> int:
    """sys.getrefcount of a table entry that nothing else holds, read as sweep() reads it:
    the table's reference and the argument's (measured, not assumed)."""
    table = {b"": object()}
    return sys.getrefcount(table.get(b""))


_UNHELD = _unheld()
#: the same, read as ``getrefcount(node)`` with ``node`` a local variable (one reference
#: more; a debugger holding the frame's locals only adds references: a node then looks held)
_UNHELD_HERE = _UNHELD + 1
_getrc = sys.getrefcount


def sweep() -> int:
    """Drop the interned nodes that nothing outside the table holds; returns how many.
    Building a node afterwards with the content of a dropped one makes a new node."""
    if _SWEEPING[0]:
        return 0
    _SWEEPING[0] = True
    table, getrc, unheld, before = _INTERNED, sys.getrefcount, _UNHELD, len(_INTERNED)
    try:
        for h in reversed(list(table)):  # users after their inputs: one pass frees chains
            if getrc(table.get(h)) <= unheld:
                node = table.pop(h, None)
                if node is not None and getrc(node) > unheld:  # taken meanwhile (a thread)
                    table.setdefault(h, node)
                node = None  # the last reference: the node (and what only it held) goes
    finally:
        _SWEEPING[0] = False
        _SWEEP_AT[0] = max(_SWEEP_MIN, 2 * len(table))
        _FREED[0] = 0
    return before - len(table)


def _freed(nodes: int) -> None:
    """A function holding ``nodes`` nodes was freed: sweep once the functions freed since the
    last sweep held as many nodes as half the table (so sweeps cost O(1) per node freed)."""
    _FREED[0] += nodes
    if 2 * _FREED[0] >= len(_INTERNED) > 0:
        sweep()


# Types.  Nodes hold *canonical* type objects: one object per distinct type, so a graph of
# 100k nodes holds a few dozen types instead of one per node (fewer objects for the cyclic GC
# to walk, and the per-type facts below are found by identity).  Hashing a ``TensorType`` by
# value (its dataclass ``__hash__``) costs more than the rest of a node's encoding, so every
# lookup goes by ``id``: an entry holds its type, so the id cannot be reused while it is here.

#: id(type) -> (type, its canonical object, its encoding, its element count)
_TYPE_INFO: dict[int, tuple[TensorType, TensorType, bytes, int]] = {}
#: a type (by value) -> its canonical object
_CANONICAL: dict[TensorType, TensorType] = {}
#: both tables are cleared when they reach this many entries (hostile input can make any
#: number of distinct shapes); afterwards types are simply canonicalised afresh
_TYPE_TABLE_MAX = 1 << 16


def _type_info(t: TensorType) -> tuple[TensorType, TensorType, bytes, int]:
    """The entry of ``t`` in :data:`_TYPE_INFO`, made on first sight."""
    known = _TYPE_INFO.get(id(t))
    if known is not None and known[0] is t:
        return known
    if len(_TYPE_INFO) >= _TYPE_TABLE_MAX:
        _TYPE_INFO.clear()
        _CANONICAL.clear()
    enc = enc_type(t)  # first: a malformed type fails here, before entering the tables
    canon = _CANONICAL.setdefault(t, t)
    entry = _TYPE_INFO[id(t)] = (t, canon, enc, math.prod(t.shape))
    return entry


def canonical_type(t: TensorType) -> TensorType:
    """The one object nodes use for the type ``t`` (equal to ``t``)."""
    known = _TYPE_INFO.get(id(t))
    if known is None or known[0] is not t:
        known = _type_info(t)
    return known[1]


def type_size(t: TensorType) -> int:
    """``t.size`` (its element count), found by identity."""
    known = _TYPE_INFO.get(id(t))
    if known is None or known[0] is not t:
        known = _type_info(t)
    return known[3]


def node_hash(
    op: Op,
    type: TensorType,
    inputs: Sequence[Node],
    attr_items: tuple[tuple[str, AttrValue], ...],
) -> bytes:
    """SHA3-256 of a node's canonical encoding (the module docstring's ``node``)."""
    known = _TYPE_INFO.get(id(type))
    if known is None or known[0] is not type:
        known = _type_info(type)
    return _sha3_256(_node_bytes(op, known[2], inputs, attr_items)).digest()


def _node_bytes(
    op: Op, enc_t: bytes, inputs: Sequence[Node], items: tuple[tuple[str, AttrValue], ...]
) -> bytes:
    """The canonical encoding of a node whose type encodes as ``enc_t`` (one join, written
    out for the usual input counts: the general form builds two lists on every node)."""
    attrs = _attr_bytes(items) if items else _NO_ATTR_BYTES
    n = len(inputs)
    if n == 0:
        return b"".join((_NODE_PREFIX[op], enc_t, _N_INPUTS[0], attrs))
    if n == 1:
        return b"".join((_NODE_PREFIX[op], enc_t, _N_INPUTS[1], inputs[0].hash, attrs))
    if n == 2:
        a, b = inputs
        return b"".join((_NODE_PREFIX[op], enc_t, _N_INPUTS[2], a.hash, b.hash, attrs))
    if n == 3:
        a, b, c = inputs
        return b"".join((_NODE_PREFIX[op], enc_t, _N_INPUTS[3], a.hash, b.hash, c.hash, attrs))
    return b"".join([_NODE_PREFIX[op], enc_t, _u32(n), *[i.hash for i in inputs], attrs])


_sha3_256 = hashlib.sha3_256
_NO_ATTR_BYTES = b"\0\0\0\0"  # u32 n_attrs = 0


def interned(h: bytes) -> Node | None:
    """The live node whose hash is ``h``, if any (one that only the table holds is not)."""
    found = _INTERNED.get(h)
    return found if found is not None and _getrc(found) > _UNHELD_HERE else None


def region_hash(
    params: Sequence[Node],
    results: Sequence[Node],
    effects: Sequence[Node] = (),
    declared: Sequence[str] = (),
) -> bytes:
    """SHA3-256 of a region's canonical encoding: its parameters' and results' node hashes,
    then its effect roots and declared effects when it has any (see the module docstring)."""
    body = (
        _u32(len(params))
        + b"".join(p.hash for p in params)
        + _u32(len(results))
        + b"".join(r.hash for r in results)
    )
    if effects or declared:
        body += _u32(len(effects)) + b"".join(e.hash for e in effects)
        body += _u32(len(declared)) + b"".join(enc_str(d) for d in declared)
    return hashlib.sha3_256(DOMAIN_REGION + body).digest()


class Node:
    """One operation with one output.  Immutable, interned; compare nodes with ``is``."""

    __slots__ = ("attr_items", "hash", "inputs", "op", "type")

    op: Op
    type: TensorType
    inputs: tuple[Node, ...]
    attr_items: tuple[tuple[str, AttrValue], ...]
    hash: bytes

    def __new__(
        cls,
        op: Op,
        type: TensorType,
        inputs: tuple[Node, ...],
        attr_items: tuple[tuple[str, AttrValue], ...],
    ) -> Node:
        return _intern(op, type, inputs, attr_items)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Node is immutable")

    def __reduce__(self) -> tuple[Any, ...]:
        return (Node, (self.op, self.type, self.inputs, self.attr_items))

    @property
    def dtype(self) -> DType:
        return self.type.dtype

    @property
    def shape(self) -> Shape:
        return self.type.shape

    @property
    def attrs(self) -> dict[str, AttrValue]:
        return dict(self.attr_items)

    def attr(self, name: str) -> AttrValue:
        for k, v in self.attr_items:
            if k == name:
                return v
        raise KeyError(name)

    def int_attr(self, name: str) -> int:
        v = self.attr(name)
        assert isinstance(v, int)
        return v

    @property
    def hex(self) -> str:
        return self.hash.hex()

    def __repr__(self) -> str:
        return f"<Node {self.op} {self.type} {self.hash.hex()[:12]}>"


# The slots are written through their descriptors (``Node.__setattr__`` refuses writes):
# a third cheaper than ``object.__setattr__`` by name.
_new_node = object.__new__
_SLOT: Mapping[str, Any] = vars(Node)
_set_op = _SLOT["op"].__set__
_set_type = _SLOT["type"].__set__
_set_inputs = _SLOT["inputs"].__set__
_set_items = _SLOT["attr_items"].__set__
_set_hash = _SLOT["hash"].__set__


def _intern(
    op: Op, t: TensorType, inputs: tuple[Node, ...], items: tuple[tuple[str, AttrValue], ...]
) -> Node:
    """The live node with this content, or a new one (holding the canonical type object)."""
    known = _TYPE_INFO.get(id(t))
    if known is None or known[0] is not t:
        known = _type_info(t)
    n = len(inputs)  # the encoding (_node_bytes), written out here for the usual counts
    attrs = _attr_bytes(items) if items else _NO_ATTR_BYTES
    if n == 1:
        data = b"".join((_NODE_PREFIX[op], known[2], _N_INPUTS[1], inputs[0].hash, attrs))
    elif n == 2:
        a, b = inputs
        data = b"".join((_NODE_PREFIX[op], known[2], _N_INPUTS[2], a.hash, b.hash, attrs))
    else:
        data = _node_bytes(op, known[2], inputs, items)
    h = _sha3_256(data).digest()
    found = _INTERNED.get(h)
    if found is not None and _getrc(found) > _UNHELD_HERE:  # held outside the table
        return found
    # new content, or a node nothing holds any more: a fresh node takes its place, as if
    # the old one had been dropped the moment it was let go (it is never seen again)
    self = _new_node(Node)
    _set_op(self, op)
    _set_type(self, known[1])
    _set_inputs(self, inputs)
    _set_items(self, items)
    _set_hash(self, h)
    _INTERNED[h] = self
    if len(_INTERNED) >= _SWEEP_AT[0]:
        sweep()
    return self


def make_node(op: Op | str, inputs: Sequence[Node], attrs: Mapping[str, Any] | None = None) -> Node:
    """Build (or find) a node, inferring its type; raises TypeRuleError on a typing error."""
    op = op if type(op) is Op else _OP_BY_VALUE.get(op) or Op(op)
    items = normalize_attrs(attrs) if attrs else ()
    if op is Op.PARAM or op is Op.CONST:
        raise IRError(f"use param()/const() to make a {op} node")
    return _intern(op, infer_type(op, inputs, items), tuple(inputs), items)


_NO_ATTRS: Mapping[str, AttrValue] = {}
_OP_BY_VALUE: dict[str, Op] = {op.value: op for op in Op}

#: (op, attributes, their value types, id of each input type) -> (the inferred canonical
#: type, the input types): ``infer`` is a pure function of these and of the limits, and a
#: graph applies few distinct ones.  The entry holds the input types, so their ids cannot be
#: reused while it is here.  Typing errors are not kept (they are raised afresh each time);
#: neither are region ops (their body is part of the key by identity only).
_INFERRED: dict[tuple[Any, ...], tuple[TensorType, tuple[TensorType, ...]]] = {}
_INFERRED_UNDER: list[limits.Limits | None] = [None]  # the limits the entries were made under
_INFERRED_MAX = 1 << 16


def infer_type(
    op: Op, inputs: Sequence[Node], items: tuple[tuple[str, AttrValue], ...]
) -> TensorType:
    """``infer`` of ``op`` on the inputs' types and the normalised attributes ``items``, as
    the canonical type object (memoised, see :data:`_INFERRED`; a typing error is raised as
    ``infer`` raises it)."""
    if op in REGION_OPS:
        return canonical_type(infer(op, [i.type for i in inputs], dict(items)))
    if limits.current() is not _INFERRED_UNDER[0]:
        _INFERRED.clear()
        _SHAPED.clear()
        _INFERRED_UNDER[0] = limits.current()
    if items:
        key: tuple[Any, ...] = (
            op,
            items,
            tuple([type(v) for _, v in items]),  # 1 == True, DType.F32 == "f32"
            *[id(i.type) for i in inputs],
        )
    elif len(inputs) == 2:
        key = (op, id(inputs[0].type), id(inputs[1].type))
    else:
        key = (op, *[id(i.type) for i in inputs])
    known = _INFERRED.get(key)
    if known is not None:
        return known[0]
    types = tuple([i.type for i in inputs])
    t = canonical_type(infer(op, types, dict(items) if items else _NO_ATTRS))
    if len(_INFERRED) >= _INFERRED_MAX:
        _INFERRED.clear()
    _INFERRED[key] = (t, types)
    return t


def _tensor_type(dtype: DType, shape: Sequence[int]) -> TensorType:
    """The canonical ``TensorType(dtype, shape)``, the shape checked (``check_shape``)."""
    shp = tuple(shape)
    if type(dtype) is not DType or not all(type(d) is int for d in shp):  # True == 1, 4.0 == 4
        return TensorType(dtype, check_shape(shp))
    if limits.current() is not _INFERRED_UNDER[0]:
        _INFERRED.clear()
        _SHAPED.clear()
        _INFERRED_UNDER[0] = limits.current()
    known = _SHAPED.get((dtype, shp))
    if known is not None:
        return known
    t = canonical_type(TensorType(dtype, check_shape(shp)))
    if len(_SHAPED) >= _INFERRED_MAX:
        _SHAPED.clear()
    _SHAPED[dtype, shp] = t
    return t


#: (dtype, shape) -> its canonical type, for parameters and constants (kept like _INFERRED)
_SHAPED: dict[tuple[DType, tuple[int, ...]], TensorType] = {}


def param(
    index: int, name: str, dtype: DType, shape: Sequence[int] = (), space: str = DEFAULT_SPACE
) -> Node:
    """Parameter ``index`` of a function; ``space`` is the memory space its buffer lives in
    (recorded as the attribute ``space`` only when it is not ``host``)."""
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise IRError(f"parameter index must be a non-negative integer, got {index!r}")
    t = _tensor_type(dtype, shape)
    check_name(name, "parameter")
    if space != DEFAULT_SPACE:
        where = _space(space, f"the space of parameter {name!r}")
        return Node(
            Op.PARAM, t, (), normalize_attrs({"index": index, "name": name, "space": where})
        )
    if type(index) is int and index < _I64_END:  # what normalize_attrs makes of them
        return _intern(Op.PARAM, t, (), (("index", index), ("name", name)))
    return Node(Op.PARAM, t, (), normalize_attrs({"index": index, "name": name}))


def _space(space: object, what: str) -> str:
    """``space`` as the plain string attributes hold (a ``Space`` member converts)."""
    try:
        return str(check_space(space, what))
    except TypeRuleError as e:
        raise IRError(e.message) from None


def param_space(node: Node) -> str:
    """The memory space of a ``param`` node (``host`` when it records none)."""
    for k, v in node.attr_items:
        if k == "space":
            assert isinstance(v, str)
            return v
    return DEFAULT_SPACE


def space_of(node: Node) -> str | None:
    """Where a value lives, as far as the graph says, or None for a value with no space yet
    (made of constants and iotas only: it adapts to where it is used).  A parameter lives in
    its space, a transfer's result in its destination, a call's result where its callee's
    result lives (its parameters' spaces are the callee's), a loop's carried value where its
    initial value lives; any other node where its first operand with a space does (the front
    end's checker has decided that the operands agree: ``docs/language.md``)."""
    return spaces_of(topo_order([node]))[id(node)]


def spaces_of(nodes: Iterable[Node]) -> dict[int, str | None]:
    """:func:`space_of` of every node of ``nodes`` (inputs before users, as ``Function.nodes``
    lists them), by ``id``, in one pass."""
    memo: dict[int, str | None] = {}
    for n in nodes:
        memo[id(n)] = _space_here(n, memo)
    return memo


def _space_here(n: Node, memo: Mapping[int, str | None]) -> str | None:
    if n.op is Op.PARAM:
        return param_space(n)
    if n.op is Op.TRANSFER:
        return str(n.attr("to"))
    if n.op is Op.CALL:
        return space_of(loop_body(n).results[n.int_attr("result")])
    if n.op is Op.LOOP:
        return memo[id(n.inputs[n.int_attr("result")])]
    return next((s for s in (memo[id(i)] for i in n.inputs) if s is not None), None)


def transfer(x: Node, to: str, seq: int, source: str | None = None) -> Node:
    """``transfer(x, to = <to>)``: ``x`` moved from ``source`` (default :func:`space_of`
    ``x``, host for a value with no space yet) to the space ``to``, as its function's effect
    number ``seq`` (program order).  The identity on bits; list the node among the function's
    ``effects``.  ``to`` and ``source`` may be ``Space`` members or their strings."""
    src = (space_of(x) or DEFAULT_SPACE) if source is None else source
    return make_node(
        Op.TRANSFER, [x], {"from": _attr_space(src), "to": _attr_space(to), "seq": seq}
    )


def _attr_space(space: object) -> object:
    """A ``Space`` member as its plain string; anything else as it is (the typing rule
    reports a bad one)."""
    return space.value if isinstance(space, enum.Enum) else space


def is_effectful(node: Node) -> bool:
    """Whether ``node`` has an effect (a ``transfer``, or a loop or call of a region that
    declares effects)."""
    return bool(effect_of(node.op, node.attrs)) if node.op in _MAYBE_EFFECTFUL else False


_MAYBE_EFFECTFUL = frozenset({*EFFECTS, *REGION_OPS})


def const(value: Any, dtype: DType, shape: Sequence[int] = ()) -> Node:
    """A constant holding ``value`` (broadcast to ``shape``) converted to ``dtype``'s numpy type.

    Pass a numpy array of the exact dtype to keep exact bits (NaN payloads, -0.0).
    """
    shp = check_shape(tuple(shape))
    arr = np.asarray(value, dtype=dtype.np)
    if arr.ndim == 0:  # a scalar broadcasts to its bytes repeated (what broadcast_to gives)
        return const_bytes(arr.tobytes() * math.prod(shp), dtype, shp)
    arr = np.broadcast_to(arr, shp)
    return const_bytes(np.ascontiguousarray(arr).tobytes(), dtype, shp)


def const_bytes(data: bytes, dtype: DType, shape: Shape) -> Node:
    t = _tensor_type(dtype, shape)
    size = type_size(t)
    if len(data) != size * dtype.nbytes:
        raise IRError(f"constant of type {t} needs {size * dtype.nbytes} bytes, got {len(data)}")
    if dtype is DType.BOOL and any(b > 1 for b in data):
        raise IRError("a bool constant holds only bytes 0 and 1")
    return _intern(Op.CONST, t, (), (("value", data),))


def const_value(node: Node) -> np.ndarray[Any, Any]:
    """The value of a const node as a numpy array of its type (exact bits)."""
    data = node.attr("value")
    assert isinstance(data, bytes)
    return np.frombuffer(data, dtype=node.dtype.np).reshape(node.shape)


def topo_order(results: Iterable[Node], stop: Collection[int] = frozenset()) -> list[Node]:
    """Nodes reachable from ``results`` in depth-first post-order (inputs left to right),
    not entering the inputs of nodes whose ``id`` is in ``stop`` (they are listed as leaves).

    This is the canonical order: it depends only on the graph's content.  Iterative, so deep
    graphs do not exhaust the Python stack.
    """
    # The recursive walk, unrolled: a node on the stack is a visit still to make (inputs
    # pushed right to left, so the leftmost is visited first, once the ones before it are
    # done); the marker _EMIT above a node is the point where all its inputs are done and it
    # is listed.  A node is marked seen when its visit starts, as the recursion would (cycles
    # included).  Nodes hash by identity (they define no ``__eq__``): the set holds them.
    seen: set[Node] = set()
    order: list[Node] = []
    mark, emit = seen.add, order.append
    for root in results:
        stack: list[Any] = [root]
        pop, push, push_all = stack.pop, stack.append, stack.extend
        while stack:
            node = pop()
            if node is _EMIT:
                emit(pop())
                continue
            if node in seen:
                continue
            mark(node)
            inputs = node.inputs
            if inputs and (not stop or id(node) not in stop):
                push(node)
                push(_EMIT)
                push_all(inputs[::-1])
            else:
                emit(node)
    return order


_EMIT = object()  # topo_order's marker: list the node below it on the stack


def _scan(
    nodes: Sequence[Node], params: Sequence[Node]
) -> tuple[int, list[Node], Node | None, list[Node]]:
    """One pass over a region's nodes: the elements they compute (one run; each node's type
    found by identity), the nodes that hold a region (loops, calls), the first parameter
    node that is not one of ``params`` (None when there is none), and the transfers."""
    info, total, held, stray, moves = _TYPE_INFO, 0, [], None, []
    known = {id(p) for p in params}
    param_op, region_ops, transfer_op = Op.PARAM, REGION_OPS, Op.TRANSFER
    for n in nodes:
        t = n.type
        entry = info.get(id(t))
        total += entry[3] if entry is not None and entry[0] is t else type_size(t)
        op = n.op
        if op is param_op:
            if stray is None and id(n) not in known:
                stray = n
        elif op in region_ops:
            held.append(n)
        elif op is transfer_op:
            moves.append(n)
    return total, held, stray, moves


def _declared(fn: Function, given: Iterable[str] | None) -> tuple[str, ...]:
    """The declared effects: ``given`` (checked, sorted, unique) or, when None, the effects
    the function's roots have; either way a superset of those."""
    used = {name for e in fn.effects for name in effect_of(e.op, e.attrs)}
    if given is None:
        return tuple(sorted(used))
    names = list(given)
    for n in names:
        if not isinstance(n, str) or n not in EFFECT_NAMES:
            shown = repr(n)[:40]
            raise IRError(
                f"'{fn.name}' declares the effect {shown}; known: {', '.join(sorted(EFFECT_NAMES))}"
            )
    missing = used - set(names)
    if missing:
        raise IRError(f"'{fn.name}' has the effects {sorted(missing)} but does not declare them")
    return tuple(sorted(set(names)))


def _check_effects(
    fn: Function, held: Sequence[Node], moves: Sequence[Node], given: Iterable[str] | None
) -> tuple[str, ...]:
    """The effect rules of a region (``docs/semantics.md``, Memory spaces and effects): its
    effect roots are effectful nodes listed in program order, their ``seq`` increasing (a
    loop's or call's root is its ``result`` 0 node); every effectful node of the region is a
    root or a sibling of one (same loop or call group); none runs before the effect that
    precedes it in program order.  Returns the declared effects (:func:`_declared`)."""
    declared = _declared(fn, given)
    effectful = [*moves, *[n for n in held if loop_body(n).declared]]
    if not fn.effects and not effectful:
        return declared
    position = {id(n): i for i, n in enumerate(fn._nodes)}
    last = -1
    for i, e in enumerate(fn.effects):
        if not isinstance(e, Node) or not is_effectful(e):
            raise IRError(f"effect {i} of '{fn.name}' is not an effectful node")
        seq = e.int_attr("seq")
        if seq <= last or (e.op in REGION_OPS and e.int_attr("result") != 0):
            raise IRError(
                f"effect {i} of '{fn.name}' has seq {seq} after seq {last} (effects are listed "
                "in program order, seq increasing; a loop or call by its result 0 node)"
            )
        last = seq
        if i and position[id(e)] < position[id(fn.effects[i - 1])]:
            raise IRError(f"effect {i} of '{fn.name}' runs before effect {i - 1}")
    at = {e.int_attr("seq"): i for i, e in enumerate(fn.effects)}
    for n in effectful:
        _check_member(fn, n, position, at)
    return declared


def _check_member(
    fn: Function, n: Node, position: Mapping[int, int], at: Mapping[int, int]
) -> None:
    """``n`` (effectful) is one of ``fn``'s effect roots or a sibling of one, and runs after
    the effect before it."""
    seq = n.int_attr("seq")
    i = at.get(seq)
    if i is None:
        raise IRError(
            f"'{fn.name}' has an effectful {n.op} (seq {seq}) that is not among its "
            f"{len(fn.effects)} effects"
        )
    root = fn.effects[i]
    if n is not root and not (n.op in REGION_OPS and loop_group(n) == loop_group(root)):
        raise IRError(f"two effectful nodes of '{fn.name}' have seq {seq}")
    if i and position[id(n)] < position[id(fn.effects[i - 1])]:
        raise IRError(f"effect {i} of '{fn.name}' runs before effect {i - 1}")


def derived_effects(results: Sequence[Node]) -> list[Node]:
    """The effect roots of the effectful nodes ``results`` reach, in ``seq`` order (a loop's
    or call's by its ``result`` 0 node): what ``Function`` takes when given no ``effects``
    (a slice of a function keeps its effects' numbers; an effect nothing reaches is not in
    it)."""
    found: dict[int, Node] = {}
    for n in topo_order(results):
        if n.op in _MAYBE_EFFECTFUL and is_effectful(n):
            root = n
            if n.op in REGION_OPS and n.int_attr("result") != 0:
                root = make_node(n.op, n.inputs, {**n.attrs, "result": 0})
            found.setdefault(n.int_attr("seq"), root)
    return [found[k] for k in sorted(found)]


class Function(Region):
    """A region: ordered parameters, results, and everything the results depend on.  An
    exported function is one; so is a loop's body.

    ``work`` counts the elements the region computes when run once, a loop's body counted once
    per iteration (nested loops multiplied out); ``depth`` is how deeply loops nest in it;
    ``inlined`` is how many nodes it has with every call expanded (a callee's nodes once per
    call group, nested calls multiplied out; a loop body's once): what the ``inline`` pass, or
    a back end that lowers a call in place, builds.  The growth through calls is held to the
    ``expansion`` budget, so a few bytes of nested calls cannot become an exponential graph.

    ``effects`` are the region's effect roots in program order (``seq`` increasing) and
    ``declared`` its declared effect names (None: the ones it has); see the module docstring
    and :func:`_check_effects`.  A builder of a whole program passes its effects (an unused
    transfer is one only it knows of); ``effects=None`` takes those the results reach
    (:func:`derived_effects`), which is what a slice of a function needs (a reproducer, a
    node's localisation).  The ``.keg`` loader always passes them."""

    __slots__ = (
        "_nodes",
        "declared",
        "depth",
        "effects",
        "inlined",
        "name",
        "params",
        "region_hash",
        "results",
        "work",
    )

    def __init__(
        self,
        name: str,
        params: Sequence[Node],
        results: Sequence[Node],
        effects: Sequence[Node] | None = None,
        declared: Iterable[str] | None = None,
    ) -> None:
        self.name = check_name(name, "function")
        self.params = tuple(params)
        self.results = tuple(results)
        self.effects = tuple(effects or ())
        if not self.results:
            raise IRError(f"function '{name}' has no results")
        for i, p in enumerate(self.params):
            if p.op is not Op.PARAM or p.attr("index") != i:
                raise IRError(f"parameter {i} of '{name}' is not param node #{i}")
        names = [p.attr("name") for p in self.params]
        if len(set(names)) != len(names):
            raise IRError(f"function '{name}' has duplicate parameter names")
        self._nodes = topo_order([*self.effects, *self.results] if effects else self.results)
        total, held, stray, moves = _scan(self._nodes, self.params)
        if effects is None and (moves or any(loop_body(n).declared for n in held)):
            self.effects = tuple(derived_effects(self.results))
            self._nodes = topo_order([*self.effects, *self.results])
            total, held, stray, moves = _scan(self._nodes, self.params)
        self.declared = _check_effects(self, held, moves, declared)
        cap = limits.current().function_elements
        if total > cap:
            raise IRError(
                f"function '{name}' computes {total:,} elements in all; the limit is {cap:,} "
                f"per function ({limits.hint('function_elements')})"
            )
        self.depth, self.work, self.inlined = _loop_measure(held, total, len(self._nodes))
        growth, budget = self.inlined - len(self._nodes), limits.current().expansion
        if growth > budget:
            raise IRError(
                f"'{name}' expands to {self.inlined:,} nodes when its calls are inlined; the "
                f"expansion budget is {budget:,} more than its own ({limits.hint('expansion')})"
            )
        if self.depth > MAX_LOOP_DEPTH:
            raise IRError(f"loops nest {self.depth} deep in '{name}'; at most {MAX_LOOP_DEPTH}")
        if self.work > cap:
            raise IRError(
                f"'{name}' computes {self.work:,} elements in all when its loops run (trip "
                f"count x body size); the limit is {cap:,} ({limits.hint('function_elements')})"
            )
        if stray is not None:
            raise IRError(f"'{name}' uses parameter {stray.attr('name')!r} it does not declare")
        self.region_hash = region_hash(self.params, self.results, self.effects, self.declared)

    def __del__(self, _finalizing: Callable[[], bool] = sys.is_finalizing) -> None:
        count = len(getattr(self, "_nodes", ()))  # none: the constructor failed before it
        if count and not _finalizing():  # at exit the module's tables may be gone already
            self._nodes, self.params, self.results = [], (), ()  # let go of them first
            _freed(count)

    def nodes(self) -> list[Node]:
        """Every node the results and the effect roots depend on, inputs before users
        (canonical order: ``topo_order([*effects, *results])``, so effects come in program
        order).

        Parameters the results do not use are not included; see ``params``.
        """
        return list(self._nodes)

    def regions(self) -> list[Function]:
        """This region and every loop body in it, nested ones too, each once (outer first)."""
        out, seen, i = [self], {self.region_hash}, 0
        while i < len(out):
            for n in out[i]._nodes:
                if n.op in REGION_OPS:
                    body = n.attr("body")
                    assert isinstance(body, Function)
                    if body.region_hash not in seen:
                        seen.add(body.region_hash)
                        out.append(body)
            i += 1
        return out

    def ops_used(self) -> set[Op]:
        """Every op of this function, loop bodies included (what a target must lower)."""
        return {n.op for r in self.regions() for n in r._nodes}

    def record_order(self) -> list[Node]:
        """The parameters in order, then every other node in canonical order: the same as
        ``topo_order([*params, *results])`` (parameters are leaves), without walking again."""
        return [*self.params, *[n for n in self._nodes if n.op is not Op.PARAM]]

    @property
    def fingerprint(self) -> str:
        return self.region_hash.hex()

    def param_names(self) -> list[str]:
        return [str(p.attr("name")) for p in self.params]

    def __repr__(self) -> str:
        return f"<Function {self.name} {self.fingerprint[:12]}>"


def _loop_measure(held: Sequence[Node], total: int, count: int) -> tuple[int, int, int]:
    """(loop nesting depth, work, inlined size) of a region of ``count`` nodes computing
    ``total`` elements, whose region-holding nodes are ``held``: a loop group counts its
    body's work once per trip (its sibling nodes, one per carried value, share one run), a call
    group its callee's once; a call adds no depth of its own (its callee's loops count)."""
    depth, work, inlined, seen = 0, total, count, set()
    for n in held:
        body = n.attr("body")
        assert isinstance(body, Function)
        loop = n.op is Op.LOOP
        depth = max(depth, body.depth + loop)
        key = loop_group(n)
        if key not in seen:
            seen.add(key)
            work += (n.int_attr("trips") if loop else 1) * body.work
            inlined += body.inlined
    return depth, work, inlined


_END = param(0, "_end", DType.I32)  # sentinel of start_vector's walk (never in a graph)


def loop_group(node: Node) -> tuple[Any, ...]:
    """What the sibling nodes of one loop (or one call) share (all but ``result``; the body by
    its region hash, as passes may rebuild equal bodies): back ends and the interpreter run a
    loop or a call once per group and take each result from that one run."""
    rest = [
        v.region_hash if isinstance(v, Region) else v for k, v in node.attr_items if k != "result"
    ]
    return (tuple(map(id, node.inputs)), *rest)


def loop_body(node: Node) -> Function:
    """The region of a ``loop`` (its body) or a ``call`` (its callee)."""
    body = node.attr("body")
    assert isinstance(body, Function)
    return body


def start_vector(starts: Sequence[Node | None]) -> Node:
    """The ``i32[rank]`` start operand of a dynamic op from one ``i32`` scalar per axis (None:
    start at 0), in the one form the front end builds (so a fuzzer's graph prints as source
    with its fingerprint): runs of zeros are one constant, each scalar is reshaped to ``[1]``,
    and the pieces are joined left to right with ``concat``."""
    pieces: list[Node] = []
    zeros = 0
    for s in [*starts, _END]:
        if s is None:
            zeros += 1
            continue
        if zeros:
            pieces.append(const_bytes(bytes(4 * zeros), DType.I32, (zeros,)))
            zeros = 0
        if s is not _END:
            pieces.append(make_node(Op.RESHAPE, [s], {"shape": (1,)}))
    if not pieces:
        raise IRError("a start vector needs at least one axis")
    out = pieces[0]
    for piece in pieces[1:]:
        out = make_node(Op.CONCAT, [out, piece], {"axis": 0})
    return out


def start_pieces(vector: Node) -> list[Node | None] | None:
    """The inverse of :func:`start_vector`: the scalars (None for a zero) a start vector was
    built from, or None when it is not in that form."""
    pieces: list[Node] = []
    node = vector
    while node.op is Op.CONCAT:
        pieces.append(node.inputs[1])
        node = node.inputs[0]
    pieces.append(node)
    out: list[Node | None] = []
    for p in reversed(pieces):
        if p.op is Op.RESHAPE and p.inputs[0].shape == () and p.shape == (1,):
            out.append(p.inputs[0])
        elif p.op is Op.CONST and p.dtype is DType.I32 and not any(p.attr("value")):  # type: ignore[arg-type]
            out += [None] * p.shape[0]
        else:
            return None
    return out if start_vector(out) is vector else None


_SERIAL = [0]


def _fresh_tag(inits: Sequence[Node]) -> str:
    """A name prefix for a loop's placeholder parameters that no live node uses: were a
    user's parameter to have a placeholder's content, interning would make them one node."""
    while True:
        _SERIAL[0] += 1
        tag = f"_loop{_SERIAL[0]}_"
        types = [TensorType(DType.I32), *(v.type for v in inits)]
        names = [tag + "i", *(f"{tag}{k}" for k in range(len(inits)))]
        hashes = [
            node_hash(Op.PARAM, t, (), normalize_attrs({"index": k, "name": n}))
            for k, (t, n) in enumerate(zip(types, names, strict=True))
        ]
        if all(interned(h) is None for h in hashes):
            return tag


@dataclass(frozen=True)
class Body:
    """What a loop body or a callee builder may return instead of its results alone: the
    results, the effectful nodes it made (in program order, ``seq`` 0, 1, ... within the
    body; a loop body has exactly these, a callee given None those its results reach) and,
    optionally, the effects it declares (default: those it has)."""

    results: Sequence[Node]
    effects: Sequence[Node] | None = None  # None: those the results reach (a callee's)
    declared: Sequence[str] | None = None


def _body_parts(out: Sequence[Node] | Body) -> Body:
    return out if isinstance(out, Body) else Body(list(out))


def loop(
    lo: int,
    trips: int,
    inits: Sequence[Node],
    body: Callable[[Node, list[Node]], Sequence[Node] | Body],
    seq: int | None = None,
) -> list[Node]:
    """``for i in lo..lo+trips with (carried = inits) { body }``: the carried values after the
    last iteration, one node per carried value (``trips`` is at least 1).

    A body with effects returns a :class:`Body`; the loop is then effectful and needs
    ``seq``, its position in the enclosing function's program order (its ``result`` 0 node
    is the effect root to list there).  An effectful node is never hoisted out of the body.

    ``body(i, carried)`` builds the next carried values from the index and the current ones,
    and may use any other node directly.  The body is then *closed*: every value it uses that
    does not depend on the index or the carried values (and is not a pure node of constants
    alone) is computed once, outside, and becomes a captured operand — loop-invariant code is
    hoisted by construction, and the body's form depends only on what it computes.
    """
    tag = _fresh_tag(inits)
    holders = [param(0, tag + "i", DType.I32)]
    holders += [param(1 + k, f"{tag}{k}", v.dtype, v.shape) for k, v in enumerate(inits)]
    built = _body_parts(body(holders[0], holders[1:]))
    results = list(built.results)
    if len(results) != len(inits):
        raise IRError(f"a loop body gives {len(results)} values for {len(inits)} carried")
    captures, closed = _close(holders, results, built)
    attrs: dict[str, Any] = {"lo": lo, "trips": trips, "body": closed}
    if seq is not None:
        attrs["seq"] = seq
    operands = [*inits, *captures]
    return [make_node(Op.LOOP, operands, {**attrs, "result": k}) for k in range(len(inits))]


def callee(
    name: str,
    types: Sequence[TensorType],
    body: Callable[[list[Node]], Sequence[Node] | Body],
    spaces: Sequence[str] | None = None,
) -> Function:
    """A function to be called (a ``call``'s region): ``body(params)`` builds its results from
    its parameters, which are named ``_0``, ``_1``, ... by position, so renaming a parameter in
    the source does not change what is computed, nor the fingerprint.  ``spaces``: each
    parameter's memory space (default host); a body with effects returns a :class:`Body`."""
    where = spaces if spaces is not None else [DEFAULT_SPACE] * len(types)
    params = [
        param(i, f"_{i}", t.dtype, t.shape, sp)
        for i, (t, sp) in enumerate(zip(types, where, strict=True))
    ]
    built = _body_parts(body(params))
    return Function(name, params, list(built.results), built.effects, built.declared)


def call(fn: Function, args: Sequence[Node], seq: int | None = None) -> list[Node]:
    """``fn(args)``: one ``call`` node per result of ``fn`` (the nodes of one call share a
    group, :func:`loop_group`, and run the callee once).  A callee that declares effects
    makes the call effectful: give ``seq`` (its position in the caller's program order) and
    list the ``result`` 0 node among the caller's effects."""
    extra: dict[str, Any] = {} if seq is None else {"seq": seq}
    return [
        make_node(Op.CALL, args, {"body": fn, "result": k, **extra}) for k in range(len(fn.results))
    ]


def _close(
    holders: list[Node], results: list[Node], built: Body | None = None
) -> tuple[list[Node], Function]:
    """The captured outer values and the closed body (see :func:`loop`)."""
    varying = set(map(id, holders))
    constant: set[int] = set()
    captures: dict[int, Node] = {}
    effects = list(built.effects or ()) if built is not None else []  # its own, never derived
    order = topo_order([*effects, *results])
    # the body's own effects (and their loop or call siblings) stay in it, never hoisted; an
    # outer effectful value the body only reads is captured like any other outer value
    mine = set(map(id, effects))
    groups = {loop_group(e) for e in effects if e.op in REGION_OPS}
    for n in order:
        if n.op is Op.PARAM:
            continue
        if any(id(i) in varying for i in n.inputs) or _own_effect(n, mine, groups):
            varying.add(id(n))
        elif is_effectful(n):  # an outer effect, even of constants alone: captured
            continue
        elif n.op in (Op.CONST, Op.IOTA) or all(id(i) in constant for i in n.inputs):
            constant.add(id(n))
    for n in [*order, *results]:  # captured: outer values a varying node (or a result) uses
        uses = n.inputs if id(n) in varying else ()
        for x in [*uses, *([n] if n in results else [])]:
            if id(x) not in varying and id(x) not in constant and id(x) not in captures:
                captures[id(x)] = x
    k = len(holders)
    params = [param(i, f"_{i}", h.dtype, h.shape) for i, h in enumerate(holders)]
    params += [param(k + j, f"_{k + j}", c.dtype, c.shape) for j, c in enumerate(captures.values())]
    new: dict[int, Node] = {id(h): p for h, p in zip(holders, params, strict=False)}
    new.update({i: p for i, p in zip(captures, params[k:], strict=True)})
    for n in order:
        if id(n) in varying and id(n) not in new:
            ins = tuple(new.get(id(i), i) for i in n.inputs)
            new[id(n)] = Node(n.op, n.type, ins, n.attr_items)
    # Function() refuses a placeholder left in the body (a parameter it does not declare)
    closed = Function(
        "body",
        params,
        [new.get(id(r), r) for r in results],
        [new.get(id(e), e) for e in effects],
        built.declared if built is not None else None,
    )
    return list(captures.values()), closed


def _own_effect(n: Node, mine: set[int], groups: set[tuple[Any, ...]]) -> bool:
    """Whether ``n`` is one of a body's own effects, or a sibling of one."""
    return id(n) in mine or (bool(groups) and n.op in REGION_OPS and loop_group(n) in groups)


@dataclass(frozen=True)
class Provenance:
    """How an optimised graph was made: the pass pipeline (``name@version`` per pass, in
    order) and, per export, the fingerprint of the function before any pass ran (the *source
    fingerprint*, which keys reports; the graph's own fingerprints are the optimised ones)."""

    pipeline: tuple[str, ...]
    source: tuple[bytes, ...]  # one region hash per export, in export order


class Graph:
    """Named exported functions, in a fixed order (and, once optimised, their provenance)."""

    __slots__ = ("functions", "provenance")

    def __init__(self, functions: Iterable[Function], provenance: Provenance | None = None) -> None:
        self.functions: dict[str, Function] = {}
        for f in functions:
            if f.name in self.functions:
                raise IRError(f"duplicate export '{f.name}'")
            self.functions[f.name] = f
        if provenance is not None and len(provenance.source) != len(self.functions):
            raise IRError("provenance needs one source fingerprint per export")
        self.provenance = provenance

    def source_fingerprints(self) -> dict[str, str]:
        """Export name -> fingerprint before optimisation (the graph's own if it has none)."""
        if self.provenance is None:
            return {name: f.fingerprint for name, f in self.functions.items()}
        return {
            name: h.hex() for name, h in zip(self.functions, self.provenance.source, strict=True)
        }

    def with_provenance(self, source: Graph, pipeline: Sequence[str]) -> Graph:
        """This graph, recorded as ``source`` after ``pipeline`` (pipelines compose)."""
        before = source.provenance.pipeline if source.provenance is not None else ()
        hashes = [bytes.fromhex(source.source_fingerprints()[name]) for name in self.functions]
        return Graph(self.functions.values(), Provenance((*before, *pipeline), tuple(hashes)))

    @property
    def hash(self) -> bytes:
        body = _u32(len(self.functions)) + b"".join(
            enc_str(name) + f.region_hash for name, f in self.functions.items()
        )
        return hashlib.sha3_256(DOMAIN_GRAPH + body).digest()

    def only(self, name: str) -> Graph:
        prov = self.provenance
        if prov is not None:
            i = list(self.functions).index(name)
            prov = Provenance(prov.pipeline, (prov.source[i],))
        return Graph([self.functions[name]], prov)


class FunctionBuilder:
    """Programmatic construction: ``b = FunctionBuilder("f"); x = b.param("x", DType.F32, [4])``,
    ``y = b.op("add", x, x)``, ``fn = b.build(y)``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.params: list[Node] = []

    def param(self, name: str, dtype: DType, shape: Sequence[int] = ()) -> Node:
        p = param(len(self.params), name, dtype, shape)
        self.params.append(p)
        return p

    def op(self, op: Op | str, *inputs: Node, **attrs: Any) -> Node:
        return make_node(op, inputs, attrs)

    def const(self, value: Any, dtype: DType, shape: Sequence[int] = ()) -> Node:
        return const(value, dtype, shape)

    def build(self, *results: Node) -> Function:
        return Function(self.name, self.params, results)


def dtype_by_code(code: int) -> DType:
    try:
        return BY_CODE[code]
    except KeyError:
        raise IRError(f"unknown dtype code {code}") from None


__all__ = [
    "Body",
    "DType",
    "Function",
    "FunctionBuilder",
    "Graph",
    "IRError",
    "Node",
    "Op",
    "Provenance",
    "Region",
    "TensorType",
    "TypeRuleError",
    "call",
    "callee",
    "canonical_type",
    "const",
    "const_bytes",
    "const_value",
    "infer_type",
    "is_effectful",
    "loop",
    "loop_body",
    "loop_group",
    "make_node",
    "param",
    "param_space",
    "space_of",
    "spaces_of",
    "start_pieces",
    "start_vector",
    "sweep",
    "topo_order",
    "transfer",
]
