"""SpEED's 25x25 covariance on the GPU (Triton): one program per residual plane, libvmaf's sums in its order.

libvmaf sums each neighbour's samples in float32 and each pair's centred products in double, one position after
the other in row-major order. A program holds all 25 float32 sums, then all 32x32 double sums (pairs past 25
read zeros) and walks the positions once each time: every sum is its own sequential chain, so the values are
the host's bits (IEEE division ``div_rn``, contraction off). The plane (a few dozen samples a side, decimated by
16) stays in the L1 cache.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedsim.core.launch import on_tensors_device
from fusedsim.families.speed_chroma.gsm import BLOCK, block_grid
from fusedsim.families.speed_chroma.ops import speed_covariance
from fusedsim.families.speed_chroma.twin import check_residuals

__all__ = ["speed_covariance_fwd"]

_LANES = 32  # the 25 neighbours of a 5x5 block, padded to a power of two


@triton.jit
def _covariance_kernel(r_ptr, out_ptr, h, w, sub_h, sub_w, LANES: tl.constexpr, K: tl.constexpr):
    plane = tl.program_id(0).to(tl.int64)
    base = r_ptr + plane * h * w
    k = tl.arange(0, LANES)
    live = k < K * K
    offset = (k // K) * w + k % K  # neighbour k = (a, b) of a position: a rows down, b columns right
    count = sub_h * sub_w
    sums = tl.zeros([LANES], tl.float32)
    for i in range(sub_h):  # compute_mean: float32, position after position in row-major order
        for j in range(sub_w):
            sums = sums + tl.load(base + i * w + j + offset, mask=live, other=0.0)
    means = tl.math.div_rn(sums, tl.zeros([LANES], tl.float32) + count.to(tl.float32)).to(tl.float64)
    rows, cols = k[:, None], k[None, :]
    row_offset, col_offset = offset[:, None], offset[None, :]
    row_live, col_live = live[:, None], live[None, :]
    row_mean, col_mean = means[:, None], means[None, :]
    acc = tl.zeros([LANES, LANES], tl.float64)
    for i in range(sub_h):  # compute_cov_kernel_scalar: double, position after position
        for j in range(sub_w):
            at = base + i * w + j
            x = tl.load(at + row_offset, mask=row_live, other=0.0).to(tl.float64) - row_mean
            y = tl.load(at + col_offset, mask=col_live, other=0.0).to(tl.float64) - col_mean
            acc = acc + x * y
    cov = (acc / count.to(tl.float64)).to(tl.float32)
    tl.store(out_ptr + plane * (K * K) * (K * K) + rows * (K * K) + cols, cov, mask=row_live & col_live)


@speed_covariance.triton_launcher
@on_tensors_device
def speed_covariance_fwd(residuals: torch.Tensor) -> torch.Tensor:
    """The op ``speed_covariance`` on the residuals' device: ``(N, 25, 25)`` float32, the twin's bits."""
    check_residuals(residuals)
    n, h, w = residuals.shape
    elements = BLOCK * BLOCK
    out = torch.empty(n, elements, elements, dtype=torch.float32, device=residuals.device)
    th, tw = block_grid(h, w)
    if n:
        _covariance_kernel[(n,)](residuals.contiguous(), out, h, w, th - BLOCK + 1, tw - BLOCK + 1, LANES=_LANES,
                                 K=BLOCK, enable_fp_fusion=False)
    return out
