"""CAMBI on the CPU, compiled with numba: the twin's bits, by libvmaf's own algorithm.

Per frame (frames run in parallel): 10-bit codes and anti-dithering, the spatial mask from a 2-D prefix sum, then
per scale the in-place decimation, the mode filter and the c-values from sliding window histograms: one row of
uint16 counts per code of the counted band and per column, each pixel entering the window adding 1 to the
``window`` columns it covers and leaving it removing 1 (libvmaf's ``calculate_c_values``), done for runs of equal
pixels at once (a run of L pixels: L + window - 1 column updates, not L x window; the counts are the same
integers, so the values are libvmaf's). Pooling takes the top-k sum in any order where every order gives the same
double (the bound of :mod:`~fusedsim.families.cambi.gpu_pooling`), with the k-th largest value from two histogram
passes over the float32 bits; past that bound it replays libvmaf's quickselect and sums in its order, so the
double sum is libvmaf's in every case.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from numba import njit, prange

from fusedsim.core.cpu.parallel import parallel_kernel
from fusedsim.families.cambi.ops import cambi_scales
from fusedsim.families.cambi.reciprocal_table import RECIPROCAL_LUT
from fusedsim.families.cambi.settings import CONTRAST_WEIGHTS, NUM_SCALES

__all__ = ["cambi_scales_numba", "quickselect_mean_numba"]

_WEIGHTS = np.array(CONTRAST_WEIGHTS, dtype=np.int64)
_SELECT_BY_HISTOGRAM = 100_000  # values from which the top-k pooling selects by histograms, not by quickselect


@njit(cache=True, nogil=True)
def _codes(frame, bit_depth, anti_dithering):
    h, w = frame.shape
    x = np.empty((h, w), dtype=np.int32)
    for i in range(h):
        for j in range(w):
            v = np.int32(frame[i, j])
            if bit_depth <= 8:
                x[i, j] = v << (10 - bit_depth)
            elif bit_depth == 9:
                x[i, j] = v << 1
            else:
                shift = bit_depth - 10
                x[i, j] = (v + ((1 << shift) >> 1)) >> shift
    if anti_dithering:  # row i reads rows i and i + 1, not yet rewritten
        for i in range(h - 1):
            for j in range(w - 1):
                x[i, j] = (x[i, j] + x[i, j + 1] + x[i + 1, j] + x[i + 1, j + 1]) >> 2
            x[i, w - 1] = (x[i, w - 1] + x[i + 1, w - 1]) >> 1
        for j in range(w - 1):
            x[h - 1, j] = (x[h - 1, j] + x[h - 1, j + 1]) >> 1
    return x


@njit(cache=True, nogil=True)
def _flat(x):
    """libvmaf's flat pixels (equal to the right and lower neighbours; the last row and column compare the one
    neighbour they have, the corner is flat) as uint8. Rows are compared through views indexed by the bare loop
    counter: numba vectorises those."""
    h, w = x.shape
    flat = np.empty((h, w), dtype=np.uint8)
    for i in range(h):
        row = x[i]
        right = x[i, 1:]
        dst = flat[i]
        if i < h - 1:
            below = x[i + 1]
            for j in range(w - 1):
                dst[j] = np.uint8((row[j] == right[j]) & (row[j] == below[j]))
            dst[w - 1] = np.uint8(row[w - 1] == below[w - 1])
        else:
            for j in range(w - 1):
                dst[j] = np.uint8(row[j] == right[j])
            dst[w - 1] = 1
    return flat


@njit(cache=True, nogil=True, inline="always")
def _clipped_box(colsum, j, w):
    """The 7-column sum of ``colsum`` centred on column ``j``, clipped at the frame's edges."""
    total = np.int32(0)
    for k in range(max(j - 3, 0), min(j + 4, w)):
        total += colsum[k]
    return total


@njit(cache=True, nogil=True)
def _mask(x, threshold, step):
    """libvmaf's spatial mask at every ``step``-th row and column (``step`` 2: the high-resolution speed-up keeps
    only those): the 7x7 count of flat pixels above ``threshold``. Per output row, the 7-row column sums slide down
    (rows enter and leave) and the 7-column sums are added from shifted views, all vectorised; a running 2-D prefix
    sum would chain every pixel on the one before (a 1080p frame's mask 2.4 -> 0.8 ms)."""
    h, w = x.shape
    flat = _flat(x)
    oh, ow = (h + step - 1) // step, (w + step - 1) // step
    out = np.empty((oh, ow), dtype=np.bool_)
    colsum = np.zeros(w, dtype=np.int32)
    box = np.zeros(max(w - 6, 1), dtype=np.int32)  # box[t]: columns t..t+6, centred on t + 3
    first = (3 + step - 1) // step  # interior columns: 3 <= j and j + 4 <= w
    last = (w - 4) // step + 1 if w >= 7 else 0
    top, bottom = 0, -1  # the rows in colsum
    for oi in range(oh):
        i = oi * step
        while bottom < min(i + 3, h - 1):
            bottom += 1
            entering = flat[bottom]
            for j in range(w):
                colsum[j] += entering[j]
        while top < max(i - 3, 0):
            leaving = flat[top]
            for j in range(w):
                colsum[j] -= leaving[j]
            top += 1
        dst = out[oi]
        for oj in range(min(first, ow)):  # left edge
            dst[oj] = _clipped_box(colsum, oj * step, w) > threshold
        for oj in range(max(last, first), ow):  # right edge (every column when the frame is under 7 wide)
            dst[oj] = _clipped_box(colsum, oj * step, w) > threshold
        if last > first:
            c1, c2, c3, c4, c5, c6 = colsum[1:], colsum[2:], colsum[3:], colsum[4:], colsum[5:], colsum[6:]
            for t in range(w - 6):
                box[t] = colsum[t] + c1[t] + c2[t] + c3[t] + c4[t] + c5[t] + c6[t]
            if step == 1:
                dst3 = dst[3:]
                for t in range(last - first):  # j = t + 3
                    dst3[t] = box[t] > threshold
            else:
                for t in range(first, last):
                    dst[np.uint64(t)] = box[np.uint64(t * step - 3)] > threshold
    return out


@njit(cache=True, nogil=True, inline="always")
def _mode3(a, b, c):
    if a == b or a == c:
        return a
    if b == c:
        return b
    return min(a, min(b, c))


@njit(cache=True, nogil=True)
def _mode_filter(x):
    h, w = x.shape
    horizontal = x.copy()
    for i in range(h):
        for j in range(1, w - 1):
            horizontal[i, j] = _mode3(x[i, j - 1], x[i, j], x[i, j + 1])
    out = x.copy()
    for i in range(1, h - 1):
        for j in range(w):
            out[i, j] = _mode3(horizontal[i - 1, j], horizontal[i, j], horizontal[i + 1, j])
    return out


@njit(cache=True, nogil=True, inline="always")
def _band_row(x, mask, i, j, base, size):
    """The histogram row of pixel (i, j), or -1 when it is masked out or outside the counted band."""
    if not mask[i, j]:
        return -1
    v = x[i, j] - base
    return v if 0 <= v < size else -1


@njit(cache=True, nogil=True, inline="always")
def _add_run(hist, row, a, b, pad, w, sign):
    """Add ``sign`` x the window counts of a run of pixels in columns a..b (inclusive) of one histogram row: column
    k gains the number of run pixels within ``pad`` of it, so a run of L pixels costs L + 2 pad column updates
    instead of L (2 pad + 1). Indices are unsigned: numba then adds no negative-index wrap to each access (the
    slides' time 10.6 -> 4.1 ms at scale 0 of a 1080p frame)."""
    r = np.uint64(row)
    for k in range(max(a - pad, 0), min(b + pad + 1, w)):
        hist[r, np.uint64(k)] += sign * (min(k + pad, b) - max(k - pad, a) + 1)


@njit(cache=True, nogil=True)
def _slide(hist, x, mask, enter, leave, pad, base, size):
    """Move the window down one row: the pixels of row ``enter`` (-1: none) come in, those of row ``leave`` go.
    Columns are taken in runs with the same (entering, leaving) histogram rows; a run whose two rows are equal
    changes nothing (flat areas)."""
    w = x.shape[1]
    a = 0
    run_up = _band_row(x, mask, enter, 0, base, size) if enter >= 0 else -1
    run_down = _band_row(x, mask, leave, 0, base, size) if leave >= 0 else -1
    for j in range(1, w + 1):
        if j < w:
            up = _band_row(x, mask, enter, j, base, size) if enter >= 0 else -1
            down = _band_row(x, mask, leave, j, base, size) if leave >= 0 else -1
            if up == run_up and down == run_down:
                continue
        if run_up != run_down:
            if run_down >= 0:
                _add_run(hist, run_down, a, j - 1, pad, w, -1)
            if run_up >= 0:
                _add_run(hist, run_up, a, j - 1, pad, w, 1)
        if j < w:
            a, run_up, run_down = j, up, down


@njit(cache=True, nogil=True)
def _c_values(x, mask, window, tvi, vlt_luma, lut, weights):
    h, w = x.shape
    num_diffs = tvi.shape[0]
    pad = window >> 1
    base = max(vlt_luma - 3 * num_diffs + 1, 0)
    size = tvi[num_diffs - 1] + num_diffs + 1 - base
    # uint16 counts (a window holds at most window**2 <= 65535 pixels): half the cache footprint of int32
    hist = np.zeros((size, w), dtype=np.uint16)
    c = np.zeros(h * w, dtype=np.float32)
    for r in range(min(pad, h)):
        _slide(hist, x, mask, r, -1, pad, base, size)
    for i in range(h):
        _slide(hist, x, mask, i + pad if i + pad < h else -1, i - pad - 1, pad, base, size)
        for j in range(w):
            v = x[i, j]
            if not mask[i, j] or v - base < 0 or v - base >= size:
                continue
            offset = v - base
            row = np.uint64(offset)  # unsigned indices: no negative-index wrap (see _add_run)
            p0 = np.int64(hist[row, j])
            best = np.float32(0.0)
            for d in range(num_diffs):
                if v <= tvi[d] and v + num_diffs + d + 1 > vlt_luma:
                    up = offset + d + 1
                    down = offset - d - 1
                    p1 = np.int64(hist[np.uint64(up), j]) if up < size else 0
                    p2 = np.int64(hist[np.uint64(down), j]) if down >= 0 else 0
                    pm = max(p1, p2)
                    val = np.float32(weights[d] * p0 * pm) * lut[np.uint64(p0 + pm)]
                    if val > best:
                        best = val
            c[np.uint64(i * w + j)] = best
    return c


@njit(cache=True, nogil=True)
def _quickselect_mean(arr, k):
    """libvmaf's quickselect of the ``k`` largest values (in place, its exact permutation) and their mean, summed in
    its order. Every access is at an index the algorithm keeps in ``[0, n)``; unsigned, numba adds no
    negative-index wrap to it (a 1080p frame's 2 M values: 11.5 -> 9.2 ms)."""
    n = arr.shape[0]
    if n != k:
        left, right = 0, n - 1
        while left < right:
            pivot = arr[np.uint64(k)]
            i, j = left, right
            while True:
                while arr[np.uint64(i)] > pivot:
                    i += 1
                while arr[np.uint64(j)] < pivot:
                    j -= 1
                if i <= j:
                    ui, uj = np.uint64(i), np.uint64(j)
                    tmp = arr[ui]
                    arr[ui] = arr[uj]
                    arr[uj] = tmp
                    i += 1
                    j -= 1
                if i > j:
                    break
            if j < k:
                left = i
            if k < i:
                right = j
    total = 0.0
    for i in range(k):
        total += np.float64(arr[i])
    return total / k


@njit(cache=True, nogil=True)
def _exact_below(smallest):
    """``2**(floor(log2 smallest) + 30)``: below it, double sums of float32 values of at least ``smallest`` are exact
    in any order (see :mod:`~fusedsim.families.cambi.gpu_pooling`)."""
    _, exponent = math.frexp(smallest)
    return math.ldexp(1.0, exponent + 29)


@njit(cache=True, nogil=True, fastmath={"reassoc"})
def _sum_above(c, threshold):
    """The double sum of the values of ``c`` above ``threshold``, in any order (the callers use it only where every
    order gives the same double, and check that bound on the result: a sum past it stays past it in any order)."""
    total = 0.0
    for i in range(c.shape[0]):
        total += np.float64(c[i]) if c[i] > threshold else 0.0
    return total


@njit(cache=True, nogil=True)
def _scan(c):
    """Non-negative c-values: how many are non-zero and the smallest non-zero (inf: none). Two simple loops, each
    vectorised by numba: the smallest as a minimum of the float32 bit patterns (non-negative floats order as their
    bits)."""
    nonzero = 0
    for i in range(c.shape[0]):
        nonzero += c[i] > 0
    bits = c.view(np.uint32)
    none = np.uint32(0x7F800000)  # inf's bits
    smallest = none
    for i in range(bits.shape[0]):
        b = bits[i]
        smallest = min(smallest, b if np.uint32(b - np.uint32(1)) < none else none)  # 0 wraps above inf
    return nonzero, np.array([smallest], dtype=np.uint32).view(np.float32)[0]


@njit(cache=True, nogil=True, inline="always")
def _bin(histograms, b):
    """Bin ``b`` of the four interleaved histograms."""
    u = np.uint64(b)
    return histograms[0, u] + histograms[1, u] + histograms[2, u] + histograms[3, u]


@njit(cache=True, nogil=True)
def _top_k_mean(c, k):
    """libvmaf's top-k mean of ``c`` without its quickselect where the sum is the same in any order: all non-zero
    values when at most ``k`` are, else the k-th largest ``t`` from two 16-bit histogram passes over the float32
    bits (non-negative floats order as their bits) and the values above it. Past the exact bound, libvmaf's
    quickselect order (``c`` is permuted then)."""
    nonzero, smallest = _scan(c)
    if nonzero <= k:
        total = _sum_above(c, np.float32(0))  # every non-zero value, in any order
        if nonzero == 0 or total < _exact_below(np.float64(smallest)):
            return total / k
        return _quickselect_mean(c, k)
    if c.shape[0] < _SELECT_BY_HISTOGRAM:  # the histograms' 2 MB cost more than the quickselect here
        return _quickselect_mean(c, k)
    bits = c.view(np.uint32)
    high = np.zeros((4, 65536), dtype=np.int32)  # four histograms: runs of equal values do not chain their updates
    largest = np.uint32(0)
    for i in range(bits.shape[0]):
        high[i & 3, bits[i] >> np.uint32(16)] += 1
        largest = max(largest, bits[i])
    wanted = k
    top = np.int64(largest >> np.uint32(16))  # the walk down starts at the largest value's bin
    while _bin(high, top) < wanted:
        wanted -= _bin(high, top)
        top -= 1
    low = np.zeros((4, 65536), dtype=np.int32)
    largest_low = np.uint32(0)
    for i in range(bits.shape[0]):
        if bits[i] >> np.uint32(16) == top:
            low[i & 3, bits[i] & np.uint32(0xFFFF)] += 1
            largest_low = max(largest_low, bits[i] & np.uint32(0xFFFF))
    bottom = np.int64(largest_low)
    while _bin(low, bottom) < wanted:
        wanted -= _bin(low, bottom)
        bottom -= 1
    kth = np.array([(top << 16) | bottom], dtype=np.uint32).view(np.float32)[0]
    selected = _sum_above(c, kth) + wanted * np.float64(kth)  # ``wanted`` copies of the k-th largest complete the k
    if selected < _exact_below(np.float64(kth)):
        return selected / k
    return _quickselect_mean(c, k)


@njit(cache=True, nogil=True)
def _frame_scales(frame, tvi, bit_depth, anti_dithering, window, vlt_luma, mask_threshold, topk, high_res,
                  lut, weights, out):
    x = _codes(frame, bit_depth, anti_dithering)
    mask = _mask(x, mask_threshold, 2 if high_res else 1)  # with the speed-up, scale 0 keeps even rows/columns
    for scale in range(out.shape[0]):
        if scale > 0 or high_res:
            x = np.ascontiguousarray(x[::2, ::2])
        if scale > 0:
            mask = np.ascontiguousarray(mask[::2, ::2])
        x = _mode_filter(x)
        c = _c_values(x, mask, window, tvi, vlt_luma, lut, weights)
        n = c.shape[0]
        k = min(max(int(topk * n), 1), n)
        out[scale] = _top_k_mean(c, k)


@parallel_kernel
def _cambi_scales(frames, tvi, bit_depth, anti_dithering, window, vlt_luma, mask_threshold, topk, high_res,
                  lut, weights, out):
    for f in prange(frames.shape[0]):
        _frame_scales(frames[f], tvi, bit_depth, anti_dithering, window, vlt_luma, mask_threshold, topk, high_res,
                      lut, weights, out[f])


@cambi_scales.cpu_kernel
def cambi_scales_numba(frames: torch.Tensor, tvi: torch.Tensor, bit_depth: int, anti_dithering: bool, window: int,
                       vlt_luma: int, mask_threshold: int, topk: float, high_res: bool) -> torch.Tensor:
    """The twin's ``cambi_scales_ref`` compiled: ``(N, H, W)`` integer luma -> ``(N, 5)`` float64."""
    source = frames.detach().contiguous().numpy()
    steps = tvi.detach().to(torch.int64).numpy()
    out = np.empty((source.shape[0], NUM_SCALES), dtype=np.float64)
    _cambi_scales(source, steps, int(bit_depth), bool(anti_dithering), int(window), int(vlt_luma),
                  int(mask_threshold), float(topk), bool(high_res), RECIPROCAL_LUT, _WEIGHTS, out)
    return torch.from_numpy(out)


def quickselect_mean_numba(values: np.ndarray, k: int) -> float:
    """The twin's :func:`~fusedsim.families.cambi.twin.quickselect_mean` compiled (sorts ``values`` in place)."""
    return float(_quickselect_mean(np.ascontiguousarray(values, dtype=np.float32), int(k)))
