"""Sequential float64 summation: the exact order of a C loop ``double s = 0; for (...) s += x[i];``.

A floating-point sum depends on its order. Reference implementations written in C (libvmaf among them) accumulate
left to right in one double, and a pairwise or parallel sum (``torch.sum``, ``numpy.sum``) differs from that in the
last bits. :func:`sequential_sum_ref` reproduces the left-to-right order exactly; ``numpy.cumsum`` is a strict
left-to-right recurrence (``out[i] = out[i-1] + x[i]`` in IEEE double), so its last element is that sum.

This is the twin of :func:`fusedsim.families.vmaf.sequential_sum_kernel.sequential_sum_fwd`, which gets the same bits on a GPU.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["sequential_sum_ref"]


def sequential_sum_ref(x: torch.Tensor) -> torch.Tensor:
    """Left-to-right float64 sum of each row of ``x`` (shape ``(N, L)``); returns ``(N,)`` float64 on ``x.device``.

    ``s = 0.0; for v in row: s = s + v``, evaluated in IEEE double; an empty row sums to ``0.0``.
    """
    if x.dim() != 2:
        raise ValueError(f"x must be (N, L); got shape {tuple(x.shape)}")
    if x.dtype != torch.float64:
        raise TypeError(f"x must be float64; got {x.dtype}")
    n, length = x.shape
    if length == 0:
        return torch.zeros(n, dtype=torch.float64, device=x.device)
    host = x.detach().to("cpu").contiguous().numpy()
    # 0.0 + x[0] == x[0] (up to the sign of a zero), so the running sum starts at x[0] as in the C loop.
    sums = np.cumsum(host, axis=1)[:, -1] + 0.0
    return torch.from_numpy(np.ascontiguousarray(sums)).to(x.device)
