"""PyTorch twin of Butteraugli as libjxl 0.7 computes it (``butteraugli_main``, ``JxlButteraugliCompute``):
the specification, the CPU path and the test oracle of :func:`fusedsim.butteraugli`.

Pipeline for one (reference, distorted) pair of linear-sRGB images (N, 3, H, W) in [0, 1]:

1. Opsin dynamics: ``rgb · intensity_target`` is mixed into three cone-like channels, multiplied by a
   sensitivity ``Gamma(m)/m`` taken from the 5-tap-blurred image (``Gamma = 13.34·log2(m + 9.97) - 23.16``
   with libjxl's rational log2 approximation, emulated),
   clamped below, and turned into X = m0 - m1, Y = m0 + m1, B = m2.
2. Frequency separation (per image): LF = blur σ 7.16; MF = blur σ 3.22 of the rest; HF = blur σ 1.56 of what
   remains; UHF = the remainder (X and Y only), with dead zones, soft clamps and X suppressed by Y at HF.
3. Differences: Malta line filters on UHF/HF/MF (X and Y), asymmetric L2 on HF (``hf_asymmetry`` weighs new
   artefacts against lost detail), L2 on MF and on LF (DC), and a masking-activity difference.
4. Masking from the reference's HF/UHF activity (blur σ 2.7, fuzzy erosion) scales the AC and DC sums; the map
   is ``sqrt(dc_mask·ΣDC + ac_mask·ΣAC)``.
5. The same on the 2×2-averaged pair (when both sides stay >= 8 px) is mixed in: ``0.85·d + 0.5·up2(d_half)``.

Scores: the max-norm is the map's maximum; the CLI's "3-norm" is ``mean_p (mean d^p)^(1/p)`` over p = 3, 6, 12
(float64). Constants libjxl stores as float32 are rounded to float32 here; the arithmetic runs in the input dtype
(float64 for the parity tests). The blur and the Malta filter are passed in as callables so that the GPU path can
run the same pipeline on the Triton ops (``fusedsim.ops.butteraugli_*``); their defaults are the twins.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F

from fusedsim.reference.butteraugli_filters_ref import (
    butteraugli_blur_ref,
    butteraugli_malta_ref,
    fuzzy_erosion_ref,
)

__all__ = [
    "ButteraugliFilters", "ButteraugliReference", "PsychoImage", "ReferenceLevel", "butteraugli_diffmap_ref",
    "butteraugli_norms_ref", "butteraugli_ref", "diffmap_prepared_ref", "opsin_dynamics_ref",
    "prepare_reference_ref", "separate_frequencies_ref", "srgb_to_linear_ref", "subsample2x_ref",
]


def _f32(value: float) -> float:
    return float(np.float32(value))


MIN_SIZE = 8  # libjxl returns an all-zero map below this (and skips the half-resolution pass below it)

# Opsin absorbance: rows of the mixing matrix and the bias per channel.
_MIX = ((0.29956550340058319, 0.63373087833825936, 0.077705617820981968, 1.7557483643287353),
        (0.22158691104574774, 0.69391388044116142, 0.0987313588422, 1.7557483643287353),
        (0.02, 0.02, 0.20480129041026129, 12.226454707163354))
_MIX32 = tuple(tuple(_f32(v) for v in row) for row in _MIX)
_GAMMA_MUL = _f32(float(np.float32(19.245013259874995)) * 0.693147180559945)
_GAMMA_ADD = _f32(-23.16046239805755)
_GAMMA_BIAS = _f32(9.9710635769299145)
_MIN_SENS = _f32(1e-4)
# libjxl's FastLog2f: a (2,2) rational approximation of log2(1 + m) on the mantissa reduced to [2/3, 4/3)
_LOG2_P = (-1.8503833400518310e-06, 1.4287160470083755e+00, 7.4245873327820566e-01)
_LOG2_Q = (9.9032814277590719e-01, 1.0096718572241148e+00, 1.7409343003366853e-01)

SIGMA_OPSIN, SIGMA_LF, SIGMA_HF, SIGMA_UHF, SIGMA_MASK = 1.2, 7.15593339443, 3.22489901262, 1.56416327805, 2.7

# Malta filters: (weight, norm1) per band and channel; mulli per variant.
_MULLI_HF, _MULLI_LF = 0.39905817637, 0.611612573796
_W_UHF_Y, _N_UHF_Y, _W_UHF_X, _N_UHF_X = 1.10039032555, 71.7800275169, 173.5, 5.0
_W_HF_Y, _N_HF_Y, _W_HF_X, _N_HF_X = 18.7237414387, 4498534.45232, 6923.99476109, 8051.15833247
_W_MF_Y, _N_MF_Y, _W_MF_X, _N_MF_X = 37.0819870399, 130262059.556, 8246.75321353, 1009002.70582
# L2 weights: HF (X, Y, B), MF (X, Y, B), LF (X, Y, B).
_WMUL = (400.0, 1.50815703118, 0.0, 2150.0, 10.6195433239, 16.2176043152, 29.2353797994, 0.844626970982,
         0.703646627719)

_MASK_MUL = _f32(6.19424080439)
_MASK_BIAS = float(np.float32(_MASK_MUL) * np.float32(12.61050594197))
_MASK_SQRT_BIAS = float(np.sqrt(np.float32(_MASK_BIAS)))
_GLOBAL_SCALE = float(np.float32(1.0 / float(np.float32(17.8) * np.float32(0.79079917404))))


class ButteraugliFilters(NamedTuple):
    """The heavy filters: ``blur(x (N, C, H, W), sigma)``, ``malta(lum0, lum1, w_0gt1, w_0lt1, norm1, mulli,
    low_freq)`` and ``erosion(x)`` on (N, H, W) planes; the twins by default, the Triton ops on the GPU path."""

    blur: Callable[..., torch.Tensor] = butteraugli_blur_ref
    malta: Callable[..., torch.Tensor] = butteraugli_malta_ref
    erosion: Callable[[torch.Tensor], torch.Tensor] = fuzzy_erosion_ref


TWIN_FILTERS = ButteraugliFilters()


class PsychoImage(NamedTuple):
    """Frequency bands of one image: lf (N, 3, H, W) in "vals" space, mf (N, 3, H, W), hf and uhf (N, 2, H, W)
    (X and Y only)."""

    lf: torch.Tensor
    mf: torch.Tensor
    hf: torch.Tensor
    uhf: torch.Tensor


class ReferenceLevel(NamedTuple):
    """The reference side of one resolution: its bands, its blurred HF activity and its masking map (N, H, W)."""

    psycho: PsychoImage
    activity: torch.Tensor
    mask: torch.Tensor


class ButteraugliReference(NamedTuple):
    """A prepared reference: the full-resolution level and the half-resolution one (None below 16 px)."""

    full: ReferenceLevel
    half: ReferenceLevel | None
    intensity_target: float


# --------------------------------------------------------------------------------------------- helpers
class _Sqrt0(torch.autograd.Function):
    """sqrt whose gradient at 0 is 0 (not inf·0 = NaN): identical pixels give zero map values."""

    @staticmethod
    def forward(ctx, x):
        y = torch.sqrt(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return torch.where(y > 0, grad * 0.5 / torch.where(y > 0, y, torch.ones_like(y)), torch.zeros_like(y))


def _sqrt0(x: torch.Tensor) -> torch.Tensor:
    return _Sqrt0.apply(x) if x.requires_grad else torch.sqrt(x)


class _Root0(torch.autograd.Function):
    """x^(1/p) of x >= 0 with gradient 0 at 0 (a zero map: identical images)."""

    @staticmethod
    def forward(ctx, x, p):
        y = x ** (1.0 / p)
        ctx.save_for_backward(x, y)
        ctx.p = p
        return y

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        safe = torch.where(x > 0, x, torch.ones_like(x))
        return torch.where(x > 0, grad * y / (ctx.p * safe), torch.zeros_like(x)), None


def _root0(x: torch.Tensor, p: int) -> torch.Tensor:
    return _Root0.apply(x, p) if x.requires_grad else x ** (1.0 / p)


def _remove_range(x: torch.Tensor, w: float) -> torch.Tensor:
    """Dead zone: x - w above w, x + w below -w, 0 in between."""
    w = _f32(w)
    return torch.where(x > w, x - w, torch.where(x < -w, x + w, torch.zeros_like(x)))


def _amplify_range(x: torch.Tensor, w: float) -> torch.Tensor:
    """x + w above w, x - w below -w, 2x in between."""
    w = _f32(w)
    return torch.where(x > w, x + w, torch.where(x < -w, x - w, x + x))


def _maximum_clamp(x: torch.Tensor, maxval: float) -> torch.Tensor:
    """Soft clamp: beyond ±maxval the excess is scaled by 0.724216145665."""
    mul, m = _f32(0.724216145665), _f32(maxval)
    return torch.where(x < -m, (x + m) * mul - m, torch.where(x >= m, (x - m) * mul + m, x))


def srgb_to_linear_ref(srgb: torch.Tensor) -> torch.Tensor:
    """The exact piecewise sRGB EOTF, elementwise on values in [0, 1]."""
    return torch.where(srgb <= 0.04045, srgb / 12.92, ((srgb + 0.055) / 1.055).clamp_min(0) ** 2.4)


def subsample2x_ref(rgb: torch.Tensor) -> torch.Tensor:
    """2×2 mean of (N, C, H, W) -> (N, C, ceil(H/2), ceil(W/2)), averaging only the pixels that exist."""
    return F.avg_pool2d(rgb, 2, ceil_mode=True, count_include_pad=False)


def fast_log2_ref(x: torch.Tensor) -> torch.Tensor:
    """libjxl's FastLog2f of positive values (error ~4e-6 against log2): the exponent is taken from the float32
    bits as libjxl does, the mantissa ``x·2^-e - 1`` (exact, differentiable) is fed to the rational polynomial."""
    bits = x.detach().float().view(torch.int32)
    exponent = (bits - 0x3F2AAAAB) >> 23  # 0x3F2AAAAB is 2/3 in float32: the mantissa lands in [2/3, 4/3)
    m = x * torch.pow(2.0, (-exponent).to(x.dtype)) - 1.0  # exact scaling (ldexp has no gradient)
    p = (_LOG2_P[2] * m + _LOG2_P[1]) * m + _LOG2_P[0]
    q = (_LOG2_Q[2] * m + _LOG2_Q[1]) * m + _LOG2_Q[0]
    return p / q + exponent.to(x.dtype)


def _mix(rgb: torch.Tensor) -> list[torch.Tensor]:
    r, g, b = rgb.unbind(1)
    return [m0 * r + (m1 * g + (m2 * b + bias)) for m0, m1, m2, bias in _MIX32]


# ---------------------------------------------------------------------------------------------- stages
def opsin_dynamics_ref(rgb: torch.Tensor, intensity_target: float,
                       filters: ButteraugliFilters = TWIN_FILTERS) -> torch.Tensor:
    """Linear sRGB (N, 3, H, W) in [0, 1] -> Butteraugli's XYB (N, 3, H, W)."""
    it = _f32(intensity_target)
    pre = _mix(filters.blur(rgb, SIGMA_OPSIN) * it)
    cur = _mix(rgb * it)
    out = []
    for c in range(3):
        p = torch.maximum(pre[c], pre[c].new_tensor(max(_MIX32[c][3], _MIN_SENS)))
        gamma = _GAMMA_MUL * fast_log2_ref(p.clamp_min(0) + _GAMMA_BIAS) + _GAMMA_ADD
        sens = torch.clamp_min(gamma / p, _MIN_SENS)
        out.append(torch.clamp_min(cur[c] * sens, _MIX32[c][3]))
    return torch.stack([out[0] - out[1], out[0] + out[1], out[2]], dim=1)


def separate_frequencies_ref(xyb: torch.Tensor, filters: ButteraugliFilters = TWIN_FILTERS) -> PsychoImage:
    """XYB (N, 3, H, W) -> its :class:`PsychoImage` bands."""
    blur = filters.blur
    lf = blur(xyb, SIGMA_LF)
    rest = xyb - lf
    mf = blur(rest, SIGMA_HF)
    hf = rest[:, :2] - mf[:, :2]
    mf_x = _remove_range(mf[:, 0], 0.29)
    mf_y = _amplify_range(mf[:, 1], 0.1)
    # X is suppressed where Y has high-frequency energy
    s = _f32(0.653020556257)
    hf_y0 = hf[:, 1]
    hf_x0 = ((_f32(46.0) / (hf_y0 * hf_y0 + _f32(46.0))) * _f32(1.0 - 0.653020556257) + s) * hf[:, 0]
    hf_pre = torch.stack([hf_x0, hf_y0], dim=1)
    hf_blur = blur(hf_pre, SIGMA_UHF)
    uhf_x = _remove_range(hf_pre[:, 0] - hf_blur[:, 0], 0.04)
    hf_x = _remove_range(hf_blur[:, 0], 1.5)
    hf_y = _maximum_clamp(hf_blur[:, 1], 28.4691806922)
    uhf_y = _maximum_clamp(hf_pre[:, 1] - hf_y, 5.19175294647) * _f32(2.69313763794)
    hf_y = _amplify_range(hf_y * _f32(2.155), 0.132)
    lx, ly, lb = lf.unbind(1)
    vals = torch.stack([lx * _f32(32.2217497012), ly * _f32(13.7697791434),
                        (_f32(-0.362267051518) * ly + lb) * _f32(47.504615728)], dim=1)
    return PsychoImage(vals, torch.stack([mf_x, mf_y, mf[:, 2]], dim=1), torch.stack([hf_x, hf_y], dim=1),
                       torch.stack([uhf_x, uhf_y], dim=1))


def hf_activity_ref(p: PsychoImage, filters: ButteraugliFilters = TWIN_FILTERS) -> torch.Tensor:
    """Blurred local HF/UHF activity of one image (N, H, W): the input of masking."""
    x = (p.uhf[:, 0] + p.hf[:, 0]) * _f32(2.5)
    y = p.uhf[:, 1] * _f32(0.4) + p.hf[:, 1] * _f32(0.4)
    act = _sqrt0(x * x + y * y)
    act = torch.sqrt(_MASK_MUL * act.abs() + _MASK_BIAS) - _MASK_SQRT_BIAS
    return filters.blur(act.unsqueeze(1), SIGMA_MASK).squeeze(1)


def _mask_y(delta: torch.Tensor, offset: float, scaler: float, mul: float) -> torch.Tensor:
    v = _GLOBAL_SCALE * (1.0 + mul / (scaler * delta + offset))
    return v * v


def _l2_asymmetric(v0: torch.Tensor, v1: torch.Tensor, w_gt: float, w_lt: float) -> torch.Tensor:
    """Symmetric ``w_gt·(v0-v1)²`` plus ``w_lt·excess²`` where v1 leaves [0.4|v0|, |v0|] on v0's side."""
    diff = v0 - v1
    fabs0 = v0.abs()
    small = _f32(0.4) * fabs0
    zero = torch.zeros_like(v0)
    neg = torch.where(v1 > -small, v1 + small, torch.where(v1 < -fabs0, -v1 - fabs0, zero))
    pos = torch.where(v1 < small, small - v1, torch.where(v1 > fabs0, v1 - fabs0, zero))
    v = torch.where(v0 < 0, neg, pos)
    return diff * diff * _f32(_f32(w_gt) * 0.8) + _f32(_f32(w_lt) * 0.8) * (v * v)


def prepare_level_ref(rgb: torch.Tensor, intensity_target: float,
                      filters: ButteraugliFilters = TWIN_FILTERS) -> ReferenceLevel:
    """The reference side of one resolution from linear sRGB (N, 3, H, W)."""
    psycho = separate_frequencies_ref(opsin_dynamics_ref(rgb, intensity_target, filters), filters)
    activity = hf_activity_ref(psycho, filters)
    return ReferenceLevel(psycho, activity, filters.erosion(activity))


def diffmap_level_ref(ref: ReferenceLevel, rgb1: torch.Tensor, intensity_target: float, hf_asymmetry: float,
                      filters: ButteraugliFilters = TWIN_FILTERS) -> torch.Tensor:
    """Distance map (N, H, W) of the distorted linear sRGB ``rgb1`` (N, 3, H, W) against one prepared level."""
    p0 = ref.psycho
    p1 = separate_frequencies_ref(opsin_dynamics_ref(rgb1, intensity_target, filters), filters)
    hf_asym = _f32(hf_asymmetry)
    sqrt_asym = _f32(math.sqrt(hf_asym))
    malta = filters.malta
    ac_y = malta(p0.uhf[:, 1], p1.uhf[:, 1], _W_UHF_Y * hf_asym, _W_UHF_Y / hf_asym, _N_UHF_Y, _MULLI_HF, False)
    ac_x = malta(p0.uhf[:, 0], p1.uhf[:, 0], _W_UHF_X * hf_asym, _W_UHF_X / hf_asym, _N_UHF_X, _MULLI_HF, False)
    ac_y = ac_y + malta(p0.hf[:, 1], p1.hf[:, 1], _W_HF_Y * sqrt_asym, _W_HF_Y / sqrt_asym, _N_HF_Y, _MULLI_LF,
                        True)
    ac_x = ac_x + malta(p0.hf[:, 0], p1.hf[:, 0], _W_HF_X * sqrt_asym, _W_HF_X / sqrt_asym, _N_HF_X, _MULLI_LF,
                        True)
    ac_y = ac_y + malta(p0.mf[:, 1], p1.mf[:, 1], _W_MF_Y, _W_MF_Y, _N_MF_Y, _MULLI_LF, True)
    ac_x = ac_x + malta(p0.mf[:, 0], p1.mf[:, 0], _W_MF_X, _W_MF_X, _N_MF_X, _MULLI_LF, True)
    ac_x = ac_x + _l2_asymmetric(p0.hf[:, 0], p1.hf[:, 0], _WMUL[0] * hf_asym, _WMUL[0] / hf_asym)
    ac_y = ac_y + _l2_asymmetric(p0.hf[:, 1], p1.hf[:, 1], _WMUL[1] * hf_asym, _WMUL[1] / hf_asym)
    dmf = p0.mf - p1.mf
    dlf = p0.lf - p1.lf
    ac_x = ac_x + dmf[:, 0] ** 2 * _f32(_WMUL[3])
    ac_y = ac_y + dmf[:, 1] ** 2 * _f32(_WMUL[4])
    ac_b = dmf[:, 2] ** 2 * _f32(_WMUL[5])
    dc = [dlf[:, c] ** 2 * _f32(_WMUL[6 + c]) for c in range(3)]
    activity = hf_activity_ref(p1, filters)
    ac_y = ac_y + _f32(10.0) * (ref.activity - activity) ** 2
    mask = ref.mask
    ac_mask = _mask_y(mask, 0.829591754942, 0.451936922203, 2.5485944793)
    dc_mask = _mask_y(mask, 0.20025578522, 3.87449418804, 0.505054525019)
    total = (dc[0] * dc_mask + dc[1] * dc_mask + dc[2] * dc_mask) + (ac_x * ac_mask + ac_y * ac_mask
                                                                      + ac_b * ac_mask)
    return _sqrt0(total)


# ----------------------------------------------------------------------------------------------- whole
def prepare_reference_ref(ref_linear: torch.Tensor, intensity_target: float = 80.0,
                          filters: ButteraugliFilters = TWIN_FILTERS) -> ButteraugliReference:
    """Prepare a linear-sRGB reference (N, 3, H, W), H, W >= 8, for :func:`diffmap_prepared_ref`."""
    h, w = ref_linear.shape[-2:]
    if min(h, w) < MIN_SIZE:
        raise ValueError(f"butteraugli needs at least {MIN_SIZE} px per side; got {w}×{h}")
    full = prepare_level_ref(ref_linear, intensity_target, filters)
    half = None
    if min((h + 1) // 2, (w + 1) // 2) >= MIN_SIZE:
        half = prepare_level_ref(subsample2x_ref(ref_linear), intensity_target, filters)
    return ButteraugliReference(full, half, float(intensity_target))


def diffmap_prepared_ref(ref: ButteraugliReference, dist_linear: torch.Tensor, hf_asymmetry: float = 0.8,
                         filters: ButteraugliFilters = TWIN_FILTERS) -> torch.Tensor:
    """The distance map (N, H, W) of a linear-sRGB ``dist_linear`` (N, 3, H, W) against a prepared reference."""
    it = ref.intensity_target
    diffmap = diffmap_level_ref(ref.full, dist_linear, it, hf_asymmetry, filters)
    if ref.half is not None:
        sub = diffmap_level_ref(ref.half, subsample2x_ref(dist_linear), it, hf_asymmetry, filters)
        h, w = diffmap.shape[-2:]
        up = sub.repeat_interleave(2, dim=-2).repeat_interleave(2, dim=-1)[..., :h, :w]
        diffmap = diffmap * 0.85 + 0.5 * up
    return diffmap


def butteraugli_diffmap_ref(ref_linear: torch.Tensor, dist_linear: torch.Tensor, intensity_target: float = 80.0,
                            hf_asymmetry: float = 0.8,
                            filters: ButteraugliFilters = TWIN_FILTERS) -> torch.Tensor:
    """One-shot distance map (N, H, W) of linear-sRGB images (N, 3, H, W)."""
    ref = prepare_reference_ref(ref_linear, intensity_target, filters)
    return diffmap_prepared_ref(ref, dist_linear, hf_asymmetry, filters)


def butteraugli_norms_ref(diffmap: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(max-norm, CLI 3-norm) of maps (N, H, W), each (N,): the maximum, and the mean over p = 3, 6, 12 of
    ``(mean d^p)^(1/p)`` in float64."""
    d = diffmap.flatten(1)
    max_norm = d.amax(dim=1)
    d3 = d.double() ** 3
    norms = [_root0((d3 ** k).mean(dim=1), 3 * k) for k in (1, 2, 4)]
    return max_norm, (norms[0] + norms[1] + norms[2]) / 3.0


def butteraugli_ref(ref_srgb: torch.Tensor, dist_srgb: torch.Tensor, intensity_target: float = 80.0,
                    hf_asymmetry: float = 0.8) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Butteraugli of sRGB-encoded pairs (N, 3, H, W) in [0, 1], computed in their dtype: (max-norm (N,),
    3-norm (N,), distance map (N, H, W))."""
    diffmap = butteraugli_diffmap_ref(srgb_to_linear_ref(ref_srgb), srgb_to_linear_ref(dist_srgb),
                                      intensity_target, hf_asymmetry)
    return (*butteraugli_norms_ref(diffmap), diffmap)
