"""Score two clips on a GPU end to end: frames streamed by :mod:`fusedsim.io.frame_stream`, features computed on
the device, per-frame values kept there and copied to the host once at the end.

Only the planes the requested features read (:attr:`MetricSpec.planes`) leave the disk: luma-only features never
read chroma. Values are the features' own (the same registry functions as the batch-by-batch path), so results
are identical to it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

from fusedsim.io.frame_stream import PLANES, stream_pair_to_device
from fusedsim.io.video import VideoReader
from fusedsim.core.registry import prepare_in_background
from fusedsim.families.vmaf.feature_requests import FeatureRequest
from fusedsim.families.vmaf.features import feature_spec
from fusedsim.families.vmaf.pipeline import finish_columns
from fusedsim.families.vmaf.session import FeatureSession

__all__ = ["score_on_device"]


#: Bytes of one clip's planes per pinned host slot when ``batch_frames`` is not given (three slots per clip).
STREAM_BATCH_BYTES = 64 * 2**20
MAX_BATCH_FRAMES = 32


def score_on_device(ref: VideoReader, dist: VideoReader, features: Sequence[FeatureRequest], *,
                    device: torch.device, frames: int, batch_frames: int | None = None,
                    threads: int | None = None, progress: Callable[[int], None] | None = None) -> dict[str, np.ndarray]:
    """Per-frame values (libvmaf name -> float64 array of ``frames`` values) of ``features`` for the first
    ``frames`` frames of two regular-file clips of the same format. ``batch_frames`` defaults to as many frames
    of the planes read as fit in :data:`STREAM_BATCH_BYTES`, at most :data:`MAX_BATCH_FRAMES`."""
    specs = [feature_spec(request.extractor) for request in features]
    # the kernels' imports overlap the CUDA context's start-up, which the first pinned buffer or stream triggers
    prepare_in_background(op for spec in specs for op in spec.implementation().ops)
    planes = tuple(p for p in PLANES if any(p in spec.planes for spec in specs))
    if batch_frames is None:
        fmt = ref.fmt
        per_frame = fmt.luma_bytes if planes == ("y",) else fmt.frame_bytes
        batch_frames = max(1, min(MAX_BATCH_FRAMES, STREAM_BATCH_BYTES // per_frame))
    session = FeatureSession(features, ref.fmt.bit_depth)
    columns: dict[str, list[torch.Tensor]] = {}
    for batch in stream_pair_to_device(ref, dist, planes, device=device, batch_frames=batch_frames, frames=frames,
                                       threads=threads):
        for name, values in session.push(batch.ref, batch.dist).items():
            columns.setdefault(name, []).append(values)
        if progress is not None:
            progress(batch.n)
    for name, values in session.flush().items():
        columns.setdefault(name, []).append(values)
    # one copy to the host per output, after the last batch (parts of one output share a device)
    return finish_columns({name: [torch.cat([v.detach().to(torch.float64) for v in parts]).cpu().numpy()]
                           for name, parts in columns.items()}, frames)
