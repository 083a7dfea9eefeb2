"""The target registry: stable target ids -> back-end objects.

Built-in targets are listed in :data:`BUILTIN` as ``"module:attr"`` specs and imported lazily, so
a target whose module or toolchain is missing is reported ``unavailable`` with the reason instead
of breaking the others.  Installed plugins come from the entry-point group
``keracheck.backends``; ``--backend-plugin module:attr`` or ``path/to/file.py:Class`` loads one
that is not installed.  ``attr`` may name a Backend class (instantiated with no arguments), a
zero-argument factory, or a ready instance.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from kera.plugins import PluginSpecError, import_attr, instance, split_spec
from keracheck.target import API_VERSION, Backend

BUILTIN: dict[str, str] = {
    "ref": "keracheck.targets.ref:RefBackend",
    "cpu": "keracheck.targets.cpu:cpu",
    "cpu:scalar": "keracheck.targets.cpu:cpu_scalar",
    "cpu:sse2": "keracheck.targets.cpu:cpu_sse2",
    "cpu:avx2": "keracheck.targets.cpu:cpu_avx2",
    "cpu:avx512": "keracheck.targets.cpu:cpu_avx512",
    "cpu-aarch64": "keracheck.targets.cpu:cpu_aarch64",
    "cpu-riscv64": "keracheck.targets.cpu:cpu_riscv64",
    "wasm": "keracheck.targets.wasm:WasmBackend",
    "wasm-simd": "keracheck.targets.wasm:WasmSimdBackend",
    "wasm-node": "keracheck.targets.wasm:WasmNodeBackend",
    "ptx-emu": "keracheck.targets.ptx:PtxEmuBackend",
    "ptx-emu:adversarial": "keracheck.targets.ptx:PtxEmuAdversarialBackend",
    "ptx-gpu": "keracheck.targets.ptx:PtxGpuBackend",
    "verilog": "keracheck.targets.verilog:CocotbTarget",
    "verilog-verilator": "keracheck.targets.verilog:VerilatorTarget",
}

#: ids the default target set leaves out (ISA-level variants of another target)
VARIANT_SEP = ":"


class TargetError(Exception):
    """A target id or plugin spec that cannot be resolved (a usage error, exit 2)."""


@dataclass
class Target:
    id: str
    spec: str
    backend: Backend | None
    reason: str | None  # None when available

    @property
    def available(self) -> bool:
        return self.backend is not None and self.reason is None


def instantiate(spec: str) -> Backend:
    """The back end a spec names, checked against the plugin interface."""
    try:
        backend = instance(import_attr(spec))
    except PluginSpecError as e:
        raise TargetError(str(e)) from None
    missing = [
        m
        for m in ("name", "api_version", "available", "supported_ops", "run")
        if not hasattr(backend, m)
    ]
    if missing:
        raise TargetError(
            f"plugin '{spec}' is not a keracheck back end: it lacks {', '.join(missing)}"
        )
    if backend.api_version != API_VERSION:
        raise TargetError(
            f"plugin '{spec}' implements API version {backend.api_version}; keracheck needs {API_VERSION}"
        )
    return backend


def known_specs() -> dict[str, str]:
    specs = dict(BUILTIN)
    for ep in importlib.metadata.entry_points(group="keracheck.backends"):
        specs.setdefault(ep.name, ep.value)
    return specs


def is_builtin(spec: str) -> bool:
    """Specs of keracheck's own targets, which run in-process; every other spec is a
    third-party plugin and is contained (``keracheck.plugin_host``)."""
    return spec in BUILTIN.values()


def resolve(target_id: str, spec: str) -> Target:
    """Instantiate one target; an import failure or a missing tool makes it unavailable.  A
    plugin is loaded in a contained host process, so a crash or hang in its import,
    ``available()``, ``supported_ops()`` or ``versions()`` makes it unavailable with the reason
    instead of taking keracheck down."""
    if not is_builtin(spec):
        from keracheck.plugin_host import PluginCallError, contained

        try:
            proxy = _HOSTS.get(spec) or contained(spec)
        except PluginCallError as e:
            return Target(target_id, spec, None, str(e))
        _HOSTS[spec] = proxy
        return Target(target_id, spec, proxy, proxy.available())
    try:
        backend = instantiate(spec)
    except ModuleNotFoundError as e:
        return Target(target_id, spec, None, f"back end module not installed ({e.name})")
    except TargetError as e:
        return Target(target_id, spec, None, str(e))
    except Exception as e:  # a broken back end must not take the registry down
        return Target(target_id, spec, None, f"back end failed to load: {type(e).__name__}: {e}")
    try:
        reason = backend.available()
    except Exception as e:
        reason = f"available() raised {type(e).__name__}: {e}"
    return Target(target_id, spec, backend, reason)


def resolve_all(items: Sequence[tuple[str, str]]) -> list[Target]:
    """:func:`resolve` of many (id, spec) pairs at once, in order: the first run on a machine
    probes each toolchain (``keracheck.probe``: a build, for simulators seconds), so the probes
    run side by side rather than one after another."""
    if len(items) <= 1:
        return [resolve(t, s) for t, s in items]
    with ThreadPoolExecutor(max_workers=min(8, len(items))) as pool:
        return list(pool.map(lambda item: resolve(*item), items))


def load_plugin(spec: str) -> tuple[str, str]:
    """(target id, spec) of a --backend-plugin; raises TargetError on a bad spec.  The plugin
    is loaded in a contained host process (``keracheck.plugin_host``), never in keracheck."""
    from keracheck.plugin_host import PluginCallError, contained

    if is_builtin(spec):
        return instantiate(spec).name, spec
    _import_attr_check(spec)
    try:
        proxy = contained(spec)
    except PluginCallError as e:
        message = str(e)
        if message.startswith("plugin ") or message.startswith("'") or "plugin file" in message:
            raise TargetError(message) from None
        raise TargetError(f"cannot load plugin '{spec}': {message}") from None
    _HOSTS[spec] = proxy
    return proxy.name, spec


#: plugin hosts loaded by load_plugin, reused by resolve for the same spec
_HOSTS: dict[str, Any] = {}


def close_hosts() -> None:
    """Stop every plugin host this process started (the end of a command)."""
    for proxy in list(_HOSTS.values()):
        proxy.close()
    _HOSTS.clear()


def _import_attr_check(spec: str) -> None:
    """The checks of a spec that need no import (usage errors, exit 2)."""
    try:
        split_spec(spec)
    except PluginSpecError as e:
        raise TargetError(str(e)) from None


def default_ids(specs: dict[str, str]) -> list[str]:
    return [t for t in specs if VARIANT_SEP not in t]
