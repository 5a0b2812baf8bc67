"""The C library's ``powf``, which libvmaf calls: float32 powers bit for bit on the host.

glibc's ``powf`` is not correctly rounded (for the exponent 1/3f it differs from the correctly rounded power on
0.064 % of the positive floats), so reference implementations that must equal libvmaf call the same function
through ctypes. The values involved are a few per frame, so a Python loop over them costs microseconds.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

import numpy as np

__all__ = ["c_powf", "powf_array"]


@functools.lru_cache(maxsize=1)
def c_powf():
    """The C library's ``powf`` (glibc's on Linux), or ``None`` where none is found."""
    name = ctypes.util.find_library("m") or ctypes.util.find_library("c")
    try:
        powf = ctypes.CDLL(name).powf
    except (OSError, AttributeError, TypeError):
        return None
    powf.restype = ctypes.c_float
    powf.argtypes = (ctypes.c_float, ctypes.c_float)
    return powf


def powf_array(x: np.ndarray | float, exponent: float) -> np.ndarray:
    """``powf(x, (float) exponent)`` of each float32 of ``x`` (any shape; float32 out) by the C library, or the
    correctly rounded power where there is no C ``powf`` (not seen on Linux, macOS or Windows)."""
    powf = c_powf()
    flat = np.asarray(x).astype(np.float32, copy=False).reshape(-1)
    y = np.float32(exponent)
    if powf is None:
        return np.power(flat.astype(np.float64), float(y)).astype(np.float32).reshape(np.shape(x))
    return np.array([powf(v, y) for v in flat.tolist()], np.float32).reshape(np.shape(x))
