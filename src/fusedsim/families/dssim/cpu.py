"""DSSIM's blur and Lab transform on the CPU, compiled with numba: the bits of the PyTorch twins, and the DSSIM ops
that use them.

**Lab** (:func:`~fusedsim.families.dssim.twin.lab_of_linear_ref`): per pixel the XYZ mix, dssim's polynomial cube
root with two Halley steps, and the scaled L/a/b, in the twin's order; its ``mul_add`` is, for float32, the product
exact in float64 plus the addend rounded once in float64, then to float32 (float64: product and sum rounded apart).

**Blur** (:func:`~fusedsim.families.dssim.twin.dssim_blur_ref`), per axis:
inside, ``(p-2 + p+2)·O + (p-1 + p+1)·I + p·M`` over half-sample-symmetric borders; the first and last samples
with their folded weights. The weights are rounded to the array's dtype as PyTorch rounds a Python scalar, and
every sum and product is one of the twin's, in its order (numba's default: no contraction, no reassociation).
Rows run in parallel. The ops ``dssim_lab``, ``dssim_blur``, ``dssim_ssim_map``, ``dssim_prep`` and
``dssim_srgb8_prep`` take these as their ``cpu=``: their twins with these loops.
"""

from __future__ import annotations

import numpy as np
import torch
from numba import njit, prange

from fusedsim.core.cpu.float32 import fma32
from fusedsim.core.cpu.parallel import parallel_kernel
import fusedsim.families.dssim.twin as dssim_ref
from fusedsim.families.dssim.twin import (
    BLUR_INNER,
    BLUR_MID,
    BLUR_OUTER,
    EDGE_CENTER,
    EDGE_NEAR,
    dssim_blur_ref,
    dssim_lab_op_ref,
    dssim_prep_ref,
    dssim_srgb8_prep_ref,
    dssim_ssim_map_ref,
    lab_of_linear_ref,
)
from fusedsim.families.dssim.ops import dssim_blur, dssim_lab, dssim_prep, dssim_srgb8_prep, dssim_ssim_map

__all__ = ["dssim_blur_numba", "dssim_lab_numba", "dssim_prep_numba", "dssim_srgb8_prep_numba",
           "dssim_ssim_map_numba", "lab_of_linear_numba"]

# k: XYZ rows (0..8), epsilon 9, kappa 10, offset 11, L scale 12, a scale 13, a offset 14, b scale 15, b offset 16,
# cube root guess c1 17, c0 18, and -0.5 (19), 2 (20): Python scalars of the twin, in the array's dtype as PyTorch
# rounds them
_LAB_CONSTANTS = (*(c for row in dssim_ref.XYZ_MATRIX for c in row), dssim_ref.LAB_EPSILON, dssim_ref.LAB_KAPPA,
                  dssim_ref.LAB_OFFSET, dssim_ref.L_SCALE, dssim_ref.A_SCALE, dssim_ref.A_OFFSET, dssim_ref.B_SCALE,
                  dssim_ref.B_OFFSET, dssim_ref.CBRT_C1, dssim_ref.CBRT_C0, -0.5, 2.0)


@njit(cache=True, nogil=True, inline="always")
def _mul_add(a, b, c, single):
    """The twin's ``_fma``: float32 via float64 (one rounding of the sum), float64 as two roundings."""
    if single:
        return fma32(a, b, c)
    return a * b + c


@njit(cache=True, nogil=True, inline="always")
def _lab_curve(t, k, single):  # pragma: no cover - compiled
    """The twin's ``_lab_curve`` of one value: dssim's cube root above epsilon, the linear segment below."""
    if not t > k[9]:
        return k[10] * t
    y = _mul_add(k[19] * t + k[17], t, k[18], single)
    for _ in range(2):
        y3 = y * y * y
        y = y * (k[20] * t + y3) / (k[20] * y3 + t)
    return y - k[11]


@parallel_kernel
def _lab(lin, out, k, single):  # pragma: no cover - compiled
    n, _, h, w = lin.shape
    for task in prange(n * h):
        i, y = task // h, task % h
        f = np.empty(3, dtype=lin.dtype)
        for x in range(w):
            r, g, b = lin[i, 0, y, x], lin[i, 1, y, x], lin[i, 2, y, x]
            for row in range(3):
                mixed = _mul_add(b, k[3 * row + 2], _mul_add(g, k[3 * row + 1], r * k[3 * row], single), single)
                f[row] = _lab_curve(mixed, k, single)
            out[i, 0, y, x] = f[1] * k[12]
            out[i, 1, y, x] = _mul_add(k[13], f[0] - f[1], k[14], single)
            out[i, 2, y, x] = _mul_add(k[15], f[1] - f[2], k[16], single)


def lab_of_linear_numba(lin: torch.Tensor) -> torch.Tensor:
    """:func:`~fusedsim.families.dssim.twin.lab_of_linear_ref` of float32/float64 CPU tensors (N, 3, H, W),
    compiled; anything else through the twin."""
    if (lin.device.type != "cpu" or lin.dtype not in (torch.float32, torch.float64) or lin.dim() != 4
            or lin.shape[1] != 3 or lin.requires_grad):
        return lab_of_linear_ref(lin)
    src = lin.contiguous().numpy()
    out = np.empty_like(src)
    _lab(src, out, np.array(_LAB_CONSTANTS, dtype=src.dtype), src.dtype == np.float32)
    return torch.from_numpy(out)


@njit(cache=True, nogil=True, inline="always")
def _sym(j, n):
    return -j - 1 if j < 0 else (2 * n - 1 - j if j >= n else j)


@njit(cache=True, nogil=True, inline="always")
def _sample(line, i, n, w):  # pragma: no cover - compiled
    """Output ``i`` of a line of ``n`` samples; w = (outer, inner, mid, edge centre, edge near)."""
    if i == 0:
        return (w[3] * line[0] + w[4] * line[min(1, n - 1)]) + w[0] * line[min(2, n - 1)]
    if i == n - 1:
        return (w[0] * line[max(n - 3, 0)] + w[4] * line[n - 2]) + w[3] * line[n - 1]
    return ((line[_sym(i - 2, n)] + line[_sym(i + 2, n)]) * w[0]
            + (line[_sym(i - 1, n)] + line[_sym(i + 1, n)]) * w[1]) + line[i] * w[2]


@parallel_kernel
def _rows(x, out, w):  # pragma: no cover - compiled
    rows, n = x.shape
    for r in prange(rows):
        line, dst = x[r], out[r]
        edge = min(2, n)
        for i in range(edge):  # the first two and last two outputs reflect at the borders
            dst[i] = _sample(line, i, n, w)
        for i in range(max(edge, n - 2), n):
            dst[i] = _sample(line, i, n, w)
        if n > 4:  # the interior: shifted views, one vector loop (the twin's sums in its order)
            m2, m1, c, p1, p2 = line[0:n - 4], line[1:n - 3], line[2:n - 2], line[3:n - 1], line[4:n]
            inner = dst[2:n - 2]
            for i in range(n - 4):
                inner[i] = ((m2[i] + p2[i]) * w[0] + (m1[i] + p1[i]) * w[1]) + c[i] * w[2]


@parallel_kernel
def _columns(x, out, w):  # pragma: no cover - compiled
    planes, n, width = x.shape
    for task in prange(planes * n):
        p, i = task // n, task % n
        src, dst = x[p], out[p, i]
        if i == 0:
            a, b, c = 0, min(1, n - 1), min(2, n - 1)
            for col in range(width):
                dst[col] = (w[3] * src[a, col] + w[4] * src[b, col]) + w[0] * src[c, col]
        elif i == n - 1:
            a, b, c = max(n - 3, 0), n - 2, n - 1
            for col in range(width):
                dst[col] = (w[0] * src[a, col] + w[4] * src[b, col]) + w[3] * src[c, col]
        else:
            m2, m1, p1, p2 = _sym(i - 2, n), _sym(i - 1, n), _sym(i + 1, n), _sym(i + 2, n)
            for col in range(width):  # contiguous: vectorised
                dst[col] = ((src[m2, col] + src[p2, col]) * w[0] + (src[m1, col] + src[p1, col]) * w[1]) \
                    + src[i, col] * w[2]


@dssim_blur.cpu_kernel
def dssim_blur_numba(x: torch.Tensor) -> torch.Tensor:
    """:func:`~fusedsim.families.dssim.twin.dssim_blur_ref` of float32/float64 CPU tensors (N, C, H, W), compiled;
    anything else through the twin."""
    if x.device.type != "cpu" or x.dtype not in (torch.float32, torch.float64) or x.dim() != 4 or x.requires_grad:
        return dssim_blur_ref(x)
    n, c, h, w = x.shape
    src = x.contiguous().numpy().reshape(n * c, h, w)
    weights = np.array([BLUR_OUTER, BLUR_INNER, BLUR_MID, EDGE_CENTER, EDGE_NEAR], dtype=src.dtype)
    mid = np.empty_like(src)
    _rows(src.reshape(-1, w), mid.reshape(-1, w), weights)
    out = np.empty_like(src)
    _columns(mid, out, weights)
    return torch.from_numpy(out.reshape(n, c, h, w))


@parallel_kernel
def _products(lab1, lab2, out):  # pragma: no cover - compiled
    """(lab1, lab2, lab1², lab2², lab1·lab2) into ``out`` (5, N, 3, H, W): the blurs' inputs, one pass."""
    n, c, h, w = lab1.shape
    for task in prange(n * c * h):
        i, ch, y = task // (c * h), (task // h) % c, task % h
        for x in range(w):
            a, b = lab1[i, ch, y, x], lab2[i, ch, y, x]
            out[0, i, ch, y, x] = a
            out[1, i, ch, y, x] = b
            out[2, i, ch, y, x] = a * a
            out[3, i, ch, y, x] = b * b
            out[4, i, ch, y, x] = a * b


@parallel_kernel
def _ssim_map(blurred, out, k):  # pragma: no cover - compiled
    """The twin's map formula per pixel from the five blurred planes (its operations in its order; ``k``: INV3, C1,
    C2, 2 in the planes' dtype, as PyTorch applies Python scalars)."""
    _, n, _, h, w = blurred.shape
    inv3, c1, c2, two = k[0], k[1], k[2], k[3]
    for task in prange(n * h):
        i, y = task // h, task % h
        for x in range(w):
            m1 = (blurred[0, i, 0, y, x], blurred[0, i, 1, y, x], blurred[0, i, 2, y, x])
            m2 = (blurred[1, i, 0, y, x], blurred[1, i, 1, y, x], blurred[1, i, 2, y, x])
            q11 = (m1[0] * m1[0], m1[1] * m1[1], m1[2] * m1[2])
            q22 = (m2[0] * m2[0], m2[1] * m2[1], m2[2] * m2[2])
            q12 = (m1[0] * m2[0], m1[1] * m2[1], m1[2] * m2[2])
            mu1_sq = (q11[0] + q11[1] + q11[2]) * inv3
            mu2_sq = (q22[0] + q22[1] + q22[2]) * inv3
            mu1_mu2 = (q12[0] + q12[1] + q12[2]) * inv3
            s1 = ((blurred[2, i, 0, y, x] - q11[0]) + (blurred[2, i, 1, y, x] - q11[1])
                  + (blurred[2, i, 2, y, x] - q11[2])) * inv3
            s2 = ((blurred[3, i, 0, y, x] - q22[0]) + (blurred[3, i, 1, y, x] - q22[1])
                  + (blurred[3, i, 2, y, x] - q22[2])) * inv3
            s12 = ((blurred[4, i, 0, y, x] - q12[0]) + (blurred[4, i, 1, y, x] - q12[1])
                   + (blurred[4, i, 2, y, x] - q12[2])) * inv3
            out[i, y, x] = ((two * mu1_mu2 + c1) * (two * s12 + c2)) / ((mu1_sq + mu2_sq + c1) * (s1 + s2 + c2))


@dssim_ssim_map.cpu_kernel
def dssim_ssim_map_numba(lab1: torch.Tensor, lab2: torch.Tensor) -> torch.Tensor:
    """:func:`~fusedsim.families.dssim.twin.dssim_ssim_map_ref`, compiled for float32/float64 CPU tensors (N, 3, H,
    W) of one shape: the five blur inputs in one pass, one blur call over all of them, the formula in one pass
    (the same bits); anything else through the twin."""
    if (lab1.device.type != "cpu" or lab1.dtype not in (torch.float32, torch.float64) or lab2.dtype != lab1.dtype
            or lab1.shape != lab2.shape or lab1.dim() != 4 or lab1.shape[1] != 3 or lab1.requires_grad
            or lab2.requires_grad):
        return dssim_ssim_map_ref(lab1, lab2, dssim_blur_numba)
    a, b = lab1.contiguous().numpy(), lab2.contiguous().numpy()
    n, c, h, w = a.shape
    inputs = np.empty((5, n, c, h, w), dtype=a.dtype)
    _products(a, b, inputs)
    blurred = dssim_blur_numba(torch.from_numpy(inputs.reshape(5 * n, c, h, w))).numpy().reshape(5, n, c, h, w)
    out = np.empty((n, h, w), dtype=a.dtype)
    _ssim_map(blurred, out, np.array([dssim_ref.INV3, dssim_ref.C1, dssim_ref.C2, 2.0], dtype=a.dtype))
    return torch.from_numpy(out)


@dssim_prep.cpu_kernel
def dssim_prep_numba(lin: torch.Tensor, alpha: torch.Tensor, has_alpha: bool) -> torch.Tensor:
    return dssim_prep_ref(lin, alpha, has_alpha, dssim_blur_numba, lab_of_linear_numba)


@dssim_srgb8_prep.cpu_kernel
def dssim_srgb8_prep_numba(raw: torch.Tensor) -> torch.Tensor:
    return dssim_srgb8_prep_ref(raw, dssim_blur_numba, lab_of_linear_numba)


@dssim_lab.cpu_kernel
def dssim_lab_numba(lin: torch.Tensor, alpha: torch.Tensor, has_alpha: bool) -> torch.Tensor:
    return dssim_lab_op_ref(lin, alpha, has_alpha, lab_of_linear_numba)
