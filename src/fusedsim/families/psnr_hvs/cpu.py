"""libvmaf's PSNR-HVS on the CPU, compiled with numba: the twin's bits (:mod:`fusedsim.families.psnr_hvs.twin`).

Threads take (frame, block row) tasks and write each block's 64 error terms in order; each frame's terms are
then summed in one float32 running sum, libvmaf's order. Every float step is float32 as in C (numba's default
emits no FMA contraction; each constant is a float32 so that no step widens to double).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from numba import njit, prange

from fusedsim.core.cpu.parallel import parallel_kernel
from fusedsim.core.cpu.samples import integer_samples
from fusedsim.families.psnr_hvs.ops import psnr_hvs_plane
from fusedsim.families.psnr_hvs.twin import STEP, VAR_SCALE_16, VAR_SCALE_64, block_grid, csf_and_mask

__all__ = ["psnr_hvs_plane_numba"]

_F = np.float32


@njit(cache=True, nogil=True, inline="always")
def _half(a):
    return (a + (1 if a < 0 else 0)) >> 1


@njit(cache=True, nogil=True, inline="always")
def _ms(a, c, bits):
    return (a * c + (1 << (bits - 1))) >> bits


@njit(cache=True, nogil=True)
def _fdct8(src, off, stride, dst, doff, dstride):
    """Daala's od_bin_fdct8 of ``src[off + k*stride]`` into ``dst[doff + k*dstride]`` (int64, no overflow)."""
    o = np.uint64(off)  # unsigned indices: numba adds no negative-index wrap to each access
    s = np.uint64(stride)
    t0 = src[o]
    t4 = src[o + s]
    t2 = src[o + np.uint64(2) * s]
    t6 = src[o + np.uint64(3) * s]
    t7 = src[o + np.uint64(4) * s]
    t3 = src[o + np.uint64(5) * s]
    t5 = src[o + np.uint64(6) * s]
    t1 = src[o + np.uint64(7) * s]
    t1 = t0 - t1
    t1h = _half(t1)
    t0 -= t1h
    t4 += t5
    t4h = _half(t4)
    t5 -= t4h
    t3 = t2 - t3
    t2 -= _half(t3)
    t6 += t7
    t6h = _half(t6)
    t7 = t6h - t7
    t0 += t6h
    t6 = t0 - t6
    t2 = t4h - t2
    t4 = t2 - t4
    t0 -= _ms(t4, 13573, 15)
    t4 += _ms(t0, 11585, 14)
    t0 -= _ms(t4, 13573, 15)
    t6 -= _ms(t2, 21895, 15)
    t2 += _ms(t6, 15137, 14)
    t6 -= _ms(t2, 21895, 15)
    t3 += _ms(t5, 19195, 15)
    t5 += _ms(t3, 11585, 14)
    t3 -= _ms(t5, 7489, 13)
    t7 = _half(t5) - t7
    t5 -= t7
    t3 = t1h - t3
    t1 -= t3
    t7 += _ms(t1, 3227, 15)
    t1 -= _ms(t7, 6393, 15)
    t7 += _ms(t1, 3227, 15)
    t5 += _ms(t3, 2485, 13)
    t3 -= _ms(t5, 18205, 15)
    t5 += _ms(t3, 2485, 13)
    o = np.uint64(doff)
    s = np.uint64(dstride)
    dst[o] = t0
    dst[o + s] = t1
    dst[o + np.uint64(2) * s] = t2
    dst[o + np.uint64(3) * s] = t3
    dst[o + np.uint64(4) * s] = t4
    dst[o + np.uint64(5) * s] = t5
    dst[o + np.uint64(6) * s] = t6
    dst[o + np.uint64(7) * s] = t7


@njit(cache=True, nogil=True)
def _block(x, f, y0, x0, v, z, c, qsum, var, mask, var64, var16):
    """Loads the 8x8 block at (y0, x0) of frame f into ``v``, its DCT into ``c``; returns its masking strength
    (``qsum`` and ``var``: float32 scratch of 4)."""
    gsum = _F(0.0)
    for q in range(4):
        qsum[q] = _F(0.0)
        var[q] = _F(0.0)
    for i in range(8):
        row = x[f, y0 + i]
        for j in range(8):
            s = row[np.uint64(x0 + j)]
            v[np.uint64(i * 8 + j)] = s
            gsum += _F(s)
            qsum[np.uint64((i >= 4) + 2 * (j >= 4))] += _F(s)
    gmean = gsum / _F(64.0)
    for q in range(4):
        qsum[q] = qsum[q] / _F(16.0)
    gvar = _F(0.0)
    for i in range(8):
        for j in range(8):
            s = _F(v[np.uint64(i * 8 + j)])
            d = s - gmean
            gvar += d * d
            q = np.uint64((i >= 4) + 2 * (j >= 4))
            e = s - qsum[q]
            var[q] += e * e
    gvar = gvar * var64
    for q in range(4):
        var[q] = var[q] * var16
    if gvar > _F(0.0):
        gvar = (((var[0] + var[1]) + var[2]) + var[3]) / gvar
    for i in range(8):  # columns: z[i*8 + u] = frequency u of column i
        _fdct8(v, i, 8, z, 8 * i, 1)
    for i in range(8):  # rows of the result: c[i*8 + k] = horizontal frequency k of vertical frequency i
        _fdct8(z, i, 8, c, 8 * i, 1)
    energy = _F(0.0)
    for k in range(1, 64):
        energy += _F(c[k] * c[k]) * mask[k]
    return _F(math.sqrt(np.float64(energy * gvar)) / 32.0)


@parallel_kernel
def _terms(ref, dist, csf, mask, var64, var16, by, bx, out):
    n = ref.shape[0]
    for task in prange(n * by):
        f = task // by
        row = task % by
        v = np.empty(64, np.int64)
        z = np.empty(64, np.int64)
        cr = np.empty(64, np.int64)
        cd = np.empty(64, np.int64)
        qsum = np.empty(4, np.float32)
        var = np.empty(4, np.float32)
        for col in range(bx):
            sr = _block(ref, f, row * 7, col * 7, v, z, cr, qsum, var, mask, var64, var16)
            sd = _block(dist, f, row * 7, col * 7, v, z, cd, qsum, var, mask, var64, var16)
            if sd > sr:
                sr = sd
            block = out[f, (row * bx + col) * 64:(row * bx + col + 1) * 64]
            for k in range(64):
                err = _F(abs(cr[k] - cd[k]))
                if k != 0:
                    thr = sr / mask[k]
                    err = _F(0.0) if err < thr else err - thr
                w = err * csf[k]
                block[k] = w * w


@njit(cache=True, nogil=True, parallel=True)
def _frame_sums(terms, out):
    for f in prange(terms.shape[0]):
        s = _F(0.0)
        for k in range(terms.shape[1]):
            s += terms[f, k]
        out[f] = s


@psnr_hvs_plane.cpu_kernel
def psnr_hvs_plane_numba(ref: torch.Tensor, dist: torch.Tensor, bit_depth: int, plane: int) -> torch.Tensor:
    """libvmaf's PSNR-HVS error per frame of one plane on the CPU: ``(N,)`` float64 (the twin's contract)."""
    x, y = integer_samples(ref), integer_samples(dist)
    n, h, w = x.shape
    by, bx = block_grid(h, w)
    csf, mask = csf_and_mask(plane)
    terms = np.empty((n, by * bx * 64), np.float32)
    _terms(x, y, csf.reshape(64), mask.reshape(64), VAR_SCALE_64, VAR_SCALE_16, by, bx, terms)
    ret = np.empty(n, np.float32)
    _frame_sums(terms, ret)
    peak = (1 << bit_depth) - 1
    ret = ret / np.float32(64 * by * bx) / np.float32(peak * peak)
    return torch.from_numpy(ret.astype(np.float64)).to(ref.device)


assert STEP == 7  # the block origins above
