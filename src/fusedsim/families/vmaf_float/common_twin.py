"""float32 building blocks shared by libvmaf's float features, in libvmaf's order of operations.

* :func:`to_vmaf_float`: libvmaf's ``picture_copy`` with offset -128: ``float(v) - 128`` for 8 bit,
  ``float(v) / K - 128`` (float32 division, then float32 addition) with ``K = 4, 16, 256`` for 10, 12, 16 bit.
* :func:`separable_filter`: a symmetric-tap float32 filter, **vertical pass first**, each output
  ``acc = 0; acc += f[k] * x[m(i - r + k)]`` in tap order (every product and sum rounded to float32: libvmaf's C is
  compiled without contraction), borders mirrored once without repeating the edge (``-i -> i``,
  ``n-1+i -> n-1-i``).
* :func:`row_major_sum`: libvmaf's float accumulators: each row summed left to right in float32, then the row sums
  top to bottom in float32 (``accum += accum_inner``). numpy's ``cumsum`` of a float32 array is that strict
  recurrence.

ADM's approximate reciprocal is in :mod:`.rcp_table` and :func:`~.adm_twin.rcp_divide`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

__all__ = ["SUPPORTED_BIT_DEPTHS", "reflect101_index", "row_major_sum", "separable_filter", "to_vmaf_float"]

SUPPORTED_BIT_DEPTHS = (8, 10, 12, 16)
_SCALER = {10: 4.0, 12: 16.0, 16: 256.0}


def to_vmaf_float(x: torch.Tensor, bit_depth: int) -> torch.Tensor:
    """Integer samples ``(N, H, W)`` to libvmaf's float luma (float32, centred on 0)."""
    f = x.to(torch.float32)
    if bit_depth != 8:
        f = f / torch.tensor(_SCALER[bit_depth], dtype=torch.float32, device=f.device)
    return f - torch.tensor(128.0, dtype=torch.float32, device=f.device)


def reflect101_index(n: int, half: int, device: torch.device | None = None) -> torch.Tensor:
    """Source index of padded positions ``-half .. n-1+half`` under one mirror without edge repeat."""
    idx = torch.arange(-half, n + half, device=device).abs()
    return (n - 1) - ((n - 1) - idx).abs()


def _taps_1d(x: torch.Tensor, taps: torch.Tensor, dim: int, step: int = 1) -> torch.Tensor:
    n = x.shape[dim]
    width = taps.shape[0]
    half = width // 2
    xp = x.index_select(dim, reflect101_index(n, half, x.device))
    positions = torch.arange(0, n, step, device=x.device)
    acc = None
    for k in range(width):
        term = xp.index_select(dim, positions + k) * taps[k]
        acc = term if acc is None else acc + term  # 0 + first product is the product
    return acc


def separable_filter(x: torch.Tensor, taps: torch.Tensor, step: int = 1,
                     products: torch.Tensor | None = None) -> torch.Tensor:
    """``taps`` (float32 ``(K,)``) over the last two dims of float32 ``x``, vertical then horizontal, keeping every
    ``step``-th row and column. With ``products`` given, the vertical pass reads ``x * products`` (each product
    rounded to float32 before the tap: libvmaf's ``filter1d_sq`` / ``filter1d_xy``)."""
    src = x if products is None else x * products
    return _taps_1d(_taps_1d(src, taps, -2, step), taps, -1, step)


def row_major_sum(x: torch.Tensor) -> torch.Tensor:
    """libvmaf's two-level float32 sum over the last two dims of ``x`` (float32 ``(..., h, w)``): ``(...,)``
    float32 on ``x``'s device. An empty region sums to 0."""
    lead = x.shape[:-2]
    if x.shape[-1] == 0 or x.shape[-2] == 0:
        return torch.zeros(lead, dtype=torch.float32, device=x.device)
    host = x.detach().to("cpu", torch.float32).contiguous().numpy()
    rows = np.cumsum(host, axis=-1, dtype=np.float32)[..., -1]
    total = np.cumsum(rows, axis=-1, dtype=np.float32)[..., -1]
    return torch.from_numpy(np.ascontiguousarray(total, dtype=np.float32)).to(x.device)


def f32(values: Sequence[float], device: torch.device | None = None) -> torch.Tensor:
    """Python numbers as a float32 tensor (each rounded once, as a C ``float`` initialiser)."""
    return torch.tensor(np.asarray(values, dtype=np.float32), device=device)
