"""zensim's float32 arithmetic, replayed: the same features as :mod:`fusedsim.families.zensim.twin`, computed the
way upstream's streaming kernels compute them (imazen/zensim ``blur.rs`` / ``fused.rs`` / ``streaming.rs`` at 65facf4).

Why: zensim's SSIM error in flat regions is ``1 - (C2 + e1)/(C2 + e2)`` where e1, e2 are the float32 rounding
residues of its running-sum box blurs; clamped at 0, that noise adds a positive bias that moves scores of flat
images (e.g. upstream's color-blocks test pairs) by ~1e-2. Replaying the arithmetic reproduces it:

- H blur: per row, a float32 running sum (``sum = sum + add - rem``; the s²+d² and s·d sums with fused
  multiply-adds in upstream's order), output ``sum * f32(1/11)``.
- V blur + features: per horizontal strip of 32 rows (+5 rows of overlap each side, clipped to the image), a fresh
  float32 running sum down the strip, mirror-reflected at the strip's ends; features in float32 (FMAs as upstream),
  pooled sums in float64.
- 2x2 downscale ``(((a + b) + c) + d) * 0.25`` in float32.
- XYB: the opsin FMA chain in float32 and a two-step Halley cube root from a bit-hack seed. Upstream 0.2.7 uses
  magetypes' ``cbrt_midp`` (same scheme, an undisclosed seed constant); this replay uses zensim's own earlier
  seed (musl's B1). Scores of flat synthetic images move by up to ~1e-2 with the seed alone; upstream's golden
  scores are matched within 5.0e-3.

A fused multiply-add is evaluated in float64 and rounded once (exact but for rare double-rounding ties).
Not differentiable (use the float64 twin for gradients). Tensors: planes ``(N, 3, H, W)`` float32, already padded
(:func:`fusedsim.families.zensim.twin.pad_for_pyramid_ref`).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from fusedsim.families.zensim.twin import (
    OPSIN,
    OPSIN_BIAS,
    BLUR_RADIUS,
    C2,
    pad_for_pyramid_ref,
    pyramid_levels_ref,
)

__all__ = ["SCALE_SUMS", "STRIP_INNER", "cbrt_f32_ref", "downscale_f32_ref", "linear_to_positive_xyb_f32_ref",
           "pyramid_f32_ref", "zensim_downscale_ref", "zensim_features_f32_ref", "zensim_features_from_sums_ref",
           "zensim_scale_sums_ref", "zensim_xyb_ref"]

STRIP_INNER = 32
SCALE_SUMS = 3 * 4 + 5 + 3  # per plane: 17 float64 sums, then the 3 maxima (see zensim_scale_sums_ref)
_F32 = torch.float32


def _fma(a: torch.Tensor, b: torch.Tensor | float, c: torch.Tensor | float) -> torch.Tensor:
    a64 = a.double()
    b64 = b.double() if isinstance(b, torch.Tensor) else b
    c64 = c.double() if isinstance(c, torch.Tensor) else c
    return (a64 * b64 + c64).to(_F32)


def _mirror(i: int, n: int) -> int:
    """Upstream's running-sum index folding (reflect without edge repeat, clamped)."""
    if i < 0:
        i = -i
    if i >= n:
        i = abs(2 * (n - 1) - i)
    return min(i, n - 1)


def cbrt_f32_ref(x: torch.Tensor) -> torch.Tensor:
    """float32 cube root of x >= 0 by upstream's scheme: bit-hack seed ``bits/3 + 709958130`` (musl's B1, zensim's
    ``cbrtf_fast`` before 0.2.7) and two float32 Halley steps ``t *= (2x + t³)/(2t³ + x)`` with FMAs."""
    bits = x.contiguous().view(torch.int32).to(torch.int64) & 0x7FFFFFFF
    t = ((bits // 3) + 709_958_130).to(torch.int32).view(_F32)
    for _ in range(2):
        r = t * t * t
        t = t * (_fma(x, 2.0, r) / _fma(r, 2.0, x))
    return torch.where(x == 0, torch.zeros_like(t), t)


def linear_to_positive_xyb_f32_ref(rgb: torch.Tensor) -> torch.Tensor:
    """Linear RGB (N, 3, H, W) -> positive XYB in upstream's float32 order (FMA chain ``m0·r + (m1·g + (m2·b +
    bias))``, cube roots by :func:`cbrt_f32_ref`)."""
    r, g, b = rgb.to(_F32).unbind(1)
    mixed = [_fma(torch.full_like(r, m0), r, _fma(torch.full_like(g, m1), g, _fma(torch.full_like(b, m2), b,
             OPSIN_BIAS))).clamp_min(0.0) for m0, m1, m2 in OPSIN]
    t0, t1, t2 = (cbrt_f32_ref(m) for m in mixed)
    ab = -cbrt_f32_ref(torch.tensor([OPSIN_BIAS], dtype=_F32, device=rgb.device))
    c0, c1 = t0 + ab, t1 + ab
    x, y = 0.5 * (c0 - c1), 0.5 * (c0 + c1)
    return torch.stack((_fma(x, 14.0, 0.42), y + torch.tensor(0.01, dtype=_F32),
                        (t2 - y) + torch.tensor(0.55, dtype=_F32)), dim=1)


def zensim_xyb_ref(rgb: torch.Tensor, lut: torch.Tensor,
                   transform: Callable[[torch.Tensor], torch.Tensor] | None = None) -> torch.Tensor:
    """Linear RGB (N, 3, H, W) -> padded positive XYB (N, 3, H', W') float32: :func:`linear_to_positive_xyb_f32_ref`
    then :func:`fusedsim.families.zensim.twin.pad_for_pyramid_ref` (mirror padding commutes with a per-pixel map).
    uint8 ``rgb`` holds sRGB codes, mapped to linear light through ``lut`` ((256,) float32); ``lut`` is ignored for
    floating ``rgb``. The twin of the ``zensim_xyb`` op (``fusedsim/ops/zensim_xyb.py``). ``transform``: a compiled
    implementation of :func:`linear_to_positive_xyb_f32_ref` (the same bits), or None for it."""
    if rgb.dtype == torch.uint8:
        rgb = lut.to(_F32)[rgb.long()]
    return pad_for_pyramid_ref((transform or linear_to_positive_xyb_f32_ref)(rgb))


def zensim_downscale_ref(x: torch.Tensor) -> torch.Tensor:
    """One pyramid step of float32 planes (N, C, h, w) -> (N, C, h//2, w//2): :func:`downscale_f32_ref`, contiguous.
    The twin of the ``zensim_downscale`` op (``fusedsim/ops/zensim_xyb.py``)."""
    return downscale_f32_ref(x.to(_F32)).contiguous()


def downscale_f32_ref(x: torch.Tensor) -> torch.Tensor:
    h, w = x.shape[-2] // 2, x.shape[-1] // 2
    x = x[..., :2 * h, :2 * w]
    a, b = x[..., 0::2, 0::2], x[..., 0::2, 1::2]
    c, d = x[..., 1::2, 0::2], x[..., 1::2, 1::2]
    return (((a + b) + c) + d) * 0.25


def pyramid_f32_ref(xyb: torch.Tensor) -> list[torch.Tensor]:
    return pyramid_levels_ref(xyb.to(_F32), downscale_f32_ref)


def _h_blur(s: torch.Tensor, d: torch.Tensor, r: int) -> tuple[torch.Tensor, ...]:
    """fused_blur_h_ssim: four H-blurred planes (mu1, mu2, s²+d², s·d), columns last."""
    w = s.shape[-1]
    inv = torch.tensor(1.0 / (2 * r + 1), dtype=_F32)
    zero = torch.zeros_like(s[..., 0])
    sum_s, sum_d, sum_sq, sum_p = zero, zero, zero, zero
    for i in range(2 * r + 1):
        k = _mirror(i - r, w) if i > r else min(r - i, w - 1)
        sv, dv = s[..., k], d[..., k]
        sum_s, sum_d = sum_s + sv, sum_d + dv
        sum_sq = _fma(sv, sv, _fma(dv, dv, sum_sq))
        sum_p = _fma(sv, dv, sum_p)
    outs = ([], [], [], [])
    for x in range(w):
        for o, v in zip(outs, (sum_s, sum_d, sum_sq, sum_p)):
            o.append(v * inv)
        a, m = _mirror(x + r + 1, w), _mirror(x - r, w)
        sa, da, sr, dr = s[..., a], d[..., a], s[..., m], d[..., m]
        sum_s = (sum_s + sa) - sr
        sum_d = (sum_d + da) - dr
        sum_sq = _fma(sa, sa, _fma(da, da, _fma(-sr, sr, _fma(-dr, dr, sum_sq))))
        sum_p = _fma(sa, da, _fma(-sr, dr, sum_p))
    return tuple(torch.stack(o, dim=-1) for o in outs)


def _pixel_features(mu1, mu2, ssq, s12, s, d) -> list[torch.Tensor]:
    """float32 per-pixel values of one row: ssim_err, art, det, (s-mu1)², (d-mu2)², |s-mu1|, |d-mu2|, (s-d)²."""
    one = torch.ones_like(mu1)
    mu_diff = mu1 - mu2
    num_m = _fma(mu_diff, -mu_diff, one)
    num_s = _fma(torch.full_like(mu1, 2.0), _fma(-mu1, mu2, s12), C2)
    denom_s = _fma(-mu2, mu2, _fma(-mu1, mu1, ssq)) + torch.tensor(C2, dtype=_F32)
    sd = (one - (num_m * num_s) / denom_s).clamp_min(0.0)
    diff1, diff2 = (s - mu1).abs(), (d - mu2).abs()
    ed = (one + diff2) / (one + diff1) - one
    vs, vd, pd = s - mu1, d - mu2, s - d
    return [sd, ed.clamp_min(0.0), (-ed).clamp_min(0.0), vs * vs, vd * vd, diff1, diff2, pd * pd]


def _scale_sums(s: torch.Tensor, d: torch.Tensor, r: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Per (N, 3): float64 sums [d, d², d⁴, d⁸] of ssim/art/det, the HF and MSE sums, and float32 maxima."""
    h = s.shape[-2]
    planes = _h_blur(s, d, r)
    inv = torch.tensor(1.0 / (2 * r + 1), dtype=_F32)
    sums = [torch.zeros(s.shape[:-2], dtype=torch.float64, device=s.device) for _ in range(3 * 4 + 5)]
    maxes = [torch.zeros(s.shape[:-2], dtype=_F32, device=s.device) for _ in range(3)]
    for y0 in range(0, h, STRIP_INNER):
        y1 = min(y0 + STRIP_INNER, h)
        top, bot = max(y0 - r, 0), min(y1 + r, h)
        strip = [p[..., top:bot, :] for p in planes]
        sh = bot - top
        run = [sum_rows for sum_rows in (torch.zeros_like(strip[0][..., 0, :]),) * 4]
        for i in range(2 * r + 1):
            k = min(r - i, sh - 1) if i <= r else min(i - r, sh - 1)
            run = [acc + p[..., k, :] for acc, p in zip(run, strip)]
        for y in range(sh):
            if top + y >= y0 and top + y < y1:
                mu1, mu2, ssq, s12 = (v * inv for v in run)
                vals = _pixel_features(mu1, mu2, ssq, s12, s[..., top + y, :], d[..., top + y, :])
                for j, v in enumerate(vals[:3]):
                    v2 = v * v
                    v4 = v2 * v2
                    for q, pw in enumerate((v, v2, v4, v4 * v4)):
                        sums[4 * j + q] += pw.double().sum(-1)
                    maxes[j] = torch.maximum(maxes[j], v.amax(-1))
                for j, v in enumerate(vals[3:]):
                    sums[12 + j] += v.double().sum(-1)
            a, m = _mirror(y + r + 1, sh), _mirror(y - r, sh)
            run = [(acc + p[..., a, :]) - p[..., m, :] for acc, p in zip(run, strip)]
    return sums, maxes


def zensim_scale_sums_ref(src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    """One scale's pooled sums, packed: (N, C, 20) float64 from float32 planes src (N or 1, C, h, w) and dst
    (N, C, h, w). Per plane: [0:12] the sums of v, v², v⁴, v⁸ (float32 powers) of ssim, art, det (4 per map),
    [12:17] the sums of (s-mu1)², (d-mu2)², |s-mu1|, |d-mu2|, (s-d)², [17:20] the maxima of ssim, art, det (float32
    values, as float64). The twin of the ``zensim_scale_sums`` op (``fusedsim/ops/zensim.py``)."""
    s, d = torch.broadcast_tensors(src, dst)
    sums, maxes = _scale_sums(s, d, BLUR_RADIUS)
    return torch.stack(sums + [m.double() for m in maxes], dim=-1)


def zensim_features_from_sums_ref(scale_sums: list[torch.Tensor], pixels: list[int]) -> torch.Tensor:
    """The 228 features (N, 228) float64 from each scale's packed sums (:func:`zensim_scale_sums_ref`, (N, 3, 20))
    and its pixel count h·w, all scales at once (a few dozen launches on a GPU, not ~40 per scale)."""
    packed = torch.stack(scale_sums)  # (S, N, 3, 20)
    # sums / h·w per scale, as the twin (a Python int divisor: no host-to-device copy, which would synchronise)
    means = torch.stack([s[..., :17] / n for s, n in zip(scale_sums, pixels)])
    m = means[..., :12].unflatten(-1, (3, 4))  # (S, N, 3, map, power)
    maxes = packed[..., 17:20]
    m1, m4, m2, m8 = m[..., 0], m[..., 2].pow(0.25), m[..., 1].sqrt(), m[..., 3].pow(0.125)
    hs, hd, as_, ad, mse = means[..., 12:17].unbind(-1)
    valid = hs > 1e-10
    ratio = hd / torch.where(valid, hs, torch.ones_like(hs))
    zero = torch.zeros_like(ratio)
    e_loss = torch.where(valid, (1.0 - ratio).clamp_min(0.0), zero)
    e_gain = torch.where(valid, (ratio - 1.0).clamp_min(0.0), zero)
    valid_a = as_ > 1e-10
    m_ratio = ad / torch.where(valid_a, as_, torch.ones_like(as_))
    m_loss = torch.where(valid_a, (1.0 - m_ratio).clamp_min(0.0), zero)
    # per (scale, plane): mean, 4th-root, sqrt of ssim, art, det (interleaved), then mse, e_loss, m_loss, e_gain
    pools = torch.stack((m1, m4, m2), -1).flatten(-2)  # (S, N, 3, 9): [sm, s4, s2, am, a4, a2, dm, d4, d2]
    basics = torch.cat((pools, torch.stack((mse, e_loss, m_loss, e_gain), -1)), -1)  # (S, N, 3, 13)
    peaks = torch.cat((maxes, m8), -1)  # (S, N, 3, 6): [smax, amax, dmax, s8, a8, d8]
    count = packed.shape[1]
    return torch.cat((basics.permute(1, 0, 2, 3).reshape(count, -1), peaks.permute(1, 0, 2, 3).reshape(count, -1)),
                     dim=1)


def zensim_features_f32_ref(ref_levels: list[torch.Tensor], dist_levels: list[torch.Tensor]) -> torch.Tensor:
    """The 228 features (N, 228) float64 from float32 pyramids (:func:`pyramid_f32_ref`) of padded positive XYB."""
    return zensim_features_from_sums_ref([zensim_scale_sums_ref(s, d) for s, d in zip(ref_levels, dist_levels)],
                                         [s.shape[-2] * s.shape[-1] for s in ref_levels])
