"""SSIMULACRA2's per-scale ops on the CPU (the ``cpu=`` of their registry entries): their twins with the hot loops
compiled by numba, the same bits up to the pooling's summation order.

- colour step: the XYB transform (:mod:`fusedsim.core.xyb.cpu`);
- blurs: the recursive Gaussian (:mod:`fusedsim.core.recursive_gaussian.cpu`);
- comparison: the blur inputs (x2, x2², x1·x2) written where the twin stacks them; the SSIM and edge maps of
  :func:`~fusedsim.families.ssimulacra2.twin.error_maps_ref`, per pixel in the twin's order (float32 steps, then
  float64), pooled as they are made: per row sums of the values and their fourth powers, so no map is stored
  (the only difference from the twin: float64 sums in another order, ~1e-16 relative);
- uint8 sRGB to linear: the twin's 256-entry table, looked up compiled.

float64 inputs (gradient checks) run the twins' PyTorch code.
"""

from __future__ import annotations

import numpy as np
import torch
from numba import njit, prange

from fusedsim.core.cpu.parallel import parallel_kernel
from fusedsim.core.cpu.table import lookup_u8
from fusedsim.core.recursive_gaussian.cpu import recursive_gaussian_numba
from fusedsim.core.xyb.cpu import linear_to_xyb_numba
from fusedsim.families.ssimulacra2.twin import (
    C2,
    SIGMA,
    error_maps_ref,
    fourth_root_ref,
    ssimulacra2_error_pool_ref,
    ssimulacra2_linear_xyb_ref,
    ssimulacra2_reference_blur_ref,
)
from fusedsim.core.xyb.twin import srgb_u8_linear_table, srgb_u8_to_linear_ref
from fusedsim.families.ssimulacra2.ops import ssimulacra2_error_pool, ssimulacra2_linear_xyb, ssimulacra2_pair_pool, ssimulacra2_reference_blur

__all__ = ["error_maps_numba", "ssimulacra2_error_pool_numba", "ssimulacra2_linear_xyb_numba",
           "ssimulacra2_pair_pool_numba", "ssimulacra2_reference_blur_numba"]


@njit(cache=True, nogil=True, inline="always")
def _pixel_maps(x1, x2, m1, m2, s11, s22, s12, one, two, c2):  # pragma: no cover - compiled
    """(ssim, ringing, blur) of one pixel: the twin's float32 steps, then float64."""
    diff = m1 - m2
    num_m = one - diff * diff
    num_s = two * (s12 - m1 * m2) + c2
    denom_s = ((s11 - m1 * m1) + (s22 - m2 * m2)) + c2
    ssim = 1.0 - np.float64(num_m * num_s / denom_s)
    edge = (1.0 + np.float64(abs(x2 - m2))) / (1.0 + np.float64(abs(x1 - m1))) - 1.0
    # clamp_min(0): NaN stays NaN
    return 0.0 if ssim < 0.0 else ssim, 0.0 if edge < 0.0 else edge, 0.0 if -edge < 0.0 else -edge


@parallel_kernel
def _error_maps(x1, x2, mu1, mu2, s11, s22, s12, out, c2):  # pragma: no cover - compiled
    n, c, h, w = x2.shape
    one, two = np.float32(1.0), np.float32(2.0)
    for task in prange(n * c * h):
        i, ch, y = task // (c * h), (task // h) % c, task % h
        r = 0 if x1.shape[0] == 1 else i  # one reference may serve every distorted image
        for x in range(w):
            v = _pixel_maps(x1[r, ch, y, x], x2[i, ch, y, x], mu1[r, ch, y, x], mu2[i, ch, y, x], s11[r, ch, y, x],
                            s22[i, ch, y, x], s12[i, ch, y, x], one, two, c2)
            out[i, ch, 0, y, x], out[i, ch, 1, y, x], out[i, ch, 2, y, x] = v


@parallel_kernel
def _error_row_sums(x1, x2, mu1, mu2, s11, s22, s12, sums, c2):  # pragma: no cover - compiled
    """Per row of each map, left to right: the sum of the values and of their (v·v)·(v·v), into ``sums``
    (N, 3, 2, 3, h) float64: [channel, (L1, L4), map, row]. No map is stored."""
    n, c, h, w = x2.shape
    one, two = np.float32(1.0), np.float32(2.0)
    for task in prange(n * c * h):
        i, ch, y = task // (c * h), (task // h) % c, task % h
        r = 0 if x1.shape[0] == 1 else i
        t0 = t1 = t2 = f0 = f1 = f2 = 0.0
        for x in range(w):
            v0, v1, v2 = _pixel_maps(x1[r, ch, y, x], x2[i, ch, y, x], mu1[r, ch, y, x], mu2[i, ch, y, x],
                                     s11[r, ch, y, x], s22[i, ch, y, x], s12[i, ch, y, x], one, two, c2)
            t0 += v0
            t1 += v1
            t2 += v2
            q0, q1, q2 = v0 * v0, v1 * v1, v2 * v2
            f0 += q0 * q0
            f1 += q1 * q1
            f2 += q2 * q2
        sums[i, ch, 0, 0, y], sums[i, ch, 0, 1, y], sums[i, ch, 0, 2, y] = t0, t1, t2
        sums[i, ch, 1, 0, y], sums[i, ch, 1, 1, y], sums[i, ch, 1, 2, y] = f0, f1, f2


@parallel_kernel
def _blur_inputs(x1, x2, out):  # pragma: no cover - compiled
    """(x2, x2², x1·x2) into ``out`` (3, N, 3, h, w): what the twin stacks before blurring (float32 products)."""
    n, c, h, w = x2.shape
    for task in prange(n * c * h):
        i, ch, y = task // (c * h), (task // h) % c, task % h
        r = 0 if x1.shape[0] == 1 else i
        for x in range(w):
            b = x2[i, ch, y, x]
            out[0, i, ch, y, x] = b
            out[1, i, ch, y, x] = b * b
            out[2, i, ch, y, x] = x1[r, ch, y, x] * b


def _compiled_shapes(x1: torch.Tensor, x2: torch.Tensor, *others: torch.Tensor) -> bool:
    """Whether the compiled maps take these tensors: float32 CPU (N, 3, h, w), the reference side batch 1 or N."""
    return not any(t.dtype != torch.float32 or t.device.type != "cpu" or t.dim() != 4 or t.shape[1:] != x2.shape[1:]
                   or t.shape[0] not in (1, x2.shape[0]) for t in (x1, x2, *others))


def error_maps_numba(x1: torch.Tensor, x2: torch.Tensor, mu1: torch.Tensor, mu2: torch.Tensor, s11: torch.Tensor,
                     s22: torch.Tensor, s12: torch.Tensor) -> torch.Tensor:
    """:func:`~fusedsim.families.ssimulacra2.twin.error_maps_ref` for float32 CPU tensors (x1, mu1, s11: batch 1 or
    N, the others N), compiled; anything else through the twin."""
    tensors = (x1, x2, mu1, mu2, s11, s22, s12)
    ref_side = {t.shape[0] for t in (x1, mu1, s11)}
    if (not _compiled_shapes(*tensors) or len(ref_side) != 1
            or any(t.shape != x2.shape for t in (mu2, s22, s12))):
        return error_maps_ref(*tensors)
    arrays = [t.detach().contiguous().numpy() for t in tensors]
    out = np.empty((x2.shape[0], x2.shape[1], 3, *x2.shape[2:]), dtype=np.float64)
    _error_maps(*arrays, out, np.float32(C2))
    return torch.from_numpy(out)


def _error_pool(x1: torch.Tensor, x2: torch.Tensor, mu1: torch.Tensor, mu2: torch.Tensor, s11: torch.Tensor,
                s22: torch.Tensor, s12: torch.Tensor) -> torch.Tensor:
    """:func:`~fusedsim.families.ssimulacra2.twin.error_pool_ref` without storing the maps: each map's values and
    fourth powers summed per row as they are made (float64, left to right), then the rows. The same values as the
    twin's, summed in another order than its means (float64 rounding apart, ~1e-16 relative)."""
    arrays = [t.detach().contiguous().numpy() for t in (x1, x2, mu1, mu2, s11, s22, s12)]
    n, c, h, w = x2.shape
    sums = np.empty((n, c, 2, 3, h), dtype=np.float64)
    _error_row_sums(*arrays, sums, np.float32(C2))
    means = torch.from_numpy(sums).sum(-1) / (h * w)
    return torch.stack((means[:, :, 0], fourth_root_ref(means[:, :, 1])), dim=2)


def _srgb_u8_to_linear(codes: torch.Tensor) -> torch.Tensor:
    """:func:`~fusedsim.core.xyb.twin.srgb_u8_to_linear_ref`: the same table, looked up compiled."""
    if codes.device.type != "cpu":
        return srgb_u8_to_linear_ref(codes)
    return lookup_u8(codes, srgb_u8_linear_table(codes.device))


@ssimulacra2_linear_xyb.cpu_kernel
def ssimulacra2_linear_xyb_numba(x: torch.Tensor, scale: int) -> torch.Tensor:
    return ssimulacra2_linear_xyb_ref(x, scale, linear_to_xyb_numba, _srgb_u8_to_linear)


@ssimulacra2_reference_blur.cpu_kernel
def ssimulacra2_reference_blur_numba(x1: torch.Tensor) -> torch.Tensor:
    return ssimulacra2_reference_blur_ref(x1, recursive_gaussian_numba)


@ssimulacra2_error_pool.cpu_kernel
def ssimulacra2_error_pool_numba(x1: torch.Tensor, x2: torch.Tensor, mu1: torch.Tensor,
                                 s11: torch.Tensor) -> torch.Tensor:
    """:func:`~fusedsim.families.ssimulacra2.twin.ssimulacra2_error_pool_ref`, compiled: the blur inputs written
    in place of the twin's stack, the blurs, then the maps pooled as they are made (see :func:`_error_pool`)."""
    if x2.requires_grad or x1.requires_grad or not _compiled_shapes(x1, x2, mu1, s11) or not (
            x1.shape[0] == mu1.shape[0] == s11.shape[0]):
        return ssimulacra2_error_pool_ref(x1, x2, mu1, s11, recursive_gaussian_numba, error_maps_numba)
    x1, x2 = x1.detach().contiguous(), x2.detach().contiguous()
    inputs = np.empty((3, *x2.shape), dtype=np.float32)
    _blur_inputs(x1.numpy(), x2.numpy(), inputs)
    mu2, s22, s12 = recursive_gaussian_numba(torch.from_numpy(inputs), SIGMA)
    return _error_pool(x1, x2, mu1, mu2, s11, s22, s12)


@ssimulacra2_pair_pool.cpu_kernel
def ssimulacra2_pair_pool_numba(x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
    """:func:`~fusedsim.families.ssimulacra2.twin.ssimulacra2_pair_pool_ref`, compiled (see
    :func:`ssimulacra2_error_pool_numba`)."""
    mu1, s11 = ssimulacra2_reference_blur_numba(x1)
    return ssimulacra2_error_pool_numba(x1, x2, mu1, s11)
