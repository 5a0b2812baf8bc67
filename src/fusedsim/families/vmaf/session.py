"""A clip's feature extraction: the requested features fed frame batches in order, per-frame columns out.

Most features score each frame pair on its own; ``motion`` compares each reference frame with its neighbours, so
its values for a batch's last frame come with the next batch (or :meth:`FeatureSession.flush` at the end of the
clip). ``speed_chroma``'s values for a batch come with the next push (its host statistics run on a worker thread
while the next batch's GPU work is queued). A session keeps only what such a feature needs from earlier batches:
memory does not grow with clip length. Columns carry libvmaf's names, with the suffix of the options that change
values (``_egl_1``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from fusedsim.core.sample_range import check_sample_ranges, sample_ranges_checked
from fusedsim.families.vmaf.feature_requests import FeatureRequest, merge_requests

__all__ = ["FeatureSession"]

#: Extractors whose kernels take most of a batch's GPU time (VIF: ~70 % of VMAF v0.6.1's at 1080p).
_LONGEST_ON_GPU = frozenset({"vif"})
#: Extractors with host work behind a short GPU stage (SpEED chroma's statistics): started first, so that the
#: worker thread's host work begins as early as possible.
_HOST_WORK = frozenset({"speed_chroma"})

Planes = Sequence[torch.Tensor]
Columns = dict[str, torch.Tensor]


class _Stateless:
    """A feature that scores each frame pair on its own: ``compute(ref_planes, dist_planes, bit_depth, request)``."""

    def __init__(self, compute: Callable[..., Columns], request: FeatureRequest, bit_depth: int) -> None:
        self.compute, self.request, self.bit_depth = compute, request, bit_depth

    def push(self, ref: Planes, dist: Planes) -> Columns:
        return self.compute(ref, dist, self.bit_depth, self.request)

    def flush(self) -> Columns:
        return {}


class _Motion:
    """libvmaf's integer motion on the reference luma (a one-frame delay: motion2 needs the next frame). Its
    stream names the columns, option suffix included."""

    def __init__(self, request: FeatureRequest, bit_depth: int) -> None:
        from fusedsim.families.motion.stream import MotionStream
        from fusedsim.families.motion.twin import MotionOptions

        options = MotionOptions.from_libvmaf({k: v for k, v in request.options if k != "debug"})
        self.stream = MotionStream(bit_depth, options=options, debug=bool(request.option("debug")))

    def push(self, ref: Planes, dist: Planes) -> Columns:
        return self.stream.push(ref[0])

    def flush(self) -> Columns:
        return self.stream.flush()


class _FloatMotion:
    """libvmaf's float motion on the reference luma (a one-frame delay, as ``_Motion``)."""

    def __init__(self, request: FeatureRequest, bit_depth: int) -> None:
        from fusedsim.families.vmaf_float.stream import FloatMotionStream

        self.stream = FloatMotionStream.for_request(request, bit_depth)

    def push(self, ref: Planes, dist: Planes) -> Columns:
        return self.stream.push(ref[0])

    def flush(self) -> Columns:
        return self.stream.flush()


class _SpeedChroma:
    """libvmaf's SpEED chroma, its columns one push later: a push starts its batch (the host statistics run on a
    worker thread while the caller queues the next batch's work) and returns the previous batch's columns."""

    def __init__(self, request: FeatureRequest, bit_depth: int) -> None:
        from fusedsim.families.speed_chroma.twin import SpeedOptions, column_names

        self.request, self.bit_depth = request, bit_depth
        self.names = column_names(SpeedOptions.from_libvmaf(dict(request.options)))
        self._started: Callable[[], Columns] | None = None

    def push(self, ref: Planes, dist: Planes) -> Columns:
        from fusedsim.families.vmaf.features import start_speed_chroma_feature

        started = start_speed_chroma_feature(ref, dist, self.bit_depth, **dict(self.request.options))
        previous, self._started = self._started, started
        if previous is None:
            return {name: torch.zeros(0, dtype=torch.float64, device=ref[0].device) for name in self.names}
        return previous()

    def flush(self) -> Columns:
        previous, self._started = self._started, None
        return previous() if previous is not None else {}


def _registry_feature(name: str) -> Callable[..., Columns]:
    """A feature of the metric registry (``vmaf:<name>``): its compute function with the request's options (the
    libvmaf option names, only those that differ from the defaults)."""
    from fusedsim.families.vmaf.features import feature_spec

    spec = feature_spec(name)

    def compute(ref: Planes, dist: Planes, bit_depth: int, request: FeatureRequest) -> Columns:
        return spec.load()(ref, dist, bit_depth, **dict(request.options))

    return compute


class FeatureSession:
    """``push(ref_planes, dist_planes)`` per batch (planes ``(y, u, v)``, each ``(n, H, W)`` on one device) returns
    the columns finished so far; ``flush()`` after the last batch returns the rest. Concatenated in order, every
    column has one value per frame."""

    def __init__(self, requests: Sequence[FeatureRequest], bit_depth: int) -> None:
        self.requests = tuple(merge_requests(requests))
        self.bit_depth = bit_depth
        self._parts: list[Any] = []
        for request in self.requests:
            if request.extractor == "motion":
                self._parts.append(_Motion(request, bit_depth))
            elif request.extractor == "float_motion":
                self._parts.append(_FloatMotion(request, bit_depth))
            elif request.extractor == "speed_chroma":
                self._parts.append(_SpeedChroma(request, bit_depth))
            else:
                self._parts.append(_Stateless(_registry_feature(request.extractor), request, bit_depth))
        self._launch_order = sorted(range(len(self.requests)),
                                    key=lambda i: (self.requests[i].extractor not in _HOST_WORK,
                                                   self.requests[i].extractor not in _LONGEST_ON_GPU))

    def push(self, ref: Planes, dist: Planes) -> Columns:
        # host work started first (see _HOST_WORK), then the longest GPU work launched first, so that the host
        # enqueues the others' many small operations while the device computes (the host would otherwise hold the
        # GPU back); merged in request order. Every plane's samples are checked here at once: one synchronisation
        # where each feature's own checks would take one or two each
        check_sample_ranges([(f"{side}_{'yuv'[k]}", plane) for side, planes in (("ref", ref), ("dist", dist))
                             for k, plane in enumerate(planes)], self.bit_depth)
        with sample_ranges_checked():
            outputs = {i: self._parts[i].push(ref, dist) for i in self._launch_order}
        return self._merge(outputs[i] for i in range(len(self._parts)))

    def flush(self) -> Columns:
        return self._merge(part.flush() for part in self._parts)

    @staticmethod
    def _merge(outputs) -> Columns:
        merged: Columns = {}
        for out in outputs:
            for name, column in out.items():
                if name in merged:
                    raise RuntimeError(f"metric {name!r} is produced by more than one feature")
                merged[name] = column.reshape(-1)
        return merged
