"""PSNR of image pairs (``psnr.api``): 10·log10(data_range² / MSE) per image, any size, differentiable.

This module declares the metric and the public name, without importing torch.
"""

from __future__ import annotations

import math

from fusedsim.core.lazy import lazy_attributes
from fusedsim.metrics.registry import MetricFunctions, MetricSpec, register_metric


def _functions() -> MetricFunctions:
    from fusedsim.families.psnr import api
    from fusedsim.families.ssim import strip_sums

    return MetricFunctions(compute=api.psnr, strip_sums=strip_sums.psnr_strip_sums,
                           strip_finish=strip_sums.psnr_strip_finish)


register_metric(MetricSpec(
    name="psnr", kind="image", functions=_functions,
    summary="PSNR over all channels and pixels, 10*log10(data_range^2 / MSE) in dB",
    outputs=("psnr",), higher_is_better=True, identical_value=math.inf, value_range=(0.0, math.inf),
    differentiable=True, min_size=1, min_size_reason="any size", halo_rows=0, bytes_per_pixel=16.0,
    strips=True,
    rank=2,
))

#: Public names, defined in :mod:`.api` and imported on first use (``fusedsim.metrics.psnr``).
EXPORTS = ("psnr",)

__getattr__, __dir__ = lazy_attributes(__name__, dict.fromkeys(EXPORTS, f"{__name__}.api"))
