"""Public ``integer_vif``: libvmaf's integer VIF (feature ``vif``), bit-exact on CPU and GPU."""

from __future__ import annotations

import numpy as np
import torch

from fusedsim.families.vif.ops import integer_vif as integer_vif_op
from fusedsim.families.vif.twin import (
    DEFAULT_GAIN_LIMIT,
    MIN_GAIN_LIMIT,
    MIN_SIZE,
    SUPPORTED_BIT_DEPTHS,
    vif_columns,
)
from fusedsim.families.vmaf.inputs import check_bit_depth, to_frames

__all__ = ["integer_vif"]

#: The largest sample each integer dtype holds: a dtype fits a bit depth when it holds ``2**bit_depth - 1``.
_DTYPE_MAX = {torch.uint8: 255, torch.int16: 32767, torch.uint16: 65535, torch.int32: 2**31 - 1,
              torch.int64: 2**63 - 1}


def _frames(x: object, name: str, bit_depth: int) -> torch.Tensor:
    t = to_frames(x, name)
    top = (1 << bit_depth) - 1
    if _DTYPE_MAX.get(t.dtype, 0) < top:
        raise TypeError(f"{name} has dtype {t.dtype}, which cannot hold {bit_depth}-bit samples (up to {top}); use "
                        f"{'uint8' if bit_depth == 8 else 'uint16'} (or int32)")
    h, w = t.shape[-2:]
    if h < MIN_SIZE or w < MIN_SIZE:
        raise ValueError(f"{name} is {h}x{w} (HxW); integer_vif needs at least {MIN_SIZE}x{MIN_SIZE}: libvmaf mirrors "
                         f"each border once at each of its 4 scales (sizes halved 3 times), and the 3-tap filter of "
                         f"scale 3 needs 2 rows and columns there")
    return t


def integer_vif(ref: torch.Tensor | np.ndarray, dist: torch.Tensor | np.ndarray, bit_depth: int, *,
                gain_limit: float = DEFAULT_GAIN_LIMIT, debug: bool = False) -> dict[str, torch.Tensor]:
    """libvmaf's integer VIF per frame (feature ``vif``), bit-identical to libvmaf 3.2.0.

    Args:
        ref, dist: integer luma, ``(H, W)`` or ``(N, H, W)`` of equal shapes, as torch tensors (any device, any
            strides) or numpy arrays, at least 16x16 (:data:`~fusedsim.families.vif.twin.MIN_SIZE`). The dtype must
            hold the bit depth (uint8 for 8 bit, uint16, int16 up to 12 bit, int32 or int64); the values must lie in
            ``[0, 2**bit_depth)``, which is the caller's to ensure (not checked: no pass over the data).
        bit_depth: 8, 10, 12 or 16.
        gain_limit: libvmaf's ``vif_enhn_gain_limit`` (``egl``), in ``[1, 100]``: 100 is the default, 1.0 the
            ``vmaf_v0.6.1neg`` model's.
        debug: also return libvmaf's debug columns (``vif=debug=true``).

    Returns:
        ``{name: float64 tensor}`` keyed by libvmaf's printed names, each ``(N,)`` (``()`` for ``(H, W)`` inputs)
        on the inputs' device (CPU for numpy): ``integer_vif_scale0..3``, and with ``debug`` ``integer_vif``,
        ``integer_vif_num``, ``integer_vif_den``, ``integer_vif_num_scale0..3``, ``integer_vif_den_scale0..3``.
        A gain limit other than 100 suffixes every name as libvmaf does (``integer_vif_scale0_egl_1``).

    Dispatched through the registered op ``integer_vif``: CUDA tensors run the Triton kernel
    (:mod:`fusedsim.families.vif.kernel`), CPU tensors the numba kernel (:mod:`fusedsim.families.vif.cpu`,
    threads: ``numba.set_num_threads``) or the PyTorch twin where numba is missing; all give the same bits
    (``FUSEDSIM_BACKEND`` / :func:`fusedsim.use_backend` force one).
    """
    bd = check_bit_depth(bit_depth, SUPPORTED_BIT_DEPTHS, "integer_vif")
    if isinstance(gain_limit, bool) or not isinstance(gain_limit, (int, float, np.integer, np.floating)):
        raise TypeError(f"gain_limit must be a float; got {type(gain_limit).__name__}")
    gain_limit = float(gain_limit)
    if not MIN_GAIN_LIMIT <= gain_limit <= DEFAULT_GAIN_LIMIT:
        raise ValueError(f"gain_limit must lie in [{MIN_GAIN_LIMIT:g}, {DEFAULT_GAIN_LIMIT:g}] (libvmaf's "
                         f"vif_enhn_gain_limit range); got {gain_limit!r}")
    if not isinstance(debug, bool):
        raise TypeError(f"debug must be a bool; got {type(debug).__name__}")
    squeeze = getattr(ref, "ndim", None) == 2 and getattr(dist, "ndim", None) == 2
    r = _frames(ref, "ref", bd)
    d = _frames(dist, "dist", bd)
    if r.shape != d.shape:
        raise ValueError(f"ref and dist must have the same shape; got {tuple(r.shape)} and {tuple(d.shape)}")
    if r.device != d.device:
        raise ValueError(f"ref and dist must be on the same device; got {r.device} and {d.device}")
    columns = vif_columns(integer_vif_op(r, d, bd, gain_limit), gain_limit, debug)
    return {name: v[0] for name, v in columns.items()} if squeeze else columns
