"""libvmaf's float features on the CPU, compiled with numba: the twins' bits (:mod:`.vif_twin`, :mod:`.adm_twin`,
:mod:`.motion_twin`).

Threads take whole frames. Every step is the twins' float32 arithmetic in the twins' order: filters accumulate
their taps in order from 0, sums run along each row then down the row sums, and the few double steps are written
as doubles (numba's default emits no FMA contraction and no reassociation). The per-band roots are the C
library's ``powf``, as libvmaf's and the twin's; a per-pixel power (``adm_p_norm`` other than 3) is the double power
rounded once, as in the twin.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import torch
from numba import njit, prange

from fusedsim.core.cpu.borders import reflect101
from fusedsim.core.cpu.samples import integer_samples
from fusedsim.families.vmaf_float import adm_twin, motion_twin, vif_twin
from fusedsim.families.vmaf_float.ops import float_adm, float_motion_sad, float_vif
from fusedsim.families.vmaf_float.rcp_table import RCP_MANTISSA

__all__ = ["float_adm_numba", "float_motion_sad_numba", "float_vif_numba"]

_F = np.float32
_SCALE = {8: 1.0, 10: 4.0, 12: 16.0, 16: 256.0}


@njit(cache=True, nogil=True)
def _to_float(frame, scaler):
    """libvmaf's float picture: ``v / scaler - 128``. The scalers are powers of two, so ``v * (1 / scaler)`` is the
    same float32; a row loop without a branch vectorises (a 1080p 8-bit frame 2.6 -> ~0.3 ms on one core)."""
    h, w = frame.shape
    out = np.empty((h, w), np.float32)
    inv = np.float32(1.0) / np.float32(scaler)
    offset = np.float32(128.0)
    for i in range(h):
        src = frame[i]
        dst = out[i]
        for j in range(w):
            dst[j] = np.float32(src[j]) * inv - offset
    return out


@njit(cache=True, nogil=True)
def _filter_row(a, b, mode, taps, i, step, tmp, out):
    """Row ``i`` of the separable filter (vertical first) of ``a`` (mode 0), ``a*a`` (1) or ``a*b`` (2) at every
    ``step``-th column into ``out``; ``tmp`` (``w + taps - 1``) holds the vertical pass with mirrored columns.
    Loops run tap by tap over whole rows: each output still adds its taps in order (float32, ``a*a`` rounded
    before the tap), and the row loops vectorise: they index views with the bare loop counter or unsigned
    integers, where numba adds no negative-index wrap (a 17-tap pass of a 1080p frame 14-21 -> 3.0-4.1 ms)."""
    h, w = a.shape
    k = taps.shape[0]
    r = k // 2
    row = tmp[r:r + w]
    row[:] = 0.0
    for t in range(k):
        ii = reflect101(i - r + t, h)
        tap = taps[t]
        ar = a[ii]
        br = b[ii]
        if mode == 0:
            for j in range(w):
                row[j] = row[j] + tap * ar[j]
        elif mode == 1:
            for j in range(w):
                row[j] = row[j] + tap * (ar[j] * ar[j])
        else:
            for j in range(w):
                row[j] = row[j] + tap * (ar[j] * br[j])
    for p in range(1, r + 1):
        tmp[r - p] = tmp[r + reflect101(-p, w)]
        tmp[r + w - 1 + p] = tmp[r + reflect101(w - 1 + p, w)]
    out_w = out.shape[0]
    out[:] = 0.0
    for t in range(k):
        tap = taps[t]
        if step == 1:
            shifted = tmp[t:t + out_w]
            for oj in range(out_w):
                out[oj] = out[oj] + tap * shifted[oj]
        else:
            for oj in range(out_w):
                out[oj] = out[oj] + tap * tmp[np.uint64(oj * step + t)]


@njit(cache=True, nogil=True)
def _filter(a, b, mode, taps, step, out_h, out_w):
    """:func:`_filter_row` at every ``step``-th row: ``(out_h, out_w)``."""
    tmp = np.empty(a.shape[1] + taps.shape[0] - 1, np.float32)
    out = np.empty((out_h, out_w), np.float32)
    for oi in range(out_h):
        _filter_row(a, b, mode, taps, oi * step, step, tmp, out[oi])
    return out


@njit(cache=True, nogil=True)
def _log2f_row(args, out, poly, mant):
    """libvmaf's ``log2f`` approximation (``frexp``, then its polynomial in float32 at ``2m - 1``, plus ``e - 1``)
    of a row of float32 arguments >= 1 (normal, positive: libvmaf's ``1 + ...``): ``frexp`` read from the bits
    (the exponent field, the mantissa with the exponent of 0.5), so the loop vectorises. ``poly``: 9 coefficients,
    highest power first (:data:`~.vif_twin.LOG2_POLY`); ``mant``: int32 scratch of the row's length."""
    bits = args.view(np.int32)
    for j in range(args.shape[0]):
        mant[j] = (bits[j] & 0x7FFFFF) | (126 << 23)  # m in [0.5, 1): x = m * 2**e
    m = mant.view(np.float32)
    # libvmaf's 9 coefficients, Horner's steps written out (a loop over them inside the loop over j stays scalar)
    p0, p1, p2, p3, p4, p5, p6, p7, p8 = poly[0], poly[1], poly[2], poly[3], poly[4], poly[5], poly[6], poly[7], poly[8]
    for j in range(args.shape[0]):
        e = ((bits[j] >> 23) & 0xFF) - 126
        t = m[j] * np.float32(2.0) - np.float32(1.0)
        var = np.float32(0.0) * t + p0
        var = var * t + p1
        var = var * t + p2
        var = var * t + p3
        var = var * t + p4
        var = var * t + p5
        var = var * t + p6
        var = var * t + p7
        var = var * t + p8
        out[j] = np.float32(e - 1) + var


@njit(cache=True, nogil=True)
def _vif_scale(x, y, taps, gain_limit, sigma_nsq, poly):
    """One scale's (num, den) sums: per row, its filtered planes, the statistics and libvmaf's branches as selects
    into the two log2 arguments (and, where a branch replaces a log, its value), then the logs over the row
    (:func:`_log2f_row`), then the row sums in column order, as libvmaf adds them."""
    h, w = x.shape
    tmp = np.empty(w + taps.shape[0] - 1, np.float32)
    m1r = np.empty(w, np.float32)  # this row's filtered means, squares and product: no whole-frame planes
    m2r = np.empty(w, np.float32)
    xxr = np.empty(w, np.float32)
    yyr = np.empty(w, np.float32)
    xyr = np.empty(w, np.float32)
    eps = np.float32(1.0e-10)
    zero = np.float32(0.0)
    one = np.float32(1.0)
    egl = np.float32(gain_limit)
    snsq32 = np.float64(np.float32(sigma_nsq))
    sigma_max_inv = np.float32(np.float64(np.float32(snsq32 * snsq32)) / (255.0 * 255.0))  # powf, then double
    num_arg = np.empty(w, np.float32)
    den_arg = np.empty(w, np.float32)
    num_log = np.empty(w, np.float32)
    den_log = np.empty(w, np.float32)
    alt = np.empty(w, np.float32)  # num where s1 < sigma_nsq (den is 1 there)
    kind = np.empty(w, np.int8)  # 0: the logs, 1: num 0 (s12 < 0), 2: alt and 1
    mant = np.empty(w, np.int32)  # _log2f_row's scratch
    num_total = np.float32(0.0)
    den_total = np.float32(0.0)
    for i in range(h):
        _filter_row(x, y, 0, taps, i, 1, tmp, m1r)
        _filter_row(y, x, 0, taps, i, 1, tmp, m2r)
        _filter_row(x, y, 1, taps, i, 1, tmp, xxr)
        _filter_row(y, x, 1, taps, i, 1, tmp, yyr)
        _filter_row(x, y, 2, taps, i, 1, tmp, xyr)
        for j in range(w):
            m1 = m1r[j]
            m2 = m2r[j]
            s1 = xxr[j] - m1 * m1
            s2 = yyr[j] - m2 * m2
            s12 = xyr[j] - m1 * m2
            s1 = max(s1, zero)
            s2 = max(s2, zero)
            g = s12 / (s1 + eps)
            sv = s2 - g * s12
            low1 = s1 < eps
            g = zero if low1 else g
            sv = s2 if low1 else sv
            s1 = zero if low1 else s1
            low2 = s2 < eps
            g = zero if low2 else g
            sv = zero if low2 else sv
            neg = g < zero
            sv = s2 if neg else sv
            g = zero if neg else g
            sv = max(sv, eps)
            g = min(g, egl)
            num_arg[j] = np.float32(1.0 + np.float64(g * g * s1) / (np.float64(sv) + sigma_nsq))
            den_arg[j] = np.float32(1.0 + np.float64(s1) / sigma_nsq)
            alt[j] = one - s2 * sigma_max_inv
            kind[j] = 2 if np.float64(s1) < sigma_nsq else (1 if s12 < zero else 0)
        _log2f_row(num_arg, num_log, poly, mant)
        _log2f_row(den_arg, den_log, poly, mant)
        num_row = np.float32(0.0)
        den_row = np.float32(0.0)
        for j in range(w):
            k = kind[j]
            num_row = num_row + (num_log[j] if k == 0 else (zero if k == 1 else alt[j]))
            den_row = den_row + (one if k == 2 else den_log[j])
        num_total = num_total + num_row
        den_total = den_total + den_row
    return num_total, den_total


@njit(cache=True, nogil=True, parallel=True)
def _vif_frames(ref, dist, scaler, taps_flat, taps_start, gain_limit, sigma_nsq, skip_scale0, poly, out):
    for f in prange(ref.shape[0]):
        x = _to_float(ref[f], scaler)
        y = _to_float(dist[f], scaler)
        for scale in range(4):
            taps = taps_flat[taps_start[scale]:taps_start[scale + 1]]
            if scale > 0:
                h, w = x.shape
                x = _filter(x, y, 0, taps, 2, h // 2, w // 2)
                y = _filter(y, y, 0, taps, 2, h // 2, w // 2)
            if scale == 0 and skip_scale0:
                out[f, 0] = 0.0
                out[f, 1] = -1.0
                continue
            num, den = _vif_scale(x, y, taps, gain_limit, sigma_nsq, poly)
            out[f, 2 * scale] = num
            out[f, 2 * scale + 1] = den


@float_vif.cpu_kernel
def float_vif_numba(ref: torch.Tensor, dist: torch.Tensor, bit_depth: int, gain_limit: float = 100.0,
                    kernelscale: float = 1.0, sigma_nsq: float = 2.0, skip_scale0: int = 0) -> torch.Tensor:
    """:func:`~.vif_twin.float_vif_ref` on CPU tensors: ``(N, 8)`` float64."""
    filters = [vif_twin.vif_filter(s, kernelscale).numpy() for s in range(4)]
    start = np.cumsum([0] + [len(t) for t in filters]).astype(np.int64)
    out = np.empty((ref.shape[0], 8), np.float64)
    poly = np.array(vif_twin.LOG2_POLY, dtype=np.float32)
    if poly.shape[0] != 9:  # _log2f_row writes Horner's nine steps out
        raise RuntimeError(f"float_vif: the log2 polynomial has {poly.shape[0]} coefficients; the CPU kernel takes 9")
    _vif_frames(integer_samples(ref), integer_samples(dist), _SCALE[bit_depth], np.concatenate(filters).astype(np.float32), start,
                float(gain_limit), float(sigma_nsq), bool(skip_scale0), poly, out)
    return torch.from_numpy(out)


# --------------------------------------------------------------------------------------------------------- ADM
@njit(cache=True, nogil=True, inline="always")
def _dwt_index(i, k, n):
    v = 2 * i - 1 + k
    if v < 0:
        v = -v
    if v >= n:
        v = 2 * n - v - 1
    return v


@njit(cache=True, nogil=True)
def _dwt2(src, lo, hi):
    h, w = src.shape
    oh, ow = (h + 1) // 2, (w + 1) // 2
    a = np.empty((oh, ow), np.float32)
    bh = np.empty((oh, ow), np.float32)
    bv = np.empty((oh, ow), np.float32)
    bd = np.empty((oh, ow), np.float32)
    tlo = np.empty(w, np.float32)
    thi = np.empty(w, np.float32)
    for i in range(oh):
        r0, r1, r2, r3 = _dwt_index(i, 0, h), _dwt_index(i, 1, h), _dwt_index(i, 2, h), _dwt_index(i, 3, h)
        for j in range(w):
            s0, s1, s2, s3 = src[r0, j], src[r1, j], src[r2, j], src[r3, j]
            tlo[j] = lo[0] * s0 + lo[1] * s1 + lo[2] * s2 + lo[3] * s3
            thi[j] = hi[0] * s0 + hi[1] * s1 + hi[2] * s2 + hi[3] * s3
        for j in range(ow):
            c0, c1, c2, c3 = _dwt_index(j, 0, w), _dwt_index(j, 1, w), _dwt_index(j, 2, w), _dwt_index(j, 3, w)
            s0, s1, s2, s3 = tlo[c0], tlo[c1], tlo[c2], tlo[c3]
            a[i, j] = lo[0] * s0 + lo[1] * s1 + lo[2] * s2 + lo[3] * s3
            bv[i, j] = hi[0] * s0 + hi[1] * s1 + hi[2] * s2 + hi[3] * s3
            s0, s1, s2, s3 = thi[c0], thi[c1], thi[c2], thi[c3]
            bh[i, j] = lo[0] * s0 + lo[1] * s1 + lo[2] * s2 + lo[3] * s3
            bd[i, j] = hi[0] * s0 + hi[1] * s1 + hi[2] * s2 + hi[3] * s3
    return a, bh, bv, bd


@njit(cache=True, nogil=True, inline="always")
def _clamp01(k):
    if k < 0.0:
        return np.float32(0.0)
    if k > 1.0:
        return np.float32(1.0)
    return k


@njit(cache=True, nogil=True)
def _rcp_row(d, table, scale, out):
    """The vendor ``rcpss`` of a row of float32 ``d`` (see :mod:`.rcp_table`), then libvmaf's Newton step
    (``r + r * (1 - d * r)``), with ``frexp`` read from the bits so the loops vectorise: exponent
    field 0 (zeros, subnormals: biased exponent <= 0) gives the signed infinity, 253 and above the signed zero,
    else the table's mantissa times ``2**-e`` (exact in float32); then libvmaf's Newton step. ``scale``: int32
    scratch of the row's length."""
    bits = d.view(np.int32)
    for j in range(d.shape[0]):
        field = (bits[j] >> 23) & 0xFF
        scale[j] = min(max(253 - field, 1), 252) << 23  # 2**-e for field in 1..252 (clamped elsewhere: unused)
    two_to = scale.view(np.float32)
    inf = np.float32(np.inf)
    for j in range(d.shape[0]):
        b = bits[j]
        field = (b >> 23) & 0xFF
        negative = b < 0
        mag = np.float32((1.0 + table[np.uint64((b & 0x7FFFFF) >> 11)] / 4096.0) * np.float64(two_to[j]))
        r = mag
        r = np.float32(0.0) if field >= 253 else r
        r = inf if field == 0 else r
        r = -r if negative else r
        out[j] = r + r * (np.float32(1.0) - d[j] * r)


@njit(cache=True, nogil=True)
def _decouple(o, t, gain_limit, cos_sq, table):
    """Restored and additive bands ``(3, h, w)`` of reference bands ``o`` and distorted ``t`` ``(3, h, w)``: per row
    the angle test, then per band the reciprocals (:func:`_rcp_row`) and libvmaf's rules as selects, in its
    order, so each loop vectorises."""
    _, h, w = o.shape
    r = np.empty_like(o)
    a = np.empty_like(o)
    eps = np.float32(1e-30)
    angle = np.empty(w, np.bool_)
    denominator = np.empty(w, np.float32)
    rcp = np.empty(w, np.float32)
    scale = np.empty(w, np.int32)
    for i in range(h):
        ohr, ovr, thr, tvr = o[0, i], o[1, i], t[0, i], t[1, i]
        for j in range(w):
            oh, ov, th, tv = ohr[j], ovr[j], thr[j], tvr[j]
            ot_dp = oh * th + ov * tv
            o_mag = oh * oh + ov * ov
            t_mag = th * th + tv * tv
            angle[j] = (ot_dp >= 0.0) & (ot_dp * ot_dp >= cos_sq * o_mag * t_mag)
        for b in range(3):
            obr, tbr, rr, ar = o[b, i], t[b, i], r[b, i], a[b, i]
            for j in range(w):
                denominator[j] = obr[j] + eps
            _rcp_row(denominator, table, scale, rcp)
            for j in range(w):
                ob, tb = obr[j], tbr[j]
                k = _clamp01(tb * rcp[j])
                rv = k * ob
                grow = angle[j] & (rv > 0.0)
                rv = np.float32(min(np.float64(rv) * gain_limit, np.float64(tb))) if grow else rv
                shrink = angle[j] & (rv < 0.0)
                rv = np.float32(max(np.float64(rv) * gain_limit, np.float64(tb))) if shrink else rv
                rr[j] = rv
                ar[j] = tb - rv
    return r, a


@njit(cache=True, nogil=True, inline="always")
def _pow32(x, p):
    """Per-pixel ``powf`` (``adm_p_norm`` other than 3) as the twin computes it: the double power rounded once."""
    return np.float32(math.pow(np.float64(x), np.float64(np.float32(p))))


@njit(cache=True, nogil=True, inline="always")
def _powf(x, p):
    """The C library's ``powf`` (numba lowers a float32 power to it), as the twin's per-band roots."""
    return np.float32(x) ** np.float32(p)


@njit(cache=True, nogil=True, inline="always")
def _power(x, p_norm):
    if p_norm == 3.0:
        return x * x * x
    return _pow32(x, p_norm)


@njit(cache=True, nogil=True, inline="always")
def _region(n):
    edge = int(n * 0.1 - 0.5)
    return edge, n - edge


@njit(cache=True, nogil=True, inline="always")
def _noise(w, h, weight, p_norm):
    return _powf(np.float32(w * h * weight), 1.0 / p_norm)


@njit(cache=True, nogil=True)
def _masked(src, mask, rf, p_norm, noise_weight, bypass_cm):
    """``adm_cm_s``: the float32 value of bands ``src`` ``(3, h, w)`` masked by ``mask``."""
    _, h, w = src.shape
    flt = np.empty_like(mask)
    csf_abs = np.empty_like(mask)
    for b in range(3):
        for i in range(h):
            for j in range(w):
                c = abs(rf[b] * mask[b, i, j])
                csf_abs[b, i, j] = c
                flt[b, i, j] = np.float32(0.0333333351 * np.float64(c))
    top, bottom = _region(h)
    left, right = _region(w)
    acc = np.zeros(3, np.float32)
    for i in range(top, bottom):
        row = np.zeros(3, np.float32)
        iu = 1 if i == 0 else i - 1
        idn = i if i == h - 1 else i + 1
        for j in range(left, right):
            thr = np.float32(0.0)
            if not bypass_cm:
                jl = 1 if j == 0 else j - 1
                jr = j if j == w - 1 else j + 1
                for b in range(3):
                    s = flt[b, iu, jl]
                    s = s + flt[b, iu, j]
                    s = s + flt[b, iu, jr]
                    s = s + flt[b, i, jl]
                    s = np.float32(np.float64(s) + 0.0666666701 * np.float64(csf_abs[b, i, j]))
                    s = s + flt[b, i, jr]
                    s = s + flt[b, idn, jl]
                    s = s + flt[b, idn, j]
                    s = s + flt[b, idn, jr]
                    thr = thr + s
            for b in range(3):
                x = abs(src[b, i, j] * rf[b]) - thr
                if x < 0.0:
                    x = np.float32(0.0)
                row[b] = row[b] + _power(x, p_norm)
        for b in range(3):
            acc[b] = acc[b] + row[b]
    noise = _noise(right - left, bottom - top, noise_weight, p_norm)
    total = np.float32(0.0)
    for b in range(3):
        term = _powf(acc[b], 1.0 / p_norm) + noise
        total = term if b == 0 else total + term
    return total


@njit(cache=True, nogil=True)
def _den(o, rf, p_norm, noise_weight):
    _, h, w = o.shape
    top, bottom = _region(h)
    left, right = _region(w)
    acc = np.zeros(3, np.float32)
    for i in range(top, bottom):
        row = np.zeros(3, np.float32)
        for j in range(left, right):
            for b in range(3):
                row[b] = row[b] + _power(abs(rf[b] * o[b, i, j]), p_norm)
        for b in range(3):
            acc[b] = acc[b] + row[b]
    noise = _noise(right - left, bottom - top, noise_weight, p_norm)
    total = np.float32(0.0)
    for b in range(3):
        term = _powf(acc[b], 1.0 / p_norm) + noise
        total = term if b == 0 else total + term
    return total


@njit(cache=True, nogil=True, parallel=True)
def _adm_frames(ref, dist, scaler, lo, hi, rfs, gain_limit, noise_weight, p_norm, bypass_cm, skip_scale0, cos_sq,
                table, out):
    for f in prange(ref.shape[0]):
        x = _to_float(ref[f], scaler)
        y = _to_float(dist[f], scaler)
        for scale in range(4):
            xa, xh, xv, xd = _dwt2(x, lo, hi)
            ya, yh, yv, yd = _dwt2(y, lo, hi)
            x, y = xa, ya
            if scale == 0 and skip_scale0:
                out[f, 0] = 0.0
                out[f, 1] = np.float64(np.float32(1e-10))
                out[f, 2] = 0.0
                continue
            o = np.stack((xh, xv, xd))
            t = np.stack((yh, yv, yd))
            r, a = _decouple(o, t, gain_limit, cos_sq, table)
            rf = rfs[scale]
            out[f, 3 * scale] = _masked(r, a, rf, p_norm, noise_weight, bypass_cm)
            out[f, 3 * scale + 1] = _den(o, rf, p_norm, noise_weight)
            out[f, 3 * scale + 2] = _masked(a, r, rf, p_norm, 0.0, bypass_cm)


@float_adm.cpu_kernel
def float_adm_numba(ref: torch.Tensor, dist: torch.Tensor, bit_depth: int, gain_limit: float = 100.0,
                    norm_view_dist: float = 3.0, ref_display_height: int = 1080, noise_weight: float = 0.03125,
                    p_norm: float = 3.0, bypass_cm: int = 0, skip_scale0: int = 0, *factors: float) -> torch.Tensor:
    """:func:`~.adm_twin.float_adm_ref` on CPU tensors: ``(N, 12)`` float64."""
    factors = tuple(factors) + (-1.0,) * (8 - len(factors))
    rfs = np.empty((4, 3), np.float32)
    for s in range(4):
        hv, d = adm_twin.csf_factors(s, norm_view_dist, ref_display_height, factors)
        rfs[s] = (hv, hv, d)
    out = np.empty((ref.shape[0], 12), np.float64)
    _adm_frames(integer_samples(ref), integer_samples(dist), _SCALE[bit_depth], np.array(adm_twin.DWT_LO, np.float32),
                np.array(adm_twin.DWT_HI, np.float32), rfs, float(gain_limit), float(noise_weight), float(p_norm),
                bool(bypass_cm), bool(skip_scale0), np.float32(adm_twin._COS_1DEG_SQ), RCP_MANTISSA, out)
    return torch.from_numpy(out)


# ------------------------------------------------------------------------------------------------------ motion
@njit(cache=True, nogil=True)
def _mean_abs_difference(ba, bb):
    """libvmaf's motion score of two blurred frames: float32 row sums of ``|a - b|``, summed row by row, over the
    pixel count."""
    h, w = ba.shape
    total = np.float32(0.0)
    for i in range(h):
        row = np.float32(0.0)
        for j in range(w):
            row = row + abs(ba[i, j] - bb[i, j])
        total = total + row
    return total / np.float32(h * w)


@njit(cache=True, nogil=True, parallel=True)
def _motion_frames(prev, cur, scaler, taps, out):
    for f in prange(prev.shape[0]):
        h, w = prev.shape[1], prev.shape[2]
        a = _to_float(prev[f], scaler)
        b = _to_float(cur[f], scaler)
        ba = _filter(a, a, 0, taps, 1, h, w)
        bb = _filter(b, b, 0, taps, 1, h, w)
        out[f] = _mean_abs_difference(ba, bb)


@njit(cache=True, nogil=True, parallel=True)
def _motion_chain(frames, scaler, taps, n_chunks, out):
    """Scores of the consecutive pairs of ``frames`` (``(N + 1, H, W)``): each thread takes a run of pairs and
    blurs each frame of it once (the previous blurred frame is kept), N + n_chunks blurs instead of 2N."""
    n = frames.shape[0] - 1
    h, w = frames.shape[1], frames.shape[2]
    step = (n + n_chunks - 1) // n_chunks
    for c in prange(n_chunks):
        k0 = c * step
        k1 = min(n, k0 + step)
        if k0 >= k1:
            continue
        a = _to_float(frames[k0], scaler)
        ba = _filter(a, a, 0, taps, 1, h, w)
        for k in range(k0, k1):
            b = _to_float(frames[k + 1], scaler)
            bb = _filter(b, b, 0, taps, 1, h, w)
            out[k] = _mean_abs_difference(ba, bb)
            ba = bb


def motion_sad_numba(prev: np.ndarray, cur: np.ndarray, bit_depth: int, filter_size: int = 5) -> np.ndarray:
    """Scores ``(N,)`` float64 of integer frame pairs ``(N, H, W)`` as numpy arrays."""
    out = np.empty(prev.shape[0], np.float32)
    _motion_frames(prev, cur, _SCALE[bit_depth], np.array(motion_twin.motion_filter(filter_size), np.float32), out)
    return out.astype(np.float64)


def _consecutive(prev: torch.Tensor, cur: torch.Tensor) -> torch.Tensor | None:
    """The ``(N + 1, H, W)`` frames when ``cur[i]`` is ``prev[i + 1]`` in memory (``t[:-1], t[1:]``: how a clip's
    pairs are passed), else None."""
    n = prev.shape[0]
    if (n < 2 or prev.dtype != cur.dtype or prev.shape != cur.shape or prev.stride() != cur.stride()
            or prev.untyped_storage().data_ptr() != cur.untyped_storage().data_ptr()
            or cur.data_ptr() - prev.data_ptr() != prev.stride(0) * prev.element_size()):
        return None
    return prev.as_strided((n + 1, *prev.shape[1:]), prev.stride(), prev.storage_offset())


@float_motion_sad.cpu_kernel
def float_motion_sad_numba(prev: torch.Tensor, cur: torch.Tensor, bit_depth: int, filter_size: int = 5,
                           ) -> torch.Tensor:
    """:func:`~.motion_twin.float_motion_sad_ref` on CPU tensors: ``(N,)`` float64. Pairs of consecutive frames of
    one clip (``t[:-1], t[1:]``) blur each frame once, as libvmaf's extractor does."""
    taps = np.array(motion_twin.motion_filter(filter_size), np.float32)
    frames = _consecutive(prev, cur)
    if frames is None:
        return torch.from_numpy(motion_sad_numba(integer_samples(prev), integer_samples(cur), bit_depth, int(filter_size)))
    out = np.empty(prev.shape[0], np.float32)
    _motion_chain(integer_samples(frames), _SCALE[bit_depth], taps, max(1, min(numba.get_num_threads(), prev.shape[0])),
                  out)
    return torch.from_numpy(out.astype(np.float64))
