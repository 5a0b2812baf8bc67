"""int32 arithmetic as C evaluates ``int32_t`` expressions (wrapping), for the numba kernels.

numba computes every integer operation on 64 bits (``int32 * int32`` is ``int64``), so a loop over int32 data
vectorises into 64-bit lanes: half the lanes of 32-bit ones, and 64-bit vector multiplies cost three
micro-operations on Intel's cores (``vpmullq``) against one or two for 32-bit ones (``vpmulld``). These functions
emit the 32-bit instructions themselves; arguments of other integer types are truncated or extended to int32
first (unsigned ones zero-extended). Chained together they keep a whole expression on 32 bits; the result is an
int32, which numba widens again only where it meets 64-bit arithmetic.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

__all__ = ["abs32", "add32", "lshr32", "mul32", "shl32", "shr32", "sub32", "to16"]

_I32 = ir.IntType(32)


def _as_i32(builder: ir.IRBuilder, value: ir.Value, kind: types.Integer) -> ir.Value:
    if kind.bitwidth < 32:
        return builder.sext(value, _I32) if kind.signed else builder.zext(value, _I32)
    if kind.bitwidth > 32:
        return builder.trunc(value, _I32)
    return value


def _binary(name: str):
    def typer(typingctx, a, b):
        if not (isinstance(a, types.Integer) and isinstance(b, types.Integer)):
            return None

        def codegen(context, builder, signature, args):
            x, y = (_as_i32(builder, v, t) for v, t in zip(args, signature.args))
            return getattr(builder, name)(x, y)
        return types.int32(a, b), codegen
    return typer


add32 = intrinsic(_binary("add"))
add32.__doc__ = "``a + b`` in int32, wrapping."
sub32 = intrinsic(_binary("sub"))
sub32.__doc__ = "``a - b`` in int32, wrapping."
mul32 = intrinsic(_binary("mul"))
mul32.__doc__ = "``a * b`` in int32, wrapping (the low 32 bits of the product)."
shr32 = intrinsic(_binary("ashr"))
shr32.__doc__ = "``a >> b`` in int32: arithmetic shift, ``0 <= b < 32``."
lshr32 = intrinsic(_binary("lshr"))
lshr32.__doc__ = "``a >> b`` of ``a``'s 32 bits read as unsigned (``uint32_t``), ``0 <= b < 32``: non-negative."
shl32 = intrinsic(_binary("shl"))
shl32.__doc__ = "``a << b`` in int32, wrapping, ``0 <= b < 32``."


def _unary(build):
    def typer(typingctx, a):
        if not isinstance(a, types.Integer):
            return None

        def codegen(context, builder, signature, args):
            return build(builder, _as_i32(builder, args[0], signature.args[0]))
        return types.int32(a), codegen
    return typer


abs32 = intrinsic(_unary(lambda b, x: b.select(b.icmp_signed("<", x, ir.Constant(_I32, 0)), b.neg(x), x)))
abs32.__doc__ = "``abs(a)`` in int32 (``abs(-2**31)`` wraps to itself, as C's ``abs`` in practice)."
to16 = intrinsic(_unary(lambda b, x: b.sext(b.trunc(x, ir.IntType(16)), _I32)))
to16.__doc__ = "``(int16_t) a`` as an int32: the low 16 bits of ``a``, sign-extended."
