"""What op declarations share: ssim_reduce's reduce codes, the SSIM tolerance table, example images for the twin tests."""

from __future__ import annotations

import torch

from fusedsim.core.moments.twin import gaussian_window

# ssim_reduce's ``reduce`` codes (also in ops/ssim_source.py)
MAP, STATS, MEAN, IMAGE, CHANNEL = -1, 0, 1, 2, 3

# Tolerances against the float64 twin. float64: the same formulas in another order (rounding ~1e-15, amplified
# by the variance cancellation E[x²] - mu² to ~1e-11). float32: ~1e-7 relative per statistic, up to ~1e-5 on SSIM
# and ~1e-4 on gradients in flat regions where that cancellation is worst.
SSIM_TOLERANCE = {torch.float64: (1e-9, 1e-8), torch.float32: (2e-5, 2e-4)}


def example_pair(shape, device, seed, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(shape, generator=gen, dtype=torch.float64)
    y = (x + 0.2 * torch.randn(shape, generator=gen, dtype=torch.float64)).clamp(0, 1)
    return x.to(device, dtype), y.to(device, dtype)


def example_window(taps: int, channels: int, device, asymmetric: bool = False, box: bool = False) -> torch.Tensor:
    win = gaussian_window(taps, 1.5, device=device)
    if asymmetric:
        win = torch.linspace(0.5, 1.5, taps, dtype=torch.float64, device=device) * win
        win = win / win.sum()
    if box:
        win = torch.full((taps,), 1.0 / taps, dtype=torch.float64, device=device)
    return win.expand(channels, -1).contiguous()


def strided_example_pair(device, seed):
    """Non-contiguous inputs: sliced rows and stride-2 columns; one of them channels-last."""
    big_x, big_y = example_pair((1, 2, 22, 30), device, seed)
    return big_x[:, :, 3:28, ::2], big_y.to(memory_format=torch.channels_last)[:, :, 3:28, 1::2]


