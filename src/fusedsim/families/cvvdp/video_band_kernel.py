"""ColorVideoVDP's bands of video frames on the GPU: the still-image band kernels on the four temporal channels.

    cvvdp_video_pair_band(ref_g, ref_g_next, test_g, test_g_next (M, 4, ...), rho, scale)
        -> (M, 8, h, w): min(|T'|, |R'|) (0-3), |T' - R'| (4-7)
    cvvdp_video_masker_vblur(m (M, 4, h, w)) -> (M, 4, h, w)          vertical pass of the 13-tap Gaussian
    cvvdp_video_band_pool(vblurred (M, 4, h, w), band (M, 8, h, w), blur, with_map)
        -> (M, 4, h, w + 1) with_map: D, then per row sum_x safe_pow(D, beta); (M, 4, h, 1) otherwise

Twins: ``cvvdp_video_pair_band_ref`` (:mod:`.video_twin`), ``cvvdp_masker_vblur_ref`` and ``cvvdp_band_pool_ref``
(:mod:`.twin`). The arithmetic is that of :mod:`.band_kernel`, :mod:`.pair_band_kernel` and
:mod:`.masking_kernel` (the same jitted helpers) with the fourth channel, Y-transient: its contrast is divided by
the sustained Y background, its sensitivity comes from the 5 Hz castleCSF table, its gain is 1, and the masking
mixes the four channels with the full 4 x 4 cross-channel weights. Forward only.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from fusedsim.core.fast_math import fast_log2
from fusedsim.core.launch import Launcher
from fusedsim.core.state import cached
from fusedsim.families.cvvdp.band_kernel import masker_and_diff, plane_view
from fusedsim.families.cvvdp.data import cvvdp_params
from fusedsim.families.cvvdp.mask_diff_kernel import soft, spow
from fusedsim.families.cvvdp.ops import cvvdp_video_band_pool, cvvdp_video_masker_vblur, cvvdp_video_pair_band
from fusedsim.families.cvvdp.pyramid_kernel import block_for, expand_pair_at
from fusedsim.families.cvvdp.twin import CH_GAIN, TEMPORAL_LUTS, cvvdp_sensitivity_lut_ref, gauss_taps, lut_field

__all__ = ["cvvdp_video_band_pool_fwd", "cvvdp_video_masker_vblur_fwd", "cvvdp_video_pair_band_fwd"]

_LN10 = math.log(10.0)
_TAPS = 13
# columns per step of the band pool's row loop (one warp a row): at 1080p 28 of its 30 steps lie 6 px inside the
# row, where the horizontal blur needs no reflection (one step of 1 024 columns never did); on an H200 the whole
# metric ran 4 % faster with 64 than with 128, 8 % faster than with 256 (benchmarks/README.md, ColorVideoVDP on video)
_POOL_BLOCK = 64


# ------------------------------------------------------------------------------------------------- pair band
@triton.jit
def _sens_at(LUT, c: tl.constexpr, i_lo, i_hi, frac, ok, NL: tl.constexpr, CORR, LN10: tl.constexpr):
    lo = tl.load(LUT + c * NL + i_lo, mask=ok, other=0.0)
    hi = tl.load(LUT + c * NL + i_hi, mask=ok, other=0.0)
    return tl.exp((lo * (1.0 - frac) + hi * frac) * LN10) * CORR


@triton.jit
def _contrast_at(g, e, bkg, SCALE: tl.constexpr):
    c = tl.minimum((g - e) / bkg, 1000.0)
    if SCALE != 1.0:
        c = c * SCALE
    return c


@triton.jit
def _contrast4_pair(G, GN, n, bi, j, w, h, hn, wn, ok, gsn, gsc, nsn, nsc, SCALE: tl.constexpr):
    """Weber contrast of the four channels (G - E) / max(E_0, 0.01) (channel 0: sustained Y; E the expanded next
    level) and that background, at rows 2 bi (the first five values) and 2 bi + 1 (the next five): the next level's
    stencil loads are shared by both rows; past the plane's last row the odd row reads the even one's pixels (its
    values are not stored)."""
    nb = GN + n * nsn
    e0, f0 = expand_pair_at(nb, bi, j, hn, wn, ok)
    e1, f1 = expand_pair_at(nb + nsc, bi, j, hn, wn, ok)
    e2, f2 = expand_pair_at(nb + 2 * nsc, bi, j, hn, wn, ok)
    e3, f3 = expand_pair_at(nb + 3 * nsc, bi, j, hn, wn, ok)
    i = 2 * bi
    ge = G + n * gsn + i.to(tl.int64) * w + j
    go = ge + tl.where(i + 1 < h, w, 0)
    bkg_e = tl.maximum(e0, 0.01)
    bkg_o = tl.maximum(f0, 0.01)
    return (_contrast_at(tl.load(ge, mask=ok, other=0.0), e0, bkg_e, SCALE),
            _contrast_at(tl.load(ge + gsc, mask=ok, other=0.0), e1, bkg_e, SCALE),
            _contrast_at(tl.load(ge + 2 * gsc, mask=ok, other=0.0), e2, bkg_e, SCALE),
            _contrast_at(tl.load(ge + 3 * gsc, mask=ok, other=0.0), e3, bkg_e, SCALE), bkg_e,
            _contrast_at(tl.load(go, mask=ok, other=0.0), f0, bkg_o, SCALE),
            _contrast_at(tl.load(go + gsc, mask=ok, other=0.0), f1, bkg_o, SCALE),
            _contrast_at(tl.load(go + 2 * gsc, mask=ok, other=0.0), f2, bkg_o, SCALE),
            _contrast_at(tl.load(go + 3 * gsc, mask=ok, other=0.0), f3, bkg_o, SCALE), bkg_o)


@triton.jit
def _band_row(LUT, r0, r1, r2, r3, bkg, t0, t1, t2, t3, ok, LOGL0, LOGL_SPAN, CORR, NL: tl.constexpr,
              G1: tl.constexpr, LN10: tl.constexpr):
    """The reference's CSF sensitivity at its background, then both sides' masker input min(|T'|, |R'|) and
    difference |T' - R'| of the four channels of one row segment (the band buffer's eight planes, in order)."""
    pos = (fast_log2(bkg) * (0.6931471805599453 / LN10) - LOGL0) / LOGL_SPAN * (NL - 1)  # log10 (2^-22 off)
    pos = tl.minimum(tl.maximum(pos, 0.0), NL - 1.0)
    i_lo = pos.to(tl.int32)
    frac = pos - i_lo.to(tl.float32)
    i_hi = tl.minimum(i_lo + 1, NL - 1)
    m0, a0 = masker_and_diff(t0, r0, _sens_at(LUT, 0, i_lo, i_hi, frac, ok, NL, CORR, LN10), 1.0)
    m1, a1 = masker_and_diff(t1, r1, _sens_at(LUT, 1, i_lo, i_hi, frac, ok, NL, CORR, LN10), G1)
    m2, a2 = masker_and_diff(t2, r2, _sens_at(LUT, 2, i_lo, i_hi, frac, ok, NL, CORR, LN10), 1.0)
    m3, a3 = masker_and_diff(t3, r3, _sens_at(LUT, 3, i_lo, i_hi, frac, ok, NL, CORR, LN10), 1.0)
    return m0, m1, m2, m3, a0, a1, a2, a3


@triton.jit
def _store8(out, HW, m0, m1, m2, m3, a0, a1, a2, a3, ok):
    tl.store(out, m0, mask=ok)
    tl.store(out + HW, m1, mask=ok)
    tl.store(out + 2 * HW, m2, mask=ok)
    tl.store(out + 3 * HW, m3, mask=ok)
    tl.store(out + 4 * HW, a0, mask=ok)
    tl.store(out + 5 * HW, a1, mask=ok)
    tl.store(out + 6 * HW, a2, mask=ok)
    tl.store(out + 7 * HW, a3, mask=ok)


@triton.jit
def _video_pair_band_kernel(RG, RGN, TG, TGN, LUT, OUT, w, h, hn, wn, rgsn, rgsc, rnsn, rnsc, tgsn, tgsc, tnsn, tnsc,
                            HW, REF_FRAMES, LOGL0, LOGL_SPAN, CORR, NL: tl.constexpr, G1: tl.constexpr,
                            SCALE: tl.constexpr, LN10: tl.constexpr, BLOCK: tl.constexpr):
    """Rows 2 bi and 2 bi + 1 of a block of columns: the two rows expand the same three rows of the next level."""
    bi = tl.program_id(1)
    n = tl.program_id(2).to(tl.int64)
    j = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = j < w
    # test frame n of clip n // REF_FRAMES is compared with reference frame n % REF_FRAMES (a shared reference)
    r0, r1, r2, r3, rb, ro0, ro1, ro2, ro3, rob = _contrast4_pair(RG, RGN, n % REF_FRAMES, bi, j, w, h, hn, wn, ok,
                                                                  rgsn, rgsc, rnsn, rnsc, SCALE)
    t0, t1, t2, t3, _, to0, to1, to2, to3, _ = _contrast4_pair(TG, TGN, n, bi, j, w, h, hn, wn, ok, tgsn, tgsc, tnsn,
                                                                tnsc, SCALE)
    out = OUT + n * 8 * HW + (2 * bi).to(tl.int64) * w + j
    m0, m1, m2, m3, a0, a1, a2, a3 = _band_row(LUT, r0, r1, r2, r3, rb, t0, t1, t2, t3, ok, LOGL0, LOGL_SPAN,
                                               CORR, NL, G1, LN10)
    _store8(out, HW, m0, m1, m2, m3, a0, a1, a2, a3, ok)
    m0, m1, m2, m3, a0, a1, a2, a3 = _band_row(LUT, ro0, ro1, ro2, ro3, rob, to0, to1, to2, to3, ok, LOGL0,
                                               LOGL_SPAN, CORR, NL, G1, LN10)
    _store8(out + w, HW, m0, m1, m2, m3, a0, a1, a2, a3, ok & (j * 0 + 2 * bi + 1 < h))


@cached(maxsize=64)
def _sensitivity_table(rho: float, device: torch.device) -> tuple[torch.Tensor, float, float, float, int]:
    """The band's log-S table (4, L) on ``device`` and the float32 constants the twin forms around it."""
    like = torch.empty(0, dtype=torch.float32)
    lut = cvvdp_sensitivity_lut_ref(rho, like, TEMPORAL_LUTS).contiguous().to(device)
    log_l = torch.log10(torch.tensor(lut_field("L_bkg"), dtype=torch.float32))
    corr = 10.0 ** (torch.tensor(cvvdp_params().sensitivity_correction, dtype=torch.float32) / 20.0)
    return lut, float(log_l[0]), float(log_l[-1] - log_l[0]), float(corr), log_l.numel()


def _levels(g: torch.Tensor, g_next: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, tuple]:
    g, gsn, gsc = plane_view(g)
    g_next, nsn, nsc = plane_view(g_next)
    n, c, h, w = g.shape
    hn, wn = g_next.shape[-2:]
    if c != 4 or g_next.shape[:2] != g.shape[:2] or (hn, wn) != ((h + 1) // 2, (w + 1) // 2):
        raise ValueError(f"cvvdp_video_pair_band: levels (M, 4, h, w) and (M, 4, ceil(h/2), ceil(w/2)); got "
                         f"{tuple(g.shape)} and {tuple(g_next.shape)}")
    return g, g_next, (n, h, w, hn, wn, gsn, gsc, nsn, nsc)


@cached(maxsize=128)
def _pair_launcher(ref_geometry: tuple, test_geometry: tuple, rho: float, scale: float, device: torch.device
                   ) -> tuple[Launcher, torch.Tensor, tuple]:
    ref_frames, h, w, hn, wn, *ref_strides = ref_geometry
    lut, log_l0, log_span, corr, nl = _sensitivity_table(rho, device)
    block, warps = block_for(w)
    launch = Launcher(_video_pair_band_kernel, (triton.cdiv(w, block), triton.cdiv(h, 2), test_geometry[0]),
                      num_warps=warps)
    return launch, lut, (w, h, hn, wn, *ref_strides, *test_geometry[5:], h * w, ref_frames, log_l0, log_span, corr, nl,
                         CH_GAIN[1], float(scale), _LN10, block)


@cvvdp_video_pair_band.triton_launcher
def cvvdp_video_pair_band_fwd(ref_g: torch.Tensor, ref_g_next: torch.Tensor, test_g: torch.Tensor,
                              test_g_next: torch.Tensor, rho: float, scale: float) -> torch.Tensor:
    """min(|T'|, |R'|) and |T' - R'| (K*M, 8, h, w) of one non-baseband band of K clips of M frames against M
    reference frames, float32."""
    ref_g, ref_g_next, ref_geometry = _levels(ref_g, ref_g_next)
    test_g, test_g_next, test_geometry = _levels(test_g, test_g_next)
    if test_geometry[1:5] != ref_geometry[1:5] or test_geometry[0] % ref_geometry[0]:
        raise ValueError(f"cvvdp_video_pair_band: test levels {tuple(test_g.shape)} and {tuple(test_g_next.shape)} "
                         f"are not K clips of the reference's {tuple(ref_g.shape)} and {tuple(ref_g_next.shape)}")
    launch, lut, tail = _pair_launcher(ref_geometry, test_geometry, float(rho), float(scale), ref_g.device)
    n, h, w = test_geometry[0], *ref_geometry[1:3]
    out = torch.empty((n, 8, h, w), dtype=torch.float32, device=ref_g.device)
    launch(ref_g, ref_g_next, test_g, test_g_next, lut, out, *tail)
    return out


# ----------------------------------------------------------------------------------------- masking blur, pooling
@triton.jit
def _add_row(acc, x, k: tl.constexpr, q: tl.constexpr, T: tl.constexpr, NT: tl.constexpr):
    """Input row k of a program added to its output row q with tap k - q (nothing where the tap does not exist)."""
    if k - q >= 0:
        if k - q < NT:
            acc += T[k - q] * x
    return acc


@triton.jit
def _vblur_kernel(X, OUT, h, w, sn, sc, HW, T: tl.constexpr, C: tl.constexpr, NT: tl.constexpr,
                  BLOCK: tl.constexpr):
    """Eight output rows a program: each of the 8 + NT - 1 input rows is loaded once and added to the output rows it
    reaches, in tap order as one row at a time would (the same sums); the taps ``T`` are compile-time constants and
    each output row has its own accumulator, so no product by a zero weight is formed."""
    i0 = tl.program_id(1) * 8
    plane = tl.program_id(2)
    n = (plane // C).to(tl.int64)
    c = (plane % C).to(tl.int64)
    j = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = j < w
    base = X + n * sn + c * sc + j
    a0 = tl.zeros([BLOCK], dtype=tl.float32)
    a1 = tl.zeros([BLOCK], dtype=tl.float32)
    a2 = tl.zeros([BLOCK], dtype=tl.float32)
    a3 = tl.zeros([BLOCK], dtype=tl.float32)
    a4 = tl.zeros([BLOCK], dtype=tl.float32)
    a5 = tl.zeros([BLOCK], dtype=tl.float32)
    a6 = tl.zeros([BLOCK], dtype=tl.float32)
    a7 = tl.zeros([BLOCK], dtype=tl.float32)
    for k in tl.static_range(8 + NT - 1):
        r = i0 + (k - NT // 2)
        r = tl.where(r < 0, -r, r)
        r = tl.where(r >= h, 2 * (h - 1) - r, r)
        r = tl.maximum(r, 0)  # rows past a short plane's end (their outputs are not stored)
        x = tl.load(base + r.to(tl.int64) * w, mask=ok, other=0.0)
        a0 = _add_row(a0, x, k, 0, T, NT)
        a1 = _add_row(a1, x, k, 1, T, NT)
        a2 = _add_row(a2, x, k, 2, T, NT)
        a3 = _add_row(a3, x, k, 3, T, NT)
        a4 = _add_row(a4, x, k, 4, T, NT)
        a5 = _add_row(a5, x, k, 5, T, NT)
        a6 = _add_row(a6, x, k, 6, T, NT)
        a7 = _add_row(a7, x, k, 7, T, NT)
    out = OUT + (n * C + c) * HW + i0.to(tl.int64) * w + j
    tl.store(out, a0, mask=ok)
    tl.store(out + w, a1, mask=ok & (j * 0 + i0 + 1 < h))
    tl.store(out + 2 * w, a2, mask=ok & (j * 0 + i0 + 2 < h))
    tl.store(out + 3 * w, a3, mask=ok & (j * 0 + i0 + 3 < h))
    tl.store(out + 4 * w, a4, mask=ok & (j * 0 + i0 + 4 < h))
    tl.store(out + 5 * w, a5, mask=ok & (j * 0 + i0 + 5 < h))
    tl.store(out + 6 * w, a6, mask=ok & (j * 0 + i0 + 6 < h))
    tl.store(out + 7 * w, a7, mask=ok & (j * 0 + i0 + 7 < h))


@triton.jit
def _hblur4_edge(v, vsc, j, w, ok, T: tl.constexpr, NT: tl.constexpr, BLOCK: tl.constexpr):
    """Horizontal pass of the masking blur of the four channels (rows ``v + c vsc``) at columns ``j``, reflected
    at the row's ends; taps in order."""
    b0 = tl.zeros([BLOCK], dtype=tl.float32)
    b1 = tl.zeros([BLOCK], dtype=tl.float32)
    b2 = tl.zeros([BLOCK], dtype=tl.float32)
    b3 = tl.zeros([BLOCK], dtype=tl.float32)
    for t in tl.static_range(NT):
        col = j + (t - NT // 2)
        col = tl.where(col < 0, -col, col)
        col = tl.where(col >= w, 2 * (w - 1) - col, col)
        tap = T[t]
        b0 += tap * tl.load(v + col, mask=ok, other=0.0)
        b1 += tap * tl.load(v + vsc + col, mask=ok, other=0.0)
        b2 += tap * tl.load(v + 2 * vsc + col, mask=ok, other=0.0)
        b3 += tap * tl.load(v + 3 * vsc + col, mask=ok, other=0.0)
    return b0, b1, b2, b3


@triton.jit
def _hblur4_inner(v, vsc, j, T: tl.constexpr, NT: tl.constexpr, BLOCK: tl.constexpr):
    """:func:`_hblur4_edge` where every tap of every column lies inside the row: no reflection, no mask, loads at
    constant offsets from four column pointers (the same sums)."""
    p0 = v + j
    p1 = p0 + vsc
    p2 = p1 + vsc
    p3 = p2 + vsc
    b0 = tl.zeros([BLOCK], dtype=tl.float32)
    b1 = tl.zeros([BLOCK], dtype=tl.float32)
    b2 = tl.zeros([BLOCK], dtype=tl.float32)
    b3 = tl.zeros([BLOCK], dtype=tl.float32)
    for t in tl.static_range(NT):
        tap = T[t]
        b0 += tap * tl.load(p0 + (t - NT // 2))
        b1 += tap * tl.load(p1 + (t - NT // 2))
        b2 += tap * tl.load(p2 + (t - NT // 2))
        b3 += tap * tl.load(p3 + (t - NT // 2))
    return b0, b1, b2, b3


@triton.jit
def _diff(a, m0, m1, m2, m3, w0, w1, w2, w3, P, EPS_P, MAXV, EPS: tl.constexpr):
    """D of one masked channel: its raw difference a and the masker mix M = sum_c m_c W[c, j]."""
    return soft(spow(a, P, EPS_P, EPS), m0 * w0 + m1 * w1 + m2 * w2 + m3 * w3, MAXV)


@triton.jit
def _video_band_pool_kernel(V, BAND, WX, OUT, h, w, vsn, vsc, HW, OW, Q0, Q1, Q2, Q3, EQ0, EQ1, EQ2, EQ3, P,
                            EPS_P, MC, MAXV, BETA, EPS_BETA, EPS: tl.constexpr, BLUR: tl.constexpr,
                            MAP: tl.constexpr, T: tl.constexpr, NT: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.program_id(0)
    n = tl.program_id(1).to(tl.int64)
    row_off = i.to(tl.int64) * w
    v0 = V + n * vsn + row_off
    a_row = BAND + (n * 8 + 4) * HW + row_off
    out_row = OUT + n * 4 * h * OW + i.to(tl.int64) * OW
    # the 4 x 4 cross-channel weights W[c, j] (row by row), read once
    w00, w01, w02, w03 = tl.load(WX + 0), tl.load(WX + 1), tl.load(WX + 2), tl.load(WX + 3)
    w10, w11, w12, w13 = tl.load(WX + 4), tl.load(WX + 5), tl.load(WX + 6), tl.load(WX + 7)
    w20, w21, w22, w23 = tl.load(WX + 8), tl.load(WX + 9), tl.load(WX + 10), tl.load(WX + 11)
    w30, w31, w32, w33 = tl.load(WX + 12), tl.load(WX + 13), tl.load(WX + 14), tl.load(WX + 15)
    acc0 = tl.zeros([BLOCK], dtype=tl.float32)
    acc1 = tl.zeros([BLOCK], dtype=tl.float32)
    acc2 = tl.zeros([BLOCK], dtype=tl.float32)
    acc3 = tl.zeros([BLOCK], dtype=tl.float32)
    for j0 in range(0, w, BLOCK):
        j = j0 + tl.arange(0, BLOCK)
        ok = j < w
        if BLUR:
            if (j0 >= NT // 2) & (j0 + BLOCK + NT // 2 <= w):
                b0, b1, b2, b3 = _hblur4_inner(v0, vsc, j, T, NT, BLOCK)
            else:
                b0, b1, b2, b3 = _hblur4_edge(v0, vsc, j, w, ok, T, NT, BLOCK)
        else:
            b0 = tl.load(v0 + j, mask=ok, other=0.0)
            b1 = tl.load(v0 + vsc + j, mask=ok, other=0.0)
            b2 = tl.load(v0 + 2 * vsc + j, mask=ok, other=0.0)
            b3 = tl.load(v0 + 3 * vsc + j, mask=ok, other=0.0)
        m0 = spow(tl.abs(b0 * MC), Q0, EQ0, EPS)
        m1 = spow(tl.abs(b1 * MC), Q1, EQ1, EPS)
        m2 = spow(tl.abs(b2 * MC), Q2, EQ2, EPS)
        m3 = spow(tl.abs(b3 * MC), Q3, EQ3, EPS)
        d0 = _diff(tl.load(a_row + j, mask=ok, other=0.0), m0, m1, m2, m3, w00, w10, w20, w30, P, EPS_P, MAXV, EPS)
        d1 = _diff(tl.load(a_row + HW + j, mask=ok, other=0.0), m0, m1, m2, m3, w01, w11, w21, w31, P, EPS_P, MAXV,
                   EPS)
        d2 = _diff(tl.load(a_row + 2 * HW + j, mask=ok, other=0.0), m0, m1, m2, m3, w02, w12, w22, w32, P, EPS_P,
                   MAXV, EPS)
        d3 = _diff(tl.load(a_row + 3 * HW + j, mask=ok, other=0.0), m0, m1, m2, m3, w03, w13, w23, w33, P, EPS_P,
                   MAXV, EPS)
        if MAP:
            tl.store(out_row + j, d0, mask=ok)
            tl.store(out_row + h * OW + j, d1, mask=ok)
            tl.store(out_row + 2 * h * OW + j, d2, mask=ok)
            tl.store(out_row + 3 * h * OW + j, d3, mask=ok)
        acc0 += tl.where(ok, spow(d0, BETA, EPS_BETA, EPS), 0.0)
        acc1 += tl.where(ok, spow(d1, BETA, EPS_BETA, EPS), 0.0)
        acc2 += tl.where(ok, spow(d2, BETA, EPS_BETA, EPS), 0.0)
        acc3 += tl.where(ok, spow(d3, BETA, EPS_BETA, EPS), 0.0)
    tl.store(out_row + (OW - 1), tl.sum(acc0, axis=0))
    tl.store(out_row + h * OW + (OW - 1), tl.sum(acc1, axis=0))
    tl.store(out_row + 2 * h * OW + (OW - 1), tl.sum(acc2, axis=0))
    tl.store(out_row + 3 * h * OW + (OW - 1), tl.sum(acc3, axis=0))


@cached(maxsize=1)
def _taps() -> tuple[float, ...]:
    """The masking blur's taps (float32 values as the twin forms them), compiled into the blur kernels."""
    taps = tuple(float(v) for v in gauss_taps(cvvdp_params().pu_dilate, torch.empty(0, dtype=torch.float32)))
    if len(taps) != _TAPS:
        raise ValueError(f"cvvdp masking blur: the kernels take {_TAPS} taps; the parameters give {len(taps)}")
    return taps


@cached(maxsize=8)
def _cross_weights(device: torch.device) -> torch.Tensor:
    """2^xcm_weights (4, 4) in float32, as the twin forms them."""
    return (2 ** torch.tensor(cvvdp_params().xcm_weights, dtype=torch.float32)).view(4, 4).contiguous().to(device)


@cached(maxsize=1)
def _pool_constants() -> tuple:
    """q (4), eps^q (4), p, eps^p, 10^mask_c, 10^d_max, beta, eps^beta: float32 as the twin forms them."""
    prm = cvvdp_params()

    def t(v):
        return torch.tensor(v, dtype=torch.float32)

    eps = t(1e-5)
    q = [t(v) for v in prm.mask_q[:4]]
    p, beta = t(prm.mask_p), t(prm.beta)
    consts = (*q, *(eps ** v for v in q), p, eps ** p, 10 ** t(prm.mask_c), 10 ** t(prm.d_max), beta, eps ** beta)
    return tuple(float(c) for c in consts)


@cached(maxsize=128)
def _vblur_launcher(n: int, h: int, w: int, sn: int, sc: int) -> tuple[Launcher, tuple]:
    block, warps = block_for(w)
    launch = Launcher(_vblur_kernel, (triton.cdiv(w, block), triton.cdiv(h, 8), n * 4), num_warps=warps)
    return launch, (h, w, sn, sc, h * w, _taps(), 4, _TAPS, block)


@cvvdp_video_masker_vblur.triton_launcher
def cvvdp_video_masker_vblur_fwd(m: torch.Tensor) -> torch.Tensor:
    """Vertical pass of the masking blur (M, 4, h, w), float32 (needs h > 6)."""
    m, sn, sc = plane_view(m)
    n, c, h, w = m.shape
    if c != 4 or h <= _TAPS // 2:
        raise ValueError(f"cvvdp_video_masker_vblur: input (M, 4, h > 6, w); got {tuple(m.shape)}")
    launch, tail = _vblur_launcher(n, h, w, sn, sc)
    out = torch.empty((n, 4, h, w), dtype=torch.float32, device=m.device)
    launch(m, out, *tail)
    return out


@cached(maxsize=128)
def _pool_launcher(n: int, h: int, w: int, vsn: int, vsc: int, blur: bool, with_map: bool
                   ) -> tuple[Launcher, tuple, int]:
    block = max(32, min(_POOL_BLOCK, triton.next_power_of_2(w)))
    ow = w + 1 if with_map else 1
    launch = Launcher(_video_band_pool_kernel, (h, n), num_warps=max(1, min(8, block // 128)))
    return launch, (h, w, vsn, vsc, h * w, ow, *_pool_constants(), 1e-5, blur, with_map, _taps(), _TAPS, block), ow


@cvvdp_video_band_pool.triton_launcher
def cvvdp_video_band_pool_fwd(vblurred: torch.Tensor, band: torch.Tensor, blur: bool, with_map: bool
                              ) -> torch.Tensor:
    """D and/or its per-row pooled sums of one band of M frames (see the module docstring), float32."""
    band = band.float().contiguous()
    n, c8, h, w = band.shape
    vblurred, vsn, vsc = plane_view(vblurred)
    if c8 != 8 or vblurred.shape != (n, 4, h, w):
        raise ValueError(f"cvvdp_video_band_pool: band (M, 8, h, w) and vblurred (M, 4, h, w); got "
                         f"{tuple(band.shape)} and {tuple(vblurred.shape)}")
    if blur and w <= _TAPS // 2:
        raise ValueError(f"cvvdp_video_band_pool: the masking blur needs w > {_TAPS // 2}; got {w}")
    launch, tail, ow = _pool_launcher(n, h, w, vsn, vsc, bool(blur), bool(with_map))
    out = torch.empty((n, 4, h, ow), dtype=torch.float32, device=band.device)
    launch(vblurred, band, _cross_weights(band.device), out, *tail)
    return out
