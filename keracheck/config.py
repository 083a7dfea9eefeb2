"""``[tool.keracheck]`` in the nearest pyproject.toml (searched upward from the working
directory).  Keys mirror the long CLI flags with dashes or underscores; CLI flags win.

    [tool.keracheck]
    targets = ["ref", "cpu", "wasm"]   # or "ref,cpu,wasm"
    require = ["ref"]
    inputs = 64
    seed = 0
    repeat = 1
    jobs = 2
    timeout = 120
    baseline = ".keracheck/baseline.json"
    backend-plugins = ["my_pkg.backend:MyBackend"]
    output-formats = ["html=out/run.html", "sarif=out/run.sarif"]   # a list: paths may hold commas
    sandbox = "on"                     # "off": targets run unsandboxed (docs/security.md)

    [tool.keracheck.policy]            # capabilities (docs/security.md); each list restricts its kind
    read = ["corpora"]                 # paths: relative to this pyproject.toml's folder
    write = ["out", "reports"]
    keys = ["env://KERACHECK_KEY"]
    toolchains = ["ref", "cpu", "wasm"]
    plugins = ["my_pkg.backend:MyBackend"]
    network = false                    # the only value: the network is never granted
    audit-capacity = 4096              # entries the audit log keeps (a ring)
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

KEYS = {
    "targets",
    "require",
    "inputs",
    "seed",
    "repeat",
    "jobs",
    "timeout",
    "baseline",
    "backend_plugins",
    "format",
    "input_profile",
    "opt_levels",
    "pass_plugins",
    "output_formats",
    "policy",
    "sandbox",
}

#: [tool.keracheck.policy] keys -> whether their strings are paths (taken from the file's folder)
POLICY_LISTS = {"read": True, "write": True, "keys": True, "toolchains": False, "plugins": True}


class ConfigError(ValueError):
    pass


def find_pyproject(start: Path) -> Path | None:
    for d in (start, *start.parents):
        p = d / "pyproject.toml"
        if p.is_file():
            return p
    return None


def load(start: Path | None = None) -> tuple[dict[str, Any], Path | None]:
    path = find_pyproject((start or Path.cwd()).resolve())
    if path is None:
        return {}, None
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"{path}: cannot read [tool.keracheck]: {e}") from None
    raw = data.get("tool", {}).get("keracheck", {})
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: [tool.keracheck] must be a table")
    out: dict[str, Any] = {}
    for key, value in raw.items():
        k = key.replace("-", "_")
        if k not in KEYS:
            raise ConfigError(
                f"{path}: [tool.keracheck] has unknown key '{key}' (known: {', '.join(sorted(KEYS))})"
            )
        if k in ("targets", "require", "backend_plugins", "pass_plugins") and isinstance(
            value, str
        ):
            value = [v.strip() for v in value.split(",") if v.strip()]
        expected: Any = {
            "targets": list, "require": list, "backend_plugins": list,
            "inputs": int, "seed": int, "repeat": int, "jobs": int,
            "timeout": (int, float), "baseline": str, "format": str, "input_profile": str,
            "opt_levels": (str, list), "pass_plugins": list, "output_formats": list,
            "policy": dict, "sandbox": str,
        }[k]  # fmt: skip
        if not isinstance(value, expected) or isinstance(value, bool):
            raise ConfigError(f"{path}: [tool.keracheck] '{key}' has the wrong type")
        if k == "output_formats" and not all(isinstance(v, str) for v in value):
            raise ConfigError(
                f"{path}: [tool.keracheck] '{key}' must be a list of FMT=PATH strings"
            )
        if k == "sandbox" and value not in ("on", "off"):
            raise ConfigError(f'{path}: [tool.keracheck] sandbox must be "on" or "off"')
        out[k] = policy(value, path) if k == "policy" else value
    return out, path


def policy(table: dict[str, Any], path: Path) -> dict[str, Any]:
    """``[tool.keracheck.policy]`` checked, its paths made absolute from ``path``'s folder;
    ``path`` itself is kept (denials name it)."""
    out: dict[str, Any] = {"path": str(path)}
    for key, value in table.items():
        k = key.replace("-", "_")
        if k in POLICY_LISTS:
            if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
                raise ConfigError(
                    f"{path}: [tool.keracheck.policy] '{key}' must be a list of strings"
                )
            out[k] = [_anchor(v, path.parent) for v in value] if POLICY_LISTS[k] else value
        elif k == "network":
            if value is not False:
                raise ConfigError(
                    f"{path}: [tool.keracheck.policy] network can only be false: the network is "
                    "never granted (keracheck and its targets work offline)"
                )
        elif k == "audit_capacity":
            if not isinstance(value, int) or isinstance(value, bool) or not 16 <= value <= 1 << 20:
                raise ConfigError(
                    f"{path}: [tool.keracheck.policy] audit-capacity must be an integer in "
                    "[16, 1048576]"
                )
            out[k] = value
        else:
            known = ", ".join(sorted([*POLICY_LISTS, "network", "audit-capacity"]))
            raise ConfigError(
                f"{path}: [tool.keracheck.policy] has unknown key '{key}' (known: {known})"
            )
    return out


def _anchor(value: str, base: Path) -> str:
    """A policy path (or ``file.py:attr`` plugin) taken from the config file's folder;
    ``env://`` keys and module plugins as written."""
    if value.startswith("env://"):
        return value
    mod, sep, attr = value.rpartition(":")
    if sep and not mod.endswith(".py"):
        return value  # a module:attr plugin spec
    if sep:
        return f"{base / os.path.expanduser(mod)}:{attr}"
    return str(base / os.path.expanduser(value))
