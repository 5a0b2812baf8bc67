"""PyTorch twin of zensim's feature extractor and linear profiles (imazen/zensim, MIT OR Apache-2.0).

Written from the upstream Rust sources (``zensim/src/{color,streaming,fused,blur,metric,profile}.rs``) at commit
65facf4 (crate 0.2.7; 0.3.0 was never tagged — see ``fusedsim/data/zensim/README.md``); no code is copied.

Pipeline, per image pair (all tensors ``(N, 3, H, W)``)::

    sRGB -> linear            C0-continuous sRGB EOTF (linear-srgb crate: threshold 0.0392933706768, a = 0.0550107)
    RGBA -> linear RGB        straight alpha over a deterministic noise background in [0.2, 0.8] (linear light)
    linear -> positive XYB    jpegli opsin matrix, m = max(0, M·rgb + b); c0,c1 = cbrt(m) - cbrt(b), c2 = cbrt(m2)
                              X' = 14·(c0 - c1)/2 + 0.42, Y' = (c0 + c1)/2 + 0.01, B' = c2 - Y + 0.55
    padding                   sides under 64 px mirror-padded to 64 (4-scale pyramid minimum); the width is then
                              mirror-padded to upstream's SIMD width (multiple of 16) — padded columns are scored
    per scale (4, 2x2 box downscale, floor):  box blur radius 5 (11x11 mean, mirror borders, O(1) running sums)
        mu1 = B(s), mu2 = B(d), ssq = B(s² + d²), s12 = B(s·d)
        ssim_err = max(0, 1 - (1 - (mu1-mu2)²)·(2(s12 - mu1·mu2) + C2) / (ssq - mu1² - mu2² + C2)),  C2 = 0.0009
        edge = (1 + |d - mu2|) / (1 + |s - mu1|) - 1;  art = max(0, edge), det = max(0, -edge)
        13 basic features per channel: ssim/art/det pooled by mean, L4, L2; mse; hf_energy_loss = max(0, 1 - E_d/E_s),
        hf_mag_loss = max(0, 1 - A_d/A_s), hf_energy_gain = max(0, E_d/E_s - 1) with E = Σ(x - mu)², A = Σ|x - mu|
        6 peak features per channel: max and L8 of ssim_err, art, det

Feature vector (228): basic block [scale][channel X,Y,B][13], then peak block [scale][channel][6].
Linear profiles: ``score = 100 - 18 · d^0.7``, ``d = Σ w·f / n_scales`` (100 when d <= 0). Upstream's plain
``compute`` skips a channel's feature group when all its weights are <= 0.001 in magnitude (those features read 0
in the score), reproduced by :func:`active_feature_mask_ref`.

Arithmetic: upstream runs float32 SIMD; this twin runs in the input's float dtype (float64 recommended: the
golden-score tests use it) with exact cube roots and exact window sums.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F

__all__ = [
    "BASIC_NAMES", "BLUR_RADIUS", "C2", "FEATURE_NAMES", "MIN_PYRAMID_DIM", "NUM_FEATURES", "NUM_SCALES",
    "PEAK_NAMES", "ZensimRefState", "active_feature_mask_ref", "alpha_background_ref", "composite_over_noise_ref",
    "linear_to_positive_xyb_ref", "pad_for_pyramid_ref", "pyramid_levels_ref", "score_from_distance_ref", "simd_padded_width",
    "srgb_to_linear_ref", "zensim_features_prepared_ref", "zensim_features_ref", "zensim_prepare_ref",
]

NUM_SCALES = 4
BLUR_RADIUS = 5
C2 = 0.0009
MIN_PYRAMID_DIM = 64  # 2**(NUM_SCALES - 1) * 8: the smallest side that keeps 4 scales of >= 8 px
BASIC_NAMES = ("ssim_mean", "ssim_4th", "ssim_2nd", "art_mean", "art_4th", "art_2nd", "det_mean", "det_4th",
               "det_2nd", "mse", "hf_energy_loss", "hf_mag_loss", "hf_energy_gain")
PEAK_NAMES = ("ssim_max", "art_max", "det_max", "ssim_l8", "art_l8", "det_l8")
_CHANNELS = ("X", "Y", "B")
FEATURE_NAMES = tuple(
    [f"s{s}_{c}_{n}" for s in range(NUM_SCALES) for c in _CHANNELS for n in BASIC_NAMES]
    + [f"s{s}_{c}_{n}" for s in range(NUM_SCALES) for c in _CHANNELS for n in PEAK_NAMES])
NUM_FEATURES = len(FEATURE_NAMES)  # 228

# sRGB EOTF with the linear-srgb crate's C0-continuous (moxcms) constants
_SRGB_A = 0.0550107189475866
_SRGB_THRESHOLD = 12.92 * 0.003041282560127521

# Opsin absorbance (jpegli / ssimulacra2), float32 constants as upstream declares them
_f32 = np.float32
_M00, _M02, _M10, _M12 = _f32(0.30), _f32(0.078), _f32(0.23), _f32(0.078)
_M20, _M21 = _f32(0.243_422_69), _f32(0.204_767_45)
OPSIN = (
    (float(_M00), float(_f32(1.0) - _M02 - _M00), float(_M02)),
    (float(_M10), float(_f32(1.0) - _M12 - _M10), float(_M12)),
    (float(_M20), float(_M21), float(_f32(1.0) - _M20 - _M21)),
)
OPSIN_BIAS = float(_f32(0.003_793_073_4))


def srgb_to_linear_ref(v: torch.Tensor) -> torch.Tensor:
    """sRGB-encoded [0, 1] -> linear light, any shape (C0-continuous piecewise curve; gamma 2.4)."""
    power = ((v.clamp_min(_SRGB_THRESHOLD) + _SRGB_A) / (1.0 + _SRGB_A)) ** 2.4
    return torch.where(v <= _SRGB_THRESHOLD, v / 12.92, power)


def _alpha_table() -> np.ndarray:
    # 4096 values in [0.2, 0.8] from an integer hash (uint32 wrapping arithmetic), as float32
    i = np.arange(4096, dtype=np.uint64)
    mask = np.uint64(0xFFFFFFFF)
    h = (i * np.uint64(2654435761)) & mask
    h ^= h >> np.uint64(16)
    h = (h * np.uint64(0x45D9F3B)) & mask
    h ^= h >> np.uint64(16)
    return (np.float32(0.2) + (h & np.uint64(0xFFFF)).astype(np.float32) * np.float32(0.6 / 65535.0)).astype(
        np.float32)


_ALPHA_TABLE = _alpha_table()


def alpha_background_ref(height: int, width: int) -> torch.Tensor:
    """Upstream's noise background (linear light) for an image of this size: (H, W) float32."""
    y = np.arange(height, dtype=np.uint64)[:, None]
    x = np.arange(width, dtype=np.uint64)[None, :]
    yh = (y * np.uint64(2654435761)) & np.uint64(0xFFFFFFFF)
    return torch.from_numpy(_ALPHA_TABLE[((x ^ yh) & np.uint64(0xFFF)).astype(np.int64)])


def composite_over_noise_ref(linear_rgb: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """Straight-alpha compositing in linear light over the noise background: (N, 3, H, W), alpha (N, 1, H, W)."""
    bg = alpha_background_ref(*linear_rgb.shape[-2:]).to(device=linear_rgb.device, dtype=linear_rgb.dtype)
    return linear_rgb * alpha + bg * (1.0 - alpha)


def linear_to_positive_xyb_ref(rgb: torch.Tensor) -> torch.Tensor:
    """Linear RGB (N, 3, H, W) -> zensim's positive XYB (N, 3, H, W)."""
    r, g, b = rgb.unbind(1)
    mixed = [(m0 * r + m1 * g + m2 * b + OPSIN_BIAS).clamp_min(0.0) for m0, m1, m2 in OPSIN]
    cbrt_bias = float(np.cbrt(np.float64(OPSIN_BIAS)))
    c0, c1, c2 = (m.pow(1.0 / 3.0) for m in mixed)
    c0, c1 = c0 - cbrt_bias, c1 - cbrt_bias
    x, y = 0.5 * (c0 - c1), 0.5 * (c0 + c1)
    return torch.stack((x * 14.0 + 0.42, y + 0.01, (c2 - y) + 0.55), dim=1)


def simd_padded_width(width: int) -> int:
    """Upstream's plane width: a multiple of 16, plus 16 more when >= 512 and an even multiple (cache aliasing)."""
    aligned = (width + 15) & ~15
    return aligned + 16 if aligned >= 512 and (aligned // 16) % 2 == 0 else aligned


def _mirror_index(n: int, total: int) -> torch.Tensor:
    """Indices 0..total-1 folded into 0..n-1 by mirror reflection without edge repeat (period 2(n-1))."""
    idx = torch.arange(total)
    if n == 1:
        return torch.zeros(total, dtype=torch.long)
    period = 2 * (n - 1)
    m = idx % period
    return torch.where(m < n, m, period - m)


def pad_for_pyramid_ref(planes: torch.Tensor) -> torch.Tensor:
    """(N, C, H, W) -> mirror-padded on the bottom/right: H to >= 64, W to simd_padded_width(max(W, 64))."""
    height, width = planes.shape[-2:]
    new_h = max(height, MIN_PYRAMID_DIM)
    new_w = simd_padded_width(max(width, MIN_PYRAMID_DIM))
    if new_h != height:
        planes = planes.index_select(-2, _mirror_index(height, new_h).to(planes.device))
    if new_w != width:
        planes = planes.index_select(-1, _mirror_index(width, new_w).to(planes.device))
    return planes


def _box_blur(x: torch.Tensor, radius: int) -> torch.Tensor:
    """Mean over a (2r+1)² window with mirror borders (edge not repeated), same shape (N, C, H, W)."""
    padded = F.pad(x, (radius, radius, radius, radius), mode="reflect")
    return F.avg_pool2d(padded, 2 * radius + 1, stride=1)


def _downscale(x: torch.Tensor) -> torch.Tensor:
    """2x2 box average, dropping an odd last row/column."""
    return F.avg_pool2d(x, 2)


class _ScaleRef(NamedTuple):
    xyb: torch.Tensor     # (N, 3, h, w)
    mu: torch.Tensor      # blur(x)
    sq_blur: torch.Tensor  # blur(x²)


class ZensimRefState(NamedTuple):
    """A prepared reference: per scale its padded XYB planes with blur(x) and blur(x²); ``shape`` the caller's
    (N, 3, H, W) before padding."""

    scales: tuple[_ScaleRef, ...]
    shape: tuple[int, int, int, int]


def pyramid_levels_ref(x: torch.Tensor, downscale: Callable[[torch.Tensor], torch.Tensor]) -> list[torch.Tensor]:
    """Upstream's scales of padded XYB (N, 3, H, W): x, then ``downscale`` of the previous level, up to
    NUM_SCALES levels, stopping before a side under 8 px."""
    levels = []
    for scale in range(NUM_SCALES):
        if x.shape[-1] < 8 or x.shape[-2] < 8:
            break
        levels.append(x)
        if scale < NUM_SCALES - 1:
            x = downscale(x)
    return levels


def _pyramid(xyb: torch.Tensor) -> list[torch.Tensor]:
    return pyramid_levels_ref(xyb, _downscale)


def zensim_prepare_ref(ref_xyb: torch.Tensor) -> ZensimRefState:
    """Prepare a reference from its positive XYB (N, 3, H, W) (see :func:`linear_to_positive_xyb_ref`)."""
    shape = tuple(ref_xyb.shape)
    levels = _pyramid(pad_for_pyramid_ref(ref_xyb))
    scales = tuple(_ScaleRef(x, _box_blur(x, BLUR_RADIUS), _box_blur(x * x, BLUR_RADIUS)) for x in levels)
    return ZensimRefState(scales, shape)


def _root(m: torch.Tensor, p: float) -> torch.Tensor:
    """``m ** (1/p)`` of a non-negative mean of p-th powers, with the subgradient 0 where ``m`` is 0.

    The p-norm of a map is not differentiable where the map is 0 (dist equal to ref): the chain rule gives
    ``inf · 0 = NaN`` there (``d m^(1/p)/dm`` is infinite, ``d v^p/dv`` is 0). 0 is in the subdifferential of a
    norm at 0 and is the gradient of a loss at its minimum, so the twin takes it; the values are unchanged."""
    positive = m > 0
    safe = torch.where(positive, m, torch.ones_like(m))
    root = safe.sqrt() if p == 2.0 else safe.pow(1.0 / p)  # sqrt as before: the same bits
    return torch.where(positive, root, torch.zeros_like(m))


def _pool(v: torch.Tensor, n: int) -> tuple[torch.Tensor, ...]:
    """mean, L4, L2, max, L8 of a non-negative map (N, 3, h, w) -> five (N, 3) (p-norms: :func:`_root`)."""
    v2 = v * v
    v4 = v2 * v2
    mean = v.sum((-2, -1)) / n
    return (mean, _root(v4.sum((-2, -1)) / n, 4.0), _root(v2.sum((-2, -1)) / n, 2.0), v.amax((-2, -1)),
            _root((v4 * v4).sum((-2, -1)) / n, 8.0))


def _ratio_features(src_sum: torch.Tensor, dst_sum: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(loss, gain) = (max(0, 1 - d/s), max(0, d/s - 1)) where s = src_sum/n > 1e-10, else (0, 0)."""
    s, d = src_sum / n, dst_sum / n
    valid = s > 1e-10
    ratio = d / torch.where(valid, s, torch.ones_like(s))
    zero = torch.zeros_like(ratio)
    return torch.where(valid, (1.0 - ratio).clamp_min(0.0), zero), torch.where(valid, (ratio - 1.0).clamp_min(0.0), zero)


def _scale_features(ref: _ScaleRef, dst: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Basic (N, 3, 13) and peak (N, 3, 6) features of one scale."""
    src, mu1, src_sq_blur = ref
    n = src.shape[-2] * src.shape[-1]
    mu2 = _box_blur(dst, BLUR_RADIUS)
    ssq = src_sq_blur + _box_blur(dst * dst, BLUR_RADIUS)  # blur(s² + d²) by linearity
    s12 = _box_blur(src * dst, BLUR_RADIUS)
    num_m = 1.0 - (mu1 - mu2) ** 2
    num_s = 2.0 * (s12 - mu1 * mu2) + C2
    denom_s = ssq - mu1 * mu1 - mu2 * mu2 + C2
    ssim_err = (1.0 - num_m * num_s / denom_s).clamp_min(0.0)
    hf_src, hf_dst = src - mu1, dst - mu2
    abs_src, abs_dst = hf_src.abs(), hf_dst.abs()
    edge = (1.0 + abs_dst) / (1.0 + abs_src) - 1.0
    s_mean, s_l4, s_l2, s_max, s_l8 = _pool(ssim_err, n)
    a_mean, a_l4, a_l2, a_max, a_l8 = _pool(edge.clamp_min(0.0), n)
    d_mean, d_l4, d_l2, d_max, d_l8 = _pool((-edge).clamp_min(0.0), n)
    mse = ((src - dst) ** 2).sum((-2, -1)) / n
    energy_loss, energy_gain = _ratio_features((hf_src * hf_src).sum((-2, -1)), (hf_dst * hf_dst).sum((-2, -1)), n)
    mag_loss, _ = _ratio_features(abs_src.sum((-2, -1)), abs_dst.sum((-2, -1)), n)
    basic = torch.stack((s_mean, s_l4, s_l2, a_mean, a_l4, a_l2, d_mean, d_l4, d_l2, mse, energy_loss, mag_loss,
                         energy_gain), dim=-1)
    peak = torch.stack((s_max, a_max, d_max, s_l8, a_l8, d_l8), dim=-1)
    return basic, peak


def zensim_features_prepared_ref(state: ZensimRefState, dist_xyb: torch.Tensor) -> torch.Tensor:
    """The 228 features (N, 228) of ``dist_xyb`` (positive XYB, the reference's shape, or N=k against a
    one-image reference) against a prepared reference, in upstream order (:data:`FEATURE_NAMES`)."""
    levels = _pyramid(pad_for_pyramid_ref(dist_xyb))
    basics, peaks = [], []
    for ref, dst in zip(state.scales, levels):
        basic, peak = _scale_features(ref, dst)
        basics.append(basic.flatten(1))
        peaks.append(peak.flatten(1))
    return torch.cat(basics + peaks, dim=1)


def zensim_features_ref(ref_xyb: torch.Tensor, dist_xyb: torch.Tensor) -> torch.Tensor:
    """The 228 features (N, 228) of a pair of positive-XYB images (N, 3, H, W)."""
    return zensim_features_prepared_ref(zensim_prepare_ref(ref_xyb), dist_xyb)


def active_feature_mask_ref(weights: torch.Tensor | np.ndarray) -> torch.Tensor:
    """Which of the 228 features upstream's ``compute`` evaluates for these weights (bool (228,)).

    A channel's SSIM group (ssim mean/L4/L2 and its max/L8) runs when any of those weights exceeds 0.001 in
    magnitude; its edge group (art/det pools, the HF ratios and art/det peaks) likewise; MSE alone otherwise.
    Skipped features read 0 in upstream's score."""
    w = np.abs(np.asarray(weights, dtype=np.float64)) > 0.001
    mask = np.zeros(NUM_FEATURES, dtype=bool)
    n_basic = NUM_SCALES * 3 * 13
    for scale in range(NUM_SCALES):
        for c in range(3):
            base, peak = scale * 39 + c * 13, n_basic + scale * 18 + c * 6
            need_ssim = w[base:base + 3].any() or w[peak] or w[peak + 3]
            need_edge = w[base + 3:base + 9].any() or w[base + 10:base + 13].any() or w[peak + 1:peak + 3].any() \
                or w[peak + 4:peak + 6].any()
            need_mse = w[base + 9]
            if need_ssim:
                mask[base:base + 13] = True
                mask[peak:peak + 6] = True
            elif need_edge:
                mask[base + 3:base + 13] = True
                mask[[peak + 1, peak + 2, peak + 4, peak + 5]] = True
            elif need_mse:
                mask[base + 9] = True
    return torch.from_numpy(mask)


def score_from_distance_ref(distance: torch.Tensor, a: float = 18.0, b: float = 0.7) -> torch.Tensor:
    """``100 - a · d^b`` (100 where d <= 0); differentiable for d > 0."""
    positive = distance > 0
    safe = torch.where(positive, distance, torch.ones_like(distance))
    return torch.where(positive, 100.0 - a * safe.pow(b), torch.full_like(distance, 100.0))
