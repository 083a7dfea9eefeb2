"""Plugins that crash or hang outside run() (for tests/unit/test_plugin_containment.py)."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from kera.interp import interpret
from kera.ops import Op

ALL = frozenset(o.value for o in Op)


def _segfault() -> None:
    os.kill(os.getpid(), signal.SIGSEGV)


class _Clone:
    api_version = 1
    name = "base"

    def available(self) -> str | None:
        return None

    def supported_ops(self) -> frozenset[str]:
        return ALL

    def run(self, fn: Any, inputs: Any) -> Any:
        return interpret(fn, inputs)


class SegvAvailable(_Clone):
    name = "segv-available"

    def available(self) -> str | None:
        _segfault()
        return None


class HangAvailable(_Clone):
    name = "hang-available"

    def available(self) -> str | None:
        time.sleep(3600)
        return None


class SegvOps(_Clone):
    name = "segv-ops"

    def supported_ops(self) -> frozenset[str]:
        _segfault()
        return ALL


class RaisingOps(_Clone):
    name = "raising-ops"

    def supported_ops(self) -> frozenset[str]:
        raise RuntimeError("no idea")


class HangVersions(_Clone):
    name = "hang-versions"

    def versions(self) -> dict[str, str]:
        time.sleep(3600)
        return {}


class SegvDeclines(_Clone):
    name = "segv-declines"

    def declines(self, fn: Any) -> str | None:
        _segfault()
        return None


class HangDeclines(_Clone):
    name = "hang-declines"

    def declines(self, fn: Any) -> str | None:
        time.sleep(3600)
        return None
