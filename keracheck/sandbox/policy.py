"""What each kind of sandboxed process may use: resource limits and writable places.

Two kinds of worker run untrusted code (``docs/security.md``):

* ``builtin`` — keracheck's own targets: they build generated code (gcc, Verilator, Icarus)
  and run it (a shared object loaded into the worker, a static binary under qemu, a module in
  wasmtime or Node, PTX in the emulator, a simulation).  They may write the build caches
  (``$KERACHECK_CACHE/{c,verilator,cocotb}``), never the result cache or its key.
* ``plugin`` — a third-party back end (``--backend-plugin``, an installed entry point): its
  host (``available()`` ...) and its workers.  It may write only a cache of its own,
  ``$KERACHECK_CACHE/plugins/<digest of its spec>``, which it sees as ``$KERACHECK_CACHE``.

:data:`LIMITS` gives each kind its rlimits; :func:`limits_for` adjusts them per target (the
WebAssembly engines reserve address space far beyond what they use: wasmtime 6 GiB and V8
10 GiB of guard regions per linear memory, plus V8's own cages).  The process-count limit is
enforced three ways, whichever the machine has (see :mod:`keracheck.sandbox.launch`): a pids
cgroup, ``RLIMIT_NPROC`` (ignored by the kernel for uid 0), and the batch server's watch of the
sandbox's own process table, which stops a batch past ``processes`` and names it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

GIB = 1 << 30


@dataclass(frozen=True)
class Limits:
    """Per batch process.  ``address_space`` None: unlimited."""

    address_space: int | None
    file_size: int  # bytes of one file written (RLIMIT_FSIZE)
    processes: int  # processes of the sandbox a batch may have at once (server watch)
    tasks: int  # threads and processes (RLIMIT_NPROC, pids.max): the hard backstop
    cpu_per_second: float  # RLIMIT_CPU = batch time limit x this + 5 s (threads share it)


#: worker kind -> limits (docs/security.md, "Resource limits")
LIMITS: dict[str, Limits] = {
    # gcc/qemu/simulators/Node run under the worker: processes and threads to spare
    "builtin": Limits(
        address_space=32 * GIB,
        file_size=8 * GIB,
        processes=256,
        tasks=4096,
        cpu_per_second=16.0,
    ),
    # a back end under development runs Python and maybe its own toolchain
    "plugin": Limits(
        address_space=16 * GIB,
        file_size=2 * GIB,
        processes=64,
        tasks=256,
        cpu_per_second=16.0,
    ),
}

#: built-in targets whose engines reserve (not use) address space, by spec: no address-space
#: limit for them (a GPU driver maps the device's memory too)
RESERVES_ADDRESS_SPACE = frozenset(
    {
        "keracheck.targets.wasm:WasmBackend",
        "keracheck.targets.wasm:WasmSimdBackend",
        "keracheck.targets.wasm:WasmNodeBackend",
        "keracheck.targets.ptx:PtxGpuBackend",
    }
)

#: verdicts after which a server retires: keracheck then stops the whole sandbox, which
#: kills a fork bomb or a hung process tree at once (a sweep from inside can be starved)
RETIRE = frozenset({"time-limit", "process-count"})

#: the build caches a builtin worker writes, under $KERACHECK_CACHE
BUILD_CACHES = ("c", "verilator", "cocotb")


def limits_for(kind: str, spec: str | None = None) -> Limits:
    """The limits of a ``kind`` worker running the target ``spec`` (None: any)."""
    base = LIMITS[kind]
    if kind == "builtin" and spec in RESERVES_ADDRESS_SPACE:
        return replace(base, address_space=None)
    return base


def cpu_seconds(limits: Limits, wall_limit: float) -> int:
    """RLIMIT_CPU of a batch given its wall-clock limit: a backstop behind the wall clock,
    which the server enforces; threads of one process add up, hence the factor."""
    return int(wall_limit * limits.cpu_per_second) + 5
