"""PSNR over all channels and pixels of each image (plain PyTorch: one fused elementwise + reduction pass)."""

from __future__ import annotations

import torch

from fusedsim.core.validation import check_choice, check_image_pair, check_positive


def psnr(X: torch.Tensor, Y: torch.Tensor, data_range: float = 255, reduction: str = "mean") -> torch.Tensor:
    """10·log10(data_range² / MSE) per image; ``reduction='mean'`` averages the per-image values, ``'image'``
    returns them, shape (N,). Identical images give +inf. X, Y: (N, C, H, W) or (N, C, D, H, W)."""
    check_image_pair(X, Y, ("X", "Y"))
    data_range = check_positive(data_range, "data_range")
    check_choice(reduction, "reduction", ("mean", "image"))
    dt = torch.float64 if X.dtype == torch.float64 else torch.float32
    mse = (X.to(dt) - Y.to(dt)).square().flatten(1).mean(1)
    values = 10.0 * torch.log10(data_range**2 / mse)
    return values.mean() if reduction == "mean" else values
