"""DSSIM's colour transform on the GPU: linear (premultiplied) RGB [+ alpha] -> dssim's scaled L*a*b*.

    dssim_lab(lin (N, 3, H, W), alpha (N, 1, H, W), has_alpha) -> lab (N, 3, H, W)

One program per block of pixels of one image; the math is :func:`fusedsim.families.dssim.twin.dssim_lab_ref`
in dssim's f32 order: the matrix rows and a/b as fused multiply-adds (Rust's ``mul_add``), the cube root as the
quadratic guess plus two Halley steps with IEEE-rounded division, nothing else contracted
(``enable_fp_fusion=False``). With ``has_alpha`` the pseudo-checkerboard background ``1 - alpha`` is added to
R, G and/or B by bits 16, 8, 32 of ``(x + 11) ^ (y + 11)``; otherwise ``alpha`` is not read. Forward only (the
metric's gradients go through the twin). float32 and float64 (computed in the input dtype; 16-bit in float32).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedsim.core.launch import Launcher
from fusedsim.core.state import cached
from fusedsim.families.dssim.blur_kernel import ieee_div
import fusedsim.families.dssim.twin as spec
from fusedsim.core.moments.twin import compute_dtype
from fusedsim.families.dssim.ops import dssim_lab

__all__ = ["dssim_lab_fwd", "dssim_lab_into", "srgb8_table"]


@triton.jit
def _lab_curve(t, EPS: tl.constexpr, KAPPA: tl.constexpr, OFFSET: tl.constexpr, C1: tl.constexpr,
               C0: tl.constexpr, ACC: tl.constexpr):
    safe = tl.where(t > EPS, t, 1.0)
    y = tl.fma(-0.5 * safe + C1, safe, C0)
    y3 = y * y * y
    y = ieee_div(y * (2.0 * safe + y3), 2.0 * y3 + safe, ACC)
    y3 = y * y * y
    y = ieee_div(y * (2.0 * safe + y3), 2.0 * y3 + safe, ACC)
    return tl.where(t > EPS, y - OFFSET, KAPPA * t)


@triton.jit
def _dssim_lab_kernel(LIN, LUT, ALPHA, OUT_L, OUT_AB, H, W, sn, sc, sh, sw, an, ah, aw, son_l, son_ab, off_a, off_b,
                      M00: tl.constexpr, M01: tl.constexpr, M02: tl.constexpr, M10: tl.constexpr,
                      M11: tl.constexpr, M12: tl.constexpr, M20: tl.constexpr, M21: tl.constexpr,
                      M22: tl.constexpr, EPS: tl.constexpr, KAPPA: tl.constexpr, OFFSET: tl.constexpr,
                      C1: tl.constexpr, C0: tl.constexpr,
                      LS: tl.constexpr, AS: tl.constexpr, AO: tl.constexpr, BS: tl.constexpr, BO: tl.constexpr,
                      HAS_ALPHA: tl.constexpr, U8: tl.constexpr, ACC: tl.constexpr, BLOCK: tl.constexpr):
    n = tl.program_id(1)
    pix = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = pix < H * W
    y = pix // W
    x = pix % W
    base = LIN + n.to(tl.int64) * sn + y.to(tl.int64) * sh + x.to(tl.int64) * sw
    if U8:  # sRGB codes: dssim's linear-light table
        r = tl.load(LUT + tl.load(base, mask=ok, other=0).to(tl.int32)).to(ACC)
        g = tl.load(LUT + tl.load(base + sc, mask=ok, other=0).to(tl.int32)).to(ACC)
        b = tl.load(LUT + tl.load(base + 2 * sc, mask=ok, other=0).to(tl.int32)).to(ACC)
    else:
        r = tl.load(base, mask=ok, other=0.0).to(ACC)
        g = tl.load(base + sc, mask=ok, other=0.0).to(ACC)
        b = tl.load(base + 2 * sc, mask=ok, other=0.0).to(ACC)
    if HAS_ALPHA:
        a = tl.load(ALPHA + n.to(tl.int64) * an + y.to(tl.int64) * ah + x.to(tl.int64) * aw, mask=ok,
                    other=1.0).to(ACC)
        bits = (x + 11) ^ (y + 11)
        r = tl.where((bits & 16) != 0, r + (1.0 - a), r)
        g = tl.where((bits & 8) != 0, g + (1.0 - a), g)
        b = tl.where((bits & 32) != 0, b + (1.0 - a), b)
    fx = tl.fma(b, M02, tl.fma(g, M01, r * M00))
    fy = tl.fma(b, M12, tl.fma(g, M11, r * M10))
    fz = tl.fma(b, M22, tl.fma(g, M21, r * M20))
    cx = _lab_curve(fx, EPS, KAPPA, OFFSET, C1, C0, ACC)
    cy = _lab_curve(fy, EPS, KAPPA, OFFSET, C1, C0, ACC)
    cz = _lab_curve(fz, EPS, KAPPA, OFFSET, C1, C0, ACC)
    tl.store(OUT_L + n.to(tl.int64) * son_l + pix, (cy * LS).to(OUT_L.dtype.element_ty), mask=ok)
    out = OUT_AB + n.to(tl.int64) * son_ab + pix
    tl.store(out + off_a, tl.fma(AS, cx - cy, AO).to(OUT_AB.dtype.element_ty), mask=ok)
    tl.store(out + off_b, tl.fma(BS, cy - cz, BO).to(OUT_AB.dtype.element_ty), mask=ok)


@cached(maxsize=128)
def _launcher(shape, strides, alpha_strides, dtype, has_alpha, out_layout) -> tuple[Launcher, tuple]:
    n, _, h, w = shape
    block = 512
    u8 = dtype == torch.uint8
    acc = tl.float64 if compute_dtype(dtype) == torch.float64 and not u8 else tl.float32
    m = spec.XYZ_MATRIX
    consts = (*m[0], *m[1], *m[2], spec.LAB_EPSILON, spec.LAB_KAPPA, spec.LAB_OFFSET, spec.CBRT_C1,
              spec.CBRT_C0, spec.L_SCALE,
              spec.A_SCALE, spec.A_OFFSET, spec.B_SCALE, spec.B_OFFSET)
    launch = Launcher(_dssim_lab_kernel, (triton.cdiv(h * w, block), n), num_warps=4, enable_fp_fusion=False)
    sn, sc, sh, sw = strides
    an, _, ah, aw = alpha_strides
    return launch, (h, w, sn, sc, sh, sw, an, ah, aw, *out_layout, *consts, has_alpha, u8, acc, block)


def dssim_lab_into(lin: torch.Tensor, alpha: torch.Tensor, has_alpha: bool, out_l: torch.Tensor,
                   out_ab: torch.Tensor) -> None:
    """Lab of ``lin`` (N, 3, H, W): L into ``out_l`` (N, 1+, H, W, its channel 0), a and b into channels 0 and 1 of
    ``out_ab`` (N, 2+, H, W); both of the compute dtype with contiguous planes. ``lin`` is linear RGB (any floating
    dtype, any strides) or uint8 sRGB codes (linearised by dssim's table, computed in float32). ``alpha``
    (N, 1, H, W) is read only with ``has_alpha``."""
    alpha_strides = alpha.stride() if has_alpha and alpha.dim() == 4 else (0, 0, 0, 0)
    layout = (out_l.stride(0), out_ab.stride(0), 0, out_ab.stride(1))
    launch, tail = _launcher(tuple(lin.shape), lin.stride(), alpha_strides, lin.dtype, bool(has_alpha), layout)
    launch(lin, srgb8_table(lin.device), alpha, out_l, out_ab, *tail)


@cached(maxsize=8)
def srgb8_table(device: torch.device) -> torch.Tensor:
    """dssim's 256-entry sRGB -> linear table (float32) on ``device`` (cached)."""
    return spec.srgb8_table_ref().to(device)


@dssim_lab.triton_launcher
def dssim_lab_fwd(lin: torch.Tensor, alpha: torch.Tensor, has_alpha: bool) -> torch.Tensor:
    """Lab (N, 3, H, W) in the compute dtype of ``lin`` (N, 3, H, W); ``alpha`` (N, 1, H, W) read only with
    ``has_alpha``. Any strides."""
    out = torch.empty(lin.shape, dtype=compute_dtype(lin.dtype), device=lin.device)
    dssim_lab_into(lin, alpha, has_alpha, out, out[:, 1:])
    return out
