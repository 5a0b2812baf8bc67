"""SSIM family: fused SSIM, pytorch-msssim-compatible SSIM / MS-SSIM, the fused L1+SSIM loss, 2-D and 3-D.

``twin.py`` (the PyTorch specification), ``kernels.py`` + ``kernel_source.py`` (Triton, generated from the windowed
moments building block), ``ops.py`` (op declarations), ``functional.py`` / ``loss.py`` / ``modules.py`` (public API),
``strip_sums.py`` (the engine's strip path). This module declares the metrics and the public names, without
importing torch.
"""

from __future__ import annotations

from fusedsim.core.lazy import lazy_attributes
from fusedsim.metrics.registry import MetricFunctions, MetricSpec, register_metric

_WINDOW = 11  # the default Gaussian window of ssim / ms-ssim
_LEVELS = 5  # MS-SSIM levels with the default weights


def _ssim_functions() -> MetricFunctions:
    from fusedsim.families.ssim import functional, strip_sums

    return MetricFunctions(compute=functional.ssim, strip_sums=strip_sums.ssim_strip_sums,
                           strip_finish=strip_sums.ssim_strip_finish,
                           score_map=lambda ref, dist, **params: functional.ssim(ref, dist, reduction="none",
                                                                                 **params).mean(1))


def _ms_ssim_functions() -> MetricFunctions:
    from fusedsim.families.ssim import functional, strip_sums

    return MetricFunctions(compute=functional.ms_ssim, strip_sums=strip_sums.ms_ssim_strip_sums,
                           strip_finish=strip_sums.ms_ssim_strip_finish)


register_metric(MetricSpec(
    name="ssim", kind="image", functions=_ssim_functions,
    summary="SSIM, pytorch-msssim semantics (11-px Gaussian window, valid region)",
    outputs=("ssim",), higher_is_better=True, identical_value=1.0, value_range=(-1.0, 1.0),
    differentiable=True, min_size=_WINDOW, min_size_reason=f"the window is {_WINDOW} px wide",
    halo_rows=_WINDOW // 2, bytes_per_pixel=90.0,  # CPU twin: 81 B measured + the inputs
    strips=True,
    rank=0,
))

register_metric(MetricSpec(
    name="ms-ssim", kind="image", functions=_ms_ssim_functions, aliases=("ms_ssim", "msssim"),
    summary="MS-SSIM, pytorch-msssim semantics (5 levels, 11-px Gaussian window)",
    outputs=("ms-ssim",), higher_is_better=True, identical_value=1.0, value_range=(0.0, 1.0),
    differentiable=True, min_size=(_WINDOW - 1) * 2 ** (_LEVELS - 1) + 1,
    min_size_reason=f"each of the {_LEVELS} levels must hold the {_WINDOW}-px window",
    halo_rows=(_WINDOW // 2 + 1) << (_LEVELS - 1), bytes_per_pixel=90.0,  # CPU twin: 81 B measured + inputs
    strips=True,
    rank=1,
))

#: Public names (also ``fusedsim.<name>``) and the module defining each, imported on first use.
EXPORTS = {
    "fused_ssim": "functional", "ssim": "functional", "ms_ssim": "functional",
    "l1_ssim_loss": "loss", "L1SSIMLoss": "loss",
    "SSIM": "modules", "MS_SSIM": "modules", "FusedSSIM": "modules",
}

__getattr__, __dir__ = lazy_attributes(__name__, {name: f"{__name__}.{module}" for name, module in EXPORTS.items()})
