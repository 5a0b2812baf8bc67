"""IW-SSIM's Laplacian pyramid steps on the CPU, compiled with numba: the twins' arithmetic, the same bits.

:func:`~fusedsim.families.iwssim.twin.pyr_reduce_op_ref` (``corrDn``: binom5 along W then H, every 2nd sample)
and :func:`~fusedsim.families.iwssim.twin.pyr_band_ref` (``img - upConv(upConv(lo))``) filter with the taps added
one by one from a zero (``sum`` over the five shifted products, reflect1 edges), the up-sampling's zeros included.
Here each output is that sum in that order, no FMA, zeros and all (the sign of a zero sum included), without the
twin's padded copies, its eleven passes over memory and its strided selections.
"""

from __future__ import annotations

import numpy as np
import torch
from numba import prange

from fusedsim.core.cpu.parallel import parallel_kernel
from fusedsim.core.state import cached
import fusedsim.families.iwssim.twin as spec
from fusedsim.families.iwssim.ops import iwssim_band, iwssim_reduce

__all__ = ["iwssim_band_numba", "iwssim_reduce_numba"]

_TAPS = np.array(spec.BINOM5, dtype=np.float64)


@cached(maxsize=64)
def _reflect1(size: int) -> np.ndarray:
    """Source index of each of the size + 4 padded positions (mirror about the edge sample), as the twin builds it."""
    idx = np.abs(np.arange(-2, size + 2))
    return np.where(idx > size - 1, 2 * (size - 1) - idx, idx).astype(np.int64)


@parallel_kernel
def _along_w(x, out, idx, k, step):  # pragma: no cover - compiled
    planes, h, _ = x.shape
    wo = out.shape[2]
    for task in prange(planes * h):
        p, r = task // h, task % h
        for j in range(wo):
            o = j * step
            s = 0.0
            for i in range(5):
                s = s + k[i] * x[p, r, idx[o + i]]
            out[p, r, j] = s


@parallel_kernel
def _along_h(x, out, idx, k, step):  # pragma: no cover - compiled
    planes, _, w = x.shape
    ho = out.shape[1]
    for task in prange(planes * ho):
        p, j = task // ho, task % ho
        o = j * step
        row = out[p, j]
        for c in range(w):
            row[c] = 0.0
        for i in range(5):
            src = x[p, idx[o + i]]
            ki = k[i]
            for c in range(w):
                row[c] = row[c] + ki * src[c]


def _planes(t: torch.Tensor) -> np.ndarray:
    return t.contiguous().numpy().reshape(-1, *t.shape[-2:])


def _compiled(*tensors: torch.Tensor) -> bool:
    return all(t.device.type == "cpu" and t.dtype == torch.float64 and t.dim() == 4 and not t.requires_grad
               and min(t.shape[-2:]) >= 3 for t in tensors)


@iwssim_reduce.cpu_kernel
def iwssim_reduce_numba(x: torch.Tensor) -> torch.Tensor:
    """:func:`~fusedsim.families.iwssim.twin.pyr_reduce_op_ref` (N, C, ceil(H/2), ceil(W/2)) for float64 CPU
    tensors with H, W >= 3, compiled; anything else through the twin."""
    if not _compiled(x):
        return spec.pyr_reduce_op_ref(x)
    n, c, h, w = x.shape
    src = _planes(x)
    mid = np.empty((n * c, h, -(-w // 2)), dtype=np.float64)
    _along_w(src, mid, _reflect1(w), _TAPS, 2)
    out = np.empty((n * c, -(-h // 2), mid.shape[2]), dtype=np.float64)
    _along_h(mid, out, _reflect1(h), _TAPS, 2)
    return torch.from_numpy(out.reshape(n, c, *out.shape[1:]))


@iwssim_band.cpu_kernel
def iwssim_band_numba(img: torch.Tensor, lo: torch.Tensor) -> torch.Tensor:
    """:func:`~fusedsim.families.iwssim.twin.pyr_band_ref` (N, C, H, W) for float64 CPU tensors with H, W >= 3 and
    ``lo`` of (N, C, ceil(H/2), ceil(W/2)), compiled; anything else through the twin."""
    n, c, h, w = img.shape
    if not _compiled(img) or lo.dim() != 4 or tuple(lo.shape) != (n, c, -(-h // 2), -(-w // 2)) or not (
            lo.device.type == "cpu" and lo.dtype == torch.float64 and not lo.requires_grad):
        return spec.pyr_band_ref(img, lo)
    small = _planes(lo)
    up = np.zeros((n * c, h, small.shape[2]), dtype=np.float64)  # upConv along H: the samples at even rows
    up[:, ::2] = small
    vertical = np.empty_like(up)
    _along_h(up, vertical, _reflect1(h), _TAPS, 1)
    wide = np.zeros((n * c, h, w), dtype=np.float64)  # then along W: at even columns
    wide[:, :, ::2] = vertical
    expanded = np.empty_like(wide)
    _along_w(wide, expanded, _reflect1(w), _TAPS, 1)
    return torch.from_numpy(_planes(img) - expanded).reshape(n, c, h, w)
