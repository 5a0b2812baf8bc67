"""Butteraugli's separable blur (libjxl 0.7) as two Triton passes, horizontal then vertical.

    butteraugli_blur(x (N, C, H, W), sigma) -> (N, C, H, W), float32 (float64 for float64 input)

Taps ``exp(-i²/2σ²)`` for ``|i| <= max(1, ⌊2.25σ⌋)`` (``butteraugli_filters_ref.blur_taps``).
With 5 taps the image is mirrored at its borders (edge pixel repeated) and the taps are normalised once (on the
host, in float64); with any other length the out-of-image taps are dropped and the output divided by the sum of
the taps that remain, per axis, as libjxl's transposing convolution does. Each program owns a BH×BW tile of one
plane; the K taps are K shifted loads of the input tile (the window is at most 33 taps, so the re-reads stay in
L1/L2). Tiles whose window lies inside the image skip the border masks and the per-pixel tap sums. Forward only: the differentiable path is the twin.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedsim.core.launch import Launcher
from fusedsim.core.state import cached
from fusedsim.families.butteraugli.filters_twin import blur_taps
from fusedsim.core.moments.twin import compute_dtype
from fusedsim.families.butteraugli.ops import butteraugli_blur

BLUR_TILE = (8, 64, 2)  # rows, columns, warps of a program (H200, 8 × 1080p Butteraugli: 16×32/4 1.073 ms a frame, 8×64/2 0.989)


@triton.jit
def _blur_axis_kernel(X, OUT, TAPS, H, W, sxh, sxw, C, scx_n, scx_c,
                      K: tl.constexpr, MIRROR: tl.constexpr, ALONG_W: tl.constexpr, ACC: tl.constexpr,
                      BH: tl.constexpr, BW: tl.constexpr):
    pid_w = tl.program_id(0)
    pid_h = tl.program_id(1)
    plane = tl.program_id(2)
    rows = pid_h * BH + tl.arange(0, BH)[:, None]
    cols = pid_w * BW + tl.arange(0, BW)[None, :]
    ok = (rows < H) & (cols < W)
    # input planes may be any (n, c) strides: plane index -> n, c
    base = X + (plane // C).to(tl.int64) * scx_n + (plane % C).to(tl.int64) * scx_c
    if ALONG_W:
        n_axis = W
        pos = cols
    else:
        n_axis = H
        pos = rows
    pix = (plane.to(tl.int64) * H + rows) * W + cols
    # tiles whose whole window lies inside the image (most of them): no masks, no mirroring, and the in-image tap
    # sum is the full sum (TAPS[K], summed on the host in tap order as the loop below would): same values, less work
    if ALONG_W:
        lo = pid_w * BW
        span = BW
    else:
        lo = pid_h * BH
        span = BH
    interior = ((pid_h + 1) * BH <= H) & ((pid_w + 1) * BW <= W) & (lo >= K // 2) & (lo + span + K // 2 <= n_axis)
    if interior:
        acc = tl.zeros([BH, BW], ACC)
        for k in tl.static_range(K):
            w = tl.load(TAPS + k).to(ACC)
            if ALONG_W:
                ptr = base + rows.to(tl.int64) * sxh + (cols + (k - K // 2)).to(tl.int64) * sxw
            else:
                ptr = base + (rows + (k - K // 2)).to(tl.int64) * sxh + cols.to(tl.int64) * sxw
            acc += w * tl.load(ptr).to(ACC)
        if MIRROR:
            out = acc
        else:
            out = acc / tl.load(TAPS + K).to(ACC)
        tl.store(OUT + pix, out.to(OUT.dtype.element_ty))
    else:
        acc = tl.zeros([BH, BW], ACC)
        wsum = tl.zeros([BH, BW], ACC)
        for k in tl.static_range(K):
            w = tl.load(TAPS + k).to(ACC)
            q = pos + (k - K // 2)
            if MIRROR:
                q = tl.where(q < 0, -q - 1, q)
                q = tl.where(q >= n_axis, 2 * n_axis - 1 - q, q)
                q = tl.minimum(tl.maximum(q, 0), n_axis - 1)
                m = ok
            else:
                m = ok & (q >= 0) & (q < n_axis)
            if ALONG_W:
                ptr = base + rows.to(tl.int64) * sxh + q.to(tl.int64) * sxw
            else:
                ptr = base + q.to(tl.int64) * sxh + cols.to(tl.int64) * sxw
            v = tl.load(ptr, mask=m, other=0.0).to(ACC)
            acc += w * v
            if not MIRROR:
                wsum += tl.where(m, w, 0.0)
        if MIRROR:
            out = acc
        else:
            out = acc / tl.where(ok, wsum, 1.0)
        tl.store(OUT + pix, out.to(OUT.dtype.element_ty), mask=ok)


class BlurPlan:
    """One (shape, strides, dtype, sigma): ``forward(x) -> ((N, C, H, W) blurred, ())``; ``tile``: rows, columns
    and warps of a program (results do not depend on it)."""

    def __init__(self, shape, strides, dtype: torch.dtype, device: torch.device, sigma: float,
                 tile: tuple[int, int, int] = BLUR_TILE) -> None:
        n, c, h, w = shape
        self.shape = shape
        self.dtype = compute_dtype(dtype)
        taps = blur_taps(sigma).astype("float64")
        k = taps.size
        mirror = k == 5
        if mirror:  # normalised once, on the host in float64 (a float scalar argument would be rounded to float32)
            taps = taps / taps.sum()
        taps = torch.as_tensor(taps, dtype=self.dtype)
        total = torch.zeros((), dtype=self.dtype)
        for tap in taps:  # the kernel's in-image sum over a whole window, in its order and precision
            total = total + tap
        self.taps = torch.cat([taps, total.view(1)]).to(device)
        acc = tl.float64 if self.dtype == torch.float64 else tl.float32
        bh, bw, warps = tile
        grid = (triton.cdiv(w, bw), triton.cdiv(h, bh), n * c)
        self._h = Launcher(_blur_axis_kernel, grid, num_warps=warps)
        self._v = Launcher(_blur_axis_kernel, grid, num_warps=warps)
        sn, sc, sh, sw = strides
        self._h_args = (h, w, sh, sw, c, sn, sc, k, mirror, True, acc, bh, bw)
        self._v_args = (h, w, w, 1, c, c * h * w, h * w, k, mirror, False, acc, bh, bw)

    def forward(self, x: torch.Tensor):
        tmp = torch.empty(self.shape, dtype=self.dtype, device=x.device)
        out = torch.empty_like(tmp)
        self._h(x, tmp, self.taps, *self._h_args)
        self._v(tmp, out, self.taps, *self._v_args)
        return out, ()


@cached(maxsize=256)
def _blur_plan(shape, strides, dtype, device, sigma) -> BlurPlan:
    return BlurPlan(shape, strides, dtype, device, sigma)


@butteraugli_blur.triton_plan
def butteraugli_blur_plan(tensors, scalars) -> BlurPlan:
    (x,) = tensors
    (sigma,) = scalars
    if x.dim() != 4:
        raise ValueError(f"butteraugli_blur runs on (N, C, H, W) tensors; got shape {tuple(x.shape)}")
    return _blur_plan(tuple(x.shape), x.stride(), x.dtype, x.device, float(sigma))
