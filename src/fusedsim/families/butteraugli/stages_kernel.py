"""Butteraugli's element-wise stages (libjxl 0.7), one Triton kernel each, between the blurs and Malta filters.

    butteraugli_linear(srgb (N, 3, H, W))                   -> linear RGB (N, 3, H, W)
    butteraugli_opsin(rgb, blurred (N, 3, H, W), it)        -> XYB (N, 3, H, W)
    butteraugli_rest(xyb, lf (N, 3, H, W))                  -> xyb - lf (N, 3, H, W)
    butteraugli_hf_pre(rest, mf (N, 3, H, W))               -> (N, 2, H, W)
    butteraugli_bands(lf, mf, hf_pre, hf_blur)              -> (N, 11, H, W): every band + the activity plane
    butteraugli_combine(bands0, bands1, ac_x, ac_y, act0, act1, mask, half, hf_asymmetry) -> distance map (N, H, W)
    butteraugli_norm_sums(diffmap (N, H, W))                -> (N, 4) float64: max, mean d³, d⁶, d¹²

Each is the twin's stage function (:mod:`fusedsim.families.butteraugli.twin`: ``butteraugli_linear_ref``,
``opsin_xyb_ref``, ``frequency_rest_ref``, ``hf_pre_ref``, ``bands_ref``, ``diffmap_combine_ref``,
``butteraugli_norm_sums_ref``) in one pass over the pixels (the norms: per-block partials, then one program per
map adds them in a fixed order), replacing the twin's tens of PyTorch launches per stage (each a full read and write of a plane).
The arithmetic is the twin's in its order: kernels compile without FMA contraction, float32 divisions and square
roots are IEEE-rounded (``div_rn``/``sqrt_rn``; PyTorch's are), ``c / t`` is ``reciprocal(t) * c`` as PyTorch's
``Tensor.__rtruediv__`` computes it, and constants are read from a small table in the compute dtype (a float
kernel argument would arrive as float32). uint8 sRGB goes through the twin's 256-entry table
(``srgb_table_ref``: exact); float sRGB uses ``exp2(2.4·log2 v)`` (a few ulp from ``torch.pow``).

Pixels are flat blocks of one image; every input plane must have contiguous rows (the plans copy otherwise),
planes and batch may have any strides (an expanded reference batch is read in place). Forward only: the
differentiable path is the twin.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedsim.core.launch import Launcher
from fusedsim.core.state import cached
import fusedsim.families.butteraugli.twin as spec
from fusedsim.families.butteraugli.twin import BANDS
from fusedsim.families.butteraugli.ops import (
    butteraugli_linear,
    butteraugli_opsin,
    butteraugli_rest,
    butteraugli_hf_pre,
    butteraugli_bands,
    butteraugli_combine,
    butteraugli_norm_sums,
)

BLOCK = 1024
_OPTIONS = {"num_warps": 4, "enable_fp_fusion": False}


# ---------------------------------------------------------------------------------------------- helpers
@triton.jit
def _div(a, b, F64: tl.constexpr):
    if F64:
        return a / b
    else:
        return tl.div_rn(a, b)


@triton.jit
def _sqrt(x, F64: tl.constexpr):
    if F64:
        return tl.sqrt(x)
    else:
        return tl.sqrt_rn(x)


@triton.jit
def _remove_range(x, w):
    return tl.where(x > w, x - w, tl.where(x < -w, x + w, tl.zeros_like(x)))


@triton.jit
def _amplify_range(x, w):
    return tl.where(x > w, x + w, tl.where(x < -w, x - w, x + x))


@triton.jit
def _maximum_clamp(x, m, mul):
    return tl.where(x < -m, (x + m) * mul - m, tl.where(x >= m, (x - m) * mul + m, x))


@triton.jit
def _mix_row(r, g, b, C, row: tl.constexpr):
    m0 = tl.load(C + 1 + 4 * row)
    m1 = tl.load(C + 2 + 4 * row)
    m2 = tl.load(C + 3 + 4 * row)
    bias = tl.load(C + 4 + 4 * row)
    return m0 * r + (m1 * g + (m2 * b + bias))


@triton.jit
def _fast_log2(x, C, F64: tl.constexpr):
    """libjxl's FastLog2f as the twin computes it: exponent from the float32 bits, rational polynomial (P, Q at
    C[17..22]) of the exactly scaled mantissa."""
    bits = x.to(tl.float32).to(tl.int32, bitcast=True)
    e = (bits - 0x3F2AAAAB) >> 23
    scale = ((127 - e) << 23).to(tl.float32, bitcast=True)  # 2^-e, exact
    m = x * scale.to(x.dtype) - 1.0
    p = (tl.load(C + 19) * m + tl.load(C + 18)) * m + tl.load(C + 17)
    q = (tl.load(C + 22) * m + tl.load(C + 21)) * m + tl.load(C + 20)
    return _div(p, q, F64) + e.to(x.dtype)


@triton.jit
def _opsin_channel(pre, cur, C, c: tl.constexpr, F64: tl.constexpr):
    p = tl.maximum(pre, tl.load(C + 13 + c))
    gamma = tl.load(C + 23) * _fast_log2(tl.maximum(p, 0.0) + tl.load(C + 25), C, F64) + tl.load(C + 24)
    sens = tl.maximum(_div(gamma, p, F64), tl.load(C + 16))
    return tl.maximum(cur * sens, tl.load(C + 4 + 4 * c))


@triton.jit
def _l2_asymmetric(v0, v1, w_gt, w_lt, small_mul):
    diff = v0 - v1
    fabs0 = tl.abs(v0)
    small = small_mul * fabs0
    zero = tl.zeros_like(v0)
    neg = tl.where(v1 > -small, v1 + small, tl.where(v1 < -fabs0, -v1 - fabs0, zero))
    pos = tl.where(v1 < small, small - v1, tl.where(v1 > fabs0, v1 - fabs0, zero))
    v = tl.where(v0 < 0, neg, pos)
    return diff * diff * w_gt + w_lt * (v * v)


@triton.jit
def _mask_y(delta, C, k: tl.constexpr, F64: tl.constexpr):
    """GLOBAL_SCALE·(1 + mul·(1 / (scaler·delta + offset))) squared; (offset, scaler, mul) at C[k..k+2]."""
    rec = _div(1.0, tl.load(C + k + 1) * delta + tl.load(C + k), F64)
    v = tl.load(C + 12) * (1.0 + rec * tl.load(C + k + 2))
    return v * v


# ---------------------------------------------------------------------------------------------- kernels
@triton.jit
def _linear_kernel(X, LUT, C, OUT, H, W, sxn, sxc, sxh, sxw, IS_U8: tl.constexpr, F64: tl.constexpr,
                   BLOCK: tl.constexpr):
    n = tl.program_id(1).to(tl.int64)
    sxc, sxh, sxw = tl.cast(sxc, tl.int64), tl.cast(sxh, tl.int64), tl.cast(sxw, tl.int64)  # 64-bit offsets
    pix = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = pix < H * W
    src = X + n * sxn + (pix // W).to(tl.int64) * sxh + (pix % W).to(tl.int64) * sxw
    dst = OUT + n * 3 * H * W + pix
    for c in tl.static_range(3):
        if IS_U8:
            code = tl.load(src + c * sxc, mask=ok, other=0).to(tl.int32)
            out = tl.load(LUT + code, mask=ok, other=0.0)
        else:
            v = tl.load(src + c * sxc, mask=ok, other=0.0).to(OUT.dtype.element_ty)
            curve = tl.maximum(_div(v + tl.load(C + 2), tl.load(C + 3), F64), 0.0)
            powed = tl.where(curve > 0, tl.exp2(tl.load(C + 4) * tl.log2(tl.where(curve > 0, curve, 1.0))), 0.0)
            out = tl.where(v <= tl.load(C + 0), _div(v, tl.load(C + 1), F64), powed)
        tl.store(dst + c * H * W, out, mask=ok)


@triton.jit
def _opsin_kernel(RGB, BL, C, OUT, HW, srn, src_, sbn, sbc, F64: tl.constexpr, BLOCK: tl.constexpr):
    n = tl.program_id(1).to(tl.int64)
    HW, src_, sbc = tl.cast(HW, tl.int64), tl.cast(src_, tl.int64), tl.cast(sbc, tl.int64)  # 64-bit offsets
    pix = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = pix < HW
    ty = OUT.dtype.element_ty
    it = tl.load(C + 0)
    r = tl.load(RGB + n * srn + pix, mask=ok, other=0.0).to(ty) * it
    g = tl.load(RGB + n * srn + src_ + pix, mask=ok, other=0.0).to(ty) * it
    b = tl.load(RGB + n * srn + 2 * src_ + pix, mask=ok, other=0.0).to(ty) * it
    br = tl.load(BL + n * sbn + pix, mask=ok, other=0.0).to(ty) * it
    bg = tl.load(BL + n * sbn + sbc + pix, mask=ok, other=0.0).to(ty) * it
    bb = tl.load(BL + n * sbn + 2 * sbc + pix, mask=ok, other=0.0).to(ty) * it
    out0 = _opsin_channel(_mix_row(br, bg, bb, C, 0), _mix_row(r, g, b, C, 0), C, 0, F64)
    out1 = _opsin_channel(_mix_row(br, bg, bb, C, 1), _mix_row(r, g, b, C, 1), C, 1, F64)
    out2 = _opsin_channel(_mix_row(br, bg, bb, C, 2), _mix_row(r, g, b, C, 2), C, 2, F64)
    dst = OUT + n * 3 * HW + pix
    tl.store(dst, out0 - out1, mask=ok)
    tl.store(dst + HW, out0 + out1, mask=ok)
    tl.store(dst + 2 * HW, out2, mask=ok)


@triton.jit
def _rest_kernel(XYB, LF, OUT, HW, sxn, sxc, sln, slc, BLOCK: tl.constexpr):
    n = tl.program_id(1).to(tl.int64)
    HW, sxc, slc = tl.cast(HW, tl.int64), tl.cast(sxc, tl.int64), tl.cast(slc, tl.int64)  # 64-bit offsets
    pix = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = pix < HW
    ty = OUT.dtype.element_ty
    for c in tl.static_range(3):
        x = tl.load(XYB + n * sxn + c * sxc + pix, mask=ok, other=0.0).to(ty)
        lf = tl.load(LF + n * sln + c * slc + pix, mask=ok, other=0.0).to(ty)
        tl.store(OUT + (n * 3 + c) * HW + pix, x - lf, mask=ok)


@triton.jit
def _hf_pre_kernel(REST, MF, C, OUT, HW, srn, src_, smn, smc, F64: tl.constexpr, BLOCK: tl.constexpr):
    n = tl.program_id(1).to(tl.int64)
    HW, src_, smc = tl.cast(HW, tl.int64), tl.cast(src_, tl.int64), tl.cast(smc, tl.int64)  # 64-bit offsets
    pix = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = pix < HW
    ty = OUT.dtype.element_ty
    hx = tl.load(REST + n * srn + pix, mask=ok, other=0.0).to(ty) - tl.load(MF + n * smn + pix, mask=ok,
                                                                            other=0.0).to(ty)
    hy = (tl.load(REST + n * srn + src_ + pix, mask=ok, other=0.0).to(ty)
          - tl.load(MF + n * smn + smc + pix, mask=ok, other=0.0).to(ty))
    c46 = tl.load(C + 0)
    sup = _div(1.0, hy * hy + c46, F64) * c46
    hx0 = (sup * tl.load(C + 1) + tl.load(C + 2)) * hx
    tl.store(OUT + n * 2 * HW + pix, hx0, mask=ok)
    tl.store(OUT + n * 2 * HW + HW + pix, hy, mask=ok)


@triton.jit
def _bands_kernel(LF, MF, PRE, BL, C, OUT, HW, sln, slc, smn, smc, spn, spc, sbn, sbc, F64: tl.constexpr,
                  BLOCK: tl.constexpr):
    n = tl.program_id(1).to(tl.int64)
    HW, slc, smc = tl.cast(HW, tl.int64), tl.cast(slc, tl.int64), tl.cast(smc, tl.int64)  # 64-bit offsets
    spc, sbc = tl.cast(spc, tl.int64), tl.cast(sbc, tl.int64)
    pix = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = pix < HW
    ty = OUT.dtype.element_ty
    lx = tl.load(LF + n * sln + pix, mask=ok, other=0.0).to(ty)
    ly = tl.load(LF + n * sln + slc + pix, mask=ok, other=0.0).to(ty)
    lb = tl.load(LF + n * sln + 2 * slc + pix, mask=ok, other=0.0).to(ty)
    mx = tl.load(MF + n * smn + pix, mask=ok, other=0.0).to(ty)
    my = tl.load(MF + n * smn + smc + pix, mask=ok, other=0.0).to(ty)
    mb = tl.load(MF + n * smn + 2 * smc + pix, mask=ok, other=0.0).to(ty)
    px = tl.load(PRE + n * spn + pix, mask=ok, other=0.0).to(ty)
    py = tl.load(PRE + n * spn + spc + pix, mask=ok, other=0.0).to(ty)
    bx = tl.load(BL + n * sbn + pix, mask=ok, other=0.0).to(ty)
    by = tl.load(BL + n * sbn + sbc + pix, mask=ok, other=0.0).to(ty)
    mf_x = _remove_range(mx, tl.load(C + 0))
    mf_y = _amplify_range(my, tl.load(C + 1))
    uhf_x = _remove_range(px - bx, tl.load(C + 2))
    hf_x = _remove_range(bx, tl.load(C + 3))
    clamp_mul = tl.load(C + 4)
    hf_y = _maximum_clamp(by, tl.load(C + 5), clamp_mul)
    uhf_y = _maximum_clamp(py - hf_y, tl.load(C + 6), clamp_mul) * tl.load(C + 7)
    hf_y = _amplify_range(hf_y * tl.load(C + 8), tl.load(C + 9))
    x = (uhf_x + hf_x) * tl.load(C + 14)
    y = uhf_y * tl.load(C + 15) + hf_y * tl.load(C + 15)
    act = _sqrt(x * x + y * y, F64)
    act = _sqrt(tl.load(C + 16) * tl.abs(act) + tl.load(C + 17), F64) - tl.load(C + 18)
    dst = OUT + n * 11 * HW + pix
    tl.store(dst, lx * tl.load(C + 10), mask=ok)
    tl.store(dst + HW, ly * tl.load(C + 11), mask=ok)
    tl.store(dst + 2 * HW, (tl.load(C + 12) * ly + lb) * tl.load(C + 13), mask=ok)
    tl.store(dst + 3 * HW, mf_x, mask=ok)
    tl.store(dst + 4 * HW, mf_y, mask=ok)
    tl.store(dst + 5 * HW, mb, mask=ok)
    tl.store(dst + 6 * HW, hf_x, mask=ok)
    tl.store(dst + 7 * HW, hf_y, mask=ok)
    tl.store(dst + 8 * HW, uhf_x, mask=ok)
    tl.store(dst + 9 * HW, uhf_y, mask=ok)
    tl.store(dst + 10 * HW, act, mask=ok)


@triton.jit
def _combine_kernel(B0, B1, AX, AY, A0, A1, M, HALF, C, OUT, W, HW, WH, s0n, s0c, s1n, s1c, sxn, syn,
                    sa0n, sa1n, smn, shn, HAS_HALF: tl.constexpr, F64: tl.constexpr, BLOCK: tl.constexpr):
    n = tl.program_id(1).to(tl.int64)
    HW, s0c, s1c = tl.cast(HW, tl.int64), tl.cast(s0c, tl.int64), tl.cast(s1c, tl.int64)  # 64-bit offsets
    pix = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = pix < HW
    ty = OUT.dtype.element_ty
    b0 = B0 + n * s0n + pix
    b1 = B1 + n * s1n + pix
    ac_x = tl.load(AX + n * sxn + pix, mask=ok, other=0.0).to(ty)
    ac_y = tl.load(AY + n * syn + pix, mask=ok, other=0.0).to(ty)
    small_mul = tl.load(C + 4)
    ac_x = ac_x + _l2_asymmetric(tl.load(b0 + 6 * s0c, mask=ok, other=0.0).to(ty),
                                 tl.load(b1 + 6 * s1c, mask=ok, other=0.0).to(ty), tl.load(C + 0), tl.load(C + 1),
                                 small_mul)
    ac_y = ac_y + _l2_asymmetric(tl.load(b0 + 7 * s0c, mask=ok, other=0.0).to(ty),
                                 tl.load(b1 + 7 * s1c, mask=ok, other=0.0).to(ty), tl.load(C + 2), tl.load(C + 3),
                                 small_mul)
    dmf0 = tl.load(b0 + 3 * s0c, mask=ok, other=0.0).to(ty) - tl.load(b1 + 3 * s1c, mask=ok, other=0.0).to(ty)
    dmf1 = tl.load(b0 + 4 * s0c, mask=ok, other=0.0).to(ty) - tl.load(b1 + 4 * s1c, mask=ok, other=0.0).to(ty)
    dmf2 = tl.load(b0 + 5 * s0c, mask=ok, other=0.0).to(ty) - tl.load(b1 + 5 * s1c, mask=ok, other=0.0).to(ty)
    dlf0 = tl.load(b0, mask=ok, other=0.0).to(ty) - tl.load(b1, mask=ok, other=0.0).to(ty)
    dlf1 = tl.load(b0 + s0c, mask=ok, other=0.0).to(ty) - tl.load(b1 + s1c, mask=ok, other=0.0).to(ty)
    dlf2 = tl.load(b0 + 2 * s0c, mask=ok, other=0.0).to(ty) - tl.load(b1 + 2 * s1c, mask=ok, other=0.0).to(ty)
    ac_x = ac_x + dmf0 * dmf0 * tl.load(C + 5)
    ac_y = ac_y + dmf1 * dmf1 * tl.load(C + 6)
    ac_b = dmf2 * dmf2 * tl.load(C + 7)
    dc0 = dlf0 * dlf0 * tl.load(C + 8)
    dc1 = dlf1 * dlf1 * tl.load(C + 9)
    dc2 = dlf2 * dlf2 * tl.load(C + 10)
    da = tl.load(A0 + n * sa0n + pix, mask=ok, other=0.0).to(ty) - tl.load(A1 + n * sa1n + pix, mask=ok,
                                                                          other=0.0).to(ty)
    ac_y = ac_y + tl.load(C + 11) * (da * da)
    mask = tl.load(M + n * smn + pix, mask=ok, other=0.0).to(ty)
    ac_mask = _mask_y(mask, C, 13, F64)
    dc_mask = _mask_y(mask, C, 16, F64)
    total = (dc0 * dc_mask + dc1 * dc_mask + dc2 * dc_mask) + (ac_x * ac_mask + ac_y * ac_mask + ac_b * ac_mask)
    d = _sqrt(total, F64)
    if HAS_HALF:
        row = pix // W
        col = pix % W
        up = tl.load(HALF + n * shn + (row // 2) * WH + col // 2, mask=ok, other=0.0).to(ty)
        d = d * tl.load(C + 19) + tl.load(C + 20) * up
    tl.store(OUT + n * HW + pix, d, mask=ok)


@triton.jit
def _norm_partials_kernel(D, PART, HW, sdn, CHUNK, P, BLOCK: tl.constexpr):
    n = tl.program_id(1).to(tl.int64)
    p = tl.program_id(0)
    base = D + n * sdn
    mx = tl.full([BLOCK], float("-inf"), tl.float64)
    s3 = tl.zeros([BLOCK], tl.float64)
    s6 = tl.zeros([BLOCK], tl.float64)
    s12 = tl.zeros([BLOCK], tl.float64)
    for off in range(0, CHUNK, BLOCK):
        idx = p * CHUNK + off + tl.arange(0, BLOCK)
        ok = idx < HW
        d = tl.load(base + idx, mask=ok, other=0.0).to(tl.float64)
        mx = tl.maximum(mx, tl.where(ok, d, float("-inf")))
        d3 = d * d * d
        d6 = d3 * d3
        s3 += d3
        s6 += d6
        s12 += d6 * d6
    out = PART + (n * P + p) * 4
    tl.store(out, tl.max(mx, axis=0))
    tl.store(out + 1, tl.sum(s3, axis=0))
    tl.store(out + 2, tl.sum(s6, axis=0))
    tl.store(out + 3, tl.sum(s12, axis=0))


@triton.jit
def _norm_final_kernel(PART, OUT, HW, P, BLOCK_P: tl.constexpr):
    n = tl.program_id(0).to(tl.int64)
    i = tl.arange(0, BLOCK_P)
    ok = i < P
    part = PART + (n * P + i) * 4
    count = tl.cast(HW, tl.float64)
    tl.store(OUT + n * 4, tl.max(tl.load(part, mask=ok, other=float("-inf")), axis=0))
    for k in tl.static_range(1, 4):
        tl.store(OUT + n * 4 + k, tl.sum(tl.load(part + k, mask=ok, other=0.0), axis=0) / count)


# ------------------------------------------------------------------------------------------------ plans
def _dtype(*tensors: torch.Tensor) -> torch.dtype:
    return torch.float64 if any(t.dtype == torch.float64 for t in tensors) else torch.float32


@cached(maxsize=64)
def _table(values: tuple[float, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Constants in the compute dtype (rounded as PyTorch rounds a Python scalar against a tensor of it)."""
    return torch.tensor(values, dtype=dtype, device=device)


def _rows(x: torch.Tensor) -> torch.Tensor:
    """x with contiguous rows in every plane (itself when it has them: expanded batches stay views)."""
    h, w = x.shape[-2:]
    if (x.stride(-1) == 1 or w == 1) and (x.stride(-2) == w or h == 1):
        return x
    return x.contiguous()


def _planes(x: torch.Tensor) -> tuple[int, int]:
    """(batch, channel) strides of an (N, C, H, W) tensor with contiguous rows; (batch, 0) for (N, H, W)."""
    x = _rows(x)
    return (x.stride(0), x.stride(1)) if x.dim() == 4 else (x.stride(0), 0)


def _check(name: str, tensors, channels: tuple[int | None, ...]) -> None:
    """Same batch and size; ``channels[i]``: required channel count of tensor i, None for an (N, H, W) map."""
    n, (h, w) = tensors[0].shape[0], tensors[0].shape[-2:]
    for t, c in zip(tensors, channels):
        ok = t.dim() == 3 if c is None else (t.dim() == 4 and t.shape[1] == c)
        if not ok or t.shape[0] != n or t.shape[-2:] != (h, w) or not t.is_floating_point():
            want = "(N, H, W)" if c is None else f"(N, {c}, H, W)"
            raise ValueError(f"{name}: expected floating {want} tensors of one batch and size; got "
                             f"{[tuple(x.shape) for x in tensors]}")


def _planner(cls):
    """A plan factory ``(tensors, scalars) -> plan`` caching one plan per shapes, strides, dtypes and scalars."""
    cache: dict = {}

    def plan(tensors, scalars):
        key = (*((t.shape, t.stride(), t.dtype) for t in tensors), tensors[0].device, *scalars)
        found = cache.get(key)
        if found is None:
            if len(cache) >= 256:
                cache.clear()
            found = cache[key] = cls(tensors, tuple(scalars))
        return found

    plan.__name__ = plan.__qualname__ = f"{cls.__name__.lower()}_plan"
    return plan


class _Stage:
    """One launch over (pixel blocks, batch) writing a fresh (N, C_out, H, W) output."""

    kernel = None
    channels_out = 0

    def __init__(self, tensors, scalars) -> None:
        t0 = tensors[0]
        self.n, (self.h, self.w) = t0.shape[0], t0.shape[-2:]
        self.device = t0.device
        self.dtype = _dtype(*tensors)
        self.f64 = self.dtype == torch.float64
        self.hw = self.h * self.w
        self.launch = Launcher(self.kernel, (triton.cdiv(max(self.hw, 1), BLOCK), self.n), **_OPTIONS)

    def _out(self) -> torch.Tensor:
        shape = (self.n, self.channels_out, self.h, self.w) if self.channels_out else (self.n, self.h, self.w)
        return torch.empty(shape, dtype=self.dtype, device=self.device)


# -------------------------------------------------------------------------------------------------- linear
_LINEAR_C = (0.04045, 12.92, 0.055, 1.055, 2.4)


@cached(maxsize=8)
def _srgb_lut(device: torch.device) -> torch.Tensor:
    return spec.srgb_table_ref().to(device)


class _Linear(_Stage):
    kernel = _linear_kernel
    channels_out = 3

    def __init__(self, tensors, scalars) -> None:
        (x,) = tensors
        if x.dim() != 4 or x.shape[1] != 3 or not (x.dtype == torch.uint8 or x.is_floating_point()):
            raise ValueError(f"butteraugli_linear runs on (N, 3, H, W) uint8 or float sRGB; got {tuple(x.shape)} "
                             f"{x.dtype}")
        super().__init__(tensors, scalars)
        u8 = x.dtype == torch.uint8
        if u8:
            self.dtype, self.f64 = torch.float32, False
        self.consts = _table(_LINEAR_C, self.dtype, self.device)
        self.lut = _srgb_lut(self.device) if u8 else self.consts
        self.args = (self.h, self.w, *x.stride(), u8, self.f64, BLOCK)

    def forward(self, x):
        out = self._out()
        if out.numel():
            self.launch(x, self.lut, self.consts, out, *self.args)
        return out, ()


# --------------------------------------------------------------------------------------------------- opsin
def _opsin_constants(intensity_target: float) -> tuple[float, ...]:
    mix = [v for row in spec._MIX32 for v in row]
    floors = [max(row[3], spec._MIN_SENS) for row in spec._MIX32]
    return (spec._f32(intensity_target), *mix, *floors, spec._MIN_SENS, *spec._LOG2_P, *spec._LOG2_Q,
            spec._GAMMA_MUL, spec._GAMMA_ADD, spec._GAMMA_BIAS)


class _Opsin(_Stage):
    kernel = _opsin_kernel
    channels_out = 3

    def __init__(self, tensors, scalars) -> None:
        _check("butteraugli_opsin", tensors, (3, 3))
        super().__init__(tensors, scalars)
        self.consts = _table(_opsin_constants(*scalars), self.dtype, self.device)
        rgb, blurred = tensors
        self.args = (self.hw, *_planes(rgb), *_planes(blurred), self.f64, BLOCK)

    def forward(self, rgb, blurred):
        out = self._out()
        if out.numel():
            self.launch(_rows(rgb), _rows(blurred), self.consts, out, *self.args)
        return out, ()


# -------------------------------------------------------------------------------------------- rest, hf_pre
class _Rest(_Stage):
    kernel = _rest_kernel
    channels_out = 3

    def __init__(self, tensors, scalars) -> None:
        _check("butteraugli_rest", tensors, (3, 3))
        super().__init__(tensors, scalars)
        xyb, lf = tensors
        self.args = (self.hw, *_planes(xyb), *_planes(lf), BLOCK)

    def forward(self, xyb, lf):
        out = self._out()
        if out.numel():
            self.launch(_rows(xyb), _rows(lf), out, *self.args)
        return out, ()


_HF_PRE_C = (spec._f32(46.0), spec._f32(1.0 - 0.653020556257), spec._f32(0.653020556257))


class _HfPre(_Stage):
    kernel = _hf_pre_kernel
    channels_out = 2

    def __init__(self, tensors, scalars) -> None:
        _check("butteraugli_hf_pre", tensors, (3, 3))
        super().__init__(tensors, scalars)
        self.consts = _table(_HF_PRE_C, self.dtype, self.device)
        rest, mf = tensors
        self.args = (self.hw, *_planes(rest), *_planes(mf), self.f64, BLOCK)

    def forward(self, rest, mf):
        out = self._out()
        if out.numel():
            self.launch(_rows(rest), _rows(mf), self.consts, out, *self.args)
        return out, ()


# --------------------------------------------------------------------------------------------------- bands
_f = spec._f32
_BANDS_C = (_f(0.29), _f(0.1), _f(0.04), _f(1.5), _f(0.724216145665), _f(28.4691806922), _f(5.19175294647),
            _f(2.69313763794), _f(2.155), _f(0.132), _f(32.2217497012), _f(13.7697791434), _f(-0.362267051518),
            _f(47.504615728), _f(2.5), _f(0.4), spec._MASK_MUL, spec._MASK_BIAS, spec._MASK_SQRT_BIAS)


class _Bands(_Stage):
    kernel = _bands_kernel
    channels_out = BANDS

    def __init__(self, tensors, scalars) -> None:
        _check("butteraugli_bands", tensors, (3, 3, 2, 2))
        super().__init__(tensors, scalars)
        self.consts = _table(_BANDS_C, self.dtype, self.device)
        self.args = (self.hw, *(s for t in tensors for s in _planes(t)), self.f64, BLOCK)

    def forward(self, lf, mf, hf_pre, hf_blur):
        out = self._out()
        if out.numel():
            self.launch(_rows(lf), _rows(mf), _rows(hf_pre), _rows(hf_blur), self.consts, out, *self.args)
        return out, ()


# ------------------------------------------------------------------------------------------------- combine
def _combine_constants(hf_asymmetry: float) -> tuple[float, ...]:
    w = spec._WMUL
    return (*spec.combine_constants(hf_asymmetry), _f(0.4), _f(w[3]), _f(w[4]), _f(w[5]), _f(w[6]), _f(w[7]),
            _f(w[8]), _f(10.0), spec._GLOBAL_SCALE, *spec._AC_MASK, *spec._DC_MASK, 0.85, 0.5)


class _Combine(_Stage):
    kernel = _combine_kernel

    def __init__(self, tensors, scalars) -> None:
        half = tensors[7]
        _check("butteraugli_combine", tensors[:7], (BANDS, BANDS, None, None, None, None, None))
        super().__init__(tensors[:7], scalars)
        self.has_half = half.numel() > 0
        hh, wh = (self.h + 1) // 2, (self.w + 1) // 2
        if self.has_half and (half.dim() != 3 or half.shape != (self.n, hh, wh)):
            raise ValueError(f"butteraugli_combine: half must be ({self.n}, {hh}, {wh}) or empty; got "
                             f"{tuple(half.shape)}")
        self.consts = _table(_combine_constants(*scalars), self.dtype, self.device)
        strides = [_planes(t) for t in tensors[:7]]
        half_n = _planes(half)[0] if self.has_half else 0
        self.args = (self.w, self.hw, wh, *strides[0], *strides[1], *(s[0] for s in strides[2:]), half_n,
                     self.has_half, self.f64, BLOCK)

    def forward(self, b0, b1, ac_x, ac_y, act0, act1, mask, half):
        out = self._out()
        if out.numel():
            half = _rows(half) if self.has_half else mask
            self.launch(*(_rows(t) for t in (b0, b1, ac_x, ac_y, act0, act1, mask)), half, self.consts, out,
                        *self.args)
        return out, ()


# ---------------------------------------------------------------------------------------------------- norms
_NORM_BLOCK, _NORM_PROGRAMS = 1024, 512


class _NormSums:
    def __init__(self, tensors, scalars) -> None:
        (d,) = tensors
        if d.dim() != 3 or not d.is_floating_point():
            raise ValueError(f"butteraugli_norm_sums runs on floating (N, H, W) maps; got {tuple(d.shape)} {d.dtype}")
        self.n, self.device = d.shape[0], d.device
        hw = d.shape[1] * d.shape[2]
        chunk = triton.cdiv(triton.cdiv(max(hw, 1), _NORM_PROGRAMS), _NORM_BLOCK) * _NORM_BLOCK
        self.p = triton.cdiv(max(hw, 1), chunk)
        self.partials = Launcher(_norm_partials_kernel, (self.p, self.n), num_warps=4)
        self.final = Launcher(_norm_final_kernel, (self.n,), num_warps=4)
        self.args = (hw, chunk, self.p, _NORM_BLOCK)
        self.final_args = (hw, self.p, max(triton.next_power_of_2(self.p), 16))

    def forward(self, d):
        d = d.reshape(d.shape[0], -1)
        if d.stride(-1) != 1:
            d = d.contiguous()
        part = torch.empty((self.n, self.p, 4), dtype=torch.float64, device=self.device)
        out = torch.empty((self.n, 4), dtype=torch.float64, device=self.device)
        self.partials(d, part, self.args[0], d.stride(0), *self.args[1:])
        self.final(part, out, *self.final_args)
        return out, ()


linear_plan = butteraugli_linear.triton_plan(_planner(_Linear))
opsin_plan = butteraugli_opsin.triton_plan(_planner(_Opsin))
rest_plan = butteraugli_rest.triton_plan(_planner(_Rest))
hf_pre_plan = butteraugli_hf_pre.triton_plan(_planner(_HfPre))
bands_plan = butteraugli_bands.triton_plan(_planner(_Bands))
combine_plan = butteraugli_combine.triton_plan(_planner(_Combine))
norm_sums_plan = butteraugli_norm_sums.triton_plan(_planner(_NormSums))
