"""IW-SSIM's neighbourhood Gram matrix on the GPU: ``C_u = YᵀY / n`` without forming Y.

    iwssim_gram(ref_band (N, 1, H, W), parent (N, 1, H, W), has_parent) -> (N, K, K) float64, K = 9 (+1)

Y has one row per interior pixel (1 <= r < H-1, 1 <= c < W-1): the reference band's 3x3 neighbourhood in the
MATLAB column order (offsets (1, 1), (1, 0), (1, -1), (0, 1), ... (-1, -1)), plus the enlarged parent at the
pixel when ``has_parent``. Each program walks a strided share of the pixels, BLOCK at a time (one pixel per
lane), loads the K neighbourhood values as K vectors and adds the K(K+1)/2 distinct products into as many float64
register accumulators (generated source: a Triton loop cannot carry a list of tensors), so a pixel costs 55 FMAs
(K = 10) and no cross-lane work; the per-program sums are added by one ``torch.sum`` (deterministic). Forward
only; the twin is :func:`fusedsim.families.iwssim.twin.neighbourhood_gram_ref` (same sums in another order).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedsim.core.backend import triton_interpreting
from fusedsim.core.codegen import indent, jit_from_source
from fusedsim.core.launch import Launcher
from fusedsim.core.state import cached
from fusedsim.families.iwssim.ops import iwssim_gram

__all__ = ["iwssim_gram_fwd", "neighbourhood_loads"]

KP = 16  # padded neighbourhood size (K <= 10), kept for the info kernel's tile helper


@triton.jit
def neighbourhood_tile(REF, PAR, rows, cols, sh, sw, ph, pw, ok, HAS_PARENT: tl.constexpr, KP: tl.constexpr):
    """(BLOCK, KP) float64: the 3x3 neighbourhood of each pixel (rows, cols are (BLOCK, 1)) and its parent."""
    kk = tl.arange(0, KP)[None, :]
    dy = 1 - kk // 3
    dx = 1 - kk % 3
    spatial = ok & (kk < 9)
    tile = tl.load(REF + (rows + dy).to(tl.int64) * sh + (cols + dx).to(tl.int64) * sw, mask=spatial,
                   other=0.0).to(tl.float64)
    if HAS_PARENT:
        par = tl.load(PAR + rows.to(tl.int64) * ph + cols.to(tl.int64) * pw + kk * 0, mask=ok & (kk == 9),
                      other=0.0).to(tl.float64)
        tile = tl.where(kk == 9, par, tile)
    return tile


def neighbourhood_loads(prefix: str, base: str, parent: str, k: int) -> list[str]:
    """Source lines loading y{0..k-1} (float64 vectors): the 3x3 neighbourhood of (rows, cols) in the MATLAB order
    from ``base`` (strides sh, sw) and, for k = 10, the parent from ``parent`` (strides ph, pw); mask ``ok``."""
    lines = ["r64 = rows.to(tl.int64)", "c64 = cols.to(tl.int64)"]
    for kk in range(9):
        dy, dx = 1 - kk // 3, 1 - kk % 3
        lines.append(f"{prefix}{kk} = tl.load({base} + (r64 + {dy}) * sh + (c64 + {dx}) * sw, mask=ok, "
                     "other=0.0).to(tl.float64)")
    if k == 10:
        lines.append(f"{prefix}9 = tl.load({parent} + r64 * ph + c64 * pw, mask=ok, other=0.0).to(tl.float64)")
    return lines


def _render(k: int, name: str) -> str:
    pairs = [(i, j) for i in range(k) for j in range(i, k)]
    body = [
        "n = tl.program_id(1)",
        "pid = tl.program_id(0)",
        "progs = tl.num_programs(0)",
        "wi = W - 2",
        "count = (H - 2) * wi",
        "ref = REF + n.to(tl.int64) * sn",
        "par = PAR + n.to(tl.int64) * pn",
    ]
    body += [f"g{i}_{j} = tl.zeros([BLOCK], tl.float64)" for i, j in pairs]
    loop = [
        "p = start + tl.arange(0, BLOCK)",
        "ok = p < count",
        "rows = 1 + p // wi",
        "cols = 1 + p % wi",
    ]
    loop += neighbourhood_loads("y", "ref", "par", k)
    loop += [f"g{i}_{j} += y{i} * y{j}" for i, j in pairs]
    body += ["for start in range(pid * BLOCK, count, progs * BLOCK):"] + indent(loop)
    body.append("out = OUT + (n.to(tl.int64) * progs + pid) * KK")
    for i, j in pairs:
        body.append(f"s = tl.sum(g{i}_{j}, axis=0)")
        body.append(f"tl.store(out + {i * k + j}, s)")
        if i != j:
            body.append(f"tl.store(out + {j * k + i}, s)")
    sig = "REF, PAR, OUT, H, W, sn, sh, sw, pn, ph, pw, KK: tl.constexpr, BLOCK: tl.constexpr"
    return f"def {name}({sig}):\n" + "\n".join(indent(body)) + "\n"


@cached(maxsize=None)
def _kernel(k: int):
    name = f"_iwssim_gram_k{k}_kernel"
    return jit_from_source(name, _render(k, name))


@cached(maxsize=128)
def _launcher(shape, strides, parent_strides, has_parent) -> tuple[Launcher, tuple, int]:
    n, _, h, w = shape
    k = 10 if has_parent else 9
    # interpreter: few programs with large blocks (each program step costs Python time, not lanes); GPU: one pixel
    # per lane, a few waves of programs (each ~150 registers: the accumulators)
    block, max_progs = (256, 4) if triton_interpreting() else (128, 132 * 8)
    progs = max(1, min(max_progs, triton.cdiv((h - 2) * (w - 2), block)))
    launch = Launcher(_kernel(k), (progs, n), num_warps=block // 32 if not triton_interpreting() else 4)
    sn, _, sh, sw = strides
    pn, _, ph, pw = parent_strides
    return launch, (h, w, sn, sh, sw, pn, ph, pw, k * k, block), progs


@iwssim_gram.triton_launcher
def iwssim_gram_fwd(ref_band: torch.Tensor, parent: torch.Tensor, has_parent: bool) -> torch.Tensor:
    """``C_u`` (N, K, K) float64 of the reference band (N, 1, H, W), H, W >= 3; ``parent`` (N, 1, H, W) is read
    only with ``has_parent`` (then K = 10, else 9)."""
    parent_strides = parent.stride() if has_parent else (0, 0, 0, 0)
    launch, tail, progs = _launcher(tuple(ref_band.shape), ref_band.stride(), parent_strides, bool(has_parent))
    n, _, h, w = ref_band.shape
    k = 10 if has_parent else 9
    partial = torch.empty((n, progs, k, k), dtype=torch.float64, device=ref_band.device)
    launch(ref_band, parent, partial, *tail)
    return partial.sum(1) / ((h - 2) * (w - 2))
