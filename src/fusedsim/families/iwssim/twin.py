"""PyTorch twin of IW-SSIM (Wang & Li 2011, the authors' MATLAB ``iwssim``): the specification, the CPU path and the
test oracle. Everything runs in float64 on grey values in [0, 255] (L = 255), like the MATLAB code.

Pipeline per (reference, distorted) pair:

1. Laplacian pyramid of 5 levels (matlabPyrTools ``buildLpyr``): the binomial filter ``binom5 = [1 4 6 4 1]/16·√2``
   applied horizontally then vertically with ``reflect1`` edges (mirror about the edge sample), keeping every
   2nd sample (size ceil(n/2)); the expansion puts the coarse samples at even positions of a zero signal of the
   fine size and filters it the same way (vertically, then horizontally). Bands 1-4 = fine - expanded coarse;
   band 5 is the low-pass residual.
2. At every level, SSIM statistics under the 11x11 Gaussian window (σ = 1.5, sum 1), 'valid' region:
   ``cs = (2σ12 + C2)/(σ1² + σ2² + C2)`` with σ² clamped at 0 (and σ12 = 0 where a σ² is 0); the last level
   uses ``cs·l``, ``l = (2μ1μ2 + C1)/(μ1² + μ2² + C1)``; C1 = (0.01·255)², C2 = (0.03·255)².
3. Information-content weights at levels 1-4 (Gaussian scale mixture model, σ_n² = 0.4): a 3x3 box ('same',
   zero padding) gives the gain ``g = cov/var_ref`` and ``vv = var_dist - g·cov`` (tol 1e-15 rules); the
   reference's 3x3 neighbourhood plus its parent (levels 1-3: the next level enlarged by ``imenlarge2``) form
   the vectors Y of the interior pixels; ``C_u = YᵀY / n``, its eigenvalues made non-negative and rescaled to
   keep the trace; ``ss = yᵀ C_u⁻¹ y / K``; ``iw = Σ_j log2(1 + ((vv + (1 + g²)σ_n²)·ss·λ_j + σ_n²·vv)/σ_n⁴)``
   (values below tol set to 0), cropped by 4 px to the 'valid' cs map. The last level weighs every pixel 1.
4. ``wmcs_s = Σ cs·iw / Σ iw``; IW-SSIM = Π wmcs_s ** w_s with w = [0.0448, 0.2856, 0.3001, 0.2363, 0.1333]
   divided by their sum.

Where the authors' formula has no real value, this implementation decides (MATLAB gives NaN or a complex number):

* ``Σ iw = 0`` at a level (:func:`weighted_mean_ref`): neither band carries information there (the reference band
  is flat, and so is the distorted one: a flat image, black vs white). Then wmcs = 1: the scale shows no difference
  (cs of two flat bands is 1 up to σ²/C2, and 1 is the limit of the mean as the weights become uniform).
* A singular neighbourhood covariance ``C_u`` (a ramp's or a flat image's bands): ``C_u⁻¹`` is the pseudo-inverse
  (1/λ for λ > 0, 0 for λ = 0; :func:`corrected_eig_ref`), so ``ss`` measures y on the range of ``C_u`` and the
  weights stay finite.
* A negative wmcs (inverted structure: an image against its inverse) counts as 0 (:func:`combine_ref`): no
  structural similarity at that scale, so IW-SSIM is 0 (as MS-SSIM implementations clamp cs at 0).

So IW-SSIM is in [0, 1], and identical images give exactly 1 (cs = 1 and iw ≥ 0 everywhere).

Images must be at least 11·2⁴ = 176 px on each side (MATLAB returns -Inf below that).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from fusedsim.core.moments.twin import gaussian_window, windowed_moments_ref
from fusedsim.core.state import cached

__all__ = [
    "FILTER_AXIS_DEFAULT",
    "LEVELS",
    "LUMA",
    "MIN_SIZE",
    "SCALE_WEIGHTS",
    "binom_filter_ref",
    "combine_ref",
    "corrected_eig_levels_ref",
    "corrected_eig_ref",
    "cs_from_moments_ref",
    "cs_maps_ref",
    "enlarge2_ref",
    "enlarge_taps",
    "gaussian_table",
    "grey8_ref",
    "invertible_eigenvalues",
    "grey_ref",
    "info_weight_map_op_ref",
    "info_weight_map_ref",
    "iw_ssim_ref",
    "laplacian_pyramid_ref",
    "level_sums_ref",
    "weighted_mean_ref",
    "neighbourhood_gram_op_ref",
    "neighbourhood_gram_ref",
    "pyr_band_ref",
    "pyr_reduce_op_ref",
]

LEVELS = 5
WINDOW, SIGMA = 11, 1.5
MIN_SIZE = WINDOW * 2 ** (LEVELS - 1)  # 176
SCALE_WEIGHTS = (0.0448, 0.2856, 0.3001, 0.2363, 0.1333)
C1, C2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
SIGMA_NSQ = 0.4
TOL = 1e-15
BINOM5 = tuple(v / 16.0 * math.sqrt(2.0) for v in (1.0, 4.0, 6.0, 4.0, 1.0))

#: Luma definitions for RGB input: coefficients and whether the result is rounded to integers (MATLAB's
#: ``rgb2gray`` on uint8 images rounds; on double images it does not).
LUMA = {
    "matlab": ((0.298936021293775, 0.587043074451121, 0.114020904255103), True),
    "matlab-float": ((0.298936021293775, 0.587043074451121, 0.114020904255103), False),
    "bt601": ((0.299, 0.587, 0.114), False),
}


def grey_ref(rgb: torch.Tensor, luma: str = "matlab") -> torch.Tensor:
    """sRGB (N, 3, H, W) in [0, 1] -> grey (N, 1, H, W) float64 in [0, 255] by the ``luma`` definition; rounding
    (``"matlab"``) is half away from zero, as MATLAB's ``round``.

    Rounding is piecewise constant: its true gradient is 0 almost everywhere, so a gradient through the default
    luma would be all zeros. When ``rgb`` needs a gradient the rounded grey passes the unrounded grey's gradient
    (a straight-through estimator, ``g + (round(g) - g).detach()``); its values are the rounded ones exactly
    (``round(g) - g`` is exact for g >= 0 by Sterbenz's lemma, and so is adding it back)."""
    (kr, kg, kb), rounded = LUMA[luma]
    x = rgb.to(torch.float64) * 255.0
    grey = kr * x[:, 0:1] + kg * x[:, 1:2] + kb * x[:, 2:3]
    if not rounded:
        return grey
    whole = torch.floor(grey + 0.5)
    return grey + (whole - grey).detach() if grey.requires_grad else whole


@cached(maxsize=16)
def _binom(dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    return torch.tensor(BINOM5, dtype=dtype, device=device)


@cached(maxsize=16)
def gaussian_table(device: torch.device) -> torch.Tensor:
    """The 11-tap Gaussian (σ = 1.5, sum 1) as a (1, 11) float64 window table on ``device`` (cached)."""
    return gaussian_window(WINDOW, SIGMA, dtype=torch.float64, device=device).view(1, -1)


def _filter_axis(x: torch.Tensor, dim: int, step: int, fused: bool | None = None) -> torch.Tensor:
    """Correlate ``x`` (N, C, H, W) with binom5 along ``dim`` (-1 or -2; reflect1 edges: mirror about the edge
    sample), keeping every ``step``-th output from the first.

    Two evaluations of the same sums: the taps added one by one in matlabPyrTools' order (the default on CPUs), or
    one strided convolution (``fused``, the default on GPUs: two passes over memory instead of eleven). They
    differ by rounding only (~1e-16 relative per sample)."""
    k = _binom(x.dtype, x.device)
    size = x.shape[dim]
    idx = torch.arange(-2, size + 2, device=x.device).abs()
    idx = torch.where(idx > size - 1, 2 * (size - 1) - idx, idx)
    xp = x.index_select(dim, idx)
    if fused if fused is not None else x.is_cuda:
        shape, stride = ((1, 1, 1, 5), (1, step)) if dim in (-1, 3) else ((1, 1, 5, 1), (step, 1))
        n, c = xp.shape[:2]
        out = F.conv2d(xp.reshape(n * c, 1, *xp.shape[2:]), k.view(shape), stride=stride)
        return out.view(n, c, *out.shape[2:])
    out = sum(k[i] * xp.narrow(dim, i, size) for i in range(5))
    return out if step == 1 else out.index_select(dim, torch.arange(0, size, step, device=x.device))


def binom_filter_ref(x: torch.Tensor, dim: int, step: int) -> torch.Tensor:
    """binom5 along ``dim`` (-1 or -2) of (N, C, H, W) with reflect1 edges, every ``step``-th output, the taps added
    one by one in matlabPyrTools' order (the twin of the ``iwssim_binom`` op)."""
    return _filter_axis(x, dim, step, fused=False)


FilterAxis = Callable[[torch.Tensor, int, int], torch.Tensor]
FILTER_AXIS_DEFAULT: FilterAxis = _filter_axis  # the taps one by one on CPUs, one convolution on GPUs


def pyr_reduce_ref(x: torch.Tensor, filter_axis: FilterAxis = _filter_axis) -> torch.Tensor:
    """One ``corrDn`` step of ``buildLpyr``: (N, C, H, W) -> (N, C, ceil(H/2), ceil(W/2)), horizontal first."""
    return filter_axis(filter_axis(x, -1, 2), -2, 2)


def _upsample_axis(x: torch.Tensor, dim: int, size: int, filter_axis: FilterAxis) -> torch.Tensor:
    """``upConv`` along ``dim``: samples at even positions of a zero signal of length ``size``, then binom5."""
    shape = list(x.shape)
    shape[dim] = size
    z = x.new_zeros(shape)
    z = z.index_copy(dim, torch.arange(0, size, 2, device=x.device), x)
    return filter_axis(z, dim, 1)


def pyr_expand_ref(x: torch.Tensor, height: int, width: int, filter_axis: FilterAxis = _filter_axis) -> torch.Tensor:
    """The ``upConv`` pair of ``buildLpyr`` back to (height, width): vertical first, then horizontal."""
    return _upsample_axis(_upsample_axis(x, -2, height, filter_axis), -1, width, filter_axis)


def pyr_reduce_op_ref(x: torch.Tensor) -> torch.Tensor:
    """:func:`pyr_reduce_ref` with the taps one by one (the twin of the ``iwssim_reduce`` op)."""
    return pyr_reduce_ref(x, binom_filter_ref)


def pyr_band_ref(img: torch.Tensor, lo: torch.Tensor) -> torch.Tensor:
    """One band of ``buildLpyr``: ``img - expand(lo)`` (N, C, H, W), ``lo = reduce(img)``, the taps one by one
    (the twin of the ``iwssim_band`` op)."""
    return img - pyr_expand_ref(lo, img.shape[-2], img.shape[-1], binom_filter_ref)


def laplacian_pyramid_ref(img: torch.Tensor, levels: int = LEVELS,
                          filter_axis: FilterAxis = _filter_axis) -> list[torch.Tensor]:
    """Bands of ``buildLpyr(img, levels)``, finest first: ``levels - 1`` band-pass images and the low-pass.
    ``filter_axis(x, dim, step)`` is the binom5 filter (the registered ``iwssim_binom`` op on the kernel path)."""
    bands = []
    for _ in range(levels - 1):
        lo = pyr_reduce_ref(img, filter_axis)
        bands.append(img - pyr_expand_ref(lo, img.shape[-2], img.shape[-1], filter_axis))
        img = lo
    bands.append(img)
    return bands


@cached(maxsize=64)
def enlarge_taps(m: int, out: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """1-D ``imenlarge2`` of length ``m`` as a sparse matrix: for the first ``out`` outputs, (idx (out, 4),
    weight (out, 4)) with out[j] = Σ_k weight[j, k]·in[idx[j, k]]. Cached per size and device (built on the CPU
    once, so later calls copy nothing to the device)."""
    length = 4 * m - 3  # MATLAB: imresize(im, [4M-3 4N-3], 'bilinear'): pixel-centre mapping, edges clamped
    q = torch.arange(length, dtype=torch.float64)
    pos = (q + 0.5) * (m / length) - 0.5
    left = torch.floor(pos)
    frac = (pos - left).tolist()
    i0 = left.long().clamp(0, m - 1).tolist()
    i1 = (left.long() + 1).clamp(0, m - 1).tolist()
    # t2 = [extrapolated, t1, extrapolated] has 4m - 1 samples; imenlarge2 keeps t2[0::2]
    rows_idx, rows_w = [], []
    for j in range(out):
        t = 2 * j
        if t == 0:
            comb = [(0, 2.0), (1, -1.0)]  # 2·t1[0] - t1[1]
        elif t == 4 * m - 2:
            comb = [(length - 1, 2.0), (length - 2, -1.0)]
        else:
            comb = [(t - 1, 1.0)]
        idx, w = [], []
        for src, coef in comb:
            idx += [i0[src], i1[src]]
            w += [coef * (1.0 - frac[src]), coef * frac[src]]
        rows_idx.append(idx + [0] * (4 - len(idx)))
        rows_w.append(w + [0.0] * (4 - len(w)))
    return (torch.tensor(rows_idx, device=device), torch.tensor(rows_w, dtype=torch.float64, device=device))


def _enlarge_axis(x: torch.Tensor, dim: int, out: int) -> torch.Tensor:
    idx, w = enlarge_taps(x.shape[dim], out, x.device)
    w = w.to(x.dtype)
    view = [1] * x.dim()
    view[dim] = out
    acc = None
    for k in range(4):
        term = x.index_select(dim, idx[:, k]) * w[:, k].view(view)
        acc = term if acc is None else acc + term
    return acc


def enlarge2_ref(parent: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """MATLAB ``imenlarge2`` (bilinear to 4M-3, linear extrapolation of the border, every 2nd sample) of a
    parent band (N, 1, M, M') cropped to the child size (height, width) ≤ (2M, 2M')."""
    return _enlarge_axis(_enlarge_axis(parent, -2, height), -1, width)


#: (dy, dx) of the 3x3 neighbourhood in the MATLAB column order (``shift(y, [ny nx])`` reads y[i - ny, j - nx]).
NEIGHBOURS = tuple((-ny, -nx) for ny in (-1, 0, 1) for nx in (-1, 0, 1))


def neighbourhood_vectors_ref(ref_band: torch.Tensor, parent_up: torch.Tensor | None) -> torch.Tensor:
    """Y of the interior pixels: (N, (H-2)·(W-2), K) with K = 9 (+1 for the parent), row-major pixel order."""
    h, w = ref_band.shape[-2:]
    cols = [ref_band[:, 0, 1 + dy:h - 1 + dy, 1 + dx:w - 1 + dx] for dy, dx in NEIGHBOURS]
    if parent_up is not None:
        cols.append(parent_up[:, 0, 1:h - 1, 1:w - 1])
    return torch.stack(cols, dim=-1).flatten(1, 2)


def neighbourhood_gram_ref(ref_band: torch.Tensor, parent_up: torch.Tensor | None) -> torch.Tensor:
    """``C_u = YᵀY / n`` per image: (N, K, K) float64 (not mean-subtracted, as in the MATLAB code)."""
    y = neighbourhood_vectors_ref(ref_band, parent_up)
    return y.transpose(1, 2) @ y / y.shape[1]


#: relative rank tolerance per matrix dimension (MATLAB's ``pinv``: ``max(size(A)) · eps · norm(A)``)
RANK_EPS = 2.220446049250313e-16


def invertible_eigenvalues(lam: torch.Tensor) -> torch.Tensor:
    """Which corrected eigenvalues (..., K), all >= 0, the inverse divides by: those above ``K · eps · λ_max``
    (the numerical rank, as MATLAB's ``pinv``); the rest are rounding noise of a singular matrix."""
    k = lam.shape[-1]
    return lam > (k * RANK_EPS) * lam.amax(-1, keepdim=True)


def corrected_eig_ref(gram: torch.Tensor) -> torch.Tensor:
    """Eigenvalues of ``C_u`` with negatives zeroed and the rest rescaled to keep the trace, and the inverse of
    the corrected matrix: (N, K + 1, K) = [C⁻¹ (K rows); λ sorted ascending (1 row)].

    The inverse is the pseudo-inverse at the numerical rank (:func:`invertible_eigenvalues`): an eigenvalue at
    rounding level of the largest (a singular ``C_u``: a ramp's or a flat image's bands, whose eigenvalues come out
    of ``eigh`` as noise of either sign) is inverted as 0, where MATLAB's ``inv`` returns Inf or ~1e17 and the
    weights become NaN; the others are divided as before (same bits)."""
    lam, q = torch.linalg.eigh(gram)
    pos = lam * (lam > 0)
    kept = pos.sum(-1, keepdim=True)
    lam = pos * lam.sum(-1, keepdim=True) / (kept + (kept == 0))
    inv = (q / torch.where(invertible_eigenvalues(lam), lam, torch.inf).unsqueeze(-2)) @ q.transpose(-1, -2)
    return torch.cat([inv, lam.unsqueeze(-2)], dim=-2)


def corrected_eig_levels_ref(grams: torch.Tensor, sizes: list[int]) -> torch.Tensor:
    """:func:`corrected_eig_ref` of every level at once (the twin of the ``iwssim_eig_levels`` op): grams
    (L, N, KP, KP) holding level l's (N, K_l, K_l) matrices top-left (``sizes[l]`` = K_l), out (L, N, KP + 1, KP)
    with level l's [C⁻¹; λ] in its block [:K_l + 1, :K_l] and zeros elsewhere."""
    kp = grams.shape[-1]
    out = []
    for level, k in enumerate(sizes):
        eig = corrected_eig_ref(grams[level, :, :k, :k])
        out.append(F.pad(eig, (0, kp - k, 0, kp - k)))
    return torch.stack(out)


def _box3_same(x: torch.Tensor) -> torch.Tensor:
    box = torch.full((1, 1, 3, 3), 1.0 / 9.0, dtype=x.dtype, device=x.device)
    return F.conv2d(x, box, padding=1)


def info_weight_map_ref(ref_band: torch.Tensor, dist_band: torch.Tensor, parent_up: torch.Tensor | None,
                        eig: torch.Tensor) -> torch.Tensor:
    """Information-content weights (N, H-10, W-10) of one band pair (N, 1, H, W), aligned with the 'valid' 11x11
    cs map; ``eig`` is :func:`corrected_eig_ref` of the reference's neighbourhood Gram matrix."""
    k = eig.shape[-1]
    c_inv, lam = eig[:, :k], eig[:, k]
    mean_x, mean_y = _box3_same(ref_band), _box3_same(dist_band)
    cov = _box3_same(ref_band * dist_band) - mean_x * mean_y
    ss_x = (_box3_same(ref_band * ref_band) - mean_x * mean_x).clamp_min(0.0)
    ss_y = (_box3_same(dist_band * dist_band) - mean_y * mean_y).clamp_min(0.0)
    g = cov / (ss_x + TOL)
    vv = ss_y - g * cov
    flat_x = ss_x < TOL
    g = torch.where(flat_x, torch.zeros_like(g), g)
    vv = torch.where(flat_x, ss_y, vv)
    flat_y = ss_y < TOL
    g = torch.where(flat_y, torch.zeros_like(g), g)
    vv = torch.where(flat_y, torch.zeros_like(vv), vv)
    h, w = ref_band.shape[-2:]
    g, vv = g[:, 0, 5:h - 5, 5:w - 5], vv[:, 0, 5:h - 5, 5:w - 5]
    y = neighbourhood_vectors_ref(ref_band[..., 4:h - 4, 4:w - 4],
                                  parent_up[..., 4:h - 4, 4:w - 4] if parent_up is not None else None)
    ss = ((y @ c_inv) * y).sum(-1) / k
    ss = ss.view(g.shape)
    a = (vv + (1.0 + g * g) * SIGMA_NSQ) * ss
    b = SIGMA_NSQ * vv
    iw = torch.log2(1.0 + (a.unsqueeze(-1) * lam[:, None, None, :] + b.unsqueeze(-1)) / (SIGMA_NSQ * SIGMA_NSQ))
    iw = iw.sum(-1)
    return torch.where(iw < TOL, torch.zeros_like(iw), iw)


def cs_maps_ref(ref_band: torch.Tensor, dist_band: torch.Tensor, last: bool) -> torch.Tensor:
    """cs map (N, H-10, W-10) under the 11x11 Gaussian ('valid'); ``cs·l`` at the last level."""
    moments = windowed_moments_ref(ref_band, dist_band, gaussian_table(ref_band.device), True)
    return cs_from_moments_ref(moments[:, :, 0], last)


def cs_from_moments_ref(moments: torch.Tensor, last: bool) -> torch.Tensor:
    """cs (or cs·l) map (N, H', W') from the stacked moments (5, N, H', W'): mu1, mu2, E[x²], E[y²], E[xy].

    Variances are clamped at 0 (as MATLAB's code), and where either is 0 the covariance is 0 too (|σ12| <= σ1σ2):
    without that, a flat window whose E[x²] - μ² rounds below 0 pairs a clamped 0 with a covariance of -1e-11,
    and identical flat images score 0.99999999997 instead of 1. Elsewhere the values are unchanged."""
    mu1, mu2, e11, e22, e12 = moments
    s11 = (e11 - mu1 * mu1).clamp_min(0.0)
    s22 = (e22 - mu2 * mu2).clamp_min(0.0)
    s12 = torch.where((s11 > 0) & (s22 > 0), e12 - mu1 * mu2, torch.zeros_like(e12))
    cs = (2.0 * s12 + C2) / (s11 + s22 + C2)
    if last:
        cs = cs * (2.0 * mu1 * mu2 + C1) / (mu1 * mu1 + mu2 * mu2 + C1)
    return cs


def weighted_mean_ref(cs_iw_sum: torch.Tensor, iw_sum: torch.Tensor) -> torch.Tensor:
    """A level's ``wmcs = Σ cs·iw / Σ iw``, and 1 where ``Σ iw`` is 0 (no information at that level: see the module
    docstring). The division never sees a zero denominator, so a gradient through it stays finite."""
    empty = iw_sum == 0  # (a NaN sum is not empty: it propagates)
    return torch.where(empty, torch.ones_like(iw_sum),
                       cs_iw_sum / torch.where(empty, torch.ones_like(iw_sum), iw_sum))


def combine_ref(wmcs: torch.Tensor) -> torch.Tensor:
    """IW-SSIM (N,) from the per-level weighted means (LEVELS, N): Π max(wmcs, 0) ** (w / Σw) (a negative wmcs
    counts as 0: see the module docstring)."""
    total = sum(SCALE_WEIGHTS)
    wmcs = wmcs.clamp_min(0.0)
    out = None
    for level in range(wmcs.shape[0]):
        term = wmcs[level] ** (SCALE_WEIGHTS[level] / total)
        out = term if out is None else out * term
    return out


def iw_ssim_ref(ref_grey: torch.Tensor, dist_grey: torch.Tensor) -> torch.Tensor:
    """IW-SSIM (N,) float64 of grey images (N, 1, H, W) holding values in [0, 255], H and W ≥ 176."""
    ref_bands = laplacian_pyramid_ref(ref_grey.to(torch.float64))
    dist_bands = laplacian_pyramid_ref(dist_grey.to(torch.float64))
    wmcs = []
    for level in range(LEVELS):
        ref_b, dist_b = ref_bands[level], dist_bands[level]
        last = level == LEVELS - 1
        cs = cs_maps_ref(ref_b, dist_b, last)
        if last:
            wmcs.append(cs.flatten(1).mean(1))
            continue
        parent = None
        if level < LEVELS - 2:
            parent = enlarge2_ref(ref_bands[level + 1], ref_b.shape[-2], ref_b.shape[-1])
        eig = corrected_eig_ref(neighbourhood_gram_ref(ref_b, parent))
        iw = info_weight_map_ref(ref_b, dist_b, parent, eig)
        wmcs.append(weighted_mean_ref((cs * iw).flatten(1).sum(1), iw.flatten(1).sum(1)))
    return combine_ref(torch.stack(wmcs))


def neighbourhood_gram_op_ref(ref_band: torch.Tensor, parent: torch.Tensor, has_parent: bool) -> torch.Tensor:
    """Twin of the ``iwssim_gram`` op (``parent`` used only when ``has_parent``)."""
    return neighbourhood_gram_ref(ref_band.to(torch.float64), parent.to(torch.float64) if has_parent else None)


def info_weight_map_op_ref(ref_band: torch.Tensor, dist_band: torch.Tensor, parent: torch.Tensor, eig: torch.Tensor,
                           has_parent: bool) -> torch.Tensor:
    """Twin of the ``iwssim_info`` op (``parent`` used only when ``has_parent``)."""
    return info_weight_map_ref(ref_band, dist_band, parent if has_parent else None, eig)


def level_sums_ref(ref_band: torch.Tensor, dist_band: torch.Tensor, parent: torch.Tensor, eig: torch.Tensor,
                   moments: torch.Tensor, has_parent: bool) -> torch.Tensor:
    """[Σ cs·iw, Σ iw] (N, 2) of one band level (levels 1-4) from its windowed moments (5, N, 1, H', W') (the twin
    of the ``iwssim_level`` op; ``parent`` used only when ``has_parent``)."""
    cs = cs_from_moments_ref(moments[:, :, 0], False)
    iw = info_weight_map_op_ref(ref_band, dist_band, parent, eig, has_parent)
    return torch.stack([(cs * iw).flatten(1).sum(1), iw.flatten(1).sum(1)], dim=1)


def grey8_ref(raw: torch.Tensor, luma: torch.Tensor, rounded: bool) -> torch.Tensor:
    """uint8 sRGB (N, 3, H, W) -> grey (N, 1, H, W) float64 in [0, 255] with the luma coefficients ``luma`` (3,)
    float64, rounded half away from zero when ``rounded``: :func:`grey_ref` of ``raw / 255`` in float64, the same
    operations (the twin of the ``iwssim_grey8`` op)."""
    x = raw.to(torch.float64) / 255.0 * 255.0
    kr, kg, kb = luma.to(torch.float64).unbind()
    grey = kr * x[:, 0:1] + kg * x[:, 1:2] + kb * x[:, 2:3]
    return torch.floor(grey + 0.5) if rounded else grey
