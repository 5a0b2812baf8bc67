"""libvmaf integer motion on the GPU: the SAD of the blurred difference of frame pairs, bit-identical to the twin.

One launch covers a batch of pairs. A program takes ``ROWS`` output rows by ``BLOCK_W`` columns of a pair and walks
its input rows once (plus 2 halo rows each side), keeping the differences of the last 5 rows at the 5 mirrored
columns of the horizontal taps in registers (a rolling window). Per output row it forms the 5 vertical sums, rounds
and shifts them, sums them horizontally, rounds and shifts again, and accumulates ``|v|``. Everything is exact
integer arithmetic: int32 where it cannot overflow (differences and vertical sums up to 12 bits:
``65536 * 4095 < 2**31``), int64 otherwise (vertical sums at 16 bits, every horizontal sum: up to
``65536 * 65535``); ``>>`` on signed integers is an arithmetic shift (floor), as in libvmaf. Each program adds its
partial SAD into its frame's int64 slot with one atomic add (integers: any order gives the same sum), and the score
``sad / 256 / (W*H)`` is one IEEE division per frame.

Memory traffic per 1920x1080 pair: both frames are read once, plus 4 halo rows per 64-row band (+6 %), about
4.4 MB at 8 bit (uint8) and 8.8 MB above (16-bit samples); 8 bytes out. A stream reads each frame twice (as ``cur``,
then as ``prev``). At ~3 TB/s that is ~1.5 us (8 bit) / ~3 us per frame of bandwidth; the integer work is ~70
operations per pixel (5 vertical filters of the 5 horizontal taps, one 64-bit horizontal filter).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedsim.core.backend import triton_interpreting
from fusedsim.core.launch import on_tensors_device
from fusedsim.families.motion.ops import integer_motion_sad
from fusedsim.families.motion.twin import sad_to_score

__all__ = ["integer_motion_sad_fwd", "motion_sad_fwd"]


@triton.jit
def _mirror(x, n):
    """libvmaf's reflect-101 index for ``x`` in ``[-(n-1), 2n-2]``, clamped into ``[0, n)`` outside (lanes and
    rows that are never used)."""
    a = tl.abs(x)
    return tl.minimum(tl.maximum(tl.minimum(a, 2 * n - 2 - a), 0), n - 1)


@triton.jit
def _diff(prow, crow, poff, coff, m, DT: tl.constexpr, MASK16: tl.constexpr):
    p = tl.load(prow + poff, mask=m, other=0).to(DT)
    c = tl.load(crow + coff, mask=m, other=0).to(DT)
    if MASK16:  # uint16 samples read through int16
        p = p & 0xFFFF
        c = c & 0xFFFF
    return p - c


@triton.jit
def _blur5(a, b, c, d, e):
    """``sum f_k x_k`` with the symmetric taps [3571, 16004, 26386, 16004, 3571] (in the operands' dtype)."""
    return 3571 * (a + e) + 16004 * (b + d) + 26386 * c


@triton.jit
def _vertical(a, b, c, d, e, SHIFT: tl.constexpr):
    return (_blur5(a, b, c, d, e) + (1 << (SHIFT - 1))) >> SHIFT


@triton.jit
def _zeros5(BAND: tl.constexpr, BLOCK_W: tl.constexpr, DT: tl.constexpr):
    # distinct tensors: Triton tells loop-carried values apart by identity
    return (tl.zeros([BAND, BLOCK_W], DT), tl.zeros([BAND, BLOCK_W], DT), tl.zeros([BAND, BLOCK_W], DT),
            tl.zeros([BAND, BLOCK_W], DT), tl.zeros([BAND, BLOCK_W], DT))


@triton.jit
def _motion_sad_kernel(prev_ptr, cur_ptr, out_ptr, N, H, W, NBANDS,
                       s_pn, s_ph, s_pw, s_cn, s_ch, s_cw,
                       BAND: tl.constexpr, BLOCK_W: tl.constexpr, ROWS: tl.constexpr, SHIFT: tl.constexpr,
                       DT: tl.constexpr, MASK16: tl.constexpr):
    """Partial SADs of ``BAND`` bands (each ``ROWS`` rows of one pair) by ``BLOCK_W`` columns, added into
    ``out[frame]``. Lane ``b`` of the band axis is band ``b % NBANDS`` of pair ``b // NBANDS``; a GPU program takes one
    band, the interpreter many (one numpy operation then covers them all)."""
    pid_b = tl.program_id(0)  # bands on the first grid axis: no 65535 limit (4K batches)
    pid_w = tl.program_id(1)
    band = pid_b * BAND + tl.arange(0, BAND)  # [BAND]
    band_ok = band < N * NBANDS
    f = tl.where(band_ok, band // NBANDS, 0).to(tl.int64)
    y0 = (band % NBANDS) * ROWS
    cols = pid_w * BLOCK_W + tl.arange(0, BLOCK_W)[None, :]  # [1, BLOCK_W]
    col_ok = cols < W
    # mirrored source column of each horizontal tap, as element offsets in both frames
    m0 = _mirror(cols - 2, W)
    m1 = _mirror(cols - 1, W)
    m2 = tl.where(col_ok, cols, 0)
    m3 = _mirror(cols + 1, W)
    m4 = _mirror(cols + 2, W)
    p0, p1, p2, p3, p4 = m0 * s_pw, m1 * s_pw, m2 * s_pw, m3 * s_pw, m4 * s_pw
    c0, c1, c2, c3, c4 = m0 * s_cw, m1 * s_cw, m2 * s_cw, m3 * s_cw, m4 * s_cw
    prev_f = prev_ptr + (f * s_pn)[:, None]  # [BAND, 1]
    cur_f = cur_ptr + (f * s_cn)[:, None]
    ok = band_ok[:, None] & col_ok

    # rolling window: t<k>_<j> is the difference at tap column k, j-th of the last 5 input rows (oldest first)
    t0_0, t0_1, t0_2, t0_3, t0_4 = _zeros5(BAND, BLOCK_W, DT)
    t1_0, t1_1, t1_2, t1_3, t1_4 = _zeros5(BAND, BLOCK_W, DT)
    t2_0, t2_1, t2_2, t2_3, t2_4 = _zeros5(BAND, BLOCK_W, DT)
    t3_0, t3_1, t3_2, t3_3, t3_4 = _zeros5(BAND, BLOCK_W, DT)
    t4_0, t4_1, t4_2, t4_3, t4_4 = _zeros5(BAND, BLOCK_W, DT)
    acc = tl.zeros([BAND, BLOCK_W], tl.int32)  # <= 65535 * ROWS per lane
    for i in range(0, ROWS + 4):
        r = _mirror(y0 - 2 + i, H).to(tl.int64)[:, None]  # [BAND, 1]
        prow = prev_f + r * s_ph
        crow = cur_f + r * s_ch
        t0_0 = t0_1; t0_1 = t0_2; t0_2 = t0_3; t0_3 = t0_4; t0_4 = _diff(prow, crow, p0, c0, ok, DT, MASK16)  # noqa: E702,E501
        t1_0 = t1_1; t1_1 = t1_2; t1_2 = t1_3; t1_3 = t1_4; t1_4 = _diff(prow, crow, p1, c1, ok, DT, MASK16)  # noqa: E702,E501
        t2_0 = t2_1; t2_1 = t2_2; t2_2 = t2_3; t2_3 = t2_4; t2_4 = _diff(prow, crow, p2, c2, ok, DT, MASK16)  # noqa: E702,E501
        t3_0 = t3_1; t3_1 = t3_2; t3_2 = t3_3; t3_3 = t3_4; t3_4 = _diff(prow, crow, p3, c3, ok, DT, MASK16)  # noqa: E702,E501
        t4_0 = t4_1; t4_1 = t4_2; t4_2 = t4_3; t4_3 = t4_4; t4_4 = _diff(prow, crow, p4, c4, ok, DT, MASK16)  # noqa: E702,E501
        if i >= 4:
            y_0 = _vertical(t0_0, t0_1, t0_2, t0_3, t0_4, SHIFT).to(tl.int64)
            y_1 = _vertical(t1_0, t1_1, t1_2, t1_3, t1_4, SHIFT).to(tl.int64)
            y_2 = _vertical(t2_0, t2_1, t2_2, t2_3, t2_4, SHIFT).to(tl.int64)
            y_3 = _vertical(t3_0, t3_1, t3_2, t3_3, t3_4, SHIFT).to(tl.int64)
            y_4 = _vertical(t4_0, t4_1, t4_2, t4_3, t4_4, SHIFT).to(tl.int64)
            v = (_blur5(y_0, y_1, y_2, y_3, y_4) + 32768) >> 16
            keep = ok & ((y0 + i - 4) < H)[:, None]
            acc += tl.where(keep, tl.abs(v), 0).to(tl.int32)
    tl.atomic_add(out_ptr + f, tl.sum(acc.to(tl.int64), axis=1), mask=band_ok)


def _kernel_input(x: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """A view the kernel can load: uint16 is read through int16 and masked back to 16 bits."""
    if x.dtype == torch.uint16:
        return x.view(torch.int16), True
    if x.dtype in (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64):
        return x, False
    raise TypeError(f"integer_motion_sad kernel needs integer samples; got {x.dtype}")


def _block_sizes(n: int, height: int, width: int) -> tuple[int, int, int, int]:
    """(BAND, BLOCK_W, ROWS, num_warps). GPU: one band of 64 rows by 256 columns per program (4 halo rows per 64).
    The interpreter runs one numpy operation per block operation, so there a program covers many short bands of
    every pair at once (few, large operations)."""
    if triton_interpreting():
        rows = min(8, height)
        bands = n * triton.cdiv(height, rows)
        return min(256, triton.next_power_of_2(bands)), min(1024, triton.next_power_of_2(max(width, 16))), rows, 4
    return 1, 256, 64, 4


@on_tensors_device
def motion_sad_fwd(prev: torch.Tensor, cur: torch.Tensor, bit_depth: int, *, bands: int | None = None,
                   block_w: int | None = None, rows: int | None = None, num_warps: int | None = None) -> torch.Tensor:
    """The integer SAD of each frame pair ``(N, H, W)`` (any integer dtypes, any strides): ``(N,)`` int64."""
    n, h, w = prev.shape
    if prev.dtype != cur.dtype:  # one load path for both
        prev, cur = prev.to(torch.int32), cur.to(torch.int32)
    p, m16 = _kernel_input(prev)
    c, _ = _kernel_input(cur)
    out = torch.zeros(n, dtype=torch.int64, device=prev.device)
    if n == 0:
        return out
    band, bw, rows_, warps = _block_sizes(n, h, w)
    band, bw, rows_, warps = bands or band, block_w or bw, rows or rows_, num_warps or warps
    nbands = triton.cdiv(h, rows_)
    grid = (triton.cdiv(n * nbands, band), triton.cdiv(w, bw))
    _motion_sad_kernel[grid](
        p, c, out, n, h, w, nbands, p.stride(0), p.stride(1), p.stride(2), c.stride(0), c.stride(1), c.stride(2),
        BAND=band, BLOCK_W=bw, ROWS=rows_, SHIFT=bit_depth, DT=tl.int32 if bit_depth <= 12 else tl.int64,
        MASK16=m16, num_warps=warps,
    )
    return out


@integer_motion_sad.triton_launcher
def integer_motion_sad_fwd(prev: torch.Tensor, cur: torch.Tensor, bit_depth: int) -> torch.Tensor:
    """libvmaf's motion score of each frame pair ``(N, H, W)`` on the tensors' device: ``(N,)`` float64.

    Inputs are assumed checked by the caller (as for the twin)."""
    h, w = prev.shape[-2:]
    return sad_to_score(motion_sad_fwd(prev, cur, bit_depth), h, w)
