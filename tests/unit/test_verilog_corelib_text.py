"""The core libraries' text machinery (``keracheck.targets.verilog.corelib``), no tools needed:
which cores become libraries, their names, the shim that picks one by parameters (and falls
back to the flat RTL), and the DPI glue and wrapper written for a model's ports."""

from __future__ import annotations

import re

import pytest

from kera.dtypes import DType
from kera.ir import FunctionBuilder
from kera_hdl import COMBINATIONAL  # type: ignore[import-not-found, unused-ignore]
from keracheck.targets.verilog import corelib, design_of


def test_a_core_key_parses_into_module_and_parameters() -> None:
    lib = corelib.CoreLib.parse("kf_fadd(EW=8,MW=23,SUB=1)")
    assert lib == corelib.CoreLib("kf_fadd", (("EW", 8), ("MW", 23), ("SUB", 1)))
    assert lib.name == "kfl_fadd_EW8_MW23_SUB1"
    assert "__" not in lib.name  # DPI function names are built from it
    assert lib.condition() == "EW == 8 && MW == 23 && SUB == 1"
    with pytest.raises(ValueError, match="not a core key"):
        corelib.CoreLib.parse("kf_fadd EW=8")


def test_only_clocked_cores_become_libraries() -> None:
    b = FunctionBuilder("mix")
    x, y = b.param("x", DType.F32, [2]), b.param("y", DType.F32, [2])
    fn = b.build(b.op("add", x, y), b.op("max", x, y), b.op("lt", x, y), b.op("mul", x, y))
    libs = corelib.libs_of([design_of(fn)])
    assert [lib.module for lib in libs] == ["kf_fadd", "kf_fmul"]
    assert not corelib.LIB_CORES & COMBINATIONAL


def test_the_shim_keeps_the_header_and_falls_back_to_the_flat_core() -> None:
    libs = [
        corelib.CoreLib.parse(k)
        for k in ("kf_fadd(EW=8,MW=23,SUB=0)", "kf_fadd(EW=11,MW=52,SUB=0)")
    ]
    text = corelib.shim("kf_fadd", libs)
    assert "module kf_fadd #(" in text and "output wire [EW+MW:0] y" in text
    assert "if (EW == 8 && MW == 23 && SUB == 0) begin : lib_0" in text
    assert "else if (EW == 11 && MW == 52 && SUB == 0) begin : lib_1" in text
    assert "kf_fadd__flat #(.EW(EW), .MW(MW), .SUB(SUB)) u (" in text
    assert re.search(r"kfl_fadd_EW8_MW23_SUB0 u \(\.clk\(clk\), \.rst\(rst\)", text)
    flat = corelib.flat_copy("kf_fadd")
    assert "module kf_fadd__flat #(" in flat and "module kf_fadd #(" not in flat
    # no library at all: the shim is the flat core under its own name
    assert "lib_0" not in corelib.shim("kf_fadd", []) and "begin : flat" in corelib.shim(
        "kf_fadd", []
    )


def test_glue_and_wrapper_follow_the_model_ports() -> None:
    ports = [
        ("IN", "clk", 1),
        ("IN", "rst", 1),
        ("IN", "valid_in", 1),
        ("OUT", "valid_out", 1),
        ("IN", "a", 64),
        ("OUT", "y", 32),
    ]
    glue, wrapper = corelib.glue_and_wrapper("kfl_f2f_X", ports)
    assert (
        'extern "C" void kfl_f2f_X_tick(void* handle, unsigned char rst, unsigned char valid_in, '
        "unsigned char* valid_out, unsigned long long a, unsigned long long* y)" in glue
    )
    assert "m->a = a;" in glue and "*y = m->y;" in glue and "m->clk = 1;" in glue
    assert "input  wire [63:0] a" in wrapper and "output reg  [31:0] y = 32'd0" in wrapper
    assert "always @(posedge clk) begin" in wrapper and "y <= t_y[31:0];" in wrapper
    assert "valid_out <= t_valid_out;" in wrapper
    with pytest.raises(ValueError, match="wider than 64"):
        corelib.glue_and_wrapper("kfl_wide", [("IN", "clk", 1), ("IN", "a", 65)])
