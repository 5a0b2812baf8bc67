"""ColorVideoVDP's display model on the GPU: display input -> DKL d65 luminance of the emitted light, one pass.

    cvvdp_linear_dkl(rgb (N, 3, H, W), peak_luminance, black_level, reflected, exposure, rgb2xyz (9 floats),
                     eotf, hlg_gamma) -> (N, 3, H, W) float32
    eotf (a constexpr branch): 0 sRGB (floating in [0, 1] or uint8 codes 0..255), 1 PQ, 2 HLG (floating in
    [0, 1]), 3 linear (floating, cd/m²); formulas: :mod:`fusedsim.families.cvvdp.eotf`

Per pixel for sRGB (twin: :func:`fusedsim.families.cvvdp.twin.cvvdp_linear_dkl_ref`, codes converted first):
v = clamp(rgb, 0, 1), lin = ((v + 0.055) / 1.055)^2.4 above 0.04045 else v / 12.92, L = (peak - black) ·
lin (or clip(lin · exposure, 0, 1)) + black + reflected, DKL_c = Σ_k L_k M[c, k] with M = LMS2006->DKLd65 ·
XYZ->LMS2006 · RGB->XYZ formed in float32 on the host as the twin forms it. Replaces ~15 PyTorch launches and
their full-size temporaries per image. Powers are exp(e log x): a few float32 ulps from torch.pow. PQ is decoded in
float64 (see ``_pq``): float32 PQ decoding, the twin's and pycvvdp's, is up to ~1e-4 (relative) from the exact value
at high luminances; the kernel's value is the exact one rounded to float32.

uint8 codes are read directly: v = code / 255 comes from a 256-entry table that torch forms exactly as the
metric's input conversion does (``code.float() / 255``), so no full-size float copy of the image is made and the
result equals that of the converted image bit for bit.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from fusedsim.core.fast_math import fast_log2
from fusedsim.core.launch import Launcher
from fusedsim.core.state import cached
from fusedsim.families.cvvdp.data import EOTFS
from fusedsim.families.cvvdp.eotf import HLG_A, HLG_B, HLG_C, PQ_MIN_LUMINANCE
from fusedsim.families.cvvdp.twin import dkl_matrix
from fusedsim.families.cvvdp.ops import cvvdp_linear_dkl

__all__ = ["cvvdp_linear_dkl_fwd"]

_BLOCK = 512


@triton.jit
def _load(X, CODES, ok, U8: tl.constexpr, EOTF: tl.constexpr):
    if U8:
        v = tl.load(CODES + tl.load(X, mask=ok, other=0).to(tl.int32))
    else:
        v = tl.load(X, mask=ok, other=0.0)
    if EOTF != 3:  # display-encoded values are clamped; linear light is clipped after the exposure
        v = tl.minimum(tl.maximum(v, 0.0), 1.0)
    return v


@triton.jit
def _pow(x, e):
    """x^e for x >= 0 as exp2(e log2 x) by the hardware's approximations (x = 0 -> 0 for e > 0)."""
    return tl.exp2(e * fast_log2(x))


@triton.jit
def _relative(lin, GAIN, BLACK, REFL, EXPOSURE, UNIT: tl.constexpr):
    """sRGB's and HLG's relative light -> emitted cd/m²."""
    if not UNIT:
        lin = tl.minimum(tl.maximum(lin * EXPOSURE, 0.0), 1.0)
    return GAIN * lin + BLACK + REFL


@triton.jit
def _srgb(v, GAIN, BLACK, REFL, EXPOSURE, UNIT: tl.constexpr):
    lin = tl.where(v > 0.04045, _pow((v + 0.055) / 1.055, 2.4), v / 12.92)
    return _relative(lin, GAIN, BLACK, REFL, EXPOSURE, UNIT)


@triton.jit
def _pq(v, BLACK, REFL, EXPOSURE, PEAK):
    # In float64: near the top of the range c2 - c3 t cancels (t = V^(1/m2) -> 1), which multiplies the float32
    # rounding of t by up to ~500 in the result (a float32 evaluation is 1e-4 off at 1000 cd/m²); float64 makes
    # the kernel's value the exact one, rounded once.
    t = tl.exp(tl.log(v.to(tl.float64)) / 78.84375)  # V^(1/m2)
    base = tl.maximum(t - 0.8359375, 0.0) / (18.8515625 - 18.6875 * t)  # c1, c2, c3 (exact binary fractions)
    lin = (10000.0 * tl.exp(tl.log(base) / 0.1593017578125)).to(tl.float32)  # base^(1/m1)
    return tl.minimum(tl.maximum(lin * EXPOSURE, 0.005), PEAK) + BLACK + REFL


@triton.jit
def _hlg_scene(v, HLG_A, HLG_B, HLG_C):
    return tl.where(v <= 0.5, v * v / 3.0, (tl.exp((v - HLG_C) / HLG_A) + HLG_B) / 12.0)


@triton.jit
def _dkl_kernel(X, CODES, OUT, HW, sn, sc, GAIN, BLACK, REFL, EXPOSURE, PEAK, FLOOR, GAMMA_M1, ZERO_POW, HLG_A,
                HLG_B, HLG_C, M00, M01, M02, M10, M11, M12, M20, M21, M22, UNIT: tl.constexpr, U8: tl.constexpr,
                EOTF: tl.constexpr, BLOCK: tl.constexpr):
    n = tl.program_id(1).to(tl.int64)
    p = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = p < HW
    x = X + n * sn + p
    v0 = _load(x, CODES, ok, U8, EOTF)
    v1 = _load(x + sc, CODES, ok, U8, EOTF)
    v2 = _load(x + 2 * sc, CODES, ok, U8, EOTF)
    if EOTF == 0:  # sRGB
        l0 = _srgb(v0, GAIN, BLACK, REFL, EXPOSURE, UNIT)
        l1 = _srgb(v1, GAIN, BLACK, REFL, EXPOSURE, UNIT)
        l2 = _srgb(v2, GAIN, BLACK, REFL, EXPOSURE, UNIT)
    elif EOTF == 1:  # PQ
        l0 = _pq(v0, BLACK, REFL, EXPOSURE, PEAK)
        l1 = _pq(v1, BLACK, REFL, EXPOSURE, PEAK)
        l2 = _pq(v2, BLACK, REFL, EXPOSURE, PEAK)
    elif EOTF == 2:  # HLG: inverse OETF, then the OOTF on the BT.2020 luminance of the pixel
        e0 = _hlg_scene(v0, HLG_A, HLG_B, HLG_C)
        e1 = _hlg_scene(v1, HLG_A, HLG_B, HLG_C)
        e2 = _hlg_scene(v2, HLG_A, HLG_B, HLG_C)
        ys = 0.2627 * e0 + 0.6780 * e1 + 0.0593 * e2
        ootf = tl.where(ys > 0.0, _pow(ys, GAMMA_M1), ZERO_POW)  # ZERO_POW = 0^(gamma - 1) as torch.pow gives it
        l0 = _relative(ootf * e0, GAIN, BLACK, REFL, EXPOSURE, UNIT)
        l1 = _relative(ootf * e1, GAIN, BLACK, REFL, EXPOSURE, UNIT)
        l2 = _relative(ootf * e2, GAIN, BLACK, REFL, EXPOSURE, UNIT)
    else:  # linear cd/m²
        l0 = tl.minimum(tl.maximum(v0 * EXPOSURE, FLOOR), PEAK) + REFL
        l1 = tl.minimum(tl.maximum(v1 * EXPOSURE, FLOOR), PEAK) + REFL
        l2 = tl.minimum(tl.maximum(v2 * EXPOSURE, FLOOR), PEAK) + REFL
    out = OUT + n * 3 * HW + p
    tl.store(out, l0 * M00 + l1 * M01 + l2 * M02, mask=ok)
    tl.store(out + HW, l0 * M10 + l1 * M11 + l2 * M12, mask=ok)
    tl.store(out + 2 * HW, l0 * M20 + l1 * M21 + l2 * M22, mask=ok)


@cached(maxsize=8)
def _code_values(device: torch.device) -> torch.Tensor:
    """sRGB value of each uint8 code, float32, formed on ``device`` exactly as the metric's input conversion
    (``code.to(float32) / 255.0``; CUDA multiplies by the reciprocal, the CPU divides)."""
    return torch.arange(256, device=device).to(torch.uint8).to(torch.float32) / 255.0


def _zero_pow(exponent: float) -> float:
    """0^exponent as torch.pow gives it (0, 1 or inf)."""
    return 0.0 if exponent > 0 else (1.0 if exponent == 0 else math.inf)


@cached(maxsize=32)
def _launcher(n: int, hw: int, sn: int, sc: int, peak: float, black: float, refl: float, exposure: float,
              rgb2xyz: tuple, u8: bool, eotf: int, hlg_gamma: float) -> tuple[Launcher, tuple]:
    m = dkl_matrix(tuple(rgb2xyz[3 * r:3 * r + 3] for r in range(3)), torch.empty(0, dtype=torch.float32))
    launch = Launcher(_dkl_kernel, (triton.cdiv(hw, _BLOCK), n), num_warps=4)
    # Scalars formed in double and rounded once, as the twin's Python scalar arithmetic does:
    # (peak - black), the linear floor max(0.005, black) and gamma - 1.
    floor = max(PQ_MIN_LUMINANCE, black)
    return launch, (hw, sn, sc, peak - black, black, refl, exposure, peak, floor, hlg_gamma - 1,
                    _zero_pow(hlg_gamma - 1), HLG_A, HLG_B, HLG_C, *(float(v) for v in m.reshape(-1)),
                    exposure == 1, u8, eotf, _BLOCK)


@cvvdp_linear_dkl.triton_launcher
def cvvdp_linear_dkl_fwd(rgb: torch.Tensor, peak_luminance: float, black_level: float, reflected: float,
                         exposure: float, rgb2xyz: list[float], eotf: int, hlg_gamma: float) -> torch.Tensor:
    """DKL d65 (N, 3, H, W) float32 of ``rgb`` (N, 3, H, W) encoded with EOTF ``eotf`` (index into
    :data:`~.data.EOTFS`; sRGB floating in [0, 1] or uint8 codes, PQ/HLG floating in [0, 1], linear cd/m²)."""
    u8 = rgb.dtype == torch.uint8
    rgb = (rgb if u8 or rgb.dtype == torch.float32 else rgb.float()).contiguous()
    n, c, h, w = rgb.shape
    if c != 3 or len(rgb2xyz) != 9 or eotf not in range(len(EOTFS)) or (u8 and eotf != 0):
        raise ValueError(f"cvvdp_linear_dkl: rgb (N, 3, H, W) (uint8 for sRGB only), 9 rgb2xyz entries and an EOTF "
                         f"index < {len(EOTFS)}; got {tuple(rgb.shape)} {rgb.dtype}, eotf {eotf}")
    launch, tail = _launcher(n, h * w, rgb.stride(0), rgb.stride(1), float(peak_luminance), float(black_level),
                             float(reflected), float(exposure), tuple(float(v) for v in rgb2xyz), u8, int(eotf),
                             float(hlg_gamma))
    out = torch.empty((n, 3, h, w), dtype=torch.float32, device=rgb.device)
    launch(rgb, _code_values(rgb.device), out, *tail)
    return out
