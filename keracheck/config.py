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
"""

from __future__ import annotations

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
}


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
            "opt_levels": (str, list), "pass_plugins": list,
        }[k]  # fmt: skip
        if not isinstance(value, expected) or isinstance(value, bool):
            raise ConfigError(f"{path}: [tool.keracheck] '{key}' has the wrong type")
        out[k] = value
    return out, path
