"""zensim (imazen/zensim 0.2.7 linear profiles).

The family in one folder: ``twin.py`` (the PyTorch specification), ``*_kernel.py`` (Triton), ``cpu.py`` (numba),
``ops.py`` (op declarations), ``api.py`` (public functions); this module declares the metric and the public names,
without importing torch.
"""

from __future__ import annotations

import math

from fusedsim.core.lazy import lazy_attributes
from fusedsim.metrics.registry import MetricFunctions, MetricSpec, register_metric


def _functions() -> MetricFunctions:
    from fusedsim.families.zensim import api

    return MetricFunctions(compute=api.zensim, prepare=api.prepare_zensim, score_prepared=api.score_prepared_zensim)


register_metric(MetricSpec(
    name="zensim", kind="srgb", functions=_functions,
    summary="zensim (imazen/zensim 0.2.7 linear profile PreviewV0_2): XYB, 4 scales, box-blur SSIM/edge/HF "
            "features, 228 weights; 100 = identical",
    outputs=("zensim",), higher_is_better=True, identical_value=100.0, value_range=(-math.inf, 100.0),
    differentiable=True, min_size=1, min_size_reason="any size (sides under 64 px are mirror-padded, as upstream)",
    halo_rows=None, bytes_per_pixel=200.0, cached_reference=True, prepared_broadcasts=True,
    rank=2,
))

#: Public names (also ``fusedsim.<name>``), defined in :mod:`.api` and imported on first use.
EXPORTS = ('zensim', 'zensim_features', 'zensim_feature_names', 'ZensimLoss', 'prepare_zensim', 'score_prepared_zensim')

__getattr__, __dir__ = lazy_attributes(__name__, dict.fromkeys(EXPORTS, f"{__name__}.api"))
