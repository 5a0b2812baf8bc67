"""libvmaf 3.2.0's integer ADM (``integer_adm.c``), bit for bit: the PyTorch twin and the specification.

Per frame pair of integer luma, for each of 4 scales (``s = 0..3``), on int64 tensors that hold libvmaf's int16
(scale 0) or int32 (scales 1-3) values, wrapped to those widths wherever libvmaf stores them:

1. **Wavelet** (db2 in Q15, ``LO``/``HI``). Output ``i`` of a pass reads inputs ``2i-1 .. 2i+2`` with ``-1 -> 1``
   and ``n+k -> n-1-k`` (:func:`dwt_index`); ``ceil(n/2)`` outputs. Scale 0 reads the pixels: vertical
   ``(sum - 46342 * 2**(bpc-1) + 2**(bpc-1)) >> bpc`` (low) and ``(sum + 2**(bpc-1)) >> bpc`` (high), horizontal
   ``(sum + 2**15) >> 16``. Scales 1-3 read the previous scale's ``a`` band with the shifts of :data:`DWT_SHIFTS`.
   Bands: ``a`` = lo*lo, ``v`` = vertical lo / horizontal hi, ``h`` = vertical hi / horizontal lo, ``d`` = hi*hi.
2. **Decoupling** of the reference ``o`` and distorted ``t`` detail bands into restored ``r`` and additive
   ``a = t - r``: ``k = clamp(t/o, 0, 1)`` in Q15 through libvmaf's reciprocal table (scales 1-3 first reduce
   ``|o| >= 2**15`` to 15 bits), ``r = (k*o + 2**14) >> 15``; inside 1 degree of angle between ``(oh, ov)`` and
   ``(th, tv)`` (tested in float32/double as libvmaf does) ``r`` becomes ``min(r*egl, t)`` (``o > 0``) or
   ``max(r*egl, t)`` (``o < 0``), ``egl`` the enhancement gain limit.
3. **Denominator** from ``o`` over the region ``R`` (10% borders off): sums of ``|o|**3`` with libvmaf's shifts,
   times ``rf**3`` in double (``rf = 1/Q``, Watson's quantisation step, or with ``adm_csf_mode`` 2/3 a float32
   value of libvmaf's Barten-Watson blend tables), then float32 cube roots plus the noise term
   ``powf(area * noise_weight, 1/3)`` per orientation. The cube roots are the C library's ``powf(x, 1.0f /
   3.0f)`` itself (:func:`powf_third`): glibc's is not correctly rounded, so no other formula gives its bits.
4. **CSF**: ``v = irf * a`` in fixed point (``irf``: ``rf`` in Q21/Q23 at scale 0, Q32 at scales 1-3) and
   ``flt ~ |v|/30``.
5. **Contrast masking** (the numerator, from ``r``): a threshold shared by h, v and d, the 3x3 sum of ``flt`` over
   the three orientations with the centre replaced by ``~|v|/15``, is subtracted from ``|irf * r|``; the rest is
   cubed with libvmaf's shifts, summed per row (round-shifted) then per frame, and turned into a float32 cube root
   plus the noise term. **AIM** swaps the roles: CSF of ``r``, signal ``a``, no noise term.

The op output is libvmaf's per-scale float32 triple ``(num_scale, den_scale, aim_num_scale)``; the double columns
(``integer_adm2 = sum num / sum den``, ``aim``, ``adm3``, ``adm_scaleS``) come from :func:`adm_columns`. The
constants of each scale (region, shifts, fixed-point factors, ``rf**3``, noise term) come from :func:`scale_plans`,
shared by the twin and the kernels.

Quirks kept on purpose: the scales 1-3 ``flt`` and threshold centre use ``-2**31`` (libvmaf's ``1u << 31`` stored
in an ``int32_t``) where a rounding ``+2**31`` was meant; the scales 1-3 denominator rounds with ``2**q`` instead of
``2**(q-1)``; the CM border neighbourhoods mirror as ``{1, 0, 1}`` at the top/left and ``{n-2, n-1, n-1}`` at the
bottom/right. These are the C (and AVX-512) values; libvmaf's AVX2 path differs on odd band widths.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import torch

from fusedsim.core.libm import powf_array

__all__ = [
    "COS_1DEG_SQ",
    "DEBUG_FEATURES",
    "DWT_SHIFTS",
    "FEATURES",
    "HI",
    "LIBVMAF_OPTIONS",
    "LO",
    "MIN_SIZE",
    "SUPPORTED_BIT_DEPTHS",
    "THIRD",
    "AdmOptions",
    "ScalePlan",
    "adm_columns",
    "BLENDED_CSF",
    "band_sizes",
    "geometry",
    "check_frame_size",
    "column_names",
    "div_lookup",
    "dwt_index",
    "integer_adm_ref",
    "integer_adm_sums_ref",
    "name_suffix",
    "powf_third",
    "scale_plans",
    "scales_from_sums",
]

#: db2 wavelet taps in Q15 (low pass sums to 46342 ~ 2**15 * sqrt(2)).
LO = (15826, 27411, 7345, -4240)
HI = (-4240, -7345, 27411, -15826)
#: Bit depths read; libvmaf's 32-bit wavelet sums would wrap at 16 bits.
SUPPORTED_BIT_DEPTHS = (8, 10, 12)
#: Smallest height and width: the scale-3 wavelet needs an input of 5 (libvmaf reads outside the picture below).
MIN_SIZE = 33
#: Scales 1-3 wavelet: (vertical add, vertical shift, horizontal add, horizontal shift).
DWT_SHIFTS = ((0, 0, 16384, 15), (32768, 16, 32768, 16), (32768, 16, 16384, 15))
#: float32 exponent libvmaf's ``powf(x, 1.0f / 3.0f)`` uses (0.333333343..., not 1/3), as a double.
THIRD = float(np.float32(1.0) / np.float32(3.0))
#: float32(cos(1 deg)**2), the angle test's constant, as a double.
COS_1DEG_SQ = float(np.float32(math.cos(1.0 * math.pi / 180.0) * math.cos(1.0 * math.pi / 180.0)))


# ------------------------------------------------------------------------------------------------- options
@dataclass(frozen=True)
class AdmOptions:
    """Options of libvmaf's ``adm`` extractor; the defaults are ``vmaf_v0.6.1``'s (``vmaf_v0.6.1neg`` uses
    ``enhn_gain_limit=1.0``; the ``vmaf_v1.0.16_*`` models use ``csf_mode=2, dlm_weight=0.7, enhn_gain_limit=1.0,
    noise_weight=0.02, min_val=0.5`` with their viewing geometry).

    Every field is a libvmaf feature parameter: a non-default value appends ``_<alias>_<%g value>`` to the feature
    names, in the alphabetical order of libvmaf's option names (:func:`column_names`).

    * ``csf_mode``: 0 Watson's model (libvmaf's default), 2 the Barten-Watson blend of the v1 models, 3 its
      ``_MAE`` tables; both blends are tables for a few geometries (:data:`BLENDED_CSF`). Mode 1 (Barten's CSF) is
      not computed: an error.
    * ``norm_view_dist``, ``ref_display_height``: the viewing geometry; libvmaf refuses
      ``norm_view_dist * ref_display_height < 3 * 1080`` (its 16-bit pipeline), and so does this.
    * ``noise_weight``: the noise term ``powf(area * noise_weight, 1/3)`` of each orientation.
    * ``dlm_weight``, ``min_val``: ``adm3 = max(adm2 * dlm_weight + (1 - aim) * (1 - dlm_weight), min_val)``.
    """

    enhn_gain_limit: float = 100.0
    csf_mode: int = 0
    dlm_weight: float = 0.5
    min_val: float = 0.0
    noise_weight: float = 0.03125
    norm_view_dist: float = 3.0
    ref_display_height: int = 1080

    def __post_init__(self) -> None:
        for name, (_, _, low, high, kind) in LIBVMAF_OPTIONS.items():
            value = getattr(self, name)
            libvmaf_name = LIBVMAF_OPTIONS[name][0]
            number = (int, np.integer) if kind is int else (int, float, np.integer, np.floating)
            if isinstance(value, bool) or not isinstance(value, number):
                raise ValueError(f"{name} must be {'an integer' if kind is int else 'a number'} (libvmaf's "
                                 f"{libvmaf_name}); got {value!r}")
            if not low <= value <= high:
                raise ValueError(f"{name} must be a number in [{low:g}, {high:g}] (libvmaf's {libvmaf_name}); "
                                 f"got {value!r}")
            object.__setattr__(self, name, kind(value))
        if self.csf_mode == 1:
            raise ValueError("csf_mode=1 (libvmaf's Barten CSF) is not supported; csf_mode takes 0 (Watson), "
                             "2 (the v1 models' Barten-Watson blend) or 3 (its MAE tables)")
        if self.norm_view_dist * self.ref_display_height < 3.0 * 1080:
            raise ValueError(f"norm_view_dist * ref_display_height must be at least 3 * 1080 (libvmaf's 16-bit "
                             f"ADM pipeline refuses smaller angular frequencies); got {self.norm_view_dist:g} * "
                             f"{self.ref_display_height}")
        if self.csf_mode in (2, 3) and (self.ref_display_height, self.norm_view_dist) not in BLENDED_CSF[self.csf_mode]:
            known = ", ".join(f"{h} @ {d:g}H" for h, d in BLENDED_CSF[self.csf_mode])
            raise ValueError(f"csf_mode={self.csf_mode} has tables only for ref_display_height @ norm_view_dist in "
                             f"{known}; got {self.ref_display_height} @ {self.norm_view_dist:g}H")

    @classmethod
    def from_libvmaf(cls, options: Mapping[str, Any]) -> AdmOptions:
        """From libvmaf's option names (``{"adm_csf_mode": 2, "adm_dlm_weight": 0.7}``); unknown ones are errors."""
        by_name = {libvmaf: field for field, (libvmaf, *_) in LIBVMAF_OPTIONS.items()}
        unknown = sorted(set(options) - set(by_name))
        if unknown:
            raise ValueError(f"integer ADM has no option {', '.join(map(repr, unknown))} (its options: "
                             f"{', '.join(by_name)})")
        return cls(**{by_name[name]: value for name, value in options.items()})

    @property
    def geometry(self) -> tuple[int, float, int, float]:
        """What the scale constants depend on: ``(csf_mode, norm_view_dist, ref_display_height, noise_weight)``."""
        return self.csf_mode, self.norm_view_dist, self.ref_display_height, self.noise_weight


#: field -> (libvmaf option name, alias used in feature names, low, high, type). Feature-name order sorts by the
#: option name.
LIBVMAF_OPTIONS = {
    "enhn_gain_limit": ("adm_enhn_gain_limit", "egl", 1.0, 100.0, float),
    "csf_mode": ("adm_csf_mode", "csf", 0, 3, int),
    "dlm_weight": ("adm_dlm_weight", "dlmw", 0.0, 1.0, float),
    "min_val": ("adm_min_val", "min", 0.0, 1.0, float),
    "noise_weight": ("adm_noise_weight", "nw", 0.0, 1500.0, float),
    "norm_view_dist": ("adm_norm_view_dist", "nvd", 0.75, 24.0, float),
    "ref_display_height": ("adm_ref_display_height", "rdh", 1, 4320, int),
}

# libvmaf's Barten-Watson blend tables (barten_csf_tools.h): [h/v, d][scale 0..3] per (display height, view
# distance); 2160 @ 1.5H has 1080 @ 3H's pixels per degree and shares its table. Values as float32.
_BLEND_1080_3H = ((0.01183, 0.025026, 0.04295, 0.058621), (0.004302, 0.011778, 0.023918, 0.035901))
_BLEND_MAE_1080_3H = ((0.011249, 0.022606, 0.035930, 0.045673), (0.004097, 0.010921, 0.021430, 0.031313))
#: csf_mode -> {(ref_display_height, norm_view_dist): ((h/v factors of scales 0-3), (d factors))}.
BLENDED_CSF = {
    2: {
        (1080, 3.0): _BLEND_1080_3H,
        (1080, 5.0): ((0.004212, 0.014809, 0.029642, 0.047464), (0.000984, 0.005852, 0.0146, 0.027574)),
        (2160, 1.5): _BLEND_1080_3H,
        (2160, 3.0): ((0.00226, 0.01183, 0.025026, 0.04295), (0.000479, 0.004302, 0.011778, 0.023918)),
        (2160, 5.0): ((0.000092, 0.004212, 0.014809, 0.029642), (0.000050, 0.000984, 0.005852, 0.0146)),
        (720, 3.0): ((0.018715, 0.035637, 0.052798, 0.061509), (0.007999, 0.018396, 0.031851, 0.037718)),
        (720, 5.0): ((0.010144, 0.022561, 0.040309, 0.05672), (0.003463, 0.010282, 0.021839, 0.034641)),
        (480, 3.0): ((0.027961, 0.045875, 0.060275, 0.056234), (0.013572, 0.026277, 0.036959, 0.034511)),
        (480, 5.0): ((0.016781, 0.032822, 0.05032, 0.061594), (0.00691, 0.016545, 0.029917, 0.037777)),
    },
    3: {
        (1080, 3.0): _BLEND_MAE_1080_3H,
        (1080, 5.0): ((0.004052, 0.013939, 0.026298, 0.038833), (0.000927, 0.005544, 0.013415, 0.024515)),
        (2160, 1.5): _BLEND_MAE_1080_3H,
        (2160, 3.0): ((0.002166, 0.011249, 0.022606, 0.035930), (0.000447, 0.004097, 0.010921, 0.021430)),
        (2160, 5.0): ((0.000077, 0.004052, 0.013939, 0.026298), (0.000045, 0.000927, 0.005544, 0.013415)),
        (720, 3.0): ((0.017329, 0.030870, 0.042134, 0.047410), (0.007509, 0.016707, 0.028072, 0.032722)),
        (720, 5.0): ((0.009689, 0.020577, 0.034162, 0.044523), (0.003302, 0.009579, 0.019661, 0.030318)),
        (480, 3.0): ((0.024969, 0.037825, 0.046676, 0.043974), (0.012511, 0.023424, 0.032139, 0.030166)),
        (480, 5.0): ((0.015665, 0.028766, 0.040612, 0.047483), (0.006514, 0.015107, 0.026476, 0.032776)),
    },
}


#: libvmaf's names of the features, in its output order; ``DEBUG_FEATURES`` need ``debug=true``.
FEATURES = ("integer_adm2", "integer_aim", "integer_adm3", "integer_adm_scale0", "integer_adm_scale1",
            "integer_adm_scale2", "integer_adm_scale3")
DEBUG_FEATURES = ("integer_adm", "integer_adm_num", "integer_adm_den", "integer_adm_num_scale0",
                  "integer_adm_den_scale0", "integer_adm_num_scale1", "integer_adm_den_scale1",
                  "integer_adm_num_scale2", "integer_adm_den_scale2", "integer_adm_num_scale3",
                  "integer_adm_den_scale3")


def name_suffix(options: AdmOptions) -> str:
    """libvmaf's feature-name suffix of ``options``, e.g. ``"_egl_1"`` (``""`` for the defaults)."""
    default = AdmOptions()
    parts = []
    for f in sorted(fields(AdmOptions), key=lambda f: LIBVMAF_OPTIONS[f.name][0]):
        value = getattr(options, f.name)
        if value == getattr(default, f.name):
            continue
        alias = LIBVMAF_OPTIONS[f.name][1]
        # doubles print with %g, ints with %d
        parts.append(f"_{alias}_{value:d}" if isinstance(value, int) else f"_{alias}_{'%g' % value}")
    return "".join(parts)


def column_names(options: AdmOptions = AdmOptions(), debug: bool = False) -> tuple[str, ...]:
    """The per-frame columns libvmaf prints for these options, in its order."""
    suffix = name_suffix(options)
    return tuple(name + suffix for name in FEATURES + (DEBUG_FEATURES if debug else ()))


def check_frame_size(height: int, width: int, names: str = "ref and dist") -> None:
    """Raise ``ValueError`` (naming ``names``) for frames smaller than :data:`MIN_SIZE` either way."""
    if height < MIN_SIZE or width < MIN_SIZE:
        raise ValueError(f"{names} are {height}x{width} (HxW); libvmaf's integer ADM needs at least "
                         f"{MIN_SIZE}x{MIN_SIZE}: its 4-level wavelet reads outside smaller frames")


# ----------------------------------------------------------------------------------------- scale constants
def band_sizes(height: int, width: int) -> tuple[tuple[int, int], ...]:
    """``(h, w)`` of the bands of scales 0..3 (each ``ceil`` of half the previous)."""
    out = []
    for _ in range(4):
        height, width = (height + 1) // 2, (width + 1) // 2
        out.append((height, width))
    return tuple(out)


def _border(n: int) -> int:
    return int(n * 0.1 - 0.5)  # libvmaf: int = n * ADM_BORDER_FACTOR - 0.5 (truncation toward zero)


def _ceil_log2(x: float) -> int:
    return int(math.ceil(math.log2(x)))


def _round_add(shift: int) -> int:
    """libvmaf's ``(uint32_t)pow(2, shift - 1)``: 0 for a zero shift."""
    return 1 << (shift - 1) if shift > 0 else 0


def _f32(x: float) -> float:
    return float(np.float32(x))


# Watson's model (luma row of dwt_7_9_YCbCr_threshold) and basis amplitudes, as libvmaf's float32 values.
_WATSON_A, _WATSON_K, _WATSON_F0 = _f32(0.495), _f32(0.466), _f32(0.401)
_WATSON_G = tuple(_f32(g) for g in (1.501, 1.0, 0.534, 1.0))
_AMPLITUDES = tuple(tuple(_f32(v) for v in row) for row in (
    (0.62171, 0.67234, 0.72709, 0.67234), (0.34537, 0.41317, 0.49428, 0.41317),
    (0.18004, 0.22727, 0.28688, 0.22727), (0.091401, 0.11792, 0.15214, 0.11792)))


def _watson_rfactor(scale: int, theta: int, norm_view_dist: float, ref_display_height: int) -> np.float32:
    """``1.0f / dwt_quant_step(...)``: libvmaf's float/double steps, in its order (``k*temp*temp`` is a float
    product)."""
    r = _f32(norm_view_dist * ref_display_height * math.pi / 180.0)
    temp = np.float32(math.log10(math.pow(2.0, scale + 1) * _WATSON_F0 * _WATSON_G[theta] / r))
    ktt = float(np.float32(_WATSON_K) * temp * temp)
    q = np.float32(2.0 * _WATSON_A * math.pow(10.0, ktt) / _AMPLITUDES[scale][theta])
    return np.float32(1.0) / q


@dataclass(frozen=True)
class ScalePlan:
    """The integer and float constants of one scale for a frame size: all Python numbers, passed to kernels.

    ``height``/``width``: band size; ``top/bottom/left/right``: the region R (CM, denominator);
    ``irf``: CSF/CM fixed-point factors of h, v, d; ``rf_cubed``: ``pow(rf, 3)`` in double per orientation;
    ``den_*``: denominator shifts; ``cm_*``: contrast-masking shifts; ``num_div``: the divisor turning the CM sums
    into float; ``noise``: the float32 term ``powf(area * noise_weight, 1/3)``.
    """

    scale: int
    height: int
    width: int
    top: int
    bottom: int
    left: int
    right: int
    irf: tuple[int, int, int]
    rf_cubed: tuple[float, float, float]
    den_shift: int  # scale 0: the per-row round-shift; scales 1-3: the per-pixel (cube) shift
    den_row_shift: int  # scales 1-3: the per-row round-shift
    den_div: float  # csf = double(sum) / den_div * rf_cubed
    cm_shift: tuple[int, int, int]  # per-pixel cube shift of h, v, d
    cm_row_shift: int
    num_div: tuple[float, float, float]
    noise: float


def geometry(csf_mode: int, norm_view_dist: float, ref_display_height: int, noise_weight: float
             ) -> tuple[int, float, int, float]:
    """The op's geometry scalars as :attr:`AdmOptions.geometry` (typed: one cache entry per geometry)."""
    return int(csf_mode), float(norm_view_dist), int(ref_display_height), float(noise_weight)


def _rfactors(scale: int, csf_mode: int, norm_view_dist: float, ref_display_height: int) -> list[np.float32]:
    """The CSF factors ``rf`` of h, v and d at ``scale``: Watson's ``1/Q`` (mode 0) or a blend table (2, 3)."""
    if csf_mode == 0:
        return [_watson_rfactor(scale, theta, norm_view_dist, ref_display_height) for theta in (1, 1, 2)]
    table = BLENDED_CSF[csf_mode][(ref_display_height, float(norm_view_dist))]
    return [np.float32(table[0][scale]), np.float32(table[0][scale]), np.float32(table[1][scale])]


@functools.lru_cache(maxsize=64)
def scale_plans(height: int, width: int, geometry: tuple[int, float, int, float] = AdmOptions().geometry
                ) -> tuple[ScalePlan, ...]:
    """The four :class:`ScalePlan` of a ``height x width`` frame for ``geometry`` (:attr:`AdmOptions.geometry`:
    CSF mode, viewing distance, display height, noise weight; the default is libvmaf's Watson CSF at 3H, 1080)."""
    csf_mode, norm_view_dist, ref_display_height, noise_weight = geometry
    plans = []
    for scale, (h, w) in enumerate(band_sizes(height, width)):
        left, top = _border(w), _border(h)
        right, bottom = w - left, h - top
        rf = _rfactors(scale, csf_mode, norm_view_dist, ref_display_height)
        if scale == 0:
            if abs(norm_view_dist * ref_display_height - 3.0 * 1080) < 1.0e-8 and csf_mode == 0:
                irf = (36453, 36453, 49417)  # libvmaf's hard-coded values for the default geometry
            else:
                irf = (int(float(rf[0]) * 2.0 ** 21), int(float(rf[1]) * 2.0 ** 21), int(float(rf[2]) * 2.0 ** 23))
            den_shift = max(0, int(math.ceil(math.log2((bottom - top) * (right - left)) - 20)))
            den_row_shift = 0
            den_div = 2.0 ** (18 - den_shift)
            hv = int(math.ceil(math.log2(w) - 4))
            dd = int(math.ceil(math.log2(w) - 3))
            cm_row = _ceil_log2(h)
            cm_shift = (hv, hv, dd)
            num_div = (2.0 ** (52 - hv - cm_row), 2.0 ** (52 - hv - cm_row), 2.0 ** (57 - dd - cm_row))
        else:
            irf = tuple(int(float(r) * 2.0 ** 32) for r in rf)
            den_shift = _ceil_log2(right - left)
            den_row_shift = _ceil_log2(bottom - top)
            den_div = 2.0 ** ((32, 27, 23)[scale - 1] - den_row_shift - den_shift)
            c = _ceil_log2(w)
            cm_row = _ceil_log2(h)
            cm_shift = (c, c, c)
            num_div = (2.0 ** ((45, 39, 36)[scale - 1] - c - cm_row),) * 3
        noise = float(np.float32(powf_third_scalar(_f32((bottom - top) * (right - left) * noise_weight))))
        plans.append(ScalePlan(scale, h, w, top, bottom, left, right, irf,
                               tuple(math.pow(float(r), 3) for r in rf), den_shift, den_row_shift, den_div,
                               cm_shift, cm_row, num_div, noise))
    return tuple(plans)


@functools.lru_cache(maxsize=8)
def _div_lookup(device: torch.device) -> torch.Tensor:
    i = torch.arange(1, 32769, dtype=torch.int64)
    recip = (1 << 30) // i
    table = torch.zeros(65537, dtype=torch.int64)
    table[32768 + i] = recip
    table[32768 - i] = -recip
    return table.to(device)


def div_lookup(device: torch.device | str = "cpu") -> torch.Tensor:
    """libvmaf's reciprocal table: ``[32768 + i] = trunc(2**30 / i)``, ``[32768 - i]`` its negative, ``[32768] = 0``
    (``(65537,)`` int64)."""
    return _div_lookup(torch.device(device))


# ---------------------------------------------------------------------------------------------- float steps
def powf_third(x: torch.Tensor) -> torch.Tensor:
    """libvmaf's ``powf(x, 1.0f / 3.0f)`` of float32 ``x >= 0``, bit for bit: the C library's own ``powf``.

    glibc's powf is not correctly rounded for this exponent: it differs from the correctly rounded power on
    1,362,442 of the 2,139,095,039 positive finite floats (0.064%, at every magnitude; checked exhaustively), and
    no short formula reproduces it. So the twin (the spec) calls the C library's powf on the host, as libvmaf does;
    the GPU kernels evaluate glibc's own algorithm (:mod:`fusedsim.families.adm.cube_root`, equal to it on every
    positive float). Without a C ``powf`` (not seen on Linux, macOS or Windows) the correctly rounded power is used
    instead.
    """
    flat = x.detach().to(torch.float32).cpu().reshape(-1)
    return torch.from_numpy(powf_array(flat.numpy(), THIRD)).reshape(x.shape).to(x.device)


def powf_third_array(x: np.ndarray) -> np.ndarray:
    """:func:`powf_third` of a float32 numpy array (any shape), on the host."""
    return powf_array(x, THIRD)


def powf_third_scalar(x: float) -> float:
    """:func:`powf_third` of one value (rounded to float32 first), as a Python float."""
    return float(powf_third(torch.tensor([x], dtype=torch.float32))[0])


def _wrap(x: torch.Tensor, bits: int) -> torch.Tensor:
    """``x`` stored into a signed ``bits``-wide integer (two's complement wrap), as int64."""
    half = 1 << (bits - 1)
    return ((x + half) & ((1 << bits) - 1)) - half


# -------------------------------------------------------------------------------------------------- wavelet
def dwt_index(n: int, device: torch.device | None = None) -> torch.Tensor:
    """Input index of each tap (rows) of each output (columns) of a wavelet pass over ``n`` inputs: ``(4, ceil(n/2))``
    int64 (n >= 5)."""
    base = 2 * torch.arange((n + 1) // 2, device=device)
    idx = torch.stack([base - 1, base, base + 1, base + 2])
    idx = torch.where(idx < 0, -idx, idx)
    return torch.where(idx >= n, 2 * n - 1 - idx, idx)


def _taps(x: torch.Tensor, dim: int) -> list[torch.Tensor]:
    idx = dwt_index(x.shape[dim], x.device)
    return [x.index_select(dim, idx[k]) for k in range(4)]


def _filt(taps: list[torch.Tensor], coeffs: tuple[int, ...]) -> torch.Tensor:
    return coeffs[0] * taps[0] + coeffs[1] * taps[1] + coeffs[2] * taps[2] + coeffs[3] * taps[3]


def _dwt(x: torch.Tensor, scale: int, bit_depth: int) -> tuple[torch.Tensor, ...]:
    """Bands ``(a, v, h, d)`` (int64 holding int16 at scale 0, int32 above) of int64 frames ``(N, H, W)``."""
    if scale == 0:
        half = 1 << (bit_depth - 1)
        rows = _taps(x, -2)
        lo = _wrap((_filt(rows, LO) - 46342 * half + half) >> bit_depth, 16)
        hi = _wrap((_filt(rows, HI) + half) >> bit_depth, 16)
        add_h, shift_h, width = 32768, 16, 16
    else:
        add_v, shift_v, add_h, shift_h = DWT_SHIFTS[scale - 1]
        rows = _taps(x, -2)
        lo = _wrap((_filt(rows, LO) + add_v) >> shift_v, 32)
        hi = _wrap((_filt(rows, HI) + add_v) >> shift_v, 32)
        width = 32
    clo, chi = _taps(lo, -1), _taps(hi, -1)
    a = _wrap((_filt(clo, LO) + add_h) >> shift_h, width)
    v = _wrap((_filt(clo, HI) + add_h) >> shift_h, width)
    h = _wrap((_filt(chi, LO) + add_h) >> shift_h, width)
    d = _wrap((_filt(chi, HI) + add_h) >> shift_h, width)
    return a, v, h, d


# ----------------------------------------------------------------------------------------------- decoupling
def _angle_flag(oh, ov, th, tv) -> torch.Tensor:
    """libvmaf's 1-degree test: int64 dot/norms, each to float32, divided by 4096 in double."""
    def f(x: torch.Tensor) -> torch.Tensor:
        return x.to(torch.float32).to(torch.float64) / 4096.0

    dp = f(oh * th + ov * tv)
    om = f(oh * oh + ov * ov)
    tm = f(th * th + tv * tv)
    return (dp >= 0.0) & (dp * dp >= COS_1DEG_SQ * om * tm)


def _restore(o: torch.Tensor, t: torch.Tensor, angle: torch.Tensor, scale: int, egl: float,
             table: torch.Tensor) -> torch.Tensor:
    """Restored band ``r`` (int64) of one orientation."""
    if scale == 0:
        kt = (table[o + 32768] * t + 16384) >> 15
    else:
        ao = o.abs()
        small = ao < 32768
        nbits = torch.frexp(ao.to(torch.float64))[1].to(torch.int64)  # bit length: exact below 2**53
        sh = torch.where(small, 0, nbits - 15)  # libvmaf: 17 - clz32(|o|)
        one = torch.ones_like(sh)
        msb = torch.where(small, ao, (ao + (one << (sh - 1).clamp_min(0))) >> sh)
        sign = torch.where(o < 0, -1, 1)
        kt = ((table[msb + 32768] * t) * sign + (one << (14 + sh))) >> (15 + sh)
    k = torch.where(o == 0, 32768, kt).clamp(0, 32768)
    r = (k * o + 16384) >> 15
    # libvmaf tests the sign of float(k)/32768 * float(o)/64: k > 0 and the sign of o
    grow = angle & (k > 0)
    rd, td = r.to(torch.float64) * egl, t.to(torch.float64)
    r = torch.where(grow & (o > 0), torch.where(rd < td, rd, td).trunc().to(torch.int64), r)
    return torch.where(grow & (o < 0), torch.where(rd > td, rd, td).trunc().to(torch.int64), r)


def _decouple(ref_bands, dis_bands, scale: int, egl: float, table: torch.Tensor):
    """``(r, a)``: restored and additive bands, each ``(h, v, d)``."""
    _, ov, oh, od = ref_bands
    _, tv, th, td = dis_bands
    angle = _angle_flag(oh, ov, th, tv)
    bits = 16 if scale == 0 else 32
    r = tuple(_restore(o, t, angle, scale, egl, table) for o, t in ((oh, th), (ov, tv), (od, td)))
    a = tuple(_wrap(t - rr, bits) for t, rr in zip((th, tv, td), r))
    return r, a


# ---------------------------------------------------------------------------------------------- denominator
def _region(x: torch.Tensor, p: ScalePlan) -> torch.Tensor:
    return x[..., p.top:p.bottom, p.left:p.right]


def _den_sums(o_hvd, p: ScalePlan) -> torch.Tensor:
    """Integer denominator sums of h, v, d: ``(N, 3)`` int64."""
    out = []
    for o in o_hvd:
        x = _region(o, p).abs()
        if p.scale == 0:
            rows = (x * x * x).sum(-1)
            out.append(((rows + _round_add(p.den_shift)) >> p.den_shift).sum(-1))
        else:
            q = (31, 30, 31)[p.scale - 1]
            val = ((((x * x) + (1 << q)) >> q) * x + _round_add(p.den_shift)) >> p.den_shift
            rows = val.sum(-1)
            out.append(((rows + _round_add(p.den_row_shift)) >> p.den_row_shift).sum(-1))
    return torch.stack(out, -1)


def den_scale(sums: torch.Tensor, p: ScalePlan) -> torch.Tensor:
    """libvmaf's float32 ``den_scale`` from the integer sums ``(N, 3)``: ``(N,)`` float32."""
    csf = sums.to(torch.float64) / p.den_div * torch.tensor(p.rf_cubed, dtype=torch.float64, device=sums.device)
    terms = powf_third(csf.to(torch.float32)) + np.float32(p.noise)
    return (terms[:, 0] + terms[:, 1]) + terms[:, 2]


# ------------------------------------------------------------------------------------- CSF, contrast masking
def _csf(x_hvd, p: ScalePlan) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
    """``(v, flt)`` per orientation of the CSF of bands ``x``."""
    vs, flts = [], []
    for theta, x in enumerate(x_hvd):
        if p.scale == 0:
            add, sh = (16384, 16384, 65535)[theta], (15, 15, 17)[theta]
            v = _wrap((p.irf[theta] * x + add) >> sh, 16)
            flt = _wrap((4369 * v.abs() + 2048) >> 12, 16)
        else:
            v = _wrap((p.irf[theta] * x + (1 << 27)) >> 28, 32)
            flt = _wrap((143165577 * v.abs() - (1 << 31)) >> 32, 32)
        vs.append(v)
        flts.append(flt)
    return tuple(vs), tuple(flts)


def _neighbour_index(lo: int, hi: int, n: int, device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Indices ``(i-1, i, i+1)`` for ``i`` in ``[lo, hi)`` with libvmaf's CM mirror: ``-1 -> 1``, ``n -> n-1``."""
    i = torch.arange(lo, hi, device=device)
    return torch.where(i == 0, 1, i - 1), i, torch.where(i == n - 1, n - 1, i + 1)


def _threshold(v_hvd, flt_hvd, p: ScalePlan) -> torch.Tensor:
    """The masking threshold over R (int64 holding libvmaf's int32 sum)."""
    rows = _neighbour_index(p.top, p.bottom, p.height, v_hvd[0].device)
    cols = _neighbour_index(p.left, p.right, p.width, v_hvd[0].device)
    thr = 0
    for v, flt in zip(v_hvd, flt_hvd):
        for dy in range(3):
            fr = flt.index_select(-2, rows[dy])
            for dx in range(3):
                if dy == 1 and dx == 1:
                    continue
                thr = thr + fr.index_select(-1, cols[dx])
        vc = _region(v, p).abs()
        if p.scale == 0:
            thr = thr + _wrap((8738 * vc + 2048) >> 12, 16)
        else:
            thr = thr + _wrap((286331153 * vc - (1 << 31)) >> 32, 32)
    return _wrap(thr, 32)


def _cm_sums(signal_hvd, v_hvd, flt_hvd, p: ScalePlan) -> torch.Tensor:
    """Integer contrast-masking sums of h, v, d over R: ``(N, 3)`` int64."""
    thr = _threshold(v_hvd, flt_hvd, p)
    out = []
    for theta, s in enumerate(signal_hvd):
        s = _region(s, p)
        if p.scale == 0:
            x = _wrap(s * p.irf[theta], 32)
            sub, sq = (10, 10, 12)[theta], (29, 29, 30)[theta]
            x = _wrap(x.abs() - _wrap(thr << sub, 32), 32).clamp_min(0)
        else:
            x = _wrap((s * p.irf[theta] + (1 << 27)) >> 28, 32)
            sq = 30
            x = _wrap(x.abs() - thr, 32).clamp_min(0)
        x2 = _wrap((x * x + (1 << (sq - 1))) >> sq, 32)
        c = p.cm_shift[theta]
        rows = ((x2 * x + _round_add(c)) >> c).sum(-1)
        out.append(((rows + _round_add(p.cm_row_shift)) >> p.cm_row_shift).sum(-1))
    return torch.stack(out, -1)


def num_scale(sums: torch.Tensor, p: ScalePlan, noise: bool = True) -> torch.Tensor:
    """libvmaf's float32 ``num_scale`` (``noise=False``: ``aim_num_scale``) from the CM sums ``(N, 3)``."""
    if p.scale == 0:  # (float)(int64 / double): through double
        div = torch.tensor(p.num_div, dtype=torch.float64, device=sums.device)
        f = (sums.to(torch.float64) / div).to(torch.float32)
    else:  # int64 / float: straight to float32, then an exact float division by a power of two
        f = sums.to(torch.float32) / torch.tensor(p.num_div, dtype=torch.float32, device=sums.device)
    terms = powf_third(f)
    if noise:
        terms = terms + np.float32(p.noise)
    return (terms[:, 0] + terms[:, 1]) + terms[:, 2]


# --------------------------------------------------------------------------------------------------- driver
def integer_adm_sums_ref(ref: torch.Tensor, dist: torch.Tensor, bit_depth: int, gain_limit: float = 100.0,
                         csf_mode: int = 0, norm_view_dist: float = 3.0, ref_display_height: int = 1080,
                         noise_weight: float = 0.03125) -> torch.Tensor:
    """Integer sums of every scale: ``(N, 4, 3, 3)`` int64, ``[frame, scale, (num, den, aim), (h, v, d)]``."""
    n, height, width = ref.shape
    plans = scale_plans(height, width, geometry(csf_mode, norm_view_dist, ref_display_height, noise_weight))
    table = div_lookup(ref.device)
    out = torch.empty(n, 4, 3, 3, dtype=torch.int64, device=ref.device)
    step = 4  # frames per step: bounds the int64 working set
    for s in range(0, n, step):
        cur_ref = ref[s:s + step].to(torch.int64)
        cur_dis = dist[s:s + step].to(torch.int64)
        for p in plans:
            rb = _dwt(cur_ref, p.scale, bit_depth)
            db = _dwt(cur_dis, p.scale, bit_depth)
            r, a = _decouple(rb, db, p.scale, gain_limit, table)
            o_hvd = (rb[2], rb[1], rb[3])
            va, fa = _csf(a, p)
            vr, fr = _csf(r, p)
            out[s:s + step, p.scale, 0] = _cm_sums(r, va, fa, p)
            out[s:s + step, p.scale, 1] = _den_sums(o_hvd, p)
            out[s:s + step, p.scale, 2] = _cm_sums(a, vr, fr, p)
            cur_ref, cur_dis = rb[0], db[0]
    return out


def scales_from_sums(sums: torch.Tensor, height: int, width: int,
                     geometry: tuple[int, float, int, float] = AdmOptions().geometry) -> torch.Tensor:
    """libvmaf's float32 ``(num_scale, den_scale, aim_num_scale)`` per scale from the integer sums
    ``(N, 4, 3, 3)``: ``(N, 4, 3)`` float32 on ``sums``' device. Computed on the host in numpy (a few values per
    frame: :func:`num_scale` and :func:`den_scale`'s arithmetic for every scale at once, and one pass of the C
    library's ``powf`` over all of them); a GPU caller pays one small copy each way."""
    host = sums.cpu().numpy()
    n = host.shape[0]
    roots = np.empty((n, 4, 3, 3), np.float32)  # the powf arguments, [frame, scale, (num, den, aim), (h, v, d)]
    noise = np.zeros((4, 3, 1), np.float32)
    for p in scale_plans(height, width, geometry):
        s = host[:, p.scale]
        for q in (0, 2):
            if p.scale == 0:  # (float)(int64 / double): through double
                roots[:, 0, q] = (s[:, q].astype(np.float64) / np.asarray(p.num_div, np.float64)).astype(np.float32)
            else:  # int64 / float: straight to float32, then an exact float division by a power of two
                roots[:, p.scale, q] = s[:, q].astype(np.float32) / np.asarray(p.num_div, np.float32)
        roots[:, p.scale, 1] = (s[:, 1].astype(np.float64) / p.den_div
                                * np.asarray(p.rf_cubed, np.float64)).astype(np.float32)
        noise[p.scale, :2] = np.float32(p.noise)  # num and den carry the noise term, aim does not
    terms = powf_third_array(roots) + noise
    out = (terms[..., 0] + terms[..., 1]) + terms[..., 2]
    return torch.from_numpy(out).to(sums.device)


def integer_adm_ref(ref: torch.Tensor, dist: torch.Tensor, bit_depth: int, gain_limit: float = 100.0,
                    csf_mode: int = 0, norm_view_dist: float = 3.0, ref_display_height: int = 1080,
                    noise_weight: float = 0.03125) -> torch.Tensor:
    """libvmaf's per-scale ``(num_scale, den_scale, aim_num_scale)`` of integer frames ``(N, H, W)``:
    ``(N, 4, 3)`` float32 (the exact float values libvmaf accumulates).

    Inputs are assumed checked (integer samples within ``bit_depth``, equal shapes, ``H, W >= MIN_SIZE``);
    :func:`fusedsim.families.adm.api.integer_adm` does that.
    """
    check_frame_size(*ref.shape[-2:])
    plan = (csf_mode, norm_view_dist, ref_display_height, noise_weight)
    sums = integer_adm_sums_ref(ref, dist, bit_depth, gain_limit, *plan)
    return scales_from_sums(sums, ref.shape[-2], ref.shape[-1], geometry(*plan))


# ---------------------------------------------------------------------------------------------- the columns
def adm_columns(scales: torch.Tensor, height: int, width: int, options: AdmOptions = AdmOptions(),
                debug: bool = False) -> dict[str, torch.Tensor]:
    """libvmaf's per-frame columns (float64 ``(N,)``, named as libvmaf names them for ``options``) from the op's
    ``(N, 4, 3)`` float32 output, with libvmaf's double arithmetic (``integer_compute_adm`` and ``extract``)."""
    s = scales.to(torch.float64)
    num = torch.zeros_like(s[:, 0, 0])
    den = torch.zeros_like(num)
    aim_num = torch.zeros_like(num)
    for k in range(4):  # double accumulation of the float terms, scales in order
        num = num + s[:, k, 0]
        den = den + s[:, k, 1]
        aim_num = aim_num + s[:, k, 2]
    limit = 1e-10 * (width * height) / (1920.0 * 1080.0)
    num = torch.where(num < limit, 0.0, num)
    den = torch.where(den < limit, 0.0, den)
    zero = den == 0.0
    safe = torch.where(zero, 1.0, den)
    adm2 = torch.where(zero, 1.0, num / safe)
    aim = torch.where(zero, torch.nan, aim_num / safe)  # libvmaf leaves aim unset when den == 0
    dlm_weight, min_val = options.dlm_weight, options.min_val
    blend = adm2 * dlm_weight + (1.0 - aim) * (1.0 - dlm_weight)
    adm3 = torch.where(blend > min_val, blend, torch.full_like(blend, min_val))  # libvmaf's MAX macro
    values = [adm2, aim, adm3] + [s[:, k, 0] / s[:, k, 1] for k in range(4)]
    if debug:
        values += [adm2, num, den] + [s[:, k, j] for k in range(4) for j in (0, 1)]
    return dict(zip(column_names(options, debug), values))
