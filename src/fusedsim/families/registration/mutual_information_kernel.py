"""Parzen joint-histogram kernels (Triton) and their plan for the op ``parzen_histogram`` (mutual information).

    parzen_histogram(pred, target, norm, centres, preterm, clamp, pooled) -> (N, C', nb + 2, nb)

pred, target: (N, C, *S), float16/bfloat16/float32/float64; norm: (C, 2) per-channel (lo, scale) of the intensity
map x̂ = (x - lo)·scale (clamped to [0, 1] when ``clamp``); centres: (nb,) bin centres; preterm = 1/(2σ²).
Returns pab (rows 0..nb-1, pred bins × target bins), pa (row nb) and pb (row nb + 1) per plane, or per image over
all channels when ``pooled`` (C' = 1), as ``reference/mutual_information_ref.py`` defines them.

Forward: each program takes a run of voxels of one (n, c) plane, computes the normalised Parzen weights of both
images for BV voxels at a time in registers and accumulates pab += p(Î)ᵀ p(Ĵ) with ``tl.dot`` (IEEE fp32, or fp64)
into an (nb, nb) register tile; per-program tiles are summed by PyTorch in a fixed order. Memory: O(programs·nb²),
never O(voxels·nb).
Backward (exact, from the histogram-derivative table G = dL/d(pab, pa, pb)): with p'_i(x) = 2·preterm·p_i(x)·
(c_i - Σ_j p_j c_j),

    dL/dÎ_k = (1/N) Σ_i p'_i(Î_k)·(Σ_j G_ij p_j(Ĵ_k) + G_pa,i),   dL/dĴ_k likewise with Gᵀ and G_pb,

recomputing the weights (no per-voxel state is saved), then the clamp mask and the scale; the per-channel
gradients of (lo, scale) are reduced per program.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedsim.core.launch import on_tensors_device
from fusedsim.core.kernel_args import sm_count, split_blocks, tl_dtype
from fusedsim.core.moments.twin import compute_dtype
from fusedsim.core.state import cached
from fusedsim.families.registration.ops import parzen_histogram


@triton.jit
def _parzen(X, base, idx, ok, lo, scale, cent, bok, pre, CLAMP: tl.constexpr, ACC: tl.constexpr):
    """Normalised Parzen weights (BV, NBP) of the voxels ``idx`` (zero rows where not ``ok``), x̂ and the mask of
    values inside the clamp range."""
    x = tl.load(X + base + idx, mask=ok, other=0.0).to(ACC)
    xh = (x - lo) * scale
    inside = ok
    if CLAMP:
        inside = ok & (xh >= 0.0) & (xh <= 1.0)
        xh = tl.minimum(tl.maximum(xh, 0.0), 1.0)
    d = xh[:, None] - cent[None, :]
    d2 = tl.where(bok[None, :], d * d, float("inf"))
    # shifting by the nearest centre's distance leaves p unchanged and keeps Σw >= 1 (no underflow to 0/0)
    w = tl.exp(-pre * (d2 - tl.min(d2, axis=1)[:, None]))
    p = w / tl.sum(w, axis=1)[:, None]
    return tl.where(ok[:, None], p, 0.0), x, xh, inside


@triton.jit
def _hist_fwd_kernel(X, Y, NORM, CENT, PART, V, C, CHUNK, pre_hi, pre_lo, NB: tl.constexpr, NBP: tl.constexpr,
                     BV: tl.constexpr, ACC: tl.constexpr, CLAMP: tl.constexpr):
    chunk = tl.program_id(0)
    c = tl.program_id(1)
    n = tl.program_id(2)
    base = (n.to(tl.int64) * C + c) * V
    lo = tl.load(NORM + 2 * c).to(ACC)
    scale = tl.load(NORM + 2 * c + 1).to(ACC)
    pre = tl.cast(pre_hi, ACC) + tl.cast(pre_lo, ACC)
    bins = tl.arange(0, NBP)
    bok = bins < NB
    cent = tl.load(CENT + bins, mask=bok, other=0.0).to(ACC)
    pab = tl.zeros([NBP, NBP], ACC)
    pa = tl.zeros([NBP], ACC)
    pb = tl.zeros([NBP], ACC)
    start = chunk.to(tl.int64) * CHUNK
    for s in range(0, CHUNK, BV):
        idx = start + s + tl.arange(0, BV)
        ok = idx < V
        px, _x, _xh, _in = _parzen(X, base, idx, ok, lo, scale, cent, bok, pre, CLAMP, ACC)
        py, _y, _yh, _jn = _parzen(Y, base, idx, ok, lo, scale, cent, bok, pre, CLAMP, ACC)
        pab = tl.dot(tl.trans(px), py, pab, input_precision="ieee", out_dtype=ACC)
        pa += tl.sum(px, axis=0)
        pb += tl.sum(py, axis=0)
    out = PART + ((n.to(tl.int64) * C + c) * tl.num_programs(0) + chunk) * (NBP + 2) * NBP
    tl.store(out + bins[:, None] * NBP + bins[None, :], pab)
    tl.store(out + NBP * NBP + bins, pa)
    tl.store(out + (NBP + 1) * NBP + bins, pb)


@triton.jit
def _hist_bwd_kernel(X, Y, NORM, CENT, GH, DX, DY, GNORM, V, C, CHUNK, count, pre_hi, pre_lo, POOLED: tl.constexpr,
                     NB: tl.constexpr, NBP: tl.constexpr, BV: tl.constexpr, ACC: tl.constexpr,
                     CLAMP: tl.constexpr, NEED_X: tl.constexpr, NEED_Y: tl.constexpr, NEED_NORM: tl.constexpr):
    chunk = tl.program_id(0)
    c = tl.program_id(1)
    n = tl.program_id(2)
    base = (n.to(tl.int64) * C + c) * V
    lo = tl.load(NORM + 2 * c).to(ACC)
    scale = tl.load(NORM + 2 * c + 1).to(ACC)
    pre = tl.cast(pre_hi, ACC) + tl.cast(pre_lo, ACC)
    bins = tl.arange(0, NBP)
    bok = bins < NB
    cent = tl.load(CENT + bins, mask=bok, other=0.0).to(ACC)
    hist = n.to(tl.int64) if POOLED else n.to(tl.int64) * C + c
    gh = GH + hist * (NB + 2) * NB
    gmask = bok[:, None] & bok[None, :]
    g_ab = tl.load(gh + bins[:, None] * NB + bins[None, :], mask=gmask, other=0.0).to(ACC)
    g_a = tl.load(gh + NB * NB + bins, mask=bok, other=0.0).to(ACC)
    g_b = tl.load(gh + (NB + 1) * NB + bins, mask=bok, other=0.0).to(ACC)
    coef = 2.0 * pre / count
    g_lo = tl.zeros([BV], ACC)
    g_scale = tl.zeros([BV], ACC)
    start = chunk.to(tl.int64) * CHUNK
    for s in range(0, CHUNK, BV):
        idx = start + s + tl.arange(0, BV)
        ok = idx < V
        px, x, _, x_in = _parzen(X, base, idx, ok, lo, scale, cent, bok, pre, CLAMP, ACC)
        py, y, _, y_in = _parzen(Y, base, idx, ok, lo, scale, cent, bok, pre, CLAMP, ACC)
        if NEED_X or NEED_NORM:
            vx = tl.dot(py, tl.trans(g_ab), input_precision="ieee", out_dtype=ACC) + g_a[None, :]
            cbar = tl.sum(px * cent[None, :], axis=1)
            gxh = coef * tl.sum(px * (cent[None, :] - cbar[:, None]) * vx, axis=1)
            gxh = tl.where(x_in, gxh, 0.0)
            if NEED_X:
                tl.store(DX + base + idx, (gxh * scale).to(DX.dtype.element_ty), mask=ok)
            g_lo += gxh
            g_scale += gxh * (x - lo)
        if NEED_Y or NEED_NORM:
            vy = tl.dot(px, g_ab, input_precision="ieee", out_dtype=ACC) + g_b[None, :]
            cbar = tl.sum(py * cent[None, :], axis=1)
            gyh = coef * tl.sum(py * (cent[None, :] - cbar[:, None]) * vy, axis=1)
            gyh = tl.where(y_in, gyh, 0.0)
            if NEED_Y:
                tl.store(DY + base + idx, (gyh * scale).to(DY.dtype.element_ty), mask=ok)
            g_lo += gyh
            g_scale += gyh * (y - lo)
    if NEED_NORM:
        out = GNORM + ((n.to(tl.int64) * C + c) * tl.num_programs(0) + chunk) * 2
        tl.store(out, -scale * tl.sum(g_lo, axis=0))
        tl.store(out + 1, tl.sum(g_scale, axis=0))


class HistogramPlan:
    """Geometry of one joint-histogram computation: ``forward(pred, target, norm, centres) -> (hist, ())`` and
    ``backward(tensors, saved, g, needs) -> (d_pred, d_target, d_norm, None)``."""

    def __init__(self, shape, dtype: torch.dtype, device: torch.device, num_bins: int, preterm: float, clamp: bool,
                 pooled: bool) -> None:
        n, c = shape[:2]
        self.shape, self.n, self.c, self.nb = tuple(shape), n, c, num_bins
        self.v = 1
        for s in shape[2:]:
            self.v *= s
        self.nbp = max(16, triton.next_power_of_2(num_bins))
        self.pre = split_blocks(preterm)
        self.clamp, self.pooled = clamp, pooled
        self.acc = compute_dtype(dtype)
        self.acc_tl = tl_dtype(dtype)
        # voxels per step (the K dimension of the dots) and warps: the (bins × bins) accumulator and two
        # (voxels × bins) weight tiles stay in registers (~100 fp32 values per thread at 32, 64, 128 and 256 bins)
        self.bv = max(16, min(64, 4096 // self.nbp))
        self.warps = {16: 4, 32: 4, 64: 4, 128: 8}.get(self.nbp, 16)
        target = max(4 * sm_count(device), 1)  # programs to fill the GPU (1 chunk per plane on the CPU)
        chunks = max(1, min(triton.cdiv(target, n * c), triton.cdiv(self.v, self.bv)))
        self.chunk = triton.cdiv(triton.cdiv(self.v, chunks), self.bv) * self.bv
        self.chunks = triton.cdiv(self.v, self.chunk)
        self.grid = (self.chunks, c, n)
        self.count = self.v * (c if pooled else 1)

    def _planes(self, x: torch.Tensor) -> torch.Tensor:
        return x.contiguous()

    @on_tensors_device
    def forward(self, pred: torch.Tensor, target: torch.Tensor, norm: torch.Tensor, centres: torch.Tensor):
        n, c, nb, nbp = self.n, self.c, self.nb, self.nbp
        part = torch.empty((n, c, self.chunks, nbp + 2, nbp), dtype=self.acc, device=pred.device)
        _hist_fwd_kernel[self.grid](self._planes(pred), self._planes(target), norm.contiguous(),
                                    centres.contiguous(), part, self.v, c, self.chunk, *self.pre, NB=nb, NBP=nbp,
                                    BV=self.bv, ACC=self.acc_tl, CLAMP=self.clamp, num_warps=self.warps)
        sums = part.sum(dim=2)
        if self.pooled:
            sums = sums.sum(dim=1, keepdim=True)
        sums = sums / self.count
        hist = torch.cat([sums[..., :nb, :nb], sums[..., nbp:nbp + 2, :nb]], dim=-2)
        return hist, ()

    @on_tensors_device
    def backward(self, tensors, saved, g, needs):
        pred, target, norm, centres = tensors
        need_x, need_y, need_norm = bool(needs[0]), bool(needs[1]), bool(needs[2])
        if not (need_x or need_y or need_norm):
            return None, None, None, None
        xs, ys = self._planes(pred), self._planes(target)
        dx = torch.empty_like(xs) if need_x else None
        dy = torch.empty_like(ys) if need_y else None
        gnorm = torch.empty((self.n, self.c, self.chunks, 2), dtype=self.acc, device=pred.device) if need_norm \
            else None
        dummy = g
        _hist_bwd_kernel[self.grid](xs, ys, norm.contiguous(), centres.contiguous(), g.contiguous(),
                                    dx if need_x else dummy, dy if need_y else dummy,
                                    gnorm if need_norm else dummy, self.v, self.c, self.chunk, self.count,
                                    *self.pre, POOLED=self.pooled, NB=self.nb, NBP=self.nbp, BV=self.bv,
                                    ACC=self.acc_tl, CLAMP=self.clamp, NEED_X=need_x, NEED_Y=need_y,
                                    NEED_NORM=need_norm, num_warps=self.warps)
        d_norm = gnorm.sum(dim=(0, 2)).to(norm.dtype) if need_norm else None
        return dx, dy, d_norm, None


@cached(maxsize=128)
def _plan_cached(shape, dtype, device, num_bins, preterm, clamp, pooled) -> HistogramPlan:
    return HistogramPlan(shape, dtype, device, num_bins, preterm, clamp, pooled)


@parzen_histogram.triton_plan
def histogram_plan(tensors, scalars) -> HistogramPlan:
    """The cached plan of ``parzen_histogram`` for these tensors and scalars."""
    pred, centres = tensors[0], tensors[3]
    preterm, clamp, pooled = scalars
    return _plan_cached(tuple(pred.shape), pred.dtype, pred.device, centres.shape[0], float(preterm), bool(clamp),
                        bool(pooled))


__all__ = ["HistogramPlan", "histogram_plan"]
