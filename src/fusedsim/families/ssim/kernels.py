"""Fused SSIM kernels (Triton) and their plans for the ops ``ssim_reduce`` (SSIM, its reductions, the fused L1+SSIM loss, the map) and
``ms_ssim_stats`` (2-D MS-SSIM: every level's per-plane SSIM and cs means in one autograd node).

    ssim_reduce(x, y, win, c1, c2, valid, symmetric, reduce, ssim_weight) -> out

x, y: (N, C, H, W) or (N, C, D, H, W), any strides, float16/bfloat16/float32/float64; win: (C, K) window per
channel in the accumulation dtype (float32, float64 for float64 inputs). ``valid=False`` is zero padding with the
full-size map. ``reduce``: 1 mean (0-d), 2 per image (N,), 3 per plane (N, C), 0 per-plane SSIM and cs means
(2, N, C), -1 the SSIM map. ``ssim_weight`` >= 0 turns each plane's value into the loss
(1 - w)·mean|x - y| + w·(1 - mean SSIM), the L1 term fused into the same passes (2-D and 3-D).

One launch forward (the last program reduces the partial sums in a fixed order: deterministic), one launch
backward for 2-D (two for 3-D); no host synchronisation anywhere (the backward reads the upstream gradient from the
device). Training calls of SSIM with a scalar reduction (mean, per image, per plane; the L1 term included; 2-D
and 3-D) go through :meth:`SSIMPlan.forward_for_grad`: the forward also writes the gradient maps for a unit
upstream gradient (12 bytes a pixel for one input's gradient, 16 for both) and the backward only filters them
with the flipped window. Everything else (the map output, MS-SSIM levels, ``torch.compile``'s custom op)
recomputes the statistics in the backward and keeps nothing but the inputs.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from fusedsim.core.codegen import jit_from_source
from fusedsim.core.launch import Launcher, register_cap
from fusedsim.core.lane_shift import MAX_SHIFT as LANE_REACH
from fusedsim.core.state import cached
from fusedsim.families.ssim.ms_combine import ms_combine_group, ms_factor, ms_pow
from fusedsim.families.ssim.kernel_source import (
    REDUCE_CHANNEL,
    REDUCE_IMAGE,
    REDUCE_MEAN,
    REDUCE_NONE,
    REDUCE_STATS,
    render_forward,
    render_grad_conv,
    render_grad_fused_2d,
    render_grad_maps,
    render_grad_saved_2d,
)
from fusedsim.core.kernel_args import sm_count, split_blocks, strides5, tl_dtype
from fusedsim.core.stream_buffers import stream_counter as launch_counter
from fusedsim.core.stream_buffers import stream_scratch, stream_scratch_and_counter
from fusedsim.core.waves import resident_programs, segment_rows
from fusedsim.core.moments.twin import compute_dtype
from fusedsim.families.ssim.ops import ms_ssim, ssim_reduce

# Ints that vary between calls of one plan (upstream-gradient offsets and strides) are not specialised on, nor are
# the rows per program (RS, chosen per shape by ops/waves.py: one compiled kernel serves every choice).
_VARYING = ["g_off_s", "g_off_cs", "gsn", "gsc", "RS"]
_RBLOCK_PER_WARP = 256  # partial sums read per step by the reducing program, per warp (8 a thread)
# Shortest forward row segment per program when the grid is small (benchmarks/tune_ssim.py; NOTES.md)
FWD_MIN_ROWS = 32
# Register caps of the training pair (forward saving the gradient maps, backward filtering them): uncapped, both
# run at 3-4 programs per multiprocessor; capped they fit more (H200, Triton 3.6, 5x5x1080x1920: forward
# 0.83 -> 0.69 ms at 120, the same cap with the fused L1 term; backward with lane-shifted taps 0.71 -> 0.55 ms
# at 72; benchmarks/NOTES.md).
SAVE_MAXNREG, SAVED_BWD_MAXNREG = 120, 72


@cached(maxsize=None)
def _kernel(kind: str, taps: int, three_d: bool, unroll: bool = True, ms_levels: int = 0):
    ms = f"_ms{ms_levels}" if ms_levels else ""
    name = f"_ssim_{kind}_{'3d' if three_d else '2d'}_k{taps}{'' if unroll else '_nu'}{ms}_kernel"
    renderers = {"fwd": lambda: render_forward(taps, three_d, name, unroll=unroll, ms_levels=ms_levels),
                 "grad_maps": lambda: render_grad_maps(taps, three_d, name),
                 "grad_conv": lambda: render_grad_conv(taps, three_d, name)}
    varying = {"grad_maps": _VARYING, "grad_conv": ["g_off_s", "gsn", "gsc"]}.get(kind, ["RS"])
    return jit_from_source(name, renderers[kind](), do_not_specialize=varying)


@cached(maxsize=None)
def _fused_backward_kernel(taps: int, maps: tuple[str, ...], unroll: bool, ms_levels: int = 0):
    ms = f"_ms{ms_levels}" if ms_levels else ""
    name = f"_ssim_grad_fused_2d_k{taps}_{'_'.join(maps)}{'_u' if unroll else ''}{ms}_kernel"
    # the MS-SSIM level index varies between the levels sharing one compiled kernel
    return jit_from_source(name, render_grad_fused_2d(taps, maps, name, unroll=unroll, ms_levels=ms_levels),
                           do_not_specialize=_VARYING + (["ms_level"] if ms_levels else []))


@cached(maxsize=None)
def _saved_backward_kernel(taps: int, maps: tuple[str, ...], unroll: bool, lanes: bool = False):
    name = f"_ssim_grad_saved_2d_k{taps}_{'_'.join(maps)}{'_u' if unroll else ''}{'_ln' if lanes else ''}_kernel"
    return jit_from_source(name, render_grad_saved_2d(taps, maps, name, unroll=unroll, lanes=lanes),
                           do_not_specialize=_VARYING)


def _lanes_fit(taps: int, block_w: int, warps: int) -> bool:
    """Whether the W taps can be lane shifts (``ops/lane_shift.py``) at full speed: one column per thread in
    whole warps, and a window whose reach (K - 1 columns in ``valid`` mode) stays within the neighbouring
    32-column segment."""
    return taps - 1 <= LANE_REACH and block_w >= 32 and block_w == 32 * warps


# Registers per thread of the forward, which set how many of its programs share a multiprocessor in the
# rows-per-program model (ops/waves.py): uncapped, 128 at K = 11 on Triton 3.6; the saving forward is capped at
# 120, the same 4 programs of 4 warps. The saved-maps backward's is its cap, SAVED_BWD_MAXNREG.
FWD_REGISTERS = 128


def _backward_rows(rows_total: int, other_programs: int, device: torch.device, halo: int) -> int:
    """Rows per program of the recomputing fused backward: the fewest waves times the rows each program streams
    (its rows plus the 2(K-1) halo), at 3 resident programs per multiprocessor (158 registers per thread), among
    128, 64 and 32. Measured at the training shapes and the MS-SSIM levels (benchmarks/NOTES.md); the makespan
    model of the other kernels chose worse for this one at batch 1 (it is bound by its work, not its waves)."""
    slots = 3 * sm_count(device)
    if not slots:
        return 128

    def cost(rows: int) -> int:
        programs = other_programs * triton.cdiv(rows_total, rows)
        return triton.cdiv(programs, slots) * (min(rows, rows_total) + halo)

    return min((128, 64, 32), key=lambda rows: (cost(rows), -rows))


def _segment_rows(out_rows: int, strips: int, planes: int, device: torch.device | None, halo: int, registers: int,
                  warps: int, min_rows: int) -> int:
    """Output rows per program that minimise the grid's estimated makespan (:func:`waves.segment_rows`) on this
    GPU; 128 without one (Triton's interpreter)."""
    sms = sm_count(device) if device is not None else 0
    if not sms:
        return 128
    slots = resident_programs(registers, warps) * sms
    return segment_rows(out_rows, strips, planes, slots, halo, min_rows)


def _tile(width: int, out_rows: int = 0, planes: int = 0, device: torch.device | None = None,
          min_rows: int = 128, *, halo: int = 0, registers: int = FWD_REGISTERS) -> tuple[int, int, int]:
    """(columns per program, output rows per program, warps): one column per thread; rows by the makespan model
    when a device is given, else 128."""
    block_w = min(128, max(16, triton.next_power_of_2(width)))
    warps = max(1, block_w // 32)
    rows = 128 if device is None else _segment_rows(out_rows, triton.cdiv(width, block_w), planes, device, halo,
                                                    registers, warps, min_rows)
    return block_w, rows, warps


def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= s
    return tuple(reversed(out))


class SSIMPlan:
    """Launch geometry, kernels and constants of one SSIM computation, fixed by shapes, strides, dtypes and
    options. ``forward(x, y, win) -> (out, ())``; ``backward((x, y, win), saved, g, needs) -> (dx, dy, None)``.
    Tuning knobs: ``fwd_tile`` / ``bwd_tile`` = (columns, rows, warps), ``fwd_unroll`` / ``bwd_unroll``,
    ``save_maxnreg`` / ``saved_bwd_maxnreg`` (register caps of the training pair; None: uncapped),
    ``saved_bwd_lanes`` (the 2-D backward from saved maps takes its W taps by warp shuffles where the tile allows;
    False: by shifted loads).
    ``ms`` = (levels, level): a level of the fused MS-SSIM path (:class:`MSSSIMPlan`), whose
    kernels fold in the combine (forward of the last level) and its gradient (backward of every level)."""

    def __init__(self, shape, sx, sy, dtype: torch.dtype, device: torch.device, taps: int, c1: float, c2: float,
                 valid: bool, symmetric: bool, reduce: int, ssim_weight: float = -1.0, up_shape=None, *,
                 fwd_tile=None, bwd_tile=None, fwd_unroll: bool = True, bwd_unroll: bool = False,
                 ms: tuple[int, int] | None = None, save_maxnreg: int | None = SAVE_MAXNREG,
                 saved_bwd_maxnreg: int | None = SAVED_BWD_MAXNREG, saved_bwd_lanes: bool = True) -> None:
        self.shape, self.dtype, self.device = tuple(shape), dtype, device
        self.device_index = (device.index if device.index is not None else torch.cuda.current_device()
                             ) if device.type == "cuda" else None
        self.taps, self.c1, self.c2, self.valid, self.symmetric = taps, c1, c2, valid, symmetric
        self.reduce, self.with_l1 = reduce, ssim_weight >= 0
        self.ssim_weight = ssim_weight
        self.three_d = len(shape) == 5
        n, c = shape[:2]
        d, h, w = shape[2:] if self.three_d else (1, *shape[2:])
        shrink = taps - 1 if valid else 0
        do, ho, wo = (d - shrink if self.three_d else 1), h - shrink, w - shrink
        self.n, self.c, self.dhw, self.out_dhw = n, c, (d, h, w), (do, ho, wo)
        self.sx, self.sy = strides5(shape, sx), strides5(shape, sy)
        for s, name in ((self.sx, "x"), (self.sy, "y")):
            if w * abs(s[4]) >= 2**31:
                raise ValueError(f"{name} rows span more than 2**31 elements; make the tensor contiguous first")
        self.off = taps // 2 if valid else 0
        self.acc = compute_dtype(dtype)
        self.acc_tl = tl_dtype(dtype)
        self.count = do * ho * wo
        self.l1_count = d * h * w
        self.up_shape = up_shape  # next MS-SSIM level (H, W), its gradient is added through the pooling adjoint
        self.bwd_tile, self.bwd_unroll = bwd_tile, bwd_unroll
        self.saved_bwd_lanes = saved_bwd_lanes
        if self.with_l1 and self.three_d and reduce == REDUCE_STATS:
            raise ValueError("the fused L1 term has no per-plane statistics output")
        if ms is not None and (reduce != REDUCE_STATS or self.three_d or self.with_l1):
            raise ValueError("an MS-SSIM level is a 2-D per-plane statistics plan without the L1 term")
        self.ms_levels, ms_level = ms if ms is not None else (0, -1)
        fwd_ms = self.ms_levels if ms_level == self.ms_levels - 1 else 0  # the combine: last level only

        block_w, rows, warps = fwd_tile or _tile(wo, ho, n * c * do, device, FWD_MIN_ROWS, halo=taps - 1)
        grid = (triton.cdiv(wo, block_w), triton.cdiv(ho, rows), n * c * do)
        self.nprog = grid[0] * grid[1] * grid[2]
        self.part_len = (3 if self.with_l1 else 2) * self.nprog
        self.out_shape = {REDUCE_MEAN: (), REDUCE_IMAGE: (n,), REDUCE_CHANNEL: (n, c), REDUCE_STATS: (2, n, c),
                          REDUCE_NONE: tuple(shape[:2]) + ((do,) if self.three_d else ()) + (ho, wo)}[reduce]
        fwd_kernel = _kernel("fwd", taps, self.three_d, fwd_unroll, fwd_ms)
        self._fwd = Launcher(fwd_kernel, grid, raw_pointers=True, num_warps=warps, enable_fp_fusion=True)
        w_hi, w_lo = split_blocks(ssim_weight if self.with_l1 else 0.0)
        self._fwd_tail = (c, d, h, w, do, ho, wo, *self.sx, *self.sy, c1, c2, self.count, self.l1_count, w_hi, w_lo,
                          self.off, block_w, rows, self.acc_tl, reduce == REDUCE_NONE, self.with_l1, reduce,
                          _RBLOCK_PER_WARP * warps)
        # forward + saved gradient maps (training): scalar reductions of single-scale SSIM, 2-D and 3-D; the backward
        # then filters the maps instead of recomputing the statistics (benchmarks/NOTES.md, "Saved gradient maps")
        self.saves_maps = not self.ms_levels and reduce in (REDUCE_MEAN, REDUCE_IMAGE, REDUCE_CHANNEL)
        self._maps_plane = (n * c * do, ho, wo)  # a saved map's slot
        self._saved_bwd_cap = register_cap(device, saved_bwd_maxnreg)
        save_cap = {} if self.three_d else register_cap(device, save_maxnreg)  # caps measured on the 2-D kernels
        # per (save ax, save ay): the launcher, the maps' shape and the scalar tail, fixed so a training call
        # binds only its tensors
        self._fwd_saving = {
            (ax, ay): (Launcher(fwd_kernel, grid, raw_pointers=True, num_warps=warps, enable_fp_fusion=True,
                                **save_cap), (2 + ax + ay, *self._maps_plane), (*self._fwd_tail, ax, ay))
            for ax, ay in ((True, False), (False, True), (True, True))
        } if self.saves_maps else {}
        self._bwd: dict = {}
        self._ws_split = split_blocks(-ssim_weight if self.with_l1 else 1.0)
        l1_weight, l1_divisor = self._l1_scale()
        self._l1_split = (*split_blocks(l1_weight), l1_divisor)

    # ----------------------------------------------------------------------------------------------- forward
    def forward(self, x: torch.Tensor, y: torch.Tensor, win: torch.Tensor, out: torch.Tensor | None = None,
                part: torch.Tensor | None = None, counter: torch.Tensor | None = None, ms_args: tuple = ()):
        """``out``, ``part`` (``part_len`` values of the accumulation dtype) and ``counter`` (:func:`launch_counter`)
        may be given by a caller that runs several plans (MS-SSIM: one allocation for all levels). ``ms_args``:
        the last fused MS-SSIM level's (all statistics, weights, MS-SSIM output, planes per group, reduce).
        The forward that also writes the unit gradient maps is :meth:`forward_for_grad`."""
        if part is None and counter is None and self.reduce != REDUCE_NONE:
            part, counter = stream_scratch_and_counter(x.device, self.device_index, self.part_len, self.acc)
        elif part is None:
            part = stream_scratch(x.device, self.device_index, self.part_len, self.acc)
        if out is None:
            out = torch.empty(self.out_shape, dtype=self.acc, device=x.device)
        if self.reduce == REDUCE_NONE:
            self._fwd(x, y, win, part, part, part, out, part, *self._fwd_tail, False, False)
        else:
            if counter is None:
                counter = launch_counter(self.device, self.device_index)
            self._fwd(x, y, win, part, counter, out, part, part, *self._fwd_tail, False, False, *ms_args)
        return out, ()

    def forward_for_grad(self, needs, x: torch.Tensor, y: torch.Tensor, win: torch.Tensor):
        """The forward of a call that will be differentiated (``needs``: which of x, y need a gradient): where the
        plan can, it also writes the unit gradient maps (bm, cm, ax and/or ay; (slots, N*C*DO, HO, WO),
        accumulation dtype, 12-16 bytes a pixel) and returns them as the saved state, so the backward only
        filters them."""
        saving = self._fwd_saving.get((needs[0], needs[1]))
        if saving is None:  # no gradient asked for, or a plan that recomputes in its backward
            return self.forward(x, y, win)
        launcher, maps_shape, tail = saving
        device = x.device
        part, counter = stream_scratch_and_counter(device, self.device_index, self.part_len, self.acc)
        out = torch.empty(self.out_shape, dtype=self.acc, device=device)
        maps = torch.empty(maps_shape, dtype=self.acc, device=device)
        launcher.fast(x, y, win, part, counter, out, part, maps, *tail)
        return out, (maps,)

    @staticmethod
    def _check_saved(maps: torch.Tensor, slots: int) -> None:
        """Autograd asks the backward for the gradients the forward was told of, so the slots must match."""
        if maps.shape[0] != slots:
            raise RuntimeError(f"the saved SSIM gradient maps hold {maps.shape[0]} slots, {slots} are needed")

    # ---------------------------------------------------------------------------------------------- backward
    def _grad_layout(self, g: torch.Tensor, g_offset: int = 0):
        """(G, offset of the SSIM slot, offset of the cs slot, stride over images, stride over channels, weight,
        divisor) per the upstream-gradient convention of ``ssim_source``."""
        w, div = (-self.ssim_weight if self.with_l1 else 1.0), self._scalar_divisor()
        if self.reduce == REDUCE_MEAN:
            return g, g_offset, g_offset, 0, 0, w, div
        if self.reduce == REDUCE_IMAGE:
            return g, g_offset, g_offset, g.stride(0), 0, w, div
        if self.reduce == REDUCE_CHANNEL:
            return g, g_offset, g_offset, g.stride(0), g.stride(1), w, div
        s_slot, sn, sc = g.stride()[-3:]
        return g, g_offset, g_offset + s_slot, sn, sc, 1.0, self.count

    def _scalar_divisor(self) -> int:
        """Pixels averaged into one value of the output: all planes (mean), one image's planes, or one plane."""
        return {REDUCE_MEAN: self.n * self.c * self.count, REDUCE_IMAGE: self.c * self.count}.get(self.reduce,
                                                                                                  self.count)

    def _l1_scale(self) -> tuple[float, int]:
        if not self.with_l1:
            return 0.0, 1
        planes = {REDUCE_MEAN: self.n * self.c, REDUCE_IMAGE: self.c}.get(self.reduce, 1)
        return 1.0 - self.ssim_weight, planes * self.l1_count

    def backward(self, tensors, saved, g, needs, g_offset: int = 0, up=(None, None), buffers=None, ms_args=()):
        """``buffers``: optional (scratch, dx, dy) to write into (:meth:`backward_scratch_len` values of the
        accumulation dtype; gradients shaped like the inputs), for a caller that runs several plans. ``ms_args``:
        a fused MS-SSIM level's (all statistics, weights, planes per group, level, reduce); ``g`` is then the
        gradient of the MS-SSIM value."""
        x, y, win = tensors[:3]
        need_dx, need_dy = bool(needs[0]), bool(needs[1])
        if not (need_dx or need_dy):
            return None, None, None
        if saved and not self.three_d:  # 2-D, from the unit gradient maps of forward_for_grad: a training step
            return self._backward_saved(x, y, win, saved[0], g, need_dx, need_dy)
        if self.three_d:
            return (*self._backward_3d(x, y, win, g, need_dx, need_dy, saved[0] if saved else None), None)
        return (*self._backward_2d(x, y, win, g, need_dx, need_dy, g_offset, up, buffers, ms_args), None)

    def _backward_saved(self, x, y, win, maps, g, need_dx, need_dy):
        """(dx, dy, None) (2-D) from the unit gradient maps of :meth:`forward_for_grad`."""
        entry = self._bwd.get((need_dx, need_dy))
        if entry is None:
            entry = self._bwd[(need_dx, need_dy)] = self._saved_backward_entry(need_dx, need_dy)
        launcher, slots, constants, tail = entry
        if maps.shape[0] != slots:
            self._check_saved(maps, slots)
        dx = torch.empty(self.shape, dtype=self.dtype, device=self.device) if need_dx else maps
        dy = torch.empty(self.shape, dtype=y.dtype, device=self.device) if need_dy else maps
        adjoint = win if self.symmetric else self._adjoint_window(win)
        if self.reduce == REDUCE_MEAN:  # a 0-d upstream gradient: the layout is fixed
            launcher.fast(x, y, maps, adjoint, g, 0, 0, 0, 0, *constants, dx, dy, *tail)
        else:
            G, off_s, off_cs, gsn, gsc = self._grad_layout(g)[:5]
            launcher.fast(x, y, maps, adjoint, G, off_s, off_cs, gsn, gsc, *constants, dx, dy, *tail)
        return (dx if need_dx else None), (dy if need_dy else None), None

    def _saved_backward_entry(self, need_dx: bool, need_dy: bool):
        """(launcher, map slots, the constant scalars after the upstream layout, the arguments after dx/dy) of the
        backward from saved maps: fixed per plan, so a training step's backward binds only its tensors."""
        names = ("bm", "cm") + (("ax",) if need_dx else ()) + (("ay",) if need_dy else ())
        (_, h, w), (_, ho, wo), (n, c), sx, sy = self.dhw, self.out_dhw, (self.n, self.c), self.sx, self.sy
        block_w, rows, warps = self.bwd_tile or _tile(w, h, n * c, self.device, FWD_MIN_ROWS, halo=self.taps - 1,
                                                      registers=SAVED_BWD_MAXNREG)
        grid = (triton.cdiv(w, block_w), triton.cdiv(h, rows), n * c)
        lanes = self.saved_bwd_lanes and _lanes_fit(self.taps, block_w, warps)
        kernel = _saved_backward_kernel(self.taps, names, self.bwd_unroll, lanes)
        launcher = Launcher(kernel, grid, raw_pointers=True, num_warps=warps, enable_fp_fusion=True,
                            **self._saved_bwd_cap)
        constants = (*self._ws_split, self._scalar_divisor(), *self._l1_split)
        tail = (self.c, h, w, ho, wo, sx[0], sx[1], sx[3], sx[4], sy[0], sy[1], sy[3], sy[4], self.off, block_w, rows,
                self.acc_tl, self.with_l1)
        return launcher, len(names), constants, tail

    def _adjoint_window(self, win):
        return win if self.symmetric else win.flip(-1).contiguous()

    def _backward_entry(self, need_dx: bool, need_dy: bool, has_up: bool):
        """(launcher, scratch length, block width, rows) of the fused 2-D backward for these gradients."""
        taps, (n, c), (_, h, w) = self.taps, (self.n, self.c), self.dhw
        maps = ("bm", "cm") + (("ax",) if need_dx else ()) + (("ay",) if need_dy else ())
        key = (maps, has_up)
        entry = self._bwd.get(key)
        if entry is None:
            block_w = max(min(128, triton.next_power_of_2(w + taps - 1)), triton.next_power_of_2(2 * (taps - 1)), 16)
            warps = max(1, block_w // 32)
            rows = _backward_rows(h, n * c * triton.cdiv(w, block_w - (taps - 1)), self.device, 2 * (taps - 1))
            if self.bwd_tile:
                block_w, rows, warps = self.bwd_tile
            grid = (triton.cdiv(w, block_w - (taps - 1)), triton.cdiv(h, rows), n * c)
            launcher = Launcher(_fused_backward_kernel(taps, maps, self.bwd_unroll, self.ms_levels), grid,
                                raw_pointers=True, num_warps=warps, enable_fp_fusion=True)
            scratch = grid[0] * grid[1] * grid[2] * 2 * len(maps) * block_w
            entry = self._bwd[key] = (launcher, scratch, block_w, rows)
        return entry

    def backward_scratch_len(self, need_dx: bool, need_dy: bool, has_up: bool) -> int:
        return self._backward_entry(need_dx, need_dy, has_up)[1]

    def _ms_grad_layout(self, g: torch.Tensor):
        """The fused MS-SSIM level's upstream: the caller's gradient of the MS-SSIM value, read per plane as
        G[(nc // C) * gsn + (nc % C) * gsc] (0-d mean, per image, per plane), any strides."""
        gsn = g.stride(0) if g.dim() >= 1 else 0
        gsc = g.stride(1) if g.dim() == 2 else 0
        return g, 0, 0, gsn, gsc, 1.0, self.count

    def _backward_2d(self, x, y, win, g, need_dx, need_dy, g_offset, up, buffers=None, ms_args=()):
        c, (_, h, w), (_, ho, wo) = self.c, self.dhw, self.out_dhw
        has_up = up[0] is not None or up[1] is not None
        launcher, scratch_len, block_w, rows = self._backward_entry(need_dx, need_dy, has_up)
        if buffers is not None:
            scratch, dx, dy = buffers
        else:
            scratch = stream_scratch(x.device, self.device_index, scratch_len, self.acc)
            dx = torch.empty(x.shape, dtype=x.dtype, device=x.device) if need_dx else None
            dy = torch.empty(y.shape, dtype=y.dtype, device=y.device) if need_dy else None
        is_map = self.reduce == REDUCE_NONE
        if is_map:
            gmap, G, off_s, off_cs, gsn, gsc, ws, div_s = g.contiguous(), g, 0, 0, 0, 0, 1.0, 1
        else:
            gmap = scratch
            layout = self._ms_grad_layout(g) if self.ms_levels else self._grad_layout(g, g_offset)
            G, off_s, off_cs, gsn, gsc, ws, div_s = layout
        ws_hi, ws_lo = split_blocks(ws) if is_map else self._ws_split
        wl_hi, wl_lo, div_l1 = self._l1_split
        hu, wu = self.up_shape or (1, 1)
        upx = up[0] if up[0] is not None else scratch
        upy = up[1] if up[1] is not None else scratch
        sx, sy = self.sx, self.sy
        launcher(x, y, win, self._adjoint_window(win), G, off_s, off_cs, gsn, gsc, ws_hi, ws_lo, div_s,
                 wl_hi, wl_lo, div_l1, gmap if is_map else G, upx, upy, hu, wu,
                 dx if dx is not None else scratch, dy if dy is not None else scratch, scratch,
                 c, h, w, ho, wo, sx[0], sx[1], sx[3], sx[4], sy[0], sy[1], sy[3], sy[4], self.c1, self.c2,
                 self.off, block_w, rows, self.acc_tl, True, self.reduce == REDUCE_STATS, is_map, self.with_l1,
                 has_up, self.symmetric, *ms_args)
        return dx, dy

    def _backward_3d(self, x, y, win, g, need_dx, need_dy, saved_maps=None):
        """Two passes: the gradient maps (recomputed, scaled by the upstream gradient), then their adjoint filter;
        with ``saved_maps`` (unit maps of :meth:`forward_for_grad`) only the second, scaling as it combines."""
        taps, (n, c), (d, h, w), (do, ho, wo) = self.taps, (self.n, self.c), self.dhw, self.out_dhw
        slots, ax_slot, ay_slot = 2, -1, -1
        if need_dx:
            ax_slot, slots = slots, slots + 1
        if need_dy:
            ay_slot, slots = slots, slots + 1
        ncd = n * c * do
        G, off_s, off_cs, gsn, gsc, ws, div_s = self._grad_layout(g) if self.reduce != REDUCE_NONE else (
            g, 0, 0, 0, 0, 1.0, 1)
        ws_hi, ws_lo = split_blocks(ws)
        if saved_maps is not None:
            self._check_saved(saved_maps, slots)
            maps = saved_maps
        else:
            maps = self._grad_maps_3d(x, y, win, g, G, off_s, off_cs, gsn, gsc, ws_hi, ws_lo, div_s, slots, ax_slot,
                                      ay_slot)
        dx = torch.empty(x.shape, dtype=x.dtype, device=x.device) if need_dx else None
        dy = torch.empty(y.shape, dtype=y.dtype, device=y.device) if need_dy else None
        block_w, rows, warps = _tile(w)
        grid = (triton.cdiv(w, block_w), triton.cdiv(h, rows), n * c * d)
        _kernel("grad_conv", taps, True)[grid](
            x, y, maps, self._adjoint_window(win), dx if dx is not None else maps, dy if dy is not None else maps,
            G, off_s, gsn, gsc, ws_hi, ws_lo, div_s, *self._l1_split,
            ncd, c, d, h, w, do, ho, wo, *self.sx, *self.sy, OFF=self.off, BW=block_w, RS=rows, ACC=self.acc_tl,
            AX_SLOT=ax_slot, AY_SLOT=ay_slot, SCALED=saved_maps is not None, HAS_L1=self.with_l1, num_warps=warps,
            enable_fp_fusion=True)
        return dx, dy

    def _grad_maps_3d(self, x, y, win, g, G, off_s, off_cs, gsn, gsc, ws_hi, ws_lo, div_s, slots, ax_slot, ay_slot):
        """The 3-D gradient maps for this upstream gradient (per plane, or per pixel for the map output)."""
        taps, c, (d, h, w), (do, ho, wo) = self.taps, self.c, self.dhw, self.out_dhw
        ncd = self.n * c * do
        maps = torch.empty((slots, ncd, ho, wo), dtype=self.acc, device=x.device)
        is_map = self.reduce == REDUCE_NONE
        gmap = g.contiguous() if is_map else maps
        block_w, rows, warps = _tile(wo)
        grid = (triton.cdiv(wo, block_w), triton.cdiv(ho, rows), ncd)
        _kernel("grad_maps", taps, True)[grid](
            x, y, win, G, off_s, off_cs, gsn, gsc, ws_hi, ws_lo, div_s, gmap, maps, ncd, c, d, h, w, do, ho, wo,
            *self.sx, *self.sy, self.c1, self.c2, OFF=self.off, BW=block_w, RS=rows, ACC=self.acc_tl,
            HAS_GS=True, HAS_GCS=self.reduce == REDUCE_STATS, HAS_GMAP=is_map, AX_SLOT=ax_slot,
            AY_SLOT=ay_slot, num_warps=warps, enable_fp_fusion=True)
        return maps


@cached(maxsize=256)
def _plan_cached(shape, sx, sy, dtype, device, taps, c1, c2, valid, symmetric, reduce, ssim_weight) -> SSIMPlan:
    return SSIMPlan(shape, sx, sy, dtype, device, taps, c1, c2, valid, symmetric, reduce, ssim_weight)


def _same_device(tensors, names: str) -> None:
    """The plans launch with raw pointers (``Launcher(raw_pointers=True)``): every tensor on the first's device."""
    for t, name in zip(tensors[1:], names.split()[1:]):
        if t.device != tensors[0].device:
            raise ValueError(f"{name} is on {t.device}, {names.split()[0]} on {tensors[0].device}: one device expected")


@ssim_reduce.triton_plan
def ssim_plan(tensors, scalars) -> SSIMPlan:
    """The cached plan of ``ssim_reduce`` for these tensors (shapes, strides, dtype, device) and scalars."""
    x, y, win = tensors
    _same_device(tensors, "x y win")
    c1, c2, valid, symmetric, reduce, ssim_weight = scalars
    return _plan_cached(tuple(x.shape), x.stride(), y.stride(), x.dtype, x.device, win.shape[-1], float(c1),
                        float(c2), bool(valid), bool(symmetric), int(reduce), float(ssim_weight))


# ------------------------------------------------------------------------------------------------------ MS-SSIM
@triton.jit
def _ms_combine_fwd_kernel(STATS, W, OUT, NC, PER, L: tl.constexpr, REDUCE: tl.constexpr, BLOCK: tl.constexpr):
    """Per plane prod_l factor_l ** w_l, reduced over the PER planes of program g (mean: all, image: C, channel:
    written per plane)."""
    ms_combine_group(STATS, W, OUT, NC, PER, tl.program_id(0), L, REDUCE, BLOCK)


@triton.jit
def _ms_combine_bwd_kernel(STATS, W, G, GSTATS, NC, PER, gs0, L: tl.constexpr, REDUCE: tl.constexpr,
                           BLOCK: tl.constexpr):
    """Gradient of the combine w.r.t. every level's SSIM and cs means, (L, 2, N, C); zero where a factor is not
    used or its relu is inactive (as autograd of relu and pow gives)."""
    g = tl.program_id(0)
    for start in range(0, PER, BLOCK):
        q = start + tl.arange(0, BLOCK)
        p = g * PER + q
        ok = (q < PER) & (p < NC)
        if REDUCE == 3:
            gp = tl.load(G + p, mask=ok, other=0.0).to(STATS.dtype.element_ty)
        else:
            gp = tl.load(G + g * gs0).to(STATS.dtype.element_ty) / PER
        for l in tl.static_range(L):
            f, w = ms_factor(STATS, W, p, ok, NC, l, L)
            d = gp * w * ms_pow(f, w - 1.0)
            for m in tl.static_range(L):
                if m != l:
                    fm, wm = ms_factor(STATS, W, p, ok, NC, m, L)
                    d = d * ms_pow(fm, wm)
            d = tl.where(f > 0, d, 0.0)
            zero = tl.zeros([BLOCK], STATS.dtype.element_ty)
            if l == L - 1:  # the SSIM slot is used at the last level, the cs slot at the others
                tl.store(GSTATS + (2 * l) * NC + p, d, mask=ok)
                tl.store(GSTATS + (2 * l + 1) * NC + p, zero, mask=ok)
            else:
                tl.store(GSTATS + (2 * l) * NC + p, zero, mask=ok)
                tl.store(GSTATS + (2 * l + 1) * NC + p, d, mask=ok)


def _aligned(n: int) -> int:
    """``n`` rounded up to 32 elements: buffers carved from one allocation keep the 16-byte alignment that Triton
    specialises on (vectorised loads)."""
    return -(-n // 32) * 32


class MSSSIMPlan:
    """2-D MS-SSIM of pytorch-msssim, one op: ``forward(x, y, win, weights) -> (out, saved)``.

    ``fused_pyramid=True`` (the default): the whole pyramid in one launch (``ops/ms_pyramid.py``), one SSIM launch
    per level writing that level's per-plane SSIM and cs means into a (levels, 2, N, C) buffer, the last level's
    reducing program also combining them (relu, powers, product, reduction): levels + 1 launches. Backward:
    coarsest level first, one launch per level, each deriving its upstream gradient from the saved statistics
    and adding the coarser level's gradient through the pooling adjoint: levels launches.

    ``fused_pyramid=False``: one pooling launch per level and separate combine launches (forward and backward),
    2 levels + 1 launches forward, levels + 1 backward; same values (see tests/ops/test_ms_pyramid.py)."""

    def __init__(self, shape, sx, sy, dtype, device, taps, c1, c2, symmetric, levels, reduce, *,
                 fused_pyramid: bool = True) -> None:
        from fusedsim.families.ssim.avg_pool import avg_pool_plan
        from fusedsim.families.ssim.ms_pyramid import pyramid_plan, pyramid_sizes

        self.levels, self.reduce, self.fused = levels, reduce, fused_pyramid
        n, c = shape[:2]
        sizes = pyramid_sizes(tuple(shape[2:]), levels)
        self.level_plans, self.pool_plans = [], []
        for lvl, hw in enumerate(sizes):
            level_shape = tuple(shape[:2]) + hw
            strides = (sx, sy) if lvl == 0 else (_contiguous_strides(level_shape),) * 2
            up = sizes[lvl + 1] if lvl + 1 < levels else None
            ms = (levels, lvl) if fused_pyramid else None
            self.level_plans.append(SSIMPlan(level_shape, *strides, dtype, device, taps, c1, c2, True, symmetric,
                                             REDUCE_STATS, up_shape=up, ms=ms))
            if lvl + 1 < levels and not fused_pyramid:
                self.pool_plans.append(avg_pool_plan(level_shape, *strides, dtype, device))
        self.pyramid = pyramid_plan(tuple(shape), tuple(sx), tuple(sy), dtype, levels) if (
            fused_pyramid and levels > 1) else None
        self.acc = self.level_plans[0].acc
        self.stats_shape = (levels, 2, n, c)
        self.out_shape = {REDUCE_MEAN: (), REDUCE_IMAGE: (n,), REDUCE_CHANNEL: (n, c)}[reduce]
        per = {REDUCE_MEAN: n * c, REDUCE_IMAGE: c, REDUCE_CHANNEL: 128}[reduce]
        self._per, self._planes = per, n * c
        grid = (triton.cdiv(n * c, per),)
        self._combine = Launcher(_ms_combine_fwd_kernel, grid, num_warps=4)
        self._combine_bwd = Launcher(_ms_combine_bwd_kernel, grid, num_warps=4)
        self.device = device
        self._layout()

    def _layout(self) -> None:
        """Offsets of every level's buffers in the two per-call allocations (one of the input dtype for the
        pyramid, one of the accumulation dtype for partial sums and statistics): 2 allocations instead of 11."""
        self._pool_offsets, total = [], 0
        for pool in self.pool_plans:
            self._pool_offsets.append(total)
            total += _aligned(math.prod(pool.out_shape))
        self._pyramid_len = self.pyramid.length if self.pyramid is not None else total
        self._bwd_layouts: dict[tuple[bool, bool], tuple[list[tuple[int, int]], int]] = {}
        self._coarse_grad_len = sum(_aligned(math.prod(plan.shape)) for plan in self.level_plans[1:])
        self._part_offsets, total = [], _aligned(math.prod(self.stats_shape))
        for plan in self.level_plans:
            self._part_offsets.append(total)
            total += _aligned(plan.part_len)
        self._acc_len = total

    def _pyramid(self, x, y):
        xs, ys = [x], [y]
        buffer = torch.empty(self._pyramid_len, dtype=x.dtype, device=x.device)
        if self.pyramid is not None:
            coarse_x, coarse_y = self.pyramid.forward(x, y, buffer)
            return xs + coarse_x, ys + coarse_y
        for pool, start in zip(self.pool_plans, self._pool_offsets):
            out = buffer[start:start + math.prod(pool.out_shape)].view(pool.out_shape)
            pool.forward(xs[-1], ys[-1], out=out)
            xs.append(out[0])
            ys.append(out[1])
        return xs, ys

    def forward(self, x, y, win, weights):
        xs, ys = self._pyramid(x, y)
        acc = torch.empty(self._acc_len, dtype=self.acc, device=x.device)
        stats = acc[:math.prod(self.stats_shape)].view(self.stats_shape)
        counter = launch_counter(self.device, self.level_plans[0].device_index)
        out = torch.empty(self.out_shape, dtype=self.acc, device=x.device)
        last = self.levels - 1
        for lvl, plan in enumerate(self.level_plans):
            start = self._part_offsets[lvl]
            ms_args = (stats, weights, out, self._per, self.reduce) if self.fused and lvl == last else ()
            plan.forward(xs[lvl], ys[lvl], win, out=stats[lvl], part=acc[start:start + plan.part_len],
                         counter=counter, ms_args=ms_args)
        if not self.fused:
            self._combine(stats, weights, out, self._planes, self._per, self.levels, self.reduce, 128)
        return out, (stats, *xs[1:], *ys[1:])

    def _backward_layout(self, need_dx: bool, need_dy: bool) -> tuple[list[tuple[int, int]], int]:
        """(offset, length) of each level's scratch after the combine's gradient (per-level path only), and the
        total length, in the backward's accumulation-dtype buffer (fixed per plan and gradients asked for)."""
        key = (need_dx, need_dy)
        layout = self._bwd_layouts.get(key)
        if layout is None:
            start, scratch_at = 0 if self.fused else _aligned(math.prod(self.stats_shape)), []
            for lvl, plan in enumerate(self.level_plans):
                length = _aligned(plan.backward_scratch_len(need_dx, need_dy, lvl < self.levels - 1))
                scratch_at.append((start, length))
                start += length
            layout = self._bwd_layouts[key] = (scratch_at, start)
        return layout

    def backward(self, tensors, saved, g, needs):
        x, y, win, weights = tensors
        if not saved:  # torch.compile's backward op: recompute
            _, saved = self.forward(x, y, win, weights)
        stats, k = saved[0], self.levels - 1
        xs, ys = [x, *saved[1:1 + k]], [y, *saved[1 + k:]]
        need_dx, need_dy = bool(needs[0]), bool(needs[1])
        if not (need_dx or need_dy):
            return None, None, None, None
        # one allocation for the combine's gradient (per-level path) and every level's scratch, one for the
        # coarse levels' gradients
        scratch_at, acc_len = self._backward_layout(need_dx, need_dy)
        acc = torch.empty(acc_len, dtype=self.acc, device=x.device)
        grads = torch.empty((need_dx + need_dy) * self._coarse_grad_len, dtype=x.dtype, device=x.device)
        if self.fused:  # each level's kernel derives its upstream gradient from g and the statistics
            g_stats = g
        else:
            g_stats = acc[:math.prod(self.stats_shape)].view(self.stats_shape)
            if self.reduce == REDUCE_CHANNEL and not g.is_contiguous():
                g = g.contiguous()
            g_stride = g.stride(0) if g.dim() else 0
            self._combine_bwd(stats, weights, g, g_stats, self._planes, self._per, g_stride, self.levels,
                              self.reduce, 128)
        up, grad_start = (None, None), 0
        for lvl in range(self.levels - 1, -1, -1):
            plan = self.level_plans[lvl]
            start, length = scratch_at[lvl]
            scratch = acc[start:start + length]
            if lvl > 0:  # coarse levels' gradients: views of one buffer (level 0's are returned: their own)
                numel = math.prod(plan.shape)
                dx = grads[grad_start:grad_start + numel].view(plan.shape) if need_dx else None
                grad_start += _aligned(numel) if need_dx else 0
                dy = grads[grad_start:grad_start + numel].view(plan.shape) if need_dy else None
                grad_start += _aligned(numel) if need_dy else 0
            else:
                dx = torch.empty(x.shape, dtype=x.dtype, device=x.device) if need_dx else None
                dy = torch.empty(y.shape, dtype=y.dtype, device=y.device) if need_dy else None
            ms_args = (stats, weights, self._per, lvl, self.reduce) if self.fused else ()
            up = plan.backward((xs[lvl], ys[lvl], win), (), g_stats, needs,
                               g_offset=0 if self.fused else lvl * g_stats.stride(0), up=up,
                               buffers=(scratch, dx, dy), ms_args=ms_args)[:2]
        return up[0], up[1], None, None


@cached(maxsize=64)
def _ms_plan_cached(shape, sx, sy, dtype, device, taps, c1, c2, symmetric, levels, reduce) -> MSSSIMPlan:
    return MSSSIMPlan(shape, sx, sy, dtype, device, taps, c1, c2, symmetric, levels, reduce)


@ms_ssim.triton_plan
def ms_ssim_plan(tensors, scalars) -> MSSSIMPlan:
    x, y, win, weights = tensors
    _same_device(tensors, "x y win weights")
    c1, c2, symmetric, reduce = scalars
    if x.dim() != 4:
        raise ValueError("the fused MS-SSIM runs on (N, C, H, W) images; 3-D MS-SSIM composes ssim_reduce per level")
    if reduce not in (REDUCE_MEAN, REDUCE_IMAGE, REDUCE_CHANNEL):
        raise ValueError(f"MS-SSIM reduces to the mean, per image or per channel; got reduce={reduce}")
    return _ms_plan_cached(tuple(x.shape), x.stride(), y.stride(), x.dtype, x.device, win.shape[-1], float(c1),
                           float(c2), bool(symmetric), weights.shape[0], int(reduce))


__all__ = ["MSSSIMPlan", "SSIMPlan", "ms_ssim_plan", "ssim_plan"]
