"""Public ``psnr``: libvmaf's ``psnr`` feature (``psnr_y``, ``psnr_cb``, ``psnr_cr``), bit-exact."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from fusedsim.core.registry import require_twin_only
from fusedsim.families.vmaf.psnr_twin import psnr_plane_ref
from fusedsim.families.vmaf.inputs import check_bit_depth, frame_pair

__all__ = ["psnr"]

PSNR_BIT_DEPTHS = (8, 10, 12, 16)
_NAMES = ("psnr_y", "psnr_cb", "psnr_cr")
_PLANES = ("y", "cb", "cr")

Frames = torch.Tensor | np.ndarray


def psnr(ref: Frames | Sequence[Frames], dist: Frames | Sequence[Frames], bit_depth: int = 8,
         ) -> dict[str, torch.Tensor]:
    """libvmaf PSNR per frame and plane, capped at ``6 * bit_depth + 12`` dB (60 dB at 8 bit, 72 at 10, 84 at 12).

    Args:
        ref, dist: one plane (luma), or a sequence of planes ``(y, cb, cr)``; each plane an integer ``(H, W)`` or
            ``(N, H, W)`` torch tensor or numpy array (chroma planes may be smaller than luma).
        bit_depth: 8, 10, 12 or 16.

    Returns:
        ``{"psnr_y"[, "psnr_cb", "psnr_cr"]}`` -> float64 CPU tensors ``(N,)`` (``()`` for single frames).

    Raises :class:`~fusedsim.core.backend.BackendUnavailableError` when the ``triton`` backend is forced: PSNR has no
    Triton kernel.
    """
    bd = check_bit_depth(bit_depth, PSNR_BIT_DEPTHS, "psnr")
    ref_planes = list(ref) if isinstance(ref, (list, tuple)) else [ref]
    dist_planes = list(dist) if isinstance(dist, (list, tuple)) else [dist]
    if len(ref_planes) != len(dist_planes) or len(ref_planes) not in (1, 3):
        raise ValueError(f"ref and dist must both be one plane or three planes (y, cb, cr); got {len(ref_planes)} "
                         f"and {len(dist_planes)}")
    out: dict[str, torch.Tensor] = {}
    frames = None
    for i, (rp, dp) in enumerate(zip(ref_planes, dist_planes)):
        names = (f"ref[{_PLANES[i]}]", f"dist[{_PLANES[i]}]") if len(ref_planes) == 3 else ("ref", "dist")
        r, d, squeeze = frame_pair(rp, dp, bd, names)
        if frames is None:
            # no Triton kernel: a forced triton backend is an error, never a silent PyTorch run
            require_twin_only("psnr", r)
            frames = r.shape[0]
        elif r.shape[0] != frames:
            raise ValueError(f"{names[0]} has {r.shape[0]} frames but the luma plane has {frames}")
        values = torch.from_numpy(psnr_plane_ref(r, d, bd))
        out[_NAMES[i]] = values[0] if squeeze else values
    return out
