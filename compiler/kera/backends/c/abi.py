"""The C back end's host ABI: what a caller of the emitted C sees, and the batch driver.

Entry points (one per exported function; the header and docs/c-backend.md state the same)::

    int kera_<name>(size_t n, const P0 *p_<param0>, ..., R0 *out0, R1 *out1, ...);

``<name>`` is :func:`c_ident` of the function's name (or of the key when the functions come as a
mapping).  Every array holds ``n`` batch rows in C order: row ``r`` of a parameter of shape
``(d0, d1..)`` starts at element ``r * d0 * d1 * ...``.  Element types are :data:`IO_TYPES`
(bool is ``uint8_t`` 0/1; any non-zero input byte reads as 1).  Arrays need their element
type's natural alignment and must not overlap the outputs.  The status is :data:`OK`;
:data:`E_FPENV` if the floating-point environment would break the contract (x86 MXCSR FTZ/DAZ
set, AArch64 FPCR FZ/AH set, or a rounding mode other than to-nearest-even), before touching any
output; :data:`E_NOMEM` if a large-tile arena could not be allocated.

The batch driver.  A target run as a process (``cpu-aarch64``, ``cpu-riscv64`` under
qemu-user) gets one static binary per batch: the emitted functions plus the ``main`` that
:func:`emit_driver` writes.  keracheck writes the cases to one input file (:func:`input_file`),
runs the binary once, and reads every case's results or status back (:func:`read_output_file`).
The formats are below; both sides are here so they cannot drift.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from math import prod
from typing import TYPE_CHECKING

import numpy as np

from kera.dtypes import DType
from kera.ir import Function, Node

if TYPE_CHECKING:
    from kera.backends.c.emit import CSource

#: the entry points' status codes (``KERA_OK``, ``KERA_E_FPENV``, ``KERA_E_NOMEM`` in the header)
OK, E_FPENV, E_NOMEM = 0, 1, 2

#: element type of each dtype in the public arrays (and in the batch driver's casts)
IO_TYPES = {
    DType.F32: "float",
    DType.F64: "double",
    DType.I32: "int32_t",
    DType.I64: "int64_t",
    DType.U32: "uint32_t",
    DType.U64: "uint64_t",
    DType.BOOL: "uint8_t",
}

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def c_ident(name: str) -> str:
    """``name`` as a C identifier fragment (invalid characters become ``_``)."""
    s = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return s if _IDENT.match(s) else f"_{s}"


def entry_points(functions: Iterable[Function] | Mapping[str, Function]) -> dict[str, Function]:
    """Entry-point symbol -> function: ``kera_<name>``, or ``kera_<key>`` for a mapping.  Two
    functions that map to one symbol are an error, never a silent overwrite."""
    items = (
        list(functions.items())
        if isinstance(functions, Mapping)
        else [(f.name, f) for f in functions]
    )
    out: dict[str, Function] = {}
    for name, fn in items:
        sym = f"kera_{c_ident(name)}"
        if sym in out:
            raise ValueError(f"two functions map to the C symbol {sym}")
        out[sym] = fn
    return out


def param_name(p: Node) -> str:
    """A parameter node's name (its C argument is ``p_<c_ident(name)>``)."""
    name = p.attr("name")
    assert isinstance(name, str)
    return name


def signature(sym: str, fn: Function) -> str:
    """The C prototype of ``fn``'s entry point, without the ``;``."""
    args = ["size_t n"]
    for p in fn.params:
        args.append(f"const {IO_TYPES[p.dtype]} *p_{c_ident(param_name(p))}")
    for i, r in enumerate(fn.results):
        args.append(f"{IO_TYPES[r.dtype]} *out{i}")
    return f"int {sym}({', '.join(args)})"


# ---------------------------------------------------------------------------- the batch driver

# input file (little-endian), every array at a 64-byte aligned file offset:
#   "KERAIN01"  u32 n_cases  u32 0
#   per case: header at a 64-aligned offset: u32 fn_index, u32 0, u64 n_rows;
#             then each parameter array (n_rows * row bytes), each 64-aligned
# output file, same alignment rule:
#   "KERAOUT1"  u32 n_cases  u32 0
#   per case: header (64-aligned): i32 status (0 ok, 1 fpenv, 2 nomem, 3 bad case), u32 0;
#             then each result array when the status is 0
DRIVER_ALIGN = 64
IN_MAGIC = b"KERAIN01"
OUT_MAGIC = b"KERAOUT1"
E_BADCASE = 3


def row_bytes(node: Node) -> int:
    return prod(node.shape) * node.dtype.nbytes


def emit_driver(source: CSource, functions: Mapping[str, Function]) -> str:
    """``main(argc, argv)``: ``prog IN OUT`` runs every case of IN; entry i is the i-th symbol of
    ``source`` (``functions`` maps those symbols to their functions)."""
    calls, table = [], []
    for i, (sym, fn) in enumerate(functions.items()):
        args = ["n"]
        args += [f"(const {IO_TYPES[p.dtype]} *)in[{j}]" for j, p in enumerate(fn.params)]
        args += [f"({IO_TYPES[r.dtype]} *)out[{j}]" for j, r in enumerate(fn.results)]
        calls.append(
            f"static int k_call{i}(size_t n, const unsigned char *const *in, "
            f"unsigned char *const *out)\n{{\n    (void)in;\n    return {sym}({', '.join(args)});\n}}"
        )
        ps = ", ".join(str(row_bytes(p)) for p in fn.params) or "0"
        rs = ", ".join(str(row_bytes(r)) for r in fn.results)
        table.append(
            f"    {{k_call{i}, {len(fn.params)}, {len(fn.results)}, "
            f"(const size_t[]){{{ps}}}, (const size_t[]){{{rs}}}}},"
        )
    return _DRIVER.format(
        header=f"{source.name}.h",
        calls="\n\n".join(calls),
        table="\n".join(table),
        nfn=len(functions),
    )


# The first line names the module the driver came from before the C back end became a package;
# it is kept as it was so that the emitted driver (and the build cache keyed on it) is unchanged.
_DRIVER = """\
/* Batch driver generated by kera.backends.c_driver: prog IN OUT (formats in that module). */
#include "{header}"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

{calls}

struct k_fn {{
    int (*call)(size_t, const unsigned char *const *, unsigned char *const *);
    unsigned np, nr;
    const size_t *prow, *rrow;
}};

static const struct k_fn k_fns[{nfn}] = {{
{table}
}};

static size_t k_up(size_t x) {{ return (x + 63) / 64 * 64; }}

static int k_fail(const char *what) {{ fprintf(stderr, "kera driver: %s\\n", what); return 2; }}

int main(int argc, char **argv)
{{
    if (argc != 3)
        return k_fail("usage: prog IN OUT");
    FILE *f = fopen(argv[1], "rb");
    if (!f)
        return k_fail("cannot open the input file");
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (size < 16)
        return k_fail("input file too short");
    unsigned char *in = aligned_alloc(64, k_up((size_t)size));
    if (!in || fread(in, 1, (size_t)size, f) != (size_t)size)
        return k_fail("cannot read the input file");
    fclose(f);
    uint32_t ncases;
    memcpy(&ncases, in + 8, 4);
    if (memcmp(in, "KERAIN01", 8) != 0)
        return k_fail("bad input magic");
    /* first pass: the output size */
    size_t ip = 64, op = 64;
    for (uint32_t c = 0; c < ncases; c++) {{
        uint32_t fi;
        uint64_t rows;
        if (ip + 16 > (size_t)size)
            return k_fail("truncated case header");
        memcpy(&fi, in + ip, 4);
        memcpy(&rows, in + ip + 8, 8);
        if (fi >= {nfn})
            return k_fail("bad function index");
        ip += 64;
        op += 64;
        for (unsigned j = 0; j < k_fns[fi].np; j++)
            ip += k_up(rows * k_fns[fi].prow[j]);
        for (unsigned j = 0; j < k_fns[fi].nr; j++)
            op += k_up(rows * k_fns[fi].rrow[j]);
        if (ip > (size_t)size)
            return k_fail("truncated case data");
    }}
    unsigned char *out = aligned_alloc(64, op);
    if (!out)
        return k_fail("out of memory");
    memset(out, 0, op);
    memcpy(out, "KERAOUT1", 8);
    memcpy(out + 8, &ncases, 4);
    ip = 64;
    op = 64;
    for (uint32_t c = 0; c < ncases; c++) {{
        uint32_t fi;
        uint64_t rows;
        memcpy(&fi, in + ip, 4);
        memcpy(&rows, in + ip + 8, 8);
        const struct k_fn *fn = &k_fns[fi];
        const unsigned char *ins[64];
        unsigned char *outs[64];
        size_t hdr = op;
        ip += 64;
        op += 64;
        for (unsigned j = 0; j < fn->np && j < 64; j++) {{
            ins[j] = in + ip;
            ip += k_up(rows * fn->prow[j]);
        }}
        for (unsigned j = 0; j < fn->nr && j < 64; j++) {{
            outs[j] = out + op;
            op += k_up(rows * fn->rrow[j]);
        }}
        int32_t status = fn->np > 64 || fn->nr > 64 ? 3 : fn->call((size_t)rows, ins, outs);
        memcpy(out + hdr, &status, 4);
    }}
    f = fopen(argv[2], "wb");
    if (!f || fwrite(out, 1, op, f) != op || fclose(f) != 0)
        return k_fail("cannot write the output file");
    free(in);
    free(out);
    return 0;
}}
"""


def input_file(cases: Sequence[tuple[int, Function, Mapping[str, np.ndarray]]]) -> bytes:
    """The driver's input file for (function index, function, inputs) cases."""
    buf = bytearray(IN_MAGIC + len(cases).to_bytes(4, "little") + bytes(4))
    for index, fn, inputs in cases:
        rows = _rows(fn, inputs)
        _pad(buf)
        buf += index.to_bytes(4, "little") + bytes(4) + rows.to_bytes(8, "little")
        for p in fn.params:
            _pad(buf)
            arr = np.ascontiguousarray(inputs[str(p.attr("name"))], dtype=p.dtype.np)
            buf += arr.tobytes()
    _pad(buf)
    return bytes(buf)


def _rows(fn: Function, inputs: Mapping[str, np.ndarray]) -> int:
    if not fn.params:
        return 1
    return int(np.asarray(inputs[str(fn.params[0].attr("name"))]).shape[0])


def _pad(buf: bytearray) -> None:
    buf += bytes(-len(buf) % DRIVER_ALIGN)


class DriverOutputError(ValueError):
    """The driver's output file does not match the cases it was given."""


def read_output_file(
    data: bytes, cases: Sequence[tuple[Function, int]]
) -> list[list[np.ndarray] | int]:
    """Per case (function, rows): its result arrays, or the nonzero status the entry returned."""
    if data[:8] != OUT_MAGIC or int.from_bytes(data[8:12], "little") != len(cases):
        raise DriverOutputError("bad output header")
    pos = DRIVER_ALIGN
    results: list[list[np.ndarray] | int] = []
    for fn, rows in cases:
        if pos + 8 > len(data):
            raise DriverOutputError("output file truncated")
        status = int.from_bytes(data[pos : pos + 4], "little", signed=True)
        pos += DRIVER_ALIGN
        arrays = []
        for r in fn.results:
            nbytes = rows * row_bytes(r)
            if pos + nbytes > len(data):
                raise DriverOutputError("output file truncated")
            arr = np.frombuffer(data, dtype=r.dtype.np, count=rows * prod(r.shape), offset=pos)
            arrays.append(arr.reshape((rows, *r.shape)).copy())
            pos += -(-nbytes // DRIVER_ALIGN) * DRIVER_ALIGN
        results.append(arrays if status == 0 else status)
    return results
