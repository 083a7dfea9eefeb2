"""Wrap a few PTX instructions into a complete kernel, one test vector per thread.

A :class:`Snippet` names input and output registers with their types; :meth:`Snippet.ptx`
emits a kernel whose parameters are one ``.u64`` pointer per input and per output (in that
order) plus a ``.u32`` count; thread ``i`` loads element ``i`` of every input into its register,
runs the body, and stores every output register to element ``i`` of its output.  Predicates
travel as one byte (0/1).  The same text runs on the emulator (:meth:`Snippet.run`), through
ptxas, and on a GPU (``scripts/gpu-check``), so a hardware answer and the emulator's model can
be compared for the very same instructions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from keracheck.ptx_emu.machine import load
from keracheck.ptx_emu.numerics import NanPolicy
from keracheck.ptx_emu.parser import parse
from keracheck.ptx_emu.state import GlobalMemory

# register type -> (numpy dtype in memory, ld/st type)
MEMORY_TYPES: dict[str, tuple[str, str]] = {
    "pred": ("u1", "u8"),
    "b16": ("<u2", "b16"),
    "u16": ("<u2", "u16"),
    "s16": ("<i2", "s16"),
    "b32": ("<u4", "b32"),
    "u32": ("<u4", "u32"),
    "s32": ("<i4", "s32"),
    "f32": ("<f4", "f32"),
    "b64": ("<u8", "b64"),
    "u64": ("<u8", "u64"),
    "s64": ("<i8", "s64"),
    "f64": ("<f8", "f64"),
}

BLOCK = 64


@dataclass(frozen=True)
class Snippet:
    """A PTX body with typed input/output registers (see the module docstring)."""

    body: str
    inputs: Mapping[str, str]
    outputs: Mapping[str, str]
    temps: Mapping[str, str] = field(default_factory=dict)
    version: str = "8.0"
    target: str = "sm_90"

    def registers(self) -> dict[str, str]:
        regs = {**self.inputs, **self.outputs, **self.temps}
        regs.update(
            {"%sn_tid": "u32", "%sn_i": "u32", "%sn_n": "u32", "%sn_addr": "u64", "%sn_off": "u64"}
        )
        regs.update({"%sn_byte": "b16", "%sn_done": "pred"})
        return regs

    def ptx(self, name: str = "snippet") -> str:
        ios = [*self.inputs, *self.outputs]
        params = [f"\t.param .u64 sn_p{k}" for k in range(len(ios))] + ["\t.param .u32 sn_count"]
        lines = [
            f".version {self.version}",
            f".target {self.target}",
            ".address_size 64",
            "",
            f".visible .entry {name}(",
            ",\n".join(params),
            ")",
            "{",
        ]
        lines += [f"\t.reg .{ty} {reg};" for reg, ty in self.registers().items()]
        lines += [
            "\tmov.u32 %sn_tid, %ctaid.x;",
            "\tmov.u32 %sn_n, %ntid.x;",
            "\tmov.u32 %sn_i, %tid.x;",
            "\tmad.lo.u32 %sn_tid, %sn_tid, %sn_n, %sn_i;",
            "\tld.param.u32 %sn_n, [sn_count];",
            "\tsetp.ge.u32 %sn_done, %sn_tid, %sn_n;",
            "\t@%sn_done bra SN_END;",
        ]
        for k, (reg, ty) in enumerate(self.inputs.items()):
            lines += _address(k, ty) + _load(reg, ty)
        lines += [f"\t{line.strip()}" for line in self.body.strip().splitlines() if line.strip()]
        for k, (reg, ty) in enumerate(self.outputs.items(), start=len(self.inputs)):
            lines += _address(k, ty) + _store(reg, ty)
        lines += ["SN_END:", "\tret;", "}", ""]
        return "\n".join(lines)

    def run(
        self, values: Mapping[str, npt.ArrayLike], policy: NanPolicy | None = None
    ) -> dict[str, npt.NDArray[Any]]:
        """Run on the emulator: one thread per element of the (equal-length) input arrays."""
        arrays = {reg: _as_memory(values[reg], ty) for reg, ty in self.inputs.items()}
        n = len(next(iter(arrays.values()))) if arrays else 1
        mem = GlobalMemory()
        args: list[int] = [mem.upload(arrays[reg]) for reg in self.inputs]
        outs = {
            reg: mem.alloc(n * np.dtype(MEMORY_TYPES[ty][0]).itemsize)
            for reg, ty in self.outputs.items()
        }
        args += [*outs.values(), n]
        program = load(parse(self.ptx()), "snippet")
        grid = -(-n // BLOCK)
        program.launch(args, grid=grid, block=BLOCK, memory=mem, policy=policy)
        return {
            reg: mem.download(addr, MEMORY_TYPES[self.outputs[reg]][0], n)
            for reg, addr in outs.items()
        }


def _as_memory(values: npt.ArrayLike, ty: str) -> npt.NDArray[Any]:
    """Input values as their memory dtype; unsigned bit arrays are reinterpreted, not cast."""
    dtype = np.dtype(MEMORY_TYPES[ty][0])
    arr = np.asarray(values)
    if arr.dtype.kind == "u" and arr.dtype.itemsize == dtype.itemsize and dtype.kind in "fi":
        return arr.view(dtype)
    return arr.astype(dtype)


def _address(k: int, ty: str) -> list[str]:
    size = np.dtype(MEMORY_TYPES[ty][0]).itemsize
    return [
        f"\tld.param.u64 %sn_addr, [sn_p{k}];",
        "\tcvta.to.global.u64 %sn_addr, %sn_addr;",
        f"\tmul.wide.u32 %sn_off, %sn_tid, {size};",
        "\tadd.s64 %sn_addr, %sn_addr, %sn_off;",
    ]


def _load(reg: str, ty: str) -> list[str]:
    if ty == "pred":
        return ["\tld.global.u8 %sn_byte, [%sn_addr];", f"\tsetp.ne.b16 {reg}, %sn_byte, 0;"]
    return [f"\tld.global.{MEMORY_TYPES[ty][1]} {reg}, [%sn_addr];"]


def _store(reg: str, ty: str) -> list[str]:
    if ty == "pred":
        return [f"\tselp.b16 %sn_byte, 1, 0, {reg};", "\tst.global.u8 [%sn_addr], %sn_byte;"]
    return [f"\tst.global.{MEMORY_TYPES[ty][1]} [%sn_addr], {reg};"]
