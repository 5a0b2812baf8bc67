"""The fused L1 + SSIM loss every 3DGS trainer computes: (1 - w)·mean|pred - target| + w·(1 - SSIM).

On the GPU the L1 term rides along the SSIM kernels' passes over the images (2-D and 3-D: no launch of its own);
the CPU runs the PyTorch twin.
"""

from __future__ import annotations

import torch

from fusedsim.core.validation import (
    check_choice,
    check_image_pair,
    check_min_size,
    check_positive,
    check_window_size,
    raise_if_not_finite,
)
from fusedsim.families.ssim.functional import (
    CALLS,
    WINDOW_SIGMA,
    WINDOW_SIZE,
    FUSED_C1,
    FUSED_C2,
    traced_reduce,
    reduce_call,
    window_table,
)

LOSS_REDUCTIONS = ("mean", "image")
SSIM_WEIGHT = 0.2  # the default as an object of its own (see functional.WINDOW_SIGMA)


def l1_ssim_loss(pred: torch.Tensor, target: torch.Tensor, ssim_weight: float = SSIM_WEIGHT, *,
                 window_size: int = WINDOW_SIZE, padding: str = "same", reduction: str = "mean",
                 window_sigma: float = WINDOW_SIGMA,
                 check_finite: bool = False) -> torch.Tensor:
    """(1 - ssim_weight)·mean|pred - target| + ssim_weight·(1 - SSIM(pred, target)), SSIM as :func:`fused_ssim`.

    pred, target: (N, C, H, W) or (N, C, D, H, W), both differentiable. ``reduction``: ``mean`` (a scalar) or
    ``image`` ((N,), each image's L1 and SSIM averaged over its channels and pixels). The L1 mean is over every
    pixel whatever the padding; ``padding`` ('same' zero padding or 'valid') applies to SSIM only.
    """
    if torch.compiler.is_compiling():
        call = _build(pred, target, ssim_weight, window_size, padding, reduction, window_sigma, traced=True)
    else:
        build = lambda: _build(pred, target, ssim_weight, window_size, padding, reduction, window_sigma)  # noqa: E731
        if ssim_weight is SSIM_WEIGHT and window_size is WINDOW_SIZE and window_sigma is WINDOW_SIGMA:  # defaults
            call = CALLS.for_pair_pinned(("l1_ssim_loss", padding, reduction), pred, target, build)
        else:
            call = CALLS.for_pair(("l1_ssim_loss", ssim_weight, window_size, padding, reduction, window_sigma),
                                  pred, target, build)
    out = call(pred, target)
    if check_finite:
        raise_if_not_finite(out, {"pred": pred, "target": target})
    return out


def _build(pred, target, ssim_weight, window_size, padding, reduction, window_sigma, traced: bool = False):
    check_image_pair(pred, target, ("pred", "target"))
    if isinstance(ssim_weight, bool) or not isinstance(ssim_weight, (int, float)) or not 0 <= ssim_weight <= 1:
        raise ValueError(f"ssim_weight must be a number in [0, 1]; got {ssim_weight!r}")
    check_window_size(window_size, "window_size")
    window_sigma = check_positive(window_sigma, "window_sigma")
    check_choice(padding, "padding", ("same", "valid"))
    check_choice(reduction, "reduction", LOSS_REDUCTIONS)
    check_min_size(pred, window_size, "pred", f"window_size is {window_size}")
    win, sym = window_table(None, window_size, window_sigma, pred)
    args = (win, FUSED_C1, FUSED_C2, padding == "valid", sym, reduction, float(ssim_weight))
    if traced:
        return lambda x, y: traced_reduce(x, y, *args)
    return reduce_call(pred, target, *args)


class L1SSIMLoss(torch.nn.Module):
    """Module form of :func:`l1_ssim_loss`: ``L1SSIMLoss(ssim_weight=0.2)(pred, target)``."""

    def __init__(self, ssim_weight: float = 0.2, window_size: int = 11, padding: str = "same",
                 reduction: str = "mean") -> None:
        super().__init__()
        self.ssim_weight, self.window_size, self.padding, self.reduction = ssim_weight, window_size, padding, reduction

    def forward(self, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return l1_ssim_loss(pred, target, self.ssim_weight, window_size=self.window_size, padding=self.padding,
                            reduction=self.reduction)
