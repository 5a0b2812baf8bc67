"""Fused LNCC kernels (Triton) and their plan for the op ``lncc``.

    lncc(pred, target, win, scale, q, nr, floor, dr_add, clamp, reduce) -> loss

pred, target: (N, C, H, W) or (N, C, D, H, W), any strides, float16/bfloat16/float32/float64; win: (C, K) normalised
window per channel (any odd K; asymmetric windows allowed) in the accumulation dtype (float32, float64 for float64
inputs). Per voxel, from the local moments under w with zero padding (``reference/lncc_ref.py``):

    A = s·(E[pt] - q·mu_p mu_t),  B = max(s·(E[p²] - q·mu_p²), floor),  C = max(s·(E[t²] - q·mu_t²), floor)
    ncc = (A² + nr) / (B·C + dr_add)    (clamped to [-1, 1] when ``clamp``);   loss = -ncc reduced

Forward: one launch; the moments stream down the rows through register shift chains (2-D: ``moments_source.py``;
3-D ``depth_mode="stream"``: the same chains, each program owning DEPTH_BLOCK output slices so that a W-filtered
input row serves all their depth taps), ncc is reduced per program and the last program to finish sums the
partials in a fixed order into the 0-d loss (or the -ncc map is written). 3-D volumes default to
``depth_mode="slab"`` (``lncc_slab.py``): the in-plane and the depth window sums run as separate passes through
a slab scratch, so no in-plane sum is recomputed per depth tap; same formulas, same reduction order scheme.
Backward (exact): the loss is a function of the five moments at each voxel, so

    dL/dp = Wᵀ*g_mu_p + 2p·Wᵀ*g_pp + t·Wᵀ*g_pt,    dL/dt = Wᵀ*g_mu_t + 2t·Wᵀ*g_tt + p·Wᵀ*g_pt

with the per-voxel moment gradients g_* and Wᵀ* the adjoint window sum (the flipped window). Step 1 recomputes the
moments and writes the three (one input) or five (both) gradient maps; step 2 applies the adjoint filter and
combines. Memory: the maps (3 full-size planes in the accumulation dtype for one input's gradient, 5 for both),
independent of the window size; no state is saved by the forward. The upstream gradient is read on the device
(no host synchronisation).
"""

from __future__ import annotations

import torch
import triton

from fusedsim.core.codegen import indent, jit_from_source
from fusedsim.core.launch import Launcher
from fusedsim.core.state import cached
from fusedsim.families.registration.lncc_slab_kernel import BLOCK as SLAB_BLOCK
from fusedsim.families.registration.lncc_slab_kernel import DEPTH_BLOCK as SLAB_DEPTH_BLOCK
from fusedsim.families.registration.lncc_slab_kernel import SlabLNCC
from fusedsim.families.registration.lncc_terms import (
    CONST_LINES,
    CONSTS,
    GRAD_TERMS,
    NCC_TERMS,
    last_program_reduces,
)
from fusedsim.core.moments.source import (
    STATS_SIG,
    accumulate_tap,
    chain,
    chain_init,
    column_taps,
    moments_stream,
    stats_prologue,
    stats_row,
    weights,
)
from fusedsim.core.kernel_args import split_blocks, strides5, tl_dtype
from fusedsim.core.stream_buffers import stream_counter as launch_counter
from fusedsim.families.registration.lncc_twin import REDUCE_MEAN, REDUCE_NONE
from fusedsim.core.moments.twin import compute_dtype
from fusedsim.families.registration.ops import lncc

_RBLOCK = 256
STATS = ("x", "y", "xx", "yy", "xy")
# 3-D programs own DEPTH_BLOCK consecutive output slices: each input row is filtered along W once per input
# slice and shared by the slices' depth taps, (BD + K - 1)·K loads per input row instead of BD·K².
DEPTH_BLOCK = 2
# 3-D strategies: "slab" (lncc_slab.py: in-plane and depth filtering as separate passes) or "stream" (above)
DEPTH_MODES = ("slab", "stream")


# ---------------------------------------------------------------------------------- 3-D depth-blocked stream
def _depth_prologue(k: int, bd: int, limit: str, shift: str) -> list[str]:
    """Program coordinates for (column strip, row segment, (n, c, depth block)) and the depth masks of the
    BD + K - 1 input slices d0 + shift - K//2 + j."""
    lines = [
        "pid_w = tl.program_id(0)",
        "pid_h = tl.program_id(1)",
        "pid_p = tl.program_id(2)",
        f"ndb = ({limit} + {bd - 1}) // {bd}",
        "nc = pid_p // ndb",
        f"d0 = (pid_p % ndb) * {bd}",
        "n = nc // C",
        "c = nc % C",
        "cols = pid_w * BW + tl.arange(0, BW)",
    ]
    for j in range(bd + k - 1):
        # masks are full vectors: Triton's interpreter mis-types a block mask combined with a scalar one
        lines += [f"dd{j} = d0 + ({shift} - {k // 2} + {j})",
                  f"dv{j} = tl.zeros([BW], tl.int32) + dd{j}",
                  f"dok{j} = (dv{j} >= 0) & (dv{j} < D)"]
    return lines


def _depth_distribute(k: int, bd: int, j: int, names: tuple[str, ...]) -> list[str]:
    """Add input slice j's W-filtered values f_q to the depth accumulators h_q_b of the outputs it reaches."""
    lines = []
    for b in range(bd):
        kd = j - b
        if 0 <= kd < k:
            lines += [f"h_{q}_{b} += w{kd} * f_{q}" for q in names]
    return lines


def _depth_emit(k: int, bd: int, names: tuple[str, ...], limit: str, emit: list[str]) -> list[str]:
    """After the chains: run ``emit`` for each output slice b with v_q = v_q_b, its plane ``pp`` (n·C·DO + d
    order) and mask ``ok``."""
    lines = [f"if t >= {k - 1}:"]
    for b in range(bd):
        body = [f"d_out = d0 + {b}", f"pp = nc * {limit} + d_out",
                f"ok = col_ok & ((tl.zeros([BW], tl.int32) + d_out) < {limit})"]
        body += [f"v_{q} = v_{q}_{b}" for q in names] + emit
        lines += indent(body)
    return lines


def _chains(names: tuple[str, ...], k: int, bd: int) -> list[str]:
    return [line for b in range(bd) for q in names for line in chain(f"{q}_{b}", k)]


def stats_stream_3d(k: int, bd: int, emit: list[str]) -> list[str]:
    """Moments of X, Y for BD output slices per program, streamed down the rows; ``emit`` sees v_x .. v_xy,
    ``pp``, ``ok`` and the output row ``o``."""
    lines = _depth_prologue(k, bd, "DO", "OFF") + [
        "col_ok = cols < WO",
        "xb = X + n.to(tl.int64) * sxn + c.to(tl.int64) * sxc",
        "yb = Y + n.to(tl.int64) * syn + c.to(tl.int64) * syc",
        "xcol = cols * sxw",
        "ycol = cols * syw",
    ]
    lines += weights(k, "WIN") + column_taps(k, "OFF", "W", {"x": "sxw", "y": "syw"})
    lines += ["o0 = pid_h * RS", f"steps = tl.minimum(RS, HO - o0) + {k - 1}"]
    lines += chain_init(tuple(f"{q}_{b}" for b in range(bd) for q in STATS), k)
    row = [
        f"yin = o0 + OFF - {k // 2} + t",
        "ry = tl.zeros([BW], tl.int32) + yin",
        "rok = (ry >= 0) & (ry < H)",
        "xr = xb + yin.to(tl.int64) * sxh + xcol",
        "yr = yb + yin.to(tl.int64) * syh + ycol",
    ]
    row += [f"h_{q}_{b} = tl.zeros([BW], ACC)" for b in range(bd) for q in STATS]
    for j in range(bd + k - 1):
        row += [f"f_{q} = tl.zeros([BW], ACC)" for q in STATS]
        row += [f"xd = xr + dd{j}.to(tl.int64) * sxd", f"yd = yr + dd{j}.to(tl.int64) * syd"]
        for kw in range(k):
            row += [f"m = cm{kw} & rok & dok{j}",
                    f"xv = tl.load(xd + xo{kw}, mask=m, other=0.0).to(ACC)",
                    f"yv = tl.load(yd + yo{kw}, mask=m, other=0.0).to(ACC)"] + accumulate_tap("f", kw)
        row += _depth_distribute(k, bd, j, STATS)
    row += _chains(STATS, k, bd)
    row += [f"o = o0 + t - {k - 1}"] + _depth_emit(k, bd, STATS, "DO", emit)
    return lines + ["for t in range(0, steps):"] + indent(row)


def stats_stream(k: int, three_d: bool, emit: list[str], pipelined: bool) -> list[str]:
    """Prologue and streaming loop of the moments; ``emit`` runs per output row with v_x .. v_xy, the output row
    ``o``, the plane ``pp`` and the mask ``ok``. 2-D: the building block's stream (software-pipelined for the
    forward); 3-D: depth-blocked."""
    if three_d:
        return stats_stream_3d(k, DEPTH_BLOCK, emit)
    emit = [f"o = o0 + t - {k - 1}", "pp = pid_p", "ok = col_ok", *emit]
    if pipelined:
        return stats_prologue(k, False) + moments_stream(k, False, emit)
    loop = stats_row(k, False) + [f"if t >= {k - 1}:"] + indent(emit)
    return stats_prologue(k, False) + ["for t in range(0, steps):"] + indent(loop)


def render_forward(k: int, three_d: bool, name: str) -> str:
    """Forward: per-program sums of ncc, reduced by the last program into OUT (0-d) as -mean or -sum; or the
    -ncc map (WRITE_MAP, no reduction)."""
    sig = STATS_SIG.format(outputs="PART, CNT, OUT", scalars=CONSTS + "count, ",
                           flags=", CLAMP: tl.constexpr, WRITE_MAP: tl.constexpr, MEAN: tl.constexpr, "
                                 "RBLOCK: tl.constexpr")
    emit = [*NCC_TERMS,
            "if CLAMP:",
            "    ncc = tl.minimum(tl.maximum(ncc, -1.0), 1.0)",
            "if WRITE_MAP:",
            ("    tl.store(OUT + (pp.to(tl.int64) * HO + o) * WO + cols, (-ncc).to(OUT.dtype.element_ty), "
             "mask=ok)"),
            "else:",
            "    acc += tl.where(ok, ncc, 0.0)"]
    body = CONST_LINES + ["acc = tl.zeros([BW], ACC)"] + stats_stream(k, three_d, emit, pipelined=True)
    body += [
        "if not WRITE_MAP:",
        "    lin = (pid_p * tl.num_programs(1) + pid_h) * tl.num_programs(0) + pid_w",
        "    nprog = tl.num_programs(0) * tl.num_programs(1) * tl.num_programs(2)",
        "    tl.store(PART + lin, tl.sum(acc, axis=0))",
    ] + indent(last_program_reduces("nprog"))
    return f"def {name}({sig}):\n" + "\n".join(indent(body)) + "\n"


def render_grad_maps(k: int, three_d: bool, name: str) -> str:
    """Backward step 1: recompute the moments, write the moment-gradient maps (slot 0: g_pt; then g_mu_p, g_pp
    when NEED_P; then g_mu_t, g_tt when NEED_T) on the (N·C·D, H, W) grid (NPL = N·C·D planes)."""
    sig = STATS_SIG.format(outputs="G, GMAP, MAPS", scalars=CONSTS + "count, NPL, ",
                           flags=", CLAMP: tl.constexpr, HAS_GMAP: tl.constexpr, MEAN: tl.constexpr, "
                                 "NEED_P: tl.constexpr, NEED_T: tl.constexpr")
    body = CONST_LINES + [
        "slot = tl.cast(NPL, tl.int64) * HO * WO",
        "gs = tl.load(G).to(ACC)",
        "if MEAN:",
        "    gs = gs / count",
    ]
    emit = [
        "pix = (pp.to(tl.int64) * HO + o) * WO + cols",
        *NCC_TERMS,
        "gp = gs",
        "if HAS_GMAP:",
        "    gp = tl.load(GMAP + pix, mask=ok, other=0.0).to(ACC)",
        *GRAD_TERMS,
        "tl.store(MAPS + pix, ga, mask=ok)",
        "nxt = 1",
        "if NEED_P:",
        "    tl.store(MAPS + slot + pix, -q * v_y * ga - 2.0 * q * v_x * gb, mask=ok)",
        "    tl.store(MAPS + 2 * slot + pix, gb, mask=ok)",
        "    nxt = 3",
        "if NEED_T:",
        "    tl.store(MAPS + nxt * slot + pix, -q * v_x * ga - 2.0 * q * v_y * gc, mask=ok)",
        "    tl.store(MAPS + (nxt + 1) * slot + pix, gc, mask=ok)",
    ]
    body += stats_stream(k, three_d, emit, pipelined=False)
    return f"def {name}({sig}):\n" + "\n".join(indent(body)) + "\n"


def render_grad_conv(k: int, three_d: bool, name: str) -> str:
    """Backward step 2: the adjoint window sums of the maps (flipped window WINF, zero padding) combined into
    dL/dp = F(g_mu_p) + 2p·F(g_pp) + t·F(g_pt) and dL/dt = F(g_mu_t) + 2t·F(g_tt) + p·F(g_pt). 3-D programs own
    DEPTH_BLOCK output slices, like the forward."""
    sig = ("X, Y, MAPS, WINF, DX, DY, NPL, C, D, H, W, sxn, sxc, sxd, sxh, sxw, syn, syc, syd, syh, syw, "
           "BW: tl.constexpr, RS: tl.constexpr, ACC: tl.constexpr, NEED_P: tl.constexpr, NEED_T: tl.constexpr")
    maps = ("pt", "mp", "pp", "mt", "tt")
    slots = {"pt": "0", "mp": "1", "pp": "2", "mt": "t_slot", "tt": "t_slot + 1"}
    needs = {"pt": None, "mp": "NEED_P", "pp": "NEED_P", "mt": "NEED_T", "tt": "NEED_T"}
    bd, kd_taps = (DEPTH_BLOCK, k) if three_d else (1, 1)
    body = _depth_prologue(kd_taps, bd, "D", "0") + [
        "col_ok = cols < W",
        "plane = tl.cast(H, tl.int64) * W",
        "slot_sz = tl.cast(NPL, tl.int64) * plane",
        "mb = MAPS + nc.to(tl.int64) * D * plane",
        "t_slot = 1",
        "if NEED_P:",
        "    t_slot = 3",
    ]
    body += weights(k, "WINF") + column_taps(k, "0", "W", {"m": "1"})
    body += ["o0 = pid_h * RS", f"steps = tl.minimum(RS, H - o0) + {k - 1}"]
    body += chain_init(tuple(f"{q}_{b}" for b in range(bd) for q in maps), k)
    row = [
        f"srow = o0 - {k // 2} + t",
        "ry = tl.zeros([BW], tl.int32) + srow",
        "rok = (ry >= 0) & (ry < H)",
        "mr = mb + srow.to(tl.int64) * W + cols",
    ]
    row += [f"h_{q}_{b} = tl.zeros([BW], ACC)" for b in range(bd) for q in maps]
    for j in range(bd + kd_taps - 1):
        row += [f"f_{q} = tl.zeros([BW], ACC)" for q in maps]
        row += [f"md = mr + dd{j}.to(tl.int64) * plane"]
        for kw in range(k):
            row.append(f"m = cm{kw} & rok & dok{j}")
            for q in maps:
                load = f"f_{q} += w{kw} * tl.load(md + ({slots[q]}) * slot_sz + mo{kw}, mask=m, other=0.0)"
                row += [load] if needs[q] is None else [f"if {needs[q]}:", "    " + load]
        if three_d:
            row += _depth_distribute(k, bd, j, maps)
        else:
            row += [f"h_{q}_0 = f_{q}" for q in maps]
    row += _chains(maps, k, bd)
    emit = [
        f"p = o0 + t - {k - 1}",
        ("xv = tl.load(X + n.to(tl.int64) * sxn + c.to(tl.int64) * sxc + d_out.to(tl.int64) * sxd"
         " + p.to(tl.int64) * sxh + cols * sxw, mask=ok, other=0.0).to(ACC)"),
        ("yv = tl.load(Y + n.to(tl.int64) * syn + c.to(tl.int64) * syc + d_out.to(tl.int64) * syd"
         " + p.to(tl.int64) * syh + cols * syw, mask=ok, other=0.0).to(ACC)"),
        "pix = (pp.to(tl.int64) * H + p) * W + cols",
        "if NEED_P:",
        "    tl.store(DX + pix, (v_mp + 2.0 * xv * v_pp + yv * v_pt).to(DX.dtype.element_ty), mask=ok)",
        "if NEED_T:",
        "    tl.store(DY + pix, (v_mt + 2.0 * yv * v_tt + xv * v_pt).to(DY.dtype.element_ty), mask=ok)",
    ]
    row += _depth_emit(k, bd, maps, "D", emit)
    body += ["for t in range(0, steps):"] + indent(row)
    return f"def {name}({sig}):\n" + "\n".join(indent(body)) + "\n"


@cached(maxsize=None)
def _kernel(kind: str, taps: int, three_d: bool):
    name = f"_lncc_{kind}_{'3d' if three_d else '2d'}_k{taps}_kernel"
    render = {"fwd": render_forward, "grad_maps": render_grad_maps, "grad_conv": render_grad_conv}[kind]
    return jit_from_source(name, render(taps, three_d, name))


def _tile(width: int) -> tuple[int, int, int]:
    """(columns per program, rows per program, warps): one column per thread."""
    block_w = min(128, max(16, triton.next_power_of_2(width)))
    return block_w, 64, max(1, block_w // 32)


class LNCCPlan:
    """Geometry, kernels and constants of one LNCC computation (fixed by shapes, strides, dtype and options).
    ``forward(pred, target, win) -> (loss, ())``; ``backward((pred, target, win), saved, g, needs)``."""

    def __init__(self, shape, sx, sy, dtype: torch.dtype, device: torch.device, taps: int, consts: tuple,
                 clamp: bool, reduce: int, depth_mode: str = "slab", slab: int | None = None,
                 depth_block: int = SLAB_DEPTH_BLOCK, block: int = SLAB_BLOCK) -> None:
        if depth_mode not in DEPTH_MODES:
            raise ValueError(f"depth_mode must be one of {DEPTH_MODES}; got {depth_mode!r}")
        if slab is not None and slab < 1:
            raise ValueError(f"slab must be a positive number of slices; got {slab}")
        self.shape, self.taps, self.reduce, self.clamp = tuple(shape), taps, reduce, clamp
        self.reduce_mean = reduce == REDUCE_MEAN
        self.three_d = len(shape) == 5
        self.depth_mode = depth_mode if self.three_d else "stream"
        n, c = shape[:2]
        d, h, w = shape[2:] if self.three_d else (1, *shape[2:])
        self.dims = (n, c, d, h, w)
        self.sx, self.sy = strides5(shape, sx), strides5(shape, sy)
        for s, name in ((self.sx, "pred"), (self.sy, "target")):
            if w * abs(s[4]) >= 2**31:
                raise ValueError(f"{name} rows span more than 2**31 elements; make the tensor contiguous first")
        self.acc = compute_dtype(dtype)
        self.acc_tl = tl_dtype(dtype)
        self.device = device
        self.device_index = (device.index if device.index is not None else torch.cuda.current_device()
                             ) if device.type == "cuda" else None
        self.consts = tuple(v for value in consts for v in split_blocks(value))
        self.count = n * c * d * h * w
        block_w, rows, warps = _tile(w)
        depth_programs = triton.cdiv(d, DEPTH_BLOCK) if self.three_d else 1
        self.grid = (triton.cdiv(w, block_w), triton.cdiv(h, rows), n * c * depth_programs)
        self.tile = (block_w, rows, warps)
        self.nprog = self.grid[0] * self.grid[1] * self.grid[2]
        self.out_shape = tuple(shape) if reduce == REDUCE_NONE else ()
        self._tail = (c, d, h, w, d, h, w, *self.sx, *self.sy)
        if self.depth_mode == "slab":
            self._slab = SlabLNCC(self, slab, depth_block, block)
            self.nprog = self._slab.nparts
        else:
            self._fwd = Launcher(_kernel("fwd", taps, self.three_d), self.grid, num_warps=warps)

    def forward(self, pred: torch.Tensor, target: torch.Tensor, win: torch.Tensor):
        block_w, rows, _ = self.tile
        out = torch.empty(self.out_shape, dtype=self.acc, device=pred.device)
        write_map = self.reduce == REDUCE_NONE
        part = out if write_map else torch.empty(self.nprog, dtype=self.acc, device=pred.device)
        cnt = part if write_map else launch_counter(self.device, self.device_index)
        if self.depth_mode == "slab":
            self._slab.forward(pred, target, win, out, part, cnt, write_map)
            return out, ()
        self._fwd(pred, target, win, part, cnt, out, *self._tail, *self.consts, self.count, 0, block_w, rows,
                  self.acc_tl, self.clamp, write_map, self.reduce == REDUCE_MEAN, _RBLOCK)
        return out, ()

    def backward(self, tensors, saved, g, needs):
        pred, target, win = tensors
        need_p, need_t = bool(needs[0]), bool(needs[1])
        if not (need_p or need_t):
            return None, None, None
        n, c, d, h, w = self.dims
        block_w, rows, warps = self.tile
        has_gmap = self.reduce == REDUCE_NONE
        if self.depth_mode == "slab":
            gmap = g.contiguous() if has_gmap else win
            dp, dt = self._slab.backward(pred, target, win, win if has_gmap else g, gmap, has_gmap, need_p, need_t)
            return dp, dt, None
        slots = 1 + 2 * need_p + 2 * need_t
        maps = torch.empty((slots, n * c * d, h, w), dtype=self.acc, device=pred.device)
        gmap = g.contiguous() if has_gmap else maps
        gscalar = maps if has_gmap else g
        _kernel("grad_maps", self.taps, self.three_d)[self.grid](
            pred, target, win, gscalar, gmap, maps, *self._tail, *self.consts, self.count, n * c * d, OFF=0,
            BW=block_w,
            RS=rows, ACC=self.acc_tl, CLAMP=self.clamp, HAS_GMAP=has_gmap, MEAN=self.reduce == REDUCE_MEAN,
            NEED_P=need_p, NEED_T=need_t, num_warps=warps)
        dp = torch.empty(pred.shape, dtype=pred.dtype, device=pred.device) if need_p else None
        dt = torch.empty(target.shape, dtype=target.dtype, device=target.device) if need_t else None
        _kernel("grad_conv", self.taps, self.three_d)[self.grid](
            pred, target, maps, win.flip(-1).contiguous(), dp if need_p else maps, dt if need_t else maps,
            n * c * d, c, d, h, w, *self.sx, *self.sy, BW=block_w, RS=rows, ACC=self.acc_tl, NEED_P=need_p, NEED_T=need_t,
            num_warps=warps)
        return dp, dt, None


@cached(maxsize=256)
def _plan_cached(shape, sx, sy, dtype, device, taps, consts, clamp, reduce, options) -> LNCCPlan:
    return LNCCPlan(shape, sx, sy, dtype, device, taps, consts, clamp, reduce, **dict(options))


@lncc.triton_plan
def lncc_plan(tensors, scalars, **options) -> LNCCPlan:
    """The cached plan of ``lncc`` for these tensors (shapes, strides, dtype, device) and scalars. ``options``
    (tuning, 3-D only): ``depth_mode`` ("slab", the default, or "stream"), ``slab`` (output slices per slab;
    default from the memory budget of ``lncc_slab.default_slabs``), ``depth_block`` and ``block`` (slices and
    in-plane voxels per depth program of the slab path). Run a plan with ``fusedsim.families.registration.ops.lncc.run_plan``."""
    pred, target, win = tensors
    scale, q, nr, floor, dr_add, clamp, reduce = scalars
    consts = (float(scale), float(q), float(nr), float(floor), float(dr_add))
    return _plan_cached(tuple(pred.shape), pred.stride(), target.stride(), pred.dtype, pred.device, win.shape[-1],
                        consts, bool(clamp), int(reduce), tuple(sorted(options.items())))


__all__ = ["LNCCPlan", "lncc_plan"]
