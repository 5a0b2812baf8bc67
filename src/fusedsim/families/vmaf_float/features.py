"""The ``vmaf:float_vif``, ``vmaf:float_adm`` and ``vmaf:float_motion`` compute functions of the metric registry:
planes ``(y, u, v)`` and a bit depth in, libvmaf's printed names out (luma only, as libvmaf)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

__all__ = ["float_adm_feature", "float_motion_feature", "float_vif_feature"]

Planes = Sequence[torch.Tensor]


def float_vif_feature(ref: Planes, dist: Planes, bit_depth: int, **options: Any) -> dict[str, torch.Tensor]:
    """``vmaf:float_vif``: libvmaf's float VIF of the luma planes (``vif_scale0..3``; options as libvmaf's)."""
    from fusedsim.families.vmaf_float.api import float_vif

    return float_vif(ref[0], dist[0], bit_depth, **options)


def float_adm_feature(ref: Planes, dist: Planes, bit_depth: int, **options: Any) -> dict[str, torch.Tensor]:
    """``vmaf:float_adm``: libvmaf's float ADM of the luma planes (``adm2``, ``aim``, ``adm3``, 4 scales)."""
    from fusedsim.families.vmaf_float.api import float_adm

    return float_adm(ref[0], dist[0], bit_depth, **options)


def float_motion_feature(ref: Planes, dist: Planes, bit_depth: int, **options: Any) -> dict[str, torch.Tensor]:
    """``vmaf:float_motion``: libvmaf's float motion of the reference luma, the frames given being the whole clip
    (``fusedsim vmaf`` streams a clip through a session, which carries it across batches)."""
    from fusedsim.families.vmaf_float.api import float_motion

    return float_motion(ref[0], bit_depth, **options)
