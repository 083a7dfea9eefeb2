"""Errors raised by the PTX emulator.

Every error names the PTX source line it concerns (1-based, as in the text given to
:func:`keracheck.ptx_emu.parse`) and quotes it, so a failure in generated code points straight
at the offending instruction.  Three kinds:

* :class:`PtxSyntaxError` — the text is not PTX we can read (malformed statement).
* :class:`PtxUnsupportedError` — well-formed PTX outside the emulator's subset (``.approx``,
  ``.ftz``, atomics, float ops without a rounding modifier ...).  The emulator refuses instead
  of guessing.
* :class:`PtxExecutionError` — a fault or a behaviour the PTX ISA leaves unspecified happened in
  an active thread at run time (integer division by zero, out-of-bounds or misaligned access,
  racing stores, a register read before it was written, the step limit).
"""

from __future__ import annotations


class PtxError(Exception):
    """Base class: a message about one PTX line."""

    def __init__(self, message: str, line: int = 0, source: str = "") -> None:
        self.message = message
        self.line = line
        self.source = source
        where = f"line {line}: " if line else ""
        quoted = f"\n    {source.strip()}" if source.strip() else ""
        super().__init__(f"{where}{message}{quoted}")


class PtxSyntaxError(PtxError):
    """The text is not well-formed PTX (of the shape this emulator reads)."""


class PtxUnsupportedError(PtxError):
    """Valid PTX outside the emulator's subset: refused rather than guessed."""


class PtxExecutionError(PtxError):
    """A fault, or behaviour the ISA leaves unspecified, in an active thread at run time."""
