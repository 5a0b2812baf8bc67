"""ColorVideoVDP's temporal channels on the GPU: the four FIR filters over a window of frames, one pass.

    cvvdp_temporal(window (N, S, 3, H, W), filters (4, L)) -> (N, S - L + 1, 4, H, W) float32
    cvvdp_temporal_codes(codes (N, S, 3, H, W) uint8, filters, peak_luminance, black_level, reflected, exposure,
                         rgb2xyz) -> (N, S - L + 1, 4, H, W) float32: the display model fused in

Per pixel and output frame b (twin: :func:`fusedsim.families.cvvdp.video_twin.cvvdp_temporal_ref`):
``out[c] = sum_k window[b + k, src(c)] * filters[c, L - 1 - k]`` with src = (0, 1, 2, 0): each window frame is read
once per output frame for all four channels (the twin reads Y twice and makes a temporary per product), and the
sums run in float32 in tap order.

``cvvdp_temporal_codes`` reads a window of uint8 sRGB codes (3 bytes a pixel instead of 12) and applies the
display model per tap: the emitted luminance of each code is a 256-entry table formed on the host by the twin's
display model (``cvvdp_luminance_ref`` of ``code / 255``, so each entry equals the twin's value), then the
DKL matrix (formed as the twin forms it) and the filters. The DKL frames are never written.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch
import triton
import triton.language as tl

from fusedsim.core.launch import Launcher
from fusedsim.core.state import cached
from fusedsim.families.cvvdp.ops import cvvdp_temporal, cvvdp_temporal_codes
from fusedsim.families.cvvdp.twin import cvvdp_luminance_ref, dkl_matrix

__all__ = ["cvvdp_temporal_codes_fwd", "cvvdp_temporal_fwd"]

_BLOCK = 512


@triton.jit
def _temporal_kernel(X, F, OUT, HW, n_taps, frames, NB, sn, ss, sc, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    nb = pid % NB
    n = nb // frames
    b = nb % frames
    p = (pid // NB) * BLOCK + tl.arange(0, BLOCK)
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
    return Launcher(_temporal_kernel, (triton.cdiv(hw, _BLOCK) * n * frames,), num_warps=4)


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
    _launcher(n, frames, h * w)(window, filters, out, h * w, n_taps, frames, n * frames, window.stride(0),
                                window.stride(1), window.stride(2), _BLOCK)
    return out


@triton.jit
def _temporal_codes_kernel(X, LUM, F, OUT, HW, n_taps, frames, NB, sn, ss, sc, M00, M01, M02, M10, M11, M12, M20, M21,
                           M22, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    nb = pid % NB
    n = nb // frames
    b = nb % frames
    p = (pid // NB) * BLOCK + tl.arange(0, BLOCK)
    ok = p < HW
    acc0 = tl.zeros((BLOCK,), dtype=tl.float32)
    acc1 = tl.zeros((BLOCK,), dtype=tl.float32)
    acc2 = tl.zeros((BLOCK,), dtype=tl.float32)
    acc3 = tl.zeros((BLOCK,), dtype=tl.float32)
    for k in range(0, n_taps):
        x = X + n * sn + (b + k) * ss + p
        l0 = tl.load(LUM + tl.load(x, mask=ok, other=0).to(tl.int32))
        l1 = tl.load(LUM + tl.load(x + sc, mask=ok, other=0).to(tl.int32))
        l2 = tl.load(LUM + tl.load(x + 2 * sc, mask=ok, other=0).to(tl.int32))
        y = l0 * M00 + l1 * M01 + l2 * M02
        rg = l0 * M10 + l1 * M11 + l2 * M12
        yv = l0 * M20 + l1 * M21 + l2 * M22
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


@cached(maxsize=16)
def _luminance_table(peak: float, black: float, refl: float, exposure: float, device: torch.device) -> torch.Tensor:
    """Emitted luminance (cd/m²) of each code 0..255, float32, by the twin's display model on ``code / 255``
    (the same for R, G and B)."""
    display = SimpleNamespace(peak_luminance=peak, black_level=black, reflected=refl, exposure=exposure)
    values = torch.arange(256).to(torch.uint8).to(torch.float32) / 255.0
    return cvvdp_luminance_ref(values, display).contiguous().to(device)


@cached(maxsize=32)
def _codes_launcher(n: int, frames: int, hw: int, rgb2xyz: tuple) -> tuple[Launcher, tuple]:
    m = dkl_matrix(tuple(rgb2xyz[3 * r:3 * r + 3] for r in range(3)), torch.empty(0, dtype=torch.float32))
    launch = Launcher(_temporal_codes_kernel, (triton.cdiv(hw, _BLOCK) * n * frames,), num_warps=4)
    return launch, tuple(float(v) for v in m.reshape(-1))


@cvvdp_temporal_codes.triton_launcher
def cvvdp_temporal_codes_fwd(codes: torch.Tensor, filters: torch.Tensor, peak_luminance: float,
                             black_level: float, reflected: float, exposure: float,
                             rgb2xyz: list[float]) -> torch.Tensor:
    """Temporal channels (N, S - L + 1, 4, H, W) float32 of the uint8 sRGB frames ``codes`` (N, S, 3, H, W)."""
    codes = codes.contiguous()
    filters = filters.float().contiguous()
    n, s, c, h, w = codes.shape
    n_taps = filters.shape[-1]
    if codes.dtype != torch.uint8 or c != 3 or filters.shape[0] != 4 or s < n_taps:
        raise ValueError(f"cvvdp_temporal_codes: uint8 codes (N, S >= L, 3, H, W) and filters (4, L); got "
                         f"{codes.dtype} {tuple(codes.shape)} and {tuple(filters.shape)}")
    frames = s - n_taps + 1
    launch, matrix = _codes_launcher(n, frames, h * w, tuple(float(v) for v in rgb2xyz))
    lum = _luminance_table(float(peak_luminance), float(black_level), float(reflected), float(exposure), codes.device)
    out = torch.empty((n, frames, 4, h, w), dtype=torch.float32, device=codes.device)
    launch(codes, lum, filters, out, h * w, n_taps, frames, n * frames, codes.stride(0), codes.stride(1),
           codes.stride(2), *matrix, _BLOCK)
    return out
