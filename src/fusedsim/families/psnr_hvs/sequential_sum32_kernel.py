"""Bit-exact left-to-right float32 sum on the GPU (``float s = 0; for (...) s += x[i];``), one program per row.

The float32 form of :mod:`fusedsim.families.vmaf.sequential_sum_kernel`'s exact block step (read its docstring
for the argument): while ``s + t`` stays in the binade of ``s`` (spacing ``u = 2^(e-23)``), ``fl32(s + t) =
s + u * rn(t / u)``, so a block of terms is an integer prefix sum (int64; ``t / u`` is exact in double) up to the
first term that leaves the binade or is a tie, which is added with one float32 addition. The sum of PSNR-HVS's
non-negative terms crosses a few dozen binades per plane, so almost every block is one step.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedsim.core.backend import triton_interpreting
from fusedsim.core.launch import on_tensors_device

__all__ = ["sequential_sum32"]


@triton.jit
def _advance32(row_ptr, pos, end, s, B: tl.constexpr):
    """Add ``x[pos:]`` (float32) to the exact float32 running sum ``s`` up to and including the first event."""
    lane = tl.arange(0, B)
    offs = pos + lane
    mask = offs < end
    t = tl.load(row_ptr + offs, mask=mask, other=0.0).to(tl.float64)
    nvalid = tl.minimum(end - pos, B)

    eb = (s.to(tl.int32, bitcast=True) >> 23) & 0xFF
    fast = (eb >= 2) & (eb <= 254)  # s is normal and finite
    ebc = tl.where(fast, eb, 127)
    sd = s.to(tl.float64)
    sg = tl.where(sd < 0, -1.0, 1.0).to(tl.float64)
    u = ((ebc.to(tl.int64) - 150 + 1023) << 52).to(tl.float64, bitcast=True)  # 2**(e - 23)
    inv_u = ((150 - ebc.to(tl.int64) + 1023) << 52).to(tl.float64, bitcast=True)
    s0 = (sd * sg * inv_u).to(tl.int64)  # |s| / u in [2**23, 2**24)

    y = t * sg * inv_u
    finite = tl.abs(y) < 9007199254740992.0
    yc = tl.where(finite, y, 0.0)
    qf = tl.floor(yc)
    frac = yc - qf
    qi = qf.to(tl.int64)
    q = qi + (frac > 0.5).to(tl.int64)
    special = (~finite) | (frac == 0.5)
    incl = tl.cumsum(q, 0)
    excl = incl - q
    pos_units = s0 + excl + qi
    ok = (~special) & (pos_units >= 8388608) & (pos_units <= 16777215)
    first_bad = tl.min(tl.where(mask & (~ok), lane, B), 0)
    first_nonzero = tl.min(tl.where(mask & (t != 0.0), lane, B), 0)
    j = tl.where(fast, first_bad, tl.where(sd == 0.0, first_nonzero, 0))

    all_ok = j >= nvalid
    s_all = tl.where(fast, (sg * (s0 + tl.sum(q, 0)).to(tl.float64) * u).to(tl.float32), s)
    s_before = tl.where(fast, (sg * (s0 + tl.sum(tl.where(lane == j, excl, 0), 0)).to(tl.float64) * u).to(tl.float32),
                        s)
    t_j = tl.sum(tl.where(lane == j, t, 0.0), 0).to(tl.float32)
    new_s = tl.where(all_ok, s_all, s_before + t_j)
    new_pos = tl.where(all_ok, pos + nvalid, pos + j + 1)

    nonfinite = eb == 255  # a NaN sum stays NaN, an infinite one stays unless a NaN or the opposite infinity comes
    kills = mask & ((t != t) | (t == -sd))
    killed = tl.max(kills.to(tl.int32), 0) > 0
    new_s = tl.where(nonfinite, tl.where(killed, s - s, s), new_s)
    new_pos = tl.where(nonfinite, pos + nvalid, new_pos)
    return new_s, new_pos


@triton.jit
def _seqsum32_kernel(x_ptr, stride_x, n, out_ptr, B: tl.constexpr):
    f = tl.program_id(0).to(tl.int64)
    row_ptr = x_ptr + f * stride_x
    s = tl.full([], 0.0, tl.float32)
    pos = tl.full([], 0, tl.int64)
    while pos < n:
        s, pos = _advance32(row_ptr, pos, n, s, B)
    tl.store(out_ptr + f, s + 0.0)


@on_tensors_device
def sequential_sum32(x: torch.Tensor, block: int | None = None) -> torch.Tensor:
    """Left-to-right float32 sum of each row of ``x`` ``(N, L)`` float32 (CUDA, or CPU under the interpreter):
    ``(N,)`` float32, bit-identical to ``s = 0.0f; for v in row: s += v``."""
    if x.dim() != 2 or x.dtype != torch.float32:
        raise ValueError(f"x must be (N, L) float32; got {tuple(x.shape)} {x.dtype}")
    n_rows, length = x.shape
    out = torch.zeros(n_rows, dtype=torch.float32, device=x.device)
    if n_rows == 0 or length == 0:
        return out
    if x.stride(1) != 1:
        x = x.contiguous()
    blk = block or (4096 if triton_interpreting() else 1024)
    _seqsum32_kernel[(n_rows,)](x, x.stride(0), length, out, B=blk, num_warps=4, enable_fp_fusion=False)
    return out
