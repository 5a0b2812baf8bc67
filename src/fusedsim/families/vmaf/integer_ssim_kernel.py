"""libvmaf integer SSIM (feature ``ssim``) on the GPU, bit-identical to the CPU twin and to libvmaf.

Two steps, both exact:

1. :func:`_integer_ssim_fwd_kernel` computes the per-pixel double term of
   :mod:`fusedsim.families.vmaf.integer_ssim_twin` for a strip of ``BLOCK_W`` columns by ``ROWS`` rows. It walks the
   input rows once, keeping the horizontal moments of the last 9 rows in registers (a rolling window), so every
   horizontal sum is computed once. Moments are exact integers: int32 where they cannot overflow (8/10-bit
   horizontal sums), int64 otherwise (all vertical sums; 12/16-bit everywhere). The term is evaluated in IEEE
   double in libvmaf's order, compiled with ``enable_fp_fusion=False`` so no multiply-add is contracted into an
   FMA (that would change the rounding). Terms go to a float64 buffer in row-major order.
2. :func:`fusedsim.families.vmaf.sequential_sum_kernel.sequential_sum_fwd` pools the terms per frame with the exact bits of
   libvmaf's left-to-right double sum; the weight sum is exact (a product of integers), and the score is
   ``sum / weight_sum`` in double.

Integer SSIM has no gradient (integer input), so there is no backward kernel or autograd Function.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedsim.core.backend import triton_interpreting
from fusedsim.core.launch import on_tensors_device
from fusedsim.families.vmaf.sequential_sum_kernel import sequential_sum_fwd
from fusedsim.families.vmaf.integer_ssim_twin import integer_ssim_constants, integer_ssim_weight_sum
from fusedsim.families.vmaf.ops import integer_ssim

__all__ = ["integer_ssim_fwd", "integer_ssim_terms_fwd"]


@triton.jit
def _ld(ptr, m, DT: tl.constexpr, MASK16: tl.constexpr):
    v = tl.load(ptr, mask=m, other=0).to(DT)
    if MASK16:
        v = v & 0xFFFF
    return v


@triton.jit
def _sym9(x0, x1, x2, x3, x4, x5, x6, x7, x8):
    """Integer 9-tap Gaussian [2, 9, 28, 55, 68, 55, 28, 9, 2] on one value per tap (same dtype)."""
    return 68 * x4 + 55 * (x3 + x5) + 28 * (x2 + x6) + 9 * (x1 + x7) + 2 * (x0 + x8)


@triton.jit
def _sym9_wide(x0, x1, x2, x3, x4, x5, x6, x7, x8):
    """Same as :func:`_sym9` with the products and sums in int64 (pair sums stay in the input dtype, which the
    launcher guarantees cannot overflow)."""
    return (68 * x4.to(tl.int64) + 55 * (x3 + x5).to(tl.int64) + 28 * (x2 + x6).to(tl.int64)
            + 9 * (x1 + x7).to(tl.int64) + 2 * (x0 + x8).to(tl.int64))


@triton.jit
def _hrow(rp, dp, s_rw, s_dw, row_ok, cm0, cm1, cm2, cm3, cm4, cm5, cm6, cm7, cm8,
          DT: tl.constexpr, MASK16: tl.constexpr):
    """Horizontal moments (sum g*s, g*d, g*s*s, g*s*d, g*d*d) of one input row.

    ``rp`` / ``dp`` point at the row's samples under the output columns; tap ``k`` reads ``k - 4`` columns away,
    masked by the (row-invariant) column masks ``cm0..cm8`` and ``row_ok`` (both blocks).
    """
    s0 = _ld(rp - 4 * s_rw, row_ok & cm0, DT, MASK16)
    s1 = _ld(rp - 3 * s_rw, row_ok & cm1, DT, MASK16)
    s2 = _ld(rp - 2 * s_rw, row_ok & cm2, DT, MASK16)
    s3 = _ld(rp - s_rw, row_ok & cm3, DT, MASK16)
    s4 = _ld(rp, row_ok & cm4, DT, MASK16)
    s5 = _ld(rp + s_rw, row_ok & cm5, DT, MASK16)
    s6 = _ld(rp + 2 * s_rw, row_ok & cm6, DT, MASK16)
    s7 = _ld(rp + 3 * s_rw, row_ok & cm7, DT, MASK16)
    s8 = _ld(rp + 4 * s_rw, row_ok & cm8, DT, MASK16)
    d0 = _ld(dp - 4 * s_dw, row_ok & cm0, DT, MASK16)
    d1 = _ld(dp - 3 * s_dw, row_ok & cm1, DT, MASK16)
    d2 = _ld(dp - 2 * s_dw, row_ok & cm2, DT, MASK16)
    d3 = _ld(dp - s_dw, row_ok & cm3, DT, MASK16)
    d4 = _ld(dp, row_ok & cm4, DT, MASK16)
    d5 = _ld(dp + s_dw, row_ok & cm5, DT, MASK16)
    d6 = _ld(dp + 2 * s_dw, row_ok & cm6, DT, MASK16)
    d7 = _ld(dp + 3 * s_dw, row_ok & cm7, DT, MASK16)
    d8 = _ld(dp + 4 * s_dw, row_ok & cm8, DT, MASK16)
    hx = _sym9(s0, s1, s2, s3, s4, s5, s6, s7, s8)
    hy = _sym9(d0, d1, d2, d3, d4, d5, d6, d7, d8)
    hxx = _sym9(s0 * s0, s1 * s1, s2 * s2, s3 * s3, s4 * s4, s5 * s5, s6 * s6, s7 * s7, s8 * s8)
    hxy = _sym9(s0 * d0, s1 * d1, s2 * d2, s3 * d3, s4 * d4, s5 * d5, s6 * d6, s7 * d7, s8 * d8)
    hyy = _sym9(d0 * d0, d1 * d1, d2 * d2, d3 * d3, d4 * d4, d5 * d5, d6 * d6, d7 * d7, d8 * d8)
    return hx, hy, hxx, hxy, hyy


@triton.jit
def _inbounds_weight(pos, n):
    """Sum of the Gaussian taps that land inside ``[0, n)`` around ``pos`` (int32)."""
    w = 68 * ((pos >= 0) & (pos < n)).to(tl.int32)
    w += 55 * ((pos - 1 >= 0) & (pos - 1 < n)).to(tl.int32) + 55 * ((pos + 1 >= 0) & (pos + 1 < n)).to(tl.int32)
    w += 28 * ((pos - 2 >= 0) & (pos - 2 < n)).to(tl.int32) + 28 * ((pos + 2 >= 0) & (pos + 2 < n)).to(tl.int32)
    w += 9 * ((pos - 3 >= 0) & (pos - 3 < n)).to(tl.int32) + 9 * ((pos + 3 >= 0) & (pos + 3 < n)).to(tl.int32)
    w += 2 * ((pos - 4 >= 0) & (pos - 4 < n)).to(tl.int32) + 2 * ((pos + 4 >= 0) & (pos + 4 < n)).to(tl.int32)
    return w


@triton.jit
def _zeros9(BAND: tl.constexpr, BLOCK_W: tl.constexpr, DT: tl.constexpr):
    return (tl.zeros([BAND, BLOCK_W], DT), tl.zeros([BAND, BLOCK_W], DT), tl.zeros([BAND, BLOCK_W], DT),
            tl.zeros([BAND, BLOCK_W], DT), tl.zeros([BAND, BLOCK_W], DT), tl.zeros([BAND, BLOCK_W], DT),
            tl.zeros([BAND, BLOCK_W], DT), tl.zeros([BAND, BLOCK_W], DT), tl.zeros([BAND, BLOCK_W], DT))


@triton.jit
def _integer_ssim_fwd_kernel(ref_ptr, dist_ptr, out_ptr, const_ptr, N, H, W, NBANDS,
                             s_rn, s_rh, s_rw, s_dn, s_dh, s_dw, s_on,
                             BAND: tl.constexpr, BLOCK_W: tl.constexpr, ROWS: tl.constexpr,
                             DT: tl.constexpr, MASK16: tl.constexpr):
    """Terms for ``BAND`` horizontal bands (each ``ROWS`` rows of one frame) by ``BLOCK_W`` columns.

    Lane ``b`` of the band axis is band ``b % NBANDS`` of frame ``b // NBANDS``; the GPU launch uses one band per
    program, the interpreter many (one numpy operation then covers many bands).
    """
    pid_w = tl.program_id(0)
    pid_b = tl.program_id(1)
    band = pid_b * BAND + tl.arange(0, BAND)[:, None]  # [BAND, 1]
    band_ok = band < N * NBANDS
    f = (band // NBANDS).to(tl.int64)
    y0 = (band % NBANDS) * ROWS
    cols = pid_w * BLOCK_W + tl.arange(0, BLOCK_W)[None, :]  # [1, BLOCK_W]
    col_ok = cols < W
    wh = _inbounds_weight(cols, W)
    k1 = tl.load(const_ptr)  # double(L*L) * (0.01*0.01)
    k2 = tl.load(const_ptr + 1)  # double(L*L) * (0.03*0.03)
    ref_base = ref_ptr + f * s_rn + cols * s_rw
    dist_base = dist_ptr + f * s_dn + cols * s_dw
    out_base = out_ptr + f * s_on
    # column masks of the 9 taps (the same for every row)
    cm0 = (cols >= 4) & (cols - 4 < W)
    cm1 = (cols >= 3) & (cols - 3 < W)
    cm2 = (cols >= 2) & (cols - 2 < W)
    cm3 = (cols >= 1) & (cols - 1 < W)
    cm4 = col_ok
    cm5 = cols + 1 < W
    cm6 = cols + 2 < W
    cm7 = cols + 3 < W
    cm8 = cols + 4 < W

    # The 9-row window of horizontal moments (a: s, b: d, p: s*s, q: s*d, r: d*d), oldest row first. Every slot
    # starts as its own tensor: Triton finds loop-carried values by object identity, so slots sharing one initial
    # tensor would not be carried through the loop (``a0 = a1`` would look like "unchanged").
    a0, a1, a2, a3, a4, a5, a6, a7, a8 = _zeros9(BAND, BLOCK_W, DT)
    b0, b1, b2, b3, b4, b5, b6, b7, b8 = _zeros9(BAND, BLOCK_W, DT)
    p0, p1, p2, p3, p4, p5, p6, p7, p8 = _zeros9(BAND, BLOCK_W, DT)
    q0, q1, q2, q3, q4, q5, q6, q7, q8 = _zeros9(BAND, BLOCK_W, DT)
    r0, r1, r2, r3, r4, r5, r6, r7, r8 = _zeros9(BAND, BLOCK_W, DT)
    for i in range(0, ROWS + 8):
        r = y0 - 4 + i  # [BAND, 1]
        row_ok = band_ok & (r >= 0) & (r < H)
        rr = tl.where(row_ok, r, 0).to(tl.int64)
        na, nb, np_, nq, nr = _hrow(ref_base + rr * s_rh, dist_base + rr * s_dh, s_rw, s_dw, row_ok,
                                    cm0, cm1, cm2, cm3, cm4, cm5, cm6, cm7, cm8, DT, MASK16)
        a0 = a1; a1 = a2; a2 = a3; a3 = a4; a4 = a5; a5 = a6; a6 = a7; a7 = a8; a8 = na  # noqa: E702
        b0 = b1; b1 = b2; b2 = b3; b3 = b4; b4 = b5; b5 = b6; b6 = b7; b7 = b8; b8 = nb  # noqa: E702
        p0 = p1; p1 = p2; p2 = p3; p3 = p4; p4 = p5; p5 = p6; p6 = p7; p7 = p8; p8 = np_  # noqa: E702
        q0 = q1; q1 = q2; q2 = q3; q3 = q4; q4 = q5; q5 = q6; q6 = q7; q7 = q8; q8 = nq  # noqa: E702
        r0 = r1; r1 = r2; r2 = r3; r3 = r4; r4 = r5; r5 = r6; r6 = r7; r7 = r8; r8 = nr  # noqa: E702
        if i >= 8:
            yo = r - 4
            mux = _sym9_wide(a0, a1, a2, a3, a4, a5, a6, a7, a8).to(tl.float64)
            muy = _sym9_wide(b0, b1, b2, b3, b4, b5, b6, b7, b8).to(tl.float64)
            x2 = _sym9_wide(p0, p1, p2, p3, p4, p5, p6, p7, p8).to(tl.float64)
            xy = _sym9_wide(q0, q1, q2, q3, q4, q5, q6, q7, q8).to(tl.float64)
            y2 = _sym9_wide(r0, r1, r2, r3, r4, r5, r6, r7, r8).to(tl.float64)
            wv = _inbounds_weight(yo, H)
            wd = (wh * wv).to(tl.float64)
            c1 = k1 * wd * wd
            c2 = k2 * wd * wd
            mx2 = mux * mux
            mxy = mux * muy
            my2 = muy * muy
            num = wd * (2.0 * mxy + c1) * (c2 + 2.0 * (xy * wd - mxy))
            den = (mx2 + my2 + c1) * (x2 * wd - mx2 + y2 * wd - my2 + c2)
            term = num / den
            keep = band_ok & (yo < H) & (yo < y0 + ROWS) & col_ok
            tl.store(out_base + tl.where(keep, yo, 0).to(tl.int64) * W + cols, term, mask=keep)


def _kernel_input(x: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """A view the kernel can load: uint16 is read through int16 and masked back to 16 bits."""
    if x.dtype == torch.uint16:
        return x.view(torch.int16), True
    if x.dtype in (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64):
        return x, False
    raise TypeError(f"integer_ssim kernel needs integer samples; got {x.dtype}")


def _block_sizes(n: int, height: int, width: int) -> tuple[int, int, int, int]:
    """(BAND, BLOCK_W, ROWS, num_warps).

    On a GPU one band of 64 rows by 128 columns per program (H200: 37 us per 1080p frame against 39 for 32 rows;
    64x64 and 32x64 tie, 256-wide blocks are slower; ``benchmarks/NOTES.md``). The interpreter runs one numpy operation per block
    operation, so there a program covers many short bands of every frame at once (few, large operations).
    """
    if triton_interpreting():
        rows = min(16, height)
        bands = n * triton.cdiv(height, rows)
        return min(256, triton.next_power_of_2(bands)), min(2048, triton.next_power_of_2(max(width, 16))), rows, 4
    return 1, 128, 64, 4


@on_tensors_device
def integer_ssim_terms_fwd(ref: torch.Tensor, dist: torch.Tensor, bit_depth: int, out: torch.Tensor | None = None,
                           *, bands: int | None = None, block_w: int | None = None, rows: int | None = None,
                           num_warps: int | None = None) -> torch.Tensor:
    """Per-pixel double terms ``(N, H*W)`` (row-major per frame) of integer frames ``(N, H, W)``."""
    n, h, w = ref.shape
    r, m16 = _kernel_input(ref)
    d, _ = _kernel_input(dist)
    if out is None:
        out = torch.empty(n, h * w, dtype=torch.float64, device=ref.device)
    k1, k2 = integer_ssim_constants(bit_depth)
    consts = torch.tensor([k1, k2], dtype=torch.float64, device=ref.device)
    band, bw, rows_, warps = _block_sizes(n, h, w)
    band = bands or band
    bw = block_w or bw
    rows_ = rows or rows_
    warps = num_warps or warps
    nbands = triton.cdiv(h, rows_)
    # Largest magnitudes (L = 2**bits - 1, taps sum to 256): horizontal g*s*s sums reach 256 L^2, which int32
    # holds up to 10 bits (2.7e8; pair sums 5.4e8 < 2**31) but not at 12 bits (4.3e9): int64 there. Vertical sums
    # reach 65536 L^2 (2.8e14 at 16 bits) and are always int64; all of them are also exact as doubles (< 2**53).
    dt = tl.int32 if bit_depth <= 10 else tl.int64
    grid = (triton.cdiv(w, bw), triton.cdiv(n * nbands, band))
    _integer_ssim_fwd_kernel[grid](
        r, d, out, consts, n, h, w, nbands,
        r.stride(0), r.stride(1), r.stride(2), d.stride(0), d.stride(1), d.stride(2), out.stride(0),
        BAND=band, BLOCK_W=bw, ROWS=rows_, DT=dt, MASK16=m16, num_warps=warps, enable_fp_fusion=False,
    )
    return out


@integer_ssim.triton_launcher
def integer_ssim_fwd(ref: torch.Tensor, dist: torch.Tensor, bit_depth: int, *,
                     max_buffer_bytes: int = 1 << 30) -> torch.Tensor:
    """libvmaf ``ssim`` per frame of integer frames ``(N, H, W)`` on the tensors' device; ``(N,)`` float64.

    Inputs are assumed checked by the public API (same shape, integer dtype, values within ``bit_depth``).
    Frames are processed in groups whose float64 term buffer stays under ``max_buffer_bytes``.
    """
    n, h, w = ref.shape
    out = torch.empty(n, dtype=torch.float64, device=ref.device)
    if n == 0:
        return out
    weight_sum = float(integer_ssim_weight_sum(h, w))
    per_frame = h * w * 8
    group = max(1, min(n, max_buffer_bytes // per_frame))
    buf = torch.empty(group, h * w, dtype=torch.float64, device=ref.device)
    for s in range(0, n, group):
        e = min(n, s + group)
        terms = integer_ssim_terms_fwd(ref[s:e], dist[s:e], bit_depth, out=buf[: e - s])
        out[s:e] = sequential_sum_fwd(terms)
    return pooled_ratio(out, weight_sum)


def pooled_ratio(sums: torch.Tensor, weight_sum: float) -> torch.Tensor:
    """``sums / weight_sum`` as IEEE double divisions. (PyTorch's CUDA division by a Python scalar multiplies by
    the reciprocal, which can be one unit in the last place off; a tensor divisor divides.)"""
    return sums / torch.full_like(sums, weight_sum)


