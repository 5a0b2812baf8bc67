"""What each metric kind reads: the engine's adaptation of an :class:`~fusedsim.io.images.ImageData` pair.

* ``"image"`` metrics take the pixels as they are, ``(1, C, H, W)`` in ``0..data_range``, with ``data_range``.
* ``"srgb"`` (perceptual) metrics take sRGB with 3 channels: 8-bit images as their ``uint8`` codes, 16-bit ones
  as float32 in ``[0, 1]``. The codes are each metric's exact path, the one its reference tool reads (the float
  path of an 8-bit image differs in the last digits, e.g. SSIMULACRA2 60.6244 instead of 60.6328, and is
  slower); a 16-bit image has no 8-bit codes, and the metrics define their float input as ``[0, 1]``. A grey
  image is replicated, since these metrics are defined on colour images and a grey image is the colour image
  with R = G = B.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from fusedsim.metrics.registry import MetricSpec

__all__ = ["check_min_size", "metric_input", "pair_output", "result_values", "srgb", "to_device"]


def to_device(pixels: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``pixels`` (host memory, any dense layout) on ``device``, contiguous, without making the host wait for the
    device's queued work.

    A copy from pageable memory to a GPU waits until the stream's earlier work has finished (CUDA's rule for
    pageable sources), which would stall a caller that queues the next pair while the GPU computes the last one.
    The pixels are copied into pinned memory from torch's caching host allocator first (one host copy in their
    own memory order; the block is not reused before its transfer completes), sent asynchronously from there, and
    reordered on the device when they are interleaved (:func:`~fusedsim.io.images.read_image_interleaved`)."""
    if device.type != "cuda" or pixels.device.type != "cpu":
        return pixels.to(device).contiguous()
    if pixels.is_pinned():
        return pixels.to(device, non_blocking=True).contiguous()
    import torch

    try:
        staging = torch.empty_like(pixels, pin_memory=True)  # same strides when dense (interleaved included)
    except RuntimeError:  # no page-locked memory to be had (a locked-memory limit): the same copy, synchronous
        return pixels.to(device).contiguous()
    try:  # numpy's copy is one thread: torch's would wake its thread pool, which the decoders need
        staging.numpy()[...] = pixels.numpy()
    except (TypeError, RuntimeError):  # a dtype numpy lacks
        staging.copy_(pixels)
    return staging.to(device, non_blocking=True).contiguous()


def srgb(pixels: torch.Tensor, data_range: int, role: str) -> torch.Tensor:
    """Pixels ``(N, C, H, W)`` in ``0..data_range`` as sRGB ``(N, 3, H, W)`` (grey replicated), contiguous:
    ``uint8`` codes when ``data_range`` is 255 (8-bit images, whatever dtype holds the codes), else float32 in
    ``[0, 1]`` (see the module docstring)."""
    if pixels.shape[1] == 1:
        pixels = pixels.expand(-1, 3, -1, -1)
    if pixels.shape[1] != 3:
        raise ValueError(f"{role} has {pixels.shape[1]} channels; the perceptual metrics need grey or RGB")
    if data_range == 255:
        return _codes8(pixels)
    return pixels.float() / data_range


def _codes8(pixels: torch.Tensor) -> torch.Tensor:
    """8-bit pixels as contiguous ``uint8``: as they are when already codes, else rounded to the nearest code
    (an 8-bit image's pixels are whole numbers 0..255 in any dtype; rounding keeps them exact)."""
    import torch

    if pixels.dtype == torch.uint8:
        return pixels.contiguous()
    return pixels.round().clamp(0, 255).to(torch.uint8).contiguous()


def metric_input(spec: MetricSpec, pixels: torch.Tensor, data_range: int, role: str) -> torch.Tensor:
    """``pixels`` as ``spec`` reads them (see the module docstring): float32, except 8-bit images for the
    perceptual metrics (``uint8`` codes)."""
    if spec.kind == "srgb":
        return srgb(pixels, data_range, role)
    if spec.kind != "image":
        raise ValueError(f"{spec.name} is a {spec.kind} metric; the engine scores image pairs only")
    return pixels.float()


def result_values(spec: MetricSpec, out: Any) -> float | dict[str, float]:
    """A metric's output for one pair as a float, or ``{field: float}`` when it reports several values."""
    if len(spec.outputs) == 1 and not hasattr(out, "_fields"):
        return float(out.reshape(-1)[0]) if hasattr(out, "reshape") else float(out)
    return {field: float(getattr(out, field).reshape(-1)[0]) for field in spec.outputs}


def pair_output(out: Any, index: int) -> Any:
    """Pair ``index``'s part of a batched metric output: tensors ``(N, ...)`` sliced to ``(1, ...)`` (views: no
    copy, no device wait), NamedTuple records field by field."""
    if hasattr(out, "_fields"):
        return type(out)(*(pair_output(value, index) for value in out))
    return out[index:index + 1]


def check_min_size(specs: list[MetricSpec], width: int, height: int) -> None:
    """Raise ``ValueError`` naming REF/DIST and their size if an image is too small for a metric."""
    for spec in specs:
        if min(width, height) < spec.min_size:
            raise ValueError(f"REF and DIST are {width}×{height} but {spec.name} needs at least {spec.min_size} px "
                             f"per side ({spec.min_size_reason})")
