"""Source renderers for the SSIM kernels (2-D and 3-D), built on the windowed-moments block.

- ``render_forward``: SSIM / cs (and, fused, L1) partial sums per program; the last program to finish reduces
  them in a fixed order into the requested output (scalar mean, per image, per channel, per-plane statistics),
  so one launch returns exactly what the caller returns. Optionally writes the SSIM map.
- ``render_grad_fused_2d``: the whole 2-D backward in one pass; reads the upstream gradient from the device
  (any reduction, any strides), adds the fused L1 term and, for MS-SSIM, the adjoint of the 2x average pooling
  of the next coarser level.
- ``render_grad_maps`` / ``render_grad_conv``: the 3-D backward in two passes (gradient maps, then the adjoint
  filter).

Upstream gradient convention (all backward kernels): per plane ``nc = n*C + c`` the scalar upstream gradient is
``G[g_off + (nc // C) * gsn + (nc % C) * gsc]`` times ``weight / divisor`` (weights travel as an fp32 hi/lo pair
so float64 runs keep float64 accuracy). A 0-d mean has gsn = gsc = 0, a per-image (N,) output gsc = 0.
"""

from __future__ import annotations

from fusedsim.core.codegen import indent
from fusedsim.core.moments.source import (
    LANE_IMPORT,
    STAT_NAMES,
    STATS_SIG,
    chain,
    chain_init,
    column_taps,
    depth_taps,
    lane_masks,
    moments_stream,
    pipelined_rows,
    slot_map_rows,
    stats_prologue,
    stats_row,
    streamed_rows_2d,
    weights,
)

# REDUCE codes of the forward kernel
REDUCE_NONE, REDUCE_MEAN, REDUCE_IMAGE, REDUCE_CHANNEL, REDUCE_STATS = -1, 1, 2, 3, 0

SSIM_TERMS = [
    "mx = v_x",
    "my = v_y",
    "sxx = v_xx - mx * mx",
    "syy = v_yy - my * my",
    "sxy = v_xy - mx * my",
    "cs = (2.0 * sxy + c2) / (sxx + syy + c2)",
    "lum = (2.0 * mx * my + c1) / (mx * mx + my * my + c1)",
]


def _l1_row(k: int, prefix: str) -> list[str]:
    """Fused L1: add |x - y| of the input row in registers ``{prefix}*`` for the pixels this program owns.

    The row test is on the loop counter (uniform per program, no per-pixel mask). ``same``: a program sums the
    rows it streams from step K-1 on (the first row segment from step K//2), i.e. from its first output row's
    centre row + K//2 on; the segments' sums then tile the image once, and rows or columns past the image read
    zeros, so no column test either. ``valid``: the rows [o0, o0 + output rows), the last row segment up to H;
    columns: the first tap's (``cols``), and the last column strip also owns the columns past the output width,
    read from tap K-1 (column ``cols + K - 1``). (A per-pixel row test, the previous hook, cost the saving
    forward ~8% at 5x5x1080x1920; summing per output row from two aligned reloads 1-2%: benchmarks/NOTES.md.)"""
    r = k // 2
    return [
        "if WITH_L1:",
        "    if OFF == 0:",
        "        l1_on = (t >= l1_t0) & (t < steps)",
        f"        acc_l1 += tl.where(l1_on, tl.abs({prefix}x{r}.to(ACC) - {prefix}y{r}.to(ACC)), 0.0)",
        "    else:",
        "        l1_on = t < l1_t1",
        f"        acc_l1 += tl.where(cm0 & l1_on, tl.abs({prefix}x0.to(ACC) - {prefix}y0.to(ACC)), 0.0)",
        f"        tail = cm{k - 1} & l1_on & (cols + {k - 1} >= wlim)",
        f"        acc_l1 += tl.where(tail, tl.abs({prefix}x{k - 1}.to(ACC) - {prefix}y{k - 1}.to(ACC)), 0.0)",
    ]


# sign(x - y) at the gradient's pixel (xv, yv): the fused L1 term's gradient is ± its upstream times it
_L1_SIGN = "sgn = tl.where(xv > yv, 1.0, 0.0) - tl.where(xv < yv, 1.0, 0.0)"


def _l1_tap_3d(k: int):
    """Fused L1 in 3-D (a ``per_tap`` hook of the statistics loop): add |x - y| of a tap's loads for the voxels
    this program owns, each voxel counted once. ``same``: the centre tap of the rows [o0, row_hi). ``valid``: the
    output grid is smaller, so as in 2-D (:func:`_l1_row`) the first column tap and, for the last column strip, the
    last one; the first depth tap and, for the last depth slice (``last_d``), every other depth tap."""
    r = k // 2

    def lines(kd: int, kw: int) -> list[str]:
        centre, edge = kd == r and kw == r, kw in (0, k - 1) and k > 1
        if not (centre or edge):
            return []
        out = ["if WITH_L1:", "    own = m & (ry >= o0) & (ry < row_hi)", "    l1v = tl.abs(xv - yv)"]
        if centre:
            out += ["    if OFF == 0:", "        acc_l1 += tl.where(own, l1v, 0.0)"]
        if edge:
            cond = "own" + (" & last_d" if kd > 0 else "") + (f" & (cols + {k - 1} >= wlim)" if kw else "")
            out += ["    if OFF != 0:", f"        acc_l1 += tl.where({cond}, l1v, 0.0)"]
        return out

    return lines


# The last program to finish reduces all partial sums in a fixed order (deterministic, one launch). The partial
# sums of the planes averaged into one output value are contiguous (one plane for the per-plane statistics and
# per-channel values, an image's C planes per image, all planes for the mean), so each output value is one sweep
# of RBLOCK-wide loads: the SSIM, cs and L1 sums loaded side by side, one reduction per value at the end. (Plane
# by plane and quantity by quantity, the sweeps were serial L2 round trips: 50-75 at 5x5 planes.)
_LAST_PROGRAM_REDUCE = [
    "tl.debug_barrier()",
    "done = tl.atomic_add(CNT, 1, sem='acq_rel', scope='gpu')",
    "if done == nprog - 1:",
    "    per_plane = DO * tl.num_programs(1) * tl.num_programs(0)",
    "    planes = tl.num_programs(2) // DO",
    "    w_s = tl.cast(w_hi, ACC) + tl.cast(w_lo, ACC)",
    "    group = 1",  # planes averaged into one output value
    "    if REDUCE == 2:",
    "        group = C",
    "    if REDUCE == 1:",
    "        group = planes",
    "    span = group * per_plane",
    "    for gi in range(0, planes // group):",
    "        base = gi * span",
    "        acc = tl.zeros([RBLOCK], ACC)",
    "        acc_c = tl.zeros([RBLOCK], ACC)",
    "        acc_l = tl.zeros([RBLOCK], ACC)",
    "        for start in range(0, span, RBLOCK):",
    "            idx = start + tl.arange(0, RBLOCK)",
    "            in_span = idx < span",
    "            acc += tl.load(PART + base + idx, mask=in_span, other=0.0, cache_modifier='.cg')",
    "            if REDUCE == 0:",
    "                acc_c += tl.load(PART + nprog + base + idx, mask=in_span, other=0.0, cache_modifier='.cg')",
    "            if WITH_L1:",
    "                acc_l += tl.load(PART + 2 * nprog + base + idx, mask=in_span, other=0.0, cache_modifier='.cg')",
    "        s_mean = tl.sum(acc, axis=0) / count / group",
    "        if REDUCE == 0:",
    "            tl.store(RESULT + gi, s_mean)",
    "            tl.store(RESULT + planes + gi, tl.sum(acc_c, axis=0) / count)",
    "        else:",
    "            val = s_mean",
    "            if WITH_L1:",
    "                l1_mean = tl.sum(acc_l, axis=0) / l1_count / group",
    "                val = (1.0 - w_s) * l1_mean + w_s * (1.0 - s_mean)",
    "            tl.store(RESULT + gi, val)",
    "    tl.atomic_xchg(CNT, 0)",
]


# MS-SSIM's last level: after writing its statistics, the reducing program combines every level's (L, 2, N, C)
# statistics into the MS-SSIM value (``ops/ms_combine.py``), so the combine needs no launch of its own.
_MS_COMBINE_SIG = ", MS_STATS, MS_W, MS_OUT, ms_per, MS_REDUCE: tl.constexpr"
_MS_IMPORT = "from fusedsim.families.ssim.ms_combine import ms_combine_all, ms_level_upstream\n"


def _ms_combine(levels: int) -> list[str]:
    return ["    tl.debug_barrier()",  # this program's statistics stores, visible to all its threads
            f"    ms_combine_all(MS_STATS, MS_W, MS_OUT, planes, ms_per, {levels}, MS_REDUCE, 128)"]


# Gradient maps of the SSIM value for a unit upstream gradient (GRAD_MAPS with gp = 1, gcs = 0), written by the
# forward on the output grid into GRADS, (slots, planes x DO, HO, WO): bm, cm, then ax (SAVE_AX) and ay (SAVE_AY). Any
# scalar-per-plane upstream gradient scales them linearly, so the backward needs only their adjoint filter.
SAVED_GRAD_MAPS = [
    "gpix = (pid_p.to(tl.int64) * HO + o) * WO + cols",
    "slot_sz = tl.num_programs(2).to(tl.int64) * HO * WO",
    "inv_b2 = 1.0 / (sxx + syy + c2)",
    "bm = -lum * cs * inv_b2",
    "cm = 2.0 * lum * inv_b2",
    "gl = cs / (mx * mx + my * my + c1)",
    "tl.store(GRADS + gpix, bm, mask=col_ok)",
    "tl.store(GRADS + slot_sz + gpix, cm, mask=col_ok)",
    "if SAVE_AX:",
    "    tl.store(GRADS + 2 * slot_sz + gpix, -2.0 * mx * bm - my * cm + gl * (2.0 * my - 2.0 * mx * lum), mask=col_ok)",
    "if SAVE_AY:",
    "    ay = -2.0 * my * bm - mx * cm + gl * (2.0 * mx - 2.0 * my * lum)",
    "    if SAVE_AX:",
    "        tl.store(GRADS + 3 * slot_sz + gpix, ay, mask=col_ok)",
    "    else:",
    "        tl.store(GRADS + 2 * slot_sz + gpix, ay, mask=col_ok)",
]


def render_forward(k: int, three_d: bool, name: str, unroll: bool = True, ms_levels: int = 0) -> str:
    """Forward: SSIM / cs / L1 partial sums per program, reduced by the last program into RESULT:

    REDUCE 1: the mean (0-d); 2: per image (N,); 3: per plane (N, C); 0: per-plane SSIM and cs means (2, N, C);
    -1: no reduction (the map only). With WITH_L1 each plane's value is (1-w)·mean|x-y| + w·(1 - mean SSIM).
    ``ms_levels`` > 0 (REDUCE 0, last MS-SSIM level only) also folds in the combine of that many levels; at 0 the
    source is the single-scale kernel's, unchanged."""
    sig = STATS_SIG.format(
        outputs="PART, CNT, RESULT, MAP, GRADS",
        scalars="c1, c2, count, l1_count, w_hi, w_lo, ",
        flags=", WRITE_MAP: tl.constexpr, WITH_L1: tl.constexpr, REDUCE: tl.constexpr, RBLOCK: tl.constexpr, "
        "SAVE_AX: tl.constexpr, SAVE_AY: tl.constexpr" + (_MS_COMBINE_SIG if ms_levels else ""),
    )
    body = stats_prologue(k, three_d)
    body += ["acc_s = tl.zeros([BW], ACC)", "acc_cs = tl.zeros([BW], ACC)", "acc_l1 = tl.zeros([BW], ACC)",
             # the L1 term's ownership (:func:`_l1_row`, :func:`_l1_tap_3d`): the first row segment owns the rows
             # above its first output's centre row (``same``), the last row segment the rows past the output grid
             # (``valid``), the last column strip the columns past wlim, in 3-D the last depth slice the slices past it
             f"l1_t0 = tl.where(pid_h == 0, {k // 2}, {k - 1})",
             f"l1_t1 = tl.where(pid_h == tl.num_programs(1) - 1, steps, steps - {k - 1})",
             "row_hi = tl.where(pid_h == tl.num_programs(1) - 1, H, tl.minimum(o0 + RS, H))",
             "wlim = tl.num_programs(0) * BW"]
    if three_d:
        body += ["last_d = (tl.zeros([BW], tl.int32) + d_out) == DO - 1"]
    emit = [
        f"o = o0 + t - {k - 1}",
        *SSIM_TERMS,
        "s = lum * cs",
        "acc_s += tl.where(col_ok, s, 0.0)",
        "if REDUCE == 0:",  # cs is an output of the per-plane statistics only
        "    acc_cs += tl.where(col_ok, cs, 0.0)",
        "if WRITE_MAP:",
        "    tl.store(MAP + (pid_p.to(tl.int64) * HO + o) * WO + cols, s.to(MAP.dtype.element_ty), mask=col_ok)",
        "if SAVE_AX or SAVE_AY:",
        *indent(SAVED_GRAD_MAPS),
    ]
    l1_row = None if three_d else (lambda prefix: _l1_row(k, prefix))
    body += moments_stream(k, three_d, emit, unroll, l1_row, _l1_tap_3d(k) if three_d else None)
    body += [
        "lin = (pid_p * tl.num_programs(1) + pid_h) * tl.num_programs(0) + pid_w",
        "nprog = tl.num_programs(0) * tl.num_programs(1) * tl.num_programs(2)",
        # two partial sums reduced side by side: one exchange between the warps instead of two
        "if REDUCE == 0:",
        "    pair = tl.sum(tl.join(acc_s, acc_cs), axis=0)",
        "    tl.store(PART + tl.arange(0, 2) * nprog + lin, pair)",
        "elif WITH_L1:",
        "    pair = tl.sum(tl.join(acc_s, acc_l1), axis=0)",
        "    tl.store(PART + tl.arange(0, 2) * (2 * nprog) + lin, pair)",
        "else:",
        "    tl.store(PART + lin, tl.sum(acc_s, axis=0))",
        "if REDUCE >= 0:",
        *indent(_LAST_PROGRAM_REDUCE if not ms_levels else _LAST_PROGRAM_REDUCE[:-1] + _ms_combine(ms_levels)
                + _LAST_PROGRAM_REDUCE[-1:]),
    ]
    return (_MS_IMPORT if ms_levels else "") + f"def {name}({sig}):\n" + "\n".join(indent(body)) + "\n"


# per-plane upstream gradients of the SSIM sum (gs), the cs sum (gcs) and the fused L1 term (gl1)
_UPSTREAM_SCALARS = [
    "gidx = (nc // C) * gsn + (nc % C) * gsc",
    "gs = 0.0",
    "gcs = 0.0",
    "if HAS_GS:",
    "    gs = tl.load(G + g_off_s + gidx).to(ACC) * (tl.cast(ws_hi, ACC) + tl.cast(ws_lo, ACC)) / div_s",
    "if HAS_GCS:",
    "    gcs = tl.load(G + g_off_cs + gidx).to(ACC) * (tl.cast(ws_hi, ACC) + tl.cast(ws_lo, ACC)) / div_s",
]
_UPSTREAM_SIG = "G, g_off_s, g_off_cs, gsn, gsc, ws_hi, ws_lo, div_s"

GRAD_MAPS = [
    # F = gs * lum * cs + gcs * cs at each output pixel; derivatives w.r.t. mu_x, mu_y, E[x²], E[y²], E[xy].
    "b1 = mx * mx + my * my + c1",
    "inv_b2 = 1.0 / (sxx + syy + c2)",
    "gmul = gcs",
    "if HAS_GS:",
    "    gmul = gmul + gp * lum",
    "bm = -gmul * cs * inv_b2",
    "cm = 2.0 * gmul * inv_b2",
    "ax = -2.0 * mx * bm - my * cm",
    "ay = -2.0 * my * bm - mx * cm",
    "if HAS_GS:",
    "    gl = gp * cs / b1",
    "    ax += gl * (2.0 * my - 2.0 * mx * lum)",
    "    ay += gl * (2.0 * mx - 2.0 * my * lum)",
]


def render_grad_maps(k: int, three_d: bool, name: str) -> str:
    """Backward, step 1 (3-D): recompute the statistics and write the gradient maps (bm, cm, ax, ay) on the
    output grid. Upstream gradients: per-plane scalars (see the module docstring) or a per-pixel map GMAP."""
    sig = STATS_SIG.format(
        outputs=f"{_UPSTREAM_SIG}, GMAP, MAPS, NCD",
        scalars="c1, c2, ",
        flags=", HAS_GS: tl.constexpr, HAS_GCS: tl.constexpr, HAS_GMAP: tl.constexpr, "
        "AX_SLOT: tl.constexpr, AY_SLOT: tl.constexpr",
    )
    body = stats_prologue(k, three_d)
    body += _UPSTREAM_SCALARS + ["plane_sz = tl.cast(HO, tl.int64) * WO"]
    emit = [
        f"o = o0 + t - {k - 1}",
        "pix = (pid_p.to(tl.int64) * HO + o) * WO + cols",
        *SSIM_TERMS,
        "gp = gs",
        "if HAS_GMAP:",
        "    gp = tl.load(GMAP + pix, mask=col_ok, other=0.0).to(ACC)",
        *GRAD_MAPS,
        "tl.store(MAPS + pix, bm, mask=col_ok)",
        "tl.store(MAPS + NCD * plane_sz + pix, cm, mask=col_ok)",
        "if AX_SLOT >= 0:",
        "    tl.store(MAPS + AX_SLOT * NCD * plane_sz + pix, ax, mask=col_ok)",
        "if AY_SLOT >= 0:",
        "    tl.store(MAPS + AY_SLOT * NCD * plane_sz + pix, ay, mask=col_ok)",
    ]
    loop = stats_row(k, three_d) + [f"if t >= {k - 1}:"] + indent(emit)
    body += ["for t in range(0, steps):"] + indent(loop)
    return f"def {name}({sig}):\n" + "\n".join(indent(body)) + "\n"


def render_grad_conv(k: int, three_d: bool, name: str) -> str:
    """Backward, step 2 (3-D): correlate the gradient maps with the flipped window (the adjoint of the forward
    filter) and combine: dx = W*ax + 2 x (W*bm) + y (W*cm), dy = W*ay + 2 y (W*bm) + x (W*cm). SCALED: the maps
    are the forward's unit maps, multiplied here by the per-plane upstream gradient (module docstring). HAS_L1
    adds the fused L1 term's gradient, ± gl1·sign(x - y)."""
    sig = (
        "X, Y, MAPS, WIN, DX, DY, G, g_off_s, gsn, gsc, ws_hi, ws_lo, div_s, wl_hi, wl_lo, div_l1, NCD, C, D, H, W, "
        "DO, HO, WO, sxn, sxc, sxd, sxh, sxw, syn, syc, syd, syh, syw, "
        "OFF: tl.constexpr, BW: tl.constexpr, RS: tl.constexpr, ACC: tl.constexpr, "
        "AX_SLOT: tl.constexpr, AY_SLOT: tl.constexpr, SCALED: tl.constexpr, HAS_L1: tl.constexpr"
    )
    maps = ["bm", "cm", "ax", "ay"]
    body = [
        "pid_w = tl.program_id(0)",
        "pid_h = tl.program_id(1)",
        "pid_p = tl.program_id(2)",
        "d_out = pid_p % D",
        "nc = pid_p // D",
        "n = nc // C",
        "c = nc % C",
        "cols = pid_w * BW + tl.arange(0, BW)",
        "col_ok = cols < W",
        "plane_sz = tl.cast(HO, tl.int64) * WO",
        "mb = MAPS + nc.to(tl.int64) * DO * plane_sz",
        "slot_sz = NCD * plane_sz",
        "gs = 1.0",
        "if SCALED:",
        "    gs = tl.load(G + g_off_s + n * gsn + c * gsc).to(ACC) * (tl.cast(ws_hi, ACC) + tl.cast(ws_lo, ACC)) / div_s",
        "gl1 = 0.0",
        "if HAS_L1:",
        "    gl1 = tl.load(G + g_off_s + n * gsn + c * gsc).to(ACC) * (tl.cast(wl_hi, ACC) + tl.cast(wl_lo, ACC)) / div_l1",
    ]
    body += weights(k, "WIN")
    body += column_taps(k, "-OFF", "WO", {"m": "1"})
    if three_d:
        body += depth_taps(k, "-OFF", "DO")
    body += ["o0 = pid_h * RS", f"steps = tl.minimum(RS, H - o0) + {k - 1}"]
    body += chain_init(tuple(maps), k)
    row = [
        f"srow = o0 - OFF - {k // 2} + t",
        "ry = tl.zeros([BW], tl.int32) + srow",
        "rok = (ry >= 0) & (ry < HO)",
        "mr = mb + srow.to(tl.int64) * WO + cols",
    ]
    row += [f"h_{q} = tl.zeros([BW], ACC)" for q in maps]
    slots = {"bm": "0", "cm": "1", "ax": "AX_SLOT", "ay": "AY_SLOT"}
    for kd in range(k) if three_d else [None]:
        if three_d:
            row += [f"i_{q} = tl.zeros([BW], ACC)" for q in maps]
            row += [f"md = mr + dd{kd}.to(tl.int64) * plane_sz"]
            row_mask = f"rok & dok{kd}"
            target = "i"
        else:
            row += ["md = mr"]
            row_mask = "rok"
            target = "h"
        for kw in range(k):
            row.append(f"m = cm{kw} & {row_mask}")
            for q in maps:
                guard = "" if q in ("bm", "cm") else f"if {slots[q]} >= 0:\n    "
                load = (f"{target}_{q} += w{kw} * tl.load(md + {slots[q]} * slot_sz + mo{kw}, "
                        f"mask=m, other=0.0).to(ACC)")
                row += (guard + load).split("\n")
        if three_d:
            row += [f"h_{q} += w{kd} * i_{q}" for q in maps]
    for q in maps:
        row += chain(q, k)
    emit = [
        f"p = o0 + t - {k - 1}",
        "xv = tl.load(X + n.to(tl.int64) * sxn + c.to(tl.int64) * sxc + d_out.to(tl.int64) * sxd"
        " + p.to(tl.int64) * sxh + cols * sxw, mask=col_ok, other=0.0).to(ACC)",
        "yv = tl.load(Y + n.to(tl.int64) * syn + c.to(tl.int64) * syc + d_out.to(tl.int64) * syd"
        " + p.to(tl.int64) * syh + cols * syw, mask=col_ok, other=0.0).to(ACC)",
        "pix = (pid_p.to(tl.int64) * H + p) * W + cols",
        _L1_SIGN,
        "if AX_SLOT >= 0:",
        "    g_val = v_ax + 2.0 * xv * v_bm + yv * v_cm",
        "    if SCALED:",
        "        g_val = g_val * gs",
        "    if HAS_L1:",
        "        g_val = g_val + gl1 * sgn",
        "    tl.store(DX + pix, g_val.to(DX.dtype.element_ty), mask=col_ok)",
        "if AY_SLOT >= 0:",
        "    g_val = v_ay + 2.0 * yv * v_bm + xv * v_cm",
        "    if SCALED:",
        "        g_val = g_val * gs",
        "    if HAS_L1:",
        "        g_val = g_val - gl1 * sgn",
        "    tl.store(DY + pix, g_val.to(DY.dtype.element_ty), mask=col_ok)",
    ]
    loop = row + [f"if t >= {k - 1}:"] + indent(emit)
    body += ["for t in range(0, steps):"] + indent(loop)
    return f"def {name}({sig}):\n" + "\n".join(indent(body)) + "\n"


def _upsampled(ptr: str) -> str:
    """The next coarser level's gradient at this level's pixel: the adjoint of 2x average pooling with
    pytorch-msssim's zero padding of (size % 2) counted in the mean (row r belongs to pooled row (r + H%2)//2)."""
    return (f"0.25 * tl.load({ptr} + (nc.to(tl.int64) * HU + (p + H % 2) // 2) * WU + (cols + W % 2) // 2, "
            "mask=out_ok, other=0.0).to(ACC)")


# MS-SSIM: the per-plane upstream gradients come from the combine's gradient at this level, computed in the
# prologue from the saved (L, 2, N, C) statistics and the caller's gradient G (no combine-backward launch).
_MS_UPSTREAM_SIG = ", MS_STATS, MS_W, ms_per, ms_level, MS_REDUCE: tl.constexpr"


def _ms_upstream_scalars(levels: int) -> list[str]:
    scale = "(tl.cast(ws_hi, ACC) + tl.cast(ws_lo, ACC)) / div_s"
    return [
        "gidx = (nc // C) * gsn + (nc % C) * gsc",
        ("d_s, d_cs = ms_level_upstream(G + g_off_s + gidx, MS_STATS, MS_W, nc, tl.num_programs(2), ms_per, "
         f"ms_level, {levels}, MS_REDUCE)"),
        "gs = 0.0",
        "gcs = 0.0",
        "if HAS_GS:",
        f"    gs = d_s.to(ACC) * {scale}",
        "if HAS_GCS:",
        f"    gcs = d_cs.to(ACC) * {scale}",
    ]


# A 2-D backward program: a column strip (axis 0) and a row segment (axis 1) of plane nc = n*C + c (axis 2).
_PLANE_PROGRAM = ["pid_w = tl.program_id(0)", "pid_h = tl.program_id(1)", "nc = tl.program_id(2)", "n = nc // C",
                  "c = nc % C"]


def render_grad_fused_2d(k: int, maps: tuple[str, ...], name: str, unroll: bool = False, ms_levels: int = 0) -> str:
    """Backward in one pass for 2-D inputs: nothing full-size is written but the gradients.

    Streaming down the rows, three stages run K-1 rows apart: (1) statistics of the map row q (shift chain);
    (2) gradient maps at q, fed to a second shift chain that filters them vertically (adjoint, flipped window);
    (3) the vertically filtered row goes to a two-row scratch buffer private to the program, and after a barrier
    shifted loads filter it horizontally. A program of BW columns yields BW - (K - 1) output columns.
    ``maps`` lists the gradient maps needed: bm, cm, and ax (for dx) / ay (for dy). HAS_L1 adds the fused
    L1 term's gradient; HAS_UP adds the next MS-SSIM level's gradient through the pooling adjoint.
    ``ms_levels`` > 0 (MS-SSIM levels) derives the upstream gradients from the combine in the prologue; at 0 the
    source is unchanged.
    """
    r = k // 2
    sig = (
        f"X, Y, WIN, WINF, {_UPSTREAM_SIG}, wl_hi, wl_lo, div_l1, GMAP, UPX, UPY, HU, WU, DX, DY, SCR, "
        "C, H, W, HO, WO, sxn, sxc, sxh, sxw, syn, syc, syh, syw, c1, c2, "
        "OFF: tl.constexpr, BW: tl.constexpr, RS, ACC: tl.constexpr, "
        "HAS_GS: tl.constexpr, HAS_GCS: tl.constexpr, HAS_GMAP: tl.constexpr, HAS_L1: tl.constexpr, "
        "HAS_UP: tl.constexpr, SYMMETRIC: tl.constexpr" + (_MS_UPSTREAM_SIG if ms_levels else "")
    )
    body = _PLANE_PROGRAM + [
        "j = tl.arange(0, BW)",
        f"cols = pid_w * (BW - {k - 1}) + j",
        f"out_ok = (j < BW - {k - 1}) & (cols < W)",
        f"mc = cols - OFF - {r}",
        "mc_ok = (mc >= 0) & (mc < WO)",
        "xb = X + n.to(tl.int64) * sxn + c.to(tl.int64) * sxc",
        "yb = Y + n.to(tl.int64) * syn + c.to(tl.int64) * syc",
        "xcol = cols * sxw",
        "ycol = cols * syw",
    ]
    body += weights(k, "WIN")
    # the adjoint uses the reversed window; a symmetric one (the Gaussian) reuses the forward taps' registers
    body += [f"f{i} = w{i}" for i in range(k)]
    body += ["if not SYMMETRIC:"] + indent([f"f{i} = tl.load(WINF + c * {k} + {i}).to(ACC)" for i in range(k)])
    body += column_taps(k, f"-{r}", "W", {"x": "sxw", "y": "syw"})
    body += _ms_upstream_scalars(ms_levels) if ms_levels else _UPSTREAM_SCALARS
    body += [
        "gl1 = 0.0",
        "if HAS_L1:",
        "    gl1 = tl.load(G + g_off_s + gidx).to(ACC) * (tl.cast(wl_hi, ACC) + tl.cast(wl_lo, ACC)) / div_l1",
        "p0 = pid_h * RS",
        f"steps = tl.minimum(RS, H - p0) + {4 * r}",
        "scr = SCR + ((pid_h * tl.num_programs(0) + pid_w) + nc * tl.num_programs(0) * tl.num_programs(1)).to(tl.int64)"
        f" * {2 * len(maps)} * BW",
    ]
    body += chain_init(STAT_NAMES, k)
    body += [f"b_{q}_{jj} = tl.zeros([BW], ACC)" for q in maps for jj in range(k - 1)]
    row: list[str] = []
    for q in STAT_NAMES:
        row += chain(q, k)
    row += [
        f"q = p0 - OFF - {3 * r} + t",
        "qv = tl.zeros([BW], tl.int32) + q",
        f"mvalid = mc_ok & (qv >= 0) & (qv < HO) & ((tl.zeros([BW], tl.int32) + t) >= {2 * r})",
        *SSIM_TERMS,
        "gp = gs",
        "if HAS_GMAP:",
        "    gp = tl.load(GMAP + (nc.to(tl.int64) * HO + q) * WO + mc, mask=mvalid, other=0.0).to(ACC)",
        *GRAD_MAPS,
    ]
    row += [f"h_{q} = tl.where(mvalid, {q}, 0.0)" for q in maps]
    for q in maps:
        row += [line.replace("a_", "b_").replace(" w", " f").replace("= w", "= f") for line in chain(q, k)]
    emit = [f"p = p0 + t - {4 * r}", "buf = scr + (t % 2) * " + f"{len(maps)} * BW"]
    emit += [f"tl.store(buf + {i} * BW + j, v_{q})" for i, q in enumerate(maps)]
    emit += ["tl.debug_barrier()"]
    emit += [f"d_{q} = tl.zeros([BW], ACC)" for q in maps]
    for kw in range(k):
        emit.append(f"sm = j + {kw} < BW")
        emit += [f"d_{q} += f{kw} * tl.load(buf + {i} * BW + j + {kw}, mask=sm, other=0.0)"
                 for i, q in enumerate(maps)]
    emit += [
        "xv = tl.load(xb + p.to(tl.int64) * sxh + xcol, mask=out_ok, other=0.0).to(ACC)",
        "yv = tl.load(yb + p.to(tl.int64) * syh + ycol, mask=out_ok, other=0.0).to(ACC)",
        "pix = (nc.to(tl.int64) * H + p) * W + cols",
        _L1_SIGN,
    ]
    for grad, out, up, own, other, l1_sign in (("ax", "DX", "UPX", "xv", "yv", "+"),
                                                ("ay", "DY", "UPY", "yv", "xv", "-")):
        if grad not in maps:
            continue
        emit += [
            f"g_val = d_{grad} + 2.0 * {own} * d_bm + {other} * d_cm",
            "if HAS_L1:",
            f"    g_val = g_val {l1_sign} gl1 * sgn",
            "if HAS_UP:",
            f"    g_val += {_upsampled(up)}",
            f"tl.store({out} + pix, g_val.to({out}.dtype.element_ty), mask=out_ok)",
        ]
    row += [f"if (t >= {4 * r}) & (t < steps):"] + indent(emit)
    prologue, loop = streamed_rows_2d(k, f"p0 - {2 * r}", row, unroll)
    body += prologue + loop
    return (_MS_IMPORT if ms_levels else "") + f"def {name}({sig}):\n" + "\n".join(indent(body)) + "\n"


def render_grad_saved_2d(k: int, maps: tuple[str, ...], name: str, unroll: bool = False, lanes: bool = False) -> str:
    """Backward for 2-D inputs from the unit gradient maps the forward saved (``SAVED_GRAD_MAPS``): the adjoint
    filter (flipped window WINF) of ``maps`` = bm, cm and ax and/or ay, streamed down the rows with the next row's
    loads in flight, then dx = gs·(W*ax + 2x·W*bm + y·W*cm) (dy alike) with the per-plane upstream gradient gs,
    plus the fused L1 term's gradient. Nothing is recomputed and nothing but the gradients is written.
    ``lanes``: the W taps by warp shuffles of aligned segments (``ops/lane_shift.py``; K <= 33)."""
    r = k // 2
    sig = (
        f"X, Y, MAPS, WINF, {_UPSTREAM_SIG}, wl_hi, wl_lo, div_l1, DX, DY, "
        "C, H, W, HO, WO, sxn, sxc, sxh, sxw, syn, syc, syh, syw, "
        "OFF: tl.constexpr, BW: tl.constexpr, RS, ACC: tl.constexpr, HAS_L1: tl.constexpr"
    )
    body = _PLANE_PROGRAM + [
        "cols = pid_w * BW + tl.arange(0, BW)",
        "col_ok = cols < W",
        "plane_sz = tl.cast(HO, tl.int64) * WO",
        "slot_sz = tl.num_programs(2).to(tl.int64) * plane_sz",
        "mb = MAPS + nc.to(tl.int64) * plane_sz + cols",
        "xb = X + n.to(tl.int64) * sxn + c.to(tl.int64) * sxc + cols * sxw",
        "yb = Y + n.to(tl.int64) * syn + c.to(tl.int64) * syc + cols * syw",
        "gidx = (nc // C) * gsn + (nc % C) * gsc",
        "gs = tl.load(G + g_off_s + gidx).to(ACC) * (tl.cast(ws_hi, ACC) + tl.cast(ws_lo, ACC)) / div_s",
        "gl1 = 0.0",
        "if HAS_L1:",
        "    gl1 = tl.load(G + g_off_s + gidx).to(ACC) * (tl.cast(wl_hi, ACC) + tl.cast(wl_lo, ACC)) / div_l1",
        "p0 = pid_h * RS",
        f"steps = tl.minimum(RS, H - p0) + {k - 1}",
    ]
    body += weights(k, "WINF")
    body += column_taps(k, "-OFF", "WO", {"m": "1"})
    body += ["zr = tl.zeros([BW], tl.int32)"] + chain_init(maps, k) + (lane_masks("WO") if lanes else [])

    loads, filt, registers = slot_map_rows(k, maps, "HO", "{row}.to(tl.int64) * WO", "slot_sz",
                                           lanes="-OFF" if lanes else None)
    per_row = [line for q in maps for line in chain(q, k)]
    emit = [
        f"p = p0 + t - {k - 1}",
        "xv = tl.load(xb + p.to(tl.int64) * sxh, mask=col_ok, other=0.0).to(ACC)",
        "yv = tl.load(yb + p.to(tl.int64) * syh, mask=col_ok, other=0.0).to(ACC)",
        "pix = (nc.to(tl.int64) * H + p) * W + cols",
        _L1_SIGN,
    ]
    for grad, out, own, other, l1_sign in (("ax", "DX", "xv", "yv", "+"), ("ay", "DY", "yv", "xv", "-")):
        if grad in maps:
            emit += [
                f"g_val = gs * (v_{grad} + 2.0 * {own} * v_bm + {other} * v_cm)",
                "if HAS_L1:",
                f"    g_val = g_val {l1_sign} gl1 * sgn",
                f"tl.store({out} + pix, g_val.to({out}.dtype.element_ty), mask=col_ok)",
            ]
    per_row += [f"if (t >= {k - 1}) & (t < steps):"] + indent(emit)
    prologue, loop = pipelined_rows(f"p0 - OFF - {r}", loads, filt, registers, per_row, unroll)
    body += prologue + loop
    return (LANE_IMPORT if lanes else "") + f"def {name}({sig}):\n" + "\n".join(indent(body)) + "\n"
