"""Small helpers every Triton launcher shares: the device's multiprocessor count, the Triton accumulation dtype, a
float64 constant as an fp32 pair, and strides in the 5-D (N, C, D, H, W) layout the 2-D/3-D kernels index."""

from __future__ import annotations

import torch

from fusedsim.core.state import cached

__all__ = ["sm_count", "split_blocks", "strides5", "tl_dtype"]


@cached(maxsize=16)
def sm_count(device: torch.device) -> int:
    """Multiprocessors of a CUDA device (0 elsewhere): the grid sizes and rows-per-program models use it."""
    return torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 0


def tl_dtype(dtype: torch.dtype):
    """The Triton accumulation dtype for inputs of ``dtype``: float64 stays float64, the rest runs in float32."""
    import triton.language as tl

    return tl.float64 if dtype == torch.float64 else tl.float32


def split_blocks(value: float) -> tuple[float, float]:
    """A float64 constant as an fp32 (hi, lo) pair: Triton passes Python floats as fp32."""
    import numpy as np

    hi = float(np.float32(value))
    return hi, float(np.float32(value - hi))


def strides5(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, ...]:
    """Strides of a 4-D or 5-D tensor as (N, C, D, H, W) strides (depth stride 0 for 2-D)."""
    return tuple(strides) if len(shape) == 5 else (strides[0], strides[1], 0, strides[2], strides[3])
