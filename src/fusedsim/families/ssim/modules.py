"""``nn.Module`` wrappers with pytorch-msssim's constructor arguments."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from fusedsim.core.moments.twin import gaussian_window
from fusedsim.families.ssim.functional import fused_ssim, ms_ssim, ssim


def _module_window(win_size: int, win_sigma: float, channel: int, spatial_dims: int) -> torch.Tensor:
    """pytorch-msssim's ``win`` attribute (kept for compatibility; forward uses the cached device window)."""
    return gaussian_window(win_size, win_sigma, dtype=torch.float32).reshape([1, 1] + [1] * (spatial_dims - 1) + [
        win_size]).repeat([channel, 1] + [1] * spatial_dims)


def _check_channels(x: torch.Tensor, channel: int) -> None:
    if isinstance(x, torch.Tensor) and x.dim() >= 2 and x.shape[1] != channel:
        raise ValueError(f"the module was built for channel={channel}, but X has {x.shape[1]} channels")


class SSIM(torch.nn.Module):
    """``SSIM(data_range=255, size_average=True, win_size=11, win_sigma=1.5, channel=3, spatial_dims=2, ...)``."""

    def __init__(self, data_range: float = 255, size_average: bool = True, win_size: int = 11,
                 win_sigma: float = 1.5, channel: int = 3, spatial_dims: int = 2, K: Sequence[float] = (0.01, 0.03),
                 nonnegative_ssim: bool = False, reduction: str | None = None) -> None:
        super().__init__()
        self.win_size, self.win_sigma, self.channel = win_size, win_sigma, channel
        self.win = _module_window(win_size, win_sigma, channel, spatial_dims)
        self.data_range, self.size_average, self.K = data_range, size_average, K
        self.nonnegative_ssim, self.reduction = nonnegative_ssim, reduction

    def forward(self, X: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
        _check_channels(X, self.channel)
        return ssim(X, Y, data_range=self.data_range, size_average=self.size_average, win_size=self.win_size,
                    win_sigma=self.win_sigma, K=self.K, nonnegative_ssim=self.nonnegative_ssim,
                    reduction=self.reduction)


class MS_SSIM(torch.nn.Module):  # noqa: N801 - pytorch-msssim's name
    """``MS_SSIM(data_range=255, size_average=True, win_size=11, win_sigma=1.5, channel=3, spatial_dims=2, ...)``."""

    def __init__(self, data_range: float = 255, size_average: bool = True, win_size: int = 11,
                 win_sigma: float = 1.5, channel: int = 3, spatial_dims: int = 2,
                 weights: Sequence[float] | None = None, K: Sequence[float] = (0.01, 0.03),
                 reduction: str | None = None) -> None:
        super().__init__()
        self.win_size, self.win_sigma, self.channel = win_size, win_sigma, channel
        self.win = _module_window(win_size, win_sigma, channel, spatial_dims)
        self.data_range, self.size_average, self.weights, self.K = data_range, size_average, weights, K
        self.reduction = reduction

    def forward(self, X: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
        _check_channels(X, self.channel)
        return ms_ssim(X, Y, data_range=self.data_range, size_average=self.size_average, win_size=self.win_size,
                       win_sigma=self.win_sigma, weights=self.weights, K=self.K, reduction=self.reduction)


class FusedSSIM(torch.nn.Module):
    """Module form of :func:`fused_ssim` (returns the SSIM value, not a loss)."""

    def __init__(self, padding: str = "same", window_size: int = 11, window_sigma: float = 1.5,
                 reduction: str = "mean") -> None:
        super().__init__()
        self.padding, self.window_size, self.window_sigma = padding, window_size, window_sigma
        self.reduction = reduction

    def forward(self, img1: torch.Tensor, img2: torch.Tensor) -> torch.Tensor:
        return fused_ssim(img1, img2, padding=self.padding, train=self.training, window_size=self.window_size,
                          window_sigma=self.window_sigma, reduction=self.reduction)
