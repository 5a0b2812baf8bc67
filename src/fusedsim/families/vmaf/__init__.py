"""libvmaf's SSIM-family features, bit-exact: integer ``ssim``, ``float_ssim``, ``float_ms_ssim`` and ``psnr``.

Functions take integer luma (or planes) as torch tensors or numpy arrays, ``(H, W)`` or ``(N, H, W)``, and
return per-frame float64 values. :mod:`.features` is the registry the ``fusedsim vmaf`` command uses. This module
declares the features (``vmaf:<name>`` in the metric registry) and the public names, without importing torch.
"""

from __future__ import annotations

from fusedsim.core.lazy import lazy_attributes
from fusedsim.metrics.registry import MetricFunctions, MetricSpec, register_metric

_WINDOW = 11  # the SSIM window of libvmaf's ssim features
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

#: Public names of this package (``fusedsim.<family>.<name>``, not top-level) and the module defining each,
#: imported on first use.
PUBLIC = {
    "integer_ssim": "integer_ssim_api", "float_ssim": "float_ssim_api", "float_ms_ssim": "float_ssim_api",
    "psnr": "psnr_api", "score_clips": "pipeline", "open_clips": "pipeline",
}

__getattr__, __dir__ = lazy_attributes(__name__, {name: f"{__name__}.{module}" for name, module in PUBLIC.items()})

#: No top-level names: these functions are reached through the package.
EXPORTS: tuple[str, ...] = ()
