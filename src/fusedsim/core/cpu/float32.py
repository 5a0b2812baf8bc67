"""float32 arithmetic as the PyTorch twins evaluate it, for the numba kernels of ``fusedsim.cpu``.

- :func:`fma32`: the twins' fused multiply-add of float32 values: the product is exact in float64, the addend (a
  float32 value, or a twin's Python constant in float64) is added in float64 and the sum rounded once to float32.
- :func:`float32_bits`, :func:`float32_from_bits`: bit casts through a one-element float32 scratch array (numba
  has no scalar bit cast), for the cube roots seeded from the exponent bits.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["float32_bits", "float32_from_bits", "fma32"]


@njit(cache=True, nogil=True, inline="always")
def fma32(a, b, c):  # pragma: no cover - compiled
    return np.float32(np.float64(a) * np.float64(b) + np.float64(c))


@njit(cache=True, nogil=True, inline="always")
def float32_bits(x, scratch):  # pragma: no cover - compiled
    """The int32 bits of float32 ``x`` (``scratch``: a one-element float32 array)."""
    scratch[0] = x
    return scratch.view(np.int32)[0]


@njit(cache=True, nogil=True, inline="always")
def float32_from_bits(bits, scratch):  # pragma: no cover - compiled
    """The float32 whose bits are the int32 ``bits`` (``scratch``: a one-element float32 array)."""
    scratch.view(np.int32)[0] = bits
    return scratch[0]
