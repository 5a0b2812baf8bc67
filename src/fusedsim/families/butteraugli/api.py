"""Butteraugli (libjxl 0.7, the ``butteraugli_main`` tool): max-norm, the tool's "3-norm" and the distance map.

Functional API :func:`butteraugli`, cached-reference pair :func:`prepare_butteraugli` /
:func:`score_prepared_butteraugli` (used by ``fusedsim.Metric("butteraugli")``), and :class:`ButteraugliLoss`.
The algorithm is the twin in :mod:`fusedsim.families.butteraugli.twin`; on CUDA tensors every hook of its
pipeline runs as a Triton op in float32, the reference's own precision: blurs, Malta filters and fuzzy erosion
(:mod:`fusedsim.families.butteraugli.blur_kernel`, :mod:`fusedsim.families.butteraugli.malta_kernel`, :mod:`fusedsim.families.butteraugli.erosion_kernel`)
and one fused kernel per element-wise stage (:mod:`fusedsim.families.butteraugli.stages_kernel`: uint8 decoding through a table,
opsin dynamics, frequency-separation steps, the final combination with the half-resolution mix). The CPU path
computes in float64.

Gradients: when an input requires grad, the whole pipeline runs on the twin's PyTorch filters (autograd, any
device); the Triton kernels are forward-only.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from fusedsim.core.state import cached
from fusedsim.metrics.srgb_input import srgb_image, srgb_pair
from fusedsim.families.butteraugli import ops
from fusedsim.families.butteraugli.twin import (
    MIN_SIZE,
    TWIN_FILTERS,
    ButteraugliFilters,
    ButteraugliReference,
    butteraugli_norms_ref,
    diffmap_prepared_ref,
    prepare_reference_ref,
    srgb_to_linear_ref,
)

__all__ = ["ButteraugliLoss", "ButteraugliResult", "ButteraugliState", "butteraugli", "check_butteraugli_params",
           "prepare_butteraugli", "score_prepared_butteraugli"]

_NAME = "butteraugli"
_MIN_REASON = "libjxl's butteraugli returns an all-zero map below 8 px"


class ButteraugliResult(NamedTuple):
    """Butteraugli of a batch: ``max_norm`` (N,) the map's maximum (the tool's distance), ``pnorm3`` (N,) float64
    the tool's "3-norm" (mean over p = 3, 6, 12 of ``(mean d^p)^(1/p)``), ``distmap`` (N, H, W) the per-pixel
    distance. Unbatched (3, H, W) inputs give 0-d norms and an (H, W) map."""

    max_norm: torch.Tensor
    pnorm3: torch.Tensor
    distmap: torch.Tensor


class ButteraugliState(NamedTuple):
    """A prepared reference: its bands and masks (:class:`ButteraugliReference`), the (N, 3, H, W) shape it was
    prepared for, whether it was batched, its dtype and ``hf_asymmetry``."""

    reference: ButteraugliReference
    shape: tuple[int, ...]
    batched: bool
    dtype: torch.dtype
    hf_asymmetry: float


def _check_params(intensity_target: float, hf_asymmetry: float) -> tuple[float, float]:
    out = []
    for name, value in (("intensity_target", intensity_target), ("hf_asymmetry", hf_asymmetry)):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{_NAME}: {name} must be a positive number; got {type(value).__name__}")
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"{_NAME}: {name} must be a finite number > 0; got {value!r}")
        out.append(float(value))
    return out[0], out[1]


def check_butteraugli_params(*, intensity_target: float = 80.0, hf_asymmetry: float = 0.8) -> None:
    """Raise naming a parameter :func:`butteraugli` refuses (before any image: the engine, ``--param``)."""
    _check_params(intensity_target, hf_asymmetry)


def _compute_dtype(device: torch.device) -> torch.dtype:
    """float64 on the CPU (the parity path); float32 elsewhere, libjxl's own precision."""
    return torch.float64 if device.type == "cpu" else torch.float32


def _filters(*tensors: torch.Tensor) -> ButteraugliFilters:
    """The Triton ops when the backend chosen for ``tensors`` is Triton (one choice per call, not per op) and no
    gradient is needed; on CPU tensors under ``auto``, the twins with the compiled CPU filters (the registry's
    ``cpu=`` policy); the twins otherwise."""
    if any(t.requires_grad for t in tensors):
        return TWIN_FILTERS
    backend = ops.butteraugli_blur.backend_for(*tensors)
    if backend == "triton":
        return _OP_FILTERS
    if backend == "cpu":
        return _cpu_filters()
    return TWIN_FILTERS  # the reference backend, and meta tensors (shapes only)


def _op(stage: str):
    """The op of a pipeline stage (``ButteraugliFilters`` field name -> ``butteraugli_<stage>``)."""
    return getattr(ops, f"butteraugli_{stage}")


#: every stage's Triton op (bound methods: the kernel modules and Triton are imported on first launch)
_OP_FILTERS = ButteraugliFilters(**{name: _op(name).triton for name in ButteraugliFilters._fields})


def _cpu_filters() -> ButteraugliFilters:
    """The twins with the compiled CPU implementations of the ops that have one (the registry's ``cpu=``: the same
    operations; the twins alone where numba is missing)."""
    names = ("blur", "malta", "malta_add", "erosion", "opsin", "bands", "combine")
    compiled = {name: _op(name).cpu_impl() for name in names}
    return TWIN_FILTERS._replace(**{name: fn for name, fn in compiled.items() if fn is not None})


def _code_standins(*images):
    """For uint8 images on a GPU (all of them): float32 meta tensors of their shapes, and True. The input checks run
    on these (they read only shapes; uint8 needs no range check) instead of making the float copy they return for
    uint8: the decoding kernel reads the codes themselves. Otherwise: the images, and False."""
    first = images[0]
    if all(isinstance(x, torch.Tensor) and x.dtype == torch.uint8 and x.device == first.device for x in images) \
            and first.device.type not in ("cpu", "meta"):
        return tuple(torch.empty(x.shape, dtype=torch.float32, device="meta") for x in images), True
    return images, False


def _linear(image: torch.Tensor, raw: torch.Tensor, filters: ButteraugliFilters) -> torch.Tensor:
    """Linear RGB in the compute dtype; float32 paths decode uint8 codes straight from ``raw`` (one table lookup;
    ``image`` is then only a checked stand-in, see :func:`_code_standins`). The compiled CPU path (float64) looks
    uint8 codes up in the twin's float64 decoding of the 256 codes (``image`` is ``codes / 255`` in float64)."""
    dtype = _compute_dtype(raw.device)
    codes = raw if raw.dim() == 4 else raw.unsqueeze(0)
    if raw.dtype == torch.uint8 and dtype == torch.float32:
        return filters.linear(codes)
    if raw.dtype == torch.uint8 and raw.device.type == "cpu" and filters is not TWIN_FILTERS:
        from fusedsim.core.cpu.table import lookup_u8

        return lookup_u8(codes, _u8_linear64())
    return filters.linear(image.to(dtype))


@cached(maxsize=1)
def _u8_linear64() -> torch.Tensor:
    """(256,) float64: :func:`srgb_to_linear_ref` of every code as the metric feeds it (``code / 255.0``,
    float64). PyTorch's vector ``pow`` decodes every code, as it does all of an image but its last few values."""
    return srgb_to_linear_ref(torch.arange(256, dtype=torch.float64) / 255.0)


def _expand(value, n: int):
    """The prepared reference broadcast to a batch of n distorted images (views, no copies)."""
    if isinstance(value, torch.Tensor):
        return value.expand(n, *value.shape[1:])
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(_expand(v, n) for v in value))
    return value


def prepare_butteraugli(ref: torch.Tensor, *, intensity_target: float = 80.0, hf_asymmetry: float = 0.8,
                        check_range: bool | None = None) -> ButteraugliState:
    """Prepare a reference (N, 3, H, W) or (3, H, W), sRGB uint8 or float in [0, 1], for
    :func:`score_prepared_butteraugli`: its opsin image, frequency bands and masking maps at both resolutions."""
    intensity_target, hf_asymmetry = _check_params(intensity_target, hf_asymmetry)
    (checked,), codes = _code_standins(ref)
    image, batched = srgb_image(checked, "ref", _NAME, min_size=MIN_SIZE, min_size_reason=_MIN_REASON,
                                dtype=_compute_dtype(ref.device) if isinstance(ref, torch.Tensor) else torch.float32,
                                check_range=False if codes else check_range)
    filters = _filters(ref)
    linear = _linear(image, ref, filters)
    prepared = prepare_reference_ref(linear, intensity_target, filters)
    return ButteraugliState(prepared, tuple(image.shape), batched, linear.dtype, hf_asymmetry)


def score_prepared_butteraugli(state: ButteraugliState, dist: torch.Tensor, *,
                               check_range: bool | None = None) -> ButteraugliResult:
    """Butteraugli of ``dist`` against a prepared reference. ``dist`` has the reference's shape, or is a batch
    (N, 3, H, W) of the reference's size when the reference is a single image."""
    if not isinstance(state, ButteraugliState):
        raise TypeError(f"{_NAME}: state must come from prepare_butteraugli; got {type(state).__name__}")
    (checked,), codes = _code_standins(dist)
    image, batched = srgb_image(checked, "dist", _NAME, min_size=MIN_SIZE, min_size_reason=_MIN_REASON,
                                dtype=state.dtype, check_range=False if codes else check_range)
    n_ref = state.shape[0]
    if image.shape[1:] != state.shape[1:] or (image.shape[0] != n_ref and n_ref != 1):
        raise ValueError(f"{_NAME}: dist must match the reference's shape {state.shape} (or be a batch of its "
                         f"size when the reference is one image); got {tuple(image.shape)}")
    reference = state.reference
    if image.shape[0] != n_ref:
        reference = _expand(reference, image.shape[0])
    if reference.full.mask.device != dist.device:
        raise ValueError(f"{_NAME}: dist is on {dist.device} but the reference was prepared on "
                         f"{reference.full.mask.device}")
    filters = _filters(dist, reference.full.mask)
    linear = _linear(image, dist, filters)
    diffmap = diffmap_prepared_ref(reference, linear, state.hf_asymmetry, filters)
    max_norm, pnorm3 = butteraugli_norms_ref(diffmap, filters)
    if not (batched or state.batched):
        return ButteraugliResult(max_norm[0], pnorm3[0], diffmap[0])
    return ButteraugliResult(max_norm, pnorm3, diffmap)


def butteraugli(ref: torch.Tensor, dist: torch.Tensor, *, intensity_target: float = 80.0,
                hf_asymmetry: float = 0.8, check_range: bool | None = None) -> ButteraugliResult:
    """Butteraugli distance of sRGB pairs, as libjxl 0.7's ``butteraugli_main`` computes it.

    Args:
        ref, dist: (N, 3, H, W) or (3, H, W), sRGB-encoded, uint8 0..255 or float in [0, 1]; H, W >= 8.
        intensity_target: display luminance of sRGB white in nits (``butteraugli_main`` default 80; the libjxl
            C API's default is 255).
        hf_asymmetry: weight of new high-frequency artefacts against lost detail (``butteraugli_main``
            hard-codes 0.8; 1.0 is neutral).
        check_range: check float inputs lie in [0, 1] (default: on CPU tensors only, which needs no sync).

    Returns:
        :class:`ButteraugliResult` ``(max_norm, pnorm3, distmap)``; lower is better, 0 for identical images.
    """
    intensity_target, hf_asymmetry = _check_params(intensity_target, hf_asymmetry)
    checked, codes = _code_standins(ref, dist)
    pair = srgb_pair(*checked, _NAME, min_size=MIN_SIZE, min_size_reason=_MIN_REASON,
                     dtype=_compute_dtype(ref.device) if isinstance(ref, torch.Tensor) else torch.float32,
                     check_range=False if codes else check_range)
    filters = _filters(ref, dist)
    ref_lin, dist_lin = _linear(pair.ref, ref, filters), _linear(pair.dist, dist, filters)
    prepared = prepare_reference_ref(ref_lin, intensity_target, filters)
    diffmap = diffmap_prepared_ref(prepared, dist_lin, hf_asymmetry, filters)
    max_norm, pnorm3 = butteraugli_norms_ref(diffmap, filters)
    if not pair.batched:
        return ButteraugliResult(max_norm[0], pnorm3[0], diffmap[0])
    return ButteraugliResult(max_norm, pnorm3, diffmap)


class ButteraugliLoss(torch.nn.Module):
    """Butteraugli as a loss: ``loss(ref, dist)`` -> the batch mean of the chosen norm (``"pnorm3"``, smooth, or
    ``"max_norm"``). Differentiable with respect to both images through the PyTorch twin (any device); float
    inputs in [0, 1]."""

    def __init__(self, intensity_target: float = 80.0, hf_asymmetry: float = 0.8, norm: str = "pnorm3") -> None:
        super().__init__()
        self.intensity_target, self.hf_asymmetry = _check_params(intensity_target, hf_asymmetry)
        if norm not in ("pnorm3", "max_norm"):
            raise ValueError(f"{_NAME}: norm must be 'pnorm3' or 'max_norm'; got {norm!r}")
        self.norm = norm

    def forward(self, ref: torch.Tensor, dist: torch.Tensor) -> torch.Tensor:
        result = butteraugli(ref, dist, intensity_target=self.intensity_target, hf_asymmetry=self.hf_asymmetry)
        return getattr(result, self.norm).mean()

    def extra_repr(self) -> str:
        return f"intensity_target={self.intensity_target}, hf_asymmetry={self.hf_asymmetry}, norm={self.norm!r}"
