"""Input checks shared by the public API: clear ValueError/TypeError naming the argument and the rule."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import torch

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def check_image_pair(x: object, y: object, names: tuple[str, str], ndims: Sequence[int] = (4, 5)) -> None:
    """Both are floating tensors of equal shape, dtype and device, with an allowed number of dimensions."""
    for value, name in zip((x, y), names):
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor; got {type(value).__name__}")
        if value.dtype not in FLOAT_DTYPES:
            raise TypeError(f"{name} must be a floating tensor (float16, bfloat16, float32 or float64); "
                            f"got {value.dtype} — convert it with {name}.float()")
    assert isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor)
    if x.shape != y.shape:
        raise ValueError(f"{names[0]} and {names[1]} must have the same shape; got {tuple(x.shape)} and "
                         f"{tuple(y.shape)}")
    if x.dim() not in ndims:
        layouts = " or ".join([{4: "(N, C, H, W)", 5: "(N, C, D, H, W)"}.get(d, f"{d}-D") for d in ndims])
        raise ValueError(f"{names[0]} must be {layouts}; got {x.dim()} dimensions {tuple(x.shape)}")
    if x.device != y.device:
        raise ValueError(f"{names[0]} and {names[1]} must be on the same device; got {x.device} and {y.device}")
    if x.dtype != y.dtype:
        raise TypeError(f"{names[0]} and {names[1]} must have the same dtype; got {x.dtype} and {y.dtype}")
    if x.numel() == 0:
        raise ValueError(f"{names[0]} is empty: shape {tuple(x.shape)}")


def check_window_size(win_size: object, name: str = "win_size") -> int:
    if isinstance(win_size, bool) or not isinstance(win_size, int):
        raise TypeError(f"{name} must be an int; got {type(win_size).__name__}")
    if win_size % 2 == 0 or not 3 <= win_size <= 31:
        raise ValueError(f"{name} must be an odd integer from 3 to 31; got {win_size}")
    return win_size


def check_positive(value: object, name: str) -> float:
    """``value`` as a finite float > 0.

    Accepts Python ints and floats, numpy scalars (``np.float32(1)``) and 0-d integer or floating tensors, as
    pytorch-msssim does. A 0-d CUDA tensor is read with one device-to-host synchronisation: pass a Python number
    in training loops. Refuses bools, strings, other types, tensors with more than one element, NaN, Inf and
    values <= 0.
    """
    if type(value) is not float and type(value) is not int:  # fast path for the usual Python numbers
        value = _scalar(value, name)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0; got {value}")
    return float(value)


def _scalar(value: object, name: str) -> float:
    """A real scalar of another type (numpy scalar, 0-d tensor, numbers.Real subclass) as a float."""
    if isinstance(value, torch.Tensor):
        if value.dim() != 0:
            raise TypeError(f"{name} must be a number or a 0-d tensor; got a tensor of shape {tuple(value.shape)}")
        if value.dtype == torch.bool or value.is_complex():
            raise TypeError(f"{name} must be a real number; got a {value.dtype} tensor")
        if value.device.type == "meta":
            raise ValueError(f"{name} is a meta tensor, which holds no value; pass a Python number")
        return float(value.detach())  # CUDA tensors: one synchronisation (documented above)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):  # np.bool_ is not a numbers.Real
        raise TypeError(f"{name} must be a number; got {type(value).__name__}")
    return float(value)


def check_min_size(x: torch.Tensor, min_side: int, name: str, why: str) -> None:
    spatial = tuple(x.shape[2:])
    if min(spatial) < min_side:
        raise ValueError(f"{name}: every spatial side must be at least {min_side} ({why}); got {spatial}")


def check_choice(value: object, name: str, choices: Sequence[object]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")


def raise_if_not_finite(result: torch.Tensor, inputs: dict[str, torch.Tensor]) -> None:
    """One host sync on the (small) result; the inputs are scanned only to name the culprit."""
    if result.device.type == "meta":
        raise ValueError("check_finite=True reads the values, and meta tensors hold none; leave it False for "
                         "shape propagation")
    if torch.compiler.is_compiling() or bool(torch.isfinite(result.detach()).all()):
        return
    for name, tensor in inputs.items():
        if not bool(torch.isfinite(tensor.detach()).all()):
            raise ValueError(f"{name} contains NaN or Inf values")
    raise ValueError("the result is not finite although the inputs are: check data_range, K and the window")
