"""ColorVideoVDP's display model on the GPU: sRGB -> DKL d65 luminance of the emitted light, one pass.

    cvvdp_linear_dkl(rgb (N, 3, H, W), peak_luminance, black_level, reflected, exposure, rgb2xyz (9 floats))
        -> (N, 3, H, W) float32; rgb floating in [0, 1] or uint8 codes 0..255

Per pixel (twin: :func:`fusedsim.families.cvvdp.twin.cvvdp_linear_dkl_ref`, codes converted first):
v = clamp(rgb, 0, 1), lin = ((v + 0.055) / 1.055)^2.4 above 0.04045 else v / 12.92, L = (peak - black) ·
lin (or clip(lin · exposure, 0, 1)) + black + reflected, DKL_c = Σ_k L_k M[c, k] with M = LMS2006->DKLd65 ·
XYZ->LMS2006 · RGB->XYZ formed in float32 on the host as the twin forms it. Replaces ~15 PyTorch launches and
their full-size temporaries per image. The power is exp(2.4 log x): a few float32 ulps from torch.pow.

uint8 codes are read directly: v = code / 255 comes from a 256-entry table that torch forms exactly as the
metric's input conversion does (``code.float() / 255``), so no full-size float copy of the image is made and the
result equals that of the converted image bit for bit.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedsim.core.launch import Launcher
from fusedsim.core.state import cached
from fusedsim.families.cvvdp.twin import dkl_matrix
from fusedsim.families.cvvdp.ops import cvvdp_linear_dkl

__all__ = ["cvvdp_linear_dkl_fwd"]

_BLOCK = 512


@triton.jit
def _lum(X, CODES, ok, GAIN, BLACK, REFL, EXPOSURE, UNIT: tl.constexpr, U8: tl.constexpr):
    if U8:
        v = tl.load(CODES + tl.load(X, mask=ok, other=0).to(tl.int32))
    else:
        v = tl.load(X, mask=ok, other=0.0)
    v = tl.minimum(tl.maximum(v, 0.0), 1.0)
    lin = tl.where(v > 0.04045, tl.exp(2.4 * tl.log((v + 0.055) / 1.055)), v / 12.92)
    if not UNIT:
        lin = tl.minimum(tl.maximum(lin * EXPOSURE, 0.0), 1.0)
    return GAIN * lin + BLACK + REFL


@triton.jit
def _dkl_kernel(X, CODES, OUT, HW, sn, sc, GAIN, BLACK, REFL, EXPOSURE, M00, M01, M02, M10, M11, M12, M20, M21,
                M22, UNIT: tl.constexpr, U8: tl.constexpr, BLOCK: tl.constexpr):
    n = tl.program_id(1).to(tl.int64)
    p = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = p < HW
    x = X + n * sn + p
    l0 = _lum(x, CODES, ok, GAIN, BLACK, REFL, EXPOSURE, UNIT, U8)
    l1 = _lum(x + sc, CODES, ok, GAIN, BLACK, REFL, EXPOSURE, UNIT, U8)
    l2 = _lum(x + 2 * sc, CODES, ok, GAIN, BLACK, REFL, EXPOSURE, UNIT, U8)
    out = OUT + n * 3 * HW + p
    tl.store(out, l0 * M00 + l1 * M01 + l2 * M02, mask=ok)
    tl.store(out + HW, l0 * M10 + l1 * M11 + l2 * M12, mask=ok)
    tl.store(out + 2 * HW, l0 * M20 + l1 * M21 + l2 * M22, mask=ok)


@cached(maxsize=8)
def _code_values(device: torch.device) -> torch.Tensor:
    """sRGB value of each uint8 code, float32, formed on ``device`` exactly as the metric's input conversion
    (``code.to(float32) / 255.0``; CUDA multiplies by the reciprocal, the CPU divides)."""
    return torch.arange(256, device=device).to(torch.uint8).to(torch.float32) / 255.0


@cached(maxsize=32)
def _launcher(n: int, hw: int, sn: int, sc: int, peak: float, black: float, refl: float, exposure: float,
              rgb2xyz: tuple, u8: bool) -> tuple[Launcher, tuple]:
    m = dkl_matrix(tuple(rgb2xyz[3 * r:3 * r + 3] for r in range(3)), torch.empty(0, dtype=torch.float32))
    launch = Launcher(_dkl_kernel, (triton.cdiv(hw, _BLOCK), n), num_warps=4)
    # (peak - black) is formed in double and rounded once, as the twin's Python scalar arithmetic does.
    return launch, (hw, sn, sc, peak - black, black, refl, exposure, *(float(v) for v in m.reshape(-1)),
                    exposure == 1, u8, _BLOCK)


@cvvdp_linear_dkl.triton_launcher
def cvvdp_linear_dkl_fwd(rgb: torch.Tensor, peak_luminance: float, black_level: float, reflected: float,
                         exposure: float, rgb2xyz: list[float]) -> torch.Tensor:
    """DKL d65 (N, 3, H, W) float32 of sRGB ``rgb`` (N, 3, H, W), floating in [0, 1] or uint8 codes, on the given
    display."""
    u8 = rgb.dtype == torch.uint8
    rgb = (rgb if u8 or rgb.dtype == torch.float32 else rgb.float()).contiguous()
    n, c, h, w = rgb.shape
    if c != 3 or len(rgb2xyz) != 9:
        raise ValueError(f"cvvdp_linear_dkl: rgb (N, 3, H, W) and 9 rgb2xyz entries; got {tuple(rgb.shape)}")
    launch, tail = _launcher(n, h * w, rgb.stride(0), rgb.stride(1), float(peak_luminance), float(black_level),
                             float(reflected), float(exposure), tuple(float(v) for v in rgb2xyz), u8)
    out = torch.empty((n, 3, h, w), dtype=torch.float32, device=rgb.device)
    launch(rgb, _code_values(rgb.device), out, *tail)
    return out
