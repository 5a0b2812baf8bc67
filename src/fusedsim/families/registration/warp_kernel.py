"""Fused warp kernels (Triton) and their plans for the ops ``warp`` and ``compose``.

    warp(image, affine, grid, out_shape, is_displacement, mode, padding, align_corners) -> out
    compose(u, v, affine, add_v, align_corners) -> out

Each program takes BLOCK output voxels of one batch entry, builds their sampling points from the voxel index,
the (d, d+1) affine and the displacement (``p = A·x + u(x)``, or ``p = φ(x)`` for a full field; x the identity
grid of ``F.affine_grid``), maps them to source indices exactly as ``F.grid_sample`` does (unnormalise, border /
reflection folding, out-of-range guard), and interpolates every channel from the same corners and weights (a
point with a NaN or Inf coordinate gives NaN, as in the twin). The sampling grid is never written to memory:
forward traffic is the displacement, the gathered image and the output.

The backward recomputes the points and, in one launch, scatters ``w·g`` into the image gradient (float atomics
with relaxed ordering, like ``grid_sample``'s backward; Triton's default acq_rel ordering adds a fence to each),
writes dL/du per voxel (a batch-broadcast displacement is summed over the batch inside the program: no atomics)
and stores per-program partial sums of dL/dA = Σ dL/dp ⊗ (x, 1), reduced in a fixed order by one ``sum``
(deterministic). Coordinate gradients follow grid_sample's chain rule (``*_set_grad``:
a clipped coordinate, including one exactly on the border, passes no gradient). Arithmetic is float32, float64
when any input is float64.

``compose`` is the same kernel reading the channel-last field u as a (B, d, *S) image through its strides and
writing a channel-last output, with ``v`` added in the same pass when ``add_v``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from fusedsim.core.launch import Launcher, register_cap
from fusedsim.core.state import cached
from fusedsim.families.registration.ops import compose, warp

# sizes are used in float arithmetic; keeping them out of Triton's value specialisation keeps them tensors
_SIZES = ["C", "ID", "IH", "IW", "OD", "OH", "OW", "NVOX"]


@dataclass(frozen=True)
class ForwardLaunch:
    """Launch geometry of the warp forward: a :class:`WarpPlan` argument (``benchmarks/tune_warp.py`` sweeps it).

    Small programs: each thread owns one voxel and many programs share an SM, so more gathers are in flight (H200,
    192×160×224: 512 voxels / 4 warps 0.156 ms -> 64 / 2 0.104 ms). From ``tiled_min_channels`` channels on, the
    gathers, not the coordinates, are the work, and they are bound by L1/L2 traffic: a program takes a tile of rows
    (2-D: 4 rows; 3-D: 2 rows by 2 slices, 32 voxels per warp row), so the rows its voxels gather from are shared
    inside its SM's L1, under a 40-register cap (H100, 2x16x128³: 0.366 ms in memory order -> 0.322 ms; 1-channel
    volumes are 4-10% slower tiled, so they keep memory order; benchmarks/NOTES.md, "Warp forward, many channels").
    """

    block: int = 64  # voxels per program in memory order
    warps: int = 2
    tiled_min_channels: int = 4
    tiled_block: int = 128
    tiled_warps: int = 4
    tiled_maxnreg: int | None = 40
    tile_2d: tuple[int, int] = (4, 1)  # (rows, slices) per tile
    tile_3d: tuple[int, int] = (2, 2)


# backward: small programs again (H200, 192×160×224 with the image gradient: 256/4 0.653 ms -> 32/1 0.468 ms)
BWD_BLOCK, BWD_WARPS = 32, 1
_INT31 = 2**31 - 1


# ------------------------------------------------------------------------------------------- coordinate maps
@triton.jit
def _base_coord(i, n, ALIGN: tl.constexpr, DT: tl.constexpr):
    """affine_grid's identity coordinate of index i on an axis of n points (0 when n == 1)."""
    fi = i.to(DT)
    if ALIGN:
        v = fi * 2.0 / tl.maximum(n - 1, 1) - 1.0
        v = tl.where(n > 1, v, 0.0)
    else:
        v = (fi * 2.0 + 1.0) / n - 1.0
    return v


@triton.jit
def _reflect(x, twice_low, twice_high):
    """grid_sample's reflect_coordinates (with its gradient sign), for a non-degenerate span."""
    lo = twice_low * 0.5
    span = (twice_high - twice_low) * 0.5
    x = x - lo
    sign = tl.where(x < 0, -1.0, 1.0)
    x = tl.abs(x)
    extra = x % span  # x >= 0: C fmod
    flips = tl.floor(x / span)
    odd = (flips - 2.0 * tl.floor(flips * 0.5)) != 0
    return tl.where(odd, span - extra + lo, extra + lo), tl.where(odd, -sign, sign)


@triton.jit
def _source_index(p, size, PAD: tl.constexpr, ALIGN: tl.constexpr):
    """Normalised coordinate p -> source index on an axis of ``size`` voxels and d(index)/dp (grid_sample's
    grid_sampler_compute_source_index_set_grad, then its guard that sends non-finite or huge values to -100)."""
    if ALIGN:
        x = (p + 1.0) * 0.5 * (size - 1)
        mult = tl.zeros_like(p) + (size - 1) * 0.5
    else:
        x = ((p + 1.0) * size - 1.0) * 0.5
        mult = tl.zeros_like(p) + size * 0.5
    if PAD == 2:  # reflection, then clip
        if ALIGN:
            r, m = _reflect(x, 0.0, 2.0 * tl.maximum(size - 1, 1))  # size 1: folded to 0 below
            degenerate = size <= 1
        else:
            r, m = _reflect(x, -1.0, 2.0 * size - 1.0)
            degenerate = size <= 0
        x = tl.where(degenerate, 0.0, r)
        mult = tl.where(degenerate, 0.0, mult * m)
    if PAD >= 1:  # border (and the clip after reflection): the border itself passes no gradient
        hi = size - 1.0
        inside = (x > 0) & (x < hi)
        mult = tl.where(inside, mult, 0.0)
        x = tl.where(x <= 0, 0.0, tl.where(x >= hi, hi, x))
    ok = (x > -2147483648.0) & (x < 2147483646.0)  # also False for NaN
    return tl.where(ok, x, -100.0), mult


@triton.jit
def _poison(px, py, pz):
    """0 where the point (px, py, pz) is finite, NaN where a coordinate is NaN or Inf (x·0 is NaN exactly for
    those): the twin's rule that a non-finite point gives NaN in every channel, for any mode and padding."""
    return px * 0.0 + py * 0.0 + pz * 0.0


@triton.jit
def _round_half_even(x):
    """nearbyint under the default rounding mode (grid_sample's nearest), exact for every float."""
    f = tl.floor(x)
    d = x - f
    odd = (f - 2.0 * tl.floor(f * 0.5)) != 0
    return f + tl.where((d > 0.5) | ((d == 0.5) & odd), 1.0, 0.0)


@triton.jit
def _points(aff, grd, b, od, oh, ow, valid, OD, OH, OW, asb, asr, asc, gsb, gsd, gsh, gsw, gsk,
            NDIM: tl.constexpr, HAS_AFFINE: tl.constexpr, HAS_GRID: tl.constexpr, IS_DISP: tl.constexpr,
            ALIGN: tl.constexpr, DT: tl.constexpr):
    """Sampling points (px, py, pz) of the voxels (od, oh, ow) of batch b, and their identity coordinates."""
    xb = _base_coord(ow, OW, ALIGN, DT)
    yb = _base_coord(oh, OH, ALIGN, DT)
    zb = _base_coord(od, OD, ALIGN, DT)
    px = tl.zeros_like(xb)
    py = tl.zeros_like(xb)
    pz = tl.zeros_like(xb)
    if IS_DISP:
        if HAS_AFFINE:
            a = aff + b * asb
            if NDIM == 3:
                px = (tl.load(a).to(DT) * xb + tl.load(a + asc).to(DT) * yb + tl.load(a + 2 * asc).to(DT) * zb
                      + tl.load(a + 3 * asc).to(DT))
                py = (tl.load(a + asr).to(DT) * xb + tl.load(a + asr + asc).to(DT) * yb
                      + tl.load(a + asr + 2 * asc).to(DT) * zb + tl.load(a + asr + 3 * asc).to(DT))
                pz = (tl.load(a + 2 * asr).to(DT) * xb + tl.load(a + 2 * asr + asc).to(DT) * yb
                      + tl.load(a + 2 * asr + 2 * asc).to(DT) * zb + tl.load(a + 2 * asr + 3 * asc).to(DT))
            else:
                px = tl.load(a).to(DT) * xb + tl.load(a + asc).to(DT) * yb + tl.load(a + 2 * asc).to(DT)
                py = (tl.load(a + asr).to(DT) * xb + tl.load(a + asr + asc).to(DT) * yb
                      + tl.load(a + asr + 2 * asc).to(DT))
        else:
            px = xb
            py = yb
            pz = zb
    if HAS_GRID:
        g = grd + b * gsb + od * gsd + oh * gsh + ow * gsw
        px += tl.load(g, mask=valid, other=0.0).to(DT)
        py += tl.load(g + gsk, mask=valid, other=0.0).to(DT)
        if NDIM == 3:
            pz += tl.load(g + 2 * gsk, mask=valid, other=0.0).to(DT)
    return px, py, pz, xb, yb, zb


@triton.jit
def _voxel(pid, BLOCK: tl.constexpr, NVOX, OH, OW, INDEX64: tl.constexpr):
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    if INDEX64:
        offs = offs.to(tl.int64)
    valid = offs < NVOX
    ow = offs % OW
    t = offs // OW
    return offs, valid, t // OH, t % OH, ow


@triton.jit
def _voxel_tile(pid, BLOCK: tl.constexpr, TILE_Y: tl.constexpr, TILE_Z: tl.constexpr, OD, OH, OW,
                INDEX64: tl.constexpr):
    """The voxels of tile ``pid``: BLOCK // (TILE_Y·TILE_Z) along W by TILE_Y rows by TILE_Z slices."""
    TILE_X: tl.constexpr = BLOCK // (TILE_Y * TILE_Z)
    tiles_x = tl.cdiv(OW, TILE_X)
    tiles_y = tl.cdiv(OH, TILE_Y)
    i = tl.arange(0, BLOCK)
    ow = (pid % tiles_x) * TILE_X + i % TILE_X
    t = pid // tiles_x
    oh = (t % tiles_y) * TILE_Y + (i // TILE_X) % TILE_Y
    od = (t // tiles_y) * TILE_Z + i // (TILE_X * TILE_Y)
    valid = (ow < OW) & (oh < OH) & (od < OD)
    if INDEX64:
        ow, oh, od = ow.to(tl.int64), oh.to(tl.int64), od.to(tl.int64)
    return valid, od, oh, ow


@triton.jit
def _corner(i0, d: tl.constexpr, w0, w1, size, INDEX64: tl.constexpr):
    """Index, in-bounds mask and weight of corner d (0: floor, 1: floor + 1) along one axis."""
    i = i0 + d
    inb = (i >= 0) & (i < size)
    if INDEX64:
        i = i.to(tl.int64)
    return i, inb, (w1 if d == 1 else w0)


@triton.jit
def _trilinear_corner(z0, y0, x0, dz: tl.constexpr, dy: tl.constexpr, dx: tl.constexpr, wz0, wz1, wy0, wy1, wx0,
                      wx1, valid, ID, IH, IW, NDIM: tl.constexpr, INDEX64: tl.constexpr):
    """Corner (dz, dy, dx) of a voxel's trilinear (bilinear: dz = 0) footprint: indices, in-bounds mask, weight and
    the three axis weights."""
    zi, zin, wz = _corner(z0, dz, wz0, wz1, ID, INDEX64)
    yi, yin, wy = _corner(y0, dy, wy0, wy1, IH, INDEX64)
    xi, xin, wx = _corner(x0, dx, wx0, wx1, IW, INDEX64)
    m = valid & xin & yin
    w = wx * wy
    if NDIM == 3:
        m = m & zin
        w = w * wz
    return zi, yi, xi, m, w, wx, wy, wz


@triton.jit
def _corner_base(z0, y0, x0, ID, IH, IW, isd, ish, isw, INDEX64: tl.constexpr):
    """Offset of the (z0, y0, x0) corner and each axis's in-bounds masks for the floor (0) and floor + 1 (1)
    corners: every corner's offset is this base plus a scalar, so the eight gathers share one address."""
    zi, yi, xi = z0, y0, x0
    if INDEX64:
        zi, yi, xi = z0.to(tl.int64), y0.to(tl.int64), x0.to(tl.int64)
    base = zi * isd + yi * ish + xi * isw
    return (base, (x0 >= 0) & (x0 < IW), (x0 >= -1) & (x0 < IW - 1), (y0 >= 0) & (y0 < IH),
            (y0 >= -1) & (y0 < IH - 1), (z0 >= 0) & (z0 < ID), (z0 >= -1) & (z0 < ID - 1))


@triton.jit
def _trilinear_sample(plane, base, isd, ish, isw, valid, inx0, inx1, iny0, iny1, inz0, inz1, wx0, wx1, wy0, wy1,
                      wz0, wz1, NDIM: tl.constexpr, DT: tl.constexpr):
    """Σ over the corners of w·plane[corner] (bilinear: the dz = 0 corners), corners in (dz, dy, dx) order."""
    acc = tl.zeros(base.shape, dtype=DT)
    for dz in tl.static_range(NDIM - 1):
        for dy in tl.static_range(2):
            for dx in tl.static_range(2):
                m = valid & (inx1 if dx == 1 else inx0) & (iny1 if dy == 1 else iny0)
                w = (wx1 if dx == 1 else wx0) * (wy1 if dy == 1 else wy0)
                if NDIM == 3:
                    m = m & (inz1 if dz == 1 else inz0)
                    w = w * (wz1 if dz == 1 else wz0)
                v = tl.load(plane + base + (dz * isd + dy * ish + dx * isw), mask=m, other=0.0).to(DT)
                acc += w * v
    return acc


# ----------------------------------------------------------------------------------------------------- kernels
@triton.jit(do_not_specialize=_SIZES)
def _warp_fwd_kernel(img, aff, grd, out, C, ID, IH, IW, OD, OH, OW, NVOX,
                     isb, isc, isd, ish, isw, asb, asr, asc, gsb, gsd, gsh, gsw, gsk, osb, osc, osd, osh, osw,
                     NDIM: tl.constexpr, HAS_AFFINE: tl.constexpr, HAS_GRID: tl.constexpr, IS_DISP: tl.constexpr,
                     ADD_GRID: tl.constexpr, MODE: tl.constexpr, PAD: tl.constexpr, ALIGN: tl.constexpr,
                     INDEX64: tl.constexpr, DT: tl.constexpr, BLOCK: tl.constexpr, TILE_Y: tl.constexpr,
                     TILE_Z: tl.constexpr):
    """Program (voxel block, batch entry): BLOCK voxels in memory order (TILE_Y = 0) or a tile of TILE_Y rows by
    TILE_Z slices (see :class:`ForwardLaunch`)."""
    b = tl.program_id(1)
    if INDEX64:
        b = b.to(tl.int64)
    if TILE_Y == 0:
        _offs, valid, od, oh, ow = _voxel(tl.program_id(0), BLOCK, NVOX, OH, OW, INDEX64)
    else:
        valid, od, oh, ow = _voxel_tile(tl.program_id(0), BLOCK, TILE_Y, TILE_Z, OD, OH, OW, INDEX64)
    px, py, pz, _xb, _yb, _zb = _points(aff, grd, b, od, oh, ow, valid, OD, OH, OW, asb, asr, asc, gsb, gsd, gsh,
                                     gsw, gsk, NDIM, HAS_AFFINE, HAS_GRID, IS_DISP, ALIGN, DT)
    poison = _poison(px, py, pz)
    finite = poison == 0.0
    ix, _mx = _source_index(px, IW, PAD, ALIGN)
    iy, _my = _source_index(py, IH, PAD, ALIGN)
    iz = tl.zeros_like(ix)
    if NDIM == 3:
        iz, _mz = _source_index(pz, ID, PAD, ALIGN)
    src = img + b * isb
    dst = out + b * osb + od * osd + oh * osh + ow * osw
    gdst = grd + b * gsb + od * gsd + oh * gsh + ow * gsw
    if MODE == 0:
        fx = tl.floor(ix)
        fy = tl.floor(iy)
        fz = tl.floor(iz)
        wx1, wy1, wz1 = ix - fx, iy - fy, iz - fz
        wx0, wy0, wz0 = (fx + 1.0) - ix, (fy + 1.0) - iy, (fz + 1.0) - iz
        x0, y0, z0 = fx.to(tl.int32), fy.to(tl.int32), fz.to(tl.int32)
    else:
        x0 = _round_half_even(ix).to(tl.int32)
        y0 = _round_half_even(iy).to(tl.int32)
        z0 = _round_half_even(iz).to(tl.int32)
    plane = src  # channel pointers advance by their strides: 64-bit arithmetic, no c·stride product
    if MODE == 0:  # every corner is the base offset plus a scalar: one address per voxel, not eight
        base, inx0, inx1, iny0, iny1, inz0, inz1 = _corner_base(z0, y0, x0, ID, IH, IW, isd, ish, isw, INDEX64)
    for c in range(C):
        if MODE == 0:
            acc = _trilinear_sample(plane, base, isd, ish, isw, valid, inx0, inx1, iny0, iny1, inz0, inz1,
                                    wx0, wx1, wy0, wy1, wz0, wz1, NDIM, DT)
        else:
            zi, zin, _w = _corner(z0, 0, z0, z0, ID, INDEX64)
            yi, yin, _w = _corner(y0, 0, y0, y0, IH, INDEX64)
            xi, xin, _w = _corner(x0, 0, x0, x0, IW, INDEX64)
            m = valid & xin & yin
            if NDIM == 3:
                m = m & zin
            acc = tl.load(plane + zi * isd + yi * ish + xi * isw, mask=m, other=0.0).to(DT)
        acc = tl.where(finite, acc, poison)
        if ADD_GRID:  # compose: out = v + u∘(A·x + v), channel c is component c
            acc += tl.load(gdst, mask=valid, other=0.0).to(DT)
        tl.store(dst, acc.to(out.dtype.element_ty), mask=valid)
        plane += isc
        dst += osc
        gdst += gsk


@triton.jit(do_not_specialize=[*_SIZES, "INNER"])
def _warp_bwd_kernel(img, aff, grd, gout, gimg, ggrid, gpart, C, ID, IH, IW, OD, OH, OW, NVOX, INNER,
                     isb, isc, isd, ish, isw, asb, asr, asc, gsb, gsd, gsh, gsw, gsk, osb, osc, osd, osh, osw,
                     jsb, jsc, jsd, jsh, jsw, ggsb,
                     NDIM: tl.constexpr, HAS_AFFINE: tl.constexpr, HAS_GRID: tl.constexpr, IS_DISP: tl.constexpr,
                     ADD_GRID: tl.constexpr, MODE: tl.constexpr, PAD: tl.constexpr, ALIGN: tl.constexpr,
                     NEED_IMG: tl.constexpr, NEED_GRID: tl.constexpr, NEED_AFF: tl.constexpr, NEED_P: tl.constexpr,
                     INDEX64: tl.constexpr, DT: tl.constexpr, BLOCK: tl.constexpr):
    """Program (voxel block, batch group): batches pid1·INNER ... pid1·INNER + INNER - 1 (INNER = B when a
    batch-1 displacement needs its gradient: the batch sum then stays in registers). NEED_P: bilinear and a
    coordinate gradient (grid or affine) asked for."""
    pid = tl.program_id(0)
    group = tl.program_id(1)
    if INDEX64:
        group = group.to(tl.int64)
    offs, valid, od, oh, ow = _voxel(pid, BLOCK, NVOX, OH, OW, INDEX64)
    sx = tl.zeros([BLOCK], dtype=DT)  # dL/dgrid summed over the batches of this program
    sy = tl.zeros([BLOCK], dtype=DT)
    sz = tl.zeros([BLOCK], dtype=DT)
    for j in range(INNER):
        b = group * INNER + j
        px, py, pz, xb, yb, zb = _points(aff, grd, b, od, oh, ow, valid, OD, OH, OW, asb, asr, asc, gsb, gsd, gsh,
                                         gsw, gsk, NDIM, HAS_AFFINE, HAS_GRID, IS_DISP, ALIGN, DT)
        finite = _poison(px, py, pz) == 0.0  # a non-finite point's output is NaN and passes no gradient
        ix, mx = _source_index(px, IW, PAD, ALIGN)
        iy, my = _source_index(py, IH, PAD, ALIGN)
        iz = tl.zeros_like(ix)
        mz = tl.zeros_like(ix)
        if NDIM == 3:
            iz, mz = _source_index(pz, ID, PAD, ALIGN)
        src = img + b * isb
        dsrc = gimg + b * jsb
        gin = gout + b * osb + od * osd + oh * osh + ow * osw
        if MODE == 0:
            fx = tl.floor(ix)
            fy = tl.floor(iy)
            fz = tl.floor(iz)
            wx1, wy1, wz1 = ix - fx, iy - fy, iz - fz
            wx0, wy0, wz0 = (fx + 1.0) - ix, (fy + 1.0) - iy, (fz + 1.0) - iz
            x0, y0, z0 = fx.to(tl.int32), fy.to(tl.int32), fz.to(tl.int32)
        else:
            x0 = _round_half_even(ix).to(tl.int32)
            y0 = _round_half_even(iy).to(tl.int32)
            z0 = _round_half_even(iz).to(tl.int32)
        gx = tl.zeros([BLOCK], dtype=DT)  # dL/d(source index), summed over channels
        gy = tl.zeros([BLOCK], dtype=DT)
        gz = tl.zeros([BLOCK], dtype=DT)
        plane = src
        dplane = dsrc
        for c in range(C):
            g = tl.load(gin, mask=valid, other=0.0).to(DT)
            if ADD_GRID:  # out = v + ...: dL/dv picks up g directly
                sx += tl.where(c == 0, g, 0.0)
                sy += tl.where(c == 1, g, 0.0)
                if NDIM == 3:
                    sz += tl.where(c == 2, g, 0.0)
            g = tl.where(finite, g, 0.0)
            if MODE == 0:
                for dz in tl.static_range(NDIM - 1):
                    for dy in tl.static_range(2):
                        for dx in tl.static_range(2):
                            zi, yi, xi, m, _w, wx, wy, wz = _trilinear_corner(
                                z0, y0, x0, dz, dy, dx, wz0, wz1, wy0, wy1, wx0, wx1, valid, ID, IH, IW, NDIM, INDEX64)
                            if NEED_P:
                                vg = tl.load(plane + zi * isd + yi * ish + xi * isw, mask=m, other=0.0).to(DT) * g
                                sgx = 1.0 if dx == 1 else -1.0
                                sgy = 1.0 if dy == 1 else -1.0
                                if NDIM == 3:
                                    sgz = 1.0 if dz == 1 else -1.0
                                    gx += sgx * (wy * wz) * vg
                                    gy += sgy * (wx * wz) * vg
                                    gz += sgz * (wx * wy) * vg
                                else:
                                    gx += sgx * wy * vg
                                    gy += sgy * wx * vg
                if NEED_IMG:
                    # the scatters after every gather: an atomic ahead of a load keeps that load from being issued
                    # early (they may alias as far as the compiler knows), and the gathers are the latency
                    for dz in tl.static_range(NDIM - 1):
                        for dy in tl.static_range(2):
                            for dx in tl.static_range(2):
                                zi, yi, xi, m, w, _wx, _wy, _wz = _trilinear_corner(
                                    z0, y0, x0, dz, dy, dx, wz0, wz1, wy0, wy1, wx0, wx1, valid, ID, IH, IW, NDIM,
                                    INDEX64)
                                tl.atomic_add(dplane + zi * jsd + yi * jsh + xi * jsw,
                                              (w * g).to(gimg.dtype.element_ty), mask=m, sem="relaxed")
            elif NEED_IMG:
                zi, zin, _w = _corner(z0, 0, z0, z0, ID, INDEX64)
                yi, yin, _w = _corner(y0, 0, y0, y0, IH, INDEX64)
                xi, xin, _w = _corner(x0, 0, x0, x0, IW, INDEX64)
                m = valid & xin & yin
                if NDIM == 3:
                    m = m & zin
                tl.atomic_add(dplane + zi * jsd + yi * jsh + xi * jsw, g.to(gimg.dtype.element_ty), mask=m,
                              sem="relaxed")
            gin += osc
            plane += isc
            dplane += jsc
        if NEED_P:
            gx = tl.where(valid, gx * mx, 0.0)  # dL/dp
            gy = tl.where(valid, gy * my, 0.0)
            gz = tl.where(valid, gz * mz, 0.0)
            if NEED_GRID:
                sx += gx
                sy += gy
                if NDIM == 3:
                    sz += gz
            if NEED_AFF:  # dL/dA = Σ dL/dp ⊗ (x, y[, z], 1): this program's partial sums
                part = gpart + (b * tl.num_programs(0) + pid) * (NDIM * (NDIM + 1))
                tl.store(part + 0, tl.sum(gx * xb, axis=0))
                tl.store(part + 1, tl.sum(gx * yb, axis=0))
                if NDIM == 3:
                    tl.store(part + 2, tl.sum(gx * zb, axis=0))
                    tl.store(part + 3, tl.sum(gx, axis=0))
                    tl.store(part + 4, tl.sum(gy * xb, axis=0))
                    tl.store(part + 5, tl.sum(gy * yb, axis=0))
                    tl.store(part + 6, tl.sum(gy * zb, axis=0))
                    tl.store(part + 7, tl.sum(gy, axis=0))
                    tl.store(part + 8, tl.sum(gz * xb, axis=0))
                    tl.store(part + 9, tl.sum(gz * yb, axis=0))
                    tl.store(part + 10, tl.sum(gz * zb, axis=0))
                    tl.store(part + 11, tl.sum(gz, axis=0))
                else:
                    tl.store(part + 2, tl.sum(gx, axis=0))
                    tl.store(part + 3, tl.sum(gy * xb, axis=0))
                    tl.store(part + 4, tl.sum(gy * yb, axis=0))
                    tl.store(part + 5, tl.sum(gy, axis=0))
    if NEED_GRID:
        dst = ggrid + group * ggsb + offs * NDIM
        tl.store(dst, sx, mask=valid)
        tl.store(dst + 1, sy, mask=valid)
        if NDIM == 3:
            tl.store(dst + 2, sz, mask=valid)


# --------------------------------------------------------------------------------------------------------- plans
def _tl_dtype(dtype: torch.dtype):
    return tl.float64 if dtype == torch.float64 else tl.float32


def _span(shape, strides) -> int:
    """Largest element offset reachable in a tensor of this shape and these strides."""
    return sum((s - 1) * abs(st) for s, st in zip(shape, strides))


def _bcdhw(strides: tuple[int, ...], batch: int, channel_last: bool) -> tuple[int, ...]:
    """(batch, channel, d, h, w) strides of a (B, C, *S) tensor, or of a (B, *S, C) one read as (B, C, *S); the
    batch stride is 0 when the batch broadcasts, d is 0 in 2-D."""
    strides = tuple(strides)
    if channel_last:
        strides = (strides[0], strides[-1], *strides[1:-1])
    spatial = strides[2:] if len(strides) == 5 else (0, *strides[2:])
    return (strides[0] if batch > 1 else 0, strides[1], *spatial)


def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= s
    return tuple(reversed(out))


class WarpPlan:
    """Launch geometry and constants of one warp / compose call, fixed by shapes, strides, dtypes and options.

    ``forward(image, affine, grid) -> (out, ())``; ``backward(tensors, saved, g, needs) -> (d_image, d_affine,
    d_grid)``. Absent affine / grid are empty tensors. ``channel_last``: the image, the output and the image
    gradient are channel-last fields (B, *S, C) (compose); ``add_grid``: the grid is added to the output.
    """

    def __init__(self, image_shape, image_strides, image_dtype, affine_shape, affine_strides, affine_dtype,
                 grid_shape, grid_strides, grid_dtype, device, out_shape, is_displacement, mode, padding,
                 align_corners, channel_last=False, add_grid=False, launch: ForwardLaunch = ForwardLaunch()) -> None:
        nd = len(image_shape) - 2
        if channel_last:
            spatial_in, c = tuple(image_shape[1:-1]), image_shape[-1]
        else:
            spatial_in, c = tuple(image_shape[2:]), image_shape[1]
        self.nd, self.c, self.mode, self.channel_last = nd, c, int(mode), channel_last
        self.has_affine, self.has_grid = len(affine_shape) == 3, len(grid_shape) == nd + 2
        bi = image_shape[0]
        self.ba = affine_shape[0] if self.has_affine else 1
        self.bg = grid_shape[0] if self.has_grid else 1
        self.batch = max(bi, self.ba, self.bg)
        self.acc = torch.float64 if torch.float64 in (image_dtype, affine_dtype, grid_dtype) else torch.float32
        self.out_shape = tuple(out_shape)
        self.nvox = 1
        for s in self.out_shape:
            self.nvox *= s
        od, oh, ow = (1, *self.out_shape) if nd == 2 else self.out_shape
        idd, ih, iw = (1, *spatial_in) if nd == 2 else spatial_in
        self.sizes = (c, idd, ih, iw, od, oh, ow, self.nvox)
        # output and image gradient: contiguous in the layout of the call
        self.full_out = (self.batch, *self.out_shape, c) if channel_last else (self.batch, c, *self.out_shape)
        self.grad_image_shape = (bi, *spatial_in, c) if channel_last else (bi, c, *spatial_in)
        out_strides = _contiguous_strides(self.full_out)
        gi_strides = _contiguous_strides(self.grad_image_shape)
        a_s = tuple(affine_strides) if self.has_affine else (0, 0, 0)
        g_s = tuple(grid_strides) if self.has_grid else (0,) * (nd + 2)
        g_spatial = g_s[1:-1] if nd == 3 else (0, *g_s[1:-1])
        self.strides = (*_bcdhw(image_strides, bi, channel_last), self.ba > 1 and a_s[0] or 0, a_s[1], a_s[2],
                        self.bg > 1 and g_s[0] or 0, *g_spatial, g_s[-1], *_bcdhw(out_strides, self.batch, channel_last))
        self.grad_image_strides = _bcdhw(gi_strides, bi, channel_last)
        self.grad_grid_batch_stride = self.nvox * nd if self.bg > 1 else 0
        largest = max(_span(image_shape, image_strides), _span(grid_shape, grid_strides) if self.has_grid else 0,
                      self.batch * self.nvox * max(c, nd), bi * c * idd * ih * iw)
        self.index64 = largest + 2 * (c + 1) >= _INT31
        self.flags = (nd, self.has_affine, self.has_grid, bool(is_displacement), bool(add_grid), self.mode,
                      int(padding), bool(align_corners))
        self.dt = _tl_dtype(self.acc)
        self._fwd, self._fwd_tile = self._forward_launcher(device, launch)
        self._bwd: dict[tuple[bool, bool, bool], tuple[Launcher, int, int]] = {}

    def _forward_launcher(self, device, launch: ForwardLaunch) -> tuple[Launcher, tuple[int, int, int]]:
        """The forward's launcher and its (BLOCK, TILE_Y, TILE_Z) (TILE_Y = 0: voxels in memory order)."""
        if self.c < launch.tiled_min_channels:
            grid = (triton.cdiv(self.nvox, launch.block), self.batch)
            return Launcher(_warp_fwd_kernel, grid, num_warps=launch.warps), (launch.block, 0, 1)
        ty, tz = launch.tile_3d if self.nd == 3 else launch.tile_2d
        _, _, _, _, od, oh, ow, _ = self.sizes
        tiles = triton.cdiv(ow, launch.tiled_block // (ty * tz)) * triton.cdiv(oh, ty) * triton.cdiv(od, tz)
        launcher = Launcher(_warp_fwd_kernel, (tiles, self.batch), num_warps=launch.tiled_warps,
                            **register_cap(device, launch.tiled_maxnreg))
        return launcher, (launch.tiled_block, ty, tz)

    def _present(self, image, affine, grid):
        """Stand-ins for absent tensors (never read: the kernel's flags skip them)."""
        return image, (affine if self.has_affine else image), (grid if self.has_grid else image)

    # ----------------------------------------------------------------------------------------------- forward
    def forward(self, image: torch.Tensor, affine: torch.Tensor, grid: torch.Tensor):
        out = torch.empty(self.full_out, dtype=image.dtype, device=image.device)
        self._fwd(*self._present(image, affine, grid), out, *self.sizes, *self.strides, *self.flags, self.index64,
                  self.dt, *self._fwd_tile)
        return out, ()

    # ---------------------------------------------------------------------------------------------- backward
    def backward(self, tensors, saved, grad_out: torch.Tensor, needs):
        image, affine, grid = tensors[:3]
        linear = self.mode == 0
        need_img = bool(needs[0])
        need_aff = bool(needs[1]) and self.has_affine
        need_grid = bool(needs[2]) and self.has_grid
        add_grid = self.flags[4]
        # nearest: the output is piecewise constant in the points, their gradient is 0 (as grid_sample's)
        k_aff, k_grid = need_aff and linear, need_grid and (linear or add_grid)
        g_image = g_affine = g_grid = None
        if need_img or k_aff or k_grid:
            g_image, g_affine, g_grid = self._launch_backward(image, affine, grid, grad_out, need_img, k_aff, k_grid)
        if g_image is not None and g_image.dtype != image.dtype:
            g_image = g_image.to(image.dtype)
        if need_aff:
            g_affine = torch.zeros_like(affine) if g_affine is None else g_affine.to(affine.dtype)
        if need_grid:
            g_grid = torch.zeros_like(grid) if g_grid is None else g_grid.to(grid.dtype)
        return g_image, g_affine, g_grid

    def _launch_backward(self, image, affine, grid, grad_out, need_img, need_aff, need_grid):
        key = (need_img, need_aff, need_grid)
        entry = self._bwd.get(key)
        if entry is None:
            # a batch-1 displacement whose gradient is needed: one program sums every batch entry
            inner = self.batch if (need_grid and self.bg == 1) else 1
            dims = (triton.cdiv(self.nvox, BWD_BLOCK), self.batch // inner)
            entry = self._bwd[key] = (Launcher(_warp_bwd_kernel, dims, num_warps=BWD_WARPS), dims[0], inner)
        launcher, nprog, inner = entry
        dev = image.device
        g = grad_out.contiguous()
        gimg = torch.zeros(self.grad_image_shape, dtype=self.acc, device=dev) if need_img else None
        ggrid = torch.empty((self.bg, *self.out_shape, self.nd), dtype=self.acc, device=dev) if need_grid else None
        na = self.nd * (self.nd + 1)
        gpart = torch.empty((self.batch, nprog, na), dtype=self.acc, device=dev) if need_aff else None
        need_p = (need_aff or need_grid) and self.mode == 0
        launcher(*self._present(image, affine, grid), g, g if gimg is None else gimg, g if ggrid is None else ggrid,
                 g if gpart is None else gpart, *self.sizes, inner, *self.strides, *self.grad_image_strides,
                 self.grad_grid_batch_stride, *self.flags, need_img, need_grid, need_aff, need_p, self.index64,
                 self.dt, BWD_BLOCK)
        g_affine = None
        if gpart is not None:  # fixed-order reduction of the per-program partial sums
            g_affine = gpart.sum(1).view(self.batch, self.nd, self.nd + 1)
            if self.ba == 1 and self.batch > 1:
                g_affine = g_affine.sum(0, keepdim=True)
        return gimg, g_affine, ggrid


def _meta(t: torch.Tensor) -> tuple:
    return tuple(t.shape), tuple(t.stride()), t.dtype


@cached(maxsize=256)
def _warp_plan_cached(*key) -> WarpPlan:
    return WarpPlan(*key)


@warp.triton_plan
def warp_plan(tensors, scalars, launch: ForwardLaunch = ForwardLaunch()) -> WarpPlan:
    """The cached plan of ``warp`` for these tensors (shapes, strides, dtypes, device) and scalars; ``launch``: the
    forward's launch geometry."""
    image, affine, grid = tensors
    out_shape, is_displacement, mode, padding, align_corners = scalars
    if grid.dim() == image.dim():  # the grid's lattice wins, as in the twin
        out_shape = grid.shape[1:-1]
    return _warp_plan_cached(*_meta(image), *_meta(affine), *_meta(grid), image.device,
                             tuple(int(s) for s in out_shape), bool(is_displacement), int(mode), int(padding),
                             bool(align_corners), False, False, launch)


class ComposePlan:
    """``compose(u, v, affine)``: a channel-last :class:`WarpPlan` over (u as the image, affine, v as the grid),
    bilinear with zero padding, v added to the output when ``add_v``."""

    def __init__(self, u_meta, v_meta, a_meta, device, add_v: bool, align_corners: bool) -> None:
        v_shape = v_meta[0]
        self.warp = WarpPlan(*u_meta, *a_meta, *v_meta, device, tuple(v_shape[1:-1]), True, 0, 0, align_corners,
                             channel_last=True, add_grid=add_v)

    def forward(self, u, v, affine):
        return self.warp.forward(u, affine, v)

    def backward(self, tensors, saved, grad_out, needs):
        u, v, affine = tensors
        g_u, g_a, g_v = self.warp.backward((u, affine, v), saved, grad_out, (needs[0], needs[2], needs[1]))
        return g_u, g_v, g_a


@cached(maxsize=256)
def _compose_plan_cached(*key) -> ComposePlan:
    return ComposePlan(*key)


@compose.triton_plan
def compose_plan(tensors, scalars) -> ComposePlan:
    """The cached plan of ``compose`` for these tensors and scalars."""
    u, v, affine = tensors
    add_v, align_corners = scalars
    return _compose_plan_cached(_meta(u), _meta(v), _meta(affine), u.device, bool(add_v), bool(align_corners))
