"""``keracheck.backend``, the old name of ``keracheck.target``: installed plugins that import it
get the very same objects, and importing it warns about nothing (pytest runs with -W error)."""

from __future__ import annotations

import importlib
import sys
import warnings

import keracheck.target as target


def test_old_module_name_gives_the_same_objects() -> None:
    sys.modules.pop("keracheck.backend", None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        old = importlib.import_module("keracheck.backend")
    names = {"API_VERSION", "Array", "Backend", "BackendError", "BatchBackend", "Inputs"}
    names |= {"Outputs", "declines"}
    assert set(old.__all__) == names
    for name in names:
        assert getattr(old, name) is getattr(target, name)
