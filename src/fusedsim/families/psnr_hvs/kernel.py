"""libvmaf's PSNR-HVS in Triton: the twin's bits (:mod:`fusedsim.families.psnr_hvs.twin`).

Two launches per plane: the block kernel writes each block's 64 error terms in libvmaf's order, and
:func:`~.sequential_sum32_kernel.sequential_sum32` adds them in one float32 running sum per frame, bit for bit.
The two final float32 divisions run on the host (numpy, IEEE).

The block kernel gives each 8x8 block one lane (``BLK = 128`` lanes, one per thread) and runs every stage as a
loop over a small body, so that it compiles in about 2 s for sm_90 (the earlier kernel held a block's 64 samples
and 64 coefficients of both images as 256 register variables in straight-line code: ~94 s, 682 kB of PTX). Per
image: the column DCTs, one column per step, write ``z[u][j]`` to a scratch buffer and sum the quadrants (integers);
the row DCTs, one row per step, read ``z[u][.]``, write ``C[u][.]`` in its place and add the masking energy in
libvmaf's order ``k = 8u + v``; the variances are five float32 chains over the samples in row-major order,
reloaded from the plane (a cache hit). Then the error terms, element-wise, as ``[BLK, 8]`` tiles. The scratch is
``[N, 2, 64, NB]`` int32 (k-major: a step's lanes touch consecutive words): per block 512 bytes written twice
and read twice, on top of the 128 sample reads per image (L1/L2 hits after the first) and the 256 bytes of terms.

Exactness: the DCT is int32 lifting (exact), integer sums are exact in any order, and every float32 sum runs as
one chain in C's order; ``enable_fp_fusion=False`` so that no ``a * b + c`` is contracted into an FMA (libvmaf
rounds the product first); ``tl.div_rn`` for float32 divisions (Triton lowers ``/`` on float32 to PTX's approximate
``div.full.f32``); ``sqrt`` in double (PTX has only its correctly rounded form).
"""

from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

from fusedsim.core.backend import triton_interpreting
from fusedsim.core.launch import on_tensors_device
from fusedsim.families.psnr_hvs.ops import psnr_hvs_plane
from fusedsim.families.psnr_hvs.sequential_sum32_kernel import sequential_sum32
from fusedsim.families.psnr_hvs.twin import VAR_SCALE_16, VAR_SCALE_64, block_grid, csf_and_mask

__all__ = ["psnr_hvs_plane_fwd", "psnr_hvs_terms"]

_TABLES: dict[tuple[torch.device, int], tuple[torch.Tensor, torch.Tensor]] = {}


@triton.jit
def _half(a):
    """Daala's ``OD_DCT_RSHIFT(a, 1)``: ``a / 2`` rounded toward zero (``>>`` of int32 is arithmetic)."""
    return (a + (a < 0).to(tl.int32)) >> 1


@triton.jit
def _mul_shift(a, c: tl.constexpr, bits: tl.constexpr):
    return (a * c + (1 << (bits - 1))) >> bits


@triton.jit
def _fdct8(x0, x1, x2, x3, x4, x5, x6, x7):
    """Daala's ``od_bin_fdct8`` (:func:`~.twin.fdct8`), element-wise on 8 int32 tensors; no step overflows int32
    for samples of up to 12 bits."""
    t0, t4, t2, t6, t7, t3, t5, t1 = x0, x1, x2, x3, x4, x5, x6, x7
    t1 = t0 - t1
    t1h = _half(t1)
    t0 = t0 - t1h
    t4 = t4 + t5
    t4h = _half(t4)
    t5 = t5 - t4h
    t3 = t2 - t3
    t2 = t2 - _half(t3)
    t6 = t6 + t7
    t6h = _half(t6)
    t7 = t6h - t7
    t0 = t0 + t6h
    t6 = t0 - t6
    t2 = t4h - t2
    t4 = t2 - t4
    t0 = t0 - _mul_shift(t4, 13573, 15)
    t4 = t4 + _mul_shift(t0, 11585, 14)
    t0 = t0 - _mul_shift(t4, 13573, 15)
    t6 = t6 - _mul_shift(t2, 21895, 15)
    t2 = t2 + _mul_shift(t6, 15137, 14)
    t6 = t6 - _mul_shift(t2, 21895, 15)
    t3 = t3 + _mul_shift(t5, 19195, 15)
    t5 = t5 + _mul_shift(t3, 11585, 14)
    t3 = t3 - _mul_shift(t5, 7489, 13)
    t7 = _half(t5) - t7
    t5 = t5 - t7
    t3 = t1h - t3
    t1 = t1 - t3
    t7 = t7 + _mul_shift(t1, 3227, 15)
    t1 = t1 - _mul_shift(t7, 6393, 15)
    t7 = t7 + _mul_shift(t1, 3227, 15)
    t5 = t5 + _mul_shift(t3, 2485, 13)
    t3 = t3 - _mul_shift(t5, 18205, 15)
    t5 = t5 + _mul_shift(t3, 2485, 13)
    return t0, t1, t2, t3, t4, t5, t6, t7


@triton.jit
def _load(ptrs, live, MASK16: tl.constexpr):
    """Samples as int32; uint16 planes are read through int16 and masked back to 16 bits."""
    v = tl.load(ptrs, mask=live, other=0).to(tl.int32)
    if MASK16:
        v = v & 0xFFFF
    return v


@triton.jit
def _store8(ptr, step, live, x0, x1, x2, x3, x4, x5, x6, x7):
    """``ptr[k * step] = x_k`` per lane."""
    tl.store(ptr, x0, mask=live)
    tl.store(ptr + step, x1, mask=live)
    tl.store(ptr + 2 * step, x2, mask=live)
    tl.store(ptr + 3 * step, x3, mask=live)
    tl.store(ptr + 4 * step, x4, mask=live)
    tl.store(ptr + 5 * step, x5, mask=live)
    tl.store(ptr + 6 * step, x6, mask=live)
    tl.store(ptr + 7 * step, x7, mask=live)


@triton.jit
def _column_pass(ptr, off, s1, s2, live, scratch, NB, MASK16: tl.constexpr):
    """The column DCTs of each lane's block: ``z[u][j]`` (vertical frequency ``u`` of column ``j``) to its
    ``scratch[(8u + j) * NB]``. Returns the block's quadrant sums ``q = (i >= 4) + 2 * (j >= 4)`` (integers: exact)."""
    q0 = tl.zeros_like(off).to(tl.int32)
    q1 = q0
    q2 = q0
    q3 = q0
    for j in range(8):
        col = ptr + off + j * s2
        x0 = _load(col, live, MASK16)
        x1 = _load(col + s1, live, MASK16)
        x2 = _load(col + 2 * s1, live, MASK16)
        x3 = _load(col + 3 * s1, live, MASK16)
        x4 = _load(col + 4 * s1, live, MASK16)
        x5 = _load(col + 5 * s1, live, MASK16)
        x6 = _load(col + 6 * s1, live, MASK16)
        x7 = _load(col + 7 * s1, live, MASK16)
        top = x0 + x1 + x2 + x3
        bottom = x4 + x5 + x6 + x7
        q0 = tl.where(j < 4, q0 + top, q0)
        q1 = tl.where(j < 4, q1 + bottom, q1)
        q2 = tl.where(j < 4, q2, q2 + top)
        q3 = tl.where(j < 4, q3, q3 + bottom)
        z0, z1, z2, z3, z4, z5, z6, z7 = _fdct8(x0, x1, x2, x3, x4, x5, x6, x7)
        _store8(scratch + j * NB, 8 * NB, live, z0, z1, z2, z3, z4, z5, z6, z7)
    return q0, q1, q2, q3


@triton.jit
def _energy_step(energy, c, k, mask_ptr):
    """``energy + float32(C_k^2) * mask_k``; libvmaf skips the DC (``k = 0``)."""
    term = (c * c).to(tl.float32) * tl.load(mask_ptr + k)  # |C| <= 8 * 4095: C^2 fits int32
    return tl.where(k > 0, energy + term, energy)


@triton.jit
def _row_pass(scratch, NB, live, mask_ptr, BLK: tl.constexpr):
    """The row DCTs: ``C[u][v]`` over ``z[u][.]`` in ``scratch[(8u + v) * NB]``. Returns the masking energy
    ``sum_{k > 0} float32(C_k^2) * mask_k``: one float32 chain in libvmaf's order ``k = 8u + v``."""
    energy = tl.zeros([BLK], tl.float32)
    for u in range(8):
        row = scratch + u * 8 * NB
        c0, c1, c2, c3, c4, c5, c6, c7 = _fdct8(
            tl.load(row, mask=live), tl.load(row + NB, mask=live), tl.load(row + 2 * NB, mask=live),
            tl.load(row + 3 * NB, mask=live), tl.load(row + 4 * NB, mask=live), tl.load(row + 5 * NB, mask=live),
            tl.load(row + 6 * NB, mask=live), tl.load(row + 7 * NB, mask=live))
        _store8(row, NB, live, c0, c1, c2, c3, c4, c5, c6, c7)
        energy = _energy_step(energy, c0, u * 8, mask_ptr)
        energy = _energy_step(energy, c1, u * 8 + 1, mask_ptr)
        energy = _energy_step(energy, c2, u * 8 + 2, mask_ptr)
        energy = _energy_step(energy, c3, u * 8 + 3, mask_ptr)
        energy = _energy_step(energy, c4, u * 8 + 4, mask_ptr)
        energy = _energy_step(energy, c5, u * 8 + 5, mask_ptr)
        energy = _energy_step(energy, c6, u * 8 + 6, mask_ptr)
        energy = _energy_step(energy, c7, u * 8 + 7, mask_ptr)
    return energy


@triton.jit
def _variance_ratio(ptr, off, s1, s2, live, q0, q1, q2, q3, var64, var16, MASK16: tl.constexpr,
                    BLK: tl.constexpr):
    """libvmaf's ``gvar``: the quadrants' variances over the block's variance (twin ``_block_mask``). The five
    float32 sums of squares run in C's order, one sample per step (row-major), reloaded from the plane."""
    gmean = tl.div_rn((((q0 + q1) + q2) + q3).to(tl.float32), 64.0)
    mean0 = tl.div_rn(q0.to(tl.float32), 16.0)
    mean1 = tl.div_rn(q1.to(tl.float32), 16.0)
    mean2 = tl.div_rn(q2.to(tl.float32), 16.0)
    mean3 = tl.div_rn(q3.to(tl.float32), 16.0)
    gvar = tl.zeros([BLK], tl.float32)
    var0 = tl.zeros([BLK], tl.float32)
    var1 = tl.zeros([BLK], tl.float32)
    var2 = tl.zeros([BLK], tl.float32)
    var3 = tl.zeros([BLK], tl.float32)
    for k in range(64):
        row = k // 8
        col = k % 8
        f = _load(ptr + off + row * s1 + col * s2, live, MASK16).to(tl.float32)
        d = f - gmean
        gvar = gvar + d * d
        q = (row >= 4).to(tl.int32) + 2 * (col >= 4).to(tl.int32)
        e = f - tl.where(q == 0, mean0, tl.where(q == 1, mean1, tl.where(q == 2, mean2, mean3)))
        e = e * e
        var0 = tl.where(q == 0, var0 + e, var0)
        var1 = tl.where(q == 1, var1 + e, var1)
        var2 = tl.where(q == 2, var2 + e, var2)
        var3 = tl.where(q == 3, var3 + e, var3)
    gvar = gvar * var64
    pos = gvar > 0
    quads = ((var0 * var16 + var1 * var16) + var2 * var16) + var3 * var16
    return tl.where(pos, tl.div_rn(quads, tl.where(pos, gvar, 1.0)), gvar)


@triton.jit
def _strength(ptr, off, s1, s2, live, scratch, NB, mask_ptr, var64, var16, MASK16: tl.constexpr,
              BLK: tl.constexpr):
    """One image's blocks: DCT coefficient ``k`` (raster order) to ``scratch[k * NB]``, and the masking strength
    ``float32(sqrt(double(m * gvar)) / 32)``."""
    q0, q1, q2, q3 = _column_pass(ptr, off, s1, s2, live, scratch, NB, MASK16)
    tl.debug_barrier()  # scratch written by other threads of the CTA, should the layouts differ
    energy = _row_pass(scratch, NB, live, mask_ptr, BLK)
    gvar = _variance_ratio(ptr, off, s1, s2, live, q0, q1, q2, q3, var64, var16, MASK16, BLK)
    return (tl.sqrt((energy * gvar).to(tl.float64)) * 0.03125).to(tl.float32)


@triton.jit
def _store_terms(out, rc, dc, strength, u, NB, csf_ptr, mask_ptr, live, BLK: tl.constexpr):
    """The error terms ``(err * csf)^2`` of coefficients ``k = 8u + v``, ``v = 0..7`` (element-wise float32 steps:
    any layout), read k-major from the scratch and written as each block's 8 consecutive floats."""
    k = u * 8 + tl.arange(0, 8)
    m = live[:, None]
    rk = tl.load(rc[:, None] + k[None, :] * NB, mask=m)
    dk = tl.load(dc[:, None] + k[None, :] * NB, mask=m)
    mask = tl.broadcast_to(tl.load(mask_ptr + k)[None, :], (BLK, 8))
    err = tl.abs(rk - dk).to(tl.float32)
    thr = tl.div_rn(tl.broadcast_to(strength[:, None], (BLK, 8)), mask)
    err = tl.where(k[None, :] > 0, tl.where(err < thr, 0.0, err - thr), err)  # the DC is not masked
    w = err * tl.load(csf_ptr + k)[None, :]
    tl.store(out[:, None] + k[None, :], w * w, mask=m)


# Integer arguments unspecialised: one compilation for every shape (each lane gathers its own block, so
# divisibility hints buy nothing).
@triton.jit(do_not_specialize=["rs0", "rs1", "rs2", "ds0", "ds1", "ds2", "NB", "BX", "L"])
def _psnr_hvs_blocks(ref_ptr, dist_ptr, csf_ptr, mask_ptr, out_ptr, scratch_ptr, rs0, rs1, rs2, ds0, ds1, ds2, NB,
                     BX, L, var64, var16, MASK16: tl.constexpr, BLK: tl.constexpr):
    """Program ``(i, f)``: the 64 error terms of blocks ``i*BLK ..`` of frame ``f`` to ``out[f, block*64 + k]``.
    ``scratch`` ``[N, 2 (ref, dist), 64, NB]`` int32 holds the DCT coefficients, k-major so that a step's lanes
    touch consecutive words."""
    b = tl.program_id(0) * BLK + tl.arange(0, BLK)
    f = tl.program_id(1).to(tl.int64)
    live = b < NB
    bb = tl.where(live, b, 0).to(tl.int64)
    y0 = (bb // BX) * 7
    x0 = (bb % BX) * 7
    rc = scratch_ptr + f * 128 * NB + bb
    dc = rc + 64 * NB
    rstrength = _strength(ref_ptr, f * rs0 + y0 * rs1 + x0 * rs2, rs1, rs2, live, rc, NB, mask_ptr, var64, var16,
                          MASK16, BLK)
    dstrength = _strength(dist_ptr, f * ds0 + y0 * ds1 + x0 * ds2, ds1, ds2, live, dc, NB, mask_ptr, var64, var16,
                          MASK16, BLK)
    strength = tl.where(dstrength > rstrength, dstrength, rstrength)
    tl.debug_barrier()  # the [BLK, 8] tiles below are read by other threads than those that wrote them
    out = out_ptr + f * L + bb * 64
    for u in range(8):
        _store_terms(out, rc, dc, strength, u, NB, csf_ptr, mask_ptr, live, BLK)


def _tables(device: torch.device, plane: int) -> tuple[torch.Tensor, torch.Tensor]:
    key = (device, plane)
    if key not in _TABLES:
        csf, mask = csf_and_mask(plane)
        _TABLES[key] = (torch.from_numpy(csf.reshape(64)).to(device), torch.from_numpy(mask.reshape(64)).to(device))
    return _TABLES[key]


def _kernel_input(x: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """A view the kernel can load: uint16 is read through int16 and masked back to 16 bits."""
    if x.dtype == torch.uint16:
        return x.view(torch.int16), True
    if x.dtype in (torch.uint8, torch.int16, torch.int32):
        return x, False
    return x.to(torch.int32), False


@on_tensors_device
def psnr_hvs_terms(ref: torch.Tensor, dist: torch.Tensor, plane: int, block: int | None = None) -> torch.Tensor:
    """Every block's 64 error terms in libvmaf's order: ``(N, blocks * 64)`` float32 on the inputs' device."""
    n, h, w = ref.shape
    by, bx = block_grid(h, w)
    nb = by * bx
    out = torch.empty(n, nb * 64, dtype=torch.float32, device=ref.device)
    if nb == 0 or n == 0:
        return out
    if ref.dtype != dist.dtype:
        ref, dist = ref.to(torch.int32), dist.to(torch.int32)
    x, mask16 = _kernel_input(ref)
    y, _ = _kernel_input(dist)
    csf, mask = _tables(ref.device, plane)
    # on a GPU one block per thread of 4 warps; the interpreter runs one program per frame (its cost is per op)
    blk = block or (triton.next_power_of_2(nb) if triton_interpreting() else 128)
    scratch = torch.empty(n, 2, 64, nb, dtype=torch.int32, device=ref.device)  # the DCT coefficients, k-major
    _psnr_hvs_blocks[(triton.cdiv(nb, blk), n)](
        x, y, csf, mask, out, scratch, *x.stride(), *y.stride(), nb, bx, nb * 64, float(VAR_SCALE_64),
        float(VAR_SCALE_16), MASK16=mask16, BLK=blk, num_warps=4,
        enable_fp_fusion=False)  # no FMA contraction: libvmaf rounds each product before adding
    return out


@psnr_hvs_plane.triton_launcher
def psnr_hvs_plane_fwd(ref: torch.Tensor, dist: torch.Tensor, bit_depth: int, plane: int) -> torch.Tensor:
    """libvmaf's PSNR-HVS error per frame of one plane ``(N, h, w)`` on its device: ``(N,)`` float64 (the twin's
    contract; inputs checked by the public API)."""
    n, h, w = ref.shape
    by, bx = block_grid(h, w)
    ret = sequential_sum32(psnr_hvs_terms(ref, dist, plane)).cpu().numpy()
    peak = (1 << bit_depth) - 1
    ret = ret / np.float32(64 * by * bx) / np.float32(peak * peak)
    return torch.from_numpy(ret.astype(np.float64)).to(ref.device)
