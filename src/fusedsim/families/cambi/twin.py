"""libvmaf 3.2.0's CAMBI (``libvmaf/src/feature/cambi.c``), the PyTorch specification: per-scale pooled banding
scores of a batch of luma frames at the encode size.

Per frame: the samples become 10-bit codes (``<<`` below 10 bits, round-shift above), optionally anti-dithered
(floor mean of each pixel's 2x2 block, clipped at the last row and column); a spatial mask marks pixels whose 7x7
neighbourhood (zero outside) holds more than a size-dependent number of "flat" pixels (equal to their right and lower
neighbours, the last row and column counting as equal). Then at each of 5 scales (the image and mask decimated by
keeping ``[2i][2j]``, scale 0 too with the high-resolution speed-up): a 3-tap mode filter, horizontal then vertical
(rows 0 and h-1 unfiltered), and per masked pixel of code v a c-value: the largest over contrast steps
d + 1 (weight ``CONTRAST_WEIGHTS[d]``) allowed at v of ``float32(w * N(v) * M) * R[N(v) + M]``, with N(u) the
number of masked pixels of code u (inside the counted band) in the window centred on the pixel (clipped at the
borders), M = max(N(v + d + 1), N(v - d - 1)) and R libvmaf's reciprocal table. A step is allowed at v when
``v <= tvi[d]`` and ``v + num_diffs + d + 1 > vlt_luma`` (libvmaf compares the luminance floor with the code plus
``num_diffs``). The scale's score is the mean of its ``topk`` share of largest c-values, summed in double.

Every c-value is 0 or at least 0.5 (N(v) >= 1 counts the pixel itself), so every sum of them is a multiple of
2**-24: below 2**29 a double holds every partial sum exactly, in any order. Above, libvmaf's quickselect order is
replayed (:func:`quickselect_mean`).
"""

from __future__ import annotations

import numpy as np
import torch

from fusedsim.families.cambi.reciprocal_table import RECIPROCAL_LUT
from fusedsim.families.cambi.settings import CONTRAST_WEIGHTS, NUM_SCALES, SCALE_WEIGHTS

__all__ = ["EXACT_SUM_LIMIT", "anti_dither", "c_values", "cambi_scales_ref", "combine_scales", "decimate",
           "mode_filter", "pool_topk", "quickselect_mean", "spatial_mask", "to_10bit", "topk_count"]

#: Below this, a double sum of c-values is exact in any order (values are multiples of 2**-24, 53-bit doubles).
EXACT_SUM_LIMIT = 2.0 ** 29
_OUTSIDE = -(1 << 20)  # a code no window count matches: unmasked pixels and codes outside the counted band


def to_10bit(frames: torch.Tensor, bit_depth: int) -> torch.Tensor:
    """``(N, H, W)`` integer samples as 10-bit codes, int32."""
    x = frames.to(torch.int32)
    if bit_depth <= 8:
        return x << (10 - bit_depth)
    if bit_depth == 9:
        return x << 1
    shift = bit_depth - 10
    return (x + ((1 << shift) >> 1)) >> shift


def anti_dither(x: torch.Tensor) -> torch.Tensor:
    """Floor mean of each pixel's 2x2 block (itself, right, below, below-right); the last column averages with the
    pixel below, the last row with the pixel to the right, the bottom-right pixel is kept."""
    out = x.clone()
    out[..., :-1, :-1] = (x[..., :-1, :-1] + x[..., :-1, 1:] + x[..., 1:, :-1] + x[..., 1:, 1:]) >> 2
    out[..., :-1, -1] = (x[..., :-1, -1] + x[..., 1:, -1]) >> 1
    out[..., -1, :-1] = (x[..., -1, :-1] + x[..., -1, 1:]) >> 1
    return out


def _box_sum(a: torch.Tensor, pad: int) -> torch.Tensor:
    """Sum over the (2 pad + 1)^2 window centred on each pixel, zero outside: ``(N, H, W)`` int32."""
    n, h, w = a.shape
    s = torch.zeros((n, h + 1, w + 1), dtype=torch.int32, device=a.device)
    s[:, 1:, 1:] = a.to(torch.int32).cumsum(1).cumsum(2)
    r0 = (torch.arange(h, device=a.device) - pad).clamp(0, h)
    r1 = (torch.arange(h, device=a.device) + pad + 1).clamp(0, h)
    c0 = (torch.arange(w, device=a.device) - pad).clamp(0, w)
    c1 = (torch.arange(w, device=a.device) + pad + 1).clamp(0, w)
    return (s[:, r1][:, :, c1] - s[:, r0][:, :, c1] - s[:, r1][:, :, c0] + s[:, r0][:, :, c0]).to(torch.int32)


def spatial_mask(x: torch.Tensor, threshold: int) -> torch.Tensor:
    """Pixels with more than ``threshold`` flat pixels in their 7x7 neighbourhood: ``(N, H, W)`` bool."""
    flat = torch.ones_like(x, dtype=torch.bool)
    flat[..., :, :-1] &= x[..., :, :-1] == x[..., :, 1:]
    flat[..., :-1, :] &= x[..., :-1, :] == x[..., 1:, :]
    return _box_sum(flat, 3) > threshold


def decimate(x: torch.Tensor) -> torch.Tensor:
    """Every second row and column, from the first: ``(N, ceil(H/2), ceil(W/2))``."""
    return x[..., ::2, ::2]


def _mode3(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """The value two of the three share, else their minimum."""
    return torch.where((a == b) | (a == c), a, torch.where(b == c, b, torch.minimum(torch.minimum(a, b), c)))


def mode_filter(x: torch.Tensor) -> torch.Tensor:
    """libvmaf's separable 3-tap mode filter: horizontal (first and last columns copied), then vertical into rows
    1..h-2 (rows 0 and h-1 keep their unfiltered values)."""
    horizontal = x.clone()
    if x.shape[-1] >= 3:
        horizontal[..., 1:-1] = _mode3(x[..., :-2], x[..., 1:-1], x[..., 2:])
    out = x.clone()
    if x.shape[-2] >= 3:
        out[..., 1:-1, :] = _mode3(horizontal[..., :-2, :], horizontal[..., 1:-1, :], horizontal[..., 2:, :])
    return out


def _window_counts(x: torch.Tensor, counted: torch.Tensor, window: int, num_diffs: int) -> torch.Tensor:
    """``(2 num_diffs + 1, N, H, W)`` int32: at offset ``num_diffs + k``, the number of counted pixels of code
    ``x + k`` in the window centred on each pixel (clipped at the borders)."""
    n, h, w = x.shape
    pad = window >> 1
    bins = 2 * num_diffs + 1
    padded = torch.full((n, h + 2 * pad, w + 2 * pad), _OUTSIDE, dtype=torch.int32, device=x.device)
    padded[:, pad:pad + h, pad:pad + w] = torch.where(counted, x, _OUTSIDE)
    counts = torch.zeros((bins, n, h, w), dtype=torch.int16, device=x.device)  # at most 127^2 per bin
    offsets = torch.arange(bins, dtype=torch.int32, device=x.device).view(bins, 1, 1, 1)
    targets = (x - num_diffs)[None] + offsets  # the code each bin counts, per pixel
    for dy in range(window):
        for dx in range(window):
            counts += padded[None, :, dy:dy + h, dx:dx + w] == targets
    return counts.to(torch.int32)


def c_values(x: torch.Tensor, mask: torch.Tensor, window: int, tvi: tuple[int, ...], vlt_luma: int,
             band: tuple[int, int]) -> torch.Tensor:
    """The c-value of each pixel of mode-filtered codes ``x`` (int32) under ``mask``: ``(N, H, W)`` float32."""
    num_diffs = len(tvi)
    counted = mask & (x >= band[0]) & (x <= band[1])
    counts = _window_counts(x, counted, window, num_diffs)
    lut = torch.tensor(RECIPROCAL_LUT, device=x.device)
    p0 = counts[num_diffs]
    best = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    for d in range(num_diffs):
        allowed = counted & (x <= tvi[d]) & (x + num_diffs + d + 1 > vlt_luma)
        pm = torch.maximum(counts[num_diffs + d + 1], counts[num_diffs - d - 1])
        value = (CONTRAST_WEIGHTS[d] * p0 * pm).to(torch.float32) * lut[(p0 + pm).to(torch.int64)]
        best = torch.maximum(best, torch.where(allowed, value, 0.0))
    return best


def topk_count(n: int, topk: float) -> int:
    """libvmaf's number of pooled values: ``(int)(topk * n)`` clipped to [1, n]."""
    return min(max(int(topk * n), 1), n)


def quickselect_mean(values: np.ndarray, k: int) -> float:
    """libvmaf's pooling replayed: its in-place quickselect (``quick_select``) puts the k largest values first,
    in an order of its own, and their double sum is taken in that order, then divided by k. ``values`` is a 1-D
    float32 array (copied)."""
    arr = np.array(values, dtype=np.float32)
    n = arr.shape[0]
    if n != k:
        left, right = 0, n - 1
        while left < right:
            pivot = arr[k]
            i, j = left, right
            while True:
                while arr[i] > pivot:
                    i += 1
                while arr[j] < pivot:
                    j -= 1
                if i <= j:
                    arr[i], arr[j] = arr[j], arr[i]
                    i += 1
                    j -= 1
                if i > j:
                    break
            if j < k:
                left = i
            if k < i:
                right = j
    total = 0.0
    for v in arr[:k].tolist():
        total += v
    return total / k


def pool_topk(c: torch.Tensor, topk: float) -> torch.Tensor:
    """Each frame's mean of its ``topk`` share of largest c-values, as libvmaf sums them: ``(N,)`` float64."""
    n = c.shape[0]
    flat = c.reshape(n, -1)
    k = topk_count(flat.shape[1], topk)
    out = torch.empty(n, dtype=torch.float64, device=c.device)
    for i in range(n):
        top = torch.topk(flat[i], k, sorted=False).values.to(torch.float64).sum()
        if top < EXACT_SUM_LIMIT:
            out[i] = top / torch.full_like(top, float(k))  # CUDA divides by a Python number as a * (1/b)
        else:
            out[i] = quickselect_mean(flat[i].cpu().numpy(), k)
    return out


def cambi_scales_ref(frames: torch.Tensor, tvi: torch.Tensor, bit_depth: int, anti_dithering: bool, window: int,
                     vlt_luma: int, mask_threshold: int, topk: float, high_res: bool) -> torch.Tensor:
    """Per-scale pooled CAMBI scores of integer luma ``frames`` ``(N, H, W)`` (already at the encode size):
    ``(N, 5)`` float64. ``tvi`` holds the visibility threshold of each contrast step (``(num_diffs,)``, 10-bit
    codes, without libvmaf's ``+ num_diffs``)."""
    steps = tuple(int(t) for t in tvi.tolist())
    num_diffs = len(steps)
    band = (max(vlt_luma - 3 * num_diffs + 1, 0), steps[-1] + num_diffs)
    x = to_10bit(frames, bit_depth)
    if anti_dithering:
        x = anti_dither(x)
    mask = spatial_mask(x, mask_threshold)
    scores = []
    for scale in range(NUM_SCALES):
        if scale > 0 or high_res:
            x, mask = decimate(x), decimate(mask)
        x = mode_filter(x)
        scores.append(pool_topk(c_values(x, mask, window, steps, vlt_luma, band), topk))
    return torch.stack(scores, dim=1)


def combine_scales(scales: torch.Tensor, window: int, max_val: float) -> torch.Tensor:
    """libvmaf's score from the per-scale scores ``(N, 5)``: ``min(sum_s score_s * W_s / window^2, max_val)``,
    summed in double from the finest scale: ``(N,)`` float64."""
    total = torch.zeros(scales.shape[0], dtype=torch.float64, device=scales.device)
    for scale in range(NUM_SCALES):
        total = total + scales[:, scale] * float(SCALE_WEIGHTS[scale])
    return torch.clamp(total / torch.full_like(total, float(window * window)), max=max_val)  # true division on CUDA
