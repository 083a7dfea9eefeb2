"""Names that are keywords or reserved words in some target language (C, Verilog, PTX,
JavaScript/WASM, Python/cocotb, Kera itself), the longest admitted name, and underscores, as
function and parameter names in a `.keg`, through every available target: every artifact
builds and every target agrees.  (Names that are not identifiers never get this far:
tests/unit/test_hostile_names.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kera import keg
from kera.dtypes import DType
from kera.ir import NAME_MAX, FunctionBuilder, Graph
from keracheck.cli import main
from keracheck.targets import known_specs, resolve_all

pytestmark = pytest.mark.toolchain

RESERVED = [
    # C
    "int", "void", "return", "static", "main", "struct", "register", "volatile", "inline",
    "restrict", "_Bool", "signed", "errno", "NULL", "fma", "sqrtf",
    # Verilog
    "module", "endmodule", "input", "output", "reg", "wire", "always", "begin", "end",
    "assign", "initial", "integer", "logic", "genvar", "clk", "rst",
    # PTX
    "param", "global", "const", "b32", "u8", "f32", "ret", "bra", "entry", "func", "shared",
    "pred", "tid",
    # JavaScript / WASM
    "function", "memory", "export", "import", "table", "var", "this", "new", "undefined",
    # Python (cocotb test scripts)
    "def", "lambda", "None", "True", "yield", "dut", "cocotb",
    # Kera
    "fn", "let", "as", "false", "sum", "f64",
    # shapes of names
    "_", "__", "x" * NAME_MAX, "A1_b2",
]  # fmt: skip


def graph() -> Graph:
    fns = []
    per = 12
    for k in range(0, len(RESERVED), per):
        names = RESERVED[k : k + per]
        fname = names[0] if k == 0 else f"{names[0]}_{k}"
        b = FunctionBuilder(fname)
        ps = [b.param(n, DType.F32, [4]) for n in names]
        acc = ps[0]
        for p in ps[1:]:
            acc = b.op("add", b.op("mul", acc, p), p)
        fns.append(b.build(acc))
    return Graph(fns)


def test_reserved_words_as_names_build_and_agree_everywhere(tmp_path: Path) -> None:
    path = tmp_path / "names.keg"
    keg.dump(graph(), str(path))
    available = [t.id for t in resolve_all(list(known_specs().items())) if t.available]
    out = tmp_path / "out.json"
    flags = ["--no-cache", "-q", "--format", "json", "--output", str(out), "--inputs", "8"]
    code = main(["run", str(path), "--targets", ",".join(available), *flags])
    doc = json.loads(out.read_text())
    assert doc["summary"]["cases"] == len(graph().functions)
    for case in doc["cases"]:
        bad = {t: e.get("message") for t, e in case["targets"].items() if e["status"] != "ok"}
        assert not bad, (case["function"][:40], bad)
        assert case["verdict"] == "agree"
    assert code == 0
