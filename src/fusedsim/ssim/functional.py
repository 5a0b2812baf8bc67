"""Public SSIM API: ``fused_ssim`` (fused-ssim / fussim drop-in), ``ssim`` and ``ms_ssim`` (pytorch-msssim drop-ins).

All functions take (N, C, H, W) or (N, C, D, H, W) tensors, are differentiable in both inputs, run the Triton
kernels on GPU tensors and the PyTorch twin elsewhere (see :mod:`fusedsim.backend`), and accumulate in float32
(float64 for float64 inputs). Results are returned in that accumulation dtype.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import torch

from fusedsim._validation import (
    check_choice,
    check_image_pair,
    check_min_size,
    check_positive,
    check_window_size,
    raise_if_not_finite,
)
from fusedsim.backend import choose_backend
from fusedsim.reference.ssim_ref import (
    avg_pool_half_ref,
    compute_dtype,
    gaussian_window,
    ms_ssim_min_size,
    ssim_maps_ref,
    ssim_plane_means_ref,
)

MS_SSIM_WEIGHTS = (0.0448, 0.2856, 0.3001, 0.2363, 0.1333)
REDUCTIONS = ("mean", "image", "channel", "none")


# --------------------------------------------------------------------------------------------------- internals
@functools.lru_cache(maxsize=64)
def _cached_gaussian_table(win_size: int, win_sigma: float, channels: int, dtype: torch.dtype,
                           device: torch.device) -> torch.Tensor:
    # built once per configuration: a per-call host-to-device copy would stall the stream
    table = gaussian_window(win_size, win_sigma, dtype=dtype, device=device).expand(channels, -1).contiguous()
    return table


def _window_table(win: torch.Tensor | None, win_size: int, win_sigma: float,
                  x: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """The per-channel window as a (C, K) tensor in the accumulation dtype on x's device, and whether every row
    equals its reverse (the backward then reuses the forward taps)."""
    channels, dtype = x.shape[1], compute_dtype(x.dtype)
    if win is None:  # a Gaussian: symmetric by construction
        if torch.compiler.is_compiling():
            table = gaussian_window(win_size, win_sigma, dtype=dtype, device=x.device)
            return table.expand(channels, -1).contiguous(), True
        return _cached_gaussian_table(win_size, float(win_sigma), channels, dtype, x.device), True
    if not isinstance(win, torch.Tensor) or not win.is_floating_point():
        raise TypeError("win must be a floating torch.Tensor holding a 1-D window per channel")
    taps = win.shape[-1]
    if any(s != 1 for s in win.shape[1:-1]) or win.dim() not in (1, 3, 4, 5):
        raise ValueError(f"win must have shape (K,), (C, 1, K), (C, 1, 1, K) or (C, 1, 1, 1, K); "
                         f"got {tuple(win.shape)}")
    table = win.reshape(-1, taps)
    if table.shape[0] == 1:
        table = table.expand(channels, -1)
    if table.shape[0] != channels:
        raise ValueError(f"win holds {table.shape[0]} channel windows but the images have {channels} channels")
    if not bool(torch.isfinite(table).all()):
        raise ValueError("win contains NaN or Inf values")
    table = table.to(device=x.device, dtype=dtype).contiguous()
    return table, bool(torch.equal(table, table.flip(-1)))


def _squeeze_like_pytorch_msssim(x: torch.Tensor) -> torch.Tensor:
    for dim in range(x.dim() - 1, 1, -1):
        x = x.squeeze(dim=dim)
    return x


def plane_means(x: torch.Tensor, y: torch.Tensor, win: torch.Tensor, c1: float, c2: float, valid: bool,
                symmetric: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean SSIM and mean cs per (n, c) plane, each (N, C), through the chosen backend (differentiable)."""
    if choose_backend(x, op="SSIM") == "triton":
        from fusedsim.ops import ssim as ops

        s_sum, cs_sum = ops.ssim_sums_op(x, y, win, c1, c2, valid, symmetric)
        shrink = win.shape[-1] - 1 if valid else 0
        count = math.prod([s - shrink for s in x.shape[2:]])
        return (s_sum / count).view(x.shape[:2]), (cs_sum / count).view(x.shape[:2])
    return ssim_plane_means_ref(x, y, win, c1, c2, "valid" if valid else "same")


def ssim_map(x: torch.Tensor, y: torch.Tensor, win: torch.Tensor, c1: float, c2: float, valid: bool,
             symmetric: bool = False) -> torch.Tensor:
    """Per-pixel SSIM map through the chosen backend (differentiable)."""
    if choose_backend(x, op="SSIM") == "triton":
        from fusedsim.ops import ssim as ops

        return ops.ssim_map_op(x, y, win, c1, c2, valid, symmetric)
    return ssim_maps_ref(x, y, win, c1, c2, "valid" if valid else "same")[0]


def _weight_list(weights: Sequence[float] | torch.Tensor) -> tuple[float, ...]:
    values = weights.detach().cpu().flatten().tolist() if isinstance(weights, torch.Tensor) else weights
    try:
        result = tuple(float(w) for w in values)
    except (TypeError, ValueError) as exc:
        raise ValueError("weights must be a non-empty 1-D sequence of finite numbers") from exc
    if not result or not all(math.isfinite(w) for w in result):
        raise ValueError("weights must be a non-empty 1-D sequence of finite numbers")
    return result


@functools.lru_cache(maxsize=64)
def _cached_weights(weights: tuple[float, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    return torch.tensor(weights, dtype=dtype, device=device)


def _device_weights(weights: tuple[float, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """MS-SSIM exponents on the device, built once (a per-call host-to-device copy would stall the stream)."""
    if torch.compiler.is_compiling():
        return torch.tensor(weights, dtype=dtype, device=device)
    return _cached_weights(weights, dtype, device)


def _reduce(per_channel: torch.Tensor, reduction: str) -> torch.Tensor:
    if reduction == "mean":
        return per_channel.mean()
    if reduction == "image":
        return per_channel.mean(1)
    return per_channel


def _resolve_reduction(reduction: str | None, size_average: bool) -> str:
    if reduction is None:
        return "mean" if size_average else "image"
    check_choice(reduction, "reduction", REDUCTIONS)
    return reduction


def _check_constants(data_range: float, K: Sequence[float]) -> tuple[float, float]:
    data_range = check_positive(data_range, "data_range")
    if not isinstance(K, Sequence) or len(K) != 2:
        raise ValueError(f"K must be a pair (K1, K2); got {K!r}")
    k1, k2 = [check_positive(k, f"K[{i}]") for i, k in enumerate(K)]
    return (k1 * data_range) ** 2, (k2 * data_range) ** 2


def _pytorch_msssim_arguments(X, Y, data_range, size_average, win_size, win_sigma, win, K, reduction):
    """Checks shared by ``ssim`` and ``ms_ssim``; returns the squeezed inputs, window size, C1, C2, reduction."""
    check_image_pair(X, Y, ("X", "Y"), ndims=range(2, 7))
    X, Y = _squeeze_like_pytorch_msssim(X), _squeeze_like_pytorch_msssim(Y)
    check_image_pair(X, Y, ("X", "Y"))
    win_size = check_window_size(win.shape[-1] if isinstance(win, torch.Tensor) else win_size,
                                 "win size" if win is not None else "win_size")
    if win is None:
        check_positive(win_sigma, "win_sigma")
    c1, c2 = _check_constants(data_range, K)
    return X, Y, win_size, c1, c2, _resolve_reduction(reduction, size_average)


# --------------------------------------------------------------------------------------------------- public API
def fused_ssim(img1: torch.Tensor, img2: torch.Tensor, padding: str = "same", train: bool = True,
               window_size: int = 11, *, window_sigma: float = 1.5, reduction: str = "mean",
               check_finite: bool = True) -> torch.Tensor:
    """SSIM with fused-ssim / fussim semantics: data range 1 (C1 = 0.01², C2 = 0.03²), Gaussian window.

    img1, img2: (N, C, H, W) or (N, C, D, H, W). ``padding='same'`` zero-pads (no renormalisation) and averages
    every pixel; ``'valid'`` averages only the pixels whose window lies inside the image. ``train=False`` records
    no autograd graph. ``reduction``: ``mean`` (scalar), ``image`` (N,), ``channel`` (N, C) or ``none`` (the map).
    Unlike fussim, every odd ``window_size`` from 3 to 31 uses an exact normalised Gaussian of ``window_sigma``.
    """
    check_image_pair(img1, img2, ("img1", "img2"))
    check_choice(padding, "padding", ("same", "valid"))
    check_window_size(window_size, "window_size")
    check_positive(window_sigma, "window_sigma")
    check_choice(reduction, "reduction", REDUCTIONS)
    check_min_size(img1, window_size, "img1", f"window_size is {window_size}")
    win, sym = _window_table(None, window_size, window_sigma, img1)
    valid = padding == "valid"
    with torch.set_grad_enabled(train and torch.is_grad_enabled()):
        if reduction == "none":
            out = ssim_map(img1, img2, win, 0.01**2, 0.03**2, valid, sym)
        else:
            out = _reduce(plane_means(img1, img2, win, 0.01**2, 0.03**2, valid, sym)[0], reduction)
    if check_finite:
        raise_if_not_finite(out if reduction != "none" else out.sum(), {"img1": img1, "img2": img2})
    return out


def ssim(X: torch.Tensor, Y: torch.Tensor, data_range: float = 255, size_average: bool = True, win_size: int = 11,
         win_sigma: float = 1.5, win: torch.Tensor | None = None, K: Sequence[float] = (0.01, 0.03),
         nonnegative_ssim: bool = False, *, reduction: str | None = None, check_finite: bool = True) -> torch.Tensor:
    """SSIM with pytorch-msssim 1.0.0 semantics (valid filtering, per-channel means).

    X, Y: (N, C, H, W) or (N, C, D, H, W) (trailing singleton dimensions are squeezed, as pytorch-msssim does).
    Returns the mean over everything (``size_average=True``) or per image (N,). ``reduction`` overrides that:
    ``mean``, ``image``, ``channel`` (N, C) or ``none`` (the SSIM map, shape (N, C, H-K+1, W-K+1)).
    ``nonnegative_ssim`` applies relu to the per-channel values (not to the map).
    """
    X, Y, win_size, c1, c2, reduction = _pytorch_msssim_arguments(X, Y, data_range, size_average, win_size,
                                                                  win_sigma, win, K, reduction)
    check_min_size(X, win_size, "X", f"the window is {win_size} wide")
    table, sym = _window_table(win, win_size, win_sigma, X)
    if reduction == "none":
        out = ssim_map(X, Y, table, c1, c2, True, sym)
    else:
        per_channel = plane_means(X, Y, table, c1, c2, True, sym)[0]
        if nonnegative_ssim:
            per_channel = torch.relu(per_channel)
        out = _reduce(per_channel, reduction)
    if check_finite:
        raise_if_not_finite(out if reduction != "none" else out.sum(), {"X": X, "Y": Y})
    return out


def ms_ssim(X: torch.Tensor, Y: torch.Tensor, data_range: float = 255, size_average: bool = True,
            win_size: int = 11, win_sigma: float = 1.5, win: torch.Tensor | None = None,
            weights: Sequence[float] | torch.Tensor | None = None, K: Sequence[float] = (0.01, 0.03), *,
            reduction: str | None = None, check_finite: bool = True) -> torch.Tensor:
    """MS-SSIM with pytorch-msssim 1.0.0 semantics: relu(cs) at each level but the last, relu(ssim) at the last,
    2x average pooling (zero padding of size % 2, counted) between levels, weighted geometric product.

    ``reduction``: ``mean``, ``image`` or ``channel`` (a map is not defined for MS-SSIM). Every spatial side must
    exceed (win_size - 1) * 2**(levels - 1) (160 for the defaults), which pytorch-msssim asserts.
    """
    X, Y, win_size, c1, c2, reduction = _pytorch_msssim_arguments(X, Y, data_range, size_average, win_size,
                                                                  win_sigma, win, K, reduction)
    if reduction == "none":
        raise ValueError("reduction='none' (a map) is not defined for MS-SSIM; use 'mean', 'image' or 'channel'")
    weight_list = _weight_list(MS_SSIM_WEIGHTS if weights is None else weights)
    levels = len(weight_list)
    min_side = ms_ssim_min_size(win_size, levels)
    check_min_size(X, min_side, "X", f"{levels} MS-SSIM levels with a {win_size}-wide window")
    table, sym = _window_table(win, win_size, win_sigma, X)
    factors = []
    x, y = X, Y
    for level in range(levels):
        ssim_pc, cs_pc = plane_means(x, y, table, c1, c2, True, sym)
        if level < levels - 1:
            factors.append(torch.relu(cs_pc))
            x, y = avg_pool_half_ref(x), avg_pool_half_ref(y)
    factors.append(torch.relu(ssim_pc))
    stacked = torch.stack(factors, dim=0)
    exponents = _device_weights(weight_list, stacked.dtype, stacked.device).view(-1, 1, 1)
    per_channel = torch.prod(stacked**exponents, dim=0)
    out = _reduce(per_channel, reduction)
    if check_finite:
        raise_if_not_finite(out, {"X": X, "Y": Y})
    return out
