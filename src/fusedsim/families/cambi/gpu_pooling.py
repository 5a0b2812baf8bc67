"""CAMBI's top-k pooling on the GPU, equal to libvmaf's double sums, decided on the device.

libvmaf sums the ``k`` largest c-values of a scale in the order its quickselect leaves them. Every selected value is
a float32 of at least the smallest selected one, ``t``, so all of them and every partial sum are multiples of
``2**(floor(log2 t) - 23)``: below ``2**(floor(log2 t) + 30)`` a double holds each partial sum exactly, and the sum
is the same in any order (:func:`exact_below`). Where that holds the sum is taken here; elsewhere libvmaf's order
is replayed on the host.

A row is one frame's scale. ``_decide_kernel`` reduces the c-value kernels' per-tile sums, non-zero counts and
smallest non-zero values of each row: where at most ``k`` values are non-zero the selection is all of them.
Otherwise the k-th largest value ``t`` is found by a radix select over the float32 bit patterns (non-negative
floats order as their bits): eight passes each count, among the row's values that share the bits of ``t`` found so
far, the values of each next 4-bit digit (in 4-bit fields of two registers per lane: c-values repeat a lot, and
shared-memory histogram bins serialise on equal values), and the next pass fixes that digit. One more pass sums
the values above ``t``; the top-k sum is that plus ``t`` for each of the k not yet counted. Every row takes every
launch (a row that does not select leaves at once), so the host learns nothing until the one synchronisation that
reads which rows, if any, are past their bound.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedsim.families.cambi.twin import quickselect_mean, topk_count

__all__ = ["exact_below", "pool_top_k", "tile_buffers"]

_DIGITS = 16  # one pass fixes 4 bits of the k-th largest value's 32
_PASSES = 8
_BLOCK = 1024
_BLOCKS = 15  # blocks per program of a pass: a lane meets at most 15 values, so 4-bit counters
_CHUNK = _BLOCK * _BLOCKS
_TILE_BLOCK = 1024


@triton.jit
def _exact_bound(t):
    """:func:`exact_below` of a float32 ``t > 0`` (``inf`` gives ``inf``): ``2**(e - 127 + 30)`` for its biased
    exponent ``e`` (a subnormal's bound, 2**-97, is below its true one: still safe), as a double."""
    e = (t.to(tl.int32, bitcast=True) >> 23) & 255
    bound = ((e + (30 - 127 + 1023)).to(tl.int64) << 52).to(tl.float64, bitcast=True)
    return tl.where(e == 255, float("inf"), bound)


@triton.jit
def _decide_kernel(sums, nonzeros, smallest, tile_stride, info, total, selecting, bound, prefixes, wanted, counts,
                   selected_sum, above, rows, SCALES: tl.constexpr, DIGITS: tl.constexpr, PASSES: tl.constexpr,
                   TILE_BLOCK: tl.constexpr):
    """Per row (frame, scale): the double sum of its non-zero c-values, whether more than ``k`` are non-zero (it
    selects), the bound of its smallest non-zero value; the select's state and counters zeroed."""
    s = tl.program_id(0)
    row = tl.program_id(1) * SCALES + s
    k = tl.load(info + s * 5 + 2).to(tl.int32)
    first = tl.program_id(1).to(tl.int64) * tile_stride + tl.load(info + s * 5 + 3)
    tiles = tl.load(info + s * 5 + 4)
    acc = tl.zeros([TILE_BLOCK], dtype=tl.float64)
    count = tl.zeros([TILE_BLOCK], dtype=tl.int32)
    low = tl.full([TILE_BLOCK], float("inf"), tl.float32)
    for start in range(0, tiles, TILE_BLOCK):
        offs = start + tl.arange(0, TILE_BLOCK)
        ok = offs < tiles
        acc += tl.load(sums + first + offs, mask=ok, other=0.0)
        count += tl.load(nonzeros + first + offs, mask=ok, other=0)
        low = tl.minimum(low, tl.load(smallest + first + offs, mask=ok, other=float("inf")))
    tl.store(total + row, tl.sum(acc, axis=0))
    tl.store(selecting + row, (tl.sum(count, axis=0) > k).to(tl.int8))
    tl.store(bound + row, _exact_bound(tl.min(low, axis=0)))
    tl.store(prefixes + row, 0)
    tl.store(wanted + row, k)
    zero = tl.zeros([DIGITS], dtype=tl.int32)
    for step in tl.static_range(PASSES):
        tl.store(counts + (step * rows + row) * DIGITS + tl.arange(0, DIGITS), zero)
    tl.store(selected_sum + row, 0.0)
    tl.store(above + row, 0)


@triton.jit
def _next_state(counts, prefixes, wanted, row, rows, PASS: tl.constexpr, DIGITS: tl.constexpr):
    """The bits of the row's k-th largest value found by passes ``0..PASS-1`` and its rank among the values that
    share them: pass ``PASS-1``'s state and counts give its digit, the largest whose values, with those of larger
    digits, reach the rank; the rank then drops by the values of larger digits."""
    if PASS == 0:
        prefix = tl.load(prefixes + row)
        rank = tl.load(wanted + row)
    else:
        prefix = tl.load(prefixes + (PASS - 1) * rows + row)
        rank = tl.load(wanted + (PASS - 1) * rows + row)
        digits = tl.arange(0, DIGITS)
        found = tl.load(counts + ((PASS - 1) * rows + row) * DIGITS + digits)
        at_least = tl.sum(found, axis=0) - tl.cumsum(found, axis=0) + found
        digit = tl.max(tl.where(at_least >= rank, digits, 0), axis=0)
        rank = rank - tl.sum(tl.where(digits > digit, found, 0), axis=0)
        prefix = (prefix << 4) | digit
    return prefix, rank


@triton.jit
def _work_item(items, info, c_stride, SCALES: tl.constexpr):
    """This program's work item of a pass (grid: items, frames): its chunk, its row (frame, scale), the scale's
    number of values and where the row's values start."""
    s = tl.load(items + 2 * tl.program_id(0))
    chunk = tl.load(items + 2 * tl.program_id(0) + 1)
    row = tl.program_id(1) * SCALES + s
    start = tl.program_id(1).to(tl.int64) * c_stride + tl.load(info + s * 5 + 1)
    return chunk, row, tl.load(info + s * 5).to(tl.int32), start


@triton.jit
def _digit_counts_kernel(values, c_stride, info, items, selecting, counts, prefixes, wanted, rows,
                         SCALES: tl.constexpr, PASS: tl.constexpr, DIGITS: tl.constexpr, BLOCK: tl.constexpr,
                         BLOCKS: tl.constexpr):
    """Pass ``PASS`` over one chunk (work item: scale, chunk) of a frame's selecting row: among its values whose
    bits above the digit at bit ``28 - 4 PASS`` equal the prefix found so far, how many have each digit value,
    added into ``counts[PASS]``. The chunk's first program also records the state it started from."""
    chunk, row, n, start = _work_item(items, info, c_stride, SCALES)
    if tl.load(selecting + row) != 0:
        prefix, rank = _next_state(counts, prefixes, wanted, row, rows, PASS, DIGITS)
        if PASS > 0:
            if chunk == 0:
                tl.store(prefixes + PASS * rows + row, prefix)
                tl.store(wanted + PASS * rows + row, rank)
        shift: tl.constexpr = 28 - 4 * PASS
        low = tl.zeros([BLOCK], dtype=tl.int32)  # digits 0-7, 4 bits each
        high = tl.zeros([BLOCK], dtype=tl.int32)  # digits 8-15
        for block in range(BLOCKS):
            offs = (chunk * BLOCKS + block) * BLOCK + tl.arange(0, BLOCK)
            inside = offs < n
            bits = tl.load(values + start + offs, mask=inside, other=0.0).to(tl.int32, bitcast=True)
            match = inside
            if PASS > 0:
                match = match & ((bits >> (shift + 4)) == prefix)
            digit = (bits >> shift) & (DIGITS - 1)
            one = 1 << ((digit & 7) * 4)
            low += tl.where(match & (digit < 8), one, 0)
            high += tl.where(match & (digit >= 8), one, 0)
        # two digits per 16-bit field pair: a sum over the block stays below 2**16 (at most BLOCK * BLOCKS)
        digits = tl.arange(0, DIGITS)
        found = tl.zeros([DIGITS], dtype=tl.int32)
        for j in tl.static_range(4):
            pair_low = tl.sum((low >> (4 * j)) & 0x000F000F, axis=0)
            pair_high = tl.sum((high >> (4 * j)) & 0x000F000F, axis=0)
            found += tl.where(digits == j, pair_low & 0xFFFF, 0) + tl.where(digits == j + 4, pair_low >> 16, 0)
            found += tl.where(digits == j + 8, pair_high & 0xFFFF, 0) + tl.where(digits == j + 12, pair_high >> 16, 0)
        tl.atomic_add(counts + (PASS * rows + row) * DIGITS + digits, found, mask=found > 0)


@triton.jit
def _sum_above_kernel(values, c_stride, info, items, selecting, counts, prefixes, wanted, rows, kth, selected_sum,
                      above, SCALES: tl.constexpr, PASSES: tl.constexpr, DIGITS: tl.constexpr, BLOCK: tl.constexpr,
                      BLOCKS: tl.constexpr):
    """Per chunk of a selecting row: the row's k-th largest value (from the last pass's counts; the chunk's first
    program stores it in ``kth``), and the double sum and number of the chunk's values above it, added into
    ``selected_sum`` and ``above`` (the sum exact in any order where the pooling uses it)."""
    chunk, row, n, start = _work_item(items, info, c_stride, SCALES)
    if tl.load(selecting + row) != 0:
        bits, _ = _next_state(counts, prefixes, wanted, row, rows, PASSES, DIGITS)
        threshold = bits.to(tl.float32, bitcast=True)
        if chunk == 0:
            tl.store(kth + row, threshold)
        acc = tl.zeros([BLOCK], dtype=tl.float64)
        count = tl.zeros([BLOCK], dtype=tl.int32)
        for block in range(BLOCKS):
            offs = (chunk * BLOCKS + block) * BLOCK + tl.arange(0, BLOCK)
            x = tl.load(values + start + offs, mask=offs < n, other=0.0)
            over = x > threshold
            acc += tl.where(over, x, 0.0).to(tl.float64)
            count += over.to(tl.int32)
        tl.atomic_add(selected_sum + row, tl.sum(acc, axis=0))
        tl.atomic_add(above + row, tl.sum(count, axis=0))


@triton.jit
def _finish_kernel(info, total, selecting, bound, kth, selected_sum, above, top, replay, rows, SCALES: tl.constexpr,
                   BLOCK: tl.constexpr):
    """Per row: its top-k double sum (all non-zero values, or those above ``t`` plus ``t`` for the rest: ``(k -
    above) * t`` is exact, a product of an integer under 2**23 and a float32) and whether it is at or past the
    bound where any order is exact (then replayed on the host)."""
    row = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = row < rows
    k = tl.load(info + (row % SCALES) * 5 + 2, mask=ok, other=1)
    chosen = tl.load(selecting + row, mask=ok, other=0) != 0
    t = tl.load(kth + row, mask=ok & chosen, other=1.0)
    picked = (tl.load(selected_sum + row, mask=ok & chosen, other=0.0)
              + (k - tl.load(above + row, mask=ok & chosen, other=0)).to(tl.float64) * t.to(tl.float64))
    value = tl.where(chosen, picked, tl.load(total + row, mask=ok, other=0.0))
    limit = tl.where(chosen, _exact_bound(t), tl.load(bound + row, mask=ok, other=0.0))
    tl.store(top + row, value, mask=ok)
    tl.store(replay + row, (value >= limit).to(tl.int8), mask=ok)


def exact_below(smallest: torch.Tensor) -> torch.Tensor:
    """The bound under which any-order double sums of float32 values of at least ``smallest`` (> 0) are exact:
    ``2**(floor(log2 smallest) + 30)``, float64; ``inf`` where nothing is selected (``smallest`` is ``inf``)."""
    _, exponent = torch.frexp(smallest.to(torch.float64))  # smallest = m * 2**exponent, m in [0.5, 1)
    bound = torch.ldexp(torch.ones_like(smallest, dtype=torch.float64), exponent + 29)
    return torch.where(torch.isinf(smallest), float("inf"), bound)


def tile_buffers(n: int, tile_counts: list[int], device: torch.device
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The c-value kernels' per-tile statistics of every scale in one buffer each (scale ``s``'s tiles follow
    those of the scales before it): sums ``(N, T)`` float64, non-zero counts int32, smallest non-zero float32."""
    tiles = sum(tile_counts)
    return (torch.empty((n, tiles), dtype=torch.float64, device=device),
            torch.empty((n, tiles), dtype=torch.int32, device=device),
            torch.empty((n, tiles), dtype=torch.float32, device=device))


def _host_quickselect():
    """libvmaf's quickselect pooling, compiled when numba is there (the twin's otherwise)."""
    try:
        from fusedsim.families.cambi.cpu import quickselect_mean_numba
    except ImportError:
        return quickselect_mean
    return quickselect_mean_numba


_LAYOUTS: dict[tuple, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}


def _layout(lengths: tuple[int, ...], tile_counts: tuple[int, ...], topk: float, device: torch.device
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per frame size, made once (a tensor built from a list on a GPU is a synchronising copy): the per-scale
    table (values, offset, k, tile offset, tiles) int64 ``(S, 5)``, the work items of a pass (scale, chunk) int32
    ``(I, 2)``, and each scale's k as float64."""
    key = (lengths, tile_counts, topk, device)
    if key not in _LAYOUTS:
        ks = [topk_count(n, topk) for n in lengths]
        table = [[n, sum(lengths[:s]), k, sum(tile_counts[:s]), tiles]
                 for s, (n, k, tiles) in enumerate(zip(lengths, ks, tile_counts))]
        items = [[s, chunk] for s, n in enumerate(lengths) for chunk in range(triton.cdiv(n, _CHUNK))]
        _LAYOUTS[key] = (torch.tensor(table, dtype=torch.int64, device=device),
                         torch.tensor(items, dtype=torch.int32, device=device),
                         torch.tensor(ks, dtype=torch.float64, device=device))
    return _LAYOUTS[key]


def pool_top_k(c: torch.Tensor, lengths: list[int], tile_counts: list[int],
               tile_stats: tuple[torch.Tensor, torch.Tensor, torch.Tensor], topk: float) -> torch.Tensor:
    """Each frame's libvmaf top-k mean of its c-values at each scale: ``c`` ``(N, sum(lengths))`` float32 holds
    each frame's scales one after the other (``lengths[s]`` values each), ``tile_stats`` the c-value kernels'
    per-tile sums, non-zero counts and smallest non-zero values (:func:`tile_buffers`, ``tile_counts[s]`` tiles
    for scale ``s``): ``(N, S)`` float64. One device synchronisation reads which rows are past their exact bound;
    those are replayed on the host in libvmaf's order."""
    c = c.contiguous()
    n, scales = c.shape[0], len(lengths)
    rows = n * scales
    info, items, k_of = _layout(tuple(lengths), tuple(tile_counts), float(topk), c.device)
    sums, nonzeros, smallest = tile_stats
    device = c.device
    total = torch.empty(rows, dtype=torch.float64, device=device)
    bound = torch.empty(rows, dtype=torch.float64, device=device)
    selecting = torch.empty(rows, dtype=torch.int8, device=device)
    prefixes = torch.empty((_PASSES, rows), dtype=torch.int32, device=device)
    wanted = torch.empty((_PASSES, rows), dtype=torch.int32, device=device)
    counts = torch.empty((_PASSES, rows, _DIGITS), dtype=torch.int32, device=device)
    selected_sum = torch.empty(rows, dtype=torch.float64, device=device)
    above = torch.empty(rows, dtype=torch.int32, device=device)
    kth = torch.empty(rows, dtype=torch.float32, device=device)
    _decide_kernel[(scales, n)](sums, nonzeros, smallest, sums.shape[1], info, total, selecting, bound, prefixes,
                                wanted, counts, selected_sum, above, rows, SCALES=scales, DIGITS=_DIGITS,
                                PASSES=_PASSES, TILE_BLOCK=_TILE_BLOCK)
    grid = (items.shape[0], n)
    for step in range(_PASSES):
        _digit_counts_kernel[grid](c, c.shape[1], info, items, selecting, counts, prefixes, wanted, rows,
                                   SCALES=scales, PASS=step, DIGITS=_DIGITS, BLOCK=_BLOCK, BLOCKS=_BLOCKS)
    _sum_above_kernel[grid](c, c.shape[1], info, items, selecting, counts, prefixes, wanted, rows, kth, selected_sum,
                            above, SCALES=scales, PASSES=_PASSES, DIGITS=_DIGITS, BLOCK=_BLOCK, BLOCKS=_BLOCKS)
    top = torch.empty(rows, dtype=torch.float64, device=device)
    replay = torch.empty(rows, dtype=torch.int8, device=device)
    _finish_kernel[(triton.cdiv(rows, 128),)](info, total, selecting, bound, kth, selected_sum, above, top, replay,
                                             rows, SCALES=scales, BLOCK=128)
    out = top.view(n, scales) / k_of  # true division, as the twin's
    starts = [sum(lengths[:s]) for s in range(scales)]
    for row in torch.nonzero(replay).flatten().tolist():  # the one synchronisation
        f, s = divmod(row, scales)
        values = c[f, starts[s]:starts[s] + lengths[s]]
        out[f, s] = _host_quickselect()(values.cpu().numpy().copy(), topk_count(lengths[s], topk))
    return out
