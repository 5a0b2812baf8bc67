"""ColorVideoVDP's temporal channels on the GPU: the four FIR filters over a window of frames, one pass.

    cvvdp_temporal(window (N, S, 3, H, W), filters (4, L)) -> (N, S - L + 1, 4, H, W) float32
    cvvdp_temporal_codes(codes (N, S, 3, H, W) uint8, filters, peak_luminance, black_level, reflected, exposure,
                         rgb2xyz) -> (N, S - L + 1, 4, H, W) float32: the display model fused in

Per pixel and output frame b (twin: :func:`fusedsim.families.cvvdp.video_twin.cvvdp_temporal_ref`):
``out[c] = sum_k window[b + k, src(c)] * filters[c, L - 1 - k]`` with src = (0, 1, 2, 0), the sums in float32 in tap
order. One program computes a block of pixels of 4 consecutive output frames and reads each of their 4 + L - 1
window frames once, adding it to every output frame it reaches (an output frame at a time read each window frame
L times: 9 at 30 fps, and converted its codes as often). Programs of 4 frames ran 2 % faster than 8 on an H200.

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

_BLOCK = 256  # pixels a program
_FRAMES = 4  # output frames a program: each window frame is read (and converted) once for all of them


@triton.jit
def _program(HW, FRAMES: tl.constexpr, BLOCK: tl.constexpr):
    """This program's pixels, first output frame, clip, pixel mask and output frame offsets."""
    p = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    return p, tl.program_id(1) * FRAMES, tl.program_id(2).to(tl.int64), p < HW, tl.arange(0, FRAMES)


@triton.jit
def _zeros4(FRAMES: tl.constexpr, BLOCK: tl.constexpr):
    return (tl.zeros((FRAMES, BLOCK), dtype=tl.float32), tl.zeros((FRAMES, BLOCK), dtype=tl.float32),
            tl.zeros((FRAMES, BLOCK), dtype=tl.float32), tl.zeros((FRAMES, BLOCK), dtype=tl.float32))


@triton.jit
def _accumulate(acc0, acc1, acc2, acc3, y, rg, yv, TAB, s, q, FRAMES: tl.constexpr):
    """Adds window frame ``s`` (its Y, RG, YV at the program's pixels) to output frames ``q`` (FRAMES,) with the
    weights ``TAB[s, c, q]`` (:func:`_tap_table`: tap L - 1 - (s - q) of channel c, 0 where output q does not
    reach frame s; adding 0 * x leaves a finite sum as it is, so per output the sums run in tap order, as one output
    frame at a time would)."""
    row = TAB + s * (4 * FRAMES) + q
    acc0 += tl.load(row)[:, None] * y[None, :]
    acc1 += tl.load(row + FRAMES)[:, None] * rg[None, :]
    acc2 += tl.load(row + 2 * FRAMES)[:, None] * yv[None, :]
    acc3 += tl.load(row + 3 * FRAMES)[:, None] * y[None, :]
    return acc0, acc1, acc2, acc3


@triton.jit
def _store4(OUT, acc0, acc1, acc2, acc3, n, q0, q, frames, p, ok, HW):
    out = OUT + ((n * frames + q0 + q).to(tl.int64) * 4 * HW)[:, None] + p[None, :]
    keep = ((q0 + q) < frames)[:, None] & ok[None, :]
    tl.store(out, acc0, mask=keep)
    tl.store(out + HW, acc1, mask=keep)
    tl.store(out + 2 * HW, acc2, mask=keep)
    tl.store(out + 3 * HW, acc3, mask=keep)


@triton.jit
def _temporal_kernel(X, TAB, OUT, HW, frames, sn, ss, sc, NT: tl.constexpr, FRAMES: tl.constexpr,
                     BLOCK: tl.constexpr):
    """One program: BLOCK pixels of FRAMES consecutive output frames of one clip; window frames q0 .. q0 +
    FRAMES + L - 2 are each read once (unrolled: L = NT is a compile-time constant, so every frame's loads can be
    in flight together; frames past a short last group's window are masked: only outputs not stored use them)."""
    p, q0, n, ok, q = _program(HW, FRAMES, BLOCK)
    acc0, acc1, acc2, acc3 = _zeros4(FRAMES, BLOCK)
    for s in tl.static_range(FRAMES + NT - 1):
        x = X + n * sn + (q0 + s).to(tl.int64) * ss + p
        live = ok & (p * 0 + (q0 + s) < frames + NT - 1)  # (a vector: the interpreter masks with vectors)
        y = tl.load(x, mask=live, other=0.0)
        rg = tl.load(x + sc, mask=live, other=0.0)
        yv = tl.load(x + 2 * sc, mask=live, other=0.0)
        acc0, acc1, acc2, acc3 = _accumulate(acc0, acc1, acc2, acc3, y, rg, yv, TAB, s, q, FRAMES)
    _store4(OUT, acc0, acc1, acc2, acc3, n, q0, q, frames, p, ok, HW)


@cached(maxsize=16)
def _tap_index(n_taps: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """For window frame s and output frame q of a program: the filter tap L - 1 - (s - q) (clamped) and whether
    output q reaches frame s, (FRAMES + L - 1, FRAMES) each."""
    s = torch.arange(_FRAMES + n_taps - 1)[:, None]
    k = s - torch.arange(_FRAMES)[None, :]
    real = (k >= 0) & (k < n_taps)
    return (n_taps - 1 - k).clamp(0, n_taps - 1).to(device), real.to(device)


def _tap_table(filters: torch.Tensor) -> torch.Tensor:
    """The weights (FRAMES + L - 1, 4, FRAMES) float32 of window frame s in output frame q of a program, channel
    by channel, zero where q does not reach s: the kernel's loop reads them without index arithmetic or masks.
    Built on every call (three small launches); the stream passes the same filters each time."""
    tap, real = _tap_index(filters.shape[-1], filters.device)
    return torch.where(real, filters[:, tap], 0.0).permute(1, 0, 2).contiguous()


def _grid(n: int, frames: int, hw: int) -> tuple[int, int, int]:
    return triton.cdiv(hw, _BLOCK), triton.cdiv(frames, _FRAMES), n


@cached(maxsize=32)
def _launcher(n: int, frames: int, hw: int) -> Launcher:
    return Launcher(_temporal_kernel, _grid(n, frames, hw), num_warps=4)


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
    _launcher(n, frames, h * w)(window, _tap_table(filters), out, h * w, frames, window.stride(0), window.stride(1),
                                window.stride(2), n_taps, _FRAMES, _BLOCK)
    return out


@triton.jit
def _temporal_codes_kernel(X, LUM, TAB, OUT, HW, frames, sn, ss, sc, M00, M01, M02, M10, M11, M12, M20, M21, M22,
                           NT: tl.constexpr, FRAMES: tl.constexpr, BLOCK: tl.constexpr):
    """As ``_temporal_kernel`` on codes: each window frame's display model is computed once per program."""
    p, q0, n, ok, q = _program(HW, FRAMES, BLOCK)
    acc0, acc1, acc2, acc3 = _zeros4(FRAMES, BLOCK)
    for s in tl.static_range(FRAMES + NT - 1):
        x = X + n * sn + (q0 + s).to(tl.int64) * ss + p
        live = ok & (p * 0 + (q0 + s) < frames + NT - 1)  # (a vector: the interpreter masks with vectors)
        l0 = tl.load(LUM + tl.load(x, mask=live, other=0).to(tl.int32))
        l1 = tl.load(LUM + tl.load(x + sc, mask=live, other=0).to(tl.int32))
        l2 = tl.load(LUM + tl.load(x + 2 * sc, mask=live, other=0).to(tl.int32))
        y = l0 * M00 + l1 * M01 + l2 * M02
        rg = l0 * M10 + l1 * M11 + l2 * M12
        yv = l0 * M20 + l1 * M21 + l2 * M22
        acc0, acc1, acc2, acc3 = _accumulate(acc0, acc1, acc2, acc3, y, rg, yv, TAB, s, q, FRAMES)
    _store4(OUT, acc0, acc1, acc2, acc3, n, q0, q, frames, p, ok, HW)


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
    launch = Launcher(_temporal_codes_kernel, _grid(n, frames, hw), num_warps=4)
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
    launch(codes, lum, _tap_table(filters), out, h * w, frames, codes.stride(0), codes.stride(1), codes.stride(2),
           *matrix, n_taps, _FRAMES, _BLOCK)
    return out
