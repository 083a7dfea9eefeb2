"""Back ends: one module per target, each a table of op lowerings plus a short loop."""
