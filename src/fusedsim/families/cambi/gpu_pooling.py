"""CAMBI's top-k pooling on the GPU, equal to libvmaf's double sums.

libvmaf sums the ``k`` largest c-values of a scale in the order its quickselect leaves them. Every selected value is
a float32 of at least the smallest selected one, ``t``, so all of them and every partial sum are multiples of
``2**(floor(log2 t) - 23)``: below ``2**(floor(log2 t) + 30)`` a double holds each partial sum exactly, and the sum
is the same in any order (:func:`exact_below`). Where that holds the sum is taken here; elsewhere libvmaf's order
is replayed on the host.

Per scale: when at most ``k`` c-values are non-zero, the selection is all of them and the c-value kernels' per-tile
sums, non-zero counts and smallest non-zero values decide. Otherwise the k-th largest value ``t`` is found by a
radix select over the float32 bit patterns (non-negative floats order as their bits), for every frame and scale
that needs it at once: eight passes each count the values at or above 16 thresholds in registers (no histogram:
c-values repeat a lot, and shared-memory bins serialise on equal values) and fix one more hexadecimal digit of
``t``; one more pass sums the values above ``t``. The top-k sum is that plus ``t`` for each of the k not yet
counted.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedsim.families.cambi.twin import quickselect_mean, topk_count

__all__ = ["exact_below", "pool_top_k"]

_DIGITS = 16  # thresholds counted per pass: 4 bits of the k-th largest value's 32
_PASSES = 8
_BLOCK = 1024
_COUNT_BLOCK = 256  # the counting passes keep a count per lane and threshold in registers
_BLOCKS_PER_PROGRAM = 8  # a row's programs: enough that the longest row (scale 0) fills the GPU


@triton.jit
def _known_prefix(counts, slot, k, rows, PASS: tl.constexpr, DIGITS: tl.constexpr):
    """The bits of the row's k-th largest value found by passes ``0..PASS-1`` (int64): each pass counted the values
    at or above the 16 thresholds that extend the prefix by one more hexadecimal digit, and the digit is the
    largest whose count reaches ``k``."""
    digits = tl.arange(0, DIGITS)
    prefix = tl.program_id(0).to(tl.int64) * 0
    for step in tl.static_range(PASS):
        found = tl.load(counts + (step * rows + slot) * DIGITS + digits)
        prefix = (prefix << 4) | tl.max(tl.where(found >= k, digits, 0), axis=0).to(tl.int64)
    return prefix


@triton.jit
def _count_at_least_kernel(values, starts, lengths, ks, counts, rows, PASS: tl.constexpr, DIGITS: tl.constexpr,
                           BLOCK: tl.constexpr):
    """Pass ``PASS`` of the radix select, per selected row (``lengths`` values from ``starts``): how many values have
    bits at or above each of the 16 thresholds ``(prefix << 4 | digit) << (28 - 4 PASS)``, added into
    ``counts[PASS]``. Non-negative floats order as their bits; thresholds past every finite float count none. The
    row's programs take every ``num_programs(0)``-th block."""
    slot = tl.program_id(1)
    start = tl.load(starts + slot)
    n = tl.load(lengths + slot)
    prefix = _known_prefix(counts, slot, tl.load(ks + slot), rows, PASS, DIGITS)
    digits = tl.arange(0, DIGITS)
    thresholds = ((prefix << 4) | digits.to(tl.int64)) << (28 - 4 * PASS)
    thresholds = tl.minimum(thresholds, 0x7FFFFFFF).to(tl.int32)  # above +inf's bits: only NaNs, never c-values
    found = tl.zeros([BLOCK, DIGITS], dtype=tl.int32)  # per lane and threshold: reduced once, after the loop
    for first in range(tl.program_id(0) * BLOCK, n, tl.num_programs(0) * BLOCK):
        offs = first + tl.arange(0, BLOCK)
        inside = offs < n
        bits = tl.load(values + start + offs, mask=inside, other=0.0).to(tl.int32, bitcast=True)
        found += (inside[:, None] & (bits[:, None] >= thresholds[None, :])).to(tl.int32)
    tl.atomic_add(counts + (PASS * rows + slot) * DIGITS + digits, tl.sum(found, axis=0))


@triton.jit
def _sum_above_kernel(values, starts, lengths, ks, counts, rows, kth, sums, above, PASSES: tl.constexpr,
                      DIGITS: tl.constexpr, BLOCK: tl.constexpr):
    """Per selected row: its k-th largest value (from the passes' counts) into ``kth``, and the double sum and the
    number of its values above it added into ``sums`` and ``above`` (the sum exact in any order where the caller
    uses it)."""
    slot = tl.program_id(1)
    start = tl.load(starts + slot)
    n = tl.load(lengths + slot)
    threshold = _known_prefix(counts, slot, tl.load(ks + slot), rows, PASSES, DIGITS).to(tl.int32)
    threshold = threshold.to(tl.float32, bitcast=True)
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
    grid = (triton.cdiv(longest, _COUNT_BLOCK * _BLOCKS_PER_PROGRAM), r)
    for step in range(_PASSES):
        _count_at_least_kernel[grid](values, starts, lengths, ks, counts, r, PASS=step, DIGITS=_DIGITS,
                                     BLOCK=_COUNT_BLOCK)
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


def pool_top_k(c: torch.Tensor, lengths: list[int], tiles: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]],
               topk: float) -> torch.Tensor:
    """Each frame's libvmaf top-k mean of its c-values at each scale: ``c`` ``(N, sum(lengths))`` float32 holds
    each frame's scales one after the other (``lengths[s]`` values each), ``tiles[s]`` the c-value kernels'
    per-tile sums (N, T) float64, non-zero counts (N, T) and smallest non-zero values (N, T) float32 (inf where
    none) of scale ``s``: ``(N, S)`` float64. Two device synchronisations at most: which frames need a selection,
    and which sums are past their exact bound (those are replayed on the host in libvmaf's order)."""
    c = c.contiguous()
    device = c.device
    ks = [topk_count(n, topk) for n in lengths]
    offsets = [sum(lengths[:s]) for s in range(len(lengths))]
    total = torch.stack([tile_sums.sum(dim=1) for tile_sums, _, _ in tiles], dim=1)
    bound = torch.stack([exact_below(smallest.amin(dim=1)) for _, _, smallest in tiles], dim=1)
    k_of = torch.tensor(ks, dtype=torch.int64, device=device)
    selecting = torch.stack([nonzeros.sum(dim=1) for _, nonzeros, _ in tiles], dim=1) > k_of
    frames, scales = torch.nonzero(selecting, as_tuple=True)  # the first synchronisation
    if frames.numel():
        starts = frames * c.shape[1] + torch.tensor(offsets, dtype=torch.int64, device=device)[scales]
        lengths_of = torch.tensor(lengths, dtype=torch.int32, device=device)[scales]
        top, kth = _top_sums(c, starts, lengths_of, k_of[scales], max(lengths))
        total[frames, scales] = top
        bound[frames, scales] = exact_below(kth)
    out = total / k_of.to(torch.float64)  # true division, as the twin's
    for f, s in torch.nonzero(total >= bound).tolist():  # the second synchronisation
        values = c[f, offsets[s]:offsets[s] + lengths[s]]
        out[f, s] = _host_quickselect()(values.cpu().numpy().copy(), ks[s])
    return out
