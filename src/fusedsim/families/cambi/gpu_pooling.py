"""CAMBI's top-k pooling on the GPU, equal to libvmaf's double sums.

libvmaf sums the ``k`` largest c-values of a scale in the order its quickselect leaves them. Every selected value is
a float32 of at least the smallest selected one, ``t``, so all of them and every partial sum are multiples of
``2**(floor(log2 t) - 23)``: below ``2**(floor(log2 t) + 30)`` a double holds each partial sum exactly, and the sum
is the same in any order (:func:`exact_below`). Where that holds the sum is taken here; elsewhere libvmaf's order
is replayed on the host.

Per scale: when at most ``k`` c-values are non-zero, the selection is all of them and the c-value kernels' per-tile
sums, non-zero counts and smallest non-zero values decide. Otherwise the k-th largest value ``t`` is found by a
radix select over the float32 bit patterns (non-negative floats order as their bits), for every frame and scale
that needs it at once: eight passes each count, among the values that share the bits of ``t`` found so far, the
values of each next 4-bit digit (in 4-bit fields of one register per lane: c-values repeat a lot, and shared-memory
histogram bins serialise on equal values) and fix that digit of ``t``; one more pass sums the values above
``t``. The top-k sum is that plus ``t`` for each of the k not yet counted.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedsim.families.cambi.twin import quickselect_mean, topk_count

__all__ = ["exact_below", "pool_top_k"]

_DIGITS = 16  # one pass fixes 4 bits of the k-th largest value's 32
_PASSES = 8
_BLOCK = 1024
_COUNT_BLOCKS = 8  # blocks per program of a counting pass: each lane meets at most 8 values, so 4-bit counters


@triton.jit
def _known_prefix(counts, slot, k, rows, PASS: tl.constexpr, DIGITS: tl.constexpr):
    """From the digit counts of passes ``0..PASS-1``: the bits of the row's k-th largest value found so far (int64)
    and its rank among the values that share them. Per pass, the digit is the largest whose values, with those of
    larger digits, reach the rank; the rank then drops by the values of larger digits."""
    digits = tl.arange(0, DIGITS)
    prefix = tl.program_id(0).to(tl.int64) * 0
    wanted = k
    for step in tl.static_range(PASS):
        found = tl.load(counts + (step * rows + slot) * DIGITS + digits)
        at_least = tl.sum(found, axis=0) - tl.cumsum(found, axis=0) + found
        digit = tl.max(tl.where(at_least >= wanted, digits, 0), axis=0)
        wanted = wanted - tl.sum(tl.where(digits > digit, found, 0), axis=0)
        prefix = (prefix << 4) | digit.to(tl.int64)
    return prefix, wanted


@triton.jit
def _digit_counts_kernel(values, starts, lengths, ks, counts, rows, PASS: tl.constexpr, DIGITS: tl.constexpr,
                         BLOCK: tl.constexpr, BLOCKS: tl.constexpr):
    """Pass ``PASS`` of the radix select, per selected row (``lengths`` values from ``starts``): among its values
    whose bits above the digit equal the prefix found so far, how many have each value of the 4-bit digit at bit
    ``28 - 4 PASS``, added into ``counts[PASS]``. Non-negative floats order as their bits. Each lane counts in 16
    4-bit fields of one int64 (no shared-memory bins: c-values repeat a lot, and equal values would serialise)."""
    slot = tl.program_id(1)
    start = tl.load(starts + slot)
    n = tl.load(lengths + slot)
    prefix, _ = _known_prefix(counts, slot, tl.load(ks + slot), rows, PASS, DIGITS)
    shift: tl.constexpr = 28 - 4 * PASS
    packed = tl.zeros([BLOCK], dtype=tl.int64)
    for block in range(BLOCKS):
        offs = (tl.program_id(0) * BLOCKS + block) * BLOCK + tl.arange(0, BLOCK)
        inside = offs < n
        bits = tl.load(values + start + offs, mask=inside, other=0.0).to(tl.int32, bitcast=True)
        match = inside & ((bits.to(tl.int64) >> (shift + 4)) == prefix)
        field = (((bits >> shift) & (DIGITS - 1)) * 4).to(tl.int64)
        packed += tl.where(match, tl.full([BLOCK], 1, tl.int64) << field, 0)
    digits = tl.arange(0, DIGITS)
    found = tl.zeros([DIGITS], dtype=tl.int32)
    for digit in tl.static_range(DIGITS):
        found += tl.where(digits == digit, tl.sum(((packed >> (4 * digit)) & 15).to(tl.int32), axis=0), 0)
    tl.atomic_add(counts + (PASS * rows + slot) * DIGITS + digits, found, mask=found > 0)


@triton.jit
def _sum_above_kernel(values, starts, lengths, ks, counts, rows, kth, sums, above, PASSES: tl.constexpr,
                      DIGITS: tl.constexpr, BLOCK: tl.constexpr):
    """Per selected row: its k-th largest value (from the passes' counts) into ``kth``, and the double sum and the
    number of its values above it added into ``sums`` and ``above`` (the sum exact in any order where the caller
    uses it)."""
    slot = tl.program_id(1)
    start = tl.load(starts + slot)
    n = tl.load(lengths + slot)
    bits, _ = _known_prefix(counts, slot, tl.load(ks + slot), rows, PASSES, DIGITS)
    threshold = bits.to(tl.int32).to(tl.float32, bitcast=True)
    tl.store(kth + slot, threshold, mask=tl.program_id(0) == 0)
    total = tl.zeros([BLOCK], dtype=tl.float64)
    count = tl.zeros([BLOCK], dtype=tl.int32)
    for first in range(tl.program_id(0) * BLOCK, n, tl.num_programs(0) * BLOCK):
        offs = first + tl.arange(0, BLOCK)
        x = tl.load(values + start + offs, mask=offs < n, other=0.0)
        over = x > threshold
        total += tl.where(over, x, 0.0).to(tl.float64)
        count += over.to(tl.int32)
    tl.atomic_add(sums + slot, tl.sum(total, axis=0))
    tl.atomic_add(above + slot, tl.sum(count, axis=0))


def exact_below(smallest: torch.Tensor) -> torch.Tensor:
    """The bound under which any-order double sums of float32 values of at least ``smallest`` (> 0) are exact:
    ``2**(floor(log2 smallest) + 30)``, float64; ``inf`` where nothing is selected (``smallest`` is ``inf``)."""
    _, exponent = torch.frexp(smallest.to(torch.float64))  # smallest = m * 2**exponent, m in [0.5, 1)
    bound = torch.ldexp(torch.ones_like(smallest, dtype=torch.float64), exponent + 29)
    return torch.where(torch.isinf(smallest), float("inf"), bound)


def _top_sums(values: torch.Tensor, starts: torch.Tensor, lengths: torch.Tensor, ks: torch.Tensor,
              longest: int) -> tuple[torch.Tensor, torch.Tensor]:
    """For rows of ``values`` (flat float32; row r is ``lengths[r]`` values from ``starts[r]``, at most ``longest``,
    each with more than ``ks[r]`` non-zero values): the double sum of their ``ks[r]`` largest values and the k-th
    largest, ``(R,)`` float64 and float32."""
    r = starts.numel()
    device = values.device
    ks = ks.to(torch.int32)
    counts = torch.zeros((_PASSES, r, _DIGITS), dtype=torch.int32, device=device)
    for step in range(_PASSES):
        _digit_counts_kernel[(triton.cdiv(longest, _BLOCK * _COUNT_BLOCKS), r)](
            values, starts, lengths, ks, counts, r, PASS=step, DIGITS=_DIGITS, BLOCK=_BLOCK, BLOCKS=_COUNT_BLOCKS)
    grid = (triton.cdiv(longest, _BLOCK * _COUNT_BLOCKS), r)
    kth = torch.empty(r, dtype=torch.float32, device=device)
    sums = torch.zeros(r, dtype=torch.float64, device=device)
    above = torch.zeros(r, dtype=torch.int32, device=device)
    _sum_above_kernel[grid](values, starts, lengths, ks, counts, r, kth, sums, above, PASSES=_PASSES,
                            DIGITS=_DIGITS, BLOCK=_BLOCK)
    return sums + (ks - above).to(torch.float64) * kth.to(torch.float64), kth


def _host_quickselect():
    """libvmaf's quickselect pooling, compiled when numba is there (the twin's otherwise)."""
    try:
        from fusedsim.families.cambi.cpu import quickselect_mean_numba
    except ImportError:
        return quickselect_mean
    return quickselect_mean_numba


_ROW_CONSTANTS: dict[tuple, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}


def _row_constants(lengths: tuple[int, ...], ks: tuple[int, ...], offsets: tuple[int, ...],
                   device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``k``, offset and length of each scale on ``device``, made once per frame size: a tensor built from a list
    on a GPU is a synchronising copy."""
    key = (lengths, ks, device)
    if key not in _ROW_CONSTANTS:
        _ROW_CONSTANTS[key] = (torch.tensor(ks, dtype=torch.int64, device=device),
                               torch.tensor(offsets, dtype=torch.int64, device=device),
                               torch.tensor(lengths, dtype=torch.int32, device=device))
    return _ROW_CONSTANTS[key]


def pool_top_k(c: torch.Tensor, lengths: list[int], tiles: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]],
               topk: float) -> torch.Tensor:
    """Each frame's libvmaf top-k mean of its c-values at each scale: ``c`` ``(N, sum(lengths))`` float32 holds
    each frame's scales one after the other (``lengths[s]`` values each), ``tiles[s]`` the c-value kernels'
    per-tile sums (N, T) float64, non-zero counts (N, T) and smallest non-zero values (N, T) float32 (inf where
    none) of scale ``s``: ``(N, S)`` float64. One device synchronisation decides which scales select and which
    sums of all non-zero values are past their exact bound; a second follows only where a selection ran (its
    sums past their bound). Sums past the bound are replayed on the host in libvmaf's order."""
    c = c.contiguous()
    ks = tuple(topk_count(n, topk) for n in lengths)
    starts_host = tuple(sum(lengths[:s]) for s in range(len(lengths)))
    k_of, offsets, lengths_of = _row_constants(tuple(lengths), ks, starts_host, c.device)
    total = torch.stack([tile_sums.sum(dim=1) for tile_sums, _, _ in tiles], dim=1)
    bound = torch.stack([exact_below(smallest.amin(dim=1)) for _, _, smallest in tiles], dim=1)
    selecting = torch.stack([nonzeros.sum(dim=1) for _, nonzeros, _ in tiles], dim=1) > k_of
    past = (total >= bound) & ~selecting
    flags = torch.nonzero(torch.stack([selecting, past])).tolist()  # the first synchronisation
    replay = [(f, s) for which, f, s in flags if which == 1]
    chosen = [(f, s) for which, f, s in flags if which == 0]
    if chosen:
        frames, scales = torch.tensor(chosen, dtype=torch.int64).T.to(c.device)
        starts = frames * c.shape[1] + offsets[scales]
        top, kth = _top_sums(c, starts, lengths_of[scales], k_of[scales], max(lengths))
        total[frames, scales] = top
        bound[frames, scales] = exact_below(kth)
        replay += [tuple(fs) for fs in torch.nonzero((total >= bound) & selecting).tolist()]  # the second
    out = total / k_of.to(torch.float64)  # true division, as the twin's
    for f, s in replay:
        values = c[f, starts_host[s]:starts_host[s] + lengths[s]]
        out[f, s] = _host_quickselect()(values.cpu().numpy().copy(), ks[s])
    return out
