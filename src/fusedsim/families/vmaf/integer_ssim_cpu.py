"""libvmaf's integer SSIM on the CPU, compiled with numba: the same bits as the PyTorch twin, ~50x faster.

The arithmetic is that of :mod:`fusedsim.families.vmaf.integer_ssim_twin` (the specification):

- **Moments.** The separable 9-tap integer window with out-of-frame taps skipped. The sums are computed in IEEE
  double, which is *exact* here: every partial sum is an integer below ``2**53`` (at 16 bits the largest moment,
  ``sum(s*s) * 65536``, is below ``65535**2 * 65536 < 2**48``), so each moment equals ``double(int64 moment)``,
  which is what the twin's per-pixel arithmetic starts from. (Doubles also vectorise where int64 products do not.)
- **Per-pixel term.** The twin's double expressions in its order; numba's default (no ``fastmath``) emits no
  FMA contraction and no reassociation, and the division is a true IEEE division.
- **Pooling.** Each frame's terms are summed left to right in row-major order in one double. Threads split the
  work across frames (each frame's rows are then streamed and summed in order by one thread), or, for fewer
  frames than threads, across row bands of a frame whose terms go to a buffer summed afterwards in order.

Row streaming: the horizontal pass of each input row is kept in a ring of 9 rows (5 moments each), so a 1080p
frame's working set stays ~0.7 MB.
"""

from __future__ import annotations

import numba
import numpy as np
import torch
from numba import njit, prange

from fusedsim.core.cpu.parallel import parallel_kernel
from fusedsim.families.vmaf.integer_ssim_twin import (
    integer_ssim_constants,
    integer_ssim_weight_sum,
)
from fusedsim.families.vmaf.ops import integer_ssim

__all__ = ["integer_ssim_numba", "integer_ssim_numba_sums"]

_HALF = 4


@njit(cache=True, nogil=True, inline="always")
def _inbounds_weight(n):
    g = (2, 9, 28, 55, 68, 55, 28, 9, 2)
    w = np.zeros(n, dtype=np.float64)
    for p in range(n):
        acc = 0
        for k in range(9):
            src = p + k - _HALF
            if src >= 0 and src < n:
                acc += g[k]
        w[p] = acc
    return w


@njit(cache=True, nogil=True)
def _hrow(s, d, y, pad, ring, slot, width):
    """Horizontal 9-tap pass of input row ``y`` into ``ring[:, slot, :]`` (moments s, d, ss, sd, dd)."""
    ps = pad[0]
    pd = pad[1]
    pss = pad[2]
    psd = pad[3]
    pdd = pad[4]
    for x in range(width):
        a = np.float64(s[y, x])
        b = np.float64(d[y, x])
        ps[x + _HALF] = a
        pd[x + _HALF] = b
        pss[x + _HALF] = a * a
        psd[x + _HALF] = a * b
        pdd[x + _HALF] = b * b
    for m in range(5):
        p = pad[m]
        out = ring[m, slot]
        for x in range(width):
            out[x] = (2.0 * (p[x] + p[x + 8]) + 9.0 * (p[x + 1] + p[x + 7]) + 28.0 * (p[x + 2] + p[x + 6])
                      + 55.0 * (p[x + 3] + p[x + 5]) + 68.0 * p[x + 4])


@njit(cache=True, nogil=True)
def _band(s, d, y0, y1, k1, k2, wh, wv, out, accumulate):
    """Terms of rows ``[y0, y1)`` of one frame. ``accumulate``: return their row-major left-to-right sum (``out``
    unused); else write them to ``out[y0:y1]`` and return 0.0."""
    height, width = s.shape
    pad = np.zeros((5, width + 2 * _HALF), dtype=np.float64)
    ring = np.zeros((5, 10, width), dtype=np.float64)  # 9 live rows + slot 9: a row of zeros (out of frame)
    terms = np.empty(width, dtype=np.float64)
    vert = np.empty((5, width), dtype=np.float64)
    for yy in range(max(0, y0 - _HALF), min(height, y0 + _HALF)):
        _hrow(s, d, yy, pad, ring, yy % 9, width)
    total = 0.0
    for y in range(y0, y1):
        nxt = y + _HALF
        if nxt < height:
            _hrow(s, d, nxt, pad, ring, nxt % 9, width)
        sl = np.empty(9, dtype=np.int64)
        for k in range(9):
            src = y + k - _HALF
            sl[k] = src % 9 if (src >= 0 and src < height) else 9
        for m in range(5):
            r0 = ring[m, sl[0]]
            r1 = ring[m, sl[1]]
            r2 = ring[m, sl[2]]
            r3 = ring[m, sl[3]]
            r4 = ring[m, sl[4]]
            r5 = ring[m, sl[5]]
            r6 = ring[m, sl[6]]
            r7 = ring[m, sl[7]]
            r8 = ring[m, sl[8]]
            vm = vert[m]
            for x in range(width):
                vm[x] = (2.0 * (r0[x] + r8[x]) + 9.0 * (r1[x] + r7[x]) + 28.0 * (r2[x] + r6[x])
                         + 55.0 * (r3[x] + r5[x]) + 68.0 * r4[x])
        wy = wv[y]
        vmx = vert[0]
        vmy = vert[1]
        vx2 = vert[2]
        vxy = vert[3]
        vy2 = vert[4]
        for x in range(width):
            mx = vmx[x]
            my = vmy[x]
            x2 = vx2[x]
            xy = vxy[x]
            y2 = vy2[x]
            wd = wy * wh[x]
            c1 = (k1 * wd) * wd
            c2 = (k2 * wd) * wd
            mx2 = mx * mx
            mxy = mx * my
            my2 = my * my
            num = (wd * (2.0 * mxy + c1)) * (c2 + 2.0 * (xy * wd - mxy))
            den = ((mx2 + my2) + c1) * ((((x2 * wd - mx2) + y2 * wd) - my2) + c2)
            terms[x] = num / den
        if accumulate:
            for x in range(width):
                total = total + terms[x]
        else:
            row = out[y]
            for x in range(width):
                row[x] = terms[x]
    return total


@parallel_kernel
def _sums_by_frame(ref, dist, k1, k2):
    n, height, width = ref.shape
    wh = _inbounds_weight(width)
    wv = _inbounds_weight(height)
    sums = np.empty(n, dtype=np.float64)
    dummy = np.empty((1, 1), dtype=np.float64)
    for i in prange(n):
        sums[i] = _band(ref[i], dist[i], 0, height, k1, k2, wh, wv, dummy, True)
    return sums


@parallel_kernel
def _sums_by_band(ref, dist, k1, k2, n_bands):
    n, height, width = ref.shape
    wh = _inbounds_weight(width)
    wv = _inbounds_weight(height)
    sums = np.empty(n, dtype=np.float64)
    terms = np.empty((height, width), dtype=np.float64)
    step = (height + n_bands - 1) // n_bands
    for i in range(n):
        for b in prange(n_bands):
            y0 = b * step
            y1 = min(height, y0 + step)
            if y0 < y1:
                _band(ref[i], dist[i], y0, y1, k1, k2, wh, wv, terms, False)
        total = 0.0
        for y in range(height):
            for x in range(width):
                total = total + terms[y, x]
        sums[i] = total
    return sums


def _as_array(t: torch.Tensor) -> np.ndarray:
    """A C-contiguous numpy view/copy the kernels accept: uint8 as is, other integers as int32 (int64 kept)."""
    if t.dtype not in (torch.uint8, torch.int32, torch.int64):
        t = t.to(torch.int32)
    return np.ascontiguousarray(t.detach().cpu().numpy())


def integer_ssim_numba_sums(ref: torch.Tensor, dist: torch.Tensor, bit_depth: int) -> np.ndarray:
    """The per-frame sequential sums of the terms (float64 ``(N,)``), before the division by ``sum(w)``."""
    k1, k2 = integer_ssim_constants(bit_depth)
    r, d = _as_array(ref), _as_array(dist)
    if r.dtype != d.dtype:
        r, d = r.astype(np.int64), d.astype(np.int64)
    n, height, width = r.shape
    if n == 0 or height == 0 or width == 0:
        return np.zeros(n, dtype=np.float64)
    threads = numba.get_num_threads()
    if n >= threads or height < 2 * threads:
        return _sums_by_frame(r, d, k1, k2)
    return _sums_by_band(r, d, k1, k2, threads)


@integer_ssim.cpu_kernel
def integer_ssim_numba(ref: torch.Tensor, dist: torch.Tensor, bit_depth: int) -> torch.Tensor:
    """libvmaf ``ssim`` per frame of integer frames ``(N, H, W)`` on the CPU; ``(N,)`` float64, the twin's bits.

    Same signature and contract as :func:`~fusedsim.families.vmaf.integer_ssim_twin.integer_ssim_ref` (inputs checked
    by the caller).
    """
    h, w = ref.shape[1:]
    sums = torch.from_numpy(integer_ssim_numba_sums(ref, dist, bit_depth))
    # a tensor divisor: true IEEE division, as in the twin
    return (sums / torch.full_like(sums, float(integer_ssim_weight_sum(h, w)))).to(ref.device)
