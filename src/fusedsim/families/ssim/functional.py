"""Public SSIM API: ``fused_ssim`` (fused-ssim / fussim drop-in), ``ssim`` and ``ms_ssim`` (pytorch-msssim
drop-ins).

All functions take (N, C, H, W) or (N, C, D, H, W) tensors, are differentiable in both inputs, run the Triton
kernels on GPU tensors and the PyTorch twin elsewhere (see :mod:`fusedsim.core.backend`), and accumulate in float32
(float64 for float64 inputs). Results are returned in that accumulation dtype.

The host path is part of the kernel: a call is looked up by its arguments' metadata (shapes, strides, dtypes,
devices, options, backend) in a table of validated *calls*; only a miss validates and plans. Nothing on the
default path synchronises with the device (NaN/Inf inputs give a NaN result; ``check_finite=True`` names the
culprit at the cost of one synchronisation).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from fusedsim.core.calls import CallTable
from fusedsim.core.state import cached
from fusedsim.core.validation import (
    check_choice,
    check_image_pair,
    check_min_size,
    check_positive,
    check_window_size,
    raise_if_not_finite,
)
from fusedsim.core.moments.twin import compute_dtype, gaussian_window
from fusedsim.families.ssim.twin import avg_pool_half_ref, ms_ssim_combine_ref, ms_ssim_min_size, ssim_reduce_ref

MS_SSIM_WEIGHTS = (0.0448, 0.2856, 0.3001, 0.2363, 0.1333)
REDUCTIONS = ("mean", "image", "channel", "none")
# ssim_reduce's output codes (see fusedsim.ops.catalog)
_REDUCE = {"none": -1, "stats": 0, "mean": 1, "image": 2, "channel": 3}
FUSED_C1, FUSED_C2 = 0.01**2, 0.03**2

# --------------------------------------------------------------------------------------------- call table
CALLS = CallTable()

# The defaults as objects of their own: a call that leaves an option at its default passes this very object, so
# `option is WINDOW_SIGMA` proves its type and the call table can key it by value alone (CallTable.for_pair_pinned).
WINDOW_SIZE = 11
WINDOW_SIGMA = 1.5
K_DEFAULT = (0.01, 0.03)


def reduce_call(x: torch.Tensor, y: torch.Tensor, win: torch.Tensor, c1: float, c2: float, valid: bool,
                symmetric: bool, reduce: str, ssim_weight: float = -1.0) -> Callable:
    """A call computing ``ssim_reduce`` (:mod:`fusedsim.families.ssim.ops`) for tensors like x, y, bound to the
    backend the dispatcher picks."""
    from fusedsim.families.ssim.ops import ssim_reduce

    return ssim_reduce.bind((x, y), (win,), (c1, c2, valid, symmetric, _REDUCE[reduce], ssim_weight))


def traced_reduce(x, y, win, c1, c2, valid, symmetric, reduce, ssim_weight=-1.0):
    """Under torch.compile: the registered op (a custom op on the Triton side), no call table."""
    from fusedsim.families.ssim.ops import ssim_reduce

    return ssim_reduce(x, y, win, c1, c2, valid, symmetric, _REDUCE[reduce], ssim_weight)


# ------------------------------------------------------------------------------------------------ windows
@cached(maxsize=64)
def _cached_gaussian_table(win_size: int, win_sigma: float, channels: int, dtype: torch.dtype,
                           device: torch.device) -> torch.Tensor:
    # built once per configuration: a per-call host-to-device copy would stall the stream
    return gaussian_window(win_size, win_sigma, dtype=dtype, device=device).expand(channels, -1).contiguous()


def window_table(win: torch.Tensor | None, win_size: int, win_sigma: float,
                 x: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """The per-channel window as a (C, K) tensor in the accumulation dtype on x's device, and whether every row
    equals its reverse (the backward then reuses the forward taps). A user window on the GPU is not inspected
    (that would synchronise): it is treated as asymmetric, which is always correct."""
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
    symmetric = False
    if table.device.type == "cpu":
        if not bool(torch.isfinite(table).all()):
            raise ValueError("win contains NaN or Inf values")
        symmetric = bool(torch.equal(table, table.flip(-1)))
    return table.to(device=x.device, dtype=dtype).contiguous(), symmetric


# --------------------------------------------------------------------------------------------- arguments
def _squeeze_like_pytorch_msssim(x: torch.Tensor) -> torch.Tensor:
    for dim in range(x.dim() - 1, 1, -1):
        x = x.squeeze(dim=dim)
    return x


def check_constants(data_range: float, K: Sequence[float]) -> tuple[float, float]:
    data_range = check_positive(data_range, "data_range")
    if not isinstance(K, Sequence) or len(K) != 2:
        raise ValueError(f"K must be a pair (K1, K2); got {K!r}")
    k1, k2 = [check_positive(k, f"K[{i}]") for i, k in enumerate(K)]
    return (k1 * data_range) ** 2, (k2 * data_range) ** 2


def _resolve_reduction(reduction: str | None, size_average: bool) -> str:
    if reduction is None:
        return "mean" if size_average else "image"
    check_choice(reduction, "reduction", REDUCTIONS)
    return reduction


def _pytorch_msssim_inputs(X, Y) -> tuple[torch.Tensor, torch.Tensor, Callable]:
    """Checks X and Y as given, then squeezes trailing singleton dimensions as pytorch-msssim does; errors name
    the user's shapes. Returns the squeezed tensors and the per-call squeeze."""
    check_image_pair(X, Y, ("X", "Y"), ndims=range(2, 7))
    Xs = _squeeze_like_pytorch_msssim(X)
    if Xs.dim() not in (4, 5):
        raise ValueError(f"X must be (N, C, H, W) or (N, C, D, H, W) (trailing singleton dimensions are dropped, as "
                         f"pytorch-msssim does); got shape {tuple(X.shape)}")
    squeeze = _squeeze_like_pytorch_msssim if Xs.dim() != X.dim() else _identity
    return Xs, squeeze(Y), squeeze


def _pytorch_msssim_arguments(X, Y, win, data_range, size_average, win_size, win_sigma, K, reduction):
    """Checks shared by ``ssim`` and ``ms_ssim``: the squeezed inputs and their squeeze, the window size, C1, C2
    and the resolved reduction."""
    Xs, Ys, squeeze = _pytorch_msssim_inputs(X, Y)
    win_size = check_window_size(win.shape[-1] if isinstance(win, torch.Tensor) else win_size,
                                 "win size" if win is not None else "win_size")
    if win is None:
        check_positive(win_sigma, "win_sigma")
    c1, c2 = check_constants(data_range, K)
    return Xs, Ys, squeeze, win_size, c1, c2, _resolve_reduction(reduction, size_average)


def _identity(x: torch.Tensor) -> torch.Tensor:
    return x


def _check_size(x: torch.Tensor, user_shape: tuple, min_side: int, name: str, why: str) -> None:
    if min(x.shape[2:]) < min_side:
        raise ValueError(f"{name}: every spatial side must be at least {min_side} ({why}); got {name} of shape "
                         f"{tuple(user_shape)}")


# ------------------------------------------------------------------------------------------------ public API
def fused_ssim(img1: torch.Tensor, img2: torch.Tensor, padding: str = "same", train: bool = True,
               window_size: int = WINDOW_SIZE, *, window_sigma: float = WINDOW_SIGMA, reduction: str = "mean",
               check_finite: bool = False) -> torch.Tensor:
    """SSIM with fused-ssim / fussim semantics: data range 1 (C1 = 0.01², C2 = 0.03²), Gaussian window.

    img1, img2: (N, C, H, W) or (N, C, D, H, W). ``padding='same'`` zero-pads (no renormalisation) and averages
    every pixel; ``'valid'`` averages only the pixels whose window lies inside the image. ``train=False`` records
    no autograd graph. ``reduction``: ``mean`` (scalar), ``image`` (N,), ``channel`` (N, C) or ``none`` (the map).
    Unlike fussim, every odd ``window_size`` from 3 to 31 uses an exact normalised Gaussian of ``window_sigma``.
    NaN/Inf inputs give a NaN result; ``check_finite=True`` raises naming the input instead (one host sync).
    """
    if torch.compiler.is_compiling():
        call = _build_fused_ssim(img1, img2, padding, window_size, window_sigma, reduction, traced=True)
    else:
        build = lambda: _build_fused_ssim(img1, img2, padding, window_size, window_sigma, reduction)  # noqa: E731
        if window_size is WINDOW_SIZE and window_sigma is WINDOW_SIGMA:  # defaults: the strings need no types
            call = CALLS.for_pair_pinned(("fused_ssim", padding, reduction), img1, img2, build)
        else:
            call = CALLS.for_pair(("fused_ssim", padding, window_size, window_sigma, reduction), img1, img2, build)
    if train or not torch.is_grad_enabled():
        out = call(img1, img2)
    else:
        with torch.no_grad():
            out = call(img1, img2)
    if check_finite:
        raise_if_not_finite(out if reduction != "none" else out.sum(), {"img1": img1, "img2": img2})
    return out


def _build_fused_ssim(img1, img2, padding, window_size, window_sigma, reduction, traced: bool = False) -> Callable:
    check_image_pair(img1, img2, ("img1", "img2"))
    check_choice(padding, "padding", ("same", "valid"))
    check_window_size(window_size, "window_size")
    sigma = check_positive(window_sigma, "window_sigma")
    check_choice(reduction, "reduction", REDUCTIONS)
    check_min_size(img1, window_size, "img1", f"window_size is {window_size}")
    win, sym = window_table(None, window_size, sigma, img1)
    args = (win, FUSED_C1, FUSED_C2, padding == "valid", sym, reduction)
    if traced:
        return lambda x, y: traced_reduce(x, y, *args)
    return reduce_call(img1, img2, *args)


def ssim(X: torch.Tensor, Y: torch.Tensor, data_range: float = 255, size_average: bool = True,
         win_size: int = WINDOW_SIZE,
         win_sigma: float = WINDOW_SIGMA, win: torch.Tensor | None = None, K: Sequence[float] = K_DEFAULT,
         nonnegative_ssim: bool = False, *, reduction: str | None = None, check_finite: bool = False) -> torch.Tensor:
    """SSIM with pytorch-msssim 1.0.0 semantics (valid filtering, per-channel means).

    X, Y: (N, C, H, W) or (N, C, D, H, W) (trailing singleton dimensions are squeezed, as pytorch-msssim does).
    Returns the mean over everything (``size_average=True``) or per image (N,). ``reduction`` overrides that:
    ``mean``, ``image``, ``channel`` (N, C) or ``none`` (the SSIM map, shape (N, C, H-K+1, W-K+1)).
    ``nonnegative_ssim`` applies relu to the per-channel values (not to the map). ``data_range`` may be a Python
    number, a numpy scalar or a 0-d tensor. NaN/Inf inputs give NaN; ``check_finite=True`` raises instead.
    """
    options = (data_range, size_average, win_size, win_sigma, tuple(K) if isinstance(K, (list, tuple)) else K,
               nonnegative_ssim, reduction)
    if torch.compiler.is_compiling():
        call = _build_ssim(X, Y, win, *options, traced=True)
    else:
        build = lambda: _build_ssim(X, Y, win, *options)  # noqa: E731
        cacheable = win is None and type(data_range) in (int, float)
        if not cacheable:
            call = build()
        elif (size_average is True and win_size is WINDOW_SIZE and win_sigma is WINDOW_SIGMA and K is K_DEFAULT
              and nonnegative_ssim is False):  # defaults; data_range's type is int or float, both meaning its value
            call = CALLS.for_pair_pinned(("ssim", data_range, reduction), X, Y, build)
        else:
            key = ("ssim", *options[:4], *options[5:], *_trailing(options[4]))  # flat: typed_key's fast path
            call = CALLS.for_pair(key, X, Y, build)
    out = call(X, Y)
    if check_finite:
        raise_if_not_finite(out if reduction != "none" else out.sum(), {"X": X, "Y": Y})
    return out


def _build_ssim(X, Y, win, data_range, size_average, win_size, win_sigma, K, nonnegative_ssim, reduction,
                traced: bool = False) -> Callable:
    Xs, Ys, squeeze, win_size, c1, c2, reduction = _pytorch_msssim_arguments(X, Y, win, data_range, size_average,
                                                                            win_size, win_sigma, K, reduction)
    _check_size(Xs, X.shape, win_size, "X", f"the window is {win_size} wide")
    table, sym = window_table(win, win_size, win_sigma, Xs)
    kernel_reduction = "channel" if nonnegative_ssim and reduction != "none" else reduction
    args = (table, c1, c2, True, sym, kernel_reduction)
    inner = (lambda x, y: traced_reduce(x, y, *args)) if traced else reduce_call(Xs, Ys, *args)
    if kernel_reduction == reduction and squeeze is _identity:
        return inner

    def call(x, y):
        out = inner(squeeze(x), squeeze(y))
        if kernel_reduction != reduction:  # nonnegative_ssim: relu on the per-channel values, then reduce
            out = _reduce(torch.relu(out), reduction)
        return out

    return call


def _trailing(value: object) -> tuple:
    """A tuple option as the trailing items of a call-table key, anything else as one item."""
    return value if type(value) is tuple else (value,)


def _reduce(per_channel: torch.Tensor, reduction: str) -> torch.Tensor:
    if reduction == "mean":
        return per_channel.mean()
    if reduction == "image":
        return per_channel.mean(1)
    return per_channel


def _weight_list(weights: Sequence[float] | torch.Tensor) -> tuple[float, ...]:
    values = weights.detach().cpu().flatten().tolist() if isinstance(weights, torch.Tensor) else weights
    try:
        result = tuple(float(w) for w in values)
    except (TypeError, ValueError) as exc:
        raise ValueError("weights must be a non-empty 1-D sequence of finite numbers") from exc
    if not result or not all(abs(w) < float("inf") for w in result):
        raise ValueError("weights must be a non-empty 1-D sequence of finite numbers")
    return result


def ms_ssim(X: torch.Tensor, Y: torch.Tensor, data_range: float = 255, size_average: bool = True,
            win_size: int = WINDOW_SIZE, win_sigma: float = WINDOW_SIGMA, win: torch.Tensor | None = None,
            weights: Sequence[float] | torch.Tensor | None = None, K: Sequence[float] = K_DEFAULT, *,
            reduction: str | None = None, check_finite: bool = False) -> torch.Tensor:
    """MS-SSIM with pytorch-msssim 1.0.0 semantics: relu(cs) at each level but the last, relu(ssim) at the last,
    2x average pooling (zero padding of size % 2, counted) between levels, weighted geometric product.

    ``reduction``: ``mean``, ``image`` or ``channel`` (a map is not defined for MS-SSIM). Every spatial side must
    exceed (win_size - 1) * 2**(levels - 1) (160 for the defaults), which pytorch-msssim asserts. 2-D inputs on
    the GPU run the whole pyramid as one autograd node (pooling fused, one backward launch per level).
    """
    options = (data_range, size_average, win_size, win_sigma, tuple(K) if isinstance(K, (list, tuple)) else K,
               reduction)
    if torch.compiler.is_compiling():
        call = _build_ms_ssim(X, Y, win, weights, *options, traced=True)
    else:
        build = lambda: _build_ms_ssim(X, Y, win, weights, *options)  # noqa: E731
        cacheable = (win is None and type(data_range) in (int, float)
                     and (weights is None or isinstance(weights, (list, tuple))))
        if not cacheable:
            call = build()
        elif (weights is None and size_average is True and win_size is WINDOW_SIZE and win_sigma is WINDOW_SIGMA
              and K is K_DEFAULT):  # defaults (see ssim)
            call = CALLS.for_pair_pinned(("ms_ssim", data_range, reduction), X, Y, build)
        else:
            wkey = tuple(weights) if isinstance(weights, (list, tuple)) else ()
            # flat (typed_key's fast path): the fixed options, K's length and items, then the weights'
            k_items = _trailing(options[4])
            key = ("ms_ssim", *options[:4], options[5], len(k_items), *k_items, *wkey)
            call = CALLS.for_pair(key, X, Y, build)
    out = call(X, Y)
    if check_finite:
        raise_if_not_finite(out, {"X": X, "Y": Y})
    return out


def _build_ms_ssim(X, Y, win, weights, data_range, size_average, win_size, win_sigma, K, reduction,
                   traced: bool = False) -> Callable:
    Xs, Ys, squeeze, win_size, c1, c2, reduction = _pytorch_msssim_arguments(X, Y, win, data_range, size_average,
                                                                            win_size, win_sigma, K, reduction)
    if reduction == "none":
        raise ValueError("reduction='none' (a map) is not defined for MS-SSIM; use 'mean', 'image' or 'channel'")
    weight_list = _weight_list(MS_SSIM_WEIGHTS if weights is None else weights)
    levels = len(weight_list)
    _check_size(Xs, X.shape, ms_ssim_min_size(win_size, levels), "X",
                f"{levels} MS-SSIM levels with a {win_size}-wide window")
    table, sym = window_table(win, win_size, win_sigma, Xs)
    weight_table = torch.tensor(weight_list, dtype=compute_dtype(Xs.dtype)).to(Xs.device)
    code = _REDUCE[reduction]
    from fusedsim.families.ssim.ops import ms_ssim as ms_ssim_op

    if Xs.dim() == 4 and ms_ssim_op.backend_for(Xs) == "triton":  # the fused 2-D op
        if traced:
            inner = lambda x, y: ms_ssim_op(x, y, table, weight_table, c1, c2, sym, code)
        else:
            inner = ms_ssim_op.bind((Xs, Ys), (table, weight_table), (c1, c2, sym, code))
        return inner if squeeze is _identity else (lambda x, y: inner(squeeze(x), squeeze(y)))
    per_level = []  # 3-D, or the twin: per-level statistics with PyTorch pooling, the twin's combination
    x, y = Xs, Ys
    for _ in range(levels):
        per_level.append((lambda x, y, a=(table, c1, c2, True, sym, "stats"): traced_reduce(x, y, *a)) if traced
                         else reduce_call(x, y, table, c1, c2, True, sym, "stats"))
        x, y = avg_pool_half_ref(x), avg_pool_half_ref(y)

    def call(x, y):
        x, y = squeeze(x), squeeze(y)
        stats = []
        for level, level_call in enumerate(per_level):
            if level:
                x, y = avg_pool_half_ref(x), avg_pool_half_ref(y)
            stats.append(level_call(x, y))
        return ms_ssim_combine_ref(torch.stack(stats), weight_table, code)

    return call
