"""The Kera language front end: source bytes -> lossless tree -> checked ``kera.ir`` graph.

Stages, each a module: ``lexer`` (bytes -> tokens, trivia included), ``parser`` (tokens ->
Start/Token/Finish/Error events), ``tree`` (events -> lossless green tree and its typed view),
``fmt`` (events -> formatted source), ``check`` (signatures, names, recursion), ``build``
(expressions -> IR, type and shape checking; loops through ``kera.ir.loop``), ``indexing``
(index items -> slice and reshape bounds), ``ownership`` (bindings, moves, borrows, in-out
buffers and the rule of memory spaces, for ``build``), ``diagnostics`` (codes, spans, notes,
hints, rendering), ``literals`` (exact literal values).  ``kera.frontend`` is the entry point.
"""
