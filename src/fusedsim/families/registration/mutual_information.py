"""Public mutual-information loss: ``mutual_information_loss`` and ``MutualInformationLoss``.

Global mutual information with Gaussian Parzen windows in the exact conventions of MONAI 1.6.1 and FireANTs 1.5
(see :mod:`fusedsim.families.registration.mutual_information_twin`). The joint histogram is the fused op
``parzen_histogram`` (Triton on the GPU: O(bins²) memory per program, never O(voxels × bins)); the MI of the
(nb × nb) histograms and the reduction are a few small PyTorch operations, so autograd hands the op the
histogram-derivative table and the op returns the exact per-voxel gradients.
"""

from __future__ import annotations

import math

import torch

from fusedsim.core.state import cached
from fusedsim.core.validation import check_choice, check_image_pair
from fusedsim.families.registration.mutual_information_twin import (
    CONVENTIONS,
    REDUCTIONS,
    mi_norm,
    mi_setup,
    mutual_information_from_histogram,
    reduce_mi,
)
from fusedsim.core.moments.twin import compute_dtype

MAX_BINS = 256  # the (bins × bins) histogram tile lives in registers


def _check_options(num_bins, sigma_ratio, smooth_nr, smooth_dr, reduction, convention) -> None:
    if isinstance(num_bins, bool) or not isinstance(num_bins, int):
        raise TypeError(f"num_bins must be an int; got {type(num_bins).__name__}")
    if not 2 <= num_bins <= MAX_BINS:
        raise ValueError(f"num_bins must be an integer from 2 to {MAX_BINS}; got {num_bins}")
    check_choice(reduction, "reduction", REDUCTIONS)
    check_choice(convention, "convention", CONVENTIONS)
    for name, value in {"sigma_ratio": sigma_ratio, "smooth_nr": smooth_nr, "smooth_dr": smooth_dr}.items():
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{name} must be a number; got {type(value).__name__}")
        positive = name == "sigma_ratio"
        if not math.isfinite(value) or value < 0 or (positive and value == 0):
            raise ValueError(f"{name} must be a finite number {'> 0' if positive else '>= 0'}; got {value}")


@cached(maxsize=64)
def _setup(convention: str, num_bins: int, sigma_ratio: float | None, smooth_nr: float | None,
           smooth_dr: float | None, dtype: torch.dtype, device: torch.device):
    """Bin centres on the device (built once per configuration) and the convention's constants."""
    centres, preterm, clamp, pooled, nr, dr = mi_setup(convention, num_bins, sigma_ratio, smooth_nr, smooth_dr)
    return centres.to(dtype=dtype, device=device), preterm, clamp, pooled, nr, dr


@cached(maxsize=64)
def _identity_norm(channels: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    return torch.tensor([[0.0, 1.0]], dtype=dtype).expand(channels, 2).contiguous().to(device)


def mutual_information_loss(pred: torch.Tensor, target: torch.Tensor, num_bins: int = 32,
                            sigma_ratio: float | None = None, reduction: str = "mean", convention: str = "monai",
                            smooth_nr: float | None = None, smooth_dr: float | None = None) -> torch.Tensor:
    """Global mutual-information loss, -MI reduced.

    pred, target: (N, C, *S) floating tensors of one shape, dtype and device (2-D or 3-D images, any channel
    count). ``num_bins`` from 2 to 256. ``convention``:

    - ``"monai"``: MONAI's ``GlobalMutualInformationLoss`` (Gaussian): centres linspace(0, 1, nb),
      σ = sigma_ratio/(nb - 1) (default ratio 0.5), inputs clamped to [0, 1], all channels of an image pooled
      into one histogram, smoothing 1e-7;
    - ``"fireants"``: FireANTs' fused ``FusedGlobalMutualInformationLoss`` with the exact Parzen histogram:
      centres (i + ½)/nb, σ = sigma_ratio/(2 nb) (default ratio 1), joint min–max rescaling only when a value
      lies outside [0, 1], no clamp, one histogram per channel, smoothing 1e-5; the gradient is the true one;
    - ``"fireants_torch"``: FireANTs' ``GlobalMutualInformationLoss``: FireANTs' centres, per channel division
      by max(pred.max(), target.max()) when it exceeds 1, clamp to [0, 1], one histogram per channel,
      smoothing 1e-7.

    ``reduction``: ``"mean"`` or ``"sum"`` over the histograms (0-d), or ``"none"``: (N,) for ``monai``, (N, C)
    otherwise. Returns float32 (float64 for float64 inputs). Differentiable in both inputs. No host
    synchronisation: the rescaling decisions are taken on the device.
    """
    check_image_pair(pred, target, ("pred", "target"), ndims=(3, 4, 5))
    _check_options(num_bins, sigma_ratio, smooth_nr, smooth_dr, reduction, convention)
    from fusedsim.families.registration.ops import parzen_histogram

    dt = compute_dtype(pred.dtype)
    centres, preterm, clamp, pooled, nr, dr = _setup(convention, num_bins, sigma_ratio, smooth_nr, smooth_dr, dt,
                                                     pred.device)
    if convention == "monai":
        norm = _identity_norm(pred.shape[1], dt, pred.device)
    else:
        norm = mi_norm(pred, target, convention)
    hist = parzen_histogram(pred, target, norm, centres, preterm, clamp, pooled)
    return reduce_mi(mutual_information_from_histogram(hist, nr, dr), reduction, pooled)


class MutualInformationLoss(torch.nn.Module):
    """Module form of :func:`mutual_information_loss`; options are checked when the module is built."""

    def __init__(self, num_bins: int = 32, sigma_ratio: float | None = None, reduction: str = "mean",
                 convention: str = "monai", smooth_nr: float | None = None, smooth_dr: float | None = None) -> None:
        super().__init__()
        _check_options(num_bins, sigma_ratio, smooth_nr, smooth_dr, reduction, convention)
        self.num_bins, self.sigma_ratio, self.reduction, self.convention = num_bins, sigma_ratio, reduction, convention
        self.smooth_nr, self.smooth_dr = smooth_nr, smooth_dr

    def forward(self, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return mutual_information_loss(pred, target, self.num_bins, self.sigma_ratio, self.reduction,
                                       self.convention, self.smooth_nr, self.smooth_dr)

    def extra_repr(self) -> str:
        return f"num_bins={self.num_bins}, convention={self.convention!r}, reduction={self.reduction!r}"


__all__ = ["MutualInformationLoss", "mutual_information_loss"]
