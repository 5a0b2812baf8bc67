"""Public ``float_ssim`` and ``float_ms_ssim``: libvmaf's float SSIM features, bit-exact (float32 pipeline)."""

from __future__ import annotations

import numpy as np
import torch

from fusedsim.families.vmaf.float_ssim_twin import (
    FLOAT_SSIM_BIT_DEPTHS,
    GAUSS_LEN,
    MS_SSIM_MIN_SIDE,
    float_ms_ssim_ref,
    float_ssim_ref,
    float_ssim_scale,
    ms_ssim_min_side_ok,
)
from fusedsim.families.vmaf.inputs import check_bit_depth, frame_pair

__all__ = ["float_ms_ssim", "float_ssim"]

_BD_HINT = "10/12/16-bit samples are divided by 4/16/256 to the 8-bit range as in libvmaf"


def _steps() -> dict:
    """The registered ops of the pipeline (libvmaf's row sums, decimation and SSIM terms): Triton kernels on GPU
    tensors, the twins elsewhere, all with libvmaf's bits."""
    from fusedsim.families.vmaf import ops

    return {"row_sum": ops.sequential_sum, "decimate": ops.iqa_decimate, "ssim_maps": ops.iqa_ssim_maps}


def _squeeze(out: dict[str, torch.Tensor], squeeze: bool) -> dict[str, torch.Tensor]:
    return {k: (v[0] if squeeze else v) for k, v in out.items()}


def float_ssim(ref: torch.Tensor | np.ndarray, dist: torch.Tensor | np.ndarray, bit_depth: int = 8, *,
               scale: int = 0) -> dict[str, torch.Tensor]:
    """libvmaf ``float_ssim`` of each frame, with its luminance / contrast / structure means.

    The frames are auto-downscaled by ``round(min(w, h) / 256)`` (box filter, mirrored borders) unless
    ``scale`` (1..10) is given, then compared with an 11x11 Gaussian window over the valid region, all in
    libvmaf's float32 arithmetic; results are bit-identical to libvmaf (``float_ssim=enable_lcs=true``).

    Args:
        ref, dist: integer luma ``(H, W)`` or ``(N, H, W)`` (torch or numpy), values in ``[0, 2**bit_depth)``.
        bit_depth: 8, 10, 12 or 16.
        scale: 0 = libvmaf's automatic choice, or a forced factor 1..10.

    Returns:
        ``{"float_ssim", "float_ssim_l", "float_ssim_c", "float_ssim_s"}`` -> float64 CPU tensors ``(N,)`` (or
        ``()`` for single frames); each value is a float32 number, as libvmaf reports it.
    """
    bd = check_bit_depth(bit_depth, FLOAT_SSIM_BIT_DEPTHS, "float_ssim", _BD_HINT)
    if isinstance(scale, bool) or not isinstance(scale, (int, np.integer)):
        raise TypeError(f"scale must be an int; got {type(scale).__name__}")
    if not 0 <= int(scale) <= 10:
        raise ValueError(f"scale must be 0 (automatic) or 1..10; got {scale}")
    r, d, squeeze = frame_pair(ref, dist, bd)
    h, w = r.shape[-2:]
    s = int(scale) or float_ssim_scale(w, h)
    sw, sh = (w // s + (w & 1), h // s + (h & 1)) if s > 1 else (w, h)
    if sw < GAUSS_LEN or sh < GAUSS_LEN:
        raise ValueError(f"ref is too small for float_ssim: {w}x{h} downscaled by {s} is {sw}x{sh}, and the 11x11 "
                         f"window needs at least {GAUSS_LEN}x{GAUSS_LEN}")
    return _squeeze(float_ssim_ref(r, d, bd, s, **_steps()), squeeze)


def float_ms_ssim(ref: torch.Tensor | np.ndarray, dist: torch.Tensor | np.ndarray, bit_depth: int = 8,
                  ) -> dict[str, torch.Tensor]:
    """libvmaf ``float_ms_ssim`` of each frame (Wang's 5-scale MS-SSIM), bit-identical to libvmaf.

    Five scales of the float SSIM (11x11 Gaussian, valid region) with a 9x9 9/7 low-pass between scales, combined
    as ``prod(l_i^a_i * c_i^b_i * s_i^g_i)`` in double. Frames must be at least 176x176 (libvmaf's limit: 11 px
    at the fifth scale).

    Returns:
        ``{"float_ms_ssim": ..., "float_ms_ssim_{l,c,s}_scale{0..4}": ...}`` -> float64 CPU tensors ``(N,)`` (or
        ``()`` for single frames).
    """
    bd = check_bit_depth(bit_depth, FLOAT_SSIM_BIT_DEPTHS, "float_ms_ssim", _BD_HINT)
    r, d, squeeze = frame_pair(ref, dist, bd)
    h, w = r.shape[-2:]
    if not ms_ssim_min_side_ok(w, h):
        raise ValueError(f"ref is too small for float_ms_ssim: {w}x{h}; libvmaf needs at least "
                         f"{MS_SSIM_MIN_SIDE}x{MS_SSIM_MIN_SIDE} (11 px at the fifth of 5 scales)")
    return _squeeze(float_ms_ssim_ref(r, d, bd, **_steps()), squeeze)
