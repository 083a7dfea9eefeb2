"""The pygls server behind ``kerac lsp``: protocol types in, :mod:`kera.lsp.features` out.

Each open document is a :class:`Doc`: its :class:`~kera.lsp.analysis.Analysis` (kept
incrementally, one edit at a time) and its :class:`~kera.lsp.text.LineMap` (for the position
encoding the client and server agreed on: UTF-16 unless the client prefers another).  Every
change re-publishes the diagnostics at once; a save (and the first open) starts a background
``keracheck run`` for the code lenses unless every export's fingerprint already has a verdict
(:mod:`kera.lsp.lens`); an edit cancels a run in flight.

Initialization options (all optional)::

    {"keracheck": {"enabled": true, "command": ["/path/to/keracheck"],
                   "targets": "ref,cpu,wasm", "args": ["--inputs", "16"]}}
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method
from pygls.uris import to_fs_path

from kera.lsp import features as F
from kera.lsp import lens
from kera.lsp.analysis import Analysis
from kera.lsp.names import item_names
from kera.lsp.text import UTF16, LineMap
from kera.syntax.diagnostics import Diagnostic
from kera.syntax.reparse import Edit

RUN_TARGETS = "kera.runTargets"  # (uri, targets?): run keracheck now, default targets
RUN_ALL_TARGETS = "kera.runAllTargets"  # (uri): run keracheck on every available target
SOURCE = "kerac"


@dataclass(slots=True)
class Doc:
    uri: str
    analysis: Analysis
    lines: LineMap
    version: int = 0
    checked: list[lsp.Diagnostic] = field(default_factory=list)  # keracheck's divergences


class KeraProtocol(LanguageServerProtocol):
    """pygls keeps a copy of each document and applies every change to it (splitting the
    whole text into lines: ~8 ms a keystroke on a 10,000-line file); :class:`Doc` is the
    server's own copy, so changes skip pygls's."""

    @lsp_method(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(
        self, params: lsp.DidChangeTextDocumentParams
    ) -> Generator[Any, Any, None]:
        handler = self.fm.features.get(lsp.TEXT_DOCUMENT_DID_CHANGE)
        if handler is not None:
            yield handler, (params,), None


class KeraServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "kerac",
            "0.1.0",
            text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental,
            protocol_cls=KeraProtocol,
        )
        self.docs: dict[str, Doc] = {}
        self.checker: lens.Checker | None = lens.Checker()
        self.encoding = UTF16

    def markup(self, text: str, completion: bool) -> lsp.MarkupContent:
        """Markdown where the client takes it (its hover or completion formats), else the
        same text as plain text."""
        td = self.client_capabilities.text_document
        formats: Sequence[lsp.MarkupKind] | None = None
        if td is not None and completion and td.completion and td.completion.completion_item:
            formats = td.completion.completion_item.documentation_format
        elif td is not None and not completion and td.hover:
            formats = td.hover.content_format
        kind = (
            lsp.MarkupKind.Markdown
            if formats and lsp.MarkupKind.Markdown in formats
            else lsp.MarkupKind.PlainText
        )
        return lsp.MarkupContent(kind=kind, value=text)

    # ------------------------------------------------------------------ positions
    def pos(self, doc: Doc, offset: int) -> lsp.Position:
        line, char = doc.lines.position(offset)
        return lsp.Position(line=line, character=char)

    def range(self, doc: Doc, span: tuple[int, int]) -> lsp.Range:
        return lsp.Range(start=self.pos(doc, span[0]), end=self.pos(doc, span[1]))

    def offset(self, doc: Doc, position: lsp.Position) -> int:
        return doc.lines.offset(position.line, position.character)

    def location(self, doc: Doc, span: tuple[int, int]) -> lsp.Location:
        return lsp.Location(uri=doc.uri, range=self.range(doc, span))

    # ---------------------------------------------------------------- documents
    def open(self, uri: str, text: str, version: int) -> Doc:
        data = text.encode("utf-8", "surrogateescape")
        doc = Doc(uri, Analysis(data), LineMap(data, self.encoding), version)
        self.docs[uri] = doc
        gc.freeze()  # the trees are long-lived: keep full collections off them (docs/editor.md)
        return doc

    def change(
        self, doc: Doc, changes: list[lsp.TextDocumentContentChangeEvent], version: int
    ) -> None:
        edits: list[Edit] = []
        lines = doc.lines
        for change in changes:
            text = change.text.encode("utf-8", "surrogateescape")
            if isinstance(change, lsp.TextDocumentContentChangePartial):
                start = lines.offset(change.range.start.line, change.range.start.character)
                end = lines.offset(change.range.end.line, change.range.end.character)
                edits.append(Edit(start, max(start, end), text))
                lines = lines.edited(start, max(start, end), text)
            else:
                edits.append(Edit(0, len(lines.data), text))
                lines = LineMap(text, self.encoding)
        doc.analysis = Analysis.edited(doc.analysis, edits)
        doc.lines = lines
        doc.version = version

    def diagnostic(self, doc: Doc, d: Diagnostic) -> lsp.Diagnostic:
        return lsp.Diagnostic(
            range=self.range(doc, (d.start, d.end)),
            message=d.message,
            severity=lsp.DiagnosticSeverity.Error,
            code=d.code,
            source=SOURCE,
        )

    def publish(self, doc: Doc) -> None:
        diags = [self.diagnostic(doc, d) for d in doc.analysis.diagnostics]
        self.text_document_publish_diagnostics(
            lsp.PublishDiagnosticsParams(
                uri=doc.uri, diagnostics=diags + doc.checked, version=doc.version
            )
        )

    # ------------------------------------------------------------------- lenses
    def schedule_check(self, doc: Doc, targets: str | None = None, force: bool = False) -> None:
        """Start keracheck on the document unless every export already has a verdict."""
        checker = self.checker
        if checker is None:
            return
        fps = [fn.fingerprint for _, fn in doc.analysis.exports() if fn is not None]
        if not fps or (not force and all(checker.known(fp, targets) for fp in fps)):
            self.update_checked(doc)
            return
        name = Path(to_fs_path(doc.uri) or "document.kera").name
        task = checker.start(doc.uri, name, doc.analysis.data, targets)
        task.add_done_callback(lambda t: self.checked_done(doc, t))

    def checked_done(self, doc: Doc, task: asyncio.Task[lens.RunOutcome]) -> None:
        if task.cancelled() or self.docs.get(doc.uri) is not doc:
            return
        outcome = task.result()
        if outcome.message:
            self.window_log_message(
                lsp.LogMessageParams(type=lsp.MessageType.Warning, message=outcome.message)
            )
        self.update_checked(doc)
        caps = self.client_capabilities.workspace
        if caps is not None and caps.code_lens is not None and caps.code_lens.refresh_support:
            self.workspace_code_lens_refresh(None)

    def update_checked(self, doc: Doc) -> None:
        """Divergence diagnostics for the exports whose verdicts are known."""
        checker = self.checker
        doc.checked = []
        if checker is not None:
            for item, fn in doc.analysis.exports():
                verdict = checker.latest.get(fn.fingerprint) if fn is not None else None
                if verdict is not None:
                    doc.checked += self.divergence_diagnostics(doc, item.offset, verdict)
        self.publish(doc)

    def divergence_diagnostics(
        self, doc: Doc, fn_offset: int, v: lens.Verdict
    ) -> list[lsp.Diagnostic]:
        out: list[lsp.Diagnostic] = []
        item = doc.analysis.item_at(fn_offset)
        if item is None:
            return out
        names = item_names(item.green)
        fallback = (
            (item.offset + names.fn_name[0], item.offset + names.fn_name[1])
            if names.fn_name
            else (item.offset, item.offset)
        )
        same_text = v.text == doc.analysis.data
        for d in v.divergences:
            span = fallback
            node = d.get("firstNode")
            if same_text and isinstance(node, Mapping) and node.get("line"):
                span = self.node_span(
                    doc, int(node["line"]), int(node.get("column") or 1), fallback
                )
            out.append(
                lsp.Diagnostic(
                    range=self.range(doc, span),
                    message=lens.divergence_message(d),
                    severity=lsp.DiagnosticSeverity.Error,
                    code=lens.divergence_rule(d),
                    source="keracheck",
                )
            )
        return out

    def node_span(
        self, doc: Doc, line: int, column: int, fallback: tuple[int, int]
    ) -> tuple[int, int]:
        """The span of the expression that starts at a report's line and column: the
        smallest built expression starting there, else its token."""
        offset = doc.lines.char_column(line, column)
        item = doc.analysis.item_at(offset)
        if item is None:
            return fallback
        rel = offset - item.offset
        spans = [(a, b) for a, b, _ in doc.analysis.result(item).types if a == rel]
        if spans:
            a, b = min(spans, key=lambda s: s[1] - s[0])
            return item.offset + a, item.offset + b
        found = F.token_at(doc.analysis.tree, offset)
        return (found[1], found[1] + found[0].width) if found else fallback

    def lenses(self, doc: Doc) -> list[lsp.CodeLens]:
        out: list[lsp.CodeLens] = []
        for item, fn in doc.analysis.exports():
            names = item_names(item.green)
            if names.fn_name is None:
                continue
            span = (item.offset + names.fn_name[0], item.offset + names.fn_name[1])
            if fn is None:
                title = "not built: fix its errors for a fingerprint"
            else:
                title = f"fingerprint {fn.fingerprint[:4]}…  ·  " + self.verdict_title(
                    doc, fn.fingerprint
                )
            out.append(
                lsp.CodeLens(
                    range=self.range(doc, span),
                    command=lsp.Command(title=title, command=RUN_ALL_TARGETS, arguments=[doc.uri]),
                )
            )
        return out

    def verdict_title(self, doc: Doc, fingerprint: str) -> str:
        checker = self.checker
        if checker is None:
            return "cross-target check off"
        verdict = checker.latest.get(fingerprint)  # after "run all targets": that run's
        if verdict is not None:
            return verdict.title()
        return (
            f"checking {checker.running_targets.get(doc.uri, checker.targets)}…"
            if checker.running(doc.uri)
            else "not checked yet (save to check)"
        )


def configure(server: KeraServer, options: Any, root: str | None) -> None:
    """Apply the ``keracheck`` initialization options (see the module doc)."""
    opts = options.get("keracheck", {}) if isinstance(options, Mapping) else {}
    if not isinstance(opts, Mapping) or opts.get("enabled", True) is False:
        server.checker = (
            None if isinstance(opts, Mapping) and opts.get("enabled") is False else server.checker
        )
        return
    server.checker = lens.Checker(
        command=[str(c) for c in opts.get("command") or []] or None,
        targets=str(opts.get("targets") or lens.DEFAULT_TARGETS),
        args=[str(a) for a in opts.get("args") or []],
        cwd=root,
    )


def make_server() -> KeraServer:  # noqa: C901 - one registration per protocol feature
    server = KeraServer()

    @server.feature(lsp.INITIALIZE)
    def initialize(ls: KeraServer, params: lsp.InitializeParams) -> None:
        root = to_fs_path(params.root_uri) if params.root_uri else params.root_path
        configure(ls, params.initialization_options, root)

    @server.feature(lsp.INITIALIZED)
    def initialized(ls: KeraServer, params: lsp.InitializedParams) -> None:
        ls.encoding = str(ls.workspace.position_encoding or UTF16)

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: KeraServer, params: lsp.DidOpenTextDocumentParams) -> None:
        td = params.text_document
        doc = ls.open(td.uri, td.text, td.version)
        ls.publish(doc)
        ls.schedule_check(doc)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: KeraServer, params: lsp.DidChangeTextDocumentParams) -> None:
        doc = ls.docs.get(params.text_document.uri)
        if doc is None:
            return
        if ls.checker is not None:
            ls.checker.cancel(doc.uri)
        ls.change(doc, list(params.content_changes), params.text_document.version)
        doc.checked = []
        ls.update_checked(doc)

    @server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: KeraServer, params: lsp.DidSaveTextDocumentParams) -> None:
        doc = ls.docs.get(params.text_document.uri)
        if doc is not None:
            ls.schedule_check(doc)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: KeraServer, params: lsp.DidCloseTextDocumentParams) -> None:
        if ls.checker is not None:
            ls.checker.cancel(params.text_document.uri)
        ls.docs.pop(params.text_document.uri, None)
        ls.text_document_publish_diagnostics(
            lsp.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[])
        )

    @server.feature(lsp.TEXT_DOCUMENT_HOVER)
    def hover(ls: KeraServer, params: lsp.HoverParams) -> lsp.Hover | None:
        doc = ls.docs.get(params.text_document.uri)
        if doc is None:
            return None
        text = F.hover(doc.analysis, ls.offset(doc, params.position))
        if text is None:
            return None
        return lsp.Hover(contents=ls.markup(text, completion=False))

    @server.feature(lsp.TEXT_DOCUMENT_DEFINITION)
    def definition(ls: KeraServer, params: lsp.DefinitionParams) -> lsp.Location | None:
        doc = ls.docs.get(params.text_document.uri)
        if doc is None:
            return None
        span = F.definition(doc.analysis, ls.offset(doc, params.position))
        return ls.location(doc, span) if span else None

    @server.feature(lsp.TEXT_DOCUMENT_REFERENCES)
    def references(ls: KeraServer, params: lsp.ReferenceParams) -> list[lsp.Location]:
        doc = ls.docs.get(params.text_document.uri)
        if doc is None:
            return []
        spans = F.references(
            doc.analysis, ls.offset(doc, params.position), params.context.include_declaration
        )
        return [ls.location(doc, s) for s in spans]

    @server.feature(lsp.TEXT_DOCUMENT_PREPARE_RENAME)
    def prepare_rename(ls: KeraServer, params: lsp.PrepareRenameParams) -> lsp.Range | None:
        doc = ls.docs.get(params.text_document.uri)
        if doc is None:
            return None
        t = F.resolve(doc.analysis, ls.offset(doc, params.position))
        if t is None or (t.function is not None and t.function not in doc.analysis.by_name):
            return None
        return ls.range(doc, t.span)

    @server.feature(lsp.TEXT_DOCUMENT_RENAME)
    def rename(ls: KeraServer, params: lsp.RenameParams) -> lsp.WorkspaceEdit:
        doc = ls.docs.get(params.text_document.uri)
        if doc is None:
            raise ValueError("document not open")
        spans = F.rename(doc.analysis, ls.offset(doc, params.position), params.new_name)
        edits = [lsp.TextEdit(range=ls.range(doc, s), new_text=params.new_name) for s in spans]
        return lsp.WorkspaceEdit(changes={doc.uri: edits})

    @server.feature(lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    def symbols(ls: KeraServer, params: lsp.DocumentSymbolParams) -> list[lsp.DocumentSymbol]:
        doc = ls.docs.get(params.text_document.uri)
        if doc is None:
            return []
        kinds = {
            "parameter": lsp.SymbolKind.Variable,
            "let": lsp.SymbolKind.Variable,
            "index": lsp.SymbolKind.Variable,
            "carried": lsp.SymbolKind.Variable,
        }
        out = []
        for o in F.outline(doc.analysis):
            kids = [
                lsp.DocumentSymbol(
                    name=n,
                    detail=k,
                    kind=kinds.get(k, lsp.SymbolKind.Variable),
                    range=ls.range(doc, s),
                    selection_range=ls.range(doc, s),
                )
                for n, k, s in o.children
            ]
            out.append(
                lsp.DocumentSymbol(
                    name=o.name,
                    detail=o.detail,
                    kind=lsp.SymbolKind.Function,
                    range=ls.range(doc, o.span),
                    selection_range=ls.range(doc, o.name_span),
                    children=kids,
                )
            )
        return out

    @server.feature(lsp.TEXT_DOCUMENT_FORMATTING)
    def formatting(
        ls: KeraServer, params: lsp.DocumentFormattingParams
    ) -> list[lsp.TextEdit] | None:
        doc = ls.docs.get(params.text_document.uri)
        return None if doc is None else text_edits(doc, None)

    @server.feature(lsp.TEXT_DOCUMENT_RANGE_FORMATTING)
    def range_formatting(
        ls: KeraServer, params: lsp.DocumentRangeFormattingParams
    ) -> list[lsp.TextEdit] | None:
        doc = ls.docs.get(params.text_document.uri)
        if doc is None:
            return None
        r = params.range
        end = r.end.line + (1 if r.end.character > 0 or r.end.line == r.start.line else 0)
        return text_edits(doc, (r.start.line, end))

    @server.feature(
        lsp.TEXT_DOCUMENT_SEMANTIC_TOKENS_FULL,
        lsp.SemanticTokensLegend(token_types=F.TOKEN_TYPES, token_modifiers=F.TOKEN_MODIFIERS),
    )
    def semantic_tokens(ls: KeraServer, params: lsp.SemanticTokensParams) -> lsp.SemanticTokens:
        doc = ls.docs.get(params.text_document.uri)
        if doc is None:
            return lsp.SemanticTokens(data=[])
        return lsp.SemanticTokens(data=encode_tokens(doc, F.semantic_tokens(doc.analysis)))

    @server.feature(lsp.TEXT_DOCUMENT_COMPLETION, lsp.CompletionOptions(trigger_characters=["("]))
    def completion(ls: KeraServer, params: lsp.CompletionParams) -> lsp.CompletionList:
        doc = ls.docs.get(params.text_document.uri)
        if doc is None:
            return lsp.CompletionList(is_incomplete=False, items=[])
        kinds = {
            "builtin": lsp.CompletionItemKind.Function,
            "function": lsp.CompletionItemKind.Function,
            "variable": lsp.CompletionItemKind.Variable,
            "keyword": lsp.CompletionItemKind.Keyword,
            "type": lsp.CompletionItemKind.TypeParameter,
        }
        items = [
            lsp.CompletionItem(
                label=c.label,
                kind=kinds[c.kind],
                detail=c.detail,
                documentation=ls.markup(c.doc, completion=True) if c.doc else None,
            )
            for c in F.completions(doc.analysis, ls.offset(doc, params.position))
        ]
        return lsp.CompletionList(is_incomplete=False, items=items)

    @server.feature(lsp.TEXT_DOCUMENT_CODE_LENS)
    def code_lens(ls: KeraServer, params: lsp.CodeLensParams) -> list[lsp.CodeLens]:
        doc = ls.docs.get(params.text_document.uri)
        return [] if doc is None else ls.lenses(doc)

    @server.command(RUN_ALL_TARGETS)
    def run_all(ls: KeraServer, uri: str) -> None:
        doc = ls.docs.get(uri)
        if doc is not None:
            ls.schedule_check(doc, "all", force=True)

    @server.command(RUN_TARGETS)
    def run_targets(ls: KeraServer, uri: str, targets: str | None = None) -> None:
        doc = ls.docs.get(uri)
        if doc is not None:
            ls.schedule_check(doc, targets, force=True)

    def text_edits(doc: Doc, lines: tuple[int, int] | None) -> list[lsp.TextEdit] | None:
        text = doc.analysis.data.decode("utf-8", "surrogateescape")
        edits = F.format_edits(text, lines)
        if edits is None:
            return None
        out = []
        for first, end, new in edits:
            a = lsp.Position(line=first, character=0)
            b = lsp.Position(line=end, character=0)
            out.append(lsp.TextEdit(range=lsp.Range(start=a, end=b), new_text=new))
        return out

    return server


def encode_tokens(doc: Doc, toks: list[tuple[int, int, int, int]]) -> list[int]:
    """The protocol's relative encoding, one entry per line piece of a token."""
    data: list[int] = []
    prev_line = prev_char = 0
    for start, end, kind, mods in toks:
        for a, b in _line_pieces(doc.lines, start, end):
            line, char = doc.lines.position(a)
            length = doc.lines.position(b)[1] - char
            if length <= 0:
                continue
            delta_char = char - prev_char if line == prev_line else char
            data += [line - prev_line, delta_char, length, kind, mods]
            prev_line, prev_char = line, char
    return data


def _line_pieces(lines: LineMap, start: int, end: int) -> list[tuple[int, int]]:
    first, last = lines.line_of(start), lines.line_of(end)
    if first == last:
        return [(start, end)]
    pieces = [(start, lines.line_end(first))]
    pieces += [(lines.starts[n], lines.line_end(n)) for n in range(first + 1, last)]
    return [*pieces, (lines.starts[last], end)]


def main() -> int:
    """``kerac lsp``: serve over stdio until the client says exit."""
    make_server().start_io()
    return 0
