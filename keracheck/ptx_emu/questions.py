"""The catalog's hardware questions about PTX, asked of a GPU and of the emulator.

Each :class:`Question` is one PTX instruction (a :class:`~keracheck.ptx_emu.snippets.Snippet`)
on chosen input bits.  :func:`ask` runs it on the emulator (hardware NaN policy) and, when a GPU
is usable, on the GPU, and records both answers as hex.  Where the ISA leaves a result
unspecified the emulator refuses (integer division by zero) or answers with its model
(NVIDIA's canonical NaNs, the ISA's literal cvt NaN rule); the GPU's answer is what
``docs/ptx-backend.md`` should then record.  Nothing in the back end depends on these answers:
the emitted code canonicalises or guards every such case.

Run ``python -m keracheck.ptx_emu.questions --out FILE.json`` (``scripts/gpu-check`` does).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from keracheck.ptx_emu.errors import PtxError
from keracheck.ptx_emu.snippets import MEMORY_TYPES, Snippet

F32 = {"inf": 0x7F800000, "-inf": 0xFF800000, "qnan": 0x7FC12345, "snan": 0x7F800001}
F64 = {"inf": 0x7FF0000000000000, "-inf": 0xFFF0000000000000, "qnan": 0x7FF8000000012345}
ONE32, ONE64 = 0x3F800000, 0x3FF0000000000000


@dataclass(frozen=True)
class Question:
    """One instruction: ``%d = op(%a[, %b])`` on rows of input bits."""

    name: str
    instruction: str
    a_type: str
    d_type: str
    a: Sequence[int]
    b: Sequence[int] = ()
    b_type: str = ""

    def snippet(self) -> Snippet:
        inputs = {"%a": self.a_type}
        if self.b:
            inputs["%b"] = self.b_type or self.a_type
        return Snippet(self.instruction, inputs, {"%d": self.d_type})

    def arrays(self) -> dict[str, np.ndarray[Any, Any]]:
        out = {"%a": _bits(self.a, self.a_type)}
        if self.b:
            out["%b"] = _bits(self.b, self.b_type or self.a_type)
        return out


def _bits(values: Sequence[int], ty: str) -> np.ndarray[Any, Any]:
    width = np.dtype(MEMORY_TYPES[ty][0]).itemsize
    mask = (1 << (8 * width)) - 1
    return np.array([v & mask for v in values], dtype=f"<u{width}")


QUESTIONS = [
    Question("f32 generated NaN (inf + -inf)", "add.rn.f32 %d, %a, %b;", "f32", "f32", [F32["inf"]], [F32["-inf"]]),
    Question("f32 generated NaN (0 * inf)", "mul.rn.f32 %d, %a, %b;", "f32", "f32", [0], [F32["inf"]]),
    Question("f32 generated NaN (sqrt -1)", "sqrt.rn.f32 %d, %a;", "f32", "f32", [0xBF800000]),
    Question("f32 generated NaN (0 / 0)", "div.rn.f32 %d, %a, %b;", "f32", "f32", [0], [0]),
    Question("f32 NaN payload through add", "add.rn.f32 %d, %a, %b;", "f32", "f32", [F32["qnan"], F32["snan"]], [ONE32, ONE32]),
    Question("f32 NaN payload through fma", "fma.rn.f32 %d, %a, %b, %b;", "f32", "f32", [F32["qnan"]], [ONE32]),
    Question("f64 generated NaN (inf + -inf)", "add.rn.f64 %d, %a, %b;", "f64", "f64", [F64["inf"]], [F64["-inf"]]),
    Question("f64 NaN payload through add", "add.rn.f64 %d, %a, %b;", "f64", "f64", [F64["qnan"]], [ONE64]),
    Question("f64 two NaN operands", "add.rn.f64 %d, %a, %b;", "f64", "f64", [F64["qnan"]], [0xFFF8000000000007]),
    Question("neg.f32 of a NaN", "neg.f32 %d, %a;", "f32", "f32", [F32["qnan"]]),
    Question("abs.f32 of a NaN", "abs.f32 %d, %a;", "f32", "f32", [0xFFC12345]),
    Question("neg.f64 of a NaN", "neg.f64 %d, %a;", "f64", "f64", [F64["qnan"]]),
    Question("abs.f64 of a NaN", "abs.f64 %d, %a;", "f64", "f64", [0xFFF8000000012345]),
    Question("min.f32 of +-0", "min.f32 %d, %a, %b;", "f32", "f32", [0, 0x80000000], [0x80000000, 0]),
    Question("max.f32 of +-0", "max.f32 %d, %a, %b;", "f32", "f32", [0, 0x80000000], [0x80000000, 0]),
    Question("min.f32 with one NaN", "min.f32 %d, %a, %b;", "f32", "f32", [F32["qnan"]], [ONE32]),
    Question("min.NaN.f32 with one NaN", "min.NaN.f32 %d, %a, %b;", "f32", "f32", [F32["qnan"]], [ONE32]),
    Question("min.f64 of +-0", "min.f64 %d, %a, %b;", "f64", "f64", [0, 1 << 63], [1 << 63, 0]),
    Question("div.u32 by 0", "div.u32 %d, %a, %b;", "u32", "u32", [7, 0], [0, 0]),
    Question("rem.u32 by 0", "rem.u32 %d, %a, %b;", "u32", "u32", [7], [0]),
    Question("div.s32 by 0", "div.s32 %d, %a, %b;", "s32", "s32", [7, -7], [0, 0]),
    Question("rem.s32 by 0", "rem.s32 %d, %a, %b;", "s32", "s32", [-7], [0]),
    Question("div.s32 MIN / -1", "div.s32 %d, %a, %b;", "s32", "s32", [-(1 << 31)], [-1]),
    Question("rem.s32 MIN % -1", "rem.s32 %d, %a, %b;", "s32", "s32", [-(1 << 31)], [-1]),
    Question("div.s64 by 0", "div.s64 %d, %a, %b;", "s64", "s64", [7], [0]),
    Question("div.s64 MIN / -1", "div.s64 %d, %a, %b;", "s64", "s64", [-(1 << 63)], [-1]),
    Question("cvt.rzi.s32.f32 of NaN/inf/-inf/3e9", "cvt.rzi.s32.f32 %d, %a;", "f32", "s32", [F32["qnan"], F32["inf"], F32["-inf"], 0x4F32D05E]),
    Question("cvt.rzi.u32.f32 of NaN/-1/5e9", "cvt.rzi.u32.f32 %d, %a;", "f32", "u32", [F32["qnan"], 0xBF800000, 0x4F9502F9]),
    Question("cvt.rzi.s64.f64 of NaN", "cvt.rzi.s64.f64 %d, %a;", "f64", "s64", [F64["qnan"]]),
    Question("cvt.rzi.u64.f64 of NaN", "cvt.rzi.u64.f64 %d, %a;", "f64", "u64", [F64["qnan"]]),
    Question("cvt.rzi.s32.f64 of NaN", "cvt.rzi.s32.f64 %d, %a;", "f64", "s32", [F64["qnan"]]),
    Question("cvt.rzi.s64.f32 of NaN", "cvt.rzi.s64.f32 %d, %a;", "f32", "s64", [F32["qnan"]]),
    Question("cvt.rni.f32.f32 of a NaN", "cvt.rni.f32.f32 %d, %a;", "f32", "f32", [F32["qnan"]]),
    Question("cvt.f64.f32 of a NaN", "cvt.f64.f32 %d, %a;", "f32", "f64", [0xFFC12345]),
    Question("shl.b32 by 32 and 40", "shl.b32 %d, %a, %b;", "b32", "b32", [1, 1], [32, 40], "u32"),
    Question("shr.s32 by 40", "shr.s32 %d, %a, %b;", "s32", "s32", [-8], [40], "u32"),
]  # fmt: skip


def _hex(values: np.ndarray[Any, Any]) -> list[str]:
    width = values.dtype.itemsize
    return [f"{int(v):#0{2 + 2 * width}x}" for v in values.view(f"<u{width}")]


def on_emulator(q: Question) -> list[str] | str:
    try:
        out = q.snippet().run(q.arrays())["%d"]
    except PtxError as err:
        return f"refused: {err.message}"
    return _hex(out)


def on_gpu(q: Question, gpu: Any) -> list[str] | str:
    arrays = list(q.arrays().values())
    n = len(arrays[0])
    size = n * np.dtype(MEMORY_TYPES[q.d_type][0]).itemsize
    try:
        (raw,) = gpu.launch(q.snippet().ptx(), "snippet", arrays, [size], n)
    except Exception as err:
        return f"error: {type(err).__name__}: {err}"
    return _hex(raw.view(MEMORY_TYPES[q.d_type][0]))


def ask(questions: Sequence[Question] = QUESTIONS) -> dict[str, Any]:
    """Every question on the emulator and, if one is usable, the GPU."""
    from keracheck.targets.ptx import Gpu, PtxGpuBackend

    reason = PtxGpuBackend().available()
    gpu = Gpu() if reason is None else None
    device: Mapping[str, str] = PtxGpuBackend().versions() if gpu is not None else {}
    rows = []
    for q in questions:
        emu = on_emulator(q)
        hw = on_gpu(q, gpu) if gpu is not None else None
        rows.append(
            {
                "question": q.name,
                "instruction": q.instruction,
                "a": _hex(q.arrays()["%a"]),
                "b": _hex(q.arrays()["%b"]) if q.b else [],
                "emulator": emu,
                "gpu": hw,
                "agree": hw == emu if hw is not None else None,
            }
        )
    return {"gpu": dict(device), "gpuUnavailable": reason, "answers": rows}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Ask the catalog's PTX hardware questions.")
    ap.add_argument("--out", help="write the JSON answers here (default: stdout)")
    args = ap.parse_args(argv)
    text = json.dumps(ask(), indent=1) + "\n"
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
