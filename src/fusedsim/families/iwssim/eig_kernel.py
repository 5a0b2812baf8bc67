"""IW-SSIM's eigen-correction of the neighbourhood covariance, on the GPU without a host synchronisation.

    iwssim_eig(gram (N, K, K)) -> (N, K + 1, K) float64: [inverse of the corrected matrix; corrected eigenvalues]
    iwssim_eig_levels(grams (L, N, KP, KP), sizes [K_0 .. K_{L-1}]) -> (L, N, KP + 1, KP) float64

The MATLAB code takes ``[Q, L] = eig(C_u)``, zeroes negative eigenvalues and rescales the rest to keep the trace,
and inverts ``Q L Qᵀ``. ``torch.linalg.eigh`` would synchronise the device with the host, so each matrix is
diagonalised here by parallel Jacobi rotations (Brent-Luk: each round rotates K/2 disjoint pairs of a
round-robin tournament at once, as one rotation matrix), one program per matrix on a 16x16 float64 register tile
(sweeps until the off-diagonal part is below 1e-15 of the diagonal, at most 30), and the inverse is assembled as
``V diag(1/λ) Vᵀ`` over the eigenvalues above the numerical rank (``K·eps·λ_max``; 1/λ is 0 for the others: the
twin's pseudo-inverse of a singular matrix). Eigenvalues are returned sorted ascending (a rank sort inside the
kernel), like the twin
:func:`fusedsim.families.iwssim.twin.corrected_eig_ref`, which calls ``eigh``; the two agree to rounding
(~1e-14 relative for well-conditioned matrices). Forward only.

A program is latency-bound (~300 µs of dependent rotations at K = 10 on an H200, whatever the batch), so the
levels of a pyramid go in one launch: ``iwssim_eig_levels`` takes every level's matrix zero-padded to KP x KP
and level l's size K_l; its level-l block ``[:K_l + 1, :K_l]`` is ``iwssim_eig`` of ``grams[l, :, :K_l, :K_l]``
(rest zero), the same arithmetic in the same order.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedsim.core.launch import Launcher
from fusedsim.core.state import cached
import fusedsim.families.iwssim.twin as spec
from fusedsim.families.iwssim.ops import iwssim_eig, iwssim_eig_levels

__all__ = ["iwssim_eig_fwd", "iwssim_eig_levels_fwd"]

KP = 16  # register tile (K <= 16)
RANK_EPS = tl.constexpr(spec.RANK_EPS)
MAX_SWEEPS = 30


@triton.jit
def _matmul(a, b):
    """(KP, KP) @ (KP, KP) by a broadcast product and a sum (no tensor cores: float64, tiny)."""
    return tl.sum(a[:, :, None] * b[None, :, :], axis=1)


@triton.jit
def _off_diagonal(a, i, j):
    return tl.sum(tl.sum(tl.where(i != j, a * a, 0.0), axis=1), axis=0)


@triton.jit
def _corrected_eig(a, K, MAX_SWEEPS: tl.constexpr, KP: tl.constexpr):
    """(inverse (KP, KP), corrected eigenvalues sorted ascending (KP,)) of the symmetric matrix in a[:K, :K]
    (a is zero outside); both zero beyond K."""
    i = tl.arange(0, KP)[:, None]
    j = tl.arange(0, KP)[None, :]
    idx = tl.arange(0, KP)
    v = tl.where(i == j, 1.0, 0.0).to(tl.float64)
    scale = tl.sum(tl.sum(tl.where(i == j, a * a, 0.0), axis=1), axis=0)
    off = _off_diagonal(a, i, j)
    m = K + K % 2  # players of the round-robin (a dummy one, all zeros, when K is odd)
    sweep = 0
    while (sweep < MAX_SWEEPS) & (off > 1e-30 * scale):
        for r in range(m - 1):
            # round r of the circle method: index 0 stays, the others rotate; position p meets position m-1-p
            pos = tl.where(idx == 0, 0, (idx - 1 + r) % (m - 1) + 1)
            ppos = m - 1 - pos
            partner = tl.where(ppos == 0, 0, (ppos - 1 - r + (m - 1)) % (m - 1) + 1)
            partner = tl.where(idx < m, partner, idx)
            lo = tl.minimum(idx, partner)
            hi = tl.maximum(idx, partner)
            diag = tl.sum(tl.where(i == j, a, 0.0), axis=1)  # (KP,)
            app = tl.sum(tl.where(j == lo[:, None], diag[None, :], 0.0), axis=1)
            aqq = tl.sum(tl.where(j == hi[:, None], diag[None, :], 0.0), axis=1)
            apq = tl.sum(tl.where(j == partner[:, None], a, 0.0), axis=1)
            zero = (apq == 0.0) | (partner == idx)
            theta = (aqq - app) / (2.0 * tl.where(zero, 1.0, apq))
            t = 1.0 / (tl.abs(theta) + tl.sqrt(theta * theta + 1.0))
            t = tl.where(theta < 0.0, -t, t)
            t = tl.where(zero, 0.0, t)
            c = 1.0 / tl.sqrt(t * t + 1.0)
            s = t * c
            # both members of a pair take the rotation of the lower index: A is symmetric only up to rounding,
            # and two slightly different rotations would make J non-orthogonal
            c = tl.sum(tl.where(j == lo[:, None], c[None, :], 0.0), axis=1)
            s = tl.sum(tl.where(j == lo[:, None], s[None, :], 0.0), axis=1)
            # J: the product of the rotations of the disjoint pairs (J[p,p] = J[q,q] = c, J[p,q] = s, J[q,p] = -s)
            rot = tl.where(idx < partner, s, -s)
            jm = tl.where(i == j, c[:, None], tl.where(j == partner[:, None], rot[:, None], 0.0))
            a = _matmul(a, jm)
            a = tl.sum(jm[:, :, None] * a[:, None, :], axis=0)  # Jᵀ (A J)
            a = 0.5 * (a + tl.trans(a))
            v = _matmul(v, jm)
        off = _off_diagonal(a, i, j)
        sweep += 1
    lam = tl.sum(tl.where(i == j, a, 0.0), axis=0)  # (KP,), zero beyond K
    k_ok = idx < K
    positive = tl.where(lam > 0.0, lam, 0.0)
    kept = tl.sum(positive, axis=0)
    lam = positive * tl.sum(lam, axis=0) / (kept + tl.where(kept == 0.0, 1.0, 0.0))
    # the twin's numerical rank (invertible_eigenvalues): above K·eps·λ_max, the rest rounding noise
    invertible = k_ok & (lam > (K.to(tl.float64) * RANK_EPS) * tl.max(lam, axis=0))
    inv_lam = tl.where(invertible, 1.0 / tl.where(invertible, lam, 1.0), 0.0)
    inv = _matmul(v * inv_lam[None, :], tl.trans(v))  # V diag(1/λ) Vᵀ, 1/0 taken as 0: the pseudo-inverse
    # ascending rank sort of lam[:K] (ties by index, as a stable sort): rank[p] = #{q < K: lam[q] before lam[p]}
    lam_p = tl.sum(tl.where(i == j, lam[None, :], 0.0), axis=1)  # lam along axis 0
    before = (j < K) & ((lam[None, :] < lam_p[:, None]) | ((lam[None, :] == lam_p[:, None]) & (j < i)))
    rank = tl.sum(before.to(tl.int32), axis=1)  # (KP,) along axis 0
    rank = tl.where(idx < K, rank, KP)  # padding goes nowhere
    lam_sorted = tl.sum(tl.where(rank[:, None] == j, lam_p[:, None], 0.0), axis=0)  # (KP,) along axis 1
    return inv, lam_sorted


@triton.jit
def _iwssim_eig_kernel(G, SIZES, OUT, N, KS, MAX_SWEEPS: tl.constexpr, KP: tl.constexpr):
    """One program per matrix (level pid // N): G (L, N, KS, KS) -> OUT (L, N, KS + 1, KS)."""
    pid = tl.program_id(0)
    K = tl.load(SIZES + pid // N)
    i = tl.arange(0, KP)[:, None]
    j = tl.arange(0, KP)[None, :]
    inside = (i < K) & (j < K)
    a = tl.load(G + pid.to(tl.int64) * KS * KS + i * KS + j, mask=inside, other=0.0).to(tl.float64)
    inv, lam = _corrected_eig(a, K, MAX_SWEEPS, KP)
    base = OUT + pid.to(tl.int64) * (KS + 1) * KS
    # rows 0..KS-1: the inverse, λ in row K when K < KS, zeros elsewhere; row KS: λ when K == KS, else zeros
    block = tl.where(inside, inv, tl.where((i == K) & (j < K), lam[None, :], 0.0))
    tl.store(base + i * KS + j, block, mask=(i < KS) & (j < KS))
    idx = tl.arange(0, KP)
    tl.store(base + KS * KS + idx, tl.where(K == KS, lam, 0.0), mask=idx < KS)


@cached(maxsize=64)
def _launcher(programs: int, n: int, ks: int) -> Launcher:
    """One launcher per grid and integer arguments: a launcher reuses the kernel it compiled first, which Triton
    specialised on N and KS (N = 1 and KS % 16 == 0 become constants)."""
    return Launcher(_iwssim_eig_kernel, (programs,), num_warps=4)


@cached(maxsize=16)
def _sizes(sizes: tuple[int, ...], device: torch.device) -> torch.Tensor:
    return torch.tensor(sizes, dtype=torch.int32, device=device)


def _run(grams: torch.Tensor, sizes: tuple[int, ...]) -> torch.Tensor:
    levels, n, ks, _ = grams.shape
    if ks > KP or max(sizes) > ks or min(sizes) < 1 or len(sizes) != levels:
        raise ValueError(f"iwssim_eig handles matrices up to {KP}x{KP}, one size <= {ks} per level; "
                         f"got {tuple(grams.shape)} with sizes {sizes}")
    g = grams.to(torch.float64).contiguous()
    out = torch.empty((levels, n, ks + 1, ks), dtype=torch.float64, device=grams.device)
    if out.numel():
        _launcher(levels * n, n, ks)(g, _sizes(sizes, grams.device), out, n, ks, MAX_SWEEPS, KP)
    return out


@iwssim_eig.triton_launcher
def iwssim_eig_fwd(gram: torch.Tensor) -> torch.Tensor:
    """(N, K + 1, K) float64 from symmetric (N, K, K) matrices, K <= 16 (see the module docstring)."""
    k = gram.shape[-1]
    return _run(gram.unsqueeze(0), (k,))[0]


@iwssim_eig_levels.triton_launcher
def iwssim_eig_levels_fwd(grams: torch.Tensor, sizes: list[int]) -> torch.Tensor:
    """(L, N, KP + 1, KP) float64 from (L, N, KP, KP) matrices zero-padded from level l's K_l = ``sizes[l]``,
    KP <= 16, in one launch (see the module docstring)."""
    return _run(grams, tuple(int(s) for s in sizes))
