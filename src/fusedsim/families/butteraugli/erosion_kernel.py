"""Butteraugli's fuzzy erosion (libjxl 0.7 ``FuzzyErosion``) as one Triton kernel.

    butteraugli_erosion(x (N, H, W)) -> (N, H, W), x's dtype (float32 or float64)

Per pixel, the three smallest m0 <= m1 <= m2 of {v, 2v, 2v} and the in-image pixels at offsets (±3|0, ±3|0), then
0.45·m0 + 0.3·m1 + 0.25·m2 (libjxl's float constants). The twin (``butteraugli_filters_ref.fuzzy_erosion_ref``)
sorts the 11 candidates with ``topk``, which on a GPU cost half of a 16 MP Butteraugli call; here each candidate is
inserted into the running (m0, m1, m2) with min/max (selection is exact, so the result is bit-identical) and the
eight neighbours are tile loads that hit L1/L2. Out-of-image neighbours are +inf (never among the three: v, 2v, 2v
always are candidates). Forward only: the differentiable path is the twin.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedsim.core.launch import Launcher
from fusedsim.core.state import cached
from fusedsim.families.butteraugli.filters_twin import EROSION_WEIGHTS
from fusedsim.families.butteraugli.ops import butteraugli_erosion

BH, BW = 16, 64


@triton.jit
def _insert(m0, m1, m2, c):
    """Insert candidate c into the sorted triple (m0 <= m1 <= m2), keeping the three smallest."""
    n2 = tl.minimum(m2, tl.maximum(m1, c))
    n1 = tl.minimum(m1, tl.maximum(m0, c))
    n0 = tl.minimum(m0, c)
    return n0, n1, n2


@triton.jit
def _erosion_kernel(X, OUT, H, W, w0, w1, w2, BLOCK_H: tl.constexpr, BLOCK_W: tl.constexpr):
    pid_w = tl.program_id(0)
    pid_h = tl.program_id(1)
    plane = tl.program_id(2)
    rows = pid_h * BLOCK_H + tl.arange(0, BLOCK_H)[:, None]
    cols = pid_w * BLOCK_W + tl.arange(0, BLOCK_W)[None, :]
    ok = (rows < H) & (cols < W)
    base = X + plane.to(tl.int64) * H * W
    v = tl.load(base + rows * W + cols, mask=ok, other=0.0)
    m0 = v
    m1 = v * 2.0
    m2 = v * 2.0
    for dy in tl.static_range(-3, 4, 3):
        for dx in tl.static_range(-3, 4, 3):
            if dy != 0 or dx != 0:
                r = rows + dy
                c = cols + dx
                inside = ok & (r >= 0) & (r < H) & (c >= 0) & (c < W)
                nb = tl.load(base + r * W + c, mask=inside, other=float("inf"))
                m0, m1, m2 = _insert(m0, m1, m2, nb)
    # the weights as tensors of x's dtype (a float argument is float32): products and sums round as the twin's
    out = (tl.cast(w0, v.dtype) * m0 + tl.cast(w1, v.dtype) * m1) + tl.cast(w2, v.dtype) * m2
    tl.store(OUT + plane.to(tl.int64) * H * W + rows * W + cols, out, mask=ok)


@cached(maxsize=64)
def _launcher(planes: int, height: int, width: int, dtype: torch.dtype) -> Launcher:
    """One launcher per shape and dtype (a launcher reuses its compiled kernel, which is specialised on dtype)."""
    grid = (triton.cdiv(width, BW), triton.cdiv(height, BH), planes)
    return Launcher(_erosion_kernel, grid, num_warps=4, enable_fp_fusion=False)


@butteraugli_erosion.triton_launcher
def butteraugli_erosion(x: torch.Tensor) -> torch.Tensor:
    """Fuzzy erosion of non-negative (N, H, W) maps (see the module docstring)."""
    if x.dim() != 3:
        raise ValueError(f"butteraugli_erosion runs on (N, H, W) maps; got shape {tuple(x.shape)}")
    x = x.contiguous()
    out = torch.empty_like(x)
    n, h, w = x.shape
    if x.numel():
        _launcher(n, h, w, x.dtype)(x, out, h, w, *EROSION_WEIGHTS, BH, BW)
    return out
