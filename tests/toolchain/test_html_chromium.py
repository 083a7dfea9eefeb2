"""The HTML report in a real browser: headless Chromium (Debian's ``chromium``) screenshots it.

The PNG is decoded here (zlib plus PNG row unfiltering, no imaging library) far enough to
check that the page really painted: the signature banner at the top has the colour of its
status, and below it the page is not blank.
"""

from __future__ import annotations

import html as html_module
import importlib.util
import json
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from keracheck.formats import html

pytestmark = pytest.mark.toolchain

WIDTH, HEIGHT = 1200, 2000
BANNER = {"verified": (0xE6, 0xF6, 0xEA), "failed": (0xFD, 0xEC, 0xEA)}  # from html.CSS


def _sample_module() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "unit" / "test_formats.py"
    spec = importlib.util.spec_from_file_location("keracheck_sample_run", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("chromium not on PATH: apt-get install chromium")


def _screenshot(page: str, tmp_path: Path) -> bytes:
    source, shot = tmp_path / "report.html", tmp_path / "report.png"
    source.write_text(page, encoding="utf-8")
    argv = [
        _chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        f"--user-data-dir={tmp_path / 'profile'}",
        f"--screenshot={shot}",
        f"--window-size={WIDTH},{HEIGHT}",
        source.as_uri(),
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False)
    assert shot.exists(), f"no screenshot (exit {done.returncode}): {done.stderr[-2000:]}"
    return shot.read_bytes()


def _chunks(png: bytes) -> dict[bytes, bytes]:
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    chunks: dict[bytes, bytes] = {}
    offset = 8
    while offset < len(png):
        (length,) = struct.unpack(">I", png[offset : offset + 4])
        kind = png[offset + 4 : offset + 8]
        chunks[kind] = chunks.get(kind, b"") + png[offset + 8 : offset + 8 + length]
        offset += 12 + length
    return chunks


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else (b if pb <= pc else c)


def _unfilter(kind: int, row: bytearray, prior: bytes, bpp: int) -> bytearray:
    for i in range(len(row)):
        left = row[i - bpp] if i >= bpp else 0
        up, corner = prior[i], (prior[i - bpp] if i >= bpp else 0)
        predictor = (0, left, up, (left + up) // 2, _paeth(left, up, corner))[kind]
        row[i] = (row[i] + predictor) & 0xFF
    return row


def decode_rows(png: bytes, count: int) -> tuple[int, int, list[bytes]]:
    """Width, height and the first ``count`` rows of an 8-bit RGB/RGBA PNG, as raw pixels."""
    chunks = _chunks(png)
    width, height, depth, colour = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    assert depth == 8 and colour in (2, 6), f"unexpected PNG format {depth=} {colour=}"
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(chunks[b"IDAT"])
    stride = 1 + width * bpp
    assert len(raw) == stride * height
    rows, prior = [], bytes(width * bpp)
    for y in range(min(count, height)):
        line = raw[y * stride : (y + 1) * stride]
        prior = bytes(_unfilter(line[0], bytearray(line[1:]), prior, bpp))
        rows.append(prior)
    return width, height, [bytes(r[i] for i in range(len(r)) if i % bpp < 3) for r in rows]


def _pixel(rows: list[bytes], x: int, y: int) -> tuple[int, ...]:
    return tuple(rows[y][3 * x : 3 * x + 3])


@pytest.mark.parametrize("status", ["verified", "failed"])
def test_html_report_renders_in_chromium(status: str, tmp_path: Path) -> None:
    sample: Any = _sample_module()
    page = html.render(sample.sample_run(), signature={"status": status, "keyid": "ab" * 32})
    png = _screenshot(page, tmp_path)
    assert len(png) > 20_000, "screenshot is suspiciously small (blank page?)"
    width, height, rows = decode_rows(png, 400)
    assert (width, height) == (WIDTH, HEIGHT)
    assert _pixel(rows, WIDTH - 40, 8) == BANNER[status]  # banner spans the page's top
    body = {_pixel(rows, x, y) for y in range(80, 400, 3) for x in range(0, WIDTH, 7)}
    assert len(body) > 20, "the page below the banner has almost no distinct colours"


# ------------------------------------------------------------------------ the page's new parts

MEASURE = """<script>
const box = e => { const r = e.getBoundingClientRect(); return [r.width, r.height, r.right]; };
const details = () => [...document.querySelectorAll("details")].map(d => ({
  cls: d.className, open: d.open, rows: d.querySelectorAll("tbody tr").length,
  summary: d.querySelector("summary").textContent, height: box(d)[1],
  visible: d.querySelector("table").checkVisibility()}));
const out = {
  pictures: [...document.querySelectorAll("figure svg.pic")].map(s => ({
    figure: s.closest("figure").className, box: box(s),
    declared: [+s.getAttribute("width"), +s.getAttribute("height")]})),
  closed: details(),
  sections: document.querySelectorAll("section").length,
  banner: getComputedStyle(document.querySelector("header.sig")).backgroundColor,
  marked: [...document.querySelectorAll(".src .hl")].map(e => e.title),
  width: [document.documentElement.clientWidth, document.documentElement.scrollWidth],
};
document.querySelectorAll("details").forEach(d => { d.open = true; });
out.opened = details();
const pre = document.createElement("pre");
pre.id = "measure";
pre.textContent = JSON.stringify(out);
document.body.appendChild(pre);
</script>"""


def _report_module() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "unit" / "test_html_report.py"
    spec = importlib.util.spec_from_file_location("keracheck_html_report_run", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _measure(page: str, tmp_path: Path) -> dict[str, Any]:
    """Lay the page out in Chromium and read back what a script measured there (a copy of the
    page without its Content-Security-Policy, which would block the script)."""
    page = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page)
    source = tmp_path / "measured.html"
    source.write_text(page.replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    argv = [
        _chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        f"--user-data-dir={tmp_path / 'profile'}",
        f"--window-size={WIDTH},{HEIGHT}",
        "--dump-dom",
        source.as_uri(),
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False)
    found = re.search(r'<pre id="measure">(.*?)</pre>', done.stdout, re.S)
    assert found, f"no measurement (exit {done.returncode}): {done.stderr[-2000:]}"
    result: dict[str, Any] = json.loads(html_module.unescape(found.group(1)))
    return result


def test_pictures_and_folded_tables_lay_out_in_chromium(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report: Any = _report_module()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "layers.kera").write_text(report.SOURCE)
    page = html.render(report.report_run(), signature={"status": "signed", "keyid": "ab" * 32})
    m = _measure(page, tmp_path)
    assert [p["figure"] for p in m["pictures"]] == ["heatmap", "histogram", "bits"]
    for picture in m["pictures"]:
        width, height, right = picture["box"]
        assert [width, height] == picture["declared"]  # drawn at its own size, not squashed
        assert width > 100 and height >= 20 and right <= WIDTH
    assert m["width"][1] <= m["width"][0], "the page scrolls sideways"
    assert m["banner"] == "rgb(232, 240, 251)"  # .sig-signed
    assert m["sections"] == 2
    assert m["marked"] == ["export fn", "first diverging node (ref vs cpu)"]
    closed = {d["cls"]: d for d in m["closed"]}
    assert set(closed) == {"folded agreeing", "more"}
    assert closed["folded agreeing"]["summary"] == "3 agreeing cases"
    assert closed["more"]["summary"] == "Mismatching elements 9\u2013256 of 4,800"
    assert [closed["folded agreeing"]["rows"], closed["more"]["rows"]] == [3, 256 - 8]
    for d in m["closed"]:
        assert not d["open"] and not d["visible"] and d["height"] < 40, d  # the summary only
    for d in m["opened"]:
        assert d["open"] and d["visible"] and d["height"] > 15 * d["rows"], d  # every row
