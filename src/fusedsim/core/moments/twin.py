"""PyTorch twin of the windowed-moments building block (``fusedsim.core.moments``) and the numeric conventions
every twin shares: the accumulation dtype, the Gaussian window and the separable filter.

Works on 2-D (N, C, H, W) and 3-D (N, C, D, H, W) tensors with one separable 1-D window per channel, ``win`` of
shape (C, K).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from fusedsim.core.autocast import autocast_off


def gaussian_window(size: int, sigma: float, dtype: torch.dtype = torch.float64,
                    device: torch.device | str | None = None) -> torch.Tensor:
    """Normalised 1-D Gaussian of ``size`` taps (odd), centred, computed in float64 then cast. Shape (size,)."""
    coords = torch.arange(size, dtype=torch.float64) - (size // 2)
    g = torch.exp(-(coords**2) / (2.0 * sigma * sigma))
    return (g / g.sum()).to(dtype=dtype, device=device)


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """Accumulation dtype: float64 stays float64, everything else runs in float32."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def separable_filter(x: torch.Tensor, win: torch.Tensor, padding: str) -> torch.Tensor:
    """Correlate every spatial axis of ``x`` (N, C, *S) with the per-channel 1-D window ``win`` (C, K).

    ``padding='valid'`` shrinks each axis by K-1; ``'same'`` zero-pads by K//2 on both sides (no renormalisation).
    """
    channels, taps = win.shape
    spatial = x.dim() - 2
    conv = F.conv2d if spatial == 2 else F.conv3d
    pad = taps // 2 if padding == "same" else 0
    out = x
    for axis in range(spatial):
        shape = [channels, 1] + [1] * spatial
        shape[2 + axis] = taps
        pads = [0] * spatial
        pads[axis] = pad
        out = conv(out, win.reshape(shape).to(out.dtype), padding=tuple(pads), groups=channels)
    return out


def windowed_moments_ref(x: torch.Tensor, y: torch.Tensor, win: torch.Tensor, valid: bool) -> torch.Tensor:
    """Twin of the ``windowed_moments`` op: mu_x, mu_y, E[x²], E[y²], E[xy] under the separable window ``win``
    (C, K), stacked (5, N, C, *S') in the accumulation dtype (``valid``: S' = S - K + 1, else zero padding)."""
    dt = compute_dtype(x.dtype)
    x, y = x.to(dt), y.to(dt)
    stacked = torch.cat([x, y, x * x, y * y, x * y], dim=1)
    with autocast_off(x.device):
        stats = separable_filter(stacked, win.to(dt).repeat(5, 1), "valid" if valid else "same")
    return torch.stack(stats.chunk(5, dim=1))
