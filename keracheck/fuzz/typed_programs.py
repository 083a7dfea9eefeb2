"""A fuzzer of the checker: Kera *sources* with memory spaces, transfers, borrows, ``&mut``
buffers and effects, well-typed and deliberately ill-typed (docs/language.md, *Memory spaces,
ownership and effects*).

:func:`programs` is a Hypothesis strategy.  It builds a function body statement by statement
while it tracks what a checker would (each name's space, which names are moved, which are
``let mut`` buffers), so that the program it builds is well-typed; then it may *inject* one
mistake of a known kind, each with the diagnostic code that must refuse it:

========================  ======  ==============================================
mistake                   code    what is written
========================  ======  ==============================================
``use_after_move``        E0401   a name read after ``transfer`` moved it
``move_in_loop``          E0402   an outer name moved inside a loop body
``space_mismatch``        E0121   an op on a host value and a device value
``result_space``          E0122   a result in another space than declared
``missing_effect``        E0125   the ``effects(transfer)`` clause left out
``unknown_space``         E0120   a parameter ``@gpu``
``assign_immutable``      E0404   an assignment to a ``let`` name
``double_mut``            E0405   one buffer passed as ``&mut`` twice
``mut_while_borrowed``    E0406   a buffer assigned while a borrow is used later
``borrow_across_loop``    E0407   a borrow read in a loop that updates its owner
``mode_mismatch``         E0409   a ``&mut`` parameter given a value
========================  ======  ==============================================

:func:`check` is the property every program must have: compiling it never raises; a program
with a mistake is refused with that mistake's code among its diagnostics; a refused program
has only documented codes with spans inside the source (and renders); an accepted program's
graph passes the optimiser's validator at ``-O2`` and runs on the reference interpreter on
random inputs.  The tests in ``tests/property/test_typed_programs.py`` run it at CI size; the
campaign (``python -m keracheck.fuzz.typed_programs --seconds 60``) runs it for a time budget
and then runs the accepted programs on more targets with ``keracheck run``
(``docs/fuzzing.md``, *Fuzzing the checker*).
"""

from __future__ import annotations

import argparse
import collections
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kera import passes
from kera.frontend import compile_source, render_diagnostics
from kera.interp import interpret
from kera.ir import Function

DOCS = Path(__file__).parents[2] / "docs" / "language.md"
SHAPE = "f32[4]"
#: the mistakes :func:`programs` can inject, and the code that must refuse each
MISTAKES: dict[str, str] = {
    "use_after_move": "E0401",
    "move_in_loop": "E0402",
    "space_mismatch": "E0121",
    "result_space": "E0122",
    "missing_effect": "E0125",
    "unknown_space": "E0120",
    "assign_immutable": "E0404",
    "double_mut": "E0405",
    "mut_while_borrowed": "E0406",
    "borrow_across_loop": "E0407",
    "mode_mismatch": "E0409",
}
#: helpers every program may call: an in-out update, a two-buffer one, an effectful upload
HELPERS = {
    sp: (
        f"fn bump_{sp}(y: &mut {SHAPE} @{sp}, x: &{SHAPE} @{sp}) {{\n    y = y + x;\n}}\n\n"
        f"fn twice_{sp}(a: &mut {SHAPE} @{sp}, b: &mut {SHAPE} @{sp}) {{\n"
        "    a = a * 2.0;\n    b = b + a;\n}\n\n"
    )
    for sp in ("host", "device")
}
UPLOAD = (
    f"fn upload(x: {SHAPE}) -> {SHAPE} @device effects(transfer) {{\n"
    "    transfer(x, to = device)\n}\n\n"
)


@dataclass
class Program:
    """A generated source, the mistake injected (None: none) and the code it must give."""

    source: str
    mistake: str | None = None
    expect: str | None = None


@dataclass
class _Body:
    """The state of the body being built: each live name's space, the buffers, the lines."""

    home: str
    names: dict[str, str] = field(default_factory=dict)  # live (not moved) name -> space
    cells: list[str] = field(default_factory=list)  # `let mut` names
    lines: list[str] = field(default_factory=list)
    serial: int = 0
    transfers: int = 0

    def fresh(self, stem: str) -> str:
        self.serial += 1
        return f"{stem}{self.serial}"

    def live(self, space: str | None = None) -> list[str]:
        return [n for n, sp in self.names.items() if space is None or sp == space]


Draw = Callable[[st.SearchStrategy[Any]], Any]


def _pick(draw: Draw, items: list[str]) -> str:
    return items[draw(st.integers(0, len(items) - 1))]


def _statement(draw: Draw, b: _Body) -> None:
    """One well-typed statement (the kinds shrink towards the first, a plain let)."""
    kind = draw(st.integers(0, len(_STATEMENTS) - 1))
    home = b.live(b.home)
    _STATEMENTS[kind if home else 1](draw, b, home)


def _op(draw: Draw, b: _Body, home: list[str]) -> None:
    """An op on two values of one space."""
    x, y = _pick(draw, home), _pick(draw, home)
    v = b.fresh("v")
    b.lines.append(f"let {v} = {x} {_pick(draw, ['+', '*', '-'])} {y};")
    b.names[v] = b.home


def _round_trip(draw: Draw, b: _Body, home: list[str]) -> None:
    """A transfer of a copy, and back."""
    x = _pick(draw, b.live())
    there = "device" if b.names[x] != "device" else "host"
    v = b.fresh("t")
    b.lines.append(f"let {v} = transfer(transfer(copy({x}), to = {there}), to = {b.names[x]});")
    b.names[v] = b.names[x]
    b.transfers += 2


def _move(draw: Draw, b: _Body, home: list[str]) -> None:
    """A move: the name is gone."""
    x = _pick(draw, home)
    there = "unified" if b.home != "unified" else "host"
    v = b.fresh("m")
    b.lines.append(f"let {v} = transfer({x}, to = {there});")
    del b.names[x]
    if x in b.cells:
        b.cells.remove(x)  # a moved buffer is gone too (assigning it would revive it)
    b.names[v] = there
    b.transfers += 1


def _buffer(draw: Draw, b: _Body, home: list[str]) -> None:
    c = b.fresh("buf")
    b.lines.append(f"let mut {c} = {_pick(draw, home)} * 1.0;")
    b.cells.append(c)
    b.names[c] = b.home


def _inout_call(draw: Draw, b: _Body, home: list[str]) -> None:
    if not b.cells:
        return
    c = _pick(draw, b.cells)
    others = [n for n in home if n != c]
    if others:
        b.lines.append(f"bump_{b.home}(&mut {c}, &{_pick(draw, others)});")


def _loop_update(draw: Draw, b: _Body, home: list[str]) -> None:
    """A loop that updates a buffer."""
    if not b.cells:
        return
    c, x = _pick(draw, b.cells), _pick(draw, home)
    v = b.fresh("l")
    b.lines.append(
        f"let {v} = for i in 0..{draw(st.integers(1, 4))} with (acc = {x}) "
        f"{{ {c} = {c} + acc; acc * 0.5 }};"
    )
    b.names[v] = b.home


def _borrow(draw: Draw, b: _Body, home: list[str]) -> None:
    """A borrow read at once."""
    x = _pick(draw, home)
    r, v = b.fresh("r"), b.fresh("v")
    b.lines += [f"let {r} = &{x};", f"let {v} = {r} + {x};"]
    b.names[v] = b.home


def _effectful_call(draw: Draw, b: _Body, home: list[str]) -> None:
    hosts = b.live("host")
    if b.home != "device" or not hosts:
        return
    v = b.fresh("u")
    b.lines.append(f"let {v} = upload(copy({_pick(draw, hosts)}));")
    b.names[v] = "device"
    b.transfers += 1


_STATEMENTS: list[Callable[[Draw, _Body, list[str]], None]] = [
    _op,
    _round_trip,
    _move,
    _buffer,
    _inout_call,
    _loop_update,
    _borrow,
    _effectful_call,
]


def _inject(draw: Draw, b: _Body, mistake: str) -> bool:
    """Write ``mistake`` into the body; False when this body has no room for it."""
    home = b.live(b.home)
    if mistake in ("result_space", "missing_effect", "unknown_space"):
        return bool(home)  # written in the signature by programs()
    if not home or (mistake in _NEEDS_CELL and not b.cells):
        return False
    other = "host" if b.home == "device" else "device"
    lines = _INJECT[mistake](draw, b, _pick(draw, home), other)
    b.lines += lines
    return bool(lines)


def _use_after_move(draw: Draw, b: _Body, x: str, other: str) -> list[str]:
    b.transfers += 1
    return [f"let moved = transfer({x}, to = {other});", f"let bad = {x} + {x};"]


def _move_in_loop(draw: Draw, b: _Body, x: str, other: str) -> list[str]:
    b.transfers += 1
    return [
        f"let bad = for i in 0..2 with (acc = {x} * 1.0) "
        f"{{ let gone = transfer({x}, to = {other}); acc }};"
    ]


def _space_mismatch(draw: Draw, b: _Body, x: str, other: str) -> list[str]:
    b.transfers += 1
    return [f"let far = transfer(copy({x}), to = {other});", f"let bad = far + {x};"]


def _assign_immutable(draw: Draw, b: _Body, x: str, other: str) -> list[str]:
    fixed = [n for n in b.live(b.home) if n not in b.cells]
    if not fixed:
        return []
    y = _pick(draw, fixed)
    return [f"{y} = {y} * 2.0;"]


def _double_mut(draw: Draw, b: _Body, x: str, other: str) -> list[str]:
    c = _pick(draw, b.cells)
    return [f"twice_{b.home}(&mut {c}, &mut {c});"]


def _mut_while_borrowed(draw: Draw, b: _Body, x: str, other: str) -> list[str]:
    c = _pick(draw, b.cells)
    return [f"let rb = &{c};", f"{c} = {c} * 3.0;", f"let bad = rb + {c};"]


def _borrow_across_loop(draw: Draw, b: _Body, x: str, other: str) -> list[str]:
    c = _pick(draw, b.cells)
    return [
        f"let rl = &{c};",
        f"let bad = for i in 0..2 with (acc = {x} * 1.0) "
        f"{{ let t = rl + acc; {c} = {c} + t; acc }};",
    ]


def _mode_mismatch(draw: Draw, b: _Body, x: str, other: str) -> list[str]:
    return [f"bump_{b.home}({x}, &{x});"]


#: mistake -> the lines that write it (given a live name x of the home space)
_INJECT: dict[str, Callable[[Draw, _Body, str, str], list[str]]] = {
    "use_after_move": _use_after_move,
    "move_in_loop": _move_in_loop,
    "space_mismatch": _space_mismatch,
    "assign_immutable": _assign_immutable,
    "double_mut": _double_mut,
    "mut_while_borrowed": _mut_while_borrowed,
    "borrow_across_loop": _borrow_across_loop,
    "mode_mismatch": _mode_mismatch,
}
_NEEDS_CELL = frozenset({"double_mut", "mut_while_borrowed", "borrow_across_loop"})


@st.composite
def programs(draw: Draw) -> Program:
    """A source with one export ``f`` (and the helpers), maybe with one mistake."""
    home = draw(st.sampled_from(["host", "device"]))
    b = _Body(home)
    params = []
    for k in range(draw(st.integers(1, 3))):
        sp = draw(st.sampled_from([home, home, "host", "unified"]))
        params.append(f"p{k}: {SHAPE} @{sp}")
        b.names[f"p{k}"] = sp
    if home == "device" and not b.live("device"):
        params.append(f"pd: {SHAPE} @device")
        b.names["pd"] = "device"
    if not b.live(home):
        b.lines.append(f"let h0 = {_pick(draw, b.live())} * 0.0 + 1.0;")
        b.names["h0"] = home if b.names[b.live()[0]] != "unified" else "unified"
        if b.names["h0"] != home:
            b.lines.append(f"let h1 = transfer(copy(h0), to = {home});")
            b.names["h1"] = home
            b.transfers += 1
    for _ in range(draw(st.integers(0, 6))):
        _statement(draw, b)
    mistake = draw(st.sampled_from([None, None, *MISTAKES]))
    if mistake is not None and not _inject(draw, b, mistake):
        mistake = None
    result = _pick(draw, b.live(home)) if b.live(home) else None
    if result is None:
        return _program(b, params, "broadcast(0.5, shape = [4])", None, home, b.transfers > 0)
    result_space = home
    if mistake == "result_space":
        result_space = "host" if home == "device" else "device"
    if mistake == "unknown_space":
        params[0] = params[0].rsplit("@", 1)[0] + "@gpu"
    effects = b.transfers > 0 and mistake != "missing_effect"
    if mistake == "missing_effect" and b.transfers == 0:
        mistake = None
    return _program(b, params, result, mistake, result_space, effects)


def _program(
    b: _Body,
    params: list[str],
    result: str,
    mistake: str | None,
    result_space: str,
    effects: bool = False,
) -> Program:
    clause = " effects(transfer)" if effects else ""
    body = "".join(f"    {line}\n" for line in [*b.lines, result])
    head = f"export fn f({', '.join(params)}) -> {SHAPE} @{result_space}{clause} {{\n"
    source = HELPERS["host"] + HELPERS["device"] + UPLOAD + head + body + "}\n"
    return Program(source, mistake, MISTAKES.get(mistake) if mistake else None)


# ----------------------------------------------------------------------------- checking


@dataclass
class Outcome:
    accepted: bool
    codes: list[str]
    fn: Function | None = None


def documented_codes() -> frozenset[str]:
    return frozenset(re.findall(r"^\| (E0\d{3}) \|", DOCS.read_text(encoding="utf-8"), re.M))


_DOCUMENTED: list[frozenset[str]] = []


def check(program: Program) -> Outcome:
    """The property (see the module doc); AssertionError names what broke."""
    if not _DOCUMENTED:
        _DOCUMENTED.append(documented_codes())
    src = program.source
    result = compile_source(src, "fuzz.kera")  # an exception here is a crash: it propagates
    codes = [d.code for d in result.diagnostics]
    size = len(src.encode())
    for d in result.diagnostics:
        assert d.code in _DOCUMENTED[0], f"undocumented code {d.code}\n{src}"
        spans = [(d.start, d.end), *((n.start, n.end) for n in d.notes)]
        assert all(0 <= a <= e <= size for a, e in spans), f"span outside the source\n{src}"
    render_diagnostics(result.diagnostics, src, "fuzz.kera")
    if program.expect is not None:
        assert result.graph is None and program.expect in codes, (
            f"{program.mistake} not refused with {program.expect}: got {codes}\n{src}"
        )
    if result.graph is None:
        assert codes, f"no graph and no diagnostic\n{src}"
        return Outcome(False, codes)
    fn = dict(result.graph.functions)["f"]
    passes.optimize(fn, passes.resolve(["inline", "fold", "simplify", "cse"]))
    rng = np.random.default_rng(len(src))
    inputs = {
        name: rng.standard_normal((2, *p.shape)).astype(np.float32)
        for name, p in zip(fn.param_names(), fn.params, strict=True)
    }
    outs = interpret(fn, inputs)
    assert len(outs) == len(fn.results), src
    return Outcome(True, codes, fn)


# ----------------------------------------------------------------------------- campaign


@dataclass
class Figures:
    programs: int = 0
    accepted: int = 0
    rejected: collections.Counter[str] = field(default_factory=collections.Counter)
    mistakes: collections.Counter[str] = field(default_factory=collections.Counter)
    crashes: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # accepted sources for the target run


def campaign(seconds: float, keep: int = 40) -> Figures:
    """Check programs for ``seconds`` (Hypothesis batches of 100, fresh seeds each)."""
    fig = Figures()
    deadline = time.monotonic() + seconds

    @settings(
        max_examples=100,
        deadline=None,
        database=None,
        derandomize=False,
        suppress_health_check=list(HealthCheck),
    )
    @given(programs())
    def one(program: Program) -> None:
        if time.monotonic() > deadline:
            return
        fig.programs += 1
        if program.mistake:
            fig.mistakes[program.mistake] += 1
        try:
            out = check(program)
        except AssertionError as e:
            fig.crashes.append(f"property: {e}")
            return
        except Exception as e:
            fig.crashes.append(f"crash: {type(e).__name__}: {e}\n{program.source}")
            return
        if out.accepted:
            fig.accepted += 1
            if len(fig.kept) < keep:
                fig.kept.append(program.source)
        else:
            fig.rejected.update(set(out.codes))

    while time.monotonic() < deadline:
        one()
    return fig


def merged_corpus(sources: list[str]) -> str:
    """Accepted programs in one file: each export renamed ``case<k>``, helpers kept once."""
    head = HELPERS["host"] + HELPERS["device"] + UPLOAD
    out = [head]
    for k, src in enumerate(sources):
        out.append(src[len(head) :].replace("export fn f(", f"export fn case{k}(", 1) + "\n")
    return "".join(out)


def run_targets(sources: list[str], targets: str) -> tuple[int, str]:
    """``keracheck run`` of the accepted programs on ``targets``: (exit code, summary)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "typed_programs.kera"
        path.write_text(merged_corpus(sources), encoding="utf-8")
        run = "import sys; from keracheck.cli import main; sys.exit(main())"
        cmd = [sys.executable, "-c", run, "run", str(path), "--targets", targets, "-q"]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    lines = [ln for ln in done.stdout.splitlines() if "cases:" in ln]
    summary = lines[-1] if lines else ""
    if done.returncode:
        summary += "\n" + done.stderr.strip()[-2000:]
    return done.returncode, summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m keracheck.fuzz.typed_programs",
        description="Fuzz the Kera checker with well- and ill-typed programs (spaces, "
        "ownership, effects); exit 1 on any crash or broken property.",
    )
    ap.add_argument("--seconds", type=float, default=60.0, help="time budget (default 60)")
    ap.add_argument("--targets", default="ref,cpu,wasm", help="targets for the accepted ones")
    ap.add_argument("--keep", type=int, default=40, help="accepted programs run on targets")
    args = ap.parse_args(argv)
    fig = campaign(args.seconds, args.keep)
    rejected = fig.programs - fig.accepted
    print(f"programs {fig.programs}, accepted {fig.accepted}, rejected {rejected}")
    print("rejected by code: " + ", ".join(f"{c} {n}" for c, n in sorted(fig.rejected.items())))
    print("mistakes injected: " + ", ".join(f"{m} {n}" for m, n in sorted(fig.mistakes.items())))
    print(f"crashes {len(fig.crashes)}")
    for c in fig.crashes[:5]:
        print(c)
    code = 1 if fig.crashes else 0
    if fig.kept and args.targets:
        rc, summary = run_targets(fig.kept, args.targets)
        print(f"keracheck run of {len(fig.kept)} accepted programs on {args.targets}: {summary}")
        code = code or (0 if rc == 0 else 1)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
