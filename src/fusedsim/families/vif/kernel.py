"""libvmaf's integer VIF on the GPU (Triton), bit-identical to the twin (:mod:`fusedsim.families.vif.twin`).

**One launch per scale** for a whole frame batch: program ``(strip, band, frame)`` owns the output columns
``[strip*OW, strip*OW + OW)`` (``OW = CW - 2*half``) of rows ``[band*R, band*R + R)`` and walks them ``RB`` rows at
a time. Per step:

1. **vertical pass** over ``CW`` columns (the owned ones plus ``half`` mirrored-in columns each side), reading the
   ``K`` mirrored input rows once for the five quantities (x, y, x*x, y*y, x*y) and, on the same loads, for the next
   scale's filter; exact integers: the means' and the next scale's sums in uint32 (the taps sum to 2**16 and the
   samples have at most 16 bits, so no sum reaches 2**32), the squares' in int32 at 8-bit scale 0 (below 2**32
   too) and int64 elsewhere;
2. the seven vertical rows (uint32 bits) go to a per-program scratch slot, a ``tl.debug_barrier()`` makes them
   visible to the whole program, and the **horizontal pass** reads them at the ``K`` column offsets (L1/L2 hits),
   in uint32 for the means and the next scale (the same bound) and int64 for the squares (48 bits);
   two slots alternate, so one barrier per step also keeps the next step from overwriting a slot being read;
3. **per-pixel statistics** as in the twin (uint64 products, int32 wraps, IEEE double with
   ``enable_fp_fusion=False``, the log2 table gathered with ``tl.load``) into int64 accumulators, summed per program
   and added into the ``(N, 4, 4)`` accumulators with integer atomics (exact, so their order does not matter);
4. on even rows and columns, the **next scale's** 16-bit samples, written as uint16 bits (int16 storage).

The float ``num``/``den`` of each scale come from the twin's conversion of the accumulators (tensor divisors: true
IEEE divisions on the GPU).

**Bytes per 1080p 8-bit frame** (DRAM, both images): scale 0 reads 2 x 2.07 MB (+7% for the strips' halo
columns) and writes the 2 x 1.04 MB of scale 1; scales 1-3 read their 16-bit images (2.2 + 0.55 + 0.14 MB) and
write the next ones (0.52 + 0.13 MB); a program's scratch (2 slots x 7 planes x RB x CW x 4 B, 14 KB) is rewritten
in place, so it lives in L2 and is written back at most once (~2.3 MB for the ~160 programs of a frame). About
12 MB a frame, ~4 us at 3 TB/s: DRAM is not the limit. The work is on chip: per scale-0 pixel 34 input loads
(L1 hits but the first), 7 scratch stores, 103 scratch loads and 3 table gathers, ~200 integer multiply-adds and
one double division. The block sizes are launcher arguments, for tuning.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedsim.core.backend import triton_interpreting
from fusedsim.core.kernel_args import sm_count
from fusedsim.core.launch import device_constants, on_tensors_device, register_cap
from fusedsim.core.state import cache_dict
from fusedsim.families.vif.ops import integer_vif
from fusedsim.families.vif.twin import (
    EPS,
    FILTERS,
    N_SCALES,
    log2_table,
    num_den_from_accumulators,
)

__all__ = ["integer_vif_accumulators_fwd", "integer_vif_fwd", "scale_constexprs"]

#: Vertical rows in the scratch: mu1, mu2, xx, yy, xy and the next scale's x, y.
_PLANES = tl.constexpr(7)
_MAX_TAPS = 17
#: Registers per thread: four programs of 4 warps per multiprocessor. An H200 sweep (Triton 3.6, batch 16 at
#: 1080p, 8 at 4K, all bit-identical): 166 us per 1080p frame against 173 uncapped (168 registers), 621 against
#: 664 at 4K; a cap of 96 spilled (347 us).
_MAX_REGISTERS = 128
#: Elements before and after the scratch: the halo columns' unmasked taps reach ``_MAX_TAPS // 2`` past a row.
_SCRATCH_PAD = 16


@triton.jit
def _reflect(i, n):
    """One mirror (reflect-101) into ``[0, n)``; positions no output reads are clamped."""
    i = tl.where(i < 0, -i, i)
    i = tl.where(i > n - 1, 2 * n - 2 - i, i)
    return tl.minimum(tl.maximum(i, 0), n - 1)


@triton.jit
def _load_sample(ptr, DT: tl.constexpr, MASK16: tl.constexpr):
    v = tl.load(ptr).to(DT)
    if MASK16:  # uint16 samples read through int16
        v = v & 0xFFFF
    return v


@triton.jit
def _round_shift(v, SHIFT: tl.constexpr):
    if SHIFT > 0:
        v = (v + (1 << (SHIFT - 1))) >> SHIFT
    return v


@triton.jit
def _mul_round32(a, b):
    """``(a*b + 2**31) >> 32`` for ``0 <= a, b < 2**32``: libvmaf's uint64 product."""
    p = a.to(tl.uint64) * b.to(tl.uint64) + (1 << 31)
    return (p >> 32).to(tl.int64)


@triton.jit
def _wrap32(v):
    """The int32 of the low 32 bits (libvmaf's ``(int32_t)`` of a uint32 difference), as int64."""
    return v.to(tl.int32).to(tl.int64)


@triton.jit
def _log2_fixed(v, table_ptr):
    """libvmaf's ``log2_32``/``log2_64`` of ``2**17 <= v < 2**53``: ``T[v >> k] + 2048*k``, ``k = bit_length - 16``
    (the bit length read off the exponent of the exact double)."""
    k = (v.to(tl.float64).to(tl.int64, bitcast=True) >> 52) - 1023 - 15
    return tl.load(table_ptr + (v >> k)).to(tl.int64) + 2048 * k


@triton.jit
def _hsum(p, OFF: tl.constexpr, WIDE: tl.constexpr):
    """One horizontal tap: the scratch row's uint32 ``OFF`` columns from each lane's, as int64 when ``WIDE`` (the
    squares' sums need 48 bits) or uint32 (the means' and the next scale's: below 2**32). Unmasked: an owned column
    reads inside its row; the halo columns read a neighbouring row (or the buffer's padding) and are never used."""
    v = tl.load(p + OFF).to(tl.uint32, bitcast=True)
    if WIDE:
        v = v.to(tl.int64)
    return v


@triton.jit(do_not_specialize=["band_rows", "n_strips", "n_bands"])  # one variant for every band height
def _vif_scale_kernel(
    x_ptr, y_ptr, nx_ptr, ny_ptr, acc_ptr, table_ptr, taps_ptr, consts_ptr, scratch_ptr,
    h, w, s_xn, s_xh, s_xw, s_yn, s_yh, s_yw, band_rows, n_strips, n_bands,
    SCALE: tl.constexpr, K: tl.constexpr, SUB_K: tl.constexpr,
    SHIFT_MU: tl.constexpr, SHIFT_SQ: tl.constexpr, SUB_SHIFT: tl.constexpr,
    DT: tl.constexpr, MASK16: tl.constexpr, RB: tl.constexpr, CW: tl.constexpr,
):
    HALF: tl.constexpr = K // 2
    SUB_HALF: tl.constexpr = SUB_K // 2
    OW: tl.constexpr = CW - 2 * HALF
    PLANE: tl.constexpr = RB * CW
    strip = tl.program_id(0)
    band = tl.program_id(1)
    f = tl.program_id(2).to(tl.int64)
    pid = (f * n_bands + band) * n_strips + strip

    u = tl.arange(0, CW)[None, :]  # [1, CW] computed column within the strip
    col = strip * OW - HALF + u  # its frame column
    src_col = _reflect(col, w).to(tl.int64)
    col_ok = (u >= HALF) & (u < CW - HALF) & (col < w)  # owned by this strip
    x_cols = x_ptr + f * s_xn + src_col * s_xw
    y_cols = y_ptr + f * s_yn + src_col * s_yw
    lane = tl.arange(0, RB)[:, None]  # [RB, 1]
    scratch = scratch_ptr + pid * (2 * _PLANES * PLANE) + lane * CW + u
    eps = tl.load(consts_ptr)
    gain_limit = tl.load(consts_ptr + 1)
    h2 = h // 2
    w2 = w // 2

    acc_num = tl.zeros([RB, CW], tl.int64)
    acc_den = tl.zeros([RB, CW], tl.int64)
    acc_nonlog = tl.zeros([RB, CW], tl.int64)
    acc_cnt = tl.zeros([RB, CW], tl.int32)
    row0 = band * band_rows
    row_end = tl.minimum(row0 + band_rows, h)
    for step in range(0, tl.cdiv(row_end - row0, RB)):
        rows = row0 + step * RB + lane
        row_ok = rows < row_end
        # 1. vertical pass (and the next scale's, on the same loads)
        v1 = tl.zeros([RB, CW], tl.uint32)
        v2 = tl.zeros([RB, CW], tl.uint32)
        vxx = tl.zeros([RB, CW], DT)
        vyy = tl.zeros([RB, CW], DT)
        vxy = tl.zeros([RB, CW], DT)
        sx = tl.zeros([RB, CW], tl.uint32)
        sy = tl.zeros([RB, CW], tl.uint32)
        for k in tl.static_range(K):
            r = _reflect(rows - HALF + k, h).to(tl.int64)
            fk = tl.load(taps_ptr + SCALE * 17 + k).to(DT)
            xv = _load_sample(x_cols + r * s_xh, DT, MASK16)
            yv = _load_sample(y_cols + r * s_yh, DT, MASK16)
            fx = fk * xv
            fy = fk * yv
            v1 += fx.to(tl.uint32)  # low 32 bits: the means' sums stay below 2**32 (taps sum to 2**16)
            v2 += fy.to(tl.uint32)
            vxx += fx * xv  # int32 only at 8-bit scale 0: wraps mod 2**32 below 2**32 (its true value)
            vyy += fy * yv
            vxy += fx * yv
            if SUB_K > 0:
                if k >= HALF - SUB_HALF:
                    if k <= HALF + SUB_HALF:
                        gk = tl.load(taps_ptr + (SCALE + 1) * 17 + (k - HALF + SUB_HALF)).to(DT)
                        sx += (gk * xv).to(tl.uint32)
                        sy += (gk * yv).to(tl.uint32)
        # 2. to the scratch slot of this step; the barrier publishes it to the program
        slot = scratch + (step % 2) * (_PLANES * PLANE)
        tl.store(slot, _round_shift(v1, SHIFT_MU).to(tl.int32))
        tl.store(slot + PLANE, _round_shift(v2, SHIFT_MU).to(tl.int32))
        tl.store(slot + 2 * PLANE, _round_shift(vxx, SHIFT_SQ).to(tl.int32))
        tl.store(slot + 3 * PLANE, _round_shift(vyy, SHIFT_SQ).to(tl.int32))
        tl.store(slot + 4 * PLANE, _round_shift(vxy, SHIFT_SQ).to(tl.int32))
        if SUB_K > 0:
            tl.store(slot + 5 * PLANE, _round_shift(sx, SUB_SHIFT).to(tl.int32))
            tl.store(slot + 6 * PLANE, _round_shift(sy, SUB_SHIFT).to(tl.int32))
        tl.debug_barrier()
        # 3. horizontal pass and statistics
        mu1 = tl.zeros([RB, CW], tl.uint32)
        mu2 = tl.zeros([RB, CW], tl.uint32)
        xx = tl.zeros([RB, CW], tl.int64)
        yy = tl.zeros([RB, CW], tl.int64)
        xy = tl.zeros([RB, CW], tl.int64)
        for k in tl.static_range(K):
            fk = tl.load(taps_ptr + SCALE * 17 + k)
            mu1 += fk.to(tl.uint32) * _hsum(slot, k - HALF, False)
            mu2 += fk.to(tl.uint32) * _hsum(slot + PLANE, k - HALF, False)
            fk = fk.to(tl.int64)
            xx += fk * _hsum(slot + 2 * PLANE, k - HALF, True)
            yy += fk * _hsum(slot + 3 * PLANE, k - HALF, True)
            xy += fk * _hsum(slot + 4 * PLANE, k - HALF, True)
        s1 = _wrap32(((xx + 32768) >> 16) - _mul_round32(mu1, mu1))
        s2 = tl.maximum(_wrap32(((yy + 32768) >> 16) - _mul_round32(mu2, mu2)), 0)
        s12 = _wrap32(((xy + 32768) >> 16) - _mul_round32(mu1, mu2))
        valid = row_ok & col_ok
        big = valid & (s1 >= 131072)
        acc_den += tl.where(big, _log2_fixed(tl.where(big, s1 + 131072, 131072), table_ptr) - 2048 * 17, 0)
        gain = big & (s12 > 0) & (s2 > 0)
        s1d = tl.where(gain, s1, 1).to(tl.float64)
        s12d = tl.where(gain, s12, 1).to(tl.float64)
        g = s12d / (s1d + eps)
        sv = tl.maximum((tl.where(gain, s2, 1).to(tl.float64) - g * s12d).to(tl.int64), 0)  # trunc toward 0
        g = tl.minimum(g, gain_limit)  # after sv, as libvmaf
        n1 = sv + 131072
        n2 = ((g * g) * s1d).to(tl.int64) + n1
        acc_num += tl.where(gain, _log2_fixed(n2, table_ptr) - _log2_fixed(n1, table_ptr), 0)
        small = valid & (s1 < 131072)
        acc_nonlog += tl.where(small, s2, 0)
        acc_cnt += small.to(tl.int32)
        # 4. the next scale: even rows and columns through its filter, uint16 bits
        if SUB_K > 0:
            a = tl.zeros([RB, CW], tl.uint32)
            b = tl.zeros([RB, CW], tl.uint32)
            for k in tl.static_range(SUB_K):
                gk = tl.load(taps_ptr + (SCALE + 1) * 17 + k).to(tl.uint32)
                a += gk * _hsum(slot + 5 * PLANE, k - SUB_HALF, False)
                b += gk * _hsum(slot + 6 * PLANE, k - SUB_HALF, False)
            keep = valid & (rows % 2 == 0) & (col % 2 == 0) & (rows // 2 < h2) & (col // 2 < w2)
            dst = (f * h2 + rows // 2) * w2 + col // 2
            tl.store(nx_ptr + dst, (((a + 32768) >> 16) & 0xFFFF).to(tl.int16), mask=keep)
            tl.store(ny_ptr + dst, (((b + 32768) >> 16) & 0xFFFF).to(tl.int16), mask=keep)

    out = acc_ptr + f * 16 + SCALE * 4  # (N, 4 scales, 4 accumulators)
    tl.atomic_add(out, tl.sum(acc_num))
    tl.atomic_add(out + 1, tl.sum(acc_den))
    tl.atomic_add(out + 2, tl.sum(acc_nonlog))
    tl.atomic_add(out + 3, tl.sum(acc_cnt.to(tl.int64)))



def _kernel_input(x: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """A view the kernel can load: uint16 is read through int16 and masked back to 16 bits."""
    if x.dtype == torch.uint16:
        return x.view(torch.int16), True
    if x.dtype in (torch.uint8, torch.int16, torch.int32, torch.int64):
        return x, False
    raise TypeError(f"integer_vif kernel needs uint8/int16/uint16/int32/int64 samples; got {x.dtype}")


_DEVICE_TABLES: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = cache_dict()


def _device_tables(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The log2 table (int32, 65536) and the filters (int32, 4 x 17, zero-padded) on ``device``."""
    if device not in _DEVICE_TABLES:
        taps = torch.zeros(N_SCALES, _MAX_TAPS, dtype=torch.int32)
        for s, f in enumerate(FILTERS):
            taps[s, : len(f)] = torch.tensor(f, dtype=torch.int32)
        _DEVICE_TABLES[device] = (log2_table().to(torch.int32).to(device), taps.to(device))
    return _DEVICE_TABLES[device]


def _block_sizes(h: int, w: int, half: int) -> tuple[int, int, int, int]:
    """``(RB, CW, band_rows, num_warps)`` for one scale of ``h x w``.

    GPU: 2 rows by 128 computed columns per step (112 owned at scale 0), bands of 128 rows (fewer where a launch
    would have few programs: :func:`_band_rows`): 162 programs per 1080p frame at scale 0, a 14 KB scratch each.
    Chosen by sweeps on an H200 (batch 16 at 1080p, 8 at 4K, all variants bit-identical): 244 us per 1080p frame
    and 825 at 4K against 271 and 975 with 256 columns (13 variants); after the unmasked taps, 173 us against 187
    (256 columns), 206 (64 columns), 210 (8 warps) and 189 (bands of 128 at every scale); 4 or 8 rows per step
    were 2.5-4x slower (the int64 statistics spill).
    The interpreter runs one numpy operation per block operation, so there one program covers a whole frame.
    """
    if triton_interpreting():
        return triton.next_power_of_2(h), triton.next_power_of_2(w + 2 * half), h, 4
    return 2, 128, 128, 4


def _band_rows(rows: int, columns_of_programs: int, h: int, sms: int) -> int:
    """Rows per program, halved from ``rows`` (down to 8) until the launch has ~16 programs per multiprocessor.

    A program walks its band ``RB`` rows per step, each step waiting on a barrier and on its loads, so a launch of
    few programs (the small scales: 64 programs for scale 3 of 16 1080p frames in bands of 128 rows) takes as long
    as one program's many steps. The vertical halo is read per step in any case, so shorter bands cost nothing
    but more accumulator atomics (4 per program)."""
    while rows > 8 and sms and columns_of_programs * triton.cdiv(h, rows) < 16 * sms:
        rows //= 2
    return rows


def scale_constexprs(scale: int, bit_depth: int) -> dict:
    """The compile-time constants of scale ``scale``'s launch: its filter and the next one's sizes, the shifts,
    the dtype of the samples' products and the squares' vertical sums (int32 at 8-bit scale 0, where they fit 32
    bits as unsigned; int64 elsewhere; the means' sums are uint32 at every scale)."""
    last = scale == N_SCALES - 1
    return dict(SCALE=scale, K=len(FILTERS[scale]), SUB_K=0 if last else len(FILTERS[scale + 1]),
                SHIFT_MU=bit_depth if scale == 0 else 16, SHIFT_SQ=2 * (bit_depth - 8) if scale == 0 else 16,
                SUB_SHIFT=bit_depth if scale == 0 else 16, DT=tl.int32 if scale == 0 and bit_depth == 8 else tl.int64)


@on_tensors_device
def integer_vif_accumulators_fwd(ref: torch.Tensor, dist: torch.Tensor, bit_depth: int, gain_limit: float, *,
                                 rows: int | None = None, block_w: int | None = None,
                                 band_rows: int | None = None, num_warps: int | None = None,
                                 maxnreg: int | None = None) -> torch.Tensor:
    """The accumulators of :func:`~fusedsim.families.vif.twin.integer_vif_accumulators_ref` for integer frames
    ``(N, H, W)`` on their device: ``(N, 4, 4)`` int64. Block sizes default to :func:`_block_sizes`."""
    n, h, w = ref.shape
    device = ref.device
    acc = torch.zeros(n, N_SCALES, 4, dtype=torch.int64, device=device)
    table, taps = _device_tables(device)
    consts = device_constants((EPS, float(gain_limit)), torch.float64, device)
    if ref.dtype != dist.dtype:  # one compiled variant per input dtype
        ref, dist = ref.to(torch.int32), dist.to(torch.int32)
    x, mask16 = _kernel_input(ref)
    y, _ = _kernel_input(dist)
    for scale in range(N_SCALES):
        k = len(FILTERS[scale])
        half = k // 2
        last = scale == N_SCALES - 1
        rb, cw, br, warps = _block_sizes(h, w, half)
        rb, cw, warps = rows or rb, block_w or cw, num_warps or warps
        cw = max(cw, triton.next_power_of_2(2 * half + 2))
        n_strips = triton.cdiv(w, cw - 2 * half)
        br = band_rows or _band_rows(br, n * n_strips, h, sm_count(device))
        n_bands = triton.cdiv(h, br)
        nx = torch.empty((n, h // 2, w // 2) if not last else (1,), dtype=torch.int16, device=device)
        ny = torch.empty_like(nx)
        scratch = torch.empty(n * n_bands * n_strips * 2 * _PLANES.value * rb * cw + 2 * _SCRATCH_PAD,
                              dtype=torch.int32, device=device)[_SCRATCH_PAD:]
        _vif_scale_kernel[(n_strips, n_bands, n)](
            x, y, nx, ny, acc, table, taps, consts, scratch,
            h, w, x.stride(0), x.stride(1), x.stride(2), y.stride(0), y.stride(1), y.stride(2), br, n_strips, n_bands,
            **scale_constexprs(scale, bit_depth), MASK16=mask16, RB=rb, CW=cw, num_warps=warps,
            **register_cap(device, maxnreg or _MAX_REGISTERS),
            enable_fp_fusion=False,
            num_stages=1,  # no software pipelining: a prefetched scratch load would cross the barrier
        )
        x, y, mask16 = nx, ny, True
        h, w = h // 2, w // 2
    return acc


@integer_vif.triton_launcher
def integer_vif_fwd(ref: torch.Tensor, dist: torch.Tensor, bit_depth: int, gain_limit: float) -> torch.Tensor:
    """libvmaf's integer VIF ``num``/``den`` per scale of integer frames ``(N, H, W)`` on their device: ``(N, 8)``
    float64, the twin's bits (inputs checked by the public API)."""
    return num_den_from_accumulators(integer_vif_accumulators_fwd(ref, dist, bit_depth, gain_limit))
