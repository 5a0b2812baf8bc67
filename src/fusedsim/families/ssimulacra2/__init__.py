"""SSIMULACRA 2.1 (cloudinary/ssimulacra2).

The family in one folder: ``twin.py`` (the PyTorch specification), ``*_kernel.py`` (Triton), ``cpu.py`` (numba),
``ops.py`` (op declarations), ``api.py`` (public functions); this module declares the metric and the public names,
without importing torch.
"""

from __future__ import annotations

import math

from fusedsim.core.lazy import lazy_attributes
from fusedsim.metrics.registry import MetricFunctions, MetricSpec, register_metric


def _functions() -> MetricFunctions:
    from fusedsim.families.ssimulacra2 import api

    return MetricFunctions(compute=api.ssimulacra2, prepare=api.prepare_ssimulacra2, score_prepared=api.score_prepared_ssimulacra2)


register_metric(MetricSpec(
    name="ssimulacra2", kind="srgb", functions=_functions, aliases=("ssim2",),
    summary="SSIMULACRA 2.1 (cloudinary/ssimulacra2 C++): XYB, 6 scales, recursive Gaussian, 108 weights; "
            "100 = identical",
    outputs=("ssimulacra2",), higher_is_better=True, identical_value=100.0, value_range=(-math.inf, 100.0),
    differentiable=True, min_size=8,
    min_size_reason="the reference skips every scale of an image smaller than 8 px (it returns 100 for any such "
                    "pair)",
    halo_rows=None, bytes_per_pixel=240.0, cached_reference=True, prepared_broadcasts=True,
    rank=1,
))

#: Public names (also ``fusedsim.<name>``), defined in :mod:`.api` and imported on first use.
EXPORTS = ('ssimulacra2', 'SSIMULACRA2Loss', 'prepare_ssimulacra2', 'score_prepared_ssimulacra2')

__getattr__, __dir__ = lazy_attributes(__name__, dict.fromkeys(EXPORTS, f"{__name__}.api"))
