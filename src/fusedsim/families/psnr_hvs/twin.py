"""libvmaf 3.2.0's ``psnr_hvs`` feature (``third_party/xiph/psnr_hvs.c``, from Daala), bit for bit: the PyTorch twin
and the specification.

Per plane (luma, Cb, Cr; integer samples, ``w x h`` as libvmaf's picture holds them) and frame pair:

* **Blocks:** 8x8 blocks at ``(y, x)`` for ``y = 0, 7, 14, ... < h - 7`` and ``x`` alike (overlapping by one
  sample), in raster order. Planes smaller than 8x8 have no block (libvmaf then divides 0 by 0).
* **Per block, float32 arithmetic in C's order** (sums accumulate left to right over ``(i, j)`` in row order):
  ``gmean = sum(v) / 64``, ``mean[q] = sum_q(v) / 16`` per quadrant ``q = (i >= 4) + 2 * (j >= 4)``;
  ``gvar = sum((v - gmean)^2) * (float32(1/63) * 64)``, ``var[q] = sum_q((v - mean[q])^2) * (float32(1/15) * 16)``;
  if ``gvar > 0``: ``gvar = (((var0 + var1) + var2) + var3) / gvar``. Reference and distorted block alike.
* **DCT:** Daala's integer 8x8 ``od_bin_fdct8x8`` (lifting steps, int32; columns first, then rows), giving
  ``C[u][v]`` (``u`` vertical, ``v`` horizontal frequency).
* **Masking:** ``mask[u][v] = float32((double(csf[u][v]) * 0.3885746225901003)^2)``;
  ``m = sum_{(u,v) != (0,0)} float32(C[u][v]^2) * mask[u][v]`` (float32, left to right);
  ``m = float32(sqrt(double(m * gvar)) / 32)``; the block's mask is the larger of the reference's and the
  distorted block's.
* **Error:** ``e = float32(|Cr - Cd|)``; off DC, ``e = 0 if e < m / mask else e - m / mask``;
  ``ret += (e * csf) * (e * csf)``: **one float32 running sum over every coefficient of every block of the plane**
  (in block raster order, then ``(u, v)`` order).
* ``ret = ret / float32(64 * blocks) / float32((2^bpc - 1)^2)`` (float32 divisions).

Per frame, in double: ``psnr_hvs_<plane> = 10 * (-log10(ret_plane))`` and
``psnr_hvs = 10 * (-log10(0.8 * ret_y + 0.1 * (ret_cb + ret_cr)))`` (identical planes give ``+inf``, which
libvmaf's JSON prints as ``null``). libvmaf takes bit depths up to 12.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from fusedsim.families.psnr_hvs.tables import CSF_TABLES

__all__ = ["BLOCK", "MASK_SCALE", "MAX_BIT_DEPTH", "STEP", "block_grid", "combine_planes", "csf_and_mask",
           "fdct8", "psnr_hvs_plane_ref", "psnr_hvs_terms_ref", "to_db"]

BLOCK = 8
STEP = 7  # blocks overlap by one sample
MASK_SCALE = 0.3885746225901003
MAX_BIT_DEPTH = 12
#: ``1 / 63.f * 64`` and ``1 / 15.f * 16`` as C evaluates them (float32, left to right).
VAR_SCALE_64 = np.float32(np.float32(1) / np.float32(63)) * np.float32(64)
VAR_SCALE_16 = np.float32(np.float32(1) / np.float32(15)) * np.float32(16)


def csf_and_mask(plane: int) -> tuple[np.ndarray, np.ndarray]:
    """The plane's CSF table and its masking table, float32 ``(8, 8)`` each (``plane``: 0 Y, 1 Cb, 2 Cr)."""
    csf = np.array(CSF_TABLES[plane], dtype=np.float32)
    scaled = csf.astype(np.float64) * MASK_SCALE
    return csf, (scaled * scaled).astype(np.float32)


def block_grid(h: int, w: int) -> tuple[int, int]:
    """Blocks per column and per row of an ``h x w`` plane: origins ``0, 7, ...`` below ``h - 7`` / ``w - 7``."""
    return max(0, -(-(h - 7) // STEP)), max(0, -(-(w - 7) // STEP))


def _half(a: torch.Tensor) -> torch.Tensor:
    """Daala's ``OD_DCT_RSHIFT(a, 1)``: ``a / 2`` rounded toward zero."""
    return (a + (a < 0).to(a.dtype)) >> 1


def _mul_shift(a: torch.Tensor, c: int, bits: int) -> torch.Tensor:
    return (a * c + (1 << (bits - 1))) >> bits


def fdct8(x: list[torch.Tensor]) -> list[torch.Tensor]:
    """Daala's integer 8-point forward DCT (``od_bin_fdct8``) of 8 integer tensors; int32 in C, no step overflows
    for samples of up to 12 bits (orthonormal: every coefficient is at most ``8 * 4095`` in 2D)."""
    t0, t4, t2, t6, t7, t3, t5, t1 = x
    t1 = t0 - t1
    t1h = _half(t1)
    t0 = t0 - t1h
    t4 = t4 + t5
    t4h = _half(t4)
    t5 = t5 - t4h
    t3 = t2 - t3
    t2 = t2 - _half(t3)
    t6 = t6 + t7
    t6h = _half(t6)
    t7 = t6h - t7
    t0 = t0 + t6h
    t6 = t0 - t6
    t2 = t4h - t2
    t4 = t2 - t4
    t0 = t0 - _mul_shift(t4, 13573, 15)
    t4 = t4 + _mul_shift(t0, 11585, 14)
    t0 = t0 - _mul_shift(t4, 13573, 15)
    t6 = t6 - _mul_shift(t2, 21895, 15)
    t2 = t2 + _mul_shift(t6, 15137, 14)
    t6 = t6 - _mul_shift(t2, 21895, 15)
    t3 = t3 + _mul_shift(t5, 19195, 15)
    t5 = t5 + _mul_shift(t3, 11585, 14)
    t3 = t3 - _mul_shift(t5, 7489, 13)
    t7 = _half(t5) - t7
    t5 = t5 - t7
    t3 = t1h - t3
    t1 = t1 - t3
    t7 = t7 + _mul_shift(t1, 3227, 15)
    t1 = t1 - _mul_shift(t7, 6393, 15)
    t7 = t7 + _mul_shift(t1, 3227, 15)
    t5 = t5 + _mul_shift(t3, 2485, 13)
    t3 = t3 - _mul_shift(t5, 18205, 15)
    t5 = t5 + _mul_shift(t3, 2485, 13)
    return [t0, t1, t2, t3, t4, t5, t6, t7]


def _dct8x8(v: torch.Tensor) -> torch.Tensor:
    """``od_bin_fdct8x8`` of blocks ``(..., 8, 8)`` (int64): each column's 1-D DCT, then each row's."""
    cols = fdct8([v[..., i, :] for i in range(8)])  # cols[u][..., j]: vertical frequency u of column j
    rows = torch.stack(cols, dim=-2)
    out = fdct8([rows[..., :, j] for j in range(8)])  # out[v][..., u]
    return torch.stack(out, dim=-1)


def _block_mask(v: torch.Tensor, coeffs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The masking strength of blocks ``v`` ``(64, B)`` (row-major samples) with DCT ``coeffs`` ``(64, B)``."""
    f = v.to(torch.float32)
    quadrant = [(i >= 4) + 2 * (j >= 4) for i in range(8) for j in range(8)]
    gmean = f.sum(dim=0) / np.float32(64)  # integer sums: exact in any order
    quads = f.reshape(2, 4, 2, 4, -1).sum(dim=(1, 3))  # [i >= 4][j >= 4]
    means = [quads[q % 2, q // 2] / np.float32(16) for q in range(4)]
    gvar = torch.zeros_like(gmean)
    var = [torch.zeros_like(gmean) for _ in range(4)]
    for k in range(64):
        d = f[k] - gmean
        gvar = gvar + d * d
        q = quadrant[k]
        e = f[k] - means[q]
        var[q] = var[q] + e * e
    gvar = gvar * VAR_SCALE_64
    var = [x * VAR_SCALE_16 for x in var]
    total = ((var[0] + var[1]) + var[2]) + var[3]
    gvar = torch.where(gvar > 0, total / torch.where(gvar > 0, gvar, 1), gvar)
    energy = torch.zeros_like(gmean)
    squares = (coeffs * coeffs).to(torch.float32) * mask.reshape(64, 1)
    for k in range(1, 64):
        energy = energy + squares[k]
    return (torch.sqrt((energy * gvar).to(torch.float64)) / 32.0).to(torch.float32)


def _sequential_sum_f32(terms: torch.Tensor) -> torch.Tensor:
    """Left-to-right float32 sum of each row of ``terms`` ``(N, L)`` (numpy's ``cumsum`` is a strict recurrence
    in the input's dtype); ``(N,)`` float32."""
    if terms.shape[1] == 0:
        return torch.zeros(terms.shape[0], dtype=torch.float32)
    return torch.from_numpy(np.cumsum(terms.numpy(), axis=1, dtype=np.float32)[:, -1].copy())


def psnr_hvs_terms_ref(ref: torch.Tensor, dist: torch.Tensor, plane: int) -> torch.Tensor:
    """Every block's 64 error terms ``(err * csf)^2`` in libvmaf's order (block raster order, then ``(u, v)``):
    ``(N, blocks * 64)`` float32 on the CPU, of integer planes ``(N, h, w)``; ``plane`` picks the CSF table."""
    n, h, w = ref.shape
    csf_np, mask_np = csf_and_mask(plane)
    csf, mask = torch.from_numpy(csf_np).reshape(64), torch.from_numpy(mask_np).reshape(64)
    by, bx = block_grid(h, w)

    def blocks(x: torch.Tensor) -> torch.Tensor:
        b = x.detach().cpu().to(torch.int64).unfold(1, BLOCK, STEP).unfold(2, BLOCK, STEP)
        return b[:, :by, :bx].reshape(-1, 8, 8)

    vr, vd = blocks(ref), blocks(dist)
    cr, cd = _dct8x8(vr).reshape(-1, 64), _dct8x8(vd).reshape(-1, 64)
    strength = torch.maximum(_block_mask(vr.reshape(-1, 64).T.contiguous(), cr.T.contiguous(), mask),
                             _block_mask(vd.reshape(-1, 64).T.contiguous(), cd.T.contiguous(), mask))
    err = (cr - cd).abs().to(torch.float32)
    threshold = strength[:, None] / mask[None, :]
    masked = torch.where(err < threshold, torch.zeros_like(err), err - threshold)
    err = torch.cat([err[:, :1], masked[:, 1:]], dim=1)
    weighted = err * csf
    return (weighted * weighted).reshape(n, -1)


def psnr_hvs_plane_ref(ref: torch.Tensor, dist: torch.Tensor, bit_depth: int, plane: int) -> torch.Tensor:
    """libvmaf's PSNR-HVS error ``ret`` of one plane per frame (before the dB conversion).

    Args:
        ref, dist: integer planes ``(N, h, w)``, ``h, w >= 8``.
        bit_depth: 8..12. plane: 0 (luma), 1 (Cb) or 2 (Cr): which CSF table.

    Returns:
        ``(N,)`` float64 holding libvmaf's float32 values, on the inputs' device.
    """
    by, bx = block_grid(*ref.shape[1:])
    ret = _sequential_sum_f32(psnr_hvs_terms_ref(ref, dist, plane))
    ret = ret / np.float32(64 * by * bx)
    peak = (1 << bit_depth) - 1
    ret = ret / np.float32(peak * peak)
    return ret.to(torch.float64).to(ref.device)


def to_db(ret: float) -> float:
    """``10 * (-log10(ret))`` in double, as libvmaf's ``convert_score_db`` (``+inf`` for 0)."""
    if ret == 0.0:
        return math.inf
    if not ret > 0.0:
        return math.nan
    return 10.0 * (-1.0 * math.log10(ret))


def combine_planes(ret_y: float, ret_cb: float, ret_cr: float) -> float:
    """libvmaf's ``psnr_hvs`` of the three planes' errors: ``0.8 * y + 0.1 * (cb + cr)`` in double."""
    return ret_y * 0.8 + 0.1 * (ret_cb + ret_cr)
