"""Native CPU targets through the C back end (``kera.backends.c``).

Target ids:

* ``cpu`` — the best ISA level this host has (``avx512`` > ``avx2`` > ``sse2`` on x86-64,
  ``neon`` on AArch64, else ``scalar``); ``cpu:scalar``, ``cpu:sse2``, ``cpu:avx2``,
  ``cpu:avx512`` (and ``cpu:neon`` on an AArch64 host) select one level and are unavailable, with
  the missing CPU features named, when the host lacks it.  Execution: the cases' functions are
  emitted into one translation unit (a large batch into one per CPU, built at once), built into
  a shared object (cached by content, see ``keracheck.runners.gcc``) and called through ctypes
  in this process — keracheck already runs back ends in a worker process, so a crash costs
  only that worker.  The tile helpers (``k_<op>_<type>_n``) are not compiled in every unit:
  each unit declares them and links the target's *tile library* (``kera.backends.c.tiles``:
  every tile helper of the ISA level, compiled once with the same flags and cached by content,
  see ``Gcc.build_object``); ``tiles=False`` builds self-contained units instead.
* ``cpu-aarch64`` (NEON lanes) and ``cpu-riscv64`` (scalar lanes; GCC 12 has no RVV code
  generation) — the same translation unit plus the batch driver of ``kera.backends.c``,
  cross-compiled statically and run once per batch under ``qemu-<arch>``: inputs go in one file,
  outputs come back in another.

Every target implements the keracheck back-end interface (API version 1), including
``run_many`` (one build and, for qemu, one process for all cases), ``artifacts`` and ``versions``.
Entry points are named by fingerprint (``kera_f<first 20 hex digits>``), so identical functions
in one batch are built once and different functions with one name never collide.
"""

from __future__ import annotations

import ctypes
import os
import platform
import tempfile
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from kera.backends import c
from kera.backends.c import abi, tiles
from kera.backends.c.emit import Body
from kera.interp import batch_size
from kera.ir import Function
from keracheck import probe
from keracheck.runners.gcc import Gcc, Kind
from keracheck.runners.qemu import Qemu
from keracheck.target import API_VERSION, BackendError, Inputs, Outputs

#: host ISA levels, best first
HOST_ISAS = ("avx512", "avx2", "neon", "sse2", "scalar")

#: /proc/cpuinfo flags each level needs (x86-64-v3 and -v4 as gcc defines them)
_X86_FLAGS = {
    "sse2": ("sse2",),
    "avx2": ("avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"),
    "avx512": ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"),
}
_ERRORS = {c.E_FPENV: "floating-point environment breaks the contract (FTZ/DAZ or rounding mode)"}
_ERRORS[c.E_NOMEM] = "out of memory for the tile arena"
_ERRORS[abi.E_BADCASE] = "the driver rejected the case"


@cache
def _cpu_flags() -> frozenset[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.partition(":")[2].split())
    return frozenset()


def host_arch() -> str:
    m = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(m, m)


def isa_problem(isa: str) -> str | None:
    """None when this host can run ``isa``, else why not."""
    arch = c.ISAS[isa].arch
    if arch == "any":
        return None
    if host_arch() != arch:
        return f"{isa} needs an {arch} host; this one is {host_arch()}"
    if arch != "x86_64":
        return None
    missing = [f for f in _X86_FLAGS[isa] if f not in _cpu_flags()]
    if missing:
        return f"host CPU lacks {isa} (no {' '.join(missing)} in /proc/cpuinfo)"
    return None


def best_isa() -> str:
    for isa in HOST_ISAS:
        if isa_problem(isa) is None:
            return isa
    return "scalar"


#: a batch is split into parallel builds only when each gets at least this many functions
#: (a gcc process costs ~40 ms before it compiles anything)
MIN_PER_BUILD = 6
#: no entry points emitted ahead: a build emits its translation unit itself
NONE_MADE: Mapping[str, Body] = {}


def balance(weights: Mapping[str, float], k: int) -> list[list[str]]:
    """The keys of ``weights`` in ``k`` parts of about equal total weight (longest first, each
    to the lightest part); each part keeps the keys' order, so a batch splits the same way
    every time (its artifacts are cached by content)."""
    loads = [0.0] * k
    where: dict[str, int] = {}
    for key in sorted(weights, key=lambda x: (-weights[x], x)):
        j = loads.index(min(loads))
        where[key] = j
        loads[j] += weights[key]
    return [p for j in range(k) if (p := [x for x in weights if where[x] == j])]


def build_cost(text: str) -> float:
    """gcc's time on one function's C text, up to a constant: about proportional to the text
    since elementwise nodes call shared, non-inlined tile helpers and element loops stay
    rolled (docs/c-backend.md, "Compile time"; measured at -O2 on 50 fuzzed functions, a
    least-squares fit of time to length explains 89% of the variance, to its square 79%; while
    gcc unrolled every node's loop it grew about as the square: 11k characters ~0.16 s, 43k
    ~3 s), so a batch is split by this, not by function count."""
    return float(len(text))


def build_jobs() -> int:
    """How many gcc processes one batch may run at once: the CPUs this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def _symbols(cases: Sequence[tuple[Function, Inputs]]) -> dict[str, Function]:
    """Unique functions of a batch keyed by the suffix of their entry point."""
    out: dict[str, Function] = {}
    for fn, _ in cases:
        out.setdefault(f"f{fn.fingerprint[:20]}", fn)
    return out


def _sym(fn: Function) -> str:
    return f"kera_f{fn.fingerprint[:20]}"


def _arrays(fn: Function, inputs: Inputs) -> tuple[int, list[np.ndarray[Any, Any]]]:
    """Validated, contiguous inputs in parameter order, and the batch size."""
    n = batch_size(fn, inputs)
    arrs = [np.ascontiguousarray(inputs[str(p.attr("name"))], dtype=p.dtype.np) for p in fn.params]
    return n, arrs


_Built = tuple[Path, int]  # an artifact and the index of an entry point in its driver table
_Tiles = tuple[Path, Mapping[str, str]]  # a tile library's object and the helpers it defines


class _CBackend:
    """What the host and qemu targets share: batching, building with per-function fallback."""

    name: str
    api_version = API_VERSION
    isa: str
    gcc: Gcc
    timeout: float
    #: what the units are linked into ("shared": a shared object, "static": an executable)
    kind: Kind
    #: units declare the tile helpers and link the tile library (False: self-contained units,
    #: the helpers compiled in each, as ``c.emit`` writes them); the bits are the same
    tiles: bool = True

    def supported_ops(self) -> frozenset[str]:
        return c.SUPPORTED

    def run(self, fn: Function, inputs: Inputs) -> Outputs:
        (out,) = self.run_many([(fn, inputs)])
        if isinstance(out, Exception):
            raise out
        return out

    def run_many(self, cases: Sequence[tuple[Function, Inputs]]) -> list[Outputs | Exception]:
        if not cases:
            return []
        reason = self.available()
        if reason is not None:
            return [BackendError(f"{self.name} is unavailable: {reason}") for _ in cases]
        groups = self._build_parallel(_symbols(cases))
        return self._execute(cases, groups)

    def _build_parallel(self, fns: Mapping[str, Function]) -> dict[str, _Built | Exception]:
        """Build a large batch as up to :func:`build_jobs` artifacts at once (gcc is one
        process per translation unit and dominates a cold batch); a small one as one."""
        try:
            self._tile_library()  # once, before the parts (a failure is every function's)
        except BackendError as e:
            return {f"kera_{x}": e for x in fns}
        k = min(build_jobs(), len(fns) // MIN_PER_BUILD)
        if k <= 1:
            return self._build_groups(fns)
        # each function emitted once: the parts are sized by their text (fuzzed functions'
        # build times differ by 20x and more) and assembled from it
        made = c.bodies(fns, self.isa)
        parts = balance({x: build_cost(made[f"kera_{x}"][0]) for x in fns}, k)
        with ThreadPoolExecutor(max_workers=len(parts)) as pool:
            built = list(
                pool.map(lambda p: self._build_groups({x: fns[x] for x in p}, made), parts)
            )
        return {sym: b for part in built for sym, b in part.items()}

    def _source(
        self,
        fns: Mapping[str, Function],
        made: Mapping[str, Body],
        shared: Mapping[str, str] | None = None,
    ) -> c.CSource:
        """The translation unit of fns: assembled from the batch's emitted entry points
        ``made`` when it has them all (the same text as ``c.emit``), else emitted; ``shared``:
        the tile helpers it declares instead of defining (see :meth:`_tile_library`)."""
        if made and all(f"kera_{x}" in made for x in fns):
            return c.assemble(fns, made, isa=self.isa, shared=shared)
        return c.emit(fns, isa=self.isa, shared=shared)

    def flags(self) -> list[str]:
        """gcc's flags for this target's units (and its tile library)."""
        return [*c.PINNED_FLAGS, *c.ISAS[self.isa].flags]

    def _tile_library(self) -> _Tiles | None:
        """The object of this target's tile library (built once per compiler, ISA level, flags
        and kind, then cached) and the helpers it defines; None when ``tiles`` is off.  Raises
        BackendError naming the library when gcc fails on it."""
        if not self.tiles:
            return None
        lib = tiles.library(self.isa)
        try:
            obj = self.gcc.build_object(
                f"{tiles.NAME}.c", lib.c, self.flags(), self.kind, self.timeout
            )
        except BackendError as e:
            raise BackendError(
                f"{self.name}: the tile library (kera.backends.c.tiles, isa {self.isa}) "
                f"failed to build: {e}"
            ) from None
        return obj, lib.helpers

    def _unit(
        self, fns: Mapping[str, Function], made: Mapping[str, Body]
    ) -> tuple[c.CSource, list[Path]]:
        """The translation unit of fns and the objects to link it with."""
        lib = self._tile_library()
        if lib is None:
            return self._source(fns, made), []
        return self._source(fns, made, lib[1]), [lib[0]]

    def available(self) -> str | None:
        raise NotImplementedError

    #: what to install when the probe fails (the compiler, its libc headers, the emulator)
    fix: str

    def _probe(self, identity: Sequence[str]) -> str | None:
        """Build (and run) the probe function once per machine and toolchain; see
        :mod:`keracheck.probe`."""

        def attempt() -> None:
            fn, inputs = probe.probe_case()
            groups = self._build_groups(_symbols([(fn, inputs)]))
            (res,) = self._execute([(fn, inputs)], groups)
            if isinstance(res, Exception):
                raise res

        what = f"{self.gcc.exe} cannot build and run a test program"
        flags = " ".join([*c.PINNED_FLAGS, *c.ISAS[self.isa].flags])
        return probe.proven(self.name, [*identity, self.isa, flags], attempt, what, self.fix)

    def build(self, fns: Sequence[Function]) -> Path:
        """One artifact holding every function of ``fns`` (entry i is the i-th distinct one);
        raises BackendError when gcc fails."""
        return self._build(_symbols([(fn, {}) for fn in fns]))

    def _build(self, fns: Mapping[str, Function], made: Mapping[str, Body] = NONE_MADE) -> Path:
        """One artifact of ``fns``; ``made``: entry points already emitted (see _source)."""
        raise NotImplementedError

    def _execute(
        self, cases: Sequence[tuple[Function, Inputs]], groups: Mapping[str, _Built | Exception]
    ) -> list[Outputs | Exception]:
        raise NotImplementedError

    def _build_groups(
        self, fns: Mapping[str, Function], made: Mapping[str, Body] = NONE_MADE
    ) -> dict[str, _Built | Exception]:
        """Entry symbol -> (artifact, index of the entry in it): one artifact for the batch; if
        gcc fails on it, the batch is bisected, so a function that fails alone gets its error
        and the others still share a few artifacts (O(failures x log n) extra builds)."""
        try:
            art = self._build(fns, made)
            return {f"kera_{k}": (art, i) for i, k in enumerate(fns)}
        except BackendError as e:
            if len(fns) == 1:
                return {f"kera_{k}": e for k in fns}
        keys = list(fns)
        half = len(keys) // 2
        out = self._build_groups({k: fns[k] for k in keys[:half]}, made)
        return out | self._build_groups({k: fns[k] for k in keys[half:]}, made)

    def artifacts(self, fn: Function) -> dict[str, str]:
        return c.emit([fn], isa=self.isa, name=c.c_ident(fn.name)).files()


class CpuTarget(_CBackend):
    """This host's CPU at one ISA level (None: the best it has)."""

    def __init__(self, isa: str | None = None, timeout: float = 600, tiles: bool = True) -> None:
        if isa is not None and isa not in c.ISAS:
            raise ValueError(f"unknown ISA level '{isa}'; choose one of {', '.join(c.ISAS)}")
        self.name = "cpu" if isa is None else f"cpu:{isa}"
        self.isa = isa or best_isa()
        self.gcc = Gcc("gcc", "gcc libc6-dev")
        self.fix = "apt-get install gcc libc6-dev"
        self.timeout = timeout
        self.kind = "shared"
        self.tiles = tiles

    def available(self) -> str | None:
        return (
            self.gcc.available()
            or isa_problem(self.isa)
            or self._probe([self.gcc.path(), self.gcc.version()])
        )

    def versions(self) -> dict[str, str]:
        return {"gcc": self.gcc.version(), "isa": self.isa, "lanes": str(c.ISAS[self.isa].lanes)}

    def _build(self, fns: Mapping[str, Function], made: Mapping[str, Body] = NONE_MADE) -> Path:
        src, link = self._unit(fns, made)
        return self.gcc.build(src.files(), self.flags(), self.kind, self.timeout, link)

    def _execute(
        self, cases: Sequence[tuple[Function, Inputs]], groups: Mapping[str, _Built | Exception]
    ) -> list[Outputs | Exception]:
        out: list[Outputs | Exception] = []
        for fn, inputs in cases:
            built = groups[_sym(fn)]
            try:
                if isinstance(built, Exception):
                    raise built
                out.append(_call(_library(str(built[0])), fn, inputs))
            except Exception as e:
                out.append(e)
        return out

    def entry(self, fn: Function) -> Any:
        """The built entry point of ``fn`` as a ctypes function
        ``(size_t n, void *param..., void *result...) -> int`` (see kera.backends.c)."""
        f = getattr(_library(str(self.build([fn]))), _sym(fn))
        f.restype = ctypes.c_int
        f.argtypes = [ctypes.c_size_t] + [ctypes.c_void_p] * (len(fn.params) + len(fn.results))
        return f


@cache
def _library(path: str) -> ctypes.CDLL:
    return ctypes.CDLL(path)


def _call(lib: ctypes.CDLL, fn: Function, inputs: Inputs) -> Outputs:
    n, arrs = _arrays(fn, inputs)
    outs = [np.empty((n, *r.shape), dtype=r.dtype.np) for r in fn.results]
    entry = getattr(lib, _sym(fn))
    entry.restype = ctypes.c_int
    entry.argtypes = [ctypes.c_size_t] + [ctypes.c_void_p] * (len(arrs) + len(outs))
    status = entry(n, *(a.ctypes.data for a in arrs), *(o.ctypes.data for o in outs))
    if status != c.OK:
        raise BackendError(f"{_sym(fn)} returned {status}: {_ERRORS.get(status, 'unknown')}")
    return list(outs)


_CROSS = {
    # arch: (gcc driver, Debian packages (compiler, libc headers), ISA level, extra flags)
    "aarch64": (
        "aarch64-linux-gnu-gcc",
        "gcc-aarch64-linux-gnu libc6-dev-arm64-cross",
        "neon",
        (),
    ),
    "riscv64": (
        "riscv64-linux-gnu-gcc",
        "gcc-riscv64-linux-gnu libc6-dev-riscv64-cross",
        "scalar",
        ("-march=rv64gc", "-mabi=lp64d"),
    ),
}


class QemuTarget(_CBackend):
    """A foreign CPU: a static cross build run under qemu-user, one process per batch."""

    def __init__(self, arch: str, timeout: float = 600, tiles: bool = True) -> None:
        if arch not in _CROSS:
            raise ValueError(f"unknown architecture '{arch}'; choose one of {', '.join(_CROSS)}")
        exe, apt, isa, extra = _CROSS[arch]
        self.arch = arch
        self.name = f"cpu-{arch}"
        self.gcc = Gcc(exe, apt)
        self.qemu = Qemu(arch)
        self.fix = f"apt-get install {apt} qemu-user"
        self.isa = isa
        self.extra = extra
        self.timeout = timeout
        self.kind = "static"
        self.tiles = tiles

    def flags(self) -> list[str]:
        return [*super().flags(), *self.extra]

    def available(self) -> str | None:
        return (
            self.gcc.available()
            or self.qemu.available()
            or self._probe(
                [self.gcc.path(), self.gcc.version(), self.qemu.version(), " ".join(self.extra)]
            )
        )

    def versions(self) -> dict[str, str]:
        return {
            "gcc": self.gcc.version(),
            "qemu": self.qemu.version(),
            "isa": self.isa,
            "lanes": str(c.ISAS[self.isa].lanes),
        }

    def artifacts(self, fn: Function) -> dict[str, str]:
        src = c.emit([fn], isa=self.isa, name=c.c_ident(fn.name))
        return src.files() | {"main.c": abi.emit_driver(src, {_sym(fn): fn})}

    def _build(self, fns: Mapping[str, Function], made: Mapping[str, Body] = NONE_MADE) -> Path:
        src, link = self._unit(fns, made)
        driver = abi.emit_driver(src, {f"kera_{k}": fn for k, fn in fns.items()})
        files = src.files() | {"main.c": driver}
        return self.gcc.build(files, self.flags(), self.kind, self.timeout, link)

    def _execute(
        self, cases: Sequence[tuple[Function, Inputs]], groups: Mapping[str, _Built | Exception]
    ) -> list[Outputs | Exception]:
        out: list[Outputs | Exception] = [BackendError("not run")] * len(cases)
        by_binary: dict[Path, list[tuple[int, int]]] = {}  # binary -> (case, entry index)
        for i, (fn, inputs) in enumerate(cases):
            built = groups[_sym(fn)]
            try:
                if isinstance(built, Exception):
                    raise built
                _arrays(fn, inputs)
            except Exception as e:
                out[i] = e
                continue
            by_binary.setdefault(built[0], []).append((i, built[1]))
        for binary, idx in by_binary.items():
            batch = [(entry, *cases[i]) for i, entry in idx]
            for (i, _), res in zip(idx, self.run_binary(binary, batch), strict=True):
                out[i] = res
        return out

    def run_binary(
        self, binary: Path, cases: Sequence[tuple[int, Function, Inputs]]
    ) -> list[Outputs | Exception]:
        """One emulator process for (entry index, function, inputs) cases of a built binary."""
        rows = [(entry, fn, _named_arrays(fn, inp)) for entry, fn, inp in cases]
        with tempfile.TemporaryDirectory(prefix="kera-qemu-") as tmp:
            inp, outp = Path(tmp) / "in.bin", Path(tmp) / "out.bin"
            inp.write_bytes(abi.input_file(rows))
            try:
                self.qemu.run(binary, [str(inp), str(outp)], self.timeout)
                data = outp.read_bytes()
            except (BackendError, OSError) as e:
                return [BackendError(str(e)) for _ in cases]
        parsed = abi.read_output_file(data, [(fn, batch_size(fn, inp)) for _, fn, inp in cases])
        return [
            list(r) if not isinstance(r, int) else BackendError(f"status {r}: {_ERRORS.get(r)}")
            for r in parsed
        ]


def _named_arrays(fn: Function, inputs: Inputs) -> dict[str, np.ndarray[Any, Any]]:
    _, arrs = _arrays(fn, inputs)
    return {str(p.attr("name")): a for p, a in zip(fn.params, arrs, strict=True)}


# zero-argument factories for the target registry (keracheck.targets.BUILTIN)
def cpu() -> CpuTarget:
    return CpuTarget()


def cpu_scalar() -> CpuTarget:
    return CpuTarget("scalar")


def cpu_sse2() -> CpuTarget:
    return CpuTarget("sse2")


def cpu_avx2() -> CpuTarget:
    return CpuTarget("avx2")


def cpu_avx512() -> CpuTarget:
    return CpuTarget("avx512")


def cpu_aarch64() -> QemuTarget:
    return QemuTarget("aarch64")


def cpu_riscv64() -> QemuTarget:
    return QemuTarget("riscv64")


#: registry entries (id -> "module:attr") for keracheck.targets.BUILTIN
REGISTRY = {
    "cpu": "keracheck.targets.cpu:cpu",
    "cpu:scalar": "keracheck.targets.cpu:cpu_scalar",
    "cpu:sse2": "keracheck.targets.cpu:cpu_sse2",
    "cpu:avx2": "keracheck.targets.cpu:cpu_avx2",
    "cpu:avx512": "keracheck.targets.cpu:cpu_avx512",
    "cpu-aarch64": "keracheck.targets.cpu:cpu_aarch64",
    "cpu-riscv64": "keracheck.targets.cpu:cpu_riscv64",
}
