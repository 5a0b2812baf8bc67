"""3-D LNCC by slabs: in-plane filtering and depth filtering as separate passes through a slab scratch.

The volume is processed in slabs of S output slices. For each slab (sources in ``lncc_slab_source.py``):

- forward: plane pass (the five in-plane window sums of the S + K - 1 input slices, once each) -> depth pass
  (window sums along D, ncc, per-program partial sums or the -ncc map);
- backward: plane pass over S + 2(K - 1) slices -> depth pass writing the moment-gradient maps of S + K - 1
  slices -> plane pass applying the adjoint window in-plane -> depth pass applying it along D and combining
  with p and t into the gradients of the slab's S slices.

Each input voxel is filtered in-plane once per slab it reaches (1 + (K - 1)/S or 1 + 2(K - 1)/S times) instead
of once per depth tap. The scratch holds 5·(S + 2(K - 1)) + M·(S + K - 1) slices (M = 3 gradient maps for one
input, 5 for both; the adjoint pass reuses the moment scratch); the default S is the largest even split of D
whose scratch does not exceed the M full-size maps of the streaming backward.
"""

from __future__ import annotations

import functools

import torch
import triton

from fusedsim.ops._codegen import jit_from_source
from fusedsim.ops._launch import Launcher
from fusedsim.ops.lncc_slab_source import (
    DEPTH_VARYING,
    PLANE_VARYING,
    render_depth_adjoint,
    render_depth_forward,
    render_depth_grad_maps,
    render_plane_adjoint,
    render_plane_moments,
)

_RBLOCK = 256
DEPTH_BLOCK = 8  # output slices per depth program: (DS + K - 1)/DS loads per output
BLOCK = 256  # in-plane voxels per depth program (one per thread)


@functools.cache
def _kernel(kind: str, *key):
    """The jitted slab kernel ``kind`` for ``key`` (K, then DS and flags where the kind has them)."""
    name = f"_lncc_slab_{kind}_{'_'.join(str(int(v)) for v in key)}_kernel"
    render, varying = {
        "plane_moments": (render_plane_moments, PLANE_VARYING),
        "plane_adjoint": (render_plane_adjoint, PLANE_VARYING),
        "depth_forward": (render_depth_forward, DEPTH_VARYING),
        "depth_grad_maps": (render_depth_grad_maps, DEPTH_VARYING),
        "depth_adjoint": (render_depth_adjoint, DEPTH_VARYING),
    }[kind]
    source = render(*key, name)
    header = source.split(")", 1)[0]
    return jit_from_source(name, source, do_not_specialize=[v for v in varying if f" {v}," in header])


def _split_even(d: int, fits) -> int:
    """The slab size of the fewest equal slabs of d slices for which ``fits(size)``; the smallest useful one when
    none does."""
    for count in range(1, d + 1):
        size = -(-d // count)
        if fits(size):
            return size
    return 1


def default_slabs(d: int, taps: int, maps: int = 3) -> tuple[int, int]:
    """(forward slab, backward slab) sizes for depth d: scratch at most ``maps`` full-size slices per slice."""
    halo = taps - 1
    budget = maps * d
    fwd = _split_even(d, lambda s: 5 * min(d, s + halo) <= budget)
    bwd = _split_even(d, lambda s: 5 * min(d, s + 2 * halo) + maps * min(d, s + halo) <= budget)
    floor = max(1, 2 * halo)  # below this the halos dominate; tiny volumes get one slab
    return max(fwd, min(d, floor)), max(bwd, min(d, floor))


class SlabLNCC:
    """The slab path of one ``LNCCPlan`` (3-D): ``forward(pred, target, win, out, part, cnt, write_map)`` and
    ``backward(pred, target, win, g, need_p, need_t) -> (dp, dt)``."""

    def __init__(self, plan, slab: int | None, depth_block: int, block: int) -> None:
        self.plan = plan
        n, c, d, h, w = plan.dims
        self.nc, self.hw = n * c, h * w
        self.taps, self.ds, self.block = plan.taps, depth_block, block
        self.warps = max(1, min(8, block // 32))
        fwd, bwd = default_slabs(d, plan.taps)
        self.slab_fwd, self.slab_bwd = (fwd, bwd) if slab is None else (slab, slab)
        r = plan.taps // 2
        self.fwd_slabs = self._slabs(self.slab_fwd, r)
        self.part_bases, total = [], 0
        for _, (olo, ohi) in self.fwd_slabs:
            self.part_bases.append(total)
            total += self._depth_grid(ohi - olo)[0] * self._depth_grid(ohi - olo)[1] * self.nc
        self.nparts = total
        self._launchers: dict = {}

    # ------------------------------------------------------------------------------------------- geometry
    def _slabs(self, size: int, halo: int) -> list[tuple[tuple[int, int], tuple[int, int]]]:
        """((in_lo, in_hi), (out_lo, out_hi)) per slab: output slices and the input slices within ``halo``."""
        d = self.plan.dims[2]
        return [((max(0, s - halo), min(d, s + size + halo)), (s, min(d, s + size))) for s in range(0, d, size)]

    def _depth_grid(self, slices: int) -> tuple[int, int, int]:
        return triton.cdiv(self.hw, self.block), triton.cdiv(slices, self.ds), self.nc

    def _plane_grid(self, slices: int) -> tuple[int, int, int]:
        block_w, rows, _ = self.plan.tile
        _, _, _, h, w = self.plan.dims
        return triton.cdiv(w, block_w), triton.cdiv(h, rows), self.nc * slices

    def _launch(self, kernel, grid, warps: int, *args) -> None:
        launcher = self._launchers.get((id(kernel), grid))
        if launcher is None:
            launcher = self._launchers[(id(kernel), grid)] = Launcher(kernel, grid, num_warps=warps)
        launcher(*args)

    def _plane_moments(self, pred, target, win, scr, lo: int, hi: int, nss: int) -> None:
        p = self.plan
        _, c, _, h, w = p.dims
        block_w, rows, warps = p.tile
        self._launch(_kernel("plane_moments", self.taps), self._plane_grid(hi - lo), warps,
                     pred, target, win, scr, self.nc, c, h, w, *p.sx, *p.sy, lo, hi - lo, lo, nss, 0, block_w, rows,
                     p.acc_tl)

    # -------------------------------------------------------------------------------------------- forward
    def forward(self, pred, target, win, out, part, cnt, write_map: bool) -> None:
        p = self.plan
        _, c, d, _, _ = p.dims
        r = self.taps // 2
        nss = min(d, self.slab_fwd + 2 * r)
        scr = torch.empty(5 * self.nc * nss * self.hw, dtype=p.acc, device=pred.device)
        depth = _kernel("depth_forward", self.taps, self.ds)
        last = len(self.fwd_slabs) - 1
        for i, ((lo, hi), (olo, ohi)) in enumerate(self.fwd_slabs):
            self._plane_moments(pred, target, win, scr, lo, hi, nss)
            self._launch(depth, self._depth_grid(ohi - olo), self.warps,
                         scr, win, part, cnt, out, self.nc, c, d, self.hw, nss, lo, hi, olo, ohi, self.part_bases[i],
                         int(i == last), *p.consts, p.count, self.ds, self.block, p.acc_tl, p.clamp, write_map,
                         p.reduce_mean, _RBLOCK)

    # ------------------------------------------------------------------------------------------- backward
    def backward(self, pred, target, win, gscalar, gmap, has_gmap: bool, need_p: bool, need_t: bool):
        p = self.plan
        _, c, d, h, w = p.dims
        r = self.taps // 2
        maps = 1 + 2 * need_p + 2 * need_t
        size = self.slab_bwd
        nss, nsg = min(d, size + 4 * r), min(d, size + 2 * r)
        moments = torch.empty(5 * self.nc * nss * self.hw, dtype=p.acc, device=pred.device)
        gmaps = torch.empty(maps * self.nc * nsg * self.hw, dtype=p.acc, device=pred.device)
        filtered = moments[: maps * self.nc * nsg * self.hw]  # the moments are dead once the maps are written
        dp = torch.empty(pred.shape, dtype=pred.dtype, device=pred.device) if need_p else None
        dt = torch.empty(target.shape, dtype=target.dtype, device=target.device) if need_t else None
        winf = win.flip(-1).contiguous()
        block_w, rows, warps = p.tile
        grad_maps = _kernel("depth_grad_maps", self.taps, self.ds)
        adjoint_plane = _kernel("plane_adjoint", self.taps, maps)
        adjoint_depth = _kernel("depth_adjoint", self.taps, self.ds, need_p, need_t)
        for (g_lo, g_hi), (olo, ohi) in self._slabs(size, r):
            m_lo, m_hi = max(0, olo - 2 * r), min(d, ohi + 2 * r)
            self._plane_moments(pred, target, win, moments, m_lo, m_hi, nss)
            self._launch(grad_maps, self._depth_grid(g_hi - g_lo), self.warps,
                         moments, win, gscalar, gmap, gmaps, self.nc, c, d, self.hw, nss, m_lo, m_hi, g_lo, g_hi,
                         nsg, g_lo, *p.consts, p.count, self.ds, self.block, p.acc_tl, p.clamp, has_gmap,
                         p.reduce_mean, need_p, need_t)
            self._launch(adjoint_plane, self._plane_grid(g_hi - g_lo), warps,
                         gmaps, winf, filtered, self.nc, c, h, w, g_lo, g_hi - g_lo, g_lo, nsg, block_w, rows,
                         p.acc_tl)
            self._launch(adjoint_depth, self._depth_grid(ohi - olo), self.warps,
                         filtered, winf, pred, target, dp if need_p else filtered, dt if need_t else filtered,
                         self.nc, c, d, w, self.hw, nsg, g_lo, g_hi, olo, ohi, *p.sx, *p.sy, self.ds, self.block,
                         p.acc_tl)
        return dp, dt


__all__ = ["BLOCK", "DEPTH_BLOCK", "SlabLNCC", "default_slabs"]
