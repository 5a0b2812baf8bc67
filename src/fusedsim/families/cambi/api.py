"""Public ``cambi``: libvmaf's CAMBI banding score (feature ``cambi``), bit-exact on CPU and GPU."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from fusedsim.core.sample_range import check_sample_range
from fusedsim.families.cambi.ops import cambi_scales
from fusedsim.families.cambi.settings import CambiSettings, cambi_settings, resize_indices
from fusedsim.families.cambi.twin import combine_scales
from fusedsim.families.vmaf.feature_requests import EXTRACTOR_OPTIONS, FeatureRequest
from fusedsim.families.vmaf.inputs import check_bit_depth, to_frames

__all__ = ["cambi", "SUPPORTED_BIT_DEPTHS"]

SUPPORTED_BIT_DEPTHS = (8, 9, 10, 12, 16)
_DTYPE_MAX = {torch.uint8: 255, torch.int16: 32767, torch.uint16: 65535, torch.int32: 2**31 - 1,
              torch.int64: 2**63 - 1}
_DEFAULT_TOPK, _DEFAULT_EOTF = 0.6, "bt1886"


def _checked_options(options: dict[str, Any]) -> dict[str, Any]:
    """Every option by libvmaf's name, typed and within libvmaf's range (TypeError / ValueError naming it)."""
    table = {o.name: o for o in EXTRACTOR_OPTIONS["cambi"]}
    values = {}
    for name, option in table.items():
        value = options.get(name, option.default)
        if option.kind is bool:
            ok = isinstance(value, (bool, np.bool_))
        elif option.kind is int:
            ok = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
        elif option.kind is float:
            ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
        else:
            ok = isinstance(value, str) or (value is None and option.default is None)
        if not ok:
            raise TypeError(f"cambi option {name} takes {option.kind.__name__}; got {type(value).__name__}")
        if name in options and value != option.default:
            if not option.supported:
                raise ValueError(f"cambi option {name} is not supported (heat maps are not written)")
            option.parse("cambi", value)  # libvmaf's range: ValueError naming the option
        values[name] = option.kind(value) if value is not None else None
    return values


def _frames(x: object, name: str, bit_depth: int) -> torch.Tensor:
    """Integer frames the kernels read, their samples checked: uint16 (which few torch and Triton ops take) as
    int16 up to 15 bits, as int32 at 16 bits."""
    t = to_frames(x, name)
    top = (1 << bit_depth) - 1
    if _DTYPE_MAX.get(t.dtype, 0) < top:
        raise TypeError(f"{name} has dtype {t.dtype}, which cannot hold {bit_depth}-bit samples (up to {top}); use "
                        f"{'uint8' if bit_depth == 8 else 'uint16'} (or int32)")
    if t.dtype == torch.uint16:
        t = t.view(torch.int16)  # a sample of 2**15 or more turns negative: out of range below 16 bits
        if bit_depth == 16:
            return t.to(torch.int32) & 0xFFFF
        check_sample_range(t, name, bit_depth, wrapped=True)
        return t
    check_sample_range(t, name, bit_depth)
    return t


def _resized(frames: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """libvmaf's nearest-neighbour resampling to ``height`` x ``width`` (a gather; none at the same size)."""
    h, w = frames.shape[-2:]
    if (h, w) == (height, width):
        return frames
    rows = torch.from_numpy(resize_indices(h, height)).to(frames.device)
    cols = torch.from_numpy(resize_indices(w, width)).to(frames.device)
    return frames.index_select(-2, rows).index_select(-1, cols).contiguous()


_TVI: dict[tuple[tuple[int, ...], torch.device], torch.Tensor] = {}


def _score(frames: torch.Tensor, bit_depth: int, settings: CambiSettings) -> torch.Tensor:
    frames = _resized(frames, settings.enc_height, settings.enc_width)
    key = (settings.tvi, frames.device)
    if key not in _TVI:  # made once per device: a tensor built from a list on a GPU is a synchronising copy
        _TVI[key] = torch.tensor(settings.tvi, dtype=torch.int32, device=frames.device)
    tvi = _TVI[key]
    scales = cambi_scales(frames, tvi, bit_depth, settings.anti_dither, settings.window, settings.vlt_luma,
                          settings.mask_threshold, settings.topk, settings.high_res)
    return combine_scales(scales, settings.window, float("inf"))


def cambi(dist: torch.Tensor | np.ndarray, bit_depth: int, *, ref: torch.Tensor | np.ndarray | None = None,
          **options: Any) -> dict[str, torch.Tensor]:
    """libvmaf's CAMBI banding score per frame (feature ``cambi``), bit-identical to libvmaf 3.2.0.

    Args:
        dist: integer luma of the distorted (encoded) video, ``(H, W)`` or ``(N, H, W)``, as a torch tensor (any
            device) or numpy array; the dtype must hold the bit depth. Width or height (of the encode size) at
            least 216. A sample above ``2**bit_depth - 1`` is refused, as libvmaf refuses it.
        bit_depth: 8, 9, 10, 12 or 16.
        ref: the source luma, same shape and device; needed with ``full_ref=True`` only.
        options: libvmaf's cambi options by their names, with libvmaf's defaults and ranges: ``cambi_max_val``
            (1000), ``enc_width``, ``enc_height`` (0: the input size; both or neither), ``enc_bitdepth`` (0: the
            input's; below 10 anti-dithers), ``src_width``, ``src_height`` (0: the input size; ``full_ref``),
            ``window_size`` (65, scaled to the encode size), ``topk`` / ``cambi_topk`` (0.6; ``topk`` wins when
            not at its default), ``tvi_threshold`` (0.019), ``cambi_vis_lum_threshold`` (0 cd/m2),
            ``max_log_contrast`` (2: 4 contrast steps), ``eotf`` / ``cambi_eotf`` (``bt1886`` or ``pq``;
            ``cambi_eotf`` wins when not at its default), ``cambi_high_res_speedup`` (0; 1080/1440/2160 halve
            scale 0 from that encode size up), ``full_ref`` (False).

    Returns:
        ``{name: float64 tensor}`` each ``(N,)`` (``()`` for ``(H, W)`` input) on the input's device: ``cambi``
        with libvmaf's suffix of the non-default options (``cambi_hrs_1080_cmxv_17_vlt_0.06``), and with
        ``full_ref`` also ``cambi_source`` (the source's score) and ``cambi_full_reference`` (``max(0, dist -
        source)``), each clipped at ``cambi_max_val``.

    Raises ValueError for sizes libvmaf refuses (both encode sides under 216, a window too large for its
    reciprocal table) and for a scale narrower than half the window (libvmaf reads outside the picture there).
    Dispatched through the op ``cambi_scales``: CUDA tensors run the Triton kernels, CPU tensors the numba kernel
    (or the PyTorch twin without numba); all give the same bits.
    """
    bd = check_bit_depth(bit_depth, SUPPORTED_BIT_DEPTHS, "cambi")
    unknown = sorted(set(options) - {o.name for o in EXTRACTOR_OPTIONS["cambi"]})
    if unknown:
        raise TypeError(f"cambi got unknown option(s) {', '.join(unknown)}; its options: "
                        f"{', '.join(o.name for o in EXTRACTOR_OPTIONS['cambi'])}")
    values = _checked_options(options)
    squeeze = getattr(dist, "ndim", None) == 2
    d = _frames(dist, "dist", bd)
    r = None
    if values["full_ref"]:
        if ref is None:
            raise ValueError("cambi with full_ref=True needs ref (the source frames)")
        r = _frames(ref, "ref", bd)
        if r.shape != d.shape or r.device != d.device:
            raise ValueError(f"ref and dist must have the same shape and device; got {tuple(r.shape)} on {r.device} "
                             f"and {tuple(d.shape)} on {d.device}")
    h, w = d.shape[-2:]
    topk = values["topk"] if values["topk"] != _DEFAULT_TOPK else values["cambi_topk"]
    eotf = values["cambi_eotf"] if values["cambi_eotf"] != _DEFAULT_EOTF else values["eotf"]
    dist_settings, src_settings = cambi_settings(
        w, h, bd, enc_width=values["enc_width"], enc_height=values["enc_height"], enc_bitdepth=values["enc_bitdepth"],
        src_width=values["src_width"], src_height=values["src_height"], window_size=values["window_size"],
        topk=topk, tvi_threshold=values["tvi_threshold"], vis_lum_threshold=values["cambi_vis_lum_threshold"],
        max_log_contrast=values["max_log_contrast"], eotf=eotf, high_res_speedup=values["cambi_high_res_speedup"],
        max_val=values["cambi_max_val"])
    max_val = values["cambi_max_val"]
    suffix = FeatureRequest.of("cambi", {k: v for k, v in options.items() if k != "full_ref"}).suffix
    dist_score = _score(d, bd, dist_settings)
    out = {"cambi" + suffix: torch.clamp(dist_score, max=max_val)}
    if r is not None:
        src_score = _score(r, bd, src_settings)
        out["cambi_source"] = torch.clamp(src_score, max=max_val)
        out["cambi_full_reference"] = torch.clamp(torch.clamp(dist_score - src_score, min=0.0), max=max_val)
    return {name: v[0] for name, v in out.items()} if squeeze else out
