"""Input checks and conversion for the VMAF API: integer frames as torch tensors, clear errors naming the argument."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from fusedsim.core.sample_range import check_sample_range

__all__ = ["check_bit_depth", "frame_pair", "to_frames"]

_INT_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.uint16, torch.uint32)


def check_bit_depth(bit_depth: object, supported: Sequence[int], what: str, hint: str = "") -> int:
    if isinstance(bit_depth, bool) or not isinstance(bit_depth, (int, np.integer)):
        raise TypeError(f"bit_depth must be an int; got {type(bit_depth).__name__}")
    bd = int(bit_depth)
    if bd not in supported:
        raise ValueError(f"bit_depth={bd} is not supported by {what}; supported: {', '.join(map(str, supported))}"
                         + (f" ({hint})" if hint else ""))
    return bd


def to_frames(x: object, name: str) -> torch.Tensor:
    """An integer ``(H, W)`` or ``(N, H, W)`` array/tensor as an ``(N, H, W)`` integer tensor (no copy if possible)."""
    if isinstance(x, np.ndarray):
        if x.dtype == np.bool_ or not np.issubdtype(x.dtype, np.integer):
            raise TypeError(f"{name} must hold integer samples (uint8 for 8 bit, uint16 above); got numpy {x.dtype}")
        if not x.dtype.isnative:
            x = x.astype(x.dtype.newbyteorder("="))
        if x.dtype == np.uint64 or x.dtype == np.uint32:
            x = x.astype(np.int64)
        t = torch.from_numpy(np.ascontiguousarray(x))
    elif isinstance(x, torch.Tensor):
        t = x
        if t.dtype not in _INT_DTYPES:
            raise TypeError(f"{name} must hold integer samples (uint8 for 8 bit, uint16 above); got {t.dtype}")
        if t.dtype == torch.uint32:
            t = t.to(torch.int64)
    else:
        raise TypeError(f"{name} must be a torch.Tensor or numpy.ndarray; got {type(x).__name__}")
    if t.dim() == 2:
        t = t.unsqueeze(0)
    if t.dim() != 3:
        raise ValueError(f"{name} must be (H, W) or (N, H, W); got shape {tuple(t.shape)}")
    if t.numel() == 0:
        raise ValueError(f"{name} is empty: shape {tuple(t.shape)}")
    return t


def frame_pair(ref: object, dist: object, bit_depth: int, names: tuple[str, str] = ("ref", "dist"),
               ) -> tuple[torch.Tensor, torch.Tensor, bool]:
    """Checked ``(N, H, W)`` integer tensors of equal shape on one device, values within ``bit_depth``.

    Returns ``(ref, dist, squeeze)`` where ``squeeze`` says both inputs were single ``(H, W)`` frames.
    """
    squeeze = getattr(ref, "ndim", None) == 2 and getattr(dist, "ndim", None) == 2
    r = to_frames(ref, names[0])
    d = to_frames(dist, names[1])
    if r.shape != d.shape:
        raise ValueError(f"{names[0]} and {names[1]} must have the same shape; got {tuple(r.shape)} and "
                         f"{tuple(d.shape)}")
    if r.device != d.device:
        raise ValueError(f"{names[0]} and {names[1]} must be on the same device; got {r.device} and {d.device}")
    check_sample_range(r, names[0], bit_depth)
    check_sample_range(d, names[1], bit_depth)
    return r, d, squeeze
