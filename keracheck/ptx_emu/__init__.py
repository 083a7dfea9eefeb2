"""ptx-emu: a SIMT emulator for the PTX subset Kera's code generator emits.

It reads PTX *text* (not our IR), so it checks the code generator rather than sharing its
assumptions, and executes every thread of a launch at once with numpy (one array per register,
one lane per thread).  It is exact per the PTX ISA for every instruction and modifier it
accepts, models NVIDIA's documented choices where the ISA leaves a result open (see
:class:`NanPolicy`; an ``adversarial`` policy randomises them instead), treats the ISA's
unspecified integer cases (division by zero, MIN / -1) as errors, and refuses — naming the
line — anything outside its subset (``.approx``, ``.ftz``, atomics, float ops without ``.rn``
...).  The subset and the modelling choices: ``docs/ptx-backend.md`` and
:mod:`keracheck.ptx_emu.isa`.

Typical use::

    module = parse(ptx_text)
    program = load(module, "kernel_name")
    mem = GlobalMemory()
    x = mem.upload(np.arange(4, dtype=np.float32))
    y = mem.alloc(16)
    stats = program.launch([x, y, 4], grid=1, block=4, memory=mem)
    out = mem.download(y, np.float32, 4)
"""

from keracheck.ptx_emu.errors import (
    PtxError,
    PtxExecutionError,
    PtxSyntaxError,
    PtxUnsupportedError,
)
from keracheck.ptx_emu.machine import LaunchStats, Program, compile_kernel, load
from keracheck.ptx_emu.numerics import NanPolicy
from keracheck.ptx_emu.parser import Module, parse
from keracheck.ptx_emu.state import GlobalMemory

__all__ = [
    "GlobalMemory",
    "LaunchStats",
    "Module",
    "NanPolicy",
    "Program",
    "PtxError",
    "PtxExecutionError",
    "PtxSyntaxError",
    "PtxUnsupportedError",
    "compile_kernel",
    "load",
    "parse",
]
