"""The built-in metrics, declared for :mod:`fusedsim.metrics.registry` (torch-free: compute functions are strings).

Working-set coefficients are upper estimates for the PyTorch twins (the larger of the two paths), per pixel and
channel of one pair, inputs included: the engine refines them with measured values.
"""

from __future__ import annotations

import math

from fusedsim.metrics.registry import MetricSpec, register_metric

_WINDOW = 11  # the default Gaussian window of ssim / ms-ssim
_LEVELS = 5  # MS-SSIM levels with the default weights

# ------------------------------------------------------------------------------------------ images (float RGB)
register_metric(MetricSpec(
    name="ssim", kind="image", compute="fusedsim.ssim:ssim",
    summary="SSIM, pytorch-msssim semantics (11-px Gaussian window, valid region)",
    outputs=("ssim",), higher_is_better=True, identical_value=1.0, value_range=(-1.0, 1.0),
    differentiable=True, min_size=_WINDOW, min_size_reason=f"the window is {_WINDOW} px wide",
    halo_rows=_WINDOW // 2, bytes_per_pixel=56.0,
))
register_metric(MetricSpec(
    name="ms-ssim", kind="image", compute="fusedsim.ssim:ms_ssim", aliases=("ms_ssim", "msssim"),
    summary="MS-SSIM, pytorch-msssim semantics (5 levels, 11-px Gaussian window)",
    outputs=("ms-ssim",), higher_is_better=True, identical_value=1.0, value_range=(0.0, 1.0),
    differentiable=True, min_size=(_WINDOW - 1) * 2 ** (_LEVELS - 1) + 1,
    min_size_reason=f"each of the {_LEVELS} levels must hold the {_WINDOW}-px window",
    halo_rows=None, bytes_per_pixel=75.0,
))
register_metric(MetricSpec(
    name="psnr", kind="image", compute="fusedsim.metrics:psnr",
    summary="PSNR over all channels and pixels, 10*log10(data_range^2 / MSE) in dB",
    outputs=("psnr",), higher_is_better=True, identical_value=math.inf, value_range=(0.0, math.inf),
    differentiable=True, min_size=1, min_size_reason="any size", halo_rows=0, bytes_per_pixel=16.0,
))

# ------------------------------------------------------------------------ libvmaf features (integer Y'CbCr planes)
register_metric(MetricSpec(
    name="vmaf:ssim", kind="video", compute="fusedsim.vmaf.features:integer_ssim_feature",
    summary="libvmaf's integer SSIM (luma), bit-exact",
    outputs=("ssim",), higher_is_better=True, identical_value=1.0, value_range=(-1.0, 1.0),
    min_size=1, min_size_reason="out-of-frame window taps are skipped, as in libvmaf",
    planes=("y",), halo_rows=_WINDOW // 2, bytes_per_pixel=100.0,
))
register_metric(MetricSpec(
    name="vmaf:float_ssim", kind="video", compute="fusedsim.vmaf.features:float_ssim_feature",
    summary="libvmaf's float_ssim (luma, auto-downscale), bit-exact",
    outputs=("float_ssim",), higher_is_better=True, identical_value=1.0, value_range=(-1.0, 1.0),
    min_size=_WINDOW, min_size_reason=f"the {_WINDOW}x{_WINDOW} window must fit in the (downscaled) frame",
    planes=("y",), halo_rows=None, bytes_per_pixel=64.0,
))
register_metric(MetricSpec(
    name="vmaf:float_ms_ssim", kind="video", compute="fusedsim.vmaf.features:float_ms_ssim_feature",
    summary="libvmaf's float_ms_ssim (luma, 5 scales), bit-exact",
    outputs=("float_ms_ssim",), higher_is_better=True, identical_value=1.0, value_range=(-1.0, 1.0),
    min_size=_WINDOW << (_LEVELS - 1), min_size_reason=f"libvmaf needs {_WINDOW} px at the fifth of 5 scales",
    planes=("y",), halo_rows=None, bytes_per_pixel=86.0,
))
register_metric(MetricSpec(
    name="vmaf:psnr", kind="video", compute="fusedsim.vmaf.features:psnr_feature",
    summary="libvmaf's psnr: psnr_y, psnr_cb, psnr_cr, capped at 6*bit_depth+12 dB",
    outputs=("psnr_y", "psnr_cb", "psnr_cr"), higher_is_better=True, identical_value=None,
    value_range=(0.0, 6.0 * 16 + 12), min_size=1, min_size_reason="any size", halo_rows=0, bytes_per_pixel=54.0,
))
