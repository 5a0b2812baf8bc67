"""IW-SSIM's neighbourhood Gram matrix on the GPU: ``C_u = YᵀY / n`` without forming Y.

    iwssim_gram(ref_band (N, 1, H, W), parent (N, 1, H, W), has_parent) -> (N, K, K) float64, K = 9 (+1)

Y has one row per interior pixel (1 <= r < H-1, 1 <= c < W-1): the reference band's 3x3 neighbourhood in the
MATLAB column order (offsets (1, 1), (1, 0), (1, -1), (0, 1), ... (-1, -1)), plus the enlarged parent at the
pixel when ``has_parent``. Each program walks a strided share of the pixels, BLOCK at a time, loads the (BLOCK,
16) tile of neighbourhood values (padded columns are 0) and accumulates its outer products in a 16x16 float64
register tile; the per-program partial sums are added by one ``torch.sum`` (deterministic). Forward only; the
twin is :func:`fusedsim.reference.iwssim_ref.neighbourhood_gram_ref` (same sums in another order).
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from fusedsim.backend import triton_interpreting
from fusedsim.ops._launch import Launcher

__all__ = ["iwssim_gram_fwd"]

KP = 16  # padded neighbourhood size (K <= 10)


@triton.jit
def neighbourhood_tile(REF, PAR, rows, cols, sh, sw, ph, pw, ok, HAS_PARENT: tl.constexpr, KP: tl.constexpr):
    """(BLOCK, KP) float64: the 3x3 neighbourhood of each pixel (rows, cols are (BLOCK, 1)) and its parent."""
    kk = tl.arange(0, KP)[None, :]
    dy = 1 - kk // 3
    dx = 1 - kk % 3
    spatial = ok & (kk < 9)
    tile = tl.load(REF + (rows + dy).to(tl.int64) * sh + (cols + dx).to(tl.int64) * sw, mask=spatial,
                   other=0.0).to(tl.float64)
    if HAS_PARENT:
        par = tl.load(PAR + rows.to(tl.int64) * ph + cols.to(tl.int64) * pw + kk * 0, mask=ok & (kk == 9),
                      other=0.0).to(tl.float64)
        tile = tl.where(kk == 9, par, tile)
    return tile


@triton.jit
def _iwssim_gram_kernel(REF, PAR, OUT, H, W, sn, sh, sw, pn, ph, pw, HAS_PARENT: tl.constexpr, KP: tl.constexpr,
                        BLOCK: tl.constexpr):
    n = tl.program_id(1)
    pid = tl.program_id(0)
    progs = tl.num_programs(0)
    wi = W - 2
    count = (H - 2) * wi
    ref = REF + n.to(tl.int64) * sn
    par = PAR + n.to(tl.int64) * pn
    acc = tl.zeros([KP, KP], tl.float64)
    for start in range(pid * BLOCK, count, progs * BLOCK):
        p = start + tl.arange(0, BLOCK)[:, None]
        ok = p < count
        rows = 1 + p // wi
        cols = 1 + p % wi
        y = neighbourhood_tile(ref, par, rows, cols, sh, sw, ph, pw, ok, HAS_PARENT, KP)
        acc += tl.sum(y[:, :, None] * y[:, None, :], axis=0)
    i = tl.arange(0, KP)[:, None]
    j = tl.arange(0, KP)[None, :]
    tl.store(OUT + ((n.to(tl.int64) * progs + pid) * KP + i) * KP + j, acc)


@functools.lru_cache(maxsize=128)
def _launcher(shape, strides, parent_strides, has_parent) -> tuple[Launcher, tuple, int]:
    n, _, h, w = shape
    # interpreter: few programs with large blocks (each program step costs Python time, not lanes)
    block, max_progs = (256, 4) if triton_interpreting() else (16, 256)
    progs = max(1, min(max_progs, triton.cdiv((h - 2) * (w - 2), block)))
    launch = Launcher(_iwssim_gram_kernel, (progs, n), num_warps=4)
    sn, _, sh, sw = strides
    pn, _, ph, pw = parent_strides
    return launch, (h, w, sn, sh, sw, pn, ph, pw, has_parent, KP, block), progs


def iwssim_gram_fwd(ref_band: torch.Tensor, parent: torch.Tensor, has_parent: bool) -> torch.Tensor:
    """``C_u`` (N, K, K) float64 of the reference band (N, 1, H, W), H, W >= 3; ``parent`` (N, 1, H, W) is read
    only with ``has_parent`` (then K = 10, else 9)."""
    parent_strides = parent.stride() if has_parent else (0, 0, 0, 0)
    launch, tail, progs = _launcher(tuple(ref_band.shape), ref_band.stride(), parent_strides, bool(has_parent))
    n, _, h, w = ref_band.shape
    partial = torch.empty((n, progs, KP, KP), dtype=torch.float64, device=ref_band.device)
    launch(ref_band, parent, partial, *tail)
    k = 10 if has_parent else 9
    return partial.sum(1)[:, :k, :k] / ((h - 2) * (w - 2))
