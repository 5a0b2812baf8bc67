"""SpEED chroma's residual on the CPU, compiled with numba: the twin's bits.

Per decimated sample the anti-alias blur is evaluated from the (prescaled) float samples it reads, vertical sums
first, in the twin's float32 order; the prescale reads the same bilinear/nearest tables as the Triton kernel. Then
the 3-tap local mean of the small decimated plane is removed. numba does not contract multiply-adds (no fastmath),
so every float32 step rounds as in libvmaf. Threads split (frame, decimated row) tasks. The op
``speed_covariance`` runs :mod:`.gsm_cpu`'s covariance, threads taking planes.
"""

from __future__ import annotations

import numpy as np
import torch
from numba import njit, prange

from fusedsim.core.cpu.borders import reflect101
from fusedsim.core.cpu.parallel import parallel_kernel
from fusedsim.core.cpu.samples import unsigned_samples
from fusedsim.families.speed_chroma.gsm_cpu import covariances_many
from fusedsim.families.speed_chroma.ops import speed_covariance, speed_residual
from fusedsim.families.speed_chroma.twin import (
    check_residuals,
    antialias_taps,
    local_mean_taps,
    op_options,
    operating_size,
    sample_tables,
)

__all__ = ["speed_covariance_numba", "speed_residual_numba"]


@njit(cache=True, nogil=True, inline="always")
def _sample(src, r, c, scaled, y1, y2, dy, x1, x2, dx, scale):
    off = np.float32(-128.0)
    if not scaled:
        return np.float32(src[r, c]) * scale + off
    fy, fx = dy[r], dx[c]
    a = np.float32(src[y1[r], x1[c]]) * scale + off
    b = np.float32(src[y1[r], x2[c]]) * scale + off
    cc = np.float32(src[y2[r], x1[c]]) * scale + off
    d = np.float32(src[y2[r], x2[c]]) * scale + off
    one = np.float32(1.0)
    return ((((one - fy) * (one - fx)) * a + ((one - fy) * fx) * b) + (fy * (one - fx)) * cc) + (fy * fx) * d


@parallel_kernel
def _decimate(planes, out, taps, scaled, y1, y2, dy, x1, x2, dx, h, w, scale):
    n, oh, ow = out.shape
    t = taps.shape[0]
    half = t // 2
    for task in prange(n * oh):
        f = task // oh
        i = task % oh
        src = planes[f]
        row0 = i * 16
        for j in range(ow):
            col0 = j * 16
            acc_out = np.float32(0.0)
            for a in range(t):
                c = reflect101(col0 - half + a, w)
                acc = np.float32(0.0)
                for k in range(t):
                    r = reflect101(row0 - half + k, h)
                    acc = acc + taps[k] * _sample(src, r, c, scaled, y1, y2, dy, x1, x2, dx, scale)
                acc_out = acc_out + taps[a] * acc
            out[f, i, j] = acc_out


@parallel_kernel
def _local_mean(d, taps, out):
    n, h, w = d.shape
    t = taps.shape[0]
    half = t // 2
    for task in prange(n * h):
        f = task // h
        i = task % h
        tmp = np.empty(w, dtype=np.float32)
        for j in range(w):
            acc = np.float32(0.0)
            for k in range(t):
                acc = acc + taps[k] * d[f, reflect101(i - half + k, h), j]
            tmp[j] = acc
        for j in range(w):
            acc = np.float32(0.0)
            for k in range(t):
                acc = acc + taps[k] * tmp[reflect101(j - half + k, w)]
            out[f, i, j] = d[f, i, j] - acc


@speed_residual.cpu_kernel
def speed_residual_numba(plane: torch.Tensor, bit_depth: int, prescale: float = 1.0, method: int = 0,
                         kernelscale: float = 1.0) -> torch.Tensor:
    """The op ``speed_residual`` on the CPU: ``(N, H', W')`` float32, the twin's bits."""
    options = op_options(prescale, method, kernelscale)
    src = unsigned_samples(plane)
    n, h, w = src.shape
    oh, ow = operating_size(h, w, options)
    out = np.zeros((n, oh, ow), dtype=np.float32)
    if n and oh and ow:
        tables = sample_tables(h, w, options, torch.device("cpu"))
        scaled = tables is not None
        if scaled:
            y1, y2, dy, x1, x2, dx = (t.numpy() for t in tables)
            sh, sw = y1.shape[0], x1.shape[0]
        else:
            y1 = y2 = x1 = x2 = np.zeros(1, dtype=np.int64)
            dy = dx = np.zeros(1, dtype=np.float32)
            sh, sw = h, w
        taps = np.array(antialias_taps(kernelscale), dtype=np.float32)
        scale = np.float32(np.float32(1.0) / np.float32({8: 1, 10: 4, 12: 16, 16: 256}[bit_depth]))
        d = np.empty_like(out)
        _decimate(src, d, taps, scaled, y1.astype(np.int64), y2.astype(np.int64), dy, x1.astype(np.int64),
                  x2.astype(np.int64), dx, sh, sw, scale)
        _local_mean(d, np.array(local_mean_taps(kernelscale), dtype=np.float32), out)
    return torch.from_numpy(out).to(plane.device)


@speed_covariance.cpu_kernel
def speed_covariance_numba(residuals: torch.Tensor) -> torch.Tensor:
    """The op ``speed_covariance`` on the CPU: ``(N, 25, 25)`` float32, the twin's bits."""
    check_residuals(residuals)
    return torch.from_numpy(covariances_many(residuals.detach().numpy())).to(residuals.device)
