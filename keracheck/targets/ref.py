"""``ref``: the reference interpreter as a target (the oracle every other target is compared to)."""

from __future__ import annotations

import numpy as np

from kera.interp import interpret
from kera.ir import Function
from kera.ops import Op
from keracheck.target import API_VERSION, Inputs, Outputs


class RefBackend:
    name = "ref"
    api_version = API_VERSION

    def available(self) -> str | None:
        return None

    def supported_ops(self) -> frozenset[str]:
        return frozenset(op.value for op in Op)

    def run(self, fn: Function, inputs: Inputs) -> Outputs:
        return interpret(fn, inputs)

    def versions(self) -> dict[str, str]:
        return {"numpy": np.__version__}
