"""The unit of work both WebAssembly runners execute: one module, memory in, calls, memory out.

A :class:`WasmJob` instantiates ``wasm`` (no imports; it must export its linear memory under
``memory``), grows that memory until every write and read fits and to at least ``memory_end``
bytes (the scratch the calls use beyond their inputs and outputs), copies each ``writes`` array to
its byte offset, calls each export in ``calls`` in order with integer (i32) arguments, then
copies out each ``reads`` region ``(offset, nbytes)``.  A runner returns, per job, the list of
read regions as ``uint8`` arrays, or the exception that job raised (a trap, a bad module), so one
failing job never loses the others.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

PAGE = 65536  # bytes in a WebAssembly page

Bytes = npt.NDArray[np.uint8]


@dataclass(frozen=True)
class WasmJob:
    wasm: bytes
    writes: Sequence[tuple[int, npt.NDArray[Any]]]
    calls: Sequence[tuple[str, tuple[int, ...]]]
    reads: Sequence[tuple[int, int]]
    memory: str = "mem"
    memory_end: int = 0

    def pages_needed(self) -> int:
        ends = [off + a.nbytes for off, a in self.writes] + [off + n for off, n in self.reads]
        return -(-max(self.memory_end, *ends) // PAGE)


JobResult = list[Bytes] | Exception


def as_bytes(a: npt.NDArray[Any]) -> Bytes:
    """The array's bytes in C order, without a copy when it is already contiguous."""
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)
