"""The ``windowed_moments`` op on the CPU, compiled with numba: mu_x, mu_y, E[x²], E[y²], E[xy] under a separable
window, 2-D.

The twin (:func:`~fusedsim.core.moments.twin.windowed_moments_ref`) stacks the five products and correlates each
spatial axis with ``F.conv2d`` (rows first, then columns), whose float64 path on the CPU is an im2col and a matrix
product: about a quarter of a second per 1080p plane set. Here the same two passes run as vector loops (along the
rows for the first, shifted row views for the second), each output summing its taps in window order. The products
are the twin's; the sums differ from ``conv2d``'s only in their order (float64: ~1e-16 relative, float32: ~1e-7,
inside the op's tolerance). 3-D inputs and anything else run the twin.
"""

from __future__ import annotations

import numpy as np
import torch
from numba import prange

from fusedsim.core.cpu.parallel import parallel_kernel
from fusedsim.core.moments.twin import compute_dtype, windowed_moments_ref
from fusedsim.core.moments.ops import windowed_moments

__all__ = ["windowed_moments_numba"]


@parallel_kernel
def _products_columns(x, y, win, out, pad):  # pragma: no cover - compiled
    """The five products of (N, C, H, W) x and y correlated along H with win (C, K): out (5, N, C, H', W)."""
    n, c, h, w = x.shape
    taps = win.shape[1]
    rows_out = out.shape[3]
    for task in prange(n * c * rows_out):
        i, ch, r = task // (c * rows_out), (task // rows_out) % c, task % rows_out
        acc = np.zeros((5, w), dtype=out.dtype)
        for k in range(taps):
            src = r + k - pad
            if src < 0 or src >= h:  # 'same': the zero padding adds nothing
                continue
            wk = win[ch, k]
            xs, ys = x[i, ch, src], y[i, ch, src]
            for col in range(w):
                a, b = xs[col], ys[col]
                acc[0, col] += wk * a
                acc[1, col] += wk * b
                acc[2, col] += wk * (a * a)
                acc[3, col] += wk * (b * b)
                acc[4, col] += wk * (a * b)
        for q in range(5):
            dst = out[q, i, ch, r]
            for col in range(w):
                dst[col] = acc[q, col]


@parallel_kernel
def _rows(mid, win, out, pad):  # pragma: no cover - compiled
    """(5, N, C, H', W) correlated along W with win (C, K): out (5, N, C, H', W')."""
    _, n, c, h, w = mid.shape
    taps = win.shape[1]
    cols_out = out.shape[4]
    for task in prange(5 * n * c * h):
        q, rest = task // (n * c * h), task % (n * c * h)
        i, ch, r = rest // (c * h), (rest // h) % c, rest % h
        src, dst = mid[q, i, ch, r], out[q, i, ch, r]
        for col in range(cols_out):
            dst[col] = 0.0
        for k in range(taps):
            wk = win[ch, k]
            lo = max(0, pad - k)  # outputs whose tap k falls inside the row
            hi = min(cols_out, w + pad - k)
            if hi <= lo:
                continue
            shifted = src[lo + k - pad:hi + k - pad]
            part = dst[lo:hi]
            for j in range(hi - lo):
                part[j] += wk * shifted[j]


@windowed_moments.cpu_kernel
def windowed_moments_numba(x: torch.Tensor, y: torch.Tensor, win: torch.Tensor, valid: bool) -> torch.Tensor:
    """:func:`~fusedsim.core.moments.twin.windowed_moments_ref` for 2-D CPU float tensors (N, C, H, W), compiled
    (the products in the twin's dtype, the window's taps summed in order); anything else through the twin."""
    dt = compute_dtype(x.dtype)
    if (x.device.type != "cpu" or x.dim() != 4 or x.shape != y.shape or dt not in (torch.float32, torch.float64)
            or x.requires_grad or y.requires_grad or win.dim() != 2 or win.shape[0] != x.shape[1]):
        return windowed_moments_ref(x, y, win, valid)
    n, c, h, w = x.shape
    taps = win.shape[1]
    pad = 0 if valid else taps // 2
    rows_out, cols_out = h + 2 * pad - taps + 1, w + 2 * pad - taps + 1
    if rows_out < 1 or cols_out < 1:
        return windowed_moments_ref(x, y, win, valid)
    a, b = (t.detach().to(dt).contiguous().numpy() for t in (x, y))
    window = win.detach().to(dt).contiguous().numpy()
    mid = np.empty((5, n, c, rows_out, w), dtype=a.dtype)
    _products_columns(a, b, window, mid, pad)
    out = np.empty((5, n, c, rows_out, cols_out), dtype=a.dtype)
    _rows(mid, window, out, pad)
    return torch.from_numpy(out)
