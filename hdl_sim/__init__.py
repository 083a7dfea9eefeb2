"""RTL library of the Verilog back end (IEEE-754 and integer cores), shipped as package data.

The Verilog-2005 sources live in ``rtl/`` (:func:`rtl_dir`, :func:`rtl_sources`).  Every core
is parameterised by exponent and fraction width (``EW``/``MW``: 8/23 for binary32, 11/52 for
binary64) or by integer width ``W``, rounds to nearest even, keeps subnormals and produces the
canonical quiet NaN (0x7FC00000 / 0x7FF8000000000000) for every NaN it generates or propagates.

:data:`CORES` is the table the emitter and the tests share: module name, ports, and the fixed
latency in clocks as a function of the module's parameters.  A clocked core has ports
``clk, rst, valid_in, <inputs>, valid_out, <outputs>`` and takes one input per clock; its
outputs and ``valid_out`` belong to the inputs presented ``latency`` rising edges earlier.  A
core of latency 0 is combinational and has no clock, reset or valid ports.  The Verilog files
state the same latencies (``localparam LATENCY``); the core tests check both against the
latency observed in simulation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from kera.dtypes import DType

Params = Mapping[str, int]

FLOAT_FORMATS: Mapping[str, tuple[int, int]] = {
    dt.value: (dt.exp_bits, dt.mant_bits) for dt in (DType.F32, DType.F64)
}
"""Float dtype name -> (EW, MW), from the contract's ``kera.dtypes.DType``."""

DIGITS_PER_STAGE = 4
"""Quotient/root bits computed per pipeline stage by kf_fdiv, kf_fsqrt and kf_idiv."""


def rtl_dir() -> Path:
    """Directory holding the ``.v`` sources of the library."""
    return Path(__file__).resolve().parent / "rtl"


def rtl_sources() -> list[Path]:
    """Every library source, sorted by name (compile them all; unused modules cost nothing)."""
    return sorted(rtl_dir().glob("*.v"))


def _stages(bits: int) -> int:
    return -(-bits // DIGITS_PER_STAGE)


@dataclass(frozen=True)
class Core:
    """One core of the library: its module, ports and latency rule."""

    module: str
    summary: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    latency_of: Callable[[Params], int]

    def latency(self, params: Params) -> int:
        """Clocks from inputs to outputs for this parameterisation (0: combinational)."""
        return self.latency_of(params)

    @property
    def clocked(self) -> bool:
        """True when the core has clk/rst/valid ports (every core whose latency can be > 0)."""
        return self.module not in COMBINATIONAL


COMBINATIONAL = frozenset({"kf_fcmp", "kf_fminmax", "kf_fsign", "kf_ishift"})

CORES: Mapping[str, Core] = {
    c.module: c
    for c in (
        Core("kf_fadd", "a + b (SUB=0) or a - b (SUB=1)", ("a", "b"), ("y",), lambda p: 2),
        Core("kf_fmul", "a * b", ("a", "b"), ("y",), lambda p: 2),
        Core("kf_ffma", "a * b + c, one rounding", ("a", "b", "c"), ("y",), lambda p: 3),
        Core(
            "kf_fdiv",
            "a / b (restoring, 4 bits/stage)",
            ("a", "b"),
            ("y",),
            lambda p: _stages(p["MW"] + 3) + 2,
        ),
        Core(
            "kf_fsqrt",
            "sqrt(a) (restoring, 4 bits/stage)",
            ("a",),
            ("y",),
            lambda p: _stages(p["MW"] + 2) + 2,
        ),
        Core(
            "kf_fcmp",
            "quiet compares (NaN unordered)",
            ("a", "b"),
            ("eq", "ne", "lt", "le", "gt", "ge"),
            lambda p: 0,
        ),
        Core(
            "kf_fminmax", "IEEE 754-2019 minimum (MAX=0) / maximum", ("a", "b"), ("y",), lambda p: 0
        ),
        Core("kf_fsign", "neg (MODE=0), abs (1), copysign (2)", ("a", "b"), ("y",), lambda p: 0),
        Core(
            "kf_fround",
            "floor (MODE=0) ceil (1) trunc (2) round-even (3)",
            ("a",),
            ("y",),
            lambda p: 1,
        ),
        Core(
            "kf_f2i", "float -> int OW bits, trunc, saturate, NaN->0", ("a",), ("y",), lambda p: 1
        ),
        Core("kf_i2f", "int IW bits -> float, RNE", ("a",), ("y",), lambda p: 1),
        Core("kf_f2f", "float format conversion, RNE", ("a",), ("y",), lambda p: 1),
        Core(
            "kf_idiv",
            "integer a / b (REM=0) or a % b (REM=1), total",
            ("a", "b"),
            ("y",),
            lambda p: p["W"] // DIGITS_PER_STAGE + 2,
        ),
        Core("kf_ishift", "a << b / a >> b, amount masked", ("a", "b"), ("y",), lambda p: 0),
    )
}
"""Module name -> :class:`Core`."""


def latency(module: str, params: Params) -> int:
    """Latency in clocks of ``module`` with ``params`` (KeyError for an unknown module)."""
    return CORES[module].latency(params)
