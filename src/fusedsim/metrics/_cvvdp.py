"""ColorVideoVDP for still images (pycvvdp 0.5.7): functional form, cached reference, loss module.

The algorithm, its constants and the data files are in :mod:`fusedsim.reference.cvvdp_ref` and
:mod:`fusedsim.reference.cvvdp_data`. The pipeline is the PyTorch twin (differentiable, no host synchronisation);
the masking step of each band goes through the registered op ``cvvdp_mask_diff`` (a fused Triton kernel, run on
GPUs once it has passed its twin test there; until then, and on the CPU, the twin). Calls that need gradients
and float64 calls run the twin throughout.

Precision: uint8 and float32 input is computed in float32, as pycvvdp does; on the corpus the JODs equal
pycvvdp's bit for bit on the CPU. float64 input is computed in float64 (for gradient checks), float16/bfloat16
in float32.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch

from fusedsim.metrics.srgb_input import srgb_image, srgb_pair
from fusedsim.reference import cvvdp_ref as spec
from fusedsim.reference.cvvdp_data import CVVDPDisplay, cvvdp_display

__all__ = ["CVVDPLoss", "CVVDPReference", "CVVDPResult", "cvvdp", "prepare_cvvdp", "score_prepared_cvvdp"]

_NAME = "cvvdp"
MIN_SIZE = 2
_MIN_REASON = "the Laplacian pyramid needs 2 px per side"


class CVVDPResult(NamedTuple):
    """``jod`` (N,) — 10 for identical images, lower is more visible difference — and ``diff_map`` (N, 1, H, W),
    pycvvdp's raw heatmap ``1 - JOD/10`` per pixel (0 = no visible difference), kept in the compute dtype where
    pycvvdp rounds it to float16."""

    jod: torch.Tensor
    diff_map: torch.Tensor


@dataclass(frozen=True)
class CVVDPReference:
    """A prepared reference: per band its Weber contrast and CSF sensitivity (see ``cvvdp_prepare_ref``)."""

    bands: tuple[torch.Tensor, ...]
    sensitivity: tuple[torch.Tensor, ...]
    display: CVVDPDisplay
    shape: tuple[int, ...]
    batched: bool
    dtype: torch.dtype
    return_map: bool


def _compute_dtype(x: torch.Tensor) -> torch.dtype:
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def _display(display: str, overrides: dict) -> CVVDPDisplay:
    return cvvdp_display(display, **overrides)


def _mask_diff(dtype: torch.dtype, grad: bool):
    """The masking step: the registered op (its Triton kernel on GPUs, the twin on the CPU) for float32 without
    gradients; otherwise the twin itself (differentiable, exact float64)."""
    if grad or dtype == torch.float64:
        return spec.cvvdp_mask_diff_ref
    from fusedsim.ops import op

    return op("cvvdp_mask_diff")


def _finish(out, batched: bool, return_map: bool):
    if return_map:
        jod, dmap = out
        return CVVDPResult(jod, dmap) if batched else CVVDPResult(jod[0], dmap[0])
    return out if batched else out[0]


def cvvdp(ref: torch.Tensor, dist: torch.Tensor, *, display: str = "standard_4k",
          peak_luminance: float | None = None, contrast: float | None = None, e_ambient: float | None = None,
          k_refl: float | None = None, exposure: float | None = None, ppd: float | None = None,
          resolution: tuple[int, int] | None = None, viewing_distance_m: float | None = None,
          diagonal_inches: float | None = None, return_map: bool = False) -> torch.Tensor | CVVDPResult:
    """ColorVideoVDP (v0.5.7) quality of each (reference, distorted) still image in JOD: 10 = identical.

    Same value as ``pycvvdp.cvvdp(display_name=display).predict(dist, ref)`` (which takes the test first).

    Args:
        ref, dist: sRGB images (N, 3, H, W) or (3, H, W), uint8 0..255 or floating in [0, 1]; at least 2 px per
            side.
        display: a display model of pycvvdp's ``display_models.json`` with an sRGB EOTF (``standard_4k``,
            ``standard_fhd``, ``standard_phone``, ...; an unknown name lists them).
        peak_luminance, contrast, e_ambient, k_refl, exposure: override the display's photometry: peak
            luminance (cd/m²), contrast (x:1, sets the black level), ambient illuminance (lux) and screen
            reflectivity (reflected light ``e_ambient / pi * k_refl``), exposure multiplier of linear values.
        ppd, resolution, viewing_distance_m, diagonal_inches: override the geometry: pixels per degree directly,
            or the screen resolution (W, H), viewing distance and diagonal from which it is derived.
        return_map: also return the per-pixel difference map.

    Returns:
        float tensor (N,) of JODs (0-d for unbatched inputs), or :class:`CVVDPResult` ``(jod, diff_map)``.
    """
    disp = _display(display, {"peak_luminance": peak_luminance, "contrast": contrast, "e_ambient": e_ambient,
                                  "k_refl": k_refl, "exposure": exposure, "ppd": ppd, "resolution": resolution,
                                  "viewing_distance_m": viewing_distance_m, "diagonal_inches": diagonal_inches})
    dtype = torch.float64 if isinstance(ref, torch.Tensor) and ref.dtype == torch.float64 else torch.float32
    pair = srgb_pair(ref, dist, _NAME, min_size=MIN_SIZE, min_size_reason=_MIN_REASON, dtype=dtype)
    r, d = pair.ref.to(_compute_dtype(pair.ref)), pair.dist.to(_compute_dtype(pair.dist))
    grad = torch.is_grad_enabled() and (r.requires_grad or d.requires_grad)
    bands, sens = spec.cvvdp_prepare_ref(r, disp)
    out = spec.cvvdp_compare_ref(bands, sens, d, disp, bool(return_map), _mask_diff(r.dtype, grad))
    return _finish(out, pair.batched, bool(return_map))


def prepare_cvvdp(ref: torch.Tensor, *, display: str = "standard_4k", peak_luminance: float | None = None,
                  contrast: float | None = None, e_ambient: float | None = None, k_refl: float | None = None,
                  exposure: float | None = None, ppd: float | None = None,
                  resolution: tuple[int, int] | None = None, viewing_distance_m: float | None = None,
                  diagonal_inches: float | None = None, return_map: bool = False) -> CVVDPReference:
    """The reference side of :func:`cvvdp` (contrast pyramid and CSF sensitivities), for
    :func:`score_prepared_cvvdp`. Takes the same keyword parameters as :func:`cvvdp`."""
    disp = _display(display, {"peak_luminance": peak_luminance, "contrast": contrast, "e_ambient": e_ambient,
                                  "k_refl": k_refl, "exposure": exposure, "ppd": ppd, "resolution": resolution,
                                  "viewing_distance_m": viewing_distance_m, "diagonal_inches": diagonal_inches})
    dtype = torch.float64 if isinstance(ref, torch.Tensor) and ref.dtype == torch.float64 else torch.float32
    image, batched = srgb_image(ref, "ref", _NAME, min_size=MIN_SIZE, min_size_reason=_MIN_REASON, dtype=dtype)
    image = image.to(_compute_dtype(image))
    bands, sens = spec.cvvdp_prepare_ref(image, disp)
    return CVVDPReference(tuple(bands), tuple(sens), disp, tuple(image.shape), batched, image.dtype,
                          bool(return_map))


def score_prepared_cvvdp(state: CVVDPReference, dist: torch.Tensor) -> torch.Tensor | CVVDPResult:
    """:func:`cvvdp` of ``dist`` against a prepared reference (same values as the one-shot call).

    ``dist`` has the reference's shape; a reference prepared from one image (1, 3, H, W) also scores a batch
    (N, 3, H, W) of distorted images against it.
    """
    if not isinstance(state, CVVDPReference):
        raise TypeError(f"{_NAME}: state must come from prepare_cvvdp; got {type(state).__name__}")
    if not isinstance(dist, torch.Tensor):
        raise TypeError(f"{_NAME}: dist must be a torch.Tensor; got {type(dist).__name__}")
    image, batched = srgb_image(dist, "dist", _NAME, min_size=MIN_SIZE, min_size_reason=_MIN_REASON,
                                dtype=state.dtype)
    ref_shape = state.shape
    if image.shape[1:] != ref_shape[1:] or (image.shape[0] != ref_shape[0] and ref_shape[0] != 1):
        shape = tuple(dist.shape)
        want = ref_shape if state.batched else ref_shape[1:]
        raise ValueError(f"{_NAME}: dist must have the reference's shape {want}; got {shape}")
    if _compute_dtype(image) != state.dtype:
        raise TypeError(f"{_NAME}: dist must have the reference's kind of dtype ({state.dtype} computation); got "
                        f"{dist.dtype}")
    image = image.to(state.dtype)
    if image.device != state.bands[0].device:
        raise ValueError(f"{_NAME}: dist is on {image.device} but the reference on {state.bands[0].device}")
    grad = torch.is_grad_enabled() and (image.requires_grad or any(b.requires_grad for b in state.bands))
    out = spec.cvvdp_compare_ref(list(state.bands), list(state.sensitivity), image, state.display,
                                 state.return_map, _mask_diff(state.dtype, grad))
    return _finish(out, batched, state.return_map)


class CVVDPLoss(torch.nn.Module):
    """ColorVideoVDP as a loss: ``10 - JOD`` (0 for identical images), the mean over the batch
    (``reduction='mean'``) or per image (``'none'``). Keyword arguments are :func:`cvvdp`'s display parameters.
    Gradients flow to both inputs (floating, in [0, 1])."""

    def __init__(self, reduction: str = "mean", **display_params) -> None:
        super().__init__()
        if reduction not in ("mean", "none"):
            raise ValueError(f"reduction must be 'mean' or 'none'; got {reduction!r}")
        if "return_map" in display_params:
            raise TypeError("CVVDPLoss: return_map is not a loss parameter")
        _display(display_params.get("display", "standard_4k"),
                 {k: v for k, v in display_params.items() if k != "display"})  # fail early on bad parameters
        self.reduction = reduction
        self.display_params = display_params

    def forward(self, ref: torch.Tensor, dist: torch.Tensor) -> torch.Tensor:
        out = 10.0 - cvvdp(ref, dist, **self.display_params)
        return out.mean() if self.reduction == "mean" else out
