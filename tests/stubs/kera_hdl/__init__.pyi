# kera_hdl is hdl_sim/ installed under another name (pyproject's package-dir), which mypy
# cannot map: this stub, on mypy_path, points it at the real module so the tests see its types.
from hdl_sim import *  # noqa: F403 (the stub re-exports the whole module by design)
