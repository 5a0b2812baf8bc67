"""PyTorch twin of SSIMULACRA 2.1 (cloudinary/ssimulacra2, the C++ reference): the specification, the CPU path
and the test oracle.

    ssimulacra2_ref(ref, dist) -> (N,) float64 scores (100 = identical, lower = worse)

ref, dist: sRGB (N, 3, H, W), uint8 (loaded as float32(1/255)·v like the reference) or floating in [0, 1].
float32 (and uint8) inputs reproduce the reference's float32 arithmetic step by step (FMA where its SIMD code
fuses, its 4-wide blur unroll: see ``recursive_gaussian_ref``), which matters: on near-lossless pairs the
float32 rounding of the variances is a visible part of the score. float64 inputs run the same algorithm in
exact float64 arithmetic (smooth: used for gradient checks).

Per scale (up to 6; the next is a 2x2 box average of the **linear** RGB image, ``ceil(n/2)`` with the last
row/column repeated), for each XYB channel (``xyb_ref``), with the 1.5-sigma recursive Gaussian ``G``::

    mu1 = G(x1), mu2 = G(x2), s11 = G(x1²), s22 = G(x2²), s12 = G(x1·x2)          (float32)
    ssim  = max(0, 1 - (1 - (mu1-mu2)²)·(2(s12 - mu1·mu2) + C2) / ((s11 - mu1²) + (s22 - mu2²) + C2))
    e     = (1 + |x2 - mu2|) / (1 + |x1 - mu1|) - 1;  ringing = max(e, 0), blur = max(-e, 0)   (float64)

each map pooled as mean (L1) and (mean d⁴)^(1/4) (L4). The 18·S sub-scores, ordered channel, scale, norm,
(ssim, ringing, blur), meet the first 18·S of the 108 weights (the reference's running index: with fewer than 6
scales the weights shift, they are not skipped), and the weighted sum goes through the final polynomial.

Scale quirk: the reference checks ``min(h, w) < 8`` on the previous scale before downsampling, so scale s runs
iff the size of scale s-1 is at least 8 (its last scale can be 4-7 px): 6 scales need a short side >= 113.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch

from fusedsim.core.recursive_gaussian.twin import recursive_gaussian_ref
from fusedsim.core.state import cached
from fusedsim.core.xyb.twin import linear_to_xyb_ref, srgb_to_linear_ref, srgb_u8_to_linear_ref, uint8_to_unit_ref

__all__ = ["C2", "MAX_SCALES", "MIN_SIZE", "SIGMA", "Ssimulacra2State", "Ssimulacra2Steps", "TWIN_STEPS", "WEIGHTS",
           "downsample_linear_ref", "error_maps_ref", "error_pool_ref", "fourth_root_ref", "pool_maps_ref", "score_from_subscores_ref",
           "ssimulacra2_error_pool_ref", "ssimulacra2_linear_xyb_ref", "ssimulacra2_num_scales",
           "ssimulacra2_pair_pool_ref", "ssimulacra2_prepare_ref", "ssimulacra2_ref",
           "ssimulacra2_reference_blur_ref", "ssimulacra2_score_prepared_ref", "ssimulacra2_subscores_prepared_ref",
           "ssimulacra2_subscores_ref", "unit_input_ref", "xyb_pyramid_ref"]

MAX_SCALES = 6
MIN_SIZE = 8  # the first scale needs 8x8 (smaller images have no scale at all)
SIGMA = 1.5
C2 = 0.0008999999845400453  # float32(0.0009)

# The 108 weights of SSIMULACRA 2.1, ordered channel (X, Y, B), scale (1:1 .. 1:32), norm (L1, L4),
# map (ssim, ringing, blur). Data from cloudinary/ssimulacra2 src/ssimulacra2.cc (BSD-3-Clause).
WEIGHTS = (
    0.0, 0.0007376606707406586, 0.0, 0.0, 0.0007793481682867309, 0.0,
    0.0, 0.0004371155730107379, 0.0, 1.1041726426657346, 0.00066284834129271, 0.00015231632783718752,
    0.0, 0.0016406437456599754, 0.0, 1.8422455520539298, 11.441172603757666, 0.0,
    0.0007989109436015163, 0.000176816438078653, 0.0, 1.8787594979546387, 10.94906990605142, 0.0,
    0.0007289346991508072, 0.9677937080626833, 0.0, 0.00014003424285435884, 0.9981766977854967, 0.00031949755934435053,
    0.0004550992113792063, 0.0, 0.0, 0.0013648766163243398, 0.0, 0.0,
    0.0, 0.0, 0.0, 7.466890328078848, 0.0, 17.445833984131262,
    0.0006235601634041466, 0.0, 0.0, 6.683678146179332, 0.00037724407979611296, 1.027889937768264,
    225.20515300849274, 0.0, 0.0, 19.213238186143016, 0.0011401524586618361, 0.001237755635509985,
    176.39317598450694, 0.0, 0.0, 24.43300999870476, 0.28520802612117757, 0.0004485436923833408,
    0.0, 0.0, 0.0, 34.77906344483772, 44.835625328877896, 0.0,
    0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
    0.0, 0.0008680556573291698, 0.0, 0.0, 0.0, 0.0,
    0.0, 0.0005313191874358747, 0.0, 0.00016533814161379112, 0.0, 0.0,
    0.0, 0.0, 0.0, 0.0004179171803251336, 0.0017290828234722833, 0.0,
    0.0020827005846636437, 0.0, 0.0, 8.826982764996862, 23.19243343998926, 0.0,
    95.1080498811086, 0.9863978034400682, 0.9834382792465353, 0.0012286405048278493, 171.2667255897307,
    0.9807858872435379,
    0.0, 0.0, 0.0, 0.0005130064588990679, 0.0, 0.00010854057858411537,
)


class Ssimulacra2State(NamedTuple):
    """The reference side, prepared once: per scale the XYB image and its blurred x1 and x1² (N, 3, h, w)."""

    xyb: tuple[torch.Tensor, ...]
    mu: tuple[torch.Tensor, ...]
    sigma_sq: tuple[torch.Tensor, ...]
    shape: tuple[int, ...]
    dtype: torch.dtype


def ssimulacra2_num_scales(height: int, width: int) -> int:
    """Scales the reference processes for an H x W image (0 when it is smaller than 8 px)."""
    scales, side = 0, min(height, width)
    while scales < MAX_SCALES and side >= MIN_SIZE:
        scales += 1
        if scales > 1:
            side = (side + 1) // 2
    return scales


def unit_input_ref(image: torch.Tensor) -> torch.Tensor:
    """uint8 -> float32 the way the reference loads 8-bit samples; floating inputs are returned as they are."""
    return uint8_to_unit_ref(image) if image.dtype == torch.uint8 else image


def downsample_linear_ref(lin: torch.Tensor) -> torch.Tensor:
    """2x2 box average (N, C, H, W) -> (N, C, ceil(H/2), ceil(W/2)); an odd last row/column is repeated. Sums in
    the reference's order ((a + b) + c) + d, then times 0.25."""
    height, width = lin.shape[-2:]
    if height % 2 or width % 2:
        lin = torch.nn.functional.pad(lin, (0, width % 2, 0, height % 2), mode="replicate")
    a, b = lin[..., 0::2, 0::2], lin[..., 0::2, 1::2]
    c, d = lin[..., 1::2, 0::2], lin[..., 1::2, 1::2]
    return (((a + b) + c) + d) * 0.25


def fourth_root_ref(mean4: torch.Tensor) -> torch.Tensor:
    """sqrt(sqrt(m)) with a zero (not NaN) gradient at m = 0."""
    positive = mean4 > 0
    return torch.where(positive, mean4.where(positive, torch.ones_like(mean4)).sqrt().sqrt(), 0.0)


def error_maps_ref(x1: torch.Tensor, x2: torch.Tensor, mu1: torch.Tensor, mu2: torch.Tensor, s11: torch.Tensor,
                   s22: torch.Tensor, s12: torch.Tensor) -> torch.Tensor:
    """SSIM and edge-difference maps of one scale: inputs (N, 3, h, w) (x1, mu1, s11 may have batch 1) in the
    compute dtype (float32: the reference's float32 steps); returns float64 (N, 3, 3, h, w): [channel, (ssim,
    ringing, blur)]."""
    mu11, mu22, mu12 = mu1 * mu1, mu2 * mu2, mu1 * mu2
    diff = mu1 - mu2
    num_m = 1.0 - diff * diff
    num_s = 2.0 * (s12 - mu12) + C2
    denom_s = ((s11 - mu11) + (s22 - mu22)) + C2
    ssim = (1.0 - (num_m * num_s / denom_s).double()).clamp_min(0.0)
    edge = (1.0 + (x2 - mu2).abs().double()) / (1.0 + (x1 - mu1).abs().double()) - 1.0
    return torch.stack((ssim, edge.clamp_min(0.0), (-edge).clamp_min(0.0)), dim=2)


def pool_maps_ref(maps: torch.Tensor) -> torch.Tensor:
    """L1 and L4 norms of each (h, w) map of ``maps`` (N, 3, 3, h, w) float64 -> (N, 3, 2, 3)."""
    l1 = maps.flatten(3).mean(3)
    l4 = fourth_root_ref((maps * maps).square().flatten(3).mean(3))
    return torch.stack((l1, l4), dim=2)


def error_pool_ref(x1: torch.Tensor, x2: torch.Tensor, mu1: torch.Tensor, mu2: torch.Tensor, s11: torch.Tensor,
                   s22: torch.Tensor, s12: torch.Tensor, maps: Callable[..., torch.Tensor] | None = None
                   ) -> torch.Tensor:
    """SSIM and edge-difference maps of one scale (:func:`error_maps_ref`, or ``maps`` of the same signature and
    bits), pooled: float64 (N, 3, 2, 3): [channel, (L1, L4), (ssim, ringing, blur)]."""
    return pool_maps_ref((maps or error_maps_ref)(x1, x2, mu1, mu2, s11, s22, s12))


def ssimulacra2_linear_xyb_ref(x: torch.Tensor, scale: int,
                               to_xyb: Callable[[torch.Tensor], torch.Tensor] = linear_to_xyb_ref,
                               u8_to_linear: Callable[[torch.Tensor], torch.Tensor] = srgb_u8_to_linear_ref
                               ) -> torch.Tensor:
    """Scale ``scale``'s colour step; returns (XYB,) stacked as (1, N, 3, h, w) for scale 0, else (linear RGB, XYB)
    as (2, N, 3, h, w) (the linear image is what the next scale averages).

    Scale 0: x is the sRGB image (N, 3, H, W) (uint8 or floating in [0, 1]), linearised (h, w = H, W).
    Scale 1: x is the same sRGB image, linearised and 2x2-averaged (h, w = ceil(H/2), ceil(W/2)).
    Scale >= 2: x is the previous scale's linear RGB, 2x2-averaged.
    Scale 0's linear image is never kept: scale 1 linearises the sRGB image again (cheaper than storing it).
    ``to_xyb``, ``u8_to_linear``: the transform and uint8 linearisation (the twins, or compiled CPU
    implementations of the same bits).
    """
    if scale < 0:
        raise ValueError(f"scale must be >= 0; got {scale}")
    if scale <= 1:
        lin = u8_to_linear(x) if x.dtype == torch.uint8 else srgb_to_linear_ref(x)
    else:
        lin = x
    if scale == 0:
        return to_xyb(lin)[None]
    lin = downsample_linear_ref(lin)
    return torch.stack((lin, to_xyb(lin)))


def xyb_pyramid_ref(image: torch.Tensor, scales: int, linear_xyb: Callable[[torch.Tensor, int], torch.Tensor]):
    """The XYB image of each of ``scales`` scales of an sRGB image, one at a time (a generator), through
    ``linear_xyb`` (:func:`ssimulacra2_linear_xyb_ref` or its op)."""
    lin = image
    for scale in range(scales):
        out = linear_xyb(image if scale <= 1 else lin, scale)
        lin = out[0]
        yield out[-1]


Blur = Callable[[torch.Tensor, float], torch.Tensor]


def ssimulacra2_reference_blur_ref(x1: torch.Tensor, blur: Blur = recursive_gaussian_ref) -> torch.Tensor:
    """The reference-side blurs of one scale: G(x1) and G(x1²) stacked as (2, N, 3, h, w). ``blur``: the recursive
    Gaussian (the twin, or a compiled CPU implementation of the same bits)."""
    return blur(torch.stack((x1, x1 * x1)), SIGMA)


def ssimulacra2_error_pool_ref(x1: torch.Tensor, x2: torch.Tensor, mu1: torch.Tensor, s11: torch.Tensor,
                               blur: Blur = recursive_gaussian_ref,
                               maps: Callable[..., torch.Tensor] | None = None) -> torch.Tensor:
    """The distorted side of one scale and the comparison: blurs G(x2), G(x2²), G(x1·x2), then
    :func:`error_pool_ref`. x1, mu1, s11: (1 or N, 3, h, w) (one reference may serve N distorted images);
    x2: (N, 3, h, w). Returns float64 (N, 3, 2, 3)."""
    mu2, s22, s12 = blur(torch.stack(torch.broadcast_tensors(x2, x2 * x2, x1 * x2)), SIGMA)
    return error_pool_ref(x1, x2, mu1, mu2, s11, s22, s12, maps)


def ssimulacra2_pair_pool_ref(x1: torch.Tensor, x2: torch.Tensor, blur: Blur = recursive_gaussian_ref,
                              maps: Callable[..., torch.Tensor] | None = None) -> torch.Tensor:
    """One scale of a one-shot pair (N, 3, h, w) each: :func:`ssimulacra2_error_pool_ref` with the reference-side
    blurs of x1 made on the spot. Returns float64 (N, 3, 2, 3)."""
    mu1, s11 = ssimulacra2_reference_blur_ref(x1, blur)
    return ssimulacra2_error_pool_ref(x1, x2, mu1, s11, blur, maps)


class Ssimulacra2Steps(NamedTuple):
    """The per-scale steps, so that the metric can run them as registered ops (Triton on GPUs) while this
    module keeps the one definition of the loops around them. Defaults: the twins below. ``pair_pool`` is the
    one-shot comparison (reference blurs included), equal to ``error_pool(x1, x2, *reference_blur(x1))``."""

    linear_xyb: Callable[[torch.Tensor, int], torch.Tensor]
    reference_blur: Callable[[torch.Tensor], torch.Tensor]
    error_pool: Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
    pair_pool: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    #: the scales' pooled results, ready to read (steps that run scales on side streams join them here)
    gather: Callable[[list[torch.Tensor]], list[torch.Tensor]] = list


def ssimulacra2_prepare_ref(ref: torch.Tensor, steps: Ssimulacra2Steps | None = None) -> Ssimulacra2State:
    """The reference-side work (pyramid, XYB, blurred x1 and x1²) for :func:`ssimulacra2_score_prepared_ref`.
    ref: (N, 3, H, W) uint8 or floating sRGB."""
    steps = steps or TWIN_STEPS
    if ref.dim() != 4 or ref.shape[1] != 3:
        raise ValueError(f"ref must be (N, 3, H, W); got {tuple(ref.shape)}")
    scales = ssimulacra2_num_scales(*ref.shape[-2:])
    xyb, mu, sigma_sq = [], [], []
    for x1 in xyb_pyramid_ref(ref, scales, steps.linear_xyb):
        blurred = steps.reference_blur(x1)
        xyb.append(x1)
        mu.append(blurred[0])
        sigma_sq.append(blurred[1])
    dtype = torch.float32 if ref.dtype == torch.uint8 else ref.dtype
    return Ssimulacra2State(tuple(xyb), tuple(mu), tuple(sigma_sq), tuple(ref.shape), dtype)


TWIN_STEPS = Ssimulacra2Steps(ssimulacra2_linear_xyb_ref, ssimulacra2_reference_blur_ref, ssimulacra2_error_pool_ref,
                              ssimulacra2_pair_pool_ref)


def _check_dist(state: Ssimulacra2State, dist: torch.Tensor) -> None:
    ok = dist.dim() == 4 and tuple(dist.shape[1:]) == state.shape[1:] and state.shape[0] in (1, dist.shape[0])
    if not ok:
        raise ValueError(f"dist must be (N, 3, H, W) matching the reference {state.shape} (N may differ when the "
                         f"reference holds one image); got {tuple(dist.shape)}")


def ssimulacra2_subscores_prepared_ref(state: Ssimulacra2State, dist: torch.Tensor,
                                       steps: Ssimulacra2Steps | None = None) -> torch.Tensor:
    """The 18·S raw sub-scores (N, 18·S) float64 in the reference's order (channel, scale, norm, map).
    dist: (N, 3, H, W) uint8 or floating sRGB; the prepared reference holds N images or one."""
    steps = steps or TWIN_STEPS
    _check_dist(state, dist)
    if dist.dtype != torch.uint8 or state.dtype != torch.float32:
        dist = unit_input_ref(dist).to(state.dtype)
    per_scale = []
    for scale, x2 in enumerate(xyb_pyramid_ref(dist, len(state.xyb), steps.linear_xyb)):
        per_scale.append(steps.error_pool(state.xyb[scale], x2, state.mu[scale], state.sigma_sq[scale]))
    if not per_scale:
        return torch.zeros(dist.shape[0], 0, dtype=torch.float64, device=dist.device)
    return torch.stack(steps.gather(per_scale), dim=2).flatten(1)  # (N, 3, S, 2, 3) -> channel-major


@cached(maxsize=32)
def _weights(count: int, device: torch.device) -> torch.Tensor:
    """The first ``count`` weights on ``device``, made once (a host-to-device copy per call would synchronise)."""
    return torch.tensor(WEIGHTS[:count], dtype=torch.float64, device=device)


def score_from_subscores_ref(subscores: torch.Tensor) -> torch.Tensor:
    """Final score (N,) from the (N, 18·S) sub-scores: the first 18·S weights, then the polynomial."""
    weights = _weights(subscores.shape[1], subscores.device)
    s = (subscores.double().abs() * weights).sum(1) * 0.9562382616834844
    s = 2.326765642916932 * s - 0.020884521182843837 * s * s + 6.248496625763138e-05 * s * s * s
    positive = s > 0
    safe = s.where(positive, torch.ones_like(s))
    return torch.where(positive, 100.0 - 10.0 * safe.pow(0.6276336467831387), 100.0)


def ssimulacra2_score_prepared_ref(state: Ssimulacra2State, dist: torch.Tensor) -> torch.Tensor:
    """Scores (N,) of ``dist`` against a prepared reference."""
    return score_from_subscores_ref(ssimulacra2_subscores_prepared_ref(state, dist))


def ssimulacra2_subscores_ref(ref: torch.Tensor, dist: torch.Tensor,
                              steps: Ssimulacra2Steps | None = None) -> torch.Tensor:
    """The raw sub-scores (N, 18·S) of a pair, scale by scale with ``steps.pair_pool`` (nothing of the reference
    is kept): the numbers of :func:`ssimulacra2_subscores_prepared_ref` after :func:`ssimulacra2_prepare_ref`."""
    steps = steps or TWIN_STEPS
    if ref.dim() != 4 or ref.shape[1] != 3 or ref.shape != dist.shape:
        raise ValueError(f"ref and dist must both be (N, 3, H, W); got {tuple(ref.shape)} and {tuple(dist.shape)}")
    dtype = torch.float32 if ref.dtype == torch.uint8 else ref.dtype  # as the prepared reference's state
    if dist.dtype != torch.uint8 or dtype != torch.float32:
        dist = unit_input_ref(dist).to(dtype)
    scales = ssimulacra2_num_scales(*ref.shape[-2:])
    per_scale = [steps.pair_pool(x1, x2) for x1, x2 in zip(xyb_pyramid_ref(ref, scales, steps.linear_xyb),
                                                           xyb_pyramid_ref(dist, scales, steps.linear_xyb))]
    if not per_scale:
        return torch.zeros(dist.shape[0], 0, dtype=torch.float64, device=dist.device)
    return torch.stack(steps.gather(per_scale), dim=2).flatten(1)  # (N, 3, S, 2, 3) -> channel-major


def ssimulacra2_ref(ref: torch.Tensor, dist: torch.Tensor) -> torch.Tensor:
    """SSIMULACRA 2.1 scores (N,) float64 of sRGB pairs (N, 3, H, W); see the module docstring."""
    return score_from_subscores_ref(ssimulacra2_subscores_ref(ref, dist))
