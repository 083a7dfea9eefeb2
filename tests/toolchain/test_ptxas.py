"""ptxas accepts the PTX the emulator accepts, and rejects what the emulator calls malformed.

Handwritten snippets (no code generator involved) covering every instruction form of the
emulator's subset are assembled with ``ptxas -arch=sm_90``; the runner's error reporting is
checked on broken modules.  Skipped when ptxas is not on PATH.
"""

from __future__ import annotations

import numpy as np
import pytest

from keracheck.ptx_emu import PtxSyntaxError, load, parse
from keracheck.ptx_emu.snippets import Snippet
from keracheck.runners.ptxas import Ptxas, PtxasError
from keracheck.target import BackendError

pytestmark = pytest.mark.toolchain

PTXAS = Ptxas()


@pytest.fixture(autouse=True)
def _need_ptxas() -> None:
    reason = PTXAS.available()
    if reason is not None:
        pytest.skip(reason)


F = {"%a": "f32", "%b": "f32", "%c": "f32"}
D = {"%a": "f64", "%b": "f64", "%c": "f64"}
I = {"%a": "s32", "%b": "s32", "%c": "s32"}  # noqa: E741
L = {"%a": "u64", "%b": "u64", "%c": "u64"}

# (body, inputs, outputs, temps): every instruction family the emulator executes.
FORMS = [
    (
        "add.rn.f32 %d, %a, %b;\nsub.rn.f32 %d, %d, %c;\nmul.rn.f32 %d, %d, %a;",
        F,
        {"%d": "f32"},
        {},
    ),
    (
        "fma.rn.f32 %d, %a, %b, %c;\ndiv.rn.f32 %d, %d, %a;\nsqrt.rn.f32 %d, %d;",
        F,
        {"%d": "f32"},
        {},
    ),
    ("rcp.rn.f32 %d, %a;\nmad.rn.f32 %d, %d, %b, %c;", F, {"%d": "f32"}, {}),
    (
        "add.rn.f64 %d, %a, %b;\nfma.rn.f64 %d, %d, %b, %c;\ndiv.rn.f64 %d, %d, %c;",
        D,
        {"%d": "f64"},
        {},
    ),
    ("sqrt.rn.f64 %d, %a;\nrcp.rn.f64 %d, %d;\nmul.rn.f64 %d, %d, %b;", D, {"%d": "f64"}, {}),
    ("min.f32 %d, %a, %b;\nmax.NaN.f32 %d, %d, %c;\nmin.NaN.f32 %d, %d, %a;", F, {"%d": "f32"}, {}),
    (
        "min.f64 %d, %a, %b;\nmax.f64 %d, %d, %c;\nabs.f64 %d, %d;\nneg.f64 %d, %d;",
        D,
        {"%d": "f64"},
        {},
    ),
    ("abs.f32 %d, %a;\nneg.f32 %d, %d;", F, {"%d": "f32"}, {}),
    (
        "setp.equ.f32 %p, %a, %b;\nsetp.num.and.f32 %q, %a, %c, !%p;\nselp.f32 %d, %a, %b, %q;",
        F,
        {"%d": "f32"},
        {"%p": "pred", "%q": "pred"},
    ),
    (
        "setp.gtu.f64 %p|%q, %a, %b;\nselp.f64 %d, %a, %c, %q;",
        D,
        {"%d": "f64"},
        {"%p": "pred", "%q": "pred"},
    ),
    (
        "testp.notanumber.f32 %p, %a;\ntestp.subnormal.f32 %q, %b;\nxor.pred %p, %p, %q;\n"
        "not.pred %p, %p;\nselp.b32 %d, 1, 0, %p;",
        F,
        {"%d": "u32"},
        {"%p": "pred", "%q": "pred"},
    ),
    (
        "add.s32 %d, %a, %b;\nsub.s32 %d, %d, %c;\nmul.lo.s32 %d, %d, %a;\nmad.lo.s32 %d, %d, %b, %c;"
        "\nmul.hi.s32 %d, %d, %a;\nmin.s32 %d, %d, %b;\nmax.s32 %d, %d, %c;\nneg.s32 %d, %d;\nabs.s32 %d, %d;",
        I,
        {"%d": "s32"},
        {},
    ),
    (
        "div.s32 %d, %a, 3;\nrem.s32 %d, %d, 5;\ndiv.u32 %u, %u, 7;\nrem.u32 %u, %u, 9;",
        I,
        {"%d": "s32"},
        {"%u": "u32"},
    ),
    ("mul.wide.s32 %w, %a, %b;\nmad.wide.u32 %w, %u, %u, %w;", I, {"%w": "s64"}, {"%u": "u32"}),
    (
        "and.b32 %d, %a, %b;\nor.b32 %d, %d, %c;\nxor.b32 %d, %d, 0x80000000;\nnot.b32 %d, %d;"
        "\nshl.b32 %d, %d, %a;\nshr.s32 %d, %d, %b;\nshr.u32 %d, %d, 31;\nshr.b32 %d, %d, %c;",
        I,
        {"%d": "b32"},
        {},
    ),
    (
        "add.u64 %d, %a, %b;\nmul.lo.u64 %d, %d, %c;\ndiv.u64 %d, %d, 3;\nrem.s64 %d, %d, 7;"
        "\nshl.b64 %d, %d, %s;\nshr.s64 %d, %d, %s;\nand.b64 %d, %d, %c;\nmin.u64 %d, %d, %a;",
        L,
        {"%d": "u64"},
        {"%s": "u32"},
    ),
    (
        "setp.lo.u64 %p, %a, %b;\nsetp.ne.b64 %q, %a, %c;\nand.pred %p, %p, %q;\n@%p mov.u64 %d, %a;\n"
        "@!%p mov.u64 %d, %b;",
        L,
        {"%d": "u64"},
        {"%p": "pred", "%q": "pred"},
    ),
    (
        "cvt.rzi.s32.f32 %i, %a;\ncvt.rni.u64.f32 %l, %b;\ncvt.rmi.s64.f32 %l, %c;\ncvt.rpi.u32.f32 %i, %a;"
        "\ncvt.rn.f32.s32 %d, %i;\ncvt.rn.f32.u64 %d, %l;\ncvt.rni.f32.f32 %d, %d;\ncvt.rzi.f32.f32 %d, %d;",
        F,
        {"%d": "f32"},
        {"%i": "s32", "%l": "u64"},
    ),
    (
        "cvt.f64.f32 %x, %a;\ncvt.rn.f32.f64 %d, %x;\ncvt.rzi.s64.f64 %l, %x;\ncvt.rn.f64.s64 %x, %l;"
        "\ncvt.rmi.f64.f64 %x, %x;\ncvt.rzi.u32.f64 %i, %x;\ncvt.rn.f64.u32 %x, %i;",
        F,
        {"%x": "f64"},
        {"%d": "f32", "%l": "s64", "%i": "u32"},
    ),
    (
        "cvt.s64.s32 %l, %a;\ncvt.u32.u64 %u, %l;\ncvt.sat.s32.s64 %d, %l;\ncvt.sat.u32.s32 %u, %d;"
        "\ncvt.u16.u32 %h, %u;\ncvt.s32.s16 %d, %h;",
        I,
        {"%d": "s32"},
        {"%l": "s64", "%u": "u32", "%h": "b16"},
    ),
    (
        "mov.b32 %x, %a;\nand.b32 %x, %x, 0x7FFFFFFF;\nmov.b32 %d, %x;\nmov.f32 %d, 0f7FC00000;",
        F,
        {"%d": "f32"},
        {"%x": "b32"},
    ),
    (
        "mov.u32 %n, 0;\nLOOP:\nadd.u32 %n, %n, 1;\nsetp.lt.u32 %p, %n, %u;\n@%p bra LOOP;\n"
        "bra.uni OUT;\nOUT:\ncvt.rn.f32.u32 %d, %n;",
        {"%u": "u32"},
        {"%d": "f32"},
        {"%n": "u32", "%p": "pred"},
    ),
]


@pytest.mark.parametrize("form", range(len(FORMS)))
def test_ptxas_accepts_every_emulated_form(form: int) -> None:
    body, inputs, outputs, temps = FORMS[form]
    text = Snippet(body, inputs, outputs, temps).ptx()
    load(parse(text), "snippet")  # the emulator accepts it ...
    result = PTXAS.assemble(text)  # ... and so does ptxas
    assert result.cubin[:4] == b"\x7fELF"


def test_emulator_runs_a_form_ptxas_accepts() -> None:
    body, inputs, outputs, temps = FORMS[-1]
    out = Snippet(body, inputs, outputs, temps).run({"%u": np.array([0, 1, 5], dtype=np.uint32)})
    assert list(out["%d"]) == [1.0, 1.0, 5.0]


MALFORMED = [
    "add.s32 %r1, %f1, %r2;",
    "add.s32 %r1, %r9, %r2;",
    "add.s32 %r1, %tid.x, 1;",
    "min.NaN.f64 %rd1, %rd2, %rd3;",
]

KERNEL = """.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p)
{{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    .reg .f32 %f<4>;
    .reg .pred %p<2>;
    mov.b32 %f1, 0f3F800000;
    mov.u32 %r2, 1;
    mov.u64 %rd2, 1;
    mov.u64 %rd3, 1;
    {line}
    ret;
}}
"""


@pytest.mark.parametrize("line", MALFORMED)
def test_ptxas_rejects_what_the_emulator_calls_malformed(line: str) -> None:
    text = KERNEL.format(line=line)
    with pytest.raises(PtxSyntaxError):
        load(parse(text), "k")
    with pytest.raises(PtxasError) as err:
        PTXAS.assemble(text)
    assert err.value.diagnostics
    assert any(d.line == 14 and line in d.source for d in err.value.diagnostics)


def test_ptxas_error_message_quotes_the_line() -> None:
    with pytest.raises(PtxasError) as err:
        PTXAS.assemble(KERNEL.format(line="add.rn.f32 %f2, %f1, %f99;"))
    message = str(err.value)
    assert "line 14: error: Unknown symbol '%f99'" in message
    assert "add.rn.f32 %f2, %f1, %f99;" in message


def test_version_and_missing_tool() -> None:
    assert PTXAS.version().count(".") == 2
    missing = Ptxas(executable="ptxas-does-not-exist")
    reason = missing.available()
    assert reason is not None and "pip install nvidia-cuda-nvcc" in reason
    with pytest.raises(BackendError, match="ptxas not found"):
        missing.assemble(KERNEL.format(line=""))


def test_verbose_log_is_returned() -> None:
    text = Snippet("mul.rn.f32 %d, %a, %b;\nadd.rn.f32 %d, %d, %c;", F, {"%d": "f32"}).ptx()
    result = PTXAS.assemble(text)
    assert "Compiling entry function 'snippet'" in result.log
    assert result.seconds > 0


def test_ptxas_accepts_every_hardware_question() -> None:
    from keracheck.ptx_emu.questions import QUESTIONS

    for q in QUESTIONS:
        PTXAS.assemble(q.snippet().ptx())
