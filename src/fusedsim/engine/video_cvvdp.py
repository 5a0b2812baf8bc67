"""ColorVideoVDP's temporal model inside :func:`fusedsim.engine.video.score_pair`: the clip pair's frames go through
:class:`~fusedsim.families.cvvdp.video.CVVDPVideoStream` batch by batch (memory bounded in the clip's length), at
the clips' frame rate divided by the frame step (``every``), as pycvvdp's ``predict`` on the compared frames with
``frames_per_second`` set to that rate.

The clip's JOD is one number; the per-frame column holds the JOD of the clip cut after each frame, as pycvvdp would
give for that shorter clip: the temporal filters are causal, so frames 1.. come from the clip's own pooled
differences, and frame 0 is the still-image JOD of the first pair (pycvvdp scores a one-frame clip as an image).
Its last value is the clip's JOD, and a drop shows where the distortion became visible.

With ``heatmap`` (a video path) the per-pixel maps are drawn over the distorted frames as pycvvdp draws them
(:mod:`fusedsim.families.cvvdp.visualize`) and written at the compared frames' rate
(:class:`~fusedsim.io.video_writer.VideoWriter`; the file appears only when the clip has been scored).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = ["CVVDP_MODES", "TemporalCVVDP", "clip_frame_rate"]

#: ``cvvdp`` argument of score_video: ``video`` (the temporal model on the clip) or ``frames`` (each frame pair a
#: still image, through the Scorer like the other image metrics)
CVVDP_MODES = ("video", "frames")


def clip_frame_rate(fps: Fraction | float | None, override: float | None, ref_indices: list[int]) -> float:
    """Frames per second of the compared frames: ``override`` (or the clips' rate) divided by the reference's frame
    step; ValueError when neither rate is known or the compared frames are not evenly spaced."""
    rate = override if override is not None else fps
    if rate is None:
        raise ValueError("cvvdp: the clips' frame rate is unknown (raw YUV has none) and ColorVideoVDP's temporal "
                         "model needs it: give fps (--fps)")
    rate = float(rate)
    if not math.isfinite(rate) or rate <= 0:
        raise ValueError(f"cvvdp: fps must be a positive finite number; got {rate!r}")
    steps = {b - a for a, b in zip(ref_indices, ref_indices[1:])}
    if len(steps) > 1:
        raise ValueError("cvvdp: the compared reference frames are not evenly spaced, so they have no frame rate for "
                         "the temporal model; score each frame as an image (cvvdp='frames', --cvvdp frames)")
    return rate / (steps.pop() if steps else 1)


class TemporalCVVDP:
    """One clip pair's ColorVideoVDP: ``push`` R'G'B' batches (B, 3, H, W) (uint8 codes or float in [0, 1]) of both
    clips in display order, then ``finish`` for the per-frame running JOD and the clip's JOD."""

    def __init__(self, params: Mapping[str, Any] | None, fps: float, heatmap: str | Path | None = None,
                 heatmap_type: str = "supra-threshold") -> None:
        from fusedsim.families.cvvdp.data import cvvdp_display
        from fusedsim.families.cvvdp.video import CVVDPVideoStream

        params = dict(params or {})
        self.display_name = str(params.pop("display", "standard_4k"))
        if params:  # the registry's check_params refuses these first; a direct caller gets the same message
            raise ValueError(f"cvvdp: unknown parameter(s) {', '.join(sorted(params))}; cvvdp takes display")
        self.fps = fps
        self.display = cvvdp_display(self.display_name)
        if self.display.eotf == "linear":
            raise ValueError(f"cvvdp: display {self.display_name!r} takes absolute linear light in cd/m², but decoded "
                             "video is display-encoded R'G'B' in [0, 1]; use a PQ or HLG display for HDR clips")
        self._writer = None
        if heatmap is not None:
            from fusedsim.families.cvvdp.visualize import HEATMAP_TYPES
            from fusedsim.io.video_writer import VideoWriter

            if heatmap_type not in HEATMAP_TYPES:
                raise ValueError(f"heatmap_type must be one of {', '.join(HEATMAP_TYPES)}; got {heatmap_type!r}")
            self._writer = VideoWriter(heatmap, fps)
        self.heatmap_type = heatmap_type
        self.heatmap = Path(heatmap) if heatmap is not None else None
        self._context: deque[torch.Tensor] = deque()  # distorted frames whose maps have not come yet
        self.stream = CVVDPVideoStream(self.display, fps, return_map=self._writer is not None)
        self._first: float | None = None  # the first pair's still-image JOD

    def push(self, ref: torch.Tensor, dist: torch.Tensor) -> None:
        from fusedsim.families.cvvdp.api import cvvdp

        if self.display.eotf != "sRGB" and ref.dtype == torch.uint8:
            raise ValueError(f"cvvdp: display {self.display_name!r} takes {self.display.eotf} code values as floats, "
                             "but the frames were converted to 8-bit codes: convert them to float R'G'B' (rgb='float', "
                             "--rgb float; the default for clips deeper than 8 bits)")
        with torch.no_grad():
            if self._first is None and ref.shape[0]:
                self._first = float(cvvdp(ref[:1], dist[:1], display=self.display_name).reshape(-1)[0])
            maps = self.stream.push(ref, dist)
            if self._writer is not None:
                self._context.extend(dist)
                if maps is not None:
                    self._draw(maps[0])

    def _draw(self, maps: torch.Tensor) -> None:
        """Write the pictures of ``maps`` (B, 1, H, W) over the oldest B distorted frames."""
        from fusedsim.families.cvvdp.visualize import heatmap_picture

        frames = torch.stack([self._context.popleft() for _ in range(maps.shape[0])])
        self._writer.write(heatmap_picture(maps, frames, self.heatmap_type))

    def abort(self) -> None:
        """Drop the heat-map video (the scoring failed)."""
        if self._writer is not None:
            self._writer.close(keep=False)
            self._writer = None

    def finish(self) -> tuple[np.ndarray, float]:
        """(running JOD per compared frame (T,) float64, the clip's JOD); the heat-map video is complete."""
        with torch.no_grad():
            single = self.stream.frames == 1  # a still image: its JOD is _first, only its map is left to draw
            if self._writer is not None:
                if self._context:
                    self._draw(self.stream.finish()[1][0])
                self._writer.close()
                self._writer = None
            if single:
                running = np.array([self._first], dtype=np.float64)
            else:
                running = self.stream.running_jod()[0].double().cpu().numpy()
                running[0] = self._first  # the clip cut after frame 0 is a still image, as pycvvdp scores it
        return running, float(running[-1])

    def describe(self) -> dict[str, Any]:
        out = {"model": "temporal", "fps": self.fps, "display": self.display_name}
        if self.heatmap is not None:
            out["heatmap"] = {"path": str(self.heatmap), "type": self.heatmap_type}
        return out

