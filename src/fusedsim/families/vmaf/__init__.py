"""libvmaf, bit-exact: the VMAF score (models ``vmaf_v0.6.1``, ``neg``, ``4k``) from integer VIF, ADM and motion,
and the SSIM-family features integer ``ssim``, ``float_ssim``, ``float_ms_ssim`` and ``psnr``.

Functions take integer luma (or planes) as torch tensors or numpy arrays, ``(H, W)`` or ``(N, H, W)``, and
return per-frame float64 values. :mod:`.features` is the registry the ``fusedsim vmaf`` command uses. This module
declares the features (``vmaf:<name>`` in the metric registry) and the public names, without importing torch.
"""

from __future__ import annotations

import math

from fusedsim.core.lazy import lazy_attributes
from fusedsim.metrics.registry import MetricFunctions, MetricSpec, register_metric

_WINDOW = 11  # the SSIM window of libvmaf's ssim features
_VIF_MIN = 16  # each scale must be at least half its filter plus one (fusedsim.vif)
_ADM_MIN = 33  # libvmaf's 4-level wavelet reads inside the picture from 33x33 (fusedsim.adm)
_LEVELS = 5  # float_ms_ssim's scales


def _integer_ssim_features() -> MetricFunctions:
    from fusedsim.families.vmaf import features, ops

    return MetricFunctions(compute=features.integer_ssim_feature, ops=(ops.integer_ssim,))


register_metric(MetricSpec(
    name="vmaf:ssim", kind="video", functions=_integer_ssim_features,
    summary="libvmaf's integer SSIM (luma), bit-exact",
    outputs=("ssim",), higher_is_better=True, identical_value=1.0, value_range=(-1.0, 1.0),
    min_size=1, min_size_reason="out-of-frame window taps are skipped, as in libvmaf",
    planes=("y",), halo_rows=_WINDOW // 2, bytes_per_pixel=100.0,
    rank=0,
))

def _float_ssim_features() -> MetricFunctions:
    from fusedsim.families.vmaf import features, ops

    return MetricFunctions(compute=features.float_ssim_feature, ops=(ops.sequential_sum, ops.iqa_decimate, ops.iqa_ssim_maps))


register_metric(MetricSpec(
    name="vmaf:float_ssim", kind="video", functions=_float_ssim_features,
    summary="libvmaf's float_ssim (luma, auto-downscale), bit-exact",
    outputs=("float_ssim",), higher_is_better=True, identical_value=1.0, value_range=(-1.0, 1.0),
    min_size=_WINDOW, min_size_reason=f"the {_WINDOW}x{_WINDOW} window must fit in the (downscaled) frame",
    planes=("y",), halo_rows=None, bytes_per_pixel=64.0,
    rank=1,
))

def _float_ms_ssim_features() -> MetricFunctions:
    from fusedsim.families.vmaf import features, ops

    return MetricFunctions(compute=features.float_ms_ssim_feature, ops=(ops.sequential_sum, ops.iqa_decimate, ops.iqa_ssim_maps))


register_metric(MetricSpec(
    name="vmaf:float_ms_ssim", kind="video", functions=_float_ms_ssim_features,
    summary="libvmaf's float_ms_ssim (luma, 5 scales), bit-exact",
    outputs=("float_ms_ssim",), higher_is_better=True, identical_value=1.0, value_range=(-1.0, 1.0),
    min_size=_WINDOW << (_LEVELS - 1), min_size_reason=f"libvmaf needs {_WINDOW} px at the fifth of 5 scales",
    planes=("y",), halo_rows=None, bytes_per_pixel=86.0,
    rank=2,
))

def _psnr_features() -> MetricFunctions:
    from fusedsim.families.vmaf import features, ops

    return MetricFunctions(compute=features.psnr_feature, ops=())


register_metric(MetricSpec(
    name="vmaf:psnr", kind="video", functions=_psnr_features,
    summary="libvmaf's psnr: psnr_y, psnr_cb, psnr_cr, capped at 6*bit_depth+12 dB",
    outputs=("psnr_y", "psnr_cb", "psnr_cr"), higher_is_better=True, identical_value=None,
    value_range=(0.0, 6.0 * 16 + 12), min_size=1, min_size_reason="any size", halo_rows=0, bytes_per_pixel=54.0,
    rank=3,
))

def _vif_features() -> MetricFunctions:
    from fusedsim.families.vif import ops as vif_ops
    from fusedsim.families.vmaf import features

    return MetricFunctions(compute=features.integer_vif_feature, ops=tuple(vif_ops.OPS))


register_metric(MetricSpec(
    name="vmaf:vif", kind="video", functions=_vif_features,
    summary="libvmaf's integer VIF (luma, 4 scales), bit-exact; an input of VMAF",
    outputs=("integer_vif_scale0", "integer_vif_scale1", "integer_vif_scale2", "integer_vif_scale3"),
    higher_is_better=True, identical_value=None, value_range=(0.0, math.inf),
    min_size=_VIF_MIN, min_size_reason="four scales of 2x subsampling with reflected borders",
    planes=("y",), halo_rows=None, bytes_per_pixel=64.0,
    rank=4,
))


def _adm_features() -> MetricFunctions:
    from fusedsim.families.adm import ops as adm_ops
    from fusedsim.families.vmaf import features

    return MetricFunctions(compute=features.integer_adm_feature, ops=tuple(adm_ops.OPS))


register_metric(MetricSpec(
    name="vmaf:adm", kind="video", functions=_adm_features,
    summary="libvmaf's integer ADM (luma): adm2, aim, adm3 and 4 scales, bit-exact; an input of VMAF",
    # (integer_aim, an impairment that grows with distortion, is reported too: not listed, as the spec's
    # direction is that of the other outputs)
    outputs=("integer_adm2", "integer_adm3", "integer_adm_scale0", "integer_adm_scale1", "integer_adm_scale2",
             "integer_adm_scale3"),
    higher_is_better=True, identical_value=None, value_range=(0.0, math.inf),
    min_size=_ADM_MIN, min_size_reason="a 4-level wavelet decomposition",
    planes=("y",), halo_rows=None, bytes_per_pixel=64.0,
    rank=5,
))


def _motion_features() -> MetricFunctions:
    from fusedsim.families.motion import ops as motion_ops
    from fusedsim.families.vmaf import features

    return MetricFunctions(compute=features.integer_motion_feature, ops=tuple(motion_ops.OPS))


register_metric(MetricSpec(
    name="vmaf:motion", kind="video", functions=_motion_features,
    summary="libvmaf 3.2.0's integer motion of the reference (motion2, motion3), bit-exact; an input of VMAF",
    outputs=("VMAF_integer_feature_motion_sad_score", "integer_motion2", "integer_motion3"),
    higher_is_better=False, identical_value=None, value_range=(0.0, 10000.0),
    min_size=3, min_size_reason="the 5-tap blur reflects at the borders",
    planes=("y",), halo_rows=None, bytes_per_pixel=8.0,
    rank=6,
))


def _cambi_features() -> MetricFunctions:
    from fusedsim.families.cambi import ops as cambi_ops
    from fusedsim.families.vmaf import features

    return MetricFunctions(compute=features.cambi_feature, ops=tuple(cambi_ops.OPS))


register_metric(MetricSpec(
    name="vmaf:cambi", kind="video", functions=_cambi_features,
    summary="libvmaf's CAMBI banding score (distorted luma, no reference; 5 scales), bit-exact; an input of VMAF v1",
    outputs=("cambi",), higher_is_better=False, identical_value=None, value_range=(0.0, 1000.0),
    min_size=216, min_size_reason="libvmaf's CAMBI refuses an encode size below 216 in both width and height",
    planes=("y",), halo_rows=None, bytes_per_pixel=24.0,
    rank=20,
))


def _psnr_hvs_features() -> MetricFunctions:
    from fusedsim.families.psnr_hvs import api, ops as psnr_hvs_ops

    return MetricFunctions(compute=api.psnr_hvs_feature, ops=tuple(psnr_hvs_ops.OPS))


register_metric(MetricSpec(
    name="vmaf:psnr_hvs", kind="video", functions=_psnr_hvs_features,
    summary="libvmaf's PSNR-HVS (8x8 DCT, CSF and masking) of Y, Cb, Cr and combined, bit-exact",
    outputs=("psnr_hvs_y", "psnr_hvs_cb", "psnr_hvs_cr", "psnr_hvs"), higher_is_better=True, identical_value=None,
    value_range=(0.0, math.inf), min_size=16,
    min_size_reason="every plane needs an 8x8 block: 16x16 luma with 4:2:0 chroma", bytes_per_pixel=16.0,
    rank=7,
))


def _ciede_features() -> MetricFunctions:
    from fusedsim.families.ciede import api, ops as ciede_ops

    return MetricFunctions(compute=api.ciede_feature, ops=tuple(ciede_ops.OPS))


register_metric(MetricSpec(
    name="vmaf:ciede", kind="video", functions=_ciede_features,
    summary="libvmaf's CIEDE2000 (BT.709 Y'CbCr to Lab, 45 - 20 log10 of the mean dE00)",
    outputs=("ciede2000",), higher_is_better=True, identical_value=None, value_range=(-math.inf, math.inf),
    min_size=1, min_size_reason="any size", bytes_per_pixel=60.0,
    rank=8,
))


def _speed_chroma_features() -> MetricFunctions:
    from fusedsim.families.speed_chroma import ops as speed_ops
    from fusedsim.families.vmaf import features

    return MetricFunctions(compute=features.speed_chroma_feature, ops=tuple(speed_ops.OPS))


register_metric(MetricSpec(
    name="vmaf:speed_chroma", kind="video", functions=_speed_chroma_features,
    summary="libvmaf's SpEED chroma (Cb, Cr: speed_chroma_u/_v/_uv), bit-exact; an input of VMAF v1",
    outputs=("speed_chroma_u", "speed_chroma_v", "speed_chroma_uv"),
    higher_is_better=False, identical_value=None, value_range=(0.0, 1000.0),
    min_size=160, min_size_reason="4:2:0 chroma decimated by 16 must hold a 5x5 block (80x80 chroma planes)",
    planes=("y", "u", "v"), halo_rows=None, bytes_per_pixel=8.0,
    rank=9,
))


def _float_vif_features() -> MetricFunctions:
    from fusedsim.families.vmaf_float import features, ops

    return MetricFunctions(compute=features.float_vif_feature, ops=(ops.float_vif,))


register_metric(MetricSpec(
    name="vmaf:float_vif", kind="video", functions=_float_vif_features,
    summary="libvmaf's float VIF (luma, 4 scales: vif_scale0..3), bit-exact",
    outputs=("vif_scale0", "vif_scale1", "vif_scale2", "vif_scale3"),
    higher_is_better=True, identical_value=None, value_range=(0.0, math.inf),
    min_size=_VIF_MIN, min_size_reason="four scales of 2x subsampling with mirrored borders",
    planes=("y",), halo_rows=None, bytes_per_pixel=64.0,
    rank=10,
))


def _float_adm_features() -> MetricFunctions:
    from fusedsim.families.vmaf_float import features, ops

    return MetricFunctions(compute=features.float_adm_feature, ops=(ops.float_adm,))


register_metric(MetricSpec(
    name="vmaf:float_adm", kind="video", functions=_float_adm_features,
    summary="libvmaf's float ADM (luma): adm2, aim, adm3 and 4 scales, bit-exact",
    outputs=("adm2", "adm3", "adm_scale0", "adm_scale1", "adm_scale2", "adm_scale3"),
    higher_is_better=True, identical_value=None, value_range=(0.0, math.inf),
    min_size=_ADM_MIN, min_size_reason="a 4-level wavelet decomposition",
    planes=("y",), halo_rows=None, bytes_per_pixel=64.0,
    rank=11,
))


def _float_motion_features() -> MetricFunctions:
    from fusedsim.families.vmaf_float import features, ops

    return MetricFunctions(compute=features.float_motion_feature, ops=(ops.float_motion_sad,))


register_metric(MetricSpec(
    name="vmaf:float_motion", kind="video", functions=_float_motion_features,
    summary="libvmaf's float motion of the reference (motion, motion2, motion3), bit-exact",
    outputs=("motion", "motion2", "motion3"),
    higher_is_better=False, identical_value=None, value_range=(0.0, 10000.0),
    min_size=3, min_size_reason="the 5-tap blur reflects at the borders",
    planes=("y",), halo_rows=None, bytes_per_pixel=8.0,
    rank=12,
))


#: Public names of this package (``fusedsim.<family>.<name>``, not top-level) and the module defining each,
#: imported on first use.
PUBLIC = {
    "integer_ssim": "integer_ssim_api", "float_ssim": "float_ssim_api", "float_ms_ssim": "float_ssim_api",
    "psnr": "psnr_api", "score_clips": "pipeline", "open_clips": "pipeline", "vmaf": "score_api",
    "VmafStream": "score_api", "load_model": "model", "BUILT_IN_MODELS": "model",
}

__getattr__, __dir__ = lazy_attributes(__name__, {name: f"{__name__}.{module}" for name, module in PUBLIC.items()})

#: No top-level names: these functions are reached through the package.
EXPORTS: tuple[str, ...] = ()
