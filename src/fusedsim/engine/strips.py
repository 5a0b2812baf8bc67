"""Strip mode: a metric over horizontal strips that carry its halo, combined from additive partial sums.

A strip's *body* rows partition ``[0, H)``; the strip read from the image is the body plus about ``halo`` rows
above and below (clipped at the edges), so a windowed metric sees in each strip exactly the context it sees in the
full image. The metric's ``strip_sums`` (:class:`~fusedsim.metrics.registry.MetricFunctions`) reads those rows and returns
float64 sums over the outputs of the body; their total, finished once, is the full-image value. Only the strip is
moved to the device and converted to float32, so the peak memory is one strip's working set plus the two input
images.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from fusedsim.metrics.registry import MetricSpec

__all__ = ["can_strip", "plan_strips", "score_strips"]


def can_strip(spec: MetricSpec) -> bool:
    """Whether ``spec`` has a strip path (halo rows and strip sums)."""
    return spec.halo_rows is not None and spec.strips


def plan_strips(height: int, body_rows: int, halo: int) -> list[tuple[int, int, int, int]]:
    """Strips of an image ``height`` rows tall as ``(read_start, read_stop, body_start, body_stop)``.

    Bodies have ``body_rows`` rows; a last body shorter than the halo joins the one before it (a strip that would
    read more halo than body). The read range is the body and ``halo`` rows either side, clipped to the image.
    """
    if height < 1:
        raise ValueError(f"height must be >= 1; got {height}")
    body_rows = max(int(body_rows), 1)
    starts = list(range(0, height, body_rows))
    if len(starts) > 1 and height - starts[-1] < halo:
        starts.pop()
    bounds = [*starts, height]
    return [(max(0, a - halo), min(height, b + halo), a, b) for a, b in itertools.pairwise(bounds)]


def score_strips(spec: MetricSpec, ref: torch.Tensor, dist: torch.Tensor, *, data_range: int, body_rows: int,
                 device: torch.device, params: dict[str, Any]) -> torch.Tensor:
    """``spec``'s value for the pair ``(1, C, H, W)`` computed strip by strip on ``device``.

    ``ref`` and ``dist`` may stay on the CPU in any dtype: the metric's strip function moves and converts only the
    rows each strip needs.
    """
    import torch

    if not can_strip(spec):
        raise ValueError(f"{spec.name} cannot be computed in strips (no halo rows / strip sums in its MetricSpec)")
    partial = spec.load("strip_sums")
    total = None
    for _, _, a, b in plan_strips(int(ref.shape[-2]), body_rows, int(spec.halo_rows or 0)):
        sums = partial(ref, dist, (a, b), device=device, data_range=data_range, **params)
        total = sums if total is None else total + sums
    assert total is not None
    return spec.load("strip_finish")(total.to(torch.float64), data_range=data_range, **params)
