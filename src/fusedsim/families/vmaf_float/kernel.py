"""libvmaf's float features as Triton kernels, bit-exact with the twins.

Every kernel computes the twins' float32 operations in the twins' order, compiled without contraction
(``enable_fp_fusion=False``: an FMA would skip a product's rounding), with correctly rounded float32 division
(``div_rn``) and IEEE double division. libvmaf's two-level float32 sums (each row left to right, then the row sums
top to bottom) are kept exactly: a program owns a block of rows, one row per lane, and walks the columns in order;
one program per frame then adds the row sums in order. (Such sums are sequential by definition: a tree reduction
would round differently. The row walk reads strided memory, which costs bandwidth, not exactness.)

* ``float_vif``: per scale, a vertical pass (``x``, ``x*x`` or ``x*y``, mirrored rows) and a horizontal pass, then
  the per-pixel statistics summed along rows; the decimation is the same two passes at even positions.
* ``float_adm``: per scale the 4-tap DWT (two passes), the decouple step (the vendor ``rcpss`` from
  :mod:`.rcp_table`), then the masked cube sums of ``num``, ``aim`` and ``den`` along rows; the last per-scale
  steps (three ``powf`` per value on a few hundred float32 numbers per batch) run on the host with the twin's code,
  so that they are the twin's bits.
* ``float_motion_sad``: the blur (two passes) of both frames and the SAD along rows.
"""

from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

from fusedsim.core.launch import on_tensors_device
from fusedsim.families.vmaf_float import adm_twin, motion_twin, vif_twin
from fusedsim.families.vmaf_float.common_twin import f32, to_vmaf_float
from fusedsim.families.vmaf_float.ops import float_adm, float_motion_sad, float_vif
from fusedsim.families.vmaf_float.rcp_table import RCP_MANTISSA

__all__ = ["float_adm_fwd", "float_motion_sad_fwd", "float_vif_fwd", "separable_fwd"]

_BLOCK = 128  # columns per program of the passes
_ROWS = 64  # rows (lanes) per program of the row walks


@triton.jit
def _reflect(i, n):
    """One mirror without edge repeat (``-i -> i``, ``n-1+i -> n-1-i``), clamped for masked lanes."""
    i = tl.where(i < 0, -i, i)
    i = tl.where(i >= n, 2 * n - 2 - i, i)
    return tl.minimum(tl.maximum(i, 0), n - 1)


@triton.jit
def _vpass_kernel(a, b, taps, dst, H, W, OH, STEP, MODE: tl.constexpr, K: tl.constexpr, BLOCK: tl.constexpr):
    """Vertical taps of ``a`` (MODE 0), ``a*a`` (1) or ``a*b`` (2) at rows ``0, STEP, ...``: ``(N, OH, W)``."""
    row = tl.program_id(0).to(tl.int64)  # frame * OH + output row
    frame = row // OH
    i = (row % OH) * STEP
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < W
    base = frame * H * W
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for t in tl.static_range(K):
        src = base + _reflect(i - K // 2 + t, H) * W + offs
        v = tl.load(a + src, mask=mask, other=0.0)
        if MODE == 1:
            v = v * v
        elif MODE == 2:
            v = v * tl.load(b + src, mask=mask, other=0.0)
        acc = acc + tl.load(taps + t) * v
    tl.store(dst + row * W + offs, acc, mask=mask)


@triton.jit
def _hpass_kernel(src, taps, dst, W, OW, STEP, K: tl.constexpr, BLOCK: tl.constexpr):
    """Horizontal taps at columns ``0, STEP, ...`` of each row: ``(R, W) -> (R, OW)``."""
    row = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < OW
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for t in tl.static_range(K):
        col = _reflect(offs * STEP - K // 2 + t, W)
        acc = acc + tl.load(taps + t) * tl.load(src + row * W + col, mask=mask, other=0.0)
    tl.store(dst + row * OW + offs, acc, mask=mask)


@triton.jit
def _total_kernel(rows, out, NR, Q: tl.constexpr):
    """``out[f, q] = sum_k rows[q, f, k]`` in order (float32), one program per frame, ``Q`` quantities."""
    frame = tl.program_id(0).to(tl.int64)
    n = tl.num_programs(0).to(tl.int64)
    for q in tl.static_range(Q):  # frames on grid axis 0 (up to 2**31 - 1)
        acc = tl.zeros([1], dtype=tl.float32)
        base = rows + (q * n + frame) * NR
        for k in range(NR):
            acc = acc + tl.load(base + k + tl.zeros([1], dtype=tl.int64))
        tl.store(out + frame * Q + q + tl.arange(0, 1), acc)


# ------------------------------------------------------------------------------------------------ launchers
def _taps(values: torch.Tensor, device: torch.device) -> torch.Tensor:
    return values.to(device=device, dtype=torch.float32).contiguous()


def separable_fwd(a: torch.Tensor, taps: torch.Tensor, step: int = 1, mode: int = 0,
                  b: torch.Tensor | None = None, out_hw: tuple[int, int] | None = None) -> torch.Tensor:
    """The twin's :func:`~.common_twin.separable_filter` of float32 ``(N, H, W)`` (``mode`` 1: ``a*a``, 2:
    ``a*b``), keeping ``out_hw`` (default ``ceil(H/step), ceil(W/step)``) of the stepped positions."""
    a = a.contiguous()
    b = a if b is None else b.contiguous()
    n, h, w = a.shape
    oh, ow = out_hw or (triton.cdiv(h, step), triton.cdiv(w, step))
    taps = _taps(taps, a.device)
    k = taps.shape[0]
    tmp = torch.empty((n, oh, w), dtype=torch.float32, device=a.device)
    out = torch.empty((n, oh, ow), dtype=torch.float32, device=a.device)
    if out.numel() == 0:
        return out
    _vpass_kernel[(n * oh, triton.cdiv(w, _BLOCK))](a, b, taps, tmp, h, w, oh, step, MODE=mode, K=k, BLOCK=_BLOCK,
                                                     enable_fp_fusion=False)
    _hpass_kernel[(n * oh, triton.cdiv(ow, _BLOCK))](tmp, taps, out, w, ow, step, K=k, BLOCK=_BLOCK,
                                                      enable_fp_fusion=False)
    return out


def _totals(rows: torch.Tensor) -> torch.Tensor:
    """``(Q, N, NR)`` float32 row sums -> ``(N, Q)`` float32 totals, in order."""
    q, n, nr = rows.shape
    out = torch.empty((n, q), dtype=torch.float32, device=rows.device)
    if n:
        _total_kernel[(n,)](rows.contiguous(), out, nr, Q=q, enable_fp_fusion=False)
    return out


# ------------------------------------------------------------------------------------------------------ VIF
@triton.jit
def _log2f(x, poly):
    """libvmaf's ``log2f_approx`` of float32 ``x >= 1``."""
    bits = x.to(tl.int32, bitcast=True)
    e = (bits >> 23) & 0xFF
    t = ((bits & 0x7FFFFF) | 0x3F800000).to(tl.float32, bitcast=True) - 1.0
    var = tl.zeros(x.shape, dtype=tl.float32)
    for k in tl.static_range(9):
        var = var * t + tl.load(poly + k)
    return (e - 127).to(tl.float32) + var


@triton.jit
def _vif_rows_kernel(mu1, mu2, xx, yy, xy, out, W, TOTAL, EGL, EPS, SMI, snsq_ptr, poly, ROWS: tl.constexpr):
    """Per-pixel VIF statistics summed along each row: ``out[0, r]`` (num) and ``out[1, r]`` (den) of rows
    ``r < TOTAL`` of the ``(N*H, W)`` maps."""
    lane = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    valid = lane < TOTAL
    snsq = tl.load(snsq_ptr)
    acc_num = tl.zeros([ROWS], dtype=tl.float32)
    acc_den = tl.zeros([ROWS], dtype=tl.float32)
    for j in range(W):
        at = lane * W + j
        m1 = tl.load(mu1 + at, mask=valid, other=0.0)
        m2 = tl.load(mu2 + at, mask=valid, other=0.0)
        s1 = tl.load(xx + at, mask=valid, other=0.0) - m1 * m1
        s2 = tl.load(yy + at, mask=valid, other=0.0) - m2 * m2
        s12 = tl.load(xy + at, mask=valid, other=0.0) - m1 * m2
        s1 = tl.where(s1 < 0.0, 0.0, s1)
        s2 = tl.where(s2 < 0.0, 0.0, s2)
        g = tl.div_rn(s12, s1 + EPS)
        sv = s2 - g * s12
        low1 = s1 < EPS
        g = tl.where(low1, 0.0, g)
        sv = tl.where(low1, s2, sv)
        s1 = tl.where(low1, 0.0, s1)
        low2 = s2 < EPS
        g = tl.where(low2, 0.0, g)
        sv = tl.where(low2, 0.0, sv)
        neg = g < 0.0
        sv = tl.where(neg, s2, sv)
        g = tl.where(neg, 0.0, g)
        sv = tl.where(sv < EPS, EPS, sv)
        g = tl.where(g > EGL, EGL, g)
        num_arg = (1.0 + (g * g * s1).to(tl.float64) / (sv.to(tl.float64) + snsq)).to(tl.float32)
        den_arg = (1.0 + s1.to(tl.float64) / snsq).to(tl.float32)
        num = _log2f(num_arg, poly)
        den = _log2f(den_arg, poly)
        num = tl.where(s12 < 0.0, 0.0, num)
        flat = s1.to(tl.float64) < snsq
        num = tl.where(flat, 1.0 - s2 * SMI, num)
        den = tl.where(flat, 1.0, den)
        acc_num = acc_num + num
        acc_den = acc_den + den
    tl.store(out + lane, acc_num, mask=valid)
    tl.store(out + TOTAL + lane, acc_den, mask=valid)


_POLY: dict[torch.device, torch.Tensor] = {}


@float_vif.triton_launcher
@on_tensors_device
def float_vif_fwd(ref: torch.Tensor, dist: torch.Tensor, bit_depth: int, gain_limit: float = 100.0,
                  kernelscale: float = 1.0, sigma_nsq: float = 2.0, skip_scale0: int = 0) -> torch.Tensor:
    """:func:`~.vif_twin.float_vif_ref` on the tensors' device: ``(N, 8)`` float64."""
    dev = ref.device
    x, y = to_vmaf_float(ref, bit_depth).contiguous(), to_vmaf_float(dist, bit_depth).contiguous()
    n = x.shape[0]
    out = torch.empty((n, 8), dtype=torch.float64, device=dev)
    poly = _POLY.get(dev)
    if poly is None:
        poly = _POLY[dev] = f32(vif_twin.LOG2_POLY, dev)
    snsq = torch.tensor([float(sigma_nsq)], dtype=torch.float64, device=dev)
    square = float(np.float32(float(np.float32(sigma_nsq)) ** 2))
    smi = float(np.float32(square / (255.0 * 255.0)))
    for scale in range(vif_twin.N_SCALES):
        taps = vif_twin.vif_filter(scale, kernelscale)
        if scale > 0:
            hw = (x.shape[-2] // 2, x.shape[-1] // 2)
            x = separable_fwd(x, taps, step=2, out_hw=hw)
            y = separable_fwd(y, taps, step=2, out_hw=hw)
        if scale == 0 and skip_scale0:
            out[:, 0], out[:, 1] = 0.0, -1.0
            continue
        h, w = x.shape[-2:]
        maps = [separable_fwd(x, taps), separable_fwd(y, taps), separable_fwd(x, taps, mode=1),
                separable_fwd(y, taps, mode=1), separable_fwd(x, taps, mode=2, b=y)]
        rows = torch.empty((2, n, h), dtype=torch.float32, device=dev)
        total = n * h
        _vif_rows_kernel[(triton.cdiv(total, _ROWS),)](
            *maps, rows, w, total, float(np.float32(gain_limit)), float(np.float32(vif_twin.EPS)), smi, snsq, poly,
            ROWS=_ROWS, enable_fp_fusion=False)
        sums = _totals(rows).double()
        out[:, 2 * scale], out[:, 2 * scale + 1] = sums[:, 0], sums[:, 1]
    return out


# ------------------------------------------------------------------------------------------------------ ADM
@triton.jit
def _dwt_index(v, n):
    v = tl.where(v < 0, -v, v)
    return tl.where(v >= n, 2 * n - v - 1, v)


@triton.jit
def _dwt_v_kernel(src, lo, hi, tlo, thi, H, W, OH, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)  # frame * OH + i
    frame = row // OH
    i = row % OH
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < W
    base = src + frame * H * W + offs
    acc_lo = tl.zeros([BLOCK], dtype=tl.float32)
    acc_hi = tl.zeros([BLOCK], dtype=tl.float32)
    for k in tl.static_range(4):
        s = tl.load(base + _dwt_index(2 * i - 1 + k, H) * W, mask=mask, other=0.0)
        acc_lo = acc_lo + tl.load(lo + k) * s
        acc_hi = acc_hi + tl.load(hi + k) * s
    tl.store(tlo + row * W + offs, acc_lo, mask=mask)
    tl.store(thi + row * W + offs, acc_hi, mask=mask)


@triton.jit
def _dwt_h_kernel(tlo, thi, lo, hi, a, bh, bv, bd, W, OW, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < OW
    a_acc = tl.zeros([BLOCK], dtype=tl.float32)
    v_acc = tl.zeros([BLOCK], dtype=tl.float32)
    h_acc = tl.zeros([BLOCK], dtype=tl.float32)
    d_acc = tl.zeros([BLOCK], dtype=tl.float32)
    for k in tl.static_range(4):
        col = tl.minimum(_dwt_index(2 * offs - 1 + k, W), W - 1)
        s_lo = tl.load(tlo + row * W + col, mask=mask, other=0.0)
        s_hi = tl.load(thi + row * W + col, mask=mask, other=0.0)
        f_lo = tl.load(lo + k)
        f_hi = tl.load(hi + k)
        a_acc = a_acc + f_lo * s_lo
        v_acc = v_acc + f_hi * s_lo
        h_acc = h_acc + f_lo * s_hi
        d_acc = d_acc + f_hi * s_hi
    at = row * OW + offs
    tl.store(a + at, a_acc, mask=mask)
    tl.store(bh + at, h_acc, mask=mask)
    tl.store(bv + at, v_acc, mask=mask)
    tl.store(bd + at, d_acc, mask=mask)


@triton.jit
def _rcp(d, table):
    """The vendor ``rcpss`` of float32 ``d`` (:mod:`.rcp_table`), then libvmaf's Newton step."""
    bits = d.to(tl.int32, bitcast=True)
    e = (bits >> 23) & 0xFF
    mant = tl.load(table + ((bits >> 11) & 0xFFF)) << 11
    sign = (bits >> 31) << 31
    r = (sign | ((253 - e) << 23) | mant).to(tl.float32, bitcast=True)
    r = tl.where(e == 0, (sign | 0x7F800000).to(tl.float32, bitcast=True), r)  # rcpss of 0 or a denormal: inf
    r = tl.where(e >= 253, (sign).to(tl.float32, bitcast=True), r)
    return r + r * (1.0 - d * r)


@triton.jit
def _decouple_kernel(o, t, r_out, a_out, table, egl_ptr, PLANE, COS_SQ, BLOCK: tl.constexpr):
    """Restored and additive bands of reference bands ``o`` and distorted ``t`` ``(3, PLANE)``."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < PLANE
    egl = tl.load(egl_ptr)
    oh = tl.load(o + offs, mask=mask, other=0.0)
    ov = tl.load(o + PLANE + offs, mask=mask, other=0.0)
    th = tl.load(t + offs, mask=mask, other=0.0)
    tv = tl.load(t + PLANE + offs, mask=mask, other=0.0)
    ot_dp = oh * th + ov * tv
    o_mag = oh * oh + ov * ov
    t_mag = th * th + tv * tv
    angle = (ot_dp >= 0.0) & (ot_dp * ot_dp >= COS_SQ * o_mag * t_mag)
    for b in tl.static_range(3):
        ob = tl.load(o + b * PLANE + offs, mask=mask, other=0.0)
        tb = tl.load(t + b * PLANE + offs, mask=mask, other=0.0)
        k = tb * _rcp(ob + 1e-30, table)
        k = tl.where(k < 0.0, 0.0, tl.where(k > 1.0, 1.0, k))
        r = k * ob
        boosted = r.to(tl.float64) * egl
        t64 = tb.to(tl.float64)
        r = tl.where(angle & (r > 0.0), tl.where(boosted < t64, boosted, t64).to(tl.float32), r)
        r = tl.where(angle & (r < 0.0), tl.where(boosted > t64, boosted, t64).to(tl.float32), r)
        tl.store(r_out + b * PLANE + offs, r, mask=mask)
        tl.store(a_out + b * PLANE + offs, tb - r, mask=mask)


@triton.jit
def _flt(m, at, rf, valid):
    """``float(|rf * m| / 30)`` with libvmaf's double constant."""
    return (0.0333333351 * tl.abs(rf * tl.load(m + at, mask=valid, other=0.0)).to(tl.float64)).to(tl.float32)


@triton.jit
def _cm_rows_kernel(src, msk, out, H, W, PLANE, NR, TOTAL, TOP, LEFT, RIGHT, RF_HV, RF_D, BYPASS: tl.constexpr,
                    ROWS: tl.constexpr):
    """``adm_cm_s`` row sums: ``out[b, r]`` = sum over the row of ``max(|rf*src_b| - thr, 0)**3``."""
    lane = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    valid = lane < TOTAL
    frame = lane // NR
    i = TOP + lane % NR
    iu = tl.where(i == 0, 1, i - 1)
    idn = tl.where(i == H - 1, i, i + 1)
    base = frame * H * W
    row_u, row_c, row_d = base + iu * W, base + i * W, base + idn * W
    acc_h = tl.zeros([ROWS], dtype=tl.float32)
    acc_v = tl.zeros([ROWS], dtype=tl.float32)
    acc_d = tl.zeros([ROWS], dtype=tl.float32)
    for j in range(LEFT, RIGHT):
        jl = tl.where(j == 0, 1, j - 1)
        jr = tl.where(j == W - 1, j, j + 1)
        thr = tl.zeros([ROWS], dtype=tl.float32)
        if not BYPASS:
            for b in tl.static_range(3):
                rf = RF_D if b == 2 else RF_HV
                m = msk + b * PLANE
                s = _flt(m, row_u + jl, rf, valid)
                s = s + _flt(m, row_u + j, rf, valid)
                s = s + _flt(m, row_u + jr, rf, valid)
                s = s + _flt(m, row_c + jl, rf, valid)
                centre = tl.abs(rf * tl.load(m + row_c + j, mask=valid, other=0.0)).to(tl.float64)
                s = (s.to(tl.float64) + 0.0666666701 * centre).to(tl.float32)
                s = s + _flt(m, row_c + jr, rf, valid)
                s = s + _flt(m, row_d + jl, rf, valid)
                s = s + _flt(m, row_d + j, rf, valid)
                s = s + _flt(m, row_d + jr, rf, valid)
                thr = thr + s
        xh = tl.abs(tl.load(src + row_c + j, mask=valid, other=0.0) * RF_HV) - thr
        xv = tl.abs(tl.load(src + PLANE + row_c + j, mask=valid, other=0.0) * RF_HV) - thr
        xd = tl.abs(tl.load(src + 2 * PLANE + row_c + j, mask=valid, other=0.0) * RF_D) - thr
        xh = tl.where(xh < 0.0, 0.0, xh)
        xv = tl.where(xv < 0.0, 0.0, xv)
        xd = tl.where(xd < 0.0, 0.0, xd)
        acc_h = acc_h + xh * xh * xh
        acc_v = acc_v + xv * xv * xv
        acc_d = acc_d + xd * xd * xd
    tl.store(out + lane, acc_h, mask=valid)
    tl.store(out + TOTAL + lane, acc_v, mask=valid)
    tl.store(out + 2 * TOTAL + lane, acc_d, mask=valid)


@triton.jit
def _den_rows_kernel(o, out, H, W, PLANE, NR, TOTAL, TOP, LEFT, RIGHT, RF_HV, RF_D, ROWS: tl.constexpr):
    lane = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    valid = lane < TOTAL
    row = (lane // NR) * H * W + (TOP + lane % NR) * W
    acc_h = tl.zeros([ROWS], dtype=tl.float32)
    acc_v = tl.zeros([ROWS], dtype=tl.float32)
    acc_d = tl.zeros([ROWS], dtype=tl.float32)
    for j in range(LEFT, RIGHT):
        ah = tl.abs(RF_HV * tl.load(o + row + j, mask=valid, other=0.0))
        av = tl.abs(RF_HV * tl.load(o + PLANE + row + j, mask=valid, other=0.0))
        ad = tl.abs(RF_D * tl.load(o + 2 * PLANE + row + j, mask=valid, other=0.0))
        acc_h = acc_h + ah * ah * ah
        acc_v = acc_v + av * av * av
        acc_d = acc_d + ad * ad * ad
    tl.store(out + lane, acc_h, mask=valid)
    tl.store(out + TOTAL + lane, acc_v, mask=valid)
    tl.store(out + 2 * TOTAL + lane, acc_d, mask=valid)


_CONSTS: dict[torch.device, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}


def _adm_consts(dev: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    c = _CONSTS.get(dev)
    if c is None:
        c = _CONSTS[dev] = (f32(adm_twin.DWT_LO, dev), f32(adm_twin.DWT_HI, dev),
                            torch.from_numpy(RCP_MANTISSA).to(dev))
    return c


def _dwt2_fwd(x: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(a (N, oh, ow), bands (3, N, oh, ow))`` of float32 ``(N, h, w)``."""
    n, h, w = x.shape
    oh, ow = (h + 1) // 2, (w + 1) // 2
    tlo = torch.empty((n, oh, w), dtype=torch.float32, device=x.device)
    thi = torch.empty_like(tlo)
    a = torch.empty((n, oh, ow), dtype=torch.float32, device=x.device)
    bands = torch.empty((3, n, oh, ow), dtype=torch.float32, device=x.device)
    _dwt_v_kernel[(n * oh, triton.cdiv(w, _BLOCK))](x, lo, hi, tlo, thi, h, w, oh, BLOCK=_BLOCK,
                                                     enable_fp_fusion=False)
    _dwt_h_kernel[(n * oh, triton.cdiv(ow, _BLOCK))](tlo, thi, lo, hi, a, bands[0], bands[1], bands[2], w, ow,
                                                      BLOCK=_BLOCK, enable_fp_fusion=False)
    return a, bands


@float_adm.triton_launcher
@on_tensors_device
def float_adm_fwd(ref: torch.Tensor, dist: torch.Tensor, bit_depth: int, gain_limit: float = 100.0,
                  norm_view_dist: float = 3.0, ref_display_height: int = 1080, noise_weight: float = 0.03125,
                  p_norm: float = 3.0, bypass_cm: int = 0, skip_scale0: int = 0, *factors: float) -> torch.Tensor:
    """:func:`~.adm_twin.float_adm_ref` on the tensors' device: ``(N, 12)`` float64. The per-pixel work and the
    float32 sums run here; each scale's nine sums are finished on the host by the twin's code."""
    if p_norm != 3.0:
        raise ValueError(f"float_adm on the GPU computes adm_p_norm=3 only (x*x*x, as libvmaf's default); got "
                         f"{p_norm:g}: use CPU tensors for other norms")
    dev = ref.device
    factors = tuple(factors) + (-1.0,) * (8 - len(factors))
    lo, hi, table = _adm_consts(dev)
    egl = torch.tensor([float(gain_limit)], dtype=torch.float64, device=dev)
    x, y = to_vmaf_float(ref, bit_depth).contiguous(), to_vmaf_float(dist, bit_depth).contiguous()
    n = x.shape[0]
    sums, shapes = [], []
    for scale in range(adm_twin.N_SCALES):
        x, o = _dwt2_fwd(x, lo, hi)
        y, t = _dwt2_fwd(y, lo, hi)
        h, w = x.shape[-2:]
        shapes.append((h, w))
        if scale == 0 and skip_scale0:
            sums.append(None)
            continue
        rf_hv, rf_d = adm_twin.csf_factors(scale, norm_view_dist, ref_display_height, factors)
        plane = n * h * w
        r = torch.empty_like(o)
        a = torch.empty_like(o)
        _decouple_kernel[(triton.cdiv(plane, 1024),)](o, t, r, a, table, egl, plane, adm_twin._COS_1DEG_SQ,
                                                      BLOCK=1024, enable_fp_fusion=False)
        top, bottom, left, right = adm_twin._region(w, h)
        nr = bottom - top
        total = n * nr
        rows = torch.zeros((9, n, nr), dtype=torch.float32, device=dev)  # num h v d, den h v d, aim h v d
        grid = (triton.cdiv(total, _ROWS),)
        if total:
            _cm_rows_kernel[grid](r, a, rows[0:3], h, w, plane, nr, total, top, left, right, rf_hv, rf_d,
                                  BYPASS=bool(bypass_cm), ROWS=_ROWS, enable_fp_fusion=False)
            _den_rows_kernel[grid](o, rows[3:6], h, w, plane, nr, total, top, left, right, rf_hv, rf_d, ROWS=_ROWS,
                                   enable_fp_fusion=False)
            _cm_rows_kernel[grid](a, r, rows[6:9], h, w, plane, nr, total, top, left, right, rf_hv, rf_d,
                                  BYPASS=bool(bypass_cm), ROWS=_ROWS, enable_fp_fusion=False)
        sums.append(_totals(rows) if nr else torch.zeros((n, 9), dtype=torch.float32, device=dev))
    host = [None if s is None else s.cpu() for s in sums]
    out = torch.zeros((n, adm_twin.N_SCALES, 3), dtype=torch.float64)
    for scale, (s, (h, w)) in enumerate(zip(host, shapes)):
        if s is None:
            out[:, 0, 1] = float(np.float32(1e-10))
            continue
        top, bottom, left, right = adm_twin._region(w, h)
        area = (right - left, bottom - top)
        out[:, scale, 0] = adm_twin.finish_bands(s[:, 0:3], *area, noise_weight, p_norm).double()
        out[:, scale, 1] = adm_twin.finish_bands(s[:, 3:6], *area, noise_weight, p_norm).double()
        out[:, scale, 2] = adm_twin.finish_bands(s[:, 6:9], *area, 0.0, p_norm).double()
    return out.flatten(1).to(dev)


# --------------------------------------------------------------------------------------------------- motion
@triton.jit
def _sad_rows_kernel(a, b, out, W, TOTAL, ROWS: tl.constexpr):
    lane = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    valid = lane < TOTAL
    acc = tl.zeros([ROWS], dtype=tl.float32)
    for j in range(W):
        at = lane * W + j
        acc = acc + tl.abs(tl.load(a + at, mask=valid, other=0.0) - tl.load(b + at, mask=valid, other=0.0))
    tl.store(out + lane, acc, mask=valid)


@float_motion_sad.triton_launcher
@on_tensors_device
def float_motion_sad_fwd(prev: torch.Tensor, cur: torch.Tensor, bit_depth: int, filter_size: int = 5,
                         ) -> torch.Tensor:
    """:func:`~.motion_twin.float_motion_sad_ref` on the tensors' device: ``(N,)`` float64."""
    dev = prev.device
    taps = f32(motion_twin.motion_filter(int(filter_size)), dev)
    n, h, w = prev.shape
    a = separable_fwd(to_vmaf_float(prev, bit_depth), taps)
    b = separable_fwd(to_vmaf_float(cur, bit_depth), taps)
    rows = torch.empty((1, n, h), dtype=torch.float32, device=dev)
    total = n * h
    if total:
        _sad_rows_kernel[(triton.cdiv(total, _ROWS),)](a, b, rows, w, total, ROWS=_ROWS, enable_fp_fusion=False)
    sums = _totals(rows)[:, 0]
    return (sums / torch.tensor(float(h * w), dtype=torch.float32, device=dev)).double()
