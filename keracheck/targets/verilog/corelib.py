"""Core libraries for Verilator builds: every clocked core compiled once per machine.

Verilator 5 writes C++ per core *instance* (its scheduler orders each instance's logic on its
own, so two ``kf_fadd`` instances are two copies of the code): flat, a batch of 2,000 core
instances was ~40 MB of C++ and about two minutes of CPU to verilate and compile.  Here each
clocked core parameterisation of a batch (``kf_fadd(EW=8,MW=23,SUB=0)``, ...; see
``kera_hdl.CORES``) is instead verilated on its own (the same RTL and the same ``--x-assign``
/ ``--x-initial`` as the flat build) and compiled, with a few lines of DPI glue, into one
object at Verilator's default optimisation, cached per machine under
``<cache>/verilator/corelib-<hash>/`` (the hash covers Verilator, g++, the argv, the glue's
template and every RTL source, so a changed core is rebuilt); Verilator's runtime header is
precompiled once for all of them.  Verilator's own protected-library wrapper
(``--lib-create``) was tried first: its per-instance logic (combinational and sequential DPI
calls, sequence numbers) left half of the flat C++ in the build.  The glue here is one call per
rising edge: set the inputs as they were before the edge, clock the instance's model, read
its outputs, which the wrapper module drives as registers (``<=``) -- exact for these cores,
whose every output is a register.

A design is left as it is: its instances still read ``kf_fadd #(.EW(8), ...) u_3 (...)``.  The
build gets, in place of the core's RTL file, a *shim* module of the same name and header whose
body picks, by its parameters, the library wrapper built for them (:func:`shim`), and a copy
of the original renamed ``<core>__flat`` for any parameterisation without a library (none in
practice: the libraries are built for the batch's cores).  Each instance of the model then
costs its glue call (~5 KB of C++ instead of ~43 KB for an f32 ``kf_fadd``), and the cores'
logic is compiled once.

The combinational cores (``kf_fcmp``, ``kf_fminmax``, ``kf_fsign``, ``kf_ishift``) stay flat:
they are small, and a library's combinational path would cost a DPI call per change.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import threading
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from kera.backends.verilog import VerilogDesign
from kera_hdl import CORES, rtl_dir, rtl_sources  # type: ignore[import-not-found, unused-ignore]
from keracheck.runners.sealed import intact, seal
from keracheck.runners.tool import first_line, run_tool
from keracheck.runners.verilator import Verilator, cache_root
from keracheck.target import BackendError

#: cores built as libraries: every clocked one (outputs registered, no combinational path)
LIB_CORES = frozenset(name for name, core in CORES.items() if core.clocked)
#: C++ optimisation of a library object: Verilator's default, since it is compiled once
LIB_OPT = "-Os"
_KEY = re.compile(r"^(\w+)\(((?:\w+=-?\d+(?:,\w+=-?\d+)*)?)\)$")


@dataclass(frozen=True)
class CoreLib:
    """One core parameterisation built as a library."""

    module: str
    params: tuple[tuple[str, int], ...]

    @classmethod
    def parse(cls, key: str) -> CoreLib:
        """From a schedule report key, ``kf_fadd(EW=8,MW=23,SUB=0)``."""
        m = _KEY.match(key)
        if not m:
            raise ValueError(f"not a core key: {key!r}")
        pairs = [p.split("=") for p in m[2].split(",")] if m[2] else []
        return cls(m[1], tuple((k, int(v)) for k, v in pairs))

    @property
    def name(self) -> str:
        """The library's (and its wrapper module's) name, ``kfl_fadd_EW8_MW23_SUB0`` (no
        double underscore: its DPI functions are named after it)."""
        tail = "".join(f"_{k}{v}".replace("-", "m") for k, v in self.params)
        return f"kfl_{self.module.removeprefix('kf_')}{tail}"

    def condition(self) -> str:
        """The shim's test for this parameterisation (``1`` when it has no parameters)."""
        return " && ".join(f"{k} == {v}" for k, v in self.params) or "1"


@dataclass(frozen=True)
class Built:
    """A library in the cache: its wrapper module (``.v``) and its object (``.o``)."""

    sv: Path
    obj: Path


def libs_of(designs: Iterable[VerilogDesign]) -> list[CoreLib]:
    """The distinct clocked core parameterisations of ``designs`` (loop modules included),
    sorted by name."""
    keys = {k for d in designs for k in d.cores}
    libs = {CoreLib.parse(k) for k in keys}
    return sorted((lib for lib in libs if lib.module in LIB_CORES), key=lambda lib: lib.name)


def _header(module: str) -> tuple[str, str]:
    """(the RTL file's text, its module header: ``module <name> #(...) (...);``)."""
    text = (rtl_dir() / f"{module}.v").read_text()
    start = text.index(f"module {module} ")
    end = text.index(");", start) + 2
    return text, text[start:end]


def _ports(module: str) -> list[str]:
    core = CORES[module]
    return ["clk", "rst", "valid_in", *core.inputs, "valid_out", *core.outputs]


def shim(module: str, libs: Sequence[CoreLib]) -> str:
    """Module ``module`` (the core's own header) choosing by parameters among the library
    wrappers of ``libs``, else the flat copy ``<module>__flat`` (:func:`flat_copy`)."""
    _, header = _header(module)
    params = re.findall(r"parameter\s+(\w+)", header.split(") (", 1)[0])
    conns = ", ".join(f".{p}({p})" for p in _ports(module))
    overrides = ", ".join(f".{p}({p})" for p in params)
    lines = [
        "// Generated by keracheck.targets.verilog.corelib: picks the core library built for",
        "// this instance's parameters (the same RTL, verilated and compiled once per machine).",
        "`default_nettype none",
        header,
        "    generate",
    ]
    for i, lib in enumerate(libs):
        lines.append(f"        {'else ' if i else ''}if ({lib.condition()}) begin : lib_{i}")
        lines.append(f"            {lib.name} u ({conns});")
        lines.append("        end")
    flat = (
        f"{module}__flat #({overrides}) u ({conns});"
        if overrides
        else f"{module}__flat u ({conns});"
    )
    lines += [
        f"        {'else ' if libs else ''}begin : flat",
        f"            {flat}",
        "        end",
    ]
    lines += ["    endgenerate", "endmodule", "`default_nettype wire", ""]
    return "\n".join(lines)


def flat_copy(module: str) -> str:
    """The core's RTL with its module renamed ``<module>__flat`` (the shim's fallback)."""
    text, header = _header(module)
    return text.replace(header, header.replace(f"module {module} ", f"module {module}__flat ", 1))


def lib_key(lib: CoreLib) -> str:
    """Content hash of one library build: Verilator, the C++ compiler, its argv, the glue's
    template and the RTL."""
    h = hashlib.sha256(b"keracheck-verilator-corelib-v2\0")
    h.update(_toolchain().encode() + b"\0")
    h.update("\0".join(_verilate_argv(lib, Path("M"))).encode() + b"\0" + LIB_OPT.encode())
    h.update((_GLUE + _WRAPPER).encode() + b"\0")
    for src in rtl_sources():
        h.update(src.name.encode() + b"\0" + src.read_bytes() + b"\0")
    return h.hexdigest()[:32]


@functools.cache
def _toolchain() -> str:
    return Verilator().version() + "\0" + first_line(["g++", "--version"])


def _verilate_argv(lib: CoreLib, mdir: Path) -> list[str]:
    argv = ["verilator", "--cc", "--prefix", f"V{lib.name}", "--top-module", lib.module]
    argv += ["--Mdir", str(mdir), "-Wno-fatal", "-Wno-lint", "-Wno-style"]
    argv += ["--x-assign", "0", "--x-initial", "0"]
    argv += [f"-G{k}={v}" for k, v in lib.params]
    return argv + [str(s) for s in rtl_sources()]


#: the C++ side of a library: one model per instance, one call per rising edge
_GLUE = """// Generated by keracheck.targets.verilog.corelib: DPI glue of one core library
#include "{model}.h"

extern "C" void* {name}_new(const char* scope) {{ return new {model}{{scope}}; }}

// One rising edge of the instance's clock: the inputs as they were before the edge, the
// registered outputs after it (every output of a clocked core is a register).
extern "C" void {name}_tick(void* handle, {params}) {{
    {model}* m = static_cast<{model}*>(handle);
{sets}    m->clk = 0;
    m->eval();
    m->clk = 1;
    m->eval();
{gets}}}
"""

#: the Verilog side: a module of the core's ports calling the glue on every rising edge
_WRAPPER = """// Generated by keracheck.targets.verilog.corelib: wrapper of one core library
module {name} (
{ports}
);
    import "DPI-C" function chandle {name}_new(input string scope);
    import "DPI-C" function void {name}_tick(input chandle handle, {formals});
    chandle handle;
{temps}    initial handle = {name}_new($sformatf("%m"));
    always @(posedge clk) begin
        {name}_tick(handle, {actuals});
{commits}    end
endmodule
"""

_PORT = re.compile(r"VL_(IN|OUT)(?:8|16|64|W)?\(&(\w+),(\d+),0")


def _model_ports(header: Path) -> list[tuple[str, str, int]]:
    """(direction ``IN``/``OUT``, name, width) of a verilated model's ports, in order."""
    return [(d, n, int(msb) + 1) for d, n, msb in _PORT.findall(header.read_text())]


def _dpi_type(width: int) -> tuple[str, str]:
    """(SystemVerilog, C) type carrying a port of ``width`` bits (at most 64) through DPI."""
    if width > 64:
        raise ValueError(f"a core port of {width} bits is wider than a DPI longint")
    return ("bit", "unsigned char") if width == 1 else ("longint unsigned", "unsigned long long")


def glue_and_wrapper(name: str, ports: Sequence[tuple[str, str, int]]) -> tuple[str, str]:
    """(C++ glue, Verilog wrapper) of library ``name`` for its model's ``ports``."""
    data = [(d, n, w) for d, n, w in ports if n != "clk"]
    if any(w > 64 for _, _, w in data):
        raise ValueError(f"{name}: a port wider than 64 bits")
    c_params = ", ".join(f"{_dpi_type(w)[1]}{'' if d == 'IN' else '*'} {n}" for d, n, w in data)
    sets = "".join(f"    m->{n} = {n};\n" for d, n, _ in data if d == "IN")
    gets = "".join(f"    *{n} = m->{n};\n" for d, n, _ in data if d == "OUT")
    model = f"V{name}"
    glue = _GLUE.format(name=name, model=model, params=c_params, sets=sets, gets=gets)
    decl = [
        f"    input  wire {'' if w == 1 else f'[{w - 1}:0] '}{n}" for d, n, w in ports if d == "IN"
    ]
    decl += [
        f"    output reg  {'' if w == 1 else f'[{w - 1}:0] '}{n} = {w}'d0"
        for d, n, w in ports
        if d == "OUT"
    ]
    formals = ", ".join(
        f"{'input' if d == 'IN' else 'output'} {_dpi_type(w)[0]} {n}" for d, n, w in data
    )
    temps = "".join(f"    {_dpi_type(w)[0]} t_{n};\n" for d, n, w in data if d == "OUT")
    actuals = ", ".join(n if d == "IN" else f"t_{n}" for d, n, _ in data)
    commits = "".join(
        f"        {n} <= t_{n}{'' if w == 1 else f'[{w - 1}:0]'};\n"
        for d, n, w in data
        if d == "OUT"
    )
    wrapper = _WRAPPER.format(
        name=name,
        ports=",\n".join(decl),
        formals=formals,
        temps=temps,
        actuals=actuals,
        commits=commits,
    )
    return glue, wrapper


def build(lib: CoreLib, cache: Path | None = None) -> Built:
    """Build (or reuse from the cache) one core library; returns its wrapper and object."""
    root = (cache or cache_root()) / "verilator"
    out = root / f"corelib-{lib_key(lib)}"
    done = Built(out / f"{lib.name}.v", out / f"{lib.name}.o")
    if intact(done.sv) and intact(done.obj):
        return done
    tmp = out.with_name(f"{out.name}.tmp{os.getpid()}-{threading.get_ident()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        _compile(lib, tmp, root / f"corelib-pch-{_pch_key()}")
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        shutil.rmtree(out, ignore_errors=True)
        os.replace(tmp, out)
    except OSError:  # a concurrent build got there first
        shutil.rmtree(tmp, ignore_errors=True)
    return done


def _compile(lib: CoreLib, tmp: Path, pch: Path) -> None:
    """Verilate the core, write its glue and wrapper, compile model + glue into one object
    (with the precompiled Verilator header, :func:`_precompiled`); leave only ``<name>.v``
    and ``<name>.o`` (sealed) in ``tmp``."""
    run_tool(_verilate_argv(lib, tmp), 600, cwd=tmp)
    glue, wrapper = glue_and_wrapper(lib.name, _model_ports(tmp / f"V{lib.name}.h"))
    (tmp / f"{lib.name}_glue.cpp").write_text(glue)
    (tmp / f"{lib.name}.v").write_text(wrapper)
    units = [*sorted(p.name for p in tmp.glob(f"V{lib.name}*.cpp")), f"{lib.name}_glue.cpp"]
    (tmp / "unity.cpp").write_text("".join(f'#include "{u}"\n' for u in units))
    make = ["make", "-C", str(tmp), "-f", f"V{lib.name}.mk", "unity.o", f"OPT_FAST={LIB_OPT}"]
    if _precompiled(pch, tmp, f"V{lib.name}.mk"):
        make.append(f"USER_CPPFLAGS=-I{pch} -include {PCH}")
    run_tool(make, 1800)
    os.replace(tmp / "unity.o", tmp / f"{lib.name}.o")
    for p in tmp.iterdir():
        if p.name not in (f"{lib.name}.o", f"{lib.name}.v"):
            p.unlink()
    seal(tmp / f"{lib.name}.o")
    seal(tmp / f"{lib.name}.v")


#: the precompiled header of every library object: Verilator's runtime header, which is most
#: of a library's compile time (0.8 of 1.1 s CPU for a kf_fadd)
PCH = "kfl_pch.h"
_PCH_MAKE = "include {mk}\n%.h.gch: %.h\n\t$(CXX) $(CXXFLAGS) $(CPPFLAGS) $(OPT_FAST) -x c++-header -o $@ $<\n"


def _pch_key() -> str:
    h = hashlib.sha256(b"keracheck-verilator-corelib-pch-v1\0" + _toolchain().encode())
    return h.hexdigest()[:32] + LIB_OPT


def _precompiled(pch: Path, mdir: Path, mk: str) -> bool:
    """Make sure ``pch`` holds ``kfl_pch.h`` and its ``.gch``, compiled once per machine with
    the flags of the model's makefile ``mdir/mk`` (a library's flags are the same for every
    core); False when that fails (the library then compiles without it).  g++ itself checks a
    ``.gch`` against the compilation using it and ignores one that does not fit."""
    gch = pch / f"{PCH}.gch"
    if intact(gch):
        return True
    tmp = pch.with_name(f"{pch.name}.tmp{os.getpid()}-{threading.get_ident()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        (tmp / PCH).write_text('#include "verilated.h"\n')
        (mdir / "pch.mk").write_text(_PCH_MAKE.format(mk=mk))
        run_tool(
            ["make", "-C", str(mdir), "-f", "pch.mk", f"{tmp / PCH}.gch", f"OPT_FAST={LIB_OPT}"],
            600,
        )
        seal(tmp / f"{PCH}.gch")
        shutil.rmtree(pch, ignore_errors=True)
        os.replace(tmp, pch)
    except (OSError, BackendError):
        shutil.rmtree(tmp, ignore_errors=True)
    return intact(gch)


def ensure(libs: Sequence[CoreLib], cache: Path | None = None) -> list[Built]:
    """Build every library of ``libs`` that is not cached, side by side (one per CPU); the
    first alone, which precompiles the header the others use."""
    if not libs:
        return []
    first = build(libs[0], cache)
    with ThreadPoolExecutor(min(len(libs), os.cpu_count() or 1)) as pool:
        return [first, *pool.map(lambda lib: build(lib, cache), libs[1:])]


def sources(
    designs: Sequence[VerilogDesign], work: Path, cache: Path | None = None
) -> tuple[list[Path], list[Path]]:
    """(Verilog sources, objects) of the cores for a Verilator build of ``designs``: the RTL
    of every core that is not a library, and per library core its shim and flat copy (written
    into ``work``), the wrappers and the objects of the libraries (built if not cached)."""
    libs = libs_of(designs)
    built = ensure(libs, cache)
    by_module: dict[str, list[CoreLib]] = {}
    for lib in libs:
        by_module.setdefault(lib.module, []).append(lib)
    files = [p for p in rtl_sources() if p.stem not in by_module]
    for module, group in sorted(by_module.items()):
        (work / f"{module}__shim.v").write_text(shim(module, group))
        (work / f"{module}__flat.v").write_text(flat_copy(module))
        files += [work / f"{module}__shim.v", work / f"{module}__flat.v"]
    return files + [b.sv for b in built], [b.obj for b in built]
