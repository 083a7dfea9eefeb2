"""The contract documents cannot fall behind the code.

* ``docs/semantics.md`` has a ``## <op>`` or ``### <op>`` section for every member of
  ``kera.ops.Op`` and no op section for anything else;
* each op section's ``**Dtypes:**`` line names exactly the dtypes ``kera.ops.infer`` accepts,
  its ``**Attributes:**`` line exactly the op's attribute schema (optional ones included), and the conversion pair lines
  of ``convert`` / ``bitcast`` exactly the pairs the typing rule allows;
* the canonical encodings block is the one documented in ``kera/ir.py``, and the ``.keg``
  layout block in ``docs/keg-format.md`` the one in ``kera/keg.py``;
* the worked ``.keg`` example (code, text form, hex dump and field-by-field listing) is what
  the code produces today.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import kera.ir
import kera.keg
from kera.dtypes import CANONICAL_NAN, DType
from kera.ops import ARITY, ATTRS, OPTIONAL_ATTRS, SPACES, Op, TensorType, TypeRuleError, infer
from kera.text import graph_text

DOCS = Path(__file__).resolve().parents[2] / "docs"
SEMANTICS = (DOCS / "semantics.md").read_text(encoding="utf-8")
KEG_FORMAT = (DOCS / "keg-format.md").read_text(encoding="utf-8")
HEADING = re.compile(r"^(#{1,3}) (.+?)\s*$", re.MULTILINE)
DTYPE_NAMES = {dt.value for dt in DType}
_SPACE_NAMES = set(SPACES)


def sections(text: str) -> dict[str, str]:
    """Heading title -> body up to the next heading (``#`` to ``###``)."""
    marks = list(HEADING.finditer(text))
    ends = [m.start() for m in marks[1:]] + [len(text)]
    return {m.group(2): text[m.end() : end] for m, end in zip(marks, ends, strict=True)}


def op_headings(text: str) -> list[str]:
    """``###`` headings between ``# The ops`` and the next top-level heading."""
    part = text.split("\n# The ops\n", 1)[1].split("\n# ", 1)[0]
    return re.findall(r"^### (.+?)\s*$", part, re.MULTILINE)


def field(body: str, name: str) -> str:
    found = re.findall(rf"^- \*\*{re.escape(name)}:\*\*(.*)$", body, re.MULTILINE)
    assert len(found) == 1, f"expected one '**{name}:**' line, found {len(found)}"
    return str(found[0])


SECTIONS = sections(SEMANTICS)


# ------------------------------------------------------------------------- coverage


@pytest.mark.parametrize("op", list(Op), ids=str)
def test_every_op_has_a_section(op: Op) -> None:
    assert op.value in SECTIONS, f"docs/semantics.md has no '### {op.value}' section"


def test_op_sections_name_only_ops() -> None:
    names = op_headings(SEMANTICS)
    assert sorted(names) == sorted(op.value for op in Op)


# ------------------------------------------------------------------------- dtypes


def _t(dt: DType, *shape: int) -> TensorType:
    return TensorType(dt, shape)


Probe = tuple[list[TensorType], dict[str, Any]]


def _reduce_probe(dt: DType) -> Probe:
    return [_t(dt, 4)], {"axis": 0}


# op -> (operand types, attributes) that the typing rule accepts for dtype ``dt`` if the op is
# defined on it; the default is ARITY copies of a dt[4] vector with no attributes
PROBES: dict[Op, Callable[[DType], Probe]] = {
    Op.SELECT: lambda dt: ([_t(DType.BOOL, 4), _t(dt, 4), _t(dt, 4)], {}),
    **dict.fromkeys((Op.SUM, Op.PROD, Op.AMIN, Op.AMAX), _reduce_probe),
    Op.MATMUL: lambda dt: ([_t(dt, 2, 3), _t(dt, 3, 2)], {}),
    Op.BROADCAST: lambda dt: ([_t(dt, 1)], {"shape": (4,)}),
    Op.RESHAPE: lambda dt: ([_t(dt, 4)], {"shape": (2, 2)}),
    Op.TRANSPOSE: lambda dt: ([_t(dt, 2, 3)], {"perm": (1, 0)}),
    Op.SLICE: lambda dt: ([_t(dt, 4)], {"start": (0,), "stop": (2,)}),
    Op.CONCAT: lambda dt: ([_t(dt, 4), _t(dt, 4)], {"axis": 0}),
    Op.IOTA: lambda dt: ([], {"shape": (4,), "axis": 0, "to": dt}),
    Op.DYNAMIC_SLICE: lambda dt: ([_t(dt, 4), _t(DType.I32, 1)], {"size": (2,)}),
    Op.DYNAMIC_UPDATE_SLICE: lambda dt: ([_t(dt, 4), _t(dt, 2), _t(DType.I32, 1)], {}),
    Op.LOOP: lambda dt: _loop_probe(dt),
    Op.CALL: lambda dt: _call_probe(dt),
    Op.TRANSFER: lambda dt: ([_t(dt, 4)], {"from": "host", "to": "device", "seq": 0}),
}


def _loop_probe(dt: DType) -> Probe:
    """A loop carrying one dt[4] value through an identity body."""
    init = kera.ir.param(0, "x", dt, [4])
    node = kera.ir.loop(0, 2, [init], lambda i, c: c)[0]
    return [init.type], node.attrs


def _call_probe(dt: DType) -> Probe:
    """A call of an identity callee on one dt[4] value."""
    fn = kera.ir.callee("g", [_t(dt, 4)], lambda ps: ps)
    node = kera.ir.call(fn, [kera.ir.param(0, "x", dt, [4])])[0]
    return [node.inputs[0].type], node.attrs


def _accepts(op: Op, dt: DType) -> bool:
    if op is Op.PARAM:
        return kera.ir.param(0, "p", dt, [4]).dtype is dt
    if op is Op.CONST:
        return kera.ir.const_bytes(bytes(4 * dt.nbytes), dt, (4,)).dtype is dt
    if op in (Op.CONVERT, Op.BITCAST):
        return any(_pair_ok(op, dt, to) for to in DType)
    types, attrs = PROBES[op](dt) if op in PROBES else ([_t(dt, 4)] * ARITY[op], {})
    try:
        infer(op, types, attrs)
    except TypeRuleError:
        return False
    return True


def _pair_ok(op: Op, src: DType, dst: DType) -> bool:
    try:
        infer(op, [_t(src, 4)], {"to": dst})
    except TypeRuleError:
        return False
    return True


def _names(line: str) -> set[str]:
    return set(re.findall(r"`([^`]+)`", line))


#: code that disagrees with the contract, reported to the lead; strict, so a fix shows up
KNOWN_GAPS: dict[Op, str] = {}


@pytest.mark.parametrize(
    "op",
    [
        pytest.param(op, marks=pytest.mark.xfail(strict=True, reason=KNOWN_GAPS[op]))
        if op in KNOWN_GAPS
        else op
        for op in Op
    ],
    ids=str,
)
def test_documented_dtypes_are_the_typing_rule(op: Op) -> None:
    documented = _names(field(SECTIONS[op.value], "Dtypes"))
    assert documented <= DTYPE_NAMES, f"unknown dtype names {documented - DTYPE_NAMES}"
    accepted = {dt.value for dt in DType if _accepts(op, dt)}
    assert documented == accepted


@pytest.mark.parametrize("op", list(Op), ids=str)
def test_documented_attributes_are_the_schema(op: Op) -> None:
    line = field(SECTIONS[op.value], "Attributes")
    schema = set(ATTRS.get(op, {})) | set(OPTIONAL_ATTRS.get(op, {}))
    assert _names(line) - _SPACE_NAMES == schema  # `space` values may be named on the line
    if not schema:
        assert line.strip() == "none"


def _pairs(line: str) -> set[tuple[str, str]]:
    found = re.findall(r"`(\w+)→(\w+)`", line)
    assert found, "no `src→dst` pairs on the line"
    return set(found)


def test_convert_rejects_exactly_the_documented_pairs() -> None:
    documented = _pairs(field(SECTIONS["convert"], "Rejected pairs"))
    rejected = {(s.value, d.value) for s in DType for d in DType if not _pair_ok(Op.CONVERT, s, d)}
    assert documented == rejected


def test_bitcast_accepts_exactly_the_documented_pairs() -> None:
    documented = _pairs(field(SECTIONS["bitcast"], "Accepted pairs"))
    accepted = {(s.value, d.value) for s in DType for d in DType if _pair_ok(Op.BITCAST, s, d)}
    assert documented == accepted


def test_canonical_nans_are_the_code_constants() -> None:
    for dt in (DType.F32, DType.F64):
        width = dt.bits // 4
        assert f"`0x{CANONICAL_NAN[dt]:0{width}X}`" in SEMANTICS


# ------------------------------------------------------------------------- layouts


def _docstring_block(doc: str | None) -> str:
    """The first literal (``::``) block of a module docstring, dedented."""
    assert doc is not None
    block = doc.split("::", 1)[1].split("\n\n")[1]
    return textwrap.dedent(block).strip("\n")


def _code_blocks(text: str) -> list[str]:
    return [b.strip("\n") for b in re.findall(r"^```[a-z]*\n(.*?)^```", text, re.M | re.S)]


def test_canonical_encodings_match_ir_docstring() -> None:
    assert _docstring_block(kera.ir.__doc__) in _code_blocks(SEMANTICS)


def test_keg_layout_matches_keg_docstring() -> None:
    assert _docstring_block(kera.keg.__doc__) in _code_blocks(KEG_FORMAT)


# ------------------------------------------------------------------------- worked example


def _worked_example() -> tuple[list[str], bytes, kera.ir.Graph]:
    part = KEG_FORMAT.split("\n## Worked example\n", 1)[1]
    blocks = _code_blocks(part)
    namespace: dict[str, Any] = {}
    exec(compile(blocks[0], "keg-format.md", "exec"), namespace)
    graph = namespace["graph"]
    return blocks, kera.keg.dumps(graph), graph


def test_worked_example_text_form() -> None:
    blocks, _, graph = _worked_example()
    assert blocks[1] == graph_text(graph).rstrip("\n")


def test_worked_example_hex_dump() -> None:
    blocks, data, _ = _worked_example()
    expected = "\n".join(
        f"{i:08x}  " + " ".join(f"{v:02x}" for v in data[i : i + 16])
        for i in range(0, len(data), 16)
    )
    assert blocks[2] == expected


def test_worked_example_field_listing_covers_the_file() -> None:
    blocks, data, graph = _worked_example()
    listed = bytearray()
    for line in blocks[3].splitlines():
        m = re.match(r"^([0-9a-f]{4})  ((?:[0-9a-f]{2} )*[0-9a-f]{2})", line)
        assert m is not None, f"not a listing line: {line!r}"
        assert int(m.group(1), 16) == len(listed), f"offset of {line!r}"
        listed += bytes.fromhex(m.group(2))
    assert bytes(listed) == data
    fingerprint = graph.functions["axpb"].fingerprint
    assert data[-32:].hex() == fingerprint
    assert kera.keg.dumps(kera.keg.loads(data)) == data
