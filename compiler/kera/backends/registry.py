"""``kerac emit --target T``: target name -> function(graph, output path).

Each back end registers its emitter here when it lands; imports are lazy so that ``kerac``
starts fast and a missing optional dependency only affects its own target.
"""

from __future__ import annotations

from collections.abc import Callable

from kera.ir import Graph

Emitter = Callable[[Graph, str | None], None]

EMITTERS: dict[str, Emitter] = {}


def _wasm(graph: Graph, output: str | None) -> None:
    from kera.backends.wasm import emit_wasm_file

    emit_wasm_file(graph, output)


def _wasm_simd(graph: Graph, output: str | None) -> None:
    from kera.backends.wasm import emit_wasm_simd_file

    emit_wasm_simd_file(graph, output)


def _wat(graph: Graph, output: str | None) -> None:
    from kera.backends.wasm import emit_wat_file

    emit_wat_file(graph, output)


EMITTERS.update({"wasm": _wasm, "wasm-simd": _wasm_simd, "wat": _wat})


def _ptx(graph: Graph, output: str | None) -> None:
    from kera.backends.ptx import write

    write(graph, output)


EMITTERS["ptx"] = _ptx


def _c(graph: Graph, output: str | None) -> None:
    from kera.backends.c import write

    write(graph, output)


EMITTERS["c"] = _c


def _verilog(graph: Graph, output: str | None) -> None:
    from kera.backends.verilog import write

    write(graph, output)


EMITTERS["verilog"] = _verilog
