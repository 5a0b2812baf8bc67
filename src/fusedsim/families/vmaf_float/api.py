"""Public ``float_vif``, ``float_adm`` and ``float_motion``: libvmaf's float features, bit-exact on CPU and GPU.

Options are libvmaf's (names or aliases, e.g. ``vif_enhn_gain_limit=1.0``), validated by the feature tables of
:mod:`fusedsim.families.vmaf.feature_requests`; the returned columns carry libvmaf's printed names with the suffix
of the options that change values (``vif_scale0_egl_1``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from fusedsim.families.vmaf.feature_requests import EXTRACTOR_OPTIONS, FeatureRequest
from fusedsim.families.vmaf.inputs import check_bit_depth, frame_pair, to_frames
from fusedsim.families.vmaf_float import ops
from fusedsim.families.vmaf_float.common_twin import SUPPORTED_BIT_DEPTHS
from fusedsim.families.vmaf_float.vif_twin import VALID_KERNELSCALES, min_vif_size

__all__ = ["ADM_MIN_SIZE", "MOTION_MIN_SIZE", "adm_columns", "float_adm", "float_motion", "float_vif",
           "motion_columns", "request", "vif_columns"]

#: Smallest side of ``float_adm``'s frames: four halvings leave a 3x3 neighbourhood (as ``vmaf:adm``).
ADM_MIN_SIZE = 33
#: Smallest side of ``float_motion``'s frames: the 5-tap blur mirrors once.
MOTION_MIN_SIZE = 3
_CSF_UNSUPPORTED = {1: "Barten", 2: "ADM native"}


def request(extractor: str, options: dict[str, Any] | None) -> FeatureRequest:
    """libvmaf's options of ``extractor`` validated (names or aliases; unknown or unsupported ones raise)."""
    FeatureRequest.of(extractor, {})  # an unknown extractor raises, listing the known ones
    by_alias = {o.alias: o.name for o in EXTRACTOR_OPTIONS[extractor] if o.alias}
    named = {by_alias.get(k, k): v for k, v in (options or {}).items()}
    req = FeatureRequest.of(extractor, named)
    if extractor == "float_vif":
        ks = float(np.float32(req.option("vif_kernelscale")))
        if not any(abs(float(np.float32(ks - np.float32(v)))) < 1e-3 for v in VALID_KERNELSCALES):
            raise ValueError(f"feature 'float_vif' option 'vif_kernelscale' must be one of libvmaf's kernel scales "
                             f"({', '.join(f'{v:.6g}' for v in VALID_KERNELSCALES)}); got {ks:g}")
    if extractor == "float_adm" and req.option("adm_csf_mode") in _CSF_UNSUPPORTED:
        mode = req.option("adm_csf_mode")
        raise ValueError(f"feature 'float_adm' option 'adm_csf_mode'={mode} ({_CSF_UNSUPPORTED[mode]} CSF) is not "
                         f"supported yet: 0 (Watson) and 3..9 (libvmaf treats them as 0) are")
    return req


def _pair(ref, dist, bit_depth: int, what: str, min_size: int):
    bd = check_bit_depth(bit_depth, SUPPORTED_BIT_DEPTHS, what)
    r, d, squeeze = frame_pair(ref, dist, bd)
    h, w = r.shape[-2:]
    if h < min_size or w < min_size:
        raise ValueError(f"ref is {h}x{w} (HxW); {what} needs at least {min_size}x{min_size}")
    return bd, r, d, squeeze


def _squeeze(columns: dict[str, torch.Tensor], squeeze: bool) -> dict[str, torch.Tensor]:
    return {name: v[0] for name, v in columns.items()} if squeeze else columns


# ------------------------------------------------------------------------------------------------------ VIF
def vif_columns(num_den: torch.Tensor, req: FeatureRequest) -> dict[str, torch.Tensor]:
    """libvmaf's ``float_vif`` columns from the op's ``(N, 8)`` (float32 values): quotients in double."""
    sx = req.suffix
    num, den = num_den[:, 0::2], num_den[:, 1::2]
    ratio = num / den
    skip0 = bool(req.option("vif_skip_scale0"))
    out = {f"vif_scale0{sx}": torch.zeros_like(ratio[:, 0]) if skip0 else ratio[:, 0]}
    for s in (1, 2, 3):
        out[f"vif_scale{s}{sx}"] = torch.clamp_min(ratio[:, s], float(req.option(f"vif_scale{s}_min_val")))
    if req.option("debug"):
        start = 1 if req.option("vif_skip_scale0") else 0
        total_num = torch.zeros_like(num[:, 0])
        total_den = torch.zeros_like(den[:, 0])
        for s in range(start, 4):
            total_num = total_num + num[:, s]
            total_den = total_den + den[:, s]
        out[f"vif{sx}"] = torch.where(total_den == 0, torch.ones_like(total_den), total_num / total_den)
        out[f"vif_num{sx}"], out[f"vif_den{sx}"] = total_num, total_den
        for s in range(4):
            out[f"vif_num_scale{s}{sx}"], out[f"vif_den_scale{s}{sx}"] = num[:, s], den[:, s]
    return out


def float_vif(ref: torch.Tensor | np.ndarray, dist: torch.Tensor | np.ndarray, bit_depth: int,
              **options: Any) -> dict[str, torch.Tensor]:
    """libvmaf's ``float_vif`` per frame, bit-identical to libvmaf 3.2.0.

    Args:
        ref, dist: integer luma ``(H, W)`` or ``(N, H, W)`` of equal shapes (torch tensors on any device, or numpy
            arrays), samples in ``[0, 2**bit_depth)``; at least 16x16 (more for kernel scales above 1).
        bit_depth: 8, 10, 12 or 16.
        **options: libvmaf's ``float_vif`` options by name or alias: ``vif_enhn_gain_limit`` (``egl``, [1, 100]),
            ``vif_kernelscale`` (``ks``, one of libvmaf's 21 values), ``vif_sigma_nsq`` (``snsq``),
            ``vif_skip_scale0`` (``ssclz``), ``vif_scale1_min_val`` .. ``vif_scale3_min_val``, ``debug``;
            ``vif_prescale`` and ``vif_prescale_method`` only at their defaults.

    Returns:
        ``{name: float64 tensor}``, each ``(N,)`` (``()`` for ``(H, W)`` inputs): ``vif_scale0..3`` (and with
        ``debug`` ``vif``, ``vif_num``, ``vif_den``, ``vif_num_scaleS``, ``vif_den_scaleS``), suffixed as libvmaf
        suffixes them (``vif_scale0_egl_1``).
    """
    req = request("float_vif", options)
    ks = float(req.option("vif_kernelscale"))
    bd, r, d, squeeze = _pair(ref, dist, bit_depth, "float_vif", min_vif_size(ks))
    nd = ops.float_vif(r, d, bd, float(req.option("vif_enhn_gain_limit")), ks, float(req.option("vif_sigma_nsq")),
                       int(req.option("vif_skip_scale0")))
    return _squeeze(vif_columns(nd, req), squeeze)


# ------------------------------------------------------------------------------------------------------ ADM
def _adm_scalars(req: FeatureRequest) -> tuple:
    factors = tuple(float(req.option(f"adm_f{k}s{s}")) for k in (1, 2) for s in range(4))
    return (float(req.option("adm_enhn_gain_limit")), float(req.option("adm_norm_view_dist")),
            int(req.option("adm_ref_display_height")), float(req.option("adm_noise_weight")),
            float(req.option("adm_p_norm")), int(req.option("adm_bypass_cm")), int(req.option("adm_skip_scale0")),
            *factors)


def adm_columns(values: torch.Tensor, req: FeatureRequest, width: int, height: int) -> dict[str, torch.Tensor]:
    """libvmaf's ``float_adm`` columns from the op's ``(N, 12)`` (``compute_adm`` and ``float_adm.c``'s
    ``extract``, in double, sums in scale order)."""
    sx = req.suffix
    v = values.view(-1, 4, 3)
    skip_aim = int(req.option("adm_skip_aim_scale"))
    num = torch.zeros_like(v[:, 0, 0])
    den = torch.zeros_like(num)
    aim_num = torch.zeros_like(num)
    aim_den = torch.zeros_like(num)
    for s in range(4):
        num = num + v[:, s, 0]
        den = den + v[:, s, 1]
        if s != skip_aim:
            aim_den = aim_den + v[:, s, 1]
            aim_num = aim_num + v[:, s, 2]
    limit = 1e-10 * (width * height) / (1920.0 * 1080.0)
    num = torch.where(num < limit, torch.zeros_like(num), num)
    den = torch.where(den < limit, torch.zeros_like(den), den)
    flat = den == 0.0
    # libvmaf leaves aim unset when den is 0 (it prints whatever the stack held): NaN here
    adm2 = torch.where(flat, torch.ones_like(num), num / torch.where(flat, torch.ones_like(den), den))
    aim = torch.where(flat, torch.full_like(num, float("nan")), torch.clamp_max(aim_num / aim_den, 1.0))
    min_val = float(req.option("adm_min_val"))
    if req.option("adm_adm3_apply_hm"):
        adm3 = torch.clamp_min(2 * adm2 * aim / (adm2 + aim), min_val)
    else:
        w = float(req.option("adm_dlm_weight"))
        adm3 = torch.clamp_min(adm2 * w + (1 - aim) * (1 - w), min_val)
    out = {f"adm2{sx}": adm2, f"aim{sx}": aim, f"adm3{sx}": adm3}
    for s in range(4):
        out[f"adm_scale{s}{sx}"] = v[:, s, 0] / v[:, s, 1]
    if req.option("debug"):
        out[f"adm{sx}"], out[f"adm_num{sx}"], out[f"adm_den{sx}"] = adm2, num, den
        for s in range(4):
            out[f"adm_num_scale{s}{sx}"], out[f"adm_den_scale{s}{sx}"] = v[:, s, 0], v[:, s, 1]
    return out


def float_adm(ref: torch.Tensor | np.ndarray, dist: torch.Tensor | np.ndarray, bit_depth: int,
              **options: Any) -> dict[str, torch.Tensor]:
    """libvmaf's ``float_adm`` per frame, bit-identical to libvmaf 3.2.0 (on x86-64 machines whose ``rcpss``
    matches :mod:`~fusedsim.families.vmaf_float.rcp_table`, such as the reference's).

    Args:
        ref, dist: integer luma ``(H, W)`` or ``(N, H, W)``, at least 33x33; see :func:`float_vif`.
        bit_depth: 8, 10, 12 or 16.
        **options: libvmaf's ``float_adm`` options by name or alias: ``adm_enhn_gain_limit`` (``egl``),
            ``adm_norm_view_dist`` (``nvd``), ``adm_ref_display_height`` (``rdf``), ``adm_noise_weight`` (``nw``),
            ``adm_p_norm`` (``apn``), ``adm_bypass_cm`` (``bcm``), ``adm_dlm_weight`` (``dlmw``), ``adm_min_val``
            (``min``), ``adm_adm3_apply_hm`` (``aah``), ``adm_f1s0..3`` / ``adm_f2s0..3`` (CSF factor overrides),
            ``adm_skip_aim_scale`` (``sasc``), ``adm_skip_scale0`` (``ssz``), ``adm_csf_mode`` (``csf``: Watson
            only), ``adm_csf_scale`` / ``adm_csf_diag_scale`` (used by libvmaf's Barten CSF only), ``debug``.

    Returns:
        ``{name: float64 tensor}``: ``adm2``, ``aim``, ``adm3``, ``adm_scale0..3`` (with ``debug`` also ``adm``,
        ``adm_num``, ``adm_den``, ``adm_num_scaleS``, ``adm_den_scaleS``), suffixed as libvmaf suffixes them.
    """
    req = request("float_adm", options)
    bd, r, d, squeeze = _pair(ref, dist, bit_depth, "float_adm", ADM_MIN_SIZE)
    values = ops.float_adm(r, d, bd, *_adm_scalars(req))
    return _squeeze(adm_columns(values, req, r.shape[-1], r.shape[-2]), squeeze)


# ---------------------------------------------------------------------------------------------------- motion
def motion_columns(sad: torch.Tensor, req: FeatureRequest) -> dict[str, torch.Tensor]:
    """libvmaf's ``float_motion`` columns of a whole clip from its pair scores ``(n-1,)`` (frames ``i-1, i``)."""
    from fusedsim.families.vmaf_float.stream import FloatMotionStream

    stream = FloatMotionStream.for_request(req)
    return stream.columns_from_scores(sad)


def float_motion(frames: torch.Tensor | np.ndarray, bit_depth: int, **options: Any) -> dict[str, torch.Tensor]:
    """libvmaf's ``float_motion`` of a whole reference clip, bit-identical to libvmaf 3.2.0.

    Args:
        frames: the reference clip's integer luma ``(N, H, W)`` (or one frame ``(H, W)``), at least 3x3.
        bit_depth: 8, 10, 12 or 16.
        **options: libvmaf's ``float_motion`` options by name or alias: ``motion_force_zero`` (``force_0``),
            ``motion_fps_weight`` (``mfw``), ``motion_blend_factor`` (``mbf``), ``motion_blend_offset``
            (``mbo``), ``motion_max_val`` (``mmxv``), ``motion_filter_size`` (``mfs``), ``debug`` (default true,
            as in libvmaf); ``motion_add_scale1`` and ``motion_add_uv`` only at their defaults.

    Returns:
        ``{name: float64 tensor}`` of ``(N,)``: ``motion2``, ``motion3`` and (``debug``) ``motion``, suffixed as
        libvmaf suffixes them. Clips arriving in batches: :class:`~fusedsim.families.vmaf_float.stream.FloatMotionStream`.
    """
    from fusedsim.families.vmaf_float.stream import FloatMotionStream

    req = request("float_motion", options)
    bd = check_bit_depth(bit_depth, SUPPORTED_BIT_DEPTHS, "float_motion")
    t = to_frames(frames, "frames")
    stream = FloatMotionStream.for_request(req, bit_depth=bd)
    from fusedsim.families.motion.stream import concat_columns

    return concat_columns([stream.push(t), stream.flush()])
