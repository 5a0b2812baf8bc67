"""IW-SSIM's Laplacian pyramid steps (matlabPyrTools' ``buildLpyr``): one kernel per reduce, one per band.

    iwssim_reduce(x (N, C, H, W)) -> lo (N, C, ceil(H/2), ceil(W/2))
    iwssim_band(img (N, C, H, W), lo (N, C, ceil(H/2), ceil(W/2))) -> img - expand(lo) (N, C, H, W)

Both are bit-identical to their twins (``iwssim_ref.pyr_reduce_op_ref`` / ``pyr_band_ref``), which run the binom5
filter of ``iwssim_binom`` axis by axis with the taps added one by one, no fused multiply-add:

* reduce: lo[r, c] = Σ_i k_i·t[reflect(2r + i - 2), c] with t[y, c] = Σ_j k_j·x[y, reflect(2c + j - 2)] (horizontal
  first). Each output recomputes its five t values (25 loads, mostly L1 hits) instead of writing t to memory
  (the two-launch version moved 1.5x the image through DRAM).
* band: the twin's expansion filters a signal holding lo at even positions and zeros at odd ones, vertically then
  horizontally, and subtracts. Only taps at even positions are non-zero: 3 taps (i = 0, 2, 4) for an even
  output position, 2 (i = 1, 3) for an odd one (reflect1 keeps the parity). The zero taps add +0, which changes
  no value but the sign of a zero sum; the twin's sums are never -0 (each has a +0 term or starts from
  ``t + (+0)``), so the kernel adds the non-zero taps in the twin's order and then +0.0: the same bits from
  9 loads and ~25 flops per pixel instead of 25 loads and ~60.
Forward only (the differentiable path is the twin).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedsim.core.launch import Launcher
from fusedsim.core.state import cached
from fusedsim.families.iwssim.binom_kernel import binom_taps, reflect1
from fusedsim.families.iwssim.ops import iwssim_band, iwssim_reduce

__all__ = ["iwssim_band", "iwssim_reduce"]

BH, BW = 16, 64


@triton.jit
def _reduce_kernel(X, TAPS, OUT, H, W, HO, WO, sxp, sxh, sxw, BLOCK_H: tl.constexpr, BLOCK_W: tl.constexpr):
    plane = tl.program_id(2)
    rows = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)[:, None]
    cols = tl.program_id(0) * BLOCK_W + tl.arange(0, BLOCK_W)[None, :]
    ok = (rows < HO) & (cols < WO)
    base = X + plane.to(tl.int64) * sxp
    acc = tl.zeros([BLOCK_H, BLOCK_W], X.dtype.element_ty)
    for i in tl.static_range(5):
        row_ptr = base + reflect1(2 * rows + (i - 2), H).to(tl.int64) * sxh
        t = tl.zeros([BLOCK_H, BLOCK_W], X.dtype.element_ty)
        for j in tl.static_range(5):
            v = tl.load(row_ptr + reflect1(2 * cols + (j - 2), W).to(tl.int64) * sxw, mask=ok, other=0.0)
            term = tl.load(TAPS + j).to(v.dtype) * v  # the twin's taps are in x's dtype
            if j == 0:
                t = term
            else:
                t = t + term
        term = tl.load(TAPS + i).to(t.dtype) * t
        if i == 0:
            acc = term
        else:
            acc = acc + term
    tl.store(OUT + (plane.to(tl.int64) * HO + rows) * WO + cols, acc, mask=ok)


@triton.jit
def _slot(pos, s, size, TAPS, dtype: tl.constexpr):
    """Slot s (0..2) of the non-zero taps at fine position ``pos``: (coarse index, tap weight, valid). Tap
    i = 2s + pos % 2 (even pos: 0, 2, 4; odd pos: 1, 3 and an empty third slot)."""
    i = 2 * s + pos % 2
    valid = i <= 4
    q = reflect1(pos + i - 2, size)  # even: reflect1 keeps the parity of pos + i
    weight = tl.load(TAPS + tl.where(valid, i, 0)).to(dtype)
    return tl.where(valid, q // 2, 0), weight, valid


@triton.jit
def _band_kernel(IMG, LO, TAPS, OUT, H, W, HL, WL, sip, sih, siw, slp, slh, slw, BLOCK_H: tl.constexpr,
                 BLOCK_W: tl.constexpr):
    plane = tl.program_id(2)
    rows = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)[:, None]
    cols = tl.program_id(0) * BLOCK_W + tl.arange(0, BLOCK_W)[None, :]
    ok = (rows < H) & (cols < W)
    dtype = OUT.dtype.element_ty
    lo = LO + plane.to(tl.int64) * slp
    r0, wr0, vr0 = _slot(rows, 0, H, TAPS, dtype)
    r1, wr1, vr1 = _slot(rows, 1, H, TAPS, dtype)
    r2, wr2, vr2 = _slot(rows, 2, H, TAPS, dtype)
    p0 = lo + r0.to(tl.int64) * slh
    p1 = lo + r1.to(tl.int64) * slh
    p2 = lo + r2.to(tl.int64) * slh
    v = tl.zeros([BLOCK_H, BLOCK_W], dtype)
    for s in tl.static_range(3):
        c, wc, vc = _slot(cols, s, W, TAPS, dtype)
        off = c.to(tl.int64) * slw
        m = ok & vc
        # vertical pass at lo column c: the twin's u[row, c], +0.0 normalising a -0 sum as its zero taps do
        u = wr0 * tl.load(p0 + off, mask=m & vr0, other=0.0)
        u = u + wr1 * tl.load(p1 + off, mask=m & vr1, other=0.0)
        u = u + tl.where(vr2, wr2 * tl.load(p2 + off, mask=m & vr2, other=0.0), 0.0)
        u = u + 0.0
        term = tl.where(vc, wc * u, 0.0)
        if s == 0:
            v = term
        else:
            v = v + term
    v = v + 0.0
    x = tl.load(IMG + plane.to(tl.int64) * sip + rows.to(tl.int64) * sih + cols.to(tl.int64) * siw, mask=ok,
                other=0.0)
    tl.store(OUT + (plane.to(tl.int64) * H + rows) * W + cols, x - v, mask=ok)


def _planes(x: torch.Tensor) -> torch.Tensor:
    n, c, h, w = x.shape
    return x.reshape(n * c, h, w)  # a view for the usual layouts; reshape copies the rest


@cached(maxsize=128)
def _launcher(kind: str, planes: int, ho: int, wo: int, dtype: torch.dtype, strides: tuple[int, ...]) -> Launcher:
    """One launcher per grid, dtype and strides: a launcher reuses the kernel it compiled first, which Triton
    specialised on the integer arguments (a stride of 1 becomes a constant)."""
    kernel = _reduce_kernel if kind == "reduce" else _band_kernel
    grid = (triton.cdiv(wo, BW), triton.cdiv(ho, BH), planes)
    return Launcher(kernel, grid, num_warps=4, enable_fp_fusion=False)


def _check(x: torch.Tensor, name: str) -> None:
    if x.dim() != 4 or min(x.shape[-2:]) < 3:
        raise ValueError(f"{name}: x must be (N, C, H, W) with H, W >= 3; got shape {tuple(x.shape)}")


@iwssim_reduce.triton_launcher
def iwssim_reduce(x: torch.Tensor) -> torch.Tensor:
    """One ``corrDn`` step of ``buildLpyr``: (N, C, H, W) -> (N, C, ceil(H/2), ceil(W/2)), H, W >= 3."""
    _check(x, "iwssim_reduce")
    n, c, h, w = x.shape
    ho, wo = -(-h // 2), -(-w // 2)
    out = torch.empty((n, c, ho, wo), dtype=x.dtype, device=x.device)
    if out.numel():
        xp = _planes(x)
        strides = xp.stride()
        _launcher("reduce", n * c, ho, wo, x.dtype, strides)(
            xp, binom_taps(x.device), out, h, w, ho, wo, *strides, BH, BW)
    return out


@iwssim_band.triton_launcher
def iwssim_band(img: torch.Tensor, lo: torch.Tensor) -> torch.Tensor:
    """``img - expand(lo)`` (N, C, H, W) for lo (N, C, ceil(H/2), ceil(W/2)) of the same dtype, H, W >= 3."""
    _check(img, "iwssim_band")
    n, c, h, w = img.shape
    if lo.shape != (n, c, -(-h // 2), -(-w // 2)) or lo.dtype != img.dtype:
        raise ValueError(f"iwssim_band: lo must be {(n, c, -(-h // 2), -(-w // 2))} {img.dtype}; got "
                         f"{tuple(lo.shape)} {lo.dtype}")
    out = torch.empty((n, c, h, w), dtype=img.dtype, device=img.device)
    if out.numel():
        ip, lp = _planes(img), _planes(lo)
        strides = ip.stride() + lp.stride()
        _launcher("band", n * c, h, w, img.dtype, strides)(
            ip, lp, binom_taps(img.device), out, h, w, lp.shape[1], lp.shape[2], *strides, BH, BW)
    return out
