"""libvmaf's integer ADM on the CPU, compiled with numba: the twin's integer sums, bit for bit.

One fused pass per scale streams the band rows: for band row ``i`` it runs the wavelet of both frames (the ``a``
band goes to memory: the next scale's input), the decoupling and both CSFs of the row (kept in a ring of 3 rows:
``r``, ``a`` and the orientation sums of the two ``flt`` planes) and the denominator's row sums; once row ``i + 1``
is in the ring, the contrast masking (DLM and AIM) of row ``i``. So a 1080p scale touches memory only
for its input and its ``a`` bands. Integers are int64 with libvmaf's int16/int32 stores wrapped explicitly; the
float steps are the twin's (:func:`~fusedsim.families.adm.twin.scales_from_sums`).

Threads split the frames of a batch, or, with fewer frames than threads, the rows of each scale (each row chunk
recomputes its two halo rows).

Every per-pixel loop vectorises, which is most of the speed (a 1080p frame ~11.5 ms on one AVX-512 core, as
libvmaf's own): the helpers are inlined, branches are selects, loops start at column 0 (numba wraps every index
from a start it cannot prove non-negative) and a loop reads few enough arrays for LLVM's run-time overlap checks.
"""

from __future__ import annotations

import functools

import numba
import numpy as np
import torch
from numba import njit, prange, types
from numba.cpython.unsafe.numbers import leading_zeros
from numba.extending import overload

from fusedsim.core.cpu.int32 import abs32, add32, mul32, shl32, shr32, sub32, to16
from fusedsim.core.cpu.parallel import parallel_kernel
from fusedsim.core.cpu.samples import unsigned_samples
from fusedsim.families.adm.ops import integer_adm
from fusedsim.families.adm.twin import (
    COS_1DEG_SQ,
    DWT_SHIFTS,
    check_frame_size,
    div_lookup,
    geometry,
    scale_plans,
    scales_from_sums,
)

__all__ = ["integer_adm_numba", "integer_adm_numba_sums"]

# per-scale integer constants, one row per scale (see _constants)
_C_T, _C_B, _C_L, _C_R = 0, 1, 2, 3
_C_IRF = 4  # 3 entries
_C_DEN_SHIFT, _C_DEN_ROW = 7, 8
_C_CM = 9  # 3 entries
_C_CM_ROW = 12
_C_VADD, _C_VSH, _C_HADD, _C_HSH = 13, 14, 15, 16
_NC = 17


@njit(cache=True, nogil=True)
def _mirror(k, n):  # pragma: no cover - compiled
    if k < 0:
        return -k
    if k >= n:
        return 2 * n - 1 - k
    return k


@njit(cache=True, nogil=True, inline="always")
def _w16(x):  # pragma: no cover - compiled
    return np.int64(np.int16(x))


@njit(cache=True, nogil=True, inline="always")
def _w32(x):  # pragma: no cover - compiled
    return np.int64(np.int32(x))


@njit(cache=True, nogil=True, inline="always")
def _lo32(p0, p1, p2, p3):  # pragma: no cover - compiled
    """The wavelet's low-pass taps on four samples, in int32."""
    return add32(add32(mul32(15826, p0), mul32(27411, p1)), sub32(mul32(7345, p2), mul32(4240, p3)))


@njit(cache=True, nogil=True, inline="always")
def _hi32(p0, p1, p2, p3):  # pragma: no cover - compiled
    """The wavelet's high-pass taps on four samples, in int32."""
    return add32(sub32(mul32(-4240, p0), mul32(7345, p1)), sub32(mul32(27411, p2), mul32(15826, p3)))


@njit(cache=True, nogil=True, inline="always")
def _c32(x):  # pragma: no cover - compiled
    """A constant known to fit int32, sign-extended, so that products with it use 32x32->64-bit multiplies."""
    return np.int64(np.int32(x))


@njit(cache=True, nogil=True, inline="always")
def _dwt_row(src, i, s0, bpc, cs, tlo, thi, ba, bv, bh, bd):  # pragma: no cover - compiled
    """Band row ``i`` (a, v, h, d) of one image ``src`` (the pixels at scale 0, else the previous ``a`` band)."""
    n_in, w_in = src.shape
    r0 = _mirror(2 * i - 1, n_in)
    r1 = _mirror(2 * i, n_in)
    r2 = _mirror(2 * i + 1, n_in)
    r3 = _mirror(2 * i + 2, n_in)
    x0 = src[r0]
    x1 = src[r1]
    x2 = src[r2]
    x3 = src[r3]
    if s0:  # samples of at most 12 bits: every sum fits int32, so the rows go on 32-bit lanes (core.cpu.int32)
        half = np.int32(1 << (bpc - 1))
        off = np.int32(half - 46342 * half)
        sh = np.int32(bpc)
        for j in range(w_in):
            tlo[j] = to16(shr32(add32(_lo32(x0[j], x1[j], x2[j], x3[j]), off), sh))
            thi[j] = to16(shr32(add32(_hi32(x0[j], x1[j], x2[j], x3[j]), half), sh))
    elif cs[_C_VSH] == 0:  # scale 1 reads scale 0's 16-bit a band, with no shift: every sum fits int32
        for j in range(w_in):
            tlo[j] = _lo32(x0[j], x1[j], x2[j], x3[j])
            thi[j] = _hi32(x0[j], x1[j], x2[j], x3[j])
    else:
        vadd = cs[_C_VADD]
        vsh = cs[_C_VSH]
        for j in range(w_in):
            p0 = np.int64(x0[j])
            p1 = np.int64(x1[j])
            p2 = np.int64(x2[j])
            p3 = np.int64(x3[j])
            tlo[j] = _w32((15826 * p0 + 27411 * p1 + 7345 * p2 - 4240 * p3 + vadd) >> vsh)
            thi[j] = _w32((-4240 * p0 - 7345 * p1 + 27411 * p2 - 15826 * p3 + vadd) >> vsh)
    hadd = cs[_C_HADD]
    hsh = cs[_C_HSH]
    w_out = (w_in + 1) // 2
    # interior outputs read 2j-1 .. 2j+2 without mirroring; the few border ones go through _hout
    j_hi = max(1, min(w_out, (w_in - 3) // 2 + 1))
    _hout(tlo, thi, 0, w_in, s0, hadd, hsh, ba, bv, bh, bd)
    if s0:  # int16 band values: the sums stay below 54822 * 32768 + 32768 < 2**31
        hadd32 = np.int32(hadd)
        hsh32 = np.int32(hsh)
        for j in range(1, j_hi):
            c = 2 * j
            l0, l1, l2, l3 = tlo[c - 1], tlo[c], tlo[c + 1], tlo[c + 2]
            h0, h1, h2, h3 = thi[c - 1], thi[c], thi[c + 1], thi[c + 2]
            ba[j] = to16(shr32(add32(_lo32(l0, l1, l2, l3), hadd32), hsh32))
            bv[j] = to16(shr32(add32(_hi32(l0, l1, l2, l3), hadd32), hsh32))
            bh[j] = to16(shr32(add32(_lo32(h0, h1, h2, h3), hadd32), hsh32))
            bd[j] = to16(shr32(add32(_hi32(h0, h1, h2, h3), hadd32), hsh32))
        j_lo = j_hi
    else:
        j_lo = 1
    for j in range(j_lo, j_hi):
        c = 2 * j
        l0 = tlo[c - 1]
        l1 = tlo[c]
        l2 = tlo[c + 1]
        l3 = tlo[c + 2]
        h0 = thi[c - 1]
        h1 = thi[c]
        h2 = thi[c + 1]
        h3 = thi[c + 2]
        a = (15826 * l0 + 27411 * l1 + 7345 * l2 - 4240 * l3 + hadd) >> hsh
        v = (-4240 * l0 - 7345 * l1 + 27411 * l2 - 15826 * l3 + hadd) >> hsh
        h = (15826 * h0 + 27411 * h1 + 7345 * h2 - 4240 * h3 + hadd) >> hsh
        d = (-4240 * h0 - 7345 * h1 + 27411 * h2 - 15826 * h3 + hadd) >> hsh
        if s0:
            ba[j] = _w16(a)
            bv[j] = _w16(v)
            bh[j] = _w16(h)
            bd[j] = _w16(d)
        else:
            ba[j] = _w32(a)
            bv[j] = _w32(v)
            bh[j] = _w32(h)
            bd[j] = _w32(d)
    for j in range(max(j_hi, 1), w_out):
        _hout(tlo, thi, j, w_in, s0, hadd, hsh, ba, bv, bh, bd)


@njit(cache=True, nogil=True)
def _hout(tlo, thi, j, w_in, s0, hadd, hsh, ba, bv, bh, bd):  # pragma: no cover - compiled
    """Horizontal pass of output ``j`` with the border rule (the first and last outputs)."""
    c0 = _mirror(2 * j - 1, w_in)
    c1 = 2 * j
    c2 = _mirror(2 * j + 1, w_in)
    c3 = _mirror(2 * j + 2, w_in)
    l0 = tlo[c0]
    l1 = tlo[c1]
    l2 = tlo[c2]
    l3 = tlo[c3]
    h0 = thi[c0]
    h1 = thi[c1]
    h2 = thi[c2]
    h3 = thi[c3]
    a = (15826 * l0 + 27411 * l1 + 7345 * l2 - 4240 * l3 + hadd) >> hsh
    v = (-4240 * l0 - 7345 * l1 + 27411 * l2 - 15826 * l3 + hadd) >> hsh
    h = (15826 * h0 + 27411 * h1 + 7345 * h2 - 4240 * h3 + hadd) >> hsh
    d = (-4240 * h0 - 7345 * h1 + 27411 * h2 - 15826 * h3 + hadd) >> hsh
    if s0:
        ba[j] = _w16(a)
        bv[j] = _w16(v)
        bh[j] = _w16(h)
        bd[j] = _w16(d)
    else:
        ba[j] = _w32(a)
        bv[j] = _w32(v)
        bh[j] = _w32(h)
        bd[j] = _w32(d)


@njit(cache=True, nogil=True, inline="always")
def _grow(r, o, t, k, angle, egl):  # pragma: no cover - compiled
    """The enhancement rule inside 1 degree: ``min(r*egl, t)`` (o > 0) or ``max(r*egl, t)`` (o < 0), truncated;
    written as selects so that the loop vectorises."""
    rd = np.float64(r) * egl
    td = np.float64(t)
    up = np.int64(rd if rd < td else td)
    down = np.int64(rd if rd > td else td)
    grow = angle & (k > 0)
    return up if (grow & (o > 0)) else (down if (grow & (o < 0)) else r)


@njit(cache=True, nogil=True, inline="always")
def _restored0(o, t, d, angle, egl):  # pragma: no cover - compiled
    """libvmaf's restored value of one scale-0 coefficient (``|o| <= 32768``), given the division table's entry
    ``d = div[o + 32768]``."""
    kt = (d * t + 16384) >> 15
    k = np.int64(32768) if o == 0 else min(max(kt, np.int64(0)), np.int64(32768))
    return _grow(np.int64(shr32(add32(mul32(k, o), 16384), 15)), o, t, k, angle, egl)  # |k * o| <= 2**30


@njit(cache=True, nogil=True, inline="always")
def _csf(x, irf, theta, s0):  # pragma: no cover - compiled
    if s0:
        if theta == 2:  # bits 17-32 of the product: 64-bit (irf depends on the viewing geometry)
            return _w16((irf * x + 65535) >> 17)
        # bits 15-30: the product's low 32 bits decide them whatever its size, so int32 lanes (core.cpu.int32)
        return to16(shr32(add32(mul32(irf, x), 16384), 15))
    return _w32((irf * x + 134217728) >> 28)


@njit(cache=True, nogil=True, inline="always")
def _flt(v, s0):  # pragma: no cover - compiled
    if s0:
        return to16(shr32(add32(mul32(4369, abs32(v)), 2048), 12))
    return _w32((143165577 * abs(v) - 2147483648) >> 32)


@njit(cache=True, nogil=True, inline="always")
def _centre(v, s0):  # pragma: no cover - compiled
    if s0:
        return to16(shr32(add32(mul32(8738, abs32(v)), 2048), 12))
    return _w32((286331153 * abs(v) - 2147483648) >> 32)


@njit(cache=True, nogil=True, inline="always")
def _cm_val(s, thr, irf, theta, s0, c):  # pragma: no cover - compiled
    """One orientation's contribution of one pixel: signal ``s`` (a band value), threshold ``thr``."""
    if s0:  # libvmaf wraps these steps to 32 bits, which int32 lanes do exactly; the squares need 64
        x32 = sub32(abs32(mul32(s, irf)), shl32(thr, 12 if theta == 2 else 10))
        x = np.int64(x32) if x32 > 0 else np.int64(0)
        sq = 30 if theta == 2 else 29
        x2 = _w32((x * x + (np.int64(1) << (sq - 1))) >> sq)
    else:
        x = _w32((s * irf + 134217728) >> 28)
        x = _w32(abs(x) - thr)
        if x < 0:
            x = np.int64(0)
        x2 = _w32((x * x + 536870912) >> 30)
    add = (np.int64(1) << (c - 1)) if c > 0 else np.int64(0)
    return (x2 * x + add) >> c


@njit(cache=True, nogil=True, inline="always")
def _within_1deg(oh, ov, th, tv, cos2):  # pragma: no cover - compiled
    """libvmaf's angle test: the distorted (h, v) vector within 1 degree of the reference's (float32 products)."""
    dp = np.float64(np.float32(oh * th + ov * tv)) / 4096.0
    om = np.float64(np.float32(oh * oh + ov * ov)) / 4096.0
    tm = np.float64(np.float32(th * th + tv * tv)) / 4096.0
    return (dp >= 0.0) & (dp * dp >= cos2 * om * tm)


@njit(cache=True, nogil=True, inline="always")
def _within_1deg0(oh, ov, th, tv, cos2):  # pragma: no cover - compiled
    """:func:`_within_1deg` of scale 0's int16 coefficients: each product on int32 lanes (at most 2**30), their
    sum exact in float64, so each float32 is the same rounding of the same integer."""
    dp = np.float64(np.float32(np.float64(mul32(oh, th)) + np.float64(mul32(ov, tv)))) / 4096.0
    om = np.float64(np.float32(np.float64(mul32(oh, oh)) + np.float64(mul32(ov, ov)))) / 4096.0
    tm = np.float64(np.float32(np.float64(mul32(th, th)) + np.float64(mul32(tv, tv)))) / 4096.0
    return (dp >= 0.0) & (dp * dp >= cos2 * om * tm)


@njit(cache=True, nogil=True, inline="always")
def _put(out, j, rh, rv, rd, ah, av, ad, cs, s0):  # pragma: no cover - compiled
    """Column ``j`` of the ring's planes: r_h, r_v, r_d, a_h, a_v, a_d, sum of flt(CSF(a)), sum of flt(CSF(r))."""
    i0 = _c32(cs[_C_IRF])
    i1 = _c32(cs[_C_IRF + 1])
    i2 = _c32(cs[_C_IRF + 2])
    out[0, j] = rh
    out[1, j] = rv
    out[2, j] = rd
    out[3, j] = ah
    out[4, j] = av
    out[5, j] = ad
    out[6, j] = _flt(_csf(ah, i0, 0, s0), s0) + _flt(_csf(av, i1, 1, s0), s0) + _flt(_csf(ad, i2, 2, s0), s0)
    out[7, j] = _flt(_csf(rh, i0, 0, s0), s0) + _flt(_csf(rv, i1, 1, s0), s0) + _flt(_csf(rd, i2, 2, s0), s0)


@njit(cache=True, nogil=True, inline="always")
def _reduced(o):  # pragma: no cover - compiled
    """libvmaf's reduction of a scales 1-3 coefficient to 15 bits for the division table: ``(m, sh)`` with
    ``sh = max(bit_length(|o|) - 15, 0)`` and ``m = |o|`` rounded right by ``sh`` (``m = |o|`` below 2**15)."""
    ao = abs(o)
    sh = max(np.int64(64 - leading_zeros(np.uint64(ao))) - 15, np.int64(0))
    return (ao + ((np.int64(1) << sh) >> 1)) >> sh, sh


@njit(cache=True, nogil=True, inline="always")
def _restored(o, t, d, sh, angle, egl):  # pragma: no cover - compiled
    """libvmaf's restored value of one scales 1-3 coefficient, given its division-table entry ``d`` and shift
    ``sh`` (:func:`_reduced`); every branch a select."""
    sign = np.int64(-1) if o < 0 else np.int64(1)
    kt = ((d * t) * sign + (np.int64(1) << (14 + sh))) >> (15 + sh)
    k = np.int64(32768) if o == 0 else min(max(kt, np.int64(0)), np.int64(32768))
    return _grow((k * o + 16384) >> 15, o, t, k, angle, egl)


@njit(cache=True, nogil=True, inline="always")
def _decouple_row(bo, bt, ring, slot, cs, egl, cos2, div, dv):  # pragma: no cover - compiled
    """Decoupling and both CSFs of one band row of scales 1-3 into ``ring[slot]`` (:func:`_put`'s planes), over
    the whole row in two loops as at scale 0 (:func:`_decouple_row0`): the reductions and the division table's
    look-ups first (into ``dv``), then the arithmetic, which vectorises."""
    ov_, oh_, od_ = bo[1], bo[2], bo[3]
    tv_, th_, td_ = bt[1], bt[2], bt[3]
    n = bo.shape[1]
    for k in range(3):  # per band: the reduced coefficients' table indices (a loop that vectorises), then the
        band = bo[(2, 1, 3)[k]]  # look-ups alone (scalar loads)
        index = dv[k]
        for j in range(n):
            index[j] = _reduced(band[j])[0] + 32768
        for j in range(n):
            index[j] = div[np.uint64(index[j])]
    out = ring[slot]
    # the shifts are computed again rather than read from a buffer: one more array in this loop and LLVM's
    # run-time overlap checks exceed its limit, so it stays scalar
    for j in range(n):
        oh, ov, od, th, tv, td = oh_[j], ov_[j], od_[j], th_[j], tv_[j], td_[j]
        angle = _within_1deg(oh, ov, th, tv, cos2)
        rh = _restored(oh, th, dv[0, j], _reduced(oh)[1], angle, egl)
        rv = _restored(ov, tv, dv[1, j], _reduced(ov)[1], angle, egl)
        rd = _restored(od, td, dv[2, j], _reduced(od)[1], angle, egl)
        _put(out, j, rh, rv, rd, _w32(th - rh), _w32(tv - rv), _w32(td - rd), cs, False)


@njit(cache=True, nogil=True, inline="always")
def _decouple_row0(bo, bt, ring, slot, cs, egl, cos2, div, dv):  # pragma: no cover - compiled
    """:func:`_decouple_row` at scale 0 over the whole row, in two loops: the division table's look-ups first (into
    ``dv``; scale 0's coefficients index it directly), then the arithmetic without look-ups, which the compiler
    vectorises. Both loops start at column 0: from a start it cannot prove non-negative, numba wraps every index
    and the loop stays scalar (4x slower); the columns outside the masking's range are computed and never read."""
    ov_, oh_, od_ = bo[1], bo[2], bo[3]
    tv_, th_, td_ = bt[1], bt[2], bt[3]
    n = bo.shape[1]
    for j in range(n):
        dv[0, j] = div[np.uint64(oh_[j] + 32768)]
        dv[1, j] = div[np.uint64(ov_[j] + 32768)]
        dv[2, j] = div[np.uint64(od_[j] + 32768)]
    out = ring[slot]
    for j in range(n):
        oh, ov, od, th, tv, td = oh_[j], ov_[j], od_[j], th_[j], tv_[j], td_[j]
        angle = _within_1deg0(oh, ov, th, tv, cos2)
        rh = _restored0(oh, th, dv[0, j], angle, egl)
        rv = _restored0(ov, tv, dv[1, j], angle, egl)
        rd = _restored0(od, td, dv[2, j], angle, egl)
        _put(out, j, rh, rv, rd, _w16(th - rh), _w16(tv - rv), _w16(td - rd), cs, True)


@njit(cache=True, nogil=True, inline="always")
def _den_row(bo, s0, scale, cs, out_row):  # pragma: no cover - compiled
    """Denominator row sums of h, v, d over ``[L, R)`` (libvmaf's per-pixel shifts; the row shift comes later). The
    loops start at column 0 and mask the columns left of L: from a start numba cannot prove non-negative it wraps
    every index, and the loop stays scalar."""
    left = cs[_C_L]
    right = cs[_C_R]
    sh = cs[_C_DEN_SHIFT]
    add = (np.int64(1) << (sh - 1)) if sh > 0 else np.int64(0)
    q = 30 if scale == 2 else 31
    for k in range(3):
        band = bo[(2, 1, 3)[k]]
        acc = np.int64(0)
        if s0:
            for j in range(right):
                x = abs(band[j])
                acc += x * x * x if j >= left else 0
        else:
            for j in range(right):
                x = abs(band[j])
                acc += (((((x * x) + (np.int64(1) << q)) >> q) * x + add) >> sh) if j >= left else 0
        out_row[k] = acc


@njit(cache=True, nogil=True, inline="always")
def _masking(around, th, tv, td, sh, sv, sd, i0, i1, i2, ch, cv, cd, s0):  # pragma: no cover - compiled
    """One pixel's three contrast-masking terms: the threshold from the neighbourhood's filtered-CSF sum without
    the pixel (``around``) plus the centre weights of CSF(th, tv, td), applied to the signals (sh, sv, sd)."""
    thr = _w32(around + _centre(_csf(th, i0, 0, s0), s0) + _centre(_csf(tv, i1, 1, s0), s0)
               + _centre(_csf(td, i2, 2, s0), s0))
    return _cm_val(sh, thr, i0, 0, s0, ch), _cm_val(sv, thr, i1, 1, s0, cv), _cm_val(sd, thr, i2, 2, s0, cd)


@njit(cache=True, nogil=True, inline="always")
def _cm_row(ring, up, mid, dn, s0, cs, colsum, tri, w, num_row, aim_row):  # pragma: no cover - compiled
    """Contrast-masking row sums (DLM into ``num_row``, AIM into ``aim_row``) of the ring's row ``mid``. Three
    loops from column 0 that vectorise: the column sums of the three rows, their three-column sums (mirrored at
    the edges, as libvmaf's neighbours are) into ``tri``, then the per-pixel terms, masked left of L."""
    left = cs[_C_L]
    right = cs[_C_R]
    i0 = _c32(cs[_C_IRF])
    i1 = _c32(cs[_C_IRF + 1])
    i2 = _c32(cs[_C_IRF + 2])
    ch = cs[_C_CM]
    cv = cs[_C_CM + 1]
    cd = cs[_C_CM + 2]
    ru = ring[up]
    rm = ring[mid]
    rn = ring[dn]
    for p in range(2):
        col = colsum[p]
        for j in range(w):
            col[j] = ru[6 + p, j] + rm[6 + p, j] + rn[6 + p, j]
        t = tri[p]
        for j in range(1, w - 1):
            t[j] = col[j - 1] + col[j] + col[j + 1]
        t[0] = col[1] + col[0] + col[1]  # the left neighbour of column 0 is column 1
        t[w - 1] = col[w - 2] + col[w - 1] + col[w - 1]  # the right neighbour of the last column is itself
    nh = np.int64(0)
    nv = np.int64(0)
    nd = np.int64(0)
    ah_ = np.int64(0)
    av_ = np.int64(0)
    ad_ = np.int64(0)
    for j in range(right):
        inside = j >= left
        rh = rm[0, j]
        rv = rm[1, j]
        rd = rm[2, j]
        ah = rm[3, j]
        av = rm[4, j]
        ad = rm[5, j]
        # DLM: threshold from CSF(a), signal r; AIM: threshold from CSF(r), signal a
        h, v, d = _masking(tri[0, j] - rm[6, j], ah, av, ad, rh, rv, rd, i0, i1, i2, ch, cv, cd, s0)
        nh += h if inside else 0
        nv += v if inside else 0
        nd += d if inside else 0
        h, v, d = _masking(tri[1, j] - rm[7, j], rh, rv, rd, ah, av, ad, i0, i1, i2, ch, cv, cd, s0)
        ah_ += h if inside else 0
        av_ += v if inside else 0
        ad_ += d if inside else 0
    num_row[0] = nh
    num_row[1] = nv
    num_row[2] = nd
    aim_row[0] = ah_
    aim_row[1] = av_
    aim_row[2] = ad_


@njit(cache=True, nogil=True, inline="always")
def _scale_rows_any(s0, ref_src, dis_src, y0, y1, h, w, scale, bpc, cs, egl, cos2, div,
                    ref_a, dis_a, den_rows, num_rows, aim_rows):  # pragma: no cover - compiled
    """Band rows ``[y0, y1)`` of one scale: ``a`` bands, denominator and CM row sums of the rows in R. ``s0``
    (scale 0) is a constant in each caller below, so that each compiled body holds only its scale's branches."""
    w_in = ref_src.shape[1]
    top = cs[_C_T]
    bottom = cs[_C_B]
    # Every buffer holds int32: each value fits (band values are int16 at scale 0 and int32 after; restored
    # values are bounded by the bands; ring planes 6-7 and their 3x3 sums stay below 27 * 2**31 / 30). Loaded
    # values are then sign-extended from 32 bits, so LLVM multiplies them with 32x32->64-bit instructions
    # (vpmuldq) instead of full 64-bit ones (vpmullq: three micro-ops on Intel's cores). The arithmetic stays int64.
    tlo = np.empty(w_in, dtype=np.int32)
    thi = np.empty(w_in, dtype=np.int32)
    bo = np.empty((4, w), dtype=np.int32)
    bt = np.empty((4, w), dtype=np.int32)
    ring = np.zeros((3, 8, w), dtype=np.int32)
    colsum = np.zeros((2, w), dtype=np.int32)
    tri = np.zeros((2, w), dtype=np.int32)
    dv = np.empty((3, w), dtype=np.int32)  # the division-table entries of a row's coefficients
    last = y0 - 2  # last band row computed into the ring
    for i in range(y0, y1):
        need_lo = max(i - 1, 0)
        need_hi = min(i + 1, h - 1)
        if i == 0:
            need_hi = min(1, h - 1)
        for rr in range(max(last + 1, need_lo), need_hi + 1):
            own = y0 <= rr < y1  # this task's row: the a band goes straight to the next scale's input
            _dwt_row(ref_src, rr, s0, bpc, cs, tlo, thi, ref_a[rr] if own else bo[0], bo[1], bo[2], bo[3])
            _dwt_row(dis_src, rr, s0, bpc, cs, tlo, thi, dis_a[rr] if own else bt[0], bt[1], bt[2], bt[3])
            if own:
                if top <= rr < bottom:
                    _den_row(bo, s0, scale, cs, den_rows[rr])
            if top - 1 <= rr <= bottom:
                if s0:
                    _decouple_row0(bo, bt, ring, rr % 3, cs, egl, cos2, div, dv)
                else:
                    _decouple_row(bo, bt, ring, rr % 3, cs, egl, cos2, div, dv)
            last = rr
        if top <= i < bottom:
            up = 1 if i == 0 else i - 1
            dn = h - 1 if i == h - 1 else i + 1
            _cm_row(ring, up % 3, i % 3, dn % 3, s0, cs, colsum, tri, w, num_rows[i], aim_rows[i])


@njit(cache=True, nogil=True)
def _scale0_rows(ref_src, dis_src, y0, y1, h, w, scale, bpc, cs, egl, cos2, div,
                 ref_a, dis_a, den_rows, num_rows, aim_rows):  # pragma: no cover - compiled
    _scale_rows_any(True, ref_src, dis_src, y0, y1, h, w, 0, bpc, cs, egl, cos2, div,
                    ref_a, dis_a, den_rows, num_rows, aim_rows)


@njit(cache=True, nogil=True)
def _scale_n_rows(ref_src, dis_src, y0, y1, h, w, scale, bpc, cs, egl, cos2, div,
                  ref_a, dis_a, den_rows, num_rows, aim_rows):  # pragma: no cover - compiled
    _scale_rows_any(False, ref_src, dis_src, y0, y1, h, w, scale, bpc, cs, egl, cos2, div,
                    ref_a, dis_a, den_rows, num_rows, aim_rows)


def _scale_rows(ref_src, dis_src, y0, y1, h, w, scale, bpc, cs, egl, cos2, div,
                ref_a, dis_a, den_rows, num_rows, aim_rows):  # pragma: no cover - compiled
    """Band rows ``[y0, y1)`` of scale ``scale``: ``a`` bands, denominator and CM row sums of the rows in R.
    Resolved by type when compiled (below): scale 0 reads the 16-bit samples, scales 1-3 the int32 ``a`` bands."""
    raise NotImplementedError("called from compiled code only")


@overload(_scale_rows, jit_options={"cache": True, "nogil": True})
def _scale_rows_by_type(ref_src, dis_src, y0, y1, h, w, scale, bpc, cs, egl, cos2, div,
                        ref_a, dis_a, den_rows, num_rows, aim_rows):
    rows = _scale_n_rows if ref_src.dtype == types.int32 else _scale0_rows

    def impl(ref_src, dis_src, y0, y1, h, w, scale, bpc, cs, egl, cos2, div,
             ref_a, dis_a, den_rows, num_rows, aim_rows):  # pragma: no cover - compiled
        rows(ref_src, dis_src, y0, y1, h, w, scale, bpc, cs, egl, cos2, div, ref_a, dis_a, den_rows, num_rows,
             aim_rows)
    return impl


@njit(cache=True, nogil=True)
def _finish(rows, top, bottom, shift, out):  # pragma: no cover - compiled
    """libvmaf's per-row round-shift of row sums ``(h, 3)`` over ``[top, bottom)``, summed into ``out`` ``(3,)``."""
    add = (np.int64(1) << (shift - 1)) if shift > 0 else np.int64(0)
    for k in range(3):
        acc = np.int64(0)
        for i in range(top, bottom):
            acc += (rows[i, k] + add) >> shift
        out[k] = acc


@njit(cache=True, nogil=True)
def _collect(cs, scale, den, num, aim, out):  # pragma: no cover - compiled
    top = cs[_C_T]
    bottom = cs[_C_B]
    _finish(num, top, bottom, cs[_C_CM_ROW], out[scale, 0])
    _finish(den, top, bottom, cs[_C_DEN_SHIFT] if scale == 0 else cs[_C_DEN_ROW], out[scale, 1])
    _finish(aim, top, bottom, cs[_C_CM_ROW], out[scale, 2])


@njit(cache=True, nogil=True)
def _frame(ref, dis, bpc, consts, sizes, egl, cos2, div, out):  # pragma: no cover - compiled
    """All scales of one frame pair, serially, into ``out`` ``(4, 3, 3)``."""
    h = sizes[0, 0]
    w = sizes[0, 1]
    ra = np.empty((h, w), dtype=np.int32)
    da = np.empty((h, w), dtype=np.int32)
    den = np.zeros((h, 3), dtype=np.int64)
    num = np.zeros((h, 3), dtype=np.int64)
    aim = np.zeros((h, 3), dtype=np.int64)
    _scale_rows(ref, dis, 0, h, h, w, 0, bpc, consts[0], egl, cos2, div, ra, da, den, num, aim)
    _collect(consts[0], 0, den, num, aim, out)
    for scale in range(1, 4):
        h = sizes[scale, 0]
        w = sizes[scale, 1]
        ra2 = np.empty((h, w), dtype=np.int32)
        da2 = np.empty((h, w), dtype=np.int32)
        den = np.zeros((h, 3), dtype=np.int64)
        num = np.zeros((h, 3), dtype=np.int64)
        aim = np.zeros((h, 3), dtype=np.int64)
        _scale_rows(ra, da, 0, h, h, w, scale, bpc, consts[scale], egl, cos2, div, ra2, da2, den, num, aim)
        _collect(consts[scale], scale, den, num, aim, out)
        ra = ra2
        da = da2


@parallel_kernel
def _sums_by_frame(ref, dis, bpc, consts, sizes, egl, cos2, div):  # pragma: no cover - compiled
    n = ref.shape[0]
    out = np.zeros((n, 4, 3, 3), dtype=np.int64)
    for f in prange(n):
        _frame(ref[f], dis[f], bpc, consts, sizes, egl, cos2, div, out[f])
    return out


@parallel_kernel
def _scale_by_rows(ref_src, dis_src, h, w, scale, bpc, cs, egl, cos2, div, nchunks, out):  # pragma: no cover
    """One scale of one frame pair with its rows split into ``nchunks`` threads; returns the ``a`` bands."""
    ra = np.empty((h, w), dtype=np.int32)
    da = np.empty((h, w), dtype=np.int32)
    den = np.zeros((h, 3), dtype=np.int64)
    num = np.zeros((h, 3), dtype=np.int64)
    aim = np.zeros((h, 3), dtype=np.int64)
    step = (h + nchunks - 1) // nchunks
    for c in prange(nchunks):
        y0 = min(h, c * step)
        y1 = min(h, y0 + step)
        if y0 < y1:
            _scale_rows(ref_src, dis_src, y0, y1, h, w, scale, bpc, cs, egl, cos2, div, ra, da, den, num, aim)
    _collect(cs, scale, den, num, aim, out)
    return ra, da


def _sums_by_rows(ref, dis, bpc, consts, sizes, egl, cos2, div, nchunks) -> np.ndarray:
    """Frame by frame, each scale's rows split across threads (for batches smaller than the thread count)."""
    out = np.zeros((ref.shape[0], 4, 3, 3), dtype=np.int64)
    for f in range(ref.shape[0]):
        cur_r, cur_d = ref[f], dis[f]
        for scale in range(4):
            h, w = int(sizes[scale, 0]), int(sizes[scale, 1])
            cur_r, cur_d = _scale_by_rows(cur_r, cur_d, h, w, scale, bpc, consts[scale], egl, cos2, div,
                                          min(nchunks, h), out[f])
    return out


@functools.lru_cache(maxsize=1)
def _div_table() -> np.ndarray:
    """libvmaf's division table as int32 (its entries lie in [-2**30, 2**30])."""
    return div_lookup().numpy().astype(np.int32)


def _constants(height: int, width: int, plan_geometry: tuple[int, float, int, float]
               ) -> tuple[np.ndarray, np.ndarray]:
    """Per-scale integer constants ``(4, _NC)`` and band sizes ``(4, 2)`` for the kernels."""
    consts = np.zeros((4, _NC), dtype=np.int64)
    sizes = np.zeros((4, 2), dtype=np.int64)
    for p in scale_plans(height, width, plan_geometry):
        row = consts[p.scale]
        row[[_C_T, _C_B, _C_L, _C_R]] = p.top, p.bottom, p.left, p.right
        row[_C_IRF:_C_IRF + 3] = p.irf
        row[_C_DEN_SHIFT], row[_C_DEN_ROW] = p.den_shift, p.den_row_shift
        row[_C_CM:_C_CM + 3] = p.cm_shift
        row[_C_CM_ROW] = p.cm_row_shift
        if p.scale > 0:
            row[[_C_VADD, _C_VSH, _C_HADD, _C_HSH]] = DWT_SHIFTS[p.scale - 1]
        else:
            row[[_C_HADD, _C_HSH]] = 32768, 16
        sizes[p.scale] = p.height, p.width
    return consts, sizes


def integer_adm_numba_sums(ref: torch.Tensor, dist: torch.Tensor, bit_depth: int, gain_limit: float = 100.0,
                           csf_mode: int = 0, norm_view_dist: float = 3.0, ref_display_height: int = 1080,
                           noise_weight: float = 0.03125, *, row_chunks: int | None = None) -> torch.Tensor:
    """The twin's integer sums (``(N, 4, 3, 3)`` int64, see
    :func:`~fusedsim.families.adm.twin.integer_adm_sums_ref`) of integer frames ``(N, H, W)``.

    Threads take whole frames when the batch has at least as many frames as threads, else each scale's rows in
    ``numba.get_num_threads()`` chunks; ``row_chunks`` forces the row split with that many chunks."""
    check_frame_size(*ref.shape[-2:])
    r, d = unsigned_samples(ref), unsigned_samples(dist)
    if r.dtype != d.dtype:
        r, d = r.astype(np.uint16), d.astype(np.uint16)
    n, height, width = r.shape
    consts, sizes = _constants(height, width,
                               geometry(csf_mode, norm_view_dist, ref_display_height, noise_weight))
    args = (int(bit_depth), consts, sizes, float(gain_limit), COS_1DEG_SQ, _div_table())
    threads = numba.get_num_threads()
    if row_chunks is None and (n >= threads or threads == 1):
        sums = _sums_by_frame(r, d, *args)
    else:
        sums = _sums_by_rows(r, d, *args, max(1, row_chunks or threads))
    return torch.from_numpy(sums)


@integer_adm.cpu_kernel
def integer_adm_numba(ref: torch.Tensor, dist: torch.Tensor, bit_depth: int, gain_limit: float = 100.0,
                      csf_mode: int = 0, norm_view_dist: float = 3.0, ref_display_height: int = 1080,
                      noise_weight: float = 0.03125) -> torch.Tensor:
    """libvmaf's per-scale ``(num, den, aim)`` float32 of integer frames ``(N, H, W)`` on the CPU: ``(N, 4, 3)``,
    the twin's bits. Same contract as :func:`~fusedsim.families.adm.twin.integer_adm_ref`."""
    plan = (csf_mode, norm_view_dist, ref_display_height, noise_weight)
    sums = integer_adm_numba_sums(ref, dist, bit_depth, gain_limit, *plan)
    return scales_from_sums(sums, ref.shape[-2], ref.shape[-1], geometry(*plan)).to(ref.device)
