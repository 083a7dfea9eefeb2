"""Back ends with planted behaviour for the harness tests (loaded with --backend-plugin)."""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np
from numpy.typing import NDArray

from kera.interp import interpret
from kera.ops import Op

ALL = frozenset(o.value for o in Op)


class _Base:
    api_version = 1
    name = "base"

    def available(self) -> str | None:
        return None

    def supported_ops(self) -> frozenset[str]:
        return ALL


class Clone(_Base):
    name = "clone"

    def run(self, fn: Any, inputs: Any) -> Any:
        return interpret(fn, inputs)


def _minss(_node: Any, a: NDArray[Any], b: NDArray[Any]) -> NDArray[Any]:
    return np.where(a < b, a, b)


class Minss(_Base):
    """x86 MINSS: min returns the second operand unless a < b (NaN and -0 rules broken)."""

    name = "minss"

    def run(self, fn: Any, inputs: Any) -> Any:
        return interpret(fn, inputs, overrides={"min": _minss})


class Crash(_Base):
    name = "crash"

    def run(self, fn: Any, inputs: Any) -> Any:
        if "boom" in fn.param_names():
            os._exit(7)  # a hard crash of the target process
        return interpret(fn, inputs)


class Hang(_Base):
    name = "hang"

    def run(self, fn: Any, inputs: Any) -> Any:
        time.sleep(3600)
        return []


class Flaky(_Base):
    name = "flaky"

    def __init__(self) -> None:
        self.calls = 0

    def run(self, fn: Any, inputs: Any) -> Any:
        self.calls += 1
        outs = interpret(fn, inputs)
        if self.calls > 1:
            outs = [o.copy() for o in outs]
            flat = outs[0].reshape(-1).view(f"u{outs[0].dtype.itemsize}")
            flat[0] ^= 1
        return outs


class NoMin(_Base):
    name = "nomin"

    def supported_ops(self) -> frozenset[str]:
        return ALL - {"min"}

    def run(self, fn: Any, inputs: Any) -> Any:
        return interpret(fn, inputs)


class Missing(_Base):
    name = "missing"

    def available(self) -> str | None:
        return "faketool not on PATH: apt-get install faketool"

    def run(self, fn: Any, inputs: Any) -> Any:
        raise AssertionError("never called")


class MinssAsClone(Minss):
    """Minss under the id 'clone': a target whose behaviour changed since a report was signed."""

    name = "clone"


class MinssDeclinesMin(Minss):
    """Minss that declines every function with a min (a documented limit, not a bug)."""

    name = "minss-declines"

    def declines(self, fn: Any) -> str | None:
        if any(n.op is Op.MIN for n in fn.nodes()):
            return "min is past this target's documented limits"
        return None


class MinssBrokenDeclines(Minss):
    """Minss whose declines hook raises: it declines nothing, so the min bug still shows."""

    name = "minss-broken-declines"

    def declines(self, fn: Any) -> str | None:
        raise RuntimeError("hook bug")


class Sleeper(_Base):
    """Starts a long child process and waits for it (for the no-orphans test)."""

    name = "sleeper"

    def run(self, fn: Any, inputs: Any) -> Any:
        import subprocess

        subprocess.run(["sleep", "120"], check=False)
        return interpret(fn, inputs)


class Broken(_Base):
    """Says it is available and then fails every case (for keracheck doctor)."""

    name = "broken"

    def run(self, fn: Any, inputs: Any) -> Any:
        raise RuntimeError("cannot run anything")
