"""MS-SSIM downsampling of both images in one launch: 2x average pooling with pytorch-msssim's zero padding of
(size % 2) per side, counted in the mean (``avg_pool2d(x, 2, padding=size % 2)``).

    avg_pool_half(x, y) -> stacked (2, N, C, ceil(H/2), ceil(W/2)) in the input dtype

Pooled pixel (i, j) averages rows 2i - H%2 .. 2i - H%2 + 1 and the same columns (out-of-image taps are zeros),
summed in float32 (float64 for float64) in row-major order and scaled by 1/4 (exact). Forward only: the MS-SSIM
backward applies the adjoint inside the SSIM backward kernel (``ops/ssim.py``). MS-SSIM builds its whole pyramid
with ``ops/ms_pyramid.py`` (one launch, bit-identical to this kernel level by level); this one is its reference
and the ``avg_pool_half`` op.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedsim.core.launch import Launcher
from fusedsim.core.moments.twin import compute_dtype
from fusedsim.core.state import cached
from fusedsim.families.ssim.ops import avg_pool_half


@triton.jit
def _avg_pool_half_2d_kernel(X, Y, OUT, H, W, HO, WO, sxn, sxc, sxh, sxw, syn, syc, syh, syw, C, plane_out,
                             ACC: tl.constexpr, BH: tl.constexpr, BW: tl.constexpr):
    pid_w = tl.program_id(0)
    pid_h = tl.program_id(1)
    nc = tl.program_id(2)
    n = nc // C
    c = nc % C
    rows = pid_h * BH + tl.arange(0, BH)[:, None]
    cols = pid_w * BW + tl.arange(0, BW)[None, :]
    out_ok = (rows < HO) & (cols < WO)
    r0 = 2 * rows - H % 2
    c0 = 2 * cols - W % 2
    xb = X + n.to(tl.int64) * sxn + c.to(tl.int64) * sxc
    yb = Y + n.to(tl.int64) * syn + c.to(tl.int64) * syc
    acc_x = tl.zeros([BH, BW], ACC)
    acc_y = tl.zeros([BH, BW], ACC)
    for dr in tl.static_range(2):
        for dc in tl.static_range(2):
            r = r0 + dr
            cc = c0 + dc
            m = out_ok & (r >= 0) & (r < H) & (cc >= 0) & (cc < W)
            acc_x += tl.load(xb + r.to(tl.int64) * sxh + cc * sxw, mask=m, other=0.0).to(ACC)
            acc_y += tl.load(yb + r.to(tl.int64) * syh + cc * syw, mask=m, other=0.0).to(ACC)
    pix = (nc.to(tl.int64) * HO + rows) * WO + cols
    tl.store(OUT + pix, (acc_x * 0.25).to(OUT.dtype.element_ty), mask=out_ok)
    tl.store(OUT + plane_out + pix, (acc_y * 0.25).to(OUT.dtype.element_ty), mask=out_ok)


class AvgPoolPlan:
    """Pooling of one (shape, strides, dtype) pair: ``forward(x, y) -> (stacked (2, N, C, H', W'), ())``."""

    def __init__(self, shape, sx, sy, dtype: torch.dtype, device: torch.device) -> None:
        n, c, h, w = shape
        self.out_shape = (2, n, c, (h + h % 2) // 2, (w + w % 2) // 2)
        ho, wo = self.out_shape[3:]
        self.dtype = dtype
        bh, bw = 8, 64
        grid = (triton.cdiv(wo, bw), triton.cdiv(ho, bh), n * c)
        acc = tl.float64 if compute_dtype(dtype) == torch.float64 else tl.float32
        self._launch = Launcher(_avg_pool_half_2d_kernel, grid, num_warps=4)
        self._tail = (h, w, ho, wo, *sx, *sy, c, n * c * ho * wo, acc, bh, bw)

    def forward(self, x: torch.Tensor, y: torch.Tensor, out: torch.Tensor | None = None):
        """``out``: an optional contiguous (2, N, C, H', W') buffer of the input dtype to write into."""
        if out is None:
            out = torch.empty(self.out_shape, dtype=self.dtype, device=x.device)
        self._launch(x, y, out, *self._tail)
        return out, ()


@cached(maxsize=256)
def avg_pool_plan(shape, sx, sy, dtype, device) -> AvgPoolPlan:
    return AvgPoolPlan(shape, sx, sy, dtype, device)


@avg_pool_half.triton_plan
def avg_pool_op_plan(tensors, scalars) -> AvgPoolPlan:
    x, y = tensors
    if x.dim() != 4:
        raise ValueError("avg_pool_half runs on (N, C, H, W) images")
    return avg_pool_plan(tuple(x.shape), x.stride(), y.stride(), x.dtype, x.device)
