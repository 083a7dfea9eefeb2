"""Runs and fuzz campaigns on a Dask cluster (``--scheduler local:N | tcp://HOST:PORT``).

The embedded default stays the local process pool (``keracheck.worker``): nothing here, and no
Dask, is imported unless ``--scheduler`` is given.  With it:

* :mod:`.cluster` parses ``--scheduler`` and is keracheck's end of the *gateway*
  (:mod:`.gateway`), the process that holds the Dask client (keracheck's own process never
  opens a network socket) and, for ``local:N``, the ``LocalCluster`` of N single-threaded
  worker processes;
* :mod:`.probe` is the worker plugin that probes every target on each worker (its
  ``available()``, as ``keracheck targets`` does there), so a batch goes only to a worker that
  has its target -- and a target no worker has is ``unavailable`` with each worker's reason;
* :mod:`.tasks` is what runs on a worker: a batch goes through ``keracheck.worker.run_isolated``
  exactly as in the local pool (sandboxed, time-limited, a crash costs that batch), from the
  case's ``.keg`` bytes, recording the fingerprint loaded; a fuzz shard is a local campaign;
* :mod:`.run` splits each target's cases into batches, streams results back as they finish
  (into the run journal and the result cache), retries the batches of a worker that died
  elsewhere, and makes a case that keeps killing workers an ``error``;
* :mod:`.fuzz` shards a campaign by seed ranges, merges findings by signature and keeps a
  checkpoint to resume from.

See ``docs/distributed.md``.
"""

from __future__ import annotations

from keracheck.distributed.cluster import Cluster, SchedulerError, connect

__all__ = ["Cluster", "SchedulerError", "connect"]
