"""``kerac lsp`` on the command line: a missing pygls is a clear error with exit code 2, and
the server answers ``initialize`` and ``shutdown`` over stdio as an editor starts it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kera import cli

KERAC = str(Path(sys.executable).parent / "kerac")


def test_missing_pygls_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in [m for m in sys.modules if m == "kera.lsp.server" or m.startswith("pygls")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "pygls", None)
    assert cli.main(["lsp"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kerac: kerac lsp needs pygls and lsprotocol")
    assert "python -m pip install -e '.[lsp]'" in err


def frame(message: dict[str, object]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def test_stdio_session_as_an_editor_starts_it() -> None:
    """``kerac lsp --stdio`` (what VS Code passes): initialize, shutdown, exit; exit code 0."""
    messages: list[dict[str, object]] = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"processId": None, "rootUri": None, "capabilities": {}}},
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
        {"jsonrpc": "2.0", "id": 2, "method": "shutdown", "params": None},
        {"jsonrpc": "2.0", "method": "exit", "params": None},
    ]  # fmt: skip
    out = subprocess.run(
        [KERAC, "lsp", "--stdio"],
        input=b"".join(frame(m) for m in messages),
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr.decode()
    text = out.stdout.decode()
    caps = json.loads(text[text.index("{") : text.index("Content-Length", 1)])["result"]
    server = caps["capabilities"]
    assert server["textDocumentSync"]["change"] == 2  # incremental
    assert server["positionEncoding"] == "utf-16"
    for feature in ("hoverProvider", "definitionProvider", "referencesProvider", "renameProvider",
                    "documentSymbolProvider", "documentFormattingProvider",
                    "documentRangeFormattingProvider", "semanticTokensProvider",
                    "completionProvider", "codeLensProvider"):  # fmt: skip
        assert server.get(feature), feature
    assert set(server["executeCommandProvider"]["commands"]) == {
        "kera.runAllTargets",
        "kera.runTargets",
    }
