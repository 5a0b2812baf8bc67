"""zensim (imazen/zensim): functional API :func:`zensim` and :func:`zensim_features`, cached-reference pair
:func:`prepare_zensim` / :func:`score_prepared_zensim` (used by ``fusedsim.Metric("zensim")``) and
:class:`ZensimLoss`.

Features and the linear profiles ``PreviewV0_2`` (upstream's ``latest()`` linear profile) and ``PreviewV0_1``:
uint8, float16/bfloat16/float32 inputs are computed in upstream's float32 arithmetic, replayed
(:mod:`fusedsim.families.zensim.f32_twin`: its running-sum blurs leave residues that bias the SSIM error of flat
regions, moving scores by ~1e-2; the colour transform + padding, each pyramid step and each scale's pooled sums
(the hot loop) run through the ``zensim_xyb``, ``zensim_downscale`` and ``zensim_scale_sums`` ops: Triton kernels
on GPU tensors once validated there, else their twins); float64 inputs, and any input that requires
grad, go through the differentiable float64 twin (:mod:`fusedsim.families.zensim.twin`), which differs from
upstream by up to ~1.5e-2 on flat images. Upstream's MLP profile ``A`` is refused with a ValueError: its
trained bake is a binary file this package does not have (see ``fusedsim/data/zensim/README.md``).

Inputs follow upstream's contract: sRGB-encoded (not linear) uint8 0..255 or float in [0, 1], RGB or RGBA
(straight alpha, composited over upstream's noise background), ``(N, C, H, W)`` or ``(C, H, W)`` with C = 3 or 4,
any size down to 1x1 (sides under 64 px are mirror-padded, as upstream does). Byte-identical pairs score exactly
100 with all-zero features (upstream's short-circuit; pixels transparent in both images count as identical).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

import torch

from fusedsim.core.state import cache_dict, cached
from fusedsim.metrics.srgb_input import srgb_image
from fusedsim.families.zensim import ops
from fusedsim.families.zensim.f32_twin import zensim_features_from_sums_ref
from fusedsim.families.zensim.twin import (
    FEATURE_NAMES,
    NUM_SCALES,
    ZensimRefState,
    active_feature_mask_ref,
    alpha_background_ref,
    composite_over_noise_ref,
    linear_to_positive_xyb_ref,
    pyramid_levels_ref,
    score_from_distance_ref,
    srgb_to_linear_ref,
    zensim_features_prepared_ref,
    zensim_prepare_ref,
)

__all__ = ["ZensimLoss", "ZensimPrepared", "prepare_zensim", "score_prepared_zensim", "zensim", "zensim_feature_names",
           "zensim_features"]

_NAME = "zensim"
_PROFILES = {"previewv0_2": "PreviewV0_2", "preview-v0.2": "PreviewV0_2", "zensim-preview-v0.2": "PreviewV0_2",
             "previewv0_1": "PreviewV0_1", "preview-v0.1": "PreviewV0_1", "zensim-preview-v0.1": "PreviewV0_1"}
DEFAULT_PROFILE = "PreviewV0_2"
_DATA = Path(__file__).resolve().parents[2] / "data" / "zensim"


class _Profile(NamedTuple):
    name: str
    weights: torch.Tensor  # (228,) float64, zeroed where upstream's compute skips the feature
    a: float
    b: float


@cached(maxsize=None)
def _load_profile(name: str) -> _Profile:
    data = json.loads((_DATA / "linear_profiles.json").read_text())
    weights = torch.tensor(data[name], dtype=torch.float64)
    weights = torch.where(active_feature_mask_ref(weights), weights, torch.zeros_like(weights))
    return _Profile(name, weights, float(data["score_mapping"]["a"]), float(data["score_mapping"]["b"]))


def _profile(profile: object) -> _Profile:
    if not isinstance(profile, str):
        raise TypeError(f"{_NAME}: profile must be a string such as 'PreviewV0_2'; got {type(profile).__name__}")
    key = profile.strip().lower()
    if key in ("a", "zensim-a", "codec-target", "latest"):
        raise ValueError(f"{_NAME}: profile {profile!r} (upstream's MLP profile A) is not available: its trained "
                         "bake (zensim/weights/v47_strict_qat_native_2026-05-27.bin) is not shipped with fusedsim; "
                         "use profile='PreviewV0_2' or 'PreviewV0_1' (upstream's linear profiles)")
    if key not in _PROFILES:
        raise ValueError(f"{_NAME}: unknown profile {profile!r}; supported: 'PreviewV0_2', 'PreviewV0_1'")
    return _load_profile(_PROFILES[key])


def _image(image: object, name: str, check_range: bool | None) -> tuple[torch.Tensor, torch.Tensor | None, bool]:
    """(N, 3, H, W) float64 sRGB in [0, 1] (uint8 RGB stays uint8 0..255: :func:`_levels_f32` maps it through a
    256-entry table instead of converting every pixel to float64), its alpha (N, 1, H, W) or None, and whether it
    was batched."""
    if (isinstance(image, torch.Tensor) and image.dtype == torch.uint8 and image.dim() in (3, 4)
            and image.shape[-3] == 3 and image.numel() > 0):  # every check srgb_image makes of uint8 input
        return (image if image.dim() == 4 else image.unsqueeze(0)), None, image.dim() == 4
    if isinstance(image, torch.Tensor) and image.dim() in (3, 4) and image.shape[-3] == 4:
        rgb, alpha = image[..., :3, :, :], image[..., 3:, :, :]
        alpha_f, _ = srgb_image(alpha.expand_as(rgb), name, _NAME, check_range=check_range)  # same checks
        alpha_f = alpha_f[:, :1].to(torch.float64)
    else:
        rgb, alpha_f = image, None
    rgb_f, batched = srgb_image(rgb, name, _NAME, dtype=torch.float64, check_range=check_range)
    return rgb_f.to(torch.float64), alpha_f, batched


def _xyb(rgb: torch.Tensor, alpha: torch.Tensor | None) -> torch.Tensor:
    """float64 positive XYB (the differentiable twin)."""
    if rgb.dtype == torch.uint8:
        rgb = rgb.to(torch.float64) / 255.0  # as srgb_image converts uint8
    linear = srgb_to_linear_ref(rgb)
    if alpha is not None:
        linear = composite_over_noise_ref(linear, alpha)
    return linear_to_positive_xyb_ref(linear)


_LINEAR_LUT: dict[torch.device, torch.Tensor] = cache_dict()


def _linear_lut(device: torch.device) -> torch.Tensor:
    """(256,) float32: each byte's linear value exactly as the float path computes it (``/ 255`` and
    ``srgb_to_linear_ref`` in float64 on this device, rounded to float32), so a lookup equals the conversion."""
    lut = _LINEAR_LUT.get(device)
    if lut is None:
        v = torch.arange(256, dtype=torch.uint8, device=device).to(torch.float64) / 255.0
        lut = _LINEAR_LUT[device] = srgb_to_linear_ref(v).to(torch.float32)
    return lut


def _levels_f32(rgb: torch.Tensor, alpha: torch.Tensor | None) -> list[torch.Tensor]:
    """float32 pyramid in upstream's arithmetic (linear values rounded to float32, as upstream's LUT)."""
    lut = _linear_lut(rgb.device)
    if rgb.dtype == torch.uint8:
        linear = rgb  # the zensim_xyb op looks the codes up in lut: no float64 pass, no linear float32 planes
    else:
        linear = srgb_to_linear_ref(rgb.detach()).to(torch.float32)
    if alpha is not None:
        a = alpha.detach().to(torch.float32)
        bg = alpha_background_ref(*linear.shape[-2:]).to(linear.device)
        blended = (linear.double() * a.double() + (bg * (1.0 - a)).double()).to(torch.float32)  # FMA
        linear = torch.where(a >= 1.0, linear, torch.where(a <= 0.0, bg.expand_as(linear), blended))
    # the zensim_xyb and zensim_downscale ops: Triton kernels on GPU tensors when the backend picks Triton, else the
    # twins zensim_xyb_ref / zensim_downscale_ref
    return pyramid_levels_ref(ops.zensim_xyb(linear, lut), ops.zensim_downscale)  # padded positive XYB, float32


def _identical(ref: torch.Tensor, dist: torch.Tensor) -> torch.Tensor:
    """(N,) bool: byte-identical samples; with alpha, pixels with alpha 0 in both count as equal."""
    ref4, dist4 = (t if t.dim() == 4 else t.unsqueeze(0) for t in (ref, dist))
    ref4, dist4 = torch.broadcast_tensors(ref4.detach(), dist4.detach())
    same = (ref4 == dist4).all(1)  # (N, H, W)
    if ref4.shape[1] == 4:
        same = same | ((ref4[:, 3] == 0) & (dist4[:, 3] == 0))
    return same.flatten(1).all(1)


def _features_f32(ref_levels: list[torch.Tensor], dist_levels: list[torch.Tensor]) -> torch.Tensor:
    """Features (N, 228) in upstream's float32 arithmetic: each scale's sums by the ``zensim_scale_sums`` op (its
    Triton kernel on GPU tensors when the backend picks Triton, else the twin ``zensim_scale_sums_ref``)."""
    sums = [ops.zensim_scale_sums(s, d) for s, d in zip(ref_levels, dist_levels)]
    return zensim_features_from_sums_ref(sums, [s.shape[-2] * s.shape[-1] for s in ref_levels])


def _use_twin(image: torch.Tensor) -> bool:
    """float64 inputs and inputs that need gradients take the float64 twin; others upstream's float32 replay."""
    return image.dtype == torch.float64 or image.requires_grad


class ZensimPrepared(NamedTuple):
    """A prepared reference: its float32 pyramid (upstream's arithmetic), the float64 twin state when the
    reference needs gradients, the checked reference (sRGB float64, alpha) and the caller's tensor (for the
    identical-pair check), and whether it was batched."""

    levels: list[torch.Tensor]
    state: ZensimRefState | None
    rgb: torch.Tensor
    alpha: torch.Tensor | None
    ref: torch.Tensor
    batched: bool


def prepare_zensim(ref: torch.Tensor, *, check_range: bool | None = None) -> ZensimPrepared:
    """Prepare a reference (N, C, H, W) or (C, H, W), C = 3 or 4, sRGB uint8 or float in [0, 1], for
    :func:`score_prepared_zensim`: its padded XYB pyramid."""
    rgb, alpha, batched = _image(ref, "ref", check_range)
    state = zensim_prepare_ref(_xyb(rgb, alpha)) if _use_twin(ref) else None
    return ZensimPrepared(_levels_f32(rgb, alpha), state, rgb, alpha, ref, batched)


def _features_prepared(prepared: ZensimPrepared, dist: object, check_range: bool | None) -> tuple[torch.Tensor, bool]:
    """Features (N, 228) float64: upstream's float32 arithmetic, or the float64 twin when a gradient is needed."""
    if not isinstance(prepared, ZensimPrepared):
        raise TypeError(f"{_NAME}: prepared must come from prepare_zensim; got {type(prepared).__name__}")
    rgb, alpha, batched = _image(dist, "dist", check_range)
    ref = prepared.ref if prepared.ref.dim() == 4 else prepared.ref.unsqueeze(0)
    dist4 = dist if dist.dim() == 4 else dist.unsqueeze(0)
    if tuple(dist4.shape[1:]) != tuple(ref.shape[1:]) or (dist4.shape[0] != ref.shape[0] and ref.shape[0] != 1):
        raise ValueError(f"{_NAME}: dist must match the reference's shape {tuple(ref.shape)} (or be a batch of its "
                         f"size when the reference is one image); got {tuple(dist4.shape)}")
    if dist4.device != ref.device:
        raise ValueError(f"{_NAME}: dist is on {dist4.device} but the reference was prepared on {ref.device}")
    if dist4.dtype != ref.dtype:
        raise TypeError(f"{_NAME}: dist must have the reference's dtype {ref.dtype}; got {dist4.dtype}")
    if prepared.state is not None or _use_twin(dist4):
        state = prepared.state or zensim_prepare_ref(_xyb(prepared.rgb, prepared.alpha))
        features = zensim_features_prepared_ref(state, _xyb(rgb, alpha))
    else:
        features = _features_f32(prepared.levels, _levels_f32(rgb, alpha))
    same = _identical(ref, dist4).to(features.device)
    features = torch.where(same[:, None], torch.zeros_like(features), features)
    return features, batched or prepared.batched


@cached(maxsize=None)
def _weights_on(name: str, device: torch.device) -> torch.Tensor:
    """A profile's weights on a device, copied once (a host-to-device copy per call would synchronise)."""
    return _load_profile(name).weights.to(device)


def _score(features: torch.Tensor, profile: _Profile) -> torch.Tensor:
    distance = features @ _weights_on(profile.name, features.device) / NUM_SCALES
    return score_from_distance_ref(distance, profile.a, profile.b)


def score_prepared_zensim(prepared: ZensimPrepared, dist: torch.Tensor, *, profile: str = DEFAULT_PROFILE,
                          check_range: bool | None = None) -> torch.Tensor:
    """zensim of ``dist`` against a prepared reference: (N,) float64, or 0-d for unbatched inputs."""
    prof = _profile(profile)
    features, batched = _features_prepared(prepared, dist, check_range)
    scores = _score(features, prof)
    return scores if batched else scores[0]


def zensim_features(ref: torch.Tensor, dist: torch.Tensor, *, check_range: bool | None = None) -> torch.Tensor:
    """Upstream's 228 features (``compute_all_features``) of sRGB pairs: (N, 228) float64, (228,) unbatched.

    Order and names: :func:`zensim_feature_names` — 4 scales x 3 XYB channels x 13 basic features, then
    4 scales x 3 channels x 6 peak features."""
    _check_pair(ref, dist)
    features, batched = _features_prepared(prepare_zensim(ref, check_range=check_range), dist, check_range)
    return features if batched else features[0]


def zensim_feature_names() -> tuple[str, ...]:
    """The 228 feature names in output order, ``s{scale}_{X|Y|B}_{name}`` (e.g. ``s0_Y_ssim_mean``)."""
    return FEATURE_NAMES


def _check_pair(ref: object, dist: object) -> None:
    for name, t in (("ref", ref), ("dist", dist)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{_NAME}: {name} must be a torch.Tensor; got {type(t).__name__}")
    if ref.shape != dist.shape:
        raise ValueError(f"{_NAME}: ref and dist must have the same shape; got {tuple(ref.shape)} and "
                         f"{tuple(dist.shape)}")
    if ref.device != dist.device:
        raise ValueError(f"{_NAME}: ref and dist must be on the same device; got {ref.device} and {dist.device}")
    if ref.dtype != dist.dtype:
        raise TypeError(f"{_NAME}: ref and dist must have the same dtype; got {ref.dtype} and {dist.dtype}")


def zensim(ref: torch.Tensor, dist: torch.Tensor, *, profile: str = DEFAULT_PROFILE,
           check_range: bool | None = None) -> torch.Tensor:
    """zensim score of sRGB pairs, as upstream's ``Zensim::new(profile).compute(ref, dist).score()``.

    Args:
        ref, dist: (N, C, H, W) or (C, H, W), C = 3 (RGB) or 4 (RGBA, straight alpha), sRGB-encoded, uint8 0..255
            or float in [0, 1]; any size (sides under 64 px are mirror-padded as upstream does).
        profile: ``"PreviewV0_2"`` (default; upstream's linear general profile) or ``"PreviewV0_1"``. Upstream's
            MLP profile ``"A"`` raises ValueError (its bake is not available).
        check_range: check float inputs lie in [0, 1] (default: on CPU tensors only, which needs no sync).

    Returns:
        (N,) float64 (0-d for unbatched inputs): ``100 - 18 d^0.7``, exactly 100 for byte-identical images,
        negative for very strong distortions.
    """
    prof = _profile(profile)
    _check_pair(ref, dist)
    features, batched = _features_prepared(prepare_zensim(ref, check_range=check_range), dist, check_range)
    scores = _score(features, prof)
    return scores if batched else scores[0]


class ZensimLoss(torch.nn.Module):
    """zensim as a loss: ``loss(ref, dist)`` -> the batch mean of ``(100 - score) / 100`` (0 for identical
    images). Differentiable with respect to both float inputs through the PyTorch twin."""

    def __init__(self, profile: str = DEFAULT_PROFILE) -> None:
        super().__init__()
        _profile(profile)  # fail early on an unsupported profile
        self.profile = profile

    def forward(self, ref: torch.Tensor, dist: torch.Tensor) -> torch.Tensor:
        return ((100.0 - zensim(ref, dist, profile=self.profile)) / 100.0).mean()
