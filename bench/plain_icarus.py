"""A measuring aid, not a target of the product: the ``verilog`` target's batching and work
split with Icarus driven by the plain generated bench (the one ``verilog-verilator`` uses)
instead of cocotb, so that what cocotb costs can be measured on the same cases::

    KERACHECK_CACHE=$(mktemp -d) .venv/bin/keracheck run corpora/ --no-cache -q \\
        --targets ref --backend-plugin bench/plain_icarus.py:PlainIcarus

against the same command with ``--targets ref,verilog`` (bench/README.md, issue 20)."""

from __future__ import annotations

from collections.abc import Sequence

from kera.ir import Function
from keracheck.target import Inputs, Outputs
from keracheck.targets.verilog import CocotbTarget, run_plain


class PlainIcarus(CocotbTarget):
    name = "plain-icarus"

    def available(self) -> str | None:
        return None

    def _simulate(self, cases: Sequence[tuple[Function, Inputs]]) -> list[Outputs]:
        return run_plain(cases, "icarus")
