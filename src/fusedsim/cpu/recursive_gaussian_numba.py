"""libjxl's recursive Gaussian on the CPU, compiled with numba: the bits of the float32 PyTorch twin, ~50x faster.

The arithmetic is that of :mod:`fusedsim.reference.recursive_gaussian_ref` (the specification), step for step:

- **Horizontal pass**, one row at a time: scalar steps for the first columns and the last ones, 4-wide blocks with
  the expanded coefficients in between, exactly where the twin (and the reference) puts them.
- **Vertical pass**, one row of the plane per step, every column of a block of columns at once.
- Every FMA is what the twin computes: the product of two float32 values is exact in float64, the sum is rounded
  once in float64, then to float32. numba's default (no ``fastmath``) emits no float32 contraction and no
  reassociation, so the plain float32 sums and products round as the twin's do.

Threads split the work across rows (horizontal) and across blocks of columns (vertical). float64 inputs (gradient
checks) run the twin.
"""

from __future__ import annotations

import numpy as np
import torch
from numba import njit, prange

from fusedsim.cpu._float32 import fma32
from fusedsim.cpu._parallel import parallel_kernel
from fusedsim.reference.recursive_gaussian_ref import recursive_gaussian_coefficients, recursive_gaussian_ref

__all__ = ["recursive_gaussian_numba"]

_COLUMNS = 256  # columns per task of the vertical pass (its state: 2 × 3 × 256 floats)


@njit(cache=True, nogil=True, inline="always")
def _scalar_step(src, dst, n, big_n, mul_in, mul_prev, mul_prev2, prev, prev2):  # pragma: no cover - compiled
    """One column of the recursion (the twin's ``scalar_step``); writes column n when n >= 0."""
    width = src.shape[0]
    zero = np.float32(0.0)
    left, right = n - big_n - 1, n + big_n - 1
    s = (src[left] if left >= 0 else zero) + (src[right] if right < width else zero)
    total = np.zeros(3, dtype=np.float32)
    for k in range(3):
        o = mul_in[k, 0] * s
        o = fma32(mul_prev2[k, 0], prev2[k], o)
        prev2[k] = prev[k]
        o = fma32(mul_prev[k, 0], prev[k], o)
        prev[k] = o
        total[k] = o
    if n >= 0:
        dst[n] = total[0] + (total[1] + total[2])


@parallel_kernel
def _horizontal(x, out, mul_in, mul_prev, mul_prev2, big_n):  # pragma: no cover - compiled
    rows, width = x.shape
    head_end = min(-(-(big_n + 1) // 4) * 4, width)  # first column of the 4-wide blocks (8 for radius 5)
    for r in prange(rows):
        src = x[r]
        dst = out[r]
        prev = np.zeros(3, dtype=np.float32)
        prev2 = np.zeros(3, dtype=np.float32)
        block = np.zeros((3, 4), dtype=np.float32)
        s = np.zeros(4, dtype=np.float32)
        for n in range(-big_n + 1, head_end):
            _scalar_step(src, dst, n, big_n, mul_in, mul_prev, mul_prev2, prev, prev2)
        n = head_end
        while n < width - big_n + 1 - 3:  # the reference's loop bound (no read past the last column)
            for i in range(4):
                s[i] = src[n - big_n - 1 + i] + src[n + big_n - 1 + i]
            for k in range(3):
                for j in range(4):
                    block[k, j] = mul_in[k, j] * s[0]
                for i in range(1, 4):  # lane j adds input i's term with weight mul_in[j - i] (j >= i)
                    for j in range(i, 4):
                        block[k, j] = fma32(mul_in[k, j - i], s[i], block[k, j])
                for j in range(4):
                    block[k, j] = fma32(mul_prev2[k, j], prev2[k], block[k, j])
                for j in range(4):
                    block[k, j] = fma32(mul_prev[k, j], prev[k], block[k, j])
                prev2[k] = block[k, 2]
                prev[k] = block[k, 3]
            for j in range(4):
                dst[n + j] = block[0, j] + (block[1, j] + block[2, j])
            n += 4
        for tail in range(n, width):
            _scalar_step(src, dst, tail, big_n, mul_in, mul_prev, mul_prev2, prev, prev2)


@parallel_kernel
def _vertical(x, out, n2, neg_d1, big_n):  # pragma: no cover - compiled
    planes, height, width = x.shape
    blocks = -(-width // _COLUMNS)
    zero = np.float32(0.0)
    for task in prange(planes * blocks):
        p, b = task // blocks, task % blocks
        c0 = b * _COLUMNS
        c1 = min(width, c0 + _COLUMNS)
        y1 = np.zeros((3, c1 - c0), dtype=np.float32)
        y2 = np.zeros((3, c1 - c0), dtype=np.float32)
        for n in range(-big_n + 1, height):
            top, bottom = n - big_n - 1, n + big_n - 1
            for c in range(c0, c1):
                s = (x[p, top, c] if top >= 0 else zero) + (x[p, bottom, c] if bottom < height else zero)
                i = c - c0
                y_0 = fma32(n2[0], s, fma32(neg_d1[0], y1[0, i], -y2[0, i]))
                y_1 = fma32(n2[1], s, fma32(neg_d1[1], y1[1, i], -y2[1, i]))
                y_2 = fma32(n2[2], s, fma32(neg_d1[2], y1[2, i], -y2[2, i]))
                y2[0, i], y2[1, i], y2[2, i] = y1[0, i], y1[1, i], y1[2, i]
                y1[0, i], y1[1, i], y1[2, i] = y_0, y_1, y_2
                if n >= 0:
                    out[p, n, c] = y_0 + (y_1 + y_2)


def recursive_gaussian_numba(x: torch.Tensor, sigma: float = 1.5) -> torch.Tensor:
    """:func:`~fusedsim.reference.recursive_gaussian_ref.recursive_gaussian_ref` for CPU tensors: float32 compiled
    (the same bits), other dtypes through the twin. Returns a tensor of x's shape and dtype."""
    if x.dim() < 2 or x.dtype != torch.float32 or x.device.type != "cpu":
        return recursive_gaussian_ref(x, sigma)
    rg = recursive_gaussian_coefficients(float(sigma))
    height, width = x.shape[-2:]
    planes = x.detach().reshape(-1, height, width).contiguous().numpy()
    rows = np.empty_like(planes)
    f32 = np.float32
    _horizontal(planes.reshape(-1, width), rows.reshape(-1, width), np.array(rg.mul_in, dtype=f32),
                np.array(rg.mul_prev, dtype=f32), np.array(rg.mul_prev2, dtype=f32), rg.radius)
    out = np.empty_like(planes)
    _vertical(rows, out, np.array(rg.n2, dtype=f32), -np.array(rg.d1, dtype=f32), rg.radius)
    return torch.from_numpy(out).reshape(x.shape)

