"""Findings point at the source: each case's ``export fn`` position, the first diverging node
of a divergence (found by running the function truncated at its nodes, keracheck/localise.py)
and the source position of the ``let`` that built it, in every text-like format; mismatch rows
carry decimal values and the inputs at that element.

The planted targets are written to a plugin file per test: ``mulup`` computes every ``mul`` one
ulp up (so the first ``mul`` of a function is its first diverging node), ``shy`` flips the bits
of every output but fails on any function smaller than the case (its truncations never run).
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kera import frontend, keg
from kera.dtypes import DType
from kera.ir import FunctionBuilder, Graph
from kera.ops import Op
from keracheck import localise
from keracheck.cli import main
from keracheck.collect import compile_file, export_positions, make_case
from keracheck.compare import decimal, hex_bits
from keracheck.document import input_elements
from keracheck.formats import render
from keracheck.options import Options

PLUGIN = """
import numpy as np
from kera.interp import interpret
from kera.ops import Op
from kera.semantics import SEMANTICS

ALL = frozenset(o.value for o in Op)


def _mul_up(node, a, b):
    r = SEMANTICS[Op.MUL](node, a, b)
    return np.nextafter(r, np.array(np.inf, r.dtype)).astype(r.dtype)


class _Base:
    api_version = 1

    def available(self):
        return None

    def supported_ops(self):
        return ALL


class MulUp(_Base):
    name = "mulup"

    def run(self, fn, inputs):
        return interpret(fn, inputs, overrides={"mul": _mul_up})


class Shy(_Base):
    name = "shy"

    def run(self, fn, inputs):
        if len(fn.nodes()) < 8:
            raise RuntimeError("too small to run")
        outs = [o.copy() for o in interpret(fn, inputs)]
        for o in outs:
            o.view(np.uint32)[...] ^= 1
        return outs
"""

# line 6, column 1: the export; line 8, column 13: the first mul (let b).  The second mul
# (let c) also differs while its operands agree, but comes later in the canonical order.
SOURCE = """// scaled: the first mul is the first node a mul bug shows in
fn twice(v: f32[4]) -> f32[4] {
    v + v
}

export fn scaled(x: f32[4], y: f32[4]) -> f32[4] {
    let a = twice(x) - y;
    let b = a * 2.0;
    let c = y * y;
    (b + c) - x
}

export fn clean(x: f32[4]) -> f32[4] { x + x }
"""


def _corpus(tmp_path: Path) -> tuple[Path, str]:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "f.kera").write_text(SOURCE)
    b = FunctionBuilder("graph")
    x, y = b.param("x", DType.F32, [4]), b.param("y", DType.F32, [4])
    keg.dump(Graph([b.build(b.op("add", b.op("mul", x, y), x))]), str(corpus / "g.keg"))
    plugins = tmp_path / "planted_here.py"
    plugins.write_text(PLUGIN)
    return corpus, str(plugins)


def _run(tmp_path: Path, corpus: Path, *args: str) -> tuple[int, dict[str, Any]]:
    out = tmp_path / "run.json"
    argv = ["run", str(corpus), "-q", "--no-cache", "--targets", "ref", "--inputs", "16"]
    code = main([*argv, *args, "--format", "json", "--output", str(out)])
    return code, json.loads(out.read_text())


def _case(doc: dict[str, Any], function: str) -> dict[str, Any]:
    return next(c for c in doc["cases"] if c["function"] == function)


# ------------------------------------------------------------------------------ source positions


def test_export_positions_are_the_export_keyword() -> None:
    text = b"// note\nfn helper(a: f32) -> f32 { a }\n\n  export fn f(a: f32) -> f32 { a }\n"
    text += b"export fn g(a: f32) -> f32 { a }\nexport fn f(a: f32) -> f32 { a }\n"
    positions = export_positions(text)
    assert {k: (p.line, p.column) for k, p in positions.items()} == {"f": (4, 3), "g": (5, 1)}


def test_node_places_leave_fingerprints_alone() -> None:
    graph = frontend.compile_source(SOURCE).graph
    assert graph is not None
    fn = graph.functions["scaled"]
    places = localise.node_places(SOURCE.encode(), "scaled", fn.fingerprint)
    muls = [n for n in fn.nodes() if n.op is Op.MUL]
    assert [(places[n.hash].line, places[n.hash].column, places[n.hash].let) for n in muls] == [
        (8, 13, "b"),
        (9, 13, "c"),
    ]
    # places come back only when the rebuild (side table on) gives the very same function
    assert all(n.hash in places for n in fn.nodes())
    assert localise.node_places(SOURCE.encode(), "scaled", "0" * 64) == {}  # source changed


# ------------------------------------------------------------------------------ localisation


def test_first_diverging_node_and_locations_in_every_format(tmp_path: Path) -> None:
    corpus, plugins = _corpus(tmp_path)
    code, doc = _run(tmp_path, corpus, "--backend-plugin", f"{plugins}:MulUp")
    assert code == 1
    path = str(corpus / "f.kera")
    scaled = _case(doc, "scaled")
    assert scaled["source"] == {"path": path, "line": 6, "column": 1}
    (d,) = scaled["divergences"]
    node = d["firstNode"]
    assert (node["op"], node["line"], node["column"], node["let"]) == ("mul", 8, 13, "b")
    assert set(node["classes"]) == {"ulp(1)"}
    fn = compile_file(path).functions["scaled"]
    first_mul = next(n for n in fn.nodes() if n.op is Op.MUL)
    assert fn.nodes()[node["index"]] is first_mul and node["type"] == "f32[4]"
    graph_case = _case(doc, "graph")
    assert graph_case["source"] is None  # a .keg has no source
    (g,) = graph_case["divergences"]
    assert g["firstNode"]["op"] == "mul" and g["firstNode"]["line"] is None

    text = render("text", doc)
    assert f"\n{path}:6:1: KC001 bit-divergence: ref vs mulup, output 0:" in text
    assert f"first differing node: %{node['index']} mul (let b) at {path}:8:13, f32[4]" in text
    assert "(a .keg graph has no source positions)" in text
    assert re.search(rf"\n{re.escape(str(corpus / 'g.keg'))}: KC001 ", text)

    sarif = json.loads(render("sarif", doc))["runs"][0]["results"]
    result = next(r for r in sarif if r["properties"]["fingerprint"] == scaled["fingerprint"])
    region = result["locations"][0]["physicalLocation"]["region"]
    assert region == {"startLine": 6, "startColumn": 1}
    (related,) = result["relatedLocations"]
    assert related["physicalLocation"]["region"] == {"startLine": 8, "startColumn": 13}
    assert (
        f"First differing node: %{node['index']} mul (let b) at {path}:8:13"
        in (result["message"]["text"])
    )
    keg_result = next(
        r for r in sarif if r["properties"]["fingerprint"] == graph_case["fingerprint"]
    )
    assert "region" not in keg_result["locations"][0]["physicalLocation"]

    lines = render("github", doc, step_summary=None).splitlines()
    assert any(line.startswith(f"::error file={path},line=6,col=1,title=KC001") for line in lines)
    assert any(f"(let b) at {path}:8:13" in line for line in lines)  # messages keep ':'

    root = ET.fromstring(render("junit", doc))
    failure = next(
        c.find("failure")
        for c in root.iter("testcase")
        if c.get("classname") == "keracheck.mulup" and "scaled" in (c.get("name") or "")
    )
    assert failure is not None and f"{path}:6:1: KC001" in (failure.text or "")
    assert f"at {path}:8:13" in (failure.text or "")


def test_no_localise_skips_the_search(tmp_path: Path) -> None:
    corpus, plugins = _corpus(tmp_path)
    code, doc = _run(tmp_path, corpus, "--backend-plugin", f"{plugins}:MulUp", "--no-localise")
    assert code == 1
    (d,) = _case(doc, "scaled")["divergences"]
    assert "firstNode" not in d and "firstNodeNote" not in d
    assert "first differing node" not in render("text", doc)
    assert _case(doc, "scaled")["source"]["line"] == 6  # positions do not need the search


def test_unlocalised_divergences_say_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    corpus, plugins = _corpus(tmp_path)
    (corpus / "g.keg").unlink()
    monkeypatch.setattr(localise, "MAX_PROBES", 1)  # the first mul is the 3rd inner node
    args = ["--backend-plugin", f"{plugins}:MulUp", "--backend-plugin", f"{plugins}:Shy"]
    _, doc = _run(tmp_path, corpus, *args)
    records = {d["targets"][1]: d for d in _case(doc, "scaled")["divergences"]}
    assert "firstNode" not in records["mulup"]
    assert records["mulup"]["firstNodeNote"].startswith("not localised: the first 1 of the ")
    assert "firstNode" not in records["shy"]
    assert records["shy"]["firstNodeNote"] == (
        "not localised: the truncated functions did not run on shy"
    )
    assert "first differing node: not localised: the first 1 of" in render("text", doc)


# ------------------------------------------------------------------------------ values and inputs


def test_examples_carry_decimal_values_and_inputs(tmp_path: Path) -> None:
    corpus, plugins = _corpus(tmp_path)
    _, doc = _run(tmp_path, corpus, "--backend-plugin", f"{plugins}:MulUp")
    (d,) = _case(doc, "scaled")["divergences"]
    example = d["examples"][0]
    for target, bits in example["bits"].items():
        value = np.array([int(bits, 16)], dtype=np.uint32).view(np.float32)[0]
        assert example["values"][target] == str(value)
    assert set(example["inputs"]) == {"x", "y"}
    row = example["index"]
    assert all(e["index"] == row for e in example["inputs"].values())
    assert re.fullmatch(r"0x[0-9a-f]{8}", example["inputs"]["x"]["hex"])
    text = render("text", doc)
    x = example["inputs"]["x"]
    assert f"x={x['hex']} ({x['value']})" in text
    assert re.search(r"ref value\s+mulup value", text)


def test_input_elements_follow_broadcasting() -> None:
    b = FunctionBuilder("f")
    x = b.param("x", DType.F32, [2, 3])
    row = b.param("row", DType.F32, [3])
    col = b.param("col", DType.F32, [2, 1])
    s = b.param("s", DType.I32, [])
    other = b.param("other", DType.F32, [5])
    fn = b.build(b.op("add", x, x))
    case = make_case("f.kera", fn, Options(n=4))
    got = input_elements(case, 0, [3, 1, 2])
    assert {k: v["index"] for k, v in got.items()} == {
        "x": [3, 1, 2],
        "row": [3, 2],
        "col": [3, 1, 0],
        "s": [3],
    }  # 'other' (f32[5]) does not broadcast to f32[2, 3]: left out
    value = case.inputs["s"][3]
    assert got["s"] == {"index": [3], "hex": hex_bits(value), "value": str(int(value))}
    assert input_elements(case, 0, [3, 1]) == {}  # an index of the wrong rank
    del row, col, s, other


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (np.float32(0.1), "0.1"),
        (np.float32(-0.0), "-0.0"),
        (np.float32(np.nan), "nan"),
        (np.float64(-np.inf), "-inf"),
        (np.float16(0.1), "0.1"),
        (np.uint64(2**64 - 1), "18446744073709551615"),
        (np.int8(-5), "-5"),
        (np.bool_(True), "true"),
    ],
)
def test_decimal_is_the_shortest_round_trip(value: np.generic, text: str) -> None:
    assert decimal(value) == text
    if value.dtype.kind == "f" and text != "nan":
        assert np.array(text, dtype=value.dtype) == value  # reads back to the same float
