"""MS-SSIM's combination of per-level statistics as Triton device functions, shared by the standalone combine
kernels (``ops/ssim.py``) and the SSIM kernels that fold it in (the last level's forward reduction, every level's
backward prologue), so that both paths run the same floating-point operations in the same order.

Statistics: (L, 2, N, C) per-plane SSIM and cs means; level l < L-1 uses relu(cs), the last level relu(SSIM),
each raised to its weight; reductions: 1 mean, 2 per image, 3 per plane.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def ms_pow(f, w):
    """f**w for f >= 0 with torch.pow's values at 0 (0 for w > 0, 1 for w == 0, inf for w < 0)."""
    safe = tl.where(f > 0, f, 1.0)
    at_zero = tl.where(w > 0, 0.0, tl.where(w == 0, 1.0, float("inf")))
    return tl.where(f > 0, tl.exp(w * tl.log(safe)), at_zero)


@triton.jit
def ms_factor(STATS, W, p, ok, NC, l: tl.constexpr, L: tl.constexpr):
    """relu(cs) at level l < L-1, relu(SSIM) at the last level, and its exponent."""
    if l == L - 1:
        f = tl.maximum(tl.load(STATS + (2 * l) * NC + p, mask=ok, other=1.0), 0.0)
    else:
        f = tl.maximum(tl.load(STATS + (2 * l + 1) * NC + p, mask=ok, other=1.0), 0.0)
    return f, tl.load(W + l)


@triton.jit
def ms_combine_group(STATS, W, OUT, NC, PER, g, L: tl.constexpr, REDUCE: tl.constexpr, BLOCK: tl.constexpr):
    """Per plane prod_l factor_l ** w_l, reduced over the PER planes of group g (mean: all, image: C, channel:
    written per plane)."""
    total = tl.zeros([BLOCK], STATS.dtype.element_ty)
    for start in range(0, PER, BLOCK):
        q = start + tl.arange(0, BLOCK)
        p = g * PER + q
        ok = (q < PER) & (p < NC)
        pc = tl.full([BLOCK], 1.0, STATS.dtype.element_ty)
        for l in tl.static_range(L):
            f, w = ms_factor(STATS, W, p, ok, NC, l, L)
            pc = pc * ms_pow(f, w)
        if REDUCE == 3:
            tl.store(OUT + p, pc, mask=ok)
        total += tl.where(ok, pc, 0.0)
    if REDUCE != 3:
        tl.store(OUT + g, tl.sum(total, axis=0) / PER)


@triton.jit
def ms_combine_all(STATS, W, OUT, NC, PER, L: tl.constexpr, REDUCE: tl.constexpr, BLOCK: tl.constexpr):
    """Every group in turn: the combine run by one program (the last one to finish the last level)."""
    for g in range(tl.cdiv(NC, PER)):
        ms_combine_group(STATS, W, OUT, NC, PER, g, L, REDUCE, BLOCK)


@triton.jit
def ms_level_upstream(G, STATS, W, nc, NC, PER, level, L: tl.constexpr, REDUCE: tl.constexpr):
    """Gradient of the combined value of plane ``nc`` with respect to its SSIM and cs means at ``level`` (a
    runtime index), from the upstream gradient at G: (d SSIM, d cs), zero for the unused slot and where the relu
    is inactive. The operations and their order are those of the standalone combine backward."""
    gp = tl.load(G).to(STATS.dtype.element_ty)
    if REDUCE != 3:
        gp = gp / PER
    last = level == L - 1
    slot = tl.where(last, 2 * level, 2 * level + 1)
    f = tl.maximum(tl.load(STATS + slot * NC + nc), 0.0)
    w = tl.load(W + level)
    d = gp * w * ms_pow(f, w - 1.0)
    for m in tl.static_range(L):
        if m == L - 1:
            fm = tl.maximum(tl.load(STATS + (2 * m) * NC + nc), 0.0)
        else:
            fm = tl.maximum(tl.load(STATS + (2 * m + 1) * NC + nc), 0.0)
        d = d * tl.where(level == m, 1.0, ms_pow(fm, tl.load(W + m)))  # x 1.0 is exact: skips the own factor
    d = tl.where(f > 0, d, 0.0)
    return tl.where(last, d, 0.0), tl.where(last, 0.0, d)
