"""DSSIM (kornelski/dssim 3.5.0): multi-scale SSIM in its scaled L*a*b*.

The family in one folder: ``twin.py`` (the PyTorch specification), ``*_kernel.py`` (Triton), ``cpu.py`` (numba),
``ops.py`` (op declarations), ``api.py`` (public functions); this module declares the metric and the public names,
without importing torch.
"""

from __future__ import annotations

import math

from fusedsim.core.lazy import lazy_attributes
from fusedsim.metrics.registry import MetricFunctions, MetricSpec, register_metric


def _functions() -> MetricFunctions:
    from fusedsim.families.dssim import api

    return MetricFunctions(compute=api.dssim, prepare=api.prepare_dssim, score_prepared=api.score_prepared_dssim)


register_metric(MetricSpec(
    name="dssim", kind="srgb", functions=_functions,
    summary="DSSIM (kornelski/dssim 3.5.0): multi-scale SSIM in its scaled L*a*b*, 1/SSIM - 1; 0 = identical",
    outputs=("dssim",), higher_is_better=False, identical_value=0.0, value_range=(0.0, math.inf),
    differentiable=True, min_size=1, min_size_reason="any size (images under 8 px use one scale, as dssim)",
    halo_rows=None, bytes_per_pixel=160.0, cached_reference=True, prepared_broadcasts=True,
    rank=3,
))

#: Public names (also ``fusedsim.<name>``), defined in :mod:`.api` and imported on first use.
EXPORTS = ('dssim', 'DSSIMLoss', 'prepare_dssim', 'score_prepared_dssim')

__getattr__, __dir__ = lazy_attributes(__name__, dict.fromkeys(EXPORTS, f"{__name__}.api"))
