"""The C back end: Kera functions -> one self-contained C11 translation unit plus a header.

Four modules, one concern each (docs/c-backend.md is the user's guide):

* ``lower``: :data:`LOWER`, one row per op, the only place an op is lowered (helper bodies per
  kind of dtype for elementwise ops, a function for the structural ones, reshape an alias),
  with what each op does to lazy NaN canonicalisation (``loop`` and ``call`` regions the
  emitter lowers: a C ``for`` loop, the callee's code in place); :data:`SUPPORTED` is its keys.
* ``emit``: the translation unit: ISA levels (:data:`ISAS`, :data:`PINNED_FLAGS`), prelude,
  helper order, header, the per-function loop over ``LOWER``, :func:`emit` and :func:`write`.
* ``abi``: what a caller sees: element types (:data:`IO_TYPES`), entry-point names
  (:func:`c_ident`), prototypes, status codes, and the batch driver with its file formats.
* ``tiles``: the tile library, every tile helper of an ISA level in one C file that a build
  compiles once and links (``emit(..., shared=...)`` then declares the helpers instead of
  defining them); for keracheck's builds only, never the default output.

``from kera.backends import c`` then ``c.emit(...)``: the names below are re-exported.  Note that
``c.emit`` is the function; the module's other names come with
``from kera.backends.c.emit import ...``.
"""

from kera.backends.c.abi import E_FPENV, E_NOMEM, IO_TYPES, OK, c_ident
from kera.backends.c.emit import ISAS, PINNED_FLAGS, CSource, Isa, assemble, bodies, emit, write
from kera.backends.c.lower import LOWER, SUPPORTED, Alias, Helper, Nan, Region, Structural
from kera.ops import Op

#: ops of the contract this back end does not lower yet, with the reason (keracheck reports a
#: case using one as ``unsupported`` on this target, never as a pass)
UNSUPPORTED: dict[Op, str] = {}


__all__ = [
    "E_FPENV",
    "E_NOMEM",
    "IO_TYPES",
    "ISAS",
    "LOWER",
    "OK",
    "PINNED_FLAGS",
    "SUPPORTED",
    "UNSUPPORTED",
    "Alias",
    "CSource",
    "Helper",
    "Isa",
    "Nan",
    "Region",
    "Structural",
    "assemble",
    "bodies",
    "c_ident",
    "emit",
    "write",
]
