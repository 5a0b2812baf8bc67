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
(float64 for the parity tests). Every step is a hook of :class:`ButteraugliFilters`: the heavy filters (blur, Malta,
erosion) and the element-wise stages between them (sRGB decoding, opsin dynamics, the frequency-separation steps,
the final combination), each a function of whole tensors so that the GPU path runs the same pipeline on the
Triton ops (``fusedsim.ops.butteraugli_*``, one fused kernel per stage); the defaults are the twins below, which
are those ops' specifications.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F

from fusedsim.core.state import cached
from fusedsim.families.butteraugli.filters_twin import (
    butteraugli_blur_ref,
    butteraugli_malta_add_ref,
    butteraugli_malta_ref,
    fuzzy_erosion_ref,
)

__all__ = [
    "BANDS", "ButteraugliFilters", "ButteraugliReference", "PsychoImage", "ReferenceLevel", "bands_ref",
    "butteraugli_diffmap_ref", "butteraugli_linear_ref", "butteraugli_norm_sums_ref", "butteraugli_norms_ref",
    "butteraugli_ref",
    "combine_constants", "diffmap_combine_ref", "diffmap_prepared_ref", "frequency_rest_ref", "hf_pre_ref",
    "opsin_dynamics_ref", "opsin_xyb_ref", "prepare_reference_ref", "separate_frequencies_ref",
    "srgb_table_ref", "srgb_to_linear_ref", "subsample2x_ref",
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


# ------------------------------------------------------------------------------- element-wise stages (op twins)
# Each is the twin of one fused Triton op (``fusedsim.families.butteraugli.stages_kernel``): same signature, same output.

BANDS = 11
"""Planes of the (N, 11, H, W) band tensor of one image: 0-2 LF "vals" (X, Y, B), 3-5 MF (X, Y, B), 6-7 HF (X, Y),
8-9 UHF (X, Y), 10 the HF activity before its blur (the input of masking)."""


@cached(maxsize=1)
def srgb_table_ref() -> torch.Tensor:
    """(256,) float32: the decoding of every uint8 code, ``srgb_to_linear_ref(code / 255)`` in float32 on the CPU
    (one table, so that no code's value depends on the vector width PyTorch's ``pow`` used for it)."""
    return srgb_to_linear_ref(torch.arange(256, dtype=torch.float32) / 255.0)


def butteraugli_linear_ref(srgb: torch.Tensor) -> torch.Tensor:
    """sRGB (N, 3, H, W) -> linear RGB: uint8 codes through :func:`srgb_table_ref` (float32, the GPU path's dtype),
    floating values in [0, 1] by :func:`srgb_to_linear_ref` in their compute dtype (float64 stays float64)."""
    if srgb.dtype == torch.uint8:
        return srgb_table_ref().to(srgb.device)[srgb.long()]
    return srgb_to_linear_ref(srgb.to(torch.float64 if srgb.dtype == torch.float64 else torch.float32))


def opsin_xyb_ref(rgb: torch.Tensor, blurred: torch.Tensor, intensity_target: float) -> torch.Tensor:
    """Opsin dynamics of linear sRGB ``rgb`` (N, 3, H, W) given ``blurred`` = its σ 1.2 blur -> Butteraugli's XYB
    (N, 3, H, W): cone mix, sensitivity ``Gamma(m)/m`` of the blurred mix, clamp, X = m0 - m1, Y = m0 + m1, B = m2."""
    it = _f32(intensity_target)
    pre = _mix(blurred * it)
    cur = _mix(rgb * it)
    out = []
    for c in range(3):
        p = torch.maximum(pre[c], pre[c].new_tensor(max(_MIX32[c][3], _MIN_SENS)))
        gamma = _GAMMA_MUL * fast_log2_ref(p.clamp_min(0) + _GAMMA_BIAS) + _GAMMA_ADD
        sens = torch.clamp_min(gamma / p, _MIN_SENS)
        out.append(torch.clamp_min(cur[c] * sens, _MIX32[c][3]))
    return torch.stack([out[0] - out[1], out[0] + out[1], out[2]], dim=1)


def frequency_rest_ref(xyb: torch.Tensor, lf: torch.Tensor) -> torch.Tensor:
    """What the low frequencies leave: ``xyb - lf`` (N, 3, H, W)."""
    return xyb - lf


def hf_pre_ref(rest: torch.Tensor, mf: torch.Tensor) -> torch.Tensor:
    """The high frequencies before their σ 1.56 blur, (N, 2, H, W): ``rest - mf`` on X and Y, X suppressed where Y
    has high-frequency energy."""
    hf_x, hf_y0 = rest[:, 0] - mf[:, 0], rest[:, 1] - mf[:, 1]
    s = _f32(0.653020556257)
    hf_x0 = ((_f32(46.0) / (hf_y0 * hf_y0 + _f32(46.0))) * _f32(1.0 - 0.653020556257) + s) * hf_x
    return torch.stack([hf_x0, hf_y0], dim=1)


def bands_ref(lf: torch.Tensor, mf: torch.Tensor, hf_pre: torch.Tensor, hf_blur: torch.Tensor) -> torch.Tensor:
    """Every band of one image from its blurs, (N, :data:`BANDS`, H, W): LF "vals", MF and HF/UHF with their dead
    zones and soft clamps, and the unblurred HF activity (``lf``, ``mf`` (N, 3, H, W) the σ 7.16 and σ 3.22 blurs;
    ``hf_pre`` (:func:`hf_pre_ref`) and ``hf_blur`` its σ 1.56 blur, (N, 2, H, W))."""
    mf_x = _remove_range(mf[:, 0], 0.29)
    mf_y = _amplify_range(mf[:, 1], 0.1)
    uhf_x = _remove_range(hf_pre[:, 0] - hf_blur[:, 0], 0.04)
    hf_x = _remove_range(hf_blur[:, 0], 1.5)
    hf_y = _maximum_clamp(hf_blur[:, 1], 28.4691806922)
    uhf_y = _maximum_clamp(hf_pre[:, 1] - hf_y, 5.19175294647) * _f32(2.69313763794)
    hf_y = _amplify_range(hf_y * _f32(2.155), 0.132)
    lx, ly, lb = lf.unbind(1)
    # masking activity (blurred by the caller)
    x = (uhf_x + hf_x) * _f32(2.5)
    y = uhf_y * _f32(0.4) + hf_y * _f32(0.4)
    act = _sqrt0(x * x + y * y)
    act = torch.sqrt(_MASK_MUL * act.abs() + _MASK_BIAS) - _MASK_SQRT_BIAS
    return torch.stack([lx * _f32(32.2217497012), ly * _f32(13.7697791434),
                        (_f32(-0.362267051518) * ly + lb) * _f32(47.504615728),
                        mf_x, mf_y, mf[:, 2], hf_x, hf_y, uhf_x, uhf_y, act], dim=1)


_AC_MASK = (0.829591754942, 0.451936922203, 2.5485944793)  # (offset, scaler, mul) of _mask_y
_DC_MASK = (0.20025578522, 3.87449418804, 0.505054525019)


def _mask_y(delta: torch.Tensor, offset: float, scaler: float, mul: float) -> torch.Tensor:
    v = _GLOBAL_SCALE * (1.0 + mul / (scaler * delta + offset))
    return v * v


def combine_constants(hf_asymmetry: float) -> tuple[float, float, float, float]:
    """(w_gt, w_lt) of the asymmetric L2 on HF X and on HF Y, float32 values as libjxl rounds them."""
    hf_asym = _f32(hf_asymmetry)
    out = []
    for w in (_WMUL[0], _WMUL[1]):
        out += [_f32(_f32(w * hf_asym) * 0.8), _f32(_f32(w / hf_asym) * 0.8)]
    return tuple(out)


def _l2_asymmetric(v0: torch.Tensor, v1: torch.Tensor, w_gt: float, w_lt: float) -> torch.Tensor:
    """Symmetric ``w_gt·(v0-v1)²`` plus ``w_lt·excess²`` where v1 leaves [0.4|v0|, |v0|] on v0's side (weights
    already scaled by 0.8, :func:`combine_constants`)."""
    diff = v0 - v1
    fabs0 = v0.abs()
    small = _f32(0.4) * fabs0
    zero = torch.zeros_like(v0)
    neg = torch.where(v1 > -small, v1 + small, torch.where(v1 < -fabs0, -v1 - fabs0, zero))
    pos = torch.where(v1 < small, small - v1, torch.where(v1 > fabs0, v1 - fabs0, zero))
    v = torch.where(v0 < 0, neg, pos)
    return diff * diff * w_gt + w_lt * (v * v)


def diffmap_combine_ref(bands0: torch.Tensor, bands1: torch.Tensor, ac_x: torch.Tensor, ac_y: torch.Tensor,
                        act0: torch.Tensor, act1: torch.Tensor, mask: torch.Tensor, half: torch.Tensor,
                        hf_asymmetry: float) -> torch.Tensor:
    """The distance map of one resolution (N, H, W): ``ac_x``, ``ac_y`` (N, H, W) the Malta sums, plus the
    asymmetric L2 on HF, L2 on MF and LF of the band tensors ``bands0`` (reference) and ``bands1`` (N, 11, H, W),
    the difference of the blurred activities ``act0``, ``act1`` (N, H, W), scaled by the AC and DC masks of the
    reference's ``mask`` (N, H, W), then the square root. ``half``: the half-resolution map (N, ⌈H/2⌉, ⌈W/2⌉) to
    mix in as ``0.85·d + 0.5·up2(half)``, or an empty tensor for none."""
    wx_gt, wx_lt, wy_gt, wy_lt = combine_constants(hf_asymmetry)
    ac_x = ac_x + _l2_asymmetric(bands0[:, 6], bands1[:, 6], wx_gt, wx_lt)
    ac_y = ac_y + _l2_asymmetric(bands0[:, 7], bands1[:, 7], wy_gt, wy_lt)
    dmf = bands0[:, 3:6] - bands1[:, 3:6]
    dlf = bands0[:, 0:3] - bands1[:, 0:3]
    ac_x = ac_x + dmf[:, 0] ** 2 * _f32(_WMUL[3])
    ac_y = ac_y + dmf[:, 1] ** 2 * _f32(_WMUL[4])
    ac_b = dmf[:, 2] ** 2 * _f32(_WMUL[5])
    dc = [dlf[:, c] ** 2 * _f32(_WMUL[6 + c]) for c in range(3)]
    ac_y = ac_y + _f32(10.0) * (act0 - act1) ** 2
    ac_mask = _mask_y(mask, *_AC_MASK)
    dc_mask = _mask_y(mask, *_DC_MASK)
    total = (dc[0] * dc_mask + dc[1] * dc_mask + dc[2] * dc_mask) + (ac_x * ac_mask + ac_y * ac_mask
                                                                      + ac_b * ac_mask)
    diffmap = _sqrt0(total)
    if half.numel():
        h, w = diffmap.shape[-2:]
        up = half.repeat_interleave(2, dim=-2).repeat_interleave(2, dim=-1)[..., :h, :w]
        diffmap = diffmap * 0.85 + 0.5 * up
    return diffmap


def butteraugli_norm_sums_ref(diffmap: torch.Tensor) -> torch.Tensor:
    """(N, 4) float64 per map (N, H, W): its maximum and the means of d³, d⁶, d¹² (d in float64)."""
    d = diffmap.flatten(1)
    d3 = d.to(torch.float64) ** 3
    return torch.stack([d.amax(dim=1).to(torch.float64), d3.mean(dim=1), (d3 ** 2).mean(dim=1),
                        (d3 ** 4).mean(dim=1)], dim=1)


# --------------------------------------------------------------------------------------------------- hooks
class ButteraugliFilters(NamedTuple):
    """Every step of the pipeline as a hook, the twins by default (the Triton ops on the GPU path, forward only).

    Filters: ``blur(x (N, C, H, W), sigma)``, ``malta(lum0, lum1, w_0gt1, w_0lt1, norm1, mulli, low_freq)`` and
    ``malta_add(acc, lum0, lum1, ...)`` (= ``acc + malta(...)``) on (N, H, W) planes, ``erosion(x (N, H, W))``.
    Element-wise stages: ``linear`` (:func:`butteraugli_linear_ref`), ``opsin`` (:func:`opsin_xyb_ref`), ``rest``
    (:func:`frequency_rest_ref`), ``hf_pre`` (:func:`hf_pre_ref`), ``bands`` (:func:`bands_ref`), ``combine``
    (:func:`diffmap_combine_ref`); the score's reduction ``norm_sums`` (:func:`butteraugli_norm_sums_ref`)."""

    blur: Callable[..., torch.Tensor] = butteraugli_blur_ref
    malta: Callable[..., torch.Tensor] = butteraugli_malta_ref
    erosion: Callable[[torch.Tensor], torch.Tensor] = fuzzy_erosion_ref
    malta_add: Callable[..., torch.Tensor] = butteraugli_malta_add_ref
    linear: Callable[[torch.Tensor], torch.Tensor] = butteraugli_linear_ref
    opsin: Callable[..., torch.Tensor] = opsin_xyb_ref
    rest: Callable[..., torch.Tensor] = frequency_rest_ref
    hf_pre: Callable[..., torch.Tensor] = hf_pre_ref
    bands: Callable[..., torch.Tensor] = bands_ref
    combine: Callable[..., torch.Tensor] = diffmap_combine_ref
    norm_sums: Callable[[torch.Tensor], torch.Tensor] = butteraugli_norm_sums_ref


TWIN_FILTERS = ButteraugliFilters()


class PsychoImage(NamedTuple):
    """Frequency bands of one image: ``bands`` (N, :data:`BANDS`, H, W); ``lf`` (N, 3, H, W) in "vals" space,
    ``mf`` (N, 3, H, W), ``hf`` and ``uhf`` (N, 2, H, W) (X and Y only) are views of it."""

    bands: torch.Tensor

    @property
    def lf(self) -> torch.Tensor:
        return self.bands[:, 0:3]

    @property
    def mf(self) -> torch.Tensor:
        return self.bands[:, 3:6]

    @property
    def hf(self) -> torch.Tensor:
        return self.bands[:, 6:8]

    @property
    def uhf(self) -> torch.Tensor:
        return self.bands[:, 8:10]


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


# ---------------------------------------------------------------------------------------------- pipeline
def opsin_dynamics_ref(rgb: torch.Tensor, intensity_target: float,
                       filters: ButteraugliFilters = TWIN_FILTERS) -> torch.Tensor:
    """Linear sRGB (N, 3, H, W) in [0, 1] -> Butteraugli's XYB (N, 3, H, W)."""
    return filters.opsin(rgb, filters.blur(rgb, SIGMA_OPSIN), intensity_target)


def separate_frequencies_ref(xyb: torch.Tensor, filters: ButteraugliFilters = TWIN_FILTERS) -> PsychoImage:
    """XYB (N, 3, H, W) -> its :class:`PsychoImage` bands."""
    blur = filters.blur
    lf = blur(xyb, SIGMA_LF)
    rest = filters.rest(xyb, lf)
    mf = blur(rest, SIGMA_HF)
    hf_pre = filters.hf_pre(rest, mf)
    return PsychoImage(filters.bands(lf, mf, hf_pre, blur(hf_pre, SIGMA_UHF)))


def hf_activity_ref(p: PsychoImage, filters: ButteraugliFilters = TWIN_FILTERS) -> torch.Tensor:
    """Blurred local HF/UHF activity of one image (N, H, W): the input of masking."""
    return filters.blur(p.bands[:, BANDS - 1:], SIGMA_MASK).squeeze(1)


def prepare_level_ref(rgb: torch.Tensor, intensity_target: float,
                      filters: ButteraugliFilters = TWIN_FILTERS) -> ReferenceLevel:
    """The reference side of one resolution from linear sRGB (N, 3, H, W)."""
    psycho = separate_frequencies_ref(opsin_dynamics_ref(rgb, intensity_target, filters), filters)
    activity = hf_activity_ref(psycho, filters)
    return ReferenceLevel(psycho, activity, filters.erosion(activity))


def diffmap_level_ref(ref: ReferenceLevel, rgb1: torch.Tensor, intensity_target: float, hf_asymmetry: float,
                      filters: ButteraugliFilters = TWIN_FILTERS, half: torch.Tensor | None = None) -> torch.Tensor:
    """Distance map (N, H, W) of the distorted linear sRGB ``rgb1`` (N, 3, H, W) against one prepared level, with
    the half-resolution map ``half`` mixed in when given."""
    p0 = ref.psycho
    p1 = separate_frequencies_ref(opsin_dynamics_ref(rgb1, intensity_target, filters), filters)
    hf_asym = _f32(hf_asymmetry)
    sqrt_asym = _f32(math.sqrt(hf_asym))
    malta, malta_add = filters.malta, filters.malta_add  # malta_add(acc, ...) = acc + malta(...)
    ac_y = malta(p0.uhf[:, 1], p1.uhf[:, 1], _W_UHF_Y * hf_asym, _W_UHF_Y / hf_asym, _N_UHF_Y, _MULLI_HF, False)
    ac_x = malta(p0.uhf[:, 0], p1.uhf[:, 0], _W_UHF_X * hf_asym, _W_UHF_X / hf_asym, _N_UHF_X, _MULLI_HF, False)
    ac_y = malta_add(ac_y, p0.hf[:, 1], p1.hf[:, 1], _W_HF_Y * sqrt_asym, _W_HF_Y / sqrt_asym, _N_HF_Y, _MULLI_LF,
                     True)
    ac_x = malta_add(ac_x, p0.hf[:, 0], p1.hf[:, 0], _W_HF_X * sqrt_asym, _W_HF_X / sqrt_asym, _N_HF_X, _MULLI_LF,
                     True)
    ac_y = malta_add(ac_y, p0.mf[:, 1], p1.mf[:, 1], _W_MF_Y, _W_MF_Y, _N_MF_Y, _MULLI_LF, True)
    ac_x = malta_add(ac_x, p0.mf[:, 0], p1.mf[:, 0], _W_MF_X, _W_MF_X, _N_MF_X, _MULLI_LF, True)
    activity = hf_activity_ref(p1, filters)
    if half is None:
        half = p1.bands.new_empty(0)
    return filters.combine(p0.bands, p1.bands, ac_x, ac_y, ref.activity, activity, ref.mask, half, hf_asymmetry)


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
    """The distance map (N, H, W) of a linear-sRGB ``dist_linear`` (N, 3, H, W) against a prepared reference: the
    half-resolution map first, mixed into the full-resolution one by its combine step."""
    it = ref.intensity_target
    sub = None
    if ref.half is not None:
        sub = diffmap_level_ref(ref.half, subsample2x_ref(dist_linear), it, hf_asymmetry, filters)
    return diffmap_level_ref(ref.full, dist_linear, it, hf_asymmetry, filters, half=sub)


def butteraugli_diffmap_ref(ref_linear: torch.Tensor, dist_linear: torch.Tensor, intensity_target: float = 80.0,
                            hf_asymmetry: float = 0.8,
                            filters: ButteraugliFilters = TWIN_FILTERS) -> torch.Tensor:
    """One-shot distance map (N, H, W) of linear-sRGB images (N, 3, H, W)."""
    ref = prepare_reference_ref(ref_linear, intensity_target, filters)
    return diffmap_prepared_ref(ref, dist_linear, hf_asymmetry, filters)


def butteraugli_norms_ref(diffmap: torch.Tensor, filters: ButteraugliFilters = TWIN_FILTERS
                          ) -> tuple[torch.Tensor, torch.Tensor]:
    """(max-norm, CLI 3-norm) of maps (N, H, W), each (N,): the maximum (in the map's dtype), and the mean over
    p = 3, 6, 12 of ``(mean d^p)^(1/p)`` in float64 (sums from the ``norm_sums`` hook)."""
    sums = filters.norm_sums(diffmap)
    norms = [_root0(sums[:, k], 3 * 2 ** (k - 1)) for k in (1, 2, 3)]
    return sums[:, 0].to(diffmap.dtype), (norms[0] + norms[1] + norms[2]) / 3.0


def butteraugli_ref(ref_srgb: torch.Tensor, dist_srgb: torch.Tensor, intensity_target: float = 80.0,
                    hf_asymmetry: float = 0.8) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Butteraugli of sRGB-encoded pairs (N, 3, H, W) in [0, 1], computed in their dtype: (max-norm (N,),
    3-norm (N,), distance map (N, H, W))."""
    diffmap = butteraugli_diffmap_ref(srgb_to_linear_ref(ref_srgb), srgb_to_linear_ref(dist_srgb),
                                      intensity_target, hf_asymmetry)
    return (*butteraugli_norms_ref(diffmap), diffmap)
