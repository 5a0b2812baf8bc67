"""Integer frames handed to numba kernels as numpy arrays."""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["integer_samples"]

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
