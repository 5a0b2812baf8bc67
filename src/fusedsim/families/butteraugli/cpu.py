"""Butteraugli's filters on the CPU, compiled with numba, in the twins' summation order: the separable blur, the
Malta differences and line sums, and the fuzzy erosion.

**Blur.**
The arithmetic is that of :func:`fusedsim.families.butteraugli.filters_twin.butteraugli_blur_ref` on long axes
(its shifted sums): per output, the centre tap, then each pair of taps from the outside in, ``out += (left +
right) · w_j``; 5-tap windows read mirrored borders with normalised taps, longer windows read zeros and divide by
the in-image taps' sum. On axes of up to 1024 samples the twin multiplies by a dense matrix instead (the same
sums, BLAS's order): there the two differ by float64 rounding only (~1e-16 relative, inside the op's 1e-10).
Horizontal pass per row, vertical pass per output row over all columns; threads split rows.

**Malta lines** (:func:`~fusedsim.families.butteraugli.filters_twin.malta_lines_ref`): per pixel, each line's taps
summed in the line's order, squared and added line after line: the same bits. The per-pixel differences they sum
(:func:`~fusedsim.families.butteraugli.filters_twin.malta_diffs_ref`) are one compiled pass of the twin's
operations.

**Fuzzy erosion** (:func:`~fusedsim.families.butteraugli.filters_twin.fuzzy_erosion_ref`): the three smallest of
the 11 candidates by insertion (NaN last, as ``topk`` orders), weighted in the twin's order: the same bits.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from numba import njit, prange

from fusedsim.core.cpu.parallel import parallel_kernel
from fusedsim.core.state import cached
from fusedsim.families.butteraugli.filters_twin import (
    EROSION_WEIGHTS,
    MALTA_HF_LINES,
    MALTA_LF_LINES,
    blur_taps,
    butteraugli_blur_ref,
    butteraugli_malta_ref,
    fuzzy_erosion_ref,
    malta_lines_ref,
    malta_weights,
)
from fusedsim.families.butteraugli.ops import butteraugli_blur, butteraugli_erosion, butteraugli_malta, butteraugli_malta_add

__all__ = ["butteraugli_blur_numba", "butteraugli_malta_add_numba", "butteraugli_malta_numba", "fuzzy_erosion_numba",
           "malta_lines_numba"]


@cached(maxsize=64)
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
        dst = out[row]
        padded = np.empty(n + 2 * r, dtype=x.dtype)
        for p in range(n + 2 * r):
            padded[p] = src[idx[p]] if idx[p] >= 0 else zero
        # one tap pair at a time over the whole row (vector loops over shifted views), each output summed in the
        # twin's order: 1.4x (5 taps) to 2.7x (33 taps) the per-output loop
        acc = np.empty(n, dtype=x.dtype)
        centre = w[r]
        for i in range(n):
            acc[i] = padded[i + r] * centre
        for j in range(r):
            wj = w[j]
            left, right = padded[j:j + n], padded[2 * r - j:2 * r - j + n]
            for i in range(n):
                acc[i] = acc[i] + (left[i] + right[i]) * wj
        if divide:
            for i in range(n):
                dst[i] = acc[i] / norm[i]
        else:
            for i in range(n):
                dst[i] = acc[i]


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


@butteraugli_blur.cpu_kernel
def butteraugli_blur_numba(x: torch.Tensor, sigma: float) -> torch.Tensor:
    """:func:`~fusedsim.families.butteraugli.filters_twin.butteraugli_blur_ref` for float64/float32 CPU tensors
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


_MALTA_BLOCK = 1024  # columns per pass of the Malta sums (3-4x the whole row indexed from a tap offset)


@parallel_kernel
def _malta_lines(padded, out, taps, counts, zero, block):  # pragma: no cover - compiled
    planes, h, w = out.shape
    for task in prange(planes * h):
        p, y = task // h, task % h
        s = np.empty(block, dtype=out.dtype)
        total = np.empty(block, dtype=out.dtype)
        dst = out[p, y]
        for x0 in range(0, w, block):
            nb = min(block, w - x0)
            for x in range(nb):
                total[x] = zero
            for line in range(counts.shape[0]):  # per pixel: lines in order, each line's taps in order
                for x in range(nb):
                    s[x] = zero
                for t in range(counts[line]):
                    start = 4 + taps[line, t, 1] + x0
                    src = padded[p, 4 + y + taps[line, t, 0], start:start + nb]  # a view: one vector loop
                    for x in range(nb):
                        s[x] = s[x] + src[x]
                for x in range(nb):
                    total[x] = total[x] + s[x] * s[x]
            for x in range(nb):
                dst[x0 + x] = total[x]


def malta_lines_numba(diffs: torch.Tensor, lines) -> torch.Tensor:
    """:func:`~fusedsim.families.butteraugli.filters_twin.malta_lines_ref` for float CPU tensors (..., H, W)
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
    _malta_lines(padded, out, taps, counts, padded.dtype.type(0), _MALTA_BLOCK)
    return torch.from_numpy(out).reshape(diffs.shape)


@parallel_kernel
def _malta_diffs(lum0, lum1, out, consts):  # pragma: no cover - compiled
    """:func:`~fusedsim.families.butteraugli.filters_twin.malta_diffs_ref` per value, its operations in its order
    (``consts``: gt, lt, norm1, 0.5, 0.55, 1.05 in the planes' dtype, as PyTorch applies Python scalars)."""
    gt, lt, n1, half, lo, hi = consts[0], consts[1], consts[2], consts[3], consts[4], consts[5]
    zero, one = consts.dtype.type(0), consts.dtype.type(1)
    flat0, flat1, flat_out = lum0.reshape(-1), lum1.reshape(-1), out.reshape(-1)
    size = flat0.size
    chunks = -(-size // 4096)
    for chunk in prange(chunks):
        for i in range(chunk * 4096, min(size, (chunk + 1) * 4096)):
            a, b = flat0[i], flat1[i]
            absval = half * (abs(a) + abs(b))
            # PyTorch evaluates ``scalar / tensor`` as ``tensor.reciprocal() * scalar``
            inverse = one / (n1 + absval)
            value = inverse * gt * (a - b)
            s2 = inverse * lt
            fabs0 = abs(a)
            small, big = lo * fabs0, hi * fabs0
            if a < 0:
                pull = -(b + small) if b > -small else (-b - big if b < -big else zero)
            else:
                pull = small - b if b < small else (-(b - big) if b > big else zero)
            flat_out[i] = value + s2 * pull


def _diffs(lum0: torch.Tensor, lum1: torch.Tensor, w_0gt1: float, w_0lt1: float, norm1: float,
           mulli: float) -> torch.Tensor | None:
    """:func:`malta_diffs_ref` compiled, or None for inputs it does not take (the twin then runs)."""
    if (lum0.device.type != "cpu" or lum0.dtype not in (torch.float32, torch.float64) or lum1.dtype != lum0.dtype
            or lum0.shape != lum1.shape or lum0.requires_grad or lum1.requires_grad):
        return None
    gt, lt, n1 = malta_weights(w_0gt1, w_0lt1, norm1, mulli)
    a, b = lum0.contiguous().numpy(), lum1.contiguous().numpy()
    out = np.empty_like(a)
    _malta_diffs(a, b, out, np.array([gt, lt, n1, 0.5, 0.55, 1.05], dtype=a.dtype))
    return torch.from_numpy(out)


@butteraugli_malta.cpu_kernel
def butteraugli_malta_numba(lum0: torch.Tensor, lum1: torch.Tensor, w_0gt1: float, w_0lt1: float, norm1: float,
                            mulli: float, low_freq: bool) -> torch.Tensor:
    diffs = _diffs(lum0, lum1, w_0gt1, w_0lt1, norm1, mulli)
    if diffs is None:
        return butteraugli_malta_ref(lum0, lum1, w_0gt1, w_0lt1, norm1, mulli, low_freq, malta_lines_numba)
    return malta_lines_numba(diffs, MALTA_LF_LINES if low_freq else MALTA_HF_LINES)


@butteraugli_malta_add.cpu_kernel
def butteraugli_malta_add_numba(acc: torch.Tensor, lum0: torch.Tensor, lum1: torch.Tensor, w_0gt1: float,
                                w_0lt1: float, norm1: float, mulli: float, low_freq: bool) -> torch.Tensor:
    return acc + butteraugli_malta_numba(lum0, lum1, w_0gt1, w_0lt1, norm1, mulli, low_freq)


@njit(cache=True, nogil=True, inline="always")
def _before(a, b):  # pragma: no cover - compiled
    """a sorts before b in an ascending sort that puts NaN last (topk's order)."""
    return a < b or (b != b and a == a)


@parallel_kernel
def _erosion(padded, out, w0, w1, w2):  # pragma: no cover - compiled
    planes, h, w = out.shape
    for task in prange(planes * h):
        p, y = task // h, task % h
        for x in range(w):
            v = padded[p, y + 3, x + 3]
            m0, m1, m2 = v, v + v, v + v  # the twin's candidates x, 2x, 2x, in order for v >= 0
            if _before(m1, m0):  # v < 0
                m0, m1, m2 = m1, m1, m0
            for dy in (-3, 0, 3):
                for dx in (-3, 0, 3):
                    if dy == 0 and dx == 0:
                        continue
                    c = padded[p, y + 3 + dy, x + 3 + dx]
                    if _before(c, m2):
                        if _before(c, m1):
                            m2 = m1
                            if _before(c, m0):
                                m1, m0 = m0, c
                            else:
                                m1 = c
                        else:
                            m2 = c
            out[p, y, x] = w0 * m0 + w1 * m1 + w2 * m2


@butteraugli_erosion.cpu_kernel
def fuzzy_erosion_numba(x: torch.Tensor) -> torch.Tensor:
    """:func:`~fusedsim.families.butteraugli.filters_twin.fuzzy_erosion_ref` for float CPU tensors (N, H, W),
    compiled (the same selection and the same three products and sums); anything else through the twin."""
    if x.device.type != "cpu" or x.dtype not in (torch.float32, torch.float64) or x.dim() != 3 or x.requires_grad:
        return fuzzy_erosion_ref(x)
    padded = torch.nn.functional.pad(x, (3, 3, 3, 3), value=math.inf).numpy()
    out = np.empty(tuple(x.shape), dtype=padded.dtype)
    w0, w1, w2 = (padded.dtype.type(v) for v in EROSION_WEIGHTS)
    _erosion(padded, out, w0, w1, w2)
    return torch.from_numpy(out)
