"""The opsin mix of one row, shared by the XYB transforms of SSIMULACRA2 and zensim (both libjxl's)."""

from __future__ import annotations

import numpy as np
from numba import njit

from fusedsim.core.cpu.float32 import fma32

__all__ = ["mix_row_clamped"]


@njit(cache=True, nogil=True)
def mix_row_clamped(matrix, bias, red, green, blue, out):  # pragma: no cover - compiled
    """``out[k, x] = m[k,0]·r + (m[k,1]·g + (m[k,2]·b + bias))`` as three nested FMAs (the twins'), negative
    values set to 0 (NaN kept), for one row: ``matrix`` (3, 3) float32, ``bias`` float32 or float64, ``red``,
    ``green``, ``blue`` (w,) float32, ``out`` (3, w) float32. One vector loop per output channel."""
    zero = np.float32(0.0)
    for k in range(3):
        a0, a1, a2 = matrix[k, 0], matrix[k, 1], matrix[k, 2]
        row = out[k]
        for x in range(red.shape[0]):
            v = fma32(a0, red[x], fma32(a1, green[x], fma32(a2, blue[x], bias)))
            row[x] = zero if v < 0 else v
