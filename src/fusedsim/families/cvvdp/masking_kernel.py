"""ColorVideoVDP's masking and pooling of one band on the GPU: the phase-uncertainty blur in two passes, the
second fused with the masked difference and the band's pooling.

    cvvdp_masker_vblur(m (N, 3, h, w)) -> (N, 3, h, w)                 vertical pass of the 13-tap Gaussian
    cvvdp_band_pool(vblurred (N, 3, h, w), band (N, 6, h, w), blur, with_map)
        -> (N, 3, h, w + 1) with_map: D, then per row Σ_x safe_pow(D, beta) in the last column
        -> (N, 3, h, 1) otherwise: the row sums only

Twins: ``cvvdp_masker_vblur_ref`` and ``cvvdp_band_pool_ref`` in :mod:`fusedsim.families.cvvdp.twin`. The blur
is torchvision's (sigma = pu_dilate = 3, 13 taps, reflect edges x[-k] = x[k]); ``band`` is
``cvvdp_test_band``'s output, whose channels 3-5 hold |T' - R'|. Per pixel, with the masking constants of
:mod:`fusedsim.families.cvvdp.mask_diff_kernel`::

    a_c = safe_pow(|blur(m)_c · 10^mask_c|, q_c),  M_j = Σ_c a_c W[c, j],
    D_j = soft_clamp(safe_pow(|T' - R'|_j, p) / (1 + M_j)),  row sum += safe_pow(D_j, beta)

One program owns one whole row of one image (the row sums are deterministic: no atomics, and the map-writing
and plain variants add in the same order, so the JOD does not depend on ``with_map``). Forward only.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fusedsim.core.launch import Launcher
from fusedsim.core.state import cached
from fusedsim.families.cvvdp.band_kernel import plane_view
from fusedsim.families.cvvdp.mask_diff_kernel import mask_constants, soft, spow
from fusedsim.families.cvvdp.pyramid_kernel import block_for
from fusedsim.families.cvvdp.data import cvvdp_params
from fusedsim.families.cvvdp.twin import gauss_taps
from fusedsim.families.cvvdp.ops import cvvdp_band_pool, cvvdp_masker_vblur

__all__ = ["cvvdp_band_pool_fwd", "cvvdp_masker_vblur_fwd"]

_TAPS = 13


@triton.jit
def _vblur_kernel(X, TAPS, OUT, h, w, sn, sc, HW, NT: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.program_id(1)
    plane = tl.program_id(2)
    n = (plane // 3).to(tl.int64)
    c = (plane % 3).to(tl.int64)
    j = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = j < w
    base = X + n * sn + c * sc + j
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for t in tl.static_range(NT):
        r = i + (t - NT // 2)
        r = tl.where(r < 0, -r, r)
        r = tl.where(r >= h, 2 * (h - 1) - r, r)
        acc += tl.load(TAPS + t) * tl.load(base + r.to(tl.int64) * w, mask=ok, other=0.0)
    tl.store(OUT + (n * 3 + c) * HW + i.to(tl.int64) * w + j, acc, mask=ok)


@triton.jit
def _hblur(row, TAPS, j, w, ok, NT: tl.constexpr, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for t in tl.static_range(NT):
        col = j + (t - NT // 2)
        col = tl.where(col < 0, -col, col)
        col = tl.where(col >= w, 2 * (w - 1) - col, col)
        acc += tl.load(TAPS + t) * tl.load(row + col, mask=ok, other=0.0)
    return acc


@triton.jit
def _band_pool_kernel(V, BAND, TAPS, OUT, h, w, vsn, vsc, HW, OW,
                      Q0: tl.constexpr, Q1: tl.constexpr, Q2: tl.constexpr, EQ0: tl.constexpr,
                      EQ1: tl.constexpr, EQ2: tl.constexpr, P: tl.constexpr, EPS_P: tl.constexpr,
                      MC: tl.constexpr, MAXV: tl.constexpr, W00: tl.constexpr, W01: tl.constexpr,
                      W02: tl.constexpr, W10: tl.constexpr, W11: tl.constexpr, W12: tl.constexpr,
                      W20: tl.constexpr, W21: tl.constexpr, W22: tl.constexpr, BETA: tl.constexpr,
                      EPS_BETA: tl.constexpr, EPS: tl.constexpr, BLUR: tl.constexpr, MAP: tl.constexpr,
                      NT: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.program_id(0)
    n = tl.program_id(1).to(tl.int64)
    row_off = i.to(tl.int64) * w
    v0 = V + n * vsn + row_off
    v1 = v0 + vsc
    v2 = v1 + vsc
    a_row = BAND + (n * 6 + 3) * HW + row_off
    out_row = OUT + n * 3 * h * OW + i.to(tl.int64) * OW
    acc0 = tl.zeros([BLOCK], dtype=tl.float32)
    acc1 = tl.zeros([BLOCK], dtype=tl.float32)
    acc2 = tl.zeros([BLOCK], dtype=tl.float32)
    for j0 in range(0, w, BLOCK):
        j = j0 + tl.arange(0, BLOCK)
        ok = j < w
        if BLUR:
            b0 = _hblur(v0, TAPS, j, w, ok, NT, BLOCK)
            b1 = _hblur(v1, TAPS, j, w, ok, NT, BLOCK)
            b2 = _hblur(v2, TAPS, j, w, ok, NT, BLOCK)
        else:
            b0 = tl.load(v0 + j, mask=ok, other=0.0)
            b1 = tl.load(v1 + j, mask=ok, other=0.0)
            b2 = tl.load(v2 + j, mask=ok, other=0.0)
        m0 = spow(tl.abs(b0 * MC), Q0, EQ0, EPS)
        m1 = spow(tl.abs(b1 * MC), Q1, EQ1, EPS)
        m2 = spow(tl.abs(b2 * MC), Q2, EQ2, EPS)
        d0 = soft(spow(tl.load(a_row + j, mask=ok, other=0.0), P, EPS_P, EPS), m0 * W00 + m1 * W10 + m2 * W20,
                   MAXV)
        d1 = soft(spow(tl.load(a_row + HW + j, mask=ok, other=0.0), P, EPS_P, EPS),
                   m0 * W01 + m1 * W11 + m2 * W21, MAXV)
        d2 = soft(spow(tl.load(a_row + 2 * HW + j, mask=ok, other=0.0), P, EPS_P, EPS),
                   m0 * W02 + m1 * W12 + m2 * W22, MAXV)
        if MAP:
            tl.store(out_row + j, d0, mask=ok)
            tl.store(out_row + h * OW + j, d1, mask=ok)
            tl.store(out_row + 2 * h * OW + j, d2, mask=ok)
        acc0 += tl.where(ok, spow(d0, BETA, EPS_BETA, EPS), 0.0)
        acc1 += tl.where(ok, spow(d1, BETA, EPS_BETA, EPS), 0.0)
        acc2 += tl.where(ok, spow(d2, BETA, EPS_BETA, EPS), 0.0)
    tl.store(out_row + (OW - 1), tl.sum(acc0, axis=0))
    tl.store(out_row + h * OW + (OW - 1), tl.sum(acc1, axis=0))
    tl.store(out_row + 2 * h * OW + (OW - 1), tl.sum(acc2, axis=0))


@cached(maxsize=8)
def _taps(device: torch.device) -> torch.Tensor:
    taps = gauss_taps(cvvdp_params().pu_dilate, torch.empty(0, dtype=torch.float32))
    if taps.numel() != _TAPS:  # pragma: no cover - pu_dilate is fixed by the calibrated parameters
        raise ValueError(f"cvvdp masking blur: expected {_TAPS} taps; got {taps.numel()}")
    return taps.to(device)


@cached(maxsize=1)
def _pool_constants() -> tuple:
    """The masking constants (float32, as the twin forms them) and beta with 1e-5^beta."""
    consts = mask_constants(torch.float32)  # (1.45, q0..2, eps^q0..2, p, eps^p, mask_c, max_v, W (9), eps)
    beta = torch.tensor(cvvdp_params().beta, dtype=torch.float32)
    eps_beta = torch.tensor(1e-5, dtype=torch.float32) ** beta
    return (*consts[1:-1], float(beta), float(eps_beta), consts[-1])


@cached(maxsize=128)
def _vblur_launcher(n: int, h: int, w: int, sn: int, sc: int) -> tuple[Launcher, tuple]:
    block, warps = block_for(w)
    launch = Launcher(_vblur_kernel, (triton.cdiv(w, block), h, n * 3), num_warps=warps)
    return launch, (h, w, sn, sc, h * w, _TAPS, block)


@cvvdp_masker_vblur.triton_launcher
def cvvdp_masker_vblur_fwd(m: torch.Tensor) -> torch.Tensor:
    """Vertical pass of the masking blur (N, 3, h, w), float32 (needs h > 6)."""
    m, sn, sc = plane_view(m)
    n, c, h, w = m.shape
    if c != 3 or h <= _TAPS // 2:
        raise ValueError(f"cvvdp_masker_vblur: input (N, 3, h > 6, w); got {tuple(m.shape)}")
    launch, tail = _vblur_launcher(n, h, w, sn, sc)
    out = torch.empty((n, 3, h, w), dtype=torch.float32, device=m.device)
    launch(m, _taps(m.device), out, *tail)
    return out


@cached(maxsize=128)
def _pool_launcher(n: int, h: int, w: int, vsn: int, vsc: int, blur: bool, with_map: bool
                   ) -> tuple[Launcher, tuple, int]:
    block = max(32, min(1024, triton.next_power_of_2(w)))
    ow = w + 1 if with_map else 1
    launch = Launcher(_band_pool_kernel, (h, n), num_warps=max(1, min(8, block // 128)))
    return launch, (h, w, vsn, vsc, h * w, ow, *_pool_constants(), blur, with_map, _TAPS, block), ow


@cvvdp_band_pool.triton_launcher
def cvvdp_band_pool_fwd(vblurred: torch.Tensor, band: torch.Tensor, blur: bool, with_map: bool) -> torch.Tensor:
    """D and/or its per-row pooled sums of one band (see the module docstring), float32."""
    band = band.float().contiguous()
    n, c6, h, w = band.shape
    vblurred, vsn, vsc = plane_view(vblurred)
    if c6 != 6 or vblurred.shape != (n, 3, h, w):
        raise ValueError(f"cvvdp_band_pool: band (N, 6, h, w) and vblurred (N, 3, h, w); got {tuple(band.shape)} "
                         f"and {tuple(vblurred.shape)}")
    if blur and w <= _TAPS // 2:
        raise ValueError(f"cvvdp_band_pool: the masking blur needs w > {_TAPS // 2}; got {w}")
    launch, tail, ow = _pool_launcher(n, h, w, vsn, vsc, bool(blur), bool(with_map))
    out = torch.empty((n, 3, h, ow), dtype=torch.float32, device=band.device)
    launch(vblurred, band, _taps(band.device), out, *tail)
    return out
