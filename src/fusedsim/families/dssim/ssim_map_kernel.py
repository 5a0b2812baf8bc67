"""DSSIM's per-scale SSIM map on the GPU, fused: blurred moments of the three Lab channels, their channel means,
and the SSIM formula in one kernel, with nothing but the map written.

    dssim_ssim_map(lab1 (N, 3, H, W), lab2 (N, 3, H, W)) -> map (N, H, W)

The a/b channels must already be pre-blurred (:mod:`fusedsim.families.dssim.blur_kernel`). Per output tile and channel, the
five moments mu1, mu2, E[x²], E[y²], E[xy] come from dssim's blur (:func:`~fusedsim.families.dssim.blur_kernel.five_tap`,
horizontal on the 5 rows needed, then vertical; products formed per tap, as dssim's ``blur_mul``); then, as in
dssim's ``compare_scale_3ch``::

    mu1_sq = mean_c mu1², mu2_sq = mean_c mu2², mu12 = mean_c mu1·mu2           (mean_c = (c0 + c1 + c2)·(1/3))
    s1 = mean_c (E[x²] - mu1²), s2 = mean_c (E[y²] - mu2²), s12 = mean_c (E[xy] - mu1·mu2)
    map = (2·mu12 + c1)(2·s12 + c2) / ((mu1_sq + mu2_sq + c1)(s1 + s2 + c2))

in dssim's order without contraction and with IEEE division, so float32 maps equal the twin
:func:`fusedsim.families.dssim.twin.dssim_ssim_map_ref` bit for bit. Forward only.

The channels and the 5 rows are runtime loops over one row's body (the rows a sliding window of 5 states per
moment), so that the kernel compiles for sm_90 in under 1 s; fully unrolled it took ~8 s offline (11.9 s on an
H200), with 746 kB of PTX and register spills.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedsim.core.launch import Launcher
from fusedsim.core.state import cached
from fusedsim.families.dssim.blur_kernel import (
    BLUR_CONSTANTS,
    five_tap,
    ieee_div,
    sym_index,
    tile_shape,
)
import fusedsim.families.dssim.twin as spec
from fusedsim.core.moments.twin import compute_dtype
from fusedsim.families.dssim.ops import dssim_ssim_map

__all__ = ["dssim_ssim_map_fwd"]


@triton.jit
def _five_zeros(BH: tl.constexpr, BW: tl.constexpr, ACC: tl.constexpr):
    """Five distinct zero tiles (initial states of a loop's sliding window)."""
    return (tl.zeros([BH, BW], ACC), tl.zeros([BH, BW], ACC), tl.zeros([BH, BW], ACC), tl.zeros([BH, BW], ACC),
            tl.zeros([BH, BW], ACC))


@triton.jit
def _row5(xb, yb, row_x, row_y, xc0, xc1, xc2, xc3, xc4, yc0, yc1, yc2, yc3, yc4, cols, W, ok, ACC: tl.constexpr,
          O: tl.constexpr, I: tl.constexpr, M: tl.constexpr, EC: tl.constexpr, EN: tl.constexpr):
    """Horizontal 5-tap of x, y, x², y², xy on one row."""
    x0 = tl.load(xb + row_x + xc0, mask=ok, other=0.0).to(ACC)
    x1 = tl.load(xb + row_x + xc1, mask=ok, other=0.0).to(ACC)
    x2 = tl.load(xb + row_x + xc2, mask=ok, other=0.0).to(ACC)
    x3 = tl.load(xb + row_x + xc3, mask=ok, other=0.0).to(ACC)
    x4 = tl.load(xb + row_x + xc4, mask=ok, other=0.0).to(ACC)
    y0 = tl.load(yb + row_y + yc0, mask=ok, other=0.0).to(ACC)
    y1 = tl.load(yb + row_y + yc1, mask=ok, other=0.0).to(ACC)
    y2 = tl.load(yb + row_y + yc2, mask=ok, other=0.0).to(ACC)
    y3 = tl.load(yb + row_y + yc3, mask=ok, other=0.0).to(ACC)
    y4 = tl.load(yb + row_y + yc4, mask=ok, other=0.0).to(ACC)
    hx = five_tap(x0, x1, x2, x3, x4, cols, W, O, I, M, EC, EN)
    hy = five_tap(y0, y1, y2, y3, y4, cols, W, O, I, M, EC, EN)
    hxx = five_tap(x0 * x0, x1 * x1, x2 * x2, x3 * x3, x4 * x4, cols, W, O, I, M, EC, EN)
    hyy = five_tap(y0 * y0, y1 * y1, y2 * y2, y3 * y3, y4 * y4, cols, W, O, I, M, EC, EN)
    hxy = five_tap(x0 * y0, x1 * y1, x2 * y2, x3 * y3, x4 * y4, cols, W, O, I, M, EC, EN)
    return hx, hy, hxx, hyy, hxy


@triton.jit
def _dssim_ssim_map_kernel(X, Y, OUT, H, W, sxn, sxc, sxh, sxw, syn, syc, syh, syw, O: tl.constexpr,
                           I: tl.constexpr, M: tl.constexpr, EC: tl.constexpr, EN: tl.constexpr, C1: tl.constexpr,
                           C2: tl.constexpr, INV3: tl.constexpr, ACC: tl.constexpr, BH: tl.constexpr,
                           BW: tl.constexpr):
    n = tl.program_id(2)
    rows = tl.program_id(1) * BH + tl.arange(0, BH)[:, None]
    cols = tl.program_id(0) * BW + tl.arange(0, BW)[None, :]
    ok = (rows < H) & (cols < W)
    xb = X + n.to(tl.int64) * sxn
    yb = Y + n.to(tl.int64) * syn
    i0 = sym_index(cols - 2, W).to(tl.int64)
    i1 = sym_index(cols - 1, W).to(tl.int64)
    i2 = sym_index(cols, W).to(tl.int64)
    i3 = sym_index(cols + 1, W).to(tl.int64)
    i4 = sym_index(cols + 2, W).to(tl.int64)
    xc0, xc1, xc2, xc3, xc4 = i0 * sxw, i1 * sxw, i2 * sxw, i3 * sxw, i4 * sxw
    yc0, yc1, yc2, yc3, yc4 = i0 * syw, i1 * syw, i2 * syw, i3 * syw, i4 * syw
    # channel sums from -0.0, the exact identity of +: (-0.0 + c0) + c1 + c2 has the bits of dssim's c0 + c1 + c2
    s_m11 = tl.full([BH, BW], -0.0, ACC)
    s_m22 = tl.full([BH, BW], -0.0, ACC)
    s_m12 = tl.full([BH, BW], -0.0, ACC)
    s_v1 = tl.full([BH, BW], -0.0, ACC)
    s_v2 = tl.full([BH, BW], -0.0, ACC)
    s_v12 = tl.full([BH, BW], -0.0, ACC)
    # runtime loops over the channels and the 5 rows of the vertical taps (one row body in the code): unrolled,
    # 15 row bodies in straight-line code took ~8 s to compile for sm_90 (11.9 s on an H200) and spilled
    for _c in range(3):
        # the 5 rows' horizontal moments as a sliding window (a*: x, b*: y, c*: x², d*: y², e*: xy). Each state
        # starts as its own tensor: Triton carries a name whose IR value changed, so a0 = a1 from one shared zero
        # would look unchanged and a0 would not be carried
        a0, a1, a2, a3, a4 = _five_zeros(BH, BW, ACC)
        b0, b1, b2, b3, b4 = _five_zeros(BH, BW, ACC)
        c0, c1, c2, c3, c4 = _five_zeros(BH, BW, ACC)
        d0, d1, d2, d3, d4 = _five_zeros(BH, BW, ACC)
        e0, e1, e2, e3, e4 = _five_zeros(BH, BW, ACC)
        for j in range(5):
            r = sym_index(rows + (j - 2), H).to(tl.int64)
            hx, hy, hxx, hyy, hxy = _row5(xb, yb, r * sxh, r * syh, xc0, xc1, xc2, xc3, xc4, yc0, yc1, yc2, yc3,
                                          yc4, cols, W, ok, ACC, O, I, M, EC, EN)
            a0, a1, a2, a3, a4 = a1, a2, a3, a4, hx
            b0, b1, b2, b3, b4 = b1, b2, b3, b4, hy
            c0, c1, c2, c3, c4 = c1, c2, c3, c4, hxx
            d0, d1, d2, d3, d4 = d1, d2, d3, d4, hyy
            e0, e1, e2, e3, e4 = e1, e2, e3, e4, hxy
        mu1 = five_tap(a0, a1, a2, a3, a4, rows, H, O, I, M, EC, EN)
        mu2 = five_tap(b0, b1, b2, b3, b4, rows, H, O, I, M, EC, EN)
        e11 = five_tap(c0, c1, c2, c3, c4, rows, H, O, I, M, EC, EN)
        e22 = five_tap(d0, d1, d2, d3, d4, rows, H, O, I, M, EC, EN)
        e12 = five_tap(e0, e1, e2, e3, e4, rows, H, O, I, M, EC, EN)
        m11 = mu1 * mu1
        m22 = mu2 * mu2
        m12 = mu1 * mu2
        s_m11 += m11
        s_m22 += m22
        s_m12 += m12
        s_v1 += e11 - m11
        s_v2 += e22 - m22
        s_v12 += e12 - m12
        xb += sxc
        yb += syc
    mu1_sq = s_m11 * INV3
    mu2_sq = s_m22 * INV3
    mu1_mu2 = s_m12 * INV3
    sigma1 = s_v1 * INV3
    sigma2 = s_v2 * INV3
    sigma12 = s_v12 * INV3
    num = (2.0 * mu1_mu2 + C1) * (2.0 * sigma12 + C2)
    den = (mu1_sq + mu2_sq + C1) * (sigma1 + sigma2 + C2)
    val = ieee_div(num, den, ACC)
    tl.store(OUT + (n.to(tl.int64) * H + rows) * W + cols, val.to(OUT.dtype.element_ty), mask=ok)


@cached(maxsize=128)
def _launcher(shape, sx, sy, dtype) -> tuple[Launcher, tuple]:
    n, _, h, w = shape
    bh, bw = tile_shape()
    acc = tl.float64 if compute_dtype(dtype) == torch.float64 else tl.float32
    launch = Launcher(_dssim_ssim_map_kernel, (triton.cdiv(w, bw), triton.cdiv(h, bh), n), num_warps=4,
                      enable_fp_fusion=False)
    return launch, (h, w, *sx, *sy, *BLUR_CONSTANTS, spec.C1, spec.C2, spec.INV3, acc, bh, bw)


@dssim_ssim_map.triton_launcher
def dssim_ssim_map_fwd(lab1: torch.Tensor, lab2: torch.Tensor) -> torch.Tensor:
    """SSIM map (N, H, W), compute dtype, of two Lab images (N, 3, H, W) with pre-blurred a/b; any strides."""
    launch, tail = _launcher(tuple(lab1.shape), lab1.stride(), lab2.stride(), lab1.dtype)
    n, _, h, w = lab1.shape
    out = torch.empty((n, h, w), dtype=compute_dtype(lab1.dtype), device=lab1.device)
    launch(lab1, lab2, out, *tail)
    return out
