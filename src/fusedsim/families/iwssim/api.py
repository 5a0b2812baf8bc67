"""IW-SSIM (Wang & Li 2011, the authors' MATLAB ``iwssim``): functional form, cached reference, loss module.

The algorithm and its constants are in :mod:`fusedsim.families.iwssim.twin`; everything is float64 on grey values
in [0, 255], like the MATLAB code. On CUDA tensors the local statistics run as Triton kernels: the 11x11 Gaussian
moments through the shared ``windowed_moments`` building block, the neighbourhood covariance (``iwssim_gram``),
its eigen-correction and inverse for every level in one launch (``iwssim_eig_levels``, Jacobi rotations: no host
synchronisation) and the information-content weights fused with cs and the level's two sums (``iwssim_level``: no
full-size map written); uint8 input is converted to grey by one kernel reading the codes (``iwssim_grey8``: no
float64 copy of the RGB image); the Laplacian pyramid takes one ``iwssim_reduce`` and one ``iwssim_band`` launch
per level and the parent enlargement one ``iwssim_enlarge`` (all three bit-identical to the CPU twin); the final
combination is PyTorch. Calls that need gradients run the PyTorch twin (the kernels are forward only).

Input: sRGB (N, 3, H, W) / (3, H, W) converted to grey by ``luma``, or grey (N, 1, H, W) / (1, H, W) used as is;
uint8 0..255 or floating in [0, 1] (scaled by 255). ``luma``:

* ``"matlab"`` (default): MATLAB ``rgb2gray`` on uint8 images, ``round(0.298936021293775 R + 0.587043074451121 G
  + 0.114020904255103 B)`` — the input of the reference scores. Rounding has a zero gradient; a call that needs
  one gets the unrounded grey's gradient through the rounded values (straight-through: the values are unchanged).
* ``"matlab-float"``: the same coefficients without rounding (``rgb2gray`` on double images); differentiable.
* ``"bt601"``: ``0.299 R + 0.587 G + 0.114 B`` unrounded (piq's grey for RGB input).

Images must be at least 176 px (11·2⁴) on each side. Where the authors' formula has no real value (a level without
information content, e.g. flat images, black vs white; a singular covariance, e.g. a ramp; inverted structure,
e.g. an image against its inverse) the result is defined in :mod:`fusedsim.families.iwssim.twin`: the metric is in
[0, 1], identity gives exactly 1, an image against its inverse 0 (MATLAB gives NaN or a complex number there).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from fusedsim.core.state import cached
from fusedsim.metrics.srgb_input import prepared_batch, repeat_prepared, srgb_image, srgb_pair
from fusedsim.core.moments.ops import windowed_moments
from fusedsim.families.iwssim import ops
import fusedsim.families.iwssim.twin as spec

__all__ = ["IWSSIMLoss", "IWSSIMReference", "check_iw_ssim_params", "iw_ssim", "prepare_iw_ssim",
           "score_prepared_iw_ssim"]

_NAME = "iw-ssim"
_MIN_REASON = "5 pyramid levels, each at least as large as the 11x11 window (the authors' code refuses smaller)"


def _check_luma(luma: object) -> str:
    if not isinstance(luma, str) or luma not in spec.LUMA:
        raise ValueError(f"{_NAME}: luma must be one of {', '.join(map(repr, spec.LUMA))}; got {luma!r}")
    return luma


def check_iw_ssim_params(*, luma: str = "matlab") -> None:
    """Raise naming a ``luma`` :func:`iw_ssim` does not know (before any image: the engine, ``--param``)."""
    _check_luma(luma)


def _as_rgb(image: object) -> tuple[object, bool]:
    """Grey (N, 1, H, W) / (1, H, W) as a 3-channel view (validated like RGB); RGB and anything else unchanged."""
    if isinstance(image, torch.Tensor) and image.dim() in (3, 4) and image.shape[-3] == 1:
        return image.expand(*image.shape[:-3], 3, *image.shape[-2:]), True
    return image, False


def _grey(image: torch.Tensor, is_grey: bool, luma: str, raw: torch.Tensor | None = None) -> torch.Tensor:
    """Grey (N, 1, H, W) float64 in [0, 255]; from the uint8 codes ``raw`` (N, 3, H, W) when given (one kernel,
    no float copy of the RGB image; grey input as the coefficients (1, 0, 0) unrounded: the same values)."""
    if raw is not None:
        coefs, rounded = ((1.0, 0.0, 0.0), False) if is_grey else spec.LUMA[luma]
        return ops.iwssim_grey8(raw, _coefs(coefs, raw.device), rounded)
    if is_grey:
        return image[:, :1].to(torch.float64) * 255.0
    return spec.grey_ref(image, luma)


@cached(maxsize=16)
def _coefs(coefs: tuple[float, float, float], device: torch.device) -> torch.Tensor:
    return torch.tensor(coefs, dtype=torch.float64, device=device)


def _uint8_ok(image: object) -> bool:
    """uint8 (N, 3, H, W) / (3, H, W) at least MIN_SIZE per side: read as codes; only a crop is converted."""
    return (isinstance(image, torch.Tensor) and image.dtype == torch.uint8 and image.dim() in (3, 4)
            and image.shape[-3] == 3 and min(image.shape[-2:]) >= spec.MIN_SIZE)


def _raw(image: torch.Tensor) -> torch.Tensor:
    return image if image.dim() == 4 else image.unsqueeze(0)


def _image(image: object, name: str) -> tuple[torch.Tensor, bool, torch.Tensor | None]:
    """:func:`srgb_image` (float64), on a 1-pixel crop for uint8 input; and the uint8 codes (N, 3, H, W) if any."""
    if _uint8_ok(image):
        crop, batched = srgb_image(image[..., :1, :1], name, _NAME, dtype=torch.float64)  # type: ignore[index]
        return crop, batched, _raw(image)  # type: ignore[arg-type]
    out, batched = srgb_image(image, name, _NAME, min_size=spec.MIN_SIZE, min_size_reason=_MIN_REASON,
                              dtype=torch.float64)
    return out, batched, None


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
        self.grad = grad
        if grad:
            self.moments = spec.windowed_moments_ref
            self.gram = spec.neighbourhood_gram_op_ref
            self.eig_levels = spec.corrected_eig_levels_ref
            self.level = spec.level_sums_ref
            self.enlarge = spec.enlarge2_ref
        else:
            self.moments, self.gram = windowed_moments, ops.iwssim_gram
            self.eig_levels, self.level = ops.iwssim_eig_levels, ops.iwssim_level
            self.enlarge, self.reduce, self.band = ops.iwssim_enlarge, ops.iwssim_reduce, ops.iwssim_band

    def pyramid(self, grey: torch.Tensor) -> list[torch.Tensor]:
        if self.grad:
            return spec.laplacian_pyramid_ref(grey, filter_axis=spec.FILTER_AXIS_DEFAULT)
        bands = []  # laplacian_pyramid_ref, one reduce and one band launch per level
        for _ in range(spec.LEVELS - 1):
            lo = self.reduce(grey)
            bands.append(self.band(grey, lo))
            grey = lo
        bands.append(grey)
        return bands


def _prepare_bands(grey: torch.Tensor, fns: _Fns):
    bands = fns.pyramid(grey)
    parents, grams, sizes = [], [], []
    for level in range(spec.LEVELS - 1):
        band = bands[level]
        parent = None
        if level < spec.LEVELS - 2:
            parent = fns.enlarge(bands[level + 1], band.shape[-2], band.shape[-1])
        parents.append(parent)
        grams.append(fns.gram(band, parent if parent is not None else band, parent is not None))
        sizes.append(grams[-1].shape[-1])
    # every level's eigen-correction in one launch (each is a latency-bound program): pad to the largest K
    kp = max(sizes)
    packed = torch.stack([g if k == kp else F.pad(g, (0, kp - k, 0, kp - k)) for g, k in zip(grams, sizes)])
    eig_all = fns.eig_levels(packed, sizes)
    eigs = [eig_all[level, :, :k + 1, :k] for level, k in enumerate(sizes)]
    return bands, parents, eigs


def _score(bands, parents, eigs, dist_grey: torch.Tensor, fns: _Fns) -> torch.Tensor:
    dist_bands = fns.pyramid(dist_grey)
    win = spec.gaussian_table(dist_grey.device)
    wmcs = []
    for level in range(spec.LEVELS):
        ref_b, dist_b = bands[level], dist_bands[level]
        last = level == spec.LEVELS - 1
        moments = fns.moments(ref_b, dist_b, win, True)
        if last:
            wmcs.append(spec.cs_from_moments_ref(moments[:, :, 0], last).flatten(1).mean(1))
            continue
        parent = parents[level]
        sums = fns.level(ref_b, dist_b, parent if parent is not None else ref_b, eigs[level], moments,
                         parent is not None)  # [Σ cs·iw, Σ iw]
        wmcs.append(spec.weighted_mean_ref(sums[:, 0], sums[:, 1]))
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
    raws = None
    if _uint8_ok(ref_v) and _uint8_ok(dist_v) and ref_v.shape == dist_v.shape:  # type: ignore[union-attr]
        # checks (dtype, device, layout) on 1-pixel crops; the kernels read the codes
        pair = srgb_pair(ref_v[..., :1, :1], dist_v[..., :1, :1], _NAME, dtype=torch.float64)  # type: ignore[index]
        raws = (_raw(ref_v), _raw(dist_v))  # type: ignore[arg-type]
    else:
        pair = srgb_pair(ref_v, dist_v, _NAME, min_size=spec.MIN_SIZE, min_size_reason=_MIN_REASON,
                         dtype=torch.float64)
    grad = torch.is_grad_enabled() and (pair.ref.requires_grad or pair.dist.requires_grad)
    fns = _Fns(grad)
    ref_raw, dist_raw = raws if raws is not None else (None, None)
    bands, parents, eigs = _prepare_bands(_grey(pair.ref, ref_grey, luma, ref_raw), fns)
    out = _score(bands, parents, eigs, _grey(pair.dist, dist_grey, luma, dist_raw), fns)
    return out if pair.batched else out[0]


def prepare_iw_ssim(ref: torch.Tensor, *, luma: str = "matlab") -> IWSSIMReference:
    """The reference side of :func:`iw_ssim` (pyramid, parents, covariance inverses), for
    :func:`score_prepared_iw_ssim`."""
    luma = _check_luma(luma)
    ref_v, is_grey = _as_rgb(ref)
    image, batched, raw = _image(ref_v, "ref")
    bands, parents, eigs = _prepare_bands(_grey(image, is_grey, luma, raw), _Fns(False))
    return IWSSIMReference(tuple(bands), tuple(parents), tuple(eigs), luma, is_grey, tuple(ref.shape), batched)


def score_prepared_iw_ssim(state: IWSSIMReference, dist: torch.Tensor) -> torch.Tensor:
    """:func:`iw_ssim` of ``dist`` against a prepared reference (same values as the one-shot call)."""
    if not isinstance(state, IWSSIMReference):
        raise TypeError(f"{_NAME}: state must come from prepare_iw_ssim; got {type(state).__name__}")
    count = prepared_batch(state.shape, state.batched, dist, _NAME)
    dist_v, _ = _as_rgb(dist)
    image, _, raw = _image(dist_v, "dist")
    if image.device != state.bands[0].device:
        raise ValueError(f"{_NAME}: dist is on {image.device} but the reference on {state.bands[0].device}")
    grad = torch.is_grad_enabled() and image.requires_grad  # gradients for dist: the twin computes its side
    bands, parents, eigs = (repeat_prepared(t, count) for t in (state.bands, state.parents, state.eigs))
    out = _score(bands, parents, eigs, _grey(image, state.is_grey, state.luma, raw), _Fns(grad))
    return out if state.batched else out[0]


class IWSSIMLoss(torch.nn.Module):
    """``1 - IW-SSIM`` as a loss: ``IWSSIMLoss()(ref, dist)``, the mean over the batch (``reduction='mean'``) or
    per image (``'none'``). Defaults to ``luma="matlab-float"``: the rounded grey's gradient is only the
    straight-through estimate (see the module docstring), the unrounded grey's is exact."""

    def __init__(self, luma: str = "matlab-float", reduction: str = "mean") -> None:
        super().__init__()
        self.luma = _check_luma(luma)
        if reduction not in ("mean", "none"):
            raise ValueError(f"reduction must be 'mean' or 'none'; got {reduction!r}")
        self.reduction = reduction

    def forward(self, ref: torch.Tensor, dist: torch.Tensor) -> torch.Tensor:
        out = 1.0 - iw_ssim(ref, dist, luma=self.luma)
        return out.mean() if self.reduction == "mean" else out
