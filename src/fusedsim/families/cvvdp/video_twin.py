"""PyTorch twin of ColorVideoVDP on video (pycvvdp 0.5.7): the specification of the temporal path.

A clip of T > 1 frames at ``fps`` frames per second goes through these steps (a single frame is a still image:
:mod:`.twin`):

1. Display model per frame: sRGB -> DKL d65 of the emitted light (:func:`.twin.cvvdp_linear_dkl_ref`).
2. Temporal channels: four causal FIR filters of odd length ``L = 2 ceil(fps / 8) + 1`` (250 ms) over the frames
   of each image; frame t of channel c is ``sum_j F_c[j] X_src(c)[t - j]`` with frames before the first one
   replaced by the first (pycvvdp's ``replicate`` padding). Y-sustained, RG and YV filter their own DKL channel,
   Y-transient filters the Y channel again. The kernels are defined by their frequency responses on
   ``omega = linspace(0, fps/2, L//2 + 1)`` (float32): ``exp(-omega^beta_c / sigma_c)`` for the sustained channels,
   ``exp(-(omega^beta_3 - 5^beta_3)^2 / sigma_3)`` for the transient one, brought to time by an inverse real FFT
   of length L and centred (fftshift).
3. Per frame, the still-image band pipeline on four channels: the Weber-contrast pyramid of each image (its
   background from its own sustained Y channel), castleCSF sensitivity of the reference (the transient channel
   reads the 5 Hz table ``o5_c1``), mult-mutual masking with the 4 x 4 cross-channel weights and the gains
   (1, 1.45, 1, 1), per band and channel the normalised beta-norm over pixels: Q (frames, 4, bands).
4. Pooling: bands (baseband weighted) and then channels with 4-norms, with channel weights (1, ch_chrom_w,
   ch_chrom_w, ch_trans_w); then the frames with a normalised ``beta_t``-norm (no ``image_int``); JOD as for images.

The heat-map video is pycvvdp's "raw" heatmap of every frame (its four channels, no ``image_int``).
Memory is bounded in the clip length: only the last L - 1 display-model frames of each image are kept.
"""

from __future__ import annotations

import math

import torch

from fusedsim.core.state import cached
from fusedsim.families.cvvdp.data import CVVDPParams, cvvdp_params
import fusedsim.families.cvvdp.twin as spec
from fusedsim.families.cvvdp.twin import (
    TEMPORAL_LUTS,
    cvvdp_band_diff_ref,
    cvvdp_bands,
    cvvdp_contrast_pyramid_ref,
    cvvdp_heatmap_ref,
    cvvdp_met2jod_ref,
    cvvdp_sensitivity_ref,
)

__all__ = [
    "TEMPORAL_SOURCE",
    "cvvdp_frame_quality_ref",
    "cvvdp_temporal_filters",
    "cvvdp_temporal_length",
    "cvvdp_temporal_ref",
    "cvvdp_video_pair_band_ref",
    "cvvdp_video_pool_ref",
    "cvvdp_video_running_jod_ref",
]

#: DKL channel each temporal channel filters: Y-sustained, RG, YV, Y-transient.
TEMPORAL_SOURCE = (0, 1, 2, 0)
_TRANSIENT_OMEGA = 5.0  # Hz, the centre of the transient channel's band


def cvvdp_temporal_length(fps: float) -> int:
    """Taps of the temporal filters at ``fps``: the odd number covering 250 ms."""
    return int(math.ceil(0.250 * fps / 2) * 2) + 1


@cached(maxsize=32)
def _filters_cpu(fps: float) -> torch.Tensor:
    params = cvvdp_params()
    n = cvvdp_temporal_length(fps)
    n_omega = n // 2 + 1
    f32 = torch.float32
    omega = torch.linspace(0, fps / 2, n_omega, dtype=f32).view(1, n_omega)
    beta = torch.tensor(params.beta_tf, dtype=f32)
    sigma = torch.tensor(params.sigma_tf, dtype=f32)
    resp = torch.empty((4, n_omega), dtype=f32)
    resp[0:3] = torch.exp(-omega ** beta[0:3].view(3, 1) / sigma[0:3].view(3, 1))
    centre = torch.tensor(_TRANSIENT_OMEGA, dtype=f32) ** beta[3]
    resp[3] = torch.exp(-(omega[0] ** beta[3] - centre) ** 2 / sigma[3])
    return torch.stack([torch.fft.fftshift(torch.fft.irfft(resp[c], n=n, norm="backward")) for c in range(4)])


def cvvdp_temporal_filters(fps: float, like: torch.Tensor | None = None) -> torch.Tensor:
    """The four temporal kernels (4, L), float32, formed on the CPU (pycvvdp forms them on its device: the same
    up to the FFT's rounding), on ``like``'s device."""
    if isinstance(fps, bool) or not isinstance(fps, (int, float)) or not math.isfinite(fps) or fps <= 0:
        raise ValueError(f"cvvdp: fps must be a positive finite number of frames per second; got {fps!r}")
    f = _filters_cpu(float(fps))
    return f if like is None else f.to(like.device)


def cvvdp_temporal_ref(window: torch.Tensor, filters: torch.Tensor) -> torch.Tensor:
    """Temporal channels of the last ``S - L + 1`` frames of ``window`` (N, S, 3, H, W) (DKL frames, oldest first;
    the L - 1 frames before them are the filters' history) with ``filters`` (4, L): (N, S - L + 1, 4, H, W)."""
    n_taps = filters.shape[-1]
    frames = window.shape[1] - n_taps + 1
    if frames < 1:
        raise ValueError(f"cvvdp: a window of {window.shape[1]} frames is shorter than the {n_taps} filter taps")
    taps = filters.to(window.dtype).flip(-1)  # taps[k] weighs window frame b + k for output frame b
    out = []
    for b in range(frames):
        seg = window[:, b:b + n_taps]
        out.append(torch.stack([(seg[:, :, src] * taps[c].view(1, n_taps, 1, 1)).sum(dim=1)
                                for c, src in enumerate(TEMPORAL_SOURCE)], dim=1))
    return torch.stack(out, dim=1)


def cvvdp_frame_quality_ref(test: torch.Tensor, ref: torch.Tensor, ppd: float, return_map: bool = False,
                            band_diff=cvvdp_band_diff_ref):
    """Per-frame, per-channel, per-band pooled differences Q (M, 4, B) of M frames' temporal channels ``test``,
    ``ref`` (M, 4, H, W); with ``return_map`` also the frames' heatmaps (M, 1, H, W). ``band_diff`` is
    :func:`.twin.cvvdp_band_diff_ref` (the GPU path passes its own)."""
    params = cvvdp_params()
    freqs = cvvdp_bands(ref.shape[-2], ref.shape[-1], ppd)
    t_bands, _ = cvvdp_contrast_pyramid_ref(test, len(freqs))
    r_bands, log_bkg = cvvdp_contrast_pyramid_ref(ref, len(freqs))
    last = len(freqs) - 1
    pooled, diffs = [], []
    for b in range(len(freqs)):
        sens = cvvdp_sensitivity_ref(spec._BASEBAND_RHO if b == last else freqs[b], log_bkg[b], params, TEMPORAL_LUTS)
        d = band_diff(t_bands[b], r_bands[b], sens, b == last)
        pooled.append(spec._lp(d, params.beta, dim=(-2, -1), n=float(d.shape[-2] * d.shape[-1])))
        if return_map:
            diffs.append(d)
    q = torch.stack(pooled, dim=-1)
    return (q, cvvdp_heatmap_ref(diffs, params)) if return_map else q


def _frame_differences(q: torch.Tensor, params: CVVDPParams) -> torch.Tensor:
    """Pooled differences Q (N, T, 4, B) -> each frame's difference pooled over bands and channels (N, T)."""
    w = spec._t([1.0, params.ch_chrom_w, params.ch_chrom_w, params.ch_trans_w], q).view(4, 1).expand(4, q.shape[-1])
    w = w.clone()
    w[:, -1] = w[:, -1] * spec._t(params.baseband_weight[:4], q)
    q_sc = spec._lp(q * w, params.beta_sch, dim=-1)  # over bands: (N, T, 4)
    return spec._lp(q_sc, params.beta_tch, dim=-1)  # over channels: (N, T)


def cvvdp_video_pool_ref(q: torch.Tensor, params: CVVDPParams | None = None) -> torch.Tensor:
    """Pooled differences Q (N, T, 4, B) of a clip's frames -> JOD (N,)."""
    params = params or cvvdp_params()
    q_tc = _frame_differences(q, params)
    q_t = spec._lp(q_tc, params.beta_t, dim=-1, n=float(q.shape[1]))  # over frames, normalised
    return cvvdp_met2jod_ref(q_t, params)


def cvvdp_video_running_jod_ref(q: torch.Tensor, params: CVVDPParams | None = None) -> torch.Tensor:
    """JOD of every prefix of a clip from its pooled differences Q (N, T, 4, B): (N, T), element t the JOD of frames
    0..t, i.e. :func:`cvvdp_video_pool_ref` of ``q[:, :t + 1]`` up to float32 summation order (the temporal filters
    are causal, so a frame's differences do not depend on the frames after it)."""
    params = params or cvvdp_params()
    q_tc = _frame_differences(q, params)
    beta = spec._t(params.beta_t, q_tc)
    count = torch.arange(1, q.shape[1] + 1, dtype=q_tc.dtype, device=q_tc.device)
    means = spec.safe_pow(q_tc, beta).cumsum(dim=-1) / count
    return cvvdp_met2jod_ref(spec.safe_pow(means, 1 / beta), params)


# ---------------------------------------------------------------------- fused stages (the GPU path's op twins)
# The GPU path runs the frames' bands in fused kernels, as the still-image path does, on four channels; these are
# their twins: per band both sides' contrast, the reference's sensitivity, the masker input and |T' - R'|
# (``cvvdp_video_pair_band_ref``), then the masking blur's vertical pass (``.twin.cvvdp_masker_vblur_ref``) and its
# horizontal pass with the masked difference and per-row pooled sums (``.twin.cvvdp_band_pool_ref``).
def cvvdp_video_pair_band_ref(ref_g: torch.Tensor, ref_g_next: torch.Tensor, test_g: torch.Tensor,
                              test_g_next: torch.Tensor, rho: float, scale: float) -> torch.Tensor:
    """One non-baseband band of M frames' temporal channels from Gaussian levels (M, 4, h, w) and (M, 4, ceil(h/2),
    ceil(w/2)) of each image: ``min(|T'|, |R'|)`` (channels 0-3) and ``|T' - R'|`` (4-7), (M, 8, h, w). The test
    levels may hold K clips of M frames, clip after clip, against the one reference: then (K*M, 8, h, w)."""
    clips, rest = divmod(test_g.shape[0], ref_g.shape[0])
    if rest or test_g.shape[1:] != ref_g.shape[1:]:
        raise ValueError(f"cvvdp_video_pair_band: test levels {tuple(test_g.shape)} are not K clips of the "
                         f"reference's {tuple(ref_g.shape)}")
    if clips > 1:
        ref_g, ref_g_next = ref_g.repeat(clips, 1, 1, 1), ref_g_next.repeat(clips, 1, 1, 1)
    ref, bkg = spec._band_contrast(ref_g, ref_g_next, scale)
    sens = cvvdp_sensitivity_ref(rho, torch.log10(bkg), None, TEMPORAL_LUTS)
    test, _ = spec._band_contrast(test_g, test_g_next, scale)
    gain = spec._gain(test)
    t_p = test * sens * gain
    r_p = ref * sens * gain
    return torch.cat([torch.minimum(t_p.abs(), r_p.abs()), (t_p - r_p).abs()], dim=1)
