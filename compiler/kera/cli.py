"""``kerac``: the Kera compiler's command line.

Exit codes: 0 success; 1 the input has errors (diagnostics printed) or ``fmt --check`` found
unformatted files; 2 usage or unreadable/invalid input file; 3 internal error.  Errors go to
stderr as ``kerac: <path>: <message>``; never a Python traceback for bad input.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from kera import files, keg, limits
from kera.ir import Function, Graph
from kera.text import function_text, graph_text

if TYPE_CHECKING:
    from kera.passes import Outcome

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
        graph = load_graph(path)
        args.file = path
        if args.after is not None:
            graph = _optimise(graph, _after_args(args))
        elif args.opt_level is not None or args.passes is not None:
            graph = _optimise(graph, args)
        sys.stdout.write(graph_text(graph))
    return EXIT_OK


def _after_args(args: argparse.Namespace) -> argparse.Namespace:
    """``kerac show --after PASS``: the default pipeline (or ``-O``/``--passes``) up to and
    including the last run of PASS: everything, printed once at the end."""
    from kera import passes

    level = passes.DEFAULT_LEVEL if args.opt_level is None else args.opt_level
    names = args.passes.split(",") if args.passes is not None else passes.LEVELS[level]
    if args.after not in names:
        raise CliError(f"--after {args.after}: not in the pipeline ({', '.join(names) or 'empty'})")
    cut = ",".join(names[: list(names).index(args.after) + 1])
    return argparse.Namespace(**{**vars(args), "passes": cut, "print_after": None})


def cmd_fingerprint(args: argparse.Namespace) -> int:
    status = EXIT_OK
    for path in args.files:
        try:
            graph = load_graph(path)
        except CliError as e:
            print(f"kerac: {e}", file=sys.stderr)
            status = max(status, e.code)
            continue
        source = graph.source_fingerprints()
        for name, fn in graph.functions.items():
            was = f"  (source {source[name]})" if graph.provenance is not None else ""
            print(f"{fn.fingerprint}  {path}:{name}{was}")
    return status


def _optimise(graph: Graph, args: argparse.Namespace) -> Graph:
    """The graph after ``-O<level>`` or ``--passes``; ``--print-after`` and ``--stats``."""
    from kera import passes

    def show_after(p: passes.Pass, fn: Function) -> None:
        if p.name in after:
            sys.stdout.write(f"; after {p.name}\n{function_text(fn)}\n")

    after = set(getattr(args, "print_after", None) or ())
    try:
        extra = [passes.load_plugin(s) for s in args.pass_plugin or ()]
        if args.passes is not None:
            names = [n for n in args.passes.split(",") if n]
            chosen = [*passes.resolve(names), *extra]
        else:
            level = passes.DEFAULT_LEVEL if args.opt_level is None else args.opt_level
            chosen = passes.pipeline(level, extra)
        unknown = after - {p.name for p in chosen}
        if unknown:
            raise passes.PassSpecError(
                f"--print-after {', '.join(sorted(unknown))}: not in the pipeline "
                f"({', '.join(p.name for p in chosen) or 'empty at -O0'})"
            )
        manager = passes.PassManager(chosen, after=show_after if after else None)
        optimised, outcomes = manager.run_graph(graph)
    except passes.PassSpecError as e:
        raise CliError(str(e)) from None
    except passes.PassError as e:
        raise CliError(f"{args.file}: {e}", EXIT_INTERNAL) from None
    if args.stats:
        _print_stats(outcomes)
    if not chosen:  # -O0: the graph exactly as it was given
        return graph
    return optimised.with_provenance(graph, passes.pipeline_id(chosen))


def _print_stats(outcomes: Sequence[Outcome]) -> None:
    err = sys.stderr
    print(
        f"{'function':<24} {'round':>5} {'pass':<10} {'nodes':>13} {'rewrites':>8} {'ms':>8}",
        file=err,
    )
    for o in outcomes:
        for s in o.stats:
            nodes = f"{s.nodes_before}->{s.nodes_after}"
            print(
                f"{s.function:<24} {s.round:>5} {s.name:<10} {nodes:>13} {s.rewrites:>8} "
                f"{s.seconds * 1e3:>8.2f}",
                file=err,
            )
        state = "fixed point" if o.converged else "NOT converged (round limit)"
        print(
            f"{o.function.name:<24} {o.rounds} round(s), {state}; validation "
            f"{o.validate_seconds * 1e3:.2f} ms",
            file=err,
        )


def cmd_build(args: argparse.Namespace) -> int:
    graph = _optimise(load_graph(args.file), args)
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

    graph = _optimise(load_graph(args.file), args)
    emitter = registry.EMITTERS.get(args.target)
    if emitter is None:
        raise CliError(
            f"unknown target '{args.target}'; choose from {', '.join(registry.EMITTERS)}"
        )
    emitter(graph, args.output)
    return EXIT_OK


def cmd_lsp(args: argparse.Namespace) -> int:
    """``kerac lsp``: the language server over stdio (docs/editor.md); needs pygls."""
    try:
        from kera.lsp.server import main as serve
    except ImportError as e:
        raise CliError(
            f"kerac lsp needs pygls and lsprotocol ({e}); install them with "
            "`.venv/bin/python -m pip install -e '.[lsp]'` (./scripts/setup does)"
        ) from None
    return serve()


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
    lsp = sub.add_parser("lsp", help="run the language server over stdio (docs/editor.md)")
    lsp.add_argument(
        "--stdio", action="store_true", help="accepted for editors; stdio is the default"
    )
    lsp.set_defaults(func=cmd_lsp)
    for name, help_text, fn in commands:
        sp = sub.add_parser(name, help=help_text)
        sp.set_defaults(func=fn)
        if name in ("build", "emit"):
            sp.add_argument("file")
            sp.add_argument("-o", "--output")
        else:
            sp.add_argument("files", nargs="+")
        if name in ("build", "emit", "show"):
            _pass_options(sp, show=name == "show")
        if name == "fmt":
            sp.add_argument("--check", action="store_true", help="only report unformatted files")
        if name == "emit":
            sp.add_argument("--target", required=True)
    return p


def _opt_level(text: str) -> int:
    if text not in ("0", "1", "2"):
        raise argparse.ArgumentTypeError(f"'{text}' is not an optimisation level (0, 1 or 2)")
    return int(text)


def _pass_options(sp: argparse.ArgumentParser, show: bool) -> None:
    from kera.passes import DEFAULT_LEVEL

    sp.add_argument(
        "-O",
        dest="opt_level",
        type=_opt_level,
        default=None,
        metavar="LEVEL",
        help=f"optimisation level 0, 1 or 2 (default {DEFAULT_LEVEL}"
        + ("; show prints the graph as given unless -O, --passes or --after" if show else "")
        + "); see docs/passes.md",
    )
    sp.add_argument("--passes", help="run exactly these passes (comma-separated) instead of -O")
    sp.add_argument(
        "--pass-plugin",
        action="append",
        metavar="MODULE:ATTR|FILE.py:ATTR",
        help="also run this pass (after the built-in ones; repeatable)",
    )
    sp.add_argument("--stats", action="store_true", help="print per-pass statistics to stderr")
    if show:
        sp.add_argument("--after", metavar="PASS", help="show the graph after this pass")
    else:
        sp.add_argument(
            "--print-after",
            action="append",
            metavar="PASS",
            help="print each function after every run of PASS (repeatable)",
        )


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
    except BrokenPipeError:  # `kerac show ... | head`: the reader has all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except Exception as e:  # a bug in kerac, not bad input: say so plainly
        print(f"kerac: internal error: {type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_INTERNAL
    return code


if __name__ == "__main__":
    sys.exit(main())
