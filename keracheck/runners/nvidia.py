"""NVIDIA command-line tools on PATH, or inside NVIDIA's pip wheels.

``nvidia-cuda-nvcc`` (ptxas) and ``nvidia-cuda-nvdisasm`` install their binaries under
``site-packages/nvidia/cu<major>/bin/``, not on PATH; the project's ``[test]`` extra installs
both, so a fresh machine without the CUDA toolkit still assembles and disassembles PTX.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path


def find_tool(name: str) -> str | None:
    """The path of ``name`` on PATH, else in an installed NVIDIA wheel; None if neither."""
    found = shutil.which(name)
    if found:
        return found
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        for candidate in sorted(Path(root).glob(f"cu*/bin/{name}"), reverse=True):
            if os.access(candidate, os.X_OK):
                return str(candidate)
    return None
