"""Registry of the VMAF features that ``fusedsim vmaf`` computes on decoded frame batches.

``extract(feature, ref, dist, device)`` takes two frame batches (any object with ``y``, ``u``, ``v`` integer
arrays of shape ``(n, H, W)`` / ``(n, Hc, Wc)``, ``bit_depth`` and ``first_index``, such as
``fusedsim.io.video.FrameBatch``) and returns per-frame float64 arrays keyed by libvmaf's metric names, exactly as
libvmaf's CLI reports them by default:

| feature | outputs | algorithm |
|---|---|---|
| ``ssim`` | ``ssim`` | libvmaf integer SSIM (luma), bit-exact on CPU and GPU |
| ``float_ssim`` | ``float_ssim`` | libvmaf float SSIM (luma, auto-downscale), bit-exact |
| ``float_ms_ssim`` | ``float_ms_ssim`` | libvmaf 5-scale MS-SSIM (luma), bit-exact; frames >= 176x176 |
| ``psnr`` | ``psnr_y``, ``psnr_cb``, ``psnr_cr`` | libvmaf PSNR, capped at 6*bits+12 dB |
| ``cambi`` | ``cambi`` (+ option suffix) | libvmaf CAMBI banding score (distorted luma), bit-exact |

A feature is always computed by its own algorithm: a device that cannot run it is an error, never a substitute.
The features are the ``video`` metrics of :mod:`fusedsim.metrics.registry`, registered as ``vmaf:<feature>``;
their compute functions are the ``*_feature`` adapters below (planes ``(y, u, v)`` and a bit depth in, libvmaf's
metric names out).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from fusedsim.core.device import resolve_device
from fusedsim.metrics.registry import MetricSpec, list_metrics

__all__ = ["SUPPORTED_FEATURES", "device_planes", "extract", "feature_spec", "resolve_device", "to_numpy"]

_NAMESPACE = "vmaf:"
_SPECS: dict[str, MetricSpec] = {s.short_name: s for s in list_metrics("video") if s.name.startswith(_NAMESPACE)}
#: Feature names as ``fusedsim vmaf --feature`` takes them, in registry order.
SUPPORTED_FEATURES: tuple[str, ...] = tuple(_SPECS)

Planes = Sequence[torch.Tensor]


def feature_spec(feature: str) -> MetricSpec:
    """The registry spec of a feature name (``"ssim"`` -> ``vmaf:ssim``); ValueError listing the supported ones."""
    spec = _SPECS.get(feature) if isinstance(feature, str) else None
    if spec is None:
        raise ValueError(f"unknown feature {feature!r}; supported features: {', '.join(SUPPORTED_FEATURES)}")
    return spec


# --------------------------------------------------------------------------- compute functions of the registry
def integer_ssim_feature(ref: Planes, dist: Planes, bit_depth: int) -> dict[str, torch.Tensor]:
    """``vmaf:ssim``: libvmaf's integer SSIM of the luma planes."""
    from fusedsim.families.vmaf.integer_ssim_api import integer_ssim

    return {"ssim": integer_ssim(ref[0], dist[0], bit_depth)}


def float_ssim_feature(ref: Planes, dist: Planes, bit_depth: int, *,
                       enable_lcs: bool = False) -> dict[str, torch.Tensor]:
    """``vmaf:float_ssim``: libvmaf's float SSIM of the luma planes; with ``enable_lcs`` (libvmaf's
    ``float_ssim=enable_lcs=true``) also its luminance, contrast and structure terms ``float_ssim_l/_c/_s``."""
    from fusedsim.families.vmaf.float_ssim_api import float_ssim

    out = float_ssim(ref[0], dist[0], bit_depth)
    names = ("float_ssim", "float_ssim_l", "float_ssim_c", "float_ssim_s") if enable_lcs else ("float_ssim",)
    return {name: out[name] for name in names}


def float_ms_ssim_feature(ref: Planes, dist: Planes, bit_depth: int) -> dict[str, torch.Tensor]:
    """``vmaf:float_ms_ssim``: libvmaf's float MS-SSIM of the luma planes (per-scale parts not reported)."""
    from fusedsim.families.vmaf.float_ssim_api import float_ms_ssim

    return {"float_ms_ssim": float_ms_ssim(ref[0], dist[0], bit_depth)["float_ms_ssim"]}


def integer_vif_feature(ref: Planes, dist: Planes, bit_depth: int, *, vif_enhn_gain_limit: float = 100.0,
                        debug: bool = False) -> dict[str, torch.Tensor]:
    """``vmaf:vif``: libvmaf's integer VIF of the luma planes (4 scales; ``debug`` adds num/den columns)."""
    from fusedsim.families.vif.api import integer_vif

    return integer_vif(ref[0], dist[0], bit_depth, gain_limit=vif_enhn_gain_limit, debug=debug)


def integer_adm_feature(ref: Planes, dist: Planes, bit_depth: int, *, debug: bool = False,
                        **options: Any) -> dict[str, torch.Tensor]:
    """``vmaf:adm``: libvmaf's integer ADM of the luma planes (adm2, aim, adm3, 4 scales); ``options`` are
    libvmaf's (``adm_enhn_gain_limit``, ``adm_csf_mode``, ``adm_norm_view_dist`` ...: the v1 models' too)."""
    from fusedsim.families.adm.api import integer_adm
    from fusedsim.families.adm.twin import AdmOptions

    return integer_adm(ref[0], dist[0], bit_depth, debug=debug, options=AdmOptions.from_libvmaf(options))


def integer_motion_feature(ref: Planes, dist: Planes, bit_depth: int, **options: Any) -> dict[str, torch.Tensor]:
    """``vmaf:motion``: libvmaf's integer motion of the reference luma, the frames given being the whole clip
    (motion compares each frame with its neighbours; ``fusedsim vmaf`` streams a clip through a
    :class:`~fusedsim.families.vmaf.session.FeatureSession`, which carries it across batches)."""
    from fusedsim.families.motion.api import integer_motion
    from fusedsim.families.motion.twin import MotionOptions

    debug = bool(options.pop("debug", False))
    return integer_motion(ref[0], bit_depth, options=MotionOptions.from_libvmaf(options), debug=debug)


def cambi_feature(ref: Planes, dist: Planes, bit_depth: int, **options: Any) -> dict[str, torch.Tensor]:
    """``vmaf:cambi``: libvmaf's CAMBI of the distorted luma (with ``full_ref=True`` also of the reference), under
    libvmaf's option names; the column names carry libvmaf's option suffix."""
    from fusedsim.families.cambi.api import cambi

    full_ref = bool(options.get("full_ref", False))
    return cambi(dist[0], bit_depth, ref=ref[0] if full_ref else None, **options)


def speed_chroma_feature(ref: Planes, dist: Planes, bit_depth: int, **options: Any) -> dict[str, torch.Tensor]:
    """``vmaf:speed_chroma``: libvmaf's SpEED chroma of the Cb and Cr planes, read at libvmaf's chroma size (``w/2 x
    h/2`` for 4:2:0, integer division: an odd-size file's last chroma row and column are not read); ``options``
    are libvmaf's (``speed_sigma_nn``, ``speed_prescale`` ...)."""
    return start_speed_chroma_feature(ref, dist, bit_depth, **options)()


def start_speed_chroma_feature(ref: Planes, dist: Planes, bit_depth: int, **options: Any
                               ) -> Callable[[], dict[str, torch.Tensor]]:
    """:func:`speed_chroma_feature` started (:func:`~fusedsim.families.speed_chroma.api.start_speed_chroma`): call
    the result for the columns."""
    from fusedsim.families.speed_chroma.api import start_speed_chroma
    from fusedsim.families.speed_chroma.twin import chroma_crop

    if len(ref) < 3 or len(dist) < 3:
        raise ValueError("speed_chroma reads the chroma planes: give each clip's planes (y, u, v), not luma alone")
    h, w = chroma_crop(*ref[0].shape[-2:], *ref[1].shape[-2:])
    planes = [p[..., :h, :w] for p in (ref[1], ref[2], dist[1], dist[2])]
    return start_speed_chroma(*planes, bit_depth, options=_speed_options(tuple(sorted(options.items()))))


@functools.lru_cache(maxsize=64)
def _speed_options(options: tuple[tuple[str, Any], ...]) -> Any:
    """SpEED chroma's options from libvmaf's names, parsed once per set (a clip's every batch asks again)."""
    from fusedsim.families.speed_chroma.twin import SpeedOptions

    return SpeedOptions.from_libvmaf(dict(options))


def psnr_feature(ref: Planes, dist: Planes, bit_depth: int) -> dict[str, torch.Tensor]:
    """``vmaf:psnr``: libvmaf's PSNR of each plane (``psnr_y``, ``psnr_cb``, ``psnr_cr``)."""
    from fusedsim.families.vmaf.psnr_api import psnr

    return psnr(list(ref), list(dist), bit_depth)


# ------------------------------------------------------------------------------------------------- extraction
def _planes(batch: Any, role: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    try:
        y, u, v, bd = batch.y, batch.u, batch.v, batch.bit_depth
    except AttributeError as exc:
        raise TypeError(f"{role} must be a frame batch with y, u, v and bit_depth attributes; got "
                        f"{type(batch).__name__}") from exc
    return y, u, v, int(bd)


class _DevicePlanes(Sequence):
    """Planes copied to the device on first access: luma-only features never move the chroma planes."""

    def __init__(self, planes: Sequence[np.ndarray], device: torch.device) -> None:
        self._planes = list(planes)
        self._device = device
        self._moved: dict[int, torch.Tensor] = {}

    def __len__(self) -> int:
        return len(self._planes)

    def __getitem__(self, i):  # noqa: ANN001 - Sequence protocol (int or slice)
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        i = range(len(self))[i]  # negative indices, IndexError
        if i not in self._moved:
            self._moved[i] = torch.from_numpy(np.ascontiguousarray(self._planes[i])).to(self._device)
        return self._moved[i]


def to_numpy(columns: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
    """Per-frame columns as float64 host arrays: one copy per device (each copy from a GPU waits for its stream)."""
    by_device: dict[torch.device, list[str]] = {}
    for name, values in columns.items():
        by_device.setdefault(values.device, []).append(name)
    out: dict[str, np.ndarray] = {}
    for names in by_device.values():
        parts = [columns[name].detach().reshape(-1).to(torch.float64) for name in names]
        host = torch.cat(parts).cpu().numpy()
        for name, piece in zip(names, np.split(host, np.cumsum([len(x) for x in parts])[:-1])):
            out[name] = piece
    return {name: out[name] for name in columns}


def device_planes(ref: Any, dist: Any, device: torch.device | str = "auto") -> tuple[Sequence, Sequence]:
    """Two frame batches' planes as tensors on ``device`` (copied on first access: luma-only features never move
    the chroma planes); ValueError when their bit depths differ."""
    dev = resolve_device(device)
    *ref_planes, bd = _planes(ref, "ref")
    *dist_planes, dbd = _planes(dist, "dist")
    if bd != dbd:
        raise ValueError(f"ref and dist must have the same bit depth; got {bd} and {dbd}")
    return _DevicePlanes(ref_planes, dev), _DevicePlanes(dist_planes, dev)


def extract(feature: str, ref: Any, dist: Any, device: torch.device | str = "auto") -> dict[str, np.ndarray]:
    """Per-frame values of one feature for two frame batches; see the module table for the outputs.

    Raises ``ValueError`` for an unknown feature (listing :data:`SUPPORTED_FEATURES`), a bad device name,
    mismatched batches or bad samples, and :class:`~fusedsim.core.backend.BackendUnavailableError` when
    ``device="cuda"`` has no GPU.
    """
    spec = feature_spec(feature)
    dev = resolve_device(device)
    *ref_planes, bd = _planes(ref, "ref")
    *dist_planes, dbd = _planes(dist, "dist")
    if bd != dbd:
        raise ValueError(f"ref and dist must have the same bit depth; got {bd} and {dbd}")
    out = spec.load()(_DevicePlanes(ref_planes, dev), _DevicePlanes(dist_planes, dev), bd)
    return to_numpy({name: out[name] for name in spec.outputs})
