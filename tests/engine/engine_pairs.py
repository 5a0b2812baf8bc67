"""Random test pairs as ImageData (structured content plus noise, so SSIM is far from 0 and 1)."""

from __future__ import annotations

from pathlib import Path

import torch

from fusedsim.io.images import ImageData


def image_pair(height: int = 200, width: int = 300, channels: int = 3, bits: int = 8,
               seed: int = 0) -> tuple[ImageData, ImageData]:
    g = torch.Generator().manual_seed(seed)
    top = float((1 << bits) - 1)
    yy, xx = torch.meshgrid(torch.arange(height), torch.arange(width), indexing="ij")
    base = (torch.sin(xx / 9.0) * torch.cos(yy / 13.0) + 1) * 0.5 * top
    x = (base + torch.rand((1, channels, height, width), generator=g) * 0.2 * top).clamp(0, top).round()
    y = (x + torch.randn(x.shape, generator=g) * 0.08 * top).clamp(0, top).round()
    mode = "RGB" if channels == 3 else "grey"
    return ImageData(Path("ref.png"), x.float(), bits, mode), ImageData(Path("dist.png"), y.float(), bits, mode)
