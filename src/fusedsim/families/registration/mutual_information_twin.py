"""PyTorch twin of the mutual-information kernels: global MI with Gaussian Parzen windows.

Each voxel value x (of pred or target) is first mapped to x̂ = (x - lo_c)·scale_c with per-channel (lo, scale)
(``norm``, shape (C, 2)), optionally clamped to [0, 1], then spread over the bins:

    w_i(x̂) = exp(-preterm·(x̂ - c_i)²),   p_i(x̂) = w_i / Σ_j w_j          (c: bin centres, preterm = 1/(2σ²))
    pab[i, j] = mean_k p_i(Î_k) p_j(Ĵ_k),   pa = mean_k p(Î_k),   pb = mean_k p(Ĵ_k)

over the voxels of one (n, c) plane, or of all channels of image n when ``pooled`` (MONAI). Rows of pab are
pred bins. Then MI = Σ_ij pab·log((pab + nr)/(pa_i pb_j + dr) + dr), and the loss is -MI reduced.

Conventions (:func:`mi_setup`):

- ``monai`` (MONAI 1.6.1 ``GlobalMutualInformationLoss``, Gaussian kernel): centres ``linspace(0, 1, nb)`` and
  σ = sigma_ratio/(nb - 1), both float32 as MONAI builds them; inputs clamped to [0, 1]; channels pooled into
  one histogram per image; nr = dr = 1e-7; default 23 bins, sigma_ratio 0.5.
- ``fireants`` (FireANTs' fused ``FusedGlobalMutualInformationLoss`` with the exact Parzen histogram): centres
  (i + ½)/nb, σ = sigma_ratio/(2 nb); when any value of either image lies outside [0, 1], both are mapped by the
  joint min–max (treated as constants, like the reference); no clamp; per-channel histograms; nr = dr = 1e-5.
  Its gradient is the true one (the reference omits the 1/(max - min) factor).
- ``fireants_torch`` (FireANTs' ``losses.mi.GlobalMutualInformationLoss``): FireANTs' centres and σ in float32;
  per channel, both images divided by M = max(pred.max(), target.max()) when M > 1 (differentiated, as in the
  reference), then clamped to [0, 1]; per-channel histograms; nr = dr = 1e-7.
"""

from __future__ import annotations

import torch

from fusedsim.core.moments.twin import compute_dtype

CONVENTIONS = ("monai", "fireants", "fireants_torch")
REDUCTIONS = ("mean", "sum", "none")
DEFAULT_SIGMA_RATIO = {"monai": 0.5, "fireants": 1.0, "fireants_torch": 1.0}
DEFAULT_SMOOTH = {"monai": 1e-7, "fireants": 1e-5, "fireants_torch": 1e-7}


def mi_bins(num_bins: int, sigma_ratio: float, convention: str) -> tuple[torch.Tensor, float]:
    """Bin centres (float64 tensor of the reference's values, shape (nb,)) and preterm = 1/(2σ²)."""
    f32 = torch.float32
    if convention == "monai":
        centres = torch.linspace(0.0, 1.0, num_bins, dtype=f32)
        sigma = torch.mean(centres[1:] - centres[:-1]) * sigma_ratio
        return centres.double(), float(1 / (2 * sigma**2))
    if convention == "fireants_torch":
        centres = torch.arange(num_bins, dtype=f32) / num_bins + 0.5 / num_bins
        sigma = torch.mean(centres[1:] - centres[:-1]) * sigma_ratio / 2
        return centres.double(), float(1 / (2 * sigma**2))
    centres = (torch.arange(num_bins, dtype=torch.float64) + 0.5) / num_bins
    sigma = sigma_ratio / (2.0 * num_bins)
    return centres, 1.0 / (2.0 * sigma * sigma)


def mi_norm(pred: torch.Tensor, target: torch.Tensor, convention: str) -> torch.Tensor:
    """Per-channel (lo, scale) of the intensity mapping, shape (C, 2), in the accumulation dtype, computed on the
    device without synchronising. ``fireants_torch`` keeps it differentiable (the reference does)."""
    dt = compute_dtype(pred.dtype)
    channels = pred.shape[1]
    if convention == "monai":
        return torch.tensor([[0.0, 1.0]], dtype=dt, device=pred.device).expand(channels, 2)
    if convention == "fireants":
        p, t = pred.detach(), target.detach()  # min and max are exact in the input dtype: no full-size cast
        mn = torch.minimum(p.amin(), t.amin()).to(dt)
        mx = torch.maximum(p.amax(), t.amax()).to(dt)
        outside = (mx > 1) | (mn < 0)
        lo = torch.where(outside, mn, torch.zeros_like(mn))
        scale = torch.where(outside, 1.0 / (mx - mn), torch.ones_like(mx))
        return torch.stack([lo, scale]).expand(channels, 2)
    # per channel, joint over the batch; Python's max(a, b) keeps a on ties, and so does this
    dims = [0] + list(range(2, pred.dim()))
    pm, tm = pred.amax(dim=dims).to(dt), target.amax(dim=dims).to(dt)
    m = torch.where(pm >= tm, pm, tm)
    scale = torch.where(m > 1, 1.0 / m, torch.ones_like(m))
    return torch.stack([torch.zeros_like(scale), scale], dim=1)


def parzen_weights(x: torch.Tensor, centres: torch.Tensor, preterm: float) -> torch.Tensor:
    """p_i(x) for every value of x: shape (*x.shape, nb)."""
    w = torch.exp(-preterm * (x.unsqueeze(-1) - centres) ** 2)
    return w / w.sum(dim=-1, keepdim=True)


def parzen_histogram_ref(pred: torch.Tensor, target: torch.Tensor, norm: torch.Tensor, centres: torch.Tensor,
                         preterm: float, clamp: bool, pooled: bool) -> torch.Tensor:
    """Twin of the ``parzen_histogram`` op: pab, pa, pb stacked as (N, C', nb + 2, nb) (rows 0..nb-1: pab,
    row nb: pa, row nb+1: pb), C' = 1 when ``pooled`` else C, in the accumulation dtype.

    pred, target: (N, C, *S); norm: (C, 2) per-channel (lo, scale); centres: (nb,)."""
    dt = compute_dtype(pred.dtype)
    n, c = pred.shape[:2]
    shape = (n, 1, -1) if pooled else (n, c, -1)
    view = (1, c) + (1,) * (pred.dim() - 2)
    lo, scale = norm[:, 0].to(dt).reshape(view), norm[:, 1].to(dt).reshape(view)
    mapped = []
    for x in (pred, target):
        xh = (x.to(dt) - lo) * scale
        if clamp:
            xh = xh.clamp(0.0, 1.0)
        mapped.append(parzen_weights(xh.reshape(shape), centres.to(dt), preterm))
    wa, wb = mapped  # (N, C', V, nb)
    count = wa.shape[-2]
    pab = torch.matmul(wa.transpose(-1, -2), wb) / count
    return torch.cat([pab, wa.mean(dim=-2).unsqueeze(-2), wb.mean(dim=-2).unsqueeze(-2)], dim=-2)


def mutual_information_from_histogram(hist: torch.Tensor, smooth_nr: float, smooth_dr: float) -> torch.Tensor:
    """MI of packed histograms (..., nb + 2, nb) -> (...)."""
    nb = hist.shape[-1]
    pab, pa, pb = hist[..., :nb, :], hist[..., nb, :], hist[..., nb + 1, :]
    papb = pa.unsqueeze(-1) * pb.unsqueeze(-2)
    return torch.sum(pab * torch.log((pab + smooth_nr) / (papb + smooth_dr) + smooth_dr), dim=(-1, -2))


def reduce_mi(mi: torch.Tensor, reduction: str, pooled: bool) -> torch.Tensor:
    """The loss -MI: mean or sum over every histogram, or (N,) (pooled) / (N, C) for ``none``."""
    if reduction == "mean":
        return -mi.mean()
    if reduction == "sum":
        return -mi.sum()
    return -(mi[:, 0] if pooled else mi)


def mi_setup(convention: str, num_bins: int, sigma_ratio: float | None,
             smooth_nr: float | None, smooth_dr: float | None) -> tuple[torch.Tensor, float, bool, bool, float, float]:
    """(centres, preterm, clamp, pooled, nr, dr) of a convention with its defaults filled in."""
    ratio = DEFAULT_SIGMA_RATIO[convention] if sigma_ratio is None else sigma_ratio
    centres, preterm = mi_bins(num_bins, ratio, convention)
    smooth = DEFAULT_SMOOTH[convention]
    nr = smooth if smooth_nr is None else smooth_nr
    dr = smooth if smooth_dr is None else smooth_dr
    return centres, preterm, convention != "fireants", convention == "monai", nr, dr


def mutual_information_loss_ref(pred: torch.Tensor, target: torch.Tensor, num_bins: int = 32,
                                sigma_ratio: float | None = None, reduction: str = "mean",
                                convention: str = "monai", smooth_nr: float | None = None,
                                smooth_dr: float | None = None) -> torch.Tensor:
    """The whole loss in PyTorch (no argument checks): pred, target (N, C, *S)."""
    centres, preterm, clamp, pooled, nr, dr = mi_setup(convention, num_bins, sigma_ratio, smooth_nr, smooth_dr)
    norm = mi_norm(pred, target, convention)
    hist = parzen_histogram_ref(pred, target, norm, centres.to(pred.device), preterm, clamp, pooled)
    return reduce_mi(mutual_information_from_histogram(hist, nr, dr), reduction, pooled)


__all__ = [
    "CONVENTIONS",
    "DEFAULT_SIGMA_RATIO",
    "DEFAULT_SMOOTH",
    "REDUCTIONS",
    "mi_bins",
    "mi_norm",
    "mi_setup",
    "mutual_information_from_histogram",
    "mutual_information_loss_ref",
    "parzen_histogram_ref",
    "parzen_weights",
    "reduce_mi",
]
