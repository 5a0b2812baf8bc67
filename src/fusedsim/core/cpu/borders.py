"""Border rules of the numba CPU kernels."""

from __future__ import annotations

from numba import njit

__all__ = ["reflect101"]


@njit(cache=True, nogil=True, inline="always")
def reflect101(i, n):
    """Index ``i`` of a length-``n`` axis reflected without repeating the edge (``-1 -> 1``, ``n -> n-2``): the
    border rule of libvmaf's VIF, float features and SpEED filters (for ``-n < i < 2n - 1``)."""
    if i < 0:
        i = -i
    if i >= n:
        i = 2 * n - 2 - i
    return i
