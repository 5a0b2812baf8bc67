"""libvmaf's integer ADM on the GPU (Triton), bit-identical to the twin and to libvmaf.

Two kernels per scale, each a batch of frames per launch, tiles of ``BLOCK_H`` band rows by a whole band row, and
one for the float steps:

1. :func:`_bands_kernel`: the wavelet of both frames (each output reads its 4x4 inputs: every vertical sum is
   recomputed by the two outputs that share it, which costs less than a trip through memory), the decoupling, both
   CSFs and the denominator's row sums. It stores the ``a`` bands (the next scale's input) and 8 int32 planes:
   ``r`` and ``a`` of h, v, d and the orientation sums of the two ``flt`` planes.
2. :func:`_cm_kernel`: contrast masking of the rows of R, DLM and AIM: the 3x3 threshold from the ``flt`` sums
   (9 loads each, from L1/L2), the centre CSF recomputed from ``r``/``a``, and the per-row sums.
3. :func:`_scales_kernel`: libvmaf's float steps (36 values per frame: the casts of
   :func:`~fusedsim.families.adm.twin.scales_from_sums` and glibc's ``powf(x, 1/3f)``, reproduced bit for bit by
   :mod:`fusedsim.families.adm.cube_root`), so the op's output never leaves the device: no host synchronisation.

A tile spans whole rows, so each row sum is complete in one program: it is round-shifted there as libvmaf does
per row and stored into the call's ``(N, 4, h, 9)`` buffer (no atomics, deterministic); one torch sum gives the
totals, and no per-scale host work remains.

Integers are int32 where libvmaf's are and the values cannot exceed them (the scale-0 wavelet, CSF and masking
inputs: Triton's int32 arithmetic wraps as libvmaf's does), int64 elsewhere; stores to int16/int32 wrap by
truncation. The float steps are the angle test (double multiplies and compares: nothing to contract) and
float-to-int truncation; kernels are compiled with ``enable_fp_fusion=False`` all the same.

Bytes per 1080p frame pair (8-bit): scale 0 reads 2 x 2.1 MB of pixels and writes 2 x 2.1 MB of ``a`` bands plus
8 x 2.1 MB of planes, which the CM kernel reads back (the 3x3 re-reads hit the caches): ~42 MB; scales 1-3 add a
third: ~56 MB per frame, ~19 us at an H100's ~3 TB/s. The int64 products (emulated by several int32 operations)
make the kernels compute-bound rather than memory-bound.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedsim.core.backend import triton_interpreting
from fusedsim.core.launch import device_constants, on_tensors_device
from fusedsim.families.adm.cube_root import powf_third, powf_third_tables
from fusedsim.families.adm.ops import integer_adm
from fusedsim.families.adm.twin import (
    COS_1DEG_SQ,
    DWT_SHIFTS,
    check_frame_size,
    div_lookup,
    geometry,
    scale_plans,
)

__all__ = ["integer_adm_fwd", "integer_adm_sums_fwd", "scales_from_sums_fwd"]

_PLANES = 8  # r_h, r_v, r_d, a_h, a_v, a_d, sum flt(CSF(a)), sum flt(CSF(r))
_ROW_SUMS = 9  # num h/v/d, den h/v/d, aim h/v/d
#: Work buffers per input pixel: scale 0's band planes are a quarter of the pixels, 10 int32 values each (the
#: ``a`` bands of both frames and the 8 planes: 10 bytes per pixel), the next scale's a quarter of that while both
#: are alive (12.5), the row sums a little more.
_BUFFER_BYTES_PER_PIXEL = 14


@triton.jit
def _mirror(k, n):
    """The wavelet's border rule: ``-1 -> 1``, ``n + i -> n - 1 - i``."""
    k = tl.where(k < 0, -k, k)
    return tl.where(k >= n, 2 * n - 1 - k, k)


@triton.jit
def _w16(x):
    return x.to(tl.int16).to(tl.int64)


@triton.jit
def _w32(x):
    return x.to(tl.int32).to(tl.int64)


@triton.jit
def _vert(ptr, r0, r1, r2, r3, c, ok, S0: tl.constexpr, BPC: tl.constexpr, VADD: tl.constexpr,
          VSH: tl.constexpr, MASK16: tl.constexpr):
    """Vertical low and high pass at input column offsets ``c`` (int32 at scale 0, int64 above)."""
    if S0:
        p0 = tl.load(ptr + r0 + c, mask=ok, other=0).to(tl.int32)
        p1 = tl.load(ptr + r1 + c, mask=ok, other=0).to(tl.int32)
        p2 = tl.load(ptr + r2 + c, mask=ok, other=0).to(tl.int32)
        p3 = tl.load(ptr + r3 + c, mask=ok, other=0).to(tl.int32)
        if MASK16:
            p0 = p0 & 0xFFFF
            p1 = p1 & 0xFFFF
            p2 = p2 & 0xFFFF
            p3 = p3 & 0xFFFF
        lo = (15826 * p0 + 27411 * p1 + 7345 * p2 - 4240 * p3 + ((1 << (BPC - 1)) * (1 - 46342))) >> BPC
        hi = (-4240 * p0 - 7345 * p1 + 27411 * p2 - 15826 * p3 + (1 << (BPC - 1))) >> BPC
        return lo.to(tl.int16).to(tl.int32), hi.to(tl.int16).to(tl.int32)
    else:
        p0 = tl.load(ptr + r0 + c, mask=ok, other=0).to(tl.int64)
        p1 = tl.load(ptr + r1 + c, mask=ok, other=0).to(tl.int64)
        p2 = tl.load(ptr + r2 + c, mask=ok, other=0).to(tl.int64)
        p3 = tl.load(ptr + r3 + c, mask=ok, other=0).to(tl.int64)
        lo = (15826 * p0 + 27411 * p1 + 7345 * p2 - 4240 * p3 + VADD) >> VSH
        hi = (-4240 * p0 - 7345 * p1 + 27411 * p2 - 15826 * p3 + VADD) >> VSH
        return _w32(lo), _w32(hi)


@triton.jit
def _dwt(ptr, r0, r1, r2, r3, c0, c1, c2, c3, ok, S0: tl.constexpr, BPC: tl.constexpr, VADD: tl.constexpr,
         VSH: tl.constexpr, HADD: tl.constexpr, HSH: tl.constexpr, MASK16: tl.constexpr):
    """Bands ``(a, v, h, d)`` (int64 holding libvmaf's int16/int32 values) at the tile's band positions."""
    l0, h0 = _vert(ptr, r0, r1, r2, r3, c0, ok, S0, BPC, VADD, VSH, MASK16)
    l1, h1 = _vert(ptr, r0, r1, r2, r3, c1, ok, S0, BPC, VADD, VSH, MASK16)
    l2, h2 = _vert(ptr, r0, r1, r2, r3, c2, ok, S0, BPC, VADD, VSH, MASK16)
    l3, h3 = _vert(ptr, r0, r1, r2, r3, c3, ok, S0, BPC, VADD, VSH, MASK16)
    a = (15826 * l0 + 27411 * l1 + 7345 * l2 - 4240 * l3 + HADD) >> HSH
    v = (-4240 * l0 - 7345 * l1 + 27411 * l2 - 15826 * l3 + HADD) >> HSH
    h = (15826 * h0 + 27411 * h1 + 7345 * h2 - 4240 * h3 + HADD) >> HSH
    d = (-4240 * h0 - 7345 * h1 + 27411 * h2 - 15826 * h3 + HADD) >> HSH
    if S0:  # int32 sums (they fit), stored as int16
        return _w16(a), _w16(v), _w16(h), _w16(d)
    else:
        return _w32(a), _w32(v), _w32(h), _w32(d)


@triton.jit
def _restore(o, t, angle, egl, div_ptr, ok):
    """libvmaf's restored coefficient (the scales 1-3 formula, equal to scale 0's where scale 0 can reach)."""
    ao = tl.abs(o)
    small = ao < 32768
    # bit length of |o| from its double's exponent (exact for |o| < 2**53)
    nbits = ((ao.to(tl.float64).to(tl.int64, bitcast=True) >> 52) & 0x7FF) - 1022
    sh = tl.where(small, 0, nbits - 15)
    one = tl.full(o.shape, 1, tl.int64)
    m = tl.where(small, ao, (ao + (one << tl.maximum(sh - 1, 0))) >> sh)
    recip = tl.load(div_ptr + m + 32768, mask=ok, other=0).to(tl.int64)
    sign = tl.where(o < 0, -1, 1).to(tl.int64)
    kt = ((recip * t) * sign + (one << (14 + sh))) >> (15 + sh)
    k = tl.where(o == 0, 32768, tl.minimum(tl.maximum(kt, 0), 32768))
    r = (k * o + 16384) >> 15
    grow = angle & (k > 0)
    rd = r.to(tl.float64) * egl
    td = t.to(tl.float64)
    up = tl.where(rd < td, rd, td).to(tl.int64)  # libvmaf's MIN, then truncation to int
    down = tl.where(rd > td, rd, td).to(tl.int64)
    r = tl.where(grow & (o > 0), up, r)
    return tl.where(grow & (o < 0), down, r)


@triton.jit
def _csf(x, irf, SH: tl.constexpr, ADD: tl.constexpr, S0: tl.constexpr):
    if S0:  # fits int32: |x| <= 32768, irf < 2**16
        return ((irf * x.to(tl.int32) + ADD) >> SH).to(tl.int16).to(tl.int32)
    else:
        return _w32((irf * x + 134217728) >> 28)


@triton.jit
def _flt(v, S0: tl.constexpr):
    if S0:
        return ((4369 * tl.abs(v) + 2048) >> 12).to(tl.int16).to(tl.int32)
    else:
        return ((143165577 * tl.abs(v) - 2147483648) >> 32).to(tl.int32)


@triton.jit
def _centre(v, S0: tl.constexpr):
    if S0:
        return ((8738 * tl.abs(v) + 2048) >> 12).to(tl.int16).to(tl.int32)
    else:
        return ((286331153 * tl.abs(v) - 2147483648) >> 32).to(tl.int32)


@triton.jit(do_not_specialize=["den_row_sh"])  # a shift of 1 would become a Python int
def _bands_kernel(ref_ptr, dis_ptr, ra_ptr, da_ptr, planes_ptr, rows_ptr, div_ptr, fc_ptr,
                  n_in, w_in, h, w, top, bottom, left, right, irf0, irf1, irf2, den_row_sh,
                  s_rn, s_rh, s_dn, s_dh, s_an, s_pn, s_pk, s_on,
                  S0: tl.constexpr, BPC: tl.constexpr, VADD: tl.constexpr, VSH: tl.constexpr,
                  HADD: tl.constexpr, HSH: tl.constexpr, DEN_SH: tl.constexpr, DEN_Q: tl.constexpr,
                  MASK16: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_W: tl.constexpr):
    """Wavelet, decoupling, CSFs and denominator row sums of ``BLOCK_H`` band rows of one frame pair."""
    pid = tl.program_id(0)
    f = tl.program_id(1).to(tl.int64)
    rows = pid * BLOCK_H + tl.arange(0, BLOCK_H)[:, None]
    cols = tl.arange(0, BLOCK_W)[None, :]
    ok = (rows < h) & (cols < w)
    r0 = _mirror(2 * rows - 1, n_in).to(tl.int64)
    r1 = _mirror(2 * rows, n_in).to(tl.int64)
    r2 = _mirror(2 * rows + 1, n_in).to(tl.int64)
    r3 = _mirror(2 * rows + 2, n_in).to(tl.int64)
    c0 = _mirror(2 * cols - 1, w_in)
    c1 = _mirror(2 * cols, w_in)
    c2 = _mirror(2 * cols + 1, w_in)
    c3 = _mirror(2 * cols + 2, w_in)
    rbase = ref_ptr + f * s_rn
    dbase = dis_ptr + f * s_dn
    oa, ov, oh, od = _dwt(rbase, r0 * s_rh, r1 * s_rh, r2 * s_rh, r3 * s_rh, c0, c1, c2, c3, ok,
                          S0, BPC, VADD, VSH, HADD, HSH, MASK16)
    ta, tv, th, td = _dwt(dbase, r0 * s_dh, r1 * s_dh, r2 * s_dh, r3 * s_dh, c0, c1, c2, c3, ok,
                          S0, BPC, VADD, VSH, HADD, HSH, MASK16)
    pix = rows.to(tl.int64) * w + cols
    egl = tl.load(fc_ptr)  # doubles: a float scalar argument would be float32
    cos2 = tl.load(fc_ptr + 1)
    tl.store(ra_ptr + f * s_an + pix, oa.to(tl.int32), mask=ok)
    tl.store(da_ptr + f * s_an + pix, ta.to(tl.int32), mask=ok)

    # decoupling: libvmaf's 1-degree test on int64 dot/norms through float32, in double
    dp = (oh * th + ov * tv).to(tl.float32).to(tl.float64) / 4096.0
    om = (oh * oh + ov * ov).to(tl.float32).to(tl.float64) / 4096.0
    tm = (th * th + tv * tv).to(tl.float32).to(tl.float64) / 4096.0
    angle = (dp >= 0.0) & (dp * dp >= cos2 * om * tm)
    rh = _restore(oh, th, angle, egl, div_ptr, ok)
    rv = _restore(ov, tv, angle, egl, div_ptr, ok)
    rd = _restore(od, td, angle, egl, div_ptr, ok)
    if S0:
        ah = _w16(th - rh)
        av = _w16(tv - rv)
        ad = _w16(td - rd)
    else:
        ah = _w32(th - rh)
        av = _w32(tv - rv)
        ad = _w32(td - rd)
    fa = (_flt(_csf(ah, irf0, 15, 16384, S0), S0) + _flt(_csf(av, irf1, 15, 16384, S0), S0)
          + _flt(_csf(ad, irf2, 17, 65535, S0), S0))
    fr = (_flt(_csf(rh, irf0, 15, 16384, S0), S0) + _flt(_csf(rv, irf1, 15, 16384, S0), S0)
          + _flt(_csf(rd, irf2, 17, 65535, S0), S0))
    pbase = planes_ptr + f * s_pn + pix
    tl.store(pbase, rh.to(tl.int32), mask=ok)
    tl.store(pbase + s_pk, rv.to(tl.int32), mask=ok)
    tl.store(pbase + 2 * s_pk, rd.to(tl.int32), mask=ok)
    tl.store(pbase + 3 * s_pk, ah.to(tl.int32), mask=ok)
    tl.store(pbase + 4 * s_pk, av.to(tl.int32), mask=ok)
    tl.store(pbase + 5 * s_pk, ad.to(tl.int32), mask=ok)
    tl.store(pbase + 6 * s_pk, fa.to(tl.int32), mask=ok)
    tl.store(pbase + 7 * s_pk, fr.to(tl.int32), mask=ok)

    # denominator row sums over R
    inr = ok & (rows >= top) & (rows < bottom) & (cols >= left) & (cols < right)
    row_ok = (rows >= top) & (rows < bottom) & (rows < h)
    obase = rows_ptr + f * s_on + rows.to(tl.int64) * 9
    for k in tl.static_range(3):
        if k == 0:
            x = tl.abs(oh)
        elif k == 1:
            x = tl.abs(ov)
        else:
            x = tl.abs(od)
        if S0:
            val = x * x * x
        else:
            val = ((((x * x) + (1 << DEN_Q)) >> DEN_Q) * x + ((1 << DEN_SH) >> 1)) >> DEN_SH
        s = tl.sum(tl.where(inr, val, 0), axis=1)[:, None]
        tl.store(obase + 3 + k, _round_shift(s, den_row_sh), mask=row_ok)


@triton.jit
def _round_shift(s, sh):
    """libvmaf's per-row ``(s + 2**(sh-1)) >> sh`` (``s`` unchanged for ``sh == 0``), in int64."""
    sh = sh.to(tl.int64)
    return (s + tl.where(sh > 0, tl.full([], 1, tl.int64) << tl.maximum(sh - 1, 0), 0)) >> sh


@triton.jit
def _cm_sum(sig, thr, irf, rows_ok, row_sh, S0: tl.constexpr, SUB: tl.constexpr, SQ: tl.constexpr,
            C: tl.constexpr):
    """Round-shifted row sums of one orientation's masked, cubed signal (``SUB``, ``SQ``: scale 0's shifts)."""
    if S0:
        x = sig.to(tl.int32) * irf  # int32, as libvmaf
        x = tl.abs(x) - (thr << SUB)
        x = tl.maximum(x, 0).to(tl.int64)
        x2 = ((x * x + (1 << (SQ - 1))) >> SQ).to(tl.int32).to(tl.int64)
    else:
        x = ((sig * irf + 134217728) >> 28).to(tl.int32)
        x = tl.maximum(tl.abs(x) - thr, 0).to(tl.int64)
        x2 = ((x * x + 536870912) >> 30).to(tl.int32).to(tl.int64)
    val = (x2 * x + ((1 << C) >> 1)) >> C
    return _round_shift(tl.sum(tl.where(rows_ok, val, 0), axis=1)[:, None], row_sh)


@triton.jit(do_not_specialize=["cm_row_sh"])
def _cm_kernel(planes_ptr, rows_ptr, h, w, top, bottom, left, right, irf0, irf1, irf2, cm_row_sh, s_pn, s_pk, s_on,
               S0: tl.constexpr, CH: tl.constexpr, CV: tl.constexpr, CD: tl.constexpr,
               BLOCK_H: tl.constexpr, BLOCK_W: tl.constexpr):
    """Contrast masking (DLM and AIM) row sums of ``BLOCK_H`` rows of R of one frame."""
    pid = tl.program_id(0)
    f = tl.program_id(1).to(tl.int64)
    rows = top + pid * BLOCK_H + tl.arange(0, BLOCK_H)[:, None]
    cols = left + tl.arange(0, BLOCK_W)[None, :]
    row_ok = rows < bottom
    ok = row_ok & (cols < right)
    up = tl.where(rows == 0, 1, rows - 1).to(tl.int64) * w
    mid = rows.to(tl.int64) * w
    dn = tl.where(rows == h - 1, h - 1, rows + 1).to(tl.int64) * w
    lf = tl.where(cols == 0, 1, cols - 1)
    rt = tl.where(cols == w - 1, w - 1, cols + 1)
    base = planes_ptr + f * s_pn
    sa = base + 6 * s_pk
    sr = base + 7 * s_pk
    box_a = tl.zeros([BLOCK_H, BLOCK_W], tl.int32)
    box_r = tl.zeros([BLOCK_H, BLOCK_W], tl.int32)
    for dy in tl.static_range(3):
        if dy == 0:
            rr = up
        elif dy == 1:
            rr = mid
        else:
            rr = dn
        box_a += tl.load(sa + rr + lf, mask=ok, other=0) + tl.load(sa + rr + rt, mask=ok, other=0)
        box_r += tl.load(sr + rr + lf, mask=ok, other=0) + tl.load(sr + rr + rt, mask=ok, other=0)
        if dy != 1:
            box_a += tl.load(sa + rr + cols, mask=ok, other=0)
            box_r += tl.load(sr + rr + cols, mask=ok, other=0)
    pix = base + mid + cols
    rh = tl.load(pix, mask=ok, other=0).to(tl.int64)
    rv = tl.load(pix + s_pk, mask=ok, other=0).to(tl.int64)
    rd = tl.load(pix + 2 * s_pk, mask=ok, other=0).to(tl.int64)
    ah = tl.load(pix + 3 * s_pk, mask=ok, other=0).to(tl.int64)
    av = tl.load(pix + 4 * s_pk, mask=ok, other=0).to(tl.int64)
    ad = tl.load(pix + 5 * s_pk, mask=ok, other=0).to(tl.int64)
    # int32 sums, wrapping as libvmaf's
    thr_a = (box_a + _centre(_csf(ah, irf0, 15, 16384, S0), S0) + _centre(_csf(av, irf1, 15, 16384, S0), S0)
             + _centre(_csf(ad, irf2, 17, 65535, S0), S0))
    thr_r = (box_r + _centre(_csf(rh, irf0, 15, 16384, S0), S0) + _centre(_csf(rv, irf1, 15, 16384, S0), S0)
             + _centre(_csf(rd, irf2, 17, 65535, S0), S0))
    obase = rows_ptr + f * s_on + rows.to(tl.int64) * 9
    tl.store(obase + 0, _cm_sum(rh, thr_a, irf0, ok, cm_row_sh, S0, 10, 29, CH), mask=row_ok)
    tl.store(obase + 1, _cm_sum(rv, thr_a, irf1, ok, cm_row_sh, S0, 10, 29, CV), mask=row_ok)
    tl.store(obase + 2, _cm_sum(rd, thr_a, irf2, ok, cm_row_sh, S0, 12, 30, CD), mask=row_ok)
    tl.store(obase + 6, _cm_sum(ah, thr_r, irf0, ok, cm_row_sh, S0, 10, 29, CH), mask=row_ok)
    tl.store(obase + 7, _cm_sum(av, thr_r, irf1, ok, cm_row_sh, S0, 10, 29, CV), mask=row_ok)
    tl.store(obase + 8, _cm_sum(ad, thr_r, irf2, ok, cm_row_sh, S0, 12, 30, CD), mask=row_ok)


@triton.jit
def _scale_root(sums_ptr, consts_ptr, dbl_ptr, bits_ptr, f, scale, q, o, ok):
    """One orientation's float32 term ``powf(root, 1/3f) (+ noise)`` of lanes ``(scale, q)``: libvmaf's casts, one
    IEEE operation at a time (``scales_from_sums``)."""
    s = tl.load(sums_ptr + f * 36 + scale * 9 + q * 3 + o, mask=ok, other=0)
    c = consts_ptr + scale * 8
    num_div = tl.load(c + o, mask=ok, other=1.0)
    num0 = (s.to(tl.float64) / num_div).to(tl.float32)  # scale 0: (float)(int64 / double)
    num = tl.math.div_rn(s.to(tl.float32), num_div.to(tl.float32))  # scales 1-3: float, exact power-of-two divisor
    den = (s.to(tl.float64) / tl.load(c + 3, mask=ok, other=1.0) * tl.load(c + 4 + o, mask=ok, other=0.0))
    root = tl.where(q == 1, den.to(tl.float32), tl.where(scale == 0, num0, num))
    noise = tl.where(q < 2, tl.load(c + 7, mask=ok, other=0.0).to(tl.float32), 0.0)
    return powf_third(root, dbl_ptr, bits_ptr) + noise


@triton.jit
def _scales_kernel(sums_ptr, consts_ptr, dbl_ptr, bits_ptr, out_ptr, n, BLOCK_N: tl.constexpr):
    """``(N, 4, 3)`` float32 ``(num, den, aim)`` per scale from the ``(N, 4, 3, 3)`` int64 sums: ``(h + v) + d`` of
    the orientations' terms (libvmaf's float order). Lanes ``scale * 3 + q`` (12 of 16) of ``BLOCK_N`` frames."""
    f = (tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N))[:, None].to(tl.int64)
    j = tl.arange(0, 16)[None, :]
    scale = j // 3
    q = j % 3
    ok = (f < n) & (j < 12)
    t_h = _scale_root(sums_ptr, consts_ptr, dbl_ptr, bits_ptr, f, scale, q, 0, ok)
    t_v = _scale_root(sums_ptr, consts_ptr, dbl_ptr, bits_ptr, f, scale, q, 1, ok)
    t_d = _scale_root(sums_ptr, consts_ptr, dbl_ptr, bits_ptr, f, scale, q, 2, ok)
    tl.store(out_ptr + f * 12 + j, (t_h + t_v) + t_d, mask=ok)


def _scale_constants(plans, device: torch.device) -> torch.Tensor:
    """Per scale ``[num_div h, v, d, den_div, rf**3 h, v, d, noise]`` (float64 ``(4, 8)``) on ``device``, cached."""
    values = [v for p in plans for v in (*p.num_div, p.den_div, *p.rf_cubed, p.noise)]
    return device_constants(values, torch.float64, device).view(len(plans), 8)


def scales_from_sums_fwd(sums: torch.Tensor, height: int, width: int,
                         geometry: tuple[int, float, int, float]) -> torch.Tensor:
    """:func:`~fusedsim.families.adm.twin.scales_from_sums` on the sums' device: ``(N, 4, 3)`` float32, the same
    bits (glibc's ``powf`` emulated exactly: :mod:`fusedsim.families.adm.cube_root`), no host round trip."""
    n = sums.shape[0]
    out = torch.empty(n, 4, 3, dtype=torch.float32, device=sums.device)
    if n == 0:
        return out
    dbl, bits = powf_third_tables(sums.device)
    block = triton.next_power_of_2(n) if triton_interpreting() else 16
    _scales_kernel[(triton.cdiv(n, block),)](
        sums.contiguous(), _scale_constants(scale_plans(height, width, geometry), sums.device), dbl, bits, out, n,
        BLOCK_N=block, enable_fp_fusion=False)
    return out


def _kernel_input(x: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """A view the kernel can load: uint16 is read through int16 and masked back to 16 bits."""
    if x.dtype == torch.uint16:
        return x.view(torch.int16), True
    if x.dtype in (torch.uint8, torch.int16, torch.int32):
        return x, False
    return x.to(torch.int32), False


def _block_h(h: int, w_block: int) -> tuple[int, int]:
    """(BLOCK_H, num_warps): ~1024 band pixels per program on a GPU (2-4 per thread: the kernels keep dozens of
    int64 values live); the whole band under the interpreter (one numpy operation per block operation)."""
    if triton_interpreting():
        return triton.next_power_of_2(h), 4
    block_h = max(1, 1024 // w_block)
    return block_h, 16 if block_h * w_block >= 1024 else 8


@on_tensors_device
def integer_adm_sums_fwd(ref: torch.Tensor, dist: torch.Tensor, bit_depth: int, gain_limit: float = 100.0,
                         csf_mode: int = 0, norm_view_dist: float = 3.0, ref_display_height: int = 1080,
                         noise_weight: float = 0.03125) -> torch.Tensor:
    """The twin's integer sums (``(N, 4, 3, 3)`` int64) of integer frames ``(N, H, W)``, on their device."""
    n, height, width = ref.shape
    check_frame_size(height, width)
    dev = ref.device
    if n == 0:
        return torch.empty(n, 4, 3, 3, dtype=torch.int64, device=dev)
    if ref.dtype != dist.dtype:
        ref, dist = ref.to(torch.int32), dist.to(torch.int32)
    cur_r, m16 = _kernel_input(ref.contiguous())
    cur_d, _ = _kernel_input(dist.contiguous())
    table = div_lookup(dev).to(torch.int32)
    fconst = device_constants((float(gain_limit), COS_1DEG_SQ), torch.float64, dev)
    plans = scale_plans(height, width, geometry(csf_mode, norm_view_dist, ref_display_height, noise_weight))
    # the kernels' round-shifted row sums [frame, scale, row, (num, den, aim) x (h, v, d)]; rows outside R stay 0
    rows = torch.zeros(n, len(plans), plans[0].height, _ROW_SUMS, dtype=torch.int64, device=dev)
    for p in plans:
        h, w = p.height, p.width
        n_in, w_in = cur_r.shape[-2:]
        ra = torch.empty(n, h, w, dtype=torch.int32, device=dev)
        da = torch.empty(n, h, w, dtype=torch.int32, device=dev)
        planes = torch.empty(n, _PLANES, h, w, dtype=torch.int32, device=dev)
        scale_rows = rows[:, p.scale]
        bw = triton.next_power_of_2(w)
        bh, warps = _block_h(h, bw)
        vadd, vsh, hadd, hsh = (0, 0, 32768, 16) if p.scale == 0 else DWT_SHIFTS[p.scale - 1]
        _bands_kernel[(triton.cdiv(h, bh), n)](
            cur_r, cur_d, ra, da, planes, scale_rows, table, fconst,
            n_in, w_in, h, w, p.top, p.bottom, p.left, p.right, *p.irf,
            p.den_shift if p.scale == 0 else p.den_row_shift,
            cur_r.stride(0), cur_r.stride(1), cur_d.stride(0), cur_d.stride(1), ra.stride(0),
            planes.stride(0), planes.stride(1), scale_rows.stride(0),
            S0=p.scale == 0, BPC=bit_depth, VADD=vadd, VSH=vsh, HADD=hadd, HSH=hsh,
            DEN_SH=p.den_shift if p.scale else 0, DEN_Q=(0, 31, 30, 31)[p.scale], MASK16=m16 and p.scale == 0,
            BLOCK_H=bh, BLOCK_W=bw, num_warps=warps, enable_fp_fusion=False,
        )
        rbh, rwarps = _block_h(p.bottom - p.top, bw)
        _cm_kernel[(triton.cdiv(p.bottom - p.top, rbh), n)](
            planes, scale_rows, h, w, p.top, p.bottom, p.left, p.right, *p.irf, p.cm_row_shift,
            planes.stride(0), planes.stride(1), scale_rows.stride(0),
            S0=p.scale == 0, CH=p.cm_shift[0], CV=p.cm_shift[1], CD=p.cm_shift[2],
            BLOCK_H=rbh, BLOCK_W=bw, num_warps=rwarps, enable_fp_fusion=False,
        )
        cur_r, cur_d, m16 = ra, da, False
    return rows.sum(2).view(n, len(plans), 3, 3)


@integer_adm.triton_launcher
def integer_adm_fwd(ref: torch.Tensor, dist: torch.Tensor, bit_depth: int, gain_limit: float = 100.0,
                    csf_mode: int = 0, norm_view_dist: float = 3.0, ref_display_height: int = 1080,
                    noise_weight: float = 0.03125, *, max_buffer_bytes: int = 1 << 30) -> torch.Tensor:
    """libvmaf's per-scale ``(num, den, aim)`` float32 of integer frames ``(N, H, W)`` on the tensors' device:
    ``(N, 4, 3)``. Frames are processed in groups whose work buffers stay under ``max_buffer_bytes``:
    :data:`_BUFFER_BYTES_PER_PIXEL` per input pixel (a 32-frame 1080p batch is one group)."""
    n, height, width = ref.shape
    group = max(1, min(max(n, 1), max_buffer_bytes // max(1, _BUFFER_BYTES_PER_PIXEL * height * width)))
    plan = (csf_mode, norm_view_dist, ref_display_height, noise_weight)
    sums = torch.cat([integer_adm_sums_fwd(ref[s:s + group], dist[s:s + group], bit_depth, gain_limit, *plan)
                      for s in range(0, n, group)]) if n else torch.empty(0, 4, 3, 3, dtype=torch.int64,
                                                                           device=ref.device)
    return scales_from_sums_fwd(sums, height, width, geometry(*plan))
