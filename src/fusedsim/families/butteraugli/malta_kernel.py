"""Butteraugli's Malta difference (libjxl 0.7) in two Triton launches.

    butteraugli_malta(lum0, lum1 (N, H, W), w_0gt1, w_0lt1, norm1, mulli, low_freq) -> (N, H, W)
    butteraugli_malta_add(acc, lum0, lum1 (N, H, W), ...) -> acc + butteraugli_malta(lum0, lum1, ...)

1. ``_malta_diffs_kernel``: the per-pixel weighted difference of the two planes
   (:func:`fusedsim.families.butteraugli.filters_twin.malta_diffs_ref`) into a scratch plane.
2. A generated stencil kernel: for every pixel, the sum over the 16 line segments (HF: 7/9 contiguous taps, LF:
   5 spaced taps; tables in the twin's module) of the squared sum of the scratch values along the segment, zero
   outside the image, added to ``acc`` in the same launch for ``butteraugli_malta_add`` (the band sums of one
   channel accumulate without a separate addition pass). Each distinct (dy, dx) offset is loaded once per tile
   (HF: 61 of 132 taps, LF: 49 of 80), without masks in tiles 4 px or more from every border.

Arithmetic in float32 (float64 for float64 inputs), in the twin's order: no FMA contraction, ``c / t`` as
``reciprocal(t) * c`` (PyTorch's ``__rtruediv__``) with an IEEE-rounded reciprocal. Forward only: the
differentiable path is the twin.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedsim.core.codegen import jit_from_source
from fusedsim.core.launch import Launcher
from fusedsim.core.state import cached
from fusedsim.families.butteraugli.filters_twin import (
    MALTA_HF_LINES,
    MALTA_LF_LINES,
    malta_weights,
)
from fusedsim.core.moments.twin import compute_dtype
from fusedsim.families.butteraugli.ops import butteraugli_malta, butteraugli_malta_add


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
    if ACC == tl.float64:
        rec = 1.0 / (absval + norm1)
    else:
        rec = tl.div_rn(1.0, absval + norm1)
    out = rec * gt * (a - b)
    s2 = rec * lt
    small = 0.55 * fabs0
    big = 1.05 * fabs0
    zero = tl.zeros_like(a)
    neg = tl.where(b > -small, -(b + small), tl.where(b < -big, -b - big, zero))
    pos = tl.where(b < small, small - b, tl.where(b > big, big - b, zero))
    out += s2 * tl.where(a < 0, neg, pos)
    tl.store(OUT + idx, out.to(OUT.dtype.element_ty), mask=ok)


def _render_lines_kernel(name: str, lines) -> str:
    """Source of the line-sum kernel. Tiles at least ``reach`` pixels from every border (most of them) load their
    taps without masks; the others mask each tap to the image (zero outside). Same sums in the same order."""
    taps = sorted({tap for line in lines for tap in line})
    var = {tap: f"v{i}" for i, tap in enumerate(taps)}
    reach = max(max(abs(dy), abs(dx)) for dy, dx in taps)

    def body(masked: bool) -> list[str]:
        out = []
        for (dy, dx), v in var.items():
            r, c = f"(rows + {dy})", f"(cols + {dx})"
            mask = f", mask=({r} >= 0) & ({r} < H) & ({c} >= 0) & ({c} < W), other=0.0" if masked else ""
            out.append(f"{v} = tl.load(base + {r}.to(tl.int64) * W + {c}{mask}).to(ACC)")
        out.append("acc = tl.zeros([BH, BW], ACC)")
        for i, line in enumerate(lines):
            out.append(f"s{i} = " + " + ".join(var[tap] for tap in line))
            out.append(f"acc += s{i} * s{i}")
        ok = ", mask=ok" if masked else ""
        out.append("if HAS_ACC:")
        out.append(f"    acc = tl.load(ACC_IN + pix{ok}{', other=0.0' if masked else ''}).to(ACC) + acc")
        out.append(f"tl.store(OUT + pix, acc.to(OUT.dtype.element_ty){ok})")
        return out

    lines_out = [
        (f"def {name}(D, ACC_IN, OUT, H, W, ACC: tl.constexpr, HAS_ACC: tl.constexpr, BH: tl.constexpr, "
         "BW: tl.constexpr):"),
        "    pid_w = tl.program_id(0)",
        "    pid_h = tl.program_id(1)",
        "    plane = tl.program_id(2).to(tl.int64)",
        "    rows = pid_h * BH + tl.arange(0, BH)[:, None]",
        "    cols = pid_w * BW + tl.arange(0, BW)[None, :]",
        "    base = D + plane * H * W",
        "    ok = (rows < H) & (cols < W)",
        "    pix = plane * H * W + rows.to(tl.int64) * W + cols",
        (f"    interior = (pid_h * BH >= {reach}) & ((pid_h + 1) * BH + {reach} <= H) & (pid_w * BW >= {reach}) "
         f"& ((pid_w + 1) * BW + {reach} <= W)"),
        "    if interior:",
        *("        " + line for line in body(False)),
        "    else:",
        *("        " + line for line in body(True)),
    ]
    return "\n".join(lines_out) + "\n"


@cached(maxsize=None)
def _lines_kernel(low_freq: bool):
    name = "_malta_lf_kernel" if low_freq else "_malta_hf_kernel"
    return jit_from_source(name, _render_lines_kernel(name, MALTA_LF_LINES if low_freq else MALTA_HF_LINES))


class MaltaPlan:
    """One (shapes, strides, dtype, weights, variant): ``forward(lum0, lum1) -> ((N, H, W), ())``, or with
    ``accumulate`` ``forward(acc, lum0, lum1)`` (acc + the Malta map)."""

    def __init__(self, shape, s0, s1, dtype, device, w_0gt1, w_0lt1, norm1, mulli, low_freq,
                 accumulate=False) -> None:
        n, h, w = shape
        self.shape = shape
        self.dtype = compute_dtype(dtype)
        acc = tl.float64 if self.dtype == torch.float64 else tl.float32
        gt, lt, n1 = malta_weights(w_0gt1, w_0lt1, norm1, mulli)
        total = n * h * w
        block = 1024
        self.accumulate = accumulate
        self._diffs = Launcher(_malta_diffs_kernel, (triton.cdiv(total, block),), num_warps=4,
                               enable_fp_fusion=False)
        self._diffs_args = (total, *s0, *s1, h, w, gt, lt, n1, acc, block)
        bh, bw = 16, 32
        self._lines = Launcher(_lines_kernel(bool(low_freq)), (triton.cdiv(w, bw), triton.cdiv(h, bh), n),
                               num_warps=4, enable_fp_fusion=False)
        self._lines_args = (h, w, acc, accumulate, bh, bw)

    def forward(self, *tensors: torch.Tensor):
        acc_in, lum0, lum1 = tensors if self.accumulate else (None, *tensors)
        diffs = torch.empty(self.shape, dtype=self.dtype, device=lum0.device)
        out = torch.empty_like(diffs)
        if not diffs.numel():
            return out, ()
        if acc_in is None:
            acc_in = diffs  # not read
        elif acc_in.dtype != self.dtype or not acc_in.is_contiguous():
            acc_in = acc_in.to(self.dtype).contiguous()
        self._diffs(lum0, lum1, diffs, *self._diffs_args)
        self._lines(diffs, acc_in, out, *self._lines_args)
        return out, ()


@cached(maxsize=256)
def _malta_plan(*key) -> MaltaPlan:
    return MaltaPlan(*key)


@butteraugli_malta.triton_plan
def butteraugli_malta_plan(tensors, scalars) -> MaltaPlan:
    lum0, lum1 = tensors
    w_0gt1, w_0lt1, norm1, mulli, low_freq = scalars
    if lum0.dim() != 3 or lum0.shape != lum1.shape:
        raise ValueError(f"butteraugli_malta runs on two (N, H, W) planes of one shape; got {tuple(lum0.shape)} "
                         f"and {tuple(lum1.shape)}")
    return _malta_plan(tuple(lum0.shape), lum0.stride(), lum1.stride(), lum0.dtype, lum0.device, float(w_0gt1),
                       float(w_0lt1), float(norm1), float(mulli), bool(low_freq))


@butteraugli_malta_add.triton_plan
def butteraugli_malta_add_plan(tensors, scalars) -> MaltaPlan:
    acc, lum0, lum1 = tensors
    w_0gt1, w_0lt1, norm1, mulli, low_freq = scalars
    if lum0.dim() != 3 or lum0.shape != lum1.shape or acc.shape != lum0.shape:
        raise ValueError(f"butteraugli_malta_add runs on three (N, H, W) planes of one shape; got "
                         f"{tuple(acc.shape)}, {tuple(lum0.shape)} and {tuple(lum1.shape)}")
    dtype = torch.float64 if torch.float64 in (acc.dtype, lum0.dtype) else lum0.dtype
    return _malta_plan(tuple(lum0.shape), lum0.stride(), lum1.stride(), dtype, lum0.device, float(w_0gt1),
                       float(w_0lt1), float(norm1), float(mulli), bool(low_freq), True)
