"""Butteraugli's Malta difference (libjxl 0.7) in two Triton launches.

    butteraugli_malta(lum0, lum1 (N, H, W), w_0gt1, w_0lt1, norm1, mulli, low_freq) -> (N, H, W)

1. ``_malta_diffs_kernel``: the per-pixel weighted difference of the two planes
   (:func:`fusedsim.reference.butteraugli_filters_ref.malta_diffs_ref`) into a scratch plane.
2. A generated stencil kernel: for every pixel, the sum over the 16 line segments (HF: 7/9 contiguous taps, LF:
   5 spaced taps; tables in the twin's module) of the squared sum of the scratch values along the segment, zero
   outside the image. Each distinct (dy, dx) offset is loaded once per tile (HF: 61 of 132 taps, LF: 49 of 80).

Arithmetic in float32 (float64 for float64 inputs). Forward only: the differentiable path is the twin.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from fusedsim.ops._codegen import jit_from_source
from fusedsim.ops._launch import Launcher
from fusedsim.reference.butteraugli_filters_ref import (
    MALTA_HF_LINES,
    MALTA_LF_LINES,
    malta_weights,
)
from fusedsim.reference.ssim_ref import compute_dtype


@triton.jit
def _malta_diffs_kernel(L0, L1, OUT, total, s0n, s0h, s0w, s1n, s1h, s1w, H, W, gt, lt, norm1,
                        ACC: tl.constexpr, BLOCK: tl.constexpr):
    idx = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = idx < total
    x = idx % W
    y = (idx // W) % H
    n = idx // (W * H)
    a = tl.load(L0 + n * s0n + y * s0h + x * s0w, mask=ok, other=0.0).to(ACC)
    b = tl.load(L1 + n * s1n + y * s1h + x * s1w, mask=ok, other=0.0).to(ACC)
    fabs0 = tl.abs(a)
    absval = 0.5 * (fabs0 + tl.abs(b))
    out = gt / (norm1 + absval) * (a - b)
    s2 = lt / (norm1 + absval)
    small = 0.55 * fabs0
    big = 1.05 * fabs0
    zero = tl.zeros_like(a)
    neg = tl.where(b > -small, -(b + small), tl.where(b < -big, -b - big, zero))
    pos = tl.where(b < small, small - b, tl.where(b > big, big - b, zero))
    out += s2 * tl.where(a < 0, neg, pos)
    tl.store(OUT + idx, out.to(OUT.dtype.element_ty), mask=ok)


def _render_lines_kernel(name: str, lines) -> str:
    taps = sorted({tap for line in lines for tap in line})
    var = {tap: f"v{i}" for i, tap in enumerate(taps)}
    body = [
        f"def {name}(D, OUT, H, W, ACC: tl.constexpr, BH: tl.constexpr, BW: tl.constexpr):",
        "    pid_w = tl.program_id(0)",
        "    pid_h = tl.program_id(1)",
        "    plane = tl.program_id(2).to(tl.int64)",
        "    rows = pid_h * BH + tl.arange(0, BH)[:, None]",
        "    cols = pid_w * BW + tl.arange(0, BW)[None, :]",
        "    base = D + plane * H * W",
    ]
    for (dy, dx), v in var.items():
        r, c = f"(rows + {dy})", f"(cols + {dx})"
        body.append(f"    {v} = tl.load(base + {r}.to(tl.int64) * W + {c}, mask=({r} >= 0) & ({r} < H) & ({c} >= 0) "
                    f"& ({c} < W), other=0.0).to(ACC)")
    body.append("    acc = tl.zeros([BH, BW], ACC)")
    for i, line in enumerate(lines):
        body.append(f"    s{i} = " + " + ".join(var[tap] for tap in line))
        body.append(f"    acc += s{i} * s{i}")
    body.append("    ok = (rows < H) & (cols < W)")
    body.append("    tl.store(OUT + plane * H * W + rows.to(tl.int64) * W + cols, acc.to(OUT.dtype.element_ty), "
                "mask=ok)")
    return "\n".join(body) + "\n"


@functools.cache
def _lines_kernel(low_freq: bool):
    name = "_malta_lf_kernel" if low_freq else "_malta_hf_kernel"
    return jit_from_source(name, _render_lines_kernel(name, MALTA_LF_LINES if low_freq else MALTA_HF_LINES))


class MaltaPlan:
    """One (shapes, strides, dtype, weights, variant): ``forward(lum0, lum1) -> ((N, H, W), ())``."""

    def __init__(self, shape, s0, s1, dtype, device, w_0gt1, w_0lt1, norm1, mulli, low_freq) -> None:
        n, h, w = shape
        self.shape = shape
        self.dtype = compute_dtype(dtype)
        acc = tl.float64 if self.dtype == torch.float64 else tl.float32
        gt, lt, n1 = malta_weights(w_0gt1, w_0lt1, norm1, mulli)
        total = n * h * w
        block = 1024
        self._diffs = Launcher(_malta_diffs_kernel, (triton.cdiv(total, block),), num_warps=4)
        self._diffs_args = (total, *s0, *s1, h, w, gt, lt, n1, acc, block)
        bh, bw = 16, 32
        self._lines = Launcher(_lines_kernel(bool(low_freq)), (triton.cdiv(w, bw), triton.cdiv(h, bh), n),
                               num_warps=4)
        self._lines_args = (h, w, acc, bh, bw)

    def forward(self, lum0: torch.Tensor, lum1: torch.Tensor):
        diffs = torch.empty(self.shape, dtype=self.dtype, device=lum0.device)
        out = torch.empty_like(diffs)
        self._diffs(lum0, lum1, diffs, *self._diffs_args)
        self._lines(diffs, out, *self._lines_args)
        return out, ()


@functools.lru_cache(maxsize=256)
def _malta_plan(*key) -> MaltaPlan:
    return MaltaPlan(*key)


def butteraugli_malta_plan(tensors, scalars) -> MaltaPlan:
    lum0, lum1 = tensors
    w_0gt1, w_0lt1, norm1, mulli, low_freq = scalars
    if lum0.dim() != 3 or lum0.shape != lum1.shape:
        raise ValueError(f"butteraugli_malta runs on two (N, H, W) planes of one shape; got {tuple(lum0.shape)} "
                         f"and {tuple(lum1.shape)}")
    return _malta_plan(tuple(lum0.shape), lum0.stride(), lum1.stride(), lum0.dtype, lum0.device, float(w_0gt1),
                       float(w_0lt1), float(norm1), float(mulli), bool(low_freq))
