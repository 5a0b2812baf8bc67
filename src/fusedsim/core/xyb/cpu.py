"""SSIMULACRA2's XYB transform on the CPU, compiled with numba: the bits of the float32 PyTorch twin.

The arithmetic is that of :func:`fusedsim.core.xyb.twin.linear_to_xyb_ref` (the specification), per pixel:
the opsin mix as three nested FMAs, libjxl's Newton cube root (initial guess from the exponent bits, three steps
and a final one), then SSIMULACRA2's offsets. Each FMA is what the twin computes (the float32 product is exact in
float64, the sum rounded once in float64, then to float32); every other operation is a float32 operation in the
twin's order (numba's default: no contraction, no reassociation). float64 inputs (gradient checks) run the twin.
"""

from __future__ import annotations

import numpy as np
import torch
from numba import njit, prange

from fusedsim.core.cpu.float32 import fma32
from fusedsim.core.xyb.opsin_rows import mix_row_clamped
from fusedsim.core.cpu.parallel import parallel_kernel
import fusedsim.core.xyb.twin as xyb_ref

__all__ = ["linear_to_xyb_numba"]

_F = np.float32
_MATRIX = np.array(xyb_ref.OPSIN_MATRIX, dtype=_F)
_BIAS, _NEG_CBRT_BIAS = _F(xyb_ref.OPSIN_BIAS), _F(xyb_ref.NEG_CBRT_BIAS)
_THIRD, _FOUR_THIRDS = _F(xyb_ref._THIRD), _F(xyb_ref._FOUR_THIRDS)
_EXP_BIAS, _EXP_MUL = np.int32(xyb_ref._CBRT_EXP_BIAS), np.int32(xyb_ref._CBRT_EXP_MUL)
_X_OFFSET, _Y_OFFSET, _B_OFFSET = _F(xyb_ref._X_OFFSET), _F(xyb_ref._Y_OFFSET), _F(xyb_ref._B_OFFSET)


@njit(cache=True, nogil=True, inline="always")
def _cube_root_and_add(x, guess, add, third, four_thirds):  # pragma: no cover - compiled
    """cbrt(x) + add for x >= 0 (the twin's ``cube_root_and_add``) from ``guess``, the initial 1/cbrt(x)."""
    x_third = x * third
    r = guess
    for _ in range(3):
        r2 = r * r
        r = fma32(-x_third, r2 * r2, r * four_thirds)
    r2 = r * r
    r = fma32(third, fma32(-x, r2 * r2, r), r)
    return fma32(r * r, x, add)


@parallel_kernel
def _linear_to_xyb(rgb, out, matrix, bias, neg_cbrt_bias, third, four_thirds, exp_bias, exp_mul, x_off, y_off, b_off,
                   make_positive):  # pragma: no cover - compiled
    n, _, h, w = rgb.shape
    for task in prange(n * h):
        i, y = task // h, task % h
        # one pass per step over a whole row (no branches, no scalar bit casts inside): the loops vectorise
        mixed = np.empty((3, w), dtype=np.float32)
        guess = np.empty((3, w), dtype=np.float32)
        mixed_bits, guess_bits = mixed.view(np.int32), guess.view(np.int32)
        mix_row_clamped(matrix, bias, rgb[i, 0, y], rgb[i, 1, y], rgb[i, 2, y], mixed)
        for k in range(3):
            for x in range(w):
                b = mixed_bits[k, x]
                guess_bits[k, x] = np.int32(0) if b == 0 else np.int32(exp_bias - (b >> 23) * exp_mul)
        for k in range(3):
            row, start = mixed[k], guess[k]
            for x in range(w):
                row[x] = _cube_root_and_add(row[x], start[x], neg_cbrt_bias, third, four_thirds)
        for x in range(w):
            vx = (mixed[0, x] - mixed[1, x]) * np.float32(0.5)
            vy = (mixed[0, x] + mixed[1, x]) * np.float32(0.5)
            vz = mixed[2, x]
            if make_positive:
                vz = (vz - vy) + b_off
                vx = vx * np.float32(14.0) + x_off
                vy = vy + y_off
            out[i, 0, y, x] = vx
            out[i, 1, y, x] = vy
            out[i, 2, y, x] = vz


def linear_to_xyb_numba(rgb: torch.Tensor, make_positive: bool = True) -> torch.Tensor:
    """:func:`~fusedsim.core.xyb.twin.linear_to_xyb_ref` for CPU tensors: float32 compiled (the same bits),
    other dtypes through the twin."""
    if rgb.dtype != torch.float32 or rgb.device.type != "cpu" or rgb.dim() != 4 or rgb.shape[1] != 3:
        return xyb_ref.linear_to_xyb_ref(rgb, make_positive)
    src = rgb.detach().contiguous().numpy()
    out = np.empty_like(src)
    _linear_to_xyb(src, out, _MATRIX, _BIAS, _NEG_CBRT_BIAS, _THIRD, _FOUR_THIRDS, _EXP_BIAS, _EXP_MUL, _X_OFFSET,
                   _Y_OFFSET, _B_OFFSET, make_positive)
    return torch.from_numpy(out)

