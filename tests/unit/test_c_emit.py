"""The C emitter without a compiler: golden text, calling convention, invariants, driver format.

Golden files live in tests/golden/c/, each piece of text pinned once (the pieces come from
``kera.backends.c.emit.parts``, not from re-parsing C): ``prelude.<isa>.c`` per ISA level,
``helpers.c`` every helper the cases use, ``<graph>.<isa>.c`` a case's banner and function
definitions with the prelude and helpers as ``/* golden: ... */`` references in emitted order,
and ``<graph>.h``.  Regenerate them after an
intended change with ``KERA_UPDATE_GOLDEN=1 .venv/bin/pytest tests/unit/test_c_emit.py`` and
review the diff.  Running the emitted code is tests/toolchain/test_c_backend.py's job.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kera.backends import c
from kera.backends.c import abi
from kera.backends.c.emit import Arena, Parts, parts
from kera.dtypes import DType
from kera.ir import Function, FunctionBuilder, IRError
from kera.ops import Op

D = DType


def saxpy() -> Function:
    b = FunctionBuilder("saxpy")
    a = b.param("a", D.F32)
    x = b.param("x", D.F32, [8])
    y = b.param("y", D.F32, [8])
    return b.build(b.op("add", b.op("mul", b.op("broadcast", a, shape=[8]), x), y))


def reductions() -> Function:
    b = FunctionBuilder("reductions")
    m = b.param("m", D.F64, [2, 3])
    v = b.param("v", D.F64, [3])
    k = b.param("k", D.I32, [5])
    return b.build(
        b.op("sum", m, axis=1),
        b.op("amax", m, axis=0),
        b.op("dot", v, v),
        b.op("matmul", m, b.op("reshape", v, shape=[3, 1])),
        b.op("prod", k, axis=0),
    )


def conversions() -> Function:
    b = FunctionBuilder("conversions")
    x = b.param("x", D.F32, [2, 2])
    s = b.param("s", D.I64, [2, 2])
    i = b.op("convert", x, to=D.I32)
    u = b.op("convert", b.op("floor", x), to=D.U64)
    sh = b.op("shr", s, b.op("convert", i, to=D.I64))
    q = b.op("div", sh, b.op("iota", shape=[2, 2], axis=1, to=D.I64))
    mask = b.op("lt", x, b.op("transpose", x, perm=[1, 0]))
    picked = b.op("select", mask, x, b.const(np.float32(-0.0), D.F32, [2, 2]))
    return b.build(u, q, b.op("bitcast", picked, to=D.U32))


CASES = {
    "saxpy": (saxpy, ("scalar", "avx2")),
    "reductions": (reductions, ("scalar",)),
    "conversions": (conversions, ("scalar", "neon")),
}


GOLDEN = [(g, isa) for g, (_, isas) in CASES.items() for isa in isas]
GOLDEN_ISAS = [isa for isa in c.ISAS if any(isa in isas for _, isas in CASES.values())]


def _parts(graph: str, isa: str) -> Parts:
    return parts([CASES[graph][0]()], isa=isa, name=graph)


def _skeleton(p: Parts, isa: str) -> str:
    """The translation unit with the prelude and each helper replaced by a one-line reference to
    the golden file that pins it: what is particular to a case, and the helpers it uses in
    emitted order."""
    refs = [f"/* golden: helpers.c {key} */" for key in p.helpers]
    return "\n".join([p.banner, f"/* golden: prelude.{isa}.c */", *refs, *p.functions.values()])


@pytest.mark.parametrize(("graph", "isa"), GOLDEN)
def test_golden_source(graph: str, isa: str, golden: Callable[[str, str], None]) -> None:
    src = c.emit([CASES[graph][0]()], isa=isa, name=graph)
    p = _parts(graph, isa)
    assert src.c == p.text()  # the parts are the whole file, so every byte is pinned below
    golden(f"c/{graph}.{isa}.c", _skeleton(p, isa))
    golden(f"c/{graph}.h", src.h)


@pytest.mark.parametrize("isa", GOLDEN_ISAS)
def test_golden_prelude(isa: str, golden: Callable[[str, str], None]) -> None:
    """One prelude per ISA level, whatever the functions."""
    (prelude,) = {_parts(graph, isa).prelude for graph in CASES}
    golden(f"c/prelude.{isa}.c", prelude)


def test_golden_helpers(golden: Callable[[str, str], None]) -> None:
    """Every helper the golden cases use, once, sorted by key.  A helper's text is the same at
    every ISA level (kera.backends.c.lower writes each body once for both lane flavours), which
    is what lets one file pin it for all of them."""
    texts: dict[str, set[str]] = {}
    for graph, isa in GOLDEN:
        for key, text in _parts(graph, isa).helpers.items():
            texts.setdefault(key, set()).add(text)
    assert all(len(t) == 1 for t in texts.values()), "a helper's text depends on the ISA level"
    golden("c/helpers.c", "\n".join(f"/* ---- {k} */\n{min(texts[k])}" for k in sorted(texts)))


# ------------------------------------------------------------------------------ convention


def test_signature_and_header() -> None:
    src = c.emit([saxpy()], isa="scalar", name="blas")
    proto = (
        "int kera_saxpy(size_t n, const float *p_a, const float *p_x, const float *p_y, "
        "float *out0);"
    )
    assert proto in src.h
    assert src.h.startswith("/* blas.h")
    assert "#ifndef KERA_BLAS_H" in src.h and 'extern "C"' in src.h
    assert '#include "blas.h"' in src.c
    assert src.files().keys() == {"blas.c", "blas.h"}
    assert src.symbols == {"kera_saxpy": "saxpy"}


def test_io_types_per_dtype() -> None:
    b = FunctionBuilder("types")
    ps = [b.param(f"p{dt}", dt, [2]) for dt in DType]
    fn = b.build(*ps)
    sig = c.emit([fn]).h
    for dt, ctype in [
        (D.BOOL, "uint8_t"),
        (D.I32, "int32_t"),
        (D.I64, "int64_t"),
        (D.U32, "uint32_t"),
        (D.U64, "uint64_t"),
        (D.F32, "float"),
        (D.F64, "double"),
    ]:
        assert f"const {ctype} *p_p{dt}" in sig


def test_names_become_c_identifiers() -> None:
    assert c.c_ident("a-b.c") == "a_b_c"
    assert c.c_ident("3x") == "_3x"
    b = FunctionBuilder("my_fn")
    fn = b.build(b.op("neg", b.param("in_put", D.I32)))
    src = c.emit([fn])
    assert "int kera_my_fn(size_t n, const int32_t *p_in_put, int32_t *out0)" in src.c
    assert c.emit({"an-alias": fn}).symbols == {"kera_an_alias": "my_fn"}
    with pytest.raises(IRError, match="not an identifier"):
        FunctionBuilder("my-fn").build(b.op("neg", b.param("x", D.I32)))


def test_colliding_symbols_and_unknown_isa_are_rejected() -> None:
    b1, b2 = FunctionBuilder("f1"), FunctionBuilder("f2")
    f1 = b1.build(b1.op("neg", b1.param("x", D.I32)))
    f2 = b2.build(b2.op("abs", b2.param("x", D.I32)))
    with pytest.raises(ValueError, match="kera_f_1"):
        c.emit({"f-1": f1, "f_1": f2})
    with pytest.raises(ValueError, match="unknown ISA level 'avx9'"):
        c.emit([f1], isa="avx9")


def test_supported_ops_are_every_contract_op() -> None:
    assert frozenset(op.value for op in Op) == c.SUPPORTED


# ------------------------------------------------------------------------------ invariants


def test_isa_levels_share_the_function_bodies() -> None:
    """Only the lane count and typedefs differ between ISA levels: the function definitions and
    the helpers' text are the same for every level, scalar included."""
    fn = conversions()
    levels = {isa: parts([fn], isa=isa) for isa in c.ISAS}
    assert len({tuple(p.functions.items()) for p in levels.values()}) == 1
    assert len({tuple(p.helpers.items()) for p in levels.values()}) == 1
    scalar = c.emit([fn], isa="scalar")
    assert "#define KERA_LANES 1\n" in scalar.c and "vector_size" not in scalar.c
    assert "#define KERA_LANES 16\n" in c.emit([fn], isa="avx512").c


FORBIDDEN = [
    r"\bfminf?\(",  # minNum: wrong NaN and signed-zero rules
    r"\bfmaxf?\(",
    r"\b(l?l?rint|nearbyint|roundf?|lroundf?)\(",  # rounding-mode or ties-away dependent
    r"#pragma GCC optimize",
    r"__attribute__\(\(optimize",
    r"-ffast-math",
]


def test_emitted_c_avoids_non_contract_library_calls() -> None:
    text = c.emit([saxpy(), reductions(), conversions()], isa="avx2").c
    for pattern in FORBIDDEN:
        assert not re.search(pattern, text.replace("ffast-math/-Ofast", "")), pattern


def test_every_division_has_a_safe_divisor() -> None:
    """Integer / and % only ever divide by a value that is never 0 and never -1 with MIN."""
    b = FunctionBuilder("divs")
    outs = []
    for dt in (D.I32, D.I64, D.U32, D.U64):
        x = b.param(f"x{dt}", dt)
        outs += [b.op("div", x, x), b.op("rem", x, x)]
    text = c.emit([b.build(*outs)]).c
    divisions = re.findall(r"[a-z_0-9()]+\s*[/%]\s*[a-z_0-9(]+[^;]*", text)
    real = [d for d in divisions if not d.startswith(("//",)) and "/*" not in d]
    assert real, "no divisions found"
    for d in real:
        assert "safe" in d or "(b | (z & 1u))" in d, d


def test_large_tiles_use_a_reused_arena() -> None:
    b = FunctionBuilder("big")
    x = b.param("x", D.F64, [4096])
    y = b.op("neg", b.op("abs", b.op("neg", x)))
    text = c.emit([b.build(b.op("sum", y, axis=0))], isa="avx2").c
    assert "aligned_alloc(128," in text and "free(k_arena);" in text
    offsets = set(re.findall(r"\(k_arena \+ (\d+)\)", text))
    # x, neg, abs, neg and the scratch: dead tiles are reused, so fewer distinct offsets
    assert 1 < len(offsets) < 5


def test_elementwise_nodes_call_one_shared_helper_and_moves_stay_loops() -> None:
    """What keeps gcc's time per fuzzed function down (issue 20): a node over several elements
    is one call of ``k_<op>_<dtype>_n``, defined once per translation unit however many nodes
    and functions use it, and a non-inlined function; element-moving loops carry ``K_ROLLED``
    (gcc's ``unroll 1``), so no node's loop is unrolled into straight-line code.  Nothing in
    that changes what is computed (pinned flags, no optimize attributes: FORBIDDEN above)."""

    def chain(name: str) -> Function:
        b = FunctionBuilder(name)
        x = b.param("x", D.F64, [2, 3])
        y = b.op("mul", b.op("add", x, x), b.op("broadcast", b.const(0.5, D.F64), shape=[2, 3]))
        return b.build(b.op("add", y, x), b.op("sqrt", y))

    text = c.emit({"f": chain("f"), "g": chain("g")}, isa="avx512").c
    assert len(re.findall(r"\bk_add_f64_n\(6, \w+, \w+, \w+\);", text)) == 4
    assert text.count("static K_NOINLINE void k_add_f64_n(size_t n, kf64 *r,") == 1
    assert text.count("static K_NOINLINE void k_canon_f64_n(") == 1  # sqrt's result, cleaned
    assert not re.search(r"for \(size_t j = 0; j < \d+; j\+\+\)\n +\w+\[j\] = k_", text)
    assert "K_ROLLED\n" in text and '#define K_ROLLED _Pragma("GCC unroll 1")' in text
    heads = re.findall(r"^ *(\S.*)\n *for \(size_t k_a\d", text, re.M)
    assert heads and set(heads) == {"K_ROLLED"}


def test_reshape_is_an_alias() -> None:
    b = FunctionBuilder("rs")
    x = b.param("x", D.I32, [2, 3])
    text = c.emit([b.build(b.op("neg", b.op("reshape", x, shape=[6])))]).c
    assert "reshape" not in text
    assert "k_neg_i32_n(6, t2, t0);" in text  # the reshape's tile is its input's, t0


def test_arena_allocator_reuses_and_merges() -> None:
    a = Arena()
    x, y, z = a.alloc(100), a.alloc(300), a.alloc(128)
    assert (x, y, z) == (0, 128, 512)
    a.release(x, 100)
    a.release(y, 300)
    assert a.free == [(0, 512)]
    assert a.alloc(512) == 0 and a.top == 640


# ------------------------------------------------------------------------------ driver format


def _output_bytes(fn: Function, rows: int, results: list[np.ndarray[Any, Any]]) -> bytes:
    """What the C driver writes for one successful case (see the layout in c/abi.py)."""
    buf = bytearray(abi.OUT_MAGIC + (1).to_bytes(4, "little") + bytes(4))
    buf += bytes(-len(buf) % 64)
    buf += (0).to_bytes(4, "little", signed=True) + bytes(60)
    for r in results:
        buf += r.tobytes()
        buf += bytes(-len(buf) % 64)
    return bytes(buf)


def test_driver_input_layout_is_aligned() -> None:
    fn = reductions()
    ins = {
        "m": np.arange(6.0).reshape(1, 2, 3),
        "v": np.ones((1, 3)),
        "k": np.arange(5, dtype=np.int32).reshape(1, 5),
    }
    data = abi.input_file([(3, fn, ins)])
    assert data[:8] == abi.IN_MAGIC and int.from_bytes(data[8:12], "little") == 1
    assert int.from_bytes(data[64:68], "little") == 3
    assert int.from_bytes(data[72:80], "little") == 1  # rows
    assert data[128 : 128 + 48] == ins["m"].tobytes()
    assert data[192 : 192 + 24] == ins["v"].tobytes()
    assert data[256 : 256 + 20] == ins["k"].tobytes()
    assert len(data) % 64 == 0


def test_driver_output_parses_back() -> None:
    fn = saxpy()
    out = np.arange(16, dtype=np.float32).reshape(2, 8)
    (got,) = abi.read_output_file(_output_bytes(fn, 2, [out]), [(fn, 2)])
    assert not isinstance(got, int)
    np.testing.assert_array_equal(got[0], out)
    with pytest.raises(abi.DriverOutputError):
        abi.read_output_file(b"KERAOUT0" + bytes(56), [(fn, 2)])
    with pytest.raises(abi.DriverOutputError):
        abi.read_output_file(_output_bytes(fn, 2, [out])[:100], [(fn, 2)])


def test_driver_reports_a_failed_entry() -> None:
    fn = saxpy()
    data = bytearray(_output_bytes(fn, 1, [np.zeros((1, 8), np.float32)]))
    data[64:68] = (1).to_bytes(4, "little")
    assert abi.read_output_file(bytes(data), [(fn, 1)]) == [1]


def test_driver_source_dispatches_every_entry() -> None:
    fns = {"kera_a": saxpy(), "kera_b": reductions()}
    src = c.emit({"a": fns["kera_a"], "b": fns["kera_b"]})
    text = abi.emit_driver(src, fns)
    assert "return kera_a(n, (const float *)in[0]" in text
    assert (
        "{k_call1, 3, 5, (const size_t[]){48, 24, 20}, (const size_t[]){16, 24, 8, 16, 4}}" in text
    )


# ------------------------------------------------------------------------------ targets (no tools)


def test_isa_availability_names_the_missing_cpu_features(monkeypatch: pytest.MonkeyPatch) -> None:
    from keracheck.targets import cpu

    monkeypatch.setattr(cpu, "host_arch", lambda: "x86_64")
    monkeypatch.setattr(cpu, "_cpu_flags", lambda: frozenset({"sse2", "avx", "avx2", "fma"}))
    assert cpu.isa_problem("sse2") is None and cpu.isa_problem("scalar") is None
    assert cpu.isa_problem("avx2") == (
        "host CPU lacks avx2 (no bmi1 bmi2 f16c abm movbe xsave in /proc/cpuinfo)"
    )
    assert "avx512f" in str(cpu.isa_problem("avx512"))
    assert cpu.best_isa() == "sse2"
    assert cpu.CpuTarget().isa == "sse2" and cpu.CpuTarget().name == "cpu"
    monkeypatch.setattr(cpu, "host_arch", lambda: "aarch64")
    assert cpu.isa_problem("avx2") == "avx2 needs an x86_64 host; this one is aarch64"
    assert cpu.best_isa() == "neon"


def test_missing_tools_make_targets_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    from keracheck.targets import cpu

    monkeypatch.setattr(shutil, "which", lambda exe: None)
    host, arm = cpu.CpuTarget("scalar"), cpu.QemuTarget("riscv64")
    assert host.available() == "gcc not on PATH: apt-get install gcc libc6-dev"
    assert arm.available() == (
        "riscv64-linux-gnu-gcc not on PATH: "
        "apt-get install gcc-riscv64-linux-gnu libc6-dev-riscv64-cross"
    )
    (err,) = host.run_many([(saxpy(), {})])
    assert isinstance(err, Exception) and "unavailable" in str(err)
    with pytest.raises(ValueError, match="unknown architecture"):
        cpu.QemuTarget("mips")


def test_registry_factories() -> None:
    from keracheck.target import API_VERSION, Backend
    from keracheck.targets import cpu, instantiate

    for tid, spec in cpu.REGISTRY.items():
        backend = instantiate(spec)
        assert isinstance(backend, Backend) and backend.api_version == API_VERSION
        assert backend.name == tid
        assert backend.supported_ops() == c.SUPPORTED


def test_write_for_kerac_emit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kera.ir import Graph

    graph = Graph([saxpy(), reductions()])
    written = c.write(graph, str(tmp_path / "out"))
    assert sorted(p.name for p in written) == ["kera.c", "kera.h"]
    assert "int kera_reductions(" in (tmp_path / "out" / "kera.h").read_text()
    c.write(graph, str(tmp_path / "model.c"), isa="avx2")
    assert '#include "model.h"' in (tmp_path / "model.c").read_text()
    assert (tmp_path / "model.h").exists()
    c.write(graph, None)
    printed = capsys.readouterr().out
    assert printed.startswith("/* kera.h") and "int kera_saxpy(size_t n" in printed
