"""The target plugin interface (API version 1).

A *target* is what keracheck runs a case on: it turns one exported Kera function into something
a toolchain executes (usually through a renderer in ``kera.backends``), and runs it on a batch
of input vectors.  keracheck discovers targets through the entry-point group
``keracheck.backends`` (each entry point names a class or a zero-argument factory) and through
``--backend-plugin module:attr`` / ``--backend-plugin path/to/file.py:Class``; both names are
kept from before the rename for installed plugins.  This module was ``keracheck.backend``;
that name still imports (:mod:`keracheck.backend`).

Contract for implementers:

* ``name`` is the stable target id shown to users (``cpu``, ``wasm``, ``ptx-emu`` ...).
* ``api_version`` must equal :data:`API_VERSION`.
* ``available()`` returns ``None`` when the target can run here, else one line giving the
  reason *and* the command that would fix it ("iverilog not on PATH: apt-get install iverilog").
  It must never raise.  A target that builds code should prove it can, not only look for its
  tools on PATH: ``keracheck.probe.proven`` builds and runs a probe once per machine and
  toolchain and caches the pass, so later calls are cheap.
* ``supported_ops()`` is the set of contract op names (``kera.ops.Op`` values) it lowers.
* ``run(fn, inputs)`` executes ``fn`` (a :class:`kera.ir.Function`) on ``inputs``: a mapping from
  parameter name to an array of shape ``(N, *param.shape)`` with the parameter's numpy dtype.
  It returns one array per result, of shape ``(N, *result.shape)``.  Outputs are compared bit
  for bit against the reference interpreter, so return exactly what the target produced.
* ``run_many(cases)`` is optional: many (function, inputs) pairs in as few toolchain calls as
  possible.  Each entry of the returned list is the outputs or an exception for that case, so
  one failing case never loses the others.
* ``artifacts(fn)`` is optional: the emitted code (C, PTX, Verilog, wasm ...) by file name, so
  reports can record its digest.
* ``versions()`` is optional: toolchain name -> version string, recorded in reports.
* ``cost`` is optional: a rough cost of one case relative to the reference interpreter's
  (default 1; a simulator is in the hundreds).  keracheck starts the costliest targets of a
  run first, so that the slowest one does not start last and leave the other CPUs idle at the
  end; it orders the work only and never changes a result.
* ``declines(fn)`` is optional: one line saying why ``fn`` is past a documented limit of the
  target (a size or resource bound, not a lowering bug), else ``None``.  keracheck reports such
  a case ``unsupported`` for that target, like an op outside ``supported_ops()``, and the
  fuzzer does not count it as a divergence.  It must not raise.

keracheck calls targets in a worker process with a time limit, so a crash or hang in one
target's run becomes an ``error`` for that case and target only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from kera.ir import Function

API_VERSION = 1

Array = npt.NDArray[np.generic]
Inputs = Mapping[str, Array]
Outputs = list[Array]


@runtime_checkable
class Backend(Protocol):
    """What every target implements; see the module docstring for the contract."""

    name: str
    api_version: int

    def available(self) -> str | None: ...

    def supported_ops(self) -> frozenset[str]: ...

    def run(self, fn: Function, inputs: Inputs) -> Outputs: ...


class BatchBackend(Backend, Protocol):
    """A target that can compile and run many cases in one toolchain invocation."""

    def run_many(self, cases: Sequence[tuple[Function, Inputs]]) -> list[Outputs | Exception]: ...


def cost(backend: Backend | None) -> float:
    """The target's ``cost`` hint (see above): 1 when it has none or a bad one."""
    try:
        hint = float(getattr(backend, "cost", 1))
    except Exception:  # a hint that is no number (or a property that raises) counts as 1
        return 1.0
    return hint if hint > 0 and math.isfinite(hint) else 1.0


def declines(backend: Backend, fn: Function) -> str | None:
    """The target's reason for declining fn (see ``declines`` above), or None."""
    method = getattr(backend, "declines", None)
    if method is None:
        return None
    try:
        reason = method(fn)
    except Exception:  # a broken hook declines nothing: the run then shows what is wrong
        return None
    return None if reason is None else str(reason)


class BackendError(Exception):
    """A target failed to build or run a case (compiler error, crash, bad output file...)."""
