"""``kerac lsp`` driven by a real LSP client over stdio (pytest-lsp starts ``.venv/bin/kerac
lsp``): open, type character by character, save; diagnostics with codes and UTF-16 ranges,
hover, definitions, references, rename, formatting, semantic tokens, completion and the
fingerprint code lenses (keracheck on ``ref`` only, to stay quick)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from kera import frontend

pytestmark = pytest.mark.asyncio(loop_scope="module")

BIN = Path(sys.executable).parent
KERAC = str(BIN / "kerac")
KERACHECK = str(BIN / "keracheck")

# non-ASCII before the error on its line: é is one UTF-16 unit, 😀 two, and each is several
# UTF-8 bytes, so a byte column or a code-point column would be wrong
SOURCE = """// saxpy — ünïcode 😀 in a comment
export fn saxpy(a: f32, x: f32[8], y: f32[8]) -> f32[8] {
    let ax = a * x; /* é 😀 */ let bad = ax * 1i32;
    ax + y
}

fn sq(v: f32) -> f32 { v * v }

export fn loop4(x: f32[4]) -> f32[4] {
    for i in 0..4 with (acc = x) {
        acc + sq(2.0)
    }
}
"""
CLEAN = """// café
export fn twice(x: f32[4]) -> f32[4] {
    let y = x + x;
    y
}
"""


def utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def position(text: str, needle: str, nth: int = 0) -> lsp.Position:
    """The LSP position (UTF-16) of the nth occurrence of ``needle``."""
    at = -1
    for _ in range(nth + 1):
        at = text.index(needle, at + 1)
    before = text[:at]
    line = before.count("\n")
    return lsp.Position(line=line, character=utf16(before[before.rfind("\n") + 1 :]))


def end_of(text: str) -> lsp.Position:
    line = text.count("\n")
    return lsp.Position(line=line, character=utf16(text[text.rfind("\n") + 1 :]))


def init_options(**keracheck: Any) -> lsp.InitializeParams:
    return lsp.InitializeParams(
        capabilities=lsp.ClientCapabilities(
            general=lsp.GeneralClientCapabilities(
                position_encodings=[lsp.PositionEncodingKind.Utf16]
            ),
            text_document=lsp.TextDocumentClientCapabilities(
                hover=lsp.HoverClientCapabilities(content_format=[lsp.MarkupKind.Markdown]),
                completion=lsp.CompletionClientCapabilities(
                    completion_item=lsp.ClientCompletionItemOptions(
                        documentation_format=[lsp.MarkupKind.Markdown]
                    )
                ),
            ),
        ),
        initialization_options={"keracheck": {"command": [KERACHECK], **keracheck}},
    )


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[KERAC, "lsp"]), scope="module")  # type: ignore[untyped-decorator]
async def client(lsp_client: LanguageClient) -> Any:
    await lsp_client.initialize_session(init_options(enabled=False))
    yield
    await lsp_client.shutdown_session()


async def open_doc(client: LanguageClient, uri: str, text: str) -> list[lsp.Diagnostic]:
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(
            text_document=lsp.TextDocumentItem(uri=uri, language_id="kera", version=1, text=text)
        )
    )
    await client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    return list(client.diagnostics[uri])


def expected(text: str) -> list[tuple[str, lsp.Position, lsp.Position]]:
    """What the front end reports, as (code, start, end) in UTF-16 positions."""
    data = text.encode()
    return [
        (d.code, _pos(data, d.start), _pos(data, d.end))
        for d in frontend.compile_source(data).diagnostics
    ]


def _pos(data: bytes, offset: int) -> lsp.Position:
    before = data[:offset].decode()
    return lsp.Position(line=before.count("\n"), character=utf16(before[before.rfind("\n") + 1 :]))


def got(diags: list[lsp.Diagnostic]) -> list[tuple[str, lsp.Position, lsp.Position]]:
    return [(str(d.code), d.range.start, d.range.end) for d in diags]


async def test_diagnostics_have_codes_and_utf16_ranges(client: LanguageClient) -> None:
    diags = await open_doc(client, "file:///w/saxpy.kera", SOURCE)
    assert [(str(d.code), d.source) for d in diags] == [("E0201", "kerac")]
    start = position(SOURCE, "ax * 1i32")
    assert diags[0].range.start == start
    assert diags[0].range.end == lsp.Position(line=start.line, character=start.character + 9)
    assert "mul needs operands of one dtype" in diags[0].message
    assert got(diags) == expected(SOURCE)


async def test_typing_character_by_character(client: LanguageClient) -> None:
    """Type SOURCE into an empty document one character per change (incremental sync);
    the diagnostics after the last keystroke are those of the whole text."""
    uri = "file:///w/typed.kera"
    await open_doc(client, uri, "")
    typed = ""
    for version, ch in enumerate(SOURCE, start=2):
        at = end_of(typed)
        client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(
                text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[
                    lsp.TextDocumentContentChangePartial(range=lsp.Range(start=at, end=at), text=ch)
                ],
            )
        )
        typed += ch
    await asyncio.sleep(0)
    hover = await client.text_document_hover_async(
        lsp.HoverParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri), position=position(typed, "ax", 1)
        )
    )
    assert hover is not None  # the server has caught up with every change before it
    assert got(list(client.diagnostics[uri])) == expected(SOURCE)
    # delete the bad statement: a range edit across non-ASCII text
    a, b = position(typed, "/* é"), position(typed, "\n    ax + y")
    client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=10_000),
            content_changes=[
                lsp.TextDocumentContentChangePartial(range=lsp.Range(start=a, end=b), text="")
            ],
        )
    )
    await client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    assert list(client.diagnostics[uri]) == []


async def test_hover(client: LanguageClient) -> None:
    uri = "file:///w/hover.kera"
    await open_doc(client, uri, SOURCE)

    async def hover_at(needle: str, nth: int = 0) -> str:
        params = lsp.HoverParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            position=position(SOURCE, needle, nth),
        )
        result = await client.text_document_hover_async(params)
        assert result is not None and isinstance(result.contents, lsp.MarkupContent)
        return result.contents.value

    text = await hover_at("ax + y")
    assert "(let) ax: f32[8]" in text
    assert "export fn `saxpy`: not built" in text  # it has an error
    text = await hover_at("acc + sq")
    assert "(carried) acc: f32[4]" in text
    fn = frontend.compile_source(SOURCE.replace(" let bad = ax * 1i32;", "")).graph
    assert fn is not None
    loop4 = fn.functions["loop4"]
    assert f"{len(loop4.nodes())} nodes, fingerprint `{loop4.fingerprint}`" in text
    text = await hover_at("sq(2.0)")
    assert "fn sq(v: f32) -> f32" in text
    text = await hover_at("f32[8]) -> f32[8] {")
    assert "type `f32[8]`: dtype f32, shape (8), 8 elements" in text
    uri2 = "file:///w/builtin.kera"
    body = "export fn m(x: f32[4]) -> f32 {\n    sum(min(x, x), axis = 0)\n}\n"
    await open_doc(client, uri2, body)
    result = await client.text_document_hover_async(
        lsp.HoverParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri2), position=position(body, "min")
        )
    )
    assert result is not None and isinstance(result.contents, lsp.MarkupContent)
    assert "min(x, y)" in result.contents.value
    assert "IEEE 754-2019 **minimum**" in result.contents.value  # docs/semantics.md, ### min


async def test_definition_references_and_rename(client: LanguageClient) -> None:
    uri = "file:///w/names.kera"
    await open_doc(client, uri, SOURCE)
    doc = lsp.TextDocumentIdentifier(uri=uri)
    loc = await client.text_document_definition_async(
        lsp.DefinitionParams(text_document=doc, position=position(SOURCE, "ax + y"))
    )
    assert isinstance(loc, lsp.Location) and loc.range.start == position(SOURCE, "ax = a")
    loc = await client.text_document_definition_async(
        lsp.DefinitionParams(text_document=doc, position=position(SOURCE, "sq(2.0)"))
    )
    assert isinstance(loc, lsp.Location) and loc.range.start == position(SOURCE, "sq(v")
    refs = await client.text_document_references_async(
        lsp.ReferenceParams(
            text_document=doc,
            position=position(SOURCE, "acc = x"),
            context=lsp.ReferenceContext(include_declaration=True),
        )
    )
    assert refs is not None
    assert [r.range.start for r in refs] == [
        position(SOURCE, "acc = x"),
        position(SOURCE, "acc + sq"),
    ]
    edit = await client.text_document_rename_async(
        lsp.RenameParams(text_document=doc, position=position(SOURCE, "x: f32[8]"), new_name="xs")
    )
    assert edit is not None and edit.changes is not None
    spans = sorted((e.range.start.line, e.range.start.character) for e in edit.changes[uri])
    want = [position(SOURCE, "x: f32[8]"), position(SOURCE, "x; /*")]
    assert spans == [(p.line, p.character) for p in want]  # not loop4's x
    with pytest.raises(Exception, match="builtin"):
        await client.text_document_rename_async(
            lsp.RenameParams(text_document=doc, position=position(SOURCE, "sq(v"), new_name="sum")
        )


async def test_symbols_formatting_tokens_completion(client: LanguageClient) -> None:
    uri = "file:///w/misc.kera"
    messy = "export fn   twice(x:f32[4])->f32[4]{\n  let y=x+x;\ny\n}\n"
    await open_doc(client, uri, messy)
    doc = lsp.TextDocumentIdentifier(uri=uri)
    syms = await client.text_document_document_symbol_async(
        lsp.DocumentSymbolParams(text_document=doc)
    )
    assert syms is not None
    assert [(s.name, [c.name for c in s.children or []]) for s in syms] == [("twice", ["x", "y"])]  # type: ignore[union-attr]
    edits = await client.text_document_formatting_async(
        lsp.DocumentFormattingParams(
            text_document=doc, options=lsp.FormattingOptions(tab_size=4, insert_spaces=True)
        )
    )
    assert edits is not None
    assert apply(messy, edits) == frontend.format_source(messy)
    ranged = await client.text_document_range_formatting_async(
        lsp.DocumentRangeFormattingParams(
            text_document=doc,
            range=lsp.Range(
                start=lsp.Position(line=1, character=0), end=lsp.Position(line=2, character=0)
            ),
            options=lsp.FormattingOptions(tab_size=4, insert_spaces=True),
        )
    )
    assert ranged is not None and ranged
    assert [(e.range.start.line, e.range.end.line) for e in ranged] == [(1, 2)]
    assert "    let y = x + x;" in apply(messy, ranged) and apply(messy, ranged).startswith(
        "export fn   twice"
    )
    tokens = await client.text_document_semantic_tokens_full_async(
        lsp.SemanticTokensParams(text_document=doc)
    )
    assert tokens is not None
    legend = client.capabilities and None  # the legend comes from the server's capabilities
    del legend
    decoded = decode_tokens(messy, tokens.data)
    assert ("twice", "function", 1) in decoded and ("y", "variable", 1) in decoded
    assert ("x", "parameter", 0) in decoded and ("f32", "type", 0) in decoded
    items = await client.text_document_completion_async(
        lsp.CompletionParams(text_document=doc, position=position(messy, "y\n}"))
    )
    assert isinstance(items, lsp.CompletionList)
    by_label = {i.label: i for i in items.items}
    assert by_label["sum"].detail == "sum(x, axis = k)"
    assert by_label["iota"].detail == "iota(shape = [..], axis = k, to = T)"
    assert (
        by_label["y"].kind == lsp.CompletionItemKind.Variable
        and by_label["y"].detail == "(let) f32[4]"
    )


SPACES = """fn axpy(y: &mut f32[8] @device, a: f32 @device, x: &f32[8] @device) {
    y = a * x + y;
}
"""


async def test_memory_space_syntax_is_walked_generically(client: LanguageClient) -> None:
    """`&mut` parameters, assignments and `@device` types: an assignment's target is a use
    of the variable, and a memory space is highlighted as a type."""
    uri = "file:///w/spaces.kera"
    diags = await open_doc(client, uri, SPACES)
    assert got(diags) == expected(SPACES)
    doc = lsp.TextDocumentIdentifier(uri=uri)
    refs = await client.text_document_references_async(
        lsp.ReferenceParams(
            text_document=doc,
            position=position(SPACES, "y: &mut"),
            context=lsp.ReferenceContext(include_declaration=True),
        )
    )
    assert refs is not None
    want = [position(SPACES, "y: &mut"), position(SPACES, "y = a"), position(SPACES, "y;")]
    assert [r.range.start for r in refs] == want
    tokens = await client.text_document_semantic_tokens_full_async(
        lsp.SemanticTokensParams(text_document=doc)
    )
    assert tokens is not None
    assert ("device", "type", 0) in decode_tokens(SPACES, tokens.data)


TOKEN_TYPES = [
    "function",
    "parameter",
    "variable",
    "type",
    "keyword",
    "number",
    "comment",
    "operator",
    "property",
]


def decode_tokens(text: str, data: Sequence[int]) -> list[tuple[str, str, int]]:
    lines = text.split("\n")
    out = []
    line = char = 0
    for i in range(0, len(data), 5):
        dl, dc, length, kind, mods = data[i : i + 5]
        line += dl
        char = char + dc if dl == 0 else dc
        out.append((lines[line][char : char + length], TOKEN_TYPES[kind], mods))
    return out


def apply(text: str, edits: Sequence[lsp.TextEdit]) -> str:
    lines = text.splitlines(keepends=True)
    for e in sorted(
        edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True
    ):
        assert e.range.start.character == 0 and e.range.end.character == 0
        lines[e.range.start.line : e.range.end.line] = [e.new_text]
    return "".join(lines)


# ------------------------------------------------------------------------ code lenses


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[KERAC, "lsp"]))  # type: ignore[untyped-decorator]
async def checking(lsp_client: LanguageClient, tmp_path: Path) -> Any:
    await lsp_client.initialize_session(init_options(targets="ref", args=["--inputs", "8"]))
    yield
    await lsp_client.shutdown_session()


async def lenses_until(
    client: LanguageClient, uri: str, done: str, timeout: float = 60.0
) -> list[str]:
    titles: list[str] = []
    for _ in range(int(timeout / 0.2)):
        found = await client.text_document_code_lens_async(
            lsp.CodeLensParams(text_document=lsp.TextDocumentIdentifier(uri=uri))
        )
        titles = [lens.command.title for lens in found or [] if lens.command]
        if titles and all(done in t for t in titles):
            return titles
        await asyncio.sleep(0.2)
    raise AssertionError(f"code lenses never said {done!r}: {titles}")


@pytest.mark.asyncio(loop_scope="function")
async def test_code_lens_fingerprint_and_verdict(checking: LanguageClient, tmp_path: Path) -> None:
    client = checking
    path = tmp_path / "twice.kera"
    path.write_text(CLEAN)
    uri = path.as_uri()
    await open_doc(client, uri, CLEAN)
    graph = frontend.compile_source(CLEAN).graph
    assert graph is not None
    fp = graph.functions["twice"].fingerprint
    titles = await lenses_until(client, uri, "agrees on ref")
    assert titles == [f"fingerprint {fp[:4]}…  ·  agrees on ref"]
    # a comment keeps the fingerprint: the verdict is cached, the lens says so at once
    client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[
                lsp.TextDocumentContentChangePartial(
                    range=lsp.Range(start=end_of(CLEAN), end=end_of(CLEAN)), text="// more\n"
                )
            ],
        )
    )
    assert await lenses_until(client, uri, "agrees on ref", timeout=1.0) == titles
    # a change of meaning, then a save: a new fingerprint, checked in the background
    edited = CLEAN + "// more\n"
    at = position(edited, "x + x")
    client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=3),
            content_changes=[
                lsp.TextDocumentContentChangePartial(
                    range=lsp.Range(
                        start=at, end=lsp.Position(line=at.line, character=at.character + 5)
                    ),
                    text="x * x",
                )
            ],
        )
    )
    changed = edited.replace("x + x", "x * x")
    path.write_text(changed)
    client.text_document_did_save(
        lsp.DidSaveTextDocumentParams(text_document=lsp.TextDocumentIdentifier(uri=uri))
    )
    graph = frontend.compile_source(changed).graph
    assert graph is not None
    new_fp = graph.functions["twice"].fingerprint
    assert new_fp != fp
    assert await lenses_until(client, uri, "agrees on ref") == [
        f"fingerprint {new_fp[:4]}…  ·  agrees on ref"
    ]


@pytest.mark.slow
@pytest.mark.asyncio(loop_scope="function")
async def test_code_lens_command_runs_keracheck_again(
    checking: LanguageClient, tmp_path: Path
) -> None:
    """The lens's command is kera.runAllTargets on the document; kera.runTargets runs the
    targets it is given (here ref) even when every verdict is cached."""
    client = checking
    path = tmp_path / "twice.kera"
    path.write_text(CLEAN)
    uri = path.as_uri()
    await open_doc(client, uri, CLEAN)
    titles = await lenses_until(client, uri, "agrees on ref")
    lens = await client.text_document_code_lens_async(
        lsp.CodeLensParams(text_document=lsp.TextDocumentIdentifier(uri=uri))
    )
    assert lens is not None and lens[0].command is not None
    assert lens[0].command.command == "kera.runAllTargets"
    assert list(lens[0].command.arguments or []) == [uri]
    await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="kera.runTargets", arguments=[uri, "ref"])
    )
    found = await client.text_document_code_lens_async(
        lsp.CodeLensParams(text_document=lsp.TextDocumentIdentifier(uri=uri))
    )
    assert found is not None and found[0].command is not None
    assert found[0].command.title.endswith(("checking ref…", "agrees on ref"))
    assert await lenses_until(client, uri, "agrees on ref") == titles


PLUGIN = """
import numpy as np
from kera.interp import interpret
from kera.ops import Op
from kera.semantics import SEMANTICS


def _mul_up(node, a, b):
    r = SEMANTICS[Op.MUL](node, a, b)
    return np.nextafter(r, np.array(np.inf, r.dtype)).astype(r.dtype)


class MulUp:
    api_version = 1
    name = "mulup"

    def available(self):
        return None

    def supported_ops(self):
        return frozenset(o.value for o in Op)

    def run(self, fn, inputs):
        return interpret(fn, inputs, overrides={"mul": _mul_up})
"""
DIVERGES = """export fn scaled(x: f32[4], y: f32[4]) -> f32[4] {
    let a = x - y;
    let b = a * 2.0;
    b + x
}
"""


@pytest.mark.slow
@pytest.mark.asyncio(loop_scope="function")
async def test_divergence_is_a_diagnostic_at_the_first_diverging_node(tmp_path: Path) -> None:
    """A planted target (every mul one ulp up) diverges from ref: the lens says so and the
    diagnostic sits on ``a * 2.0``, the first diverging node keracheck localised."""
    plugin = tmp_path / "planted_lsp.py"
    plugin.write_text(PLUGIN)
    config = ClientServerConfig(server_command=[KERAC, "lsp"])
    client = await config.start()
    assert isinstance(client, LanguageClient)
    try:
        args = ["--inputs", "8", "--no-cache", "--backend-plugin", f"{plugin}:MulUp"]
        await client.initialize_session(init_options(targets="ref", args=args))
        path = tmp_path / "scaled.kera"
        path.write_text(DIVERGES)
        await open_doc(client, path.as_uri(), DIVERGES)
        titles = await lenses_until(client, path.as_uri(), "diverges")
        assert titles[0].endswith("diverges: ref vs mulup")
        diags = [d for d in client.diagnostics[path.as_uri()] if d.source == "keracheck"]
        assert len(diags) == 1 and str(diags[0].code) == "KC001"
        assert diags[0].range.start == position(DIVERGES, "a * 2.0")
        assert "first differing node" in diags[0].message and "(let b)" in diags[0].message
        await client.shutdown_session()
    finally:
        await client.stop()  # type: ignore[no-untyped-call]
