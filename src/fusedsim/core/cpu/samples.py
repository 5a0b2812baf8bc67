"""Integer frames handed to numba kernels as numpy arrays."""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["integer_samples", "unsigned_samples"]

#: dtypes numba kernels read directly (one compiled specialisation each); others are widened to int32
_NATIVE = (torch.uint8, torch.int16, torch.uint16, torch.int32)


def integer_samples(t: torch.Tensor) -> np.ndarray:
    """``t`` as a C-contiguous numpy array on the host, in its own dtype where a kernel reads it directly
    (uint8, int16, uint16, int32), else as int32. Widening 8-bit frames to int32 first cost torch, on one thread,
    as much as a 1080p blur (5.4 ms a plane)."""
    t = t.detach().cpu()
    if t.dtype not in _NATIVE:
        t = t.to(torch.int32)
    return t.contiguous().numpy()


def unsigned_samples(t: torch.Tensor) -> np.ndarray:
    """``t``'s samples (non-negative, at most 16 bits) as a C-contiguous uint8 or uint16 numpy array on the host:
    two compiled specialisations serve every input dtype. uint8 stays as it is; int16 (how the video readers
    store 16-bit samples: values from 2**15 read negative) and uint16 are viewed as uint16 without a copy; other
    dtypes are converted. Widening int16 through int32 cost a 10-bit 1080p ADM call on one core as much as
    the kernel itself."""
    t = t.detach().cpu()
    if t.dtype == torch.uint8:
        return t.contiguous().numpy()
    if t.dtype in (torch.int16, torch.uint16):
        return t.contiguous().view(torch.int16).numpy().view(np.uint16)
    return t.to(torch.int32).contiguous().numpy().astype(np.uint16)
