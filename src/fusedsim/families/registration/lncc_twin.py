"""PyTorch twin of the LNCC kernels: local (squared) normalised cross-correlation under a separable window.

Every convention is one formula over the local moments of a *normalised* window w (taps summing to 1), zero
padding, at each voxel o:

    cov = E[pt] - q·mu_p mu_t,   v_p = E[p²] - q·mu_p²,   v_t = E[t²] - q·mu_t²
    A = s·cov,   B = max(s·v_p, floor),   C = max(s·v_t, floor)
    ncc = (A² + nr) / (B·C + dr_add)          clamped to [-1, 1] when ``clamp``

The constants (s, q, nr, floor, dr_add, clamp) name the convention (see :func:`lncc_constants`; q = 1 up to
the float32 rounding of the reference's window volume, which it reproduces):

- ``monai`` (MONAI 1.6.1 ``LocalNormalizedCrossCorrelationLoss``): unnormalised windows, i.e. s = W, the sum
  of the d-dim window (k^d for the box; its Gaussian has peak 1 and σ = k/3); nr = smooth_nr, floor = smooth_dr,
  dr_add = 0, no clamp;
- ``fireants`` (FireANTs' fused ``FusedLocalNormalizedCrossCorrelationLoss``): s = kv = k^d for both window types,
  nr = smooth_nr·kv, floor = dr_add = smooth_dr·kv, clamp; its Gaussian has σ = 1.5 by default;
- ``fireants_torch`` (FireANTs' ``losses.cc.LocalNormalizedCrossCorrelationLoss``): s = 1, nr = smooth_nr,
  floor = dr_add = smooth_dr, clamp; its Gaussian is the pre-fix MONAI kernel (off-centre for k >= 5).

The loss is -ncc reduced: ``REDUCE_MEAN`` (over every voxel of every plane), ``REDUCE_SUM`` or ``REDUCE_NONE``
(the -ncc map). Statistics run in float32 for 16-bit and float32 inputs, float64 for float64.
"""

from __future__ import annotations

import torch

from fusedsim.core.autocast import autocast_off
from fusedsim.core.moments.twin import compute_dtype, separable_filter

REDUCE_NONE, REDUCE_MEAN, REDUCE_SUM = -1, 1, 2
REDUCE_CODES = {"none": REDUCE_NONE, "mean": REDUCE_MEAN, "sum": REDUCE_SUM}
CONVENTIONS = ("monai", "fireants", "fireants_torch")
KERNEL_TYPES = ("box", "gaussian")
# default (smooth_nr, smooth_dr) of each convention
DEFAULT_SMOOTH = {"monai": (0.0, 1e-5), "fireants": (1e-5, 1e-5), "fireants_torch": (1e-5, 1e-5)}


def default_sigma(kernel_size: int, convention: str) -> float:
    """The Gaussian's sigma when none is given: k/3 (MONAI, FireANTs' torch loss), 1.5 (FireANTs' fused loss)."""
    return 1.5 if convention == "fireants" else kernel_size / 3.0


def lncc_taps(kernel_size: int, kernel_type: str, sigma: float, convention: str) -> torch.Tensor:
    """The convention's 1-D window taps as the reference builds them, returned in float64, shape (K,).

    ``monai``: ones, or exp((-0.5/σ²)·x²) on x = -k//2..k//2 (peak 1), both in float32 as MONAI 1.6.1 builds them
    (its ``make_gaussian_kernel``, operation for operation, so the taps are its taps to the bit).
    ``fireants``: float64 taps (the fused op's normalised box or Gaussian, normalised later anyway).
    ``fireants_torch``: the pre-fix MONAI Gaussian (MONAI issue #8780), float32: sampled on [-tail, tail] with
    tail = int(max(σ·(k//2), 0.5) + 0.5), divided and multiplied back by 2.5066282·σ, truncated to its first k
    taps; then (box too) divided by its float32 sum."""
    if convention == "fireants":
        if kernel_type == "box":
            return torch.ones(kernel_size, dtype=torch.float64)
        x = torch.arange(kernel_size, dtype=torch.float64) - kernel_size // 2
        return torch.exp(-(x * x) / (2.0 * sigma * sigma))
    f32 = torch.float32
    if kernel_type == "box":
        taps = torch.ones(kernel_size, dtype=f32)
    elif convention == "monai":
        # MONAI's own order of operations: the coefficient -0.5/σ² in double (a Python float), then one float32
        # product with x² and the exp; -(x²)/(2σ²) rounds differently (1-2 ulp off at k = 11, 15, 17)
        x = torch.arange(-(kernel_size // 2), kernel_size // 2 + 1, dtype=f32)
        taps = torch.exp(-0.5 / (float(sigma) * float(sigma)) * x**2)
    else:
        s = torch.tensor(sigma, dtype=f32)
        tail = int(max(float(s) * (kernel_size // 2), 0.5) + 0.5)
        x = torch.arange(-tail, tail + 1, dtype=f32)
        if x.numel() < kernel_size:
            raise ValueError(f"sigma={sigma} is too small for a {kernel_size}-tap Gaussian in the fireants_torch "
                             f"convention (its sampled kernel has only {x.numel()} taps)")
        norm = 2.5066282 * s
        taps = (torch.exp(-0.5 / (s * s) * x**2) / norm * norm)[:kernel_size]
    if convention == "fireants_torch":
        taps = taps / taps.sum()
    return taps.double()


def _volume_f32(taps: torch.Tensor, ndim: int) -> float:
    """Sum of the d-dim window built as outer products in float32, as MONAI and FireANTs' torch loss do."""
    t = taps.float()
    vol = t
    for _ in range(ndim - 1):
        vol = torch.matmul(vol.unsqueeze(-1), t.unsqueeze(0))
    return float(torch.sum(vol))


def lncc_constants(convention: str, taps: torch.Tensor, ndim: int, smooth_nr: float,
                   smooth_dr: float) -> tuple[float, float, float, float, float, bool]:
    """(s, q, nr, floor, dr_add, clamp) of the module docstring for ``ndim`` spatial dimensions.

    q = V/W corrects for the reference's window volume W (computed in float32) against the exact volume
    V = (Σ taps)^d of the float64 taps: the reference divides window sums by W."""
    k = taps.numel()
    if convention == "fireants":
        kv = float(k**ndim)
        return kv, 1.0, smooth_nr * kv, smooth_dr * kv, smooth_dr * kv, True
    vol = float(taps.sum()) ** ndim
    q = vol / _volume_f32(taps, ndim)
    if convention == "monai":
        return vol, q, smooth_nr, smooth_dr, 0.0, False
    return vol, q, smooth_nr, smooth_dr, smooth_dr, True


def lncc_window_table(taps: torch.Tensor, channels: int, dtype: torch.dtype,
                      device: torch.device | str | None = None) -> torch.Tensor:
    """The normalised window, one row per channel: (C, K)."""
    return (taps / taps.sum()).to(dtype=dtype, device=device).expand(channels, -1).contiguous()


def lncc_ncc_ref(pred: torch.Tensor, target: torch.Tensor, win: torch.Tensor, scale: float, q: float, nr: float,
                 floor: float, dr_add: float, clamp: bool) -> torch.Tensor:
    """The ncc map (N, C, *S) in the accumulation dtype; win: (C, K) normalised window."""
    dt = compute_dtype(pred.dtype)
    p, t = pred.to(dt), target.to(dt)
    stacked = torch.cat([p, t, p * p, t * t, p * t], dim=1)
    with autocast_off(p.device):
        mu_p, mu_t, e_pp, e_tt, e_pt = separable_filter(stacked, win.to(dt).repeat(5, 1), "same").chunk(5, dim=1)
    a = scale * (e_pt - q * mu_p * mu_t)
    b = torch.clamp_min(scale * (e_pp - q * mu_p * mu_p), floor)
    c = torch.clamp_min(scale * (e_tt - q * mu_t * mu_t), floor)
    ncc = (a * a + nr) / (b * c + dr_add)
    return ncc.clamp(-1.0, 1.0) if clamp else ncc


def lncc_ref(pred: torch.Tensor, target: torch.Tensor, win: torch.Tensor, scale: float, q: float, nr: float,
             floor: float, dr_add: float, clamp: bool, reduce: int) -> torch.Tensor:
    """Twin of the ``lncc`` op: the loss -ncc reduced by ``reduce`` (mean: 0-d, sum: 0-d, none: the map)."""
    ncc = lncc_ncc_ref(pred, target, win, scale, q, nr, floor, dr_add, clamp)
    if reduce == REDUCE_NONE:
        return -ncc
    return -(ncc.mean() if reduce == REDUCE_MEAN else ncc.sum())


def lncc_loss_ref(pred: torch.Tensor, target: torch.Tensor, kernel_size: int = 9, kernel_type: str = "box",
                  sigma: float | None = None, smooth_nr: float | None = None, smooth_dr: float | None = None,
                  reduction: str = "mean", convention: str = "monai") -> torch.Tensor:
    """The whole loss in PyTorch (no argument checks): pred, target (N, C, H, W) or (N, C, D, H, W)."""
    nr0, dr0 = DEFAULT_SMOOTH[convention]
    sigma = default_sigma(kernel_size, convention) if sigma is None else sigma
    taps = lncc_taps(kernel_size, kernel_type, sigma, convention)
    consts = lncc_constants(convention, taps, pred.dim() - 2, nr0 if smooth_nr is None else smooth_nr,
                            dr0 if smooth_dr is None else smooth_dr)
    win = lncc_window_table(taps, pred.shape[1], compute_dtype(pred.dtype), pred.device)
    return lncc_ref(pred, target, win, *consts, REDUCE_CODES[reduction])


__all__ = [
    "CONVENTIONS",
    "DEFAULT_SMOOTH",
    "KERNEL_TYPES",
    "REDUCE_CODES",
    "REDUCE_MEAN",
    "REDUCE_NONE",
    "REDUCE_SUM",
    "default_sigma",
    "lncc_constants",
    "lncc_loss_ref",
    "lncc_ncc_ref",
    "lncc_ref",
    "lncc_taps",
    "lncc_window_table",
]
