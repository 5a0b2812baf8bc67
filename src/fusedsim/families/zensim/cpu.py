"""zensim on the CPU, compiled with numba: the float32 replays of :mod:`fusedsim.families.zensim.f32_twin` (the
specification), op for op: the colour transform (opsin FMA chain, bit-hack seeded Halley cube roots: the twin's
bits) and the per-scale sums.

Per plane: the H blur's float32 running sums along each row (FMAs in upstream's order), then strips of 32 rows
with a fresh running sum down each strip (mirrored at the strip's ends), the per-pixel features in float32, their
powers, float64 row sums and float32 maxima. An FMA is the twin's: the float32 product is exact in float64, the
addend (a float32 value, or one of the twin's Python constants in float64) is added in float64 and the sum rounded
once to float32. Every per-pixel value equals the twin's; a row's float64 sum is taken left to right where the twin
lets PyTorch sum the row (~1e-16 relative apart, within the op's 1e-12), and rows are added in the twin's order.
Planes run in parallel.
"""

from __future__ import annotations

import numpy as np
import torch
from numba import njit, prange

from fusedsim.core.cpu.float32 import float32_bits, float32_from_bits, fma32
from fusedsim.core.xyb.opsin_rows import mix_row_clamped
from fusedsim.core.cpu.parallel import parallel_kernel
from fusedsim.core.cpu.table import lookup_u8
from fusedsim.families.zensim.f32_twin import (
    STRIP_INNER,
    linear_to_positive_xyb_f32_ref,
    zensim_scale_sums_ref,
    zensim_xyb_ref,
)
from fusedsim.families.zensim.twin import OPSIN, OPSIN_BIAS, BLUR_RADIUS, C2
from fusedsim.families.zensim.ops import zensim_scale_sums, zensim_xyb

__all__ = ["linear_to_positive_xyb_numba", "zensim_scale_sums_numba", "zensim_xyb_numba"]

_GROUP_ROWS = 16  # rows of the H blur side by side (1.7x one row at a time)


@njit(cache=True, nogil=True, inline="always")
def _mirror(i, n):
    if i < 0:
        i = -i
    if i >= n:
        i = abs(2 * (n - 1) - i)
    return min(i, n - 1)


@njit(cache=True, nogil=True)
def _h_blur(s, d, r, inv, out, group):  # pragma: no cover - compiled
    """The twin's ``_h_blur`` of one plane (h, w) into out (4, h, w): mu1, mu2, s²+d², s·d. ``group`` rows run side
    by side (transposed tiles, each step one vector loop over the rows: the running sums are one dependent chain per
    row); each row's arithmetic is the twin's, step for step."""
    h, w = s.shape
    zero = np.float32(0.0)
    src_s = np.empty((w, group), dtype=np.float32)
    src_d = np.empty((w, group), dtype=np.float32)
    tile = np.empty((4, w, group), dtype=np.float32)
    sum_s = np.empty(group, dtype=np.float32)
    sum_d = np.empty(group, dtype=np.float32)
    sum_sq = np.empty(group, dtype=np.float32)
    sum_p = np.empty(group, dtype=np.float32)
    for y0 in range(0, h, group):
        lanes = min(group, h - y0)
        for lane in range(lanes):
            row_s, row_d = s[y0 + lane], d[y0 + lane]
            for c in range(w):
                src_s[c, lane] = row_s[c]
                src_d[c, lane] = row_d[c]
        for lane in range(group):
            sum_s[lane] = zero
            sum_d[lane] = zero
            sum_sq[lane] = zero
            sum_p[lane] = zero
        for i in range(2 * r + 1):
            k = _mirror(i - r, w) if i > r else min(r - i, w - 1)
            for lane in range(lanes):
                sv, dv = src_s[k, lane], src_d[k, lane]
                sum_s[lane] = sum_s[lane] + sv
                sum_d[lane] = sum_d[lane] + dv
                sum_sq[lane] = fma32(sv, sv, fma32(dv, dv, sum_sq[lane]))
                sum_p[lane] = fma32(sv, dv, sum_p[lane])
        for x in range(w):
            a, m = _mirror(x + r + 1, w), _mirror(x - r, w)
            for lane in range(lanes):
                tile[0, x, lane] = sum_s[lane] * inv
                tile[1, x, lane] = sum_d[lane] * inv
                tile[2, x, lane] = sum_sq[lane] * inv
                tile[3, x, lane] = sum_p[lane] * inv
                sa, da, sr, dr = src_s[a, lane], src_d[a, lane], src_s[m, lane], src_d[m, lane]
                sum_s[lane] = (sum_s[lane] + sa) - sr
                sum_d[lane] = (sum_d[lane] + da) - dr
                sum_sq[lane] = fma32(sa, sa, fma32(da, da, fma32(-sr, sr, fma32(-dr, dr, sum_sq[lane]))))
                sum_p[lane] = fma32(sa, da, fma32(-sr, dr, sum_p[lane]))
        for q in range(4):
            for lane in range(lanes):
                dst = out[q, y0 + lane]
                for x in range(w):
                    dst[x] = tile[q, x, lane]


@parallel_kernel
def _scale_sums(s, d, r, strip, inv, c2_64, c2_32, sums, maxes):  # pragma: no cover - compiled
    """s, d (P, h, w) float32 -> sums (P, 17) float64 and maxes (P, 3) float32, as the twin's ``_scale_sums``
    (``inv``: float32(1 / (2r + 1)))."""
    planes, h, w = s.shape
    one, two = np.float32(1.0), np.float32(2.0)
    for p in prange(planes):
        blurred = np.empty((4, h, w), dtype=np.float32)
        _h_blur(s[p], d[p], r, inv, blurred, _GROUP_ROWS)
        run = np.empty((4, w), dtype=np.float32)
        vals = np.empty((8, w), dtype=np.float32)
        for j in range(17):
            sums[p, j] = 0.0
        for j in range(3):
            maxes[p, j] = 0.0
        for y0 in range(0, h, strip):
            y1 = min(y0 + strip, h)
            top, bot = max(y0 - r, 0), min(y1 + r, h)
            sh = bot - top
            run[:] = 0.0
            for i in range(2 * r + 1):
                k = min(r - i, sh - 1) if i <= r else min(i - r, sh - 1)
                for q in range(4):
                    for x in range(w):
                        run[q, x] = run[q, x] + blurred[q, top + k, x]
            for y in range(sh):
                row = top + y
                if y0 <= row < y1:
                    for x in range(w):
                        mu1, mu2 = run[0, x] * inv, run[1, x] * inv
                        ssq, s12 = run[2, x] * inv, run[3, x] * inv
                        sv, dv = s[p, row, x], d[p, row, x]
                        mu_diff = mu1 - mu2
                        num_m = fma32(mu_diff, -mu_diff, one)
                        num_s = fma32(two, fma32(-mu1, mu2, s12), c2_64)
                        denom_s = fma32(-mu2, mu2, fma32(-mu1, mu1, ssq)) + c2_32
                        sd = one - (num_m * num_s) / denom_s
                        diff1, diff2 = abs(sv - mu1), abs(dv - mu2)
                        ed = (one + diff2) / (one + diff1) - one
                        vs, vd, pd = sv - mu1, dv - mu2, sv - dv
                        vals[0, x] = sd if not sd < 0 else np.float32(0.0)
                        vals[1, x] = ed if not ed < 0 else np.float32(0.0)
                        vals[2, x] = -ed if not -ed < 0 else np.float32(0.0)
                        vals[3, x] = vs * vs
                        vals[4, x] = vd * vd
                        vals[5, x] = diff1
                        vals[6, x] = diff2
                        vals[7, x] = pd * pd
                    for j in range(3):
                        t1 = t2 = t4 = t8 = 0.0
                        top_value = maxes[p, j]
                        for x in range(w):
                            v = vals[j, x]
                            v2 = v * v
                            v4 = v2 * v2
                            t1 += np.float64(v)
                            t2 += np.float64(v2)
                            t4 += np.float64(v4)
                            t8 += np.float64(v4 * v4)
                            if v > top_value:
                                top_value = v
                        sums[p, 4 * j] += t1
                        sums[p, 4 * j + 1] += t2
                        sums[p, 4 * j + 2] += t4
                        sums[p, 4 * j + 3] += t8
                        maxes[p, j] = top_value
                    for j in range(5):
                        t = 0.0
                        for x in range(w):
                            t += np.float64(vals[3 + j, x])
                        sums[p, 12 + j] += t
                a, m = _mirror(y + r + 1, sh), _mirror(y - r, sh)
                for q in range(4):
                    for x in range(w):
                        run[q, x] = (run[q, x] + blurred[q, top + a, x]) - blurred[q, top + m, x]


@zensim_scale_sums.cpu_kernel
def zensim_scale_sums_numba(src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    """:func:`~fusedsim.families.zensim.f32_twin.zensim_scale_sums_ref` for float32 CPU planes (src (N or 1, C, h,
    w), dst (N, C, h, w)) -> (N, C, 20) float64, compiled; anything else through the twin."""
    if any(t.device.type != "cpu" or t.dtype != torch.float32 or t.dim() != 4 for t in (src, dst)):
        return zensim_scale_sums_ref(src, dst)
    s, d = (t.contiguous() for t in torch.broadcast_tensors(src, dst))
    n, c, h, w = d.shape
    sums = np.empty((n * c, 17), dtype=np.float64)
    maxes = np.empty((n * c, 3), dtype=np.float32)
    _scale_sums(s.numpy().reshape(n * c, h, w), d.numpy().reshape(n * c, h, w), BLUR_RADIUS, STRIP_INNER,
                np.float32(1.0 / (2 * BLUR_RADIUS + 1)), np.float64(C2), np.float32(C2), sums, maxes)
    out = np.concatenate((sums, maxes.astype(np.float64)), axis=1)
    return torch.from_numpy(out).reshape(n, c, 20)


@njit(cache=True, nogil=True, inline="always")
def _cbrt(x, scratch):  # pragma: no cover - compiled
    """The twin's ``cbrt_f32_ref`` of one float32 x >= 0 (``scratch``: a one-element float32 array)."""
    if x == 0:
        return np.float32(0.0)
    seed = (np.int64(float32_bits(x, scratch)) & 0x7FFFFFFF) // 3 + 709_958_130
    t = float32_from_bits(np.int32(seed), scratch)
    two = np.float32(2.0)
    for _ in range(2):
        r = t * t * t
        t = t * (fma32(x, two, r) / fma32(r, two, x))
    return t


@parallel_kernel
def _positive_xyb(rgb, out, m, bias64, ab, x_mul, x_add64, y_add, b_add):  # pragma: no cover - compiled
    n, _, h, w = rgb.shape
    zero, two = np.float32(0.0), np.float32(2.0)
    for task in prange(n * h):
        i, y = task // h, task % h
        # whole-row passes (the seeds' bit casts through row buffers): vector loops, as _cbrt per value
        mixed = np.empty((3, w), dtype=np.float32)
        seed = np.empty((3, w), dtype=np.int32)
        mixed_bits, start = mixed.view(np.int32), seed.view(np.float32)
        mix_row_clamped(m, bias64, rgb[i, 0, y], rgb[i, 1, y], rgb[i, 2, y], mixed)
        for k in range(3):
            for x in range(w):
                seed[k, x] = np.int32((np.int64(mixed_bits[k, x]) & 0x7FFFFFFF) // 3 + 709_958_130)
        for k in range(3):
            row, first = mixed[k], start[k]
            for x in range(w):
                v, t = row[x], first[x]
                for _ in range(2):
                    r = t * t * t
                    t = t * (fma32(v, two, r) / fma32(r, two, v))
                row[x] = zero if v == 0 else t
        for x in range(w):
            c0, c1 = mixed[0, x] + ab, mixed[1, x] + ab
            vx, vy = np.float32(0.5) * (c0 - c1), np.float32(0.5) * (c0 + c1)
            out[i, 0, y, x] = fma32(vx, x_mul, x_add64)
            out[i, 1, y, x] = vy + y_add
            out[i, 2, y, x] = (mixed[2, x] - vy) + b_add


def linear_to_positive_xyb_numba(rgb: torch.Tensor) -> torch.Tensor:
    """:func:`~fusedsim.families.zensim.f32_twin.linear_to_positive_xyb_f32_ref` of CPU linear RGB (N, 3, H, W),
    compiled in float32 (the twin's bits)."""
    if rgb.device.type != "cpu" or rgb.dim() != 4 or rgb.shape[1] != 3 or rgb.requires_grad:
        return linear_to_positive_xyb_f32_ref(rgb)
    src = rgb.to(torch.float32).contiguous().numpy()
    out = np.empty_like(src)
    ab = np.float32(-_cbrt(np.float32(OPSIN_BIAS), np.empty(1, dtype=np.float32)))  # the twin's -cbrt(float32(bias)), float32
    _positive_xyb(src, out, np.array(OPSIN, dtype=np.float32), np.float64(OPSIN_BIAS), ab, np.float32(14.0),
                  np.float64(0.42), np.float32(0.01), np.float32(0.55))
    return torch.from_numpy(out)


@zensim_xyb.cpu_kernel
def zensim_xyb_numba(rgb: torch.Tensor, lut: torch.Tensor) -> torch.Tensor:
    """``cpu=`` of the ``zensim_xyb`` op: its twin with this transform (uint8 codes through ``lut`` compiled)."""
    if rgb.dtype == torch.uint8 and rgb.device.type == "cpu" and lut.shape == (256,):
        rgb = lookup_u8(rgb, lut.to(torch.float32))
    return zensim_xyb_ref(rgb, lut, linear_to_positive_xyb_numba)
