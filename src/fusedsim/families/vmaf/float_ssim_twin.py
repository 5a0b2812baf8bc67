"""libvmaf's ``float_ssim`` and ``float_ms_ssim`` (IQA-derived), reproduced in their float32 pipeline.

Every step follows the reference's arithmetic types, so results are bit-identical to libvmaf's (the per-frame
scores are float32 values for ``float_ssim*`` and a double for ``float_ms_ssim``):

* **Samples to float** (``picture_copy``): 8-bit as is, 10-bit ``/ 4.0f``, 12-bit ``/ 16.0f``, 16-bit
  ``/ 256.0f``; the dynamic range is then always ``L = 255``.
* **Filters** (``_iqa_convolve`` / ``_iqa_filter_pixel``): each tap product is a float32 product, accumulated
  in a double in tap order, and the result is stored as float32.
* **Auto-downscale** (``float_ssim`` only): ``scale = max(1, round_half_away(min(w, h) / 256))``; if > 1 a
  ``scale x scale`` box (entries ``1.0f / scale^2``) sampled at ``(x*scale, y*scale)`` with mirrored borders
  (``-1-x`` / ``2w-1-x``); output ``w/scale + (w & 1)`` by ``h/scale + (h & 1)``.
* **SSIM** (``_iqa_ssim``): separable 11-tap Gaussian (sigma 1.5, float taps), valid region only
  (``(w-10) x (h-10)``); float32 statistics with the variances clamped at 0; ``l`` and ``c`` in double over
  float32 denominators, ``s`` in float32, ``sigma_x sigma_y = float(sqrt(double(float(var_x var_y))))``; the
  sums of ``l*c*s``, ``l``, ``c``, ``s`` run left to right in double and each mean is cast to float32.
* **MS-SSIM**: 5 scales, each a ``_iqa_ssim`` as above; between scales a 9x9 2-D 9/7 biorthogonal low-pass
  (float table), mirrored borders, sampled at even positions (``w/2 + (w & 1)``); the score is the double
  product ``prod(pow(l_i, a_i) * pow(c_i, b_i) * pow(s_i, g_i))`` with the float exponents widened to double.
  libvmaf refuses frames whose side, halved (floor) four times, drops under 11 px: the minimum is 176 px.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

from fusedsim.families.vmaf.sequential_sum_twin import sequential_sum_ref

# Left-to-right double sum of each row, (N, L) -> (N,): the twin by default; the public functions pass the
# registered op, which runs the exact Triton scan on GPU tensors.
RowSum = Callable[[torch.Tensor], torch.Tensor]
# The two image steps, injectable the same way (the public functions pass the registered ops ``iqa_decimate`` and
# ``iqa_ssim_maps``, Triton kernels on GPU tensors): (N, H, W) float32, kernel (k, k), factor -> decimated frames;
# (ref, cmp) -> (N, 4, H-10, W-10) float64 maps.
Decimate = Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor]
SSIMMaps = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

__all__ = [
    "FLOAT_SSIM_BIT_DEPTHS",
    "GAUSS_WINDOW",
    "MS_SSIM_LOWPASS",
    "SSIM_C1",
    "SSIM_C2",
    "SSIM_C3",
    "MS_SSIM_MIN_SIDE",
    "float_ms_ssim_ref",
    "float_ssim_ref",
    "float_ssim_scale",
    "iqa_decimate_ref",
    "iqa_ssim_maps_ref",
    "to_vmaf_float",
]

FLOAT_SSIM_BIT_DEPTHS = (8, 10, 12, 16)
_SCALER = {8: 1.0, 10: 4.0, 12: 16.0, 16: 256.0}
GAUSS_LEN = 11
_GAUSS_WINDOW = np.array(
    [0.001028, 0.007599, 0.036001, 0.109361, 0.213006, 0.266012, 0.213006, 0.109361, 0.036001, 0.007599, 0.001028],
    dtype=np.float32,
)
_LPF = np.array(
    [
        [0.000714, -0.000450, -0.002090, 0.007132, 0.016114, 0.007132, -0.002090, -0.000450, 0.000714],
        [-0.000450, 0.000283, 0.001316, -0.004490, -0.010146, -0.004490, 0.001316, 0.000283, -0.000450],
        [-0.002090, 0.001316, 0.006115, -0.020867, -0.047149, -0.020867, 0.006115, 0.001316, -0.002090],
        [0.007132, -0.004490, -0.020867, 0.071207, 0.160885, 0.071207, -0.020867, -0.004490, 0.007132],
        [0.016114, -0.010146, -0.047149, 0.160885, 0.363505, 0.160885, -0.047149, -0.010146, 0.016114],
        [0.007132, -0.004490, -0.020867, 0.071207, 0.160885, 0.071207, -0.020867, -0.004490, 0.007132],
        [-0.002090, 0.001316, 0.006115, -0.020867, -0.047149, -0.020867, 0.006115, 0.001316, -0.002090],
        [-0.000450, 0.000283, 0.001316, -0.004490, -0.010146, -0.004490, 0.001316, 0.000283, -0.000450],
        [0.000714, -0.000450, -0.002090, 0.007132, 0.016114, 0.007132, -0.002090, -0.000450, 0.000714],
    ],
    dtype=np.float32,
)
#: Public names of the constants the Triton kernels share with the twin.
GAUSS_WINDOW = _GAUSS_WINDOW
MS_SSIM_LOWPASS = _LPF

#: MS-SSIM exponents per scale (float32 constants, widened to double where used).
MS_SSIM_ALPHAS = np.array([0.0, 0.0, 0.0, 0.0, 0.1333], dtype=np.float32)
MS_SSIM_BETAS = np.array([0.0448, 0.2856, 0.3001, 0.2363, 0.1333], dtype=np.float32)
MS_SSIM_GAMMAS = MS_SSIM_BETAS
MS_SSIM_SCALES = 5
MS_SSIM_MIN_SIDE = GAUSS_LEN << (MS_SSIM_SCALES - 1)  # 176

_K1 = np.float32(0.01)
_K2 = np.float32(0.03)
_L = np.float32(255)
_C1 = np.float32((_K1 * _L) * (_K1 * _L))
_C2 = np.float32((_K2 * _L) * (_K2 * _L))
_C3 = np.float32(_C2 / np.float32(2.0))
SSIM_C1, SSIM_C2, SSIM_C3 = _C1, _C2, _C3


def to_vmaf_float(x: torch.Tensor, bit_depth: int) -> torch.Tensor:
    """Integer samples to libvmaf's float luma: ``float(v) / scaler`` (scaler 1, 4, 16, 256 for 8/10/12/16 bit)."""
    f = x.to(torch.float32)
    scaler = _SCALER[bit_depth]
    return f / scaler if scaler != 1.0 else f


def float_ssim_scale(width: int, height: int) -> int:
    """libvmaf's automatic downscale factor: ``max(1, _round((float)min(w, h) / 256.0f))`` (round half away)."""
    a = float(np.float32(min(width, height)) / np.float32(256.0))
    whole = int(a)
    return max(1, whole + 1 if a - whole >= 0.5 else whole)


def _mirror(idx: torch.Tensor, n: int) -> torch.Tensor:
    """``KBND_SYMMETRIC`` index: ``-1-i`` below 0, ``2n-1-i`` at or past ``n`` (one reflection)."""
    idx = torch.where(idx < 0, -1 - idx, idx)
    return torch.where(idx >= n, 2 * n - 1 - idx, idx)


def iqa_decimate_ref(img: torch.Tensor, kernel: torch.Tensor, factor: int) -> torch.Tensor:
    """``_iqa_decimate``: 2-D ``kernel`` (k x k float32) centred on ``(x*factor, y*factor)``, mirrored borders.

    Taps run over ``v`` (rows) then ``u`` (columns) from ``-k//2`` to ``k//2 - (k even)``; each product is float32
    and the sum is double, cast to float32 at the end. ``img`` is ``(N, H, W)`` float32; the result is
    ``(N, H//factor + (H&1), W//factor + (W&1))`` float32.
    """
    h, w = img.shape[-2:]
    k = kernel.shape[0]
    half = k // 2
    sh = h // factor + (h & 1)
    sw = w // factor + (w & 1)
    dev = img.device
    ys = torch.arange(sh, device=dev) * factor
    xs = torch.arange(sw, device=dev) * factor
    taps = kernel.to(device=dev, dtype=torch.float32)
    acc = torch.zeros(img.shape[:-2] + (sh, sw), dtype=torch.float64, device=dev)
    for v in range(k):
        rows = img.index_select(-2, _mirror(ys + v - half, h))
        for u in range(k):
            acc += (rows.index_select(-1, _mirror(xs + u - half, w)) * taps[v, u]).to(torch.float64)
    return acc.to(torch.float32)


def _decimate(img: torch.Tensor, factor: int, kernel: np.ndarray, decimate: Decimate) -> torch.Tensor:
    return decimate(img, torch.from_numpy(kernel).to(img.device), factor)


def _conv_valid(img: torch.Tensor) -> torch.Tensor:
    """``_iqa_convolve`` with the separable 11-tap Gaussian over the valid region: ``(h-10) x (w-10)``."""
    h, w = img.shape[-2:]
    dw, dh = w - GAUSS_LEN + 1, h - GAUSS_LEN + 1
    dev = img.device
    taps = [torch.tensor(g, dtype=torch.float32, device=dev) for g in _GAUSS_WINDOW]
    acc = torch.zeros(img.shape[:-1] + (dw,), dtype=torch.float64, device=dev)
    for k, g in enumerate(taps):
        acc += (img[..., k : k + dw] * g).to(torch.float64)
    cache = acc.to(torch.float32)
    acc = torch.zeros(img.shape[:-2] + (dh, dw), dtype=torch.float64, device=dev)
    for k, g in enumerate(taps):
        acc += (cache[..., k : k + dh, :] * g).to(torch.float64)
    return acc.to(torch.float32)


def iqa_ssim_maps_ref(ref: torch.Tensor, cmp: torch.Tensor) -> torch.Tensor:
    """``_iqa_ssim``'s per-pixel terms on float32 frames ``(N, H, W)``: ``(N, 4, H-10, W-10)`` float64 maps of
    ``l*c*s``, ``l``, ``c``, ``s`` over the valid region (the sums of these rows are the scores)."""
    mu_r = _conv_valid(ref)
    mu_c = _conv_valid(cmp)
    var_r = _conv_valid(ref * ref)
    var_c = _conv_valid(cmp * cmp)
    cov = _conv_valid(ref * cmp)
    var_r = var_r - mu_r * mu_r
    var_c = var_c - mu_c * mu_c
    zero = torch.zeros((), dtype=torch.float32, device=ref.device)
    var_r = torch.where(var_r < 0, zero, var_r)  # MAX(0.0, v): NaN stays NaN
    var_c = torch.where(var_c < 0, zero, var_c)
    cov = cov - mu_r * mu_c

    c1 = torch.tensor(_C1, device=ref.device)
    c2 = torch.tensor(_C2, device=ref.device)
    c3 = torch.tensor(_C3, device=ref.device)
    sigma_rc = torch.sqrt((var_r * var_c).to(torch.float64)).to(torch.float32)
    mu_r64 = mu_r.to(torch.float64)
    l_num = 2.0 * mu_r64 * mu_c.to(torch.float64) + float(_C1)
    l_den = (mu_r * mu_r + mu_c * mu_c + c1).to(torch.float64)
    lum = l_num / l_den
    c_num = 2.0 * sigma_rc.to(torch.float64) + float(_C2)
    c_den = (var_r + var_c + c2).to(torch.float64)
    con = c_num / c_den
    cov = torch.where((cov < 0) & (sigma_rc <= 0), zero, cov)
    struct = ((cov + c3) / (sigma_rc + c3)).to(torch.float64)
    prod = lum * con * struct
    return torch.stack([prod, lum, con, struct], dim=1)


def _iqa_ssim(ref: torch.Tensor, cmp: torch.Tensor, row_sum: RowSum = sequential_sum_ref,
              ssim_maps: SSIMMaps = iqa_ssim_maps_ref) -> dict[str, torch.Tensor]:
    """``_iqa_ssim`` default path on float32 frames ``(N, H, W)``: float32 means of ``l*c*s``, ``l``, ``c``, ``s``."""
    maps = ssim_maps(ref, cmp)
    n = ref.shape[0]
    count = float(maps.shape[-1] * maps.shape[-2])
    sums = row_sum(maps.reshape(n * 4, -1)).reshape(n, 4).cpu().numpy()
    # (float)(sum / (double)(w*h)): a true double division (numpy; PyTorch on CUDA would use the reciprocal)
    means = torch.from_numpy((sums / count).astype(np.float32).astype(np.float64))
    return {"ssim": means[:, 0], "l": means[:, 1], "c": means[:, 2], "s": means[:, 3]}


def float_ssim_ref(ref: torch.Tensor, dist: torch.Tensor, bit_depth: int, scale: int = 0,
                   row_sum: RowSum = sequential_sum_ref, decimate: Decimate = iqa_decimate_ref,
                   ssim_maps: SSIMMaps = iqa_ssim_maps_ref) -> dict[str, torch.Tensor]:
    """libvmaf ``float_ssim`` (+ ``_l``, ``_c``, ``_s``) per frame of integer luma ``(N, H, W)``.

    ``scale=0`` picks libvmaf's automatic downscale; ``1..10`` forces one. Returns float64 tensors on the CPU
    keyed ``float_ssim``, ``float_ssim_l``, ``float_ssim_c``, ``float_ssim_s`` (each value a float32 number).
    Inputs are assumed checked, and the (downscaled) frame at least 11 x 11.
    """
    h, w = ref.shape[-2:]
    s = scale if scale > 0 else float_ssim_scale(w, h)
    r = to_vmaf_float(ref, bit_depth)
    d = to_vmaf_float(dist, bit_depth)
    if s > 1:
        box = np.full((s, s), np.float32(1.0) / np.float32(s * s), dtype=np.float32)
        r = _decimate(r, s, box, decimate)
        d = _decimate(d, s, box, decimate)
    out = _iqa_ssim(r, d, row_sum, ssim_maps)
    return {
        "float_ssim": out["ssim"].cpu(),
        "float_ssim_l": out["l"].cpu(),
        "float_ssim_c": out["c"].cpu(),
        "float_ssim_s": out["s"].cpu(),
    }


def _c_pow(x: float, y: float) -> float:
    """C's ``pow`` for doubles: NaN (not an exception) for a negative base with a non-integer exponent."""
    try:
        return math.pow(x, y)
    except ValueError:
        return math.nan
    except OverflowError:
        return math.inf


def ms_ssim_min_side_ok(width: int, height: int) -> bool:
    """libvmaf's check: each side halved (floor) 4 times stays at least 11 px at every scale."""
    cw, ch = width, height
    for _ in range(MS_SSIM_SCALES):
        if cw < GAUSS_LEN or ch < GAUSS_LEN:
            return False
        cw //= 2
        ch //= 2
    return True


def float_ms_ssim_ref(ref: torch.Tensor, dist: torch.Tensor, bit_depth: int,
                      row_sum: RowSum = sequential_sum_ref, decimate: Decimate = iqa_decimate_ref,
                      ssim_maps: SSIMMaps = iqa_ssim_maps_ref) -> dict[str, torch.Tensor]:
    """libvmaf ``float_ms_ssim`` per frame of integer luma ``(N, H, W)``.

    Returns CPU float64 tensors: ``float_ms_ssim`` and the per-scale float32 means ``float_ms_ssim_{l,c,s}_scale{i}``
    (i = 0..4), the names libvmaf uses with ``enable_lcs``.
    """
    h, w = ref.shape[-2:]
    if not ms_ssim_min_side_ok(w, h):
        raise ValueError(f"float_ms_ssim needs frames of at least {MS_SSIM_MIN_SIDE}x{MS_SSIM_MIN_SIDE}; got {w}x{h}")
    r = to_vmaf_float(ref, bit_depth)
    d = to_vmaf_float(dist, bit_depth)
    per_scale = []
    for idx in range(MS_SSIM_SCALES):
        if idx > 0:
            r = _decimate(r, 2, _LPF, decimate)
            d = _decimate(d, 2, _LPF, decimate)
        per_scale.append(_iqa_ssim(r, d, row_sum, ssim_maps))
    n = ref.shape[0]
    scores = np.empty(n, dtype=np.float64)
    for i in range(n):
        ms = 1.0
        for idx, sc in enumerate(per_scale):
            factor = (
                _c_pow(float(sc["l"][i]), float(MS_SSIM_ALPHAS[idx]))
                * _c_pow(float(sc["c"][i]), float(MS_SSIM_BETAS[idx]))
                * _c_pow(float(sc["s"][i]), float(MS_SSIM_GAMMAS[idx]))
            )
            ms = ms * factor
        scores[i] = ms
    out = {"float_ms_ssim": torch.from_numpy(scores)}
    for idx, sc in enumerate(per_scale):
        for key in ("l", "c", "s"):
            out[f"float_ms_ssim_{key}_scale{idx}"] = sc[key].cpu()
    return out
