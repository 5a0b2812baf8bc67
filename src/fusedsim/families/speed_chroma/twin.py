"""libvmaf 3.2.0's SpEED chroma (feature ``speed_chroma``, ``speed.c``), bit for bit: the PyTorch twin and the
specification.

Per frame and chroma plane (Cb, then Cr) of the reference and of the distorted clip:

1. **To float**: ``s - 128`` for 8-bit samples, ``float(s) / 2**(bpc-8) - 128`` above (float32).
2. **Prescale** (``speed_prescale``, unless within 1e-3 of 1) to ``(int)(size * ps + 0.5)``: bilinear (libvmaf's
   float32 weights ``(1-dy)(1-dx)a + (1-dy)dx b + dy(1-dx)c + dy dx d`` from float positions ``(x + 0.5) r - 0.5``,
   mirrored) or nearest (``(int)(x * r)``).
3. **Anti-alias blur** (9 taps for ``speed_kernelscale`` 1, a float32 Gaussian of sigma 3.6 normalised by its float
   sum), separable, vertical then horizontal, each output a float32 sum over the taps in order, reflect-101
   borders; only the samples kept by step 4 are computed (the others are never read).
4. **Decimate by 16**: ``d[i][j] = blurred[16i][16j]``, ``(H >> 4, W >> 4)``.
5. **Local mean removal**: ``r = d - g(d)``, ``g`` the 3-tap Gaussian (sigma 0.6) applied the same way.
6. **GSM parameters and score** of the residuals (:mod:`.gsm`: 5x5 blocks, float32 eigen/QR arithmetic in
   libvmaf's order).

A plane gives a score only when ref and dist are both regular or both singular (else 0); ``uv`` is the mean of the
u and v scores, or the other plane's score when exactly one plane had a singular matrix. Each output is
``min(score, speed_max_val)`` in double. Inputs too small for one 5x5 block after decimation are refused (libvmaf
3.2.0 logs an error and then crashes).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import torch

from fusedsim.families.speed_chroma.gsm import BLOCK, covariance, est_params, speed_score

__all__ = ["FEATURES", "KERNELSCALES", "METHOD_CODES", "PRESCALE_METHODS", "SUPPORTED_BIT_DEPTHS", "SpeedOptions",
           "antialias_taps", "check_plane_size", "chroma_crop", "column_names", "filter_taps", "local_mean_residual",
           "local_mean_taps", "min_plane_size", "operating_size", "residual_ref", "residual_shape", "sample_tables",
           "speed_chroma_ref", "speed_residual_ref", "speed_scores_from_residuals"]

#: Bit depths libvmaf's float conversion reads (``picture_copy``: 8 bit as is, 10/12/16 divided by 4/16/256).
SUPPORTED_BIT_DEPTHS = (8, 10, 12, 16)
#: libvmaf's printed names (without the option suffix), in its output order.
FEATURES = ("speed_chroma_u", "speed_chroma_v", "speed_chroma_uv")
#: libvmaf's ``valid_kernelscales`` (vif_tools.h), as float32.
KERNELSCALES = tuple(float(np.float32(k)) for k in (
    1.0, 1.0 / 2.0, 3.0 / 2.0, 2.0, 2.0 / 3.0, 24.0 / 10.0, 360.0 / 97.0, 4.0 / 3.0, 3.5 / 3.0, 3.75 / 3.0,
    4.25 / 3.0, 5.0 / 3.0, 3.0, 1.0 / 2.25, 1.4746, 1.54, 1.6, 1.06667, 0.711111, 0.740740, 1.111111))
#: Prescale methods computed here (libvmaf also has ``bicubic`` and ``lanczos4``: refused).
PRESCALE_METHODS = ("nearest", "bilinear")
_NUM_SCALES = 4  # decimation by 2**4
_SCALERS = {8: 1.0, 10: 4.0, 12: 16.0, 16: 256.0}


# ----------------------------------------------------------------------------------------------------- options
@dataclass(frozen=True)
class SpeedOptions:
    """The options of libvmaf's ``speed_chroma`` extractor; the defaults are libvmaf's. The ``vmaf_v1.0.16_*``
    models use ``sigma_nn=0.19, nn_floor=0.1, weight_var_mode=5, max_val=45`` (and ``prescale`` 0.6 or 0.5,
    bilinear, for ``_5d0h`` and ``_3d0h_2160``)."""

    kernelscale: float = 1.0
    prescale: float = 1.0
    prescale_method: str = "nearest"
    sigma_nn: float = 0.29
    nn_floor: float = 0.0
    max_val: float = 1000.0
    weight_var_mode: int = 0

    def __post_init__(self) -> None:
        for name, (libvmaf, _, low, high, kind) in LIBVMAF_OPTIONS.items():
            value = getattr(self, name)
            if kind is str:
                if value not in ("nearest", "bilinear", "bicubic", "lanczos4"):
                    raise ValueError(f"{name} (libvmaf's {libvmaf}) must be nearest, bilinear, bicubic or lanczos4; "
                                     f"got {value!r}")
                if value not in PRESCALE_METHODS:
                    raise ValueError(f"{name}={value!r} (libvmaf's {libvmaf}) is not supported; supported: "
                                     f"{', '.join(PRESCALE_METHODS)}")
                continue
            number = (int, np.integer) if kind is int else (int, float, np.integer, np.floating)
            if isinstance(value, bool) or not isinstance(value, number) or not low <= value <= high:
                raise ValueError(f"{name} (libvmaf's {libvmaf}) must be {'an integer' if kind is int else 'a number'}"
                                 f" in [{low:g}, {high:g}]; got {value!r}")
            object.__setattr__(self, name, kind(value))
        if not any(abs(np.float32(self.kernelscale) - np.float32(k)) < 1e-3 for k in KERNELSCALES):
            raise ValueError(f"kernelscale (libvmaf's speed_kernelscale) must be one of libvmaf's valid kernel "
                             f"scales ({', '.join(f'{k:.6g}' for k in KERNELSCALES)}); got {self.kernelscale!r}")

    @classmethod
    def from_libvmaf(cls, options: Mapping[str, Any]) -> SpeedOptions:
        """From libvmaf's option names (``{"speed_sigma_nn": 0.19}``); unknown names are errors."""
        by_name = {libvmaf: field for field, (libvmaf, *_) in LIBVMAF_OPTIONS.items()}
        unknown = sorted(set(options) - set(by_name))
        if unknown:
            raise ValueError(f"speed_chroma has no option {', '.join(map(repr, unknown))} (its options: "
                             f"{', '.join(by_name)})")
        return cls(**{by_name[name]: value for name, value in options.items()})

    @property
    def rescales(self) -> bool:
        """Whether libvmaf prescales (``ALMOST_EQUAL(ps, 1.0)`` is false)."""
        return not abs(self.prescale - 1.0) < 1.0e-3


#: field -> (libvmaf option name, alias in feature names, low, high, type); names sort by the option name.
LIBVMAF_OPTIONS = {
    "kernelscale": ("speed_kernelscale", "ks", 0.1, 4.0, float),
    "prescale": ("speed_prescale", "ps", 0.1, 4.0, float),
    "prescale_method": ("speed_prescale_method", "psm", None, None, str),
    "sigma_nn": ("speed_sigma_nn", "snn", 0.1, 2.0, float),
    "nn_floor": ("speed_nn_floor", "nnf", 0.0, 1.0, float),
    "max_val": ("speed_max_val", "mxv", 0.0, 1000.0, float),
    "weight_var_mode": ("speed_weight_var_mode", "wvm", 0, 6, int),
}


def column_names(options: SpeedOptions = SpeedOptions()) -> tuple[str, ...]:
    """libvmaf's printed names for ``options`` (``speed_chroma_uv_mxv_45_nnf_0.1_snn_0.19_wvm_5`` ...)."""
    default = SpeedOptions()
    parts = []
    for f in sorted(fields(SpeedOptions), key=lambda f: LIBVMAF_OPTIONS[f.name][0]):
        value = getattr(options, f.name)
        if value != getattr(default, f.name):
            alias = LIBVMAF_OPTIONS[f.name][1]
            parts.append(f"_{alias}_{value}" if isinstance(value, (int, str)) else f"_{alias}_{'%g' % value}")
    return tuple(name + "".join(parts) for name in FEATURES)


# ------------------------------------------------------------------------------------------------------- sizes
def chroma_crop(luma_height: int, luma_width: int, chroma_height: int, chroma_width: int) -> tuple[int, int]:
    """The chroma plane size libvmaf reads: ``w/2 x h/2`` (4:2:0), ``w/2 x h`` (4:2:2) or ``w x h`` (4:4:4), with
    integer division (files of odd sizes store one more chroma row/column, which libvmaf does not read)."""
    if chroma_width == luma_width and chroma_height == luma_height:
        return luma_height, luma_width
    if chroma_width == (luma_width + 1) // 2 and chroma_height == luma_height:
        return luma_height, luma_width // 2
    if chroma_width == (luma_width + 1) // 2 and chroma_height == (luma_height + 1) // 2:
        return luma_height // 2, luma_width // 2
    raise ValueError(f"chroma planes of {chroma_height}x{chroma_width} (HxW) do not belong to a 4:2:0, 4:2:2 or "
                     f"4:4:4 frame of {luma_height}x{luma_width}")


def scaled_size(height: int, width: int, options: SpeedOptions) -> tuple[int, int]:
    """The plane size after the prescale: ``(int)(n * ps + 0.5)`` each way (the size itself without one)."""
    return int(height * options.prescale + 0.5), int(width * options.prescale + 0.5)


def operating_size(height: int, width: int, options: SpeedOptions = SpeedOptions()) -> tuple[int, int]:
    """The residual's size ``(H', W')``: the prescaled plane decimated by 16."""
    sh, sw = scaled_size(height, width, options)
    return sh >> _NUM_SCALES, sw >> _NUM_SCALES


def min_plane_size(options: SpeedOptions = SpeedOptions()) -> int:
    """Smallest chroma height and width with one whole 5x5 block after the prescale and the decimation by 16."""
    n = 1
    while min(operating_size(n, n, options)) < BLOCK:
        n += 1
    return n


def check_plane_size(height: int, width: int, options: SpeedOptions = SpeedOptions()) -> None:
    """Raise ``ValueError`` naming the minimum when a chroma plane has no whole 5x5 block after decimation."""
    oh, ow = operating_size(height, width, options)
    if oh < BLOCK or ow < BLOCK:
        need = min_plane_size(options)
        raise ValueError(
            f"speed_chroma needs chroma planes of at least {need}x{need} (for 4:2:0, frames of at least "
            f"{2 * need}x{2 * need}) with speed_prescale={options.prescale:g}: it decimates each plane by 16 and "
            f"reads whole 5x5 blocks; got {height}x{width} (HxW) chroma planes (libvmaf 3.2.0 crashes on these)")


# ----------------------------------------------------------------------------------------------------- filters
def _gaussian(size: int, stdev: np.float32) -> tuple[float, ...]:
    """libvmaf's ``get_1d_gaussian_kernel``: float32 pdf values (double exp) normalised by their float32 sum."""
    k = (size - 1) // 2
    den = np.float32(1.0 / (float(stdev) * math.sqrt(2 * math.pi)))
    taps = []
    for i in range(size):
        x = float(np.float32(i - k))
        num = np.float32(math.exp(-0.5 * x / float(stdev) * x / float(stdev)))
        taps.append(num / den)
    total = np.float32(0)
    for t in taps:
        total = total + t
    return tuple(float(t / total) for t in taps)


def filter_size(scale: int, kernelscale: float) -> int:
    """libvmaf's ``vif_get_filter_size``: ``max(odd-ceil((2**(4-scale) + 1) * ks), 3)`` (the product in float)."""
    n = int(math.ceil(float(np.float32((1 << (4 - scale)) + 1) * np.float32(kernelscale))))
    return max(n + 1 if n % 2 == 0 else n, 3)


def antialias_taps(kernelscale: float = 1.0) -> tuple[float, ...]:
    """The anti-alias filter (``speed_get_antialias_filter``): size of scale 1, sigma ``2 * size / 5``."""
    size = filter_size(1, kernelscale)
    return _gaussian(size, np.float32(math.sqrt(_NUM_SCALES) * size / float(np.float32(5.0))))


def local_mean_taps(kernelscale: float = 1.0) -> tuple[float, ...]:
    """The local-mean filter (``vif_get_filter(.., 4, ks)``): size of scale 4, sigma ``size / 5``."""
    size = filter_size(_NUM_SCALES, kernelscale)
    return _gaussian(size, np.float32(size) / np.float32(5.0))


def filter_taps(kernelscale: float = 1.0) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Both filters: ``(antialias, local_mean)`` (float32 values as Python floats)."""
    return antialias_taps(kernelscale), local_mean_taps(kernelscale)


def _reflect(index: torch.Tensor, n: int) -> torch.Tensor:
    """libvmaf's filter border: ``-i`` below 0, ``2n - 2 - i`` from ``n`` (one reflection)."""
    index = torch.where(index < 0, -index, index)
    return torch.where(index >= n, 2 * n - 2 - index, index)


def _filter_at(x: torch.Tensor, taps: tuple[float, ...], rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    """The separable filter of float32 planes ``x`` (N, H, W) evaluated at ``rows`` x ``cols`` only: (N, R, C)."""
    h, w = x.shape[-2:]
    half = len(taps) // 2
    tap = torch.arange(len(taps), device=x.device)
    ri = _reflect(rows[:, None] - half + tap[None, :], h)  # (R, T)
    need = _reflect(cols[:, None] - half + tap[None, :], w)  # (C, T)
    # vertical pass at the kept rows, for the columns the horizontal pass reads
    used, inverse = torch.unique(need.reshape(-1), return_inverse=True)
    src = x[:, :, used]
    acc = torch.zeros(x.shape[0], rows.shape[0], used.shape[0], dtype=torch.float32, device=x.device)
    for k, f in enumerate(taps):
        acc = acc + np.float32(f) * src[:, ri[:, k], :]
    tmp = acc[:, :, inverse.reshape(need.shape)]  # (N, R, C, T)
    out = torch.zeros(x.shape[0], rows.shape[0], cols.shape[0], dtype=torch.float32, device=x.device)
    for k, f in enumerate(taps):
        out = out + np.float32(f) * tmp[..., k]
    return out


# ------------------------------------------------------------------------------------------------------ stages
def to_float(plane: torch.Tensor, bit_depth: int) -> torch.Tensor:
    """libvmaf's ``picture_copy`` with offset -128: float32 ``(N, H, W)``."""
    x = plane.to(torch.float32)
    if bit_depth != 8:
        x = x / torch.tensor(_SCALERS[bit_depth], dtype=torch.float32, device=x.device)
    return x + np.float32(-128.0)


def _bilinear_axis(src: int, dst: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per output index: the two source indices (mirrored) and the float32 fraction, as libvmaf computes them."""
    ratio = np.float32(np.float32(src) / np.float32(dst))
    pos = [np.float32((i + 0.5) * float(ratio) - 0.5) for i in range(dst)]

    def mirror(v: float) -> int:
        v, right = np.float32(v), np.float32(src - 1)
        return int(-v if v < 0 else (np.float32(2) * right - v if v > right else v))

    lo = [mirror(math.floor(p)) for p in pos]
    hi = [mirror(math.ceil(p)) for p in pos]
    frac = [np.float32(p - np.float32(i)) for p, i in zip(pos, lo)]
    return (torch.tensor(lo, device=device), torch.tensor(hi, device=device),
            torch.tensor(frac, dtype=torch.float32, device=device))


def prescale(x: torch.Tensor, options: SpeedOptions) -> torch.Tensor:
    """libvmaf's ``vif_scale_frame_s`` of float32 planes ``(N, H, W)`` (nothing when it does not rescale)."""
    h, w = x.shape[-2:]
    sh, sw = scaled_size(h, w, options)
    if not options.rescales or (sh, sw) == (h, w):
        return x
    if options.prescale_method == "nearest":
        ry, rx = np.float32(np.float32(h) / np.float32(sh)), np.float32(np.float32(w) / np.float32(sw))
        rows = torch.tensor([int(np.float32(i) * ry) for i in range(sh)], device=x.device)
        cols = torch.tensor([int(np.float32(j) * rx) for j in range(sw)], device=x.device)
        return x[:, rows][:, :, cols]
    y1, y2, dy = _bilinear_axis(h, sh, x.device)
    x1, x2, dx = _bilinear_axis(w, sw, x.device)
    dy, dx = dy[None, :, None], dx[None, None, :]
    one = np.float32(1.0)
    r1, r2 = x[:, y1], x[:, y2]
    a, b, c, d = r1[:, :, x1], r1[:, :, x2], r2[:, :, x1], r2[:, :, x2]
    return ((((one - dy) * (one - dx)) * a + ((one - dy) * dx) * b) + (dy * (one - dx)) * c) + (dy * dx) * d


def residual_ref(plane: torch.Tensor, bit_depth: int, options: SpeedOptions = SpeedOptions()) -> torch.Tensor:
    """Steps 1-5 for integer planes ``(N, H, W)``: the float32 residuals ``(N, H >> 4, W >> 4)`` (after the
    prescale). The plane must be large enough (:func:`check_plane_size`)."""
    x = prescale(to_float(plane, bit_depth), options)
    h, w = x.shape[-2:]
    antialias = antialias_taps(options.kernelscale)
    rows = torch.arange(h >> _NUM_SCALES, device=x.device) << _NUM_SCALES
    cols = torch.arange(w >> _NUM_SCALES, device=x.device) << _NUM_SCALES
    return local_mean_residual(_filter_at(x, antialias, rows, cols), options.kernelscale)


# ------------------------------------------------------------------------------------------------------ scores
def speed_scores_from_residuals(ref_u: torch.Tensor, ref_v: torch.Tensor, dis_u: torch.Tensor, dis_v: torch.Tensor,
                                options: SpeedOptions = SpeedOptions(), compiled: bool = False) -> torch.Tensor:
    """libvmaf's outputs ``(N, 3)`` float64 (u, v, uv, each clipped at ``max_val``) from the four residual stacks
    ``(N, H', W')``; the GSM estimation runs on the host: :mod:`.gsm` (the twin), or with ``compiled`` its numba
    build :mod:`.gsm_cpu` (the same bits)."""
    stacked = torch.stack([t.detach().to("cpu", torch.float32) for t in (ref_u, ref_v, dis_u, dis_v)], 1)
    if compiled:
        from fusedsim.families.speed_chroma.gsm_cpu import speed_scores_many

        out = speed_scores_many(stacked.numpy(), options.sigma_nn, options.nn_floor, options.weight_var_mode,
                                options.max_val)
        return torch.from_numpy(out).to(ref_u.device)
    n = stacked.shape[0]
    flat = stacked.reshape(n * 4, *stacked.shape[2:]).numpy()  # (frame, plane) in order ref_u, ref_v, dis_u, dis_v
    params = [est_params(r, options.sigma_nn) for r in flat]
    out = np.empty((n, 3), dtype=np.float64)
    for i in range(n):
        scores, errors = [], []
        for p_ref, p_dis in ((params[4 * i], params[4 * i + 2]), (params[4 * i + 1], params[4 * i + 3])):
            scores.append(speed_score(p_ref, p_dis, options.sigma_nn, options.nn_floor, options.weight_var_mode))
            errors.append(p_ref.singular or p_dis.singular)
        out[i] = combine(scores[0], scores[1], errors[0], errors[1], options.max_val)
    return torch.from_numpy(out).to(ref_u.device)


def combine(score_u: np.float32, score_v: np.float32, err_u: bool, err_v: bool, max_val: float
            ) -> tuple[float, float, float]:
    """libvmaf's ``u, v, uv`` from the plane scores: ``uv`` is the other plane's score when exactly one plane had
    a singular matrix, else the float32 mean; each is ``min(score, max_val)`` in double."""
    if err_u and not err_v:
        uv = score_v
    elif err_v and not err_u:
        uv = score_u
    else:
        uv = np.float32(float(score_u + score_v) / 2.0)
    return tuple(float(s) if float(s) < max_val else max_val for s in (score_u, score_v, uv))


def speed_chroma_ref(ref_u: torch.Tensor, ref_v: torch.Tensor, dis_u: torch.Tensor, dis_v: torch.Tensor,
                     bit_depth: int, options: SpeedOptions = SpeedOptions()) -> torch.Tensor:
    """libvmaf's ``speed_chroma`` of integer chroma planes (each ``(N, Hc, Wc)``, already at libvmaf's chroma
    size): ``(N, 3)`` float64 ``(u, v, uv)``."""
    check_plane_size(*ref_u.shape[-2:], options)
    res = [residual_ref(p, bit_depth, options) for p in (ref_u, ref_v, dis_u, dis_v)]
    return speed_scores_from_residuals(*res, options)


# ----------------------------------------------------------------------------------------------- the op's twin
#: ``speed_prescale_method`` as the op's integer argument.
METHOD_CODES = {"nearest": 0, "bilinear": 1}


def op_options(prescale: float, method: int, kernelscale: float) -> SpeedOptions:
    """The options of the op's scalars (the ones the residual stage reads)."""
    names = {code: name for name, code in METHOD_CODES.items()}
    if method not in names:
        raise ValueError(f"method must be one of {sorted(names)} ({', '.join(METHOD_CODES)}); got {method!r}")
    return SpeedOptions(kernelscale=kernelscale, prescale=prescale, prescale_method=names[method])


def speed_residual_ref(plane: torch.Tensor, bit_depth: int, prescale: float = 1.0, method: int = 0,
                       kernelscale: float = 1.0) -> torch.Tensor:
    """The op ``speed_residual``: :func:`residual_ref` of integer planes ``(N, H, W)`` with the prescale
    (``method`` from :data:`METHOD_CODES`) and kernel scale given as scalars: ``(N, H', W')`` float32."""
    return residual_ref(plane, bit_depth, op_options(prescale, method, kernelscale))


def check_residuals(residuals: object) -> None:
    """The op ``speed_covariance``'s input: float32 residuals ``(N, H', W')`` holding a whole 5x5 block."""
    if not isinstance(residuals, torch.Tensor) or residuals.dtype != torch.float32:
        kind = residuals.dtype if isinstance(residuals, torch.Tensor) else type(residuals).__name__
        raise TypeError(f"residuals must be a float32 tensor (N, H', W'); got {kind}")
    if residuals.dim() != 3 or min(residuals.shape[-2:]) < BLOCK:
        raise ValueError(f"residuals must be (N, H', W') with H' and W' at least {BLOCK}; got shape "
                         f"{tuple(residuals.shape)}")


def speed_covariance_ref(residuals: torch.Tensor) -> torch.Tensor:
    """The op ``speed_covariance``: libvmaf's 25x25 float32 covariance of each residual ``(N, H', W')`` float32 (the
    first step of the GSM estimation, :func:`.gsm.covariance`): ``(N, 25, 25)`` float32 on the residuals' device."""
    check_residuals(residuals)
    planes = residuals.detach().to("cpu", torch.float32).numpy()
    out = np.stack([covariance(p) for p in planes]) if len(planes) else np.zeros((0, 25, 25), np.float32)
    return torch.from_numpy(out).to(residuals.device)


def residual_shape(height: int, width: int, prescale: float, method: int, kernelscale: float) -> tuple[int, int]:
    """``(H', W')`` of the op's output for ``height x width`` planes."""
    return operating_size(height, width, op_options(prescale, method, kernelscale))


def sample_tables(height: int, width: int, options: SpeedOptions, device: torch.device
                  ) -> tuple[torch.Tensor, ...] | None:
    """Where each prescaled sample comes from, for kernels: ``(y1, y2, dy, x1, x2, dx)`` (nearest: ``y2 = y1``,
    ``dy = 0``, which gives the source sample itself), or None without a prescale."""
    sh, sw = scaled_size(height, width, options)
    if not options.rescales or (sh, sw) == (height, width):
        return None
    if options.prescale_method == "bilinear":
        return (*_bilinear_axis(height, sh, device), *_bilinear_axis(width, sw, device))
    ry, rx = np.float32(np.float32(height) / np.float32(sh)), np.float32(np.float32(width) / np.float32(sw))
    rows = torch.tensor([int(np.float32(i) * ry) for i in range(sh)], device=device)
    cols = torch.tensor([int(np.float32(j) * rx) for j in range(sw)], device=device)
    zero_y = torch.zeros(sh, dtype=torch.float32, device=device)
    zero_x = torch.zeros(sw, dtype=torch.float32, device=device)
    return rows, rows, zero_y, cols, cols, zero_x


def local_mean_residual(d: torch.Tensor, kernelscale: float = 1.0) -> torch.Tensor:
    """Step 5 on decimated planes ``(N, H', W')`` float32 (any device): ``d`` minus its local mean."""
    taps = local_mean_taps(kernelscale)
    rows = torch.arange(d.shape[-2], device=d.device)
    cols = torch.arange(d.shape[-1], device=d.device)
    return d - _filter_at(d, taps, rows, cols)
