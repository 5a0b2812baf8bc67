"""Strip paths of the pixel metrics (``strip_sums`` / ``strip_finish`` of their :class:`~fusedsim.metrics.registry.MetricFunctions`).

``*_strip_sums(ref, dist, rows, device=..., data_range=..., **params)`` reads from the whole images ``(1, C, H, W)``
(any device, any dtype, values in ``0..data_range``) only the rows that the body ``rows = (start, stop)`` needs, its
halo included, moves them to ``device`` as float32, and returns float64 partial sums over exactly the outputs that
belong to the body. Bodies partition ``[0, H)``, so the sums over all strips, finished once, give the full-image
value; summing in float64 makes the order of strips matter only in the last bits.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = [
    "ms_ssim_strip_finish", "ms_ssim_strip_sums", "psnr_strip_finish", "psnr_strip_sums", "ssim_strip_finish",
    "ssim_strip_sums",
]


def _rows(image: torch.Tensor, start: int, stop: int, device: torch.device) -> torch.Tensor:
    """Rows ``[start, stop)`` of ``image`` on ``device`` as float32; rows above the image (start < 0) are zeros."""
    part = image[..., max(start, 0):stop, :].to(device, non_blocking=True).float()
    return F.pad(part, (0, 0, -start, 0)) if start < 0 else part


# ------------------------------------------------------------------------------------------------------- SSIM
def ssim_strip_sums(ref: torch.Tensor, dist: torch.Tensor, rows: tuple[int, int], *, device: torch.device,
                    data_range: float = 255, **params) -> torch.Tensor:
    """``[sum of the SSIM map, number of map values]`` over the window centres in the body rows (valid map)."""
    from fusedsim.families.ssim import ssim

    win = int(params.get("win_size", 11))
    half, height = win // 2, ref.shape[-2]
    r0, r1 = max(0, rows[0] - half), min(height, rows[1] + half)
    if r1 - r0 < win:  # no window centre of the valid map lies in this body
        return torch.zeros(2, dtype=torch.float64, device=device)
    ssim_map = ssim(_rows(ref, r0, r1, device), _rows(dist, r0, r1, device), data_range=data_range,
                    reduction="none", **params)
    count = torch.tensor(float(ssim_map.numel()), dtype=torch.float64, device=device)
    return torch.stack((ssim_map.double().sum(), count))


def ssim_strip_finish(sums: torch.Tensor, data_range: float = 255, **params) -> torch.Tensor:
    """The mean of the SSIM map (every channel has as many values, so this is the mean of the channel means)."""
    return (sums[0] / sums[1]).float()


# ------------------------------------------------------------------------------------------------------- PSNR
_PSNR_BLOCK = 1 << 22  # values per block of the squared-error sum

def psnr_strip_sums(ref: torch.Tensor, dist: torch.Tensor, rows: tuple[int, int], *, device: torch.device,
                    data_range: float = 255, **params) -> torch.Tensor:
    """``[sum of squared errors, number of values]`` of the body rows (PSNR needs no halo).

    The float32 difference is exact for image values (integers below 2**24); its squares are summed in float64 by
    dot products over blocks of about 4 M values, so the temporaries stay small whatever the body."""
    start, stop = rows
    step = max(1, _PSNR_BLOCK // max(1, ref.shape[1] * ref.shape[-1]))
    total = torch.zeros((), dtype=torch.float64, device=device)
    for r0 in range(start, stop, step):
        r1 = min(stop, r0 + step)
        diff = (_rows(ref, r0, r1, device) - _rows(dist, r0, r1, device)).flatten().double()
        total = total + torch.dot(diff, diff)
    count = torch.tensor(float((stop - start) * ref.shape[1] * ref.shape[-1]), dtype=torch.float64, device=device)
    return torch.stack((total, count))


def psnr_strip_finish(sums: torch.Tensor, data_range: float = 255, **params) -> torch.Tensor:
    """10·log10(data_range² / MSE) from the summed squared errors (+inf for identical images)."""
    return (10.0 * torch.log10(float(data_range) ** 2 / (sums[0] / sums[1]))).float()


# ---------------------------------------------------------------------------------------------------- MS-SSIM
def _pyramid(height: int, levels: int) -> list[tuple[int, int]]:
    """``(rows, offset)`` per level: pytorch-msssim pools with zero padding of ``rows % 2`` on both sides, so
    level ``l`` row ``j`` averages level-0 rows ``[2**l * j - offset, 2**l * (j + 1) - offset)``."""
    out, rows, offset = [], height, 0
    for level in range(levels):
        out.append((rows, offset))
        offset += (rows % 2) << level
        rows = (rows + rows % 2) // 2
    return out


def _level_body(start: int, level: int, rows: int, offset: int, half: int) -> int:
    """The first level-``level`` window centre owned by a body starting at level-0 row ``start``."""
    return min(max(-(-(start + offset) // (1 << level)), half), rows - half)


def ms_ssim_strip_sums(ref: torch.Tensor, dist: torch.Tensor, rows: tuple[int, int], *, device: torch.device,
                       data_range: float = 255, **params) -> torch.Tensor:
    """Per level and channel: sums of the SSIM and cs maps over the level's window centres owned by the body, and
    the number of centres; flat ``(levels * (2 * C + 1),)`` as ``[ssim (L, C), cs (L, C), counts (L,)]``.

    A body owns at level ``l`` the centres between the images of its two edges (a partition at every level). The
    level-``l`` rows it needs (its centres and the 5-row halo) are pooled from the level-0 rows under them, with
    zero rows where pytorch-msssim pads, so every pooled value and every SSIM value equals the full pyramid's.
    """
    from fusedsim.families.ssim.functional import (
        MS_SSIM_WEIGHTS,
        check_constants,
        reduce_call,
        window_table,
    )

    weights = params.get("weights") or MS_SSIM_WEIGHTS
    win_size, win_sigma = int(params.get("win_size", 11)), float(params.get("win_sigma", 1.5))
    c1, c2 = check_constants(data_range, params.get("K", (0.01, 0.03)))
    levels, half, channels = len(weights), win_size // 2, ref.shape[1]
    sums = torch.zeros(3, levels, channels, dtype=torch.float64, device=device)
    for level, (level_rows, offset) in enumerate(_pyramid(ref.shape[-2], levels)):
        a = _level_body(rows[0], level, level_rows, offset, half)
        b = _level_body(rows[1], level, level_rows, offset, half)
        if a >= b:
            continue
        scale = 1 << level
        r0, r1 = scale * (a - half) - offset, scale * (b + half) - offset
        x, y = _rows(ref, r0, r1, device), _rows(dist, r0, r1, device)
        for _ in range(level):  # vertical alignment holds by construction: pad only the width
            x = F.avg_pool2d(x, kernel_size=2, padding=(0, x.shape[-1] % 2))
            y = F.avg_pool2d(y, kernel_size=2, padding=(0, y.shape[-1] % 2))
        table, sym = window_table(None, win_size, win_sigma, x)
        stats = reduce_call(x, y, table, c1, c2, True, sym, "stats")(x, y)  # (2, 1, C) means of ssim and cs
        count = (b - a) * (x.shape[-1] - 2 * half)
        sums[0, level] = stats[0, 0].double() * count
        sums[1, level] = stats[1, 0].double() * count
        sums[2, level] = count
    return torch.cat((sums[0].flatten(), sums[1].flatten(), sums[2, :, 0]))


def ms_ssim_strip_finish(sums: torch.Tensor, data_range: float = 255, **params) -> torch.Tensor:
    """pytorch-msssim's combination of the per-level channel means: relu(cs) at each level but the last, relu(SSIM)
    at the last, raised to the weights, multiplied, averaged over channels."""
    from fusedsim.families.ssim.functional import MS_SSIM_WEIGHTS

    weights = torch.tensor(params.get("weights") or MS_SSIM_WEIGHTS, dtype=torch.float64, device=sums.device)
    levels = weights.numel()
    channels = (sums.numel() // levels - 1) // 2
    ssim_sums = sums[: levels * channels].view(levels, channels)
    cs_sums = sums[levels * channels: 2 * levels * channels].view(levels, channels)
    counts = sums[2 * levels * channels:].view(levels, 1)
    factors = torch.cat((cs_sums[:-1] / counts[:-1], ssim_sums[-1:] / counts[-1:]))
    powered = torch.relu(factors) ** weights.view(-1, 1)
    return powered.prod(0).mean().float()
