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
from fusedsim.vmaf.features import feature_spec

__all__ = ["score_on_device"]


def score_on_device(ref: VideoReader, dist: VideoReader, features: Sequence[str], *, device: torch.device,
                    frames: int, batch_frames: int, threads: int | None = None,
                    progress: Callable[[int], None] | None = None) -> dict[str, np.ndarray]:
    """Per-frame values (libvmaf name -> float64 array of ``frames`` values) of ``features`` for the first
    ``frames`` frames of two regular-file clips of the same format."""
    specs = [feature_spec(f) for f in features]
    planes = tuple(p for p in PLANES if any(p in spec.planes for spec in specs))
    bit_depth = ref.fmt.bit_depth
    columns: dict[str, list[torch.Tensor]] = {}
    for batch in stream_pair_to_device(ref, dist, planes, device=device, batch_frames=batch_frames, frames=frames,
                                       threads=threads):
        for spec in specs:
            out = spec.load()(batch.ref, batch.dist, bit_depth)
            for name in spec.outputs:
                values = out[name].reshape(-1)
                if values.shape[0] != batch.n:
                    raise RuntimeError(f"feature {spec.short_name!r} returned {values.shape[0]} values of {name} "
                                       f"for {batch.n} frames")
                columns.setdefault(name, []).append(values)
        if progress is not None:
            progress(batch.n)
    # one copy to the host per output, after the last batch (parts of one output share a device)
    return {name: torch.cat([v.detach().to(torch.float64) for v in parts]).cpu().numpy()
            for name, parts in columns.items()}
