"""libvmaf's ``float_motion`` over a clip that arrives in batches: :class:`FloatMotionStream`.

Frame ``i``'s score ``s_i`` compares the blurred frames ``i-1`` and ``i`` (op ``float_motion_sad``); its
``motion2`` needs ``s_{i+1}`` too, so each frame is finished when the next one arrives and the last one at
:meth:`FloatMotionStream.flush` (libvmaf's ``extract`` and ``flush`` in ``float_motion.c``). The stream keeps the
last frame and the unfinished scores, never the clip; values stay on the frames' device.
"""

from __future__ import annotations

import numpy as np
import torch

from fusedsim.families.vmaf.feature_requests import FeatureRequest
from fusedsim.families.vmaf.inputs import check_bit_depth, to_frames
from fusedsim.families.vmaf_float.common_twin import SUPPORTED_BIT_DEPTHS

__all__ = ["FloatMotionStream"]

_MIN_SIZE = 3


class FloatMotionStream:
    """libvmaf's ``float_motion`` columns of a reference clip fed in order, in batches of any size.

    ``push(frames)`` takes the next integer luma frames ``(H, W)`` or ``(B, H, W)`` and returns the columns of the
    frames it finished; ``flush()`` finishes the rest. Joined in order, each column has one value per frame:
    ``motion2``, ``motion3`` and (``debug``, libvmaf's default for this extractor) ``motion``, each with
    ``suffix`` appended. Options as libvmaf's (``for_request`` reads a validated feature request).
    """

    def __init__(self, bit_depth: int = 8, *, force_zero: bool = False, fps_weight: float = 1.0,
                 blend_factor: float = 1.0, blend_offset: float = 40.0, max_val: float = 10000.0,
                 filter_size: int = 5, debug: bool = True, suffix: str = "") -> None:
        self.bit_depth = check_bit_depth(bit_depth, SUPPORTED_BIT_DEPTHS, "float_motion")
        self.force_zero, self.debug, self.suffix = bool(force_zero), bool(debug), str(suffix)
        self.fps_weight, self.max_val = float(fps_weight), float(max_val)
        self.blend_factor, self.blend_offset = float(blend_factor), float(blend_offset)
        self.filter_size = int(filter_size)
        self._prev: torch.Tensor | None = None
        self._scores: torch.Tensor | None = None  # s_k for frames done .. seen-1
        self._seen = 0
        self._done = 0
        self._flushed = False

    @classmethod
    def for_request(cls, req: FeatureRequest, bit_depth: int = 8) -> FloatMotionStream:
        """A stream with the options of a ``float_motion`` feature request."""
        for name in ("motion_add_scale1", "motion_add_uv"):
            if req.option(name):
                raise ValueError(f"feature 'float_motion' option {name!r} is not supported yet")
        return cls(bit_depth, force_zero=req.option("motion_force_zero"), fps_weight=req.option("motion_fps_weight"),
                   blend_factor=req.option("motion_blend_factor"), blend_offset=req.option("motion_blend_offset"),
                   max_val=req.option("motion_max_val"), filter_size=req.option("motion_filter_size"),
                   debug=req.option("debug"), suffix=req.suffix)

    # --------------------------------------------------------------------------------------------- values
    def _blend_clip(self, m: torch.Tensor) -> torch.Tensor:
        f = self.blend_factor
        blended = m * f + (1 - f) * torch.clamp(m, max=self.blend_offset)
        return torch.clamp(blended, max=self.max_val)

    def _columns(self, motion: torch.Tensor, m2: torch.Tensor, m3: torch.Tensor) -> dict[str, torch.Tensor]:
        out = {f"motion2{self.suffix}": m2, f"motion3{self.suffix}": m3}
        if self.debug:
            out[f"motion{self.suffix}"] = motion
        return out

    def _emit(self, end: int) -> dict[str, torch.Tensor]:
        """Finish frames ``[done, end)`` (``end <= seen``; frame ``k < seen - 1`` uses ``s_{k+1}``)."""
        a = self._done
        device = self._scores.device if self._scores is not None else torch.device("cpu")
        if end <= a:
            empty = torch.zeros(0, dtype=torch.float64, device=device)
            return self._columns(empty, empty, empty)
        s = self._scores  # s[k - a] is s_k
        count = end - a
        if self.force_zero:
            zeros = torch.zeros(count, dtype=torch.float64, device=device)
            out = self._columns(zeros, zeros, zeros)
        else:
            cur = s[:count]
            nxt = s[1:count + 1]
            raw = torch.minimum(cur[:nxt.shape[0]], nxt)
            if nxt.shape[0] < count:  # the clip's last frame: its own score
                raw = torch.cat((raw, cur[-1:]))
            raw = raw * self.fps_weight
            m2 = torch.clamp(raw, max=self.max_val)
            m3 = self._blend_clip(raw)
            motion = torch.clamp(cur * self.fps_weight, max=self.max_val)
            if a == 0:  # frame 0: motion2 0; motion3 from s_1 (0 for a one-frame clip)
                m2[0] = 0.0
                m3[0] = self._blend_clip(s[1:2] * self.fps_weight)[0] if self._seen > 1 else 0.0
            out = self._columns(motion, m2, m3)
        self._done = end
        self._scores = s[count:].clone()
        return out

    def columns_from_scores(self, sad: torch.Tensor) -> dict[str, torch.Tensor]:
        """The whole clip's columns from its pair scores ``(n-1,)`` float64 (frames ``i-1, i``)."""
        self._scores = torch.cat((sad.new_zeros(1), sad.to(torch.float64)))
        self._seen = sad.shape[0] + 1
        self._flushed = True
        return self._emit(self._seen)

    # --------------------------------------------------------------------------------------------- input
    def push(self, frames: torch.Tensor | np.ndarray) -> dict[str, torch.Tensor]:
        """Take the next frames ``(H, W)`` or ``(B, H, W)``; return the columns of the frames now finished."""
        from fusedsim.families.vmaf_float.ops import float_motion_sad

        if self._flushed:
            raise RuntimeError("this FloatMotionStream has been flushed; start a new one for another clip")
        t = to_frames(frames, "frames")
        h, w = t.shape[-2:]
        if self._prev is not None and (t.shape[-2:] != self._prev.shape[-2:] or t.device != self._prev.device):
            raise ValueError(f"frames must keep the size and device of the earlier frames "
                             f"{tuple(self._prev.shape[-2:])} on {self._prev.device}; got {tuple(t.shape[-2:])} on "
                             f"{t.device}")
        if h < _MIN_SIZE or w < _MIN_SIZE:
            raise ValueError(f"frames must be at least {_MIN_SIZE}x{_MIN_SIZE} (libvmaf's mirrored 5-tap blur); got "
                             f"{h}x{w}")
        b = t.shape[0]
        scores = torch.zeros(b, dtype=torch.float64, device=t.device)
        if not self.force_zero:
            if self._prev is not None:
                scores[:1] = float_motion_sad(self._prev, t[:1], self.bit_depth, self.filter_size)
            if b > 1:
                scores[1:] = float_motion_sad(t[:-1], t[1:], self.bit_depth, self.filter_size)
        self._scores = scores if self._scores is None else torch.cat((self._scores, scores))
        self._prev = t[-1:].clone()
        self._seen += b
        return self._emit(self._seen - 1)

    def flush(self) -> dict[str, torch.Tensor]:
        """Finish every remaining frame (the clip has ended); later calls return empty columns."""
        self._flushed = True
        return self._emit(self._seen)
