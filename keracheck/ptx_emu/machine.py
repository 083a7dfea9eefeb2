"""SIMT execution of a compiled kernel: every thread at once, one numpy lane per thread.

Threads that share a program counter form a *group* with a lane mask.  The scheduler always
runs the group with the lowest program counter; straight-line code runs until the next
branch or until it reaches the program counter of another group, where the two merge.  A
predicated branch splits its group by the predicate.  This models divergence and
reconvergence exactly for the subset (threads do not communicate: no shared memory, barriers
or shuffles), whatever the order in which real hardware would interleave them.

Instruction guards (``@p``/``@!p``) narrow the mask of one instruction.  Falling off the end of
the body, ``ret`` and ``exit`` end a thread.  Backward branches make loops (the PTX back end
emits ``@p bra LOOPn`` at the end of each loop body); ``max_steps`` bounds the instructions a
launch may issue, so a loop that never ends is an error naming its branch, not a hang.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from keracheck.ptx_emu import isa
from keracheck.ptx_emu.errors import PtxError, PtxExecutionError, PtxSyntaxError
from keracheck.ptx_emu.numerics import NanPolicy, check_host_fp
from keracheck.ptx_emu.parser import Instruction, Kernel, Label, Module
from keracheck.ptx_emu.state import UINT, Bools, GlobalMemory, Mask, State

PARAM_DTYPES: dict[str, type[np.generic]] = {
    "b32": np.uint32,
    "u32": np.uint32,
    "s32": np.int32,
    "f32": np.float32,
    "b64": np.uint64,
    "u64": np.uint64,
    "s64": np.int64,
    "f64": np.float64,
}


@dataclass(frozen=True)
class Step:
    """One compiled instruction: ``op`` (with an executor), ``bra`` (with a target) or ``exit``."""

    kind: str
    ins: Instruction
    run: isa.Exec | None = None
    target: int = 0
    guard: isa.Reader | None = None


@dataclass
class LaunchStats:
    """Counters of one launch: issued instructions (per group) and thread-instructions."""

    instructions: int = 0
    thread_instructions: int = 0
    threads: int = 0


@dataclass
class Program:
    """A kernel compiled once, launchable many times."""

    kernel: Kernel
    steps: list[Step] = field(default_factory=list)

    def launch(
        self,
        args: Sequence[Any],
        *,
        grid: int,
        block: int,
        memory: GlobalMemory,
        policy: NanPolicy | None = None,
        max_steps: int = 10_000_000,
    ) -> LaunchStats:
        """Run ``grid * block`` threads (1-D) with kernel arguments ``args``."""
        check_host_fp()
        n = grid * block
        if grid < 1 or block < 1:
            raise ValueError("grid and block must be positive")
        params = pack_params(self.kernel, args)
        st = State(
            n, dict(self.kernel.regs), params, memory, specials(grid, block), policy or NanPolicy()
        )
        return self._execute(st, max_steps)

    def _execute(self, st: State, max_steps: int) -> LaunchStats:
        stats = LaunchStats(threads=st.n)
        groups: dict[int, Bools] = {0: np.ones(st.n, dtype=bool)}
        while groups:
            pc = min(groups)
            pc, rest = self._run_group(st, pc, groups.pop(pc), groups, stats)
            if rest is not None and rest.any():
                groups[pc] = groups[pc] | rest if pc in groups else rest
            if stats.instructions > max_steps:
                raise self._step_limit(pc, max_steps)
        return stats

    def _step_limit(self, pc: int, max_steps: int) -> PtxExecutionError:
        """The step budget ran out: name the branch taken last (a loop that never ends)."""
        message = (
            f"step limit of {max_steps} issued instructions exceeded (a loop that never ends?)"
        )
        last = self.steps[pc - 1].ins if 0 < pc <= len(self.steps) else None
        if last is None or last.opcode != "bra":
            return PtxExecutionError(message)
        return PtxExecutionError(message + "; the last branch issued", last.line, last.source)

    def _run_group(
        self, st: State, pc: int, mask: Bools, groups: dict[int, Bools], stats: LaunchStats
    ) -> tuple[int, Bools | None]:
        """Run one group until a branch, its end, or another group's pc; return where it
        stopped and its remaining mask (``None`` when all its threads ended)."""
        limit = min(groups) if groups else len(self.steps)
        m: Mask = None if mask.all() else mask
        active = int(mask.sum())
        steps = self.steps
        while pc < len(steps):
            step = steps[pc]
            stats.instructions += 1
            stats.thread_instructions += active
            try:
                em = _guarded(st, step, m)
                if step.kind == "op":
                    if em is None or em.any():
                        assert step.run is not None
                        step.run(st, em)
                    pc += 1
                elif step.kind == "bra":
                    return self._branch(step, pc, mask, em, groups)
                else:
                    if em is None:
                        return pc, None
                    mask = mask & ~em
                    if not mask.any():
                        return pc, None
                    m, active, pc = mask, int(mask.sum()), pc + 1
            except PtxError as err:
                if err.line:
                    raise
                raise type(err)(err.message, step.ins.line, step.ins.source) from None
            if pc >= limit:
                return pc, mask
        return pc, None

    @staticmethod
    def _branch(
        step: Step, pc: int, mask: Bools, em: Mask, groups: dict[int, Bools]
    ) -> tuple[int, Bools | None]:
        taken = mask if em is None else em
        rest = mask & ~taken
        if taken.any():
            groups[step.target] = groups[step.target] | taken if step.target in groups else taken
        return pc + 1, rest


def _guarded(st: State, step: Step, m: Mask) -> Mask:
    if step.guard is None:
        return m
    g = step.guard(st, m)
    return g if m is None else g & m


def specials(grid: int, block: int) -> dict[str, Any]:
    """%tid/%ntid/%ctaid/%nctaid for a 1-D launch (y and z are a single index)."""
    n = grid * block
    lane = np.arange(n, dtype=np.uint32)
    one = np.ones(n, dtype=np.uint32)
    zero = np.zeros(n, dtype=np.uint32)
    regs: dict[str, Any] = {
        "%tid.x": lane % np.uint32(block),
        "%ntid.x": one * np.uint32(block),
        "%ctaid.x": lane // np.uint32(block),
        "%nctaid.x": one * np.uint32(grid),
    }
    for reg in ("tid", "ctaid"):
        regs[f"%{reg}.y"] = regs[f"%{reg}.z"] = zero
    for reg in ("ntid", "nctaid"):
        regs[f"%{reg}.y"] = regs[f"%{reg}.z"] = one
    return regs


def pack_params(kernel: Kernel, args: Sequence[Any]) -> dict[str, bytes]:
    """Little-endian bytes of each kernel argument.  Integers (and addresses) may be Python
    ints; float parameters need a numpy scalar of exactly the parameter's type."""
    if len(args) != len(kernel.params):
        raise ValueError(
            f"kernel {kernel.name} takes {len(kernel.params)} arguments, got {len(args)}"
        )
    out: dict[str, bytes] = {}
    for param, value in zip(kernel.params, args, strict=True):
        dtype = np.dtype(PARAM_DTYPES[param.type])
        if dtype.kind == "f":
            if not isinstance(value, np.generic) or value.dtype != dtype:
                raise TypeError(f"parameter {param.name} (.{param.type}) needs a numpy {dtype}")
            out[param.name] = value.tobytes()
            continue
        bits = dtype.itemsize * 8
        out[param.name] = np.array(int(value) % (1 << bits), dtype=UINT[bits]).tobytes()
    return out


def compile_kernel(kernel: Kernel) -> Program:
    """Compile every instruction of ``kernel`` (refusing anything outside the subset)."""
    program = Program(kernel)
    for ins in kernel.body:
        program.steps.append(_compile_step(kernel, ins))
    return program


def _compile_step(kernel: Kernel, ins: Instruction) -> Step:
    cx = isa.Ctx(kernel, ins)
    guard = cx.pred(ins.guard) if ins.guard is not None else None
    if ins.opcode not in isa.CONTROL:
        return Step("op", ins, run=isa.compile_instruction(kernel, ins), guard=guard)
    if ins.opcode == "bra":
        cx.flag("uni")
        cx.done()
        (label,) = cx.operands(1)
        if not isinstance(label, Label) or label.name not in kernel.labels:
            raise PtxSyntaxError("unknown branch target", ins.line, ins.source)
        return Step("bra", ins, target=kernel.labels[label.name], guard=guard)
    cx.done()
    cx.operands(0)
    return Step("exit", ins, guard=guard)


def load(module: Module, name: str) -> Program:
    """Compile kernel ``name`` of a parsed module."""
    kernel = module.kernels.get(name)
    if kernel is None:
        known = ", ".join(sorted(module.kernels)) or "none"
        raise KeyError(f"no kernel {name!r} in the module (kernels: {known})")
    return compile_kernel(kernel)
