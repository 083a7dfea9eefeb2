"""The worker plugin that tells which Dask worker has which target.

:class:`TargetProbe` is registered with the run's targets (id -> spec).  Its ``setup`` runs on
every worker, and again on a worker that joins later or replaces a dead one: it configures the
sandbox there as keracheck's own process has it (mode and the secrets to hide), lets the
worker process start processes (the local pool's batch processes), resolves every target on
that worker (its probe build and ``available()``, as ``keracheck targets`` would there),
records the result and declares a Dask resource ``keracheck:<target>`` for each target the
worker has.  A batch for target T asks for that resource, so the scheduler places it only on
a worker that has T.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing as mp
from typing import Any

from distributed import NannyPlugin, WorkerPlugin


def resource(target_id: str) -> str:
    """The Dask resource a worker declares for a target it has."""
    return f"keracheck:{target_id}"


class NannyResources(NannyPlugin):
    """The nanny's half: the targets' resources are set on the nanny, which passes them to
    every worker process it starts, and the worker restarts when they changed.  (A resource
    a running worker declares later, with ``set_resources``, does not wake a task that waits
    for it: after a worker died under a batch and its nanny restarted it, the batch would wait
    for ever.)"""

    def __init__(self, specs: dict[str, str], mode: str, files: Any, env: Any) -> None:
        self.probe = TargetProbe(specs, mode, files, env)
        self.restart = False

    async def setup(self, nanny: Any) -> None:
        loop = asyncio.get_running_loop()
        found = await loop.run_in_executor(None, self.probe.probe)
        have = {resource(t): float(nanny.nthreads) for t, (r, _) in found.items() if not r}
        self.restart = have != (nanny.resources or {})  # this nanny's copy of the plugin
        nanny.resources = have


class TargetProbe(WorkerPlugin):
    """The worker plugin (see the module docstring)."""

    idempotent = False

    def __init__(self, specs: dict[str, str], mode: str, files: Any, env: Any) -> None:
        self.specs = specs
        self.mode = mode
        self.files, self.env = tuple(files), tuple(env)

    async def setup(self, worker: Any) -> None:
        loop = asyncio.get_running_loop()
        found = await loop.run_in_executor(None, self.probe)
        worker.keracheck_targets = found
        have = {resource(t): float(worker.state.nthreads) for t, (r, _) in found.items() if not r}
        if have and not worker.state.total_resources:  # a worker without a nanny
            await worker.set_resources(**have)

    def probe(self) -> dict[str, tuple[str | None, dict[str, str]]]:
        """target id -> (None or why this worker cannot run it, its tool versions)."""
        from keracheck import sandbox
        from keracheck.harness import _versions
        from keracheck.targets import resolve_all

        # a Dask worker process is daemonic by default; the local pool's forkserver needs it not
        with contextlib.suppress(AssertionError, ValueError):
            mp.current_process().daemon = False
        sandbox.configure(self.mode, self.files, self.env)
        targets = resolve_all(list(self.specs.items()))
        return {
            t.id: (None if t.available else (t.reason or "cannot load"), _versions(t))
            for t in targets
        }


def report(dask_worker: Any) -> dict[str, Any]:
    """This worker's name and what :class:`TargetProbe` recorded on it (``Client.run``)."""
    return {
        "name": dask_worker.name,
        "targets": dict(getattr(dask_worker, "keracheck_targets", {})),
    }
