"""DSSIM's blur on the GPU (the 3x3 kernel applied twice with clamp-to-edge), and the helpers the fused SSIM-map
kernel (``ops/dssim_ssim_map.py``) shares.

    dssim_blur(x (N, C, H, W)) -> (N, C, H, W)

Twice the clamped 3-tap [S, C, S] per axis equals one 5-tap [O, I, M, I, O] (O = S², I = 2SC, M = 2S² + C²) over a
half-sample-symmetric padding of 2 (``p1 p0 | p0 p1 ...``); the first and last samples use dssim's folded weights
(EDGE_CENTER, EDGE_NEAR, O). Each program computes a BH x BW tile of one plane directly: for each of the 5 rows
it needs, the horizontal pass from 5 symmetric-index loads (cache hits), then the vertical pass, in dssim's
summation order ``((t0 + t4)·O + (t1 + t3)·I) + t2·M`` with no contraction into FMAs, so float32 results equal the
twin :func:`fusedsim.families.dssim.twin.dssim_blur_ref` bit for bit. Forward only.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedsim.core.backend import triton_interpreting
from fusedsim.core.launch import Launcher
from fusedsim.core.state import cached
import fusedsim.families.dssim.twin as spec
from fusedsim.core.moments.twin import compute_dtype
from fusedsim.families.dssim.ops import dssim_blur

__all__ = ["BLUR_CONSTANTS", "dssim_blur_fwd", "dssim_blur_into", "five_tap", "ieee_div", "sym_index", "tile_shape"]

#: (OUTER, INNER, MID, EDGE_CENTER, EDGE_NEAR): dssim's f32 blur weights, passed to kernels as constexprs.
BLUR_CONSTANTS = (spec.BLUR_OUTER, spec.BLUR_INNER, spec.BLUR_MID, spec.EDGE_CENTER, spec.EDGE_NEAR)


@triton.jit
def sym_index(i, n):
    """Half-sample-symmetric index of ``i`` in [0, n) for -2n <= i < 3n."""
    m = (i + 2 * n) % (2 * n)
    return tl.where(m >= n, 2 * n - 1 - m, m)


@triton.jit
def ieee_div(a, b, ACC: tl.constexpr):
    """Correctly rounded division (Triton's float32 ``/`` may be approximate on GPUs)."""
    if ACC == tl.float64:
        return a / b
    else:
        return tl.math.div_rn(a, b)


@triton.jit
def five_tap(t0, t1, t2, t3, t4, pos, n, O: tl.constexpr, I: tl.constexpr, M: tl.constexpr,
             EC: tl.constexpr, EN: tl.constexpr):
    """dssim's 5-tap value at ``pos`` (taps at pos-2 .. pos+2, symmetric), with its folded edge weights."""
    body = (t0 + t4) * O + (t1 + t3) * I + t2 * M
    first = EC * t2 + EN * t3 + O * t4
    last = O * t0 + EN * t1 + EC * t2
    return tl.where(pos == 0, first, tl.where(pos == n - 1, last, body))


@triton.jit
def blur_row(base, row, c0, c1, c2, c3, c4, cols, W, ok, ACC: tl.constexpr, O: tl.constexpr, I: tl.constexpr,
             M: tl.constexpr, EC: tl.constexpr, EN: tl.constexpr):
    """Horizontal 5-tap of row ``row`` (element offsets; c0..c4 the column offsets of the taps)."""
    t0 = tl.load(base + row + c0, mask=ok, other=0.0).to(ACC)
    t1 = tl.load(base + row + c1, mask=ok, other=0.0).to(ACC)
    t2 = tl.load(base + row + c2, mask=ok, other=0.0).to(ACC)
    t3 = tl.load(base + row + c3, mask=ok, other=0.0).to(ACC)
    t4 = tl.load(base + row + c4, mask=ok, other=0.0).to(ACC)
    return five_tap(t0, t1, t2, t3, t4, cols, W, O, I, M, EC, EN)


@triton.jit
def _dssim_blur_kernel(X, OUT, C, H, W, sn, sc, sh, sw, son, soc, O: tl.constexpr, I: tl.constexpr, M: tl.constexpr,
                       EC: tl.constexpr, EN: tl.constexpr, ACC: tl.constexpr, BH: tl.constexpr, BW: tl.constexpr):
    plane = tl.program_id(2)
    n = plane // C
    c = plane % C
    rows = tl.program_id(1) * BH + tl.arange(0, BH)[:, None]
    cols = tl.program_id(0) * BW + tl.arange(0, BW)[None, :]
    ok = (rows < H) & (cols < W)
    base = X + n.to(tl.int64) * sn + c.to(tl.int64) * sc
    c0 = sym_index(cols - 2, W).to(tl.int64) * sw
    c1 = sym_index(cols - 1, W).to(tl.int64) * sw
    c2 = sym_index(cols, W).to(tl.int64) * sw
    c3 = sym_index(cols + 1, W).to(tl.int64) * sw
    c4 = sym_index(cols + 2, W).to(tl.int64) * sw
    h0 = blur_row(base, sym_index(rows - 2, H).to(tl.int64) * sh, c0, c1, c2, c3, c4, cols, W, ok, ACC, O, I, M,
                  EC, EN)
    h1 = blur_row(base, sym_index(rows - 1, H).to(tl.int64) * sh, c0, c1, c2, c3, c4, cols, W, ok, ACC, O, I, M,
                  EC, EN)
    h2 = blur_row(base, sym_index(rows, H).to(tl.int64) * sh, c0, c1, c2, c3, c4, cols, W, ok, ACC, O, I, M, EC, EN)
    h3 = blur_row(base, sym_index(rows + 1, H).to(tl.int64) * sh, c0, c1, c2, c3, c4, cols, W, ok, ACC, O, I, M,
                  EC, EN)
    h4 = blur_row(base, sym_index(rows + 2, H).to(tl.int64) * sh, c0, c1, c2, c3, c4, cols, W, ok, ACC, O, I, M,
                  EC, EN)
    v = five_tap(h0, h1, h2, h3, h4, rows, H, O, I, M, EC, EN)
    out = OUT + n.to(tl.int64) * son + c.to(tl.int64) * soc
    tl.store(out + rows.to(tl.int64) * W + cols, v.to(OUT.dtype.element_ty), mask=ok)


def tile_shape() -> tuple[int, int]:
    """(BH, BW) of the 2-D tile kernels: small tiles on GPUs (registers), large ones in the interpreter (fewer
    programs, each costing Python time)."""
    return (64, 64) if triton_interpreting() else (8, 64)


@cached(maxsize=128)
def _launcher(shape, strides, out_strides, dtype) -> tuple[Launcher, tuple]:
    n, c, h, w = shape
    bh, bw = tile_shape()
    acc = tl.float64 if compute_dtype(dtype) == torch.float64 else tl.float32
    launch = Launcher(_dssim_blur_kernel, (triton.cdiv(w, bw), triton.cdiv(h, bh), n * c), num_warps=4,
                      enable_fp_fusion=False)
    return launch, (c, h, w, *strides, *out_strides, *BLUR_CONSTANTS, acc, bh, bw)


def dssim_blur_into(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """dssim's blur of every plane of ``x`` (N, C, H, W), any strides, into ``out`` (N, C, H, W) of the compute
    dtype whose planes are contiguous (any N and C strides: e.g. channels of a larger buffer); returns ``out``."""
    launch, tail = _launcher(tuple(x.shape), x.stride(), out.stride()[:2], x.dtype)  # ints are fixed per launcher
    launch(x, out, *tail)
    return out


@dssim_blur.triton_launcher
def dssim_blur_fwd(x: torch.Tensor) -> torch.Tensor:
    """dssim's blur of every plane of ``x`` (N, C, H, W), any strides; output contiguous, compute dtype."""
    return dssim_blur_into(x, torch.empty(x.shape, dtype=compute_dtype(x.dtype), device=x.device))
