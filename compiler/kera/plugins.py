"""Loading a plugin named by ``module:attr`` or ``path/to/file.py:attr``: target plugins
(``keracheck --backend-plugin``) and pass plugins (``--pass-plugin``) are found the same way."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any


class PluginSpecError(ValueError):
    """A spec that names no loadable object (a usage error)."""


def split_spec(spec: str) -> tuple[str, str]:
    """(module or file, attribute) of ``spec``, after the checks that need no import: its
    form, and that a named file exists."""
    mod_name, sep, attr = spec.rpartition(":")
    if not sep or not mod_name or not attr:
        raise PluginSpecError(
            f"plugin spec '{spec}' must be 'module:attr' or 'path/to/file.py:Class'"
        )
    if mod_name.endswith(".py") and not Path(mod_name).is_file():
        raise PluginSpecError(f"plugin file '{mod_name}' does not exist")
    return mod_name, attr


def import_attr(spec: str) -> Any:
    """The object ``spec`` names.  A file is executed as a module of its own (registered in
    ``sys.modules`` so that its classes pickle and its relative state survives)."""
    mod_name, attr = split_spec(spec)
    if mod_name.endswith(".py"):
        module = _load_file(Path(mod_name))
    else:
        try:
            module = importlib.import_module(mod_name)
        except ImportError as e:
            raise PluginSpecError(f"cannot import plugin module '{mod_name}': {e}") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise PluginSpecError(f"'{mod_name}' has no attribute '{attr}'") from None


def instance(obj: Any) -> Any:
    """What a plugin spec names, made ready: a class or a zero-argument factory (callable, with
    no ``run`` of its own) is called; anything else is the plugin itself."""
    if isinstance(obj, type) or (callable(obj) and not hasattr(obj, "run")):
        return obj()
    return obj


def _load_file(path: Path) -> Any:
    name = f"kera_plugin_{abs(hash(str(path.resolve())))}"
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise PluginSpecError(f"cannot load plugin file '{path}'")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    module_spec.loader.exec_module(module)
    return module
