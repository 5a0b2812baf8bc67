"""Source renderers for the separable-window SSIM kernels (2-D and 3-D), one variant per window size K.

Design (per program: one column strip of BW pixels, one segment of RS output rows, one plane or 3-D slice):
- the W axis (and, in 3-D, the D axis) is filtered with shifted masked loads, which hit L1/L2;
- the H axis is filtered while streaming down the rows: K-1 register accumulators per quantity form a shift
  chain, so each input row is read and filtered once and every output row pops out K-1 rows later;
- zero padding is the load mask, so ``same`` (zero-padded) and ``valid`` differ only by a centre offset OFF.
Output coordinates o map to source coordinates o + SHIFT - R + k (k = 0..K-1, R = K // 2): SHIFT = OFF for the
forward correlation, SHIFT = -OFF for its adjoint in the backward pass (with the flipped window).
"""

from __future__ import annotations

from fusedsim.ops._codegen import indent

STAT_NAMES = ("x", "y", "xx", "yy", "xy")


def _weights(k: int, table: str) -> list[str]:
    return [f"w{i} = tl.load({table} + c * {k} + {i}).to(ACC)" for i in range(k)]


def _chain(q: str, k: int) -> list[str]:
    """Shift-chain vertical filter: ``v_q`` is the completed output; a_q_j are the pending rows."""
    if k == 1:
        return [f"v_{q} = w0 * h_{q}"]
    lines = [f"v_{q} = a_{q}_0 + w{k - 1} * h_{q}"]
    for j in range(k - 2):
        lines.append(f"a_{q}_{j} = a_{q}_{j + 1} + w{k - 2 - j} * h_{q}")
    lines.append(f"a_{q}_{k - 2} = w0 * h_{q}")
    return lines


def _chain_init(names: tuple[str, ...], k: int) -> list[str]:
    return [f"a_{q}_{j} = tl.zeros([BW], ACC)" for q in names for j in range(k - 1)]


def _column_taps(k: int, shift: str, limit: str, strides: dict[str, str]) -> list[str]:
    """Per W-tap in-bounds masks and element offsets relative to the row pointer (loop invariant; with a unit
    stride the offsets are compile-time constants that fold into the load instructions)."""
    lines = []
    for kw in range(k):
        col = f"(cols + ({shift} - {k // 2} + {kw}))"
        lines.append(f"cm{kw} = ({col} >= 0) & ({col} < {limit})")
        for tag, stride in strides.items():
            lines.append(f"{tag}o{kw} = ({shift} - {k // 2} + {kw}) * {stride}")
    return lines


def _accumulate_tap(target: str, kw: int) -> list[str]:
    """Add tap ``kw``'s weighted x, y, x², y², xy (from ``xv``, ``yv``) into ``{target}_*``."""
    return [
        f"wx = w{kw} * xv",
        f"wy = w{kw} * yv",
        f"{target}_x += wx",
        f"{target}_y += wy",
        f"{target}_xx += wx * xv",
        f"{target}_yy += wy * yv",
        f"{target}_xy += wx * yv",
    ]


def _stat_taps(k: int, three_d: bool) -> list[str]:
    """Horizontal (and depth) filtering of x, y, x², y², xy for the current input row into h_*."""
    lines = [f"h_{q} = tl.zeros([BW], ACC)" for q in STAT_NAMES]
    depth_taps = range(k) if three_d else [None]
    for kd in depth_taps:
        target = "i" if three_d else "h"
        if three_d:
            lines += [f"i_{q} = tl.zeros([BW], ACC)" for q in STAT_NAMES]
            lines.append(f"xd = xr + dd{kd}.to(tl.int64) * sxd")
            lines.append(f"yd = yr + dd{kd}.to(tl.int64) * syd")
            row_mask = f"rok & dok{kd}"
        else:
            lines.append("xd = xr")
            lines.append("yd = yr")
            row_mask = "rok"
        for kw in range(k):
            lines += [
                f"m = cm{kw} & {row_mask}",
                f"xv = tl.load(xd + xo{kw}, mask=m, other=0.0).to(ACC)",
                f"yv = tl.load(yd + yo{kw}, mask=m, other=0.0).to(ACC)",
            ] + _accumulate_tap(target, kw)
        if three_d:
            lines += [f"h_{q} += w{kd} * i_{q}" for q in STAT_NAMES]
    return lines


def _row_loads_2d(k: int, prefix: str, row: str) -> list[str]:
    """Issue the 2K shifted, masked loads of one input row into registers ``{prefix}x{kw}``, ``{prefix}y{kw}``.
    (An unmasked variant for programs away from the borders measured no faster: the loop is latency-bound.)"""
    lines = [
        f"{prefix}yin = {row}",
        f"{prefix}ry = tl.zeros([BW], tl.int32) + {prefix}yin",
        f"{prefix}rok = ({prefix}ry >= 0) & ({prefix}ry < H)",
        f"{prefix}xr = xb + {prefix}yin.to(tl.int64) * sxh + xcol",
        f"{prefix}yr = yb + {prefix}yin.to(tl.int64) * syh + ycol",
    ]
    for kw in range(k):
        lines += [
            f"m = cm{kw} & {prefix}rok",
            f"{prefix}x{kw} = tl.load({prefix}xr + xo{kw}, mask=m, other=0.0)",
            f"{prefix}y{kw} = tl.load({prefix}yr + yo{kw}, mask=m, other=0.0)",
        ]
    return lines


def _row_filter_2d(k: int, prefix: str) -> list[str]:
    """Horizontal filtering of x, y, x², y², xy from registers loaded by ``_row_loads_2d``."""
    lines = [f"h_{q} = tl.zeros([BW], ACC)" for q in STAT_NAMES]
    for kw in range(k):
        lines += [
            f"xv = {prefix}x{kw}.to(ACC)",
            f"yv = {prefix}y{kw}.to(ACC)",
        ] + _accumulate_tap("h", kw)
    return lines


def _streamed_rows_2d(k: int, first_row: str, per_row: list[str], unroll: bool) -> tuple[list[str], list[str]]:
    """Software-pipelined row stream: the loads of row t+1 are issued before row t is filtered. ``per_row`` (the
    vertical chains and the guarded emission) runs after each row's filtering with ``t`` set. ``unroll`` doubles
    the body so the prefetched registers alternate between the ``p`` and ``n`` sets without moves (fewer
    instructions, more registers)."""
    prologue = _row_loads_2d(k, "p", f"{first_row}")
    if not unroll:
        body = ["t = tt"] + _row_loads_2d(k, "n", f"{first_row} + t + 1") + _row_filter_2d(k, "p") + per_row
        body += [f"p{a}{kw} = n{a}{kw}" for kw in range(k) for a in "xy"]
        return prologue, ["for tt in range(0, steps):"] + indent(body)
    loop = ["for tt in range(0, steps, 2):"]
    body = ["t = tt"] + _row_loads_2d(k, "n", f"{first_row} + t + 1") + _row_filter_2d(k, "p") + per_row
    body += ["t = tt + 1"] + _row_loads_2d(k, "p", f"{first_row} + t + 1") + _row_filter_2d(k, "n") + per_row
    return prologue, loop + indent(body)


def _depth_taps(k: int, shift: str, limit: str) -> list[str]:
    lines = []
    for kd in range(k):
        lines.append(f"dd{kd} = d_out + ({shift} - {k // 2} + {kd})")
        # masks are full vectors: Triton's interpreter mis-types a block mask combined with a scalar one
        lines.append(f"dv{kd} = tl.zeros([BW], tl.int32) + dd{kd}")
        lines.append(f"dok{kd} = (dv{kd} >= 0) & (dv{kd} < {limit})")
    return lines


_STATS_SIG = (
    "X, Y, WIN, {outputs}, C, D, H, W, DO, HO, WO, "
    "sxn, sxc, sxd, sxh, sxw, syn, syc, syd, syh, syw, c1, c2, "
    "OFF: tl.constexpr, BW: tl.constexpr, RS: tl.constexpr, ACC: tl.constexpr{flags}"
)


def _stats_prologue(k: int, three_d: bool) -> list[str]:
    lines = [
        "pid_w = tl.program_id(0)",
        "pid_h = tl.program_id(1)",
        "pid_p = tl.program_id(2)",
        "d_out = pid_p % DO",
        "nc = pid_p // DO",
        "n = nc // C",
        "c = nc % C",
        "cols = pid_w * BW + tl.arange(0, BW)",
        "col_ok = cols < WO",
        "xb = X + n.to(tl.int64) * sxn + c.to(tl.int64) * sxc",
        "yb = Y + n.to(tl.int64) * syn + c.to(tl.int64) * syc",
        "xcol = cols * sxw",
        "ycol = cols * syw",
    ]
    lines += _weights(k, "WIN")
    lines += _column_taps(k, "OFF", "W", {"x": "sxw", "y": "syw"})
    if three_d:
        lines += _depth_taps(k, "OFF", "D")
    lines += [
        "o0 = pid_h * RS",
        f"steps = tl.minimum(RS, HO - o0) + {k - 1}",
    ]
    lines += _chain_init(STAT_NAMES, k)
    return lines


def _stats_row(k: int, three_d: bool) -> list[str]:
    lines = [
        f"yin = o0 + OFF - {k // 2} + t",
        "ry = tl.zeros([BW], tl.int32) + yin",
        "rok = (ry >= 0) & (ry < H)",
        "xr = xb + yin.to(tl.int64) * sxh + xcol",
        "yr = yb + yin.to(tl.int64) * syh + ycol",
    ]
    lines += _stat_taps(k, three_d)
    for q in STAT_NAMES:
        lines += _chain(q, k)
    return lines


_SSIM_TERMS = [
    "mx = v_x",
    "my = v_y",
    "sxx = v_xx - mx * mx",
    "syy = v_yy - my * my",
    "sxy = v_xy - mx * my",
    "cs = (2.0 * sxy + c2) / (sxx + syy + c2)",
    "lum = (2.0 * mx * my + c1) / (mx * mx + my * my + c1)",
]


def render_forward(k: int, three_d: bool, name: str, unroll: bool = True) -> str:
    """Forward: per-program partial sums of the SSIM and cs maps, and optionally the SSIM map itself."""
    sig = _STATS_SIG.format(outputs="PS, PCS, MAP", flags=", WRITE_MAP: tl.constexpr")
    body = _stats_prologue(k, three_d)
    body += ["acc_s = tl.zeros([BW], ACC)", "acc_cs = tl.zeros([BW], ACC)"]
    emit = [
        f"o = o0 + t - {k - 1}",
        *_SSIM_TERMS,
        "s = lum * cs",
        "acc_s += tl.where(col_ok, s, 0.0)",
        "acc_cs += tl.where(col_ok, cs, 0.0)",
        "if WRITE_MAP:",
        "    tl.store(MAP + (pid_p.to(tl.int64) * HO + o) * WO + cols, s.to(MAP.dtype.element_ty), mask=col_ok)",
    ]
    if not three_d:
        chains = [line for q in STAT_NAMES for line in _chain(q, k)]
        per_row = chains + [f"if (t >= {k - 1}) & (t < steps):"] + indent(emit)
        prologue, loop = _streamed_rows_2d(k, f"o0 + OFF - {k // 2}", per_row, unroll)
        body += prologue + loop
    else:
        loop = _stats_row(k, three_d) + [f"if t >= {k - 1}:"] + indent(emit)
        body += ["for t in range(0, steps):"] + indent(loop)
    body += [
        "lin = (pid_p * tl.num_programs(1) + pid_h) * tl.num_programs(0) + pid_w",
        "tl.store(PS + lin, tl.sum(acc_s, axis=0))",
        "tl.store(PCS + lin, tl.sum(acc_cs, axis=0))",
    ]
    return f"def {name}({sig}):\n" + "\n".join(indent(body)) + "\n"


# per-plane upstream gradients of the SSIM sum (gs) and the cs sum (gcs); absent ones are zero
_UPSTREAM_SCALARS = [
    "gs = 0.0",
    "gcs = 0.0",
    "if HAS_GS:",
    "    gs = tl.load(GS + nc).to(ACC)",
    "if HAS_GCS:",
    "    gcs = tl.load(GCS + nc).to(ACC)",
]

_GRAD_MAPS = [
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
    """Backward, step 1: recompute the statistics and write the gradient maps (bm, cm, ax, ay) on the output grid.

    Upstream gradients: per-plane scalars GS (for the SSIM sum) and GCS (for the cs sum), or a per-pixel map GMAP.
    """
    sig = _STATS_SIG.format(
        outputs="GS, GCS, GMAP, MAPS, NCD",
        flags=", HAS_GS: tl.constexpr, HAS_GCS: tl.constexpr, HAS_GMAP: tl.constexpr, "
        "AX_SLOT: tl.constexpr, AY_SLOT: tl.constexpr",
    )
    body = _stats_prologue(k, three_d)
    body += _UPSTREAM_SCALARS + ["plane_sz = HO.to(tl.int64) * WO"]
    emit = [
        f"o = o0 + t - {k - 1}",
        "pix = (pid_p.to(tl.int64) * HO + o) * WO + cols",
        *_SSIM_TERMS,
        "gp = gs",
        "if HAS_GMAP:",
        "    gp = tl.load(GMAP + pix, mask=col_ok, other=0.0).to(ACC)",
        *_GRAD_MAPS,
        "tl.store(MAPS + pix, bm, mask=col_ok)",
        "tl.store(MAPS + NCD * plane_sz + pix, cm, mask=col_ok)",
        "if AX_SLOT >= 0:",
        "    tl.store(MAPS + AX_SLOT * NCD * plane_sz + pix, ax, mask=col_ok)",
        "if AY_SLOT >= 0:",
        "    tl.store(MAPS + AY_SLOT * NCD * plane_sz + pix, ay, mask=col_ok)",
    ]
    loop = _stats_row(k, three_d) + [f"if t >= {k - 1}:"] + indent(emit)
    body += ["for t in range(0, steps):"] + indent(loop)
    return f"def {name}({sig}):\n" + "\n".join(indent(body)) + "\n"


def render_grad_conv(k: int, three_d: bool, name: str) -> str:
    """Backward, step 2: correlate the gradient maps with the flipped window (the adjoint of the forward filter)
    and combine: dx = W*ax + 2 x (W*bm) + y (W*cm), dy = W*ay + 2 y (W*bm) + x (W*cm)."""
    sig = (
        "X, Y, MAPS, WIN, DX, DY, NCD, C, D, H, W, DO, HO, WO, "
        "sxn, sxc, sxd, sxh, sxw, syn, syc, syd, syh, syw, "
        "OFF: tl.constexpr, BW: tl.constexpr, RS: tl.constexpr, ACC: tl.constexpr, "
        "AX_SLOT: tl.constexpr, AY_SLOT: tl.constexpr"
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
        "plane_sz = HO.to(tl.int64) * WO",
        "mb = MAPS + nc.to(tl.int64) * DO * plane_sz",
        "slot_sz = NCD * plane_sz",
    ]
    body += _weights(k, "WIN")
    body += _column_taps(k, "-OFF", "WO", {"m": "1"})
    if three_d:
        body += _depth_taps(k, "-OFF", "DO")
    body += ["o0 = pid_h * RS", f"steps = tl.minimum(RS, H - o0) + {k - 1}"]
    body += _chain_init(tuple(maps), k)
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
        row += _chain(q, k)
    emit = [
        f"p = o0 + t - {k - 1}",
        "xv = tl.load(X + n.to(tl.int64) * sxn + c.to(tl.int64) * sxc + d_out.to(tl.int64) * sxd"
        " + p.to(tl.int64) * sxh + cols * sxw, mask=col_ok, other=0.0).to(ACC)",
        "yv = tl.load(Y + n.to(tl.int64) * syn + c.to(tl.int64) * syc + d_out.to(tl.int64) * syd"
        " + p.to(tl.int64) * syh + cols * syw, mask=col_ok, other=0.0).to(ACC)",
        "pix = (pid_p.to(tl.int64) * H + p) * W + cols",
        "if AX_SLOT >= 0:",
        "    tl.store(DX + pix, (v_ax + 2.0 * xv * v_bm + yv * v_cm).to(DX.dtype.element_ty), mask=col_ok)",
        "if AY_SLOT >= 0:",
        "    tl.store(DY + pix, (v_ay + 2.0 * yv * v_bm + xv * v_cm).to(DY.dtype.element_ty), mask=col_ok)",
    ]
    loop = row + [f"if t >= {k - 1}:"] + indent(emit)
    body += ["for t in range(0, steps):"] + indent(loop)
    return f"def {name}({sig}):\n" + "\n".join(indent(body)) + "\n"


def render_grad_fused_2d(k: int, maps: tuple[str, ...], name: str, unroll: bool = False) -> str:
    """Backward in one pass for 2-D inputs: nothing full-size is written but the gradients.

    Streaming down the rows, three stages run K-1 rows apart: (1) statistics of the map row q (shift chain);
    (2) gradient maps at q, fed to a second shift chain that filters them vertically (adjoint, flipped window);
    (3) the vertically filtered row goes to a two-row scratch buffer private to the program, and after a barrier
    shifted loads filter it horizontally. A program of BW columns yields BW - (K - 1) output columns.
    ``maps`` lists the gradient maps needed: bm, cm, and ax (for dx) / ay (for dy).
    """
    r = k // 2
    sig = (
        "X, Y, WIN, WINF, GS, GCS, GMAP, DX, DY, SCR, C, H, W, HO, WO, "
        "sxn, sxc, sxh, sxw, syn, syc, syh, syw, c1, c2, "
        "OFF: tl.constexpr, BW: tl.constexpr, RS: tl.constexpr, ACC: tl.constexpr, "
        "HAS_GS: tl.constexpr, HAS_GCS: tl.constexpr, HAS_GMAP: tl.constexpr, SYMMETRIC: tl.constexpr"
    )
    body = [
        "pid_w = tl.program_id(0)",
        "pid_h = tl.program_id(1)",
        "nc = tl.program_id(2)",
        "n = nc // C",
        "c = nc % C",
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
    body += _weights(k, "WIN")
    # the adjoint uses the reversed window; a symmetric one (the Gaussian) reuses the forward taps' registers
    body += [f"f{i} = w{i}" for i in range(k)]
    body += ["if not SYMMETRIC:"] + indent([f"f{i} = tl.load(WINF + c * {k} + {i}).to(ACC)" for i in range(k)])
    body += _column_taps(k, f"-{r}", "W", {"x": "sxw", "y": "syw"})
    body += _UPSTREAM_SCALARS
    body += [
        "p0 = pid_h * RS",
        f"steps = tl.minimum(RS, H - p0) + {4 * r}",
        "scr = SCR + ((pid_h * tl.num_programs(0) + pid_w) + nc * tl.num_programs(0) * tl.num_programs(1)).to(tl.int64)"
        f" * {2 * len(maps)} * BW",
    ]
    body += _chain_init(STAT_NAMES, k)
    body += [f"b_{q}_{jj} = tl.zeros([BW], ACC)" for q in maps for jj in range(k - 1)]
    row: list[str] = []
    for q in STAT_NAMES:
        row += _chain(q, k)
    row += [
        f"q = p0 - OFF - {3 * r} + t",
        "qv = tl.zeros([BW], tl.int32) + q",
        f"mvalid = mc_ok & (qv >= 0) & (qv < HO) & ((tl.zeros([BW], tl.int32) + t) >= {2 * r})",
        *_SSIM_TERMS,
        "gp = gs",
        "if HAS_GMAP:",
        "    gp = tl.load(GMAP + (nc.to(tl.int64) * HO + q) * WO + mc, mask=mvalid, other=0.0).to(ACC)",
        *_GRAD_MAPS,
    ]
    row += [f"h_{q} = tl.where(mvalid, {q}, 0.0)" for q in maps]
    for q in maps:
        row += [line.replace("a_", "b_").replace(" w", " f").replace("= w", "= f") for line in _chain(q, k)]
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
    ]
    if "ax" in maps:
        emit.append("tl.store(DX + pix, (d_ax + 2.0 * xv * d_bm + yv * d_cm).to(DX.dtype.element_ty), mask=out_ok)")
    if "ay" in maps:
        emit.append("tl.store(DY + pix, (d_ay + 2.0 * yv * d_bm + xv * d_cm).to(DY.dtype.element_ty), mask=out_ok)")
    row += [f"if (t >= {4 * r}) & (t < steps):"] + indent(emit)
    prologue, loop = _streamed_rows_2d(k, f"p0 - {2 * r}", row, unroll)
    body += prologue + loop
    return f"def {name}({sig}):\n" + "\n".join(indent(body)) + "\n"
