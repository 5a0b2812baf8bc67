"""One DSSIM scale's Lab with pre-blurred a/b, from linear RGB or straight from uint8 sRGB codes.

    dssim_prep(lin (N, 3, H, W), alpha (N, 1, H, W), has_alpha) -> (N, 3, H, W): L, blur(a), blur(b)
    dssim_srgb8_prep(raw uint8 (N, 3, H, W)) -> (N, 3, H, W) float32: the same of dssim's linearised codes
    dssim_srgb8_half(raw uint8 (N, 3, H, W)) -> (N, 3, H // 2, W // 2) float32: the next scale's linear RGB

The colour kernel (``dssim_lab``) writes L into the output and a, b into a two-plane scratch that the blur kernel
(``dssim_blur``) reads and writes into the output's channels 1-2: no concatenation copy. For uint8 input the
colour kernel reads the codes and looks them up in dssim's 256-entry table itself, and ``dssim_srgb8_half`` does
the first 2x2 box average from the codes too, so no full-size float copy of the image is made. All values are
bit-identical to the twins (:func:`fusedsim.families.dssim.twin.dssim_prep_ref` and friends): the same float32
operations in the same order, nothing contracted. Forward only.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedsim.core.launch import Launcher
from fusedsim.core.state import cached
from fusedsim.families.dssim.blur_kernel import dssim_blur_into
from fusedsim.families.dssim.lab_kernel import dssim_lab_into, srgb8_table
from fusedsim.core.moments.twin import compute_dtype
from fusedsim.families.dssim.ops import dssim_prep, dssim_srgb8_half, dssim_srgb8_prep

__all__ = ["dssim_prep_fwd", "dssim_srgb8_half_fwd", "dssim_srgb8_prep_fwd"]


@dssim_prep.triton_launcher
def dssim_prep_fwd(lin: torch.Tensor, alpha: torch.Tensor, has_alpha: bool) -> torch.Tensor:
    """L and blurred a, b (N, 3, H, W), contiguous, compute dtype (float32 for uint8 codes)."""
    dtype = torch.float32 if lin.dtype == torch.uint8 else compute_dtype(lin.dtype)
    n, _, h, w = lin.shape
    out = torch.empty((n, 3, h, w), dtype=dtype, device=lin.device)
    ab = torch.empty((n, 2, h, w), dtype=dtype, device=lin.device)
    dssim_lab_into(lin, alpha, has_alpha, out, ab)
    dssim_blur_into(ab, out[:, 1:])
    return out


@dssim_srgb8_prep.triton_launcher
def dssim_srgb8_prep_fwd(raw: torch.Tensor) -> torch.Tensor:
    return dssim_prep_fwd(raw, raw, False)


@triton.jit
def _srgb8_half_kernel(RAW, LUT, OUT, HO, WO, sn, sc, sh, sw, BLOCK: tl.constexpr):
    plane = tl.program_id(1)  # n * 3 + channel
    pix = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = pix < HO * WO
    y = pix // WO
    x = pix % WO
    base = RAW + (plane // 3).to(tl.int64) * sn + (plane % 3).to(tl.int64) * sc
    p = base + (2 * y).to(tl.int64) * sh + (2 * x).to(tl.int64) * sw
    a = tl.load(LUT + tl.load(p, mask=ok, other=0).to(tl.int32))
    b = tl.load(LUT + tl.load(p + sw, mask=ok, other=0).to(tl.int32))
    c = tl.load(LUT + tl.load(p + sh, mask=ok, other=0).to(tl.int32))
    d = tl.load(LUT + tl.load(p + sh + sw, mask=ok, other=0).to(tl.int32))
    tl.store(OUT + plane.to(tl.int64) * HO * WO + pix, (a + b + c + d) * 0.25, mask=ok)  # dssim's order


@cached(maxsize=64)
def _half_launcher(shape, strides) -> tuple[Launcher, tuple]:
    n, c, h, w = shape
    ho, wo = h // 2, w // 2
    block = 512
    launch = Launcher(_srgb8_half_kernel, (max(1, triton.cdiv(ho * wo, block)), n * c), num_warps=4,
                      enable_fp_fusion=False)
    return launch, (ho, wo, *strides, block)


@dssim_srgb8_half.triton_launcher
def dssim_srgb8_half_fwd(raw: torch.Tensor) -> torch.Tensor:
    """(N, 3, H // 2, W // 2) float32 linear RGB, 2x2 box average of the linearised codes (N, 3, H, W)."""
    n, c, h, w = raw.shape
    out = torch.empty((n, c, h // 2, w // 2), dtype=torch.float32, device=raw.device)
    if out.numel():
        launch, tail = _half_launcher(tuple(raw.shape), raw.stride())
        launch(raw, srgb8_table(raw.device), out, *tail)
    return out
