"""libjxl's recursive Gaussian on the CPU, compiled with numba: the bits of the float32 PyTorch twin, ~50x faster.

The arithmetic is that of :mod:`fusedsim.core.recursive_gaussian.twin` (the specification), step for step:

- **Horizontal pass**, 32 rows side by side (transposed into a column-major tile, so each step runs over the rows
  as one vector loop): scalar steps for the first columns and the last ones, 4-wide blocks with the expanded
  coefficients in between, exactly where the twin (and the reference) puts them.
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

from fusedsim.core.cpu.float32 import fma32
from fusedsim.core.cpu.parallel import parallel_kernel
from fusedsim.core.recursive_gaussian.twin import recursive_gaussian_coefficients, recursive_gaussian_ref
from fusedsim.core.recursive_gaussian.ops import recursive_gaussian

__all__ = ["recursive_gaussian_numba"]

_COLUMNS = 256  # columns per task of the vertical pass (its state: 2 × 3 × 256 floats)
_GROUP_ROWS = 32  # rows per task of the horizontal pass, side by side (2.6x one row at a time; 16: 2.0x, 64: 2.6x)


@njit(cache=True, nogil=True)
def _scalar_step(src, dst, n, big_n, mul_in, mul_prev, mul_prev2, prev, prev2, s, total):  # pragma: no cover
    """One column of the recursion (the twin's ``scalar_step``) for every row of a group (``src``, ``dst``:
    (width, rows)); writes column n when n >= 0."""
    width, lanes = src.shape
    zero = np.float32(0.0)
    left, right = n - big_n - 1, n + big_n - 1
    for lane in range(lanes):
        s[0, lane] = (src[left, lane] if left >= 0 else zero) + (src[right, lane] if right < width else zero)
    for k in range(3):
        a, b, c = mul_in[k, 0], mul_prev2[k, 0], mul_prev[k, 0]
        for lane in range(lanes):
            o = a * s[0, lane]
            o = fma32(b, prev2[k, lane], o)
            prev2[k, lane] = prev[k, lane]
            o = fma32(c, prev[k, lane], o)
            prev[k, lane] = o
            total[k, lane] = o
    if n >= 0:
        for lane in range(lanes):
            dst[n, lane] = total[0, lane] + (total[1, lane] + total[2, lane])


@parallel_kernel
def _horizontal(x, out, mul_in, mul_prev, mul_prev2, big_n, group_rows):  # pragma: no cover - compiled
    rows, width = x.shape
    head_end = min(-(-(big_n + 1) // 4) * 4, width)  # first column of the 4-wide blocks (8 for radius 5)
    groups = -(-rows // group_rows)
    for group in prange(groups):
        # group_rows rows at once, transposed so that every step runs over the rows (a vector loop: its length
        # is a run-time value, so the compiler vectorises it rather than unrolling it into scalars); each row's
        # own arithmetic is the twin's, step for step
        r0 = group * group_rows
        lanes = min(group_rows, rows - r0)
        src = np.zeros((width, group_rows), dtype=np.float32)
        dst = np.empty((width, group_rows), dtype=np.float32)
        for lane in range(lanes):
            row = x[r0 + lane]
            for c in range(width):
                src[c, lane] = row[c]
        prev = np.zeros((3, group_rows), dtype=np.float32)
        prev2 = np.zeros((3, group_rows), dtype=np.float32)
        block = np.zeros((3, 4, group_rows), dtype=np.float32)
        s = np.zeros((4, group_rows), dtype=np.float32)
        total = np.zeros((3, group_rows), dtype=np.float32)
        for n in range(-big_n + 1, head_end):
            _scalar_step(src, dst, n, big_n, mul_in, mul_prev, mul_prev2, prev, prev2, s, total)
        n = head_end
        while n < width - big_n + 1 - 3:  # the reference's loop bound (no read past the last column)
            for i in range(4):
                a, b = n - big_n - 1 + i, n + big_n - 1 + i
                for lane in range(group_rows):
                    s[i, lane] = src[a, lane] + src[b, lane]
            for k in range(3):
                for j in range(4):
                    m = mul_in[k, j]
                    for lane in range(group_rows):
                        block[k, j, lane] = m * s[0, lane]
                for i in range(1, 4):  # lane j adds input i's term with weight mul_in[j - i] (j >= i)
                    for j in range(i, 4):
                        m = mul_in[k, j - i]
                        for lane in range(group_rows):
                            block[k, j, lane] = fma32(m, s[i, lane], block[k, j, lane])
                for j in range(4):
                    m2, m1 = mul_prev2[k, j], mul_prev[k, j]
                    for lane in range(group_rows):
                        block[k, j, lane] = fma32(m1, prev[k, lane], fma32(m2, prev2[k, lane], block[k, j, lane]))
                for lane in range(group_rows):
                    prev2[k, lane] = block[k, 2, lane]
                    prev[k, lane] = block[k, 3, lane]
            for j in range(4):
                for lane in range(group_rows):
                    dst[n + j, lane] = block[0, j, lane] + (block[1, j, lane] + block[2, j, lane])
            n += 4
        for tail in range(n, width):
            _scalar_step(src, dst, tail, big_n, mul_in, mul_prev, mul_prev2, prev, prev2, s, total)
        for lane in range(lanes):
            row = out[r0 + lane]
            for c in range(width):
                row[c] = dst[c, lane]


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


@recursive_gaussian.cpu_kernel
def recursive_gaussian_numba(x: torch.Tensor, sigma: float = 1.5) -> torch.Tensor:
    """:func:`~fusedsim.core.recursive_gaussian.twin.recursive_gaussian_ref` for CPU tensors: float32 compiled
    (the same bits), other dtypes through the twin. Returns a tensor of x's shape and dtype."""
    if x.dim() < 2 or x.dtype != torch.float32 or x.device.type != "cpu":
        return recursive_gaussian_ref(x, sigma)
    rg = recursive_gaussian_coefficients(float(sigma))
    height, width = x.shape[-2:]
    planes = x.detach().reshape(-1, height, width).contiguous().numpy()
    rows = np.empty_like(planes)
    f32 = np.float32
    _horizontal(planes.reshape(-1, width), rows.reshape(-1, width), np.array(rg.mul_in, dtype=f32),
                np.array(rg.mul_prev, dtype=f32), np.array(rg.mul_prev2, dtype=f32), rg.radius, _GROUP_ROWS)
    out = np.empty_like(planes)
    _vertical(rows, out, np.array(rg.n2, dtype=f32), -np.array(rg.d1, dtype=f32), rg.radius)
    return torch.from_numpy(out).reshape(x.shape)

