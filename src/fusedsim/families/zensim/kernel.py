"""zensim's per-scale feature sums (its hot loop) as Triton kernels, in upstream's float32 arithmetic.

    zensim_scale_sums(src, dst) -> (N, C, 20) float64: per plane the 17 pooled sums and 3 maxima

Twin: :func:`fusedsim.families.zensim.f32_twin.zensim_scale_sums_ref` (which runs ``_scale_sums``, the replay of
imazen/zensim's ``fused_blur_h_ssim`` + strip-wise V blur + features); the packing of the 20 values is documented
there. src may hold one image for N distorted ones (its batch stride is then 0); any strides; float32 only.

Three launches per scale:

1. ``_h_blur_kernel``: one program (one warp) per 16 rows (plane, y); a float32 running sum per row walks the row
   from column 0 (init: columns r..0, then mirrored 1..r; step: ``(sum + add) - rem``; the s²+d² and s·d sums with
   FMAs in the twin's order) and writes the four H-blurred maps (mu1, mu2, s²+d², s·d, each ``sum * f32(1/11)``)
   to a (4, P, h, w) float32 buffer. The row is walked in tiles of 16 columns: the columns a tile adds and removes
   are loaded as [16 rows, 16 columns] tiles (coalesced along the row), the sequential walk picks each column out
   of them in registers (a one-hot masked sum: the value plus zeros, exact) and gathers the outputs into four tiles
   stored coalesced. A separate pass rather than recomputing inside the vertical kernel: the running sum's float32
   rounding residue at column x depends on every step from column 0, so a block of columns cannot recompute its
   H-blurred values without walking the whole row (O(w) per row per block); written once, they cost 16 B/px.
2. ``_v_features_kernel``: one program per (plane, strip of 32 output rows, block of columns), one column per
   thread. It starts the strip's vertical running sums (four, float32, in registers) 5 rows above the strip
   (clipped to the image, mirror-reflected at the strip's ends as upstream's strip buffer), walks the overlap rows,
   then for each of the strip's 32 rows evaluates the per-pixel features (float32, FMAs where the twin has them)
   and adds them in float64 to per-column accumulators (17 sums, 3 maxima). Each program writes its 20 partial
   values.
3. ``_finish_kernel``: per plane, the partials of its programs added (maxima: max) in parallel but in a fixed
   order (128 lanes, each a strided subset, then a tree across lanes), so results are deterministic run to run.

Bytes per pixel per scale (float32 planes): H pass reads s, d (8; the removed columns again, from cache) and
writes 4 maps (16), all as coalesced 16x16 tiles; the V pass reads the 4
maps over 42 rows per 32 output rows (16 x 42/32 = 21; each row is read twice, to add and to remove it, the second
time from cache) and s, d (8): ~53 B/px in all, partials negligible.

Arithmetic: every float32 operation of the twin in its order; ``tl.fma`` where the twin calls ``_fma`` on float32
operands (the twin evaluates an FMA in float64 and rounds once, which equals a hardware FMA except for rare
double-rounding ties); the twin's ``_fma(2, x, C2)`` with C2 a float64 constant is evaluated the twin's way, in
float64 (C2 read from a float64 tensor: a float kernel argument would arrive as float32); divisions correctly
rounded (``div_rn``); kernels compile with ``enable_fp_fusion=False`` so no other multiply-add is contracted.
The pooled float64 sums run in another order than the twin's (per row, then rows), ~1e-16 relative.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedsim.core.kernel_args import sm_count
from fusedsim.core.launch import Launcher
from fusedsim.core.state import cached
from fusedsim.families.zensim.f32_twin import SCALE_SUMS, STRIP_INNER
from fusedsim.families.zensim.twin import BLUR_RADIUS, C2
from fusedsim.families.zensim.ops import zensim_scale_sums

_SUMS = 3 * 4 + 5  # float64 sums per plane; then 3 maxima


@cached(maxsize=16)
def _constants(device: torch.device) -> torch.Tensor:
    """float64 [C2, f32(1/(2r+1))] as the kernels read them (C2 stays float64: the twin adds it in float64)."""
    inv = torch.tensor(1.0 / (2 * BLUR_RADIUS + 1), dtype=torch.float32).item()
    return torch.tensor([C2, inv], dtype=torch.float64, device=device)


# ------------------------------------------------------------------------------------------- Triton helpers
@triton.jit
def _mirror(i, n):
    """Upstream's running-sum index folding (reflect without edge repeat, clamped) of a vector of indices."""
    i = tl.abs(i)
    i = tl.where(i >= n, tl.abs(2 * (n - 1) - i), i)
    return tl.minimum(i, n - 1)


@triton.jit
def _column(tile, sel):
    """Column ``sel`` (a one-hot [1, BLOCK_W] mask) of a [BLOCK_R, BLOCK_W] tile, exactly: the one value plus zeros
    (never -0.0 here: the running sums start at +0 and an exact float32 zero result is +0)."""
    return tl.sum(tl.where(sel, tile, 0.0), axis=1)


@triton.jit
def _h_blur_kernel(S, D, OUT, CONST, rows, height, width, channels, map_stride,
                   s_n, s_c, s_h, s_w, d_n, d_c, d_h, d_w,
                   RADIUS: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_W: tl.constexpr):
    pid = tl.program_id(0)
    r = pid * BLOCK_R + tl.arange(0, BLOCK_R)
    rmask = r < rows
    r64 = r.to(tl.int64)
    y = r64 % height
    plane = r64 // height
    n = plane // channels
    c = plane % channels
    s_row = n * tl.cast(s_n, tl.int64) + c * tl.cast(s_c, tl.int64) + y * tl.cast(s_h, tl.int64)
    d_row = n * tl.cast(d_n, tl.int64) + c * tl.cast(d_c, tl.int64) + y * tl.cast(d_h, tl.int64)
    sw = tl.cast(s_w, tl.int64)
    dw = tl.cast(d_w, tl.int64)
    out_row = r64 * width
    inv = tl.load(CONST + 1).to(tl.float32)
    zero = r * 0
    # one zeros tensor per state (compiled Triton may drop loop-carried states that start as one tensor)
    sum_s = tl.zeros([BLOCK_R], tl.float32)
    sum_d = tl.zeros([BLOCK_R], tl.float32)
    sum_sq = tl.zeros([BLOCK_R], tl.float32)
    sum_p = tl.zeros([BLOCK_R], tl.float32)
    for i in tl.static_range(2 * RADIUS + 1):
        if i <= RADIUS:
            k = tl.minimum(zero + (RADIUS - i), width - 1)
        else:
            k = _mirror(zero + (i - RADIUS), width)
        k64 = k.to(tl.int64)
        sv = tl.load(S + s_row + k64 * sw, mask=rmask, other=0.0).to(tl.float32)
        dv = tl.load(D + d_row + k64 * dw, mask=rmask, other=0.0).to(tl.float32)
        sum_s = sum_s + sv
        sum_d = sum_d + dv
        sum_sq = tl.fma(sv, sv, tl.fma(dv, dv, sum_sq))
        sum_p = tl.fma(sv, dv, sum_p)
    j = tl.arange(0, BLOCK_W)
    s_rows = S + s_row[:, None]
    d_rows = D + d_row[:, None]
    for x0 in range(0, width, BLOCK_W):
        xv = x0 + j
        tmask = rmask[:, None] & (xv < width)[None, :]
        # the columns this tile adds and removes, as [BLOCK_R, BLOCK_W] tiles (coalesced along the row)
        a = _mirror(xv + (RADIUS + 1), width).to(tl.int64)[None, :]
        m = _mirror(xv - RADIUS, width).to(tl.int64)[None, :]
        sa_t = tl.load(s_rows + a * sw, mask=tmask, other=0.0).to(tl.float32)
        da_t = tl.load(d_rows + a * dw, mask=tmask, other=0.0).to(tl.float32)
        sr_t = tl.load(s_rows + m * sw, mask=tmask, other=0.0).to(tl.float32)
        dr_t = tl.load(d_rows + m * dw, mask=tmask, other=0.0).to(tl.float32)
        o1 = tl.zeros([BLOCK_R, BLOCK_W], tl.float32)
        o2 = tl.zeros([BLOCK_R, BLOCK_W], tl.float32)
        o3 = tl.zeros([BLOCK_R, BLOCK_W], tl.float32)
        o4 = tl.zeros([BLOCK_R, BLOCK_W], tl.float32)
        # the running sums walk the tile's columns in registers, in the twin's order (store, then slide)
        for jj in tl.static_range(BLOCK_W):
            sel = (j == jj)[None, :]
            o1 = tl.where(sel, (sum_s * inv)[:, None], o1)
            o2 = tl.where(sel, (sum_d * inv)[:, None], o2)
            o3 = tl.where(sel, (sum_sq * inv)[:, None], o3)
            o4 = tl.where(sel, (sum_p * inv)[:, None], o4)
            sa = _column(sa_t, sel)
            da = _column(da_t, sel)
            sr = _column(sr_t, sel)
            dr = _column(dr_t, sel)
            sum_s = (sum_s + sa) - sr
            sum_d = (sum_d + da) - dr
            sum_sq = tl.fma(sa, sa, tl.fma(da, da, tl.fma(-sr, sr, tl.fma(-dr, dr, sum_sq))))
            sum_p = tl.fma(sa, da, tl.fma(-sr, dr, sum_p))
        out = OUT + out_row[:, None] + xv[None, :]
        tl.store(out, o1, mask=tmask)
        tl.store(out + map_stride, o2, mask=tmask)
        tl.store(out + 2 * map_stride, o3, mask=tmask)
        tl.store(out + 3 * map_stride, o4, mask=tmask)


@triton.jit
def _maps_row(T, base, row, width, cols, cmask, map_stride):
    """Row ``row`` (a vector) of the four H-blurred maps at this program's columns."""
    p = T + base + row.to(tl.int64) * width + cols
    return (tl.load(p, mask=cmask, other=0.0), tl.load(p + map_stride, mask=cmask, other=0.0),
            tl.load(p + 2 * map_stride, mask=cmask, other=0.0), tl.load(p + 3 * map_stride, mask=cmask, other=0.0))


@triton.jit
def _step(T, base, y, top, sh, width, cols, cmask, map_stride, r1, r2, r3, r4, RADIUS: tl.constexpr):
    """Slide the four vertical running sums one row down the strip: (run + row[a]) - row[m], mirrored in-strip."""
    a = top + _mirror(y + (RADIUS + 1), sh)
    m = top + _mirror(y - RADIUS, sh)
    a1, a2, a3, a4 = _maps_row(T, base, a, width, cols, cmask, map_stride)
    m1, m2, m3, m4 = _maps_row(T, base, m, width, cols, cmask, map_stride)
    return (r1 + a1) - m1, (r2 + a2) - m2, (r3 + a3) - m3, (r4 + a4) - m4


@triton.jit
def _powers(v, acc1, acc2, acc4, acc8, vmax):
    """Add v, v², v⁴, v⁸ (float32 powers, float64 sums) of a non-negative map; update its maximum."""
    v2 = v * v
    v4 = v2 * v2
    v8 = v4 * v4
    return (acc1 + v.to(tl.float64), acc2 + v2.to(tl.float64), acc4 + v4.to(tl.float64), acc8 + v8.to(tl.float64),
            tl.maximum(vmax, v))


@triton.jit
def _v_features_kernel(T, S, D, PART, CONST, height, width, channels, strips, col_blocks, map_stride,
                       s_n, s_c, s_h, s_w, d_n, d_c, d_h, d_w,
                       RADIUS: tl.constexpr, STRIP: tl.constexpr, BLOCK_C: tl.constexpr):
    pid = tl.program_id(0)
    cb = pid % col_blocks
    t = pid // col_blocks
    strip = t % strips
    plane = t // strips
    cols = cb * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = cols < width
    zero = cols * 0
    y0 = strip * STRIP
    y1 = tl.minimum(y0 + STRIP, height)
    top = tl.maximum(y0 - RADIUS, 0)
    bot = tl.minimum(y1 + RADIUS, height)
    sh = zero + (bot - top)
    topv = zero + top
    base = plane.to(tl.int64) * height * width
    n = (plane // channels).to(tl.int64)
    c = (plane % channels).to(tl.int64)
    cols64 = cols.to(tl.int64)
    s_ptr = S + n * tl.cast(s_n, tl.int64) + c * tl.cast(s_c, tl.int64) + cols64 * tl.cast(s_w, tl.int64)
    d_ptr = D + n * tl.cast(d_n, tl.int64) + c * tl.cast(d_c, tl.int64) + cols64 * tl.cast(d_w, tl.int64)
    sh_stride = tl.cast(s_h, tl.int64)
    dh_stride = tl.cast(d_h, tl.int64)
    c2 = tl.load(CONST)  # float64
    c2_f32 = c2.to(tl.float32)
    inv = tl.load(CONST + 1).to(tl.float32)
    # vertical running sums of the four maps: each its own zeros tensor
    r1 = tl.zeros([BLOCK_C], tl.float32)
    r2 = tl.zeros([BLOCK_C], tl.float32)
    r3 = tl.zeros([BLOCK_C], tl.float32)
    r4 = tl.zeros([BLOCK_C], tl.float32)
    for i in tl.static_range(2 * RADIUS + 1):  # rows r..0, then 1..r of the strip, clamped to its last row
        if i <= RADIUS:
            k = tl.minimum(zero + (RADIUS - i), sh - 1)
        else:
            k = tl.minimum(zero + (i - RADIUS), sh - 1)
        a1, a2, a3, a4 = _maps_row(T, base, topv + k, width, cols, cmask, map_stride)
        r1 = r1 + a1
        r2 = r2 + a2
        r3 = r3 + a3
        r4 = r4 + a4
    for y in range(y0 - top):  # the overlap rows above the strip: slide only
        r1, r2, r3, r4 = _step(T, base, zero + y, topv, sh, width, cols, cmask, map_stride, r1, r2, r3, r4, RADIUS)
    # float64 sums per column: [ssim, art, det] x [v, v², v⁴, v⁸], then hf_src, hf_dst, abs_src, abs_dst, mse
    q0 = tl.zeros([BLOCK_C], tl.float64)
    q1 = tl.zeros([BLOCK_C], tl.float64)
    q2 = tl.zeros([BLOCK_C], tl.float64)
    q3 = tl.zeros([BLOCK_C], tl.float64)
    q4 = tl.zeros([BLOCK_C], tl.float64)
    q5 = tl.zeros([BLOCK_C], tl.float64)
    q6 = tl.zeros([BLOCK_C], tl.float64)
    q7 = tl.zeros([BLOCK_C], tl.float64)
    q8 = tl.zeros([BLOCK_C], tl.float64)
    q9 = tl.zeros([BLOCK_C], tl.float64)
    q10 = tl.zeros([BLOCK_C], tl.float64)
    q11 = tl.zeros([BLOCK_C], tl.float64)
    q12 = tl.zeros([BLOCK_C], tl.float64)
    q13 = tl.zeros([BLOCK_C], tl.float64)
    q14 = tl.zeros([BLOCK_C], tl.float64)
    q15 = tl.zeros([BLOCK_C], tl.float64)
    q16 = tl.zeros([BLOCK_C], tl.float64)
    max_ssim = tl.zeros([BLOCK_C], tl.float32)
    max_art = tl.zeros([BLOCK_C], tl.float32)
    max_det = tl.zeros([BLOCK_C], tl.float32)
    for y in range(y0 - top, y1 - top):
        row = (top + y).to(tl.int64)
        sv = tl.load(s_ptr + row * sh_stride, mask=cmask, other=0.0).to(tl.float32)
        dv = tl.load(d_ptr + row * dh_stride, mask=cmask, other=0.0).to(tl.float32)
        mu1 = r1 * inv
        mu2 = r2 * inv
        ssq = r3 * inv
        s12 = r4 * inv
        mu_diff = mu1 - mu2
        num_m = tl.fma(mu_diff, -mu_diff, 1.0)
        num_s = (2.0 * tl.fma(-mu1, mu2, s12).to(tl.float64) + c2).to(tl.float32)  # the twin's float64 FMA
        denom_s = tl.fma(-mu2, mu2, tl.fma(-mu1, mu1, ssq)) + c2_f32
        ssim = tl.maximum(1.0 - tl.math.div_rn(num_m * num_s, denom_s), 0.0)
        vs = sv - mu1
        vd = dv - mu2
        diff1 = tl.abs(vs)
        diff2 = tl.abs(vd)
        ed = tl.math.div_rn(1.0 + diff2, 1.0 + diff1) - 1.0
        # columns past the right edge load zeros everywhere: mu = s = d = 0, num_s = denom_s = f32(C2), so every
        # value below is exactly 0 there and needs no mask
        q0, q1, q2, q3, max_ssim = _powers(ssim, q0, q1, q2, q3, max_ssim)
        q4, q5, q6, q7, max_art = _powers(tl.maximum(ed, 0.0), q4, q5, q6, q7, max_art)
        q8, q9, q10, q11, max_det = _powers(tl.maximum(-ed, 0.0), q8, q9, q10, q11, max_det)
        pd = sv - dv
        q12 += (vs * vs).to(tl.float64)
        q13 += (vd * vd).to(tl.float64)
        q14 += diff1.to(tl.float64)
        q15 += diff2.to(tl.float64)
        q16 += (pd * pd).to(tl.float64)
        r1, r2, r3, r4 = _step(T, base, zero + y, topv, sh, width, cols, cmask, map_stride, r1, r2, r3, r4, RADIUS)
    out = PART + pid.to(tl.int64) * 20
    tl.store(out, tl.sum(q0, axis=0))
    tl.store(out + 1, tl.sum(q1, axis=0))
    tl.store(out + 2, tl.sum(q2, axis=0))
    tl.store(out + 3, tl.sum(q3, axis=0))
    tl.store(out + 4, tl.sum(q4, axis=0))
    tl.store(out + 5, tl.sum(q5, axis=0))
    tl.store(out + 6, tl.sum(q6, axis=0))
    tl.store(out + 7, tl.sum(q7, axis=0))
    tl.store(out + 8, tl.sum(q8, axis=0))
    tl.store(out + 9, tl.sum(q9, axis=0))
    tl.store(out + 10, tl.sum(q10, axis=0))
    tl.store(out + 11, tl.sum(q11, axis=0))
    tl.store(out + 12, tl.sum(q12, axis=0))
    tl.store(out + 13, tl.sum(q13, axis=0))
    tl.store(out + 14, tl.sum(q14, axis=0))
    tl.store(out + 15, tl.sum(q15, axis=0))
    tl.store(out + 16, tl.sum(q16, axis=0))
    tl.store(out + 17, tl.max(max_ssim, axis=0).to(tl.float64))
    tl.store(out + 18, tl.max(max_art, axis=0).to(tl.float64))
    tl.store(out + 19, tl.max(max_det, axis=0).to(tl.float64))


@triton.jit
def _finish_kernel(PART, OUT, parts, SUMS: tl.constexpr, BLOCK_P: tl.constexpr):
    """Per plane: its programs' partials reduced in parallel, in a fixed order (deterministic for a fixed BLOCK_P):
    each of BLOCK_P lanes accumulates the partials b = lane, lane + BLOCK_P, ... (sums added, maxima by max), then
    one tree reduction across the lanes. A [BLOCK_P, 32] tile per step: rows of 20 contiguous float64 (coalesced)."""
    plane = tl.program_id(0)
    i = tl.arange(0, 32)
    ok = i < 20
    is_max = i >= SUMS
    lane = tl.arange(0, BLOCK_P)
    acc = tl.zeros([BLOCK_P, 32], tl.float64)  # maxima are >= 0: 0 is their identity as well
    first = PART + plane.to(tl.int64) * parts * 20
    for b0 in range(0, parts, BLOCK_P):
        b = b0 + lane
        m = (b < parts)[:, None] & ok[None, :]
        v = tl.load(first + b.to(tl.int64)[:, None] * 20 + i[None, :], mask=m, other=0.0)
        acc = tl.where(is_max[None, :], tl.maximum(acc, v), acc + v)
    out = tl.where(is_max, tl.max(acc, axis=0), tl.sum(acc, axis=0))
    tl.store(OUT + plane.to(tl.int64) * 20 + i, out, mask=ok)


# ------------------------------------------------------------------------------------------------ launchers
def _lanes(lines: int, other_programs: int, device: torch.device) -> int:
    """The V pass's columns per program: 64 (one per thread), 32 when that leaves fewer than two programs per
    multiprocessor (each lane is a sequential chain: small images need every multiprocessor busy). Triton's
    interpreter (CPU tensors) pays per operation, not per lane: 128 there, for fewer programs."""
    if device.type == "cpu":
        return 128
    return 32 if other_programs * triton.cdiv(lines, 64) < 2 * sm_count(device) else 64


class ScaleSumsPlan:
    """forward(src, dst) -> ((N, C, 20) float64, ()) for one (shape, strides, device)."""

    def __init__(self, src_shape, src_stride, dst_shape, dst_stride, device: torch.device) -> None:
        n, c, h, w = dst_shape
        self.src_shape, self.dst_shape = src_shape, dst_shape
        planes = n * c
        self.const = _constants(device)
        src_stride = (0 if src_shape[0] == 1 else src_stride[0], *src_stride[1:])  # one image for N
        rows = planes * h
        # 16 rows x 16 columns per tile, one warp (the interpreter pays per operation: 128 rows, fewer programs)
        block_r, block_w = (128, 16) if device.type == "cpu" else (16, 16)
        self._h = Launcher(_h_blur_kernel, (triton.cdiv(rows, block_r),), num_warps=1, enable_fp_fusion=False)
        self._h_args = (rows, h, w, c, planes * h * w, *src_stride, *dst_stride, BLUR_RADIUS, block_r, block_w)
        strips = triton.cdiv(h, STRIP_INNER)
        block_c = _lanes(w, planes * strips, device)
        col_blocks = triton.cdiv(w, block_c)
        self.parts = strips * col_blocks
        self._v = Launcher(_v_features_kernel, (planes * self.parts,), num_warps=block_c // 32,
                           enable_fp_fusion=False)
        self._v_args = (h, w, c, strips, col_blocks, planes * h * w, *src_stride, *dst_stride, BLUR_RADIUS,
                        STRIP_INNER, block_c)
        self._finish_block = 4 if device.type == "cpu" else 128  # 4: the interpreter tests walk several blocks
        self._finish = Launcher(_finish_kernel, (planes,), num_warps=4, enable_fp_fusion=False)
        self.maps_shape = (4, planes, h, w)
        self.part_shape = (planes * self.parts, SCALE_SUMS)

    def forward(self, src: torch.Tensor, dst: torch.Tensor):
        for t, name, shape in ((src, "src", self.src_shape), (dst, "dst", self.dst_shape)):
            if t.dtype != torch.float32:
                raise TypeError(f"zensim_scale_sums: {name} must be float32 (upstream's arithmetic); got {t.dtype}")
        maps = torch.empty(self.maps_shape, dtype=torch.float32, device=dst.device)
        self._h(src, dst, maps, self.const, *self._h_args)
        part = torch.empty(self.part_shape, dtype=torch.float64, device=dst.device)
        self._v(maps, src, dst, part, self.const, *self._v_args)
        out = torch.empty((*self.dst_shape[:2], SCALE_SUMS), dtype=torch.float64, device=dst.device)
        self._finish(part, out, self.parts, _SUMS, self._finish_block)
        return out, ()


@cached(maxsize=64)
def _plan(src_shape, src_stride, dst_shape, dst_stride, device) -> ScaleSumsPlan:
    return ScaleSumsPlan(src_shape, src_stride, dst_shape, dst_stride, device)


@zensim_scale_sums.triton_plan
def zensim_scale_sums_plan(tensors, scalars) -> ScaleSumsPlan:
    src, dst = tensors
    if dst.dim() != 4 or src.dim() != 4:
        raise ValueError(f"zensim_scale_sums: src and dst must be (N, C, h, w); got {tuple(src.shape)} and "
                         f"{tuple(dst.shape)}")
    if src.shape[1:] != dst.shape[1:] or src.shape[0] not in (1, dst.shape[0]):
        raise ValueError(f"zensim_scale_sums: src {tuple(src.shape)} and dst {tuple(dst.shape)} must have the same "
                         "size (src may hold one image)")
    if dst.numel() == 0:
        raise ValueError(f"zensim_scale_sums: empty planes {tuple(dst.shape)}")
    return _plan(tuple(src.shape), tuple(src.stride()), tuple(dst.shape), tuple(dst.stride()), dst.device)
