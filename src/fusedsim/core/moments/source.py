"""Building block: separable windowed moments of two images, streamed (Triton source, one variant per K).

Every windowed-statistics metric (SSIM, MS-SSIM, LNCC, DSSIM, IW-SSIM) needs, at each output pixel, the five
local moments of x and y under a separable window w (any odd K, Gaussian or box, one row of taps per channel):

    mu_x = W*x,  mu_y = W*y,  E[x²] = W*x²,  E[y²] = W*y²,  E[xy] = W*(x·y)

This module renders the Triton source that computes them in one pass over the inputs with nothing full-size
written, and hands each completed output row to a consumer (a list of source lines that reads ``v_x, v_y, v_xx,
v_yy, v_xy`` and the output row index ``o``). Kernels built on it: ``ops/ssim.py`` (forward, backward, reductions,
fused L1), ``ops/windowed_moments.py`` (the moments themselves, as maps).

Design (per program: one column strip of BW pixels, one segment of RS output rows, one plane or 3-D slice):
- the W axis (and, in 3-D, the D axis) is filtered with shifted masked loads, which hit L1/L2 (the adjoint
  passes over saved maps may take the W taps by warp shuffles instead: ``lanes`` of ``slot_map_rows``);
- the H axis is filtered while streaming down the rows: K-1 register accumulators per quantity form a shift
  chain, so each input row is read and filtered once and every output row pops out K-1 rows later;
- zero padding is the load mask, so ``same`` (zero-padded) and ``valid`` differ only by a centre offset OFF.
Output coordinates o map to source coordinates o + SHIFT - R + k (k = 0..K-1, R = K // 2): SHIFT = OFF for the
forward correlation, SHIFT = -OFF for its adjoint in the backward pass (with the flipped window).

Why generated source rather than ``tl.static_range``: the shift chain holds K-1 separate register rows per
statistic, and a Triton loop cannot carry a Python list of tensors; a (K-1, BW) tensor instead would need a
shift or a ring buffer with masked extraction per row (~2x the FMAs of the chain in an issue-bound loop). See
benchmarks/NOTES.md for the measurements.
"""

from __future__ import annotations

from fusedsim.core.codegen import indent

STAT_NAMES = ("x", "y", "xx", "yy", "xy")


def weights(k: int, table: str) -> list[str]:
    """Load the K taps of channel ``c`` from a (C, K) table into scalars w0..w{K-1}."""
    return [f"w{i} = tl.load({table} + c * {k} + {i}).to(ACC)" for i in range(k)]


def chain(q: str, k: int) -> list[str]:
    """Shift-chain vertical filter: ``v_q`` is the completed output; a_q_j are the pending rows."""
    if k == 1:
        return [f"v_{q} = w0 * h_{q}"]
    lines = [f"v_{q} = a_{q}_0 + w{k - 1} * h_{q}"]
    for j in range(k - 2):
        lines.append(f"a_{q}_{j} = a_{q}_{j + 1} + w{k - 2 - j} * h_{q}")
    lines.append(f"a_{q}_{k - 2} = w0 * h_{q}")
    return lines


def chain_init(names: tuple[str, ...], k: int) -> list[str]:
    return [f"a_{q}_{j} = tl.zeros([BW], ACC)" for q in names for j in range(k - 1)]


def column_taps(k: int, shift: str, limit: str, strides: dict[str, str]) -> list[str]:
    """Per W-tap in-bounds masks and element offsets relative to the row pointer (loop invariant; with a unit
    stride the offsets are compile-time constants that fold into the load instructions)."""
    lines = []
    for kw in range(k):
        col = f"(cols + ({shift} - {k // 2} + {kw}))"
        lines.append(f"cm{kw} = ({col} >= 0) & ({col} < {limit})")
        for tag, stride in strides.items():
            lines.append(f"{tag}o{kw} = ({shift} - {k // 2} + {kw}) * {stride}")
    return lines


def accumulate_tap(target: str, kw: int) -> list[str]:
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


def stat_taps(k: int, three_d: bool, per_tap=None) -> list[str]:
    """Horizontal (and depth) filtering of x, y, x², y², xy for the current input row into h_*. ``per_tap``
    ((kd, kw) -> lines; kd is None in 2-D) runs after each tap's loads, with ``xv``, ``yv`` and its mask ``m``."""
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
            ] + (per_tap(kd, kw) if per_tap else []) + accumulate_tap(target, kw)
        if three_d:
            lines += [f"h_{q} += w{kd} * i_{q}" for q in STAT_NAMES]
    return lines


def row_loads_2d(k: int, prefix: str, row: str) -> list[str]:
    """Issue the 2K shifted, masked loads of one input row into registers ``{prefix}x{kw}``, ``{prefix}y{kw}``;
    ``{prefix}ry`` holds the row index as a vector. (An unmasked variant for programs away from the borders
    measured no faster: the loop is latency-bound.)"""
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


# Generated kernels that take their W taps by lane shifts (``ops/lane_shift.py``) import the helper.
LANE_IMPORT = "from fusedsim.core.lane_shift import lane_shift\n"


def lane_masks(limit: str) -> list[str]:
    """Loop-invariant in-bounds masks of the three aligned segments a lane-shifted row is loaded as: columns - 32
    (``l``), the columns themselves (``m``) and columns + 32 (``h``), against [0, ``limit``)."""
    return [f"lane_ok_l = (cols >= 32) & (cols - 32 < {limit})", f"lane_ok_m = cols < {limit}",
            f"lane_ok_h = cols + 32 < {limit}"]


def lane_segments(name: str, ptr: str, step: str, row_ok: str, shift: str, k: int) -> list[str]:
    """Load one row as the segments ``{name}_m`` (at ``ptr``), ``{name}_l`` / ``{name}_h`` (32 columns of
    ``step`` elements before / after) for taps at column offsets ``shift - K//2 .. shift + K//2`` (``shift`` a
    constexpr expression); a neighbour no tap reaches is not loaded (it aliases ``{name}_m``)."""
    r = k // 2
    return [
        f"{name}_m = tl.load({ptr}, mask=lane_ok_m & {row_ok}, other=0.0)",
        f"if {shift} - {r} < 0:",
        f"    {name}_l = tl.load({ptr} - 32 * {step}, mask=lane_ok_l & {row_ok}, other=0.0)",
        "else:",
        f"    {name}_l = {name}_m",
        f"if {shift} + {r} > 0:",
        f"    {name}_h = tl.load({ptr} + 32 * {step}, mask=lane_ok_h & {row_ok}, other=0.0)",
        "else:",
        f"    {name}_h = {name}_m",
    ]


def lane_tap(name: str, shift: str, k: int, kw: int) -> str:
    """Tap ``kw`` of the row held as ``{name}_l/m/h`` (see :func:`lane_segments`): one select and one shuffle."""
    return f"lane_shift({name}_l, {name}_m, {name}_h, {shift} - {k // 2} + {kw}, BW)"


def row_filter_2d(k: int, prefix: str) -> list[str]:
    """Horizontal filtering of x, y, x², y², xy from registers loaded by ``row_loads_2d``."""
    lines = [f"h_{q} = tl.zeros([BW], ACC)" for q in STAT_NAMES]
    for kw in range(k):
        lines += [
            f"xv = {prefix}x{kw}.to(ACC)",
            f"yv = {prefix}y{kw}.to(ACC)",
        ] + accumulate_tap("h", kw)
    return lines


def pipelined_rows(first_row: str, loads, filt, registers, per_row: list[str],
                   unroll: bool) -> tuple[list[str], list[str]]:
    """Software-pipelined row stream, generic over what a row holds: the loads of row t+1 (``loads(prefix, row)``,
    into the registers ``registers()`` names, after the prefix) are issued before row t is filtered (``filt(prefix)``), then
    ``per_row`` runs with ``t`` set. ``unroll`` doubles the body so the prefetched registers alternate between
    the ``p`` and ``n`` sets without moves (fewer instructions, more registers). The loop may run one row past
    ``steps`` when unrolled: ``per_row`` guards its stores with ``t < steps``. Returns (prologue, loop)."""
    prologue = loads("p", first_row)
    if not unroll:
        body = ["t = tt"] + loads("n", f"{first_row} + t + 1") + filt("p") + per_row
        body += [f"p{name} = n{name}" for name in registers()]
        return prologue, ["for tt in range(0, steps):"] + indent(body)
    body = ["t = tt"] + loads("n", f"{first_row} + t + 1") + filt("p") + per_row
    body += ["t = tt + 1"] + loads("p", f"{first_row} + t + 1") + filt("n") + per_row
    return prologue, ["for tt in range(0, steps, 2):"] + indent(body)


def slot_map_rows(k: int, names: tuple[str, ...], limit: str, row_offset: str, slot: str, lanes: str | None = None):
    """(loads, filt, registers) for :func:`pipelined_rows` over maps stored one slot (``slot`` elements) after
    another from the column pointers ``mb``, in the window's dtype: the K shifted, masked taps of map q go to
    registers ``{prefix}{q}_{kw}`` and are filtered horizontally into ``h_{q}``. ``row_offset`` (a format string
    of ``row``) turns a row index into an element offset; rows outside [0, ``limit``) read zeros. Needs ``zr``
    (int32 zeros of [BW]) and the ``cm``/``mo`` column taps. The adjoint passes of SSIM and LNCC use it.
    ``lanes``: the taps' column shift (the constexpr expression ``column_taps`` got) to take them by lane shifts
    of three aligned segments per map instead of K loads (needs :func:`lane_masks` of the maps' width and
    :data:`LANE_IMPORT`): the next row then keeps 3 prefetched registers per map instead of K."""

    def loads(prefix: str, row: str) -> list[str]:
        lines = [
            f"{prefix}srow = {row}",
            f"{prefix}rok = ((zr + {prefix}srow) >= 0) & ((zr + {prefix}srow) < {limit})",
            f"{prefix}mr = mb + {row_offset.format(row=prefix + 'srow')}",
        ]
        if lanes is not None:
            for i, q in enumerate(names):
                lines += lane_segments(f"{prefix}{q}", f"{prefix}mr + {i} * {slot}", "1", f"{prefix}rok", lanes, k)
            return lines
        for kw in range(k):
            lines.append(f"m = cm{kw} & {prefix}rok")
            lines += [f"{prefix}{q}_{kw} = tl.load({prefix}mr + {i} * {slot} + mo{kw}, mask=m, other=0.0)"
                      for i, q in enumerate(names)]
        return lines

    def filt(prefix: str) -> list[str]:
        lines = [f"h_{q} = tl.zeros([BW], ACC)" for q in names]
        if lanes is not None:
            return lines + [f"h_{q} += w{kw} * {lane_tap(prefix + q, lanes, k, kw)}" for kw in range(k) for q in names]
        return lines + [f"h_{q} += w{kw} * {prefix}{q}_{kw}" for kw in range(k) for q in names]

    def registers() -> list[str]:
        if lanes is not None:
            return ["srow", "rok", "mr"] + [f"{q}_{seg}" for q in names for seg in "lmh"]
        return ["srow", "rok", "mr"] + [f"{q}_{kw}" for kw in range(k) for q in names]

    return loads, filt, registers


def streamed_rows_2d(k: int, first_row: str, per_row: list[str], unroll: bool,
                     per_loaded_row=None) -> tuple[list[str], list[str]]:
    """The pipelined stream of the two inputs' rows (``row_loads_2d`` / ``row_filter_2d``). ``per_row`` (the
    vertical chains and the guarded emission) runs after each row's filtering with ``t`` set; ``per_loaded_row``
    (prefix -> lines) may read that row's raw registers."""
    extra = per_loaded_row or (lambda prefix: [])
    return pipelined_rows(first_row, lambda prefix, row: row_loads_2d(k, prefix, row),
                          lambda prefix: row_filter_2d(k, prefix) + extra(prefix),
                          lambda: [f"{a}{kw}" for kw in range(k) for a in "xy"] + ["yin", "ry"], per_row, unroll)


def depth_taps(k: int, shift: str, limit: str) -> list[str]:
    lines = []
    for kd in range(k):
        lines.append(f"dd{kd} = d_out + ({shift} - {k // 2} + {kd})")
        # masks are full vectors: Triton's interpreter mis-types a block mask combined with a scalar one
        lines.append(f"dv{kd} = tl.zeros([BW], tl.int32) + dd{kd}")
        lines.append(f"dok{kd} = (dv{kd} >= 0) & (dv{kd} < {limit})")
    return lines


STATS_SIG = (
    "X, Y, WIN, {outputs}, C, D, H, W, DO, HO, WO, "
    "sxn, sxc, sxd, sxh, sxw, syn, syc, syd, syh, syw, {scalars}"
    "OFF: tl.constexpr, BW: tl.constexpr, RS, ACC: tl.constexpr{flags}"
)


def stats_prologue(k: int, three_d: bool) -> list[str]:
    """Program coordinates, base pointers, window taps, column (and depth) masks, the first output row ``o0``,
    the number of streamed rows ``steps`` and the zeroed shift chains."""
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
    lines += weights(k, "WIN")
    lines += column_taps(k, "OFF", "W", {"x": "sxw", "y": "syw"})
    if three_d:
        lines += depth_taps(k, "OFF", "D")
    lines += [
        "o0 = pid_h * RS",
        f"steps = tl.minimum(RS, HO - o0) + {k - 1}",
    ]
    lines += chain_init(STAT_NAMES, k)
    return lines


def stats_row(k: int, three_d: bool, per_tap=None) -> list[str]:
    """One streamed input row (generic path, used for 3-D): filter it and advance the five chains (``per_tap``:
    see :func:`stat_taps`)."""
    lines = [
        f"yin = o0 + OFF - {k // 2} + t",
        "ry = tl.zeros([BW], tl.int32) + yin",
        "rok = (ry >= 0) & (ry < H)",
        "xr = xb + yin.to(tl.int64) * sxh + xcol",
        "yr = yb + yin.to(tl.int64) * syh + ycol",
    ]
    lines += stat_taps(k, three_d, per_tap)
    for q in STAT_NAMES:
        lines += chain(q, k)
    return lines


def moments_stream(k: int, three_d: bool, emit: list[str], unroll: bool = True, per_loaded_row=None,
                   per_tap=None) -> list[str]:
    """The streaming loop: after each completed output row (``o = o0 + t - (K-1)``), run ``emit`` with the five
    moments in ``v_x, v_y, v_xx, v_yy, v_xy``. Must follow ``stats_prologue``. ``per_loaded_row`` (2-D only) adds
    lines that see each input row's raw registers, ``per_tap`` (3-D only, see :func:`stat_taps`) lines that see
    each tap's loads (both used by the fused L1 term)."""
    if not three_d:
        chains = [line for q in STAT_NAMES for line in chain(q, k)]
        per_row = chains + [f"if (t >= {k - 1}) & (t < steps):"] + indent(emit)
        prologue, loop = streamed_rows_2d(k, f"o0 + OFF - {k // 2}", per_row, unroll, per_loaded_row)
        return prologue + loop
    if per_loaded_row is not None:
        raise ValueError("per-row hooks on raw inputs exist for 2-D kernels only")
    loop = stats_row(k, three_d, per_tap) + [f"if t >= {k - 1}:"] + indent(emit)
    return ["for t in range(0, steps):"] + indent(loop)


def render_moments(k: int, three_d: bool, name: str) -> str:
    """Kernel writing the five moment maps, shape (5, N, C, [DO,] HO, WO) in the accumulation dtype."""
    sig = STATS_SIG.format(outputs="OUT", scalars="", flags="")
    body = stats_prologue(k, three_d)
    emit = [
        f"o = o0 + t - {k - 1}",
        "pix = (pid_p.to(tl.int64) * HO + o) * WO + cols",
        "stat_sz = tl.num_programs(2).to(tl.int64) * HO * WO",
    ]
    emit += [f"tl.store(OUT + {i} * stat_sz + pix, v_{q}.to(OUT.dtype.element_ty), mask=col_ok)"
             for i, q in enumerate(STAT_NAMES)]
    body += moments_stream(k, three_d, emit)
    return f"def {name}({sig}):\n" + "\n".join(indent(body)) + "\n"
