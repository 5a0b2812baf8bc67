"""numba's parallel kernels, callable from any Python thread.

numba runs ``prange`` loops on a threading layer: ``tbb`` or ``omp`` where available (both thread-safe), else
``workqueue`` (e.g. without OpenMP or TBB), which aborts the whole process when two Python threads launch parallel
kernels at once. A :func:`parallel_kernel` launch is serialised by one lock until the first launch has shown the
layer to be thread-safe; from then on launches run concurrently.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable

from numba import njit

__all__ = ["parallel_kernel"]

_LOCK = threading.Lock()
_THREADSAFE = False  # the layer, known after the first parallel launch, is tbb or omp


def _layer_is_threadsafe() -> bool:
    import numba

    try:
        return numba.threading_layer() in ("tbb", "omp")
    except ValueError:  # no parallel region has run yet
        return False


def parallel_kernel(fn: Callable) -> Callable:
    """``numba.njit(cache=True, nogil=True, parallel=True)`` of ``fn``, launched as described in the module
    docstring. The result is called from Python, not from other compiled functions."""
    compiled = njit(cache=True, nogil=True, parallel=True)(fn)

    @functools.wraps(fn)
    def launch(*args):
        global _THREADSAFE
        if _THREADSAFE:
            return compiled(*args)
        with _LOCK:
            out = compiled(*args)
            _THREADSAFE = _layer_is_threadsafe()
        return out

    launch.compiled = compiled  # type: ignore[attr-defined]
    return launch
