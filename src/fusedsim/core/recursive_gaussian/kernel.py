"""libjxl's recursive Gaussian (Charalampidis' truncated-cosine IIR, zero padding) as Triton kernels.

    recursive_gaussian(x, sigma) -> blurred x (..., H, W) float32: horizontal pass, then vertical pass

Twin: :func:`fusedsim.core.recursive_gaussian.twin.recursive_gaussian_ref` (the recursion, its coefficients
and the reference's step structure are documented there). Both passes are sequential along their axis and
parallel across the other. The horizontal kernel runs one program (one warp) per 16 rows and walks the row in
tiles of 16 output columns with the reference's steps (scalar steps for the first columns, 4-wide blocks whose
four outputs come from the two previous ones, scalar steps for the last columns: its float32 rounding, column
for column). Output column n reads input columns n - R - 1 and n + R - 1: per tile both are loaded as
[16 rows, 16 columns] tiles (coalesced along the row; each column is read twice, the second time from cache)
and added elementwise; the tile is split into its 16 columns (``tl.split`` of reshapes: data movement only,
exact, one row per thread afterwards), the steps run on those, and their 16 output columns are joined back into
a tile stored coalesced. (One-hot masked sums, as zensim's horizontal pass, would also be exact, but compile to
warp reductions, ~32 shuffles per column, with each thread doing the arithmetic of 8 rows.) The next tile's
inputs are loaded before the current tile is walked. The vertical kernel gives each thread one column. FMA is explicit
(``tl.fma``) and every other operation rounds (kernels compile with ``enable_fp_fusion=False``).

The horizontal kernel can also form the products SSIMULACRA2 blurs on the fly (``MODE``: 0 the input itself,
1 the maps (x2, x2², x1·x2) of a distorted image against its reference, 2 the maps (x1, x1²) of a reference,
3 all five of a pair: (x2, x2², x1·x2, x1, x1²)),
so the product images are never written. Its helpers (one step, one 4-wide block, one vertical step) are shared
with the fused SSIMULACRA2 comparison kernel (``ops/ssimulacra2.py``). Vertical kernels run four row steps per
loop iteration and load each step's new input row four steps ahead: a column is a sequential chain, so memory
latency is hidden by loads in flight rather than by more threads.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedsim.core.kernel_args import sm_count
from fusedsim.core.launch import Launcher
from fusedsim.core.recursive_gaussian.twin import recursive_gaussian_coefficients
from fusedsim.core.recursive_gaussian.ops import recursive_gaussian
from fusedsim.core.state import cached

LANES = (64, 32)  # columns per program (vertical passes), one per thread: 2 warps, or 1 warp
TILE_R, TILE_W = 16, 16  # horizontal pass: rows per program (one warp), output columns per tile
MODE_PLAIN, MODE_DIST_MAPS, MODE_REF_MAPS, MODE_PAIR_MAPS = 0, 1, 2, 3
MAPS_PER_MODE = {MODE_PLAIN: 1, MODE_DIST_MAPS: 3, MODE_REF_MAPS: 2, MODE_PAIR_MAPS: 5}


@cached(maxsize=16)
def coefficient_tensor(sigma: float, device: torch.device) -> torch.Tensor:
    """Float32 coefficients as the kernels read them: mul_in, mul_prev, mul_prev2 (3 x 4 each), n2, -d1."""
    rg = recursive_gaussian_coefficients(sigma)
    values = [v for table in (rg.mul_in, rg.mul_prev, rg.mul_prev2) for row in table for v in row]
    values += list(rg.n2) + [-d for d in rg.d1]
    return torch.tensor(values, dtype=torch.float32, device=device)


def lanes_per_program(lines: int, other_programs: int, device: torch.device) -> int:
    """64 lines (columns of the vertical passes) per program, or 32 when that leaves fewer than two programs per
    multiprocessor: each line is a sequential chain, so small images need every multiprocessor busy (the
    interpreter: 64)."""
    wide, narrow = LANES
    return narrow if other_programs * triton.cdiv(lines, wide) < 2 * sm_count(device) else wide


def horizontal_bounds(width: int, radius: int) -> tuple[int, int]:
    """End of the scalar head and of the 4-wide blocks (the reference's loop bounds)."""
    head_end = min(-(-(radius + 1) // 4) * 4, width)
    limit = width - radius + 1 - 3
    blocks = max(0, -(-(limit - head_end) // 4))
    return head_end, head_end + 4 * blocks


def horizontal_tiles(width: int, head_end: int, blocks_end: int) -> tuple[int, int]:
    """The tiles of TILE_W output columns that hold only 4-wide blocks: x0 in [fast_start, fast_end) (the tiles
    before and after them mix head, block and tail steps)."""
    fast_start = min(-(-head_end // TILE_W), -(-width // TILE_W)) * TILE_W
    fast_end = max(fast_start, blocks_end // TILE_W * TILE_W)
    return fast_start, fast_end


# ------------------------------------------------------------------------------------------- Triton helpers
@triton.jit
def _filter_coefs(COEF, k: tl.constexpr):
    """Filter k's 4-lane tables: mul_in[0..3], mul_prev[0..3], mul_prev2[0..3]."""
    return (tl.load(COEF + 4 * k), tl.load(COEF + 4 * k + 1), tl.load(COEF + 4 * k + 2), tl.load(COEF + 4 * k + 3),
            tl.load(COEF + 12 + 4 * k), tl.load(COEF + 13 + 4 * k), tl.load(COEF + 14 + 4 * k),
            tl.load(COEF + 15 + 4 * k),
            tl.load(COEF + 24 + 4 * k), tl.load(COEF + 25 + 4 * k), tl.load(COEF + 26 + 4 * k),
            tl.load(COEF + 27 + 4 * k))


@triton.jit
def h_step(s, i0, p0, q0, prev, prev2):
    """One scalar step of one recursion: s·n2, then + mul_prev2·y[-2], then + mul_prev·y[-1] (two FMAs)."""
    o = s * i0
    o = tl.fma(q0, prev2, o)
    return tl.fma(p0, prev, o)


@triton.jit
def h_block(s0, s1, s2, s3, i0, i1, i2, i3, p0, p1, p2, p3, q0, q1, q2, q3, prev, prev2):
    """Four outputs of one recursion from four inputs and the two previous outputs (the reference's unroll)."""
    o0 = s0 * i0
    o0 = tl.fma(q0, prev2, o0)
    o0 = tl.fma(p0, prev, o0)
    o1 = s0 * i1
    o1 = tl.fma(i0, s1, o1)
    o1 = tl.fma(q1, prev2, o1)
    o1 = tl.fma(p1, prev, o1)
    o2 = s0 * i2
    o2 = tl.fma(i1, s1, o2)
    o2 = tl.fma(i0, s2, o2)
    o2 = tl.fma(q2, prev2, o2)
    o2 = tl.fma(p2, prev, o2)
    o3 = s0 * i3
    o3 = tl.fma(i2, s1, o3)
    o3 = tl.fma(i1, s2, o3)
    o3 = tl.fma(i0, s3, o3)
    o3 = tl.fma(q3, prev2, o3)
    o3 = tl.fma(p3, prev, o3)
    return o0, o1, o2, o3


@triton.jit
def v_step(s, n2, neg_d1, y1, y2):
    """One vertical step: fma(n2, s, fma(-d1, y[-1], -y[-2]))."""
    return tl.fma(n2, s, tl.fma(neg_d1, y1, -y2))


@triton.jit
def _map_value(a_ptrs, b_ptrs, ok, m, MODE: tl.constexpr):
    """Map ``m`` of the mode at the given addresses (``ok``: inside the image, else 0): MODE 0 the input a; 1 a,
    a², a·b (a distorted image against its reference b); 2 a, a² (a reference); 3 a, a², a·b, b, b² (a pair)."""
    if MODE == 3:
        a = tl.load(a_ptrs, mask=ok & (m < 3), other=0.0).to(tl.float32)
        b = tl.load(b_ptrs, mask=ok & (m >= 2), other=0.0).to(tl.float32)
        first = tl.where(m >= 3, b, a)
        value = first * tl.where((m == 0) | (m == 3), 1.0, tl.where(m == 2, b, first))
    else:
        a = tl.load(a_ptrs, mask=ok, other=0.0).to(tl.float32)
        value = a
        if MODE == 1:
            b = tl.load(b_ptrs, mask=ok & (m == 2), other=0.0).to(tl.float32)
            value = a * tl.where(m == 0, 1.0, tl.where(m == 1, a, b))
        if MODE == 2:
            value = a * tl.where(m == 0, 1.0, a)
    return value


@triton.jit
def _h_sample(A, B, a_row, b_row, col, width, rmask, m, MODE: tl.constexpr):
    """Column ``col`` of this program's rows of the map being blurred (0 outside the image)."""
    col_v = a_row * 0 + col  # as a vector: the masks stay tensors (loop indices are plain ints when interpreted)
    ok = rmask & (col_v >= 0) & (col_v < width)
    return _map_value(A + a_row + col, B + b_row + col, ok, m, MODE)


@triton.jit
def _h_tile_samples(A, B, a_rows, b_rows, cols, width, rmask2, m2, MODE: tl.constexpr):
    """A [BLOCK_R, BLOCK_W] tile of the map being blurred at columns ``cols`` ([1, BLOCK_W]; 0 outside the
    image), loaded coalesced along the rows: the same float32 operations as :func:`_h_sample`, element for element."""
    ok = rmask2 & (cols >= 0) & (cols < width)
    return _map_value(A + a_rows + cols, B + b_rows + cols, ok, m2, MODE)


@triton.jit
def _h_tile_sums(A, B, a_rows, b_rows, xv, width, rmask2, m2, RADIUS: tl.constexpr, MODE: tl.constexpr):
    """The reference's s of output columns ``xv`` ([1, BLOCK_W]): samples n - R - 1 and n + R - 1, added."""
    return (_h_tile_samples(A, B, a_rows, b_rows, xv - (RADIUS + 1), width, rmask2, m2, MODE)
            + _h_tile_samples(A, B, a_rows, b_rows, xv + (RADIUS - 1), width, rmask2, m2, MODE))


@triton.jit
def _split2(x, BLOCK_R: tl.constexpr, HALF: tl.constexpr):
    """(even columns, odd columns) of a [BLOCK_R, 2·HALF] tile (data movement only)."""
    return tl.split(tl.reshape(x, [BLOCK_R, HALF, 2]))


@triton.jit
def _join2(even, odd, BLOCK_R: tl.constexpr, HALF: tl.constexpr):
    """The [BLOCK_R, 2·HALF] tile whose even and odd columns are ``even`` and ``odd`` (inverse of _split2)."""
    return tl.reshape(tl.join(even, odd), [BLOCK_R, 2 * HALF])


@triton.jit
def _columns16(S, BLOCK_R: tl.constexpr):
    """The 16 columns of a [BLOCK_R, 16] tile, in order (data movement only: exact)."""
    e, o = _split2(S, BLOCK_R, 8)
    e0, e2 = _split2(e, BLOCK_R, 4)  # columns 4k, 4k + 2
    o1, o3 = _split2(o, BLOCK_R, 4)  # columns 4k + 1, 4k + 3
    c0, c4 = _split2(e0, BLOCK_R, 2)  # columns 8k, 8k + 4
    c2, c6 = _split2(e2, BLOCK_R, 2)
    c1, c5 = _split2(o1, BLOCK_R, 2)
    c3, c7 = _split2(o3, BLOCK_R, 2)
    x0, x8 = tl.split(c0)
    x4, x12 = tl.split(c4)
    x2, x10 = tl.split(c2)
    x6, x14 = tl.split(c6)
    x1, x9 = tl.split(c1)
    x5, x13 = tl.split(c5)
    x3, x11 = tl.split(c3)
    x7, x15 = tl.split(c7)
    return x0, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11, x12, x13, x14, x15


@triton.jit
def _tile16(x0, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11, x12, x13, x14, x15, BLOCK_R: tl.constexpr):
    """The [BLOCK_R, 16] tile of 16 columns (inverse of _columns16)."""
    c0 = tl.join(x0, x8)
    c4 = tl.join(x4, x12)
    c2 = tl.join(x2, x10)
    c6 = tl.join(x6, x14)
    c1 = tl.join(x1, x9)
    c5 = tl.join(x5, x13)
    c3 = tl.join(x3, x11)
    c7 = tl.join(x7, x15)
    e0 = _join2(c0, c4, BLOCK_R, 2)
    e2 = _join2(c2, c6, BLOCK_R, 2)
    o1 = _join2(c1, c5, BLOCK_R, 2)
    o3 = _join2(c3, c7, BLOCK_R, 2)
    return _join2(_join2(e0, e2, BLOCK_R, 4), _join2(o1, o3, BLOCK_R, 4), BLOCK_R, 8)


@triton.jit
def _h_step3(s, i10, p10, q10, i30, p30, q30, i50, p50, q50, y1, y1b, y3, y3b, y5, y5b):
    """One scalar step of the three recursions: (output, then the updated y[-1], y[-2] of each)."""
    o1 = h_step(s, i10, p10, q10, y1, y1b)
    o3 = h_step(s, i30, p30, q30, y3, y3b)
    o5 = h_step(s, i50, p50, q50, y5, y5b)
    return o1 + (o3 + o5), o1, y1, o3, y3, o5, y5


@triton.jit
def _h_block3(s0, s1, s2, s3,
              i10, i11, i12, i13, p10, p11, p12, p13, q10, q11, q12, q13,
              i30, i31, i32, i33, p30, p31, p32, p33, q30, q31, q32, q33,
              i50, i51, i52, i53, p50, p51, p52, p53, q50, q51, q52, q53,
              y1, y1b, y3, y3b, y5, y5b):
    """One 4-wide block of the three recursions: the four outputs, then the updated y[-1], y[-2] of each."""
    a0, a1, a2, a3 = h_block(s0, s1, s2, s3, i10, i11, i12, i13, p10, p11, p12, p13, q10, q11, q12, q13, y1, y1b)
    b0, b1, b2, b3 = h_block(s0, s1, s2, s3, i30, i31, i32, i33, p30, p31, p32, p33, q30, q31, q32, q33, y3, y3b)
    c0, c1, c2, c3 = h_block(s0, s1, s2, s3, i50, i51, i52, i53, p50, p51, p52, p53, q50, q51, q52, q53, y5, y5b)
    return a0 + (b0 + c0), a1 + (b1 + c1), a2 + (b2 + c2), a3 + (b3 + c3), a3, a2, b3, b2, c3, c2


@triton.jit
def _h_scalar4(s0, s1, s2, s3, i10, p10, q10, i30, p30, q30, i50, p50, q50, y1, y1b, y3, y3b, y5, y5b):
    """Four scalar steps of the three recursions: the four outputs, then the updated y[-1], y[-2] of each."""
    o0, y1, y1b, y3, y3b, y5, y5b = _h_step3(s0, i10, p10, q10, i30, p30, q30, i50, p50, q50,
                                             y1, y1b, y3, y3b, y5, y5b)
    o1, y1, y1b, y3, y3b, y5, y5b = _h_step3(s1, i10, p10, q10, i30, p30, q30, i50, p50, q50,
                                             y1, y1b, y3, y3b, y5, y5b)
    o2, y1, y1b, y3, y3b, y5, y5b = _h_step3(s2, i10, p10, q10, i30, p30, q30, i50, p50, q50,
                                             y1, y1b, y3, y3b, y5, y5b)
    o3, y1, y1b, y3, y3b, y5, y5b = _h_step3(s3, i10, p10, q10, i30, p30, q30, i50, p50, q50,
                                             y1, y1b, y3, y3b, y5, y5b)
    return o0, o1, o2, o3, y1, y1b, y3, y3b, y5, y5b


@triton.jit
def _h_group(s0, s1, s2, s3, c, head_end, blocks_end,
             i10, i11, i12, i13, p10, p11, p12, p13, q10, q11, q12, q13,
             i30, i31, i32, i33, p30, p31, p32, p33, q30, q31, q32, q33,
             i50, i51, i52, i53, p50, p51, p52, p53, q50, q51, q52, q53,
             y1, y1b, y3, y3b, y5, y5b, GENERAL: tl.constexpr):
    """Output columns c .. c + 3: a 4-wide block where the reference has one (always, unless GENERAL), else four
    scalar steps (head and tail)."""
    if GENERAL:
        if (c >= head_end) & (c < blocks_end):
            o0, o1, o2, o3, y1, y1b, y3, y3b, y5, y5b = _h_block3(
                s0, s1, s2, s3, i10, i11, i12, i13, p10, p11, p12, p13, q10, q11, q12, q13,
                i30, i31, i32, i33, p30, p31, p32, p33, q30, q31, q32, q33,
                i50, i51, i52, i53, p50, p51, p52, p53, q50, q51, q52, q53,
                y1, y1b, y3, y3b, y5, y5b)
        else:
            o0, o1, o2, o3, y1, y1b, y3, y3b, y5, y5b = _h_scalar4(
                s0, s1, s2, s3, i10, p10, q10, i30, p30, q30, i50, p50, q50, y1, y1b, y3, y3b, y5, y5b)
    else:
        o0, o1, o2, o3, y1, y1b, y3, y3b, y5, y5b = _h_block3(
            s0, s1, s2, s3, i10, i11, i12, i13, p10, p11, p12, p13, q10, q11, q12, q13,
            i30, i31, i32, i33, p30, p31, p32, p33, q30, q31, q32, q33,
            i50, i51, i52, i53, p50, p51, p52, p53, q50, q51, q52, q53,
            y1, y1b, y3, y3b, y5, y5b)
    return o0, o1, o2, o3, y1, y1b, y3, y3b, y5, y5b


@triton.jit
def _h_tile(S, x0, head_end, blocks_end,
            i10, i11, i12, i13, p10, p11, p12, p13, q10, q11, q12, q13,
            i30, i31, i32, i33, p30, p31, p32, p33, q30, q31, q32, q33,
            i50, i51, i52, i53, p50, p51, p52, p53, q50, q51, q52, q53,
            y1, y1b, y3, y3b, y5, y5b, BLOCK_R: tl.constexpr, GENERAL: tl.constexpr):
    """The steps of output columns x0 .. x0 + 15 (four groups of four). ``S`` holds each column's two input
    samples, added (a [BLOCK_R, 16] tile); returns the [BLOCK_R, 16] tile of outputs and the states."""
    s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, s12, s13, s14, s15 = _columns16(S, BLOCK_R)
    o0, o1, o2, o3, y1, y1b, y3, y3b, y5, y5b = _h_group(
        s0, s1, s2, s3, x0, head_end, blocks_end, i10, i11, i12, i13, p10, p11, p12, p13, q10, q11, q12, q13,
        i30, i31, i32, i33, p30, p31, p32, p33, q30, q31, q32, q33,
        i50, i51, i52, i53, p50, p51, p52, p53, q50, q51, q52, q53,
        y1, y1b, y3, y3b, y5, y5b, GENERAL)
    o4, o5, o6, o7, y1, y1b, y3, y3b, y5, y5b = _h_group(
        s4, s5, s6, s7, x0 + 4, head_end, blocks_end, i10, i11, i12, i13, p10, p11, p12, p13, q10, q11, q12, q13,
        i30, i31, i32, i33, p30, p31, p32, p33, q30, q31, q32, q33,
        i50, i51, i52, i53, p50, p51, p52, p53, q50, q51, q52, q53,
        y1, y1b, y3, y3b, y5, y5b, GENERAL)
    o8, o9, o10, o11, y1, y1b, y3, y3b, y5, y5b = _h_group(
        s8, s9, s10, s11, x0 + 8, head_end, blocks_end, i10, i11, i12, i13, p10, p11, p12, p13, q10, q11, q12, q13,
        i30, i31, i32, i33, p30, p31, p32, p33, q30, q31, q32, q33,
        i50, i51, i52, i53, p50, p51, p52, p53, q50, q51, q52, q53,
        y1, y1b, y3, y3b, y5, y5b, GENERAL)
    o12, o13, o14, o15, y1, y1b, y3, y3b, y5, y5b = _h_group(
        s12, s13, s14, s15, x0 + 12, head_end, blocks_end, i10, i11, i12, i13, p10, p11, p12, p13, q10, q11, q12, q13,
        i30, i31, i32, i33, p30, p31, p32, p33, q30, q31, q32, q33,
        i50, i51, i52, i53, p50, p51, p52, p53, q50, q51, q52, q53,
        y1, y1b, y3, y3b, y5, y5b, GENERAL)
    out = _tile16(o0, o1, o2, o3, o4, o5, o6, o7, o8, o9, o10, o11, o12, o13, o14, o15, BLOCK_R)
    return out, y1, y1b, y3, y3b, y5, y5b


@triton.jit
def _h_tile_run(x_start, x_end, S, A, B, a_rows, b_rows, j, width, rmask2, m2, outs, head_end, blocks_end,
                i10, i11, i12, i13, p10, p11, p12, p13, q10, q11, q12, q13,
                i30, i31, i32, i33, p30, p31, p32, p33, q30, q31, q32, q33,
                i50, i51, i52, i53, p50, p51, p52, p53, q50, q51, q52, q53,
                y1, y1b, y3, y3b, y5, y5b, RADIUS: tl.constexpr, MODE: tl.constexpr, BLOCK_R: tl.constexpr,
                BLOCK_W: tl.constexpr, GENERAL: tl.constexpr):
    """Tiles x_start, x_start + BLOCK_W, .. < x_end: walk each (its sums ``S`` loaded one tile ahead), store its
    outputs; returns the next tile's sums and the states. ``GENERAL``: head/block/tail choice per group of 4."""
    for x0 in range(x_start, x_end, BLOCK_W):
        xv = (x0 + j)[None, :]
        S_next = _h_tile_sums(A, B, a_rows, b_rows, xv + BLOCK_W, width, rmask2, m2, RADIUS, MODE)
        out, y1, y1b, y3, y3b, y5, y5b = _h_tile(
            S, x0, head_end, blocks_end,
            i10, i11, i12, i13, p10, p11, p12, p13, q10, q11, q12, q13,
            i30, i31, i32, i33, p30, p31, p32, p33, q30, q31, q32, q33,
            i50, i51, i52, i53, p50, p51, p52, p53, q50, q51, q52, q53,
            y1, y1b, y3, y3b, y5, y5b, BLOCK_R, GENERAL)
        tl.store(outs + xv, out, mask=rmask2 & (xv < width))
        S = S_next
    return S, y1, y1b, y3, y3b, y5, y5b


@triton.jit
def _iir_h_tiles_kernel(A, B, OUT, COEF, rows, width, height, head_end, blocks_end, fast_start, fast_end,
                        map_stride, RADIUS: tl.constexpr, MODE: tl.constexpr, MAPS: tl.constexpr,
                        B_BCAST: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_W: tl.constexpr):
    # one program (one warp) per BLOCK_R rows of one map; the row is walked in tiles of BLOCK_W output columns.
    # Output column n reads input columns n - R - 1 and n + R - 1: per tile both are loaded as [BLOCK_R, BLOCK_W]
    # tiles (coalesced along the row; the second read of each column comes from cache) and added elementwise
    # (the reference's s, exactly); the sequential steps pick each column's s out of the tile in registers.
    tl.static_assert(BLOCK_W == 16)  # _columns16 / _tile16
    # the maps of one block of rows are consecutive programs: they read the same input rows, which the later
    # ones then find in L2 instead of DRAM
    pid = tl.program_id(0) // MAPS
    m = tl.program_id(0) % MAPS
    r = pid * BLOCK_R + tl.arange(0, BLOCK_R)
    rmask = r < rows
    a_row = r.to(tl.int64) * width
    b_row = a_row
    if (MODE == 1) | (MODE == 3):  # the reference image may hold one image for N distorted ones
        plane = r.to(tl.int64) // height
        b_plane = plane % 3 if B_BCAST else plane
        b_row = (b_plane * height + r.to(tl.int64) % height) * width
    out_row = m.to(tl.int64) * map_stride + a_row
    m = (r * 0 + m).to(tl.int32)  # the map index as a vector: it enters load masks
    i10, i11, i12, i13, p10, p11, p12, p13, q10, q11, q12, q13 = _filter_coefs(COEF, 0)
    i30, i31, i32, i33, p30, p31, p32, p33, q30, q31, q32, q33 = _filter_coefs(COEF, 1)
    i50, i51, i52, i53, p50, p51, p52, p53, q50, q51, q52, q53 = _filter_coefs(COEF, 2)
    # one zeros tensor per state: Triton (compiled, not interpreted) drops a loop-carried variable whose new value
    # is another variable's old one when both started as the same tensor (y[-2] <- y[-1] would never update)
    y1, y1b = tl.zeros([BLOCK_R], tl.float32), tl.zeros([BLOCK_R], tl.float32)
    y3, y3b = tl.zeros([BLOCK_R], tl.float32), tl.zeros([BLOCK_R], tl.float32)
    y5, y5b = tl.zeros([BLOCK_R], tl.float32), tl.zeros([BLOCK_R], tl.float32)
    # the head's steps left of the image (columns 1 - R .. -1: outputs not stored), one column at a time
    for n in range(1 - RADIUS, 0):
        s = (_h_sample(A, B, a_row, b_row, n - RADIUS - 1, width, rmask, m, MODE)
             + _h_sample(A, B, a_row, b_row, n + RADIUS - 1, width, rmask, m, MODE))
        _o, y1, y1b, y3, y3b, y5, y5b = _h_step3(s, i10, p10, q10, i30, p30, q30, i50, p50, q50,
                                                 y1, y1b, y3, y3b, y5, y5b)
    j = tl.arange(0, BLOCK_W)
    rmask2 = rmask[:, None]
    a_rows = a_row[:, None]
    b_rows = b_row[:, None]
    m2 = m[:, None]
    outs = OUT + out_row[:, None]
    # tiles [0, fast_start) and [fast_end, width): head, blocks and tail steps (a runtime choice per group of 4);
    # tiles [fast_start, fast_end): blocks only. Each tile's sums are loaded one tile ahead (S: the current tile's,
    # one chain through the three loops) so the loads are in flight while the previous tile is walked.
    S = _h_tile_sums(A, B, a_rows, b_rows, j[None, :], width, rmask2, m2, RADIUS, MODE)
    S, y1, y1b, y3, y3b, y5, y5b = _h_tile_run(
        0, fast_start, S, A, B, a_rows, b_rows, j, width, rmask2, m2, outs, head_end, blocks_end,
        i10, i11, i12, i13, p10, p11, p12, p13, q10, q11, q12, q13,
        i30, i31, i32, i33, p30, p31, p32, p33, q30, q31, q32, q33,
        i50, i51, i52, i53, p50, p51, p52, p53, q50, q51, q52, q53,
        y1, y1b, y3, y3b, y5, y5b, RADIUS, MODE, BLOCK_R, BLOCK_W, True)
    S, y1, y1b, y3, y3b, y5, y5b = _h_tile_run(
        fast_start, fast_end, S, A, B, a_rows, b_rows, j, width, rmask2, m2, outs, head_end, blocks_end,
        i10, i11, i12, i13, p10, p11, p12, p13, q10, q11, q12, q13,
        i30, i31, i32, i33, p30, p31, p32, p33, q30, q31, q32, q33,
        i50, i51, i52, i53, p50, p51, p52, p53, q50, q51, q52, q53,
        y1, y1b, y3, y3b, y5, y5b, RADIUS, MODE, BLOCK_R, BLOCK_W, False)
    S, y1, y1b, y3, y3b, y5, y5b = _h_tile_run(
        fast_end, width, S, A, B, a_rows, b_rows, j, width, rmask2, m2, outs, head_end, blocks_end,
        i10, i11, i12, i13, p10, p11, p12, p13, q10, q11, q12, q13,
        i30, i31, i32, i33, p30, p31, p32, p33, q30, q31, q32, q33,
        i50, i51, i52, i53, p50, p51, p52, p53, q50, q51, q52, q53,
        y1, y1b, y3, y3b, y5, y5b, RADIUS, MODE, BLOCK_R, BLOCK_W, True)


@triton.jit
def v_row(X, base, row, height, width, cols, cmask):
    """Row ``row`` (a vector, like ``cols``) of one plane at this program's columns (0 outside the image)."""
    ok = cmask & (row >= 0) & (row < height)
    return tl.load(X + base + row.to(tl.int64) * width + cols, mask=ok, other=0.0)


@triton.jit
def v_filter3(s, n2_1, n2_3, n2_5, d1_1, d1_3, d1_5, y1, y1b, y3, y3b, y5, y5b):
    """One vertical step of the three recursions: (output, then the updated (y[-1], y[-2]) of each)."""
    o1 = v_step(s, n2_1, d1_1, y1, y1b)
    o3 = v_step(s, n2_3, d1_3, y3, y3b)
    o5 = v_step(s, n2_5, d1_5, y5, y5b)
    return o1 + (o3 + o5), o1, y1, o3, y3, o5, y5


@triton.jit
def _iir_vertical_kernel(X, OUT, COEF, height, width, RADIUS: tl.constexpr, BLOCK_C: tl.constexpr):
    # Each step reads rows n - R - 1 (recently read: cached) and n + R - 1 (new). The new rows are loaded
    # AHEAD = 4 steps early into b0..b3 (the loop body is 4 steps), so 4 loads per thread are in flight.
    pid_c = tl.program_id(0)
    plane = tl.program_id(1)
    cols = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = cols < width
    base = plane.to(tl.int64) * height * width
    n2_1, n2_3, n2_5 = tl.load(COEF + 36), tl.load(COEF + 37), tl.load(COEF + 38)
    d1_1, d1_3, d1_5 = tl.load(COEF + 39), tl.load(COEF + 40), tl.load(COEF + 41)
    # one zeros tensor per state: Triton (compiled, not interpreted) drops a loop-carried variable whose new value
    # is another variable's old one when both started as the same tensor (y[-2] <- y[-1] would never update)
    y1, y1b = tl.zeros([BLOCK_C], tl.float32), tl.zeros([BLOCK_C], tl.float32)
    y3, y3b = tl.zeros([BLOCK_C], tl.float32), tl.zeros([BLOCK_C], tl.float32)
    y5, y5b = tl.zeros([BLOCK_C], tl.float32), tl.zeros([BLOCK_C], tl.float32)
    zero = cols * 0
    b0 = v_row(X, base, zero, height, width, cols, cmask)  # the first steps' bottom rows: 0, 1, 2, 3
    b1 = v_row(X, base, zero + 1, height, width, cols, cmask)
    b2 = v_row(X, base, zero + 2, height, width, cols, cmask)
    b3 = v_row(X, base, zero + 3, height, width, cols, cmask)
    for n0 in range(1 - RADIUS, height, 4):
        n = zero + n0
        s = v_row(X, base, n - RADIUS - 1, height, width, cols, cmask) + b0
        b0 = v_row(X, base, n + 3 + RADIUS, height, width, cols, cmask)
        out, y1, y1b, y3, y3b, y5, y5b = v_filter3(s, n2_1, n2_3, n2_5, d1_1, d1_3, d1_5, y1, y1b, y3, y3b, y5, y5b)
        tl.store(OUT + base + n.to(tl.int64) * width + cols, out, mask=cmask & (n >= 0) & (n < height))
        n = n + 1
        s = v_row(X, base, n - RADIUS - 1, height, width, cols, cmask) + b1
        b1 = v_row(X, base, n + 3 + RADIUS, height, width, cols, cmask)
        out, y1, y1b, y3, y3b, y5, y5b = v_filter3(s, n2_1, n2_3, n2_5, d1_1, d1_3, d1_5, y1, y1b, y3, y3b, y5, y5b)
        tl.store(OUT + base + n.to(tl.int64) * width + cols, out, mask=cmask & (n >= 0) & (n < height))
        n = n + 1
        s = v_row(X, base, n - RADIUS - 1, height, width, cols, cmask) + b2
        b2 = v_row(X, base, n + 3 + RADIUS, height, width, cols, cmask)
        out, y1, y1b, y3, y3b, y5, y5b = v_filter3(s, n2_1, n2_3, n2_5, d1_1, d1_3, d1_5, y1, y1b, y3, y3b, y5, y5b)
        tl.store(OUT + base + n.to(tl.int64) * width + cols, out, mask=cmask & (n >= 0) & (n < height))
        n = n + 1
        s = v_row(X, base, n - RADIUS - 1, height, width, cols, cmask) + b3
        b3 = v_row(X, base, n + 3 + RADIUS, height, width, cols, cmask)
        out, y1, y1b, y3, y3b, y5, y5b = v_filter3(s, n2_1, n2_3, n2_5, d1_1, d1_3, d1_5, y1, y1b, y3, y3b, y5, y5b)
        tl.store(OUT + base + n.to(tl.int64) * width + cols, out, mask=cmask & (n >= 0) & (n < height))


# ------------------------------------------------------------------------------------------------ launchers
def _check_float32(x: torch.Tensor, name: str) -> None:
    if x.dtype != torch.float32:
        raise TypeError(f"{name} must be float32 for the Triton recursive Gaussian (the reference's arithmetic); "
                        f"got {x.dtype} — the reference backend computes float64 exactly")


class HorizontalPlan:
    """Horizontal pass of ``maps`` maps of (P, H, W) planes into a (maps, P, H, W) float32 buffer; ``b_bcast``
    (mode 1): the reference image B holds one image for all N (its planes repeat every 3)."""

    def __init__(self, planes: int, height: int, width: int, mode: int, sigma: float, device: torch.device,
                 b_bcast: bool = False):
        rg = recursive_gaussian_coefficients(sigma)
        self.maps = MAPS_PER_MODE[mode]
        self.shape = (self.maps, planes, height, width)
        self.coef = coefficient_tensor(sigma, device)
        rows = planes * height
        head_end, blocks_end = horizontal_bounds(width, rg.radius)
        fast_start, fast_end = horizontal_tiles(width, head_end, blocks_end)
        self._launch = Launcher(_iir_h_tiles_kernel, (triton.cdiv(rows, TILE_R) * self.maps,),
                                num_warps=1, enable_fp_fusion=False)
        self._tail = (rows, width, height, head_end, blocks_end, fast_start, fast_end)
        self._consts = (rg.radius, mode, self.maps, bool(b_bcast), TILE_R, TILE_W)
        self._map_stride = planes * height * width

    def __call__(self, a: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
        out = torch.empty(self.shape, dtype=torch.float32, device=a.device)
        self._launch(a, a if b is None else b, out, self.coef, *self._tail, self._map_stride, *self._consts)
        return out


class VerticalPlan:
    """Vertical pass of (P, H, W) float32 planes."""

    def __init__(self, planes: int, height: int, width: int, sigma: float, device: torch.device):
        rg = recursive_gaussian_coefficients(sigma)
        self.coef = coefficient_tensor(sigma, device)
        block = lanes_per_program(width, planes, device)
        self._launch = Launcher(_iir_vertical_kernel, (triton.cdiv(width, block), planes),
                                num_warps=block // 32, enable_fp_fusion=False)
        self._tail = (height, width, rg.radius, block)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        self._launch(x, out, self.coef, *self._tail)
        return out


@cached(maxsize=64)
def horizontal_plan(planes: int, height: int, width: int, mode: int, sigma: float, device,
                    b_bcast: bool = False) -> HorizontalPlan:
    return HorizontalPlan(planes, height, width, mode, sigma, device, b_bcast)


@cached(maxsize=64)
def vertical_plan(planes: int, height: int, width: int, sigma: float, device) -> VerticalPlan:
    return VerticalPlan(planes, height, width, sigma, device)


class RecursiveGaussianPlan:
    """``recursive_gaussian(x, sigma)`` for one shape: forward(x) -> (blurred, ())."""

    def __init__(self, shape: tuple[int, ...], sigma: float, device: torch.device) -> None:
        height, width = shape[-2:]
        planes = 1
        for size in shape[:-2]:
            planes *= size
        self.shape = shape
        self._h = horizontal_plan(planes, height, width, MODE_PLAIN, sigma, device)
        self._v = vertical_plan(planes, height, width, sigma, device)

    def forward(self, x: torch.Tensor):
        _check_float32(x, "x")
        return self._v(self._h(x.contiguous())[0]).reshape(self.shape), ()


@cached(maxsize=64)
def _plan(shape, sigma, device) -> RecursiveGaussianPlan:
    return RecursiveGaussianPlan(shape, sigma, device)


@recursive_gaussian.triton_plan
def recursive_gaussian_plan(tensors, scalars) -> RecursiveGaussianPlan:
    (x,) = tensors
    (sigma,) = scalars
    if x.dim() < 2:
        raise ValueError(f"x must have at least 2 dimensions (..., H, W); got shape {tuple(x.shape)}")
    recursive_gaussian_coefficients(float(sigma))  # validates sigma
    return _plan(tuple(x.shape), float(sigma), x.device)
