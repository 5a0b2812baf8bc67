"""ColorVideoVDP for still images (pycvvdp 0.5.7): functional form, cached reference, loss module.

The algorithm, its constants and the data files are in :mod:`fusedsim.families.cvvdp.twin` and
:mod:`fusedsim.families.cvvdp.data`. On the CPU, and for calls that need gradients or run in float64, the
pipeline is the PyTorch twin (differentiable, no host synchronisation). float32 calls where the backend is
Triton (GPU tensors) run the fused path: the display model is one kernel (``cvvdp_linear_dkl``, which reads
uint8 codes directly: no float copy of the images), then per band the pyramid's reductions (``cvvdp_reduce``)
and three kernels: the band's contrast, CSF sensitivity, masker input and |T' - R'| (``cvvdp_pair_band`` in a
one-shot call; a prepared reference stores its side per band with ``cvvdp_ref_band`` and the test side is
``cvvdp_test_band``), the masking blur's first pass (``cvvdp_masker_vblur``) and ``cvvdp_band_pool`` (the blur's
second pass, masking, soft clamp and per-row pooled sums, plus the difference map when asked for). The baseband
(a few pixels) and the final pooling stay the twin's PyTorch code. Each kernel is a registered op whose twin is
the corresponding twin stage. The fused path differs from the twin by float32 rounding only (|ΔJOD| ~1e-6).

Peak memory of the fused path: bands are made one at a time, finest first; each Gaussian level is made when its
band needs it and dropped once the next band is built, and every band's buffers are dropped before the next. In a
one-shot call the largest set alive at once is, at the finest band, two levels of each image (3 + 3/4 planes
each) and the band's six planes: about 13.5 float32 planes of the image size.

Precision: uint8 and float32 input is computed in float32, as pycvvdp does; on the corpus the JODs equal
pycvvdp's bit for bit on the CPU. float64 input is computed in float64 (for gradient checks), float16/bfloat16
in float32.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch

from fusedsim.core.state import cached
from fusedsim.metrics.srgb_input import SRGBPair, srgb_image, srgb_pair
import fusedsim.families.cvvdp.twin as spec
from fusedsim.families.cvvdp import ops
from fusedsim.families.cvvdp.data import CVVDPDisplay, cvvdp_display, cvvdp_params
from fusedsim.families.cvvdp.inputs import check_display_input

__all__ = ["CVVDPLoss", "CVVDPReference", "CVVDPResult", "check_cvvdp_params", "cvvdp", "cvvdp_stream",
           "prepare_cvvdp", "score_prepared_cvvdp"]

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


_GEOMETRY = ("resolution", "viewing_distance_m", "diagonal_inches")


def _display(display: str, overrides: dict) -> CVVDPDisplay:
    """The display model with ``overrides``. ``ppd`` sets the pixels per degree directly, so screen geometry given
    with it would have no effect: that is refused, naming the arguments, rather than dropped silently."""
    if overrides.get("ppd") is not None:
        ignored = [name for name in _GEOMETRY if overrides.get(name) is not None]
        if ignored:
            raise ValueError(f"{_NAME}: ppd sets the pixels per degree directly, so {', '.join(ignored)} would be "
                             f"ignored; pass either ppd or the geometry (resolution, viewing_distance_m, "
                             f"diagonal_inches)")
    return cvvdp_display(display, **overrides)


def check_cvvdp_params(*, display: str = "standard_4k") -> None:
    """Raise naming a display model :func:`cvvdp` does not know (before any image: the engine, ``--param``)."""
    cvvdp_display(display)


def _mask_diff(dtype: torch.dtype, grad: bool):
    """The masking step: the registered op (its Triton kernel on GPUs, the twin on the CPU) for float32 without
    gradients; otherwise the twin itself (differentiable, exact float64)."""
    if grad or dtype == torch.float64:
        return spec.cvvdp_mask_diff_ref
    return ops.cvvdp_mask_diff


def _fused(x: torch.Tensor, grad: bool) -> bool:
    """Whether the fused kernels run: float32 or uint8 codes without gradients, where the backend is Triton."""
    if grad or x.dtype not in (torch.float32, torch.uint8):
        return False
    return ops.cvvdp_linear_dkl.backend_for(x, compiled_cpu=False) == "triton"


def _is_codes(x: object) -> bool:
    return isinstance(x, torch.Tensor) and x.dtype == torch.uint8


def _check_codes(x: torch.Tensor, name: str) -> bool:
    """:func:`srgb_image`'s checks of uint8 ``x`` without its float conversion; whether ``x`` has a batch
    dimension. (Not through a meta copy: a meta tensor's division runs torch's Python reference, whose first use
    imports ``torch._dynamo``, 1.5-12 s in every new process.)"""
    return srgb_image(x, name, _NAME, min_size=MIN_SIZE, min_size_reason=_MIN_REASON, keep_uint8=True)[1]


def _nchw(x: torch.Tensor) -> torch.Tensor:
    return x if x.dim() == 4 else x.unsqueeze(0)


def _checked_pair(ref: object, dist: object, dtype: torch.dtype, display: CVVDPDisplay) -> SRGBPair:
    """:func:`srgb_pair`, except that uint8 pairs bound for the fused kernels stay uint8 codes: the display-model
    kernel reads them directly (a float copy of the two images would be 6 planes of the image size). HDR displays
    take floating input of their EOTF (:mod:`.inputs` checks it; the shape checks are :func:`srgb_pair`'s)."""
    if display.eotf != "sRGB":
        check_display_input(ref, "ref", display)
        check_display_input(dist, "dist", display)
        return srgb_pair(ref, dist, _NAME, min_size=MIN_SIZE, min_size_reason=_MIN_REASON, dtype=dtype,
                         check_range=False)
    if dtype == torch.float32 and _is_codes(ref) and _is_codes(dist) and ref.device == dist.device:
        ref_batched = _check_codes(ref, "ref")
        dist_batched = _check_codes(dist, "dist")
        if ref.shape == dist.shape and _fused(ref, False):
            return SRGBPair(_nchw(ref), _nchw(dist), ref_batched and dist_batched)
    return srgb_pair(ref, dist, _NAME, min_size=MIN_SIZE, min_size_reason=_MIN_REASON, dtype=dtype)


def _checked_image(image: object, name: str, dtype: torch.dtype, display: CVVDPDisplay,
                   grad: bool = False) -> tuple[torch.Tensor, bool]:
    """:func:`srgb_image`, keeping uint8 codes for the fused kernels as :func:`_checked_pair` does (not where
    gradients, wanted by the other side, send the call to the twin); HDR input as :func:`_checked_pair`."""
    if display.eotf != "sRGB":
        check_display_input(image, name, display)
        return srgb_image(image, name, _NAME, min_size=MIN_SIZE, min_size_reason=_MIN_REASON, dtype=dtype,
                          check_range=False)
    if dtype == torch.float32 and not grad and _is_codes(image):
        batched = _check_codes(image, name)
        if _fused(image, False):
            return _nchw(image), batched
    return srgb_image(image, name, _NAME, min_size=MIN_SIZE, min_size_reason=_MIN_REASON, dtype=dtype)


def _working(x: torch.Tensor) -> torch.Tensor:
    """The image in its compute dtype; uint8 codes stay codes (the fused path's display model reads them)."""
    return x if x.dtype == torch.uint8 else x.to(_compute_dtype(x))


def _dkl(image: torch.Tensor, display: CVVDPDisplay) -> torch.Tensor:
    return ops.display_model(image, display)


def _pixels_per_level(height: int, width: int, n_levels: int) -> tuple[int, ...]:
    sizes = []
    for _ in range(n_levels):
        sizes.append(height * width)
        height, width = (height + 1) // 2, (width + 1) // 2
    return tuple(sizes)


def _band_scale(b: int) -> float:
    return 2.0 if b > 0 else 1.0  # middle bands are doubled (the baseband is handled apart)


@cached(maxsize=8)
def _baseband_lut(device: torch.device) -> torch.Tensor:
    return spec.cvvdp_sensitivity_lut_ref(spec._BASEBAND_RHO, torch.empty(0, dtype=torch.float32)).to(device)


def _baseband_contrast(level: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The baseband's contrast and mean background, as :func:`spec.cvvdp_contrast_pyramid_ref`."""
    bkg = level[:, :1].clamp(min=0.01).mean(dim=(-2, -1), keepdim=True)
    return (level / bkg).clamp(max=1000.0), bkg


def _baseband_sensitivity(bkg: torch.Tensor) -> torch.Tensor:
    return spec.cvvdp_sensitivity_from_lut_ref(torch.log10(bkg), _baseband_lut(bkg.device))


def _prepare_fused(ref: torch.Tensor, display: CVVDPDisplay) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """:func:`spec.cvvdp_prepare_ref` through the fused kernels (contrast and sensitivity are views of one
    (N, 6, h, w) buffer per band)."""
    freqs = spec.cvvdp_bands(ref.shape[-2], ref.shape[-1], display.ppd)
    g = _dkl(ref, display)
    bands, sens = [], []
    for b in range(len(freqs) - 1):
        g_next = ops.cvvdp_reduce(g)
        both = ops.cvvdp_ref_band(g, g_next, freqs[b], _band_scale(b))
        g = g_next  # level b is read by its band and the finer one only: dropped here (peak memory)
        bands.append(both[:, :3])
        sens.append(both[:, 3:])
    contrast, bkg = _baseband_contrast(g)
    bands.append(contrast)
    sens.append(_baseband_sensitivity(bkg))
    return bands, sens


@cached(maxsize=64)
def _pixels(sizes: tuple, device: torch.device) -> torch.Tensor:
    return torch.tensor(sizes, dtype=torch.float32, device=device)


def _pool_band(band: torch.Tensor, return_map: bool, sums: list, diffs: list) -> None:
    """Masking and pooling of one band (``cvvdp_test_band``'s or ``cvvdp_pair_band``'s output): appends its
    pooled sums (N, 3) and, with ``return_map``, its difference map."""
    h, w = band.shape[-2:]
    blur = spec.masking_blur_applies(h, w)
    masker = ops.cvvdp_masker_vblur(band[:, :3]) if blur else band[:, :3]
    out = ops.cvvdp_band_pool(masker, band, blur, return_map)
    sums.append(out[..., -1].sum(dim=-1))
    if return_map:
        diffs.append(out[..., :-1])


def _finish_fused(test_base: torch.Tensor, ref_base: torch.Tensor, base_sens: torch.Tensor, sums: list,
                  diffs: list, shape: tuple[int, ...], return_map: bool):
    """The baseband from the coarsest test level, then the twin's pooling (and heatmap) of every band."""
    params = cvvdp_params()
    contrast, _ = _baseband_contrast(test_base)
    d = (contrast - ref_base).abs() * base_sens
    beta = spec._t(params.beta, d)
    sums.append(spec.safe_pow(d, beta).sum(dim=(-2, -1)))
    pixels = _pixels(_pixels_per_level(shape[-2], shape[-1], len(sums)), d.device)
    jod = spec.cvvdp_pool_ref(spec.safe_pow(torch.stack(sums, dim=-1) / pixels, 1 / beta), params)
    if not return_map:
        return jod
    diffs.append(d)
    return jod, spec.cvvdp_heatmap_ref(diffs, params, expand=lambda x, size: ops.cvvdp_expand(x, *size))


def _compare_fused(ref_bands: list[torch.Tensor], sens: list[torch.Tensor], dist: torch.Tensor,
                   display: CVVDPDisplay, return_map: bool):
    """:func:`spec.cvvdp_compare_ref` through the fused kernels (levels and buffers as :func:`_cvvdp_fused`)."""
    g = _dkl(dist, display)
    sums, diffs = [], []
    for b in range(len(ref_bands) - 1):
        g_next = ops.cvvdp_reduce(g)
        band = ops.cvvdp_test_band(g, g_next, ref_bands[b], sens[b], _band_scale(b))
        g = g_next  # level b is read by this band and the finer one only: dropped before the masking buffers
        _pool_band(band, return_map, sums, diffs)
        del band  # not alive while the next band is made
    return _finish_fused(g, ref_bands[-1], sens[-1], sums, diffs, tuple(dist.shape), return_map)


def _cvvdp_fused(ref: torch.Tensor, dist: torch.Tensor, display: CVVDPDisplay, return_map: bool):
    """:func:`spec.cvvdp_ref` through the fused kernels, band by band: the reference's side of a band stays in
    registers (``cvvdp_pair_band``), so no reference pyramid is stored, and only two Gaussian levels of each
    image are alive at a time."""
    freqs = spec.cvvdp_bands(ref.shape[-2], ref.shape[-1], display.ppd)
    ref_g, test_g = _dkl(ref, display), _dkl(dist, display)
    sums, diffs = [], []
    for b in range(len(freqs) - 1):
        ref_next, test_next = ops.cvvdp_reduce(ref_g), ops.cvvdp_reduce(test_g)
        band = ops.cvvdp_pair_band(ref_g, ref_next, test_g, test_next, freqs[b], _band_scale(b))
        ref_g, test_g = ref_next, test_next  # level b of both images dropped before the masking buffers
        _pool_band(band, return_map, sums, diffs)
        del band  # not alive while the next band is made
    ref_base, bkg = _baseband_contrast(ref_g)
    return _finish_fused(test_g, ref_base, _baseband_sensitivity(bkg), sums, diffs, tuple(dist.shape), return_map)


def _prepare(ref: torch.Tensor, display: CVVDPDisplay, grad: bool):
    if _fused(ref, grad):
        return _prepare_fused(ref, display)
    return spec.cvvdp_prepare_ref(ref, display)


def _compare(bands, sens, dist: torch.Tensor, display: CVVDPDisplay, return_map: bool, grad: bool):
    if _fused(dist, grad):
        return _compare_fused(list(bands), list(sens), dist, display, return_map)
    return spec.cvvdp_compare_ref(list(bands), list(sens), dist, display, return_map, _mask_diff(dist.dtype, grad))


def _finish(out, batched: bool, return_map: bool):
    if return_map:
        jod, dmap = out
        return CVVDPResult(jod, dmap) if batched else CVVDPResult(jod[0], dmap[0])
    return out if batched else out[0]


def cvvdp(ref: torch.Tensor, dist: torch.Tensor, *, display: str = "standard_4k",
          peak_luminance: float | None = None, contrast: float | None = None, e_ambient: float | None = None,
          k_refl: float | None = None, exposure: float | None = None, ppd: float | None = None,
          resolution: tuple[int, int] | None = None, viewing_distance_m: float | None = None,
          diagonal_inches: float | None = None, return_map: bool = False, fps: float | None = None,
          frames_per_block: int | None = None) -> torch.Tensor | CVVDPResult:
    """ColorVideoVDP (v0.5.7) quality of each (reference, distorted) still image or video clip in JOD: 10 = identical.

    Same value as ``pycvvdp.cvvdp(display_name=display).predict(dist, ref)`` (which takes the test first; for
    video ``dim_order="BFCHW", frames_per_second=fps``).

    Args:
        ref, dist: images (N, 3, H, W) or (3, H, W), at least 2 px per side, encoded as the display's EOTF
            says (:mod:`.inputs`): sRGB displays take uint8 0..255 or floating in [0, 1]; PQ displays floating PQ
            (SMPTE ST 2084) code values in [0, 1]; HLG displays floating HLG code values in [0, 1]; linear displays
            floating absolute linear RGB in cd/m². Integer input for a non-sRGB display raises ``TypeError``;
            out-of-range values (PQ/HLG outside [0, 1], linear non-finite) ``ValueError`` on CPU tensors (GPU
            tensors are not read; PQ/HLG values there are clamped to [0, 1], as pycvvdp does).
        display: a display model of pycvvdp's ``display_models.json``: sRGB ones (``standard_4k``,
            ``standard_fhd``, ``standard_phone``, ...), PQ (``standard_hdr_pq``, ``65inch_hdr_pq_1Knit``, ...),
            HLG (``standard_hdr_hlg``, ``iphone_14_pro_hdr``, ...) and linear (``standard_hdr_linear``, ...); an
            unknown name lists them.
        peak_luminance, contrast, e_ambient, k_refl, exposure: override the display's photometry: peak
            luminance (cd/m²), contrast (x:1, sets the black level), ambient illuminance (lux) and screen
            reflectivity (reflected light ``e_ambient / pi * k_refl``), exposure multiplier of linear values.
        ppd, resolution, viewing_distance_m, diagonal_inches: override the geometry: pixels per degree directly,
            or the screen resolution (W, H), viewing distance and diagonal from which it is derived (the model's
            value for any not given); ``ppd`` with any of the other three raises ``ValueError``.
        return_map: also return the per-pixel difference map (for video the heat-map video (N, T, 1, H, W)).
        fps: frames per second of video input (encoded as for images): ``ref``, ``dist`` (N, T, 3, H, W) clips, or
            two iterables of frames
            (3, H, W) or frame blocks (B, 3, H, W) / (N, B, 3, H, W), scored as they come with memory bounded in the
            clip's length (the temporal channels; a clip of one frame is a still image, as in pycvvdp).
        frames_per_block: video frames processed together (default: about 16 Mpixel per block on the CPU, 32 on a GPU).

    Returns:
        float tensor (N,) of JODs (0-d for unbatched images), or :class:`CVVDPResult` ``(jod, diff_map)``.
    """
    disp = _display(display, {"peak_luminance": peak_luminance, "contrast": contrast, "e_ambient": e_ambient,
                                  "k_refl": k_refl, "exposure": exposure, "ppd": ppd, "resolution": resolution,
                                  "viewing_distance_m": viewing_distance_m, "diagonal_inches": diagonal_inches})
    if fps is not None or _is_video(ref) or _is_video(dist):
        return _cvvdp_video(ref, dist, disp, fps, bool(return_map), frames_per_block)
    if frames_per_block is not None:
        raise ValueError(f"{_NAME}: frames_per_block applies to video (with fps); got it for images")
    return _cvvdp_display_image(ref, dist, disp, bool(return_map))


def _is_video(x: object) -> bool:
    """Video without ``fps``: a 5-D tensor (N, T, 3, H, W) (refused there, naming fps)."""
    return isinstance(x, torch.Tensor) and x.dim() == 5


def _cvvdp_video(ref, dist, disp: CVVDPDisplay, fps, return_map: bool, frames_per_block):
    """The video path (:mod:`.video`): 5-D tensors or iterables of frames, at ``fps``. 5-D clips of one frame are
    still images (pycvvdp scores them so, whatever the frame rate), returned as (N,)."""
    from fusedsim.families.cvvdp.video import cvvdp_video

    if fps is None:
        raise ValueError(f"{_NAME}: video (N, T, 3, H, W) or frame iterators need fps (frames per second)")
    if isinstance(ref, torch.Tensor) and ref.dim() != 5 or isinstance(dist, torch.Tensor) and dist.dim() != 5:
        raise ValueError(f"{_NAME}: fps is for video: ref and dist must be (N, T, 3, H, W) or iterables of frames; "
                         f"got ref {_shape_of(ref)} and dist {_shape_of(dist)} (add the frame axis for one clip)")
    if isinstance(fps, bool) or not isinstance(fps, (int, float)) or not math.isfinite(fps) or fps <= 0:
        raise ValueError(f"{_NAME}: fps must be a positive finite number of frames per second; got {fps!r}")
    out = cvvdp_video(ref, dist, disp, float(fps), return_map, frames_per_block)
    return CVVDPResult(*out) if return_map else out


def cvvdp_stream(*, fps: float, display: str = "standard_4k", return_map: bool = False, **display_params):
    """A :class:`~fusedsim.families.cvvdp.video.CVVDPVideoStream` scoring a clip (or N clips of one size) as its
    frames come: ``stream.push(ref_frames, dist_frames)`` for each block of frames ((N, B, 3, H, W), (B, 3, H, W)
    or (3, H, W)), then ``stream.finish()`` for the JOD (N,). ``display`` and ``display_params`` (the display
    keywords of :func:`cvvdp`) as for :func:`cvvdp`; memory stays bounded whatever the clip's length."""
    from fusedsim.families.cvvdp.video import CVVDPVideoStream

    if isinstance(fps, bool) or not isinstance(fps, (int, float)) or not math.isfinite(fps) or fps <= 0:
        raise ValueError(f"{_NAME}: fps must be a positive finite number of frames per second; got {fps!r}")
    return CVVDPVideoStream(_display(display, display_params), float(fps), bool(return_map))


def _shape_of(x: object) -> str:
    return str(tuple(x.shape)) if isinstance(x, torch.Tensor) else type(x).__name__


def _cvvdp_display_image(ref, dist, disp: CVVDPDisplay, return_map: bool):
    """The still-image metric on a resolved display (see :func:`cvvdp`)."""
    dtype = torch.float64 if isinstance(ref, torch.Tensor) and ref.dtype == torch.float64 else torch.float32
    pair = _checked_pair(ref, dist, dtype, disp)
    r, d = _working(pair.ref), _working(pair.dist)
    grad = torch.is_grad_enabled() and (r.requires_grad or d.requires_grad)
    if _fused(r, grad):
        out = _cvvdp_fused(r, d, disp, bool(return_map))
    else:
        bands, sens = _prepare(r, disp, grad)
        out = _compare(bands, sens, d, disp, bool(return_map), grad)
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
    image, batched = _checked_image(ref, "ref", dtype, disp)
    image = _working(image)
    bands, sens = _prepare(image, disp, torch.is_grad_enabled() and image.requires_grad)
    return CVVDPReference(tuple(bands), tuple(sens), disp, tuple(image.shape), batched, _compute_dtype(image),
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
    ref_grad = torch.is_grad_enabled() and any(b.requires_grad for b in state.bands)
    image, batched = _checked_image(dist, "dist", state.dtype, state.display, ref_grad)
    ref_shape = state.shape
    if image.shape[1:] != ref_shape[1:] or (image.shape[0] != ref_shape[0] and ref_shape[0] != 1):
        shape = tuple(dist.shape)
        want = ref_shape if state.batched else ref_shape[1:]
        raise ValueError(f"{_NAME}: dist must have the reference's shape {want}; got {shape}")
    if _compute_dtype(image) != state.dtype:
        raise TypeError(f"{_NAME}: dist must have the reference's kind of dtype ({state.dtype} computation); got "
                        f"{dist.dtype}")
    image = _working(image)
    if image.device != state.bands[0].device:
        raise ValueError(f"{_NAME}: dist is on {image.device} but the reference on {state.bands[0].device}")
    grad = ref_grad or (torch.is_grad_enabled() and image.requires_grad)
    out = _compare(state.bands, state.sensitivity, image, state.display, state.return_map, grad)
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
