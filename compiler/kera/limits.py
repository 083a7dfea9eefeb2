"""Resource budgets of the compiler and of everything that reads input.

A small hostile input must not become a large computation: a kilobyte of source whose helpers
each call the previous one twice expands to 2^21 copies, a 100,000-deep call chain or a 10 MB
literal used to take minutes or gigabytes, and a well-typed ``f32[16777216, 16777216]``
parameter made input generation allocate a petabyte.  Every such path checks one budget here
and fails with a diagnostic that names the limit and how to raise it.

Budgets (defaults in :class:`Limits`):

* ``expansion`` — expressions evaluated while checking one function, and nodes a function
  gains when its calls are inlined (``kera.ir.Function.inlined``; a callee counts once per
  distinct call, nested calls multiplied out): E0111.  The front end builds a callee once,
  but the ``inline`` pass and back ends that lower a call in place build it per call.
* ``call_depth`` — nested user-function calls being expanded at once: E0112.
* ``literal_chars`` — characters of one number literal: E0005.
* ``elements`` — elements of one value (a parameter, result or intermediate): E0215.
* ``function_elements`` — elements of all values of one function together: E0216.
* ``source_bytes`` / ``keg_bytes`` — size of a file read as Kera source or as ``.keg``.
* ``input_bytes`` — bytes of the generated or loaded inputs of one case (``keracheck``).

Raise one with ``KERA_LIMITS="expansion=5000000,elements=1073741824"`` in the environment or
``--limit NAME=VALUE`` on ``kerac`` and ``keracheck``.  The defaults are far above every bundled
program (every corpus case evaluates under 2,000 expressions) and far below what hurts a
2-core, 24 GiB machine.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable
from dataclasses import dataclass

ENV = "KERA_LIMITS"


@dataclass(frozen=True, slots=True)
class Limits:
    expansion: int = 200_000
    call_depth: int = 10_000
    literal_chars: int = 100_000
    elements: int = 1 << 28
    function_elements: int = 1 << 30
    source_bytes: int = 64 << 20
    keg_bytes: int = 512 << 20
    input_bytes: int = 1 << 30


class LimitError(ValueError):
    """A malformed ``NAME=VALUE`` limit setting."""


def _parse(items: Iterable[str], base: Limits) -> Limits:
    names = {f.name for f in dataclasses.fields(Limits)}
    changes: dict[str, int] = {}
    for item in items:
        item = item.strip()
        if not item:
            continue
        name, sep, value = item.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or name not in names:
            raise LimitError(
                f"bad limit '{item}': expected NAME=VALUE with NAME one of {', '.join(sorted(names))}"
            )
        try:
            number = int(value.strip().replace("_", ""), 0)
        except ValueError:
            raise LimitError(f"bad limit '{item}': the value must be an integer") from None
        if number < 1:
            raise LimitError(f"bad limit '{item}': the value must be at least 1")
        changes[name] = number
    return dataclasses.replace(base, **changes)


def _from_env() -> Limits:
    try:
        return _parse(os.environ.get(ENV, "").split(","), Limits())
    except LimitError:
        return Limits()  # reported by check_env() where a CLI can say so


_current = _from_env()


def current() -> Limits:
    return _current


def check_env() -> None:
    """Raise LimitError if ``$KERA_LIMITS`` is malformed (CLIs call this to report it)."""
    _parse(os.environ.get(ENV, "").split(","), Limits())


def configure(settings: Iterable[str]) -> Limits:
    """Apply ``NAME=VALUE`` settings on top of the current limits (a CLI's ``--limit``)."""
    global _current
    _current = _parse(settings, _current)
    changed = [
        f"{f.name}={getattr(_current, f.name)}"
        for f in dataclasses.fields(Limits)
        if getattr(_current, f.name) != getattr(Limits(), f.name)
    ]
    os.environ[ENV] = ",".join(changed)  # worker processes started later see the same limits
    return _current


def set_limits(limits: Limits) -> None:
    global _current
    _current = limits


def hint(name: str) -> str:
    return f"raise it with --limit {name}=N or {ENV}={name}=N"
