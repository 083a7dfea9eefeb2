"""ptx-emu on the control flow and instructions the PTX back end's loops and dynamic indexing
emit (``kera.backends.ptx.region``, ``dynamic``): a counted loop closed by a predicated
backward branch, nested loops, double-buffered carried registers, clamping with
``max.s32``/``min.s32`` at the i32 extremes, start bits as predicates, a ``selp`` mux and
``setp`` with an ``.and`` combine; and the step budget that turns a loop that never ends into
an error naming its branch.  Expected values come from the ISA's meaning of each instruction,
not from the code generator.
"""

from __future__ import annotations

import pytest
from test_ptx_emu import run

from keracheck.ptx_emu import GlobalMemory, PtxExecutionError, load, parse

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def test_counted_loop_with_a_backward_predicated_branch() -> None:
    """The back end's loop shape: count from 0, index = count + lo (lo = -3), 7 trips."""
    body = """
        mov.u32 %d, 0;
        mov.u32 %c, 0;
    LOOP0:
        add.s32 %i, %c, -3;
        mul.lo.s32 %t, %i, %a;
        add.s32 %d, %d, %t;
        add.u32 %c, %c, 1;
        setp.lt.u32 %p, %c, 7;
        @%p bra LOOP0;
    """
    temps = {"%c": "u32", "%i": "s32", "%t": "s32", "%p": "pred"}
    got = run(body, {"%a": "s32"}, {"%d": "s32"}, {"%a": [1, 2, -5]}, temps)
    total = sum(range(-3, 4))
    assert got["%d"] == [(total * a) % (1 << 32) for a in (1, 2, -5)]


def test_double_buffered_carries_swap_each_trip() -> None:
    """(x, y) <- (y, x + y) by staging the old x: Fibonacci after n trips."""
    body = """
        mov.u32 %x, 0;
        mov.u32 %y, 1;
        mov.u32 %c, 0;
    LOOP0:
        add.u32 %s, %x, %y;
        mov.b32 %t, %y;
        mov.b32 %x, %t;
        mov.b32 %y, %s;
        add.u32 %c, %c, 1;
        setp.lt.u32 %p, %c, %a;
        @%p bra LOOP0;
        mov.b32 %d, %x;
    """
    temps = {"%x": "u32", "%y": "u32", "%s": "u32", "%t": "b32", "%c": "u32", "%p": "pred"}
    got = run(body, {"%a": "u32"}, {"%d": "u32"}, {"%a": [1, 2, 10, 30]}, temps)
    fib = [0, 1]
    while len(fib) < 32:
        fib.append(fib[-1] + fib[-2])
    assert got["%d"] == [fib[n] for n in (1, 2, 10, 30)]


def test_nested_loops_with_per_thread_trip_counts() -> None:
    """sum over i < a, j < i of (i * j): the inner trip count depends on the outer index and
    differs per thread (divergence and reconvergence inside a loop)."""
    body = """
        mov.u32 %d, 0;
        mov.u32 %i, 0;
    LOOP0:
        mov.u32 %j, 0;
        setp.eq.u32 %q, %i, 0;
        @%q bra NEXT;
    LOOP1:
        mad.lo.u32 %d, %i, %j, %d;
        add.u32 %j, %j, 1;
        setp.lt.u32 %q, %j, %i;
        @%q bra LOOP1;
    NEXT:
        add.u32 %i, %i, 1;
        setp.lt.u32 %p, %i, %a;
        @%p bra LOOP0;
    """
    temps = {"%i": "u32", "%j": "u32", "%p": "pred", "%q": "pred"}
    counts = [1, 2, 5, 9]
    got = run(body, {"%a": "u32"}, {"%d": "u32"}, {"%a": counts}, temps)
    want = [sum(i * j for i in range(n) for j in range(i)) for n in counts]
    assert got["%d"] == want


def test_negated_guard_on_a_backward_branch() -> None:
    body = """
        mov.u32 %d, %a;
    LOOP0:
        shr.u32 %d, %d, 1;
        setp.eq.u32 %p, %d, 0;
        @!%p bra LOOP0;
        add.u32 %d, %d, 7;
    """
    got = run(body, {"%a": "u32"}, {"%d": "u32"}, {"%a": [0, 1, 6, 0xFFFFFFFF]}, {"%p": "pred"})
    assert got["%d"] == [7, 7, 7, 7]


def test_clamp_bits_and_mux_select_an_element() -> None:
    """The dynamic_slice lowering of x[clamp(s, 0, 2)] over x = (10, 20, 30): max.s32 and
    min.s32 on any i32 (INT32_MIN/MAX included), the start's bits as predicates, two selp."""
    body = """
        max.s32 %t, %a, 0;
        min.s32 %s, %t, 2;
        and.b32 %u, %s, 1;
        setp.ne.u32 %p0, %u, 0;
        and.b32 %u, %s, 2;
        setp.ne.u32 %p1, %u, 0;
        selp.b32 %m, 20, 10, %p0;
        selp.b32 %d, 30, %m, %p1;
    """
    temps = {"%t": "s32", "%s": "s32", "%u": "b32", "%m": "b32", "%p0": "pred", "%p1": "pred"}
    starts = [INT32_MIN, -1, 0, 1, 2, 3, INT32_MAX]
    got = run(body, {"%a": "s32"}, {"%d": "b32"}, {"%a": starts}, temps)
    assert got["%d"] == [10, 10, 10, 20, 30, 30, 30]


def test_setp_and_combine_tests_a_window() -> None:
    """Whether position 3 lies in a window of 2 at start s, as the lowering writes it:
    ``s <= 3`` and ``s >= 2`` combined with ``.and``."""
    body = """
        setp.le.s32 %q, %a, 3;
        setp.ge.and.s32 %d, %a, 2, %q;
    """
    starts = [INT32_MIN, 0, 1, 2, 3, 4, INT32_MAX]
    got = run(body, {"%a": "s32"}, {"%d": "pred"}, {"%a": starts}, {"%q": "pred"})
    assert got["%d"] == [0, 0, 0, 1, 1, 0, 0]


LOOP_FOREVER = """.version 8.0
.target sm_90
.address_size 64
.visible .entry spin(.param .u32 n)
{
    .reg .b32 %r<2>;
    mov.u32 %r0, 0;
LOOP0:
    add.u32 %r0, %r0, 1;
    bra.uni LOOP0;
    ret;
}
"""


def test_a_loop_that_never_ends_hits_the_step_budget_naming_its_branch() -> None:
    program = load(parse(LOOP_FOREVER), "spin")
    with pytest.raises(PtxExecutionError, match=r"line 10: step limit of 1000 .*branch"):
        program.launch([4], grid=1, block=4, memory=GlobalMemory(), max_steps=1000)


def test_a_long_loop_within_the_budget_runs() -> None:
    body = """
        mov.u32 %d, 0;
    LOOP0:
        add.u32 %d, %d, 3;
        setp.lt.u32 %p, %d, %a;
        @%p bra LOOP0;
    """
    got = run(body, {"%a": "u32"}, {"%d": "u32"}, {"%a": [30000]}, {"%p": "pred"})
    assert got["%d"] == [30000]  # 10,000 trips, 30,000 issued instructions
