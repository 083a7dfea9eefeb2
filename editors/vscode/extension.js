// Starts `kerac lsp` for .kera files; everything else is the language server's (docs/editor.md).
const vscode = require("vscode");
const { LanguageClient } = require("vscode-languageclient/node");

let client;

function activate(context) {
  const cfg = vscode.workspace.getConfiguration("kera");
  const server = { command: cfg.get("server.path", "kerac"), args: ["lsp"] };
  client = new LanguageClient(
    "kera",
    "Kera (kerac lsp)",
    { run: server, debug: server },
    {
      documentSelector: [{ scheme: "file", language: "kera" }],
      initializationOptions: {
        keracheck: {
          enabled: cfg.get("keracheck.enabled", true),
          targets: cfg.get("keracheck.targets", "ref,cpu,wasm"),
          command: cfg.get("keracheck.command", []),
          args: cfg.get("keracheck.args", []),
        },
      },
    },
  );
  context.subscriptions.push(
    vscode.commands.registerCommand("kera.runAllTargetsForActiveFile", () => {
      const editor = vscode.window.activeTextEditor;
      if (editor) {
        vscode.commands.executeCommand("kera.runAllTargets", editor.document.uri.toString());
      }
    }),
  );
  return client.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
