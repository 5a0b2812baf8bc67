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

import torch

from fusedsim.core.codegen import jit_from_source
from fusedsim.core.launch import Launcher
from fusedsim.core.state import cached
from fusedsim.families.registration.lncc_slab_source import (
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


@cached(maxsize=None)
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


def default_slabs(d: int, taps: int, maps: int = 3, budget_maps: int = 4) -> tuple[int, int]:
    """(forward slab, backward slab) sizes for depth d: the scratch (five moment slices per input slice, plus
    ``maps`` gradient-map slices per slice in the backward) holds at most ``budget_maps`` full-size maps. With
    four, the backward's peak (scratch and the gradient) stays below that of a fused kernel keeping ncc and three
    coefficient maps, and every slab fewer saves four launches and 2(K - 1) recomputed halo slices."""
    halo = taps - 1
    budget = budget_maps * d
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
        self._launchers: dict = {}
        self._bwd_steps: dict = {}
        self._winf: tuple = (None, -1, None)  # (window, its version, flipped copy)
        r = self.taps // 2
        self.fwd_slabs = self._slabs(self.slab_fwd, r)
        # per slab, everything but the tensors is fixed: launchers (grid included), slice ranges, partial bases
        depth = _kernel("depth_forward", self.taps, self.ds)
        self._fwd_steps, total = [], 0
        for i, ((lo, hi), (olo, ohi)) in enumerate(self.fwd_slabs):
            grid = self._depth_grid(ohi - olo)
            self._fwd_steps.append((self._plane_moments_launcher(hi - lo), self._launcher(depth, grid, self.warps),
                                    lo, hi, olo, ohi, total, int(i == len(self.fwd_slabs) - 1)))
            total += grid[0] * grid[1] * grid[2]
        self.nparts = total

    # ------------------------------------------------------------------------------------------- geometry
    def _slabs(self, size: int, halo: int) -> list[tuple[tuple[int, int], tuple[int, int]]]:
        """((in_lo, in_hi), (out_lo, out_hi)) per slab: output slices and the input slices within ``halo``."""
        d = self.plan.dims[2]
        return [((max(0, s - halo), min(d, s + size + halo)), (s, min(d, s + size))) for s in range(0, d, size)]

    def _depth_grid(self, slices: int) -> tuple[int, int, int]:
        return -(-self.hw // self.block), -(-slices // self.ds), self.nc

    def _plane_grid(self, slices: int) -> tuple[int, int, int]:
        block_w, rows, _ = self.plan.tile
        _, _, _, h, w = self.plan.dims
        return -(-w // block_w), -(-h // rows), self.nc * slices

    def _launcher(self, kernel, grid, warps: int) -> Launcher:
        """One launcher per (kernel, grid): slabs of equal size share it (and its compiled-kernel lookups)."""
        key = (id(kernel), grid)
        if key not in self._launchers:
            self._launchers[key] = Launcher(kernel, grid, num_warps=warps)
        return self._launchers[key]

    def _plane_moments_launcher(self, slices: int) -> Launcher:
        return self._launcher(_kernel("plane_moments", self.taps), self._plane_grid(slices), self.plan.tile[2])

    def _plane_moments(self, launch, pred, target, win, scr, lo: int, hi: int, nss: int) -> None:
        p = self.plan
        _, c, _, h, w = p.dims
        block_w, rows, _ = p.tile
        launch(pred, target, win, scr, self.nc, c, h, w, *p.sx, *p.sy, lo, hi - lo, lo, nss, 0, block_w, rows,
               p.acc_tl)

    def _flipped(self, win):
        """The adjoint window (``win`` flipped along its taps), kept while ``win`` is the same unchanged tensor: the
        public call passes one cached table, and a copy per call is a launch and an allocation."""
        src, version, winf = self._winf
        if src is not win or version != win._version:
            winf = win.flip(-1).contiguous()
            self._winf = (win, win._version, winf)
        return winf

    # -------------------------------------------------------------------------------------------- forward
    def forward(self, pred, target, win, out, part, cnt, write_map: bool) -> None:
        p = self.plan
        _, c, d, _, _ = p.dims
        nss = min(d, self.slab_fwd + 2 * (self.taps // 2))
        scr = torch.empty(5 * self.nc * nss * self.hw, dtype=p.acc, device=pred.device)
        for plane, depth, lo, hi, olo, ohi, pbase, last in self._fwd_steps:
            self._plane_moments(plane, pred, target, win, scr, lo, hi, nss)
            depth(scr, win, part, cnt, out, self.nc, c, d, self.hw, nss, lo, hi, olo, ohi, pbase, last, *p.consts,
                  p.count, self.ds, self.block, p.acc_tl, p.clamp, write_map, p.reduce_mean, _RBLOCK)

    # ------------------------------------------------------------------------------------------- backward
    def _backward_steps(self, need_p: bool, need_t: bool) -> list[tuple]:
        """Per backward slab: its four launchers and slice ranges (moments, gradient maps, outputs)."""
        key = (need_p, need_t)
        if key not in self._bwd_steps:
            d, r = self.plan.dims[2], self.taps // 2
            maps = 1 + 2 * need_p + 2 * need_t
            warps = self.plan.tile[2]
            grad_maps = _kernel("depth_grad_maps", self.taps, self.ds)
            adjoint_plane = _kernel("plane_adjoint", self.taps, maps)
            adjoint_depth = _kernel("depth_adjoint", self.taps, self.ds, need_p, need_t)
            steps = []
            for (g_lo, g_hi), (olo, ohi) in self._slabs(self.slab_bwd, r):
                m_lo, m_hi = max(0, olo - 2 * r), min(d, ohi + 2 * r)
                steps.append((self._plane_moments_launcher(m_hi - m_lo),
                              self._launcher(grad_maps, self._depth_grid(g_hi - g_lo), self.warps),
                              self._launcher(adjoint_plane, self._plane_grid(g_hi - g_lo), warps),
                              self._launcher(adjoint_depth, self._depth_grid(ohi - olo), self.warps),
                              m_lo, m_hi, g_lo, g_hi, olo, ohi))
            self._bwd_steps[key] = steps
        return self._bwd_steps[key]

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
        winf = self._flipped(win)
        block_w, rows, _ = p.tile
        for plane, grad_maps, adjoint_plane, adjoint_depth, m_lo, m_hi, g_lo, g_hi, olo, ohi in \
                self._backward_steps(need_p, need_t):
            self._plane_moments(plane, pred, target, win, moments, m_lo, m_hi, nss)
            grad_maps(moments, win, gscalar, gmap, gmaps, self.nc, c, d, self.hw, nss, m_lo, m_hi, g_lo, g_hi, nsg,
                      g_lo, *p.consts, p.count, self.ds, self.block, p.acc_tl, p.clamp, has_gmap, p.reduce_mean,
                      need_p, need_t)
            adjoint_plane(gmaps, winf, filtered, self.nc, c, h, w, g_lo, g_hi - g_lo, g_lo, nsg, block_w, rows,
                          p.acc_tl)
            adjoint_depth(filtered, winf, pred, target, dp if need_p else filtered, dt if need_t else filtered,
                          self.nc, c, d, w, self.hw, nsg, g_lo, g_hi, olo, ohi, *p.sx, *p.sy, self.ds, self.block,
                          p.acc_tl)
        return dp, dt


__all__ = ["BLOCK", "DEPTH_BLOCK", "SlabLNCC", "default_slabs"]
