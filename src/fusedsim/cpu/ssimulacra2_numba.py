"""SSIMULACRA2's per-scale ops on the CPU (the ``cpu=`` of their registry entries): their twins with the hot loops
compiled by numba, the same bits.

- colour step: the XYB transform (:mod:`fusedsim.cpu.xyb_numba`);
- blurs: the recursive Gaussian (:mod:`fusedsim.cpu.recursive_gaussian_numba`);
- comparison: the SSIM and edge maps of :func:`~fusedsim.reference.ssimulacra2_ref.error_maps_ref`, per pixel in
  the twin's order (float32 steps, then float64); the pooling stays the twin's (its summation order).

float64 inputs (gradient checks) run the twins' PyTorch code.
"""

from __future__ import annotations

import numpy as np
import torch
from numba import prange

from fusedsim.cpu._parallel import parallel_kernel
from fusedsim.cpu.recursive_gaussian_numba import recursive_gaussian_numba
from fusedsim.cpu.xyb_numba import linear_to_xyb_numba
from fusedsim.reference.ssimulacra2_ref import (
    C2,
    error_maps_ref,
    ssimulacra2_error_pool_ref,
    ssimulacra2_linear_xyb_ref,
    ssimulacra2_pair_pool_ref,
    ssimulacra2_reference_blur_ref,
)

__all__ = ["error_maps_numba", "ssimulacra2_error_pool_numba", "ssimulacra2_linear_xyb_numba",
           "ssimulacra2_pair_pool_numba", "ssimulacra2_reference_blur_numba"]


@parallel_kernel
def _error_maps(x1, x2, mu1, mu2, s11, s22, s12, out, c2):  # pragma: no cover - compiled
    n, c, h, w = x2.shape
    one, two = np.float32(1.0), np.float32(2.0)
    for task in prange(n * c * h):
        i, ch, y = task // (c * h), (task // h) % c, task % h
        r = 0 if x1.shape[0] == 1 else i  # one reference may serve every distorted image
        for x in range(w):
            m1, m2 = mu1[r, ch, y, x], mu2[i, ch, y, x]
            diff = m1 - m2
            num_m = one - diff * diff
            num_s = two * (s12[i, ch, y, x] - m1 * m2) + c2
            denom_s = ((s11[r, ch, y, x] - m1 * m1) + (s22[i, ch, y, x] - m2 * m2)) + c2
            ssim = 1.0 - np.float64(num_m * num_s / denom_s)
            out[i, ch, 0, y, x] = 0.0 if ssim < 0.0 else ssim  # clamp_min(0): NaN stays NaN
            edge = (1.0 + np.float64(abs(x2[i, ch, y, x] - m2))) / (1.0 + np.float64(abs(x1[r, ch, y, x] - m1))) - 1.0
            out[i, ch, 1, y, x] = 0.0 if edge < 0.0 else edge
            out[i, ch, 2, y, x] = 0.0 if -edge < 0.0 else -edge


def error_maps_numba(x1: torch.Tensor, x2: torch.Tensor, mu1: torch.Tensor, mu2: torch.Tensor, s11: torch.Tensor,
                     s22: torch.Tensor, s12: torch.Tensor) -> torch.Tensor:
    """:func:`~fusedsim.reference.ssimulacra2_ref.error_maps_ref` for float32 CPU tensors (x1, mu1, s11: batch 1 or
    N, the others N), compiled; anything else through the twin."""
    tensors = (x1, x2, mu1, mu2, s11, s22, s12)
    ref_side = {t.shape[0] for t in (x1, mu1, s11)}
    if (any(t.dtype != torch.float32 or t.device.type != "cpu" or t.dim() != 4 for t in tensors)
            or len(ref_side) != 1 or ref_side.pop() not in (1, x2.shape[0])
            or any(t.shape[1:] != x2.shape[1:] for t in tensors) or any(t.shape != x2.shape for t in (mu2, s22, s12))):
        return error_maps_ref(*tensors)
    arrays = [t.detach().contiguous().numpy() for t in tensors]
    out = np.empty((x2.shape[0], x2.shape[1], 3, *x2.shape[2:]), dtype=np.float64)
    _error_maps(*arrays, out, np.float32(C2))
    return torch.from_numpy(out)


def ssimulacra2_linear_xyb_numba(x: torch.Tensor, scale: int) -> torch.Tensor:
    return ssimulacra2_linear_xyb_ref(x, scale, linear_to_xyb_numba)


def ssimulacra2_reference_blur_numba(x1: torch.Tensor) -> torch.Tensor:
    return ssimulacra2_reference_blur_ref(x1, recursive_gaussian_numba)


def ssimulacra2_error_pool_numba(x1: torch.Tensor, x2: torch.Tensor, mu1: torch.Tensor,
                                 s11: torch.Tensor) -> torch.Tensor:
    return ssimulacra2_error_pool_ref(x1, x2, mu1, s11, recursive_gaussian_numba, error_maps_numba)


def ssimulacra2_pair_pool_numba(x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
    return ssimulacra2_pair_pool_ref(x1, x2, recursive_gaussian_numba, error_maps_numba)
