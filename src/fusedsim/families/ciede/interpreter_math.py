"""Stand-ins for CUDA's libdevice ``pow``, ``atan2``, ``sin``, ``cos`` and ``exp`` under Triton's interpreter, which
cannot call libdevice: numpy's double functions on the interpreter's arrays. Only the CPU interpreter (tests of
the kernel's arithmetic on small inputs) uses them; GPU kernels call libdevice."""

from __future__ import annotations

import numpy as np
import triton.language as tl
from triton.runtime.interpreter import TensorHandle

__all__ = ["atan2", "cos", "exp", "pow", "sin"]


def _data(x):
    return x.handle.data if isinstance(x, tl.tensor) else np.float64(getattr(x, "value", x))


def _apply(fn, *args):
    like = next(a for a in args if isinstance(a, tl.tensor))
    with np.errstate(invalid="ignore", over="ignore"):  # lanes the kernel discards (pow of negatives)
        data = fn(*(_data(a) for a in args)).astype(like.handle.data.dtype)
    return tl.tensor(TensorHandle(data, like.handle.dtype), like.type)


def pow(x, y):  # noqa: A001 - libdevice's name
    return _apply(np.power, x, y)


def atan2(y, x):
    return _apply(np.arctan2, y, x)


def sin(x):
    return _apply(np.sin, x)


def cos(x):
    return _apply(np.cos, x)


def exp(x):
    return _apply(np.exp, x)
