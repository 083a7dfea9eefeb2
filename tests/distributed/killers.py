"""A target plugin that kills the Dask worker process running it, on planted cases.

It is the reference interpreter, except for a case whose function name starts with

* ``kill_always``: every time it runs on a Dask worker, that worker process dies (SIGKILL), as
  if the machine ran out of memory there;
* ``kill_once``: only the first time (a marker file in ``$KERACHECK_TEST_KILL_DIR`` remembers
  it), so a retry on another worker succeeds.

The Dask worker is the nearest ancestor process started by ``multiprocessing.spawn`` (a
``LocalCluster`` or ``dask worker`` nanny starts its worker processes so); outside Dask (the
local pool) there is none and the case just runs.  Only with ``--sandbox=off``: inside the
sandbox's pid namespace no ancestor is visible, which is the point of the sandbox.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from kera.interp import interpret
from kera.ops import Op

ALL = frozenset(o.value for o in Op)


#: the ``-c`` program of a process started by ``multiprocessing.spawn`` (the forkserver and
#: its children carry the words elsewhere on their command lines, so match the argument)
SPAWN_MAIN = b"from multiprocessing.spawn import spawn_main"


def _parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


def dask_worker_pid() -> int | None:
    """The nearest ancestor whose command line is multiprocessing's ``spawn_main``."""
    pid = os.getpid()
    while pid > 1:
        pid = _parent(pid)
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return None
        if any(arg.startswith(SPAWN_MAIN) for arg in cmdline.split(b"\0")):
            return pid
    return None


def _first_time(name: str) -> bool:
    folder = os.environ.get("KERACHECK_TEST_KILL_DIR")
    if not folder:
        return False
    try:
        os.close(os.open(os.path.join(folder, name), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


class Killer:
    api_version = 1
    name = "killer"

    def available(self) -> str | None:
        return None

    def supported_ops(self) -> frozenset[str]:
        return ALL

    def run(self, fn: Any, inputs: Any) -> Any:
        planted = fn.name.startswith("kill_always") or (
            fn.name.startswith("kill_once") and _first_time(fn.name)
        )
        worker = dask_worker_pid() if planted else None
        if worker is not None:
            os.kill(worker, signal.SIGKILL)
            signal.pause()  # the worker's death takes this process with it
        return interpret(fn, inputs)
