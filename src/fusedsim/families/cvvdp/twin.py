"""PyTorch twin of ColorVideoVDP for still images (pycvvdp 0.5.7): the specification, the CPU path, the oracle.

Pipeline for one (reference, test) pair, every step differentiable (constants: :mod:`.cvvdp_data`):

1. Display model: input V encoded with the display's EOTF -> absolute linear RGB (:mod:`.eotf`; for sRGB
   ``L = (Y_peak - Y_black) srgb2lin(V) + Y_black + Y_refl``) -> DKL (d65) through ``LMS2006_to_DKLd65 @
   XYZ_to_LMS2006 @ RGB_to_XYZ`` (one 3x3 matrix, the colour space's primaries).
2. Decimated Laplacian pyramid per channel with the 5-tap kernel [0.05, 0.25, 0.4, 0.25, 0.05]: ``reduce`` is a
   stride-2 filter with symmetric edges (pycvvdp decides the *column* edge rule from the number of *rows*; kept),
   ``expand`` interleaves zeros, copies the first/last sample into the pad and filters with twice the kernel.
   Bands: ``1 + min(first k with 0.3228 2^-k ppd/2 <= 0.2, floor(log2 min(H, W)) - 1)`` levels, frequencies
   ``[1, 0.3228 2^-k] ppd/2`` cpd; the baseband gets 0.1 cpd.
3. Weber contrast per image: band = (G_k - expand(G_{k+1})) / max(expand(G_{k+1})_Y, 0.01), clamped above at
   1000; baseband = G_last / mean(max(G_last_Y, 0.01)). Middle bands are then doubled (pycvvdp's ``get_band``).
4. castleCSF: log S interpolated linearly in log rho (with extrapolation), then in log L_bkg of the *reference*
   (uniform table, clamped), times ``10^(sensitivity_correction / 20)``.
5. Masking ("mult-mutual"): ``T' = T S g``, ``R' = R S g`` with g = (1, 1.45, 1); ``M = pool(safe_pow(blur(min(
   |T'|, |R'|)) 10^mask_c, q))`` (Gaussian sigma 3, 13 taps, reflect edges, only when both sides > 6; ``pool``
   mixes channels with 2^xcm_weights); ``D = soft_clamp(safe_pow(|T' - R'|, p) / (1 + M))`` with
   ``soft_clamp(d) = 10^d_max d / (10^d_max + d)``. Baseband: ``D = |T - R| S``.
6. Pooling: per band and channel the normalised beta-norm over pixels; bands (baseband weighted) and then
   channels with 4-norms; times ``image_int``; JOD = 10 - jod_a Q^jod_exp (linear below Q = 0.1).
   ``safe_pow(x, p) = (x + 1e-5)^p - 1e-5^p`` is used for every power, as pycvvdp does.

The per-pixel map is pycvvdp's "raw" heatmap: per band the 4-norm over channels of the weighted differences,
collapsed like a Laplacian pyramid (middle bands halved), mapped to ``1 - JOD / 10``.

The twin computes in the dtype it is given (float32 as pycvvdp; float64 for gradient checks).
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import torch
import torch.nn.functional as F

from fusedsim.core.state import cached
from fusedsim.families.cvvdp.data import (
    EOTFS,
    CVVDPDisplay,
    CVVDPParams,
    csf_lut,
    cvvdp_params,
)
from fusedsim.families.cvvdp.eotf import emitted_light_ref

__all__ = [
    "cvvdp_band_diff_ref",
    "cvvdp_band_pool_ref",
    "cvvdp_bands",
    "cvvdp_compare_ref",
    "cvvdp_contrast_pyramid_ref",
    "cvvdp_expand_op_ref",
    "cvvdp_expand_ref",
    "cvvdp_heatmap_ref",
    "cvvdp_linear_dkl_op_ref",
    "cvvdp_linear_dkl_ref",
    "cvvdp_luminance_ref",
    "cvvdp_mask_diff_ref",
    "cvvdp_masker_vblur_ref",
    "cvvdp_masking_input_ref",
    "cvvdp_met2jod_ref",
    "cvvdp_pool_ref",
    "cvvdp_prepare_ref",
    "cvvdp_reduce_ref",
    "cvvdp_ref",
    "cvvdp_ref_band_ref",
    "cvvdp_sensitivity_from_lut_ref",
    "cvvdp_sensitivity_lut_ref",
    "cvvdp_sensitivity_ref",
    "cvvdp_test_band_ref",
    "dkl_matrix",
    "gauss_taps",
    "masking_blur_applies",
    "safe_pow",
]

_XYZ_TO_LMS2006 = ((0.187596268556126, 0.585168649077728, -0.026384263306304),
                   (-0.133397430663221, 0.405505777260049, 0.034502127690364),
                   (0.000244379021663, -0.000542995890619, 0.019406849066323))
_LMS2006_TO_DKLD65 = ((1.0, 1.0, 0.0), (1.0, -2.311130179947035, 0.0), (-1.0, -1.0, 50.977571328718781))
_KERNEL_A = 0.4
_EPS = 1e-5  # safe_pow's offset
CH_GAIN = (1.0, 1.45, 1.0, 1.0)  # mult-mutual per-channel gain (achromatic, red-green, yellow-violet, transient)
_MIN_FREQ = 0.2
_BASEBAND_RHO = 0.1
_JOD_Q_T = 0.1


def _t(value, like: torch.Tensor) -> torch.Tensor:
    """A constant (number or nested tuple/list) as a tensor of ``like``'s dtype and device, made once per key."""
    return _const(_frozen(value), like.dtype, like.device)


def _frozen(value):
    return tuple(_frozen(v) for v in value) if isinstance(value, (list, tuple)) else float(value)


@cached(maxsize=256)
def _const(value, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    return torch.as_tensor(value, dtype=dtype, device=device)


def _gain(x: torch.Tensor) -> torch.Tensor:
    """The mult-mutual gain of the C channels of ``x`` (N, C, h, w), shaped (1, C, 1, 1)."""
    return _t(CH_GAIN[:x.shape[1]], x).view(1, x.shape[1], 1, 1)


def safe_pow(x: torch.Tensor, p) -> torch.Tensor:
    eps = _t(_EPS, x)
    return (x + eps) ** p - eps ** p


# ----------------------------------------------------------------------------------------- display model / colour
def dkl_matrix(rgb2xyz, like: torch.Tensor) -> torch.Tensor:
    """RGB -> DKL d65 (3, 3), formed in ``like``'s dtype as pycvvdp does (float32 products)."""
    return _t(_LMS2006_TO_DKLD65, like) @ _t(_XYZ_TO_LMS2006, like) @ _t(rgb2xyz, like)


def cvvdp_linear_dkl_ref(rgb: torch.Tensor, display: CVVDPDisplay) -> torch.Tensor:
    """Display-encoded input (N, 3, H, W) (the display's EOTF) -> DKL d65 (N, 3, H, W) of the light the display
    emits (cd/m² units)."""
    lum = cvvdp_luminance_ref(rgb, display)
    m = dkl_matrix(display.rgb2xyz, rgb)
    return torch.cat([(lum * m[c].view(1, 3, 1, 1)).sum(dim=1, keepdim=True) for c in range(3)], dim=1)


def cvvdp_luminance_ref(rgb: torch.Tensor, display: CVVDPDisplay) -> torch.Tensor:
    """The display model's emitted linear RGB (cd/m²) of input values ``rgb`` (N, 3, ...) encoded with the display's
    EOTF (sRGB, PQ or HLG in [0, 1], or linear cd/m²; :func:`.eotf.emitted_light_ref`)."""
    return emitted_light_ref(rgb, display)


# ------------------------------------------------------------------------------------------------------- pyramid
def cvvdp_bands(height: int, width: int, ppd: float) -> list[float]:
    """Spatial frequency (cpd) of each band, the last one being the baseband (its CSF uses 0.1 cpd)."""
    max_levels = math.floor(math.log2(min(height, width))) - 1
    below = [k for k, f in enumerate([1.0] + [0.3228 * 2.0 ** -k for k in range(14)]) if f * ppd / 2.0 <= _MIN_FREQ]
    max_band = below[0] if below else max_levels
    levels = int(min(max(max_band + 1, 0), max_levels))
    return [f * ppd / 2.0 for f in [1.0] + [0.3228 * 2.0 ** -k for k in range(levels)]]


def _kernel(x: torch.Tensor) -> torch.Tensor:
    a = _KERNEL_A
    return _t([0.25 - a / 2.0, 0.25, a, 0.25, 0.25 - a / 2.0], x)


def cvvdp_reduce_ref(x: torch.Tensor) -> torch.Tensor:
    """One pyramid reduction (N, C, H, W) -> (N, C, ceil(H/2), ceil(W/2)) with pycvvdp's edge handling."""
    n, c, h, w = x.shape
    k = _kernel(x)
    y_a = F.conv2d(x.reshape(-1, 1, h, w), k.view(1, 1, 5, 1), stride=(2, 1), padding=(2, 0)).view(n, c, -1, w)
    y_a[..., 0, :] += x[..., 0, :] * k[1] + x[..., 1, :] * k[0]
    rows_odd = h % 2 == 1
    if rows_odd:
        y_a[..., -1, :] += x[..., -1, :] * k[3] + x[..., -2, :] * k[4]
    else:
        y_a[..., -1, :] += x[..., -1, :] * k[4]
    hh = y_a.shape[-2]
    y = F.conv2d(y_a.reshape(-1, 1, hh, w), k.view(1, 1, 1, 5), stride=(1, 2), padding=(0, 2)).view(n, c, hh, -1)
    y[..., :, 0] += y_a[..., :, 0] * k[1] + y_a[..., :, 1] * k[0]
    if rows_odd:  # sic: the column rule follows the parity of the rows
        y[..., :, -1] += y_a[..., :, -1] * k[3] + y_a[..., :, -2] * k[4]
    else:
        y[..., :, -1] += y_a[..., :, -1] * k[4]
    return y


def _interleave(x: torch.Tensor, size: int, dim: int) -> torch.Tensor:
    """Zeros between samples, 2 px of pad each side; the first/last sample is copied into the pad."""
    shape = list(x.shape)
    shape[dim] = size + 4
    z = x.new_zeros(shape)
    zz = z.movedim(dim, -1)
    xx = x.movedim(dim, -1)
    zz[..., 2:-2:2] = xx
    zz[..., 0] = xx[..., 0]
    zz[..., -2 + size % 2] = xx[..., -1]
    return z


def cvvdp_expand_ref(x: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """Expand (N, C, h, w) to (N, C, *size) with pycvvdp's ``gausspyr_expand``."""
    n, c = x.shape[:2]
    k2 = _kernel(x) * 2
    y_a = _interleave(x, size[0], -2)
    hh, w = y_a.shape[-2:]
    y_a = F.conv2d(y_a.reshape(-1, 1, hh, w), k2.view(1, 1, 5, 1)).view(n, c, -1, w)
    y = _interleave(y_a, size[1], -1)
    hh, ww = y.shape[-2:]
    return F.conv2d(y.reshape(-1, 1, hh, ww), k2.view(1, 1, 1, 5)).view(n, c, hh, -1)


def cvvdp_contrast_pyramid_ref(dkl: torch.Tensor, n_bands: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Weber-contrast pyramid of one image: per band the contrast (N, 3, h, w) (middle bands already doubled)
    and log10 of its background luminance (N, 1, h, w), or (N, 1, 1, 1) for the baseband."""
    gauss = [dkl]
    for _ in range(n_bands - 1):
        gauss.append(cvvdp_reduce_ref(gauss[-1]))
    bands, log_bkg = [], []
    for i in range(n_bands):
        if i == n_bands - 1:
            layer = gauss[i]
            bkg = gauss[i][:, :1].clamp(min=0.01).mean(dim=(-2, -1), keepdim=True)
        else:
            expanded = cvvdp_expand_ref(gauss[i + 1], (gauss[i].shape[-2], gauss[i].shape[-1]))
            layer = gauss[i] - expanded
            bkg = expanded[:, :1].clamp(min=0.01)
        contrast = (layer / bkg).clamp(max=1000.0)
        bands.append(contrast * 2.0 if 0 < i < n_bands - 1 else contrast)
        log_bkg.append(torch.log10(bkg))
    return bands, log_bkg


# ----------------------------------------------------------------------------------------------------------- CSF
@cached(maxsize=None)
def lut_field(name: str) -> tuple:
    return _frozen(csf_lut()[name])


SUSTAINED_LUTS = ("o0_c1", "o0_c2", "o0_c3")  # castleCSF tables of the sustained channels (Y, RG, YV)
TEMPORAL_LUTS = SUSTAINED_LUTS + ("o5_c1",)  # video adds the transient achromatic channel (5 Hz)


def cvvdp_sensitivity_lut_ref(rho: float, like: torch.Tensor, fields: tuple[str, ...] = SUSTAINED_LUTS
                              ) -> torch.Tensor:
    """log10 castleCSF sensitivity (C, L) of the channels whose tables are ``fields`` (default: the three
    sustained ones) at ``rho`` cpd on each luminance of the table (linear in log rho, with extrapolation), in
    ``like``'s dtype and device."""
    log_rho = torch.log10(_t(lut_field("rho"), like))
    q = torch.log10(_t(rho, like))
    i = (torch.searchsorted(log_rho, q.reshape(1)) - 1).clamp(0, log_rho.numel() - 2)
    x0, x1 = log_rho[i], log_rho[i + 1]
    rows = []
    for field in fields:
        table = _t(lut_field(field), like)  # (luminance, frequency)
        y0, y1 = table[:, i].squeeze(-1), table[:, i + 1].squeeze(-1)
        rows.append(y0 + (y1 - y0) / (x1 - x0) * (q - x0))  # (luminance,)
    return torch.stack(rows)


def cvvdp_sensitivity_from_lut_ref(log_bkg: torch.Tensor, lut: torch.Tensor,
                                   params: CVVDPParams | None = None) -> torch.Tensor:
    """Sensitivity (N, C, h, w) on a background of log10 luminance ``log_bkg`` (N, 1, h, w) from the (C, L) table
    of :func:`cvvdp_sensitivity_lut_ref` (linear in log L_bkg, clamped to the table), with the correction."""
    params = params or cvvdp_params()
    log_l = torch.log10(_t(lut_field("L_bkg"), log_bkg))
    n = log_l.numel()
    pos = ((log_bkg - log_l[0]) / (log_l[-1] - log_l[0]) * (n - 1)).clamp(0, n - 1)
    frac = torch.frac(pos)
    i_lo = pos.detach().to(torch.int64)
    i_hi = (i_lo + 1).clamp(max=n - 1)
    corr = 10.0 ** (_t(params.sensitivity_correction, log_bkg) / 20.0)
    out = []
    for c in range(lut.shape[0]):
        log_s = lut[c][i_lo] * (1.0 - frac) + lut[c][i_hi] * frac
        out.append(10 ** log_s * corr)
    return torch.cat(out, dim=1)


def cvvdp_sensitivity_ref(rho: float, log_bkg: torch.Tensor, params: CVVDPParams | None = None,
                          fields: tuple[str, ...] = SUSTAINED_LUTS) -> torch.Tensor:
    """castleCSF sensitivity (N, C, h, w) of the channels of ``fields`` (default: the three sustained ones) at
    ``rho`` cpd on a background of log10 luminance ``log_bkg`` (N, 1, h, w), including the sensitivity
    correction."""
    return cvvdp_sensitivity_from_lut_ref(log_bkg, cvvdp_sensitivity_lut_ref(rho, log_bkg, fields), params)


# ------------------------------------------------------------------------------------------------------- masking
def gauss_taps(sigma: float, like: torch.Tensor) -> torch.Tensor:
    """The masking blur's taps (4 sigma + 1, normalised), formed in ``like``'s dtype as torchvision does."""
    size = int(sigma * 4) + 1
    half = (size - 1) * 0.5
    xs = torch.linspace(-half, half, size, dtype=like.dtype, device=like.device)
    g = torch.exp(-0.5 * (xs / sigma) ** 2)
    return g / g.sum()


def _gauss_blur(x: torch.Tensor, sigma: float) -> torch.Tensor:
    """Gaussian blur (N, C, h, w), 4 sigma + 1 taps, reflect edges (torchvision's ``GaussianBlur``), separable."""
    g = gauss_taps(sigma, x)
    size = g.numel()
    n, c, h, w = x.shape
    p = size // 2
    y = F.pad(x.reshape(-1, 1, h, w), (p, p, p, p), mode="reflect")
    y = F.conv2d(y, g.view(1, 1, size, 1))
    return F.conv2d(y, g.view(1, 1, 1, size)).view(n, c, h, w)


def _gauss_blur_axis(x: torch.Tensor, sigma: float, dim: int) -> torch.Tensor:
    """One pass of :func:`_gauss_blur` along ``dim`` (-2: rows, -1: columns); the two passes compose to it."""
    g = gauss_taps(sigma, x)
    size = g.numel()
    n, c, h, w = x.shape
    p = size // 2
    pad = (0, 0, p, p) if dim == -2 else (p, p, 0, 0)
    y = F.pad(x.reshape(-1, 1, h, w), pad, mode="reflect")
    return F.conv2d(y, g.view(1, 1, size, 1) if dim == -2 else g.view(1, 1, 1, size)).view(n, c, h, w)


def _mask_pool(c: torch.Tensor, params: CVVDPParams) -> torch.Tensor:
    """Cross-channel masking over the C channels of ``c`` (N, C, h, w): ``M[j] = sum_k C[k] 2^xcm[k, j]``."""
    n_ch = c.shape[1]
    weights = (2 ** _t(params.xcm_weights, c)).view(4, 4)[:n_ch, :]
    return torch.cat([(c * weights[:, j].view(1, n_ch, 1, 1)).sum(dim=1, keepdim=True) for j in range(n_ch)],
                     dim=1)


def _masked_difference(abs_diff: torch.Tensor, blurred: torch.Tensor, params: CVVDPParams) -> torch.Tensor:
    """D from |T' - R'| and blur(min(|T'|, |R'|)), both (N, C, h, w) (C = 3 sustained or 4 with transient)."""
    m_mm = blurred * 10 ** _t(params.mask_c, blurred)
    n_ch = blurred.shape[1]
    q = _t(params.mask_q[:n_ch], blurred).view(1, n_ch, 1, 1)
    m = _mask_pool(safe_pow(m_mm.abs(), q), params)
    d_u = safe_pow(abs_diff, _t(params.mask_p, blurred)) / (1 + m)
    max_v = 10 ** _t(params.d_max, blurred)
    return max_v * d_u / (max_v + d_u)


def cvvdp_mask_diff_ref(test: torch.Tensor, ref: torch.Tensor, sens: torch.Tensor,
                        blurred: torch.Tensor) -> torch.Tensor:
    """The masking step after the phase-uncertainty blur: D (N, 3, h, w) from the test/reference contrasts, the
    sensitivity and ``blurred`` = blur(min(|T'|, |R'|)) (not yet scaled by 10^mask_c); all (N, 3, h, w)."""
    params = cvvdp_params()
    gain = _gain(test)
    t_p = test * sens * gain
    r_p = ref * sens * gain
    return _masked_difference((t_p - r_p).abs(), blurred, params)


def cvvdp_masking_input_ref(test: torch.Tensor, ref: torch.Tensor, sens: torch.Tensor) -> torch.Tensor:
    """blur(min(|T'|, |R'|)) (N, 3, h, w), the input of the mutual masking (the blur only when both sides > 6)."""
    params = cvvdp_params()
    gain = _gain(test)
    m = torch.minimum((test * sens * gain).abs(), (ref * sens * gain).abs())
    pad = int(params.pu_dilate * 2)
    if params.pu_dilate != 0 and m.shape[-2] > pad and m.shape[-1] > pad:
        m = _gauss_blur(m, params.pu_dilate)
    return m


def cvvdp_band_diff_ref(test: torch.Tensor, ref: torch.Tensor, sens: torch.Tensor, baseband: bool,
                        mask_diff=cvvdp_mask_diff_ref) -> torch.Tensor:
    """Visible difference D (N, 3, h, w) of one band from test/reference contrasts and the sensitivity;
    ``mask_diff`` computes :func:`cvvdp_mask_diff_ref` (the metric passes its GPU kernel)."""
    if baseband:
        return (test - ref).abs() * sens
    return mask_diff(test, ref, sens, cvvdp_masking_input_ref(test, ref, sens))


# ------------------------------------------------------------------------------------------------------- pooling
def _lp(x: torch.Tensor, p: float, dim, n: float = 1.0) -> torch.Tensor:
    pt = _t(p, x)
    return safe_pow(safe_pow(x, pt).sum(dim=dim) / n, 1 / pt)


def cvvdp_met2jod_ref(q: torch.Tensor, params: CVVDPParams | None = None) -> torch.Tensor:
    """Pooled difference -> JOD: 10 - jod_a Q^jod_exp, continued linearly below Q = 0.1."""
    params = params or cvvdp_params()
    jod_a, jod_exp = _t(params.jod_a, q), _t(params.jod_exp, q)
    slope = jod_a * _JOD_Q_T ** (jod_exp - 1.0)
    high = 10.0 - jod_a * q.clamp(min=_JOD_Q_T) ** jod_exp  # clamped so the unused branch has finite gradients
    return torch.where(q <= _JOD_Q_T, 10.0 - slope * q, high)


def _channel_weights(x: torch.Tensor, params: CVVDPParams, n_ch: int = 3) -> torch.Tensor:
    """Weights of the channels Y-sustained, RG, YV and (video) Y-transient, the first ``n_ch`` of them."""
    return _t([1.0, params.ch_chrom_w, params.ch_chrom_w, params.ch_trans_w][:n_ch], x)


def cvvdp_pool_ref(band_q: torch.Tensor, params: CVVDPParams | None = None) -> torch.Tensor:
    """Per-band, per-channel pooled differences (N, 3, B) -> JOD (N,)."""
    params = params or cvvdp_params()
    w = _channel_weights(band_q, params).view(1, 3, 1).expand(1, 3, band_q.shape[-1]).clone()
    w[:, :, -1] = w[:, :, -1] * _t(params.baseband_weight[:3], band_q)
    q_sc = _lp(band_q * w, params.beta_sch, dim=2)
    q_tc = _lp(q_sc, params.beta_tch, dim=1)
    return cvvdp_met2jod_ref(q_tc * _t(params.image_int, q_tc), params)


def cvvdp_heatmap_ref(diffs: list[torch.Tensor], params: CVVDPParams | None = None,
                      expand=cvvdp_expand_ref) -> torch.Tensor:
    """pycvvdp's "raw" heatmap (N, 1, H, W) in [0, 1] (0 = no visible difference) from the per-band D (N, C, h, w);
    ``expand(x, size)`` is :func:`cvvdp_expand_ref` (the metric passes its GPU kernel). C = 3 is a still image
    (weighted by ``image_int``), C = 4 a video frame's sustained and transient channels."""
    params = params or cvvdp_params()
    last = len(diffs) - 1
    bands = []
    for b, d in enumerate(diffs):
        n_ch = d.shape[1]
        w = _channel_weights(d, params, n_ch) * (_t(params.image_int, d) if n_ch == 3 else 1.0)
        if b == last:
            w = w * _t(params.baseband_weight[:n_ch], d)
        d_chr = _lp(d * w.view(1, n_ch, 1, 1), params.beta_tch, dim=1).unsqueeze(1)
        bands.append(d_chr / 2.0 if 0 < b < last else d_chr)
    img = bands[-1]
    for b in range(last - 1, -1, -1):
        img = expand(img, (bands[b].shape[-2], bands[b].shape[-1])) + bands[b]
    return 1.0 - cvvdp_met2jod_ref(img, params) / 10.0


# ---------------------------------------------------------------------- fused stages (the GPU path's op twins)
# The GPU path computes the same pipeline in a few fused kernels; these are their twins, each composed of the
# steps above. Per band of the reference: contrast and sensitivity (``cvvdp_ref_band_ref``); per band of the test
# image: masker input and |T' - R'| (``cvvdp_test_band_ref``), the masking blur's vertical pass
# (``cvvdp_masker_vblur_ref``), then its horizontal pass, the masked difference and the per-row sums of D^beta
# (``cvvdp_band_pool_ref``).
def cvvdp_expand_op_ref(x: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """:func:`cvvdp_expand_ref` with the size as two ints (the op's signature)."""
    return cvvdp_expand_ref(x, (height, width))


def cvvdp_linear_dkl_op_ref(rgb: torch.Tensor, peak_luminance: float, black_level: float, reflected: float,
                            exposure: float, rgb2xyz: list[float], eotf: int = 0,
                            hlg_gamma: float = 1.2) -> torch.Tensor:
    """:func:`cvvdp_linear_dkl_ref` with the display's photometry as numbers (the op's signature); ``rgb2xyz``
    holds the 3 x 3 matrix row by row, ``eotf`` indexes :data:`.data.EOTFS` and ``hlg_gamma`` is the HLG system
    gamma (read for HLG only)."""
    display = SimpleNamespace(peak_luminance=peak_luminance, black_level=black_level, reflected=reflected,
                              exposure=exposure, rgb2xyz=tuple(tuple(rgb2xyz[3 * r:3 * r + 3]) for r in range(3)),
                              eotf=EOTFS[eotf], hlg_gamma=hlg_gamma)
    return cvvdp_linear_dkl_ref(rgb, display)


def _band_contrast(g: torch.Tensor, g_next: torch.Tensor, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Weber contrast (N, 3, h, w) of a non-baseband band (times ``scale``: 2 for middle bands) and its
    background luminance (N, 1, h, w), as :func:`cvvdp_contrast_pyramid_ref`."""
    expanded = cvvdp_expand_ref(g_next, (g.shape[-2], g.shape[-1]))
    bkg = expanded[:, :1].clamp(min=0.01)
    contrast = ((g - expanded) / bkg).clamp(max=1000.0)
    return (contrast * 2.0 if scale == 2.0 else contrast), bkg


def cvvdp_ref_band_ref(g: torch.Tensor, g_next: torch.Tensor, rho: float, scale: float) -> torch.Tensor:
    """Reference side of one non-baseband band from Gaussian levels ``g`` (N, 3, h, w) and ``g_next`` (N, 3,
    ceil(h/2), ceil(w/2)): contrast (channels 0-2) and CSF sensitivity at ``rho`` (3-5), (N, 6, h, w)."""
    contrast, bkg = _band_contrast(g, g_next, scale)
    return torch.cat([contrast, cvvdp_sensitivity_ref(rho, torch.log10(bkg))], dim=1)


def cvvdp_test_band_ref(g: torch.Tensor, g_next: torch.Tensor, ref_contrast: torch.Tensor, sens: torch.Tensor,
                        scale: float) -> torch.Tensor:
    """Test side of one non-baseband band: ``min(|T'|, |R'|)`` (channels 0-2, the masking blur's input) and
    ``|T' - R'|`` (3-5), (N, 6, h, w); ``ref_contrast`` and ``sens`` (N or 1, 3, h, w) from the reference."""
    test, _ = _band_contrast(g, g_next, scale)
    gain = _gain(test)
    t_p = test * sens * gain
    r_p = ref_contrast * sens * gain
    return torch.cat([torch.minimum(t_p.abs(), r_p.abs()), (t_p - r_p).abs()], dim=1)


def masking_blur_applies(height: int, width: int) -> bool:
    """Whether :func:`cvvdp_masking_input_ref` blurs a band of this size."""
    params = cvvdp_params()
    pad = int(params.pu_dilate * 2)
    return params.pu_dilate != 0 and height > pad and width > pad


def cvvdp_masker_vblur_ref(m: torch.Tensor) -> torch.Tensor:
    """The masking blur's vertical pass (N, 3, h, w) (reflect edges; only for bands it applies to)."""
    return _gauss_blur_axis(m, cvvdp_params().pu_dilate, -2)


def cvvdp_band_pool_ref(vblurred: torch.Tensor, band: torch.Tensor, blur: bool, with_map: bool) -> torch.Tensor:
    """The rest of a band after :func:`cvvdp_test_band_ref`: the blur's horizontal pass of ``vblurred`` (N, C, h,
    w) (``blur`` False: ``vblurred`` is the unblurred masker), the masked difference D and, per row, the sum of
    ``safe_pow(D, beta)``; ``band`` (N, 2C, h, w) holds |T' - R'| in its last C channels (C = 3, or 4 for video).
    Returns (N, C, h, w + 1) (D, then the row sums in the last column) with ``with_map``, else (N, C, h, 1)."""
    params = cvvdp_params()
    blurred = _gauss_blur_axis(vblurred, params.pu_dilate, -1) if blur else vblurred
    d = _masked_difference(band[:, vblurred.shape[1]:], blurred, params)
    rows = safe_pow(d, _t(params.beta, d)).sum(dim=-1, keepdim=True)
    return torch.cat([d, rows], dim=-1) if with_map else rows


# -------------------------------------------------------------------------------------------------- whole metric
def cvvdp_prepare_ref(ref: torch.Tensor, display: CVVDPDisplay) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Reference side: per band its contrast (N, 3, h, w) and the CSF sensitivity (N, 3, h, w) or (N, 3, 1, 1)
    for the baseband (the sensitivity depends on the reference only)."""
    params = cvvdp_params()
    freqs = cvvdp_bands(ref.shape[-2], ref.shape[-1], display.ppd)
    bands, log_bkg = cvvdp_contrast_pyramid_ref(cvvdp_linear_dkl_ref(ref, display), len(freqs))
    last = len(freqs) - 1
    sens = [cvvdp_sensitivity_ref(_BASEBAND_RHO if b == last else freqs[b], log_bkg[b], params)
            for b in range(len(freqs))]
    return bands, sens


def cvvdp_compare_ref(ref_bands: list[torch.Tensor], sens: list[torch.Tensor], dist: torch.Tensor,
                      display: CVVDPDisplay, return_map: bool = False, mask_diff=cvvdp_mask_diff_ref):
    """Test side against a prepared reference (:func:`cvvdp_prepare_ref`); see :func:`cvvdp_ref`."""
    params = cvvdp_params()
    t_bands, _ = cvvdp_contrast_pyramid_ref(cvvdp_linear_dkl_ref(dist, display), len(ref_bands))
    last = len(ref_bands) - 1
    diffs = [cvvdp_band_diff_ref(t, r, s, b == last, mask_diff)
             for b, (t, r, s) in enumerate(zip(t_bands, ref_bands, sens))]
    pooled = [_lp(d, params.beta, dim=(-2, -1), n=float(d.shape[-2] * d.shape[-1])) for d in diffs]
    jod = cvvdp_pool_ref(torch.stack(pooled, dim=-1), params)
    if return_map:
        return jod, cvvdp_heatmap_ref(diffs, params)
    return jod


def cvvdp_ref(ref: torch.Tensor, dist: torch.Tensor, display: CVVDPDisplay,
              return_map: bool = False) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """ColorVideoVDP JOD (N,) of floating sRGB images ``ref``, ``dist`` (N, 3, H, W) in [0, 1]; with
    ``return_map`` also the per-pixel heatmap (N, 1, H, W)."""
    bands, sens = cvvdp_prepare_ref(ref, display)
    return cvvdp_compare_ref(bands, sens, dist, display, return_map)
