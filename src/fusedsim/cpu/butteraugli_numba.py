"""Butteraugli's filters on the CPU, compiled with numba, in the twins' summation order: the separable blur and
the Malta line sums.

**Blur.**
The arithmetic is that of :func:`fusedsim.reference.butteraugli_filters_ref.butteraugli_blur_ref` on long axes
(its shifted sums): per output, the centre tap, then each pair of taps from the outside in, ``out += (left +
right) · w_j``; 5-tap windows read mirrored borders with normalised taps, longer windows read zeros and divide by
the in-image taps' sum. On axes of up to 1024 samples the twin multiplies by a dense matrix instead (the same
sums, BLAS's order): there the two differ by float64 rounding only (~1e-16 relative, inside the op's 1e-10).
Horizontal pass per row, vertical pass per output row over all columns; threads split rows.

**Malta lines** (:func:`~fusedsim.reference.butteraugli_filters_ref.malta_lines_ref`): per pixel, each line's taps
summed in the line's order, squared and added line after line: the same bits.
"""

from __future__ import annotations

import functools

import numpy as np
import torch
from numba import prange

from fusedsim.cpu._parallel import parallel_kernel
from fusedsim.reference.butteraugli_filters_ref import (
    blur_taps,
    butteraugli_blur_ref,
    butteraugli_malta_add_ref,
    butteraugli_malta_ref,
    malta_lines_ref,
)

__all__ = ["butteraugli_blur_numba", "butteraugli_malta_add_numba", "butteraugli_malta_numba", "malta_lines_numba"]


@functools.lru_cache(maxsize=64)
def _axis_plan(n: int, sigma: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(source index of each padded position, -1 for zero; weights w_0..w_r; divisor per output) of one axis, as
    the twin builds them."""
    taps = blur_taps(sigma).astype(np.float64)
    k, r = taps.size, taps.size // 2
    idx = np.arange(-r, n + r)
    if k == 5:
        while (idx < 0).any() or (idx >= n).any():
            idx = np.where(idx < 0, -idx - 1, np.where(idx >= n, 2 * n - 1 - idx, idx))
        weights, norm = taps / taps.sum(), np.ones(n)
    else:
        idx = np.where((idx < 0) | (idx >= n), -1, idx)
        weights = taps
        norm = np.array([taps[max(0, r - i):min(k, r + n - i)].sum() for i in range(n)])
    return idx.astype(np.int64), np.ascontiguousarray(weights[: r + 1]), norm


@parallel_kernel
def _rows(x, out, idx, w, norm, divide, zero):  # pragma: no cover - compiled
    rows, n = x.shape
    r = w.shape[0] - 1
    for row in prange(rows):
        src = x[row]
        padded = np.empty(n + 2 * r, dtype=x.dtype)
        for p in range(n + 2 * r):
            padded[p] = src[idx[p]] if idx[p] >= 0 else zero
        for i in range(n):
            acc = padded[i + r] * w[r]
            for j in range(r):
                acc = acc + (padded[i + j] + padded[i + 2 * r - j]) * w[j]
            out[row, i] = acc / norm[i] if divide else acc


@parallel_kernel
def _columns(x, out, idx, w, norm, divide, zero):  # pragma: no cover - compiled
    # ``zero`` has the arrays' dtype: a float literal would make float32 sums float64 (other roundings)
    planes, n, width = x.shape
    r = w.shape[0] - 1
    for task in prange(planes * n):
        p, i = task // n, task % n
        centre = idx[i + r]
        for c in range(width):
            out[p, i, c] = (x[p, centre, c] if centre >= 0 else zero) * w[r]
        for j in range(r):
            a, b = idx[i + j], idx[i + 2 * r - j]
            for c in range(width):
                va = x[p, a, c] if a >= 0 else zero
                vb = x[p, b, c] if b >= 0 else zero
                out[p, i, c] = out[p, i, c] + (va + vb) * w[j]
        if divide:
            for c in range(width):
                out[p, i, c] = out[p, i, c] / norm[i]


def butteraugli_blur_numba(x: torch.Tensor, sigma: float) -> torch.Tensor:
    """:func:`~fusedsim.reference.butteraugli_filters_ref.butteraugli_blur_ref` for float64/float32 CPU tensors
    (N, C, H, W), compiled; anything else through the twin."""
    if x.device.type != "cpu" or x.dtype not in (torch.float32, torch.float64) or x.dim() != 4 or x.requires_grad:
        return butteraugli_blur_ref(x, sigma)
    n, c, h, w = x.shape
    src = x.contiguous().numpy().reshape(n * c, h, w)
    mid = np.empty_like(src)
    idx, weights, norm = _axis_plan(w, float(sigma))
    divide = blur_taps(sigma).size != 5  # longer windows are renormalised at the borders
    zero = src.dtype.type(0)
    _rows(src.reshape(-1, w), mid.reshape(-1, w), idx, weights.astype(src.dtype), norm.astype(src.dtype), divide,
          zero)
    out = np.empty_like(src)
    idx, weights, norm = _axis_plan(h, float(sigma))
    _columns(mid, out, idx, weights.astype(src.dtype), norm.astype(src.dtype), divide, zero)
    return torch.from_numpy(out.reshape(n, c, h, w))


@parallel_kernel
def _malta_lines(padded, out, taps, counts, zero):  # pragma: no cover - compiled
    planes, h, w = out.shape
    for task in prange(planes * h):
        p, y = task // h, task % h
        total = np.full(w, zero)
        s = np.empty(w, dtype=out.dtype)
        for line in range(counts.shape[0]):  # per pixel: lines in order, each line's taps in order
            s[:] = zero
            for t in range(counts[line]):
                row = padded[p, 4 + y + taps[line, t, 0]]
                dx = 4 + taps[line, t, 1]
                for x in range(w):  # contiguous: vectorised
                    s[x] = s[x] + row[dx + x]
            for x in range(w):
                total[x] = total[x] + s[x] * s[x]
        out[p, y] = total


def malta_lines_numba(diffs: torch.Tensor, lines) -> torch.Tensor:
    """:func:`~fusedsim.reference.butteraugli_filters_ref.malta_lines_ref` for float CPU tensors (..., H, W)
    (taps within 4 pixels), compiled; anything else through the twin."""
    if diffs.device.type != "cpu" or diffs.dtype not in (torch.float32, torch.float64) or diffs.requires_grad:
        return malta_lines_ref(diffs, lines)
    h, w = diffs.shape[-2:]
    padded = torch.nn.functional.pad(diffs.reshape(-1, h, w), (4, 4, 4, 4)).numpy()
    counts = np.array([len(line) for line in lines], dtype=np.int64)
    taps = np.zeros((len(lines), int(counts.max()), 2), dtype=np.int64)
    for i, line in enumerate(lines):
        taps[i, : len(line)] = line
    out = np.empty((padded.shape[0], h, w), dtype=padded.dtype)
    _malta_lines(padded, out, taps, counts, padded.dtype.type(0))
    return torch.from_numpy(out).reshape(diffs.shape)


def butteraugli_malta_numba(lum0: torch.Tensor, lum1: torch.Tensor, w_0gt1: float, w_0lt1: float, norm1: float,
                            mulli: float, low_freq: bool) -> torch.Tensor:
    return butteraugli_malta_ref(lum0, lum1, w_0gt1, w_0lt1, norm1, mulli, low_freq, malta_lines_numba)


def butteraugli_malta_add_numba(acc: torch.Tensor, lum0: torch.Tensor, lum1: torch.Tensor, w_0gt1: float,
                                w_0lt1: float, norm1: float, mulli: float, low_freq: bool) -> torch.Tensor:
    return butteraugli_malta_add_ref(acc, lum0, lum1, w_0gt1, w_0lt1, norm1, mulli, low_freq, malta_lines_numba)
