"""libvmaf integer motion on the CPU, compiled with numba: the twin's bits.

The arithmetic is that of :mod:`fusedsim.families.motion.twin`. Each input row's difference is formed once into a
ring of the last 5 (int32); per output row the vertical filter of the ring (int32 up to 12 bits, int64 at 16) is
rounded and shifted into a row buffer padded by the 2 mirrored columns each side, then the horizontal filter runs in
int64, rounded and shifted, and ``|v|`` is summed in int64. Integer sums are exact in any order, so threads split the work freely: the rows of every pair are
cut into bands and each (pair, band) task adds its partial SAD into its own slot.
"""

from __future__ import annotations

import numba
import numpy as np
import torch
from numba import njit, prange

from fusedsim.core.cpu.int32 import add32, mul32, shr32
from fusedsim.core.cpu.parallel import parallel_kernel
from fusedsim.core.cpu.samples import unsigned_samples
from fusedsim.families.motion.ops import integer_motion_sad
from fusedsim.families.motion.twin import sad_to_score

__all__ = ["integer_motion_sad_numba", "motion_sad_numba"]

_MIN_BAND_ROWS = 16  # a band shorter than this costs more in set-up than it gains in balance


@njit(cache=True, nogil=True, inline="always")
def _mirror(i, n):
    if i < 0:
        return -i
    if i >= n:
        return 2 * n - 2 - i
    return i


@njit(cache=True, nogil=True)
def _diff_row(p, c, out):
    for j in range(out.shape[0]):
        out[j] = np.int32(p[j]) - np.int32(c[j])


@njit(cache=True, nogil=True)
def _band_sad(prev, cur, y0, y1, shift, wide):
    """SAD of output rows ``[y0, y1)`` of one pair (2-D arrays). Scratch, allocated here (as arguments LLVM could
    not rule out their overlap, and its overlap checks cost 25 %): ``ring`` int32 ``(5, width)``, the differences
    of the last 5 input rows (row ``r`` in slot ``(r + 5) % 5``); ``ybuf`` int64 ``(width + 4,)``."""
    height, width = prev.shape
    ring = np.empty((5, width), dtype=np.int32)
    ybuf = np.empty(width + 4, dtype=np.int64)
    rnd = 1 << (shift - 1)
    rnd32, shift32 = np.int32(rnd), np.int32(shift)
    for r in range(y0 - 2, y0 + 2):
        m = _mirror(r, height)
        _diff_row(prev[m], cur[m], ring[(r + 5) % 5])
    total = np.int64(0)
    for i in range(y0, y1):
        m = _mirror(i + 2, height)
        _diff_row(prev[m], cur[m], ring[(i + 2) % 5])
        da, db, dc, dd, de = ring[(i + 3) % 5], ring[(i + 4) % 5], ring[i % 5], ring[(i + 1) % 5], ring[(i + 2) % 5]
        if wide:  # 16 bit: vertical sums reach 65536 * 65535
            for j in range(width):
                s = (3571 * (np.int64(da[j]) + np.int64(de[j])) + 16004 * (np.int64(db[j]) + np.int64(dd[j]))
                     + 26386 * np.int64(dc[j]))
                ybuf[j + 2] = (s + rnd) >> shift
        else:  # up to 12 bits every step fits int32: 32-bit lanes (core.cpu.int32)
            for j in range(width):
                s = add32(add32(mul32(3571, add32(da[j], de[j])), mul32(16004, add32(db[j], dd[j]))),
                          mul32(26386, dc[j]))
                ybuf[j + 2] = shr32(add32(s, rnd32), shift32)
        # reflect-101 columns: -2 -> 2, -1 -> 1, w -> w-2, w+1 -> w-3
        ybuf[0] = ybuf[4]
        ybuf[1] = ybuf[3]
        ybuf[width + 2] = ybuf[width]
        ybuf[width + 3] = ybuf[width - 1]
        row = np.int64(0)
        for j in range(width):
            v = (3571 * (ybuf[j] + ybuf[j + 4]) + 16004 * (ybuf[j + 1] + ybuf[j + 3]) + 26386 * ybuf[j + 2]
                 + 32768) >> 16
            row += abs(v)
        total += row
    return total


@parallel_kernel
def _sads(prev, cur, shift, wide, n_bands):
    n, height, width = prev.shape
    step = (height + n_bands - 1) // n_bands
    parts = np.zeros((n, n_bands), dtype=np.int64)
    for task in prange(n * n_bands):
        f = task // n_bands
        b = task % n_bands
        y0 = b * step
        y1 = min(height, y0 + step)
        if y0 < y1:
            parts[f, b] = _band_sad(prev[f], cur[f], y0, y1, shift, wide)
    return parts.sum(axis=1)


def motion_sad_numba(prev: torch.Tensor, cur: torch.Tensor, bit_depth: int, n_bands: int | None = None) -> np.ndarray:
    """The integer SAD of each frame pair ``(N, H, W)``: int64 ``(N,)``. ``n_bands``: row bands per pair (default:
    enough tasks for every thread)."""
    p, c = unsigned_samples(prev), unsigned_samples(cur)
    if p.dtype != c.dtype:
        p, c = p.astype(np.uint16), c.astype(np.uint16)
    n, height, width = p.shape
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if n_bands is None:
        threads = numba.get_num_threads()
        n_bands = max(1, min(-(-threads // n) * 2 if n < 2 * threads else 1, height // _MIN_BAND_ROWS))
    return _sads(p, c, bit_depth, bit_depth > 12, n_bands)


@integer_motion_sad.cpu_kernel
def integer_motion_sad_numba(prev: torch.Tensor, cur: torch.Tensor, bit_depth: int) -> torch.Tensor:
    """libvmaf's motion score of each frame pair ``(N, H, W)`` on the CPU: ``(N,)`` float64, the twin's bits.

    Same signature and contract as :func:`~fusedsim.families.motion.twin.integer_motion_sad_ref`."""
    h, w = prev.shape[-2:]
    sad = torch.from_numpy(motion_sad_numba(prev, cur, bit_depth))
    return sad_to_score(sad, h, w).to(prev.device)
