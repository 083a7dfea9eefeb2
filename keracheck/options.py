"""The settings of one ``keracheck run``: targets, inputs, limits, baseline, outputs.

Built by the CLI (flags over ``[tool.keracheck]``), by the pytest plugin and by the benches;
read by collection (:mod:`keracheck.collect`: input count, seed, profile, ``-k``), the run
(:mod:`keracheck.harness`) and the report (:mod:`keracheck.document`: seed, command, plugins).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Options:
    """One run's settings; each default is the CLI flag's."""

    targets: list[str] | None = None
    require: list[str] = field(default_factory=list)
    plugins: dict[str, str] = field(default_factory=dict)  # id -> spec
    n: int = 64
    seed: int = 0
    repeat: int = 1
    jobs: int = 2
    timeout: float = 120.0
    baseline: dict[str, Any] | None = None
    dump_outputs: str | None = None
    cache_dir: str | None = None
    command: str = "keracheck run"
    progress: Callable[[str], None] | None = None
    keyword: Callable[[str], bool] | None = None
    input_profile: str = (
        "special"  # keracheck.inputs.PROFILES  # -k: which node ids (path::function) run
    )
    heartbeat: float = 10.0  # seconds between "still running" lines while targets run
    opt_levels: tuple[int, ...] = (0,)  # every target at each level (keracheck.opt_levels)
    pass_plugins: list[str] = field(default_factory=list)  # --pass-plugin specs
    localise: bool = True  # name each divergence's first diverging node (--no-localise: off)
    journal_dir: str | None = None  # where the run journal lives (keracheck.journal); None: none
    resume: bool = True  # take the results of an interrupted run's journal (--no-resume: discard)
    sandbox: str = "on"  # workers in bubblewrap + seccomp + rlimits (keracheck.sandbox); "off"
    #: a ``keracheck.distributed.Cluster`` (``--scheduler``): batches run on its Dask workers;
    #: None: the local process pool
    scheduler: Any = None
