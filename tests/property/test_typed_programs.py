"""The checker fuzzer of ``keracheck.fuzz.typed_programs`` at CI size: generated programs with
spaces, transfers, borrows, ``&mut`` buffers and effects are accepted (a graph that passes the
validator at -O2 and runs on the reference interpreter) or refused with documented
diagnostics, and every injected mistake is refused with its own code.  The 60 s campaign that
also runs the accepted programs on cpu and wasm is
``python -m keracheck.fuzz.typed_programs --seconds 60`` (docs/fuzzing.md)."""

from __future__ import annotations

import collections
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_control_fuzz import check as check_source
from test_frontend_fuzz import mutations

from kera.frontend import compile_source
from keracheck.fuzz.typed_programs import (
    MISTAKES,
    Program,
    check,
    main,
    merged_corpus,
    programs,
)

CORPUS = Path(__file__).parents[2] / "corpora" / "spaces.kera"


def corpus_seeds() -> list[bytes]:
    """Small valid sources cut from the corpus: its helpers with one export each."""
    text = CORPUS.read_text(encoding="utf-8")
    parts = text.split("\n\n// ")
    helpers = "\n\n// ".join(p for p in parts[:4])
    picks = [p for p in parts if p.split("\n", 1)[-1].startswith("export fn")]
    return [f"{helpers}\n\n// {p}".encode() for p in picks[:6:2]]


SEEN: collections.Counter[str] = collections.Counter()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_every_program_is_accepted_and_runs_or_is_refused_with_its_code(p: Program) -> None:
    out = check(p)
    SEEN["accepted" if out.accepted else "refused"] += 1
    if p.mistake is None:
        assert out.accepted, out.codes  # the generator's well-typed programs are well-typed
        SEEN["clean"] += 1
    else:
        SEEN[p.mistake] += 1


def test_the_generator_reaches_every_mistake_and_clean_programs() -> None:
    """Runs after the property above in this module: the counts it left show that the
    strategy exercised both sides (not a property that passes by never trying)."""
    if not SEEN:  # run on its own (-k): nothing to look at
        return
    assert SEEN["clean"] > 0 and SEEN["refused"] > 0
    assert len([m for m in MISTAKES if SEEN[m]]) >= len(MISTAKES) // 2


def test_a_handwritten_mistake_of_each_kind_is_refused_with_its_code() -> None:
    head = merged_corpus([])
    for mistake, body, result in [
        ("use_after_move", "let m = transfer(p, to = device); let b = p + p;", "b"),
        ("space_mismatch", "let d = transfer(copy(p), to = device); let b = d + p;", "b"),
        ("double_mut", "let mut c = p * 1.0; twice_host(&mut c, &mut c);", "c"),
        ("mode_mismatch", "bump_host(p, &p);", "p"),
    ]:
        src = head + f"export fn f(p: f32[4]) -> f32[4] effects(transfer) {{ {body} {result} }}\n"
        out = check(Program(src, mistake, MISTAKES[mistake]))
        assert not out.accepted and MISTAKES[mistake] in out.codes


def test_the_campaign_command_runs_as_documented(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/fuzzing.md's command, with a short budget and the reference target only."""
    assert main(["--seconds", "1", "--targets", "ref", "--keep", "3"]) == 0
    out = capsys.readouterr().out
    assert "crashes 0" in out and "rejected by code:" in out
    assert "keracheck run of 3 accepted programs on ref: keracheck" in out
    assert "3 cases: 0 agree, 0 diverge, 0 error, 3 skipped" in out  # one target: no pair


# ------------------------------------------------------------- mutated sources of the corpus

SPACE_TOKENS = st.sampled_from(
    [b"@device", b"@host", b"@pinned", b"@unified", b"@gpu", b"@", b"&", b"&mut ", b"mut",
     b"let mut ", b"effects(transfer)", b"effects(", b"transfer(", b"copy(", b"to = device",
     b"to = host", b"b = ", b" = ", b";", b"(", b")", b"{", b"}", b",", b"x", b"buf", b"\n",
     b"for i in 0..2 with (k = 0) {", b"axpy(&mut buf, a, &x);", b"//c\n", b"-> f32"]
)  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(mutations(corpus_seeds(), SPACE_TOKENS))
def test_mutated_spaces_corpus(data: bytes) -> None:
    """The front end's guarantees on the new syntax: no exception, the tree prints back the
    input, a graph exactly when there is no diagnostic (spans and notes inside the input),
    formatting idempotent and keeping tokens and the graph's hash."""
    check_source(data)
    for d in compile_source(data).diagnostics:
        assert all(0 <= n.start <= n.end <= len(data) for n in d.notes)


def test_the_corpus_seeds_are_valid_programs() -> None:
    seeds = corpus_seeds()
    assert len(seeds) == 3
    for seed in seeds:
        assert compile_source(seed).ok, seed.decode()[-300:]
