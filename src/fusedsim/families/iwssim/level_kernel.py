"""One IW-SSIM band level on the GPU, fused: cs from the windowed moments, the information-content weight, and
the two sums the level's score needs, with no full-size map written.

    iwssim_level(ref_band, dist_band, parent (N, 1, H, W), eig (N, K + 1, K), moments (5, N, 1, H - 10, W - 10),
                 has_parent) -> (N, 2) float64: [Σ cs·iw, Σ iw] over the 'valid' region

Per pixel of the valid region (one pixel per lane): ``cs = (2σ12 + C2)/(σ1² + σ2² + C2)`` from the 11x11 Gaussian
moments (variances clamped at 0), and the weight of
:func:`fusedsim.families.iwssim.twin.info_weight_map_ref`: the 3x3 box statistics of x (reference) and y
(distorted) with MATLAB's tol rules for the gain g and vv, the quadratic form ``ss = yᵀ C⁻¹ y / K`` of the
reference's neighbourhood (+ parent) over the K(K+1)/2 distinct entries of the symmetric inverse, and
``Σ_j log2(1 + t_j)`` evaluated as the log2 of two partial products (the t_j are at most ~1e27 for 8-bit
data, so five factors stay far from overflow; 2 logarithms instead of K, ~1e-16 relative). The K neighbourhood
values live in K registers (generated source), unlike the (BLOCK, 16) tiles of ``iwssim_info``. float64
throughout; constants come from a float64 table (kernel float arguments would be float32). Per-program sums are
added by one ``torch.sum`` (deterministic). Forward only.
"""

from __future__ import annotations

import torch
import triton

from fusedsim.core.backend import triton_interpreting
from fusedsim.core.codegen import indent, jit_from_source
from fusedsim.core.launch import Launcher
from fusedsim.core.state import cached
from fusedsim.families.iwssim.gram_kernel import neighbourhood_loads
import fusedsim.families.iwssim.twin as spec
from fusedsim.families.iwssim.ops import iwssim_level

__all__ = ["iwssim_level_fwd"]


def _render(k: int, name: str) -> str:
    body = [
        "n = tl.program_id(1)",
        "pid = tl.program_id(0)",
        "wo = W - 10",
        "count = (H - 10) * wo",
        "p = pid * BLOCK + tl.arange(0, BLOCK)",
        "ok = p < count",
        "orow = p // wo",
        "ocol = p % wo",
        "rows = orow + 5",
        "cols = ocol + 5",
        "c2 = tl.load(CONST + 0)",
        "snsq = tl.load(CONST + 1)",
        "inv_snsq2 = tl.load(CONST + 2)",
        "tol = tl.load(CONST + 3)",
        "ninth = tl.load(CONST + 4)",
        # cs from the moments
        "m = MOM + n.to(tl.int64) * mn + orow.to(tl.int64) * mh + ocol",
        "mu1 = tl.load(m, mask=ok, other=0.0)",
        "mu2 = tl.load(m + ms, mask=ok, other=0.0)",
        "e11 = tl.load(m + 2 * ms, mask=ok, other=0.0)",
        "e22 = tl.load(m + 3 * ms, mask=ok, other=0.0)",
        "e12 = tl.load(m + 4 * ms, mask=ok, other=0.0)",
        "s11 = tl.maximum(e11 - mu1 * mu1, 0.0)",
        "s22 = tl.maximum(e22 - mu2 * mu2, 0.0)",
        # the twin's rule: no covariance where either variance is 0 (cs_from_moments_ref)
        "s12 = tl.where((s11 > 0.0) & (s22 > 0.0), e12 - mu1 * mu2, 0.0)",
        "cs = (2.0 * s12 + c2) / (s11 + s22 + c2)",
        "ref = REF + n.to(tl.int64) * sn",
        "par = PAR + n.to(tl.int64) * pn",
        "dist = DIST + n.to(tl.int64) * dn",
    ]
    body += neighbourhood_loads("y", "ref", "par", k)
    body += [line.replace("sh", "dh").replace("sw", "dw") for line in neighbourhood_loads("d", "dist", "", 9)[2:]]
    xs = " + ".join(f"y{i}" for i in range(9))
    ds = " + ".join(f"d{i}" for i in range(9))
    body += [
        f"mean_x = ({xs}) * ninth",
        f"mean_y = ({ds}) * ninth",
        "cov = (" + " + ".join(f"y{i} * d{i}" for i in range(9)) + ") * ninth - mean_x * mean_y",
        "ss_x = tl.maximum((" + " + ".join(f"y{i} * y{i}" for i in range(9)) + ") * ninth - mean_x * mean_x, 0.0)",
        "ss_y = tl.maximum((" + " + ".join(f"d{i} * d{i}" for i in range(9)) + ") * ninth - mean_y * mean_y, 0.0)",
        "g = cov / (ss_x + tol)",
        "vv = ss_y - g * cov",
        "g = tl.where(ss_x < tol, 0.0, g)",
        "vv = tl.where(ss_x < tol, ss_y, vv)",
        "g = tl.where(ss_y < tol, 0.0, g)",
        "vv = tl.where(ss_y < tol, 0.0, vv)",
        "e = EIG + n.to(tl.int64) * en",
        "q = tl.zeros([BLOCK], tl.float64)",
    ]
    for i in range(k):
        terms = [f"tl.load(e + {i} * er + {i}) * y{i}"]
        if i + 1 < k:
            terms.append("2.0 * (" + " + ".join(f"tl.load(e + {i} * er + {j}) * y{j}" for j in range(i + 1, k)) + ")")
        body.append(f"q += ({' + '.join(terms)}) * y{i}")
    body += [
        f"ss = q / {k}.0",
        "a = (vv + (1.0 + g * g) * snsq) * ss",
        "b = snsq * vv",
    ]
    half = (k + 1) // 2
    for grp, js in (("p0", range(half)), ("p1", range(half, k))):
        factors = [f"(1.0 + (a * tl.load(e + {k} * er + {j}) + b) * inv_snsq2)" for j in js]
        body.append(f"{grp} = " + " * ".join(factors))
    body += [
        "iw = tl.log2(p0) + tl.log2(p1)",
        "iw = tl.where(iw < tol, 0.0, iw)",
        "iw = tl.where(ok, iw, 0.0)",
        "out = OUT + (n.to(tl.int64) * tl.num_programs(0) + pid) * 2",
        "tl.store(out, tl.sum(cs * iw, axis=0))",
        "tl.store(out + 1, tl.sum(iw, axis=0))",
    ]
    sig = ("REF, DIST, PAR, EIG, MOM, CONST, OUT, H, W, sn, sh, sw, dn, dh, dw, pn, ph, pw, ms, mn, mh, en, er, "
           "BLOCK: tl.constexpr")
    return f"def {name}({sig}):\n" + "\n".join(indent(body)) + "\n"


@cached(maxsize=None)
def _kernel(k: int):
    name = f"_iwssim_level_k{k}_kernel"
    return jit_from_source(name, _render(k, name))


@cached(maxsize=16)
def _constants(device: torch.device) -> torch.Tensor:
    values = (spec.C2, spec.SIGMA_NSQ, 1.0 / (spec.SIGMA_NSQ * spec.SIGMA_NSQ), spec.TOL, 1.0 / 9.0)
    return torch.tensor(values, dtype=torch.float64, device=device)


@cached(maxsize=128)
def _launcher(shape, sr, sd, sp, sm, se, has_parent) -> tuple[Launcher, tuple, int]:
    n, _, h, w = shape
    k = 10 if has_parent else 9
    block = 1024 if triton_interpreting() else 128  # interpreter: few large programs
    progs = triton.cdiv((h - 10) * (w - 10), block)
    launch = Launcher(_kernel(k), (progs, n), num_warps=4)
    tail = (h, w, sr[0], sr[2], sr[3], sd[0], sd[2], sd[3], sp[0], sp[2], sp[3], sm[0], sm[1], sm[3], se[0], se[1],
            block)
    return launch, tail, progs


@iwssim_level.triton_launcher
def iwssim_level_fwd(ref_band: torch.Tensor, dist_band: torch.Tensor, parent: torch.Tensor, eig: torch.Tensor,
                     moments: torch.Tensor, has_parent: bool) -> torch.Tensor:
    """[Σ cs·iw, Σ iw] (N, 2) float64 of float64 bands (N, 1, H, W), H, W >= 11; ``parent`` read only with
    ``has_parent``; ``eig`` from ``iwssim_eig`` (or a level's block of ``iwssim_eig_levels``: any row and image
    strides, unit column stride); ``moments`` (5, N, 1, H - 10, W - 10) float64 with unit column
    stride (the ``windowed_moments`` op's output)."""
    sp = parent.stride() if has_parent else (0, 0, 0, 0)
    if moments.stride(-1) != 1:
        moments = moments.contiguous()
    sm = (moments.stride(0), moments.stride(1), 0, moments.stride(3))
    if eig.stride(-1) != 1:
        eig = eig.contiguous()
    launch, tail, progs = _launcher(tuple(ref_band.shape), ref_band.stride(), dist_band.stride(), sp, sm,
                                    eig.stride()[:2], bool(has_parent))
    n = ref_band.shape[0]
    partial = torch.empty((n, progs, 2), dtype=torch.float64, device=ref_band.device)
    launch(ref_band, dist_band, parent, eig, moments, _constants(ref_band.device), partial, *tail)
    return partial.sum(1)
