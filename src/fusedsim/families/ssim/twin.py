"""PyTorch twin of the SSIM kernels: the specification, the CPU/MPS path and the test oracle.

Everything here works on 2-D (N, C, H, W) and 3-D (N, C, D, H, W) tensors with one separable 1-D window per
channel, ``win`` of shape (C, K). Statistics are computed in float32 for 16-bit inputs and in the input dtype for
float32/float64, like the kernels (which always accumulate in float32).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from fusedsim.core.autocast import autocast_off
from fusedsim.core.moments.twin import compute_dtype, separable_filter

def ssim_maps_ref(x: torch.Tensor, y: torch.Tensor, win: torch.Tensor, c1: float, c2: float,
                  padding: str = "valid") -> tuple[torch.Tensor, torch.Tensor]:
    """Per-pixel SSIM and contrast-structure (cs) maps.

    x, y: (N, C, *S) floating tensors; win: (C, K). Returns two maps of shape (N, C, *S') in the compute dtype,
    S' = S - K + 1 for ``valid`` and S for ``same``.
    """
    dt = compute_dtype(x.dtype)
    x = x.to(dt)
    y = y.to(dt)
    stacked = torch.cat([x, y, x * x, y * y, x * y], dim=1)
    # autocast would run the convolutions in 16 bits; the statistics need the accumulation dtype
    with autocast_off(x.device):
        stats = separable_filter(stacked, win.to(dt).repeat(5, 1), padding)
    mu_x, mu_y, e_xx, e_yy, e_xy = stats.chunk(5, dim=1)
    sigma_xx = e_xx - mu_x * mu_x
    sigma_yy = e_yy - mu_y * mu_y
    sigma_xy = e_xy - mu_x * mu_y
    cs_map = (2 * sigma_xy + c2) / (sigma_xx + sigma_yy + c2)
    ssim_map = ((2 * mu_x * mu_y + c1) / (mu_x * mu_x + mu_y * mu_y + c1)) * cs_map
    return ssim_map, cs_map

def ssim_reduce_ref(x: torch.Tensor, y: torch.Tensor, win: torch.Tensor, c1: float, c2: float, valid: bool,
                    symmetric: bool, reduce: int, ssim_weight: float = -1.0) -> torch.Tensor:
    """Twin of the ``ssim_reduce`` op (same signature, same output shapes).

    ``reduce``: 1 mean (0-d), 2 per image (N,), 3 per plane (N, C), 0 per-plane SSIM and cs means stacked (2, N, C),
    -1 the SSIM map. With ``ssim_weight`` w >= 0 each plane's value is (1-w)·mean|x-y| + w·(1 - mean SSIM) (the
    fused L1+SSIM loss). ``symmetric`` only tells the kernels they may reuse the taps; the twin ignores it.
    """
    ssim_map, cs_map = ssim_maps_ref(x, y, win, c1, c2, "valid" if valid else "same")
    if reduce == -1:
        return ssim_map
    s_mean, cs_mean = ssim_map.flatten(2).mean(-1), cs_map.flatten(2).mean(-1)
    if reduce == 0:
        return torch.stack([s_mean, cs_mean])
    value = s_mean
    if ssim_weight >= 0:
        dt = compute_dtype(x.dtype)
        l1 = (x.to(dt) - y.to(dt)).abs().flatten(2).mean(-1)
        value = (1 - ssim_weight) * l1 + ssim_weight * (1 - s_mean)
    if reduce == 1:
        return value.mean()
    return value.mean(1) if reduce == 2 else value


def avg_pool_half_ref(x: torch.Tensor) -> torch.Tensor:
    """MS-SSIM downsampling: 2x average pooling with zero padding of (size % 2) counted in the mean."""
    pool = F.avg_pool2d if x.dim() == 4 else F.avg_pool3d
    return pool(x, kernel_size=2, padding=[s % 2 for s in x.shape[2:]])

def ms_ssim_ref(x: torch.Tensor, y: torch.Tensor, win: torch.Tensor, c1: float, c2: float,
                weights: torch.Tensor) -> torch.Tensor:
    """MS-SSIM per (n, c) plane, shape (N, C): relu(cs) at each level but the last, relu(ssim) at the last,
    combined as a weighted geometric product (:func:`ms_ssim_stats_ref` + :func:`ms_ssim_combine_ref`)."""
    return ms_ssim_combine_ref(ms_ssim_stats_ref(x, y, win, c1, c2, False, weights.shape[0]), weights, 3)

def ms_ssim_min_size(win_size: int, levels: int) -> int:
    """Smallest allowed spatial side: every pyramid level must hold at least one full window."""
    return (win_size - 1) * 2 ** (levels - 1) + 1




def ms_ssim_stats_ref(x: torch.Tensor, y: torch.Tensor, win: torch.Tensor, c1: float, c2: float, symmetric: bool,
                      levels: int) -> torch.Tensor:
    """Twin of the ``ms_ssim_stats`` op: per level, per plane, the SSIM and cs means (valid window) with
    pytorch-msssim's pooling between levels, shape (levels, 2, N, C)."""
    out = []
    for level in range(levels):
        out.append(ssim_reduce_ref(x, y, win, c1, c2, True, symmetric, 0))
        if level + 1 < levels:
            x, y = avg_pool_half_ref(x), avg_pool_half_ref(y)
    return torch.stack(out)


def ms_ssim_combine_ref(stats: torch.Tensor, weights: torch.Tensor, reduce: int) -> torch.Tensor:
    """pytorch-msssim's combination of per-level statistics (levels, 2, N, C): relu(cs) at every level but the
    last, relu(SSIM) at the last, raised to the weights and multiplied; reduced to the mean (1), per image (2) or
    per channel (3). The product is a chain of multiplications (torch.prod's backward synchronises)."""
    levels = stats.shape[0]
    last = (torch.arange(levels, device=stats.device) == levels - 1).view(-1, 1, 1)
    factors = torch.where(last, stats[:, 0], stats[:, 1])
    powered = torch.relu(factors) ** weights.to(stats.dtype).view(-1, 1, 1)
    per_channel = powered[0]
    for level in range(1, levels):
        per_channel = per_channel * powered[level]
    if reduce == 1:
        return per_channel.mean()
    return per_channel.mean(1) if reduce == 2 else per_channel


def ms_ssim_reduce_ref(x: torch.Tensor, y: torch.Tensor, win: torch.Tensor, weights: torch.Tensor, c1: float,
                       c2: float, symmetric: bool, reduce: int) -> torch.Tensor:
    """Twin of the ``ms_ssim`` op: pytorch-msssim's MS-SSIM with ``len(weights)`` levels, reduced as ``reduce``."""
    return ms_ssim_combine_ref(ms_ssim_stats_ref(x, y, win, c1, c2, symmetric, weights.shape[0]), weights, reduce)


def avg_pool_half_pair_ref(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Twin of the ``avg_pool_half`` op: both images pooled by :func:`avg_pool_half_ref`, stacked (2, N, C, H', W')."""
    return torch.stack([avg_pool_half_ref(x), avg_pool_half_ref(y)])

__all__ = [
    "avg_pool_half_pair_ref",
    "avg_pool_half_ref",
    "compute_dtype",
    "ms_ssim_min_size",
    "ms_ssim_combine_ref",
    "ms_ssim_reduce_ref",
    "ms_ssim_ref",
    "ms_ssim_stats_ref",
    "separable_filter",
    "ssim_maps_ref",
    "ssim_reduce_ref",
]
