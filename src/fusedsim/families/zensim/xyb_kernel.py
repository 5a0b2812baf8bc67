"""zensim's colour transform and pyramid step as Triton kernels, in upstream's float32 arithmetic.

    zensim_xyb(rgb, lut) -> (N, 3, H', W') float32: linear RGB (or uint8 sRGB codes through the (256,) table lut)
                            -> positive XYB, mirror-padded for the pyramid
    zensim_downscale(x) -> (N, C, h//2, w//2) float32: ``(((a + b) + c) + d) * 0.25`` over 2x2 blocks

Twins: :func:`fusedsim.families.zensim.f32_twin.zensim_xyb_ref` (``pad_for_pyramid_ref`` of
``linear_to_positive_xyb_f32_ref``) and :func:`~fusedsim.families.zensim.f32_twin.zensim_downscale_ref`.

``_xyb_kernel``: one program per (image, output row, block of up to 1024 columns; the interpreter: blocks of rows); it reads the mirrored source row
(``pad_for_pyramid_ref``'s index, folded in: padding commutes with a per-pixel map) of r, g, b at any strides and
writes the three XYB planes, one pass: 12 B/px read (3 B/px for uint8 codes, looked up in the 1 KiB table),
12 B/px written (plus the padding's extra columns), instead of
~60 PyTorch launches (the twin's float64 FMAs and their dtype copies). Arithmetic, in the twin's order:

- opsin: ``fma(m0, r, fma(m1, g, fma(m2, b, bias)))`` per row of the matrix, clamped at 0;
- cube root: the bit-hack seed ``bits / 3 + 709958130`` (``bitcast`` to int32 and back), two Halley steps
  ``t = t * (fma(x, 2, t³) / fma(t³, 2, x))`` with ``t³ = (t * t) * t`` and a correctly rounded division
  (``div_rn``), 0 where x is 0;
- ``x * 14 + 0.42`` as the twin computes it: in float64 with the float64 constant 0.42 (read from a float64
  tensor), rounded once to float32 (the twin's ``_fma`` adds 0.42 unrounded, so a float32 FMA would differ);
- ``y + f32(0.01)``, ``(t2 - y) + f32(0.55)`` in float32.

``tl.fma`` is the hardware float32 FMA; the twin evaluates its ``_fma`` in float64 and rounds once, the same but for
double-rounding ties (~1 in 2**29 FMAs). Kernels compile with ``enable_fp_fusion=False`` so nothing else is
contracted.

``_downscale_kernel``: one program per (plane, output row, block of columns): two source rows, each loaded as a
[1, BLOCK, 2] tile (adjacent pairs: coalesced), split into even/odd columns, the twin's float32 sum order. 4 B/px read,
1 B/px written (per source pixel).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedsim.core.launch import Launcher
from fusedsim.core.state import cached
from fusedsim.families.zensim.f32_twin import cbrt_f32_ref
from fusedsim.families.zensim.twin import (
    OPSIN,
    OPSIN_BIAS,
    MIN_PYRAMID_DIM,
    simd_padded_width,
)
from fusedsim.families.zensim.ops import zensim_downscale, zensim_xyb


@cached(maxsize=16)
def _constants(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """float32 [m00..m22, bias, -cbrt(bias), 0.01, 0.55] (the twin's float32 constants: its ``full_like`` rounds
    the matrix to float32, its cube root of the bias is computed here by the twin itself) and float64 [0.42]."""
    neg_cbrt_bias = -cbrt_f32_ref(torch.tensor([OPSIN_BIAS], dtype=torch.float32))
    values = [m for row in OPSIN for m in row] + [OPSIN_BIAS, neg_cbrt_bias.item(), 0.01, 0.55]
    return (torch.tensor(values, dtype=torch.float32).to(device),
            torch.tensor([0.42], dtype=torch.float64).to(device))


@triton.jit
def _mirror_index(i, n):
    """``pad_for_pyramid_ref``'s fold of padded index i into 0..n-1 (period 2(n-1), no edge repeat; 0 if n == 1)."""
    n = tl.cast(n, tl.int32)  # a size of 1 arrives as a constexpr
    period = tl.maximum(2 * (n - 1), 1)
    m = i % period
    return tl.where(m < n, m, period - m)


@triton.jit
def _cbrt(x):
    """The twin's ``cbrt_f32_ref`` of x >= 0."""
    bits = x.to(tl.int32, bitcast=True) & 0x7FFFFFFF
    t = (bits // 3 + 709_958_130).to(tl.float32, bitcast=True)
    for _ in tl.static_range(2):
        r = (t * t) * t
        t = t * tl.math.div_rn(tl.fma(x, 2.0, r), tl.fma(r, 2.0, x))
    return tl.where(x == 0.0, 0.0, t)


@triton.jit
def _opsin(r, g, b, C, ROW: tl.constexpr):
    # scalars broadcast explicitly (tl.fma's operand broadcasting differs between Triton versions)
    m0 = tl.broadcast_to(tl.load(C + 3 * ROW), r.shape)
    m1 = tl.broadcast_to(tl.load(C + 3 * ROW + 1), r.shape)
    m2 = tl.broadcast_to(tl.load(C + 3 * ROW + 2), r.shape)
    bias = tl.broadcast_to(tl.load(C + 9), r.shape)
    # clamp_min(0) as torch's: NaN stays NaN
    return tl.maximum(tl.fma(m0, r, tl.fma(m1, g, tl.fma(m2, b, bias))), 0.0, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def _xyb_kernel(RGB, LUT, OUT, C, C64, in_h, in_w, out_h, out_w, row_blocks, col_blocks,
                x_n, x_c, x_h, x_w, IS_U8: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    cb = pid % col_blocks
    t = pid // col_blocks
    rb = t % row_blocks
    n = (t // row_blocks).to(tl.int64)
    y = rb * BLOCK_H + tl.arange(0, BLOCK_H)
    cols = cb * BLOCK + tl.arange(0, BLOCK)
    mask = (y < out_h)[:, None] & (cols < out_w)[None, :]
    ys = _mirror_index(y, in_h).to(tl.int64)
    xs = _mirror_index(cols, in_w).to(tl.int64)
    src = RGB + n * tl.cast(x_n, tl.int64) + ys[:, None] * tl.cast(x_h, tl.int64) \
        + xs[None, :] * tl.cast(x_w, tl.int64)
    cs = tl.cast(x_c, tl.int64)
    if IS_U8:  # sRGB codes: the linear value from the table (masked lanes read entry 0)
        r = tl.load(LUT + tl.load(src, mask=mask, other=0).to(tl.int32))
        g = tl.load(LUT + tl.load(src + cs, mask=mask, other=0).to(tl.int32))
        b = tl.load(LUT + tl.load(src + 2 * cs, mask=mask, other=0).to(tl.int32))
    else:
        r = tl.load(src, mask=mask, other=0.0).to(tl.float32)
        g = tl.load(src + cs, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(src + 2 * cs, mask=mask, other=0.0).to(tl.float32)
    t0 = _cbrt(_opsin(r, g, b, C, 0))
    t1 = _cbrt(_opsin(r, g, b, C, 1))
    t2 = _cbrt(_opsin(r, g, b, C, 2))
    ab = tl.load(C + 10)
    c0 = t0 + ab
    c1 = t1 + ab
    xv = 0.5 * (c0 - c1)
    yv = 0.5 * (c0 + c1)
    x_out = (xv.to(tl.float64) * 14.0 + tl.load(C64)).to(tl.float32)  # the twin's _fma(x, 14, 0.42 float64)
    y_out = yv + tl.load(C + 11)
    b_out = (t2 - yv) + tl.load(C + 12)
    plane = tl.cast(out_h, tl.int64) * out_w
    out = OUT + n * 3 * plane + y.to(tl.int64)[:, None] * out_w + cols[None, :]
    tl.store(out, x_out, mask=mask)
    tl.store(out + plane, y_out, mask=mask)
    tl.store(out + 2 * plane, b_out, mask=mask)


@triton.jit
def _downscale_kernel(X, OUT, channels, out_h, out_w, row_blocks, col_blocks, x_n, x_c, x_h, x_w,
                      BLOCK_H: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    cb = pid % col_blocks
    t = pid // col_blocks
    rb = t % row_blocks
    plane = t // row_blocks
    n = (plane // channels).to(tl.int64)
    c = (plane % channels).to(tl.int64)
    y = rb * BLOCK_H + tl.arange(0, BLOCK_H)
    cols = cb * BLOCK + tl.arange(0, BLOCK)
    pair = tl.arange(0, 2)
    xs = 2 * cols.to(tl.int64)[None, :, None] + pair[None, None, :]
    ys = 2 * y.to(tl.int64)[:, None, None]
    omask = (y < out_h)[:, None] & (cols < out_w)[None, :]
    m = omask[:, :, None] & (pair >= 0)[None, None, :]
    xh = tl.cast(x_h, tl.int64)
    top = X + n * tl.cast(x_n, tl.int64) + c * tl.cast(x_c, tl.int64) + ys * xh + xs * tl.cast(x_w, tl.int64)
    a, b = tl.split(tl.load(top, mask=m, other=0.0).to(tl.float32))
    c_, d = tl.split(tl.load(top + xh, mask=m, other=0.0).to(tl.float32))
    out = (((a + b) + c_) + d) * 0.25
    dst = OUT + (plane.to(tl.int64) * out_h + y.to(tl.int64)[:, None]) * out_w + cols[None, :]
    tl.store(dst, out, mask=omask)


def _block(height: int, width: int, device: torch.device) -> tuple[int, int, int]:
    """(rows, columns, warps) per program: one row of up to 1024 columns on a GPU; the interpreter (CPU tensors)
    pays per operation, so there up to 64 x 256 per program."""
    cpu = device.type == "cpu"
    block = min(256 if cpu else 1024, max(16, triton.next_power_of_2(width)))  # 256: tests walk column blocks
    rows = min(64, triton.next_power_of_2(max(height, 1))) if cpu else 1
    return rows, block, max(1, min(4, block // 256))


class XybPlan:
    """forward(rgb) -> ((N, 3, H', W') float32, ()) for one (shape, strides, dtype, device)."""

    def __init__(self, shape, stride, dtype: torch.dtype, device: torch.device) -> None:
        n, _, h, w = shape
        self.is_u8 = dtype == torch.uint8
        self.out_shape = (n, 3, max(h, MIN_PYRAMID_DIM), simd_padded_width(max(w, MIN_PYRAMID_DIM)))
        self.const, self.const64 = _constants(device)
        out_h, out_w = self.out_shape[2:]
        block_h, block, warps = _block(out_h, out_w, device)
        row_blocks, col_blocks = triton.cdiv(out_h, block_h), triton.cdiv(out_w, block)
        self._launch = Launcher(_xyb_kernel, (n * row_blocks * col_blocks,), num_warps=warps,
                                enable_fp_fusion=False)
        self._args = (h, w, out_h, out_w, row_blocks, col_blocks, *stride, self.is_u8, block_h, block)

    def forward(self, rgb: torch.Tensor, lut: torch.Tensor):
        out = torch.empty(self.out_shape, dtype=torch.float32, device=rgb.device)
        self._launch(rgb, lut, out, self.const, self.const64, *self._args)
        return out, ()


@cached(maxsize=64)
def _xyb_plan(shape, stride, dtype, device) -> XybPlan:
    return XybPlan(shape, stride, dtype, device)


@zensim_xyb.triton_plan
def zensim_xyb_plan(tensors, scalars) -> XybPlan:
    rgb, lut = tensors
    if rgb.dim() != 4 or rgb.shape[1] != 3:
        raise ValueError(f"zensim_xyb: rgb must be (N, 3, H, W) linear RGB; got {tuple(rgb.shape)}")
    if not rgb.is_floating_point() and rgb.dtype != torch.uint8:
        raise TypeError(f"zensim_xyb: rgb must be floating (linear light) or uint8 sRGB codes; got {rgb.dtype}")
    if rgb.dtype == torch.uint8 and (lut.shape != (256,) or lut.dtype != torch.float32 or not lut.is_contiguous()
                                     or lut.device != rgb.device):
        raise ValueError(f"zensim_xyb: lut must be a contiguous (256,) float32 table on {rgb.device}; got "
                         f"{tuple(lut.shape)} {lut.dtype} on {lut.device}")
    if rgb.numel() == 0:
        raise ValueError(f"zensim_xyb: rgb is empty: {tuple(rgb.shape)}")
    return _xyb_plan(tuple(rgb.shape), tuple(rgb.stride()), rgb.dtype, rgb.device)


class DownscalePlan:
    """forward(x) -> ((N, C, h//2, w//2) float32, ()) for one (shape, strides, dtype, device)."""

    def __init__(self, shape, stride, device: torch.device) -> None:
        n, c, h, w = shape
        self.out_shape = (n, c, h // 2, w // 2)
        block_h, block, warps = _block(h // 2, w // 2, device)
        row_blocks, col_blocks = triton.cdiv(h // 2, block_h), triton.cdiv(w // 2, block)
        self._launch = Launcher(_downscale_kernel, (n * c * row_blocks * col_blocks,), num_warps=warps,
                                enable_fp_fusion=False)
        self._args = (c, h // 2, w // 2, row_blocks, col_blocks, *stride, block_h, block)

    def forward(self, x: torch.Tensor):
        out = torch.empty(self.out_shape, dtype=torch.float32, device=x.device)
        if out.numel():
            self._launch(x, out, *self._args)
        return out, ()


@cached(maxsize=64)
def _downscale_plan(shape, stride, dtype, device) -> DownscalePlan:
    return DownscalePlan(shape, stride, device)


@zensim_downscale.triton_plan
def zensim_downscale_plan(tensors, scalars) -> DownscalePlan:
    (x,) = tensors
    if x.dim() != 4:
        raise ValueError(f"zensim_downscale: x must be (N, C, h, w); got {tuple(x.shape)}")
    if not x.is_floating_point():
        raise TypeError(f"zensim_downscale: x must be floating; got {x.dtype}")
    return _downscale_plan(tuple(x.shape), tuple(x.stride()), x.dtype, x.device)
