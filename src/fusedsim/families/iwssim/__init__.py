"""IW-SSIM (Wang & Li 2011, the authors' MATLAB code): information-weighted multi-scale SSIM.

The family in one folder: ``twin.py`` (the PyTorch specification), ``*_kernel.py`` (Triton), ``cpu.py`` (numba),
``ops.py`` (op declarations), ``api.py`` (public functions); this module declares the metric and the public names,
without importing torch.
"""

from __future__ import annotations

from fusedsim.core.lazy import lazy_attributes
from fusedsim.metrics.registry import MetricFunctions, MetricSpec, register_metric


def _functions() -> MetricFunctions:
    from fusedsim.families.iwssim import api

    return MetricFunctions(compute=api.iw_ssim, prepare=api.prepare_iw_ssim, score_prepared=api.score_prepared_iw_ssim,
                           check_params=api.check_iw_ssim_params)


register_metric(MetricSpec(
    name="iw-ssim", kind="srgb", functions=_functions, aliases=("iwssim", "iw_ssim"),
    summary="IW-SSIM (Wang & Li 2011, the authors' MATLAB code): information-content weighted multi-scale SSIM "
            "of the grey image; 1 = identical",
    outputs=("iw-ssim",), higher_is_better=True, identical_value=1.0, value_range=(0.0, 1.0),
    differentiable=True, min_size=176,
    min_size_reason="5 pyramid levels, each at least as large as the 11x11 window (the authors' code refuses "
                    "smaller)",
    halo_rows=None, bytes_per_pixel=120.0, cached_reference=True, prepared_broadcasts=True,
    params=(("luma", "matlab"),),
    rank=4,
))

#: Public names (also ``fusedsim.<name>``), defined in :mod:`.api` and imported on first use.
EXPORTS = ('iw_ssim', 'IWSSIMLoss', 'prepare_iw_ssim', 'score_prepared_iw_ssim')

__getattr__, __dir__ = lazy_attributes(__name__, dict.fromkeys(EXPORTS, f"{__name__}.api"))
