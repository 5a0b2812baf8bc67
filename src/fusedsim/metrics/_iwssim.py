"""IW-SSIM (Wang & Li 2011, the authors' MATLAB ``iwssim``): functional form, cached reference, loss module.

The algorithm and its constants are in :mod:`fusedsim.reference.iwssim_ref`; everything is float64 on grey values
in [0, 255], like the MATLAB code. On CUDA tensors the local statistics run as Triton kernels: the 11x11 Gaussian
moments through the shared ``windowed_moments`` building block, the neighbourhood covariance (``iwssim_gram``),
its eigen-correction and inverse (``iwssim_eig``, Jacobi rotations: no host synchronisation) and the information-
content weights (``iwssim_info``); the Laplacian pyramid, the parent enlargement and the pooling are PyTorch.
Calls that need gradients run the PyTorch twin (the kernels are forward only).

Input: sRGB (N, 3, H, W) / (3, H, W) converted to grey by ``luma``, or grey (N, 1, H, W) / (1, H, W) used as is;
uint8 0..255 or floating in [0, 1] (scaled by 255). ``luma``:

* ``"matlab"`` (default): MATLAB ``rgb2gray`` on uint8 images, ``round(0.298936021293775 R + 0.587043074451121 G
  + 0.114020904255103 B)`` — the input of the reference scores. Rounding has no gradient.
* ``"matlab-float"``: the same coefficients without rounding (``rgb2gray`` on double images); differentiable.
* ``"bt601"``: ``0.299 R + 0.587 G + 0.114 B`` unrounded (piq's grey for RGB input).

Images must be at least 176 px (11·2⁴) on each side. Constant images have no information content and give NaN,
as the MATLAB code does.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fusedsim.metrics.srgb_input import srgb_image, srgb_pair
from fusedsim.ops import op
from fusedsim.reference import iwssim_ref as spec

__all__ = ["IWSSIMLoss", "IWSSIMReference", "iw_ssim", "prepare_iw_ssim", "score_prepared_iw_ssim"]

_NAME = "iw-ssim"
_MIN_REASON = "5 pyramid levels, each at least as large as the 11x11 window (the authors' code refuses smaller)"


def _check_luma(luma: object) -> str:
    if not isinstance(luma, str) or luma not in spec.LUMA:
        raise ValueError(f"{_NAME}: luma must be one of {', '.join(map(repr, spec.LUMA))}; got {luma!r}")
    return luma


def _as_rgb(image: object) -> tuple[object, bool]:
    """Grey (N, 1, H, W) / (1, H, W) as a 3-channel view (validated like RGB); RGB and anything else unchanged."""
    if isinstance(image, torch.Tensor) and image.dim() in (3, 4) and image.shape[-3] == 1:
        return image.expand(*image.shape[:-3], 3, *image.shape[-2:]), True
    return image, False


def _grey(image: torch.Tensor, is_grey: bool, luma: str) -> torch.Tensor:
    if is_grey:
        return image[:, :1].to(torch.float64) * 255.0
    return spec.grey_ref(image, luma)


@dataclass(frozen=True)
class IWSSIMReference:
    """A prepared reference: its pyramid bands, the enlarged parents and the corrected covariance inverses."""

    bands: tuple[torch.Tensor, ...]
    parents: tuple[torch.Tensor | None, ...]
    eigs: tuple[torch.Tensor, ...]
    luma: str
    is_grey: bool
    shape: tuple[int, ...]
    batched: bool


class _Fns:
    """The per-level functions: the registered ops (Triton on GPUs, the twin on CPUs) or, for gradients, the twin."""

    def __init__(self, grad: bool) -> None:
        if grad:
            self.moments = spec.windowed_moments_ref
            self.gram = spec.neighbourhood_gram_op_ref
            self.eig = spec.corrected_eig_ref
            self.info = spec.info_weight_map_op_ref
            self.pyramid_filter = spec.FILTER_AXIS_DEFAULT
        else:
            self.moments, self.gram = op("windowed_moments"), op("iwssim_gram")
            self.eig, self.info = op("iwssim_eig"), op("iwssim_info")
            self.pyramid_filter = op("iwssim_binom")

    def pyramid(self, grey: torch.Tensor) -> list[torch.Tensor]:
        return spec.laplacian_pyramid_ref(grey, filter_axis=self.pyramid_filter)


def _prepare_bands(grey: torch.Tensor, fns: _Fns):
    bands = fns.pyramid(grey)
    parents, eigs = [], []
    for level in range(spec.LEVELS - 1):
        band = bands[level]
        parent = None
        if level < spec.LEVELS - 2:
            parent = spec.enlarge2_ref(bands[level + 1], band.shape[-2], band.shape[-1])
        parents.append(parent)
        eigs.append(fns.eig(fns.gram(band, parent if parent is not None else band, parent is not None)))
    return bands, parents, eigs


def _score(bands, parents, eigs, dist_grey: torch.Tensor, fns: _Fns) -> torch.Tensor:
    dist_bands = fns.pyramid(dist_grey)
    win = spec.gaussian_table(dist_grey.device)
    wmcs = []
    for level in range(spec.LEVELS):
        ref_b, dist_b = bands[level], dist_bands[level]
        last = level == spec.LEVELS - 1
        cs = spec.cs_from_moments_ref(fns.moments(ref_b, dist_b, win, True)[:, :, 0], last)
        if last:
            wmcs.append(cs.flatten(1).mean(1))
            continue
        parent = parents[level]
        iw = fns.info(ref_b, dist_b, parent if parent is not None else ref_b, eigs[level], parent is not None)
        wmcs.append((cs * iw).flatten(1).sum(1) / iw.flatten(1).sum(1))
    return spec.combine_ref(torch.stack(wmcs))


def iw_ssim(ref: torch.Tensor, dist: torch.Tensor, *, luma: str = "matlab") -> torch.Tensor:
    """IW-SSIM of each (reference, distorted) pair, as the authors' MATLAB ``iwssim`` with its defaults: 1 for
    identical images, lower is worse.

    Args:
        ref, dist: sRGB (N, 3, H, W) / (3, H, W) or grey (N, 1, H, W) / (1, H, W), uint8 0..255 or floating in
            [0, 1]; at least 176 px per side.
        luma: grey conversion of RGB input (see the module docstring); ignored for grey input.

    Returns:
        float64 tensor (N,), or 0-d for unbatched inputs.
    """
    luma = _check_luma(luma)
    ref_v, ref_grey = _as_rgb(ref)
    dist_v, dist_grey = _as_rgb(dist)
    if ref_grey != dist_grey:
        raise ValueError(f"{_NAME}: ref and dist must both be RGB or both grey; got shapes "
                         f"{tuple(ref.shape)} and {tuple(dist.shape)}")  # type: ignore[union-attr]
    pair = srgb_pair(ref_v, dist_v, _NAME, min_size=spec.MIN_SIZE, min_size_reason=_MIN_REASON,
                     dtype=torch.float64)
    grad = torch.is_grad_enabled() and (pair.ref.requires_grad or pair.dist.requires_grad)
    fns = _Fns(grad)
    bands, parents, eigs = _prepare_bands(_grey(pair.ref, ref_grey, luma), fns)
    out = _score(bands, parents, eigs, _grey(pair.dist, dist_grey, luma), fns)
    return out if pair.batched else out[0]


def prepare_iw_ssim(ref: torch.Tensor, *, luma: str = "matlab") -> IWSSIMReference:
    """The reference side of :func:`iw_ssim` (pyramid, parents, covariance inverses), for
    :func:`score_prepared_iw_ssim`."""
    luma = _check_luma(luma)
    ref_v, is_grey = _as_rgb(ref)
    image, batched = srgb_image(ref_v, "ref", _NAME, min_size=spec.MIN_SIZE, min_size_reason=_MIN_REASON,
                                dtype=torch.float64)
    bands, parents, eigs = _prepare_bands(_grey(image, is_grey, luma), _Fns(False))
    return IWSSIMReference(tuple(bands), tuple(parents), tuple(eigs), luma, is_grey, tuple(ref.shape), batched)


def score_prepared_iw_ssim(state: IWSSIMReference, dist: torch.Tensor) -> torch.Tensor:
    """:func:`iw_ssim` of ``dist`` against a prepared reference (same values as the one-shot call)."""
    if not isinstance(state, IWSSIMReference):
        raise TypeError(f"{_NAME}: state must come from prepare_iw_ssim; got {type(state).__name__}")
    if not isinstance(dist, torch.Tensor) or tuple(dist.shape) != state.shape:
        shape = tuple(dist.shape) if isinstance(dist, torch.Tensor) else type(dist).__name__
        raise ValueError(f"{_NAME}: dist must have the reference's shape {state.shape}; got {shape}")
    dist_v, _ = _as_rgb(dist)
    image, _ = srgb_image(dist_v, "dist", _NAME, min_size=spec.MIN_SIZE, min_size_reason=_MIN_REASON,
                          dtype=torch.float64)
    if image.device != state.bands[0].device:
        raise ValueError(f"{_NAME}: dist is on {image.device} but the reference on {state.bands[0].device}")
    grad = torch.is_grad_enabled() and image.requires_grad  # gradients for dist: the twin computes its side
    out = _score(state.bands, state.parents, state.eigs, _grey(image, state.is_grey, state.luma), _Fns(grad))
    return out if state.batched else out[0]


class IWSSIMLoss(torch.nn.Module):
    """``1 - IW-SSIM`` as a loss: ``IWSSIMLoss()(ref, dist)``, the mean over the batch (``reduction='mean'``) or
    per image (``'none'``). Defaults to ``luma="matlab-float"`` because the rounded grey has no gradient."""

    def __init__(self, luma: str = "matlab-float", reduction: str = "mean") -> None:
        super().__init__()
        self.luma = _check_luma(luma)
        if reduction not in ("mean", "none"):
            raise ValueError(f"reduction must be 'mean' or 'none'; got {reduction!r}")
        self.reduction = reduction

    def forward(self, ref: torch.Tensor, dist: torch.Tensor) -> torch.Tensor:
        out = 1.0 - iw_ssim(ref, dist, luma=self.luma)
        return out.mean() if self.reduction == "mean" else out
