"""SSIMULACRA 2.1 (cloudinary/ssimulacra2, the C++ reference): functional API :func:`ssimulacra2`, cached-reference
pair :func:`prepare_ssimulacra2` / :func:`score_prepared_ssimulacra2` (used by ``fusedsim.Metric("ssimulacra2")``)
and :class:`SSIMULACRA2Loss`.

The metric is defined by the reference's float32 arithmetic (its blur and variance rounding is visible in the
scores of near-lossless pairs), so every floating input is computed in float32 and uint8 is read as the reference
reads 8-bit samples; the algorithm and the loop over scales are the twin's
(:mod:`fusedsim.families.ssimulacra2.twin`). Its three per-scale steps run as registered ops: Triton kernels on
CUDA tensors (:mod:`fusedsim.families.ssimulacra2.xyb_kernel`, :mod:`fusedsim.families.ssimulacra2.kernel`), the twins on the CPU; both give the
reference's numbers. Gradients: when an input requires grad, the steps run on the twins' PyTorch code (autograd,
any device; the kernels are forward-only).
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from fusedsim.core import side_streams
from fusedsim.metrics.srgb_input import srgb_image, srgb_pair
from fusedsim.families.ssimulacra2.ops import (
    ssimulacra2_error_pool,
    ssimulacra2_linear_xyb,
    ssimulacra2_pair_pool,
    ssimulacra2_reference_blur,
)
from fusedsim.families.ssimulacra2.twin import (
    MIN_SIZE,
    TWIN_STEPS,
    Ssimulacra2State,
    Ssimulacra2Steps,
    score_from_subscores_ref,
    ssimulacra2_prepare_ref,
    ssimulacra2_subscores_prepared_ref,
    ssimulacra2_subscores_ref,
)

__all__ = ["SSIMULACRA2Loss", "Ssimulacra2Prepared", "prepare_ssimulacra2", "score_prepared_ssimulacra2",
           "ssimulacra2"]

_NAME = "ssimulacra2"
_MIN_REASON = "the reference skips every scale of an image smaller than 8 px (it returns 100 for any such pair)"
#: the registered ops (Triton on GPUs, the twins on the CPU), one scale after another
_OP_STEPS = Ssimulacra2Steps(ssimulacra2_linear_xyb, ssimulacra2_reference_blur, ssimulacra2_error_pool,
                             ssimulacra2_pair_pool)
#: the same ops with the scales' comparisons on side streams (:mod:`fusedsim.core.side_streams`)
_SIDE_STEPS = _OP_STEPS._replace(error_pool=side_streams.concurrent(ssimulacra2_error_pool),
                                 pair_pool=side_streams.concurrent(ssimulacra2_pair_pool), gather=side_streams.gather)


class Ssimulacra2Prepared(NamedTuple):
    """A prepared reference: per scale its XYB image and the blurs of x1 and x1² (:class:`Ssimulacra2State`), and
    whether it was given with a batch dimension."""

    state: Ssimulacra2State
    batched: bool


def _steps(*tensors: torch.Tensor) -> Ssimulacra2Steps:
    """The registered ops (Triton on GPUs, the twins on the CPU), or the twins when gradients are needed. Large
    GPU calls take the ops whose scales run on side streams: the smaller scales overlap the largest one's
    latency-bound vertical pass (:mod:`fusedsim.core.side_streams`; same values)."""
    if any(t.requires_grad for t in tensors):
        return TWIN_STEPS
    image = tensors[0]  # the image being scored: no prepared reference state is larger
    # MIN_ELEMENTS read per call (tests lower it)
    return _SIDE_STEPS if image.is_cuda and image.numel() >= side_streams.MIN_ELEMENTS else _OP_STEPS


def _working_image(checked: torch.Tensor) -> torch.Tensor:
    """uint8 codes stay uint8 (the steps read them as the reference does); floating becomes float32 (N, 3, H, W)."""
    return checked if checked.dtype == torch.uint8 else checked.to(torch.float32)


def prepare_ssimulacra2(ref: torch.Tensor, *, check_range: bool | None = None) -> Ssimulacra2Prepared:
    """Prepare a reference (N, 3, H, W) or (3, H, W), sRGB uint8 or float in [0, 1], H, W >= 8, for
    :func:`score_prepared_ssimulacra2`: its linear/XYB pyramid and the blurs of x1 and x1² at every scale."""
    image, batched = srgb_image(ref, "ref", _NAME, min_size=MIN_SIZE, min_size_reason=_MIN_REASON,
                                check_range=check_range, keep_uint8=True)
    work = _working_image(image)
    return Ssimulacra2Prepared(ssimulacra2_prepare_ref(work, _steps(work)), batched)


def score_prepared_ssimulacra2(prepared: Ssimulacra2Prepared, dist: torch.Tensor, *,
                               check_range: bool | None = None) -> torch.Tensor:
    """SSIMULACRA2 of ``dist`` against a prepared reference: (N,) float64, or 0-d for unbatched inputs. ``dist``
    has the reference's shape, or is a batch (N, 3, H, W) of its size when the reference is one image."""
    if not isinstance(prepared, Ssimulacra2Prepared):
        raise TypeError(f"{_NAME}: prepared must come from prepare_ssimulacra2; got {type(prepared).__name__}")
    state = prepared.state
    image, batched = srgb_image(dist, "dist", _NAME, min_size=MIN_SIZE, min_size_reason=_MIN_REASON,
                                check_range=check_range, keep_uint8=True)
    n_ref = state.shape[0]
    if tuple(image.shape[1:]) != state.shape[1:] or (image.shape[0] != n_ref and n_ref != 1):
        raise ValueError(f"{_NAME}: dist must match the reference's shape {state.shape} (or be a batch of its "
                         f"size when the reference is one image); got {tuple(image.shape)}")
    if state.xyb[0].device != image.device:
        raise ValueError(f"{_NAME}: dist is on {image.device} but the reference was prepared on "
                         f"{state.xyb[0].device}")
    work = _working_image(image)
    scores = score_from_subscores_ref(ssimulacra2_subscores_prepared_ref(state, work, _steps(work, *state.xyb)))
    return scores if (batched or prepared.batched) else scores[0]


def ssimulacra2(ref: torch.Tensor, dist: torch.Tensor, *, check_range: bool | None = None) -> torch.Tensor:
    """SSIMULACRA 2.1 score of sRGB pairs, as the reference tool ``ssimulacra2 REF DIST`` computes it.

    Args:
        ref, dist: (N, 3, H, W) or (3, H, W), sRGB-encoded, uint8 0..255 or float in [0, 1]; H, W >= 8.
        check_range: check float inputs lie in [0, 1] (default: on CPU tensors only, which needs no sync).

    Returns:
        (N,) float64 scores (0-d for (3, H, W) inputs): 100 for identical images, about 90 visually lossless,
        70 high quality, 50 medium, 30 low; negative for very strong distortions.
    """
    pair = srgb_pair(ref, dist, _NAME, min_size=MIN_SIZE, min_size_reason=_MIN_REASON, check_range=check_range,
                     keep_uint8=True)
    ref_w, dist_w = _working_image(pair.ref), _working_image(pair.dist)
    scores = score_from_subscores_ref(ssimulacra2_subscores_ref(ref_w, dist_w, _steps(ref_w, dist_w)))
    return scores if pair.batched else scores[0]


class SSIMULACRA2Loss(torch.nn.Module):
    """SSIMULACRA2 as a loss: ``loss(ref, dist)`` -> the batch mean of ``(100 - score) / 100`` (0 for identical
    images). Differentiable with respect to both float inputs through the PyTorch twin (any device)."""

    def forward(self, ref: torch.Tensor, dist: torch.Tensor) -> torch.Tensor:
        return ((100.0 - ssimulacra2(ref, dist)) / 100.0).mean()
