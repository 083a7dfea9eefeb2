"""``kerac lsp``: the Kera language server (``docs/editor.md``).

Modules: ``text`` (byte offsets <-> the protocol's UTF-16 positions, applying edits),
``analysis`` (one document's tree, diagnostics, types and fingerprints, kept incrementally:
``kera.syntax.reparse`` for the tree, one cached check per function for the rest), ``names``
(definitions and references by generic tree walking, semantic tokens), ``features`` (hover,
completion, symbols, rename, formatting), ``lens`` (fingerprint code lenses and cross-target
verdicts from a background ``keracheck run``) and ``server`` (the pygls wiring over stdio).
"""
