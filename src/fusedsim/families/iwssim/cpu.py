"""IW-SSIM's CPU steps compiled with numba: the grey conversion, the neighbourhood Gram matrix and the
information-content weights (the rest of the metric is the twin's PyTorch, and the windowed moments are
:mod:`fusedsim.core.moments.cpu`).

**Grey** (:func:`~fusedsim.families.iwssim.twin.grey8_ref`): the twin's float64 operations in its order, no FMA:
the same bits.

**Gram** (:func:`~fusedsim.families.iwssim.twin.neighbourhood_gram_ref`, ``YᵀY / n`` over every interior pixel's
3x3 neighbourhood + parent): the twin stacks the (N, P, K) neighbourhoods and multiplies them; here each row's
products are summed where they are read, the rows' sums are added in row order (the same result for any thread
count) and divided by n. BLAS sums in another order: differences ~1e-16 relative, inside the op's 1e-10.

**Information weights** (:func:`~fusedsim.families.iwssim.twin.info_weight_map_ref`): the twin builds them from
five 3x3 box convolutions, the (N, P, K) neighbourhood stack, a matrix product and an (N, P, K) log2 expansion —
about 2/3 of IW-SSIM's CPU time at 1080p, most of it temporaries. Here each output pixel is computed where it is
read, as the GPU kernel (:mod:`fusedsim.families.iwssim.info_kernel`) does: the box moments of x (the reference band) and y
(the distorted band) over the 3x3 neighbourhood, the gain and residual variance with MATLAB's tol rules,
``ss = yᵀ C⁻¹ y / K`` over the neighbourhood (+ parent) in the twin's order, and ``Σ_j log2(1 + (a·λ_j + b) /
σ_n⁴)``. float64; the box sums run in another order than the twin's convolution (differences ~1e-15 relative,
inside the op's 1e-10). The level op (:func:`~fusedsim.families.iwssim.twin.level_sums_ref`: the cs map, these
weights and their two sums) takes the twin's cs and sums around them.
"""

from __future__ import annotations

import numpy as np
import torch
from numba import prange

from fusedsim.core.cpu.parallel import parallel_kernel
import fusedsim.families.iwssim.twin as spec
from fusedsim.families.iwssim.ops import iwssim_gram, iwssim_grey8, iwssim_info, iwssim_level

__all__ = ["iwssim_gram_numba", "iwssim_grey8_numba", "iwssim_info_numba", "iwssim_level_numba"]


def _float64_cpu(*tensors: torch.Tensor) -> bool:
    return all(t.device.type == "cpu" and t.dtype == torch.float64 and not t.requires_grad for t in tensors)


@parallel_kernel
def _grey(raw, luma, rounded, out):  # pragma: no cover - compiled
    n, _, h, w = raw.shape
    kr, kg, kb = luma[0], luma[1], luma[2]
    for task in prange(n * h):
        i, y = task // h, task % h
        for x in range(w):
            r = np.float64(raw[i, 0, y, x]) / 255.0 * 255.0
            g = np.float64(raw[i, 1, y, x]) / 255.0 * 255.0
            b = np.float64(raw[i, 2, y, x]) / 255.0 * 255.0
            grey = kr * r + kg * g + kb * b
            out[i, 0, y, x] = np.floor(grey + 0.5) if rounded else grey


@iwssim_grey8.cpu_kernel
def iwssim_grey8_numba(raw: torch.Tensor, luma: torch.Tensor, rounded: bool) -> torch.Tensor:
    """:func:`~fusedsim.families.iwssim.twin.grey8_ref` (N, 1, H, W) float64 for uint8 CPU images (N, 3, H, W),
    compiled; anything else through the twin."""
    if raw.device.type != "cpu" or raw.dtype != torch.uint8 or raw.dim() != 4 or raw.shape[1] != 3 or luma.numel() != 3:
        return spec.grey8_ref(raw, luma, rounded)
    n, _, h, w = raw.shape
    out = np.empty((n, 1, h, w), dtype=np.float64)
    _grey(raw.contiguous().numpy(), luma.detach().cpu().to(torch.float64).numpy(), bool(rounded), out)
    return torch.from_numpy(out)


@parallel_kernel
def _gram_rows(ref, par, has_parent, rows_out):  # pragma: no cover - compiled
    n, _, h, w = ref.shape
    k_len = 10 if has_parent else 9
    for task in prange(n * (h - 2)):
        i, r = task // (h - 2), task % (h - 2)
        yy = 1 + r
        vec = np.empty(10, dtype=np.float64)
        acc = rows_out[i, r]
        for a in range(k_len):
            for b in range(k_len):
                acc[a, b] = 0.0
        for c in range(w - 2):
            xx = 1 + c
            for k in range(9):
                vec[k] = ref[i, 0, yy + 1 - k // 3, xx + 1 - k % 3]
            if has_parent:
                vec[9] = par[i, 0, yy, xx]
            for a in range(k_len):
                va = vec[a]
                for b in range(a, k_len):
                    acc[a, b] += va * vec[b]


@iwssim_gram.cpu_kernel
def iwssim_gram_numba(ref_band: torch.Tensor, parent: torch.Tensor, has_parent: bool) -> torch.Tensor:
    """:func:`~fusedsim.families.iwssim.twin.neighbourhood_gram_op_ref` (N, K, K) for float64 CPU bands
    (N, 1, H, W), H, W >= 3, compiled; anything else through the twin."""
    tensors = (ref_band, parent) if has_parent else (ref_band,)
    h, w = ref_band.shape[-2:]
    if (not _float64_cpu(*tensors) or ref_band.dim() != 4 or ref_band.shape[1] != 1 or h < 3 or w < 3
            or (has_parent and parent.shape != ref_band.shape)):
        return spec.neighbourhood_gram_op_ref(ref_band, parent, has_parent)
    n = ref_band.shape[0]
    k = 10 if has_parent else 9
    rows = np.empty((n, h - 2, 10, 10), dtype=np.float64)
    _gram_rows(ref_band.contiguous().numpy(), (parent if has_parent else ref_band).contiguous().numpy(),
               bool(has_parent), rows)
    upper = torch.from_numpy(rows[:, :, :k, :k].sum(axis=1))  # rows added in order
    gram = torch.triu(upper) + torch.triu(upper, 1).transpose(1, 2)
    return gram / ((h - 2) * (w - 2))


@parallel_kernel
def _info(ref, dist, par, eig, out, has_parent, sigma_nsq, sigma_nsq2, tol, ninth):  # pragma: no cover - compiled
    n, _, h, w = ref.shape
    ho, wo = h - 10, w - 10
    k_len = 10 if has_parent else 9
    for task in prange(n * ho):
        i, r = task // ho, task % ho
        yy = 5 + r
        vec = np.empty(10, dtype=np.float64)
        for c in range(wo):
            xx = 5 + c
            # the neighbourhood in NEIGHBOURS' order: (dy, dx) = (1 - k // 3, 1 - k % 3)
            sx = sy = sxy = sxx = syy = 0.0
            for k in range(9):
                a = ref[i, 0, yy + 1 - k // 3, xx + 1 - k % 3]
                b = dist[i, 0, yy + 1 - k // 3, xx + 1 - k % 3]
                vec[k] = a
                sx += a * ninth
                sy += b * ninth
                sxy += a * b * ninth
                sxx += a * a * ninth
                syy += b * b * ninth
            if has_parent:
                vec[9] = par[i, 0, yy, xx]
            cov = sxy - sx * sy
            ss_x = max(sxx - sx * sx, 0.0)
            ss_y = max(syy - sy * sy, 0.0)
            g = cov / (ss_x + tol)
            vv = ss_y - g * cov
            if ss_x < tol:
                g = 0.0
                vv = ss_y
            if ss_y < tol:
                g = 0.0
                vv = 0.0
            ss = 0.0
            for k in range(k_len):
                z = 0.0
                for m in range(k_len):
                    z += vec[m] * eig[i, m, k]
                ss += z * vec[k]
            ss = ss / k_len
            a = (vv + (1.0 + g * g) * sigma_nsq) * ss
            b = sigma_nsq * vv
            iw = 0.0
            for j in range(k_len):
                iw += np.log2(1.0 + (a * eig[i, k_len, j] + b) / sigma_nsq2)
            out[i, r, c] = 0.0 if iw < tol else iw


@iwssim_info.cpu_kernel
def iwssim_info_numba(ref_band: torch.Tensor, dist_band: torch.Tensor, parent: torch.Tensor, eig: torch.Tensor,
                      has_parent: bool) -> torch.Tensor:
    """:func:`~fusedsim.families.iwssim.twin.info_weight_map_op_ref` (N, H - 10, W - 10) for float64 CPU bands
    (N, 1, H, W), H, W >= 11, compiled; anything else through the twin."""
    tensors = (ref_band, dist_band, eig) + ((parent,) if has_parent else ())
    h, w = ref_band.shape[-2:]
    if (not _float64_cpu(*tensors) or ref_band.dim() != 4 or ref_band.shape[1] != 1 or dist_band.shape != ref_band.shape or h < 11 or w < 11
            or (has_parent and parent.shape != ref_band.shape)):
        return spec.info_weight_map_op_ref(ref_band, dist_band, parent, eig, has_parent)
    n = ref_band.shape[0]
    k = 10 if has_parent else 9
    if eig.shape != (n, k + 1, k):
        raise ValueError(f"eig must have shape {(n, k + 1, k)} for {n} band(s) with has_parent={has_parent}; got "
                         f"{tuple(eig.shape)}")
    arrays = [t.contiguous().numpy() for t in (ref_band, dist_band, parent if has_parent else ref_band, eig)]
    out = np.empty((n, h - 10, w - 10), dtype=np.float64)
    _info(*arrays, out, bool(has_parent), spec.SIGMA_NSQ, spec.SIGMA_NSQ * spec.SIGMA_NSQ, spec.TOL, 1.0 / 9.0)
    return torch.from_numpy(out)


@iwssim_level.cpu_kernel
def iwssim_level_numba(ref_band: torch.Tensor, dist_band: torch.Tensor, parent: torch.Tensor, eig: torch.Tensor,
                       moments: torch.Tensor, has_parent: bool) -> torch.Tensor:
    """:func:`~fusedsim.families.iwssim.twin.level_sums_ref` [Σ cs·iw, Σ iw] (N, 2) with the weights compiled
    (:func:`iwssim_info_numba`) and the twin's cs map and sums."""
    cs = spec.cs_from_moments_ref(moments[:, :, 0], False)
    iw = iwssim_info_numba(ref_band, dist_band, parent, eig, has_parent)
    return torch.stack([(cs * iw).flatten(1).sum(1), iw.flatten(1).sum(1)], dim=1)
