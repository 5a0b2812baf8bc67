"""``fusedsim.Metric``: one metric with fixed parameters on one device, with a cached reference.

For one-reference/many-distorted work (a codec sweep, a video against its source) the reference-side work
(colour transform, pyramid, blurred statistics) is done once by :meth:`Metric.set_reference`; each
:meth:`Metric.score` does only the distorted side and the comparison. Results equal the one-shot call
``fusedsim.<metric>(ref, dist, **params)``: both run the same code on the same prepared reference.

The metric is found through its :class:`~fusedsim.metrics.registry.MetricSpec`; metrics without a prepared-
reference path (``cached_reference=False``) keep (a copy of) the reference tensor and call the one-shot function.
"""

from __future__ import annotations

from typing import Any

import torch

from fusedsim.core.device import resolve_device
from fusedsim.metrics.registry import MetricSpec, get_metric

__all__ = ["Metric"]


class Metric:
    """A metric bound to its parameters and a device.

    Example::

        m = fusedsim.Metric("ssimulacra2", device="cuda")
        m.set_reference(ref)                 # (3, H, W) or (N, 3, H, W), uint8 or float in [0, 1]
        scores = [m.score(d) for d in dists]  # same values as fusedsim.ssimulacra2(ref, d)

    Args:
        name: registry name or alias (``fusedsim list-metrics``).
        device: ``auto``, ``cpu``, ``cuda[:N]`` or a ``torch.device``; inputs are moved there.
        **params: the metric's keyword parameters (checked by the metric on first use).
    """

    def __init__(self, name: str, device: torch.device | str = "auto", **params: Any) -> None:
        self.spec: MetricSpec = get_metric(name)
        if self.spec.kind == "video":
            raise ValueError(f"{self.spec.name} scores video planes; use fusedsim.families.vmaf or `fusedsim vmaf`")
        self.device = resolve_device(device)
        self.params = params
        self._state: Any = None
        self._has_reference = False

    @property
    def name(self) -> str:
        return self.spec.name

    def __repr__(self) -> str:
        params = "".join(f", {key}={value!r}" for key, value in self.params.items())
        return f"Metric({self.spec.name!r}, device={str(self.device)!r}{params})"

    def __call__(self, ref: torch.Tensor, dist: torch.Tensor) -> Any:
        """One-shot score of a pair (does not touch the cached reference)."""
        return self.spec.compute(self._to_device(ref, "ref"), self._to_device(dist, "dist"), self.params)

    def set_reference(self, ref: torch.Tensor) -> Metric:
        """Prepare ``ref`` once for later :meth:`score` calls; returns ``self``.

        The metric keeps its own copy: a metric without a prepared-reference path keeps the tensor itself as its
        state (and a prepared state may keep views of it), so editing the caller's tensor later would change the
        scores. The copy is made only when moving to the device did not already make one."""
        given = ref
        ref = self._to_device(ref, "ref")
        if ref.untyped_storage().data_ptr() == given.untyped_storage().data_ptr():
            ref = ref.clone()
        self._state = self.spec.prepare(ref, self.params)
        self._has_reference = True
        return self

    def score(self, dist: torch.Tensor) -> Any:
        """Score ``dist`` against the reference given to :meth:`set_reference`. A reference of one image
        ``(1, 3, H, W)`` scores a batch ``(N, 3, H, W)`` of distorted images, one value each, in one call (for the
        metrics whose spec has ``prepared_broadcasts``: every perceptual metric)."""
        if not self._has_reference:
            raise RuntimeError(f"{self.spec.name}: call set_reference(ref) before score(dist)")
        dist = self._to_device(dist, "dist")
        return self.spec.score(self._state, dist, self.params)

    def _to_device(self, image: torch.Tensor, name: str) -> torch.Tensor:
        if not isinstance(image, torch.Tensor):
            raise TypeError(f"{self.spec.name}: {name} must be a torch.Tensor; got {type(image).__name__}")
        return image.to(self.device, non_blocking=True)
