"""SSIMULACRA2's blurs and comparison of one scale as Triton kernels.

    ssimulacra2_reference_blur(x1) -> (2, N, 3, h, w) float32: G(x1), G(x1²)
    ssimulacra2_error_pool(x1, x2, mu1, s11) -> (N, 3, 2, 3) float64: [channel, (L1, L4), (ssim, ringing, blur)]
    ssimulacra2_pair_pool(x1, x2) -> the same, for one-shot pairs: ``error_pool(x1, x2, *reference_blur(x1))``

G is libjxl's recursive Gaussian (sigma 1.5, ``ops/recursive_gaussian.py``). The reference side (x1 and its two
blurs) is computed once per reference image (cached-reference scoring reuses it); x1, mu1, s11 may hold one
image for N distorted ones. Twins: ``ssimulacra2_reference_blur_ref`` and ``ssimulacra2_error_pool_ref`` in
:mod:`fusedsim.families.ssimulacra2.twin`.

``ssimulacra2_error_pool`` is three launches: the horizontal pass of x2, x2², x1·x2 (products formed on the fly),
then one vertical kernel that finishes the three blurs row by row and, with each finished row, evaluates the
SSIM and edge maps (float32 as the reference, the edge ratio and the pooled sums in float64) and accumulates
the six pooled sums per column: the blurred maps never reach memory. Each program writes its partial sums; a
third small launch adds them over column blocks in a fixed order (deterministic) and takes the means and the
fourth roots. ``ssimulacra2_pair_pool`` (one-shot scoring, where nothing of the reference is kept) forms all five
horizontal maps in one launch and finishes the blurs of x1 and x1² in the vertical kernel too, so G(x1) and G(x1²)
are never written nor read back: a scale is three launches instead of five, and the vertical chains carry five
maps' recursions instead of three (the kernel is latency-bound at video sizes: the extra work hides in the
same row steps).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedsim.core.launch import Launcher
from fusedsim.core.recursive_gaussian.kernel import (
    MODE_DIST_MAPS,
    MODE_PAIR_MAPS,
    MODE_REF_MAPS,
    coefficient_tensor,
    horizontal_plan,
    lanes_per_program,
    v_filter3,
    v_row,
    vertical_plan,
)
from fusedsim.core.recursive_gaussian.twin import recursive_gaussian_coefficients
from fusedsim.core.state import cached
from fusedsim.families.ssimulacra2.twin import C2, SIGMA
from fusedsim.families.ssimulacra2.ops import ssimulacra2_error_pool, ssimulacra2_pair_pool, ssimulacra2_reference_blur

_C2 = tl.constexpr(C2)


@triton.jit
def _zeros6(BLOCK_C: tl.constexpr):
    """Six distinct float32 zero vectors."""
    return (tl.zeros([BLOCK_C], tl.float32), tl.zeros([BLOCK_C], tl.float32), tl.zeros([BLOCK_C], tl.float32),
            tl.zeros([BLOCK_C], tl.float32), tl.zeros([BLOCK_C], tl.float32), tl.zeros([BLOCK_C], tl.float32))


@triton.jit
def _accumulate(X1, X2, ref_base, base, n, height, width, cols, cmask, mu1, s11, mu2, s22, s12,
                acc_ssim, acc_ssim4, acc_ring, acc_ring4, acc_blur, acc_blur4):
    """Row n's SSIM and edge maps (float32 as the reference; the edge ratio in float64) added to the sums."""
    valid = cmask & (n >= 0) & (n < height)
    offs = n.to(tl.int64) * width + cols
    x1 = tl.load(X1 + ref_base + offs, mask=valid, other=0.0)
    x2 = tl.load(X2 + base + offs, mask=valid, other=0.0)
    diff = mu1 - mu2
    num_m = 1.0 - diff * diff
    num_s = 2.0 * (s12 - mu1 * mu2) + _C2
    denom_s = ((s11 - mu1 * mu1) + (s22 - mu2 * mu2)) + _C2
    ratio = tl.math.div_rn(num_m * num_s, tl.where(valid, denom_s, 1.0))
    d = tl.where(valid, tl.maximum(1.0 - ratio.to(tl.float64), 0.0), 0.0)
    edge = ((1.0 + tl.abs(x2 - mu2).to(tl.float64)) / (1.0 + tl.abs(x1 - mu1).to(tl.float64))) - 1.0
    ring = tl.where(valid, tl.maximum(edge, 0.0), 0.0)
    blur = tl.where(valid, tl.maximum(-edge, 0.0), 0.0)
    d2 = d * d
    r2 = ring * ring
    b2 = blur * blur
    return (acc_ssim + d, acc_ssim4 + d2 * d2, acc_ring + ring, acc_ring4 + r2 * r2, acc_blur + blur,
            acc_blur4 + b2 * b2)


@triton.jit
def _blur_row(T, base, n, q, height, width, cols, cmask, n2_1, n2_3, n2_5, d1_1, d1_3, d1_5,
              y1, y1b, y3, y3b, y5, y5b, RADIUS: tl.constexpr):
    """Row n of one map's vertical blur from its rows n - R - 1 (loaded now) and n + R - 1 (``q``, loaded four
    steps ago); returns the output, row n + 4 + R - 1 (loaded for four steps later) and the states."""
    s = v_row(T, base, n - RADIUS - 1, height, width, cols, cmask) + q
    q_next = v_row(T, base, n + 3 + RADIUS, height, width, cols, cmask)
    out, y1, y1b, y3, y3b, y5, y5b = v_filter3(s, n2_1, n2_3, n2_5, d1_1, d1_3, d1_5, y1, y1b, y3, y3b, y5, y5b)
    return out, q_next, y1, y1b, y3, y3b, y5, y5b


@triton.jit
def _error_row(T, MU1, S11, X1, X2, map_stride, ref_base, base, n, height, width, cols, cmask,
               n2_1, n2_3, n2_5, d1_1, d1_3, d1_5, qa, qb, qc, qd, qe,
               a1, a1b, a3, a3b, a5, a5b, b1, b1b, b3, b3b, b5, b5b, c1, c1b, c3, c3b, c5, c5b,
               e1, e1b, e3, e3b, e5, e5b, f1, f1b, f3, f3b, f5, f5b,
               acc_ssim, acc_ssim4, acc_ring, acc_ring4, acc_blur, acc_blur4,
               RADIUS: tl.constexpr, FUSED_REF: tl.constexpr):
    """One row step: the distorted side's three blurs (maps a, b, c), the reference side's two (maps d, e: blurred
    here when ``FUSED_REF``, else read from MU1 and S11), then the row's maps added to the sums."""
    mu2, qa, a1, a1b, a3, a3b, a5, a5b = _blur_row(T, base, n, qa, height, width, cols, cmask, n2_1, n2_3, n2_5,
                                                   d1_1, d1_3, d1_5, a1, a1b, a3, a3b, a5, a5b, RADIUS)
    s22, qb, b1, b1b, b3, b3b, b5, b5b = _blur_row(T + map_stride, base, n, qb, height, width, cols, cmask,
                                                   n2_1, n2_3, n2_5, d1_1, d1_3, d1_5, b1, b1b, b3, b3b, b5, b5b,
                                                   RADIUS)
    s12, qc, c1, c1b, c3, c3b, c5, c5b = _blur_row(T + 2 * map_stride, base, n, qc, height, width, cols, cmask,
                                                   n2_1, n2_3, n2_5, d1_1, d1_3, d1_5, c1, c1b, c3, c3b, c5, c5b,
                                                   RADIUS)
    if FUSED_REF:
        mu1, qd, e1, e1b, e3, e3b, e5, e5b = _blur_row(T + 3 * map_stride, base, n, qd, height, width, cols, cmask,
                                                       n2_1, n2_3, n2_5, d1_1, d1_3, d1_5, e1, e1b, e3, e3b, e5,
                                                       e5b, RADIUS)
        s11, qe, f1, f1b, f3, f3b, f5, f5b = _blur_row(T + 4 * map_stride, base, n, qe, height, width, cols, cmask,
                                                       n2_1, n2_3, n2_5, d1_1, d1_3, d1_5, f1, f1b, f3, f3b, f5,
                                                       f5b, RADIUS)
    else:
        valid = cmask & (n >= 0) & (n < height)
        offs = n.to(tl.int64) * width + cols
        mu1 = tl.load(MU1 + ref_base + offs, mask=valid, other=0.0)
        s11 = tl.load(S11 + ref_base + offs, mask=valid, other=0.0)
    acc_ssim, acc_ssim4, acc_ring, acc_ring4, acc_blur, acc_blur4 = _accumulate(
        X1, X2, ref_base, base, n, height, width, cols, cmask, mu1, s11, mu2, s22, s12,
        acc_ssim, acc_ssim4, acc_ring, acc_ring4, acc_blur, acc_blur4)
    return (qa, qb, qc, qd, qe, a1, a1b, a3, a3b, a5, a5b, b1, b1b, b3, b3b, b5, b5b, c1, c1b, c3, c3b, c5, c5b,
            e1, e1b, e3, e3b, e5, e5b, f1, f1b, f3, f3b, f5, f5b,
            acc_ssim, acc_ssim4, acc_ring, acc_ring4, acc_blur, acc_blur4)


@triton.jit
def _first_rows(T, map_stride, base, zero, height, width, cols, cmask, FUSED_REF: tl.constexpr):
    """Each map's rows 0..3 (the n + R - 1 inputs of the first four steps); maps d, e only when ``FUSED_REF``."""
    qa0 = v_row(T, base, zero, height, width, cols, cmask)
    qa1 = v_row(T, base, zero + 1, height, width, cols, cmask)
    qa2 = v_row(T, base, zero + 2, height, width, cols, cmask)
    qa3 = v_row(T, base, zero + 3, height, width, cols, cmask)
    qb0 = v_row(T + map_stride, base, zero, height, width, cols, cmask)
    qb1 = v_row(T + map_stride, base, zero + 1, height, width, cols, cmask)
    qb2 = v_row(T + map_stride, base, zero + 2, height, width, cols, cmask)
    qb3 = v_row(T + map_stride, base, zero + 3, height, width, cols, cmask)
    qc0 = v_row(T + 2 * map_stride, base, zero, height, width, cols, cmask)
    qc1 = v_row(T + 2 * map_stride, base, zero + 1, height, width, cols, cmask)
    qc2 = v_row(T + 2 * map_stride, base, zero + 2, height, width, cols, cmask)
    qc3 = v_row(T + 2 * map_stride, base, zero + 3, height, width, cols, cmask)
    qd0 = qa0 * 0.0
    qd1 = qa0 * 0.0
    qd2 = qa0 * 0.0
    qd3 = qa0 * 0.0
    qe0 = qa0 * 0.0
    qe1 = qa0 * 0.0
    qe2 = qa0 * 0.0
    qe3 = qa0 * 0.0
    if FUSED_REF:
        qd0 = v_row(T + 3 * map_stride, base, zero, height, width, cols, cmask)
        qd1 = v_row(T + 3 * map_stride, base, zero + 1, height, width, cols, cmask)
        qd2 = v_row(T + 3 * map_stride, base, zero + 2, height, width, cols, cmask)
        qd3 = v_row(T + 3 * map_stride, base, zero + 3, height, width, cols, cmask)
        qe0 = v_row(T + 4 * map_stride, base, zero, height, width, cols, cmask)
        qe1 = v_row(T + 4 * map_stride, base, zero + 1, height, width, cols, cmask)
        qe2 = v_row(T + 4 * map_stride, base, zero + 2, height, width, cols, cmask)
        qe3 = v_row(T + 4 * map_stride, base, zero + 3, height, width, cols, cmask)
    return qa0, qa1, qa2, qa3, qb0, qb1, qb2, qb3, qc0, qc1, qc2, qc3, qd0, qd1, qd2, qd3, qe0, qe1, qe2, qe3


@triton.jit
def _error_kernel(T, X1, X2, MU1, S11, PART, COEF, height, width, map_stride, col_blocks,
                  RADIUS: tl.constexpr, REF_BCAST: tl.constexpr, FUSED_REF: tl.constexpr, BLOCK_C: tl.constexpr):
    # Four row steps per iteration, each step's new input rows loaded four steps ahead (see the vertical
    # kernel in ops/recursive_gaussian.py); maps a, b, c = the horizontal passes of x2, x2², x1·x2, and with
    # FUSED_REF d, e = those of x1, x1² (else the finished blurs MU1, S11 are read).
    pid_c = tl.program_id(0)
    plane = tl.program_id(1)
    cols = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = cols < width
    base = plane.to(tl.int64) * height * width
    ref_plane = plane % 3 if REF_BCAST else plane
    ref_base = ref_plane.to(tl.int64) * height * width
    n2_1, n2_3, n2_5 = tl.load(COEF + 36), tl.load(COEF + 37), tl.load(COEF + 38)
    d1_1, d1_3, d1_5 = tl.load(COEF + 39), tl.load(COEF + 40), tl.load(COEF + 41)
    # recursion states: map x filter (1, 3, 5) x (y[-1], y[-2]), each its own zeros tensor (see
    # recursive_gaussian._iir_horizontal_kernel: states that start as one tensor are not all carried)
    a1, a1b, a3, a3b, a5, a5b = _zeros6(BLOCK_C)
    b1, b1b, b3, b3b, b5, b5b = _zeros6(BLOCK_C)
    c1, c1b, c3, c3b, c5, c5b = _zeros6(BLOCK_C)
    e1, e1b, e3, e3b, e5, e5b = _zeros6(BLOCK_C)
    f1, f1b, f3, f3b, f5, f5b = _zeros6(BLOCK_C)
    acc_ssim = tl.zeros([BLOCK_C], tl.float64)
    acc_ssim4 = acc_ssim
    acc_ring = acc_ssim
    acc_ring4 = acc_ssim
    acc_blur = acc_ssim
    acc_blur4 = acc_ssim
    zero = cols * 0
    qa0, qa1, qa2, qa3, qb0, qb1, qb2, qb3, qc0, qc1, qc2, qc3, qd0, qd1, qd2, qd3, qe0, qe1, qe2, qe3 = _first_rows(
        T, map_stride, base, zero, height, width, cols, cmask, FUSED_REF)
    for n0 in range(1 - RADIUS, height, 4):
        n = zero + n0
        (qa0, qb0, qc0, qd0, qe0, a1, a1b, a3, a3b, a5, a5b, b1, b1b, b3, b3b, b5, b5b, c1, c1b, c3, c3b, c5, c5b,
         e1, e1b, e3, e3b, e5, e5b, f1, f1b, f3, f3b, f5, f5b,
         acc_ssim, acc_ssim4, acc_ring, acc_ring4, acc_blur, acc_blur4) = _error_row(
            T, MU1, S11, X1, X2, map_stride, ref_base, base, n, height, width, cols, cmask,
            n2_1, n2_3, n2_5, d1_1, d1_3, d1_5, qa0, qb0, qc0, qd0, qe0,
            a1, a1b, a3, a3b, a5, a5b, b1, b1b, b3, b3b, b5, b5b, c1, c1b, c3, c3b, c5, c5b,
            e1, e1b, e3, e3b, e5, e5b, f1, f1b, f3, f3b, f5, f5b,
            acc_ssim, acc_ssim4, acc_ring, acc_ring4, acc_blur, acc_blur4, RADIUS, FUSED_REF)
        (qa1, qb1, qc1, qd1, qe1, a1, a1b, a3, a3b, a5, a5b, b1, b1b, b3, b3b, b5, b5b, c1, c1b, c3, c3b, c5, c5b,
         e1, e1b, e3, e3b, e5, e5b, f1, f1b, f3, f3b, f5, f5b,
         acc_ssim, acc_ssim4, acc_ring, acc_ring4, acc_blur, acc_blur4) = _error_row(
            T, MU1, S11, X1, X2, map_stride, ref_base, base, n + 1, height, width, cols, cmask,
            n2_1, n2_3, n2_5, d1_1, d1_3, d1_5, qa1, qb1, qc1, qd1, qe1,
            a1, a1b, a3, a3b, a5, a5b, b1, b1b, b3, b3b, b5, b5b, c1, c1b, c3, c3b, c5, c5b,
            e1, e1b, e3, e3b, e5, e5b, f1, f1b, f3, f3b, f5, f5b,
            acc_ssim, acc_ssim4, acc_ring, acc_ring4, acc_blur, acc_blur4, RADIUS, FUSED_REF)
        (qa2, qb2, qc2, qd2, qe2, a1, a1b, a3, a3b, a5, a5b, b1, b1b, b3, b3b, b5, b5b, c1, c1b, c3, c3b, c5, c5b,
         e1, e1b, e3, e3b, e5, e5b, f1, f1b, f3, f3b, f5, f5b,
         acc_ssim, acc_ssim4, acc_ring, acc_ring4, acc_blur, acc_blur4) = _error_row(
            T, MU1, S11, X1, X2, map_stride, ref_base, base, n + 2, height, width, cols, cmask,
            n2_1, n2_3, n2_5, d1_1, d1_3, d1_5, qa2, qb2, qc2, qd2, qe2,
            a1, a1b, a3, a3b, a5, a5b, b1, b1b, b3, b3b, b5, b5b, c1, c1b, c3, c3b, c5, c5b,
            e1, e1b, e3, e3b, e5, e5b, f1, f1b, f3, f3b, f5, f5b,
            acc_ssim, acc_ssim4, acc_ring, acc_ring4, acc_blur, acc_blur4, RADIUS, FUSED_REF)
        (qa3, qb3, qc3, qd3, qe3, a1, a1b, a3, a3b, a5, a5b, b1, b1b, b3, b3b, b5, b5b, c1, c1b, c3, c3b, c5, c5b,
         e1, e1b, e3, e3b, e5, e5b, f1, f1b, f3, f3b, f5, f5b,
         acc_ssim, acc_ssim4, acc_ring, acc_ring4, acc_blur, acc_blur4) = _error_row(
            T, MU1, S11, X1, X2, map_stride, ref_base, base, n + 3, height, width, cols, cmask,
            n2_1, n2_3, n2_5, d1_1, d1_3, d1_5, qa3, qb3, qc3, qd3, qe3,
            a1, a1b, a3, a3b, a5, a5b, b1, b1b, b3, b3b, b5, b5b, c1, c1b, c3, c3b, c5, c5b,
            e1, e1b, e3, e3b, e5, e5b, f1, f1b, f3, f3b, f5, f5b,
            acc_ssim, acc_ssim4, acc_ring, acc_ring4, acc_blur, acc_blur4, RADIUS, FUSED_REF)
    out = PART + (plane.to(tl.int64) * col_blocks + pid_c) * 6
    tl.store(out, tl.sum(acc_ssim, axis=0))
    tl.store(out + 1, tl.sum(acc_ssim4, axis=0))
    tl.store(out + 2, tl.sum(acc_ring, axis=0))
    tl.store(out + 3, tl.sum(acc_ring4, axis=0))
    tl.store(out + 4, tl.sum(acc_blur, axis=0))
    tl.store(out + 5, tl.sum(acc_blur4, axis=0))


@triton.jit
def _finish_kernel(PART, OUT, col_blocks, pixels):
    """Per plane: the column blocks' partial sums in a fixed order, then means (L1) and fourth roots of the
    means of d⁴ (L4), written as [norm][map]."""
    plane = tl.program_id(0)
    i = tl.arange(0, 8)
    ok = i < 6
    acc = tl.zeros([8], tl.float64)
    for b in range(0, col_blocks):
        acc += tl.load(PART + (plane.to(tl.int64) * col_blocks + b) * 6 + i, mask=ok, other=0.0)
    mean = acc / pixels
    l4 = (i % 2) == 1
    value = tl.where(l4, tl.sqrt(tl.sqrt(tl.maximum(mean, 0.0))), mean)
    tl.store(OUT + plane.to(tl.int64) * 6 + (i % 2) * 3 + i // 2, value, mask=ok)


def _check(tensor: torch.Tensor, name: str, shape: tuple[int, ...]) -> None:
    if tensor.dtype != torch.float32:
        raise TypeError(f"{name} must be float32 for the Triton SSIMULACRA2 kernels (the reference's arithmetic); "
                        f"got {tensor.dtype} — the reference backend computes float64 exactly")
    if tuple(tensor.shape) != shape:
        raise ValueError(f"{name} must have shape {shape}; got {tuple(tensor.shape)}")


class ReferenceBlurPlan:
    """forward(x1) -> ((2, N, 3, h, w) float32 [G(x1), G(x1²)], ())."""

    def __init__(self, shape: tuple[int, ...], device: torch.device) -> None:
        n, c, h, w = shape
        self.shape = shape
        self._h = horizontal_plan(n * c, h, w, MODE_REF_MAPS, SIGMA, device)
        self._v = vertical_plan(2 * n * c, h, w, SIGMA, device)

    def forward(self, x1: torch.Tensor):
        _check(x1, "x1", self.shape)
        maps = self._h(x1.contiguous())  # (2, N·3, h, w)
        return self._v(maps.reshape(-1, *self.shape[2:])).reshape(2, *self.shape), ()


class _ErrorPool:
    """The comparison kernel and the finishing launch for one (dist shape, reference broadcast, fused) case."""

    def __init__(self, dist_shape: tuple[int, ...], ref_bcast: bool, fused_ref: bool, device: torch.device) -> None:
        n, c, h, w = dist_shape
        rg = recursive_gaussian_coefficients(SIGMA)
        self.coef = coefficient_tensor(SIGMA, device)
        block = lanes_per_program(w, n * c, device)
        self.col_blocks = triton.cdiv(w, block)
        self._launch = Launcher(_error_kernel, (self.col_blocks, n * c), num_warps=block // 32,
                                enable_fp_fusion=False)
        self._tail = (h, w, n * c * h * w, self.col_blocks, rg.radius, ref_bcast, fused_ref, block)
        self._finish = Launcher(_finish_kernel, (n * c,), num_warps=1, enable_fp_fusion=False)
        self.pixels = h * w
        self.dist_shape = dist_shape

    def __call__(self, maps, x1, x2, mu1, s11) -> torch.Tensor:
        n, c = self.dist_shape[:2]
        part = torch.empty(n * c, self.col_blocks, 6, dtype=torch.float64, device=x2.device)
        self._launch(maps, x1, x2, mu1, s11, part, self.coef, *self._tail)
        out = torch.empty(n, c, 2, 3, dtype=torch.float64, device=x2.device)
        self._finish(part, out, self.col_blocks, self.pixels)
        return out


class ErrorPoolPlan:
    """forward(x1, x2, mu1, s11) -> ((N, 3, 2, 3) float64, ()), the reference side with batch 1 or N."""

    def __init__(self, ref_shape: tuple[int, ...], dist_shape: tuple[int, ...], device: torch.device) -> None:
        n, c, h, w = dist_shape
        self.ref_shape, self.dist_shape = ref_shape, dist_shape
        ref_bcast = ref_shape[0] == 1 and n > 1
        self._h = horizontal_plan(n * c, h, w, MODE_DIST_MAPS, SIGMA, device, ref_bcast)
        self._pool = _ErrorPool(dist_shape, ref_bcast, False, device)

    def forward(self, x1: torch.Tensor, x2: torch.Tensor, mu1: torch.Tensor, s11: torch.Tensor):
        for t, name in ((x1, "x1"), (mu1, "mu1"), (s11, "s11")):
            _check(t, name, self.ref_shape)
        _check(x2, "x2", self.dist_shape)
        x1, x2, mu1, s11 = x1.contiguous(), x2.contiguous(), mu1.contiguous(), s11.contiguous()
        maps = self._h(x2, x1)  # (3, N·3, h, w): horizontal x2, x2², x1·x2
        return self._pool(maps, x1, x2, mu1, s11), ()


class PairPoolPlan:
    """forward(x1, x2) -> ((N, 3, 2, 3) float64, ()): one-shot comparison of a pair, both sides' blurs in the
    same two launches (the five horizontal maps, then the vertical pass finishing all five per row)."""

    def __init__(self, shape: tuple[int, ...], device: torch.device) -> None:
        n, c, h, w = shape
        self.shape = shape
        self._h = horizontal_plan(n * c, h, w, MODE_PAIR_MAPS, SIGMA, device)
        self._pool = _ErrorPool(shape, False, True, device)

    def forward(self, x1: torch.Tensor, x2: torch.Tensor):
        _check(x1, "x1", self.shape)
        _check(x2, "x2", self.shape)
        x1, x2 = x1.contiguous(), x2.contiguous()
        maps = self._h(x2, x1)  # (5, N·3, h, w): horizontal x2, x2², x1·x2, x1, x1²
        return self._pool(maps, x1, x2, x1, x1), ()  # mu1, s11 unused: blurred in the kernel


@cached(maxsize=64)
def _ref_blur_plan(shape, device) -> ReferenceBlurPlan:
    return ReferenceBlurPlan(shape, device)


@cached(maxsize=64)
def _error_plan(ref_shape, dist_shape, device) -> ErrorPoolPlan:
    return ErrorPoolPlan(ref_shape, dist_shape, device)


@cached(maxsize=64)
def _pair_plan(shape, device) -> PairPoolPlan:
    return PairPoolPlan(shape, device)


def _image_shape(x: torch.Tensor, name: str) -> tuple[int, ...]:
    if x.dim() != 4 or x.shape[1] != 3:
        raise ValueError(f"{name} must be (N, 3, h, w); got shape {tuple(x.shape)}")
    return tuple(x.shape)


@ssimulacra2_reference_blur.triton_plan
def reference_blur_plan(tensors, scalars) -> ReferenceBlurPlan:
    (x1,) = tensors
    return _ref_blur_plan(_image_shape(x1, "x1"), x1.device)


@ssimulacra2_error_pool.triton_plan
def error_pool_plan(tensors, scalars) -> ErrorPoolPlan:
    x1, x2 = tensors[:2]
    ref_shape, dist_shape = _image_shape(x1, "x1"), _image_shape(x2, "x2")
    if ref_shape[2:] != dist_shape[2:] or ref_shape[0] not in (1, dist_shape[0]):
        raise ValueError(f"x1 {ref_shape} and x2 {dist_shape} must have the same size (x1 may hold one image)")
    return _error_plan(ref_shape, dist_shape, x2.device)


@ssimulacra2_pair_pool.triton_plan
def pair_pool_plan(tensors, scalars) -> PairPoolPlan:
    x1, x2 = tensors
    shape = _image_shape(x1, "x1")
    if _image_shape(x2, "x2") != shape:
        raise ValueError(f"x1 {shape} and x2 {tuple(x2.shape)} must have the same shape")
    return _pair_plan(shape, x2.device)
