"""IW-SSIM's grey conversion straight from uint8 sRGB codes (no float64 copy of the RGB image).

    iwssim_grey8(raw uint8 (N, 3, H, W), luma (3,) float64, rounded) -> (N, 1, H, W) float64

``x = code / 255 · 255`` (the values the float path sees), ``kr·x_R + kg·x_G + kb·x_B`` added left to right with
no fused multiply-add, then ``floor(v + 0.5)`` when ``rounded`` (MATLAB's ``rgb2gray`` on uint8): bit-identical to
the twin :func:`fusedsim.families.iwssim.twin.grey8_ref`. The coefficients come from a float64 tensor (kernel
float arguments would be float32). Forward only.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedsim.core.launch import Launcher
from fusedsim.core.state import cached
from fusedsim.families.iwssim.ops import iwssim_grey8

__all__ = ["iwssim_grey8_fwd"]


@triton.jit
def _iwssim_grey8_kernel(RAW, LUMA, OUT, H, W, sn, sc, sh, sw, ROUNDED: tl.constexpr, BLOCK: tl.constexpr):
    n = tl.program_id(1)
    pix = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = pix < H * W
    y = pix // W
    x = pix % W
    base = RAW + n.to(tl.int64) * sn + y.to(tl.int64) * sh + x.to(tl.int64) * sw
    r = tl.load(base, mask=ok, other=0).to(tl.float64) / 255.0 * 255.0
    g = tl.load(base + sc, mask=ok, other=0).to(tl.float64) / 255.0 * 255.0
    b = tl.load(base + 2 * sc, mask=ok, other=0).to(tl.float64) / 255.0 * 255.0
    v = tl.load(LUMA) * r + tl.load(LUMA + 1) * g + tl.load(LUMA + 2) * b
    if ROUNDED:
        v = tl.floor(v + 0.5)
    tl.store(OUT + n.to(tl.int64) * H * W + pix, v, mask=ok)


@cached(maxsize=64)
def _launcher(shape, strides, rounded) -> tuple[Launcher, tuple]:
    n, _, h, w = shape
    block = 1024
    launch = Launcher(_iwssim_grey8_kernel, (triton.cdiv(h * w, block), n), num_warps=4, enable_fp_fusion=False)
    return launch, (h, w, *strides, rounded, block)


@iwssim_grey8.triton_launcher
def iwssim_grey8_fwd(raw: torch.Tensor, luma: torch.Tensor, rounded: bool) -> torch.Tensor:
    """Grey (N, 1, H, W) float64 of uint8 sRGB codes (N, 3, H, W), any strides (see the module docstring)."""
    n, _, h, w = raw.shape
    out = torch.empty((n, 1, h, w), dtype=torch.float64, device=raw.device)
    launch, tail = _launcher(tuple(raw.shape), raw.stride(), bool(rounded))
    launch(raw, luma.to(torch.float64).contiguous(), out, *tail)
    return out
