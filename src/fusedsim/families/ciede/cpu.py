"""libvmaf's CIEDE2000 on the CPU, compiled with numba: libvmaf's float32/double arithmetic and, like libvmaf, the
C library's ``pow``, ``powf``, ``atan2``, ``sin``, ``cos`` and ``exp`` (numba calls libm for them; without
``fastmath`` no operation is contracted or reordered).

Rows of every frame are spread over threads (each pixel's dE00 is independent); each frame's dE00 are then
summed in one double running sum in raster order, as libvmaf does.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from numba import njit, prange

from fusedsim.core.cpu.parallel import parallel_kernel
from fusedsim.families.ciede.ops import ciede_de_sum
from fusedsim.families.ciede.twin import K_C, K_H, K_L

__all__ = ["ciede_de_sum_numba"]

_F = np.float32
PI = math.pi
_25_POW_7 = 25.0 ** 7
_25_POW_7_F = np.float32(_25_POW_7)  # powf(25, 7) = 6103515625 rounded to float32


@njit(cache=True, nogil=True, inline="always")
def _srgb_decode(c):
    if c > 10.0 / 255.0:
        return math.pow((c + 0.055) * (1.0 / 1.055), 2.4)
    return c * (1.0 / 12.92)


@njit(cache=True, nogil=True, inline="always")
def _lab_f(c):
    if c > 216.0 / 24389.0:
        return np.float64(np.float32(math.pow(c, 1.0 / 3.0)))
    return np.float64(np.float32((24389.0 / 27.0 * c + 16.0) * (1.0 / 116.0)))


@njit(cache=True, nogil=True, inline="always")
def _lab(y, u, v, scale):
    y = (y - 16.0 * scale) * (1.0 / (219.0 * scale))
    u = (u - 128.0 * scale) * (1.0 / (224.0 * scale))
    v = (v - 128.0 * scale) * (1.0 / (224.0 * scale))
    r = _srgb_decode(y + 1.28033 * v)
    g = _srgb_decode(y - 0.21482 * u - 0.38059 * v)
    b = _srgb_decode(y + 2.12798 * u)
    x = r * 0.4124564390896921 + g * 0.357576077643909 + b * 0.18043748326639894
    yy = r * 0.21267285140562248 + g * 0.715152155287818 + b * 0.07217499330655958
    z = r * 0.019333895582329317 + g * 0.119192025881303 + b * 0.9503040785363677
    fx = _lab_f(x * (1.0 / 0.95047))
    fy = _lab_f(yy)
    fz = _lab_f(z * (1.0 / 1.08883))
    return np.float32(116.0 * fy - 16.0), np.float32(500.0 * (fx - fy)), np.float32(200.0 * (fy - fz))


@njit(cache=True, nogil=True, inline="always")
def _hue(b, a):
    if b == 0.0 and a == 0.0:
        return np.float32(0.0)
    angle = np.float32(math.atan2(np.float64(b), np.float64(a)))
    if angle < 0.0:
        angle = np.float32(np.float64(angle) + 2.0 * PI)
    return angle


@njit(cache=True, nogil=True, inline="always")
def _de00(l1, a1, b1, l2, a2, b2):
    two = _F(2.0)
    delta_l = l2 - l1
    l_bar = (l1 + l2) / two
    c1 = _F(math.sqrt(np.float64(a1) ** 2 + np.float64(b1) ** 2))
    c2 = _F(math.sqrt(np.float64(a2) ** 2 + np.float64(b2) ** 2))
    c_bar = (c1 + c2) / two
    c_bar7 = math.pow(np.float64(c_bar), 7.0)
    g = 1.0 - math.sqrt(c_bar7 / (c_bar7 + _25_POW_7))
    a1p = _F(np.float64(a1) + np.float64(a1 / two) * g)
    a2p = _F(np.float64(a2) + np.float64(a2 / two) * g)
    c1p = _F(math.sqrt(np.float64(a1p) ** 2 + np.float64(b1) ** 2))
    c2p = _F(math.sqrt(np.float64(a2p) ** 2 + np.float64(b2) ** 2))
    c_bar_p = (c1p + c2p) / two
    delta_c = c2p - c1p
    l50 = np.float64(l_bar - _F(50.0)) ** 2
    s_l = _F(1.0 + (0.015 * l50) / math.sqrt(20.0 + l50))
    s_c = _F(1.0 + 0.045 * np.float64(c_bar_p))
    h1 = _hue(b1, a1p)
    h2 = _hue(b2, a2p)
    dh = h2 - h1
    if c1 == 0.0 or c2 == 0.0:
        delta_h = _F(0.0)
    elif abs(dh) <= PI:
        delta_h = dh
    elif h2 <= h1:
        delta_h = _F(np.float64(dh) + 2.0 * PI)
    else:
        delta_h = _F(np.float64(dh) - 2.0 * PI)
    delta_upper_h = _F(2.0 * math.sqrt(np.float64(c1p * c2p)) * math.sin(np.float64(delta_h) / 2.0))
    hsum = np.float64(h1 + h2)
    if abs(np.float64(h1 - h2)) > PI:
        h_bar = _F((hsum + 2.0 * PI) / 2.0)
    else:
        h_bar = _F(hsum / 2.0)
    hb = np.float64(h_bar)
    t = _F(1.0 - 0.17 * math.cos(hb - PI / 6.0) + 0.24 * math.cos(2.0 * hb)
           + 0.32 * math.cos(3.0 * hb + PI / 30.0) - 0.20 * math.cos(4.0 * hb - 7.0 * PI / 20.0))
    s_h = _F(1.0 + 0.015 * np.float64(c_bar_p) * np.float64(t))
    degrees = _F((np.float64(_F(hb * (180.0 / PI))) - 275.0) * (1.0 / 25.0))
    cp7 = math.pow(c_bar_p, _F(7.0))  # powf
    ratio = cp7 / (cp7 + _25_POW_7_F)
    bump = _F(60.0 * math.exp(-np.float64(math.pow(degrees, _F(2.0)))))
    r_t = _F(-2.0 * math.sqrt(np.float64(ratio)) * math.sin(np.float64(_F(np.float64(bump) * (PI / 180.0)))))
    lightness = delta_l / (_F(K_L) * s_l)
    chroma = delta_c / (_F(K_C) * s_c)
    hue = delta_upper_h / (_F(K_H) * s_h)
    return _F(math.sqrt(np.float64(lightness) ** 2 + np.float64(chroma) ** 2 + np.float64(hue) ** 2
                        + np.float64(r_t * chroma * hue)))


@parallel_kernel
def _de_rows(ry, ru, rv, dy, du, dv, scale, out):
    n, h, w = ry.shape
    for task in prange(n * h):
        f = task // h
        i = task % h
        for j in range(w):
            l1, a1, b1 = _lab(np.float64(ry[f, i, j]), np.float64(ru[f, i, j]), np.float64(rv[f, i, j]), scale)
            l2, a2, b2 = _lab(np.float64(dy[f, i, j]), np.float64(du[f, i, j]), np.float64(dv[f, i, j]), scale)
            out[f, i, j] = _de00(l1, a1, b1, l2, a2, b2)


@njit(cache=True, nogil=True, parallel=True)
def _frame_sums(de, out):
    n = de.shape[0]
    for f in prange(n):
        s = 0.0
        for k in range(de.shape[1]):
            s += np.float64(de[f, k])
        out[f] = s


def _as_array(x: torch.Tensor) -> np.ndarray:
    """int32 samples: one compiled specialisation for every input dtype (the conversion costs little next to
    the per-pixel work)."""
    return x.detach().cpu().to(torch.int32).contiguous().numpy()


@ciede_de_sum.cpu_kernel
def ciede_de_sum_numba(ref_y: torch.Tensor, ref_u: torch.Tensor, ref_v: torch.Tensor, dist_y: torch.Tensor,
                       dist_u: torch.Tensor, dist_v: torch.Tensor, bit_depth: int) -> torch.Tensor:
    """Per-frame dE00 sums of luma-size planes ``(N, H, W)`` on the CPU: ``(N,)`` float64 (the twin's contract)."""
    planes = [_as_array(p) for p in (ref_y, ref_u, ref_v, dist_y, dist_u, dist_v)]
    n, h, w = planes[0].shape
    de = np.empty((n, h, w), np.float32)
    _de_rows(*planes, float(1 << (bit_depth - 8)), de)
    sums = np.empty(n, np.float64)
    _frame_sums(de.reshape(n, h * w), sums)
    return torch.from_numpy(sums)
