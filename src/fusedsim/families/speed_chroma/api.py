"""Public ``speed_chroma``: libvmaf's SpEED chroma feature, bit-exact on CPU and GPU."""

from __future__ import annotations

import importlib.util

import numpy as np
import torch

from fusedsim.core.backend import requested_backend
from fusedsim.families.speed_chroma.ops import speed_residual
from fusedsim.families.speed_chroma.twin import (
    METHOD_CODES,
    SUPPORTED_BIT_DEPTHS,
    SpeedOptions,
    check_plane_size,
    column_names,
    speed_scores_from_residuals,
)
from fusedsim.families.vmaf.inputs import check_bit_depth, frame_pair

__all__ = ["speed_chroma"]

Planes = torch.Tensor | np.ndarray


def _compiled_statistics() -> bool:
    """The numba build of the GSM statistics unless the twin is forced (``reference``) or numba is missing."""
    return requested_backend() != "reference" and importlib.util.find_spec("numba") is not None


def speed_chroma(ref_u: Planes, ref_v: Planes, dist_u: Planes, dist_v: Planes, bit_depth: int, *,
                 options: SpeedOptions | None = None) -> dict[str, torch.Tensor]:
    """libvmaf's ``speed_chroma`` of each frame's chroma planes, bit-identical to libvmaf 3.2.0.

    Args:
        ref_u, ref_v, dist_u, dist_v: integer Cb and Cr planes of the reference and distorted frames, ``(H, W)`` or
            ``(N, H, W)``, torch tensors (any integer dtype, any device) or numpy arrays, at the size libvmaf reads
            them (``w/2 x h/2`` for 4:2:0 frames of ``w x h``, integer division), values in ``[0, 2**bit_depth)``.
            After the prescale and a decimation by 16 they must hold a 5x5 block: at least 80x80 without a prescale
            (libvmaf crashes below; this raises a ``ValueError`` naming the minimum).
        bit_depth: 8, 10, 12 or 16.
        options: libvmaf's options (:class:`~fusedsim.families.speed_chroma.twin.SpeedOptions`), e.g. the
            ``vmaf_v1.0.16_3d0h`` model's ``SpeedOptions(sigma_nn=0.19, nn_floor=0.1, weight_var_mode=5,
            max_val=45.0)``; libvmaf's defaults when None.

    Returns:
        ``speed_chroma_u``, ``speed_chroma_v`` and ``speed_chroma_uv`` with libvmaf's option suffix (e.g.
        ``speed_chroma_uv_mxv_45_nnf_0.1_snn_0.19_wvm_5``): float64 tensors ``(N,)`` (``()`` for ``(H, W)``
        inputs) on the inputs' device.

    The per-pixel stage runs through the op ``speed_residual`` (Triton on CUDA tensors, numba on CPU tensors);
    the 5x5-block statistics of the small residuals (a 25x25 covariance, its eigenvalues and a QR solve per plane,
    in libvmaf's float32 order: serial work on a few dozen samples a side) run on the host, compiled with numba
    (the twin :mod:`~fusedsim.families.speed_chroma.gsm` when the ``reference`` backend is forced).
    """
    options = SpeedOptions() if options is None else options
    if not isinstance(options, SpeedOptions):
        raise TypeError(f"options must be a SpeedOptions; got {type(options).__name__}")
    bd = check_bit_depth(bit_depth, SUPPORTED_BIT_DEPTHS, "speed_chroma")
    ru, du, squeeze = frame_pair(ref_u, dist_u, bd, ("ref_u", "dist_u"))
    rv, dv, _ = frame_pair(ref_v, dist_v, bd, ("ref_v", "dist_v"))
    if ru.shape != rv.shape or ru.device != rv.device:
        raise ValueError(f"ref_u and ref_v must have the same shape and device; got {tuple(ru.shape)} on "
                         f"{ru.device} and {tuple(rv.shape)} on {rv.device}")
    check_plane_size(*ru.shape[-2:], options)
    scalars = (bd, options.prescale, METHOD_CODES[options.prescale_method], options.kernelscale)
    residuals = [speed_residual(p, *scalars) for p in (ru, rv, du, dv)]
    scores = speed_scores_from_residuals(*residuals, options, compiled=_compiled_statistics()).to(ru.device)
    columns = {name: scores[:, k] for k, name in enumerate(column_names(options))}
    return {name: value[0] for name, value in columns.items()} if squeeze else columns
