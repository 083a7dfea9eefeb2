"""Hypothesis fuzzing of the .keg loader: random bytes and mutated valid files.

The only acceptable outcomes are a KegError (with a section and an offset inside the file) or a
graph whose canonical encoding is exactly the input.
"""

from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent.parent / "unit"))
from test_keg import sample_graph

from kera.keg import MAGIC, KegError, dumps, loads

VALID = dumps(sample_graph())


def check(data: bytes) -> None:
    try:
        g = loads(data)
    except KegError as e:
        assert 0 <= e.offset <= len(data)
        assert e.section in ("header", "strings", "types", "attrs", "nodes", "regions", "exports")
    else:
        assert dumps(g) == data


@settings(max_examples=500)
@given(st.binary(max_size=400))
def test_random_bytes(data: bytes) -> None:
    check(data)
    check(MAGIC + b"\x01\x00\x06\x00" + data)


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    data = bytearray(VALID)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "set", "insert", "delete", "u32"]))
        i = draw(st.integers(0, len(data) - 1))
        if kind == "flip":
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set":
            data[i] = draw(st.integers(0, 255))
        elif kind == "insert":
            data[i:i] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete":
            del data[i : i + draw(st.integers(1, 8))]
        else:
            data[i : i + 4] = draw(st.sampled_from([0, 1, 2**31, 2**32 - 1])).to_bytes(4, "little")
    return bytes(data)


@settings(max_examples=1500)
@given(mutated())
def test_mutated_valid_files(data: bytes) -> None:
    check(data)
