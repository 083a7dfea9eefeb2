"""``kerac``: the Kera compiler's command line.

Exit codes: 0 success; 1 the input has errors (diagnostics printed) or ``fmt --check`` found
unformatted files; 2 usage or unreadable/invalid input file; 3 internal error.  Errors go to
stderr as ``kerac: <path>: <message>``; never a Python traceback for bad input.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from kera import files, keg, limits
from kera.ir import Graph
from kera.text import graph_text

EXIT_OK, EXIT_ERRORS, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


class CliError(Exception):
    """A user-facing error: message and exit code."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


def read_bytes(path: str) -> bytes:
    try:
        return files.read_bytes(path)
    except files.LoadError as e:
        raise CliError(str(e)) from None


def load_graph(path: str) -> Graph:
    """A graph from a .keg or .kera file; errors become CliError with file and position."""
    try:
        return files.load_graph(path)
    except files.LoadError as e:
        if e.diagnostics:
            sys.stderr.write(e.diagnostics)
            raise CliError(str(e), EXIT_ERRORS) from None
        raise CliError(str(e)) from None


def cmd_show(args: argparse.Namespace) -> int:
    for path in args.files:
        sys.stdout.write(graph_text(load_graph(path)))
    return EXIT_OK


def cmd_fingerprint(args: argparse.Namespace) -> int:
    status = EXIT_OK
    for path in args.files:
        try:
            graph = load_graph(path)
        except CliError as e:
            print(f"kerac: {e}", file=sys.stderr)
            status = max(status, e.code)
            continue
        for name, fn in graph.functions.items():
            print(f"{fn.fingerprint}  {path}:{name}")
    return status


def cmd_build(args: argparse.Namespace) -> int:
    graph = load_graph(args.file)
    out = args.output or str(Path(args.file).with_suffix(".keg"))
    try:
        keg.dump(graph, out)
    except OSError as e:
        raise CliError(f"{out}: cannot write: {e.strerror or e}") from None
    return EXIT_OK


def cmd_check(args: argparse.Namespace) -> int:
    status = EXIT_OK
    for path in args.files:
        try:
            load_graph(path)
        except CliError as e:
            print(f"kerac: {e}", file=sys.stderr)
            status = max(status, e.code)
    return status


def cmd_fmt(args: argparse.Namespace) -> int:
    from kera import frontend

    status = EXIT_OK
    for path in args.files:
        data = read_bytes(path)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise CliError(f"{path}: byte {e.start}: invalid UTF-8") from None
        formatted, diags = frontend.format_result(text)
        if diags:
            sys.stderr.write(frontend.render_diagnostics(diags, text, path))
            print(f"kerac: {path}: not formatted: {len(diags)} syntax error(s)", file=sys.stderr)
            status = EXIT_ERRORS
        elif formatted != text:
            if args.check:
                print(f"kerac: {path}: not formatted", file=sys.stderr)
                status = EXIT_ERRORS
            else:
                files.write_atomic(path, formatted)
    return status


def cmd_emit(args: argparse.Namespace) -> int:
    from kera.backends import registry

    graph = load_graph(args.file)
    emitter = registry.EMITTERS.get(args.target)
    if emitter is None:
        raise CliError(
            f"unknown target '{args.target}'; choose from {', '.join(registry.EMITTERS)}"
        )
    emitter(graph, args.output)
    return EXIT_OK


def _parser() -> argparse.ArgumentParser:
    from kera.version import version_action

    p = argparse.ArgumentParser(prog="kerac", description="The Kera compiler.")
    p.add_argument("--version", action=version_action("kerac"))
    p.add_argument(
        "--limit",
        action="append",
        metavar="NAME=VALUE",
        default=[],
        help="raise or lower a compiler budget (see kera.limits; e.g. expansion=1000000)",
    )
    sub = p.add_subparsers(dest="command", required=True)
    commands: list[tuple[str, str, Callable[[argparse.Namespace], int]]] = [
        ("show", "print the canonical text form of graphs", cmd_show),
        ("fingerprint", "print '<fingerprint>  <path>:<function>' per export", cmd_fingerprint),
        ("check", "type-check Kera sources, printing every diagnostic", cmd_check),
        ("build", "compile a .kera file to a .keg artifact", cmd_build),
        ("fmt", "format Kera sources in place (or --check)", cmd_fmt),
        ("emit", "emit target code (c, wasm, wat, ptx, verilog)", cmd_emit),
    ]
    for name, help_text, fn in commands:
        sp = sub.add_parser(name, help=help_text)
        sp.set_defaults(func=fn)
        if name in ("build", "emit"):
            sp.add_argument("file")
            sp.add_argument("-o", "--output")
        else:
            sp.add_argument("files", nargs="+")
        if name == "fmt":
            sp.add_argument("--check", action="store_true", help="only report unformatted files")
        if name == "emit":
            sp.add_argument("--target", required=True)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        limits.check_env()
        limits.configure(args.limit)
    except limits.LimitError as e:
        print(f"kerac: {e}", file=sys.stderr)
        return EXIT_USAGE
    try:
        code: int = args.func(args)
    except CliError as e:
        print(f"kerac: {e}", file=sys.stderr)
        return e.code
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # a bug in kerac, not bad input: say so plainly
        print(f"kerac: internal error: {type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_INTERNAL
    return code


if __name__ == "__main__":
    sys.exit(main())
