"""PyTorch twin of the XYB colour transform of SSIMULACRA2 (libjxl's ``ToXYB`` plus SSIMULACRA2's "make positive").

    srgb_to_linear_ref(v)          sRGB-encoded [0, 1] -> linear sRGB (libjxl's rational approximation of the EOTF)
    linear_to_xyb_ref(rgb)         linear sRGB (N, 3, H, W) -> XYB (N, 3, H, W), shifted to about 0..1

The reference computes in float32 with fused multiply-adds (FMA) where its SIMD code uses them. A float32 input is
computed exactly that way here (each FMA is evaluated in float64 and rounded once to float32: exact except when
the float64 sum lands on a float32 rounding midpoint, about 1 case in 2**29). A float64 input runs the same
formulas in float64 without intermediate rounding: the smooth variant, used for gradient checks.

Opsin absorbance (rows of M, float32), bias b = 0.0037930732552754493, for each pixel::

    m = cbrt(max(0, M·rgb + b)) - cbrt(b)                 (cbrt: libjxl's Newton cube root, ~6 ulp)
    X = (m0 - m1)/2,  Y = (m0 + m1)/2,  B = m2
    make positive:  X' = 14·X + 0.42,  Y' = Y + 0.01,  B' = (B - Y) + 0.55
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["OPSIN_BIAS", "OPSIN_MATRIX", "fma", "linear_to_xyb_ref", "srgb_to_linear_ref", "srgb_u8_linear_table",
           "srgb_u8_to_linear_ref", "uint8_to_unit_ref"]


def _f32(value: float) -> float:
    return float(np.float32(value))


# Opsin absorbance matrix as libjxl stores it: float32, rows summing to 1 in float32 arithmetic.
_M02, _M00, _M12, _M10 = _f32(0.078), _f32(0.30), _f32(0.078), _f32(0.23)
_M20, _M21 = _f32(0.24342268924547819), _f32(0.20476744424496821)
OPSIN_MATRIX = (
    (_M00, _f32(np.float32(1.0) - np.float32(_M02) - np.float32(_M00)), _M02),
    (_M10, _f32(np.float32(1.0) - np.float32(_M12) - np.float32(_M10)), _M12),
    (_M20, _M21, _f32(np.float32(1.0) - np.float32(_M20) - np.float32(_M21))),
)
OPSIN_BIAS = _f32(0.0037930732552754493)
NEG_CBRT_BIAS = -_f32(np.cbrt(np.float64(OPSIN_BIAS)))  # = -cbrtf(b) (glibc's cbrtf gives the same float)

# libjxl's sRGB -> linear: x/12.92 below 0.04045, else P(x)/Q(x) (degree 4 each, coefficients low to high)
SRGB_P = tuple(_f32(v) for v in (2.200248328e-04, 1.043637593e-02, 1.624820318e-01, 7.961564959e-01, 8.210152774e-01))
SRGB_Q = tuple(_f32(v) for v in (2.631846970e-01, 1.076976492e+00, 4.987528350e-01, -5.512498495e-02,
                                 6.521209011e-03))
SRGB_THRESHOLD = _f32(0.04045)
SRGB_LOW_INV = _f32(np.float32(1.0) / np.float32(12.92))
UINT8_SCALE = _f32(1.0 / 255)  # libjxl loads 8-bit samples as float(1/255) * v

# Newton cube root (libjxl CubeRootAndAdd): int32 constants of the initial guess, float32 thirds
_CBRT_EXP_BIAS, _CBRT_EXP_MUL = 0x54800000, 0x002AAAAA
_THIRD, _FOUR_THIRDS = _f32(np.float32(1.0) / np.float32(3)), _f32(np.float32(4.0) / np.float32(3))
_X_OFFSET, _Y_OFFSET, _B_OFFSET = _f32(0.42), _f32(0.01), _f32(0.55)  # SSIMULACRA2's float32 offsets


def fma(a, b, c):
    """a·b + c rounded once in the dtype of the tensor arguments (float32: via float64, see the module doc)."""
    ref = next(t for t in (a, b, c) if isinstance(t, torch.Tensor))
    if ref.dtype == torch.float32:
        as64 = [t.double() if isinstance(t, torch.Tensor) else t for t in (a, b, c)]
        return (as64[0] * as64[1] + as64[2]).float()
    return a * b + c


def uint8_to_unit_ref(image: torch.Tensor) -> torch.Tensor:
    """8-bit samples as the reference loads them: float32(1/255) · v in float32."""
    return image.to(torch.float32) * UINT8_SCALE


def srgb_to_linear_ref(v: torch.Tensor) -> torch.Tensor:
    """libjxl's sRGB transfer function (``TF_SRGB::DisplayFromEncoded``), odd-symmetric, any shape.

    float32 input: bit-faithful to the reference (Horner with FMA, IEEE division); float64: the same formula."""
    x = v.abs()
    yp = torch.full_like(x, SRGB_P[4])
    yq = torch.full_like(x, SRGB_Q[4])
    for k in range(3, -1, -1):
        yp = fma(yp, x, SRGB_P[k])
        yq = fma(yq, x, SRGB_Q[k])
    poly = yp / yq
    # the linear segment straight from v (odd, and differentiable at 0, unlike |v|)
    return torch.where(x > SRGB_THRESHOLD, torch.where(v < 0, -poly, poly), v * SRGB_LOW_INV)


_U8_LINEAR: dict[torch.device, torch.Tensor] = {}


def srgb_u8_linear_table(device: torch.device) -> torch.Tensor:
    """(256,) float32 on ``device``: ``srgb_to_linear_ref(uint8_to_unit_ref(code))`` of every code, computed once
    per device."""
    table = _U8_LINEAR.get(device)
    if table is None:
        table = _U8_LINEAR[device] = srgb_to_linear_ref(
            uint8_to_unit_ref(torch.arange(256, dtype=torch.uint8))).to(device)
    return table


def srgb_u8_to_linear_ref(codes: torch.Tensor) -> torch.Tensor:
    """uint8 sRGB samples -> linear float32: ``srgb_to_linear_ref(uint8_to_unit_ref(codes))``, looked up in that
    function's values for the 256 codes (:func:`srgb_u8_linear_table`: the same bits, without 16 float64 passes
    over the image)."""
    return srgb_u8_linear_table(codes.device)[codes.long()]


def _cube_root_guess(x: torch.Tensor) -> torch.Tensor:
    """Initial guess of 1/cbrt(x) from the float32 exponent bits (constant: carries no gradient)."""
    bits = x.detach().to(torch.float32).contiguous().view(torch.int32)
    guess = torch.where(bits == 0, torch.zeros_like(bits), _CBRT_EXP_BIAS - (bits >> 23) * _CBRT_EXP_MUL)
    return guess.view(torch.float32).to(x.dtype)


def cube_root_and_add(x: torch.Tensor, add: float) -> torch.Tensor:
    """cbrt(x) + add for x >= 0: three Newton steps on 1/cbrt(x), a final step, then r²·x + add (FMA)."""
    x_third = x * _THIRD
    r = _cube_root_guess(x)
    for _ in range(3):
        r2 = r * r
        r = fma(-x_third, r2 * r2, r * _FOUR_THIRDS)
    r2 = r * r
    r = fma(_THIRD, fma(-x, r2 * r2, r), r)
    return fma(r * r, x, add)


def linear_to_xyb_ref(rgb: torch.Tensor, make_positive: bool = True) -> torch.Tensor:
    """Linear sRGB (N, 3, H, W) (intensity target 255: premultiplier 1) -> XYB (N, 3, H, W) in rgb's dtype.

    ``make_positive`` applies SSIMULACRA2's offsets (X' = 14X + 0.42, Y' = Y + 0.01, B' = B - Y + 0.55)."""
    r, g, b = rgb.unbind(1)
    mixed = []
    for row in OPSIN_MATRIX:
        m = fma(row[0], r, fma(row[1], g, fma(row[2], b, OPSIN_BIAS)))
        mixed.append(cube_root_and_add(m.clamp_min(0.0), NEG_CBRT_BIAS))
    x = (mixed[0] - mixed[1]) * 0.5
    y = (mixed[0] + mixed[1]) * 0.5
    z = mixed[2]
    if make_positive:
        # scalar C++ (no FMA): every operation rounds
        z = (z - y) + _B_OFFSET
        x = x * 14.0 + _X_OFFSET
        y = y + _Y_OFFSET
    return torch.stack((x, y, z), dim=1)
