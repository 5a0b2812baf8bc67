"""ColorVideoVDP's temporal channels on the GPU: the four FIR filters over a window of frames, one pass.

    cvvdp_temporal(window (N, S, 3, H, W), filters (4, L)) -> (N, S - L + 1, 4, H, W) float32

Per pixel and output frame b (twin: :func:`fusedsim.families.cvvdp.video_twin.cvvdp_temporal_ref`):
``out[c] = sum_k window[b + k, src(c)] * filters[c, L - 1 - k]`` with src = (0, 1, 2, 0): each window frame is read
once per output frame for all four channels (the twin reads Y twice and makes a temporary per product), and the
sums run in float32 in tap order.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedsim.core.launch import Launcher
from fusedsim.core.state import cached
from fusedsim.families.cvvdp.ops import cvvdp_temporal

__all__ = ["cvvdp_temporal_fwd"]

_BLOCK = 512


@triton.jit
def _temporal_kernel(X, F, OUT, HW, n_taps, frames, sn, ss, sc, BLOCK: tl.constexpr):
    nb = tl.program_id(1).to(tl.int64)
    n = nb // frames
    b = nb % frames
    p = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = p < HW
    acc0 = tl.zeros((BLOCK,), dtype=tl.float32)
    acc1 = tl.zeros((BLOCK,), dtype=tl.float32)
    acc2 = tl.zeros((BLOCK,), dtype=tl.float32)
    acc3 = tl.zeros((BLOCK,), dtype=tl.float32)
    for k in range(0, n_taps):
        x = X + n * sn + (b + k) * ss + p
        y = tl.load(x, mask=ok, other=0.0)
        rg = tl.load(x + sc, mask=ok, other=0.0)
        yv = tl.load(x + 2 * sc, mask=ok, other=0.0)
        j = n_taps - 1 - k
        acc0 += y * tl.load(F + j)
        acc1 += rg * tl.load(F + n_taps + j)
        acc2 += yv * tl.load(F + 2 * n_taps + j)
        acc3 += y * tl.load(F + 3 * n_taps + j)
    out = OUT + nb * 4 * HW + p
    tl.store(out, acc0, mask=ok)
    tl.store(out + HW, acc1, mask=ok)
    tl.store(out + 2 * HW, acc2, mask=ok)
    tl.store(out + 3 * HW, acc3, mask=ok)


@cached(maxsize=32)
def _launcher(n: int, frames: int, hw: int) -> Launcher:
    return Launcher(_temporal_kernel, (triton.cdiv(hw, _BLOCK), n * frames), num_warps=4)


@cvvdp_temporal.triton_launcher
def cvvdp_temporal_fwd(window: torch.Tensor, filters: torch.Tensor) -> torch.Tensor:
    """Temporal channels (N, S - L + 1, 4, H, W) float32 of the DKL frames ``window`` (N, S, 3, H, W)."""
    window = window.float().contiguous()
    filters = filters.float().contiguous()
    n, s, c, h, w = window.shape
    n_taps = filters.shape[-1]
    if c != 3 or filters.shape[0] != 4 or s < n_taps:
        raise ValueError(f"cvvdp_temporal: window (N, S >= L, 3, H, W) and filters (4, L); got "
                         f"{tuple(window.shape)} and {tuple(filters.shape)}")
    frames = s - n_taps + 1
    out = torch.empty((n, frames, 4, h, w), dtype=torch.float32, device=window.device)
    _launcher(n, frames, h * w)(window, filters, out, h * w, n_taps, frames, window.stride(0), window.stride(1),
                                window.stride(2), _BLOCK)
    return out
