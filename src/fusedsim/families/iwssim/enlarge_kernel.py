"""IW-SSIM's parent enlargement (the MATLAB code's ``imenlarge2``) as one kernel.

    iwssim_enlarge(parent (N, C, M, M'), height, width) -> (N, C, height, width), height <= 2M, width <= 2M'

``imenlarge2`` is a bilinear resize to 4M - 3 samples with linearly extrapolated borders, every 2nd sample kept;
per axis each output is a fixed combination of at most 4 input samples. The twin
:func:`fusedsim.families.iwssim.twin.enlarge2_ref` applies it as index gathers and multiplies, vertically then
horizontally (~24 launches and two full-size intermediates); here one program computes a tile of outputs from
the same per-axis tables (``iwssim_ref.enlarge_taps``: indices and float64 weights, padding terms of weight 0
included), the products and sums in the twin's order with no fused multiply-add: bit-identical. Per output: 16
loads (L1 hits) and ~35 flops. Forward only (the differentiable path is the twin).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedsim.core.launch import Launcher
from fusedsim.core.state import cached
from fusedsim.families.iwssim.twin import enlarge_taps
from fusedsim.families.iwssim.ops import iwssim_enlarge

__all__ = ["iwssim_enlarge"]

BH, BW = 16, 64


@triton.jit
def _enlarge_kernel(X, IY, WY, IX, WX, OUT, HO, WO, sxp, sxh, sxw, BLOCK_H: tl.constexpr, BLOCK_W: tl.constexpr):
    plane = tl.program_id(2)
    rows = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)[:, None]
    cols = tl.program_id(0) * BLOCK_W + tl.arange(0, BLOCK_W)[None, :]
    row_ok = rows < HO
    col_ok = cols < WO
    ok = row_ok & col_ok
    dtype = OUT.dtype.element_ty
    base = X + plane.to(tl.int64) * sxp
    acc = tl.zeros([BLOCK_H, BLOCK_W], dtype)
    for l in tl.static_range(4):
        col_ptr = base + tl.load(IX + cols * 4 + l, mask=col_ok, other=0).to(tl.int64) * sxw
        wx = tl.load(WX + cols * 4 + l, mask=col_ok, other=0.0).to(dtype)
        u = tl.zeros([BLOCK_H, BLOCK_W], dtype)
        for k in tl.static_range(4):
            r = tl.load(IY + rows * 4 + k, mask=row_ok, other=0).to(tl.int64)
            wy = tl.load(WY + rows * 4 + k, mask=row_ok, other=0.0).to(dtype)
            term = tl.load(col_ptr + r * sxh, mask=ok, other=0.0) * wy  # twin: x.index_select(...) * w
            if k == 0:
                u = term
            else:
                u = u + term
        term = u * wx
        if l == 0:
            acc = term
        else:
            acc = acc + term
    tl.store(OUT + (plane.to(tl.int64) * HO + rows) * WO + cols, acc, mask=ok)


@cached(maxsize=128)
def _launcher(planes: int, ho: int, wo: int, dtype: torch.dtype, strides: tuple[int, ...]) -> Launcher:
    """One launcher per grid, dtype and strides: a launcher reuses the kernel it compiled first, which Triton
    specialised on the integer arguments (a stride of 1 becomes a constant)."""
    grid = (triton.cdiv(wo, BW), triton.cdiv(ho, BH), planes)
    return Launcher(_enlarge_kernel, grid, num_warps=4, enable_fp_fusion=False)


@iwssim_enlarge.triton_launcher
def iwssim_enlarge(parent: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """``imenlarge2`` of (N, C, M, M') cropped to (height, width) <= (2M, 2M') (see the module docstring)."""
    if parent.dim() != 4 or not (0 < height <= 2 * parent.shape[-2] and 0 < width <= 2 * parent.shape[-1]):
        raise ValueError(f"iwssim_enlarge: parent must be (N, C, M, M') and 0 < (height, width) <= (2M, 2M'); "
                         f"got {tuple(parent.shape)} -> ({height}, {width})")
    n, c, m, mw = parent.shape
    out = torch.empty((n, c, height, width), dtype=parent.dtype, device=parent.device)
    if out.numel():
        iy, wy = enlarge_taps(m, height, parent.device)
        ix, wx = enlarge_taps(mw, width, parent.device)
        xp = parent.reshape(n * c, m, mw)  # a view for the usual layouts
        strides = xp.stride()
        _launcher(n * c, height, width, parent.dtype, strides)(xp, iy, wy, ix, wx, out, height, width, *strides,
                                                               BH, BW)
    return out
