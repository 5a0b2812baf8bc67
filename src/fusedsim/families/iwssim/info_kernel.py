"""IW-SSIM's information-content weight map on the GPU, one pass per band pair.

    iwssim_info(ref_band, dist_band, parent (N, 1, H, W), eig (N, K + 1, K), has_parent) -> (N, H - 10, W - 10)

For every pixel of the 'valid' 11x11 region (5 px from each edge, so the 3x3 box never leaves the band), as
:func:`fusedsim.families.iwssim.twin.info_weight_map_ref`: the 3x3 box mean, variances and covariance of the
reference x and distorted y bands (variances clamped at 0), the gain ``g = cov/(var_x + tol)`` and
``vv = var_y - g·cov`` with MATLAB's tol rules, the quadratic form ``ss = yᵀ C⁻¹ y / K`` of the reference's
neighbourhood (+ parent) with the corrected inverse from :mod:`fusedsim.families.iwssim.eig_kernel`, and
``Σ_j log2(1 + ((vv + (1 + g²)σ_n²)·ss·λ_j + σ_n²·vv)/σ_n⁴)``, zeroed below tol. float64 throughout; the twin
sums the box in another order (differences ~1e-15 relative). Non-f32 constants are passed from Python
(a float literal computed inside a Triton kernel is rounded to float32). Forward only.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedsim.core.backend import triton_interpreting
from fusedsim.core.launch import Launcher
from fusedsim.core.state import cached
from fusedsim.families.iwssim.gram_kernel import KP, neighbourhood_tile
import fusedsim.families.iwssim.twin as spec
from fusedsim.families.iwssim.ops import iwssim_info

__all__ = ["iwssim_info_fwd"]


@triton.jit
def _iwssim_info_kernel(REF, DIST, PAR, EIG, OUT, H, W, sn, sh, sw, dn, dh, dw, pn, ph, pw, K,
                        HAS_PARENT: tl.constexpr, SIGMA_NSQ: tl.constexpr, SIGMA_NSQ2: tl.constexpr, TOL: tl.constexpr,
                        NINTH: tl.constexpr, KP: tl.constexpr,
                        BLOCK: tl.constexpr):
    n = tl.program_id(1)
    wo = W - 10
    count = (H - 10) * wo
    p = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)[:, None]
    ok = p < count
    rows = 5 + p // wo
    cols = 5 + p % wo
    kk = tl.arange(0, KP)[None, :]
    y = neighbourhood_tile(REF + n.to(tl.int64) * sn, PAR + n.to(tl.int64) * pn, rows, cols, sh, sw, ph, pw, ok,
                           HAS_PARENT, KP)
    x3 = tl.where(kk < 9, y, 0.0)
    d3 = tl.load(DIST + n.to(tl.int64) * dn + (rows + 1 - kk // 3).to(tl.int64) * dh
                 + (cols + 1 - kk % 3).to(tl.int64) * dw, mask=ok & (kk < 9), other=0.0).to(tl.float64)
    mean_x = tl.sum(x3 * NINTH, axis=1)
    mean_y = tl.sum(d3 * NINTH, axis=1)
    cov = tl.sum(x3 * d3 * NINTH, axis=1) - mean_x * mean_y
    ss_x = tl.maximum(tl.sum(x3 * x3 * NINTH, axis=1) - mean_x * mean_x, 0.0)
    ss_y = tl.maximum(tl.sum(d3 * d3 * NINTH, axis=1) - mean_y * mean_y, 0.0)
    g = cov / (ss_x + TOL)
    vv = ss_y - g * cov
    g = tl.where(ss_x < TOL, 0.0, g)
    vv = tl.where(ss_x < TOL, ss_y, vv)
    g = tl.where(ss_y < TOL, 0.0, g)
    vv = tl.where(ss_y < TOL, 0.0, vv)
    # ss = yᵀ C⁻¹ y / K, C⁻¹ row by row
    eig = EIG + n.to(tl.int64) * (K + 1) * K
    k_ok = kk < K
    z = tl.zeros_like(y)
    for k in range(K):
        yk = tl.sum(tl.where(kk == k, y, 0.0), axis=1)[:, None]
        row = tl.load(eig + k * K + kk, mask=k_ok, other=0.0)
        z += yk * row
    ss = tl.sum(z * y, axis=1) / K
    lam = tl.load(eig + K * K + kk, mask=k_ok, other=0.0)
    a = ((vv + (1.0 + g * g) * SIGMA_NSQ) * ss)[:, None]
    b = (SIGMA_NSQ * vv)[:, None]
    terms = tl.log2(1.0 + (a * lam + b) / SIGMA_NSQ2)
    iw = tl.sum(tl.where(k_ok, terms, 0.0), axis=1)
    iw = tl.where(iw < TOL, 0.0, iw)
    tl.store(OUT + n.to(tl.int64) * count + tl.arange(0, BLOCK) + tl.program_id(0) * BLOCK, iw,
             mask=tl.arange(0, BLOCK) + tl.program_id(0) * BLOCK < count)


@cached(maxsize=128)
def _launcher(shape, sr, sd, sp, has_parent) -> tuple[Launcher, tuple]:
    n, _, h, w = shape
    block = 1024 if triton_interpreting() else 64  # interpreter: few large programs
    launch = Launcher(_iwssim_info_kernel, (triton.cdiv((h - 10) * (w - 10), block), n), num_warps=4)
    return launch, (h, w, sr[0], sr[2], sr[3], sd[0], sd[2], sd[3], sp[0], sp[2], sp[3], 10 if has_parent else 9,
                    has_parent, spec.SIGMA_NSQ, spec.SIGMA_NSQ * spec.SIGMA_NSQ, spec.TOL, 1.0 / 9.0, KP, block)


@iwssim_info.triton_launcher
def iwssim_info_fwd(ref_band: torch.Tensor, dist_band: torch.Tensor, parent: torch.Tensor, eig: torch.Tensor,
                    has_parent: bool) -> torch.Tensor:
    """Weights (N, H - 10, W - 10) float64 of float64 bands (N, 1, H, W), H, W >= 11; ``parent`` is read only
    with ``has_parent``; ``eig`` from :func:`fusedsim.families.iwssim.eig_kernel.iwssim_eig_fwd` (contiguous)."""
    sp = parent.stride() if has_parent else (0, 0, 0, 0)
    launch, tail = _launcher(tuple(ref_band.shape), ref_band.stride(), dist_band.stride(), sp, bool(has_parent))
    n, _, h, w = ref_band.shape
    out = torch.empty((n, h - 10, w - 10), dtype=torch.float64, device=ref_band.device)
    launch(ref_band, dist_band, parent, eig.contiguous(), out, *tail)
    return out
