"""The entry points of the Kera front end.

``compile_source(text, path)`` runs every stage (lex, parse, tree, check, build) and returns
a :class:`CompileResult`: ``graph`` holds the exported functions, in source order, when the
source has no diagnostics, else it is None; ``diagnostics`` has all of them, in source order.
Stages after a syntax error still run (missing parts are skipped silently), so one call
reports every independent error.  No input makes these functions raise.

``render_diagnostics(diags, text, path)`` prints them as
``path:line:col: error[E0xxx]: message`` with the source line and a caret line.
``format_source(text)`` formats (returning ``text`` unchanged when it has syntax errors;
``format_result`` says why).

Sources are ``str`` or UTF-8 ``bytes``; byte spans refer to the UTF-8 encoding.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from dataclasses import dataclass, field

from kera.ir import Function, Graph
from kera.syntax.build import Builder
from kera.syntax.check import Reporter, collect
from kera.syntax.diagnostics import (
    Diagnostic,
    LineIndex,
    decode_source,
    encode_source,
    render_all,
    sort_unique,
)
from kera.syntax.fmt import format_events
from kera.syntax.lexer import Tokens, lex
from kera.syntax.parser import parse
from kera.syntax.tree import GreenNode, SourceFile, build_green, root


@dataclass(slots=True)
class CompileResult:
    graph: Graph | None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    tree: GreenNode | None = None

    @property
    def ok(self) -> bool:
        return self.graph is not None and not self.diagnostics


@dataclass(slots=True)
class SyntaxResult:
    """The lossless tree of a source and its syntax (lexer and parser) diagnostics."""

    tokens: Tokens
    tree: GreenNode
    diagnostics: list[Diagnostic]

    @property
    def root(self) -> SourceFile:
        return root(self.tree)


def parse_source(text: str | bytes) -> SyntaxResult:
    data = encode_source(text)
    tokens = lex(data)
    result = parse(tokens)
    tree = build_green(tokens, result.events, result.sig)
    return SyntaxResult(tokens, tree, [*tokens.diagnostics, *result.diagnostics])


def check_tree(syntax: SyntaxResult) -> tuple[list[Function], list[Diagnostic]]:
    """Check every function; the IR functions of the valid exports, and the diagnostics.

    Exports are built first.  A helper that some call has already expanded was checked there
    (with arguments of its parameter types, so with the same diagnostics); the others are
    checked on their own, with their parameters.
    """
    reporter = Reporter(LineIndex(syntax.tokens.data))
    sigs = collect(syntax.root, reporter)
    builder = Builder(sigs, reporter)
    exports: list[Function] = []
    for sig in sigs.values():
        fn = builder.function(sig) if sig.export else None
        if fn is not None:
            exports.append(fn)
    for sig in sigs.values():
        if not sig.export and sig.name not in builder.expanded:
            builder.function(sig)
    return exports, reporter.diagnostics


@contextlib.contextmanager
def _no_gc(promote: bool = False) -> Iterator[None]:
    """Pause the cyclic garbage collector: the front end allocates millions of small acyclic
    objects, and full collections in the middle cost a fifth of the time on large files.

    With ``promote``, what was allocated meanwhile is moved straight into the oldest
    generation on the way out (``gc.freeze()`` then ``gc.unfreeze()``: two list splices, no
    scan).  Otherwise the first young collection after the pause scans every object the
    compile made (0.3-0.5 s for a 50k-line file) and the next middle one again, only to find
    the long-lived tree and graph, which hold no cycles.  The objects are still scanned by
    the next full collection.  The young generations are collected first, so the caller's
    young cyclic garbage is freed rather than promoted to wait for a full collection (or for
    the interpreter's exit).  Skipped when the process has frozen objects of its own (the
    language server does): ``gc.unfreeze`` would hand those back."""
    was = gc.isenabled()
    promoting = promote and was and gc.get_freeze_count() == 0
    if promoting:
        gc.collect(1)  # the young generations: a few thousand objects at most
    gc.disable()
    try:
        yield
    finally:
        if was:
            if promoting:
                gc.freeze()
                gc.unfreeze()
            gc.enable()


#: sources at least this big have their compile's objects promoted (see ``_no_gc``); small
#: ones (the fuzzer's programs, a probe) leave the young generations as they are
PROMOTE_BYTES = 1 << 16


def compile_source(text: str | bytes, path: str = "<input>") -> CompileResult:
    with _no_gc(promote=len(text) >= PROMOTE_BYTES):
        syntax = parse_source(text)
        exports, check_diags = check_tree(syntax)
        diags = sort_unique([*syntax.diagnostics, *check_diags])
        graph = Graph(exports) if not diags else None
    return CompileResult(graph, diags, syntax.tree)


def render_diagnostics(diags: list[Diagnostic], text: str | bytes, path: str) -> str:
    return render_all(diags, text, path)


def format_result(text: str | bytes) -> tuple[str, list[Diagnostic]]:
    """The formatted text and no diagnostics, or the text unchanged and its syntax errors."""
    data = encode_source(text)
    tokens = lex(data)
    result = parse(tokens)
    diags = [*tokens.diagnostics, *result.diagnostics]
    original = text if isinstance(text, str) else decode_source(data)
    if diags:
        return original, diags
    return decode_source(format_events(tokens, result.events)), []


def format_source(text: str | bytes) -> str:
    return format_result(text)[0]
