"""The old name of :mod:`keracheck.target`, the target plugin interface.

"Back end" now means a renderer in ``kera.backends``; what keracheck runs is a *target*.  This
module stays so that installed third-party plugins importing ``keracheck.backend`` keep working;
new code imports :mod:`keracheck.target`.  It emits no deprecation warning on purpose: a plugin
loaded under ``pytest -W error`` would fail on the import alone.
"""

from __future__ import annotations

from keracheck.target import (
    API_VERSION,
    Array,
    Backend,
    BackendError,
    BatchBackend,
    Inputs,
    Outputs,
    declines,
)

__all__ = [
    "API_VERSION",
    "Array",
    "Backend",
    "BackendError",
    "BatchBackend",
    "Inputs",
    "Outputs",
    "declines",
]
