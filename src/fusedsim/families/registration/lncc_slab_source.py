"""Triton source of the slab kernels of 3-D LNCC (``lncc_slab.py`` runs them): in-plane and depth filtering split.

Two kinds of kernel, each rendered per window size K:

- plane kernels (one program: a BW-column strip and RS rows of one slice) filter along W with shifted loads and
  along H with register shift chains (``moments_source.py``), and write to a slab scratch;
- depth kernels (one program: BLOCK consecutive in-plane voxels and DS consecutive output slices) load the
  DS + K - 1 scratch slices they need once and add each to the DS depth accumulators it reaches, so each
  in-plane result is filtered along D without being recomputed per depth tap.

Scratch layout: (slot, N·C, slices, H, W) contiguous, slice s of the scratch holding volume slice SBASE + s; a
depth kernel reads only slices in [SBASE, IHI) (everything else, volume padding included, counts as zero).
Integers that change from slab to slab are not specialised (``do_not_specialize``) so that one compiled kernel
serves every slab.
"""

from __future__ import annotations

from fusedsim.core.codegen import indent
from fusedsim.families.registration.lncc_terms import (
    CONST_LINES,
    CONSTS,
    GRAD_TERMS,
    NCC_TERMS,
    last_program_reduces,
    grad_map_stores,
)
from fusedsim.core.moments.source import (
    STAT_NAMES,
    chain,
    chain_init,
    column_taps,
    moments_stream,
    pipelined_rows,
    slot_map_rows,
    weights,
)

# per-launch integers of each kernel kind
PLANE_VARYING = ("LO", "NSL", "SBASE")
DEPTH_VARYING = ("SBASE", "IHI", "OLO", "OHI", "PBASE", "LAST", "GBASE")


def _plane_head(k: int, win: str) -> list[str]:
    """Plane-program coordinates: slice d = LO + (pid_p % NSL) of image nc, its columns, taps and rows."""
    return [
        "pid_w = tl.program_id(0)",
        "pid_h = tl.program_id(1)",
        "pid_p = tl.program_id(2)",
        "nc = pid_p // NSL",
        "d = LO + pid_p % NSL",
        "n = nc // C",
        "c = nc % C",
        "cols = pid_w * BW + tl.arange(0, BW)",
        "col_ok = cols < W",
        "plane = tl.cast(H, tl.int64) * W",
        *weights(k, win),
        "o0 = pid_h * RS",
        f"steps = tl.minimum(RS, H - o0) + {k - 1}",
    ]


def render_plane_moments(k: int, name: str) -> str:
    """In-plane window sums of p, t, p², t², pt of slices [LO, LO + NSL) into the 5-slot scratch SCR."""
    sig = ("X, Y, WIN, SCR, NCT, C, H, W, sxn, sxc, sxd, sxh, sxw, syn, syc, syd, syh, syw, LO, NSL, SBASE, NSS, "
           "OFF: tl.constexpr, BW: tl.constexpr, RS: tl.constexpr, ACC: tl.constexpr")
    body = _plane_head(k, "WIN") + [
        "xb = X + n.to(tl.int64) * sxn + c.to(tl.int64) * sxc + d.to(tl.int64) * sxd",
        "yb = Y + n.to(tl.int64) * syn + c.to(tl.int64) * syc + d.to(tl.int64) * syd",
        "xcol = cols * sxw",
        "ycol = cols * syw",
        *column_taps(k, "OFF", "W", {"x": "sxw", "y": "syw"}),
        "slot = tl.cast(NCT, tl.int64) * NSS * plane",
        "sb = SCR + (nc.to(tl.int64) * NSS + (d - SBASE)) * plane + cols",
        *chain_init(STAT_NAMES, k),
    ]
    emit = [f"o = o0 + t - {k - 1}", "po = sb + o * W"]
    emit += [f"tl.store(po + {i} * slot, v_{q}, mask=col_ok)" for i, q in enumerate(STAT_NAMES)]
    body += moments_stream(k, False, emit)
    return f"def {name}({sig}):\n" + "\n".join(indent(body)) + "\n"


def render_plane_adjoint(k: int, nmaps: int, name: str) -> str:
    """In-plane adjoint window sums (flipped window WINF) of ``nmaps`` scratch maps, slices [LO, LO + NSL) of
    SRC into the same place in DST. Rows are software-pipelined like the moments (``pipelined_rows``): the
    loop is latency-bound, and a plain loop ran at half the moments' speed per slice."""
    sig = ("SRC, WINF, DST, NCT, C, H, W, LO, NSL, SBASE, NSS, "
           "BW: tl.constexpr, RS: tl.constexpr, ACC: tl.constexpr")
    names = tuple(f"m{i}" for i in range(nmaps))
    body = _plane_head(k, "WINF") + [
        *column_taps(k, "0", "W", {"m": "1"}),
        "slot = tl.cast(NCT, tl.int64) * NSS * plane",
        "at = (nc.to(tl.int64) * NSS + (d - SBASE)) * plane",
        "mb = SRC + at + cols",
        "ob = DST + at + cols",
        "zr = tl.zeros([BW], tl.int32)",
        *chain_init(names, k),
    ]

    loads, filt, registers = slot_map_rows(k, names, "H", "{row} * W", "slot")
    per_row = [line for q in names for line in chain(q, k)]
    per_row += [f"if (t >= {k - 1}) & (t < steps):", f"    po = ob + (o0 + t - {k - 1}) * W"]
    per_row += [f"    tl.store(po + {i} * slot, v_m{i}, mask=col_ok)" for i in range(nmaps)]
    prologue, loop = pipelined_rows(f"o0 - {k // 2}", loads, filt, registers, per_row, unroll=True)
    body += prologue + loop
    return f"def {name}({sig}):\n" + "\n".join(indent(body)) + "\n"


def _depth_head(k: int, ds: int, names: tuple[str, ...], win: str) -> list[str]:
    """Depth-program coordinates and the depth filtering: a_{q}_{b} = window sum along D for output slice
    d0 + b of the scratch quantities ``names`` (slots 0..) of SRC."""
    lines = [
        "pid_b = tl.program_id(0)",
        "pid_d = tl.program_id(1)",
        "nc = tl.program_id(2)",
        "n = nc // C",
        "c = nc % C",
        "offs = pid_b * BLOCK + tl.arange(0, BLOCK)",
        "hw_ok = offs < HW",
        "zi = tl.zeros([BLOCK], tl.int32)",
        "d0 = OLO + pid_d * DS",
        "plane = tl.cast(HW, tl.int64)",
        "slot = tl.cast(NCT, tl.int64) * NSS * plane",
        "sb = SRC + nc.to(tl.int64) * NSS * plane + offs",
        *weights(k, win),
    ]
    lines += [f"a_{q}_{b} = tl.zeros([BLOCK], ACC)" for b in range(ds) for q in names]
    for j in range(ds + k - 1):
        # masks are full vectors: Triton's interpreter mis-types a block mask combined with a scalar one
        lines += [
            f"dv = zi + (d0 + {j - k // 2})",
            "m = hw_ok & (dv >= SBASE) & (dv < IHI)",
            f"sp = sb + (d0 + {j - k // 2} - SBASE).to(tl.int64) * plane",
        ]
        lines += [f"f_{q} = tl.load(sp + {i} * slot, mask=m, other=0.0)" for i, q in enumerate(names)]
        for b in range(ds):
            if 0 <= j - b < k:
                lines += [f"a_{q}_{b} += w{j - b} * f_{q}" for q in names]
    return lines


def _per_output(ds: int, names: tuple[str, ...], emit: list[str]) -> list[str]:
    """Run ``emit`` for each output slice d_out = d0 + b (< OHI) with v_{q} its depth-filtered quantities and
    ``ok`` its mask."""
    lines = []
    for b in range(ds):
        lines += [f"d_out = d0 + {b}", "ok = hw_ok & ((zi + d_out) < OHI)"]
        lines += [f"v_{q} = a_{q}_{b}" for q in names] + emit
    return lines


def render_depth_forward(k: int, ds: int, name: str) -> str:
    """Depth pass of the forward: ncc of output slices [OLO, OHI); per-program sums into PART[PBASE + ...], and
    in the LAST slab's launch the last program to finish sums all partials into OUT (0-d); or the -ncc map."""
    sig = ("SRC, WIN, PART, CNT, OUT, NCT, C, D, HW, NSS, SBASE, IHI, OLO, OHI, PBASE, LAST, " + CONSTS + "count, "
           "DS: tl.constexpr, BLOCK: tl.constexpr, ACC: tl.constexpr, CLAMP: tl.constexpr, WRITE_MAP: tl.constexpr, "
           "MEAN: tl.constexpr, RBLOCK: tl.constexpr")
    emit = [
        *NCC_TERMS,
        "if CLAMP:",
        "    ncc = tl.minimum(tl.maximum(ncc, -1.0), 1.0)",
        "if WRITE_MAP:",
        ("    tl.store(OUT + (nc.to(tl.int64) * D + d_out) * plane + offs, (-ncc).to(OUT.dtype.element_ty), "
         "mask=ok)"),
        "else:",
        "    acc += tl.where(ok, ncc, 0.0)",
    ]
    body = CONST_LINES + _depth_head(k, ds, STAT_NAMES, "WIN") + ["acc = tl.zeros([BLOCK], ACC)"]
    body += _per_output(ds, STAT_NAMES, emit)
    body += [
        "if not WRITE_MAP:",
        "    lin = PBASE + (nc * tl.num_programs(1) + pid_d) * tl.num_programs(0) + pid_b",
        "    tl.store(PART + lin, tl.sum(acc, axis=0))",
        "    if LAST != 0:",
        "        nprog = tl.num_programs(0) * tl.num_programs(1) * tl.num_programs(2)",
    ] + indent(last_program_reduces("npart", ("npart = PBASE + nprog",)), 2)
    return f"def {name}({sig}):\n" + "\n".join(indent(body)) + "\n"


def render_depth_grad_maps(k: int, ds: int, name: str) -> str:
    """Depth pass of the backward's first step: moments of output slices [OLO, OHI) and their moment-gradient
    maps into DST (slices from GBASE, NSG of them; slot order of ``grad_map_stores``)."""
    sig = ("SRC, WIN, G, GMAP, DST, NCT, C, D, HW, NSS, SBASE, IHI, OLO, OHI, NSG, GBASE, " + CONSTS + "count, "
           "DS: tl.constexpr, BLOCK: tl.constexpr, ACC: tl.constexpr, CLAMP: tl.constexpr, HAS_GMAP: tl.constexpr, "
           "MEAN: tl.constexpr, NEED_P: tl.constexpr, NEED_T: tl.constexpr")
    body = CONST_LINES + [
        "gs = tl.load(G).to(ACC)",
        "if MEAN:",
        "    gs = gs / count",
    ] + _depth_head(k, ds, STAT_NAMES, "WIN") + [
        "gslot = tl.cast(NCT, tl.int64) * NSG * plane",
        "gbase = DST + nc.to(tl.int64) * NSG * plane + offs",
    ]
    emit = [
        *NCC_TERMS,
        "gp = gs",
        "if HAS_GMAP:",
        "    gp = tl.load(GMAP + (nc.to(tl.int64) * D + d_out) * plane + offs, mask=ok, other=0.0).to(ACC)",
        *GRAD_TERMS,
        "gd = gbase + (d_out - GBASE).to(tl.int64) * plane",
        *grad_map_stores("gd", "gslot", "ok"),
    ]
    body += _per_output(ds, STAT_NAMES, emit)
    return f"def {name}({sig}):\n" + "\n".join(indent(body)) + "\n"


def render_depth_adjoint(k: int, ds: int, need_p: bool, need_t: bool, name: str) -> str:
    """Depth pass of the backward's second step: adjoint window sums along D (flipped window WINF) of the
    in-plane-filtered maps, combined into dL/dp = F(g_mu_p) + 2p·F(g_pp) + t·F(g_pt) and dL/dt = F(g_mu_t) +
    2t·F(g_tt) + p·F(g_pt) for output slices [OLO, OHI)."""
    sig = ("SRC, WINF, X, Y, DX, DY, NCT, C, D, W, HW, NSS, SBASE, IHI, OLO, OHI, "
           "sxn, sxc, sxd, sxh, sxw, syn, syc, syd, syh, syw, DS: tl.constexpr, BLOCK: tl.constexpr, "
           "ACC: tl.constexpr")
    order = ["pt"] + (["mp", "pp"] if need_p else []) + (["mt", "tt"] if need_t else [])
    names = tuple(order)
    body = _depth_head(k, ds, names, "WINF") + [
        "hh = (offs // W).to(tl.int64)",
        "ww = (offs % W).to(tl.int64)",
        "xb = X + n.to(tl.int64) * sxn + c.to(tl.int64) * sxc + hh * sxh + ww * sxw",
        "yb = Y + n.to(tl.int64) * syn + c.to(tl.int64) * syc + hh * syh + ww * syw",
    ]
    emit = [
        "xv = tl.load(xb + d_out.to(tl.int64) * sxd, mask=ok, other=0.0).to(ACC)",
        "yv = tl.load(yb + d_out.to(tl.int64) * syd, mask=ok, other=0.0).to(ACC)",
        "pix = (nc.to(tl.int64) * D + d_out) * plane + offs",
    ]
    if need_p:
        emit.append("tl.store(DX + pix, (v_mp + 2.0 * xv * v_pp + yv * v_pt).to(DX.dtype.element_ty), mask=ok)")
    if need_t:
        emit.append("tl.store(DY + pix, (v_mt + 2.0 * yv * v_tt + xv * v_pt).to(DY.dtype.element_ty), mask=ok)")
    body += _per_output(ds, names, emit)
    return f"def {name}({sig}):\n" + "\n".join(indent(body)) + "\n"


__all__ = [
    "DEPTH_VARYING",
    "PLANE_VARYING",
    "render_depth_adjoint",
    "render_depth_forward",
    "render_depth_grad_maps",
    "render_plane_adjoint",
    "render_plane_moments",
]
