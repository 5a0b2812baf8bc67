"""libvmaf's float SSIM steps (``_iqa_decimate`` and the ``_iqa_ssim`` maps) as Triton kernels, bit-exact.

The twins (:func:`~fusedsim.families.vmaf.float_ssim_twin.iqa_decimate_ref`,
:func:`~fusedsim.families.vmaf.float_ssim_twin.iqa_ssim_maps_ref`) spell out libvmaf's arithmetic types: every filter tap
is a float32 product accumulated in a double in tap order and stored as float32; the SSIM terms mix float32 and
double exactly as libvmaf's C does. The kernels do the same operations in the same order and are compiled without
floating-point contraction (``enable_fp_fusion=False``: an FMA would skip the rounding of the products), with
correctly rounded division and square root (``div_rn``, ``sqrt_rn``), so their results are the twins' bits.

* ``iqa_decimate_fwd(img, kernel, factor)``: ``(N, H, W)`` float32 -> ``(N, H//f + (H&1), W//f + (W&1))``; one
  program per block of output pixels of a frame, taps read with libvmaf's single mirror reflection.
* ``iqa_ssim_maps_fwd(ref, cmp)``: ``(N, H, W)`` float32 -> ``(N, 4, H-10, W-10)`` float64 (``l*c*s``, ``l``,
  ``c``, ``s``) in two passes: the horizontal 11-tap pass of the five products into a float32 buffer
  ``(N, 5, H, W-10)`` (libvmaf's row cache), then the vertical pass and the SSIM terms.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedsim.core.launch import on_tensors_device
from fusedsim.families.vmaf.float_ssim_twin import GAUSS_LEN, GAUSS_WINDOW, SSIM_C1, SSIM_C2, SSIM_C3
from fusedsim.families.vmaf.ops import iqa_decimate, iqa_ssim_maps

__all__ = ["iqa_decimate_fwd", "iqa_ssim_maps_fwd"]

_BLOCK = 256


@triton.jit
def _mirror(i, n):
    """libvmaf's KBND_SYMMETRIC (one reflection), then clamped so that no address leaves the frame."""
    i = tl.where(i < 0, -1 - i, i)
    i = tl.where(i >= n, 2 * n - 1 - i, i)
    return tl.minimum(tl.maximum(i, 0), n - 1)


@triton.jit
def _iqa_decimate_kernel(src, ker, dst, H, W, SH, SW, FACTOR, K: tl.constexpr, BLOCK: tl.constexpr):
    frame = tl.program_id(1).to(tl.int64)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < SH * SW
    y = offs // SW
    x = offs % SW
    base = src + frame * H * W
    acc = tl.zeros([BLOCK], dtype=tl.float64)
    for v in tl.static_range(K):
        row = _mirror(y * FACTOR + (v - K // 2), H)
        for u in tl.static_range(K):
            col = _mirror(x * FACTOR + (u - K // 2), W)
            tap = tl.load(ker + v * K + u)
            value = tl.load(base + row * W + col, mask=mask, other=0.0)
            acc += (value * tap).to(tl.float64)
    tl.store(dst + frame * SH * SW + offs, acc.to(tl.float32), mask=mask)


@triton.jit
def _iqa_hpass_kernel(ref, cmp, win, out, H, W, WV, TAPS: tl.constexpr, BLOCK: tl.constexpr):
    """Horizontal pass of mu_r, mu_c, E[r²], E[c²], E[rc] over the valid columns of one row."""
    row = tl.program_id(1).to(tl.int64)  # frame * H + y
    frame = row // H
    y = row % H
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < WV
    a0 = tl.zeros([BLOCK], dtype=tl.float64)
    a1 = tl.zeros([BLOCK], dtype=tl.float64)
    a2 = tl.zeros([BLOCK], dtype=tl.float64)
    a3 = tl.zeros([BLOCK], dtype=tl.float64)
    a4 = tl.zeros([BLOCK], dtype=tl.float64)
    for k in tl.static_range(TAPS):
        g = tl.load(win + k)
        r = tl.load(ref + row * W + offs + k, mask=mask, other=0.0)
        c = tl.load(cmp + row * W + offs + k, mask=mask, other=0.0)
        a0 += (r * g).to(tl.float64)
        a1 += (c * g).to(tl.float64)
        a2 += ((r * r) * g).to(tl.float64)
        a3 += ((c * c) * g).to(tl.float64)
        a4 += ((r * c) * g).to(tl.float64)
    plane = H * WV
    dst = out + frame * 5 * plane + y * WV + offs
    tl.store(dst, a0.to(tl.float32), mask=mask)
    tl.store(dst + plane, a1.to(tl.float32), mask=mask)
    tl.store(dst + 2 * plane, a2.to(tl.float32), mask=mask)
    tl.store(dst + 3 * plane, a3.to(tl.float32), mask=mask)
    tl.store(dst + 4 * plane, a4.to(tl.float32), mask=mask)


@triton.jit
def _vpass(src, win, offs, mask, WV, TAPS: tl.constexpr, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], dtype=tl.float64)
    for k in tl.static_range(TAPS):
        g = tl.load(win + k)
        acc += (tl.load(src + k * WV + offs, mask=mask, other=0.0) * g).to(tl.float64)
    return acc.to(tl.float32)


@triton.jit
def _iqa_ssim_terms_kernel(hz, win, out, H, HV, WV, C1, C2, C3, TAPS: tl.constexpr, BLOCK: tl.constexpr):
    """Vertical pass of the five row-filtered maps, then libvmaf's SSIM terms of one valid row."""
    row = tl.program_id(1).to(tl.int64)  # frame * HV + y
    frame = row // HV
    y = row % HV
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < WV
    plane = H * WV
    src = hz + frame * 5 * plane + y * WV
    mu_r = _vpass(src, win, offs, mask, WV, TAPS, BLOCK)
    mu_c = _vpass(src + plane, win, offs, mask, WV, TAPS, BLOCK)
    var_r = _vpass(src + 2 * plane, win, offs, mask, WV, TAPS, BLOCK)
    var_c = _vpass(src + 3 * plane, win, offs, mask, WV, TAPS, BLOCK)
    cov = _vpass(src + 4 * plane, win, offs, mask, WV, TAPS, BLOCK)
    var_r = var_r - mu_r * mu_r
    var_c = var_c - mu_c * mu_c
    var_r = tl.where(var_r < 0, 0.0, var_r)  # MAX(0, v): NaN stays NaN
    var_c = tl.where(var_c < 0, 0.0, var_c)
    cov = cov - mu_r * mu_c
    sigma_rc = tl.sqrt((var_r * var_c).to(tl.float64)).to(tl.float32)
    l_num = (2.0 * mu_r.to(tl.float64)) * mu_c.to(tl.float64) + C1
    l_den = ((mu_r * mu_r + mu_c * mu_c) + C1).to(tl.float64)
    lum = l_num / l_den
    c_num = 2.0 * sigma_rc.to(tl.float64) + C2
    c_den = ((var_r + var_c) + C2).to(tl.float64)
    con = c_num / c_den
    cov = tl.where((cov < 0) & (sigma_rc <= 0), 0.0, cov)
    struct = tl.div_rn(cov + C3, sigma_rc + C3).to(tl.float64)
    prod = (lum * con) * struct
    out_plane = HV * WV
    dst = out + frame * 4 * out_plane + y * WV + offs
    tl.store(dst, prod, mask=mask)
    tl.store(dst + out_plane, lum, mask=mask)
    tl.store(dst + 2 * out_plane, con, mask=mask)
    tl.store(dst + 3 * out_plane, struct, mask=mask)


def _grid_block(width: int) -> int:
    return min(_BLOCK, max(32, triton.next_power_of_2(width)))


@iqa_decimate.triton_launcher
@on_tensors_device
def iqa_decimate_fwd(img: torch.Tensor, kernel: torch.Tensor, factor: int) -> torch.Tensor:
    """``_iqa_decimate`` of float32 frames ``(N, H, W)`` with a ``(k, k)`` float32 kernel; see the module doc."""
    img = img.contiguous()
    kernel = kernel.to(device=img.device, dtype=torch.float32).contiguous()
    n, h, w = img.shape
    sh, sw = h // factor + (h & 1), w // factor + (w & 1)
    out = torch.empty((n, sh, sw), dtype=torch.float32, device=img.device)
    if out.numel():
        grid = (triton.cdiv(sh * sw, _BLOCK), n)
        _iqa_decimate_kernel[grid](img, kernel, out, h, w, sh, sw, factor, K=kernel.shape[0], BLOCK=_BLOCK,
                                   enable_fp_fusion=False)
    return out


_WINDOWS: dict[torch.device, torch.Tensor] = {}


@iqa_ssim_maps.triton_launcher
@on_tensors_device
def iqa_ssim_maps_fwd(ref: torch.Tensor, cmp: torch.Tensor) -> torch.Tensor:
    """``(N, 4, H-10, W-10)`` float64 maps of ``l*c*s``, ``l``, ``c``, ``s`` of float32 frames ``(N, H, W)``."""
    ref, cmp = ref.contiguous(), cmp.contiguous()
    n, h, w = ref.shape
    hv, wv = h - GAUSS_LEN + 1, w - GAUSS_LEN + 1
    out = torch.empty((n, 4, hv, wv), dtype=torch.float64, device=ref.device)
    if out.numel() == 0:
        return out
    win = _WINDOWS.get(ref.device)
    if win is None:
        win = _WINDOWS[ref.device] = torch.from_numpy(GAUSS_WINDOW.copy()).to(ref.device)
    hz = torch.empty((n, 5, h, wv), dtype=torch.float32, device=ref.device)
    block = _grid_block(wv)
    _iqa_hpass_kernel[(triton.cdiv(wv, block), n * h)](ref, cmp, win, hz, h, w, wv, TAPS=GAUSS_LEN, BLOCK=block,
                                                        enable_fp_fusion=False)
    _iqa_ssim_terms_kernel[(triton.cdiv(wv, block), n * hv)](
        hz, win, out, h, hv, wv, float(SSIM_C1), float(SSIM_C2), float(SSIM_C3),
        TAPS=GAUSS_LEN, BLOCK=block, enable_fp_fusion=False)
    return out
