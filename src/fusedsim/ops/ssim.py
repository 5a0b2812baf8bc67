"""Fused SSIM kernels (Triton): forward partial sums / map, and the backward for both inputs.

Entry points: ``ssim_sums_op`` / ``ssim_map_op``. In eager mode they run ``SSIMSumsFunction`` /
``SSIMMapFunction`` (plain autograd.Functions); under ``torch.compile`` the same kernels are PyTorch custom
ops (``torch.ops.fusedsim.*``), one opaque node each, with autograd through ``register_autograd``:

- ``ssim_sums(x, y, win, c1, c2, valid) -> (ssim_sum, cs_sum)``: per-plane sums of the SSIM and cs maps, shape
  (N*C,), in the accumulation dtype (float32, or float64 for float64 inputs).
- ``ssim_map(x, y, win, c1, c2, valid) -> map``: the SSIM map in the accumulation dtype.

x, y: (N, C, H, W) or (N, C, D, H, W), any strides, float16/bfloat16/float32/float64. win: (C, K) window per
channel (K odd), in the accumulation dtype. ``valid=False`` is zero padding with the full-size map.
The backward recomputes the statistics instead of saving them: forward memory is O(1) beyond the inputs.
"""

from __future__ import annotations

import functools

import torch
import triton

from fusedsim.ops._codegen import jit_from_source
from fusedsim.ops.ssim_source import render_forward, render_grad_conv, render_grad_fused_2d, render_grad_maps

_RENDERERS = {"fwd": render_forward, "grad_maps": render_grad_maps, "grad_conv": render_grad_conv}

# Kernels are launched with FMA contraction on (Triton's default up to 3.9, announced to change): it is part of
# the measured speed, and the tolerances against the twin already allow for it.
# Launch configuration: tiles are (columns per program, rows per program, warps) or None for the defaults.
# benchmarks/tune_ssim.py sweeps them.
CONFIG: dict = {"fwd_tile": None, "bwd_tile": None, "fwd_unroll": True, "bwd_unroll": False}
LAST_LAUNCH: dict = {}  # kind -> compiled kernel of the latest launch (register/spill reports for tuning)


@functools.lru_cache(maxsize=None)
def _kernel(kind: str, taps: int, three_d: bool, unroll: bool = True):
    name = f"_ssim_{kind}_{'3d' if three_d else '2d'}_k{taps}{'' if unroll else '_nu'}_kernel"
    if kind == "fwd":
        return jit_from_source(name, render_forward(taps, three_d, name, unroll=unroll))
    return jit_from_source(name, _RENDERERS[kind](taps, three_d, name))


@functools.lru_cache(maxsize=None)
def _fused_backward_kernel(taps: int, maps: tuple[str, ...], unroll: bool):
    name = f"_ssim_grad_fused_2d_k{taps}_{'_'.join(maps)}{'_u' if unroll else ''}_kernel"
    return jit_from_source(name, render_grad_fused_2d(taps, maps, name, unroll=unroll))


def _adjoint_window(win: torch.Tensor, symmetric: bool) -> torch.Tensor:
    """The reversed window, used by the backward (the adjoint of a correlation); a symmetric one is itself."""
    return win if symmetric else win.flip(-1).contiguous()


def _acc_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def _tl_dtype(dtype: torch.dtype):
    import triton.language as tl

    return tl.float64 if dtype == torch.float64 else tl.float32


def _tile(width: int) -> tuple[int, int, int]:
    """(columns per program, output rows per program, warps): one column per thread."""
    block_w = min(128, max(16, triton.next_power_of_2(width)))
    return block_w, 128, max(1, block_w // 32)


def _geometry(x: torch.Tensor, taps: int, valid: bool):
    """Spatial sizes as (D, H, W), output sizes (DO, HO, WO), 5-D strides and the centre offset."""
    three_d = x.dim() == 5
    if three_d:
        d, h, w = x.shape[2:]
        strides = x.stride()
    else:
        d, (h, w) = 1, x.shape[2:]
        sn, sc, sh, sw = x.stride()
        strides = (sn, sc, 0, sh, sw)
    shrink = taps - 1 if valid else 0
    out = (d - shrink if three_d else 1, h - shrink, w - shrink)
    return three_d, (d, h, w), out, strides, taps // 2 if valid else 0


def _check_offsets(x: torch.Tensor) -> None:
    if x.shape[-1] * abs(x.stride(-1)) >= 2**31:
        raise ValueError("input rows span more than 2**31 elements; make the tensor contiguous first")


def ssim_sums_fwd(x: torch.Tensor, y: torch.Tensor, win: torch.Tensor, c1: float, c2: float, valid: bool,
                  write_map: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Launch the forward kernel. Returns per-plane SSIM and cs sums (N*C,) and the map when asked."""
    win = win.contiguous()  # the kernels index the (C, K) table as dense rows
    taps = win.shape[-1]
    three_d, (d, h, w), (do, ho, wo), sx, off = _geometry(x, taps, valid)
    _, _, _, sy, _ = _geometry(y, taps, valid)
    _check_offsets(x)
    _check_offsets(y)
    acc = _acc_dtype(x.dtype)
    n, c = x.shape[:2]
    block_w, rows, warps = CONFIG["fwd_tile"] or _tile(wo)
    grid = (triton.cdiv(wo, block_w), triton.cdiv(ho, rows), n * c * do)
    programs = grid[2] * grid[1] * grid[0]
    partials = torch.empty((2, programs), dtype=acc, device=x.device)  # SSIM sums, cs sums: one reduction
    partial_s, partial_cs = partials[0], partials[1]
    out_shape = (n, c, do, ho, wo) if three_d else (n, c, ho, wo)
    ssim_map = torch.empty(out_shape, dtype=acc, device=x.device) if write_map else partial_s
    LAST_LAUNCH["fwd"] = _kernel("fwd", taps, three_d, CONFIG["fwd_unroll"])[grid](
        x, y, win, partial_s, partial_cs, ssim_map, c, d, h, w, do, ho, wo, *sx, *sy, c1, c2,
        OFF=off, BW=block_w, RS=rows, ACC=_tl_dtype(x.dtype), WRITE_MAP=write_map, num_warps=warps,
        enable_fp_fusion=True)
    sums = partials.view(2, n * c, -1).sum(-1)
    return sums[0], sums[1], (ssim_map if write_map else None)


def ssim_bwd(x: torch.Tensor, y: torch.Tensor, win: torch.Tensor, c1: float, c2: float, valid: bool,
             g_s: torch.Tensor | None, g_cs: torch.Tensor | None, g_map: torch.Tensor | None,
             need_dx: bool, need_dy: bool, symmetric: bool = False) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """Gradients of sum_p(g_s * ssim_sum + g_cs * cs_sum) + <g_map, ssim_map> w.r.t. x and y.

    g_s, g_cs: per-plane scalars (N*C,) or None; g_map: same shape as the map, or None.
    """
    win = win.contiguous()
    taps = win.shape[-1]
    three_d, (d, h, w), (do, ho, wo), sx, off = _geometry(x, taps, valid)
    _, _, _, sy, _ = _geometry(y, taps, valid)
    if not three_d:
        return _ssim_bwd_fused_2d(x, y, win, c1, c2, g_s, g_cs, g_map, need_dx, need_dy, off, sx, sy, (ho, wo),
                                  symmetric)
    acc = _acc_dtype(x.dtype)
    n, c = x.shape[:2]
    slots = 2
    ax_slot = ay_slot = -1
    if need_dx:
        ax_slot, slots = slots, slots + 1
    if need_dy:
        ay_slot, slots = slots, slots + 1
    ncd = n * c * do
    maps = torch.empty((slots, ncd, ho, wo), dtype=acc, device=x.device)
    dummy = maps
    gs = g_s.to(acc).contiguous() if g_s is not None else dummy
    gcs = g_cs.to(acc).contiguous() if g_cs is not None else dummy
    gmap = g_map.contiguous() if g_map is not None else dummy
    block_w, rows, warps = _tile(wo)
    grid = (triton.cdiv(wo, block_w), triton.cdiv(ho, rows), ncd)
    _kernel("grad_maps", taps, three_d)[grid](
        x, y, win, gs, gcs, gmap, maps, ncd, c, d, h, w, do, ho, wo, *sx, *sy, c1, c2,
        OFF=off, BW=block_w, RS=rows, ACC=_tl_dtype(x.dtype), HAS_GS=g_s is not None or g_map is not None,
        HAS_GCS=g_cs is not None, HAS_GMAP=g_map is not None, AX_SLOT=ax_slot, AY_SLOT=ay_slot,
        num_warps=warps, enable_fp_fusion=True)
    dx = torch.empty(x.shape, dtype=x.dtype, device=x.device) if need_dx else None
    dy = torch.empty(y.shape, dtype=y.dtype, device=y.device) if need_dy else None
    block_w, rows, warps = _tile(w)
    grid = (triton.cdiv(w, block_w), triton.cdiv(h, rows), n * c * d)
    _kernel("grad_conv", taps, three_d)[grid](
        x, y, maps, _adjoint_window(win, symmetric), dx if dx is not None else maps, dy if dy is not None else maps,
        ncd, c, d, h, w, do, ho, wo, *sx, *sy,
        OFF=off, BW=block_w, RS=rows, ACC=_tl_dtype(x.dtype), AX_SLOT=ax_slot, AY_SLOT=ay_slot,
        num_warps=warps, enable_fp_fusion=True)
    return dx, dy


def _ssim_bwd_fused_2d(x, y, win, c1, c2, g_s, g_cs, g_map, need_dx, need_dy, off, sx, sy, out_hw, symmetric):
    """2-D backward in one kernel (see ``render_grad_fused_2d``); extra memory is a 2-row scratch per program."""
    taps = win.shape[-1]
    n, c, h, w = x.shape
    ho, wo = out_hw
    acc = _acc_dtype(x.dtype)
    maps = ("bm", "cm") + (("ax",) if need_dx else ()) + (("ay",) if need_dy else ())
    block_w = max(min(128, triton.next_power_of_2(w + taps - 1)), triton.next_power_of_2(2 * (taps - 1)), 16)
    rows, warps = 128, max(1, block_w // 32)
    if CONFIG["bwd_tile"]:
        block_w, rows, warps = CONFIG["bwd_tile"]
    grid = (triton.cdiv(w, block_w - (taps - 1)), triton.cdiv(h, rows), n * c)
    scratch = torch.empty(grid[0] * grid[1] * grid[2] * 2 * len(maps) * block_w, dtype=acc, device=x.device)
    dx = torch.empty(x.shape, dtype=x.dtype, device=x.device) if need_dx else None
    dy = torch.empty(y.shape, dtype=y.dtype, device=y.device) if need_dy else None
    dummy = scratch
    LAST_LAUNCH["bwd"] = _fused_backward_kernel(taps, maps, CONFIG["bwd_unroll"])[grid](
        x, y, win, _adjoint_window(win, symmetric),
        g_s.to(acc).contiguous() if g_s is not None else dummy,
        g_cs.to(acc).contiguous() if g_cs is not None else dummy,
        g_map.contiguous() if g_map is not None else dummy,
        dx if dx is not None else dummy, dy if dy is not None else dummy, scratch,
        c, h, w, ho, wo, sx[0], sx[1], sx[3], sx[4], sy[0], sy[1], sy[3], sy[4], c1, c2,
        OFF=off, BW=block_w, RS=rows, ACC=_tl_dtype(x.dtype), HAS_GS=g_s is not None or g_map is not None,
        HAS_GCS=g_cs is not None, HAS_GMAP=g_map is not None, SYMMETRIC=symmetric, num_warps=warps,
        enable_fp_fusion=True)
    return dx, dy


# ---------------------------------------------------------------------------------------------------------------
# Custom ops: one opaque node each for torch.compile, autograd through register_autograd.


def _empty_grad(t: torch.Tensor) -> torch.Tensor:
    return t.new_empty(0)


@torch.library.custom_op("fusedsim::ssim_backward", mutates_args=())
def ssim_backward(x: torch.Tensor, y: torch.Tensor, win: torch.Tensor, c1: float, c2: float, valid: bool,
                  symmetric: bool, g_s: torch.Tensor | None, g_cs: torch.Tensor | None,
                  g_map: torch.Tensor | None, need_dx: bool, need_dy: bool) -> tuple[torch.Tensor, torch.Tensor]:
    dx, dy = ssim_bwd(x, y, win, c1, c2, valid, g_s, g_cs, g_map, need_dx, need_dy, symmetric)
    return (dx if dx is not None else _empty_grad(x)), (dy if dy is not None else _empty_grad(y))


@ssim_backward.register_fake
def _(x, y, win, c1, c2, valid, symmetric, g_s, g_cs, g_map, need_dx, need_dy):
    return (torch.empty_like(x) if need_dx else _empty_grad(x)), (torch.empty_like(y) if need_dy else _empty_grad(y))


@torch.library.custom_op("fusedsim::ssim_sums", mutates_args=())
def ssim_sums(x: torch.Tensor, y: torch.Tensor, win: torch.Tensor, c1: float, c2: float,
              valid: bool, symmetric: bool) -> tuple[torch.Tensor, torch.Tensor]:
    s, cs, _ = ssim_sums_fwd(x, y, win, c1, c2, valid)
    return s, cs.clone()  # the two sums are rows of one buffer; custom-op outputs may not alias


@ssim_sums.register_fake
def _(x, y, win, c1, c2, valid, symmetric):
    planes = x.shape[0] * x.shape[1]
    acc = _acc_dtype(x.dtype)
    return x.new_empty(planes, dtype=acc), x.new_empty(planes, dtype=acc)


@torch.library.custom_op("fusedsim::ssim_map", mutates_args=())
def ssim_map(x: torch.Tensor, y: torch.Tensor, win: torch.Tensor, c1: float, c2: float, valid: bool,
             symmetric: bool) -> torch.Tensor:
    _, _, out = ssim_sums_fwd(x, y, win, c1, c2, valid, write_map=True)
    return out


@ssim_map.register_fake
def _(x, y, win, c1, c2, valid, symmetric):
    shrink = win.shape[-1] - 1 if valid else 0
    shape = list(x.shape[:2]) + [s - shrink for s in x.shape[2:]]
    return x.new_empty(shape, dtype=_acc_dtype(x.dtype))


def _save(ctx, inputs, output) -> None:
    x, y, win, c1, c2, valid, symmetric = inputs
    ctx.save_for_backward(x, y, win)
    ctx.consts = (c1, c2, valid, symmetric)


def _grads(ctx, dx: torch.Tensor, dy: torch.Tensor):
    need_dx, need_dy = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
    return (dx if need_dx else None), (dy if need_dy else None), None, None, None, None, None


def _sums_backward(ctx, g_s, g_cs):
    x, y, win = ctx.saved_tensors
    dx, dy = torch.ops.fusedsim.ssim_backward(x, y, win, *ctx.consts, g_s, g_cs, None,
                                              ctx.needs_input_grad[0], ctx.needs_input_grad[1])
    return _grads(ctx, dx, dy)


def _map_backward(ctx, g_map):
    x, y, win = ctx.saved_tensors
    dx, dy = torch.ops.fusedsim.ssim_backward(x, y, win, *ctx.consts, None, None, g_map,
                                              ctx.needs_input_grad[0], ctx.needs_input_grad[1])
    return _grads(ctx, dx, dy)


ssim_sums.register_autograd(_sums_backward, setup_context=_save)
ssim_map.register_autograd(_map_backward, setup_context=_save)


# ---------------------------------------------------------------------------------------------------------------
# Eager autograd path: the same kernels without the custom-op dispatcher (tens of microseconds per call less).


def _backward_for(ctx, g_s, g_cs, g_map):
    x, y, win = ctx.saved_tensors
    c1, c2, valid, symmetric = ctx.consts
    need_dx, need_dy = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
    dx, dy = ssim_bwd(x, y, win, c1, c2, valid, g_s, g_cs, g_map, need_dx, need_dy, symmetric)
    return dx, dy, None, None, None, None, None


class SSIMSumsFunction(torch.autograd.Function):
    """Per-plane SSIM and cs sums (N*C,) with gradients for x and y."""

    @staticmethod
    def forward(ctx, x, y, win, c1, c2, valid, symmetric):
        s, cs, _ = ssim_sums_fwd(x, y, win, c1, c2, valid)
        ctx.save_for_backward(x, y, win)
        ctx.consts = (c1, c2, valid, symmetric)
        return s, cs

    @staticmethod
    def backward(ctx, g_s, g_cs):
        return _backward_for(ctx, g_s, g_cs, None)


class SSIMMapFunction(torch.autograd.Function):
    """The SSIM map with gradients for x and y."""

    @staticmethod
    def forward(ctx, x, y, win, c1, c2, valid, symmetric):
        _, _, out = ssim_sums_fwd(x, y, win, c1, c2, valid, write_map=True)
        ctx.save_for_backward(x, y, win)
        ctx.consts = (c1, c2, valid, symmetric)
        return out

    @staticmethod
    def backward(ctx, g_map):
        return _backward_for(ctx, None, None, g_map)


def ssim_sums_op(x, y, win, c1, c2, valid, symmetric):
    """Dispatch: the custom op while ``torch.compile`` traces, the lighter autograd.Function in eager mode."""
    if torch.compiler.is_compiling():
        return torch.ops.fusedsim.ssim_sums(x, y, win, c1, c2, valid, symmetric)
    return SSIMSumsFunction.apply(x, y, win, c1, c2, valid, symmetric)


def ssim_map_op(x, y, win, c1, c2, valid, symmetric):
    if torch.compiler.is_compiling():
        return torch.ops.fusedsim.ssim_map(x, y, win, c1, c2, valid, symmetric)
    return SSIMMapFunction.apply(x, y, win, c1, c2, valid, symmetric)
