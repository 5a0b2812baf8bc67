"""CAMBI on the GPU: Triton kernels for the twin's steps, the twin's bits.

``_codes_kernel`` makes the 10-bit (optionally anti-dithered) codes, ``_flat_kernel``, ``_row_count_kernel`` and
``_mask_kernel`` the spatial mask (7x7 count of flat pixels, zero outside, as 7-column then 7-row sums; with the
high-resolution speed-up only at the even rows and columns, the only ones read). Per scale, ``_mode_kernel``
decimates the previous scale's filtered codes (scale 0: the codes) on the fly, mode-filters them and writes the
codes the window counts (the code where the decimated mask is set and the code lies in the counted band, else a
code no window matches).

The c-values come from ``_c_value_bins_kernel`` for windows up to 49 pixels and at most 4 contrast steps (libvmaf's
default and the v1 model's; tile shapes by window in ``_BY_CODE_SHAPES``): per tile of centres it visits
the distinct codes within reach of a centre's code and counts each code's window with two int8 matrix products on
the tensor cores, so its work follows the number of codes near the tile, not the window's area (1089 pixels per
centre at 1080p). Otherwise ``_c_value_kernel`` walks the window: per window position one shifted tile is compared
with the centre codes, and a hit at offset k adds 1 to a field of a packed int64 counter: with up to 4 contrast
steps and windows under 4096 pixels, two words of 12-bit fields (offsets 0-4 and 5-8); otherwise 16-bit fields, 4
offsets per word (counts stay below 2**13 since libvmaf's window holds fewer than 4226 pixels). Both write the
c-values, and per tile their double sum, their number of non-zeros and the smallest non-zero (which bounds where
the sum is exact in any order, see the pooling). A tile without a counted pixel skips the counting.

Pooling (:mod:`~fusedsim.families.cambi.gpu_pooling`): libvmaf's top-k double sums, exact on the device where any
order gives libvmaf's, else replayed on the host in its order.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedsim.families.cambi.ops import cambi_scales
from fusedsim.families.cambi.reciprocal_table import RECIPROCAL_LUT
from fusedsim.families.cambi.settings import CONTRAST_WEIGHTS, NUM_SCALES
from fusedsim.families.cambi.gpu_pooling import pool_top_k, tile_buffers

__all__ = ["cambi_scales_triton"]

_OUTSIDE = -30000  # int16 code of pixels the window does not count
_BLOCK = 1024
_TILE_H, _TILE_W = 8, 64
_FIELDS = 4  # 16-bit counters per int64
# the code-by-code kernel's shapes by window (H200, 1080p): the largest window each serves, its centres, their
# neighbourhood (centres plus window) and warps
_BY_CODE_SHAPES = ((17, (16, 64), (32, 128), 4), (49, (32, 32), (64, 64), 4))


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
def _row_count_kernel(flat, out, h, w, out_w, step, BLOCK: tl.constexpr):
    """Flat pixels among the 7 of each row centred on every ``step``-th column (zero outside): ``(h, out_w)``."""
    frame = tl.program_id(1).to(tl.int64)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < h * out_w
    i = offs // out_w
    j = (offs % out_w) * step
    base = flat + frame * h * w + i * w + j
    count = tl.zeros([BLOCK], dtype=tl.int32)
    for dx in tl.static_range(-3, 4):
        count += tl.load(base + dx, mask=inside & (j + dx >= 0) & (j + dx < w), other=0).to(tl.int32)
    tl.store(out + frame * h * out_w + offs, count.to(tl.int8), mask=inside)


@triton.jit
def _mask_kernel(row_counts, out, h, w, out_h, step, threshold, BLOCK: tl.constexpr):
    """The spatial mask at every ``step``-th row of the row counts ``(h, w)``: more than ``threshold`` flat pixels
    in the 7x7 neighbourhood."""
    frame = tl.program_id(1).to(tl.int64)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < out_h * w
    i = (offs // w) * step
    j = offs % w
    base = row_counts + frame * h * w + i * w + j
    count = tl.zeros([BLOCK], dtype=tl.int32)
    for dy in tl.static_range(-3, 4):
        count += tl.load(base + dy * w, mask=inside & (i + dy >= 0) & (i + dy < h), other=0).to(tl.int32)
    tl.store(out + frame * out_h * w + offs, (count > threshold).to(tl.int8), mask=inside)


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
def _with_term(best, centre, v, p0, pm, d, tvi, weights, lut, vlt_luma, NUM_DIFFS: tl.constexpr):
    """``best`` raised to contrast step ``d + 1``'s term where the step is allowed: one float32 product of the
    integer ``w * N(v) * M`` and libvmaf's reciprocal of ``N(v) + M``."""
    allowed = centre & (v <= tl.load(tvi + d)) & (v + NUM_DIFFS + d + 1 > vlt_luma)
    recip = tl.load(lut + (p0 + pm), mask=allowed, other=0.0)
    value = (tl.load(weights + d) * p0 * pm).to(tl.float32) * recip
    return tl.maximum(best, tl.where(allowed, value, 0.0))


@triton.jit
def _store_tile(c_ptrs, best, is_centre, sums, nonzeros, smallest, slot):
    """A tile's c-values, and its double sum, number of non-zeros and smallest non-zero for the pooling."""
    tl.store(c_ptrs, best, mask=is_centre)
    tl.store(sums + slot, tl.sum(tl.sum(best.to(tl.float64), axis=1), axis=0))
    tl.store(nonzeros + slot, tl.sum(tl.sum((best > 0).to(tl.int32), axis=1), axis=0))
    tl.store(smallest + slot, tl.min(tl.min(tl.where(best > 0, best, float("inf")), axis=1), axis=0))


@triton.jit
def _c_value_kernel(counted, tvi, weights, lut, c_out, sums, nonzeros, smallest, c_stride, tile_stride, h, w, window,
                    vlt_luma, tiles_w, NUM_DIFFS: tl.constexpr, GROUPS: tl.constexpr, PACKED2: tl.constexpr,
                    OUTSIDE: tl.constexpr, TILE_H: tl.constexpr, TILE_W: tl.constexpr):
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
            best = _with_term(best, centre, v, p0, pm, d, tvi, weights, lut, vlt_luma, NUM_DIFFS)
    _store_tile(c_out + frame * c_stride + i * w + j, best, inside, sums, nonzeros, smallest,
                frame * tile_stride + tile)


@triton.jit
def _update_count(total, n, k, D: tl.constexpr):
    """The largest window count met at code offset +-D (``|k| == D``) so far."""
    return tl.where((k == D) | (k == -D), tl.maximum(total, n), total)


@triton.jit
def _c_value_bins_kernel(counted, tvi, weights, lut, c_out, sums, nonzeros, smallest, c_stride, tile_stride, h, w,
                         pad, tile_h, tile_w, vlt_luma, tiles_w, NUM_DIFFS: tl.constexpr, OUTSIDE: tl.constexpr,
                         CENTRE_H: tl.constexpr, CENTRE_W: tl.constexpr, REGION_H: tl.constexpr,
                         REGION_W: tl.constexpr):
    """Window counts as box sums of one code's indicator, on the tensor cores: a program takes a tile of
    ``tile_h x tile_w`` centres (held in ``CENTRE_H x CENTRE_W``) and its neighbourhood (in ``REGION_H x
    REGION_W``) and visits the distinct codes present there within ``NUM_DIFFS`` of a centre's code, lowest first.
    Per code, a horizontal band of ones ``(REGION_W, CENTRE_W)`` and a vertical one ``(CENTRE_H, REGION_H)`` turn
    its 0/1 indicator into every centre's window count with two int8 products (int32 accumulation: exact). Each
    centre keeps the count at its own code and the largest at each offset +-d. Work grows with the number of
    distinct codes near the tile, not with the window's area."""
    frame = tl.program_id(1).to(tl.int64)
    tile = tl.program_id(0)
    i0 = (tile // tiles_w) * tile_h
    j0 = (tile % tiles_w) * tile_w
    base = counted + frame * h * w
    a = tl.arange(0, CENTRE_H)[:, None]
    b = tl.arange(0, CENTRE_W)[None, :]
    ci = i0 + a
    cj = j0 + b
    is_centre = (a < tile_h) & (b < tile_w) & (ci < h) & (cj < w)
    v = tl.load(base + ci * w + cj, mask=is_centre, other=OUTSIDE).to(tl.int32)
    centre = v != OUTSIDE
    best = tl.zeros([CENTRE_H, CENTRE_W], dtype=tl.float32)
    if tl.max(centre.to(tl.int32)) > 0:  # a tile without a counted pixel has only zero c-values
        x = tl.arange(0, REGION_H)
        y = tl.arange(0, REGION_W)
        ri = i0 - pad + x[:, None]
        rj = j0 - pad + y[None, :]
        inside = ((ri >= 0) & (ri < h) & (rj >= 0) & (rj < w) & (x[:, None] < tile_h + 2 * pad)
                  & (y[None, :] < tile_w + 2 * pad))
        u = tl.load(base + ri * w + rj, mask=inside, other=OUTSIDE).to(tl.int32)
        # centre (a, b) sums region rows a..a+2pad and columns b..b+2pad
        vertical = ((x[None, :] >= a) & (x[None, :] <= a + 2 * pad)).to(tl.int8)  # (CENTRE_H, REGION_H)
        horizontal = ((y[:, None] >= b) & (y[:, None] <= b + 2 * pad)).to(tl.int8)  # (REGION_W, CENTRE_W)
        top = tl.max(tl.where(centre, v, -1)) + NUM_DIFFS
        low = tl.min(tl.where(centre, v, 1 << 20)) - NUM_DIFFS
        code = tl.min(tl.where(u >= low, u, 1 << 20))
        p0 = tl.zeros([CENTRE_H, CENTRE_W], dtype=tl.int32)
        m1 = tl.zeros([CENTRE_H, CENTRE_W], dtype=tl.int32)
        m2 = tl.zeros([CENTRE_H, CENTRE_W], dtype=tl.int32)
        m3 = tl.zeros([CENTRE_H, CENTRE_W], dtype=tl.int32)
        m4 = tl.zeros([CENTRE_H, CENTRE_W], dtype=tl.int32)
        while code <= top:
            row_counts = tl.dot((u == code).to(tl.int8), horizontal)  # at most 2 pad + 1 < 128
            n = tl.dot(vertical, row_counts.to(tl.int8))
            k = code - v
            p0 = tl.where(k == 0, n, p0)
            m1 = _update_count(m1, n, k, 1)
            if NUM_DIFFS >= 2:
                m2 = _update_count(m2, n, k, 2)
            if NUM_DIFFS >= 4:
                m3 = _update_count(m3, n, k, 3)
                m4 = _update_count(m4, n, k, 4)
            code = tl.min(tl.where(u > code, u, 1 << 20))
        best = _with_term(best, centre, v, p0, m1, 0, tvi, weights, lut, vlt_luma, NUM_DIFFS)
        if NUM_DIFFS >= 2:
            best = _with_term(best, centre, v, p0, m2, 1, tvi, weights, lut, vlt_luma, NUM_DIFFS)
        if NUM_DIFFS >= 4:
            best = _with_term(best, centre, v, p0, m3, 2, tvi, weights, lut, vlt_luma, NUM_DIFFS)
            best = _with_term(best, centre, v, p0, m4, 3, tvi, weights, lut, vlt_luma, NUM_DIFFS)
    _store_tile(c_out + frame * c_stride + ci * w + cj, best, is_centre, sums, nonzeros, smallest,
                frame * tile_stride + tile)


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
    # the mask only where a scale reads it: every pixel, or with the high-resolution speed-up every second one
    mask_step = 2 if high_res else 1
    mask_h, mask_w = -(-h // mask_step), -(-w // mask_step)
    row_counts = torch.empty((n, h, mask_w), dtype=torch.int8, device=device)
    _row_count_kernel[(triton.cdiv(h * mask_w, _BLOCK), n)](flat, row_counts, h, w, mask_w, mask_step,
                                                              BLOCK=_BLOCK)
    del flat
    mask = torch.empty((n, mask_h, mask_w), dtype=torch.int8, device=device)
    _mask_kernel[(triton.cdiv(mask_h * mask_w, _BLOCK), n)](row_counts, mask, h, mask_w, mask_h, mask_step,
                                                             int(mask_threshold), BLOCK=_BLOCK)
    del row_counts
    packed2 = num_diffs <= 4 and window * window < 4096  # 9 bins of 12 bits in two words
    groups = 1 if packed2 else triton.next_power_of_2(-(-(2 * num_diffs + 1) // _FIELDS))
    shapes = [shape for shape in _BY_CODE_SHAPES if window <= shape[0]]
    by_code = num_diffs <= 4 and bool(shapes)
    _, centres, region, warps = shapes[0] if shapes else _BY_CODE_SHAPES[-1]
    sizes, sh, sw = [], h, w
    for scale in range(NUM_SCALES):
        if scale > 0 or high_res:
            sh, sw = (sh + 1) >> 1, (sw + 1) >> 1
        sizes.append((sh, sw))
    lengths = [a * b for a, b in sizes]
    tile_shapes = []  # per scale: centres per tile (h, w) and tiles across
    for sh, sw in sizes:
        if by_code:
            tile_h = min(centres[0], region[0] - 2 * (window // 2))
            tile_w = min(centres[1], region[1] - 2 * (window // 2))
        else:
            tile_h, tile_w = _TILE_H, _TILE_W
        tiles_w = triton.cdiv(sw, tile_w)
        tile_shapes.append((tile_h, tile_w, tiles_w, triton.cdiv(sh, tile_h) * tiles_w))
    tile_counts = [shape[3] for shape in tile_shapes]
    c_all = torch.empty((n, sum(lengths)), dtype=torch.float32, device=device)  # every scale's c-values per frame
    stats = tile_buffers(n, tile_counts, device)  # every scale's per-tile statistics per frame
    src, src_h, src_w = codes, h, w
    for scale in range(NUM_SCALES):
        step = 2 if scale > 0 or high_res else 1
        sh, sw = sizes[scale]
        shift = scale  # into the mask, itself at every second pixel with the speed-up
        filtered = torch.empty((n, sh, sw), dtype=torch.int16, device=device)
        counted = torch.empty((n, sh, sw), dtype=torch.int16, device=device)
        _mode_kernel[(triton.cdiv(sh * sw, _BLOCK), n)](
            src, src_h, src_w, step, mask, mask_h, mask_w, shift, steps, filtered, counted, sh, sw, low,
            NUM_DIFFS=num_diffs, OUTSIDE=_OUTSIDE, BLOCK=_BLOCK)
        c = c_all[:, sum(lengths[:scale]):]  # rows of c_all.shape[1] values
        first_tile = sum(tile_counts[:scale])
        outputs = (c, *(t[:, first_tile:] for t in stats), c_all.shape[1], stats[0].shape[1])
        tile_h, tile_w, tiles_w, tiles = tile_shapes[scale]
        if by_code:
            _c_value_bins_kernel[(tiles, n)](counted, steps, weights, lut, *outputs, sh, sw, window // 2, tile_h,
                                             tile_w, int(vlt_luma), tiles_w, NUM_DIFFS=num_diffs, OUTSIDE=_OUTSIDE,
                                             CENTRE_H=centres[0], CENTRE_W=centres[1], REGION_H=region[0],
                                             REGION_W=region[1], num_warps=warps)
        else:
            _c_value_kernel[(tiles, n)](counted, steps, weights, lut, *outputs, sh, sw, int(window), int(vlt_luma),
                                        tiles_w, NUM_DIFFS=num_diffs, GROUPS=groups, PACKED2=packed2,
                                        OUTSIDE=_OUTSIDE, TILE_H=_TILE_H, TILE_W=_TILE_W)
        src, src_h, src_w = filtered, sh, sw
    return pool_top_k(c_all, lengths, tile_counts, stats, topk)
