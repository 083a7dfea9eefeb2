"""Keystroke-to-diagnostics latency of ``kerac lsp`` on a 10,000-line file (issue 21).

Generates a Kera file of about ``--lines`` lines from the corpus functions (each corpus file
copied with its functions renamed, so no name is defined twice), then:

* **end to end**: starts ``kerac lsp`` as a subprocess, opens the file over stdio, and types
  ``--keys`` characters one ``didChange`` at a time (incremental sync) inside a function in the
  middle of the file, timing each from sending the change to receiving the
  ``publishDiagnostics`` for that version; prints the median and p95 (the aim: median ≤ 50 ms);
* **in process**: the same keystrokes through ``kera.syntax.reparse`` against a full parse of
  each new text, and through ``kera.lsp.analysis`` (reparse + per-function check) against the
  whole front end (``kera.frontend.compile_source``): medians and the full/incremental ratios.

Usage: ``python bench/bench_lsp.py [--lines 10000] [--keys 60] [--repeat 3] [--skip stdio]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from kera import frontend
from kera.lsp.analysis import Analysis
from kera.syntax.reparse import Edit, full, reparse

ROOT = Path(__file__).resolve().parents[1]
TYPED = "let tmp_ = a + b * 2.0;\n    "  # typed character by character


def source(lines: int) -> str:
    """Copies of the corpus with renamed functions until ``lines`` lines."""
    texts = [p.read_text() for p in sorted((ROOT / "corpora").glob("*.kera"))]
    out: list[str] = []
    total = copy = 0
    while total < lines:
        for text in texts:
            names = re.findall(r"\bfn (\w+)", text)
            for name in names:
                text = re.sub(rf"\b{name}\b(?=\s*\()", f"{name}_{copy}", text)
            out.append(text)
            total += text.count("\n")
            copy += 1
            if total >= lines:
                break
    return "\n".join(out)


def typing_point(text: str) -> int:
    """An offset at the start of a ``let`` statement of a function in the middle."""
    return text.index("\n    let ", len(text) // 2) + 5


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


# ------------------------------------------------------------------------ over stdio


class Client:
    """A minimal synchronous JSON-RPC client over a server's stdio."""

    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.next_id = 0

    def send(self, method: str, params: Any, request: bool = False) -> int | None:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
        ident = None
        if request:
            self.next_id += 1
            ident = msg["id"] = self.next_id
        body = json.dumps(msg).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()
        return ident

    def read(self) -> dict[str, Any]:
        out = self.proc.stdout
        assert out is not None
        length = 0
        while True:
            line = out.readline()
            if not line:
                raise RuntimeError("the server closed its output")
            if line in (b"\r\n", b"\n"):
                break
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        message: dict[str, Any] = json.loads(out.read(length))
        return message

    def wait(self, pred: Any) -> dict[str, Any]:
        while True:
            m = self.read()
            if "id" in m and "method" in m:  # a request from the server: answer it
                self.reply(m["id"])
            elif pred(m):
                return m

    def reply(self, ident: Any) -> None:
        body = json.dumps({"jsonrpc": "2.0", "id": ident, "result": None}).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def close(self) -> None:
        ident = self.send("shutdown", None, request=True)
        self.wait(lambda m: m.get("id") == ident)
        self.send("exit", None)
        self.proc.wait(timeout=10)


def diagnostics_of(version: int) -> Any:
    return lambda m: (
        m.get("method") == "textDocument/publishDiagnostics"
        and (m["params"].get("version") == version)
    )


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux ``/proc``; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stdio(text: str, keys: int) -> tuple[float, list[float], float]:
    """(open-to-diagnostics seconds, per-keystroke seconds, the server's CPU seconds per
    keystroke) over a real server."""
    client = Client([str(Path(sys.executable).parent / "kerac"), "lsp"])
    try:
        ident = client.send(
            "initialize",
            {
                "processId": None,
                "rootUri": None,
                "capabilities": {},
                "initializationOptions": {"keracheck": {"enabled": False}},
            },
            request=True,
        )
        client.wait(lambda m: m.get("id") == ident)
        client.send("initialized", {})
        uri = "file:///bench/big.kera"
        t0 = time.perf_counter()
        client.send(
            "textDocument/didOpen",
            {"textDocument": {"uri": uri, "languageId": "kera", "version": 1, "text": text}},
        )
        client.wait(diagnostics_of(1))
        opened = time.perf_counter() - t0
        at = typing_point(text)
        line = text.count("\n", 0, at)
        col = at - (text.rfind("\n", 0, at) + 1)
        times: list[float] = []
        cpu = cpu_seconds(client.proc.pid)
        for i, ch in enumerate((TYPED * (keys // len(TYPED) + 1))[:keys]):
            pos = {"line": line, "character": col}
            change = {"range": {"start": pos, "end": pos}, "text": ch}
            t = time.perf_counter()
            client.send(
                "textDocument/didChange",
                {"textDocument": {"uri": uri, "version": i + 2}, "contentChanges": [change]},
            )
            client.wait(diagnostics_of(i + 2))
            times.append(time.perf_counter() - t)
            line, col = (line + 1, 0) if ch == "\n" else (line, col + 1)
        return opened, times, (cpu_seconds(client.proc.pid) - cpu) / keys
    finally:
        client.close()


# ------------------------------------------------------------------------ in process


def keystrokes(text: str, keys: int) -> list[Edit]:
    at = len(text[: typing_point(text)].encode())
    typed = (TYPED * (keys // len(TYPED) + 1))[:keys].encode()
    return [Edit(at + i, at + i, typed[i : i + 1]) for i in range(keys)]


def in_process(text: str, keys: int) -> dict[str, list[float]]:
    """Per keystroke: the reparse alone and the whole analysis (reparse, checks of the
    affected functions, diagnostics), each in its own pass; then a few samples of a full
    parse and of the whole front end on the final text (they allocate so much that timing
    them between keystrokes would charge their garbage collections to the keystrokes)."""
    data = text.encode()
    edits = keystrokes(text, keys)
    out: dict[str, list[float]] = {
        k: [] for k in ("reparse", "full parse", "analysis", "analysis CPU", "front end")
    }
    parsed = full(data)
    analysis = Analysis(data)
    gc.collect()
    gc.freeze()  # as the server does after opening a document
    for e in edits:
        t = time.perf_counter()
        parsed = reparse(parsed, e)
        out["reparse"].append(time.perf_counter() - t)
    for e in edits:
        t, c = time.perf_counter(), time.process_time()
        analysis = Analysis.edited(analysis, [e])
        analysis.diagnostics  # noqa: B018 - what a keystroke publishes
        out["analysis"].append(time.perf_counter() - t)
        out["analysis CPU"].append(time.process_time() - c)
    for _ in range(3):
        t = time.perf_counter()
        full(parsed.data)
        out["full parse"].append(time.perf_counter() - t)
        t = time.perf_counter()
        frontend.compile_source(parsed.data)
        out["front end"].append(time.perf_counter() - t)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=10_000)
    ap.add_argument("--keys", type=int, default=60)
    ap.add_argument("--skip", default="", help="comma-separated: stdio, inprocess")
    args = ap.parse_args()
    skip = set(args.skip.split(","))
    text = source(args.lines)
    print(f"python {platform.python_version()}, {platform.machine()}, {text.count(chr(10)):,} lines, "
          f"{len(text.encode()):,} bytes, {args.keys} keystrokes")  # fmt: skip
    if "stdio" not in skip:
        opened, times, cpu = stdio(text, args.keys)
        ms = [t * 1000 for t in times]
        print(f"stdio: open to first diagnostics {opened:.2f} s")
        print(f"stdio: keystroke to diagnostics median {statistics.median(ms):.1f} ms, "
              f"p95 {percentile(ms, 0.95):.1f} ms, max {max(ms):.1f} ms; "
              f"server CPU {cpu * 1000:.1f} ms per keystroke")  # fmt: skip
    if "inprocess" not in skip:
        samples = in_process(text, args.keys)
        r = {k: statistics.median(v) * 1000 for k, v in samples.items()}
        p95 = percentile(samples["analysis"], 0.95) * 1000
        print(f"in process: reparse {r['reparse']:.2f} ms vs full parse {r['full parse']:.1f} ms "
              f"= {r['full parse'] / r['reparse']:.0f}x")  # fmt: skip
        print(f"in process: analysis (reparse + checks + diagnostics) median {r['analysis']:.1f} ms, "
              f"p95 {p95:.1f} ms (CPU median {r['analysis CPU']:.1f} ms) vs front end "
              f"{r['front end']:.0f} ms = {r['front end'] / r['analysis']:.0f}x")  # fmt: skip


if __name__ == "__main__":
    main()
