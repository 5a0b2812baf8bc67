"""PyTorch twins of Butteraugli's (libjxl 0.7) spatial filters: the blur, the Malta line filters, the fuzzy
erosion. They are the specification of the Triton ops in ``ops/butteraugli_*.py`` and the CPU path.

Blur (``butteraugli_blur_ref``): a separable Gaussian ``exp(-i²/2σ²)`` truncated at ``|i| <= max(1, ⌊2.25σ⌋)``
(2.25σ rounded in float32), applied horizontally then vertically. With 5 taps (σ = 1.2, the opsin blur) the
image is mirrored at its borders (edge pixel repeated: ``-1 -> 0``); with any other length the taps that fall
outside the image are dropped and the rest renormalised to sum 1, per axis.

Malta (``butteraugli_malta_ref``): each pixel's difference ``d`` of the two planes is weighted by the local
magnitude (a symmetric term and a half-open asymmetric one, see :func:`malta_diffs_ref`); the result is the sum
over 16 short line segments through the pixel of (sum of ``d`` along the segment)², zero outside the image. The
HF variant uses contiguous 7- and 9-tap lines, the LF variant 5 taps spaced about 2 px apart (offset tables
below; the HF table repeats four lines, as libjxl's does).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F

from fusedsim.core.state import cached

__all__ = [
    "MALTA_HF_LINES", "MALTA_LF_LINES", "blur_taps", "butteraugli_blur_ref", "butteraugli_malta_add_ref",
    "butteraugli_malta_ref",
    "EROSION_WEIGHTS", "fuzzy_erosion_ref", "malta_diffs_ref", "malta_lines_ref", "malta_weights",
]

# (dy, dx) taps of the 16 line segments (the centre (0, 0) is in every line).
MALTA_LF_LINES: tuple[tuple[tuple[int, int], ...], ...] = (
    ((0, -4), (0, -2), (0, 0), (0, 2), (0, 4)),
    ((-4, 0), (-2, 0), (0, 0), (2, 0), (4, 0)),
    ((-3, -3), (-2, -2), (0, 0), (2, 2), (3, 3)),
    ((-3, 3), (-2, 2), (0, 0), (2, -2), (3, -3)),
    ((-4, 1), (-2, 1), (0, 0), (2, -1), (4, -1)),
    ((-4, -1), (-2, -1), (0, 0), (2, 1), (4, 1)),
    ((-1, -4), (-1, -2), (0, 0), (1, 2), (1, 4)),
    ((1, -4), (1, -2), (0, 0), (-1, 2), (-1, 4)),
    ((-3, -2), (-2, -1), (0, 0), (2, 1), (3, 2)),
    ((-3, 2), (-2, 1), (0, 0), (2, -1), (3, -2)),
    ((-2, -3), (-1, -2), (0, 0), (1, 2), (2, 3)),
    ((-2, 3), (-1, 2), (0, 0), (1, -2), (2, -3)),
    ((2, -4), (1, -2), (0, 0), (-1, 2), (-2, 4)),
    ((-2, -4), (-1, -2), (0, 0), (1, 2), (2, 4)),
    ((-4, -2), (-2, -1), (0, 0), (2, 1), (4, 2)),
    ((-4, 2), (-2, 1), (0, 0), (2, -1), (4, -2)),
)
_H9 = tuple((0, dx) for dx in range(-4, 5))
_V9 = tuple((dy, 0) for dy in range(-4, 5))
_STEEP_R = ((-4, 1), (-3, 1), (-2, 1), (-1, 0), (0, 0), (1, 0), (2, -1), (3, -1), (4, -1))
_STEEP_L = ((-4, -1), (-3, -1), (-2, -1), (-1, 0), (0, 0), (1, 0), (2, 1), (3, 1), (4, 1))
_FLAT_D = ((-1, -4), (-1, -3), (-1, -2), (0, -1), (0, 0), (0, 1), (1, 2), (1, 3), (1, 4))
_FLAT_U = ((1, -4), (1, -3), (1, -2), (0, -1), (0, 0), (0, 1), (-1, 2), (-1, 3), (-1, 4))
MALTA_HF_LINES: tuple[tuple[tuple[int, int], ...], ...] = (
    _H9, _V9,
    tuple((k, k) for k in range(-3, 4)),
    tuple((k, -k) for k in range(-3, 4)),
    _STEEP_R, _STEEP_L, _FLAT_D, _FLAT_U,
    ((-3, -2), (-2, -1), (-1, -1), (0, 0), (1, 1), (2, 1), (3, 2)),
    ((-3, 2), (-2, 1), (-1, 1), (0, 0), (1, -1), (2, -1), (3, -2)),
    ((-2, -3), (-1, -2), (-1, -1), (0, 0), (1, 1), (1, 2), (2, 3)),
    ((-2, 3), (-1, 2), (-1, 1), (0, 0), (1, -1), (1, -2), (2, -3)),
    _FLAT_U, _FLAT_D, _STEEP_L, _STEEP_R,
)

_F32 = np.float32
EROSION_WEIGHTS = tuple(float(_F32(v)) for v in (0.45, 0.3, 0.25))  # float constants in libjxl


def blur_taps(sigma: float) -> np.ndarray:
    """The unnormalised float32 taps ``exp(-i²/2σ²)``, ``|i| <= max(1, ⌊2.25σ⌋)`` (float32 arithmetic)."""
    sigma32 = _F32(sigma)
    radius = max(1, int(_F32(2.25) * abs(sigma32)))
    scaler = -1.0 / (2.0 * float(sigma32) * float(sigma32))
    return np.array([math.exp(scaler * i * i) for i in range(-radius, radius + 1)], dtype=np.float32)


@cached(maxsize=64)
def _blur_matrix(n: int, sigma: float) -> np.ndarray:
    """The blur along one axis of length n as an (n, n) matrix ``M`` (``out = x @ M``), float64: column i holds
    the taps of output i, mirrored (5 taps) or renormalised over the in-image taps (any other length)."""
    taps = blur_taps(sigma).astype(np.float64)
    r = taps.size // 2
    m = np.zeros((n, n))
    for i in range(n):
        for k, w in enumerate(taps):
            j = i + k - r
            if taps.size == 5:
                while j < 0 or j >= n:
                    j = -j - 1 if j < 0 else 2 * n - 1 - j
                m[j, i] += w / taps.sum()
            elif 0 <= j < n:
                m[j, i] = w
        if taps.size != 5:
            m[:, i] /= m[:, i].sum()
    return m


_DENSE_MAX = 1024  # longer axes use shifted sums (O(n·K)) instead of the dense matrix (O(n²))


def _blur_axis(x: torch.Tensor, sigma: float, dim: int) -> torch.Tensor:
    """Blur the last (dim=-1) or second-to-last (dim=-2) axis of ``x`` (..., H, W)."""
    n = x.shape[dim]
    if n <= _DENSE_MAX:
        m = torch.as_tensor(_blur_matrix(n, float(sigma)), dtype=x.dtype, device=x.device)
        return x @ m if dim == -1 else m.transpose(0, 1) @ x
    taps = blur_taps(sigma).astype(np.float64)
    k, r = taps.size, taps.size // 2
    xt = x if dim == -1 else x.transpose(-1, -2)
    if k == 5:
        idx = np.arange(-r, n + r)
        while (idx < 0).any() or (idx >= n).any():
            idx = np.where(idx < 0, -idx - 1, np.where(idx >= n, 2 * n - 1 - idx, idx))
        xp, weights, norm = xt.index_select(-1, torch.as_tensor(idx, device=x.device)), taps / taps.sum(), None
    else:
        xp, weights = F.pad(xt, (r, r)), taps
        valid = [taps[max(0, r - i):min(k, r + n - i)].sum() for i in range(n)]  # in-image taps per output
        norm = torch.as_tensor(valid, dtype=x.dtype, device=x.device)
    out = xp[..., r:r + n] * float(weights[r])
    for j in range(r):
        out = out + (xp[..., j:j + n] + xp[..., k - 1 - j:k - 1 - j + n]) * float(weights[j])
    if norm is not None:
        out = out / norm
    return out if dim == -1 else out.transpose(-1, -2)


def butteraugli_blur_ref(x: torch.Tensor, sigma: float) -> torch.Tensor:
    """Butteraugli's blur of every plane of ``x`` (N, C, H, W) -> (N, C, H, W), in ``x``'s dtype (see the module
    docstring for the borders)."""
    return _blur_axis(_blur_axis(x, sigma, -1), sigma, -2)


def malta_weights(w_0gt1: float, w_0lt1: float, norm1: float, mulli: float) -> tuple[float, float, float]:
    """(norm2_0gt1, norm2_0lt1, norm1) as libjxl rounds them (float32 results of double expressions; the line
    length 3.75 gives the divisor 2·3.75 + 1)."""
    w_pre_gt = mulli * math.sqrt(0.5 * w_0gt1) / 8.5
    w_pre_lt = mulli * math.sqrt(float(_F32(0.33)) * w_0lt1) / 8.5
    return float(_F32(w_pre_gt * norm1)), float(_F32(w_pre_lt * norm1)), float(_F32(norm1))


def malta_diffs_ref(lum0: torch.Tensor, lum1: torch.Tensor, w_0gt1: float, w_0lt1: float, norm1: float,
                    mulli: float) -> torch.Tensor:
    """The per-pixel weighted difference the Malta lines sum, (N, H, W) -> (N, H, W).

    ``s·(lum0 - lum1)`` with ``s = norm2_gt/(norm1 + (|lum0|+|lum1|)/2)``, plus a half-open penalty
    ``s2·excess`` when ``lum1`` leaves the band [0.55|lum0|, 1.05|lum0|] on lum0's side of zero (pulled towards
    the band: positive when lum1 is too small in magnitude, negative when too large, mirrored for lum0 < 0)."""
    gt, lt, n1 = malta_weights(w_0gt1, w_0lt1, norm1, mulli)
    absval = 0.5 * (lum0.abs() + lum1.abs())
    out = gt / (n1 + absval) * (lum0 - lum1)
    s2 = lt / (n1 + absval)
    fabs0 = lum0.abs()
    small, big = 0.55 * fabs0, 1.05 * fabs0
    zero = torch.zeros_like(out)
    neg = torch.where(lum1 > -small, -(lum1 + small), torch.where(lum1 < -big, -lum1 - big, zero))
    pos = torch.where(lum1 < small, small - lum1, torch.where(lum1 > big, -(lum1 - big), zero))
    return out + s2 * torch.where(lum0 < 0, neg, pos)


def malta_lines_ref(diffs: torch.Tensor, lines) -> torch.Tensor:
    """Σ over ``lines`` of (Σ over the line's (dy, dx) taps of the zero-padded ``diffs``)², in that order."""
    h, w = diffs.shape[-2:]
    padded = F.pad(diffs, (4, 4, 4, 4))
    total = torch.zeros_like(diffs)
    for line in lines:
        s = sum(padded[..., 4 + dy:4 + dy + h, 4 + dx:4 + dx + w] for dy, dx in line)
        total = total + s * s
    return total


def butteraugli_malta_ref(lum0: torch.Tensor, lum1: torch.Tensor, w_0gt1: float, w_0lt1: float, norm1: float,
                          mulli: float, low_freq: bool, sum_lines: Callable = malta_lines_ref) -> torch.Tensor:
    """Malta difference of two planes (N, H, W) -> (N, H, W): the sum over the 16 lines of the squared line sums
    of :func:`malta_diffs_ref` (``low_freq`` picks the 5-tap LF lines, else the HF lines). ``sum_lines``:
    :func:`malta_lines_ref` or a compiled implementation of the same sums."""
    diffs = malta_diffs_ref(lum0, lum1, w_0gt1, w_0lt1, norm1, mulli)
    return sum_lines(diffs, MALTA_LF_LINES if low_freq else MALTA_HF_LINES)


def butteraugli_malta_add_ref(acc: torch.Tensor, lum0: torch.Tensor, lum1: torch.Tensor, w_0gt1: float,
                              w_0lt1: float, norm1: float, mulli: float, low_freq: bool,
                              sum_lines: Callable = malta_lines_ref) -> torch.Tensor:
    """``acc + butteraugli_malta_ref(lum0, lum1, ...)`` (N, H, W): the Malta sums accumulate band after band."""
    return acc + butteraugli_malta_ref(lum0, lum1, w_0gt1, w_0lt1, norm1, mulli, low_freq, sum_lines)


def fuzzy_erosion_ref(x: torch.Tensor) -> torch.Tensor:
    """libjxl's FuzzyErosion of (N, H, W) non-negative maps: with m0 <= m1 <= m2 the three smallest of
    {v, 2v, 2v} ∪ {the in-image pixels at offsets (±3|0, ±3|0)}, returns 0.45·m0 + 0.3·m1 + 0.25·m2."""
    h, w = x.shape[-2:]
    padded = F.pad(x, (3, 3, 3, 3), value=math.inf)
    cands = [x, 2 * x, 2 * x]
    for dy in (-3, 0, 3):
        for dx in (-3, 0, 3):
            if dy or dx:
                cands.append(padded[..., 3 + dy:3 + dy + h, 3 + dx:3 + dx + w])
    smallest = torch.stack(cands, dim=-1).topk(3, dim=-1, largest=False, sorted=True).values
    w0, w1, w2 = EROSION_WEIGHTS
    return w0 * smallest[..., 0] + w1 * smallest[..., 1] + w2 * smallest[..., 2]
