"""Input contract of the perceptual metrics (SSIMULACRA2, Butteraugli, DSSIM, IW-SSIM, ColorVideoVDP, zensim).

Every perceptual metric takes ``(ref, dist)``, reference first, as sRGB-encoded tensors ``(N, 3, H, W)`` or
``(3, H, W)``: uint8 in 0..255, or floating in [0, 1]. :func:`srgb_pair` checks a pair once and returns both as
floating ``(N, 3, H, W)`` tensors in [0, 1] (uint8 divided by 255 in the requested dtype), so the metric code sees
one layout. Metrics whose kernels read 8-bit codes directly pass ``keep_uint8=True``: uint8 input is then checked
the same way and returned as ``(N, 3, H, W)`` uint8, without a float copy.

Range checks read the values, which on a GPU costs a device-to-host synchronisation; by default
(``check_range=None``) they run only on CPU tensors, where they are free of it. Pass ``check_range=True`` to
check GPU tensors too (one synchronisation), or ``False`` to skip the check everywhere.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

__all__ = ["SRGBPair", "prepared_batch", "repeat_prepared", "srgb_image", "srgb_pair"]

_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


class SRGBPair(NamedTuple):
    """A checked pair: both ``(N, 3, H, W)`` floating in [0, 1] (or uint8 codes, see ``keep_uint8``); ``batched``
    is False for ``(3, H, W)`` inputs."""

    ref: torch.Tensor
    dist: torch.Tensor
    batched: bool


def srgb_image(image: object, name: str, metric: str, *, min_size: int = 1, min_size_reason: str = "",
               dtype: torch.dtype = torch.float32, check_range: bool | None = None,
               keep_uint8: bool = False) -> tuple[torch.Tensor, bool]:
    """One image as floating ``(N, 3, H, W)`` in [0, 1], and whether it was given with a batch dimension.

    Args:
        image: ``(N, 3, H, W)`` or ``(3, H, W)`` tensor, uint8 0..255 or floating in [0, 1].
        name: the user's argument name, used in error messages (``"ref"``, ``"dist"``).
        metric: the metric's name, used in error messages.
        min_size: smallest allowed height and width; ``min_size_reason`` says why.
        dtype: floating dtype for uint8 inputs (floating inputs keep theirs).
        check_range: see the module docstring.
        keep_uint8: return uint8 input as uint8 codes ``(N, 3, H, W)`` instead of converting it.
    """
    if not isinstance(image, torch.Tensor):
        raise TypeError(f"{metric}: {name} must be a torch.Tensor; got {type(image).__name__}")
    if image.dtype != torch.uint8 and image.dtype not in _FLOATS:
        raise TypeError(f"{metric}: {name} must be uint8 (0..255) or floating in [0, 1]; got {image.dtype}")
    if image.dim() == 3:
        image, batched = image.unsqueeze(0), False
    elif image.dim() == 4:
        batched = True
    else:
        raise ValueError(f"{metric}: {name} must be (N, 3, H, W) or (3, H, W); got shape {tuple(image.shape)}")
    if image.shape[1] != 3:
        shape = tuple(image.shape) if batched else tuple(image.shape[1:])
        raise ValueError(f"{metric}: {name} must have 3 sRGB channels (N, 3, H, W) or (3, H, W); got shape {shape} "
                         "— convert grey images to RGB and drop alpha first")
    if image.numel() == 0:
        raise ValueError(f"{metric}: {name} is empty: shape {tuple(image.shape)}")
    height, width = image.shape[-2:]
    if min(height, width) < min_size:
        why = f" ({min_size_reason})" if min_size_reason else ""
        raise ValueError(f"{metric}: {name} is {width}×{height} but the metric needs at least {min_size} px per "
                         f"side{why}")
    if image.dtype == torch.uint8:
        return (image if keep_uint8 else image.to(dtype) / 255.0), batched
    if check_range or (check_range is None and image.device.type == "cpu"):
        bad = ~((image >= 0) & (image <= 1))  # NaN counts as out of range
        if bool(bad.any()):
            value = image.detach()[bad][0].item()
            raise ValueError(f"{metric}: {name} must hold sRGB values in [0, 1] (or be uint8 0..255); found "
                             f"{value!r}")
    return image, batched


def _floating_dtype(given: torch.dtype, uint8_as: torch.dtype) -> torch.dtype:
    """The dtype an input of dtype ``given`` is compared in (uint8 codes count as ``uint8_as``)."""
    return uint8_as if given == torch.uint8 else given


def srgb_pair(ref: object, dist: object, metric: str, *, min_size: int = 1, min_size_reason: str = "",
              dtype: torch.dtype = torch.float32, check_range: bool | None = None,
              keep_uint8: bool = False) -> SRGBPair:
    """Check a (reference, distorted) pair: same shape, device and kind of dtype; see :func:`srgb_image`."""
    kwargs = dict(metric=metric, min_size=min_size, min_size_reason=min_size_reason, dtype=dtype,
                  check_range=check_range, keep_uint8=keep_uint8)
    ref_t, ref_batched = srgb_image(ref, "ref", **kwargs)
    dist_t, dist_batched = srgb_image(dist, "dist", **kwargs)
    assert isinstance(ref, torch.Tensor) and isinstance(dist, torch.Tensor)
    if ref.shape != dist.shape:
        raise ValueError(f"{metric}: ref and dist must have the same shape; got {tuple(ref.shape)} and "
                         f"{tuple(dist.shape)}")
    if ref.device != dist.device:
        raise ValueError(f"{metric}: ref and dist must be on the same device; got {ref.device} and {dist.device}")
    if _floating_dtype(ref.dtype, dtype) != _floating_dtype(dist.dtype, dtype):
        raise TypeError(f"{metric}: ref and dist must have the same dtype; got {ref.dtype} and {dist.dtype}")
    return SRGBPair(ref_t, dist_t, ref_batched and dist_batched)


def prepared_batch(state_shape: tuple[int, ...], batched: bool, dist: object, metric: str) -> int:
    """How many distorted images ``dist`` holds for a reference prepared from an image of ``state_shape``: the
    same shape, or ``(N, ...)`` against a batched reference of one image (every image scored against it). Raises
    ``ValueError`` naming the metric otherwise."""
    if isinstance(dist, torch.Tensor):
        shape = tuple(dist.shape)
        if shape == tuple(state_shape):
            return shape[0] if batched else 1
        if batched and state_shape[0] == 1 and len(shape) == 4 and shape[1:] == tuple(state_shape[1:]):
            return shape[0]
    got = tuple(dist.shape) if isinstance(dist, torch.Tensor) else type(dist).__name__
    raise ValueError(f"{metric}: dist must have the reference's shape {tuple(state_shape)} (or (N, ...) when the "
                     f"reference holds one image); got {got}")


def repeat_prepared(tensors, count: int) -> tuple:
    """A prepared reference's per-image tensors repeated for ``count`` distorted images (the kernels read both
    sides with the same batch index): a tensor of one image ``(1, ...)`` is repeated, one that already holds
    ``count`` (or ``None``) is kept as it is."""
    return tuple(t if t is None or t.shape[0] == count else t.expand(count, *t.shape[1:]).contiguous()
                 for t in tensors)
