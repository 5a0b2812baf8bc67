"""glibc's ``powf(x, 1.0f/3.0f)`` on the GPU, bit for bit: ADM's float32 cube roots without a trip to the host.

libvmaf's ADM takes ``powf(v, 1/3f)`` of float32 sums, and glibc's ``powf`` is not correctly rounded (it differs
from the correctly rounded power on 0.064 % of the positive floats), so a GPU ``pow`` cannot stand in for it. This
is glibc's algorithm (since 2.28, from Arm's optimized-routines) evaluated with the same double operations:

1. ``log2(x)``: ``x = 2**k * z`` with ``z`` in ``[0x3f330000, 2 * 0x3f330000)`` as a float's bits; ``log2(x) =
   k + log2(c_i) + P(z/c_i - 1)`` with one of 16 table centres ``c_i`` and a degree-5 polynomial ``P``.
2. ``2**(y * log2(x))`` with ``y = (double) (1/3f)``: ``2**(j/32)`` from a 32-entry table of doubles (the integer
   part added to the exponent bits) times a cubic in the remainder; the double result is rounded to float.

Every operation is a double multiply or add rounded on its own (kernels compile with ``enable_fp_fusion=False``).
glibc's x86-64 build also has an FMA variant that fuses the polynomial steps; for this exponent both variants
return the same float for **every** positive finite float, and so does this function: all 2,139,095,040 were
compared with glibc's ``powf``, through Triton's interpreter (glibc 2.36) and compiled on an H200 (Triton 3.6, against
that machine's glibc), with no difference. ``tests/families/adm/test_cube_root.py`` repeats the comparison on
60,000 floats of every binade.
Zero gives zero and subnormal inputs are normalised as glibc does; ADM's sums are never negative, inf or NaN.

Tables: glibc's ``__powf_log2_data`` and ``__exp2f_data`` (``sysdeps/ieee754/flt-32/e_powf_log2_data.c``,
``e_exp2f_data.c``; GNU C Library, LGPL-2.1-or-later; originally Arm's optimized-routines, MIT OR
Apache-2.0 WITH LLVM-exception), copied as data.
"""

from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

from fusedsim.core.launch import device_constants

__all__ = ["powf_third", "powf_third_tables"]

#: 1/c_i and log2(c_i) of the 16 subintervals of log2's reduced argument.
_LOG2_INVC = (
    "0x1.661ec79f8f3bep+0", "0x1.571ed4aaf883dp+0", "0x1.49539f0f010bp+0", "0x1.3c995b0b80385p+0",
    "0x1.30d190c8864a5p+0", "0x1.25e227b0b8eap+0", "0x1.1bb4a4a1a343fp+0", "0x1.12358f08ae5bap+0",
    "0x1.0953f419900a7p+0", "0x1p+0", "0x1.e608cfd9a47acp-1", "0x1.ca4b31f026aap-1",
    "0x1.b2036576afce6p-1", "0x1.9c2d163a1aa2dp-1", "0x1.886e6037841edp-1", "0x1.767dcf5534862p-1",
)
_LOG2_LOGC = (
    "-0x1.efec65b963019p-2", "-0x1.b0b6832d4fca4p-2", "-0x1.7418b0a1fb77bp-2", "-0x1.39de91a6dcf7bp-2",
    "-0x1.01d9bf3f2b631p-2", "-0x1.97c1d1b3b7afp-3", "-0x1.2f9e393af3c9fp-3", "-0x1.960cbbf788d5cp-4",
    "-0x1.a6f9db6475fcep-5", "0x0p+0", "0x1.338ca9f24f53dp-4", "0x1.476a9543891bap-3",
    "0x1.e840b4ac4e4d2p-3", "0x1.40645f0c6651cp-2", "0x1.88e9c2c1b9ff8p-2", "0x1.ce0a44eb17bccp-2",
)
#: log2(1 + r) ~ A0 r**5 + A1 r**4 + A2 r**3 + A3 r**2 + A4 r.
_LOG2_POLY = ("0x1.27616c9496e0bp-2", "-0x1.71969a075c67ap-2", "0x1.ec70a6ca7baddp-2", "-0x1.7154748bef6c8p-1",
              "0x1.71547652ab82bp0")
#: 2**r ~ C0 r**3 + C1 r**2 + C2 r + 1 for |r| <= 1/64.
_EXP2_POLY = ("0x1.c6af84b912394p-5", "0x1.ebfce50fac4f3p-3", "0x1.62e42ff0c52d6p-1")
#: bits of 2**(i/32) minus ``i << 47``: adding ``k << 47`` to entry ``k % 32`` gives 2**(k/32).
_EXP2_TABLE = (
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51,
    0x3fef72b83c7d517b, 0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
    0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585,
    0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
    0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069,
    0x3fef5818dcfba487, 0x3fef7c97337b9b5f, 0x3fefa4afa2a490da, 0x3fefd0765b6e4540,
)
#: Rounds a double to a multiple of 1/32 when added (1.5 * 2**52 / 32).
_SHIFT = "0x1.8p+47"

_DOUBLES = tuple(float.fromhex(v) for v in (*_LOG2_INVC, *_LOG2_LOGC, *_LOG2_POLY, *_EXP2_POLY, _SHIFT)) + (
    float(np.float32(1.0) / np.float32(3.0)),)
_EXP2_BITS = tuple(b - (1 << 64) if b >= 1 << 63 else b for b in _EXP2_TABLE)  # as int64


def powf_third_tables(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The doubles (float64 ``(42,)``: 1/c_i, log2 c_i, the two polynomials, the shift, ``(double)(1/3f)``) and the
    exp2 table's bits (int64 ``(32,)``) on ``device``: the arguments ``dbl_ptr``, ``bits_ptr`` of :func:`powf_third`.
    Constants travel as memory: a float literal in a Triton kernel is a float32."""
    return (device_constants(_DOUBLES, torch.float64, device), device_constants(_EXP2_BITS, torch.int64, device))


@triton.jit
def powf_third(x, dbl_ptr, bits_ptr):
    """glibc's ``powf(x, 1/3f)`` of float32 ``x >= 0`` (any block shape), float32. ``dbl_ptr``, ``bits_ptr``: the
    tensors of :func:`powf_third_tables`."""
    # glibc's uint32 arithmetic, in int64 masked to 32 bits (a literal above 2**31 is an int64 in Triton)
    ix = x.to(tl.uint32, bitcast=True).to(tl.int64)
    # subnormals: scaled by 2**23 into normals, the exponent taken back in the (wrapping) bits, as glibc does
    scaled = (x * 8388608.0).to(tl.uint32, bitcast=True).to(tl.int64) & 0x7FFFFFFF
    ix = tl.where(ix < 0x00800000, (scaled - (23 << 23)) & 0xFFFFFFFF, ix)
    # log2(x) = k + log2(c_i) + log1p(z/c_i - 1)/ln2
    tmp = (ix - 0x3F330000) & 0xFFFFFFFF
    i = ((tmp >> 19) & 15).to(tl.int32)
    top = tmp & 0xFF800000
    z = ((ix - top) & 0xFFFFFFFF).to(tl.uint32).to(tl.float32, bitcast=True).to(tl.float64)
    k = tl.where(top >= 0x80000000, top - 0x100000000, top) >> 23  # the int32 of the bits, shifted arithmetically
    invc = tl.load(dbl_ptr + i)
    logc = tl.load(dbl_ptr + 16 + i)
    r = z * invc - 1.0
    y0 = logc + k.to(tl.float64)
    r2 = r * r
    y = tl.load(dbl_ptr + 32) * r + tl.load(dbl_ptr + 33)
    p = tl.load(dbl_ptr + 34) * r + tl.load(dbl_ptr + 35)
    r4 = r2 * r2
    q = tl.load(dbl_ptr + 36) * r + y0
    q = p * r2 + q
    logx = y * r4 + q
    # 2**(y log2 x) = 2**(j/32) * 2**rr
    ylogx = tl.load(dbl_ptr + 41) * logx
    shift = tl.load(dbl_ptr + 40)
    kd = ylogx + shift
    ki = kd.to(tl.int64, bitcast=True)
    rr = ylogx - (kd - shift)
    s = (tl.load(bits_ptr + (ki & 31).to(tl.int32)) + (ki << 47)).to(tl.float64, bitcast=True)
    zz = tl.load(dbl_ptr + 37) * rr + tl.load(dbl_ptr + 38)
    rr2 = rr * rr
    yy = tl.load(dbl_ptr + 39) * rr + 1.0
    yy = zz * rr2 + yy
    out = (yy * s).to(tl.float32)
    return tl.where(x == 0.0, 0.0, out)
