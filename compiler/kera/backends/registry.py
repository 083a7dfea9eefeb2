"""``kerac emit --target T``: target name -> function(graph, output path).

Each back end registers its emitter here when it lands; imports are lazy so that ``kerac``
starts fast and a missing optional dependency only affects its own target.
"""

from __future__ import annotations

from collections.abc import Callable

from kera.ir import Graph

Emitter = Callable[[Graph, str | None], None]

EMITTERS: dict[str, Emitter] = {}
