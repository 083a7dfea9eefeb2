"""PTX instruction semantics: a table of opcode -> compiler, each returning a lane-wise executor.

A compiler checks one instruction against the subset (modifiers, types, operand kinds,
register types per the ISA's operand type rules) and returns ``run(state, mask)``, which
computes every lane with numpy and writes the lanes of ``mask`` (``None`` = all threads).
Instructions, modifiers or types outside the subset raise :class:`PtxUnsupportedError`; PTX
that ptxas would reject (undeclared registers, operand type mismatches, wrong operand
counts) raises :class:`PtxSyntaxError`.

The subset, with the ISA behaviour modelled (section numbers: PTX ISA 9.x):

* ``mov``, ``ld.param``, ``ld.global``/``st.global`` (8..64-bit; a wider register is zero- or
  sign-extended by the instruction type), ``cvta{.to}.global.u64`` (identity: generic and
  global addresses coincide in the emulator).
* integer ``add sub`` (wrap), ``mul/mad .lo .hi .wide`` (``.hi`` up to 32 bits), ``div rem``
  (truncating; division by zero and signed MIN / -1 are *unspecified* in the ISA — 9.7.1.8:
  "Division by zero yields an unspecified, machine-specific value" — so executing one in an
  active thread is a :class:`PtxExecutionError`: generated code must guard them), ``abs neg``
  (wrap), ``min max``.
* ``and or xor not`` (bits and predicates); ``shl shr`` with the ISA's clamp: "Shift amounts
  greater than the register width N are clamped to N" (9.7.8.8/9).
* ``setp`` (every comparison incl. the unordered ``equ neu ltu leu gtu geu num nan``, with an
  optional ``.and/.or/.xor`` combine), ``selp``, ``testp``.
* float ``add sub mul fma mad div sqrt rcp`` with ``.rn`` only (no ``.approx``/``.ftz``/
  ``.sat``; an ``add``/``sub``/``mul`` *without* a rounding modifier may be fused into an fma
  by ptxas — 9.7.3.3 — so it is refused), ``min max`` (``.NaN`` on f32), ``abs neg``, ``cvt``
  (see :func:`compile_cvt`).
* ``bra{.uni}``, ``ret``, ``exit`` (handled by :mod:`keracheck.ptx_emu.machine`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any, NoReturn

import numpy as np

from keracheck.ptx_emu import numerics as fp
from keracheck.ptx_emu.errors import PtxExecutionError, PtxSyntaxError, PtxUnsupportedError
from keracheck.ptx_emu.parser import Imm, Instruction, Kernel, Label, Mem, Operand, Reg, RegPair
from keracheck.ptx_emu.state import SINT, UINT, Bits, Mask, State

Reader = Callable[[State, Mask], Bits]
Exec = Callable[[State, Mask], None]

INT_TYPES = frozenset({"u16", "u32", "u64", "s16", "s32", "s64"})
BIT_TYPES = frozenset({"b16", "b32", "b64"})
FLOAT_TYPES = frozenset({"f32", "f64"})
MEM_TYPES = frozenset(
    {"b8", "u8", "s8", "b16", "u16", "s16", "b32", "u32", "s32", "f32", "b64", "u64", "s64", "f64"}
)
CVT_INT_TYPES = frozenset({"u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64"})
SPECIALS = frozenset(
    f"%{reg}.{axis}" for reg in ("tid", "ntid", "ctaid", "nctaid") for axis in "xyz"
)
INT_ROUNDING = frozenset({"rni", "rzi", "rmi", "rpi"})
FLOAT_ROUNDING = frozenset({"rn", "rz", "rm", "rp", "rna", "rs"})

# Why a modifier is refused, when it is a known one (shown in the error message).
REFUSAL_REASONS = {
    "approx": "approximate results differ between GPU generations",
    "full": "div.full is a 2-ulp approximation",
    "ftz": "it flushes subnormals to zero",
    "sat": "saturation of float results is not modelled",
    "rz": "only round-to-nearest-even (.rn) is modelled",
    "rm": "only round-to-nearest-even (.rn) is modelled",
    "rp": "only round-to-nearest-even (.rn) is modelled",
    "rna": "only round-to-nearest-even (.rn) is modelled",
    "rs": "only round-to-nearest-even (.rn) is modelled",
    "xorsign": "min/max .xorsign.abs is not modelled",
    "abs": "min/max .abs is not modelled",
    "relu": ".relu is not modelled",
    "cc": "carry chains are not modelled",
}


def tbits(ty: str) -> int:
    return 1 if ty == "pred" else int(ty[1:])


def tkind(ty: str) -> str:
    """'b', 'u', 's', 'f' or 'p' (predicate)."""
    return "p" if ty == "pred" else ty[0]


class Ctx:
    """Compile-time view of one instruction inside its kernel."""

    def __init__(self, kernel: Kernel, ins: Instruction) -> None:
        self.kernel = kernel
        self.ins = ins
        self.mods = list(ins.mods)

    # -- diagnostics -----------------------------------------------------------------------
    def fail(self, message: str) -> NoReturn:
        raise PtxSyntaxError(message, self.ins.line, self.ins.source)

    def refuse(self, message: str) -> NoReturn:
        raise PtxUnsupportedError(message, self.ins.line, self.ins.source)

    # -- modifiers -------------------------------------------------------------------------
    def take(self, options: Collection[str]) -> str | None:
        """Remove and return the one modifier of ``options`` present (``None`` if absent)."""
        found = [m for m in self.mods if m in options]
        if len(found) > 1:
            self.fail(f"conflicting modifiers {', '.join('.' + m for m in found)}")
        if not found:
            return None
        self.mods.remove(found[0])
        return found[0]

    def need(self, options: Collection[str], what: str) -> str:
        got = self.take(options)
        if got is None:
            self.refuse(f"'{self.ins.opcode}' needs {what} in the emulator's subset")
        return got

    def flag(self, name: str) -> bool:
        return self.take((name,)) is not None

    def done(self) -> None:
        """Refuse any modifier no compiler step consumed."""
        for m in self.mods:
            reason = REFUSAL_REASONS.get(m, "it is outside the emulator's subset")
            self.refuse(f"modifier .{m} on '{self.ins.opcode}' is refused: {reason}")

    # -- operands --------------------------------------------------------------------------
    def operands(self, *counts: int) -> tuple[Operand, ...]:
        ops = self.ins.operands
        if len(ops) not in counts:
            self.fail(f"'{self.ins.opcode}' takes {' or '.join(map(str, counts))} operands")
        return ops

    def reg_type(self, name: str) -> str:
        ty = self.kernel.regs.get(name)
        if ty is None:
            if name in SPECIALS:
                return "u32"
            self.fail(f"undeclared register {name}")
        return ty

    def check_type(self, name: str, ty: str, wider_ok: bool = False) -> str:
        """The ISA's operand type rule: same size (or wider for ld/st/cvt integers); float
        instruction types take float or bit registers; integer types integer or bit ones."""
        reg = self.reg_type(name)
        if ty == "pred" or reg == "pred":
            if reg != ty:
                self.fail(f"register {name} (.{reg}) does not match .{ty}")
            return reg
        size_ok = tbits(reg) == tbits(ty) or (wider_ok and tbits(reg) > tbits(ty))
        kind_ok = {
            "f": reg == ty or tkind(reg) == "b",
            "u": tkind(reg) in "usb",
            "s": tkind(reg) in "usb",
            "b": True,
        }[tkind(ty)]
        if not (size_ok and kind_ok):
            self.fail(f"register {name} (.{reg}) does not match .{ty}")
        return reg

    def src(self, op: Operand, ty: str, wider_ok: bool = False) -> Reader:
        """A reader of ``op`` as ``ty`` bits (``uint{w}``; a wider register is truncated)."""
        if isinstance(op, Imm):
            bits = self.immediate(op.text, ty)
            dtype = UINT[tbits(ty)]
            return lambda st, m: st.const(bits, dtype)
        if not isinstance(op, Reg) or op.negated:
            self.fail(f"expected a register or immediate of type .{ty}")
        if op.name in self.kernel.regs or op.name in SPECIALS:
            reg = self.check_type(op.name, ty, wider_ok)
        else:
            self.fail(f"undeclared register {op.name}")
        name = op.name
        if name in SPECIALS:
            if self.ins.opcode != "mov":
                self.fail(f"special register {name} may only be read by mov")  # as ptxas
            if tbits(ty) != 32 or tkind(ty) == "f":
                self.fail(f"special register {name} is a 32-bit integer")
            return lambda st, m: st.specials[name]
        if tbits(reg) == tbits(ty):
            return lambda st, m: st.read(name, m)
        narrow = UINT[tbits(ty)]
        return lambda st, m: st.read(name, m).astype(narrow)

    def dst(self, op: Operand, ty: str, wider_ok: bool = False) -> str:
        if not isinstance(op, Reg) or op.negated or op.name in SPECIALS:
            self.fail(f"expected a destination register of type .{ty}")
        if op.name == "_":
            return "_"
        self.check_type(op.name, ty, wider_ok)
        return op.name

    def pred(self, op: Operand) -> Reader:
        if not isinstance(op, Reg):
            self.fail("expected a predicate register")
        self.check_type(op.name, "pred")
        name = op.name
        if op.negated:
            return lambda st, m: ~st.read(name, m)
        return lambda st, m: st.read(name, m)

    def immediate(self, text: str, ty: str) -> int:
        """Bits of an immediate for type ``ty`` (floats only as 0f/0d hex: exact)."""
        kind, width = tkind(ty), tbits(ty)
        low = text.lower()
        if low.startswith(("0f", "0d")):
            want = "0f" if width == 32 else "0d"
            if kind not in "fb" or not low.startswith(want):
                self.fail(f"float literal {text} does not match .{ty}")
            return int(text[2:], 16)
        if kind == "f":
            self.refuse(f"float immediates must be written as 0f/0d hex (got {text})")
        if kind == "p":
            self.fail("predicate immediates are not allowed")
        try:
            value = int(text.rstrip("Uu"), 0)
        except ValueError:
            self.fail(f"bad integer literal {text}")
        if not -(1 << (width - 1)) <= value < (1 << width):
            self.fail(f"literal {text} does not fit .{ty}")
        return value & ((1 << width) - 1)


Compiler = Callable[[Ctx], Exec]


def _write(dst: str) -> Callable[[State, Bits, Mask], None]:
    if dst == "_":
        return lambda st, v, m: None
    return lambda st, v, m: st.write(dst, v, m)


def _signed(x: Bits) -> Bits:
    return x.view(SINT[x.dtype.itemsize * 8])


def _extend(value: Bits, ty: str, reg_bits: int) -> Bits:
    """Widen a ``ty`` value to a register of ``reg_bits``: sign-extend signed types."""
    if reg_bits == tbits(ty):
        return value
    if tkind(ty) == "s":
        return _signed(value).astype(SINT[reg_bits]).view(UINT[reg_bits])
    return value.astype(UINT[reg_bits])


# -- data movement ---------------------------------------------------------------------------


def compile_mov(cx: Ctx) -> Exec:
    ty = cx.need(INT_TYPES | BIT_TYPES | FLOAT_TYPES | {"pred"}, "a type")
    cx.done()
    d, a = cx.operands(2)
    if isinstance(a, Reg) and a.name in {p.name for p in cx.kernel.params}:
        cx.refuse("taking the address of a parameter is outside the subset")
    read = _pred_or_imm(cx, a) if ty == "pred" else cx.src(a, ty)
    out = _write(cx.dst(d, ty))
    return lambda st, m: out(st, read(st, m), m)


def _pred_or_imm(cx: Ctx, op: Operand) -> Reader:
    """mov.pred's source: a predicate or the immediate 0 or 1."""
    if not isinstance(op, Imm):
        return cx.pred(op)
    if op.text not in ("0", "1"):
        cx.fail("a predicate immediate must be 0 or 1")
    value = op.text == "1"
    return lambda st, m: np.full(st.n, value)


def _address(cx: Ctx, op: Operand) -> Reader:
    if not isinstance(op, Mem):
        cx.fail("expected a memory operand [reg+offset]")
    reg = cx.kernel.regs.get(op.base)
    if reg is None or tbits(reg) != 64 or tkind(reg) == "f":
        cx.fail(f"address register {op.base} must be a declared 64-bit integer register")
    base, offset = op.base, np.uint64(op.offset % (1 << 64))
    return lambda st, m: st.read(base, m) + offset


def _active(values: Bits, m: Mask) -> Bits:
    return values if m is None else values[m]


def compile_ld(cx: Ctx) -> Exec:
    space = cx.need(("param", "global"), "a state space (.param or .global)")
    ty = cx.need(MEM_TYPES, "a type")
    cx.done()
    d, addr = cx.operands(2)
    dst = cx.dst(d, ty, wider_ok=tkind(ty) != "f")
    reg_bits = tbits(cx.reg_type(dst))
    width = tbits(ty) // 8
    if space == "param":
        return _compile_ld_param(cx, addr, dst, ty, reg_bits)
    where = _address(cx, addr)

    def run(st: State, m: Mask) -> None:
        addrs = _active(where(st, m), m)
        loaded = np.zeros(st.n, dtype=UINT[8 * width])
        got = st.memory.load(addrs, width)
        if m is None:
            loaded = got
        else:
            loaded[m] = got
        st.write(dst, _extend(loaded, ty, reg_bits), m)

    return run


def _compile_ld_param(cx: Ctx, addr: Operand, dst: str, ty: str, reg_bits: int) -> Exec:
    params = {p.name: p.type for p in cx.kernel.params}
    if not isinstance(addr, Mem) or addr.base not in params:
        cx.fail("ld.param needs [parameter+offset]")
    width = tbits(ty) // 8
    if not 0 <= addr.offset <= tbits(params[addr.base]) // 8 - width:
        cx.fail(f"ld.param reads outside parameter {addr.base}")
    name, lo = addr.base, addr.offset

    def run(st: State, m: Mask) -> None:
        raw = np.frombuffer(st.params[name][lo : lo + width], dtype=UINT[8 * width])
        st.write(dst, _extend(np.full(st.n, raw[0]), ty, reg_bits), m)

    return run


def compile_st(cx: Ctx) -> Exec:
    cx.need(("global",), "the .global state space")
    ty = cx.need(MEM_TYPES, "a type")
    cx.done()
    addr, a = cx.operands(2)
    where = _address(cx, addr)
    value = cx.src(a, ty, wider_ok=tkind(ty) != "f")
    width = tbits(ty) // 8

    def run(st: State, m: Mask) -> None:
        addrs = _active(where(st, m), m)
        vals = _active(value(st, m), m)
        st.memory.store(addrs, width, vals)

    return run


def compile_cvta(cx: Ctx) -> Exec:
    cx.flag("to")
    cx.need(("global",), "the .global state space")
    cx.need(("u64",), ".u64")
    cx.done()
    d, a = cx.operands(2)
    read = cx.src(a, "u64")
    out = _write(cx.dst(d, "u64"))
    return lambda st, m: out(st, read(st, m), m)


# -- integer arithmetic ----------------------------------------------------------------------


def _binary(cx: Ctx, ty: str, fn: Callable[[Bits, Bits], Bits]) -> Exec:
    d, a, b = cx.operands(3)
    ra, rb = cx.src(a, ty), cx.src(b, ty)
    out = _write(cx.dst(d, ty))
    return lambda st, m: out(st, fn(ra(st, m), rb(st, m)), m)


def _unary(cx: Ctx, ty: str, fn: Callable[[Bits], Bits]) -> Exec:
    d, a = cx.operands(2)
    ra = cx.src(a, ty)
    out = _write(cx.dst(d, ty))
    return lambda st, m: out(st, fn(ra(st, m)), m)


FloatFn = Callable[..., Bits]


def _fbinary(cx: Ctx, ty: str, fn: FloatFn) -> Exec:
    """Like :func:`_binary` for float ops, which also take the launch's NaN policy."""
    d, a, b = cx.operands(3)
    ra, rb = cx.src(a, ty), cx.src(b, ty)
    out = _write(cx.dst(d, ty))
    return lambda st, m: out(st, fn(ra(st, m), rb(st, m), st.policy), m)


def _funary(cx: Ctx, ty: str, fn: FloatFn) -> Exec:
    d, a = cx.operands(2)
    ra = cx.src(a, ty)
    out = _write(cx.dst(d, ty))
    return lambda st, m: out(st, fn(ra(st, m), st.policy), m)


def _float_op(cx: Ctx, opcode: str) -> tuple[fp.Fmt, str]:
    """Modifiers of a float add/sub/mul/div/sqrt/rcp/fma: .rn required, nothing else."""
    rnd = cx.take(FLOAT_ROUNDING)
    ty = cx.need(FLOAT_TYPES, "a type")
    if rnd is None:
        cx.refuse(
            f"'{opcode}.{ty}' without a rounding modifier is refused: ptxas may contract it"
            " into an fma (or it is an approximation); write .rn"
        )
    if rnd != "rn":
        cx.refuse(f"rounding .{rnd} is refused: {REFUSAL_REASONS[rnd]}")
    cx.done()
    return fp.FMTS[ty], ty


FLOAT_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}
INT_BINARY: dict[str, Callable[[Bits, Bits], Bits]] = {
    "add": lambda a, b: a + b,  # uint arithmetic wraps, like PTX add/sub/mul.lo
    "sub": lambda a, b: a - b,
}


def compile_addsub(cx: Ctx) -> Exec:
    opcode = cx.ins.opcode
    if any(m in FLOAT_TYPES for m in cx.mods):
        fmt, ty = _float_op(cx, opcode)
        ufunc = FLOAT_BINARY[opcode]
        return _fbinary(cx, ty, lambda a, b, pol: fp.arith(fmt, ufunc, (a, b), pol))
    ty = cx.need(INT_TYPES, "an integer type (.u16 .. .s64)")
    cx.done()
    return _binary(cx, ty, INT_BINARY[opcode])


def _wide(a: Bits, b: Bits, ty: str) -> Bits:
    """Exact double-width product of two ``ty`` values, as unsigned bits."""
    w = tbits(ty)
    if tkind(ty) == "s":
        return (_signed(a).astype(SINT[2 * w]) * _signed(b).astype(SINT[2 * w])).view(UINT[2 * w])
    return a.astype(UINT[2 * w]) * b.astype(UINT[2 * w])


def _hi(a: Bits, b: Bits, ty: str) -> Bits:
    w = tbits(ty)
    wide = _wide(a, b, ty)
    out: Bits
    if tkind(ty) == "s":
        out = (_signed(wide) >> w).astype(SINT[w]).view(UINT[w])
    else:
        out = (wide >> UINT[2 * w](w)).astype(UINT[w])
    return out


def _int_mul_parts(cx: Ctx) -> tuple[str, str, str]:
    """(mode, instruction type, destination type) of an integer mul/mad."""
    mode = cx.need(("lo", "hi", "wide"), ".lo, .hi or .wide")
    ty = cx.need(INT_TYPES, "an integer type")
    cx.done()
    if mode != "lo" and tbits(ty) == 64:
        cx.refuse(f"'{cx.ins.opcode}.{mode}' on 64-bit operands is outside the subset")
    dty = f"{ty[0]}{2 * tbits(ty)}" if mode == "wide" else ty
    return mode, ty, dty


def _product(mode: str, ty: str) -> Callable[[Bits, Bits], Bits]:
    if mode == "wide":
        return lambda a, b: _wide(a, b, ty)
    if mode == "hi":
        return lambda a, b: _hi(a, b, ty)
    return lambda a, b: a * b


def compile_mul(cx: Ctx) -> Exec:
    if any(m in FLOAT_TYPES for m in cx.mods):
        fmt, ty = _float_op(cx, "mul")
        return _fbinary(cx, ty, lambda a, b, pol: fp.arith(fmt, np.multiply, (a, b), pol))
    mode, ty, dty = _int_mul_parts(cx)
    d, a, b = cx.operands(3)
    ra, rb = cx.src(a, ty), cx.src(b, ty)
    out = _write(cx.dst(d, dty))
    prod = _product(mode, ty)
    return lambda st, m: out(st, prod(ra(st, m), rb(st, m)), m)


def compile_fma(cx: Ctx) -> Exec:
    fmt, ty = _float_op(cx, cx.ins.opcode)
    d, a, b, c = cx.operands(4)
    ra, rb, rc = cx.src(a, ty), cx.src(b, ty), cx.src(c, ty)
    out = _write(cx.dst(d, ty))
    return lambda st, m: out(st, fp.fma(fmt, ra(st, m), rb(st, m), rc(st, m), st.policy), m)


def compile_mad(cx: Ctx) -> Exec:
    if any(m in FLOAT_TYPES for m in cx.mods):
        return compile_fma(cx)  # "mad.{f32,f64} is the same as fma.{f32,f64}" (9.7.3.7)
    mode, ty, dty = _int_mul_parts(cx)
    d, a, b, c = cx.operands(4)
    ra, rb, rc = cx.src(a, ty), cx.src(b, ty), cx.src(c, dty)
    out = _write(cx.dst(d, dty))
    prod = _product(mode, ty)
    return lambda st, m: out(st, prod(ra(st, m), rb(st, m)) + rc(st, m), m)


def _divrem(a: Bits, b: Bits, ty: str, want_rem: bool, m: Mask) -> Bits:
    """Truncating division (C semantics, which CUDA's ``/`` and ``%`` compile to)."""
    active = np.ones(a.shape, dtype=bool) if m is None else m
    zero = b == 0
    if (zero & active).any():
        raise PtxExecutionError(
            "integer division by zero: the PTX ISA leaves the result unspecified"
            " ('an unspecified, machine-specific value'); guard the divisor"
        )
    if tkind(ty) == "u":
        safe = np.where(zero, b.dtype.type(1), b)
        return a % safe if want_rem else a // safe
    sa, sb = _signed(a), _signed(b)
    overflow = (sa == np.iinfo(sa.dtype).min) & (sb == -1)
    if (overflow & active).any():
        raise PtxExecutionError(
            "signed division overflow (MIN / -1): the PTX ISA does not specify the result; guard it"
        )
    safe = np.where(zero | overflow, sb.dtype.type(1), sb)
    rem = np.fmod(sa, safe)  # sign of the dividend
    if want_rem:
        return rem.view(a.dtype)
    return ((sa - rem) // safe).view(a.dtype)  # exact division


def compile_div(cx: Ctx) -> Exec:
    if any(m in FLOAT_TYPES for m in cx.mods):
        fmt, ty = _float_op(cx, "div")
        return _fbinary(cx, ty, lambda a, b, pol: fp.arith(fmt, np.divide, (a, b), pol))
    return _compile_divrem(cx, want_rem=False)


def compile_rem(cx: Ctx) -> Exec:
    return _compile_divrem(cx, want_rem=True)


def _compile_divrem(cx: Ctx, want_rem: bool) -> Exec:
    ty = cx.need(INT_TYPES, "an integer type")
    cx.done()
    d, a, b = cx.operands(3)
    ra, rb = cx.src(a, ty), cx.src(b, ty)
    out = _write(cx.dst(d, ty))
    return lambda st, m: out(st, _divrem(ra(st, m), rb(st, m), ty, want_rem, m), m)


def compile_absneg(cx: Ctx) -> Exec:
    negate = cx.ins.opcode == "neg"
    ty = cx.need(FLOAT_TYPES | {"s16", "s32", "s64"}, "a type (.s16 .s32 .s64 .f32 .f64)")
    cx.done()
    if tkind(ty) == "f":
        fmt = fp.FMTS[ty]
        return _funary(cx, ty, lambda a, pol: fp.absneg(fmt, a, negate, pol))
    if negate:
        return _unary(cx, ty, lambda a: (~a) + a.dtype.type(1))  # two's complement, wraps
    return _unary(cx, ty, lambda a: np.where(_signed(a) < 0, (~a) + a.dtype.type(1), a))


def compile_minmax(cx: Ctx) -> Exec:
    is_max = cx.ins.opcode == "max"
    nan_mode = cx.flag("NaN")
    ty = cx.need(FLOAT_TYPES | INT_TYPES, "a type")
    cx.done()
    if tkind(ty) == "f":
        if nan_mode and ty == "f64":
            cx.fail("min/max .NaN exists only for .f32")
        fmt = fp.FMTS[ty]
        return _fbinary(cx, ty, lambda a, b, pol: fp.minmax(fmt, a, b, is_max, nan_mode, pol))
    if nan_mode:
        cx.fail(".NaN applies to float min/max only")
    pick = np.maximum if is_max else np.minimum
    if tkind(ty) == "s":
        return _binary(cx, ty, lambda a, b: pick(_signed(a), _signed(b)).view(a.dtype))
    return _binary(cx, ty, lambda a, b: pick(a, b))


def compile_sqrt_rcp(cx: Ctx) -> Exec:
    fmt, ty = _float_op(cx, cx.ins.opcode)
    if cx.ins.opcode == "sqrt":
        return _funary(cx, ty, lambda a, pol: fp.arith(fmt, np.sqrt, (a,), pol))
    one = fmt.utype(0x3F800000 if fmt is fp.F32 else 0x3FF0000000000000)
    return _funary(cx, ty, lambda a, pol: fp.arith(fmt, np.divide, (np.full_like(a, one), a), pol))


# -- logic and shifts ------------------------------------------------------------------------

LOGIC: dict[str, Callable[[Bits, Bits], Bits]] = {
    "and": lambda a, b: a & b,
    "or": lambda a, b: a | b,
    "xor": lambda a, b: a ^ b,
}


def compile_logic(cx: Ctx) -> Exec:
    ty = cx.need(BIT_TYPES | {"pred"}, "a bit type (.b16 .b32 .b64 .pred)")
    cx.done()
    fn = LOGIC[cx.ins.opcode]
    if ty != "pred":
        return _binary(cx, ty, fn)
    d, a, b = cx.operands(3)
    ra, rb = cx.pred(a), cx.pred(b)
    out = _write(cx.dst(d, "pred"))
    return lambda st, m: out(st, fn(ra(st, m), rb(st, m)), m)


def compile_not(cx: Ctx) -> Exec:
    ty = cx.need(BIT_TYPES | {"pred"}, "a bit type (.b16 .b32 .b64 .pred)")
    cx.done()
    if ty != "pred":
        return _unary(cx, ty, lambda a: ~a)
    d, a = cx.operands(2)
    ra = cx.pred(a)
    out = _write(cx.dst(d, "pred"))
    return lambda st, m: out(st, ~ra(st, m), m)


def _shift(a: Bits, amount: Bits, ty: str, left: bool) -> Bits:
    """Shift with the ISA's clamp of the amount to the width N (not a mask)."""
    w = tbits(ty)
    amt = np.minimum(amount, np.uint32(w)).astype(a.dtype)
    limited = np.minimum(amt, a.dtype.type(w - 1))
    out: Bits
    if left:
        out = np.where(amt >= w, a.dtype.type(0), a << limited)
    elif tkind(ty) == "s":
        out = (_signed(a) >> limited.astype(SINT[w])).view(a.dtype)  # w-1 fills with sign
    else:
        out = np.where(amt >= w, a.dtype.type(0), a >> limited)
    return out


def compile_shift(cx: Ctx) -> Exec:
    left = cx.ins.opcode == "shl"
    types = BIT_TYPES if left else BIT_TYPES | INT_TYPES
    ty = cx.need(types, "a type")
    cx.done()
    d, a, b = cx.operands(3)
    ra = cx.src(a, ty)
    rb = cx.src(b, "u32")  # "The b operand must be a 32-bit value, regardless of the type"
    out = _write(cx.dst(d, ty))
    return lambda st, m: out(st, _shift(ra(st, m), rb(st, m), ty, left), m)


# -- comparison and selection ----------------------------------------------------------------

ORDERED = {
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}
UNSIGNED_ALIASES = {"lo": "lt", "ls": "le", "hi": "gt", "hs": "ge"}
UNORDERED = {"equ": "eq", "neu": "ne", "ltu": "lt", "leu": "le", "gtu": "gt", "geu": "ge"}
CMP_OPS = frozenset(ORDERED) | frozenset(UNSIGNED_ALIASES) | frozenset(UNORDERED) | {"num", "nan"}
BOOL_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "and": np.logical_and,
    "or": np.logical_or,
    "xor": np.logical_xor,
}


def _float_compare(fmt: fp.Fmt, cmp: str) -> Callable[[Bits, Bits], Bits]:
    """Ordered comparisons are false on NaN; unordered ones true (9.7.6.2)."""

    def run(a: Bits, b: Bits) -> Bits:
        unordered = fp.isnan(fmt, a) | fp.isnan(fmt, b)
        if cmp in ("num", "nan"):
            return ~unordered if cmp == "num" else unordered
        base = UNORDERED.get(cmp, cmp)
        with np.errstate(all="ignore"):
            res = ORDERED[base](a.view(fmt.ftype), b.view(fmt.ftype)) & ~unordered
        return res | unordered if cmp in UNORDERED else res

    return run


def _int_compare(cx: Ctx, ty: str, cmp: str) -> Callable[[Bits, Bits], Bits]:
    if cmp in UNORDERED or cmp in ("num", "nan"):
        cx.fail(f"comparison .{cmp} applies to floats only")
    if cmp in UNSIGNED_ALIASES:
        if tkind(ty) != "u":
            cx.fail(f"comparison .{cmp} applies to unsigned types only")
        cmp = UNSIGNED_ALIASES[cmp]
    if tkind(ty) == "b" and cmp not in ("eq", "ne"):
        cx.fail("bit-size types compare with .eq/.ne only")
    fn = ORDERED[cmp]
    if tkind(ty) == "s":
        return lambda a, b: fn(_signed(a), _signed(b))
    return lambda a, b: fn(a, b)


def compile_setp(cx: Ctx) -> Exec:
    cmp = cx.need(CMP_OPS, "a comparison")
    combine = cx.take(BOOL_OPS)
    ty = cx.need(INT_TYPES | BIT_TYPES | FLOAT_TYPES, "a type")
    cx.done()
    ops = cx.operands(3, 4) if combine else cx.operands(3)
    if combine and len(ops) != 4:
        cx.fail(f"setp .{combine} needs a predicate operand c")
    dest, a, b = ops[:3]
    ra, rb = cx.src(a, ty), cx.src(b, ty)
    compare = _float_compare(fp.FMTS[ty], cmp) if tkind(ty) == "f" else _int_compare(cx, ty, cmp)
    names = [dest.first, dest.second] if isinstance(dest, RegPair) else [dest]
    outs = [_write(cx.dst(Reg(n) if isinstance(n, str) else n, "pred")) for n in names]
    rc = cx.pred(ops[3]) if combine else None
    join = BOOL_OPS[combine] if combine else None

    def run(st: State, m: Mask) -> None:
        t = compare(ra(st, m), rb(st, m))
        p, q = t, ~t
        if join is not None and rc is not None:
            c = rc(st, m)
            p, q = join(t, c), join(~t, c)
        for out, value in zip(outs, (p, q), strict=False):
            out(st, value, m)

    return run


def compile_selp(cx: Ctx) -> Exec:
    ty = cx.need(INT_TYPES | BIT_TYPES | FLOAT_TYPES, "a type")
    cx.done()
    d, a, b, c = cx.operands(4)
    ra, rb, rc = cx.src(a, ty), cx.src(b, ty), cx.pred(c)
    out = _write(cx.dst(d, ty))
    return lambda st, m: out(st, np.where(rc(st, m), ra(st, m), rb(st, m)), m)


def compile_testp(cx: Ctx) -> Exec:
    prop = cx.need(fp.TESTP, "a property (.finite .infinite .number .notanumber ...)")
    ty = cx.need(FLOAT_TYPES, ".f32 or .f64")
    cx.done()
    d, a = cx.operands(2)
    ra, fmt, test = cx.src(a, ty), fp.FMTS[ty], fp.TESTP[prop]
    out = _write(cx.dst(d, "pred"))
    return lambda st, m: out(st, test(fmt, ra(st, m)), m)


# -- conversions -----------------------------------------------------------------------------


Convert = Callable[[Bits, fp.NanPolicy], Bits]


def compile_cvt(cx: Ctx) -> Exec:
    """``cvt`` (9.7.9.21) for the integer and f32/f64 types.

    int->int: extend by the source type, truncate (or ``.sat``-clamp) to the destination.
    float->int: ``.rni/.rzi/.rmi/.rpi`` required; clamps; NaN -> 0, except 1 << (N-1) when the
    source is .f64 or the destination is 64-bit (the ISA's literal rule).  int->float and
    f64->f32: ``.rn`` only.  f32->f64: exact, no rounding modifier.  f->f same type:
    ``.rXi`` (round to integral).  ``.ftz``, ``.rz/.rm/.rp/.rna``, f16/bf16 are refused.
    """
    if len(cx.mods) < 2:
        cx.fail("cvt needs a destination and a source type")
    dty, aty = cx.mods[-2], cx.mods[-1]
    cx.mods = cx.mods[:-2]
    for ty in (dty, aty):
        if ty not in CVT_INT_TYPES | FLOAT_TYPES:
            cx.refuse(f"cvt type .{ty} is outside the subset")
    irnd = cx.take(INT_ROUNDING)
    frnd = cx.take(FLOAT_ROUNDING)
    sat = cx.flag("sat")
    cx.done()
    d, a = cx.operands(2)
    src = cx.src(a, aty, wider_ok=tkind(aty) != "f")
    dst = cx.dst(d, dty, wider_ok=tkind(dty) != "f")
    reg_bits = tbits(cx.reg_type(dst)) if dst != "_" else tbits(dty)
    convert = _cvt_kind(cx, dty, aty, irnd, frnd, sat)
    out = _write(dst)
    return lambda st, m: out(st, _extend(convert(src(st, m), st.policy), dty, reg_bits), m)


def _cvt_kind(
    cx: Ctx, dty: str, aty: str, irnd: str | None, frnd: str | None, sat: bool
) -> Convert:
    dfloat, afloat = tkind(dty) == "f", tkind(aty) == "f"
    if not dfloat and not afloat:
        return _cvt_int_int(cx, dty, aty, irnd, frnd, sat)
    if sat and dfloat:
        cx.refuse(f"modifier .sat on a float destination is refused: {REFUSAL_REASONS['sat']}")
    if afloat and not dfloat:
        return _cvt_float_int(cx, dty, aty, irnd, frnd)
    if frnd is not None and frnd != "rn":
        cx.refuse(f"rounding .{frnd} is refused: {REFUSAL_REASONS[frnd]}")
    if not afloat:
        if irnd is not None or frnd is None:
            cx.fail("int-to-float cvt needs a float rounding modifier (.rn)")
        fmt, signed = fp.FMTS[dty], tkind(aty) == "s"
        return lambda x, pol: fp.int_to_float(fmt, _signed(x) if signed else x, signed)
    return _cvt_float_float(cx, dty, aty, irnd, frnd)


def _cvt_int_int(
    cx: Ctx, dty: str, aty: str, irnd: str | None, frnd: str | None, sat: bool
) -> Convert:
    if irnd is not None or frnd is not None:
        cx.fail("integer-to-integer cvt takes no rounding modifier")
    dbits, signed_src = tbits(dty), tkind(aty) == "s"
    lo, hi = fp.int_range(dbits, tkind(dty) == "s")
    src_lo, src_hi = fp.int_range(tbits(aty), signed_src)
    if sat and lo <= src_lo and src_hi <= hi:
        cx.fail(".sat is not allowed when the destination range contains the source range")

    def run(x: Bits, policy: fp.NanPolicy) -> Bits:
        wide = _signed(x).astype(np.int64) if signed_src else x.astype(np.uint64)
        if sat:
            if lo > src_lo:
                wide = np.where(wide < lo, wide.dtype.type(lo), wide)
            if hi < src_hi:
                wide = np.where(wide > hi, wide.dtype.type(hi), wide)
        return wide.view(np.uint64).astype(UINT[dbits])  # modular truncation

    return run


def _cvt_float_int(cx: Ctx, dty: str, aty: str, irnd: str | None, frnd: str | None) -> Convert:
    if irnd is None or frnd is not None:
        cx.fail("float-to-integer cvt needs an integer rounding modifier (.rni .rzi .rmi .rpi)")
    fmt, bits, signed = fp.FMTS[aty], tbits(dty), tkind(dty) == "s"
    return lambda x, pol: fp.float_to_int(fmt, irnd, x, bits, signed, pol).astype(UINT[bits])


def _cvt_float_float(cx: Ctx, dty: str, aty: str, irnd: str | None, frnd: str | None) -> Convert:
    src, dst = fp.FMTS[aty], fp.FMTS[dty]
    if dty == aty:
        if irnd is None:
            cx.refuse("same-type float cvt needs .rni/.rzi/.rmi/.rpi in the subset")
        return lambda x, pol: fp.round_integral(src, irnd, x, pol)
    if irnd is not None:
        cx.fail("integer rounding is illegal in a float-to-float cvt of different sizes")
    if dty == "f32" and frnd is None:
        cx.fail("cvt.f32.f64 needs a rounding modifier (.rn)")
    if dty == "f64" and frnd is not None:
        cx.fail("cvt.f64.f32 is exact and takes no rounding modifier")
    return lambda x, pol: fp.float_to_float(src, dst, x, pol)


COMPILERS: dict[str, Compiler] = {
    "mov": compile_mov,
    "ld": compile_ld,
    "st": compile_st,
    "cvta": compile_cvta,
    "add": compile_addsub,
    "sub": compile_addsub,
    "mul": compile_mul,
    "mad": compile_mad,
    "fma": compile_fma,
    "div": compile_div,
    "rem": compile_rem,
    "abs": compile_absneg,
    "neg": compile_absneg,
    "min": compile_minmax,
    "max": compile_minmax,
    "sqrt": compile_sqrt_rcp,
    "rcp": compile_sqrt_rcp,
    "and": compile_logic,
    "or": compile_logic,
    "xor": compile_logic,
    "not": compile_not,
    "shl": compile_shift,
    "shr": compile_shift,
    "setp": compile_setp,
    "selp": compile_selp,
    "testp": compile_testp,
    "cvt": compile_cvt,
}

# Opcodes handled by the machine itself (control flow).
CONTROL = frozenset({"bra", "ret", "exit"})


def compile_instruction(kernel: Kernel, ins: Instruction) -> Exec:
    """Compile one non-control instruction, or refuse it."""
    cx = Ctx(kernel, ins)
    compiler = COMPILERS.get(ins.opcode)
    if compiler is None:
        cx.refuse(f"instruction '{ins.opcode}' is outside the emulator's subset")
    if any(isinstance(op, Label) for op in ins.operands):
        cx.fail("labels are only valid as branch targets")
    return compiler(cx)
