"""libvmaf 3.2.0's ``float_adm`` (``adm.c``, ``adm_tools.c``), float32 operation by operation: the twin.

Per frame pair (float luma from :func:`~.common_twin.to_vmaf_float`), four scales of a Daubechies-2 wavelet:

1. **DWT** (``adm_dwt2_s``): 4-tap float32 filters (``lo``, ``hi``), vertical then horizontal, output
   ``ceil(n/2)``; output ``i`` reads rows ``2i-1, 2i, 2i+1, 2i+2`` with ``-1 -> 1`` and ``n+k -> n-1-k`` (half-sample
   mirror at the end). ``a = lo(lo)``, ``v = hi(lo)``, ``h = lo(hi)``, ``d = hi(hi)`` (vertical(horizontal)); ``a``
   is the next scale's image.
2. **Decouple** (``adm_decouple_s``): ``k = clamp(t * rcp(o + 1e-30), 0, 1)`` per band (:func:`rcp_divide`),
   ``r = k*o``; where the angle test ``o.t >= 0 and (o.t)^2 >= float(cos^2 1deg) |o|^2 |t|^2`` holds,
   ``r = min(r*egl, t)`` for ``r > 0`` and ``max(r*egl, t)`` for ``r < 0`` (in double, stored as float32);
   ``a = t - r``.
3. **CSF** factors (Watson's quantisation step, :func:`csf_factors`): ``rf = 1/Q`` for h and v (theta 1), and d
   (theta 2), or the ``adm_f1sS`` / ``adm_f2sS`` overrides.
4. **Contrast masking** (``adm_cm_s``) over the region ``[top, h-top) x [left, w-left)``, ``left =
   trunc(w*0.1 - 0.5)``: ``x = |band * rf| - thr`` clamped at 0, ``thr`` the sum over the three bands of the
   3x3 neighbourhood of ``float(|rf*m|/30)`` (``m`` the masking band) with the centre replaced by
   ``|rf*m|/15`` (double constant, double sum; borders: ``-1 -> 1``, ``n -> n-1``); the sum of ``x**3`` per band
   (:func:`~.common_twin.row_major_sum`), then ``powf(sum, 1/3) + powf(area*nw, 1/3)``, bands summed in float32.
   ``num`` masks the restored bands ``r`` with the additive ones ``a``; ``aim`` masks ``a`` with ``r`` and no
   noise term.
5. **Denominator** (``adm_csf_den_scale_s``): the same cube-root sum of ``|rf * o|`` of the reference bands.

Per frame: ``adm2 = sum(num)/sum(den)`` (double sums of the float32 per-scale values; 1 when ``den`` sums under
``1e-10 * w*h / 1920 / 1080``), ``aim = min(sum(aim_num)/sum(den), 1)``, ``adm3 = max(adm2*dlmw + (1-aim)*(1-dlmw),
min_val)`` (or the harmonic mean with ``adm_adm3_apply_hm``), ``adm_scaleS = num_S / den_S`` in double.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from fusedsim.core.libm import powf_array
from fusedsim.families.vmaf_float.common_twin import f32, row_major_sum, to_vmaf_float
from fusedsim.families.vmaf_float.rcp_table import RCP_MANTISSA

__all__ = ["DWT_HI", "DWT_LO", "N_SCALES", "csf_factors", "dwt2", "finish_bands", "float_adm_ref", "rcp_divide"]

N_SCALES = 4
BORDER_FACTOR = 0.1
DWT_LO = (0.482962913144690, 0.836516303737469, 0.224143868041857, -0.129409522550921)
DWT_HI = (-0.129409522550921, -0.224143868041857, 0.836516303737469, -0.482962913144690)
ONE_BY_30 = 0.0333333351  # libvmaf's FLOAT_ONE_BY_30 / _15: double literals
ONE_BY_15 = 0.0666666701
_COS_1DEG_SQ = float(np.float32(math.cos(math.pi / 180.0) * math.cos(math.pi / 180.0)))
# Watson et al. 1997, as in adm_tools.h: luma model parameters and basis amplitudes A[lambda][theta] (float32)
_WATSON_A, _WATSON_K, _WATSON_F0 = 0.495, 0.466, 0.401
_WATSON_G = (1.501, 1.0, 0.534, 1.0)
_AMPLITUDES = ((0.62171, 0.67234, 0.72709, 0.67234), (0.34537, 0.41317, 0.49428, 0.41317),
               (0.18004, 0.22727, 0.28688, 0.22727), (0.091401, 0.11792, 0.15214, 0.11792))


def _f32(x: float) -> float:
    return float(np.float32(x))


def csf_factors(scale: int, norm_view_dist: float, ref_display_height: int,
                factors: tuple[float, ...] = (-1.0,) * 8) -> tuple[float, float]:
    """``(rf_hv, rf_d)`` (float32 values) of one scale: ``1.0f / Q`` with Watson's ``dwt_quant_step`` (float32
    ``r``, ``temp``, ``Q`` from double expressions; ``k*temp*temp`` in float32), or the overrides when >= 0."""
    r = _f32(norm_view_dist * ref_display_height * math.pi / 180.0)
    out = []
    for theta in (1, 2):
        temp = _f32(math.log10(2.0 ** (scale + 1) * _f32(_WATSON_F0) * _f32(_WATSON_G[theta]) / r))
        kt = np.float32(np.float32(_f32(_WATSON_K)) * np.float32(temp)) * np.float32(temp)
        q = _f32(2.0 * _f32(_WATSON_A) * math.pow(10.0, float(kt)) / _f32(_AMPLITUDES[scale][theta]))
        out.append(float(np.float32(1.0) / np.float32(q)))
    override = (factors[scale], factors[4 + scale])
    return tuple(float(np.float32(o)) if o >= 0 else v for o, v in zip(override, out))


def rcp_divide(n: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """libvmaf's ``DIVS(n, d) = n * rcp_s(d)``, ``rcp_s(x) = r + r * (1 - x * r)`` with ``r`` the vendor's
    ``rcpss`` (:mod:`.rcp_table`), all float32."""
    bits = d.view(torch.int32)
    e = (bits >> 23) & 0xFF
    table = torch.from_numpy(RCP_MANTISSA).to(d.device)
    mant = table[(bits >> 11) & 0xFFF] << 11
    r_bits = (bits & (-0x80000000)) | ((253 - e).clamp(0, 255) << 23) | mant
    r = r_bits.view(torch.float32)
    sign_inf = torch.where(d < 0, -math.inf, math.inf).to(torch.float32)
    r = torch.where(e == 0, sign_inf, torch.where(e >= 253, torch.zeros_like(r) * torch.sign(d), r))
    one = torch.ones((), dtype=torch.float32, device=d.device)
    r = r + r * (one - d * r)
    return n * r


def _dwt_rows(n: int, device: torch.device) -> torch.Tensor:
    """``(4, ceil(n/2))`` source indices of the 4 taps (``dwt2_src_indices_filt_s``)."""
    i = torch.arange((n + 1) // 2, device=device)
    idx = torch.stack([2 * i - 1, 2 * i, 2 * i + 1, 2 * i + 2])
    idx = torch.where(idx < 0, -idx, idx)
    return torch.where(idx >= n, 2 * n - idx - 1, idx)


def _taps(x: torch.Tensor, idx: torch.Tensor, taps: torch.Tensor, dim: int) -> torch.Tensor:
    acc = None
    for k in range(4):
        term = taps[k] * x.index_select(dim, idx[k])
        acc = term if acc is None else acc + term
    return acc


def dwt2(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(a, h, v, d)`` of float32 ``(N, h, w)``, each ``(N, ceil(h/2), ceil(w/2))``."""
    lo, hi = f32(DWT_LO, x.device), f32(DWT_HI, x.device)
    rows, cols = _dwt_rows(x.shape[-2], x.device), _dwt_rows(x.shape[-1], x.device)
    vlo, vhi = _taps(x, rows, lo, -2), _taps(x, rows, hi, -2)
    return _taps(vlo, cols, lo, -1), _taps(vhi, cols, lo, -1), _taps(vlo, cols, hi, -1), _taps(vhi, cols, hi, -1)


def _decouple(o: list[torch.Tensor], t: list[torch.Tensor], gain_limit: float):
    eps = f32([1e-30], o[0].device)[0]
    zero = torch.zeros((), dtype=torch.float32, device=o[0].device)
    one = torch.ones((), dtype=torch.float32, device=o[0].device)
    oh, ov, _ = o
    th, tv, _ = t
    ot_dp = oh * th + ov * tv
    o_mag = oh * oh + ov * ov
    t_mag = th * th + tv * tv
    angle = (ot_dp >= 0) & (ot_dp * ot_dp >= f32([_COS_1DEG_SQ], oh.device)[0] * o_mag * t_mag)
    rs, adds = [], []
    for ob, tb in zip(o, t):
        k = torch.clamp(rcp_divide(tb, ob + eps), zero, one)
        r = k * ob
        boosted = r.double() * gain_limit
        tb64 = tb.double()
        r = torch.where(angle & (r > 0), torch.minimum(boosted, tb64).to(torch.float32), r)
        r = torch.where(angle & (r < 0), torch.maximum(boosted, tb64).to(torch.float32), r)
        rs.append(r)
        adds.append(tb - r)
    return rs, adds


def _region(w: int, h: int) -> tuple[int, int, int, int]:
    left, top = int(w * BORDER_FACTOR - 0.5), int(h * BORDER_FACTOR - 0.5)
    return top, h - top, left, w - left


def _pow32(x: torch.Tensor, p: float) -> torch.Tensor:
    """``powf(x, p)`` per pixel (``adm_p_norm`` other than 3) as the double power rounded once: glibc's powf
    differs from it on a few floats in ten thousand (the per-band roots below use the C library's own)."""
    return torch.pow(x.double(), float(np.float32(p))).to(torch.float32)


def _powf(x: torch.Tensor, p: float) -> torch.Tensor:
    """The C library's ``powf(x, (float) p)`` of float32 ``x``: libvmaf's per-band roots, bit for bit (glibc's
    powf is not correctly rounded: 0.064 % of the positive floats differ from the rounded double power)."""
    return torch.from_numpy(powf_array(x.detach().cpu().numpy(), p)).to(x.device)


def _noise(w: int, h: int, weight: float, p_norm: float) -> float:
    return float(powf_array(np.float32(w * h * weight), 1.0 / p_norm))


def _power(x: torch.Tensor, p_norm: float) -> torch.Tensor:
    return x * x * x if p_norm == 3.0 else _pow32(x, p_norm)


def _neighbour_index(n: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    i = torch.arange(n, device=device)
    below = torch.where(i == 0, torch.ones_like(i), i - 1)
    above = torch.where(i == n - 1, i, i + 1)
    return below, above


def finish_bands(acc: torch.Tensor, width: int, height: int, noise_weight: float, p_norm: float) -> torch.Tensor:
    """A scale's value from its three band sums ``acc`` ``(N, 3)`` float32 (h, v, d) over a ``width x height``
    region: ``sum_b (powf(acc_b, 1/p) + powf(width*height*nw, 1/p))`` in float32, bands in order."""
    noise = _noise(width, height, noise_weight, p_norm)
    out = None
    for b in range(3):
        term = _powf(acc[..., b], 1.0 / p_norm) + noise
        out = term if out is None else out + term
    return out


def _masked_bands(src: list[torch.Tensor], mask: list[torch.Tensor], rf: tuple[float, float, float],
                  p_norm: float, bypass_cm: bool) -> torch.Tensor:
    """``adm_cm_s``'s band sums ``(N, 3)`` float32 of bands ``src`` masked by bands ``mask`` (CSF applied here)."""
    dev = src[0].device
    h, w = src[0].shape[-2:]
    rfs = [f32([v], dev)[0] for v in rf]
    thr = torch.zeros_like(src[0])
    if not bypass_cm:
        rows = _neighbour_index(h, dev)
        cols = _neighbour_index(w, dev)
        ri = (rows[0], torch.arange(h, device=dev), rows[1])
        ci = (cols[0], torch.arange(w, device=dev), cols[1])
        for m, rfac in zip(mask, rfs):
            csf = rfac * m
            flt = (ONE_BY_30 * csf.abs().double()).to(torch.float32)
            total = None
            for a in range(3):
                for b in range(3):
                    if a == 1 and b == 1:
                        centre = ONE_BY_15 * csf.abs().double()
                        total = (total.double() + centre).to(torch.float32)
                        continue
                    term = flt.index_select(-2, ri[a]).index_select(-1, ci[b])
                    total = term if total is None else total + term
            thr = thr + total
    top, bottom, left, right = _region(w, h)
    sums = []
    for band, rfac in zip(src, rfs):
        x = torch.clamp_min((band * rfac).abs() - thr, 0.0)
        sums.append(row_major_sum(_power(x, p_norm)[..., top:bottom, left:right]))
    return torch.stack(sums, dim=-1)


def _den_bands(bands: list[torch.Tensor], rf: tuple[float, float, float], p_norm: float) -> torch.Tensor:
    h, w = bands[0].shape[-2:]
    top, bottom, left, right = _region(w, h)
    sums = []
    for band, rfac in zip(bands, rf):
        a = (f32([rfac], band.device)[0] * band).abs()
        sums.append(row_major_sum(_power(a, p_norm)[..., top:bottom, left:right]))
    return torch.stack(sums, dim=-1)


def float_adm_ref(ref: torch.Tensor, dist: torch.Tensor, bit_depth: int, enhn_gain_limit: float = 100.0,
                  norm_view_dist: float = 3.0, ref_display_height: int = 1080, noise_weight: float = 0.03125,
                  p_norm: float = 3.0, bypass_cm: int = 0, skip_scale0: int = 0, f1s0: float = -1.0,
                  f1s1: float = -1.0, f1s2: float = -1.0, f1s3: float = -1.0, f2s0: float = -1.0, f2s1: float = -1.0,
                  f2s2: float = -1.0, f2s3: float = -1.0) -> torch.Tensor:
    """libvmaf's float ADM per-scale values of integer frames ``(N, H, W)``: ``(N, 12)`` float64 (float32 values),
    ``[num0, den0, aim_num0, num1, ...]`` (``.view(N, 4, 3)``). ``skip_scale0``: scale 0 is ``(0, 1e-10f, 0)``."""
    factors = (f1s0, f1s1, f1s2, f1s3, f2s0, f2s1, f2s2, f2s3)
    x = to_vmaf_float(ref, bit_depth)
    y = to_vmaf_float(dist, bit_depth)
    out = torch.zeros(x.shape[0], N_SCALES, 3, dtype=torch.float64, device=x.device)
    for scale in range(N_SCALES):
        xa, xh, xv, xd = dwt2(x)
        ya, yh, yv, yd = dwt2(y)
        x, y = xa, ya
        if scale == 0 and skip_scale0:
            out[:, 0, 1] = float(np.float32(1e-10))
            continue
        rf_hv, rf_d = csf_factors(scale, norm_view_dist, ref_display_height, factors)
        rf = (rf_hv, rf_hv, rf_d)
        o, t = [xh, xv, xd], [yh, yv, yd]
        restored, additive = _decouple(o, t, enhn_gain_limit)
        h, w = xh.shape[-2:]
        top, bottom, left, right = _region(w, h)
        area = (right - left, bottom - top)
        num = finish_bands(_masked_bands(restored, additive, rf, p_norm, bool(bypass_cm)), *area, noise_weight, p_norm)
        den = finish_bands(_den_bands(o, rf, p_norm), *area, noise_weight, p_norm)
        aim = finish_bands(_masked_bands(additive, restored, rf, p_norm, bool(bypass_cm)), *area, 0.0, p_norm)
        out[:, scale, 0], out[:, scale, 1], out[:, scale, 2] = num.double(), den.double(), aim.double()
    return out.flatten(1)
