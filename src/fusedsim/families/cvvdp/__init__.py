"""ColorVideoVDP 0.5.7 (pycvvdp) for still images and video, in JOD.

The family in one folder: ``twin.py`` (the PyTorch specification), ``*_kernel.py`` (Triton), ``cpu.py`` (numba),
``ops.py`` (op declarations), ``api.py`` (public functions); this module declares the metric and the public names,
without importing torch.
"""

from __future__ import annotations

import math

from fusedsim.core.lazy import lazy_attributes
from fusedsim.metrics.registry import MetricFunctions, MetricSpec, register_metric


def _functions() -> MetricFunctions:
    from fusedsim.families.cvvdp import api

    return MetricFunctions(compute=api.cvvdp, prepare=api.prepare_cvvdp, score_prepared=api.score_prepared_cvvdp,
                           score_map=lambda ref, dist, **params: api.cvvdp(ref, dist, return_map=True,
                                                                           **params).diff_map[:, 0],
                           check_params=api.check_cvvdp_params)


register_metric(MetricSpec(
    name="cvvdp", kind="srgb", functions=_functions, aliases=("colorvideovdp",),
    summary="ColorVideoVDP 0.5.7 (pycvvdp) for still images: display model, DKL contrast pyramid, castleCSF, "
            "masking; JOD, 10 = identical",
    outputs=("jod",), higher_is_better=True, identical_value=10.0, value_range=(-math.inf, 10.0),
    differentiable=True, min_size=2, min_size_reason="the Laplacian pyramid needs 2 px per side",
    halo_rows=None, bytes_per_pixel=160.0, cached_reference=True, prepared_broadcasts=True,
    params=(("display", "standard_4k"),),
    rank=5,
))

#: Public names (also ``fusedsim.<name>``), defined in :mod:`.api` and imported on first use.
EXPORTS = ('cvvdp', 'CVVDPLoss', 'CVVDPResult', 'cvvdp_stream', 'prepare_cvvdp', 'score_prepared_cvvdp')

__getattr__, __dir__ = lazy_attributes(__name__, dict.fromkeys(EXPORTS, f"{__name__}.api"))
