"""Butteraugli (libjxl 0.7 ``butteraugli_main``): max-norm, the tool's 3-norm and the per-pixel distance map.

The family in one folder: ``twin.py`` (the PyTorch specification), ``*_kernel.py`` (Triton), ``cpu.py`` (numba),
``ops.py`` (op declarations), ``api.py`` (public functions); this module declares the metric and the public names,
without importing torch.
"""

from __future__ import annotations

import math

from fusedsim.core.lazy import lazy_attributes
from fusedsim.metrics.registry import MetricFunctions, MetricSpec, register_metric


def _functions() -> MetricFunctions:
    from fusedsim.families.butteraugli import api

    return MetricFunctions(compute=api.butteraugli, prepare=api.prepare_butteraugli, score_prepared=api.score_prepared_butteraugli,
                           score_map=lambda ref, dist, **params: api.butteraugli(ref, dist, **params).distmap,
                           check_params=api.check_butteraugli_params)


register_metric(MetricSpec(
    name="butteraugli", kind="srgb", functions=_functions,
    summary="Butteraugli (libjxl 0.7 butteraugli_main): max-norm and the tool's 3-norm; the per-pixel distance "
            "map is the result's distmap field",
    outputs=("max_norm", "pnorm3"), higher_is_better=False, identical_value=0.0, value_range=(0.0, math.inf),
    differentiable=True, min_size=8, min_size_reason="libjxl's butteraugli returns an all-zero map below 8 px",
    halo_rows=None, bytes_per_pixel=160.0, cached_reference=True, prepared_broadcasts=True,
    params=(("intensity_target", 80.0), ("hf_asymmetry", 0.8)),
    rank=0,
))

#: Public names (also ``fusedsim.<name>``), defined in :mod:`.api` and imported on first use.
EXPORTS = ('butteraugli', 'ButteraugliLoss', 'ButteraugliResult', 'prepare_butteraugli', 'score_prepared_butteraugli')

__getattr__, __dir__ = lazy_attributes(__name__, dict.fromkeys(EXPORTS, f"{__name__}.api"))
