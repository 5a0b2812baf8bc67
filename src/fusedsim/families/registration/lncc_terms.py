"""Source snippets shared by the LNCC kernels (``lncc.py``, ``lncc_slab_source.py``): the constants, ncc from the
five moments and the per-voxel gradients of ncc with respect to the moments."""

from __future__ import annotations

from fusedsim.core.codegen import indent

CONSTS = "s_hi, s_lo, q_hi, q_lo, nr_hi, nr_lo, fl_hi, fl_lo, dr_hi, dr_lo, "
# the constants in the accumulation dtype (float64 runs get them to float64 accuracy from an fp32 hi/lo pair)
CONST_LINES = [f"{name} = tl.cast({name}_hi, ACC) + tl.cast({name}_lo, ACC)" for name in ("s", "q", "nr", "fl", "dr")]
NCC_TERMS = [
    "cov = v_xy - q * v_x * v_y",
    "vp = v_xx - q * v_x * v_x",
    "vt = v_yy - q * v_y * v_y",
    "aa = s * cov",
    "bb = tl.maximum(s * vp, fl)",
    "cc = tl.maximum(s * vt, fl)",
    "den = bb * cc + dr",
    "ncc = (aa * aa + nr) / den",
]
# per-voxel gradients of ncc w.r.t. the five moments, times the upstream gradient gp (of the loss -ncc)
GRAD_TERMS = [
    "gf = -gp",
    "if CLAMP:",
    "    gf = tl.where(ncc <= 1.0, gf, 0.0)",
    "ga = gf * 2.0 * aa / den * s",
    "gb = tl.where(s * vp >= fl, -gf * ncc * cc / den * s, 0.0)",
    "gc = tl.where(s * vt >= fl, -gf * ncc * bb / den * s, 0.0)",
]


def grad_map_stores(dst: str, slot: str, mask: str) -> list[str]:
    """Store the moment-gradient maps at pointer ``dst`` (slot stride ``slot``): slot 0 g_pt; then g_mu_p, g_pp
    when NEED_P; then g_mu_t, g_tt when NEED_T."""
    return [
        f"tl.store({dst}, ga, mask={mask})",
        "nxt = 1",
        "if NEED_P:",
        f"    tl.store({dst} + {slot}, -q * v_y * ga - 2.0 * q * v_x * gb, mask={mask})",
        f"    tl.store({dst} + 2 * {slot}, gb, mask={mask})",
        "    nxt = 3",
        "if NEED_T:",
        f"    tl.store({dst} + nxt * {slot}, -q * v_x * ga - 2.0 * q * v_y * gc, mask={mask})",
        f"    tl.store({dst} + (nxt + 1) * {slot}, gc, mask={mask})",
    ]


def last_program_reduces(npart: str, setup: tuple[str, ...] = ()) -> list[str]:
    """Count this program done (after its partial sum's store, ``tl.debug_barrier``); the last of ``nprog``
    programs runs ``setup`` and :func:`final_reduction` of ``npart`` partial sums."""
    return ["tl.debug_barrier()", "done = tl.atomic_add(CNT, 1, sem='acq_rel', scope='gpu')",
            "if done == nprog - 1:", *indent([*setup, *final_reduction(npart)])]


def final_reduction(npart: str) -> list[str]:
    """Source run by the last program to finish (``done == nprog - 1``): the ``npart`` partial sums in PART added
    in a fixed order (deterministic), the loss -sum (or -mean) stored to OUT and the counter reset for the next
    launch."""
    return [
        "tot = tl.zeros([RBLOCK], ACC)",
        f"for start in range(0, {npart}, RBLOCK):",
        "    idx = start + tl.arange(0, RBLOCK)",
        f"    tot += tl.load(PART + idx, mask=idx < {npart}, other=0.0, cache_modifier='.cg')",
        "total = tl.sum(tot, axis=0)",
        "if MEAN:",
        "    total = total / count",
        "tl.store(OUT, -total)",
        "tl.atomic_xchg(CNT, 0)",
    ]
