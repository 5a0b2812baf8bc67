"""DSSIM (kornelski/dssim 3.5.0): functional form, cached reference, loss module.

The algorithm and its constants are in :mod:`fusedsim.families.dssim.twin`. On CUDA tensors each scale's colour
transform with its chroma pre-blur (``dssim_prep``; from uint8 codes directly at the first scale,
``dssim_srgb8_prep``, with the second scale's linear RGB from ``dssim_srgb8_half``: no float copy of the image)
and the fused per-scale SSIM map (``dssim_ssim_map``) run as Triton kernels; the later 2x2 pyramid steps and the
pooling are PyTorch. Calls that need gradients run
the PyTorch twin (the same arithmetic; the kernels are forward only).

Precision: uint8 input is computed in float32, as dssim does, and then reproduces dssim-core's f32 arithmetic
(its LUT, fused multiply-adds, blur edge weights and summation order): the four upstream locked values are met
to ~1e-16. float32 input is computed in float32, float64 input in float64 (for gradient checks; it differs from
dssim's f32 results by their rounding, ~1e-6 on small images), float16/bfloat16 in float32.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fusedsim.core.state import cached
from fusedsim.metrics.srgb_input import prepared_batch, repeat_prepared, srgb_image, srgb_pair
from fusedsim.families.dssim import ops
import fusedsim.families.dssim.twin as spec

__all__ = ["DSSIMLoss", "DSSIMReference", "dssim", "prepare_dssim", "score_prepared_dssim"]

_NAME = "dssim"


def _ops():
    return ops.dssim_prep, ops.dssim_ssim_map


def _split_alpha(image: object) -> tuple[object, torch.Tensor | None]:
    """RGBA (N, 4, H, W) / (4, H, W) -> the RGB part and the alpha plane; anything else is passed on unchanged."""
    if isinstance(image, torch.Tensor) and image.dim() in (3, 4) and image.shape[-3] == 4:
        return image[..., :3, :, :], image[..., 3:, :, :]
    return image, None


def _alpha(alpha: torch.Tensor | None, rgb: torch.Tensor, name: str) -> torch.Tensor | None:
    """Straight alpha as (N, 1, H, W) in the dtype of ``rgb`` (checked like the colour channels)."""
    if alpha is None:
        return None
    grey, _ = srgb_image(alpha.expand(*alpha.shape[:-3], 3, *alpha.shape[-2:]), f"{name} alpha", _NAME,
                         dtype=rgb.dtype)
    return grey[:, :1].to(rgb.dtype)


def _compute_dtype(x: torch.Tensor) -> torch.dtype:
    return torch.float64 if x.dtype == torch.float64 else torch.float32


@dataclass(frozen=True)
class DSSIMReference:
    """A prepared reference: per scale, its Lab (N, 3, H_s, W_s) with pre-blurred a/b."""

    scales: tuple[torch.Tensor, ...]
    shape: tuple[int, ...]
    has_alpha: bool
    batched: bool
    dtype: torch.dtype


@cached(maxsize=8)
def _lut(device: torch.device) -> torch.Tensor:
    """dssim's sRGB -> linear table for uint8 (256 float32 values): the same function on the same values u/255 as
    :func:`~fusedsim.families.dssim.twin.srgb_to_linear_ref`, so bit-identical to it, in one gather."""
    return spec.srgb8_table_ref().to(device)


def _linear(rgb: torch.Tensor, raw: torch.Tensor | None) -> torch.Tensor:
    if raw is None or rgb.dtype != torch.float32:
        return spec.srgb_to_linear_ref(rgb)
    lut = _lut(raw.device)
    return lut.index_select(0, raw.reshape(-1).to(torch.int32)).view(raw.shape)


def _side(rgb: torch.Tensor | None, alpha: torch.Tensor | None, grad: bool,
          raw: torch.Tensor | None = None) -> list[torch.Tensor]:
    """One image's per-scale Lab with pre-blurred a/b (see :func:`fusedsim.families.dssim.twin.dssim_ref`);
    ``raw`` is the uint8 image behind ``rgb``, if any: without alpha the kernels read its codes directly (``rgb``
    is then not used and may be None), with alpha it is linearised by table look-up."""
    if grad:
        lin = spec.srgb_to_linear_ref(rgb)
        return spec.dssim_prepare_scales_ref(lin * alpha if alpha is not None else lin, alpha)
    prep, _ = _ops()
    sizes = spec.dssim_scale_sizes(*(raw if raw is not None else rgb).shape[-2:])
    out: list[torch.Tensor] = []
    if raw is not None and alpha is None:
        out.append(ops.dssim_srgb8_prep(raw))
        lin = ops.dssim_srgb8_half(raw) if len(sizes) > 1 else None  # the next scale's input
    else:
        lin = _linear(rgb, raw)
        if alpha is not None:
            lin = lin * alpha
    start = len(out)
    for s in range(start, len(sizes)):
        if s > start:
            lin = spec.dssim_downsample_ref(lin)
            alpha = spec.dssim_downsample_ref(alpha) if alpha is not None else None
        out.append(prep(lin, alpha if alpha is not None else lin, alpha is not None))
    return out


def _compare(ref_scales, dist_scales, grad: bool) -> torch.Tensor:
    ssim_map = spec.dssim_ssim_map_ref if grad else _ops()[1]
    scores = [spec.dssim_pool_ref(ssim_map(a, b), s) for s, (a, b) in enumerate(zip(ref_scales, dist_scales))]
    return spec.dssim_combine_ref(scores)


def _uint8_rgb(image: object) -> bool:
    """A uint8 (N, 3, H, W) / (3, H, W) image: the kernels read its codes; only a crop is converted to floats."""
    return (isinstance(image, torch.Tensor) and image.dtype == torch.uint8 and image.dim() in (3, 4)
            and image.shape[-3] == 3 and image.numel() > 0)


def _inputs(ref: object, dist: object):
    ref_rgb, ref_alpha = _split_alpha(ref)
    dist_rgb, dist_alpha = _split_alpha(dist)
    if (ref_alpha is None) != (dist_alpha is None):
        raise ValueError(f"{_NAME}: ref and dist must both be RGB or both RGBA; got shapes "
                         f"{tuple(ref.shape)} and {tuple(dist.shape)}")  # type: ignore[union-attr]
    raws = tuple(_raw(x) for x in (ref_rgb, dist_rgb))
    if (ref_alpha is None and _uint8_rgb(ref_rgb) and _uint8_rgb(dist_rgb)
            and ref_rgb.shape == dist_rgb.shape):  # type: ignore[union-attr]
        # checks (dtype, device, layout) on 1-pixel crops: no full-size float copy of a uint8 image
        pair = srgb_pair(ref_rgb[..., :1, :1], dist_rgb[..., :1, :1], _NAME)  # type: ignore[index]
        return None, None, None, None, pair.batched, raws
    dtype = torch.float32 if not isinstance(ref_rgb, torch.Tensor) else _compute_dtype(ref_rgb)
    pair = srgb_pair(ref_rgb, dist_rgb, _NAME, dtype=dtype)
    r, d = pair.ref.to(_compute_dtype(pair.ref)), pair.dist.to(_compute_dtype(pair.dist))
    return r, d, _alpha(ref_alpha, r, "ref"), _alpha(dist_alpha, d, "dist"), pair.batched, raws


def _raw(image: object) -> torch.Tensor | None:
    """The uint8 image as (N, 3, H, W), or None for floating input."""
    if isinstance(image, torch.Tensor) and image.dtype == torch.uint8:
        return image if image.dim() == 4 else image.unsqueeze(0)
    return None


def _image(rgb: object, alpha: object, name: str, dtype: torch.dtype) -> tuple[torch.Tensor, bool]:
    """:func:`srgb_image` of one image, on a 1-pixel crop for uint8 RGB without alpha (read as codes later)."""
    if alpha is None and _uint8_rgb(rgb):
        return srgb_image(rgb[..., :1, :1], name, _NAME, dtype=dtype)  # type: ignore[index]
    return srgb_image(rgb, name, _NAME, dtype=dtype)


def dssim(ref: torch.Tensor, dist: torch.Tensor) -> torch.Tensor:
    """DSSIM of each (reference, distorted) pair, as ``dssim`` 3.5.0 prints it: 0 for identical images, larger
    is more different (1/SSIM - 1 of its multi-scale Lab SSIM).

    Args:
        ref, dist: sRGB images (N, 3, H, W) or (3, H, W), uint8 0..255 or floating in [0, 1]; or RGBA
            (N, 4, H, W) / (4, H, W) with straight alpha, composited over dssim's pseudo-checkerboard.
            Any size (images under 8 px use one scale).

    Returns:
        float64 tensor (N,), or 0-d for unbatched inputs.
    """
    r, d, ra, da, batched, (r_raw, d_raw) = _inputs(ref, dist)
    grad = torch.is_grad_enabled() and r is not None and (r.requires_grad or d.requires_grad)
    out = _compare(_side(r, ra, grad, r_raw), _side(d, da, grad, d_raw), grad)
    return out if batched else out[0]


def prepare_dssim(ref: torch.Tensor) -> DSSIMReference:
    """The reference side of :func:`dssim` (its Lab pyramid), for :func:`score_prepared_dssim`."""
    rgb, alpha = _split_alpha(ref)
    dtype = torch.float32 if not isinstance(rgb, torch.Tensor) else _compute_dtype(rgb)
    image, batched = _image(rgb, alpha, "ref", dtype)
    image = image.to(_compute_dtype(image))
    alpha_t = _alpha(alpha, image, "ref")
    scales = _side(image, alpha_t, False, _raw(rgb))
    return DSSIMReference(tuple(scales), tuple(ref.shape), alpha_t is not None, batched, image.dtype)


def score_prepared_dssim(state: DSSIMReference, dist: torch.Tensor) -> torch.Tensor:
    """:func:`dssim` of ``dist`` against a prepared reference (same values as the one-shot call)."""
    if not isinstance(state, DSSIMReference):
        raise TypeError(f"{_NAME}: state must come from prepare_dssim; got {type(state).__name__}")
    count = prepared_batch(state.shape, state.batched, dist, _NAME)
    rgb, alpha = _split_alpha(dist)
    image, _ = _image(rgb, alpha, "dist", state.dtype)
    if _compute_dtype(image) != state.dtype:
        raise TypeError(f"{_NAME}: dist must have the reference's kind of dtype ({state.dtype} computation); got "
                        f"{dist.dtype}")
    image = image.to(state.dtype)
    if image.device != state.scales[0].device:
        raise ValueError(f"{_NAME}: dist is on {image.device} but the reference on {state.scales[0].device}")
    grad = torch.is_grad_enabled() and image.requires_grad  # gradients for dist: its side runs the twin
    dist_scales = _side(image, _alpha(alpha, image, "dist"), grad, _raw(rgb))
    out = _compare(repeat_prepared(state.scales, count), dist_scales, grad)
    return out if state.batched else out[0]


class DSSIMLoss(torch.nn.Module):
    """DSSIM as a loss: ``DSSIMLoss()(ref, dist)`` is the mean :func:`dssim` over the batch (``reduction='mean'``)
    or the per-image values (``'none'``). Gradients flow to both inputs (floating, in [0, 1])."""

    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        if reduction not in ("mean", "none"):
            raise ValueError(f"reduction must be 'mean' or 'none'; got {reduction!r}")
        self.reduction = reduction

    def forward(self, ref: torch.Tensor, dist: torch.Tensor) -> torch.Tensor:
        out = dssim(ref, dist)
        return out.mean() if self.reduction == "mean" else out
