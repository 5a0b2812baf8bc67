"""ColorVideoVDP's display model per EOTF (pycvvdp 0.5.7's ``vvdp_display_photo_eotf``): the specification.

Input value V (any shape with the colour channels on dim 1 for HLG) -> light emitted by the display, absolute linear
RGB in cd/m². With ``Y_black = Y_peak / contrast``, ``Y_refl = E_ambient / pi * k_refl`` and ``e = exposure``:

* ``sRGB``: V in [0, 1] (clamped), ``(Y_peak - Y_black) * s + Y_black + Y_refl`` with ``s = srgb2lin(V)``, or
  ``s = clip(srgb2lin(V) * e, 0, 1)`` when ``e != 1``.
* ``PQ`` (SMPTE ST 2084, absolute): V in [0, 1] (clamped), ``clip(pq2lin(V) * e, 0.005, Y_peak) + Y_black + Y_refl``
  with ``pq2lin(V) = 10000 (max(V^(1/m2) - c1, 0) / (c2 - c3 V^(1/m2)))^(1/m1)``: the display clips what it cannot
  show (pycvvdp's hard clip) and adds its black level on top.
* ``HLG`` (BT.2100, relative): V in [0, 1] (clamped); inverse OETF per channel ``E = V² / 3`` (V <= 1/2) or
  ``(exp((V - c) / a) + b) / 12``, then the OOTF ``E * Y_s^(gamma - 1)`` with ``Y_s`` the BT.2020 luminance of E
  (coefficients 0.2627, 0.6780, 0.0593, whatever the model's primaries) and gamma the display's system gamma;
  then as sRGB: ``(Y_peak - Y_black) * s + Y_black + Y_refl`` (``s`` clipped to [0, 1] after ``e`` when ``e != 1``).
* ``linear``: V is absolute linear RGB in cd/m², not clamped: ``clip(V * e, max(0.005, Y_black), Y_peak) + Y_refl``.

Each step is written in the order pycvvdp evaluates it (float32 tensors, Python-float constants), so the CPU
values are pycvvdp's bit for bit; the Triton display-model kernel follows the same steps.
"""

from __future__ import annotations

import math

import torch

__all__ = ["HLG_A", "HLG_B", "HLG_C", "HLG_LUMA", "PQ_C1", "PQ_C2", "PQ_C3", "PQ_M1", "PQ_M2", "PQ_MAX",
           "PQ_MIN_LUMINANCE", "emitted_light_ref", "hlg_to_linear_ref", "pq_to_linear_ref", "srgb_to_linear_ref"]

# SMPTE ST 2084 constants (m1 = 2610/16384, m2 = 2523/4096 * 128, c1 = 3424/4096, c2, c3 = 2413, 2392 / 4096 * 32)
PQ_M1 = 2610 / 16384
PQ_M2 = 2523 / 4096 * 128
PQ_C1 = 3424 / 4096
PQ_C2 = 2413 / 4096 * 32
PQ_C3 = 2392 / 4096 * 32
PQ_MAX = 10000.0  # cd/m² at V = 1
PQ_MIN_LUMINANCE = 0.005  # pycvvdp's lower clip of PQ and linear light (cd/m²)

# BT.2100 HLG inverse OETF and the OOTF's luminance weights (BT.2020 primaries)
HLG_A = 0.17883277
HLG_B = 1 - 4 * HLG_A
HLG_C = 0.5 - HLG_A * math.log(4 * HLG_A)
HLG_LUMA = (0.2627, 0.6780, 0.0593)


def srgb_to_linear_ref(v: torch.Tensor) -> torch.Tensor:
    """sRGB-encoded V in [0, 1] -> relative linear values in [0, 1]."""
    return torch.where(v > 0.04045, ((v + 0.055) / 1.055) ** 2.4, v / 12.92)


def pq_to_linear_ref(v: torch.Tensor) -> torch.Tensor:
    """PQ code values V in [0, 1] -> absolute linear values (cd/m², 0..10000)."""
    t = v ** (1 / PQ_M2)
    return PQ_MAX * ((t - PQ_C1).clamp(min=0) / (PQ_C2 - PQ_C3 * t)) ** (1 / PQ_M1)


def hlg_to_linear_ref(rgb: torch.Tensor, gamma: float) -> torch.Tensor:
    """HLG code values (N, 3, ...) in [0, 1] -> relative display light (N, 3, ...) in [0, 1]: inverse OETF, then the
    OOTF with system gamma ``gamma`` on the BT.2020 luminance."""
    scene = torch.where(rgb <= 0.5, rgb ** 2 / 3.0, (torch.exp((rgb - HLG_C) / HLG_A) + HLG_B) / 12.0)
    luma = HLG_LUMA[0] * scene[:, 0] + HLG_LUMA[1] * scene[:, 1] + HLG_LUMA[2] * scene[:, 2]
    return (luma ** (gamma - 1)).unsqueeze(1) * scene


def emitted_light_ref(v: torch.Tensor, display) -> torch.Tensor:
    """Light (cd/m², linear RGB of the display's primaries) a display emits for input ``v`` (N, 3, ...) encoded
    with its EOTF (``display.eotf``, sRGB when absent); ``display`` is a :class:`~.data.CVVDPDisplay` (or has its
    fields)."""
    eotf = getattr(display, "eotf", "sRGB")
    y_black, y_refl, exposure = display.black_level, display.reflected, display.exposure
    y_peak = display.peak_luminance
    if eotf == "linear":
        return (v * exposure).clip(max(PQ_MIN_LUMINANCE, y_black), y_peak) + y_refl
    v = v.clamp(0.0, 1.0)  # pycvvdp clamps display-encoded values (with a warning)
    if eotf == "PQ":
        return (pq_to_linear_ref(v) * exposure).clip(PQ_MIN_LUMINANCE, y_peak) + y_black + y_refl
    if eotf == "sRGB":
        rel = srgb_to_linear_ref(v)
    elif eotf == "HLG":
        rel = hlg_to_linear_ref(v, display.hlg_gamma)
    else:
        raise ValueError(f"cvvdp: EOTF {eotf!r} is not implemented")
    if exposure == 1:
        return (y_peak - y_black) * rel + y_black + y_refl
    return (y_peak - y_black) * (rel * exposure).clip(0.0, 1.0) + y_black + y_refl
