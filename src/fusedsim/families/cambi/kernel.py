"""CAMBI on the GPU: Triton kernels for the twin's steps, the twin's bits.

``_codes_kernel`` makes the 10-bit (optionally anti-dithered) codes, ``_flat_kernel`` and ``_mask_kernel`` the spatial
mask (7x7 count of flat pixels, zero outside). Per scale, ``_mode_kernel`` decimates the previous scale's filtered
codes (scale 0: the codes) on the fly, mode-filters them and writes the codes the window counts (the code where the
decimated mask is set and the code lies in the counted band, else a code no window matches). ``_c_value_kernel``
gives each program a tile of pixels and walks the window: per window position one shifted tile is compared with
the centre codes, and a hit at offset k adds 1 to a field of a packed int64 counter: with up to 4 contrast steps and
windows under 4096 pixels, two words of 12-bit fields (offsets 0-4 and 5-8); otherwise 16-bit fields, 4 offsets
per word (counts stay below 2**13 since libvmaf's window holds fewer than 4226 pixels). The c-values are written, and per tile
their double sum (exact in any order below 2**29, see the twin) and their number of non-zeros. A tile without a
counted pixel (textured or out-of-band content) skips the walk.

Pooling: when a scale has at most ``k`` non-zero c-values and an exact sum, the top-k sum is the sum of all; else the
top-k values are taken with ``torch.topk`` (exact below 2**29), else libvmaf's quickselect order is replayed on the
host (the twin's :func:`~fusedsim.families.cambi.twin.quickselect_mean`, compiled when numba is there). One device
synchronisation per call decides.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedsim.families.cambi.ops import cambi_scales
from fusedsim.families.cambi.reciprocal_table import RECIPROCAL_LUT
from fusedsim.families.cambi.settings import CONTRAST_WEIGHTS, NUM_SCALES
from fusedsim.families.cambi.twin import EXACT_SUM_LIMIT, quickselect_mean, topk_count

__all__ = ["cambi_scales_triton"]

_OUTSIDE = -30000  # int16 code of pixels the window does not count
_BLOCK = 1024
_TILE_H, _TILE_W = 8, 64
_FIELDS = 4  # 16-bit counters per int64


@triton.jit
def _codes_kernel(src, out, h, w, BIT_DEPTH: tl.constexpr, ANTI_DITHER: tl.constexpr, BLOCK: tl.constexpr):
    frame = tl.program_id(1).to(tl.int64)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < h * w
    i = offs // w
    j = offs % w
    base = src + frame * h * w
    x = tl.load(base + offs, mask=inside, other=0).to(tl.int32)
    if ANTI_DITHER:
        right = j + 1 < w
        below = i + 1 < h
        xr = tl.load(base + offs + 1, mask=inside & right, other=0).to(tl.int32)
        xb = tl.load(base + offs + w, mask=inside & below, other=0).to(tl.int32)
        xd = tl.load(base + offs + w + 1, mask=inside & right & below, other=0).to(tl.int32)
    if BIT_DEPTH <= 8:
        x = x << (10 - BIT_DEPTH)
    elif BIT_DEPTH == 9:
        x = x << 1
    else:
        x = (x + ((1 << (BIT_DEPTH - 10)) >> 1)) >> (BIT_DEPTH - 10)
    if ANTI_DITHER:
        if BIT_DEPTH <= 8:
            xr = xr << (10 - BIT_DEPTH)
            xb = xb << (10 - BIT_DEPTH)
            xd = xd << (10 - BIT_DEPTH)
        elif BIT_DEPTH == 9:
            xr = xr << 1
            xb = xb << 1
            xd = xd << 1
        else:
            xr = (xr + ((1 << (BIT_DEPTH - 10)) >> 1)) >> (BIT_DEPTH - 10)
            xb = (xb + ((1 << (BIT_DEPTH - 10)) >> 1)) >> (BIT_DEPTH - 10)
            xd = (xd + ((1 << (BIT_DEPTH - 10)) >> 1)) >> (BIT_DEPTH - 10)
        both = (x + xr + xb + xd) >> 2
        column = (x + xb) >> 1
        row = (x + xr) >> 1
        x = tl.where(right & below, both, tl.where(below, column, tl.where(right, row, x)))
    tl.store(out + frame * h * w + offs, x.to(tl.int16), mask=inside)


@triton.jit
def _flat_kernel(codes, out, h, w, BLOCK: tl.constexpr):
    frame = tl.program_id(1).to(tl.int64)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < h * w
    i = offs // w
    j = offs % w
    base = codes + frame * h * w
    x = tl.load(base + offs, mask=inside, other=0)
    right = j + 1 < w
    below = i + 1 < h
    xr = tl.load(base + offs + 1, mask=inside & right, other=0)
    xb = tl.load(base + offs + w, mask=inside & below, other=0)
    flat = ((~right) | (x == xr)) & ((~below) | (x == xb))
    tl.store(out + frame * h * w + offs, flat.to(tl.int8), mask=inside)


@triton.jit
def _mask_kernel(flat, out, h, w, threshold, BLOCK: tl.constexpr):
    frame = tl.program_id(1).to(tl.int64)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < h * w
    i = offs // w
    j = offs % w
    base = flat + frame * h * w
    count = tl.zeros([BLOCK], dtype=tl.int32)
    for dy in tl.static_range(-3, 4):
        for dx in tl.static_range(-3, 4):
            ok = inside & (i + dy >= 0) & (i + dy < h) & (j + dx >= 0) & (j + dx < w)
            count += tl.load(base + offs + dy * w + dx, mask=ok, other=0).to(tl.int32)
    tl.store(out + frame * h * w + offs, (count > threshold).to(tl.int8), mask=inside)


@triton.jit
def _decimated(src, r, c, step, src_w, ok):
    return tl.load(src + (r * step) * src_w + c * step, mask=ok, other=0).to(tl.int32)


@triton.jit
def _mode3(a, b, c):
    return tl.where((a == b) | (a == c), a, tl.where(b == c, b, tl.minimum(tl.minimum(a, b), c)))


@triton.jit
def _horizontal(src, r, j, w, step, src_w, ok):
    centre = _decimated(src, r, j, step, src_w, ok)
    inner = ok & (j >= 1) & (j <= w - 2)
    left = _decimated(src, r, j - 1, step, src_w, inner)
    right = _decimated(src, r, j + 1, step, src_w, inner)
    return tl.where(inner, _mode3(left, centre, right), centre)


@triton.jit
def _mode_kernel(src, src_h, src_w, step, mask, mask_h, mask_w, mask_shift, tvi, codes, counted, h, w, low,
                 NUM_DIFFS: tl.constexpr, OUTSIDE: tl.constexpr, BLOCK: tl.constexpr):
    frame = tl.program_id(1).to(tl.int64)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < h * w
    i = offs // w
    j = offs % w
    base = src + frame * src_h * src_w
    centre = _horizontal(base, i, j, w, step, src_w, inside)
    inner = inside & (i >= 1) & (i <= h - 2)
    up = _horizontal(base, i - 1, j, w, step, src_w, inner)
    down = _horizontal(base, i + 1, j, w, step, src_w, inner)
    plain = _decimated(base, i, j, step, src_w, inside)
    x = tl.where(inner, _mode3(up, centre, down), plain)
    m = tl.load(mask + frame * mask_h * mask_w + (i << mask_shift) * mask_w + (j << mask_shift), mask=inside,
                other=0)
    high = tl.load(tvi + NUM_DIFFS - 1) + NUM_DIFFS
    tl.store(codes + frame * h * w + offs, x.to(tl.int16), mask=inside)
    keep = (m != 0) & (x >= low) & (x <= high)
    tl.store(counted + frame * h * w + offs, tl.where(keep, x, OUTSIDE).to(tl.int16), mask=inside)


@triton.jit
def _bin_count(lo, hi, acc, group, B: tl.constexpr, PACKED2: tl.constexpr):
    """The window count at offset bin ``B``: from two int64 words of 12-bit fields (bins 0-4, 5-8), or from the
    int64 words of four 16-bit fields each."""
    if PACKED2:
        if B <= 4:
            count = (lo >> (12 * B)) & 0xFFF
        else:
            count = (hi >> (12 * (B - 5))) & 0xFFF
    else:
        count = (tl.sum(tl.where(group == B // 4, acc, 0), axis=2) >> ((B % 4) * 16)) & 0xFFFF
    return count.to(tl.int32)


@triton.jit
def _c_value_kernel(counted, tvi, weights, lut, c_out, sums, nonzeros, h, w, window, vlt_luma, tiles_w,
                    NUM_DIFFS: tl.constexpr, GROUPS: tl.constexpr, PACKED2: tl.constexpr, OUTSIDE: tl.constexpr,
                    TILE_H: tl.constexpr, TILE_W: tl.constexpr):
    frame = tl.program_id(1).to(tl.int64)
    tile = tl.program_id(0)
    i = (tile // tiles_w) * TILE_H + tl.arange(0, TILE_H)[:, None]
    j = (tile % tiles_w) * TILE_W + tl.arange(0, TILE_W)[None, :]
    inside = (i < h) & (j < w)
    base = counted + frame * h * w
    v = tl.load(base + i * w + j, mask=inside, other=OUTSIDE).to(tl.int32)
    pad = window // 2
    group = tl.arange(0, GROUPS)[None, None, :]
    centre = v != OUTSIDE
    best = tl.zeros([TILE_H, TILE_W], dtype=tl.float32)
    if tl.max(centre.to(tl.int32)) > 0:  # a tile without a counted pixel has only zero c-values: no window walk
        lo = tl.zeros([TILE_H, TILE_W], dtype=tl.int64)
        hi = tl.zeros([TILE_H, TILE_W], dtype=tl.int64)
        acc = tl.zeros([TILE_H, TILE_W, GROUPS], dtype=tl.int64)
        unit = tl.full([TILE_H, TILE_W], 1, tl.int64)
        for dy in range(0, window):
            r = i + dy - pad
            row_ok = (r >= 0) & (r < h)
            for dx in range(0, window):
                c = j + dx - pad
                u = tl.load(base + r * w + c, mask=row_ok & (c >= 0) & (c < w), other=OUTSIDE).to(tl.int32)
                k = u - v + NUM_DIFFS
                if PACKED2:  # up to 9 bins, counts below 4096: two words, no group selection
                    in_lo = (k >= 0) & (k <= 4)
                    in_hi = (k >= 5) & (k <= 8)
                    lo += tl.where(in_lo, unit << (tl.where(in_lo, k, 0) * 12).to(tl.int64), 0)
                    hi += tl.where(in_hi, unit << (tl.where(in_hi, k - 5, 0) * 12).to(tl.int64), 0)
                else:
                    hit = (k >= 0) & (k <= 2 * NUM_DIFFS)
                    one = tl.where(hit, unit << ((k & 3) * 16).to(tl.int64), 0)
                    acc += tl.where(group == (k >> 2)[:, :, None], one[:, :, None], 0)
        p0 = _bin_count(lo, hi, acc, group, NUM_DIFFS, PACKED2)
        for d in tl.static_range(NUM_DIFFS):
            p1 = _bin_count(lo, hi, acc, group, NUM_DIFFS + d + 1, PACKED2)
            p2 = _bin_count(lo, hi, acc, group, NUM_DIFFS - d - 1, PACKED2)
            pm = tl.maximum(p1, p2)
            weight = tl.load(weights + d)
            limit = tl.load(tvi + d)
            allowed = centre & (v <= limit) & (v + NUM_DIFFS + d + 1 > vlt_luma)
            recip = tl.load(lut + (p0 + pm), mask=allowed, other=0.0)
            value = (weight * p0 * pm).to(tl.float32) * recip
            best = tl.maximum(best, tl.where(allowed, value, 0.0))
    tl.store(c_out + frame * h * w + i * w + j, best, mask=inside)
    slot = frame * tl.num_programs(0) + tile
    tl.store(sums + slot, tl.sum(tl.sum(best.to(tl.float64), axis=1), axis=0))
    tl.store(nonzeros + slot, tl.sum(tl.sum((best > 0).to(tl.int32), axis=1), axis=0))


def _cpu_quickselect():
    """libvmaf's quickselect pooling, compiled when numba is there (the twin's otherwise)."""
    try:
        from fusedsim.families.cambi.cpu import quickselect_mean_numba
    except ImportError:
        return quickselect_mean
    return quickselect_mean_numba


def _pool(scales: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]], topk: float) -> torch.Tensor:
    """Each frame's libvmaf top-k mean of its c-values at each scale, from ``(c (N, n), per-tile sums, per-tile
    non-zero counts)`` per scale: ``(N, 5)`` float64."""
    means, hard = [], []
    for c, sums, nonzeros in scales:
        k = topk_count(c.shape[1], topk)
        total = sums.sum(dim=1)
        means.append(total / torch.full_like(total, float(k)))  # CUDA divides by a Python number as a * (1/b)
        hard.append(~((nonzeros.sum(dim=1) <= k) & (total < EXACT_SUM_LIMIT)))
    out = torch.stack(means, dim=1)
    for f, scale in torch.nonzero(torch.stack(hard, dim=1)).tolist():  # the call's one synchronisation
        c = scales[scale][0][f]
        k = topk_count(c.shape[0], topk)
        top = torch.topk(c, k, sorted=False).values.to(torch.float64).sum()
        if top < EXACT_SUM_LIMIT:
            out[f, scale] = top / torch.full_like(top, float(k))
        else:
            out[f, scale] = _cpu_quickselect()(c.cpu().numpy().copy(), k)
    return out


_CONSTANTS: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}


def _constants(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    if device not in _CONSTANTS:
        _CONSTANTS[device] = (torch.tensor(RECIPROCAL_LUT, device=device),
                              torch.tensor(CONTRAST_WEIGHTS, dtype=torch.int32, device=device))
    return _CONSTANTS[device]


@cambi_scales.triton_launcher
def cambi_scales_triton(frames: torch.Tensor, tvi: torch.Tensor, bit_depth: int, anti_dithering: bool, window: int,
                        vlt_luma: int, mask_threshold: int, topk: float, high_res: bool) -> torch.Tensor:
    """The twin's ``cambi_scales_ref`` on the GPU: ``(N, H, W)`` integer luma -> ``(N, 5)`` float64."""
    frames = frames.contiguous()
    n, h, w = frames.shape
    device = frames.device
    lut, weights = _constants(device)
    steps = tvi.to(device=device, dtype=torch.int32).contiguous()
    num_diffs = steps.numel()
    low = max(vlt_luma - 3 * num_diffs + 1, 0)
    grid = (triton.cdiv(h * w, _BLOCK), n)
    codes = torch.empty((n, h, w), dtype=torch.int16, device=device)
    _codes_kernel[grid](frames, codes, h, w, BIT_DEPTH=int(bit_depth), ANTI_DITHER=bool(anti_dithering),
                        BLOCK=_BLOCK)
    flat = torch.empty((n, h, w), dtype=torch.int8, device=device)
    _flat_kernel[grid](codes, flat, h, w, BLOCK=_BLOCK)
    mask = torch.empty((n, h, w), dtype=torch.int8, device=device)
    _mask_kernel[grid](flat, mask, h, w, int(mask_threshold), BLOCK=_BLOCK)
    del flat
    packed2 = num_diffs <= 4 and window * window < 4096  # 9 bins of 12 bits in two words
    groups = 1 if packed2 else triton.next_power_of_2(-(-(2 * num_diffs + 1) // _FIELDS))
    pooled = []
    src, src_h, src_w = codes, h, w
    sh, sw = h, w
    for scale in range(NUM_SCALES):
        step = 2 if scale > 0 or high_res else 1
        if step == 2:
            sh, sw = (sh + 1) >> 1, (sw + 1) >> 1
        shift = scale + int(bool(high_res))
        filtered = torch.empty((n, sh, sw), dtype=torch.int16, device=device)
        counted = torch.empty((n, sh, sw), dtype=torch.int16, device=device)
        _mode_kernel[(triton.cdiv(sh * sw, _BLOCK), n)](
            src, src_h, src_w, step, mask, h, w, shift, steps, filtered, counted, sh, sw, low,
            NUM_DIFFS=num_diffs, OUTSIDE=_OUTSIDE, BLOCK=_BLOCK)
        tiles_w = triton.cdiv(sw, _TILE_W)
        tiles = triton.cdiv(sh, _TILE_H) * tiles_w
        c = torch.empty((n, sh, sw), dtype=torch.float32, device=device)
        sums = torch.empty((n, tiles), dtype=torch.float64, device=device)
        nonzeros = torch.empty((n, tiles), dtype=torch.int32, device=device)
        _c_value_kernel[(tiles, n)](counted, steps, weights, lut, c, sums, nonzeros, sh, sw, int(window),
                                    int(vlt_luma), tiles_w, NUM_DIFFS=num_diffs, GROUPS=groups, PACKED2=packed2,
                                    OUTSIDE=_OUTSIDE,
                                    TILE_H=_TILE_H, TILE_W=_TILE_W)
        pooled.append((c.reshape(n, -1), sums, nonzeros))
        src, src_h, src_w = filtered, sh, sw
    return _pool(pooled, topk)
