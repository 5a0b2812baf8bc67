"""ColorVideoVDP's per-band element-wise work on the GPU, fused: one kernel per band and image.

    cvvdp_ref_band(g, g_next (N, 3, ...), rho, scale) -> (N, 6, h, w): contrast R (0-2), sensitivity S (3-5)
    cvvdp_test_band(g, g_next, ref_contrast, sens, scale) -> (N, 6, h, w): min(|T'|, |R'|) (0-2), |T' - R'| (3-5)

Per pixel of a non-baseband band (twins: ``cvvdp_ref_band_ref`` and ``cvvdp_test_band_ref`` in
:mod:`fusedsim.families.cvvdp.twin`): the expanded next level E (the 3 x 3 stencil of
:func:`fusedsim.families.cvvdp.pyramid_kernel.expand_at`, never written), ``C = min((G - E) / max(E_0, 0.01), 1000) ·
scale``; on the reference side the castleCSF sensitivity ``S_c = 10^(lerp of the band's log-S table at
log10 max(E_0, 0.01)) · 10^(corr/20)`` (the table, linear in log rho, is formed once per band frequency on the
host by the twin's ``cvvdp_sensitivity_lut_ref``); on the test side ``T' = T S g``, ``R' = R S g`` with
g = (1, 1.45, 1). This replaces the twin's expand convolutions and ~60 element-wise, index, pow and log10
launches per band and image. log10 and 10^x are ``log`` / ``exp`` with a constant factor: a few float32 ulps
from torch. Forward only. One program = one row × a block of columns of one image.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from fusedsim.core.fast_math import fast_log2
from fusedsim.core.launch import Launcher
from fusedsim.core.state import cached
from fusedsim.families.cvvdp.pyramid_kernel import block_for, expand_at
from fusedsim.families.cvvdp.data import cvvdp_params
from fusedsim.families.cvvdp.twin import CH_GAIN, lut_field, cvvdp_sensitivity_lut_ref
from fusedsim.families.cvvdp.ops import cvvdp_ref_band, cvvdp_test_band

__all__ = ["contrast", "cvvdp_ref_band_fwd", "cvvdp_test_band_fwd", "levels", "masker_and_diff", "plane_view",
           "sensitivities", "sensitivity_table"]

_LN10 = math.log(10.0)


@triton.jit
def contrast(G, GN, n, i, j, w, hn, wn, ok, gsn, gsc, nsn, nsc, SCALE: tl.constexpr):
    """Weber contrast of the three channels at row i, columns j, and the background max(E_0, 0.01)."""
    nb = GN + n * nsn
    gb = G + n * gsn + i.to(tl.int64) * w + j
    e0 = expand_at(nb, i, j, hn, wn, ok)
    e1 = expand_at(nb + nsc, i, j, hn, wn, ok)
    e2 = expand_at(nb + 2 * nsc, i, j, hn, wn, ok)
    bkg = tl.maximum(e0, 0.01)
    c0 = tl.minimum((tl.load(gb, mask=ok, other=0.0) - e0) / bkg, 1000.0)
    c1 = tl.minimum((tl.load(gb + gsc, mask=ok, other=0.0) - e1) / bkg, 1000.0)
    c2 = tl.minimum((tl.load(gb + 2 * gsc, mask=ok, other=0.0) - e2) / bkg, 1000.0)
    if SCALE != 1.0:
        c0 = c0 * SCALE
        c1 = c1 * SCALE
        c2 = c2 * SCALE
    return c0, c1, c2, bkg


@triton.jit
def _sens(LUT, c: tl.constexpr, i_lo, i_hi, frac, ok, NL: tl.constexpr, CORR, LN10: tl.constexpr):
    lo = tl.load(LUT + c * NL + i_lo, mask=ok, other=0.0)
    hi = tl.load(LUT + c * NL + i_hi, mask=ok, other=0.0)
    return tl.exp((lo * (1.0 - frac) + hi * frac) * LN10) * CORR


@triton.jit
def sensitivities(LUT, bkg, ok, LOGL0, LOGL_SPAN, CORR, NL: tl.constexpr, LN10: tl.constexpr):
    """castleCSF sensitivity of the three channels at background luminance ``bkg`` (the band's log-S table)."""
    log_bkg = fast_log2(bkg) * (0.6931471805599453 / LN10)  # log10 by the hardware's log2 (about 2^-22 off)
    pos = (log_bkg - LOGL0) / LOGL_SPAN * (NL - 1)
    pos = tl.minimum(tl.maximum(pos, 0.0), NL - 1.0)
    i_lo = pos.to(tl.int32)
    frac = pos - i_lo.to(tl.float32)
    i_hi = tl.minimum(i_lo + 1, NL - 1)
    return (_sens(LUT, 0, i_lo, i_hi, frac, ok, NL, CORR, LN10), _sens(LUT, 1, i_lo, i_hi, frac, ok, NL, CORR, LN10),
            _sens(LUT, 2, i_lo, i_hi, frac, ok, NL, CORR, LN10))


@triton.jit
def store_six(out, HW, v0, v1, v2, v3, v4, v5, ok):
    """The six planes of a band buffer (N, 6, h, w) at one row segment ``out`` (planes HW apart)."""
    tl.store(out, v0, mask=ok)
    tl.store(out + HW, v1, mask=ok)
    tl.store(out + 2 * HW, v2, mask=ok)
    tl.store(out + 3 * HW, v3, mask=ok)
    tl.store(out + 4 * HW, v4, mask=ok)
    tl.store(out + 5 * HW, v5, mask=ok)


@triton.jit
def _ref_band_kernel(G, GN, LUT, OUT, w, hn, wn, gsn, gsc, nsn, nsc, HW, LOGL0, LOGL_SPAN, CORR,
                     NL: tl.constexpr, SCALE: tl.constexpr, LN10: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.program_id(1)
    n = tl.program_id(2).to(tl.int64)
    j = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = j < w
    c0, c1, c2, bkg = contrast(G, GN, n, i, j, w, hn, wn, ok, gsn, gsc, nsn, nsc, SCALE)
    s0, s1, s2 = sensitivities(LUT, bkg, ok, LOGL0, LOGL_SPAN, CORR, NL, LN10)
    out = OUT + n * 6 * HW + i.to(tl.int64) * w + j
    store_six(out, HW, c0, c1, c2, s0, s1, s2, ok)


@triton.jit
def masker_and_diff(tc, rc, s, G: tl.constexpr):
    """(min(|T'|, |R'|), |T' - R'|) of one channel from test and reference contrast and sensitivity."""
    tp = tc * s * G
    rp = rc * s * G
    return tl.minimum(tl.abs(tp), tl.abs(rp)), tl.abs(tp - rp)


@triton.jit
def _test_channel(tc, R, S, pix, ok, G: tl.constexpr):
    s = tl.load(S + pix, mask=ok, other=0.0)
    return masker_and_diff(tc, tl.load(R + pix, mask=ok, other=0.0), s, G)


@triton.jit
def _test_band_kernel(G, GN, R, S, OUT, h, w, hn, wn, gsn, gsc, nsn, nsc, rsn, rsc, ssn, ssc, HW,
                      G1: tl.constexpr, SCALE: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.program_id(1)
    n = tl.program_id(2).to(tl.int64)
    j = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = j < w
    c0, c1, c2, _ = contrast(G, GN, n, i, j, w, hn, wn, ok, gsn, gsc, nsn, nsc, SCALE)
    pix = i.to(tl.int64) * w + j
    rb = R + n * rsn
    sb = S + n * ssn
    m0, a0 = _test_channel(c0, rb, sb, pix, ok, 1.0)
    m1, a1 = _test_channel(c1, rb + rsc, sb + ssc, pix, ok, G1)
    m2, a2 = _test_channel(c2, rb + 2 * rsc, sb + 2 * ssc, pix, ok, 1.0)
    out = OUT + n * 6 * HW + pix
    store_six(out, HW, m0, m1, m2, a0, a1, a2, ok)


def plane_view(x: torch.Tensor, batch: int | None = None) -> tuple[torch.Tensor, int, int]:
    """``x`` (N, C, h, w) as float32 with contiguous rows, and its batch and channel strides (batch stride 0 when
    a single image is broadcast over ``batch``)."""
    x = x if x.dtype == torch.float32 else x.float()
    h, w = x.shape[-2:]
    if x.stride(-1) != 1 or (h > 1 and x.stride(-2) != w):
        x = x.contiguous()
    sn = 0 if batch is not None and x.shape[0] == 1 and batch != 1 else x.stride(0)
    return x, sn, x.stride(1)


@cached(maxsize=64)
def sensitivity_table(rho: float, device: torch.device) -> tuple[torch.Tensor, float, float, float, int]:
    """The band's log-S table (3, L) on ``device`` and the float32 constants the twin forms around it."""
    like = torch.empty(0, dtype=torch.float32)
    lut = cvvdp_sensitivity_lut_ref(rho, like).contiguous().to(device)
    log_l = torch.log10(torch.tensor(lut_field("L_bkg"), dtype=torch.float32))
    corr = 10.0 ** (torch.tensor(cvvdp_params().sensitivity_correction, dtype=torch.float32) / 20.0)
    return lut, float(log_l[0]), float(log_l[-1] - log_l[0]), float(corr), log_l.numel()


def levels(g: torch.Tensor, g_next: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, tuple]:
    """Two consecutive Gaussian levels as row-contiguous float32, and the band's geometry and strides."""
    g, gsn, gsc = plane_view(g)
    g_next, nsn, nsc = plane_view(g_next)
    n, c, h, w = g.shape
    hn, wn = g_next.shape[-2:]
    if c != 3 or g_next.shape[:2] != g.shape[:2] or (hn, wn) != ((h + 1) // 2, (w + 1) // 2):
        raise ValueError(f"cvvdp band: levels (N, 3, h, w) and (N, 3, ceil(h/2), ceil(w/2)); got {tuple(g.shape)} "
                         f"and {tuple(g_next.shape)}")
    return g, g_next, (n, h, w, hn, wn, gsn, gsc, nsn, nsc)


@cached(maxsize=128)
def _ref_launcher(geometry: tuple, rho: float, scale: float, device: torch.device) -> tuple[Launcher, tuple, tuple]:
    n, h, w, hn, wn, gsn, gsc, nsn, nsc = geometry
    lut, log_l0, log_span, corr, nl = sensitivity_table(rho, device)
    block, warps = block_for(w)
    launch = Launcher(_ref_band_kernel, (triton.cdiv(w, block), h, n), num_warps=warps)
    return launch, (lut,), (w, hn, wn, gsn, gsc, nsn, nsc, h * w, log_l0, log_span, corr, nl, float(scale), _LN10,
                            block)


@cvvdp_ref_band.triton_launcher
def cvvdp_ref_band_fwd(g: torch.Tensor, g_next: torch.Tensor, rho: float, scale: float) -> torch.Tensor:
    """Reference contrast and sensitivity (N, 6, h, w) of one non-baseband band, float32."""
    g, g_next, geometry = levels(g, g_next)
    launch, (lut,), tail = _ref_launcher(geometry, float(rho), float(scale), g.device)
    n, h, w = geometry[:3]
    out = torch.empty((n, 6, h, w), dtype=torch.float32, device=g.device)
    launch(g, g_next, lut, out, *tail)
    return out


@cached(maxsize=128)
def _test_launcher(geometry: tuple, ref_strides: tuple, scale: float) -> tuple[Launcher, tuple]:
    n, h, w, hn, wn, gsn, gsc, nsn, nsc = geometry
    block, warps = block_for(w)
    launch = Launcher(_test_band_kernel, (triton.cdiv(w, block), h, n), num_warps=warps)
    return launch, (h, w, hn, wn, gsn, gsc, nsn, nsc, *ref_strides, h * w, CH_GAIN[1], float(scale), block)


@cvvdp_test_band.triton_launcher
def cvvdp_test_band_fwd(g: torch.Tensor, g_next: torch.Tensor, ref_contrast: torch.Tensor, sens: torch.Tensor,
                        scale: float) -> torch.Tensor:
    """min(|T'|, |R'|) and |T' - R'| (N, 6, h, w) of one non-baseband band, float32; ``ref_contrast`` and
    ``sens`` (N or 1, 3, h, w) may be views (e.g. of ``cvvdp_ref_band``'s output)."""
    g, g_next, geometry = levels(g, g_next)
    n, h, w = geometry[:3]
    for name, x in (("ref_contrast", ref_contrast), ("sens", sens)):
        if x.shape[1:] != (3, h, w) or x.shape[0] not in (1, n):
            raise ValueError(f"cvvdp_test_band: {name} must be (N or 1, 3, {h}, {w}); got {tuple(x.shape)}")
    ref_contrast, rsn, rsc = plane_view(ref_contrast, n)
    sens, ssn, ssc = plane_view(sens, n)
    launch, tail = _test_launcher(geometry, (rsn, rsc, ssn, ssc), float(scale))
    out = torch.empty((n, 6, h, w), dtype=torch.float32, device=g.device)
    launch(g, g_next, ref_contrast, sens, out, *tail)
    return out
