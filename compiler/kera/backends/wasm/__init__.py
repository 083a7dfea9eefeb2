"""The WebAssembly back end: Kera functions -> one binary module (scalar or SIMD128).

Package shape, in dependency order::

    encode.py  the wasm subset as data: opcode table, Instr/Func/Module, encode/decode (exact
               inverses), the WAT printer and the code-building helpers (op, get, put, ...)
    lower.py   LOWER, one row per elementwise op: its scalar and its SIMD lowering (None: lane by
               lane); the value representation, canon (the one NaN canonicaliser), lanewise
    fma.py     the exact fma helper functions (f32 by round-to-odd, f64 by integer emulation)
    emit.py    kernels (groups, buffers, movement, dynamic windows, reduction trees, loops and
               calls and their regions), module assembly, layout, SUPPORTED (derived from the
               tables) and the ``kerac emit`` entry points

The calling convention and the code shape are in :mod:`kera.backends.wasm.emit`; how each gap
between WebAssembly and the contract is closed is in :mod:`kera.backends.wasm.lower`.  The
names below are what callers (``keracheck.targets.wasm``, the registry, tests, benches) use.
"""

from __future__ import annotations

from kera.backends.wasm.emit import (
    SUPPORTED,
    Kernel,
    Layout,
    Program,
    WasmCompileError,
    check,
    compile_functions,
    emit,
    emit_wasm_file,
    emit_wasm_simd_file,
    emit_wat,
    emit_wat_file,
    layout,
)
from kera.backends.wasm.lower import LOWER
from kera.ops import Op

#: ops of the contract this back end does not lower yet, with the reason (keracheck reports a
#: case using one as ``unsupported`` on this target, never as a pass); none left
UNSUPPORTED: dict[Op, str] = {}


__all__ = [
    "LOWER",
    "SUPPORTED",
    "UNSUPPORTED",
    "Kernel",
    "Layout",
    "Program",
    "WasmCompileError",
    "check",
    "compile_functions",
    "emit",
    "emit_wasm_file",
    "emit_wasm_simd_file",
    "emit_wat",
    "emit_wat_file",
    "layout",
]
