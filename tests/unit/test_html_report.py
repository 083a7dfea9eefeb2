"""The HTML report's pictures (keracheck/formats/svg.py), the ``elements`` record they draw
(keracheck/mismatch_map.py) and the page around them (keracheck/formats/html.py), read back
with ``html.parser`` and ``xml.etree``.  ``report_run`` is also what
tests/toolchain/test_html_chromium.py renders in a real browser."""

from __future__ import annotations

import copy
import hashlib
import json
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from keracheck import mismatch_map
from keracheck.formats import html, svg

SCHEMAS = Path(__file__).resolve().parents[2] / "keracheck" / "schemas"
SOURCE = """\
// Each row divided by its sum.
export fn normalise(x: f32[6, 16]) -> f32[6, 16] {
    let s = sum(x, axis = 1); /* { not a brace */
    x / broadcast(reshape(s, shape = [6, 1]), shape = [6, 16])
}

export fn other(x: f32[4]) -> f32[4] { x }
"""


# ------------------------------------------------------------------------------ a sample run


def _rows_differ(shape: tuple[int, ...], rows: list[int]) -> tuple[np.ndarray[Any, Any], ...]:
    """Two f32 arrays of ``shape`` whose 2-D view differs by 1 ulp in whole ``rows``."""
    a = np.linspace(1, 2, num=int(np.prod(shape)), dtype=np.float32).reshape(shape)
    b = a.copy()
    view = b.reshape(-1, shape[-1]).view(np.uint32)
    view[rows] += 1
    return a, b


def _case(name: str, verdict: str, n: int = 64) -> dict[str, Any]:
    fp = hashlib.sha3_256(name.encode()).hexdigest()
    ok = {
        "status": "ok",
        "outputs": [{"index": 0, "dtype": "f32", "shape": [n, 6, 16], "sha256": "0" * 64}],
    }
    return {
        "fingerprint": fp,
        "path": "layers.kera",
        "function": name,
        "verdict": verdict,
        "keg": {"sha3_256": fp, "sha256": "1" * 64, "size": 10},
        "inputs": {"seed": 0, "n": n, "source": "generated"},
        "targets": {"ref": dict(ok), "cpu": copy.deepcopy(ok)},
        "divergences": [],
        "repro": f"keracheck repro {fp} layers.kera --targets ref,cpu",
    }


def report_run(agreeing: int = 3) -> dict[str, Any]:
    """One case whose output [64, 6, 16] differs in 300 whole rows of 16 (4,800 elements: more
    than the 256 kept), a case that errs, and ``agreeing`` agreeing cases."""
    a, b = _rows_differ((64, 6, 16), list(range(0, 384, 2))[:150] + list(range(1, 300, 2)))
    diverge = _case("normalise", "diverge")
    diverge["source"] = {"path": "layers.kera", "line": 2, "column": 1}
    [record] = mismatch_map.divergences([a], [b], ("ref", "cpu"), ("ref", "cpu"), "diverge")
    record["firstNode"] = {"op": "sum", "index": 1, "type": "f32[6]", "line": 3, "column": 13}
    record["firstNode"] |= {"let": "s", "classes": {"ulp(1)": 150}}
    diverge["divergences"] = [record]
    error = _case("crash <&>", "error")
    error["targets"]["cpu"] = {"status": "error", "message": "gcc: <boom> & more"}
    agree = [_case(f"agree{i}", "agree") for i in range(agreeing)]
    cases = [*agree[:1], diverge, error, *agree[1:]]
    return {
        "schemaVersion": 1,
        "tool": {"name": "keracheck", "version": "0.1.0"},
        "run": {
            "startedOn": "2026-12-02T12:00:00Z",
            "finishedOn": "2026-12-02T12:00:05Z",
            "seed": 0,
            "inputs": 64,
            "targets": ["ref", "cpu"],
            "repeat": 1,
            "command": "keracheck run layers.kera",
        },
        "summary": {
            "cases": len(cases),
            "agree": agreeing,
            "diverge": 1,
            "error": 1,
            "skipped": 0,
            "baselined": 0,
            "exitCode": 1,
        },
        "targets": [{"id": "ref", "available": True}, {"id": "cpu", "available": True}],
        "cases": cases,
    }


# --------------------------------------------------------------------------- a DOM, roughly


class Node:
    def __init__(self, tag: str, attrs: dict[str, str], parent: Node | None) -> None:
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list[Node] = []
        self.parts: list[Node | str] = []  # text and children in document order

    def all(self, tag: str, cls: str | None = None) -> list[Node]:
        found = []
        for child in self.children:
            if child.tag == tag and (cls is None or cls in child.attrs.get("class", "").split()):
                found.append(child)
            found += child.all(tag, cls)
        return found

    def content(self) -> str:
        return "".join(p if isinstance(p, str) else p.content() for p in self.parts)


VOID = {"meta", "br", "link", "img", "input", "hr"}  # SVG elements close with "/>"


class Dom(HTMLParser):
    """A tree of the page (html.parser keeps SVG's self-closing elements as void)."""

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {}, None)
        self.at = self.root
        self.feed(page)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs}, self.at)
        self.at.children.append(node)
        self.at.parts.append(node)
        if tag not in VOID:
            self.at = node

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs}, self.at)
        self.at.children.append(node)
        self.at.parts.append(node)

    def handle_endtag(self, tag: str) -> None:
        node: Node | None = self.at
        while node is not None and node.tag != tag:
            node = node.parent
        assert node is not None and node.parent is not None, f"unbalanced </{tag}>"
        self.at = node.parent

    def handle_data(self, data: str) -> None:
        self.at.parts.append(data)


def dom(page: str) -> Node:
    return Dom(page).root


# ------------------------------------------------------------------------------------ svg.py


def _xml(picture: str) -> ET.Element:
    """Parse one picture as XML: well-formed, with every text escaped."""
    return ET.fromstring(picture)


def test_heatmap_draws_whole_rows_as_one_run_each() -> None:
    counts = [[1] * 16 if r in (2, 5) else [0] * 16 for r in range(8)]
    counts[7][3] = 1
    root = _xml(svg.heatmap(counts, (8, 16), (1, 1), (2, 4, 16), label="a <b> & c"))
    assert root.tag == "svg" and root.get("role") == "img"
    assert float(root.get("width", 0)) > 16 * svg.CELL_MIN and float(root.get("height", 0)) > 0
    assert root.get("aria-label") == "a <b> & c" and root.findtext("title") == "a <b> & c"
    tips = [t.text or "" for t in root.iter("title")][1:]
    assert "row 2, columns 0\u201315: every element differs" in tips
    assert "element [1, 3, 3] (row 7, column 3) differs" in tips
    shaded = [r for r in root.iter("rect") if r.get("fill") == svg.shade(1.0)]
    assert len(shaded) == 3 + 1  # rows 2 and 5, the cell of row 7, the legend's swatch


def test_heatmap_binning_shades_by_share_and_checks_the_counts() -> None:
    # 5 x 3 grid in bins of 2 x 2: cells 3 x 2, the last row and column partial
    counts = [[4, 1], [0, 0], [2, 1]]
    root = _xml(svg.heatmap(counts, (5, 3), (2, 2)))
    tips = [t.text for t in root.iter("title")]
    assert "rows 0\u20131, columns 0\u20131: 4 of 4 elements differ" in tips
    assert "rows 4, columns 2: 1 of 1 elements differ" in tips
    assert "rows 4, columns 0\u20131: 2 of 2 elements differ" in tips
    assert any("share of a cell" in (t.text or "") for t in root.iter("text"))
    with pytest.raises(ValueError, match="not 3 x 2 cells"):
        svg.heatmap([[1, 1]], (5, 3), (2, 2))
    with pytest.raises(ValueError, match="must be positive"):
        svg.heatmap([[1]], (0, 3), (1, 1))


def test_shades_grow_with_the_share_and_zero_is_the_agree_colour() -> None:
    assert svg.shade(0) == svg.AGREE
    reds = [int(svg.shade(s)[1:3], 16) for s in (0.01, 0.5, 1.0)]
    assert reds == sorted(reds, reverse=True)  # darker as more differ


def test_histogram_writes_each_count_and_escapes_labels() -> None:
    root = _xml(svg.histogram([("ulp(1)", 12_345, "#000"), ("<x>", 0, "#111")]))
    texts = [t.text for t in root.iter("text")]
    assert texts == ["ulp(1)", "12,345", "<x>", "0"]
    widths = [float(r.get("width", -1)) for r in root.iter("rect")]
    assert widths == [svg.BAR_WIDTH, 0.0]
    with pytest.raises(ValueError):
        svg.histogram([])


def test_bit_strip_has_a_column_per_bit_and_names_the_fields() -> None:
    counts = [1] + [0] * 30 + [7]  # the sign and the last mantissa bit
    fields = (("sign", 1), ("exponent", 8), ("mantissa", 23))
    root = _xml(svg.bit_strip(counts, fields, 8))
    tips = [t.text or "" for t in root.iter("title")]
    assert "bit 31 (sign): differs in 1 of 8" in tips
    assert "bit 0 (mantissa bit 0): differs in 7 of 8" in tips
    assert "bit 23 (exponent bit 0): differs in 0 of 8" in tips
    assert len([t for t in tips if t.startswith("bit ")]) == 32
    labels = {t.text for t in root.iter("text")}
    assert {"exponent", "mantissa", "31", "30", "22", "0"} <= labels
    assert svg.field_of(fields, 1) == "exponent bit 7"
    with pytest.raises(ValueError, match="do not cover 31 bits"):
        svg.bit_strip(counts[1:], fields, 8)


def test_unravel_matches_numpy() -> None:
    for flat in (0, 17, 95, 1234):
        assert svg.unravel(flat, (5, 4, 3, 22)) == list(np.unravel_index(flat, (5, 4, 3, 22)))
    assert svg.unravel(0, ()) == []


# ----------------------------------------------------------------------------- mismatch_map


def test_elements_record_counts_every_mismatch_and_bins_tall_grids() -> None:
    a, b = _rows_differ((64, 6, 16), [0, 5, 383])
    record = mismatch_map.element_detail(a, b, ("ref", "cpu"))
    assert record is not None
    assert record["grid"] == [384, 16] and record["bin"] == [3, 1]
    assert len(record["counts"]) == 128 and {len(r) for r in record["counts"]} == {16}
    assert sum(map(sum, record["counts"])) == 3 * 16
    assert record["counts"][0] == [1] * 16 and record["counts"][1] == [1] * 16
    xor = (a.view(np.uint32) ^ b.view(np.uint32)).reshape(-1)
    per_bit = [int(((xor >> (31 - k)) & 1).sum()) for k in range(32)]
    assert record["bitCounts"] == per_bit and per_bit[-1] == 48  # +1 ulp: bit 0, and carries
    assert record["list"][0] == [0, "ulp(1)", "0x3f800000", "0x3f800001"]
    assert [e[0] for e in record["list"]][:17] == [*range(16), 5 * 16]


def test_elements_record_is_bounded_and_absent_when_equal() -> None:
    a = np.zeros((1000, 1000), dtype=np.int32)
    b = a + 1
    record = mismatch_map.element_detail(a, b, ("ref", "cpu"))
    assert record is not None
    assert record["bin"] == [8, 16] and len(record["counts"]) == 125
    assert len(record["list"]) == mismatch_map.LIST_CAP and record["list"][0][1] == "int"
    assert record["bitCounts"] == [0] * 31 + [1_000_000] and record["dtype"] == "i32"
    assert mismatch_map.element_detail(a, a.copy(), ("ref", "cpu")) is None
    assert mismatch_map.grid_shape(()) == (1, 1) and mismatch_map.grid_shape((7,)) == (1, 7)


def test_divergences_keep_compares_records_and_add_elements() -> None:
    a, b = _rows_differ((4, 3), [1])
    shape = np.zeros((2,), dtype=np.float32)
    found = mismatch_map.divergences([a, a, a], [b, a, shape], ("r", "c"), ("r", "c"), "diverge")
    assert [d["output"] for d in found] == [0, 2]
    assert found[0]["elements"]["names"] == ["r", "c"] and found[0]["mismatched"] == 3
    assert "elements" not in found[1] and found[1]["classes"] == {"shape-or-dtype": 1}


def test_report_run_matches_the_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema", reason="pip install jsonschema")
    referencing = pytest.importorskip("referencing", reason="pip install referencing")
    schemas = [json.loads((SCHEMAS / n).read_text()) for n in ("run-v1.json", "predicate-v1.json")]
    registry = referencing.Registry().with_resources(
        [(s["$id"], referencing.Resource.from_contents(s)) for s in schemas]
    )
    validator = jsonschema.Draft202012Validator(schemas[0], registry=registry)
    run = report_run()
    validator.validate(run)
    run["cases"][1]["divergences"][0]["elements"]["list"][0][2] = "3f80"
    assert not validator.is_valid(run)


# ----------------------------------------------------------------------------------- html.py


@pytest.fixture
def page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "layers.kera").write_text(SOURCE)
    return html.render(report_run())


def test_each_diverging_output_has_its_three_pictures(page: str) -> None:
    root = dom(page)
    [block] = root.all("div", "divergence")
    figures = {f.attrs["class"]: f for f in block.all("figure")}
    assert set(figures) == {"heatmap", "histogram", "bits"}
    for figure in figures.values():
        [picture] = figure.all("svg", "pic")
        assert int(picture.attrs["width"]) > 100 and int(picture.attrs["height"]) >= 20
        assert picture.attrs["aria-label"].endswith("ref vs cpu, output 0")
    caption = figures["heatmap"].all("figcaption")[0].content()
    assert "384 \u00d7 16 grid" in caption and "axis 0: the input vector" in caption
    assert "binned: each cell is 3 \u00d7 1 elements" in caption
    counts = report_run()["cases"][1]["divergences"][0]["elements"]["bitCounts"]
    top = 31 - next(k for k, n in enumerate(counts) if n)  # +1 ulp carries into higher bits
    assert f"highest differing bit is bit {top} (mantissa bit {top})" in figures["bits"].content()
    bars = [t.content() for t in figures["histogram"].all("text")]
    assert bars == ["ulp(1)", "4,800"]


def test_agreeing_cases_fold_into_a_closed_details(page: str) -> None:
    root = dom(page)
    [folded] = root.all("details", "folded")
    assert "open" not in folded.attrs
    assert folded.all("summary")[0].content() == "3 agreeing cases"
    rows = folded.all("tr")[1:]
    assert [r.attrs["id"] for r in rows] == [
        "case-" + hashlib.sha3_256(f"agree{i}".encode()).hexdigest() for i in range(3)
    ]
    assert len(root.all("section")) == 2  # the diverging and the failing case
    index = root.all("table")[2]  # counts, targets, then the index
    names = [a.content().split(":", 1)[1] for a in index.all("a")]
    assert names == ["normalise", "crash <&>"]  # worst first; the agreeing ones are folded


def test_all_kept_mismatches_are_reachable_and_the_rest_counted(page: str) -> None:
    root = dom(page)
    [block] = root.all("div", "divergence")
    first = block.all("table")[0]
    assert len(first.all("tr")) == 1 + 8  # header + the recorded examples
    [more] = block.all("details", "more")
    assert "open" not in more.attrs
    assert more.all("summary")[0].content() == "Mismatching elements 9\u2013256 of 4,800"
    rows = more.all("tr")[1:]
    assert len(rows) == 256 - 8
    a, _ = _rows_differ((64, 6, 16), [])
    bits = int(a.reshape(-1).view(np.uint32)[8])
    cells = [c.content() for c in rows[0].all("td")]
    assert cells == [
        "[0, 0, 8]",
        f"0x{bits:08x}",
        f"0x{bits + 1:08x}",
        str(a.flat[8]),
        str(np.uint32(bits + 1).view(np.float32)),
        "ulp(1)",
        "1",
    ]
    assert "4,544 more mismatching elements are not listed" in more.content()
    assert "the first 256 per output" in more.content()


def test_the_function_source_sits_next_to_its_findings(page: str) -> None:
    root = dom(page)
    [listing] = root.all("figure", "src")
    assert "layers.kera:2:1" in listing.all("figcaption")[0].content()
    lines = [s for s in listing.all("pre")[0].children if s.tag == "span"]
    numbers = [int(s.all("span", "ln")[0].content()) for s in lines]
    assert numbers == [1, 2, 3, 4, 5]  # the comment above, up to the closing brace
    marked = {
        int(s.all("span", "ln")[0].content()): s.attrs["title"]
        for s in lines
        if "hl" in s.attrs.get("class", "")
    }
    assert marked == {2: "export fn", 3: "first diverging node (ref vs cpu)"}
    node = root.all("p", "node")[0].content()
    assert node == (
        "First diverging node: sum (node 1, f32[6]) at line 3, column 13 (let s); there: ulp(1) 150"
    )


def test_source_is_read_only_from_the_kera_function_it_names(tmp_path: Path) -> None:
    (tmp_path / "layers.kera").write_text(SOURCE)
    (tmp_path / "secret.txt").write_text("export fn normalise\n")
    path = str(tmp_path / "layers.kera")
    assert html.function_source(path, 7, "other") == [(7, SOURCE.splitlines()[6])]
    assert html.function_source(path, 2, "other") is None  # not that function's line
    assert html.function_source(path, 99, "normalise") is None
    assert html.function_source(str(tmp_path / "secret.txt"), 1, "normalise") is None
    assert html.function_source(str(tmp_path / "gone.kera"), 1, "normalise") is None


def test_a_missing_source_or_record_degrades_to_a_note(tmp_path: Path) -> None:
    run = report_run()
    run["cases"][1]["source"]["path"] = str(tmp_path / "gone.kera")
    record = run["cases"][1]["divergences"][0]
    del record["firstNode"]
    record["firstNodeNote"] = "every node agrees when computed alone"
    record["elements"]["counts"] = [[1]]
    root = dom(html.render(run))
    notes = [p.content() for p in root.all("p", "na")]
    assert any(
        n.endswith("gone.kera:2:1: not readable where this page was rendered") for n in notes
    )
    assert any(n.startswith("picture not drawn: the record is malformed") for n in notes)
    assert "No first diverging node: every node agrees when computed alone" in notes
    assert {f.attrs["class"] for f in root.all("figure")} == {"histogram", "bits"}


def test_a_run_without_elements_still_gets_its_histogram() -> None:
    run = report_run()
    record = run["cases"][1]["divergences"][0]
    del record["elements"]
    root = dom(html.render(run))
    assert [f.attrs["class"] for f in root.all("figure")] == ["histogram"]
    assert not root.all("details", "more")


@pytest.mark.parametrize(
    ("status", "words"),
    [
        ("verified", "Signature verified"),
        ("signed", "Signed report (not verified on this page)"),
        ("unsigned", "Unsigned report"),
        ("failed", "Signature verification FAILED"),
    ],
)
def test_the_banner_says_only_what_is_true(status: str, words: str) -> None:
    signature = {"status": status, "keyid": "ab" * 32, "envelopes": 4, "failures": ["<bad>"]}
    root = dom(html.render(report_run(), signature=signature))
    [banner] = root.all("header")
    assert banner.attrs["class"] == f"sig sig-{status}"
    assert banner.content().startswith(words) and "4 envelopes" in banner.content()
    assert [li.content() for li in banner.all("li")] == ["<bad>"]


def test_an_unsigned_page_says_nothing_is_signed() -> None:
    [banner] = dom(html.render(report_run())).all("header")
    assert "nothing on this page is signed" in banner.content()
    assert "Verify offline" not in banner.content()


def test_the_page_stays_self_contained_and_escaped(page: str) -> None:
    assert "http://" not in page and "https://" not in page
    assert not re.search(r"<(script|link|img|iframe|object|foreignObject)\b", page)
    assert "xlink:href" not in page and "url(" not in page
    assert "crash &lt;&amp;&gt;" in page and "gcc: &lt;boom&gt; &amp; more" in page
    for picture in re.findall(r"<svg.*?</svg>", page, re.S):
        _xml(picture)  # every picture is well-formed XML too


def test_a_thousand_case_page_stays_small_and_folded() -> None:
    run = report_run(agreeing=1000)
    page = html.render(run)
    root = dom(page)
    [folded] = root.all("details", "folded")
    assert len(folded.all("tr")) == 1 + 1000
    assert len(root.all("section")) == 2
    assert len(page) < 1_000_000, len(page)


def test_decimal_reads_hex_per_dtype() -> None:
    assert html.decimal("0x3dcccccd", "f32") == "0.1"
    assert html.decimal("0x8000000000000000", "f64") == "-0.0"
    assert html.decimal("0x7fc00000", "f32") == "nan"
    assert (
        html.decimal("0xffffffff", "i32") == "-1"
        and html.decimal("0xffffffff", "u32") == "4294967295"
    )
    assert html.decimal("0x01", "bool") == "true"
    assert html.decimal("0x3f80", "f32") == "" and html.decimal("zz", "f32") == ""


def test_class_bars_follow_the_text_reports_grouping() -> None:
    few = html.class_bars({"nan-payload": 1, "ulp(7)": 2, "ulp(1)": 3})
    assert [(n, c) for n, c, _ in few] == [("nan-payload", 1), ("ulp(1)", 3), ("ulp(7)", 2)]
    spread = {f"ulp({d})": 1 for d in (1, 2, 3, 300, 70_000)}
    bars = [(n, c) for n, c, _ in html.class_bars({"signed-zero": 2, **spread})]
    assert bars == [
        ("signed-zero", 2),
        ("ulp(1)", 1),
        ("ulp(2-15)", 2),
        ("ulp(16-255)", 0),
        ("ulp(256-65535)", 1),
        ("ulp(>=65536)", 1),
    ]
